//! Template libraries compiled ahead of time, shipped read-only in the image
//! (`HAPTIC_PRECOMPILED_DIR`, `/usr/lib/haptic/cache` there), and copied
//! into the writable compile cache a process starts with.
//!
//! Both are wasmtime's own compile cache (`<dir>/wasmtime/...`), so there is
//! one cache and one lookup: a pod's emptyDir cache starts holding the
//! bundled libraries the image's haptic compiled at build time, and only
//! libraries it has never seen (custom ones) are compiled, and then written
//! beside them. A precompiled entry a different CPU or build cannot use is
//! simply never looked up: its key differs.

use std::io;
use std::path::Path;

/// The cache subdirectory wasmtime owns (see `library::sandbox`).
const WASMTIME_DIR: &str = "wasmtime";

/// Copies every compiled entry of `precompiled` that `cache_dir` lacks;
/// returns how many were copied. Entries already present are left as they
/// are (same key, same content).
pub fn seed(precompiled: &Path, cache_dir: &Path) -> io::Result<usize> {
    let from = precompiled.join(WASMTIME_DIR);
    if !from.is_dir() || same_dir(precompiled, cache_dir) {
        return Ok(0);
    }
    copy_missing(&from, &cache_dir.join(WASMTIME_DIR))
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn copy_missing(from: &Path, to: &Path) -> io::Result<usize> {
    let mut copied = 0;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copied += copy_missing(&entry.path(), &target)?;
        } else if kind.is_file() && !target.exists() {
            std::fs::create_dir_all(to)?;
            // Through a temporary name: wasmtime must never read half a file.
            let partial = to.join(format!(".{}.seeding", entry.file_name().to_string_lossy()));
            std::fs::copy(entry.path(), &partial)?;
            std::fs::rename(&partial, &target)?;
            copied += 1;
        }
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_what_is_missing_and_keeps_what_is_there() {
        let image = tempfile::tempdir().expect("tempdir");
        let pod = tempfile::tempdir().expect("tempdir");
        let modules = image.path().join("wasmtime/modules/compiler-id");
        std::fs::create_dir_all(&modules).expect("mkdir");
        std::fs::write(modules.join("a"), "compiled a").expect("write");
        std::fs::write(modules.join("b"), "compiled b").expect("write");
        let cached = pod.path().join("wasmtime/modules/compiler-id");
        std::fs::create_dir_all(&cached).expect("mkdir");
        std::fs::write(cached.join("b"), "written by this pod").expect("write");

        assert_eq!(seed(image.path(), pod.path()).expect("seed"), 1);
        assert_eq!(
            std::fs::read_to_string(cached.join("a")).expect("a"),
            "compiled a"
        );
        assert_eq!(
            std::fs::read_to_string(cached.join("b")).expect("b"),
            "written by this pod"
        );
        assert_eq!(seed(image.path(), pod.path()).expect("seed again"), 0);
    }

    #[test]
    fn nothing_to_do_without_precompiled_entries_or_into_itself() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            seed(&dir.path().join("absent"), dir.path()).expect("seed"),
            0
        );
        std::fs::create_dir_all(dir.path().join("wasmtime/modules")).expect("mkdir");
        assert_eq!(seed(dir.path(), dir.path()).expect("seed"), 0);
    }
}

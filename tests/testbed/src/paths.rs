//! Where the running test's build puts things.

use std::path::PathBuf;

/// The cargo target directory of the running test (`<target>/<profile>/deps/<test>`),
/// where `make` writes the images and the tests their logs and reports.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.pop();
    dir
}

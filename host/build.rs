//! Builds the template libraries for `wasm32-wasip2` and tells the host where
//! they are: the bundled libraries (listed once, in
//! `template-libraries/bundled.txt`) become the `guests::BUNDLED` table,
//! embedded with `include_bytes!`; test-only components (the misbehaving
//! guest, the example libraries) are exposed as paths for tests.
//!
//! The nested cargo uses its own target directory: the outer cargo holds the
//! lock on the main one for the whole build.

use std::env;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The list of bundled libraries, relative to the workspace.
const BUNDLED_LIST: &str = "template-libraries/bundled.txt";

/// Components built for tests only: (package, const name of its path).
/// Set to 1 by the Makefile's linting cargo: keep clippy-driver as the
/// guests' rustc wrapper.
const LINT_GUESTS: &str = "HAPTIC_LINT_GUESTS";

const TEST_GUESTS: &[(&str, &str)] = &[
    ("haptic-misbehaving", "MISBEHAVING"),
    ("haptic-contract-0-2-0", "CONTRACT_0_2_0"),
    ("haptic-owned-objects", "OWNED_OBJECTS"),
    ("haptic-render-floor", "RENDER_FLOOR"),
    ("maintenance-mode", "EXAMPLE_MAINTENANCE_MODE"),
    ("source-allow-list", "EXAMPLE_SOURCE_ALLOW_LIST"),
    ("basic-auth", "EXAMPLE_BASIC_AUTH"),
];

/// The bundled libraries' directory names, in load order.
fn bundled(workspace: &Path) -> Vec<String> {
    let list = workspace.join(BUNDLED_LIST);
    let text = std::fs::read_to_string(&list)
        .unwrap_or_else(|error| panic!("reading {}: {error}", list.display()));
    let names: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    for name in &names {
        let manifest = workspace
            .join("template-libraries")
            .join(name)
            .join("Cargo.toml");
        assert!(
            manifest.exists(),
            "{BUNDLED_LIST} names `{name}`, but there is no {}",
            manifest.display()
        );
    }
    names
}

fn main() {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir
        .parent()
        .expect("host/ lives in the workspace root")
        .to_path_buf();
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));

    let bundled = bundled(&workspace);
    let packages: Vec<String> = bundled
        .iter()
        .map(|name| format!("haptic-{name}"))
        .chain(TEST_GUESTS.iter().map(|(package, _)| (*package).to_owned()))
        .collect();

    // Rebuild when any guest source, the selectors the SDK uses or the WIT
    // contract changes. The paths are relative (cargo reads them from the
    // package root): cargo keys this build script's run by paths relative to
    // the workspace, so a target dir shared by two checkouts (CI's cache, a
    // fresh clone beside a worktree) reuses the run, and absolute paths would
    // keep watching the first checkout's files while this one's guests go
    // stale.
    for dir in ["wit", "template-libraries", "selectors", "examples"] {
        println!("cargo:rerun-if-changed=../{dir}");
    }
    println!("cargo:rerun-if-env-changed=HAPTIC_GUEST_TARGET_DIR");

    let target_dir = env::var_os("HAPTIC_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| guest_target_dir(&out_dir, &workspace));

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&workspace)
        .args([
            "build",
            "--profile",
            "guest",
            "--target",
            "wasm32-wasip2",
            "--locked",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    for package in &packages {
        command.args(["-p", package]);
    }
    // Flags meant for the host build (coverage, sanitizers, target-cpu) must
    // not leak into the wasm build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PROFILE_RELEASE_DEBUG",
    ] {
        command.env_remove(var);
    }
    // A wrapper around rustc (sccache, a profiler) is the host build's
    // business too, except clippy's driver when `make` lints as it builds
    // (HAPTIC_LINT_GUESTS=1): then the guests' own wasm32 build is their lint,
    // and no second check-mode build of their dependencies is needed.
    println!("cargo:rerun-if-env-changed={LINT_GUESTS}");
    if env::var_os(LINT_GUESTS).is_none_or(|value| value != "1") {
        command.env_remove("RUSTC_WORKSPACE_WRAPPER");
    }
    let status = command
        .status()
        .expect("running cargo to build the template libraries");
    assert!(
        status.success(),
        "building the template libraries for wasm32-wasip2 failed: see cargo's errors above (a \
         compile error, a clippy lint when `make` lints as it builds, or the target missing: \
         `rustup target add wasm32-wasip2`)"
    );

    let artifacts = target_dir.join("wasm32-wasip2").join("guest");
    let artifact = |package: &str| {
        let file = artifacts.join(format!("{}.wasm", package.replace('-', "_")));
        assert!(
            file.exists(),
            "expected {} after building {package}",
            file.display()
        );
        file.display().to_string()
    };
    let mut generated = String::from("// Generated by host/build.rs.\n");
    writeln!(
        generated,
        "/// The libraries bundled into the binary, in load order ({BUNDLED_LIST})."
    )
    .ok();
    writeln!(generated, "pub const BUNDLED: &[Bundled] = &[").ok();
    for name in &bundled {
        let package = format!("haptic-{name}");
        let path = artifact(&package);
        writeln!(
            generated,
            "    Bundled {{ name: {name:?}, origin: {origin:?}, package: {package:?}, \
             path: {path:?}, bytes: include_bytes!({path:?}) }},",
            origin = format!("bundled:{name}"),
        )
        .ok();
    }
    writeln!(generated, "];").ok();
    for (package, name) in TEST_GUESTS {
        let path = artifact(package);
        writeln!(generated, "/// Path of the `{package}` component.").ok();
        writeln!(generated, "pub const {name}_PATH: &str = {path:?};").ok();
    }
    std::fs::write(out_dir.join("guests.rs"), generated).expect("writing guests.rs");
}

/// `target/guests` next to the main target dir (found from OUT_DIR, which is
/// `<target>/<profile>/build/haptic-<hash>/out`).
fn guest_target_dir(out_dir: &Path, workspace: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .nth(4)
        .map(|target| target.join("guests"))
        .unwrap_or_else(|| workspace.join("target").join("guests"))
}

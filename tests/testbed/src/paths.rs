//! Where the running test's build puts things.

use std::path::PathBuf;

/// The cargo target directory of the running test (`<target>/<profile>/deps/<test>`),
/// where `make` writes the images and the tests their logs and reports.
pub fn target_dir() -> PathBuf {
    let mut dir = profile_dir();
    dir.pop();
    dir
}

/// The running test's profile directory (`<target>/<profile>`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// The `haptic` binary for what a test runs on the host (a controller
/// process, `haptic status`): `$HAPTIC_BIN`, else the running test's profile
/// directory (`make e2e-test` builds it first).
pub fn haptic_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("HAPTIC_BIN") {
        return PathBuf::from(path);
    }
    profile_dir().join("haptic")
}

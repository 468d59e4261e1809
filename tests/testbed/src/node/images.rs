//! The images the node runs, built locally by
//! `tests/testbed/scripts/build-node-images.sh` (`make testbed-images`) as
//! OCI archives: nothing is pulled from anywhere, and a pod whose image is
//! not among them fails with ErrImagePull rather than downloading it.

use std::path::PathBuf;

use super::Error;

/// The sandbox image (pause from the kubernetes module, `gcc -static`).
pub const PAUSE_IMAGE: &str = "localhost/testbed-pause:3.10.1";

/// The bed's echo server as an image (tagged: an untagged name means
/// `:latest`, which Kubernetes pulls `Always`).
pub const ECHO_IMAGE: &str = "haptic.test/echo:testbed";

/// The archives the build script writes, each named inside (containerd reads
/// `io.containerd.image.name`).
const ARCHIVES: [&str; 2] = ["pause.oci.tar", "echo.oci.tar"];

/// Where the archives are: `HAPTIC_TESTBED_IMAGES`, else `testbed-images` in
/// the cargo target directory of the running test (`target/<profile>/deps/..`).
pub(crate) fn archives() -> Result<Vec<PathBuf>, Error> {
    let dir = match std::env::var_os("HAPTIC_TESTBED_IMAGES") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let exe = std::env::current_exe().unwrap_or_default();
            let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
            if dir.ends_with("deps") {
                dir.pop();
            }
            dir.pop();
            dir.join("testbed-images")
        }
    };
    let paths: Vec<PathBuf> = ARCHIVES.iter().map(|a| dir.join(a)).collect();
    let missing: Vec<&str> = ARCHIVES
        .iter()
        .zip(&paths)
        .filter(|(_, p)| !p.is_file())
        .map(|(a, _)| *a)
        .collect();
    if missing.is_empty() {
        Ok(paths)
    } else {
        Err(Error::ImagesMissing {
            dir,
            missing: missing.join(", "),
        })
    }
}

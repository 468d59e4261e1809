//! The images the node runs, built locally by
//! `tests/testbed/scripts/build-node-images.sh` (`make testbed-images`) as
//! OCI archives: nothing is pulled from anywhere, and a pod whose image is
//! not among them fails with ErrImagePull rather than downloading it.

use std::path::PathBuf;

use super::Error;
use crate::paths::target_dir;

/// The sandbox image (pause from the kubernetes module, `gcc -static`).
pub const PAUSE_IMAGE: &str = "localhost/testbed-pause:3.10.1";

/// The bed's echo server as an image (tagged: an untagged name means
/// `:latest`, which Kubernetes pulls `Always`).
pub const ECHO_IMAGE: &str = "haptic.test/echo:testbed";

/// The archives the build script writes, each named inside (containerd reads
/// `io.containerd.image.name`).
const ARCHIVES: [&str; 3] = ["pause.oci.tar", "echo.oci.tar", "tools.oci.tar"];

/// A shell (dash) with curl, cat and touch, for pods that run a script.
pub const TOOLS_IMAGE: &str = "haptic.test/tools:testbed";

/// haptic's image as `make image` names it (the chart's default).
pub const HAPTIC_IMAGE: &str = concat!("localhost/haptic:", env!("CARGO_PKG_VERSION"));

/// The archive `make image` wrote (`HAPTIC_IMAGE_ARCHIVE`, else
/// `<target>/image/haptic-<version>.oci.tar`), if there is one.
pub(crate) fn haptic_archive() -> Option<PathBuf> {
    let path = std::env::var_os("HAPTIC_IMAGE_ARCHIVE").map_or_else(
        || {
            target_dir().join("image").join(concat!(
                "haptic-",
                env!("CARGO_PKG_VERSION"),
                ".oci.tar"
            ))
        },
        PathBuf::from,
    );
    path.is_file().then_some(path)
}

/// The Gateway API conformance suite's images (its echo-basic under the
/// names its manifests use, and the stand-in for its CoreDNS pod), written
/// beside the others by `make gateway-conformance-images`.
const GATEWAY_ARCHIVES: [&str; 2] = ["echo-basic.oci.tar", "dns.oci.tar"];

/// The upstream Ingress conformance suite's echoserver, under the name its
/// Deployments use (digest dropped: see build-ingress-conformance.sh),
/// written beside the others by `make ingress-conformance-images`.
const INGRESS_ARCHIVES: [&str; 1] = ["ingress-echoserver.oci.tar"];

/// Where the archives are: `HAPTIC_TESTBED_IMAGES`, else `testbed-images` in
/// the cargo target directory of the running test.
fn archive_dir() -> PathBuf {
    std::env::var_os("HAPTIC_TESTBED_IMAGES")
        .map_or_else(|| target_dir().join("testbed-images"), PathBuf::from)
}

/// The conformance suite's archives, if all of them were built.
pub(crate) fn gateway_archives() -> Option<Vec<PathBuf>> {
    let dir = archive_dir();
    let paths: Vec<PathBuf> = GATEWAY_ARCHIVES.iter().map(|a| dir.join(a)).collect();
    paths.iter().all(|p| p.is_file()).then_some(paths)
}

/// The Ingress conformance suite's archives, if they were built.
pub(crate) fn ingress_archives() -> Option<Vec<PathBuf>> {
    let dir = archive_dir();
    let paths: Vec<PathBuf> = INGRESS_ARCHIVES.iter().map(|a| dir.join(a)).collect();
    paths.iter().all(|p| p.is_file()).then_some(paths)
}

/// The archives every bed needs, in [`archive_dir`].
pub(crate) fn archives() -> Result<Vec<PathBuf>, Error> {
    let dir = archive_dir();
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

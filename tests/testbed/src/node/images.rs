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

/// The external-authentication pair (`make oauth2-images`): oauth2-proxy
/// and the bed's OIDC provider, built by
/// `tests/testbed/scripts/build-oauth2.sh` and packed beside the others.
const OAUTH2_ARCHIVES: [&str; 2] = ["oauth2-proxy.oci.tar", "mock-oidc.oci.tar"];

/// oauth2-proxy (the static binary as entrypoint, with the CA bundle),
/// tagged with the release `tests/testbed/oauth2/go.mod` pins.
pub const OAUTH2_PROXY_IMAGE: &str = "haptic.test/oauth2-proxy:v7.15.6";

/// The bed's OIDC provider (`tests/testbed/oauth2/cmd/mock-oidc`): every
/// authorize request is approved at once as the one user its flags name.
pub const MOCK_OIDC_IMAGE: &str = "haptic.test/mock-oidc:testbed";

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

/// The external-authentication pair's archives, if both were built.
pub(crate) fn oauth2_archives() -> Option<Vec<PathBuf>> {
    let dir = archive_dir();
    let paths: Vec<PathBuf> = OAUTH2_ARCHIVES.iter().map(|a| dir.join(a)).collect();
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

#[cfg(test)]
mod tests {
    /// The tag names the release build-oauth2.sh builds and
    /// build-node-images.sh packs, both read from go.mod.
    #[test]
    fn the_oauth2_proxy_image_is_tagged_with_the_release_go_mod_pins() {
        let go_mod = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("oauth2/go.mod"),
        )
        .expect("tests/testbed/oauth2/go.mod");
        let pinned = go_mod
            .lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix("github.com/oauth2-proxy/oauth2-proxy/v7 "))
            .expect("go.mod requires github.com/oauth2-proxy/oauth2-proxy/v7");
        let tag = super::OAUTH2_PROXY_IMAGE.rsplit_once(':').map(|(_, t)| t);
        assert_eq!(
            tag,
            Some(pinned.split_whitespace().next().unwrap_or_default())
        );
    }
}

//! The node's own containerd (Debian's 1.6 with runc), its root, state and
//! socket under [`NODE_DIR`], so it shares nothing with another containerd on
//! the machine, and the bed's images imported into it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::Error;
use super::host::{self, NODE_DIR, node_path};
use super::images::PAUSE_IMAGE;
use crate::control_plane::process::Component;

/// The namespace the CRI plugin, and so the kubelet, uses.
const NAMESPACE: &str = "k8s.io";

/// containerd's gRPC socket.
pub(crate) fn socket() -> PathBuf {
    node_path("containerd/containerd.sock")
}

/// containerd's configuration. Two facts of this VM shape it (DESIGN.md §5):
/// it withholds CAP_SYS_RESOURCE, so `restrict_oom_score_adj` (else every
/// sandbox fails with "can't get final child's PID from pipe"), and its
/// cgroups are v1, so cgroupfs rather than systemd. runc, not crun: crun
/// refuses the hybrid cgroup layout.
fn config() -> String {
    let dir = NODE_DIR;
    let socket = socket();
    let socket = socket.display();
    format!(
        r#"version = 2
root = "{dir}/containerd/root"
state = "{dir}/containerd/state"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  # The streaming server (exec, port-forward) only on loopback.
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{dir}/cni/net.d"
"#
    )
}

/// Writes the configuration and starts containerd; returns once its socket
/// answers `ctr version`.
pub(crate) async fn start(timeout: Duration) -> Result<Component, Error> {
    let config_path = node_path("containerd/config.toml");
    host::write(&config_path, &config())?;
    let mut component = Component::spawn(
        "containerd",
        Path::new("containerd"),
        &["--config".to_owned(), config_path.display().to_string()],
        node_path("logs/containerd.log"),
    )?;
    let began = Instant::now();
    loop {
        component.ensure_running()?;
        match ctr(&["version"]) {
            Ok(_) => return Ok(component),
            Err(error) if began.elapsed() > timeout => {
                return Err(Error::NotReady {
                    what: "containerd's socket".to_owned(),
                    waited: began.elapsed(),
                    last: error.to_string(),
                });
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Imports an OCI archive into the kubelet's namespace under the name its
/// index carries (`io.containerd.image.name`).
pub(crate) fn import(archive: &Path) -> Result<(), Error> {
    ctr(&["images", "import", &archive.display().to_string()]).map(drop)
}

/// `ctr` against this containerd, in the kubelet's namespace.
fn ctr(args: &[&str]) -> Result<String, Error> {
    let socket = socket().display().to_string();
    let mut all = vec!["--address", &socket, "--namespace", NAMESPACE];
    all.extend_from_slice(args);
    host::run("ctr", &all)
}

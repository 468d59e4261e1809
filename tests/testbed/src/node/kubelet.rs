//! The real kubelet (v1.35.4, built by `build-binaries.sh`), registered as
//! [`NODE_NAME`] on the bed's bridge address, running pods on containerd.

use std::path::Path;

use super::Error;
use super::containerd;
use super::host::{self, node_path};
use super::network::GATEWAY;
use crate::control_plane::process::Component;

/// The node the kubelet registers.
pub const NODE_NAME: &str = "testbed-node";

/// The kubelet's identity: the Node authorizer and NodeRestriction admission
/// let it touch only its own Node and the pods bound to it.
pub(crate) const NODE_USER: &str = "system:node:testbed-node";

/// The KubeletConfiguration. What the VM needs (DESIGN.md §5): cgroup v1
/// allowed (`failCgroupV1: false`, v1.35 is the last release that allows it
/// without opt-in) through cgroupfs. What keeps the kubelet off shared paths:
/// its root, pod logs and volume plugins under the node's directory, its
/// ports on the bridge address or loopback. Its API (logs, exec) takes the
/// apiserver's calls without a client certificate: it listens only on the
/// bed's bridge, which nothing outside the machine reaches. Its node and image filesystems are
/// the node's own tmpfs (`host::mount_node_dir`), so a full disk elsewhere on a CI machine
/// does not evict the test's pods; the thresholds are tiny besides.
fn config() -> String {
    let socket = containerd::socket();
    let pod_logs = node_path("pod-logs");
    let plugins = node_path("volume-plugins");
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
address: {GATEWAY}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {{enabled: true}}
  webhook: {{enabled: false}}
authorization: {{mode: AlwaysAllow}}
containerRuntimeEndpoint: unix://{socket}
podLogsDir: {pod_logs}
volumePluginDir: {plugins}
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
evictionHard: {{memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusUpdateFrequency: 5s
"#,
        socket = socket.display(),
        pod_logs = pod_logs.display(),
        plugins = plugins.display(),
    )
}

/// Writes the configuration and starts the kubelet with `kubeconfig` (the
/// node user's); the caller waits for the Node to turn Ready.
pub(crate) fn start(bin_dir: &Path, kubeconfig: &Path) -> Result<Component, Error> {
    let config_path = node_path("kubelet/config.yaml");
    host::write(&config_path, &config())?;
    let args = vec![
        format!("--config={}", config_path.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--root-dir={}", node_path("kubelet/root").display()),
        format!("--cert-dir={}", node_path("kubelet/pki").display()),
        format!("--hostname-override={NODE_NAME}"),
        format!("--node-ip={GATEWAY}"),
        "--v=1".to_owned(),
    ];
    Ok(Component::spawn(
        "kubelet",
        &bin_dir.join("kubelet"),
        &args,
        node_path("logs/kubelet.log"),
    )?)
}

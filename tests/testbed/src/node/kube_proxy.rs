//! kube-proxy v1.35.4 in iptables mode: ClusterIPs and LoadBalancer addresses
//! of the bed's Services reach their pods, from pods and from the test process.

use std::path::Path;

use super::Error;
use super::host::{self, node_path};
use super::kubelet::NODE_NAME;
use super::network::{GATEWAY, POD_SUBNET};
use crate::control_plane::process::Component;

/// kube-proxy's identity, bound to `system:node-proxier` by RBAC's bootstrap
/// policy.
pub(crate) const PROXY_USER: &str = "system:kube-proxy";

/// The KubeProxyConfiguration. NodePorts only on the bridge address (on
/// loopback they would need `route_localnet`, a host-wide sysctl), conntrack
/// limits left as the host has them (`maxPerCore: 0`), health and metrics on
/// loopback.
fn config(kubeconfig: &Path) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: {pod_net}/{pod_bits}
hostnameOverride: {NODE_NAME}
bindAddress: {GATEWAY}
nodePortAddresses: ["{GATEWAY}/32"]
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: {kubeconfig}
conntrack:
  maxPerCore: 0
iptables:
  syncPeriod: 10s
  minSyncPeriod: 0s
"#,
        pod_net = POD_SUBNET.0,
        pod_bits = POD_SUBNET.1,
        kubeconfig = kubeconfig.display(),
    )
}

/// Writes the configuration and starts kube-proxy with `kubeconfig`.
pub(crate) fn start(bin_dir: &Path, kubeconfig: &Path) -> Result<Component, Error> {
    let config_path = node_path("kube-proxy/config.yaml");
    host::write(&config_path, &config(kubeconfig))?;
    Ok(Component::spawn(
        "kube-proxy",
        &bin_dir.join("kube-proxy"),
        &[
            format!("--config={}", config_path.display()),
            "--v=1".to_owned(),
        ],
        node_path("logs/kube-proxy.log"),
    )?)
}

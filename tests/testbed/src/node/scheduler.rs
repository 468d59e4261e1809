//! kube-scheduler v1.35.4: binds the bed's pods to its one node the way a
//! cluster does (a real kubelet waits for a scheduler).

use std::path::Path;

use super::Error;
use super::host::node_path;
use crate::control_plane::process::Component;
use crate::ports::free_port;

/// The scheduler's identity, bound to `system:kube-scheduler` by RBAC's
/// bootstrap policy.
pub(crate) const SCHEDULER_USER: &str = "system:kube-scheduler";

/// Starts kube-scheduler with `kubeconfig`, serving its health on loopback.
pub(crate) fn start(bin_dir: &Path, kubeconfig: &Path) -> Result<Component, Error> {
    let kubeconfig = kubeconfig.display();
    let args = vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={}", free_port()),
        format!("--cert-dir={}", node_path("kube-scheduler").display()),
        "--leader-elect=false".to_owned(),
        "--profiling=false".to_owned(),
    ];
    Ok(Component::spawn(
        "kube-scheduler",
        &bin_dir.join("kube-scheduler"),
        &args,
        node_path("logs/kube-scheduler.log"),
    )?)
}

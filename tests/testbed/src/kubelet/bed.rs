//! The whole bed for a test: a control plane and a process kubelet, started
//! inside a fresh [`PodNetwork`], plus the waits tests need.
//!
//! ```no_run
//! use haptic_testbed::kubelet::bed::{self, Bed};
//! # fn main() -> anyhow::Result<()> {
//! bed::in_pod_network(async {
//!     let bed = Bed::start(bed::echo_config()).await?;
//!     // ... create objects with bed.client(), talk to pods on their IPs ...
//!     anyhow::Ok(())
//! })?
//! # }
//! ```

use std::future::Future;
use std::path::PathBuf;

pub use crate::cluster::{create, init_tracing, namespace, wait_for};

use super::{ECHO_IMAGE, Kubelet, KubeletConfig, NODE_IP, PodNetwork, Program};
use crate::control_plane::{ControlPlane, ControlPlaneError, ControlPlaneOptions};

/// Errors starting the bed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pod network could not be made.
    #[error(transparent)]
    Network(#[from] super::network::Error),
    /// The control plane did not start.
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    /// The kubelet did not start.
    #[error(transparent)]
    Kubelet(#[from] super::Error),
    /// A wait ran out.
    #[error(transparent)]
    Timeout(#[from] crate::cluster::Timeout),
}

/// The node name the bed's kubelet registers.
pub const NODE_NAME: &str = "testbed-node";

/// Runs `fut` in a fresh pod network (a new network namespace) on a runtime
/// whose threads are all inside it. Needs root.
pub fn in_pod_network<F: Future>(fut: F) -> Result<F::Output, Error> {
    init_tracing();
    Ok(PodNetwork::create()?.block_on(fut)?)
}

/// Where the test bed's own binaries are: next to the running executable
/// (`target/<profile>/`), since integration tests live in `deps/` below it.
/// `HAPTIC_TESTBED_ECHO_SERVER` overrides the echo server's path.
pub fn echo_server_path() -> PathBuf {
    if let Some(p) = std::env::var_os("HAPTIC_TESTBED_ECHO_SERVER") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join("echo-server")
}

/// A kubelet configuration for [`NODE_NAME`] with [`ECHO_IMAGE`] mapped to the
/// echo server.
pub fn echo_config() -> KubeletConfig {
    KubeletConfig::new(NODE_NAME).program(ECHO_IMAGE, Program::new(echo_server_path()))
}

/// A control plane and a kubelet, stopped on drop (kubelet first).
pub struct Bed {
    /// The process kubelet.
    pub kubelet: Kubelet,
    /// The control plane.
    pub control_plane: ControlPlane,
}

impl std::fmt::Debug for Bed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bed")
            .field("kubelet", &self.kubelet)
            .finish_non_exhaustive()
    }
}

impl Bed {
    /// Starts a control plane and a kubelet with `config` (the apiserver address
    /// is filled in). Call inside [`in_pod_network`].
    ///
    /// The apiserver serves on the node address ([`NODE_IP`]), so the
    /// `kubernetes` Service has endpoints and in-pod clients reach it at
    /// `KUBERNETES_SERVICE_HOST`, as on a cluster whose control plane runs on
    /// its first node.
    pub async fn start(config: KubeletConfig) -> Result<Self, Error> {
        let options = ControlPlaneOptions {
            apiserver_address: Some(NODE_IP.into()),
            ..ControlPlaneOptions::default()
        };
        Self::start_with(options, config).await
    }

    /// [`Self::start`] with explicit control-plane options.
    pub async fn start_with(
        options: ControlPlaneOptions,
        config: KubeletConfig,
    ) -> Result<Self, Error> {
        let control_plane = ControlPlane::start_with(options).await?;
        let config = config.api_server_url(control_plane.server_url())?;
        let kubelet = Kubelet::start(control_plane.admin_client(), config).await?;
        Ok(Self {
            kubelet,
            control_plane,
        })
    }

    /// An admin client.
    pub fn client(&self) -> kube::Client {
        self.control_plane.admin_client()
    }
}

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
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

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
    #[error("timed out after {timeout:?} waiting for {what}; last seen: {last}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        timeout: Duration,
        /// The last observation, for the failure message.
        last: String,
    },
}

/// The node name the bed's kubelet registers.
pub const NODE_NAME: &str = "testbed-node";

/// Runs `fut` in a fresh pod network (a new network namespace) on a runtime
/// whose threads are all inside it. Needs root.
pub fn in_pod_network<F: Future>(fut: F) -> Result<F::Output, Error> {
    init_tracing();
    Ok(PodNetwork::create()?.block_on(fut)?)
}

/// Logs to the test output; `RUST_LOG` filters (default: warnings and the
/// test bed's info, without kube-client's errors for the control plane's
/// readiness polls, which fail by design until it serves).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,haptic_testbed=info,kube_client::client::builder=off,kube_client::client::tls=error",
        )
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
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

/// Creates namespace `name` and waits for its `default` ServiceAccount (the
/// ServiceAccount admission plugin rejects pods until it exists).
pub async fn namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    wait_for("the default ServiceAccount", WAIT, || async {
        match accounts.get_opt("default").await {
            Ok(Some(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await?;
    Ok(())
}

/// Creates a namespaced object given as JSON (kind from `K`).
pub async fn create<K>(
    client: &kube::Client,
    ns: &str,
    object: serde_json::Value,
) -> anyhow::Result<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).context("the object does not parse")?;
    let name = object.meta().name.clone().unwrap_or_default();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &object)
        .await
        .with_context(|| format!("creating {} {ns}/{name}", K::kind(&())))
}

/// How long the helpers here wait.
const WAIT: Duration = Duration::from_secs(60);

/// Polls `probe` every 50 ms until it returns `Some`, or fails after `timeout`
/// with the last observation `probe` reported through `last`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match probe().await {
            Ok(v) => return Ok(v),
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_string(),
                timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

//! What every scenario does against the bed's API server, whichever node
//! runs its pods: create namespaces and objects, and wait for a condition
//! with the last observation in the failure.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

/// A wait that ran out.
#[derive(Debug, thiserror::Error)]
#[error("timed out after {timeout:?} waiting for {what}; last seen: {last}")]
pub struct Timeout {
    /// What was awaited.
    pub what: String,
    /// How long.
    pub timeout: Duration,
    /// The last observation, for the failure message.
    pub last: String,
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
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> Result<T, Timeout>
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
            return Err(Timeout {
                what: what.to_string(),
                timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

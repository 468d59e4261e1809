//! Load and rollouts on the real node: clients that count every answer
//! through an address on the bed's network, and a Deployment restarted the
//! way `kubectl rollout restart` does, awaited until its old pods are gone.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::cluster::wait_for;
use crate::http;

/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause between one client's requests.
const PAUSE: Duration = Duration::from_millis(20);

/// Clients sending `GET /` with a Host header to one address or several in
/// turn, each request on its own connection, counting every answer: a 200
/// is ok, anything else (another status, a refused or reset connection, a
/// timeout) failed.
pub struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    clients: Vec<tokio::task::JoinHandle<Vec<String>>>,
    started: Instant,
}

/// What the clients saw.
#[derive(Debug)]
pub struct LoadSeen {
    /// Answers 200.
    pub ok: u64,
    /// Everything else.
    pub failed: u64,
    /// What each failure was.
    pub errors: Vec<String>,
    /// How long the load ran.
    pub elapsed: Duration,
    /// How many clients sent it.
    pub clients: usize,
}

impl LoadSeen {
    /// The fewest successes that show every client sent at least
    /// `per_client_per_second` requests a second throughout: fewer, and the
    /// load stalled or died, and "no request failed" says little.
    pub fn minimum_ok(&self, per_client_per_second: f64) -> u64 {
        (self.elapsed.as_secs_f64() * self.clients as f64 * per_client_per_second) as u64
    }

    /// Fails, naming `what` the load ran through, when a request failed or
    /// fewer than `minimum_ok` succeeded.
    pub fn check(&self, what: &str, minimum_ok: u64) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.failed == 0 && self.errors.is_empty(),
            "{} requests failed during {what} ({} ok): {:#?}",
            self.failed,
            self.ok,
            self.errors
        );
        anyhow::ensure!(
            self.ok >= minimum_ok,
            "only {} requests succeeded during {what} in {:?} (want >= {minimum_ok}): the load stalled",
            self.ok,
            self.elapsed
        );
        Ok(())
    }
}

impl Load {
    /// Starts `clients` clients to `addr` with `Host: host`.
    pub fn start(addr: SocketAddr, host: &str, clients: usize) -> Self {
        Self::across(&[addr], host, clients)
    }

    /// Starts `clients` clients with `Host: host`, each sending to every one
    /// of `addrs` in turn (from a different one each), so that each address
    /// takes its share whatever a load balancer in front would pick.
    pub fn across(addrs: &[SocketAddr], host: &str, clients: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let clients = (0..clients)
            .map(|client| {
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                let (host, addrs) = (host.to_owned(), addrs.to_vec());
                tokio::spawn(async move {
                    let mut errors = Vec::new();
                    let mut turn = client;
                    while !stop.load(Ordering::Relaxed) && !addrs.is_empty() {
                        let addr = addrs[turn % addrs.len()];
                        turn += 1;
                        match http::get(addr, Some(&host), "/", &[], REQUEST_TIMEOUT).await {
                            Ok(r) if r.status == 200 => {
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                            other => {
                                errors
                                    .push(format!("{addr} at {:?}: {other:?}", started.elapsed()));
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        tokio::time::sleep(PAUSE).await;
                    }
                    errors
                })
            })
            .collect();
        Self {
            stop,
            ok,
            failed,
            clients,
            started,
        }
    }

    /// Stops the clients once their requests in flight are answered.
    pub async fn stop(self) -> LoadSeen {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        let clients = self.clients.len();
        for client in self.clients {
            match client.await {
                Ok(seen) => errors.extend(seen),
                Err(error) => errors.push(format!("a load client panicked: {error}")),
            }
        }
        LoadSeen {
            ok: self.ok.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            errors,
            elapsed: self.started.elapsed(),
            clients,
        }
    }
}

/// The names of the pods `selector` picks in `namespace`.
pub async fn pod_names(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<String>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(pods
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect())
}

/// Restarts Deployment `name` as `kubectl rollout restart` does (a new
/// `restartedAt` annotation on its pod template) and waits until the rollout
/// is complete and none of the pods `selector` picked before it is left.
pub async fn restart_and_wait(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    selector: &str,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let old_pods = pod_names(client, namespace, selector).await?;
    let began = Instant::now();
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": format!("{:?}", std::time::SystemTime::now())
    }}}}});
    deployments
        .patch(name, &PatchParams::default(), &Patch::Merge(&restart))
        .await?;
    wait_for(
        &format!("the rollout of {namespace}/{name} to finish (old pods gone)"),
        timeout,
        || async {
            let d = deployments.get(name).await.map_err(|e| e.to_string())?;
            let (spec, status) = (d.spec.unwrap_or_default(), d.status.unwrap_or_default());
            let want = spec.replicas.unwrap_or(1);
            let names = pod_names(client, namespace, selector)
                .await
                .map_err(|e| e.to_string())?;
            let done = status.observed_generation >= d.metadata.generation
                && status.updated_replicas == Some(want)
                && status.available_replicas == Some(want)
                && names.iter().all(|n| !old_pods.contains(n));
            if done {
                Ok(())
            } else {
                Err(format!("{status:?} pods {names:?}"))
            }
        },
    )
    .await?;
    Ok(began.elapsed())
}

//! Load through the HAProxy pods with the gate-order checker watching: what
//! every scenario runs around its rollouts and faults, and the assertions
//! that prove the load ran and nothing came ahead of HAProxy.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

use super::harness::{self, APP_NAMESPACE, Failure, Installation, LoadCounts, gate_status, load};
use super::oracle;

/// The least a load worker sends per second, however loaded the machine: a
/// request to a local HAProxy takes a few milliseconds and the worker pauses
/// 5 ms between two (about 100 a second unloaded, 40 with four other test
/// beds building). Below it the generator stalled or died.
const MIN_REQUESTS_PER_SECOND_PER_WORKER: f64 = 15.0;

/// What the gate-order checker found.
#[derive(Debug, Default)]
struct OrderReport {
    /// Pods whose gate was seen True.
    checked: BTreeSet<String>,
    violations: Vec<String>,
    /// Errors the pod watch recovered from (it backs off and re-lists).
    watch_errors: u64,
}

/// Watches the app's pods; each time one's gate condition is first seen
/// True, asks every live worker of every HAProxy pod, through its master
/// CLI, whether it routes to the pod (see `oracle`). Returns once the
/// watch has listed the pods, so a rollout started afterwards is seen whole.
async fn check_gate_order(
    installation: &Installation,
    report: Arc<std::sync::Mutex<OrderReport>>,
) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
    let proxies = installation.proxies.clone();
    let (listed, is_listed) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut listed = Some(listed);
        let mut seen = BTreeSet::new();
        let stream = watcher(pods, watcher::Config::default().labels("app=web")).default_backoff();
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            let pod = match event {
                Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                Ok(watcher::Event::InitDone) => {
                    if let Some(listed) = listed.take() {
                        let _ = listed.send(());
                    }
                    continue;
                }
                Ok(_) => continue,
                Err(error) => {
                    eprintln!("gate-order checker: pod watch error, re-listing: {error}");
                    if let Ok(mut report) = report.lock() {
                        report.watch_errors += 1;
                    }
                    continue;
                }
            };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if gate_status(&pod) != Some("True") || seen.contains(&name) {
                continue;
            }
            seen.insert(name.clone());
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default();
            let mut violations = Vec::new();
            for proxy in &proxies {
                if let Err(violation) = oracle::routes(proxy, &ip).await {
                    violations.push(format!("gate set on {name} ({ip}) but {violation}"));
                }
            }
            if let Ok(mut report) = report.lock() {
                report.checked.insert(name);
                report.violations.extend(violations);
            }
        }
    });
    tokio::time::timeout(Duration::from_secs(30), is_listed)
        .await
        .expect("the gate-order checker's pod watch lists within 30 s")
        .expect("the gate-order checker runs");
    task
}

/// Load through every HAProxy pod (close-per-request, 2 workers) with the
/// gate-order checker watching, from start to [`Watched::finish`].
pub struct Watched {
    counts: Arc<LoadCounts>,
    stop: Arc<AtomicBool>,
    generators: Vec<tokio::task::JoinHandle<()>>,
    order: tokio::task::JoinHandle<()>,
    report: Arc<std::sync::Mutex<OrderReport>>,
    started: Instant,
}

/// What the load and the checker saw.
#[derive(Debug)]
pub struct Observed {
    pub ok: u64,
    /// The generators' failure counter.
    pub failed: u64,
    pub failures: Vec<Failure>,
    pub checked: BTreeSet<String>,
    pub violations: Vec<String>,
    pub watch_errors: u64,
    /// How long the load ran, and with how many workers.
    pub elapsed: Duration,
    pub workers: usize,
}

impl Observed {
    /// The fewest successful requests that show the load ran throughout.
    pub fn minimum_ok(&self) -> u64 {
        (self.elapsed.as_secs_f64() * self.workers as f64 * MIN_REQUESTS_PER_SECOND_PER_WORKER)
            as u64
    }

    /// No request failed, the load proved itself, no gate came ahead of
    /// HAProxy routing, and the gate was checked on exactly `gated` pods.
    pub fn assert_proven(&self, what: &str, gated: usize) {
        println!(
            "{what}: {} ok ({:.0}/s over {:?}, minimum {}), {} failed; gate checked on {} pods ({} watch errors)",
            self.ok,
            self.ok as f64 / self.elapsed.as_secs_f64().max(0.001),
            self.elapsed,
            self.minimum_ok(),
            self.failed,
            self.checked.len(),
            self.watch_errors,
        );
        assert!(self.violations.is_empty(), "{:#?}", self.violations);
        assert_eq!(self.failed, 0, "failed requests: {:#?}", self.failures);
        assert!(
            self.ok >= self.minimum_ok(),
            "the load generator sent too little: {} ok, expected at least {}",
            self.ok,
            self.minimum_ok()
        );
        assert_eq!(
            self.checked.len(),
            gated,
            "the gate was seen set on {:?}, expected {gated} pods (the first and one per rollout)",
            self.checked
        );
    }
}

impl Watched {
    pub async fn start(installation: &Installation) -> Self {
        Self::start_with(installation, 0, 2).await
    }

    /// `keep_alive` workers on kept-alive connections besides `close`
    /// workers opening one connection per request.
    pub async fn start_with(installation: &Installation, keep_alive: usize, close: usize) -> Self {
        Self::start_through(installation, &installation.proxies, keep_alive, close).await
    }

    /// Load through `targets` only; the checker still asks every HAProxy pod.
    pub async fn start_through(
        installation: &Installation,
        targets: &[harness::Proxy],
        keep_alive: usize,
        close: usize,
    ) -> Self {
        let report = Arc::new(std::sync::Mutex::new(OrderReport::default()));
        let order = check_gate_order(installation, report.clone()).await;
        let counts = Arc::new(LoadCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut generators =
            harness::keep_alive_load(targets, keep_alive, counts.clone(), stop.clone());
        generators.extend(load(targets, close, counts.clone(), stop.clone()));
        Self {
            counts,
            stop,
            generators,
            order,
            report,
            started: Instant::now(),
        }
    }

    /// Stops the load, lets the checker see the last condition, stops it.
    pub async fn finish(self) -> Observed {
        self.stop.store(true, Ordering::Relaxed);
        let elapsed = self.started.elapsed();
        let workers = self.generators.len();
        for generator in self.generators {
            generator.await.expect("a load generator panicked");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.order.abort();
        let report = self.report.lock().expect("report");
        Observed {
            ok: self.counts.ok.load(Ordering::Relaxed),
            failed: self.counts.failed.load(Ordering::Relaxed),
            failures: self.counts.failures(),
            checked: report.checked.clone(),
            violations: report.violations.clone(),
            watch_errors: report.watch_errors,
            elapsed,
            workers,
        }
    }
}

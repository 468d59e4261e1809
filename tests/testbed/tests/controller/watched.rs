//! Load through the HAProxy pods with the gate-order checker watching: what
//! every scenario runs around its rollouts and faults, and the assertions
//! that prove the load ran and nothing came ahead of HAProxy.

use std::collections::BTreeSet;
use std::time::Duration;

use haptic_testbed::load::{Clients, Failure, Load};
use haptic_testbed::node::gate::{GateCheck, GateOrder, Route};

use super::harness::{self, APP_NAMESPACE, GATE, HOST, Installation};

/// The least a load worker sends per second, however loaded the machine: a
/// request to a local HAProxy takes a few milliseconds and the worker pauses
/// 5 ms between two (about 100 a second unloaded, 40 with four other test
/// beds building). Below it the generator stalled or died.
const MIN_REQUESTS_PER_SECOND_PER_WORKER: f64 = 15.0;

/// Load through every HAProxy pod (close-per-request, 2 workers) with the
/// gate-order checker watching, from start to [`Watched::finish`].
pub struct Watched {
    load: Load,
    order: GateOrder,
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
        // Every HAProxy pod's workers asked, through its master CLI, whether
        // they route to a pod when its gate is first seen True; the pods
        // already served when the watch starts are asked about at once.
        let check = GateCheck {
            namespace: APP_NAMESPACE.to_owned(),
            selector: "app=web".to_owned(),
            gate: GATE.to_owned(),
            route: Route::Host(HOST.to_owned()),
            port: 8080,
            listed: true,
        };
        let masters = installation
            .proxies
            .iter()
            .map(|proxy| (proxy.name.clone(), proxy.master_socket()))
            .collect();
        let order = GateOrder::start(&installation.client(), check, masters)
            .await
            .expect("the gate-order checker starts");
        // A request to a pod on the bed's bridge takes a few milliseconds:
        // 5 ms between two keeps each client near 100 a second unloaded.
        let load = Load::with(Clients {
            addrs: targets.iter().map(harness::Proxy::http).collect(),
            host: HOST.to_owned(),
            close,
            keep_alive,
            pause: Duration::from_millis(5),
            timeout: Duration::from_secs(3),
        });
        Self { load, order }
    }

    /// Stops the load, lets the checker see the last condition, stops it.
    pub async fn finish(self) -> Observed {
        let seen = self.load.stop().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let order = self.order.stop().await;
        Observed {
            ok: seen.ok,
            failed: seen.failed(),
            failures: seen.failures,
            checked: order.checked.into_iter().collect(),
            violations: order.violations,
            watch_errors: order.watch_errors,
            elapsed: seen.elapsed,
            workers: seen.clients,
        }
    }
}

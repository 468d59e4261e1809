//! End-to-end tier: the controller on the test bed with two real HAProxy
//! pods, real traffic with no client retries.

mod harness;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use haptic_testbed::kubelet::bed;
use harness::{APP_NAMESPACE, Installation, LoadCounts, gate_status, load};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

/// What the gate-order checker found.
#[derive(Debug, Default)]
struct OrderReport {
    /// Pods whose gate was seen True.
    checked: BTreeSet<String>,
    violations: Vec<String>,
}

/// Watches the app's pods; each time one's gate condition is first seen
/// True, checks at once that every worker of every HAProxy pod runs a
/// bundle routing to it.
fn check_gate_order(
    installation: &Installation,
    report: Arc<std::sync::Mutex<OrderReport>>,
) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
    let proxies = installation.proxies.clone();
    tokio::spawn(async move {
        let mut seen = BTreeSet::new();
        let stream = watcher(pods, watcher::Config::default().labels("app=web")).applied_objects();
        futures::pin_mut!(stream);
        while let Some(Ok(pod)) = stream.next().await {
            let name = pod.metadata.name.clone().unwrap_or_default();
            if gate_status(&pod) != Some("True") || seen.contains(&name) {
                continue;
            }
            seen.insert(name.clone());
            let mut violations = Vec::new();
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_default();
            for proxy in &proxies {
                match proxy.agent().state().await {
                    Ok(state) => {
                        if let Err(violation) = proxy.routes_to(&state, &ip) {
                            violations.push(format!("gate set on {name} ({ip}) but {violation}"));
                        }
                    }
                    Err(error) => violations.push(format!(
                        "gate set on {name}; {} unreachable: {error}",
                        proxy.name
                    )),
                }
            }
            if let Ok(mut report) = report.lock() {
                report.checked.insert(name);
                report.violations.extend(violations);
            }
        }
    })
}

#[test]
fn e2e_gated_single_replica_rollouts_drop_no_request() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let report = Arc::new(std::sync::Mutex::new(OrderReport::default()));
        let order = check_gate_order(&installation, report.clone());

        let counts = Arc::new(LoadCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let generators = load(&installation.proxies, 2, counts.clone(), stop.clone());
        let rounds = 10;
        for round in 1..=rounds {
            let took = installation.rollout_restart(round).await;
            println!("rollout {round}: {took:?}");
        }
        stop.store(true, Ordering::Relaxed);
        for generator in generators {
            let _ = generator.await;
        }
        // Let the watcher see the last condition, then stop it.
        tokio::time::sleep(Duration::from_secs(1)).await;
        order.abort();
        let (checked, violations) = {
            let report = report.lock().expect("report");
            (report.checked.clone(), report.violations.clone())
        };
        let ok = counts.ok.load(Ordering::Relaxed);
        let failed = counts.failed.load(Ordering::Relaxed);
        println!(
            "{rounds} gated rollouts: {ok} requests ok, {failed} failed; gate checked on {} pods",
            checked.len()
        );
        let failures = counts.failures.lock().map(|f| f.clone()).unwrap_or_default();
        assert_eq!(failed, 0, "failed requests: {failures:#?}");
        assert!(ok > 100, "the load generator sent too little: {ok}");
        assert!(violations.is_empty(), "{violations:#?}");
        assert!(
            checked.len() > rounds,
            "the gate was seen set on {} pods, expected the first and one per rollout: {checked:?}",
            checked.len()
        );
        controller.stop().await;
    })
    .expect("pod network");
}

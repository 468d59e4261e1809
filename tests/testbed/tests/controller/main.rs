//! End-to-end tier: the controller on the test bed with two real HAProxy
//! pods, real traffic with no client retries.

mod harness;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use haptic_testbed::kubelet::{bed, http};
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

/// Load through every HAProxy pod (close-per-request, 2 workers) with the
/// gate-order checker watching, from start to [`Watched::finish`].
struct Watched {
    counts: Arc<LoadCounts>,
    stop: Arc<AtomicBool>,
    generators: Vec<tokio::task::JoinHandle<()>>,
    order: tokio::task::JoinHandle<()>,
    report: Arc<std::sync::Mutex<OrderReport>>,
}

/// What the load and the checker saw.
struct Observed {
    ok: u64,
    failures: Vec<String>,
    checked: BTreeSet<String>,
    violations: Vec<String>,
}

impl Watched {
    fn start(installation: &Installation) -> Self {
        let report = Arc::new(std::sync::Mutex::new(OrderReport::default()));
        let order = check_gate_order(installation, report.clone());
        let counts = Arc::new(LoadCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let generators = load(&installation.proxies, 2, counts.clone(), stop.clone());
        Self {
            counts,
            stop,
            generators,
            order,
            report,
        }
    }

    /// Stops the load, lets the checker see the last condition, stops it.
    async fn finish(self) -> Observed {
        self.stop.store(true, Ordering::Relaxed);
        for generator in self.generators {
            let _ = generator.await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.order.abort();
        let (checked, violations) = {
            let report = self.report.lock().expect("report");
            (report.checked.clone(), report.violations.clone())
        };
        Observed {
            ok: self.counts.ok.load(Ordering::Relaxed),
            failures: self
                .counts
                .failures
                .lock()
                .map(|f| f.clone())
                .unwrap_or_default(),
            checked,
            violations,
        }
    }
}

#[test]
fn e2e_gated_single_replica_rollouts_drop_no_request() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let watched = Watched::start(&installation);
        let rounds = 10;
        for round in 1..=rounds {
            let took = installation.rollout_restart(round).await;
            println!("rollout {round}: {took:?}");
        }
        let Observed {
            ok,
            failures,
            checked,
            violations,
        } = watched.finish().await;
        println!(
            "{rounds} gated rollouts: {ok} requests ok, {} failed; gate checked on {} pods",
            failures.len(),
            checked.len()
        );
        assert!(failures.is_empty(), "failed requests: {failures:#?}");
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

/// Without the gate a single-replica rollout may lose requests in the gap
/// between the new pod's Ready and HAProxy routing to it; the contract is
/// that they are only fast 503s (HAProxy with no usable server), within one
/// short window per restart. The windows are reported.
#[test]
fn e2e_ungated_rollouts_fail_only_fast_503s_in_one_short_window() {
    bed::in_pod_network(async {
        let installation = Installation::start(false, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let counts = Arc::new(LoadCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let generators = load(&installation.proxies, 2, counts.clone(), stop.clone());
        let rounds = 5;
        let mut windows = Vec::new();
        for round in 1..=rounds {
            let before = counts.failures.lock().map(|f| f.len()).unwrap_or(0);
            installation.rollout_restart(round).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            let failures = counts
                .failures
                .lock()
                .map(|f| f[before..].to_vec())
                .unwrap_or_default();
            windows.push(failures);
        }
        stop.store(true, Ordering::Relaxed);
        for generator in generators {
            let _ = generator.await;
        }
        let ok = counts.ok.load(Ordering::Relaxed);
        let failed = counts.failed.load(Ordering::Relaxed);
        println!("{rounds} ungated rollouts: {ok} ok, {failed} failed");
        for (round, failures) in windows.iter().enumerate() {
            println!("  rollout {}: {} failed", round + 1, failures.len());
        }
        let all = counts
            .failures
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default();
        for failure in &all {
            // "<addr> after <elapsed>: <status> <body>"
            assert!(
                failure.contains(": 503 "),
                "an ungated rollout may only fail with HAProxy's 503: {failure}"
            );
        }
        assert!(ok > 100, "the load generator sent too little: {ok}");
        controller.stop().await;
    })
    .expect("pod network");
}

/// With the controller down, a rollout of a gated workload stalls: the new
/// pod stays NotReady, the old one keeps serving, no request fails. Once
/// the controller is back, the rollout completes.
#[test]
fn e2e_a_controller_outage_stalls_gated_rollouts_and_drops_nothing() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        installation.rollout_restart(1).await;
        let counts = Arc::new(LoadCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let generators = load(&installation.proxies, 2, counts.clone(), stop.clone());

        controller.stop().await;
        let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(installation.client(), APP_NAMESPACE);
        deployments
            .patch(
                "web",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({"spec": {"template": {"metadata": {
                    "annotations": {"kubectl.kubernetes.io/restartedAt": "during-outage"}}}}})),
            )
            .await
            .expect("restart");
        // The new pod's containers become ready; the gate does not.
        let stalled = bed::wait_for(
            "the new pod's containers to be ready",
            Duration::from_secs(60),
            || async {
                let list = pods
                    .list(&kube::api::ListParams::default().labels("app=web"))
                    .await
                    .map_err(|e| e.to_string())?;
                let waiting: Vec<Pod> = list
                    .items
                    .into_iter()
                    .filter(|pod| {
                        condition(pod, "ContainersReady") == Some("True")
                            && condition(pod, "Ready") != Some("True")
                    })
                    .collect();
                waiting
                    .into_iter()
                    .next()
                    .ok_or_else(|| "none yet".to_owned())
            },
        )
        .await
        .expect("a stalled pod");
        let stalled_name = stalled.metadata.name.clone().unwrap_or_default();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let again = pods.get(&stalled_name).await.expect("stalled pod");
        assert_ne!(
            condition(&again, "Ready"),
            Some("True"),
            "a gated pod became Ready without a controller"
        );
        assert_eq!(gate_status(&again), None);
        let list = pods
            .list(&kube::api::ListParams::default().labels("app=web"))
            .await
            .expect("pods");
        assert_eq!(
            list.items.len(),
            2,
            "the old pod must stay while the new one is not Ready"
        );

        let controller = installation.start_controller(installation.client()).await;
        bed::wait_for(
            "the rollout to complete after the controller is back",
            Duration::from_secs(60),
            || async {
                let list = pods
                    .list(&kube::api::ListParams::default().labels("app=web"))
                    .await
                    .map_err(|e| e.to_string())?;
                let names: Vec<String> = list
                    .items
                    .iter()
                    .filter_map(|p| p.metadata.name.clone())
                    .collect();
                if names == [stalled_name.clone()]
                    && condition(&list.items[0], "Ready") == Some("True")
                {
                    Ok(())
                } else {
                    Err(format!("{names:?}"))
                }
            },
        )
        .await
        .expect("rollout completes");
        stop.store(true, Ordering::Relaxed);
        for generator in generators {
            let _ = generator.await;
        }
        let failures = counts
            .failures
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default();
        let ok = counts.ok.load(Ordering::Relaxed);
        println!(
            "controller outage: {ok} requests ok, {} failed",
            failures.len()
        );
        assert!(failures.is_empty(), "{failures:#?}");
        controller.stop().await;
    })
    .expect("pod network");
}

fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.as_str())
}

/// Two replicas on a Lease: the leader crashes mid-way through a series of
/// gated rollouts; the follower takes over within the Lease's term, no gate
/// is set before the whole fleet routes to its pod, and nothing fails.
#[test]
fn e2e_leader_failover_keeps_gated_rollouts_going() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let first = installation.start_replica("replica-a").await;
        installation.wait_routed().await;
        let second = installation.start_replica("replica-b").await;
        let watched = Watched::start(&installation);
        installation.rollout_restart(1).await;
        assert_eq!(
            second.state.metrics.leader.get(),
            0,
            "replica-b must follow while replica-a leads"
        );

        first.crash().await;
        let crashed = std::time::Instant::now();
        installation.rollout_restart(2).await;
        println!(
            "rollout after the leader crashed completed {:?} after the crash (Lease 3 s)",
            crashed.elapsed()
        );
        assert_eq!(second.state.metrics.leader.get(), 1, "replica-b leads");
        installation.rollout_restart(3).await;

        let Observed {
            ok,
            failures,
            checked,
            violations,
        } = watched.finish().await;
        println!(
            "leader failover: {ok} ok, {} failed, gate checked on {} pods",
            failures.len(),
            checked.len()
        );
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(violations.is_empty(), "{violations:#?}");
        assert!(checked.len() >= 3, "{checked:?}");
        second.stop().await;
    })
    .expect("pod network");
}

/// An Ingress annotation that makes HAProxy refuse the render (a source
/// range it cannot parse, passed through by the example allow-list
/// library): nothing is deployed, the fleet stays on the last good
/// configuration and keeps serving, the refusal is an Event and a metric;
/// fixing the annotation converges.
#[test]
fn e2e_a_render_haproxy_refuses_is_never_deployed_and_a_fix_converges() {
    bed::in_pod_network(async {
        let mut installation = Installation::start(false, 2).await;
        installation
            .libraries
            .push(haptic::guests::EXAMPLE_SOURCE_ALLOW_LIST_PATH.into());
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let mut before = Vec::new();
        for proxy in &installation.proxies {
            before.push(proxy.agent().state().await.expect("state").converged);
        }
        let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> =
            Api::namespaced(installation.client(), APP_NAMESPACE);
        let annotate = |ranges: &'static str| {
            let ingresses = ingresses.clone();
            async move {
                ingresses
                    .patch(
                        "web",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                            "allow-list.haproxy-haptic.org/source-ranges": ranges}}})),
                    )
                    .await
                    .expect("annotate");
            }
        };
        annotate("10.0.0.300/8").await;
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(installation.client(), "haptic");
        let event = bed::wait_for(
            "an Event about the refused render",
            Duration::from_secs(30),
            || async {
                let list = events
                    .list(&Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                list.items
                    .into_iter()
                    .find(|e| e.reason.as_deref() == Some("ConfigRefused"))
                    .ok_or_else(|| "none yet".to_owned())
            },
        )
        .await
        .expect("Event");
        let note = event.note.clone().unwrap_or_default();
        assert!(
            note.contains("source-allow-list"),
            "the Event names the library: {note}"
        );
        let metrics = controller.state.metrics.encode();
        assert!(
            metrics.lines().any(
                |l| l.starts_with("haptic_renders_total{result=\"refused\"}") && !l.ends_with(" 0")
            ),
            "{metrics}"
        );
        // Nothing moved, and the old configuration serves.
        for (proxy, before) in installation.proxies.iter().zip(&before) {
            let now = proxy.agent().state().await.expect("state").converged;
            assert_eq!(
                &now, before,
                "{} must stay on the last good configuration",
                proxy.name
            );
        }
        installation.wait_routed().await;

        // A valid range converges: outside it, 403 through every HAProxy pod.
        annotate("192.0.2.1").await;
        for proxy in &installation.proxies {
            let addr = proxy.http();
            bed::wait_for(
                &format!("{} to deny", proxy.name),
                Duration::from_secs(30),
                || async move {
                    let response =
                        http::get(addr, Some(harness::HOST), "/", &[], Duration::from_secs(2))
                            .await
                            .map_err(|e| e.to_string())?;
                    if response.status == 403 {
                        Ok(())
                    } else {
                        Err(response.status.to_string())
                    }
                },
            )
            .await
            .expect("the fix is deployed");
        }
        annotate("0.0.0.0/0").await;
        installation.wait_routed().await;
        controller.stop().await;
    })
    .expect("pod network");
}

/// An agent killed and restarted by the kubelet, and a third HAProxy pod
/// added: the fleet reconverges, the new pod is given the current
/// configuration, and the next gate waits for all three.
#[test]
fn e2e_agent_restart_and_a_new_haproxy_pod_reconverge_before_gates() {
    bed::in_pod_network(async {
        let mut installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;

        let victim = installation.proxies[0].clone();
        let killed = std::process::Command::new("pkill")
            .args([
                "-KILL",
                "-f",
                &format!("agent .*--listen {}:8450", victim.ip),
            ])
            .status()
            .expect("pkill");
        assert!(
            killed.success(),
            "the agent process of {} was found and killed",
            victim.name
        );
        bed::wait_for(
            "the killed agent to answer again",
            Duration::from_secs(60),
            || async { victim.agent().state().await.map_err(|e| e.to_string()) },
        )
        .await
        .expect("agent back");

        let added = installation.add_proxy(2).await;
        installation.wait_routed().await;
        let state = added.agent().state().await.expect("state");
        assert!(
            state.converged.is_some(),
            "the new pod runs a configuration: {state:?}"
        );

        let watched = Watched::start(&installation);
        for round in 1..=2 {
            installation.rollout_restart(round).await;
        }
        let Observed {
            ok,
            failures,
            checked,
            violations,
        } = watched.finish().await;
        println!(
            "3 HAProxy pods after an agent restart: {ok} ok, {} failed, gate checked on {} pods",
            failures.len(),
            checked.len()
        );
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(violations.is_empty(), "{violations:#?}");
        assert!(checked.len() >= 2, "{checked:?}");
        controller.stop().await;
    })
    .expect("pod network");
}

/// Gated rollouts under churn: keep-alive clients, and another Ingress
/// changing every 300 ms, so reloads land inside every rollout window.
#[test]
fn e2e_gated_rollouts_under_churn_with_keep_alive_clients_drop_no_request() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let client = installation.client();
        bed::create::<k8s_openapi::api::networking::v1::Ingress>(
            &client,
            APP_NAMESPACE,
            harness::ingress("churn", "churn.example.com", "web"),
        )
        .await
        .expect("churn Ingress");

        let counts = Arc::new(LoadCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let mut generators = harness::keep_alive_load(&installation.proxies, 4, counts.clone(), stop.clone());
        generators.extend(load(&installation.proxies, 1, counts.clone(), stop.clone()));
        let churn = {
            let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> =
                Api::namespaced(client.clone(), APP_NAMESPACE);
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut changes = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    changes += 1;
                    let patch = serde_json::json!({"spec": {"rules": [{"host": format!("churn-{}.example.com", changes % 7),
                        "http": {"paths": [{"path": "/", "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}]}});
                    let _ = ingresses
                        .patch("churn", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch))
                        .await;
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                changes
            })
        };
        let rounds = 5;
        for round in 1..=rounds {
            installation.rollout_restart(round).await;
        }
        stop.store(true, Ordering::Relaxed);
        for generator in generators {
            let _ = generator.await;
        }
        let changes = churn.await.unwrap_or(0);
        let reloads: u64 = {
            let mut total = 0;
            for proxy in &installation.proxies {
                total += proxy.agent().state().await.map(|s| s.reloads).unwrap_or(0);
            }
            total
        };
        let failures = counts.failures.lock().map(|f| f.clone()).unwrap_or_default();
        println!(
            "{rounds} gated rollouts under churn ({changes} Ingress changes, {reloads} reloads on the two pods): {} ok, {} failed",
            counts.ok.load(Ordering::Relaxed),
            failures.len()
        );
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(changes > 5, "the churn made too few changes: {changes}");
        controller.stop().await;
    })
    .expect("pod network");
}

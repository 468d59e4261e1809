//! End-to-end tier: the controller on the test bed with two real HAProxy
//! pods, real traffic with no client retries.

mod harness;
mod oracle;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use haptic_testbed::kubelet::{bed, http};
use harness::{APP_NAMESPACE, Failure, Installation, LoadCounts, gate_status, load};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};

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
struct Watched {
    counts: Arc<LoadCounts>,
    stop: Arc<AtomicBool>,
    generators: Vec<tokio::task::JoinHandle<()>>,
    order: tokio::task::JoinHandle<()>,
    report: Arc<std::sync::Mutex<OrderReport>>,
    started: Instant,
}

/// What the load and the checker saw.
#[derive(Debug)]
struct Observed {
    ok: u64,
    /// The generators' failure counter.
    failed: u64,
    failures: Vec<Failure>,
    checked: BTreeSet<String>,
    violations: Vec<String>,
    watch_errors: u64,
    /// How long the load ran, and with how many workers.
    elapsed: Duration,
    workers: usize,
}

impl Observed {
    /// The fewest successful requests that show the load ran throughout.
    fn minimum_ok(&self) -> u64 {
        (self.elapsed.as_secs_f64() * self.workers as f64 * MIN_REQUESTS_PER_SECOND_PER_WORKER)
            as u64
    }

    /// No request failed, the load proved itself, no gate came ahead of
    /// HAProxy routing, and the gate was checked on exactly `gated` pods.
    fn assert_proven(&self, what: &str, gated: usize) {
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
    async fn start(installation: &Installation) -> Self {
        Self::start_with(installation, 0, 2).await
    }

    /// `keep_alive` workers on kept-alive connections besides `close`
    /// workers opening one connection per request.
    async fn start_with(installation: &Installation, keep_alive: usize, close: usize) -> Self {
        Self::start_through(installation, &installation.proxies, keep_alive, close).await
    }

    /// Load through `targets` only; the checker still asks every HAProxy pod.
    async fn start_through(
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
    async fn finish(self) -> Observed {
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

#[test]
fn e2e_gated_single_replica_rollouts_drop_no_request() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let watched = Watched::start(&installation).await;
        let rounds = 10;
        for round in 1..=rounds {
            let took = installation.rollout_restart(round).await;
            println!("rollout {round}: {took:?}");
        }
        watched
            .finish()
            .await
            .assert_proven(&format!("{rounds} gated rollouts"), rounds + 1);
        controller.stop().await;
    })
    .expect("pod network");
}

/// Without the gate a single-replica rollout may lose requests in the gap
/// between the new pod's Ready and HAProxy routing to it; the contract
/// (ADR-0034) is that they are only fast 503s (HAProxy with no usable
/// server), all of one rollout within one window of at most 3 s.
#[test]
fn e2e_ungated_rollouts_fail_only_fast_503s_in_one_short_window() {
    /// ADR-0034's budget for one rollout's unrouted window.
    const WINDOW_BUDGET: Duration = Duration::from_secs(3);
    /// HAProxy answers 503 at once when a backend has no usable server.
    const FAST: Duration = Duration::from_millis(500);
    bed::in_pod_network(async {
        let installation = Installation::start(false, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let watched = Watched::start(&installation).await;
        let rounds = 5;
        let mut starts = Vec::new();
        for round in 1..=rounds {
            starts.push(Instant::now());
            installation.rollout_restart(round).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let observed = watched.finish().await;
        println!(
            "{rounds} ungated rollouts: {} ok, {} failed",
            observed.ok, observed.failed
        );
        assert_eq!(
            observed.failed as usize,
            observed.failures.len(),
            "every failure is listed"
        );
        for failure in &observed.failures {
            assert!(
                failure.status == Some(503) && failure.took < FAST,
                "an ungated rollout may only fail with HAProxy's fast 503: {failure}"
            );
        }
        for (round, start) in starts.iter().enumerate() {
            let end = starts.get(round + 1).copied();
            let of_round: Vec<Instant> = observed
                .failures
                .iter()
                .map(|f| f.at)
                .filter(|at| at >= start && end.is_none_or(|end| *at < end))
                .collect();
            let window = match (of_round.iter().min(), of_round.iter().max()) {
                (Some(first), Some(last)) => *last - *first,
                _ => Duration::ZERO,
            };
            println!(
                "  rollout {}: {} failed within {window:?}",
                round + 1,
                of_round.len()
            );
            assert!(
                window <= WINDOW_BUDGET,
                "rollout {}: failures spread over {window:?}, beyond the {WINDOW_BUDGET:?} budget",
                round + 1
            );
        }
        assert!(
            observed.ok >= observed.minimum_ok(),
            "the load generator sent too little: {} ok, expected at least {}",
            observed.ok,
            observed.minimum_ok()
        );
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
        let watched = Watched::start(&installation).await;

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
        // The pod gated before the outage, and the stalled one after it.
        watched.finish().await.assert_proven("controller outage", 2);
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
        let watched = Watched::start(&installation).await;
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

        watched.finish().await.assert_proven("leader failover", 4);
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
        let agent = format!("{}/{}/agent", harness::PROXY_NAMESPACE, victim.name);
        let before = installation.restart_counts().await;
        // This bed's agent by the pid its kubelet reports, never by a
        // pattern another test's processes could match.
        let pid = installation
            .container_pid(harness::PROXY_NAMESPACE, &victim.name, "agent")
            .await;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL)
            .expect("the agent's pid is live");
        bed::wait_for(
            "the kubelet to restart the killed agent",
            Duration::from_secs(60),
            || async {
                let now = installation.restart_counts().await;
                if now.get(&agent) > before.get(&agent) {
                    Ok(now)
                } else {
                    Err(format!("{now:?}"))
                }
            },
        )
        .await
        .expect("agent restarted");
        let after = installation.restart_counts().await;
        for (container, count) in &after {
            if container != &agent {
                assert_eq!(
                    Some(count),
                    before.get(container).or(Some(&0)),
                    "only the killed agent restarted: {after:?}"
                );
            }
        }
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

        let watched = Watched::start(&installation).await;
        for round in 1..=2 {
            installation.rollout_restart(round).await;
        }
        watched
            .finish()
            .await
            .assert_proven("3 HAProxy pods after an agent restart", 3);
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

        let reloads_before = total_reloads(&installation).await;
        let runtime_before = runtime_deploys(&controller);
        let watched = Watched::start_with(&installation, 4, 1).await;
        let stop = Arc::new(AtomicBool::new(false));
        let churn = {
            let ingresses: Api<k8s_openapi::api::networking::v1::Ingress> =
                Api::namespaced(client.clone(), APP_NAMESPACE);
            let stop = stop.clone();
            tokio::spawn(async move {
                // Only changes the API server took count.
                let (mut changes, mut refused) = (0u32, Vec::new());
                let mut attempt = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    attempt += 1;
                    let patch = serde_json::json!({"spec": {"rules": [{"host": format!("churn-{}.example.com", attempt % 7),
                        "http": {"paths": [{"path": "/", "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"name": "http"}}}}]}}]}});
                    match ingresses
                        .patch("churn", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch))
                        .await
                    {
                        Ok(_) => changes += 1,
                        Err(error) => refused.push(error.to_string()),
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                (changes, refused)
            })
        };
        let rounds = 5;
        for round in 1..=rounds {
            installation.rollout_restart(round).await;
        }
        stop.store(true, Ordering::Relaxed);
        let (changes, refused) = churn.await.expect("the churn task panicked");
        let observed = watched.finish().await;
        let reloads = total_reloads(&installation).await - reloads_before;
        let runtime = runtime_deploys(&controller) - runtime_before;
        println!(
            "{rounds} gated rollouts under churn: {changes} Ingress changes ({} refused), {reloads} reloads (HAProxy's count) and {runtime} runtime deploys on the two pods",
            refused.len()
        );
        observed.assert_proven("gated rollouts under churn", rounds + 1);
        assert!(refused.is_empty(), "churn patches refused: {refused:#?}");
        assert!(changes > 5, "the churn made too few changes: {changes}");
        assert!(reloads > 0, "the churn never reloaded HAProxy");
        assert!(runtime > 0, "no change was applied at runtime");
        controller.stop().await;
    })
    .expect("pod network");
}

/// Reloads every HAProxy master performed, by its own count.
async fn total_reloads(installation: &Installation) -> u64 {
    let mut total = 0;
    for proxy in &installation.proxies {
        total += oracle::reloads(proxy).await.expect("show proc");
    }
    total
}

/// The controller's deploys applied at runtime (`haptic_deploys_total{mode="runtime"}`).
fn runtime_deploys(controller: &harness::RunningController) -> u64 {
    controller
        .state
        .metrics
        .encode()
        .lines()
        .filter(|line| {
            line.starts_with("haptic_deploys_total") && line.contains("mode=\"runtime\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// One agent stopped (SIGSTOP, by the pid its kubelet reports) while a
/// gated rollout runs: its HAProxy serves on but cannot be told about the
/// new pod, so no gate may be set; the old pod keeps serving and nothing
/// fails. Once the agent resumes (SIGCONT), the rollout completes.
#[test]
fn e2e_a_stalled_agent_holds_the_gate_until_it_resumes() {
    use nix::sys::signal::{Signal, kill};
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let watched = Watched::start(&installation).await;
        let victim = &installation.proxies[0];
        let pid = nix::unistd::Pid::from_raw(
            installation
                .container_pid(harness::PROXY_NAMESPACE, &victim.name, "agent")
                .await,
        );
        kill(pid, Signal::SIGSTOP).expect("the agent's pid is live");
        installation.start_rollout(1).await;
        let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
        let new_pod = bed::wait_for(
            "the new pod's containers to be ready",
            Duration::from_secs(60),
            || async {
                let list = pods
                    .list(&kube::api::ListParams::default().labels("app=web"))
                    .await
                    .map_err(|e| e.to_string())?;
                list.items
                    .into_iter()
                    .find(|pod| {
                        condition(pod, "ContainersReady") == Some("True")
                            && condition(pod, "Ready") != Some("True")
                    })
                    .and_then(|pod| pod.metadata.name)
                    .ok_or_else(|| "none yet".to_owned())
            },
        )
        .await
        .expect("a new pod");
        // Longer than the fleet's 10 s push timeout: a retry, not a wait.
        let stalled_for = Duration::from_secs(12);
        let stalled = Instant::now();
        while stalled.elapsed() < stalled_for {
            let pod = pods.get(&new_pod).await.expect("new pod");
            assert_eq!(
                gate_status(&pod),
                None,
                "the gate was set on {new_pod} while {}'s agent was stopped",
                victim.name
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        kill(pid, Signal::SIGCONT).expect("the agent's pid is live");
        let resumed = Instant::now();
        installation.wait_rollout(1).await;
        println!(
            "rollout completed {:?} after the agent resumed",
            resumed.elapsed()
        );
        watched
            .finish()
            .await
            .assert_proven("a stalled agent during a rollout", 2);
        let restarts = installation.restart_counts().await;
        assert!(
            restarts.values().all(|count| *count == 0),
            "a stopped agent is not a dead one: {restarts:?}"
        );
        controller.stop().await;
    })
    .expect("pod network");
}

/// Nothing happens for 35 s after renders: no container restarts (the
/// process kubelet once killed an HAProxy pod 10 s after a render, when
/// tokio retired the thread that had forked it) and no request fails.
#[test]
fn e2e_a_quiet_half_minute_after_a_render_restarts_no_container() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let watched = Watched::start(&installation).await;
        // Renders on more than one runtime thread.
        for round in 1..=3 {
            installation.rollout_restart(round).await;
        }
        tokio::time::sleep(Duration::from_secs(35)).await;
        installation.wait_routed().await;
        let restarts = installation.restart_counts().await;
        println!("after a quiet 35 s: restart counts {restarts:?}");
        assert!(
            restarts.len() >= 5,
            "both HAProxy pods' two containers and the web pod: {restarts:?}"
        );
        assert!(
            restarts.values().all(|count| *count == 0),
            "a container restarted with nothing asking for it: {restarts:?}"
        );
        watched
            .finish()
            .await
            .assert_proven("a quiet half minute", 4);
        controller.stop().await;
    })
    .expect("pod network");
}

/// A tmpfs mounted over a directory, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Self {
        std::fs::create_dir_all(dir).expect("mount point");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(status.success(), "mounting a tmpfs at {}", dir.display());
        Self(dir.to_path_buf())
    }

    /// Fills the filesystem with one file; returns its path.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).expect("filler");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// One HAProxy pod's agent with its configuration directory full (a small
/// tmpfs, filled) while a gated rollout runs: the apply fails with an error
/// naming the directory and the cause, the old worker serves on, no gate is
/// set; once space is freed the rollout completes and nothing failed.
#[test]
fn e2e_a_full_agent_disk_fails_the_apply_clearly_and_holds_the_gate() {
    bed::in_pod_network(async {
        let mut installation = Installation::start(true, 1).await;
        let tmpfs = Tmpfs::mount(&installation.proxy_dir(1), "4m");
        let full = installation.add_proxy(1).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        let watched = Watched::start(&installation).await;
        let filler = tmpfs.fill();
        installation.start_rollout(1).await;
        let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
        let new_pod = bed::wait_for(
            "the new pod's containers to be ready",
            Duration::from_secs(60),
            || async {
                let list = pods
                    .list(&kube::api::ListParams::default().labels("app=web"))
                    .await
                    .map_err(|e| e.to_string())?;
                list.items
                    .into_iter()
                    .find(|pod| {
                        condition(pod, "ContainersReady") == Some("True")
                            && condition(pod, "Ready") != Some("True")
                    })
                    .and_then(|pod| pod.metadata.name)
                    .ok_or_else(|| "none yet".to_owned())
            },
        )
        .await
        .expect("a new pod");
        // A change that needs the files (a reload) cannot go in, so the gate
        // waits. One that the runtime API carries is taken by HAProxy before
        // the agent writes the files; then HAProxy does route to the pod and
        // the gate may follow: the order checker (HAProxy's word) is what
        // holds here. Seen once in three runs under load: whether the new
        // pod's first render needs a reload is a race with its readiness.
        let held = Instant::now();
        let mut gated_while_full = false;
        while held.elapsed() < Duration::from_secs(8) {
            let pod = pods.get(&new_pod).await.expect("new pod");
            gated_while_full |= gate_status(&pod).is_some();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if gated_while_full {
            println!(
                "{new_pod}'s gate was set while {}'s disk was full: the change went in at runtime",
                full.name
            );
        }
        let log = agent_log(&installation, &full.name).await;
        let refusal = log
            .lines()
            .find(|line| line.contains("apply failed"))
            .unwrap_or_else(|| panic!("the agent logs the failed apply: {log}"));
        println!("the full disk's apply error: {refusal}");
        assert!(
            refusal.contains("No space left on device")
                && refusal.contains("writing the configuration directory"),
            "the error names the directory and the cause: {refusal}"
        );
        std::fs::remove_file(&filler).expect("free the disk");
        let freed = Instant::now();
        installation.wait_rollout(1).await;
        println!(
            "rollout completed {:?} after the disk was freed",
            freed.elapsed()
        );
        watched
            .finish()
            .await
            .assert_proven("a full agent disk during a rollout", 2);
        controller.stop().await;
        drop(installation);
        drop(tmpfs);
    })
    .expect("pod network");
}

/// Everything the agent container of HAProxy pod `name` logged so far.
async fn agent_log(installation: &Installation, name: &str) -> String {
    let pod = Api::<Pod>::namespaced(installation.client(), harness::PROXY_NAMESPACE)
        .get(name)
        .await
        .expect("pod");
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let mut log = String::new();
    for restart in 0..10 {
        let path = installation.bed.kubelet.log_path(&uid, "agent", restart);
        match std::fs::read_to_string(&path) {
            Ok(text) => log.push_str(&text),
            Err(_) => break,
        }
    }
    log
}

/// kube-apiserver killed and restarted while a gated rollout runs: every
/// watch (the controller's, the kubelet's, the checker's) breaks and
/// re-lists; nothing is lost, the rollout completes, the next one too, no
/// gate comes ahead of HAProxy and no request fails.
#[test]
fn e2e_an_apiserver_restart_mid_rollout_loses_nothing() {
    bed::in_pod_network(async {
        let mut installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        // The first pod's gate written before the outage: a status write
        // retried after it lands on a pod the rollout is already removing.
        wait_gates_set(&installation).await;
        let watched = Watched::start(&installation).await;
        installation.start_rollout(1).await;
        let gone = installation
            .bed
            .control_plane
            .restart_apiserver(Duration::from_secs(120))
            .await
            .expect("kube-apiserver comes back");
        println!("kube-apiserver restarted mid-rollout: unavailable for {gone:?}");
        installation.wait_rollout(1).await;
        installation.rollout_restart(2).await;
        watched
            .finish()
            .await
            .assert_proven("an apiserver restart mid-rollout", 3);
        controller.stop().await;
    })
    .expect("pod network");
}

/// Waits until every web pod's gate condition is True.
async fn wait_gates_set(installation: &Installation) {
    let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
    bed::wait_for("every web pod's gate", Duration::from_secs(60), || async {
        let list = pods
            .list(&kube::api::ListParams::default().labels("app=web"))
            .await
            .map_err(|e| e.to_string())?;
        if !list.items.is_empty() && list.items.iter().all(|p| gate_status(p) == Some("True")) {
            Ok(())
        } else {
            Err("not yet".to_owned())
        }
    })
    .await
    .expect("gates set");
}

/// HAProxy's master (the haproxy container's main process, by the pid its
/// kubelet reports) SIGKILLed as soon as a change that reloads it has
/// started a reload, while a gated rollout runs: the kubelet restarts it,
/// it comes back on the configuration on disk, and no gate is set before it
/// routes to the new pod. The load goes through the other HAProxy pod, which
/// must drop nothing; the killed one cannot serve while it is down (a real
/// Service takes it out once its agent's readiness probe fails).
#[test]
fn e2e_haproxy_master_killed_in_a_reload_holds_the_gate_until_it_is_back() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        wait_gates_set(&installation).await;
        let (victim, survivor) = (&installation.proxies[0], &installation.proxies[1]);
        let watched =
            Watched::start_through(&installation, std::slice::from_ref(survivor), 0, 2).await;
        let haproxy = format!("{}/{}/haproxy", harness::PROXY_NAMESPACE, victim.name);
        let before = installation.restart_counts().await;
        let pid = installation
            .container_pid(harness::PROXY_NAMESPACE, &victim.name, "haproxy")
            .await;
        let reloads = oracle::reloads(victim).await.expect("show proc");
        // A new backend: every HAProxy pod reloads.
        bed::create::<k8s_openapi::api::networking::v1::Ingress>(
            &installation.client(),
            APP_NAMESPACE,
            harness::ingress("reload", "reload.example.com", "web"),
        )
        .await
        .expect("Ingress");
        installation.start_rollout(1).await;
        bed::wait_for(
            "the victim's master to reload",
            Duration::from_secs(30),
            || async {
                match oracle::reloads(victim).await {
                    Ok(now) if now > reloads => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await
        .expect("a reload");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL)
            .expect("the master's pid is live");
        let killed = Instant::now();
        bed::wait_for(
            "the kubelet to restart the killed HAProxy",
            Duration::from_secs(60),
            || async {
                let now = installation.restart_counts().await;
                if now.get(&haproxy) > before.get(&haproxy) {
                    Ok(())
                } else {
                    Err(format!("{now:?}"))
                }
            },
        )
        .await
        .expect("HAProxy restarted");
        installation.wait_rollout(1).await;
        println!(
            "rollout completed {:?} after HAProxy's master was killed",
            killed.elapsed()
        );
        installation.rollout_restart(2).await;
        watched
            .finish()
            .await
            .assert_proven("HAProxy's master killed in a reload", 3);
        controller.stop().await;
    })
    .expect("pod network");
}

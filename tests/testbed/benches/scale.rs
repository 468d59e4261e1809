//! The controller at HAPTIC's TestScale size on the test bed
//! (`make bench-scale`): 20 namespaces x 40 Ingresses, 1,000 Services,
//! 10,000 endpoints in EndpointSlices and 10,000 gated Pods (created
//! directly, never scheduled), two real HAProxy pods, and `haptic
//! controller` as its own process (the binary a cluster runs), so its memory
//! is its own.
//!
//! Prints: seed (controller start -> first configuration on every HAProxy
//! pod), one Ingress change -> a configuration holding it running on every
//! pod (n, p50, p95, max and the changes not deployed in time; n is
//! `HAPTIC_BENCH_ROUNDS`, default 100), the
//! controller's peak and current resident memory, the agents' memory; then
//! the seed again after restarts (`HAPTIC_BENCH_SEEDS` seeds in all,
//! default 5): the controller killed, one Ingress and its Service deleted
//! meanwhile so its first configuration loses a backend and needs a reload
//! as the first seed's did, a new controller started; each with its phases
//! from `/metrics`.
//! Asserts the objects were all created and each change's bundle holds it,
//! so a figure is never of a smaller cluster or of another render.

// Shared with the e2e tests; not every helper is used here.
#[allow(dead_code)]
#[path = "../tests/controller/harness.rs"]
mod harness;
#[path = "../tests/controller/oracle.rs"]
mod oracle;
#[allow(dead_code)]
#[path = "../tests/controller/synthetic.rs"]
mod synthetic;

use std::time::{Duration, Instant};

use haptic::synthetic::{Cluster, ClusterSpec};
use harness::Installation;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use synthetic::{ControllerProcess, change_host, converged_on_new, create_all, memory_kib};

/// Ingress changes measured unless `HAPTIC_BENCH_ROUNDS` says otherwise:
/// enough for a p95.
const CHANGES: usize = 100;

/// Seeds measured unless `HAPTIC_BENCH_SEEDS` says otherwise: the first
/// (a new cluster, HAProxy on its bootstrap configuration) and restarts.
const SEEDS: usize = 5;

/// The seed's phases as the controller exported them, in start order.
const SEED_PHASES: [&str; 5] = ["load", "lists", "render", "validate", "deploy"];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(((sorted.len() as f64) - 1.0) * p).round() as usize]
}

/// Lists every kind the controller watches here as its watches do
/// (resourceVersion 0: from the API server's watch cache; in one page, or in
/// pages of `page` objects one after another as kube's watcher asks for
/// them), all kinds at once, each object parsed, and nothing else: what any
/// controller pays before its first render.
async fn bare_lists(client: &kube::Client, page: Option<u32>) -> Duration {
    use k8s_openapi::api::core::v1::{Pod, Secret};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use k8s_openapi::api::networking::v1::IngressClass;
    use kube::api::{ApiResource, DynamicObject, ListParams};
    let list = |resource: ApiResource, params: ListParams| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        async move {
            let mut params = ListParams {
                limit: page,
                ..params
            };
            let mut items = 0;
            loop {
                let list = api.list(&params).await.expect("a bare list");
                items += list.items.len();
                match list.metadata.continue_.filter(|token| !token.is_empty()) {
                    // The next page as kube's watcher asks for it: the same
                    // parameters and the token.
                    Some(token) => params.continue_token = Some(token),
                    None => return items,
                }
            }
        }
    };
    let any = ListParams::default().match_any();
    let started = Instant::now();
    let counts = futures::join!(
        list(ApiResource::erase::<Pod>(&()), any.clone()),
        list(ApiResource::erase::<Service>(&()), any.clone()),
        list(ApiResource::erase::<EndpointSlice>(&()), any.clone()),
        list(ApiResource::erase::<Ingress>(&()), any.clone()),
        list(ApiResource::erase::<IngressClass>(&()), any.clone()),
        list(
            ApiResource::erase::<Secret>(&()),
            any.clone().fields("type=kubernetes.io/tls")
        ),
    );
    let took = started.elapsed();
    assert!(counts.0 >= 10_000, "the bare list saw {} pods", counts.0);
    took
}

fn main() {
    harness::run(async {
        let installation = Installation::start(true, 2).await;
        let client = installation.client();
        let cluster = Cluster::generate(ClusterSpec::benchmark());
        let started = Instant::now();
        let created = create_all(&client, &cluster).await;
        println!("created {created} objects in {:?}", started.elapsed());
        // create_all makes Namespaces and the IngressClass first and counts the rest.
        let expected = cluster
            .objects()
            .filter(|o| o["kind"] != "Namespace" && o["kind"] != "IngressClass")
            .count();
        assert_eq!(created, expected, "every synthetic object is created");

        // The floor under the seed's `lists` phase, measured on the same
        // API server with the same objects just before the controller starts.
        for page in [None, Some(500), Some(2_000)] {
            let mut floors = Vec::new();
            for _ in 0..5 {
                floors.push(bare_lists(&client, page).await);
            }
            floors.sort();
            let pages = page.map_or("one page".to_owned(), |n| format!("pages of {n}"));
            println!(
                "floor: a bare concurrent list of what the controller watches (resourceVersion 0, {pages}, parsed): min {:?}, median {:?}, max {:?} (n=5)",
                floors[0], floors[2], floors[4]
            );
        }

        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = installation
            .bed
            .control_plane()
            .kubeconfig_path()
            .to_path_buf();
        let started = Instant::now();
        let controller = ControllerProcess::start(dir.path(), &kubeconfig);
        let mut id = converged_on_new(&installation, None, Duration::from_secs(120))
            .await
            .expect("the fleet runs a first configuration");
        let seed = started.elapsed();
        let lines = std::fs::read_to_string(
            haptic::agent::disk::ConfigDir::new(
                installation.proxies[0].dir.clone(),
                installation.proxies[0].dir.join("worker.sock"),
            )
            .bundle_dir(&id)
            .join("haproxy.cfg"),
        )
        .map(|c| c.lines().count())
        .unwrap_or(0);
        println!(
            "seed: controller start -> first configuration on both HAProxy pods: {seed:?} ({lines} config lines)"
        );

        // Let the first status writes (the gated pods' conditions) settle.
        let namespaces: Vec<String> = (0..ClusterSpec::benchmark().namespaces)
            .map(|ns| format!("ns-{ns}"))
            .collect();
        let expected = synthetic::ready_endpoints(&cluster);
        let (gates, took) =
            synthetic::await_gates(&client, &namespaces, expected, Duration::from_secs(300)).await;
        println!(
            "gate conditions True on the API server: {gates} of {expected}, {took:?} after the seed"
        );
        let (peak, now) = controller.memory_mib();
        println!("controller memory after the first status writes: peak {peak} MiB, now {now} MiB");
        let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "ns-0");
        let changes: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
            .ok()
            .and_then(|rounds| rounds.parse().ok())
            .unwrap_or(CHANGES);
        let mut samples = Vec::new();
        let mut timeouts = 0;
        for change in 0..changes {
            let name = format!(
                "app-{}",
                change % ClusterSpec::benchmark().ingresses_per_namespace
            );
            let host = format!("changed-{change}.example.com");
            let started = change_host(&ingresses, &name, &host).await;
            // A new id may be a render from before the change (a status
            // write, an endpoint): wait for the one whose bundle holds it.
            let deadline = started + Duration::from_secs(30);
            let mut deployed = false;
            while let Some(next) = converged_on_new(
                &installation,
                Some(&id),
                deadline.saturating_duration_since(Instant::now()),
            )
            .await
            {
                id = next;
                if bundle_mentions(&installation, &id, &host) {
                    samples.push(started.elapsed());
                    deployed = true;
                    break;
                }
            }
            if !deployed {
                timeouts += 1;
                println!("change {change}: not deployed within 30 s");
            }
        }
        samples.sort();
        println!(
            "one Ingress change -> deployed on both HAProxy pods: n={} p50={:?} p90={:?} p95={:?} max={:?}, {timeouts} not deployed within 30 s",
            samples.len(),
            percentile(&samples, 0.5),
            percentile(&samples, 0.9),
            percentile(&samples, 0.95),
            samples.last().copied().unwrap_or_default()
        );
        let (peak, now) = controller.memory_mib();
        println!(
            "controller memory (gate on, 10,000 pods watched): peak {peak} MiB, now {now} MiB"
        );
        println!(
            "  resident by mapping: {}",
            synthetic::resident_breakdown(controller.pid())
        );
        // This bed's agents, by the pids containerd recorded for them.
        for proxy in &installation.proxies {
            let pid = installation
                .container_pid(harness::PROXY_NAMESPACE, &proxy.name, "agent")
                .await;
            println!(
                "{} agent pid {pid}: peak {} MiB",
                proxy.name,
                memory_kib(pid as u32, "VmHWM:") / 1024
            );
            println!(
                "  resident by mapping: {}",
                synthetic::resident_breakdown(pid as u32)
            );
        }
        match controller.metrics().await {
            Ok(metrics) => {
                for line in synthetic::metric_lines(
                    &metrics,
                    &[
                        "haptic_deploys_total",
                        "haptic_validations_skipped_total",
                        "haptic_renders_total",
                        "haptic_gate_conditions_set_total",
                        "haptic_memory_",
                        "haptic_seed_phase_seconds",
                        "haptic_seed_list_seconds",
                    ],
                ) {
                    println!("  {line}");
                }
            }
            Err(error) => println!("no /metrics: {error}"),
        }
        // Why the agents reloaded, from their logs (the kubelet keeps them).
        let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
        for proxy in &installation.proxies {
            let log = installation
                .container_log(harness::PROXY_NAMESPACE, &proxy.name, "agent")
                .await;
            for line in log.lines() {
                if let Some((_, reason)) = line.split_once("reloading reason=") {
                    let reason: String = reason.chars().take(60).collect();
                    *reasons.entry(reason).or_default() += 1;
                } else if line.contains("applied at runtime") {
                    *reasons.entry("(runtime)".into()).or_default() += 1;
                }
            }
        }
        println!("agent applies by reason: {reasons:#?}");
        drop(controller);

        // The seed again after restarts, for a figure with n > 1. Each
        // restart deletes one Ingress and its Service while no controller
        // runs, so the new controller's first render differs from what
        // HAProxy runs by a backend and its deploy is a reload, as the first
        // seed's was (checked with every HAProxy master's reload count: a
        // restart deployed at runtime is printed and not counted).
        let seeds: usize = std::env::var("HAPTIC_BENCH_SEEDS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(SEEDS);
        let last_namespace = format!("ns-{}", ClusterSpec::benchmark().namespaces - 1);
        let deletable: Api<Ingress> = Api::namespaced(client.clone(), &last_namespace);
        let services: Api<Service> = Api::namespaced(client.clone(), &last_namespace);
        let mut all_seeds = vec![seed];
        for restart in 1..seeds {
            let name = format!("app-{}", restart - 1);
            let host = deletable
                .get(&name)
                .await
                .expect("the Ingress to delete")
                .spec
                .and_then(|spec| spec.rules)
                .and_then(|rules| rules.into_iter().next())
                .and_then(|rule| rule.host)
                .expect("a synthetic Ingress has a host");
            deletable
                .delete(&name, &Default::default())
                .await
                .expect("delete the Ingress");
            // And the one Service no other Ingress left routes to: an Ingress
            // alone is a map entry (a runtime apply), a Service a backend.
            let service = format!("svc-{}", restart - 1);
            services
                .delete(&service, &Default::default())
                .await
                .expect("delete the Service");
            let reloads_before = oracle::reloads_per_proxy(&installation.proxies).await;
            let dir = tempfile::tempdir().expect("tempdir");
            let started = Instant::now();
            let controller = ControllerProcess::start(dir.path(), &kubeconfig);
            let next = converged_on_new(&installation, Some(&id), Duration::from_secs(120))
                .await
                .expect("the fleet runs the restarted controller's first configuration");
            let took = started.elapsed();
            assert!(
                !bundle_mentions(&installation, &next, &host),
                "restart {restart}: the first configuration still routes {host}, deleted before the start"
            );
            id = next;
            let phases = seed_phases(&controller).await;
            let reloaded = oracle::reloads_per_proxy(&installation.proxies)
                .await
                .iter()
                .zip(&reloads_before)
                .all(|(after, before)| after > before);
            // A restart deployed at runtime did not take the seed's path: not
            // counted with the seeds.
            if reloaded {
                all_seeds.push(took);
            }
            println!(
                "seed after restart {restart} (Ingress {last_namespace}/{name} and Service {service} deleted meanwhile): {took:?}, {}; phases: {phases}",
                if reloaded {
                    "deployed by a reload"
                } else {
                    "deployed WITHOUT a reload (not a seed's path)"
                }
            );
        }
        if all_seeds.len() > 1 {
            all_seeds.sort();
            println!(
                "seed, controller start -> first configuration on both HAProxy pods, by a reload: n={} min {:?}, median {:?}, max {:?}",
                all_seeds.len(),
                all_seeds[0],
                percentile(&all_seeds, 0.5),
                all_seeds[all_seeds.len() - 1]
            );
        }
    });
}

/// `haptic_seed_phase_seconds` of `controller`, once its `deploy` phase is
/// recorded (the controller learns the convergence the bench saw a moment
/// later), as `load 0.11 s, lists 1.58 s, ...`.
async fn seed_phases(controller: &ControllerProcess) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = controller.metrics().await.unwrap_or_default();
        let phase = |name: &str| {
            let series = format!("haptic_seed_phase_seconds{{phase=\"{name}\"}} ");
            metrics
                .lines()
                .find_map(|line| line.strip_prefix(series.as_str()))
                .and_then(|value| value.parse::<f64>().ok())
        };
        if phase("deploy").is_some() || Instant::now() >= deadline {
            return SEED_PHASES
                .iter()
                .map(|name| match phase(name) {
                    Some(seconds) => format!("{name} {seconds:.2} s"),
                    None => format!("{name} (not exported)"),
                })
                .collect::<Vec<_>>()
                .join(", ");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether any file of bundle `id` on the first HAProxy pod names `host`.
fn bundle_mentions(installation: &Installation, id: &str, host: &str) -> bool {
    let proxy = &installation.proxies[0];
    let dir = haptic::agent::disk::ConfigDir::new(proxy.dir.clone(), proxy.dir.join("worker.sock"))
        .bundle_dir(id);
    let mut pending = vec![dir];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if std::fs::read_to_string(&path).is_ok_and(|text| text.contains(host)) {
                return true;
            }
        }
    }
    false
}

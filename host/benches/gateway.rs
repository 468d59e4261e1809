//! The Gateway API at the size issue 21 names, served: 1,000 HTTPRoutes over
//! 50 Gateways (`haptic::synthetic::gateway`, the objects the render bench
//! renders) beside 1,000 Services and 10,000 endpoints, through `haptic run
//! --proxies N` (each instance a real HAProxy with its own `haptic agent`).
//! One route's path changes per round; a round ends when every instance
//! runs a configuration holding the new path.
//!
//! Prints the first configuration's time, the change -> on every instance
//! distribution (n, p50, p90, p95, max, and rounds not deployed in 30 s),
//! the controller's memory (peak and now) and CPU per change.
//!
//! `cargo bench -p haptic --features synthetic --bench gateway` (`make
//! bench-gateway`). `HAPTIC_BENCH_ROUNDS` (default 100),
//! `HAPTIC_BENCH_PROXIES` (default 2, as the test bed's two HAProxy pods).
//! The file source takes edits as one change after 50 ms (editors write in
//! steps): every figure includes that pause.

// Shared by the local-run benches; not every helper is used in each.
#[allow(dead_code)]
#[path = "support/local_run.rs"]
mod local_run;

use std::time::{Duration, Instant};

use haptic::synthetic::gateway::{GatewayObjects, GatewaySpec};
use haptic::synthetic::{Cluster, ClusterSpec, write_yaml_stream};
use local_run::{Run, converged_on_new, cpu_ticks, memory_mib, metric, ms, quantile, save};

/// The route whose path changes, in a file of its own.
const CHANGED_ROUTE: usize = 0;
const ROUTE_FILE: &str = "60-changed-route.yaml";

fn main() {
    let env = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let rounds = env("HAPTIC_BENCH_ROUNDS", 100);
    let proxies = env("HAPTIC_BENCH_PROXIES", 2);
    let cluster = Cluster::generate(ClusterSpec {
        ingresses_per_namespace: 0,
        gated: false,
        ..ClusterSpec::benchmark()
    });
    let gateway = GatewayObjects::generate(&cluster, GatewaySpec::benchmark())
        .expect("the synthetic cluster has Services");
    let spec = gateway.spec();
    println!(
        "haptic Gateway API benchmark ({} cores): {} Gateways, {} HTTPRoutes, {} Services, {} endpoints, {proxies} HAProxy instances, {rounds} route changes",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        spec.gateways,
        spec.routes,
        cluster.spec().services(),
        cluster.spec().endpoints(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");

    let route_name = format!("route-{CHANGED_ROUTE}");
    let started = Instant::now();
    let run = Run::start(
        proxies,
        // No Service gives a Gateway an address here: publish the local one.
        Some("templateLibraries:\n  gatewayApi:\n    enabled: true\n    addresses: [127.0.0.1]\n"),
        |dir| {
            cluster.write_yaml(dir).expect("write the cluster");
            let (changed, rest): (Vec<_>, Vec<_>) = gateway
                .objects()
                .into_iter()
                .partition(|o| o["kind"] == "HTTPRoute" && o["metadata"]["name"] == route_name);
            write_yaml_stream(&dir.join("50-gateway-api.yaml"), &rest)
                .expect("write the Gateway API objects");
            write_yaml_stream(&dir.join(ROUTE_FILE), &changed).expect("write the changed route");
        },
    );
    let agents = run.agents();
    let mut id = runtime
        .block_on(converged_on_new(&agents, None, Duration::from_secs(300)))
        .expect("every instance runs a first configuration");
    let last_route = format!("r{}.example.com", spec.routes - 1);
    assert!(
        run.bundle_mentions(&id, &last_route),
        "the first configuration serves every route (no {last_route} in it)"
    );
    println!(
        "first configuration (every route) on all {proxies} instances: {:.0} ms after haptic run started; controller memory peak {} MiB",
        ms(started.elapsed()),
        memory_mib(run.pid(), "VmHWM:"),
    );

    let metrics_before = run.metrics().unwrap_or_default();
    let cpu_before = cpu_ticks(run.pid());
    let mut samples = Vec::with_capacity(rounds);
    let mut timeouts = 0;
    for round in 0..rounds {
        let version = round + 1;
        let route = gateway.route(CHANGED_ROUTE, version);
        let text = format!(
            "---\n{}",
            serde_yaml_ng::to_string(&route).expect("a route as YAML")
        );
        save(&run.cluster().join(ROUTE_FILE), &text);
        let started = Instant::now();
        let deadline = started + Duration::from_secs(30);
        let path = GatewayObjects::path_prefix(version);
        let mut deployed = false;
        // A new id may be of a render before the edit was read: wait for
        // the one holding the new path.
        while let Some(next) = runtime.block_on(converged_on_new(
            &agents,
            Some(&id),
            deadline.saturating_duration_since(Instant::now()),
        )) {
            id = next;
            if run.bundle_mentions(&id, &path) {
                samples.push(started.elapsed());
                deployed = true;
                break;
            }
        }
        if !deployed {
            timeouts += 1;
            println!("change {round}: {path} not on every instance within 30 s");
        }
    }
    let cpu = cpu_ticks(run.pid()).saturating_sub(cpu_before);
    samples.sort();
    // Linux counts CPU time in ticks of 1/100 s (USER_HZ).
    let cpu_ms = cpu as f64 * 10.0 / samples.len().max(1) as f64;
    println!(
        "one HTTPRoute change -> on all {proxies} instances: n={} p50 {:.1} ms, p90 {:.1} ms, p95 {:.1} ms, max {:.1} ms, {timeouts} not deployed within 30 s; controller CPU {cpu_ms:.1} ms per change",
        samples.len(),
        ms(quantile(&samples, 0.5)),
        ms(quantile(&samples, 0.9)),
        ms(quantile(&samples, 0.95)),
        ms(quantile(&samples, 1.0)),
    );
    // Where the changes went, from the controller's own histograms: the
    // mean per render, validation and deploy since the first configuration.
    match run.metrics() {
        Ok(after) => {
            let delta = |name: &str| metric(&after, name) - metric(&metrics_before, name);
            let mean = |stage: &str| {
                let count = delta(&format!("haptic_{stage}_duration_seconds_count"));
                let sum = delta(&format!("haptic_{stage}_duration_seconds_sum"));
                format!(
                    "{stage} {:.1} ms (n={count})",
                    sum * 1000.0 / count.max(1.0)
                )
            };
            let deploys = |mode: &str| delta(&format!("haptic_deploys_total{{mode=\"{mode}\"}}"));
            println!(
                "where the changes went (controller /metrics, means): {}, {}, {}; {} renders skipped `haproxy -c`; pushes: {} runtime, {} reload",
                mean("render"),
                mean("validate"),
                mean("deploy"),
                delta("haptic_validations_skipped_total"),
                deploys("runtime"),
                deploys("reload"),
            );
        }
        Err(error) => println!("no /metrics: {error}"),
    }
    println!(
        "controller memory: peak {} MiB, now {} MiB",
        memory_mib(run.pid(), "VmHWM:"),
        memory_mib(run.pid(), "VmRSS:"),
    );
    drop(run);
    assert_eq!(timeouts, 0, "every route change reached every instance");
}

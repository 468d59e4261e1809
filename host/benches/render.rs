//! The render benchmark: a synthetic cluster of 800 Ingresses, 1,000
//! Services and 10,000 endpoints (every pod gated) through the bundled
//! libraries. Prints figures; asserts nothing about time.
//!
//! Then the Gateway API: 1,000 HTTPRoutes over 50 Gateways, one route change
//! per round.
//!
//! `cargo bench -p haptic --features synthetic --bench render` (or `make bench`). Set
//! `HAPTIC_BENCH_ROUNDS` to change how many single changes are measured.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use haptic::library::types::Kind;
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::render::{ClusterChange, ClusterObject, Renderer, ingest_trims};
use haptic::synthetic::gateway::{GatewayObjects, GatewaySpec};
use haptic::synthetic::{Cluster, ClusterSpec};
use haptic::values::Values;

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    println!(
        "haptic render benchmark ({} cores)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    load_times()?;

    let spec = ClusterSpec {
        gated: true,
        ..ClusterSpec::benchmark()
    };
    let mut cluster = Cluster::generate(spec);
    println!(
        "\ncluster: {} namespaces, {} Ingresses, {} Services, {} endpoints (pods gated)",
        spec.namespaces,
        spec.namespaces * spec.ingresses_per_namespace,
        spec.services(),
        spec.endpoints()
    );
    let runtime = LibraryRuntime::new(RuntimeConfig::default())?;
    let mut values = Values::default();
    values.set_assignment("templateLibraries.kubernetesBackends.podReadinessGate.enabled=true")?;
    // Objects enter the store trimmed, as every source stores them.
    let trims = ingest_trims_of(&runtime, &values)?;

    let objects: Vec<ClusterChange> = cluster
        .objects()
        .filter_map(|value| ClusterObject::ingested(value, &trims))
        .map(ClusterChange::Applied)
        .collect();

    // Full render: a fresh renderer (instantiate, configure, feed everything, merge).
    let mut full = Vec::new();
    let mut per_library: BTreeMap<String, (Vec<Duration>, Vec<Duration>)> = BTreeMap::new();
    let mut renderer = None;
    for round in 0..5 {
        // One renderer alive at a time, so the memory figures mean one.
        drop(renderer.take());
        let mut fresh = bundled_renderer(&runtime, &values)?;
        let changes = objects.clone();
        let started = Instant::now();
        let rendered = fresh.render(changes)?;
        full.push(started.elapsed());
        if round == 0 {
            println!(
                "config: {} lines, {:.1} MiB; {} files; {} status patches",
                rendered.config.lines().count(),
                rendered.config.len() as f64 / (1 << 20) as f64,
                rendered.files.len(),
                rendered
                    .status_patches
                    .values()
                    .map(Vec::len)
                    .sum::<usize>()
            );
            for timing in fresh.timings().libraries.iter() {
                println!(
                    "  first render, {}: {} ({} inside the library)",
                    timing.library,
                    ms(timing.total),
                    ms(timing.guest)
                );
            }
            println!("  merge: {}", ms(fresh.timings().merge));
        }
        for timing in &fresh.timings().libraries {
            if FLOOR_COMPARED.contains(&timing.library.as_str()) {
                let (total, guest) = per_library.entry(timing.library.clone()).or_default();
                total.push(timing.total);
                guest.push(timing.guest);
            }
        }
        renderer = Some(fresh);
    }
    report("full render (fresh instances, all objects)", &mut full);
    for (library, (total, guest)) in &mut per_library {
        report(&format!("  {library}"), total);
        report("    inside the library", guest);
    }
    render_floor(&runtime, &objects)?;
    let Some(mut renderer) = renderer else {
        anyhow::bail!("no renderer");
    };

    // One endpoint's readiness flips (its EndpointSlice and Pod change).
    let mut flips = Vec::new();
    let mut flip_merges = Vec::new();
    for round in 0..rounds {
        let namespace = round % spec.namespaces;
        let service = (round / spec.namespaces) % spec.services_per_namespace;
        let changes = cluster
            .flip_endpoint(namespace, service, round % spec.endpoints_per_service)?
            .into_iter()
            .filter_map(|value| ClusterObject::ingested(&value, &trims))
            .map(ClusterChange::Applied)
            .collect();
        let started = Instant::now();
        renderer.render(changes)?;
        flips.push(started.elapsed());
        flip_merges.push(renderer.timings().merge);
    }
    report("render after one endpoint readiness change", &mut flips);
    report("  of which merge", &mut flip_merges);
    if let Some(slowest) = renderer
        .timings()
        .libraries
        .iter()
        .max_by_key(|timing| timing.total)
    {
        println!(
            "  (last change: slowest library {} {} ({} inside), merge {})",
            slowest.library,
            ms(slowest.total),
            ms(slowest.guest),
            ms(renderer.timings().merge)
        );
    }

    let mut ingresses = Vec::new();
    for _ in 0..rounds.min(50) {
        let change =
            ClusterObject::ingested(&cluster.add_ingress(), &trims).map(ClusterChange::Applied);
        let started = Instant::now();
        renderer.render(change.into_iter().collect())?;
        ingresses.push(started.elapsed());
    }
    report("render after one new Ingress", &mut ingresses);

    let started = Instant::now();
    let rendered = renderer.render(Vec::new())?;
    let files: Vec<(String, String)> = rendered.files.clone().into_iter().collect();
    let merged = started.elapsed();
    patch_memory(&rendered);
    let started = Instant::now();
    haptic::validate::validate(&rendered.config, &files)?;
    println!(
        "\nhaproxy -c of the full config: {} (merge without changes {})",
        ms(started.elapsed()),
        ms(merged)
    );

    drop(renderer);
    gateway_routes(&runtime, &cluster, &values, rounds.max(100))?;

    if let Some((current, peak)) = rss() {
        println!(
            "resident memory of this process: {current} now (one renderer, the cluster twice: store and generator), {peak} at peak"
        );
    }
    Ok(())
}

/// The libraries whose first render the floor is compared with: the two
/// that take in every pod.
const FLOOR_COMPARED: &[&str] = &[
    "status-patches-150-pod-readiness-gate",
    "kubernetes-backends",
];

/// The floor of one library's full render of the cluster's Pods and
/// EndpointSlices under the contract: the test library `render-floor` doing a
/// fixed part of the gate library's work (take them in; parse them; answer a
/// status patch per pod),
/// a fresh instance per round beside `base`, as the full render runs them.
fn render_floor(runtime: &LibraryRuntime, objects: &[ClusterChange]) -> anyhow::Result<()> {
    let is_read = |change: &&ClusterChange| {
        matches!(change, ClusterChange::Applied(object)
            if matches!(object.reference.kind.as_str(), "Pod" | "EndpointSlice"))
    };
    let read: Vec<ClusterChange> = objects.iter().filter(is_read).cloned().collect();
    println!(
        "\nfloor: one library's first render of the {} Pods and EndpointSlices, trimmed as the gate library's (fresh instances)",
        read.len()
    );
    for stage in ["receive", "parse", "patch"] {
        let mut values = Values::default();
        values.set_assignment(&format!("templateLibraries.renderFloor.stage={stage}"))?;
        let (mut total, mut guest) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let mut libraries = runtime.load_bundled()?;
            libraries.retain(|library| library.info().name == "base");
            libraries
                .push(runtime.load_file(std::path::Path::new(haptic::guests::RENDER_FLOOR_PATH))?);
            let defaults: Vec<_> = libraries
                .iter()
                .map(|l| (l.info().name.clone(), l.info().default_values.clone()))
                .collect();
            let mut renderer = Renderer::new(libraries, values.library_tree(&defaults)?);
            renderer.render(read.clone())?;
            let Some(timing) = renderer
                .timings()
                .libraries
                .iter()
                .find(|timing| timing.library == "render-floor")
            else {
                anyhow::bail!("the render timings name no library render-floor");
            };
            total.push(timing.total);
            guest.push(timing.guest);
        }
        report(&format!("  {stage}"), &mut total);
        report("    inside the library", &mut guest);
    }
    Ok(())
}

/// The Gateway API at the size issue 21 names: 1,000 HTTPRoutes over 50
/// Gateways (one GatewayClass), each route to a Service of the synthetic
/// cluster, rendered with the other libraries; then one route's path changes
/// per round.
fn gateway_routes(
    runtime: &LibraryRuntime,
    cluster: &Cluster,
    values: &Values,
    rounds: usize,
) -> anyhow::Result<()> {
    let gateway = GatewayObjects::generate(cluster, GatewaySpec::benchmark())?;
    let spec = gateway.spec();
    let objects = gateway.objects();

    let mut values = values.clone();
    values.set_assignment("templateLibraries.gatewayApi.enabled=true")?;
    let mut renderer = bundled_renderer(runtime, &values)?;
    let trims = ingest_trims_of(runtime, &values)?;
    let changes: Vec<ClusterChange> = cluster
        .objects()
        .cloned()
        .chain(objects)
        .filter_map(|value| ClusterObject::ingested(&value, &trims))
        .map(ClusterChange::Applied)
        .collect();
    let started = Instant::now();
    let rendered = renderer.render(changes)?;
    let full = started.elapsed();
    let frontends = rendered
        .config
        .lines()
        .filter(|l| l.starts_with("frontend gateway."))
        .count();
    println!(
        "
gateway-api: {} Gateways, {} HTTPRoutes (2 matches, a header filter, a cross-namespace backend each): \
         full render {} ({frontends} Gateway frontends, {} config lines)",
        spec.gateways,
        spec.routes,
        ms(full),
        rendered.config.lines().count()
    );
    let files: Vec<(String, String)> = rendered.files.clone().into_iter().collect();
    let started = Instant::now();
    haptic::validate::validate(&rendered.config, &files)?;
    println!("  haproxy -c of that config: {}", ms(started.elapsed()));

    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let changed = gateway.route((round * 37) % spec.routes, round + 1);
        let change = ClusterObject::ingested(&changed, &trims).map(ClusterChange::Applied);
        let started = Instant::now();
        renderer.render(change.into_iter().collect())?;
        samples.push(started.elapsed());
    }
    report("  render after one HTTPRoute change", &mut samples);
    if let Some(timing) = renderer
        .timings()
        .libraries
        .iter()
        .find(|t| t.library == "gateway-api")
    {
        println!(
            "  (last change: gateway-api {} ({} inside), merge {})",
            ms(timing.total),
            ms(timing.guest),
            ms(renderer.timings().merge)
        );
    }
    Ok(())
}

/// What the planned status patches of this cluster hold as `StatusPatch`
/// carries them (`PatchStatus`: compact text and the condition types)
/// against the parsed form it replaced (`serde_json::Map`; issue 17's
/// decision). Each form is built `COPIES` times and the growth of resident
/// memory divided, so page granularity and allocator slack average out;
/// both stay alive until both are measured.
fn patch_memory(rendered: &haptic::render::Rendered) {
    const COPIES: usize = 10;
    let patches: Vec<&haptic::library::types::PatchStatus> = rendered
        .status_patches
        .values()
        .flatten()
        .map(|(_, patch)| &patch.status)
        .collect();
    let resident = || rss_kib().unwrap_or(0);
    let before = resident();
    let parsed: Vec<Vec<serde_json::Map<String, serde_json::Value>>> = (0..COPIES)
        .map(|_| patches.iter().map(|status| status.to_map()).collect())
        .collect();
    let parsed_kib = resident().saturating_sub(before) / COPIES as u64;
    // `parsed` stays alive while the held form is measured: freed, its
    // memory would be reused by the copies below without resident memory
    // growing, and the held form would read 0 KiB.
    let before = resident();
    let held: Vec<Vec<haptic::library::types::PatchStatus>> = (0..COPIES)
        .map(|_| patches.iter().map(|status| (*status).clone()).collect())
        .collect();
    let held_kib = resident().saturating_sub(before) / COPIES as u64;
    let bytes: usize = held[0].iter().map(|status| status.as_str().len()).sum();
    drop((parsed, held));
    println!(
        "\nstatus patches held by one render: {} patches; as held (compact JSON text and condition types) {held_kib} KiB ({bytes} bytes of text), parsed into serde_json::Map {parsed_kib} KiB",
        patches.len()
    );
}

/// VmRSS in KiB.
fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn load_times() -> anyhow::Result<()> {
    let cache = tempfile::tempdir()?;
    println!("\ncomponent load (compile + describe), per library:");
    println!(
        "  {:<40} {:>10} {:>12} {:>12}",
        "library", "cold", "disk cache", "in-process"
    );
    let config = RuntimeConfig {
        cache_dir: Some(cache.path().to_owned()),
        ..RuntimeConfig::default()
    };
    let cold_runtime = LibraryRuntime::new(config.clone())?;
    let warm_runtime = LibraryRuntime::new(config)?;
    for &haptic::guests::Bundled { name, bytes, .. } in haptic::guests::BUNDLED {
        let started = Instant::now();
        cold_runtime.load_bytes_uncached(name, bytes)?;
        let cold = started.elapsed();
        let started = Instant::now();
        warm_runtime.load_bytes_uncached(name, bytes)?;
        let disk = started.elapsed();
        warm_runtime.load_bytes(name, bytes)?;
        let started = Instant::now();
        warm_runtime.load_bytes(name, bytes)?;
        let memory = started.elapsed();
        println!(
            "  {:<40} {:>10} {:>12} {:>12}   ({} KiB)",
            name,
            ms(cold),
            ms(disk),
            ms(memory),
            bytes.len() / 1024
        );
    }
    Ok(())
}

/// Median and max with n; p95 and p99 only from 100 samples, where they
/// mean something.
fn report(what: &str, samples: &mut [Duration]) {
    if samples.is_empty() {
        println!("{what}: no samples");
        return;
    }
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let tail = if samples.len() >= 100 {
        format!("  p95 {}  p99 {}", ms(pick(0.95)), ms(pick(0.99)))
    } else {
        String::new()
    };
    println!(
        "{what}: median {}{tail}  max {}  (n={})",
        ms(pick(0.5)),
        ms(pick(1.0)),
        samples.len()
    );
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

/// (VmRSS, VmHWM) from /proc.
fn rss() -> Option<(String, String)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .map(|line| line.trim_start_matches(name).trim().to_owned())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// What the store drops at ingest for these values: the fields every watch
/// of a kind ignores, read from the libraries' plans (as the controller
/// and `haptic run` trim what they store).
fn ingest_trims_of(
    runtime: &LibraryRuntime,
    values: &Values,
) -> anyhow::Result<BTreeMap<Kind, Arc<[String]>>> {
    let mut renderer = bundled_renderer(runtime, values)?;
    renderer.prepare()?;
    Ok(ingest_trims(renderer.watches().map(|(_, watch)| watch)))
}

/// A fresh renderer of the bundled libraries, configured with `values`.
fn bundled_renderer(runtime: &LibraryRuntime, values: &Values) -> anyhow::Result<Renderer> {
    let libraries = runtime.load_bundled()?;
    let defaults: Vec<_> = libraries
        .iter()
        .map(|l| (l.info().name.clone(), l.info().default_values.clone()))
        .collect();
    Ok(Renderer::new(libraries, values.library_tree(&defaults)?))
}

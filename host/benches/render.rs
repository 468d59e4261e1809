//! The render benchmark: a synthetic cluster of 800 Ingresses, 1,000
//! Services and 10,000 endpoints (every pod gated) through the bundled
//! libraries. Prints figures; asserts nothing about time.
//!
//! `cargo bench -p haptic --features synthetic --bench render` (or `make bench`). Set
//! `HAPTIC_BENCH_ROUNDS` to change how many single changes are measured.

use std::time::{Duration, Instant};

use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::render::{ClusterChange, ClusterObject, Renderer};
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

    let objects: Vec<ClusterChange> = cluster
        .objects()
        .filter_map(|value| ClusterObject::from_value(value.clone()))
        .map(ClusterChange::Applied)
        .collect();

    // Full render: a fresh renderer (instantiate, configure, feed everything, merge).
    let mut full = Vec::new();
    let mut renderer = None;
    for round in 0..5 {
        // One renderer alive at a time, so the memory figures mean one.
        drop(renderer.take());
        let libraries = runtime.load_bundled()?;
        let defaults: Vec<_> = libraries
            .iter()
            .map(|l| (l.info().name.clone(), l.info().default_values.clone()))
            .collect();
        let mut fresh = Renderer::new(libraries, values.library_tree(&defaults)?);
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
            for timing in &fresh.timings().libraries {
                println!(
                    "  first render, {}: {} ({} inside the library)",
                    timing.library,
                    ms(timing.total),
                    ms(timing.guest)
                );
            }
            println!("  merge: {}", ms(fresh.timings().merge));
        }
        renderer = Some(fresh);
    }
    report("full render (fresh instances, all objects)", &mut full);
    let Some(mut renderer) = renderer else {
        anyhow::bail!("no renderer");
    };

    // One endpoint's readiness flips (its EndpointSlice and Pod change).
    let mut flips = Vec::new();
    for round in 0..rounds {
        let namespace = round % spec.namespaces;
        let service = (round / spec.namespaces) % spec.services_per_namespace;
        let changes = cluster
            .flip_endpoint(namespace, service, round % spec.endpoints_per_service)?
            .into_iter()
            .filter_map(ClusterObject::from_value)
            .map(ClusterChange::Applied)
            .collect();
        let started = Instant::now();
        renderer.render(changes)?;
        flips.push(started.elapsed());
    }
    report("render after one endpoint readiness change", &mut flips);
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
        let change = ClusterObject::from_value(cluster.add_ingress()).map(ClusterChange::Applied);
        let started = Instant::now();
        renderer.render(change.into_iter().collect())?;
        ingresses.push(started.elapsed());
    }
    report("render after one new Ingress", &mut ingresses);

    let started = Instant::now();
    let rendered = renderer.render(Vec::new())?;
    let files: Vec<(String, String)> = rendered.files.clone().into_iter().collect();
    let merged = started.elapsed();
    let started = Instant::now();
    haptic::validate::validate(&rendered.config, &files)?;
    println!(
        "\nhaproxy -c of the full config: {} (merge without changes {})",
        ms(started.elapsed()),
        ms(merged)
    );

    if let Some((current, peak)) = rss() {
        println!(
            "resident memory of this process: {current} now (one renderer, the cluster twice: store and generator), {peak} at peak"
        );
    }
    Ok(())
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

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!(
        "{what}: median {}  p95 {}  p99 {}  max {}  (n={})",
        ms(pick(0.5)),
        ms(pick(0.95)),
        ms(pick(0.99)),
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

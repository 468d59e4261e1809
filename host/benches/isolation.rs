//! What failure isolation costs at TestScale: the render benchmark's
//! synthetic cluster (800 Ingresses, 1,000 Services, 10,000 gated
//! endpoints) through the bundled libraries plus the misbehaving test
//! library in its `tenant` mode, validated by the real `haproxy -c`.
//!
//! - **A hostile change**: a running engine (its last render accepted)
//!   takes one ConfigMap whose line HAProxy refuses: the refused render, the
//!   isolation's validations and the accepted render without it, timed from
//!   the change to the accepted render. Then the ConfigMap is deleted (the
//!   object's owner fixes it) and the next hostile one comes.
//! - **A start with a hostile object present**: a fresh engine renders the
//!   whole cluster, hostile object included: every object is new, so the
//!   search runs over the implicated library's objects.
//! - **The same without a hostile object**, for the baseline.
//!
//! Prints figures (n, median, max; p95 at n >= 100); asserts only that each
//! render was isolated to exactly the hostile object.
//! `cargo bench -p haptic --features synthetic --bench isolation`;
//! `HAPTIC_BENCH_ROUNDS` sets the hostile changes measured (default 20).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use haptic::engine::{Engine, load_libraries};
use haptic::guests::MISBEHAVING_PATH;
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::render::{ClusterChange, ClusterObject, ObjectRef};
use haptic::synthetic::{Cluster, ClusterSpec};
use haptic::values::Values;

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let spec = ClusterSpec {
        gated: true,
        ..ClusterSpec::benchmark()
    };
    let cluster = Cluster::generate(spec);
    println!(
        "haptic isolation benchmark ({} cores): {} Ingresses, {} Services, {} endpoints, plus the misbehaving library in tenant mode",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        spec.namespaces * spec.ingresses_per_namespace,
        spec.services(),
        spec.endpoints()
    );
    let runtime = LibraryRuntime::new(RuntimeConfig::default())?;
    let mut values = Values::default();
    values.set_assignment("templateLibraries.kubernetesBackends.podReadinessGate.enabled=true")?;
    values.set_assignment("templateLibraries.misbehaving.mode=tenant")?;
    let engine = || -> anyhow::Result<Engine> {
        let libraries = load_libraries(&runtime, &[PathBuf::from(MISBEHAVING_PATH)])?;
        Ok(Engine::new(libraries, values.clone())?)
    };
    let objects = |engine: &Engine| -> Vec<ClusterChange> {
        let trims = engine.ingest_trims();
        cluster
            .objects()
            .filter_map(|value| ClusterObject::ingested(value, &trims))
            .map(ClusterChange::Applied)
            .collect()
    };

    // Baseline and the start with a hostile object: n=5 each.
    let mut clean = Vec::new();
    let mut hostile_start = Vec::new();
    let mut start_probes = Vec::new();
    for round in 0..5 {
        let mut fresh = engine()?;
        let changes = objects(&fresh);
        let started = Instant::now();
        fresh.finish_render(changes, |_| true)?;
        clean.push(started.elapsed());

        let mut fresh = engine()?;
        let mut changes = objects(&fresh);
        changes.push(hostile(round)?);
        let started = Instant::now();
        let accepted = fresh.finish_render(changes, |_| true)?;
        hostile_start.push(started.elapsed());
        let isolation = accepted
            .isolation
            .ok_or_else(|| anyhow::anyhow!("the hostile start was not isolated"))?;
        anyhow::ensure!(
            isolation.withheld == [reference(round)],
            "isolated to {:?}",
            isolation.withheld
        );
        start_probes.push(isolation.probes);
    }
    print_figures(
        "start, no hostile object (render + haproxy -c)",
        &clean,
        None,
    );
    print_figures(
        "start with one hostile object, isolated",
        &hostile_start,
        Some(&start_probes),
    );

    // A running engine takes one hostile change at a time.
    let mut running = engine()?;
    let changes = objects(&running);
    running.finish_render(changes, |_| true)?;
    let mut took = Vec::new();
    let mut probes = Vec::new();
    for round in 0..rounds {
        let started = Instant::now();
        let accepted = running.finish_render(vec![hostile(round)?], |_| true)?;
        took.push(started.elapsed());
        let isolation = accepted
            .isolation
            .ok_or_else(|| anyhow::anyhow!("round {round} was not isolated"))?;
        anyhow::ensure!(
            isolation.withheld == [reference(round)],
            "isolated to {:?}",
            isolation.withheld
        );
        probes.push(isolation.probes);
        // Its owner deletes it: the next render is clean again.
        running.finish_render(vec![ClusterChange::Deleted(reference(round))], |_| true)?;
    }
    print_figures(
        "one hostile change to a running engine -> accepted without it",
        &took,
        Some(&probes),
    );
    Ok(())
}

fn reference(round: usize) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: format!("attacker-{round}"),
        name: "evil".into(),
    }
}

/// A ConfigMap whose line HAProxy refuses (see the misbehaving library's
/// `tenant` mode).
fn hostile(round: usize) -> anyhow::Result<ClusterChange> {
    let value = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"namespace": format!("attacker-{round}"), "name": "evil", "resourceVersion": "1"},
        "data": {"line": "no-such-keyword at all"},
    });
    ClusterObject::from_value(value)
        .map(ClusterChange::Applied)
        .ok_or_else(|| anyhow::anyhow!("the hostile ConfigMap lacks a name"))
}

fn print_figures(what: &str, times: &[Duration], probes: Option<&[usize]>) {
    let mut sorted: Vec<Duration> = times.to_vec();
    sorted.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    let max = sorted.last().copied().unwrap_or_default();
    let mut line = format!(
        "{what}: n={}, median {:.1} ms, max {:.1} ms",
        sorted.len(),
        ms(median),
        ms(max)
    );
    if sorted.len() >= 100 {
        let p95 = sorted[(sorted.len() * 95).div_ceil(100) - 1];
        line.push_str(&format!(", p95 {:.1} ms", ms(p95)));
    }
    if let Some(probes) = probes {
        let max_probes = probes.iter().max().copied().unwrap_or(0);
        let mut sorted = probes.to_vec();
        sorted.sort_unstable();
        line.push_str(&format!(
            "; validations per isolation: median {}, max {max_probes}",
            sorted.get(sorted.len() / 2).copied().unwrap_or(0)
        ));
    }
    println!("{line}");
}

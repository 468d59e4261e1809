//! What a template library written in Python costs next to the same library
//! in Rust: the maintenance-mode example in both languages. Component size,
//! load (cold compile, wasmtime's disk cache, in-process), a fresh instance,
//! a complete render of 800 Ingresses and a render after one Ingress
//! changed. Prints figures; asserts nothing about time.
//!
//! `make bench-python` (builds the Python component, then
//! `HAPTIC_PYTHON_GUESTS=<dir> cargo bench -p haptic --bench python`). Set
//! `HAPTIC_BENCH_ROUNDS` to change how many single changes are measured.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use haptic::library::types::{Change, Object, ObjectKey};
use haptic::library::{LibraryInstance, LibraryRuntime, LoadedLibrary, RuntimeConfig};
use serde_json::json;

const INGRESSES: usize = 800;

fn main() -> anyhow::Result<()> {
    let rounds: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let python_dir = std::env::var_os("HAPTIC_PYTHON_GUESTS").ok_or_else(|| {
        anyhow::anyhow!(
            "HAPTIC_PYTHON_GUESTS is not set; run this benchmark with `make bench-python`"
        )
    })?;
    let libraries = [
        (
            "rust",
            PathBuf::from(haptic::guests::EXAMPLE_MAINTENANCE_MODE_PATH),
        ),
        (
            "python",
            PathBuf::from(python_dir).join("maintenance_mode_python.wasm"),
        ),
    ];
    println!(
        "maintenance-mode, Rust vs Python ({} cores); {INGRESSES} Ingresses, one in four annotated",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "\n{:<8} {:>10} {:>12} {:>12} {:>12} {:>12} {:>14} {:>18}",
        "library",
        "size",
        "cold load",
        "disk cache",
        "in-process",
        "instance",
        "full render",
        "one change (p50)"
    );
    for (language, path) in libraries {
        let bytes =
            std::fs::read(&path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let cache = tempfile::tempdir()?;
        let config = RuntimeConfig {
            cache_dir: Some(cache.path().to_owned()),
            ..RuntimeConfig::default()
        };

        let started = Instant::now();
        LibraryRuntime::new(config.clone())?.load_bytes_uncached(language, &bytes)?;
        let cold = started.elapsed();

        let runtime = LibraryRuntime::new(config)?;
        let started = Instant::now();
        let library = runtime.load_bytes(language, &bytes)?;
        let disk = started.elapsed();
        let started = Instant::now();
        runtime.load_bytes(language, &bytes)?;
        let memory = started.elapsed();

        let (instance_time, full, mut single, rss_growth) = renders(&library, rounds)?;
        single.sort();
        println!(
            "{:<8} {:>7} KiB {:>12} {:>12} {:>12} {:>12} {:>14} {:>18}",
            language,
            bytes.len() / 1024,
            ms(cold),
            ms(disk),
            ms(memory),
            ms(instance_time),
            ms(full),
            ms(single[single.len() / 2]),
        );
        println!(
            "{:<8} one change: p95 {}, max {} (n={}); resident memory grew {} MiB for one instance",
            "",
            ms(single[(single.len() - 1) * 95 / 100]),
            ms(single[single.len() - 1]),
            single.len(),
            rss_growth.map_or("?".to_owned(), |kib| format!("{:.1}", kib as f64 / 1024.0)),
        );
    }
    Ok(())
}

/// A fresh instance (start + configure), a complete render of every
/// Ingress, then `rounds` renders that each toggle one Ingress's annotation;
/// also how much resident memory the live instance added.
fn renders(
    library: &LoadedLibrary,
    rounds: usize,
) -> anyhow::Result<(Duration, Duration, Vec<Duration>, Option<i64>)> {
    let values = json!({});
    let rss_before = rss_kib();
    let started = Instant::now();
    let mut instance: LibraryInstance = library.instantiate()?;
    instance.configure(&values)?;
    let instance_time = started.elapsed();

    let all: Vec<Change> = (0..INGRESSES).map(|i| ingress(i, i % 4 == 0, 1)).collect();
    let started = Instant::now();
    let output = instance.render(all)?;
    let full = started.elapsed();
    anyhow::ensure!(
        output.complete && !output.upserts.is_empty(),
        "first render is complete"
    );

    let mut single = Vec::with_capacity(rounds);
    for round in 0..rounds {
        // Ingress 1 is not annotated at first: even rounds put it into
        // maintenance, odd rounds lift it.
        let change = ingress(1, round % 2 == 0, round as u64 + 2);
        let started = Instant::now();
        let output = instance.render(vec![change])?;
        single.push(started.elapsed());
        anyhow::ensure!(!output.upserts.is_empty(), "each change changes the output");
    }
    let rss_growth = rss_kib()
        .zip(rss_before)
        .map(|(after, before)| after - before);
    Ok((instance_time, full, single, rss_growth))
}

fn ingress(i: usize, maintenance: bool, version: u64) -> Change {
    let namespace = format!("team-{}", i % 20);
    let name = format!("app-{i}");
    let annotations = if maintenance {
        json!({"maintenance.haproxy-haptic.org/enabled": "true"})
    } else {
        json!({})
    };
    let object = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"namespace": namespace, "name": name, "annotations": annotations},
        "spec": {"rules": [
            {"host": format!("{name}.{namespace}.example.com"), "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": name, "port": {"number": 80}}}}
            ]}},
            {"host": format!("*.{name}.{namespace}.example.com")}
        ]}
    });
    Change::Applied(Object {
        key: ObjectKey {
            watch: "ingresses".into(),
            namespace,
            name,
        },
        resource_version: version.to_string(),
        json: object.to_string(),
    })
}

/// VmRSS of this process, from /proc.
fn rss_kib() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

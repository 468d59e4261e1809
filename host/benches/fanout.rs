//! The fan-out curve: one Ingress change -> every HAProxy instance runs a
//! configuration holding it, with 1, 10, 50 and 100 instances (`haptic run
//! --proxies N`: the controller's render loop, deploy path and fleet, each
//! instance a real HAProxy with its own `haptic agent`). Prints p50, p95
//! and max per N and the controller's CPU time per change; asserts only that
//! every change reached every instance.
//!
//! `cargo bench -p haptic --bench fanout`. `HAPTIC_BENCH_ROUNDS` sets the
//! changes per N (default 100), `HAPTIC_BENCH_FANOUT` the instance counts
//! (default `1,10,50,100`). The file source takes edits as one change after
//! 50 ms (editors write in steps): every figure includes that pause.

// Shared by the local-run benches; not every helper is used in each.
#[allow(dead_code)]
#[path = "support/local_run.rs"]
mod local_run;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use local_run::{Run, converged_on_new, cpu_ticks, ms, quantile, save};

fn main() {
    let rounds: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let counts: Vec<usize> = std::env::var("HAPTIC_BENCH_FANOUT")
        .unwrap_or_else(|_| "1,10,50,100".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "haptic fan-out benchmark ({} cores, {rounds} changes per N)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for proxies in counts {
        // examples/cluster plus one Ingress of the bench's own.
        let run = Run::start(proxies, None, |cluster| {
            let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
            for entry in std::fs::read_dir(examples).expect("examples/cluster") {
                let entry = entry.expect("entry");
                std::fs::copy(entry.path(), cluster.join(entry.file_name())).expect("copy");
            }
            write_ingress(cluster, "fanout-start.example.com");
        });
        let agents = run.agents();
        let mut id = runtime
            .block_on(converged_on_new(&agents, None, Duration::from_secs(300)))
            .expect("every instance runs a first configuration");
        let cpu_before = cpu_ticks(run.pid());
        let mut samples = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let host = format!("fanout-{round}.example.com");
            write_ingress(&run.cluster(), &host);
            let started = Instant::now();
            let deadline = started + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let next = runtime
                    .block_on(converged_on_new(&agents, Some(&id), left))
                    .unwrap_or_else(|| {
                        panic!("change {round} not on all {proxies} instances in 60 s")
                    });
                id = next;
                if run.bundle_mentions(&id, &host) {
                    samples.push(started.elapsed());
                    break;
                }
            }
        }
        let cpu = cpu_ticks(run.pid()).saturating_sub(cpu_before);
        report(proxies, &mut samples, cpu);
        drop(run);
    }
}

/// The bench's Ingress with `host`.
fn write_ingress(cluster: &Path, host: &str) {
    let text = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: fanout\n  namespace: shop\nspec:\n  ingressClassName: haptic\n  rules:\n    - host: {host}\n      http:\n        paths:\n          - path: /\n            pathType: Prefix\n            backend:\n              service: {{name: web, port: {{name: http}}}}\n"
    );
    save(&cluster.join("fanout.yaml"), &text);
}

fn report(proxies: usize, samples: &mut [Duration], cpu_ticks: u64) {
    samples.sort();
    // Linux counts CPU time in ticks of 1/100 s (USER_HZ).
    let cpu_ms = cpu_ticks as f64 * 10.0 / samples.len().max(1) as f64;
    println!(
        "{proxies:>3} HAProxy: one Ingress change -> on every instance: n={} p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms; controller CPU {cpu_ms:.1} ms per change",
        samples.len(),
        ms(quantile(samples, 0.5)),
        ms(quantile(samples, 0.95)),
        ms(quantile(samples, 1.0)),
    );
}

//! The SPOA benchmark: what external authentication and mirroring cost a
//! request, with the real `haptic agent`, the real HAProxy, an auth service
//! on loopback that answers at once and mirror targets that answer at once
//! or after 5 s. Prints figures; asserts only that every request got the
//! answer it should (a failure is counted and fails the run).
//!
//! `cargo bench -p haptic --bench spoa` (or `make bench-spoa`).
//! - latency, one keep-alive client, `HAPTIC_BENCH_ROUNDS` requests each
//!   (default 2,000): a route without auth, a route through auth, and the
//!   floor: the same client straight to the auth service (one HTTP round
//!   trip, the part of the added cost no agent can remove);
//! - the ceiling: 8 keep-alive clients for 5 s on each route, requests/s;
//! - mirroring: the same latency on a route without a mirror, one mirrored
//!   to a target that answers at once, one mirrored to a target that
//!   answers after 5 s (the client must not see it).

#[path = "../tests/agent/auth_service.rs"]
mod auth_service;
#[path = "../tests/agent/harness.rs"]
mod harness;
#[path = "../tests/agent/mirror_target.rs"]
mod mirror_target;
#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use auth_service::{AuthService, auth_bundle};
use harness::{Connection, Pod, Tokens, free_port};
use mirror_target::{MirrorTarget, mirror_bundle};

const SIGNED_IN: (&str, &str) = ("Cookie", "session=ada");

fn main() {
    let rounds: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "haptic SPOA benchmark ({} cores, {})",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        haptic::validate::haproxy_version().unwrap_or_else(|e| e.to_string())
    );
    // The auth service is on loopback, which a pod's agent refuses.
    let pod = Pod::start_with(&["--spoa-allow-loopback"]);
    let auth = AuthService::start();
    let mut tokens = Tokens::default();
    let bundle = auth_bundle(&pod, auth.address, 2_000);
    runtime
        .block_on(pod.client.apply(&tokens.request(&bundle)))
        .expect("the auth bundle applies");
    let port = pod.http_port;

    // Warm every connection pool (HAProxy's SPOP connections, the agent's
    // to the auth service) before measuring.
    let mut warm = Connection::open(port).expect("connect");
    for _ in 0..200 {
        let answer = warm
            .request_with("app.test", "/signin/x", &[SIGNED_IN])
            .expect("warm-up");
        assert_eq!(answer.status, 200, "{answer:?}");
    }

    let open = latency(rounds, "/open", port, (200, "user="));
    let authed = latency(rounds, "/signin/x", port, (200, "user=ada"));
    let floor = latency(rounds, "/oauth2/auth", auth.address.port(), (202, ""));
    println!("\nlatency, one keep-alive client, n={rounds} each (ms):");
    report("route without auth", &open);
    report("route through auth", &authed);
    report("auth service alone (floor)", &floor);
    let added = |q: f64| quantile(&authed, q) - quantile(&open, q);
    println!(
        "  added by auth: p50 {:.3} ms, p99 {:.3} ms; the floor (one HTTP round trip to the auth service) p50 {:.3} ms",
        added(0.5),
        added(0.99),
        quantile(&floor, 0.5)
    );

    println!("\nceiling, 8 keep-alive clients, 5 s each:");
    for (name, path) in [
        ("route without auth", "/open"),
        ("route through auth", "/signin/x"),
    ] {
        let rate = ceiling(port, path, 8, Duration::from_secs(5));
        println!("  {name:<28} {rate:>8.0} requests/s");
    }
    drop(auth);

    let target = MirrorTarget::start(Duration::ZERO);
    let slow = MirrorTarget::start(Duration::from_secs(5));
    let dead = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("address");
    runtime
        .block_on(pod.client.apply(&tokens.request(&mirror_bundle(
            &pod,
            target.address,
            slow.address,
            dead,
        ))))
        .expect("the mirror bundle applies");
    for _ in 0..200 {
        let answer = warm
            .request_with("app.test", "/copy/x", &[SIGNED_IN])
            .or_else(|_| {
                warm = Connection::open(port).expect("connect");
                warm.request_with("app.test", "/copy/x", &[SIGNED_IN])
            })
            .expect("warm-up");
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let plain = latency(rounds, "/open", port, (200, "length=0"));
    let mirrored = latency(rounds, "/copy/x", port, (200, "length=0"));
    let beside_slow = latency(rounds, "/slow/x", port, (200, "length=0"));
    println!("\nmirroring, one keep-alive client, n={rounds} each (ms):");
    report("route without mirror", &plain);
    report("mirrored, target at once", &mirrored);
    report("mirrored, target after 5 s", &beside_slow);
    let metrics = harness::get(pod.agent_port, "agent", "/metrics")
        .expect("metrics")
        .body;
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("haptic_spoa_mirror_requests_total"))
    {
        println!("  {line}");
    }
    println!(
        "  copies the instant target received: {} (of {} mirrored requests and the warm-up's 200)",
        target.copies().len(),
        rounds
    );
}

/// `rounds` signed-in requests for `path` on one keep-alive connection to
/// `port`, in milliseconds, sorted; each answer must have the `expected`
/// status and a body starting with its text.
fn latency(rounds: usize, path: &str, port: u16, expected: (u16, &str)) -> Vec<f64> {
    let mut connection = Connection::open(port).expect("connect");
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        let answer = connection
            .request_with("app.test", path, &[SIGNED_IN])
            .expect("an answer");
        samples.push(started.elapsed().as_secs_f64() * 1e3);
        assert!(
            answer.status == expected.0 && answer.body.starts_with(expected.1),
            "{answer:?}"
        );
    }
    samples.sort_by(f64::total_cmp);
    samples
}

/// Requests per second `clients` keep-alive clients get on `path` in
/// `period`; every answer must be 200.
fn ceiling(port: u16, path: &'static str, clients: usize, period: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (stop, done, failed) = (stop.clone(), done.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut connection = Connection::open(port).expect("connect");
                while !stop.load(Ordering::Relaxed) {
                    match connection.request_with("app.test", path, &[SIGNED_IN]) {
                        Ok(answer) if answer.status == 200 => done.fetch_add(1, Ordering::Relaxed),
                        _ => {
                            connection = Connection::open(port).expect("reconnect");
                            failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
        })
        .collect();
    std::thread::sleep(period);
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("client thread");
    }
    let (done, failed) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    assert_eq!(failed, 0, "{failed} requests failed on {path}");
    assert!(done >= 100, "the load ran: {done} requests on {path}");
    done as f64 / period.as_secs_f64()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn report(what: &str, sorted: &[f64]) {
    println!(
        "  {what:<28} p50 {:.3}  p95 {:.3}  p99 {:.3}  max {:.3}",
        quantile(sorted, 0.5),
        quantile(sorted, 0.95),
        quantile(sorted, 0.99),
        quantile(sorted, 1.0)
    );
}

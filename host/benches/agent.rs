//! The agent benchmark: the real `haptic agent` and HAProxy on loopback.
//! Prints figures; asserts only that each apply took effect.
//!
//! `cargo bench -p haptic --bench agent` (or `make bench-agent`).
//! - runtime apply, 1 and 101 changed servers: request in -> the apply
//!   answers (the current worker has taken the commands) -> a request
//!   through HAProxy shows the new server state;
//! - certificate rotation (`set ssl cert` + `commit ssl cert`, no reload):
//!   request in -> the apply answers, and -> a new TLS handshake presents
//!   the new certificate;
//! - reload apply at 3,000 routes (3,000 backends, a 3,000-entry host map):
//!   request in -> the new worker answers `show info` with the new id; and
//!   in the same rounds, on the configuration the agent just deployed,
//!   HAProxy's own reload (master CLI `reload` -> the new worker answers
//!   `show info`), and the ratio of the two; then, from the agent's log,
//!   its own part (request in -> files written) and the reload it waited
//!   for (files written -> the new worker answers);
//! - the agent's resident memory (current and peak).
//!
//! `HAPTIC_BENCH_ROUNDS` sets the runtime rounds (default 200; rotations are
//! half of that and reloads a tenth, at least 10 each).

#[path = "../tests/agent/harness.rs"]
mod harness;
#[path = "../tests/support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use haptic::protocol::{ApplyMode, BundleFile};
use harness::{Backends, CertFile, Pod, Tokens, bundle, config, get, hosts_map, tls_bundle};

fn main() {
    let rounds: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "haptic agent benchmark ({} cores, {})",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        haptic::validate::haproxy_version().unwrap_or_else(|e| e.to_string())
    );
    let pod = Pod::start();
    let backends = Backends::start(&["A", "B"]);
    let (a, b) = (backends.addresses[0], backends.addresses[1]);
    let mut tokens = Tokens::default();

    for changed in [1usize, 100] {
        // `changed` servers to A, one to B; each round flips which side is enabled.
        let render = |a_side: bool| {
            let mut servers: Vec<(String, SocketAddr, bool)> =
                (0..changed).map(|i| (format!("a{i}"), a, a_side)).collect();
            servers.push(("b".to_owned(), b, !a_side));
            let servers: Vec<_> = servers
                .iter()
                .map(|(n, addr, on)| (n.as_str(), *addr, *on))
                .collect();
            bundle(
                config(pod.http_port, &[("web", servers)], ""),
                vec![hosts_map(&["web"])],
            )
        };
        let (on_a, on_b) = (render(true), render(false));
        runtime
            .block_on(pod.client.apply(&tokens.request(&on_a)))
            .expect("seed");
        let mut samples = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let (next, expect) = if round % 2 == 0 {
                (&on_b, "B")
            } else {
                (&on_a, "A")
            };
            let request = tokens.request(next);
            let started = Instant::now();
            let applied = runtime.block_on(pod.client.apply(&request)).expect("apply");
            let answer = get(pod.http_port, "web.test", "/").expect("request");
            samples.push(started.elapsed());
            assert_eq!(applied.mode, ApplyMode::Runtime);
            assert_eq!(answer.body, expect, "traffic follows the runtime apply");
        }
        report(
            &format!("runtime apply, {} changed servers", changed + 1),
            &mut samples,
        );
    }

    // Certificate rotation: two certificates (each from a CA of its own)
    // take turns for web.test; the client trusts only the expected one.
    let https_port = harness::free_port();
    let default = CertFile::new("default CA", "default.test");
    let certs = [
        CertFile::new("CA one", "web.test"),
        CertFile::new("CA two", "web.test"),
    ];
    let render = |cert: &CertFile| {
        tls_bundle(
            &pod,
            https_port,
            [(a, true), (b, false)],
            &default,
            &cert.pem,
            &[],
        )
    };
    runtime
        .block_on(pod.client.apply(&tokens.request(&render(&certs[0]))))
        .expect("seed");
    let (mut applied_in, mut served_in) = (Vec::new(), Vec::new());
    for round in 1..=(rounds / 2).max(10) {
        let cert = &certs[round % 2];
        let request = tokens.request(&render(cert));
        let started = Instant::now();
        let applied = runtime.block_on(pod.client.apply(&request)).expect("apply");
        applied_in.push(started.elapsed());
        let (presented, _) =
            harness::tls_get(https_port, "web.test", &cert.ca_pem, "/").expect("TLS request");
        served_in.push(started.elapsed());
        assert_eq!(applied.mode, ApplyMode::Runtime);
        assert!(presented == cert.der, "the rotated certificate is served");
    }
    report(
        "\ncertificate rotation (request -> the apply answers)",
        &mut applied_in,
    );
    report(
        "certificate rotation (request -> a new TLS handshake presents it)",
        &mut served_in,
    );

    // 3,000 routes: a backend and a host-map entry each.
    let routes = 3000;
    let names: Vec<String> = (0..routes).map(|i| format!("route{i}")).collect();
    let render = |generation: usize| {
        let backends: Vec<(&str, Vec<harness::Server<'_>>)> = names
            .iter()
            .map(|n| (n.as_str(), vec![("s", a, true)]))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let map: BundleFile = hosts_map(&refs);
        bundle(
            config(
                pod.http_port,
                &backends,
                &format!("    # generation {generation}\n"),
            ),
            vec![map],
        )
    };
    let first = render(0);
    println!(
        "\n3,000 routes: {} config lines, {} KiB bundle",
        first.config.lines().count(),
        first.size() / 1024
    );
    runtime
        .block_on(pod.client.apply(&tokens.request(&first)))
        .expect("seed");
    let reloads_before = logged_ms(&pod.agent_log(), "reload_ms").len();
    let haproxy = haptic::agent::haproxy::Haproxy {
        master_socket: haptic::agent::default_master_socket(&pod.config_dir()),
        worker_socket: haptic::agent::default_worker_socket(&pod.config_dir()),
    };
    let mut samples = Vec::new();
    let mut bare = Vec::new();
    for generation in 1..=(rounds / 10).max(10) {
        let next = render(generation);
        let request = tokens.request(&next);
        let started = Instant::now();
        let applied = runtime.block_on(pod.client.apply(&request)).expect("apply");
        samples.push(started.elapsed());
        assert_eq!(applied.mode, ApplyMode::Reload);
        assert_eq!(
            applied.state.current_worker().map(|w| w.config_id.as_str()),
            Some(next.id.as_str())
        );
        assert_eq!(
            get(pod.http_port, "route2999.test", "/")
                .expect("request")
                .body,
            "A"
        );
        bare.push(runtime.block_on(bare_reload(&haproxy)));
    }
    report(
        "reload apply, 3,000 routes (request -> new worker runs the id)",
        &mut samples,
    );
    report(
        "bare HAProxy reload, same configuration, same rounds (master `reload` -> new worker answers `show info`)",
        &mut bare,
    );
    let median = |sorted: &[Duration]| sorted[sorted.len() / 2].as_secs_f64();
    println!(
        "  ratio of the medians, agent / bare HAProxy: {:.2}",
        median(&samples) / median(&bare)
    );
    // The agent's own figures, from its log: its part before HAProxy's
    // (decode, plan, files written) and HAProxy's reload as it saw it.
    let log = pod.agent_log();
    for (field, what) in [
        (
            "prepare_ms",
            "  of which request in -> files written (agent log)",
        ),
        (
            "reload_ms",
            "  of which files written -> new worker answers (agent log)",
        ),
    ] {
        let mut figures = logged_ms(&log, field).split_off(reloads_before);
        if !figures.is_empty() {
            report(what, &mut figures);
        }
    }

    if let Some(agent) = &pod.agent {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", agent.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_owned())
                .unwrap_or_default()
        };
        println!(
            "\nagent resident memory: {} KiB now, {} KiB peak",
            field("VmRSS:"),
            field("VmHWM:")
        );
    }
}

/// HAProxy's own reload through the master CLI, timed until a new worker
/// (a pid that was not current before) answers `show info`: the floor the
/// agent's reload apply is held to.
async fn bare_reload(haproxy: &haptic::agent::haproxy::Haproxy) -> Duration {
    let before = haproxy.show_proc().await.expect("show proc").current;
    let started = Instant::now();
    haproxy.reload().await.expect("master reload");
    let deadline = started + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "no new worker within 30 s of a bare reload"
        );
        // The master re-executes during a reload and drops connections.
        if let Ok(procs) = haproxy.show_proc().await
            && let Some(&pid) = procs.current.iter().find(|pid| !before.contains(pid))
            && haproxy.worker_info(pid).await.is_ok()
        {
            return started.elapsed();
        }
        // As often as the agent polls.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The milliseconds the agent logged as `field` on each reload, in order.
fn logged_ms(log: &str, field: &str) -> Vec<Duration> {
    let prefix = format!("{field}=");
    log.lines()
        .filter(|l| l.contains("reloaded"))
        .filter_map(|l| {
            l.split(prefix.as_str())
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .map(Duration::from_millis)
        .collect()
}

/// n, p50 and max, and the tail quantiles only where there are samples
/// enough to tell them (p90 from 20, p95 and p99 from 100).
fn report(what: &str, samples: &mut [Duration]) {
    if samples.is_empty() {
        println!("{what}: no samples");
        return;
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut line = format!("{what}: n={} p50 {:.2} ms", samples.len(), ms(at(0.50)));
    if samples.len() >= 20 {
        line += &format!(", p90 {:.2} ms", ms(at(0.90)));
    }
    if samples.len() >= 100 {
        line += &format!(", p95 {:.2} ms, p99 {:.2} ms", ms(at(0.95)), ms(at(0.99)));
    }
    println!("{line}, max {:.2} ms", ms(samples[samples.len() - 1]));
}

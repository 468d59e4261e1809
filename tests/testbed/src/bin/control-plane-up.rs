//! Brings up the test bed's control plane for a person: prints how to reach it, then runs
//! until Ctrl-C (or SIGTERM) and tears it down.
//!
//! `cargo run -p haptic-testbed --bin control-plane-up` (or `make testbed-up`).
//! `control-plane-up --node` adds the real node (containerd + runc, kubelet, kube-proxy, the
//! bridge 10.89.0.0/24 the host reaches pods on; root, `make testbed-node-setup testbed-images`).
//! `control-plane-up --bench N` starts and stops it N times and prints start-up time and memory.
//! `HAPTIC_TESTBED_APISERVER_ADDRESS=IP` serves the API on IP (only inside a network namespace
//! that has it; see `ControlPlaneOptions::apiserver_address`).

use std::time::Duration;

use anyhow::Context as _;
use haptic_testbed::control_plane::{ControlPlane, ControlPlaneOptions, KUBERNETES_VERSION};
use haptic_testbed::node::{NODE_NAME, NodeBed};
use tokio::signal::unix::{SignalKind, signal};

/// Readiness probes fail by design until a component serves; kube-client logs each as an error.
const QUIET: &str = "info,kube_client::client::builder=off,kube_client::client::tls=error";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| QUIET.into()),
        )
        .with_writer(std::io::stderr)
        .init();

    let mut options = ControlPlaneOptions::default();
    if let Some(address) = std::env::var_os("HAPTIC_TESTBED_APISERVER_ADDRESS") {
        let address = address.to_string_lossy();
        options.apiserver_address = Some(address.parse().with_context(|| {
            format!("HAPTIC_TESTBED_APISERVER_ADDRESS={address} is not an IP address")
        })?);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {}
        [flag] if flag == "--node" => return node().await,
        [flag, n] if flag == "--bench" => {
            let runs = n
                .parse()
                .with_context(|| format!("--bench {n}: not a count"))?;
            return bench(options, runs).await;
        }
        _ => anyhow::bail!("usage: control-plane-up [--node | --bench RUNS]"),
    }
    let mut plane = ControlPlane::start_with(options)
        .await
        .context("starting the test-bed control plane")?;
    let kubectl = plane.bin_dir().join("kubectl");
    let memory: u64 = plane.memory().iter().map(|(_, rss)| rss).sum();
    eprintln!(
        "Kubernetes {KUBERNETES_VERSION} control plane up in {:.2} s at {}",
        plane.startup_time().as_secs_f64(),
        plane.server_url()
    );
    for (name, rss) in plane.memory() {
        eprintln!("  {name:<24} RSS {:>6.1} MiB", mib(rss));
    }
    eprintln!("  {:<24} RSS {:>6.1} MiB", "total", mib(memory));
    eprintln!("logs and data: {}", plane.dir().display());
    eprintln!("In another shell:");
    println!("export KUBECONFIG={}", plane.kubeconfig_path().display());
    println!("alias kubectl={}", kubectl.display());
    eprintln!("Ctrl-C stops it.");

    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut health = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = health.tick() => {
                if let Err(e) = plane.check_running() {
                    plane.stop().await;
                    return Err(e).context("a control-plane component died");
                }
            }
        }
    }
    eprintln!("stopping");
    plane.stop().await;
    Ok(())
}

/// The control plane with the real node, until Ctrl-C or SIGTERM.
async fn node() -> anyhow::Result<()> {
    let mut bed = NodeBed::start()
        .await
        .context("starting the test bed's real node")?;
    let plane = bed.control_plane();
    eprintln!(
        "Kubernetes {KUBERNETES_VERSION} control plane and node {NODE_NAME} up in {:.2} s at {}",
        bed.startup_time().as_secs_f64(),
        plane.server_url()
    );
    eprintln!("pods get addresses on 10.89.0.0/24, reachable from this machine only");
    eprintln!("In another shell:");
    println!("export KUBECONFIG={}", plane.kubeconfig_path().display());
    println!(
        "alias kubectl={}",
        plane.bin_dir().join("kubectl").display()
    );
    eprintln!("Ctrl-C stops it and sweeps what it left on the host.");
    let mut term = signal(SignalKind::terminate()).context("installing a SIGTERM handler")?;
    let mut health = tokio::time::interval(Duration::from_secs(2));
    let died = loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break None,
            _ = term.recv() => break None,
            _ = health.tick() => {
                if let Err(error) = bed.check_running() {
                    break Some(error);
                }
            }
        }
    };
    eprintln!("stopping");
    bed.stop().await;
    match died {
        Some(error) => Err(error).context("a node process died"),
        None => Ok(()),
    }
}

/// Cold-cache effects aside, what a test pays per control plane: start-up time and the
/// resident memory of the three processes right after start.
async fn bench(options: ControlPlaneOptions, runs: usize) -> anyhow::Result<()> {
    let mut times = Vec::with_capacity(runs);
    let mut memory = Vec::with_capacity(runs);
    for _ in 0..runs {
        let plane = ControlPlane::start_with(options.clone())
            .await
            .context("starting the test-bed control plane")?;
        times.push(plane.startup_time().as_secs_f64());
        memory.push(mib(plane.memory().iter().map(|(_, rss)| rss).sum()));
        plane.stop().await;
    }
    times.sort_by(f64::total_cmp);
    memory.sort_by(f64::total_cmp);
    let (Some(first), Some(last)) = (times.first(), times.last()) else {
        anyhow::bail!("--bench needs at least one run");
    };
    println!(
        "control plane start-up over {runs} runs: min {first:.2} s, median {:.2} s, max {last:.2} s",
        times[times.len() / 2]
    );
    println!(
        "RSS right after start (etcd + kube-apiserver + kube-controller-manager): median {:.0} MiB",
        memory[memory.len() / 2]
    );
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

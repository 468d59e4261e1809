//! `kubelet-bench`: how fast the process kubelet makes a pod Ready, and how
//! much memory it uses. Prints figures; asserts nothing.
//!
//! Starts a pod network and a control plane, runs `process-kubelet` (the
//! sibling binary) as its own process so its memory can be read from /proc,
//! then creates pods one at a time and times create -> Ready (watched, not
//! polled), first without a readiness probe, then with an httpGet probe of
//! `periodSeconds: 1`. `KUBELET_BENCH_PODS` sets pods per round (default 10).
//! Creations are spread over a second, so they land at different points of
//! the kubelet's 1 s PLEG relist cycle (which decides when a probed pod's
//! first probe runs; see the kubelet module docs).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use haptic_testbed::control_plane::{ControlPlane, ControlPlaneOptions};
use haptic_testbed::kubelet::bed::{NODE_NAME, init_tracing, wait_for};
use haptic_testbed::kubelet::{ECHO_IMAGE, NODE_IP, PodNetwork};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{DeleteParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client};
use serde_json::json;

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this executable")?;
    Ok(exe.with_file_name(name))
}

/// `(VmRSS, VmHWM)` in KiB.
fn memory(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .context("reading /proc/PID/status")?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok((field("VmRSS:"), field("VmHWM:")))
}

fn is_ready(pod: Option<&Pod>) -> bool {
    pod.and_then(|p| p.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn round(
    client: &Client,
    label: &str,
    probe: bool,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "bench");
    let mut times = Vec::new();
    for i in 0..n {
        let name = format!("{label}-{i}");
        let mut container = json!({
            "name": "echo", "image": ECHO_IMAGE,
            "ports": [{"name": "http", "containerPort": 8080}],
        });
        if probe {
            container["readinessProbe"] =
                json!({"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1});
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"containers": [container]},
        }))?;
        // Spread creations over the kubelet's 1 s PLEG relist phase, as independent
        // arrivals would be; back-to-back creations would lock onto one phase.
        tokio::time::sleep(Duration::from_millis((i as u64 * 379) % 1000)).await;
        let start = Instant::now();
        let ready = await_condition(pods.clone(), &name, is_ready);
        pods.create(&PostParams::default(), &pod).await?;
        tokio::time::timeout(Duration::from_secs(60), ready)
            .await
            .with_context(|| format!("pod {name} not Ready within 60 s"))??;
        times.push(start.elapsed());
    }
    Ok(times)
}

fn report(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let pick = |q: f64| {
        times
            .get(((times.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or_default()
    };
    println!(
        "create -> Ready, {label:<28} n={:<3} min {:>7.1} ms  median {:>7.1} ms  p90 {:>7.1} ms  max {:>7.1} ms",
        times.len(),
        ms(pick(0.0)),
        ms(pick(0.5)),
        ms(pick(0.9)),
        ms(pick(1.0)),
    );
}

async fn bench() -> anyhow::Result<()> {
    let n: usize = std::env::var("KUBELET_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let plane = ControlPlane::start_with(ControlPlaneOptions {
        apiserver_address: Some(NODE_IP.into()),
        ..ControlPlaneOptions::default()
    })
    .await
    .context("starting the control plane")?;
    let client = plane.admin_client();
    let log = std::fs::File::create(plane.dir().join("process-kubelet.log"))?;
    let mut kubelet = tokio::process::Command::new(sibling("process-kubelet")?)
        .arg("--kubeconfig")
        .arg(plane.kubeconfig_path())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .context("starting process-kubelet (build it: cargo build -p haptic-testbed --bins)")?;
    let pid = kubelet.id().context("process-kubelet pid")?;
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the kubelet's node", Duration::from_secs(30), || async {
        nodes
            .get_opt(NODE_NAME)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no node".to_string())
    })
    .await?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "bench"}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "bench");
    wait_for(
        "the default ServiceAccount",
        Duration::from_secs(30),
        || async {
            accounts
                .get_opt("default")
                .await
                .map_err(|e| e.to_string())?
                .ok_or("none".to_string())
        },
    )
    .await?;
    let (idle_rss, _) = memory(pid)?;

    // A warm-up pod, so the first measured one does not pay for connection set-up.
    round(&client, "warmup", false, 1).await?;
    report(
        "no readiness probe",
        round(&client, "plain", false, n).await?,
    );
    report(
        "httpGet probe, period 1 s",
        round(&client, "probed", true, n).await?,
    );
    let (rss, hwm) = memory(pid)?;
    let running = 2 * n + 1;
    println!(
        "process-kubelet memory: idle RSS {:.1} MiB; with {running} pods RSS {:.1} MiB, peak {:.1} MiB (pod processes not included)",
        idle_rss as f64 / 1024.0,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), "bench");
    let start = Instant::now();
    pods.delete("plain-0", &DeleteParams::default()).await?;
    wait_for("the deleted pod gone", Duration::from_secs(60), || async {
        match pods.get_opt("plain-0").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await?;
    println!(
        "delete -> gone (SIGTERM, exit, terminal status, final delete): {:.1} ms",
        start.elapsed().as_secs_f64() * 1000.0
    );
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = kubelet.wait().await;
    plane.stop().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    init_tracing();
    PodNetwork::create()?.block_on(bench())?
}

//! Controller figures on the test bed (`make bench-controller`): two real
//! HAProxy pods, the controller in this process, the real apiserver.
//!
//! - ContainersReady -> gate condition True, as a watcher sees both (a
//!   gated single-replica Deployment rolled `ROUNDS` times; the pod that
//!   existed before the watcher is not a sample).
//! - An endpoint readiness flip -> routable (and unroutable) through every
//!   HAProxy pod, with each HAProxy master's own reload count (master CLI)
//!   showing no reload.
//!
//! Figures, not assertions: a bench prints, a test asserts.

// Shared with the e2e tests; not every helper is used here.
#[allow(dead_code)]
#[path = "../tests/controller/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../tests/controller/oracle.rs"]
mod oracle;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use haptic_testbed::cluster as bed;
use haptic_testbed::http;
use harness::{APP_NAMESPACE, Installation, gate_status};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

const ROUNDS: usize = 20;
const FLIPS: usize = 40;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// n, p50, p90 and max; p99 only from 100 samples or more, where it is
/// not simply the maximum.
fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let p99 = if samples.len() >= 100 {
        format!(" p99={:?}", percentile(&samples, 0.99))
    } else {
        String::new()
    };
    println!(
        "{name}: n={} p50={:?} p90={:?}{p99} max={:?}",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.9),
        samples.last().copied().unwrap_or_default()
    );
}

fn condition_true(pod: &Pod, kind: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == kind && c.status == "True"))
}

async fn gate_latency(installation: &Installation) {
    let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
    let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (listed, is_listed) = tokio::sync::oneshot::channel();
    let watching = tokio::spawn({
        let samples = samples.clone();
        async move {
            let mut listed = Some(listed);
            let mut containers_ready: HashMap<String, Instant> = HashMap::new();
            let mut done = std::collections::HashSet::new();
            let mut before_the_watch = std::collections::HashSet::new();
            let stream =
                watcher(pods, watcher::Config::default().labels("app=web")).default_backoff();
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let pod = match event {
                    // In the first list: its ContainersReady was not seen happen.
                    Ok(watcher::Event::InitApply(pod)) => {
                        before_the_watch.insert(pod.metadata.name.clone().unwrap_or_default());
                        continue;
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(pod)) => pod,
                    _ => continue,
                };
                let name = pod.metadata.name.clone().unwrap_or_default();
                if before_the_watch.contains(&name) {
                    continue;
                }
                if condition_true(&pod, "ContainersReady") {
                    containers_ready
                        .entry(name.clone())
                        .or_insert_with(Instant::now);
                }
                if gate_status(&pod) == Some("True")
                    && done.insert(name.clone())
                    && let Some(since) = containers_ready.get(&name)
                    && let Ok(mut samples) = samples.lock()
                {
                    samples.push(since.elapsed());
                }
            }
        }
    });
    let _ = tokio::time::timeout(Duration::from_secs(30), is_listed).await;
    for round in 1..=ROUNDS {
        installation.rollout_restart(round).await;
    }
    // A rollout finishes once its pod is Ready, so its gate is True by now;
    // a moment for the watch to deliver the last event.
    tokio::time::sleep(Duration::from_secs(2)).await;
    watching.abort();
    let samples = samples.lock().map(|s| s.clone()).unwrap_or_default();
    if samples.len() != ROUNDS {
        println!(
            "gate latency: {} samples of {ROUNDS} rollouts (the watch missed a transition)",
            samples.len()
        );
    }
    report("ContainersReady -> gate True (2 HAProxy pods)", samples);
}

/// A selector-less Service with a hand-made EndpointSlice at the current
/// web pod, so the benchmark flips readiness itself.
async fn flip_latency(installation: &Installation) {
    let client = installation.client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), APP_NAMESPACE);
    let web = pods
        .list(&kube::api::ListParams::default().labels("app=web"))
        .await
        .expect("web pods");
    let pod = web.items.into_iter().next().expect("a web pod");
    let ip = pod.status.and_then(|s| s.pod_ip).expect("pod IP");
    bed::create::<Service>(
        &client,
        APP_NAMESPACE,
        json!({"metadata": {"name": "flip"}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
    )
    .await
    .expect("Service");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), APP_NAMESPACE);
    let slice = |ready: bool| {
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "flip-1", "labels": {
                "kubernetes.io/service-name": "flip",
                "endpointslice.kubernetes.io/managed-by": "bench.haptic"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}],
        })
    };
    slices
        .patch(
            "flip-1",
            &PatchParams::apply("bench").force(),
            &Patch::Apply(slice(false)),
        )
        .await
        .expect("slice");
    bed::create::<Ingress>(
        &client,
        APP_NAMESPACE,
        harness::ingress("flip", "flip.example.com", "flip"),
    )
    .await
    .expect("Ingress");
    // Routed (a new backend: one reload), then measure flips.
    let expect = |ready: bool| async move {
        let code = if ready { 200 } else { 503 };
        for proxy in &installation.proxies {
            loop {
                let response = http::get(
                    proxy.http(),
                    Some("flip.example.com"),
                    "/",
                    &[],
                    Duration::from_secs(2),
                )
                .await;
                if response.as_ref().is_ok_and(|r| r.status == code) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    };
    expect(false).await;
    let reloads_before = oracle::reloads_per_proxy(&installation.proxies).await;
    let mut samples = Vec::new();
    for flip in 0..FLIPS {
        let ready = flip % 2 == 0;
        let started = Instant::now();
        slices
            .patch(
                "flip-1",
                &PatchParams::apply("bench").force(),
                &Patch::Apply(slice(ready)),
            )
            .await
            .expect("flip");
        tokio::time::timeout(Duration::from_secs(10), expect(ready))
            .await
            .expect("routable in time");
        samples.push(started.elapsed());
    }
    let reloads_after = oracle::reloads_per_proxy(&installation.proxies).await;
    report(
        "endpoint readiness flip -> routable on both HAProxy pods (patch sent -> answer changes)",
        samples,
    );
    println!(
        "  HAProxy reloads during the flips (each master's own count): before {reloads_before:?}, after {reloads_after:?} (equal = runtime only)"
    );
}

fn main() {
    harness::run(async {
        let installation = Installation::start(true, 2).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        gate_latency(&installation).await;
        flip_latency(&installation).await;
        let metrics = controller.state.metrics.encode();
        for line in metrics.lines().filter(|l| {
            l.starts_with("haptic_deploys_total")
                || l.starts_with("haptic_validations_skipped")
                || l.starts_with("haptic_renders_total")
        }) {
            println!("  {line}");
        }
        controller.stop().await;
    });
}

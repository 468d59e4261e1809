//! The controller at HAPTIC's TestScale size on the test bed
//! (`make bench-scale`): 20 namespaces x 40 Ingresses, 1,000 Services,
//! 10,000 endpoints in EndpointSlices and 10,000 gated Pods (created
//! directly, never scheduled), two real HAProxy pods, and `haptic
//! controller` as its own process (the binary a cluster runs), so its memory
//! is its own.
//!
//! Prints: seed (controller start -> first configuration on every HAProxy
//! pod), one Ingress change -> deployed on every pod (p50/p95), the
//! controller's peak and current resident memory, the agents' memory.

// Shared with the e2e tests; not every helper is used here.
#[allow(dead_code)]
#[path = "../tests/controller/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "../tests/controller/synthetic.rs"]
mod synthetic;

use std::process::Command;
use std::time::{Duration, Instant};

use haptic::synthetic::{Cluster, ClusterSpec};
use haptic_testbed::kubelet::bed;
use harness::Installation;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use synthetic::{ControllerProcess, change_host, converged_on_new, create_all, memory_kib};

const CHANGES: usize = 20;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(((sorted.len() as f64) - 1.0) * p).round() as usize]
}

fn main() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 2).await;
        let client = installation.client();
        let cluster = Cluster::generate(ClusterSpec::benchmark());
        let started = Instant::now();
        let created = create_all(&client, &cluster).await;
        println!("created {created} objects in {:?}", started.elapsed());

        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = installation.bed.control_plane.kubeconfig_path().to_path_buf();
        let started = Instant::now();
        let controller = ControllerProcess::start(dir.path(), &kubeconfig);
        let mut id = converged_on_new(&installation, None, Duration::from_secs(120))
            .await
            .expect("the fleet runs a first configuration");
        let seed = started.elapsed();
        let lines = std::fs::read_to_string(
            haptic::agent::disk::ConfigDir::new(installation.proxies[0].dir.clone(), installation.proxies[0].dir.join("worker.sock"))
                .bundle_dir(&id)
                .join("haproxy.cfg"),
        )
        .map(|c| c.lines().count())
        .unwrap_or(0);
        println!("seed: controller start -> first configuration on both HAProxy pods: {seed:?} ({lines} config lines)");

        // Let the first status writes (the gated pods' conditions) settle.
        let namespaces: Vec<String> = (0..ClusterSpec::benchmark().namespaces).map(|ns| format!("ns-{ns}")).collect();
        let expected = synthetic::ready_endpoints(&cluster);
        let (gates, took) = synthetic::await_gates(&client, &namespaces, expected, Duration::from_secs(300)).await;
        println!("gate conditions True on the API server: {gates} of {expected}, {took:?} after the seed");
        let (peak, now) = controller.memory_mib();
        println!("controller memory after the first status writes: peak {peak} MiB, now {now} MiB");
        let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "ns-0");
        let mut samples = Vec::new();
        for change in 0..CHANGES {
            let name = format!("app-{}", change % ClusterSpec::benchmark().ingresses_per_namespace);
            let started = change_host(&ingresses, &name, &format!("changed-{change}.example.com")).await;
            match converged_on_new(&installation, Some(&id), Duration::from_secs(30)).await {
                Some(next) => {
                    samples.push(started.elapsed());
                    id = next;
                }
                None => println!("change {change}: not deployed within 30 s"),
            }
        }
        samples.sort();
        println!(
            "one Ingress change -> deployed on both HAProxy pods: n={} p50={:?} p95={:?} max={:?}",
            samples.len(),
            percentile(&samples, 0.5),
            percentile(&samples, 0.95),
            samples.last().copied().unwrap_or_default()
        );
        let (peak, now) = controller.memory_mib();
        println!("controller memory (gate on, 10,000 pods watched): peak {peak} MiB, now {now} MiB");
        println!("  resident by mapping: {}", synthetic::resident_breakdown(controller.pid()));
        if let Ok(output) = Command::new("pgrep").args(["-f", "agent --config-dir"]).output() {
            for pid in String::from_utf8_lossy(&output.stdout).split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
                println!("agent pid {pid}: peak {} MiB", memory_kib(pid, "VmHWM:") / 1024);
            }
        }
        match controller.metrics().await {
            Ok(metrics) => {
                for line in synthetic::metric_lines(&metrics, &[
                    "haptic_deploys_total", "haptic_validations_skipped_total", "haptic_renders_total",
                    "haptic_gate_conditions_set_total", "haptic_memory_",
                ]) {
                    println!("  {line}");
                }
            }
            Err(error) => println!("no /metrics: {error}"),
        }
        // Why the agents reloaded, from their logs (the kubelet keeps them).
        let mut reasons: std::collections::BTreeMap<String, usize> = Default::default();
        let logs = installation.bed.kubelet.state_dir().join("pods");
        for pod in std::fs::read_dir(&logs).into_iter().flatten().flatten() {
            let dir = pod.path().join("logs").join("agent");
            for file in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                for line in std::fs::read_to_string(file.path()).unwrap_or_default().lines() {
                    if let Some((_, reason)) = line.split_once("reloading reason=") {
                        let reason: String = reason.chars().take(60).collect();
                        *reasons.entry(reason).or_default() += 1;
                    } else if line.contains("applied at runtime") {
                        *reasons.entry("(runtime)".into()).or_default() += 1;
                    }
                }
            }
        }
        println!("agent applies by reason: {reasons:#?}");
        drop(controller);
    })
    .expect("pod network");
}

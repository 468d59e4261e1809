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

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use haptic::synthetic::{Cluster, ClusterSpec};
use haptic_testbed::kubelet::bed;
use harness::{AGENT_TOKEN, Installation, haptic_bin};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const CHANGES: usize = 20;

/// Makes a synthetic object creatable here: no server-set metadata,
/// non-loopback addresses (the apiserver refuses 127/8 in slices),
/// Services without selectors and slices not claimed by the EndpointSlice
/// controller (so it leaves them alone), Pods that no node runs.
fn creatable(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "uid", "creationTimestamp"] {
            metadata.remove(field);
        }
    }
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    match kind.as_str() {
        "Service" => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("selector");
            }
        }
        "EndpointSlice" => {
            object["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] =
                json!("bench.haptic");
        }
        "Pod" => {
            object["spec"]["nodeSelector"] = json!({"haptic.test/never": "true"});
            object["spec"]["containers"] = json!([{"name": "app", "image": "haptic.test/echo"}]);
            if let Some(fields) = object.as_object_mut() {
                fields.remove("status");
            }
        }
        _ => {}
    }
    let text = object.to_string().replace("\"127.1.", "\"10.201.");
    serde_json::from_str(&text).unwrap_or(object)
}

async fn create_all(client: &kube::Client, cluster: &Cluster) -> usize {
    let objects: Vec<Value> = cluster.objects().cloned().map(creatable).collect();
    // Pods are admitted only once their namespace's default ServiceAccount exists.
    for object in objects.iter().filter(|o| o["kind"] == "Namespace") {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if let Err(error) = bed::namespace(client, name).await {
            eprintln!("namespace {name}: {error:#}");
        }
    }
    futures::stream::iter(
        objects
            .iter()
            .filter(|o| o["kind"] != "Namespace" && o["kind"] != "IngressClass"),
    )
    .map(|object| {
        let client = client.clone();
        async move {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned();
            let params = PostParams::default();
            let result = match object["kind"].as_str() {
                Some("Service") => Api::<Service>::namespaced(client, &namespace)
                    .create(
                        &params,
                        &serde_json::from_value(object.clone()).expect("Service"),
                    )
                    .await
                    .map(drop),
                Some("EndpointSlice") => Api::<EndpointSlice>::namespaced(client, &namespace)
                    .create(
                        &params,
                        &serde_json::from_value(object.clone()).expect("slice"),
                    )
                    .await
                    .map(drop),
                Some("Pod") => Api::<Pod>::namespaced(client, &namespace)
                    .create(
                        &params,
                        &serde_json::from_value(object.clone()).expect("Pod"),
                    )
                    .await
                    .map(drop),
                Some("Ingress") => Api::<Ingress>::namespaced(client, &namespace)
                    .create(
                        &params,
                        &serde_json::from_value(object.clone()).expect("Ingress"),
                    )
                    .await
                    .map(drop),
                _ => Ok(()),
            };
            if let Err(error) = &result {
                eprintln!(
                    "creating {} {namespace}/{}: {error}",
                    object["kind"], object["metadata"]["name"]
                );
            }
            result.is_ok()
        }
    })
    .buffer_unordered(32)
    .filter(|ok| futures::future::ready(*ok))
    .count()
    .await
}

fn memory_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix(field).map(|rest| {
                rest.trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0)
}

fn start_controller(dir: &Path, kubeconfig: &Path) -> Child {
    let values = dir.join("values.yaml");
    std::fs::write(
        &values,
        "templateLibraries:\n  base:\n    frontends:\n      http: {bind: \"${POD_IP}:8080\"}\n      healthz: {bind: \"${POD_IP}:8081\"}\n  kubernetesBackends:\n    podReadinessGate: {enabled: true}\n",
    )
    .expect("values");
    let token = dir.join("token");
    std::fs::write(&token, AGENT_TOKEN).expect("token");
    Command::new(haptic_bin())
        .args([
            "controller",
            "--namespace",
            "haptic",
            "--no-leader-election",
            "--listen",
            "127.0.0.1:18451",
        ])
        .arg("--values")
        .arg(&values)
        .arg("--agent-token-file")
        .arg(&token)
        .env("KUBECONFIG", kubeconfig)
        .env("HAPTIC_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("haptic controller starts")
}

/// Waits until every HAProxy pod's workers all run one id other than
/// `previous` (and not the bootstrap one); returns it.
async fn converged_on_new(
    installation: &Installation,
    previous: Option<&str>,
    timeout: Duration,
) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let mut ids = Vec::new();
        for proxy in &installation.proxies {
            ids.push(
                proxy
                    .agent()
                    .state()
                    .await
                    .ok()
                    .and_then(|state| state.converged),
            );
        }
        if let Some(Some(first)) = ids.first()
            && first != "bootstrap"
            && Some(first.as_str()) != previous
            && ids.iter().all(|id| id.as_deref() == Some(first))
        {
            return Some(first.clone());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

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
        let mut controller = start_controller(dir.path(), &kubeconfig);
        let Some(mut id) = converged_on_new(&installation, None, Duration::from_secs(120)).await else {
            let _ = controller.kill();
            panic!("the fleet never ran a first configuration");
        };
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
        tokio::time::sleep(Duration::from_secs(20)).await;
        let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "ns-0");
        let names: Vec<String> = ingresses
            .list(&Default::default())
            .await
            .expect("ingresses")
            .items
            .into_iter()
            .filter_map(|i| i.metadata.name)
            .collect();
        let mut samples = Vec::new();
        for change in 0..CHANGES {
            let name = &names[change % names.len()];
            let mut ingress = ingresses.get(name).await.expect("ingress");
            let started = Instant::now();
            if let Some(rules) = ingress.spec.as_mut().and_then(|s| s.rules.as_mut())
                && let Some(rule) = rules.first_mut()
            {
                rule.host = Some(format!("changed-{change}.example.com"));
            }
            ingress.metadata.managed_fields = None;
            ingresses
                .patch(name, &PatchParams::apply("bench").force(), &Patch::Apply(&ingress))
                .await
                .expect("change");
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
        let pid = controller.id();
        println!(
            "controller memory (gate on, 10,000 pods watched): peak {} MiB, now {} MiB",
            memory_kib(pid, "VmHWM:") / 1024,
            memory_kib(pid, "VmRSS:") / 1024
        );
        if let Ok(output) = Command::new("pgrep").args(["-f", "agent --config-dir"]).output() {
            for pid in String::from_utf8_lossy(&output.stdout).split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
                println!("agent pid {pid}: peak {} MiB", memory_kib(pid, "VmHWM:") / 1024);
            }
        }
        if let Ok(metrics) = haptic_testbed::kubelet::http::get(
            "127.0.0.1:18451".parse().expect("addr"),
            None,
            "/metrics",
            &[],
            Duration::from_secs(2),
        )
        .await
        {
            for line in metrics.body.lines().filter(|l| {
                l.starts_with("haptic_deploys_total") || l.starts_with("haptic_validations_skipped_total")
                    || l.starts_with("haptic_renders_total") || l.starts_with("haptic_gate_conditions_set_total")
            }) {
                println!("  {line}");
            }
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
        let _ = controller.kill();
        let _ = controller.wait();
    })
    .expect("pod network");
}

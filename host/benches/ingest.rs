//! What the controller pays to take in a listed object, beside what any
//! client pays to parse it: TestScale's 10,000 pods as the API server sends
//! them (with `managedFields`), parsed into kube's `DynamicObject` as the
//! watcher does, then stored (`source::kubernetes::stored`: kind set,
//! trimmed by what the gate library ignores, kept as JSON text). Prints
//! figures; asserts nothing about time.
//!
//! `cargo bench -p haptic --features synthetic --bench ingest`.

use std::time::{Duration, Instant};

use haptic::engine::{Engine, load_libraries};
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::render::IngestTrim;
use haptic::source::kubernetes::stored;
use haptic::source::targets;
use haptic::synthetic::{Cluster, ClusterSpec};
use haptic::values::Values;
use kube::api::{ApiResource, DynamicObject};
use serde_json::{Value, json};

const ROUNDS: usize = 7;

fn main() -> anyhow::Result<()> {
    let spec = ClusterSpec {
        gated: true,
        ..ClusterSpec::benchmark()
    };
    let cluster = Cluster::generate(spec);
    // As a list's items arrive: no apiVersion or kind, the API server's
    // managedFields (the creator's and the controller's status apply).
    let pods: Vec<String> = cluster
        .objects()
        .filter(|object| object["kind"] == "Pod")
        .map(|pod| {
            let mut pod = pod.clone();
            if let Some(fields) = pod.as_object_mut() {
                fields.remove("apiVersion");
                fields.remove("kind");
            }
            pod["metadata"]["managedFields"] = managed_fields();
            pod.to_string()
        })
        .collect();
    let bytes: usize = pods.iter().map(String::len).sum();
    println!(
        "ingest benchmark: {} pods, {:.1} MiB of JSON",
        pods.len(),
        bytes as f64 / (1024.0 * 1024.0)
    );
    // The controller's own Pod watch: the bundled libraries, the gate on.
    let runtime = LibraryRuntime::new(RuntimeConfig::default())?;
    let mut values = Values::default();
    values.set_assignment("templateLibraries.kubernetesBackends.podReadinessGate.enabled=true")?;
    let engine = Engine::new(load_libraries(&runtime, &[])?, values)?;
    let target = targets(
        engine.watches().map(|(_, watch)| watch),
        &engine.ingest_trims(),
    )
    .into_iter()
    .find(|target| target.kind == "Pod")
    .ok_or_else(|| anyhow::anyhow!("no library watches Pods"))?;
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());

    let trim = IngestTrim::new(&target.trim);
    let mut parse = Vec::new();
    let mut store = Vec::new();
    let mut stored_bytes = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let objects: Vec<DynamicObject> = pods
            .iter()
            .map(|text| serde_json::from_str(text).expect("a pod"))
            .collect();
        parse.push(started.elapsed());
        let started = Instant::now();
        stored_bytes = objects
            .into_iter()
            .filter_map(|object| stored(&trim, &resource, object))
            .map(|object| object.json().len())
            .sum();
        store.push(started.elapsed());
    }
    report("parse into DynamicObject (any client)", &mut parse);
    report("stored: kind set, trimmed, kept as text", &mut store);
    println!(
        "stored text {:.1} MiB",
        stored_bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    println!(
        "{what}: median {:.1} ms, min {:.1}, max {:.1} (n={})",
        samples[samples.len() / 2].as_secs_f64() * 1e3,
        samples[0].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3,
        samples.len()
    );
}

/// Two managers' entries, shaped as the API server writes them.
fn managed_fields() -> Value {
    json!([
        {"manager": "bench", "operation": "Update", "apiVersion": "v1", "time": "2026-12-04T18:00:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}},
                       "f:nodeName": {}, "f:readinessGates": {}}}},
        {"manager": "haptic-controller", "operation": "Apply", "apiVersion": "v1",
         "time": "2026-12-04T18:00:01Z", "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {"f:conditions": {
            "k:{\"type\":\"haproxy-haptic.org/load-balancer-ready\"}": {
                ".": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}}}
    ])
}

//! Property: after any sequence of applies, deletes and re-lists, the
//! incremental render equals a fresh engine fed the final state. Sequences
//! come from a seeded generator (several seeds, many steps each), so a
//! failure names its seed and step and reproduces exactly.

use std::collections::BTreeMap;

use haptic::engine::{self, Engine};
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::render::{ClusterChange, ClusterObject, ObjectRef, Rendered};
use haptic::synthetic::{Cluster, ClusterSpec};
use haptic::values::Values;
use serde_json::Value;

/// A small linear congruential generator: deterministic, no dependency.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self, bound: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % bound.max(1)
    }
}

fn values() -> Values {
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.kubernetesBackends.podReadinessGate.enabled=true")
        .expect("values");
    values
}

fn engine(runtime: &LibraryRuntime) -> Engine {
    let libraries = engine::load_libraries(runtime, &[]).expect("libraries");
    Engine::new(libraries, values()).expect("engine")
}

fn reference(value: &Value) -> ObjectRef {
    ClusterObject::from_value(value.clone())
        .expect("a complete object")
        .reference
}

fn applied(value: &Value) -> ClusterChange {
    ClusterChange::Applied(ClusterObject::from_value(value.clone()).expect("object"))
}

fn same(a: &Rendered, b: &Rendered) -> bool {
    a.config == b.config && a.files == b.files && a.status_patches == b.status_patches
}

#[test]
fn incremental_renders_equal_a_fresh_render_of_the_final_state() {
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
    for seed in 1..=4u64 {
        let mut random = Seeded(seed);
        let mut cluster = Cluster::generate(ClusterSpec {
            gated: true,
            ..ClusterSpec::small()
        });
        let spec = *cluster.spec();
        let mut truth: BTreeMap<ObjectRef, Value> = cluster
            .objects()
            .map(|object| (reference(object), object.clone()))
            .collect();
        let mut incremental = engine(&runtime);
        incremental
            .render(truth.values().map(applied).collect())
            .expect("first render");

        for step in 0..40 {
            let mut changes = Vec::new();
            match random.next(5) {
                // A readiness flip: the slice and its pod.
                0 | 1 => {
                    let objects = cluster
                        .flip_endpoint(
                            random.next(spec.namespaces),
                            random.next(spec.services_per_namespace),
                            random.next(spec.endpoints_per_service),
                        )
                        .expect("flip");
                    for object in objects {
                        truth.insert(reference(&object), object.clone());
                        changes.push(applied(&object));
                    }
                }
                2 => {
                    let object = cluster.add_ingress();
                    truth.insert(reference(&object), object.clone());
                    changes.push(applied(&object));
                }
                // A deletion.
                3 => {
                    let keys: Vec<ObjectRef> = truth.keys().cloned().collect();
                    let gone = keys[random.next(keys.len())].clone();
                    truth.remove(&gone);
                    changes.push(ClusterChange::Deleted(gone));
                }
                // A re-list of one kind that missed a deletion.
                _ => {
                    let kinds: Vec<(String, String)> = truth
                        .keys()
                        .map(|r| (r.api_version.clone(), r.kind.clone()))
                        .collect::<std::collections::BTreeSet<_>>()
                        .into_iter()
                        .collect();
                    let (api_version, kind) = kinds[random.next(kinds.len())].clone();
                    let of_kind: Vec<ObjectRef> = truth
                        .keys()
                        .filter(|r| r.api_version == api_version && r.kind == kind)
                        .cloned()
                        .collect();
                    if let Some(missed) = of_kind.get(random.next(of_kind.len())) {
                        truth.remove(missed);
                    }
                    let objects = truth
                        .iter()
                        .filter(|(r, _)| r.api_version == api_version && r.kind == kind)
                        .filter_map(|(_, value)| ClusterObject::from_value(value.clone()))
                        .collect();
                    changes.push(ClusterChange::Relisted {
                        api_version,
                        kind,
                        objects,
                    });
                }
            }
            let got = incremental
                .render(changes)
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            if step % 10 == 9 {
                let mut fresh = engine(&runtime);
                let want = fresh
                    .render(truth.values().map(applied).collect())
                    .unwrap_or_else(|e| panic!("seed {seed} step {step} (fresh): {e}"));
                assert!(
                    same(&got, &want),
                    "seed {seed} step {step}: the incremental render differs from a fresh one\n--- incremental\n{}\n--- fresh\n{}",
                    got.config,
                    want.config
                );
            }
        }
    }
}

//! The status applier: writes the libraries' status patches to the API
//! server by server-side apply, one field manager per variant.
//!
//! Each variant's manager (`haptic-rendered`, `haptic-deployed`,
//! `haptic-render-failed`, `haptic-deploy-failed`) owns exactly the fields
//! its patches set. For a Pod's `status.conditions`, a list keyed by `type`,
//! that is one entry: the readiness gate's condition, written under
//! `haptic-deployed`, never disturbs the kubelet's conditions or another
//! controller's. When a variant may be written is the caller's decision
//! (`deployed` only once the fleet runs the render); this module only
//! writes, and skips what is already so.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::sinks::{ApiStatusWriter, StatusWriter};

use crate::library::types::{StatusPatch, StatusVariant};

/// The field manager of a variant.
pub fn field_manager(variant: StatusVariant) -> &'static str {
    match variant {
        StatusVariant::Rendered => "haptic-rendered",
        StatusVariant::Deployed => "haptic-deployed",
        StatusVariant::RenderFailed => "haptic-render-failed",
        StatusVariant::DeployFailed => "haptic-deploy-failed",
    }
}

/// One patch that could not be written.
#[derive(Debug, Clone)]
pub struct PatchFailure {
    /// `Kind namespace/name` and the variant.
    pub object: String,
    pub error: String,
}

/// What one [`StatusApplier::apply`] did.
#[derive(Debug, Clone, Default)]
pub struct ApplyReport {
    pub written: usize,
    /// (variant, apiVersion, kind, namespace, name) of each patch written.
    pub written_patches: Vec<(StatusVariant, String, String, String, String)>,
    /// Already true on the object, or written before with the same content.
    pub skipped: usize,
    pub failed: Vec<PatchFailure>,
}

/// Status writes sent at once.
const WRITES_IN_FLIGHT: usize = 16;

type PatchKey = (StatusVariant, String, String, String, String);

fn key(patch: &StatusPatch) -> PatchKey {
    (
        patch.variant,
        patch.api_version.clone(),
        patch.kind.clone(),
        patch.namespace.clone(),
        patch.name.clone(),
    )
}

/// What the applier has written (or found holding), shared with the render
/// loop so it looks up an object's current status only for patches that
/// still need a write.
#[derive(Debug, Clone, Default)]
pub struct StatusMemory(Arc<Mutex<HashMap<PatchKey, String>>>);

impl StatusMemory {
    /// This very patch was written, or found holding, before.
    pub fn is_written(&self, patch: &StatusPatch) -> bool {
        self.lock().get(&key(patch)) == Some(&patch.status)
    }

    /// Remembers `patch` as written when `current` (the object's status as
    /// the watch last saw it) already holds it, e.g. a pod whose gate
    /// condition is already True, so a restarted controller does not patch
    /// 10,000 pods again; returns whether it holds.
    pub fn note_if_holds(&self, patch: &StatusPatch, current: &Value) -> bool {
        let holding = serde_json::from_str::<Value>(&patch.status)
            .is_ok_and(|status| holds(&status, current));
        if holding {
            self.lock().insert(key(patch), patch.status.clone());
        }
        holding
    }

    /// How many patches it remembers.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// It remembers none.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PatchKey, String>> {
        // A poisoned map is still a valid cache.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Writes status patches; remembers what it wrote so an unchanged patch is
/// not sent again on every render.
pub struct StatusApplier {
    writer: Arc<dyn StatusWriter>,
    /// The status last written per (variant, object).
    written: StatusMemory,
}

impl std::fmt::Debug for StatusApplier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusApplier")
            .field("written", &self.written.lock().len())
            .finish_non_exhaustive()
    }
}

impl StatusApplier {
    /// Writes through the API server (server-side apply).
    pub fn new(client: kube::Client) -> Self {
        Self::with_writer(Arc::new(ApiStatusWriter::new(client)))
    }

    /// Writes through `writer` (`haptic run`'s in-memory objects).
    pub fn with_writer(writer: Arc<dyn StatusWriter>) -> Self {
        Self {
            writer,
            written: StatusMemory::default(),
        }
    }

    /// The applier's memory of what it wrote.
    pub fn memory(&self) -> StatusMemory {
        self.written.clone()
    }

    /// Writes `patches`, skipping those already written or found holding
    /// ([`StatusMemory::note_if_holds`]).
    pub async fn apply<'a>(
        &mut self,
        patches: impl IntoIterator<Item = &'a StatusPatch>,
    ) -> ApplyReport {
        let mut report = ApplyReport::default();
        let mut to_write = Vec::new();
        for patch in patches {
            if self.written.is_written(patch) {
                report.skipped += 1;
                continue;
            }
            let status: Value = match serde_json::from_str(&patch.status) {
                Ok(status) => status,
                Err(error) => {
                    report
                        .failed
                        .push(failure(patch, format!("the patch is not JSON: {error}")));
                    continue;
                }
            };
            to_write.push((patch, status));
        }
        // Several writes in flight: the first render of a large gated
        // cluster sets thousands of conditions, and one at a time would hold
        // the next deploy for as many round trips.
        for chunk in to_write.chunks(WRITES_IN_FLIGHT) {
            let writes = chunk
                .iter()
                .map(|(patch, status)| write_one(self, patch, status.clone()));
            for (patch, result) in futures::future::join_all(writes).await {
                match result {
                    Ok(()) => {
                        self.written.lock().insert(key(patch), patch.status.clone());
                        report.written += 1;
                        report.written_patches.push(key(patch));
                    }
                    Err(error) => report.failed.push(failure(patch, error)),
                }
            }
        }
        report
    }

    /// Forgets what was written to an object (it was deleted, or its
    /// status changed under another manager), so the next patch is sent.
    pub fn forget(&mut self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        self.written.lock().retain(|(_, v, k, ns, n), _| {
            !(v == api_version && k == kind && ns == namespace && n == name)
        });
    }
}

/// One write, with the patch it was for.
async fn write_one<'a>(
    applier: &'a StatusApplier,
    patch: &'a StatusPatch,
    status: Value,
) -> (&'a StatusPatch, Result<(), String>) {
    (patch, applier.writer.write(patch, status).await)
}

fn failure(patch: &StatusPatch, error: String) -> PatchFailure {
    PatchFailure {
        object: format!(
            "{} {}/{} ({})",
            patch.kind,
            patch.namespace,
            patch.name,
            field_manager(patch.variant)
        ),
        error,
    }
}

/// Whether `current` already holds everything `patch` sets, with the
/// merge rules server-side apply uses for status: objects field by field,
/// lists of objects with a `type` key entry by entry (conditions), other
/// values by equality. A condition's timestamps and message are its
/// writer's to keep, so a True condition with other timestamps holds.
pub fn holds(patch: &Value, current: &Value) -> bool {
    match (patch, current) {
        (Value::Object(patch), Value::Object(current)) => patch.iter().all(|(key, value)| {
            if key == "lastTransitionTime" || key == "lastProbeTime" {
                return true;
            }
            current.get(key).is_some_and(|c| holds(value, c))
        }),
        (Value::Array(patch), Value::Array(current)) if keyed_by_type(patch) => {
            patch.iter().all(|entry| {
                let kind = entry.get("type");
                current
                    .iter()
                    .find(|c| c.get("type") == kind)
                    .is_some_and(|c| holds(entry, c))
            })
        }
        _ => patch == current,
    }
}

fn keyed_by_type(list: &[Value]) -> bool {
    !list.is_empty()
        && list
            .iter()
            .all(|e| e.get("type").is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_condition_holds_when_its_entry_matches_whatever_else_is_there() {
        let patch = json!({"conditions": [{"type": "haproxy-haptic.org/load-balancer-ready", "status": "True"}]});
        let current = json!({
            "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "haproxy-haptic.org/load-balancer-ready", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"},
            ]
        });
        assert!(holds(&patch, &current));
        let unset = json!({"conditions": [{"type": "Ready", "status": "False"}]});
        assert!(!holds(&patch, &unset));
        let false_ = json!({"conditions": [{"type": "haproxy-haptic.org/load-balancer-ready", "status": "False"}]});
        assert!(!holds(&patch, &false_));
        assert!(!holds(&patch, &json!({})));
    }

    #[test]
    fn other_lists_compare_whole() {
        let patch = json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}});
        assert!(holds(
            &patch,
            &json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}})
        ));
        assert!(!holds(
            &patch,
            &json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.2"}]}})
        ));
        assert!(!holds(
            &patch,
            &json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}})
        ));
    }

    #[test]
    fn every_variant_has_its_own_manager() {
        let managers: std::collections::BTreeSet<_> = StatusVariant::ALL
            .iter()
            .map(|v| field_manager(*v))
            .collect();
        assert_eq!(managers.len(), 4);
        assert_eq!(field_manager(StatusVariant::Deployed), "haptic-deployed");
    }
}

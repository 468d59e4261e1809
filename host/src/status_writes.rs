//! Writing the libraries' status patches, wherever the objects live: a
//! [`StatusWriter`] is the API server by server-side apply
//! ([`ApiStatusWriter`]) for the controller, or `haptic run`'s in-memory
//! objects; the [`StatusApplier`] writes through either, one field manager
//! per variant, and remembers what it wrote ([`StatusMemory`]). (Not
//! `haptic status`, which shows why a rollout waits, nor `haptic run`'s
//! `/status` page, which shows what was written here.)
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

use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::library::types::{ObjectRef, StatusPatch, StatusVariant};

/// Why a status patch was not written.
#[derive(Debug, Error)]
pub enum StatusWriteError {
    /// The API server answered with an error (RBAC, a missing object, a
    /// field the schema refuses).
    #[error("{message} ({code})")]
    Refused { message: String, code: u16 },
    /// The request got no answer (connection, TLS, timeout).
    #[error(transparent)]
    Request(Box<kube::Error>),
}

/// Writes one status patch for its variant's field manager.
pub trait StatusWriter: Send + Sync {
    fn write<'a>(&'a self, patch: &'a StatusPatch) -> BoxFuture<'a, Result<(), StatusWriteError>>;
}

/// Server-side apply to `<resource>/status`.
#[derive(Clone)]
pub struct ApiStatusWriter {
    client: kube::Client,
}

impl ApiStatusWriter {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

impl StatusWriter for ApiStatusWriter {
    fn write<'a>(&'a self, patch: &'a StatusPatch) -> BoxFuture<'a, Result<(), StatusWriteError>> {
        Box::pin(async move {
            let object = &patch.object;
            let (group, version) = match object.api_version.split_once('/') {
                Some((group, version)) => (group, version),
                None => ("", object.api_version.as_str()),
            };
            let resource =
                ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &object.kind));
            let api: Api<DynamicObject> = if object.namespace.is_empty() {
                Api::all_with(self.client.clone(), &resource)
            } else {
                Api::namespaced_with(self.client.clone(), &object.namespace, &resource)
            };
            let mut metadata = serde_json::json!({ "name": object.name });
            if !object.namespace.is_empty() {
                metadata["namespace"] = Value::String(object.namespace.clone());
            }
            let mut status = patch.status.to_value();
            stamp_conditions(&mut status, &now_rfc3339());
            let body = serde_json::json!({
                "apiVersion": object.api_version,
                "kind": object.kind,
                "metadata": metadata,
                "status": status,
            });
            // `force`: the variant's manager is the only writer of these
            // fields by design; a conflict means another installation of
            // the same controller, which the docs say not to run.
            let params = PatchParams::apply(patch.variant.field_manager()).force();
            api.patch_status(&object.name, &params, &Patch::Apply(&body))
                .await
                .map(drop)
                .map_err(|error| match error {
                    kube::Error::Api(status) => StatusWriteError::Refused {
                        message: status.message,
                        code: status.code,
                    },
                    other => StatusWriteError::Request(Box::new(other)),
                })
        })
    }
}

/// The current time as Kubernetes writes it (`2026-12-01T10:00:00Z`).
fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map_or_else(
            |_| k8s_openapi::jiff::Timestamp::now().to_string(),
            |t| t.to_string(),
        )
}

/// Gives every condition without a `lastTransitionTime` the write's time.
///
/// Libraries leave it out so their output is a function of their input (a
/// clock would change every render); the API schema of most kinds
/// (`metav1.Condition`: Gateway API objects) requires it. A patch is only
/// written when its content changed ([`StatusMemory`]), so the time is that
/// of the change, as the field means. Conditions anywhere in the status are
/// stamped: a Gateway's sit in `status.listeners[].conditions` too.
pub fn stamp_conditions(status: &mut Value, now: &str) {
    match status {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                if key == "conditions"
                    && let Value::Array(conditions) = value
                {
                    for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
                        if condition.contains_key("type") && condition.contains_key("status") {
                            condition
                                .entry("lastTransitionTime")
                                .or_insert_with(|| Value::String(now.to_owned()));
                        }
                    }
                } else {
                    stamp_conditions(value, now);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| stamp_conditions(item, now)),
        _ => {}
    }
}

/// One patch that could not be written.
#[derive(Debug)]
pub struct PatchFailure {
    /// `Kind namespace/name` and the variant.
    pub object: String,
    pub error: StatusWriteError,
}

/// What one [`StatusApplier::apply`] did.
#[derive(Debug, Default)]
pub struct ApplyReport {
    pub written: usize,
    /// The variant and object of each patch written.
    pub written_patches: Vec<PatchKey>,
    /// Already true on the object, or written before with the same content.
    pub skipped: usize,
    pub failed: Vec<PatchFailure>,
}

/// Status writes sent at once.
const WRITES_IN_FLIGHT: usize = 16;

/// A patch's variant and object: what one field manager writes to.
pub type PatchKey = (StatusVariant, ObjectRef);

fn key(patch: &StatusPatch) -> PatchKey {
    (patch.variant, patch.object.clone())
}

/// What the applier has written (or found holding), shared with the render
/// loop so it looks up an object's current status only for patches that
/// still need a write. It keeps the patches themselves, shared with the
/// render's output, rather than copies of their status.
#[derive(Debug, Clone, Default)]
pub struct StatusMemory(Arc<Mutex<HashMap<PatchKey, Arc<StatusPatch>>>>);

impl StatusMemory {
    /// This very patch was written, or found holding, before.
    pub fn is_written(&self, patch: &StatusPatch) -> bool {
        self.lock()
            .get(&key(patch))
            .is_some_and(|written| written.status == patch.status)
    }

    /// Remembers `patch` as written when `current` (the object's status as
    /// the watch last saw it) already holds it, e.g. a pod whose gate
    /// condition is already True, so a restarted controller does not patch
    /// 10,000 pods again; returns whether it holds.
    pub fn note_if_holds(&self, patch: &Arc<StatusPatch>, current: &Value) -> bool {
        let holding = current
            .as_object()
            .is_some_and(|current| holds_fields(&patch.status.to_map(), current));
        if holding {
            self.lock().insert(key(patch), patch.clone());
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PatchKey, Arc<StatusPatch>>> {
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
        patches: impl IntoIterator<Item = &'a Arc<StatusPatch>>,
    ) -> ApplyReport {
        let mut report = ApplyReport::default();
        let mut to_write = Vec::new();
        for patch in patches {
            if self.written.is_written(patch) {
                report.skipped += 1;
                continue;
            }
            to_write.push(patch);
        }
        // Several writes in flight: the first render of a large gated
        // cluster sets thousands of conditions, and one at a time would hold
        // the next deploy for as many round trips.
        for chunk in to_write.chunks(WRITES_IN_FLIGHT) {
            let writes = chunk.iter().map(|patch| write_one(self, patch));
            for (patch, result) in futures::future::join_all(writes).await {
                match result {
                    Ok(()) => {
                        self.written.lock().insert(key(patch), patch.clone());
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
    pub fn forget(&mut self, object: &ObjectRef) {
        self.written
            .lock()
            .retain(|(_, written), _| written != object);
    }
}

/// One write, with the patch it was for.
async fn write_one<'a>(
    applier: &'a StatusApplier,
    patch: &'a Arc<StatusPatch>,
) -> (&'a Arc<StatusPatch>, Result<(), StatusWriteError>) {
    (patch, applier.writer.write(patch).await)
}

fn failure(patch: &StatusPatch, error: StatusWriteError) -> PatchFailure {
    PatchFailure {
        object: format!(
            "{} {}/{} ({})",
            patch.object.kind,
            patch.object.namespace,
            patch.object.name,
            patch.variant.field_manager()
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
        (Value::Object(patch), Value::Object(current)) => holds_fields(patch, current),
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

/// [`holds`] for the fields of an object.
fn holds_fields(patch: &Map<String, Value>, current: &Map<String, Value>) -> bool {
    patch.iter().all(|(key, value)| {
        if key == "lastTransitionTime" || key == "lastProbeTime" {
            return true;
        }
        current.get(key).is_some_and(|c| holds(value, c))
    })
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
    fn conditions_without_a_transition_time_get_the_writes_time_wherever_they_are() {
        let mut status = json!({
            "conditions": [{"type": "Accepted", "status": "True"}],
            "listeners": [{"name": "http", "conditions": [
                {"type": "Programmed", "status": "True"},
                {"type": "Kept", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"}
            ]}]
        });
        stamp_conditions(&mut status, "2026-12-01T10:00:00Z");
        assert_eq!(
            status["conditions"][0]["lastTransitionTime"],
            "2026-12-01T10:00:00Z"
        );
        let listener = &status["listeners"][0]["conditions"];
        assert_eq!(listener[0]["lastTransitionTime"], "2026-12-01T10:00:00Z");
        assert_eq!(listener[1]["lastTransitionTime"], "2020-01-01T00:00:00Z");
        assert!(now_rfc3339().ends_with('Z'), "{}", now_rfc3339());
    }

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
            .map(|v| v.field_manager())
            .collect();
        assert_eq!(managers.len(), 4);
        assert_eq!(StatusVariant::Deployed.field_manager(), "haptic-deployed");
    }
}

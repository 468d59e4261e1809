//! Owned objects (contract 0.3.0): objects a library asks the host to keep
//! applied in the cluster, such as a Service per Gateway, each owned by an
//! object the library watches.
//!
//! This module says how a render's owned-object items become the exact
//! manifests the host applies ([`DesiredObject::new`]); the engine builds
//! them when it finishes a render, `haptic render` shows and writes
//! those, and the controller's [`OwnedApplier`](crate::controller::OwnedApplier)
//! applies them. One builder for both, so what `render` shows is what the
//! cluster gets.
//!
//! The rules (docs/owned-objects.md says them for library authors):
//! - server-side apply under the field manager [`FIELD_MANAGER`];
//! - `metadata.ownerReferences` names the owner (controller: true), so
//!   Kubernetes' garbage collector deletes the object with its owner;
//! - the label [`OWNED_BY_LABEL`] names the library, so a restarted
//!   controller finds what it applied before;
//! - the object lives in its owner's namespace (Kubernetes refuses owner
//!   references across namespaces);
//! - the kind must be in the library's plan (`applies`).

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::render::ObjectRef;

/// The field manager that applies every owned object.
pub const FIELD_MANAGER: &str = "haptic-owned";

/// The label naming the library that asked for an object.
pub const OWNED_BY_LABEL: &str = "haproxy-haptic.org/owned-by";

/// Metadata the API server sets; a library's manifest may not carry it.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
    "generateName",
];

/// An owned object as the host applies it.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredObject {
    /// The library that asked for it.
    pub library: Arc<str>,
    /// The object itself.
    pub reference: ObjectRef,
    /// Its owner, a watched object.
    pub owner: ObjectRef,
    /// The whole manifest sent by server-side apply.
    pub manifest: Value,
}

impl fmt::Display for DesiredObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", display(&self.reference))
    }
}

#[cfg(test)]
#[test]
fn label_values_follow_the_api_server() {
    for good in ["", "a", "gateway-api.haproxy-haptic.org", "A_b-9"] {
        assert!(is_label_value(good), "{good}");
    }
    for bad in [
        "haproxy-haptic.org/gateway-api",
        "-a",
        "a.",
        "a b",
        &"x".repeat(64),
    ] {
        assert!(!is_label_value(bad), "{bad}");
    }
}

/// `Kind namespace/name` (or `Kind name` for a cluster-scoped object).
pub fn display(reference: &ObjectRef) -> String {
    if reference.namespace.is_empty() {
        format!("{} {}", reference.kind, reference.name)
    } else {
        format!(
            "{} {}/{}",
            reference.kind, reference.namespace, reference.name
        )
    }
}

/// Why an owned object is not applied.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OwnedError {
    /// The library named an owner that is not among its watched objects.
    #[error(
        "library `{library}` asks for {object} owned by `{owner}`, which is not one of its watched objects; an owner must be an object the library watches"
    )]
    OwnerNotWatched {
        library: String,
        object: String,
        owner: String,
    },
    /// The kind is not in the library's plan.
    #[error(
        "library `{library}` asks for {object}, but its plan does not declare that it applies `{kind}`; add it to the plan (`Plan::applies`)"
    )]
    NotPlanned {
        library: String,
        object: String,
        kind: String,
    },
    /// A label value the API server would refuse (it would refuse the
    /// whole object, at every resync).
    #[error(
        "library `{library}` asks for {object} with label {key}={value:?}, which the API server refuses: a label value is at most 63 characters of [A-Za-z0-9._-], starting and ending with a letter or digit"
    )]
    BadLabel {
        library: String,
        object: String,
        key: String,
        value: String,
    },
}

/// A label value as the API server accepts it (`validation.IsValidLabelValue`).
fn is_label_value(value: &str) -> bool {
    let edges = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    value.len() <= 63
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && edges(value.chars().next())
        && edges(value.chars().next_back())
}

/// Why the API server would refuse `body`'s labels, if it would: the
/// problem of the owned object `reference` that `library` asked for.
pub fn label_problem(library: &str, reference: &ObjectRef, body: &Value) -> Option<OwnedError> {
    let labels = body.pointer("/metadata/labels").and_then(Value::as_object);
    let (key, value) = labels.into_iter().flatten().find_map(|(key, value)| {
        let text = value.as_str().unwrap_or_default();
        (!is_label_value(text)).then(|| (key.clone(), text.to_owned()))
    })?;
    Some(OwnedError::BadLabel {
        library: library.to_owned(),
        object: display(reference),
        key,
        value,
    })
}

/// A render's owned objects as the host applies them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OwnedObjects {
    pub desired: Vec<DesiredObject>,
    /// `apiVersion/kind` of every kind some enabled library applies: the
    /// kinds the controller prunes what it applied before of.
    pub kinds: Vec<String>,
}

impl DesiredObject {
    /// The object `library` asks for, owned by `owner` (whose uid the owner
    /// reference needs), from the library's fields `body`.
    pub fn new(
        library: Arc<str>,
        reference: ObjectRef,
        owner: ObjectRef,
        owner_uid: &str,
        body: Value,
    ) -> Self {
        Self {
            manifest: manifest(&library, &reference, &owner, owner_uid, body),
            library,
            reference,
            owner,
        }
    }
}

/// The library's fields with the host's: identity, owner reference and
/// label. A manifest file without the owner's uid (offline) shows it empty.
fn manifest(
    library: &str,
    reference: &ObjectRef,
    owner: &ObjectRef,
    owner_uid: &str,
    body: Value,
) -> Value {
    let mut body = match body {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut metadata = match body.remove("metadata") {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    for field in SERVER_METADATA {
        metadata.remove(*field);
    }
    metadata.insert("name".into(), Value::String(reference.name.clone()));
    if reference.namespace.is_empty() {
        metadata.remove("namespace");
    } else {
        metadata.insert(
            "namespace".into(),
            Value::String(reference.namespace.clone()),
        );
    }
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    labels[OWNED_BY_LABEL] = Value::String(library.to_owned());
    metadata.insert(
        "ownerReferences".into(),
        json!([{
            "apiVersion": owner.api_version,
            "kind": owner.kind,
            "name": owner.name,
            "uid": owner_uid,
            "controller": true,
        }]),
    );
    let mut manifest = Map::new();
    manifest.insert(
        "apiVersion".into(),
        Value::String(reference.api_version.clone()),
    );
    manifest.insert("kind".into(), Value::String(reference.kind.clone()));
    manifest.insert("metadata".into(), Value::Object(metadata));
    for (key, value) in body {
        if key != "apiVersion" && key != "kind" && key != "status" {
            manifest.insert(key, value);
        }
    }
    Value::Object(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_host_sets_identity_owner_and_label_over_the_library() {
        let body = json!({
            "apiVersion": "v9", "kind": "Nope",
            "metadata": {"name": "other", "namespace": "elsewhere", "uid": "x",
                "ownerReferences": [], "labels": {"app": "gw"}},
            "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {}}
        });
        let manifest = manifest(
            "gateway-api",
            &reference("Service", "gw-web"),
            &reference("ConfigMap", "gw"),
            "1234",
            body,
        );
        assert_eq!(manifest["apiVersion"], "v1");
        assert_eq!(manifest["kind"], "Service");
        assert_eq!(manifest["metadata"]["name"], "gw-web");
        assert_eq!(manifest["metadata"]["namespace"], "shop");
        assert!(manifest["metadata"].get("uid").is_none());
        assert_eq!(manifest["metadata"]["labels"]["app"], "gw");
        assert_eq!(
            manifest["metadata"]["labels"][OWNED_BY_LABEL],
            "gateway-api"
        );
        assert_eq!(
            manifest["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "gw", "uid": "1234", "controller": true}])
        );
        assert_eq!(manifest["spec"]["type"], "LoadBalancer");
        assert!(manifest.get("status").is_none(), "status is not applied");
    }
}

//! The host's view of the cluster, and which part of it each library sees.
//!
//! Objects are stored once, untrimmed; each library gets them filtered by its
//! watches and trimmed by each watch's `ignore-fields`, under its own keys.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::RenderError;
use crate::library::types::{Change, Object, ObjectKey, Watch};
use crate::manifests;

/// Identifies an object in the cluster view.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// A Kubernetes object as the host stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterObject {
    pub reference: ObjectRef,
    pub resource_version: String,
    pub labels: BTreeMap<String, String>,
    pub value: serde_json::Value,
}

impl ClusterObject {
    /// Builds the stored form of an object; `None` when it lacks apiVersion,
    /// kind or metadata.name (sources reject those before they get here).
    pub fn from_value(value: serde_json::Value) -> Option<Self> {
        let text = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let reference = ObjectRef {
            api_version: text("/apiVersion")?,
            kind: text("/kind")?,
            namespace: text("/metadata/namespace").unwrap_or_default(),
            name: text("/metadata/name")?,
        };
        let resource_version = text("/metadata/resourceVersion").unwrap_or_default();
        let labels = value
            .pointer("/metadata/labels")
            .and_then(|labels| labels.as_object())
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            reference,
            resource_version,
            labels,
            value,
        })
    }
}

/// A change to the cluster view.
#[derive(Debug, Clone)]
pub enum ClusterChange {
    Applied(ClusterObject),
    Deleted(ObjectRef),
}

#[derive(Default)]
pub(super) struct ClusterStore {
    objects: BTreeMap<ObjectRef, Arc<ClusterObject>>,
}

impl ClusterStore {
    pub(super) fn objects(&self) -> impl Iterator<Item = &ClusterObject> {
        self.objects.values().map(Arc::as_ref)
    }

    /// Applies changes and returns the references that changed.
    pub(super) fn apply(&mut self, changes: Vec<ClusterChange>) -> BTreeSet<ObjectRef> {
        let mut changed = BTreeSet::new();
        for change in changes {
            match change {
                ClusterChange::Applied(object) => {
                    changed.insert(object.reference.clone());
                    self.objects
                        .insert(object.reference.clone(), Arc::new(object));
                }
                ClusterChange::Deleted(reference) => {
                    self.objects.remove(&reference);
                    changed.insert(reference);
                }
            }
        }
        changed
    }

    /// Everything `watches` select, trimmed, under the library's keys.
    pub(super) fn view(
        &self,
        library: &str,
        watches: &[Watch],
    ) -> Result<BTreeMap<ObjectKey, Object>, RenderError> {
        let mut view = BTreeMap::new();
        for watch in watches {
            let selector = selector(library, watch)?;
            for object in self.objects.values() {
                if selects(watch, selector.as_ref(), object) {
                    let object = library_object(watch, object);
                    view.insert(object.key.clone(), object);
                }
            }
        }
        Ok(view)
    }

    /// What changed for one library: objects its watches now select are
    /// applied; objects it saw that are gone or no longer selected are deleted.
    pub(super) fn changes_for(
        &self,
        library: &str,
        watches: &[Watch],
        changed: &BTreeSet<ObjectRef>,
        seen: &BTreeSet<ObjectKey>,
    ) -> Result<Vec<Change>, RenderError> {
        let mut changes = Vec::new();
        for watch in watches {
            let selector = selector(library, watch)?;
            for reference in changed {
                if reference.api_version != watch.api_version || reference.kind != watch.kind {
                    continue;
                }
                let key = ObjectKey {
                    watch: watch.name.clone(),
                    namespace: reference.namespace.clone(),
                    name: reference.name.clone(),
                };
                match self.objects.get(reference) {
                    Some(object) if selects(watch, selector.as_ref(), object) => {
                        changes.push(Change::Applied(library_object(watch, object)));
                    }
                    _ if seen.contains(&key) => changes.push(Change::Deleted(key)),
                    _ => {}
                }
            }
        }
        Ok(changes)
    }
}

fn selector(library: &str, watch: &Watch) -> Result<Option<manifests::LabelSelector>, RenderError> {
    watch
        .label_selector
        .as_deref()
        .filter(|selector| !selector.trim().is_empty())
        .map(manifests::LabelSelector::parse)
        .transpose()
        .map_err(|message| RenderError::BadWatch {
            library: library.to_owned(),
            watch: watch.name.clone(),
            message,
        })
}

fn selects(
    watch: &Watch,
    selector: Option<&manifests::LabelSelector>,
    object: &ClusterObject,
) -> bool {
    let reference = &object.reference;
    reference.api_version == watch.api_version
        && reference.kind == watch.kind
        && watch
            .namespace
            .as_deref()
            .is_none_or(|namespace| namespace == reference.namespace)
        && selector.is_none_or(|selector| selector.matches(&object.labels))
}

fn library_object(watch: &Watch, object: &ClusterObject) -> Object {
    let json = if watch.ignore_fields.is_empty() {
        object.value.to_string()
    } else {
        let mut trimmed = object.value.clone();
        manifests::trim(&mut trimmed, &watch.ignore_fields);
        trimmed.to_string()
    };
    Object {
        key: ObjectKey {
            watch: watch.name.clone(),
            namespace: object.reference.namespace.clone(),
            name: object.reference.name.clone(),
        },
        resource_version: object.resource_version.clone(),
        json,
    }
}

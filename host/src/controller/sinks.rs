//! Where the controller's outputs go: status writes and failure events.
//! In a cluster both go to the API server; `haptic run` keeps status on its
//! in-memory objects and logs events, through the same render, deploy and
//! status code.

use std::future::Future;
use std::pin::Pin;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::Value;

use super::status::field_manager;
use crate::library::types::StatusPatch;
use crate::render::ObjectRef;

/// A boxed future, for the sinks' object-safe methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Writes one status patch (already parsed) for its variant's field manager.
pub trait StatusWriter: Send + Sync {
    fn write<'a>(
        &'a self,
        patch: &'a StatusPatch,
        status: Value,
    ) -> BoxFuture<'a, Result<(), String>>;
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
    fn write<'a>(
        &'a self,
        patch: &'a StatusPatch,
        status: Value,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let (group, version) = match patch.api_version.split_once('/') {
                Some((group, version)) => (group, version),
                None => ("", patch.api_version.as_str()),
            };
            let resource =
                ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &patch.kind));
            let api: Api<DynamicObject> = if patch.namespace.is_empty() {
                Api::all_with(self.client.clone(), &resource)
            } else {
                Api::namespaced_with(self.client.clone(), &patch.namespace, &resource)
            };
            let mut metadata = serde_json::json!({ "name": patch.name });
            if !patch.namespace.is_empty() {
                metadata["namespace"] = Value::String(patch.namespace.clone());
            }
            let body = serde_json::json!({
                "apiVersion": patch.api_version,
                "kind": patch.kind,
                "metadata": metadata,
                "status": status,
            });
            // `force`: the variant's manager is the only writer of these
            // fields by design; a conflict means another installation of
            // the same controller, which the docs say not to run.
            let params = PatchParams::apply(field_manager(patch.variant)).force();
            api.patch_status(&patch.name, &params, &Patch::Apply(&body))
                .await
                .map(drop)
                .map_err(|error| match error {
                    kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
                    other => other.to_string(),
                })
        })
    }
}

/// A failure or a library's warning worth telling the object's owner about
/// (a Kubernetes Event of type Warning).
#[derive(Debug, Clone)]
pub struct FailureEvent {
    /// `RenderFailed`, `ConfigRefused`, a library's own (`TLSSecretMissing`).
    pub reason: std::borrow::Cow<'static, str>,
    pub note: String,
    /// The object a library blamed, if any.
    pub object: Option<ObjectRef>,
}

/// Reports failures.
pub trait EventSink: Send + Sync {
    fn publish(&self, event: FailureEvent) -> BoxFuture<'_, ()>;
}

/// Kubernetes Events (events.k8s.io), on the blamed object or else on the
/// controller's own pod.
pub struct ApiEvents {
    recorder: Recorder,
    own_pod: ObjectReference,
}

impl ApiEvents {
    pub fn new(client: kube::Client, namespace: &str, identity: &str) -> Self {
        Self {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: "haptic-controller".into(),
                    instance: Some(identity.to_owned()),
                },
            ),
            own_pod: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(namespace.to_owned()),
                name: Some(identity.to_owned()),
                ..ObjectReference::default()
            },
        }
    }
}

impl EventSink for ApiEvents {
    fn publish(&self, event: FailureEvent) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let regarding = match &event.object {
                Some(object) => ObjectReference {
                    api_version: Some(object.api_version.clone()),
                    kind: Some(object.kind.clone()),
                    namespace: Some(object.namespace.clone()).filter(|ns| !ns.is_empty()),
                    name: Some(object.name.clone()),
                    ..ObjectReference::default()
                },
                None => self.own_pod.clone(),
            };
            // An Event's note is at most 1 kB.
            let mut note = event.note;
            if note.len() > 1000 {
                let mut end = 1000;
                while !note.is_char_boundary(end) {
                    end -= 1;
                }
                note.truncate(end);
            }
            let event = Event {
                type_: EventType::Warning,
                reason: event.reason.into_owned(),
                note: Some(note),
                action: "Render".into(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, &regarding).await {
                tracing::warn!(%error, "cannot publish the Event about a failed render");
            }
        })
    }
}

/// Events as log lines (no cluster to hold them).
#[derive(Debug, Default)]
pub struct LogEvents;

impl EventSink for LogEvents {
    fn publish(&self, event: FailureEvent) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let object = event
                .object
                .map(|o| format!(" on {} {}/{}", o.kind, o.namespace, o.name))
                .unwrap_or_default();
            tracing::warn!("event {}{object}: {}", event.reason, event.note);
        })
    }
}

//! Where failure events go: Kubernetes Events in a cluster; `haptic run`
//! brings its own sink (log lines) through the same render, deploy and
//! status code. (Status
//! writes have their own sink, [`StatusWriter`](crate::status_writes::StatusWriter).)

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::render::ObjectRef;

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

impl FailureEvent {
    /// The note without a leading `Kind namespace/name: ` naming the very
    /// object the event is on (libraries often start their messages so, for
    /// the log), so an Event never reads "on Ingress x: Ingress x: ...".
    pub fn note_on_object(&self) -> &str {
        let Some(object) = &self.object else {
            return &self.note;
        };
        let name = if object.namespace.is_empty() {
            object.name.clone()
        } else {
            format!("{}/{}", object.namespace, object.name)
        };
        let prefix_len = object.kind.len() + 1 + name.len() + 2;
        match self.note.get(..prefix_len) {
            Some(prefix) if prefix.eq_ignore_ascii_case(&format!("{} {name}: ", object.kind)) => {
                &self.note[prefix_len..]
            }
            _ => &self.note,
        }
    }
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
            let mut note = event.note_on_object().to_owned();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn event(note: &str) -> FailureEvent {
        FailureEvent {
            reason: "TLSSecretMissing".into(),
            note: note.to_owned(),
            object: Some(ObjectRef {
                api_version: "networking.k8s.io/v1".into(),
                kind: "Ingress".into(),
                namespace: "shop".into(),
                name: "web".into(),
            }),
        }
    }

    /// Issue 24, item 7: "on Ingress X: Ingress X: ...".
    #[test]
    fn a_note_does_not_repeat_the_object_the_event_is_on() {
        assert_eq!(
            event("Ingress shop/web: Secret shop/tls is missing").note_on_object(),
            "Secret shop/tls is missing"
        );
        assert_eq!(
            event("ingress shop/web: no port").note_on_object(),
            "no port"
        );
        assert_eq!(
            event("Ingress shop/webshop: other").note_on_object(),
            "Ingress shop/webshop: other"
        );
        assert_eq!(event("short").note_on_object(), "short");
    }
}

//! `haptic run`'s failure events: log lines, with no cluster to hold them.

use futures::future::BoxFuture;

use crate::controller::sinks::{EventSink, FailureEvent};

/// Events as log lines (no cluster to hold them).
#[derive(Debug, Default)]
pub struct LogEvents;

impl EventSink for LogEvents {
    fn publish(&self, event: FailureEvent) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let object = event
                .object
                .as_ref()
                .map(|o| format!(" on {} {}/{}", o.kind, o.namespace, o.name))
                .unwrap_or_default();
            tracing::warn!("event {}{object}: {}", event.reason, event.note_on_object());
        })
    }
}

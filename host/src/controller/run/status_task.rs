//! The status task: writes the candidates' status patches and reports
//! failures (their `render-failed` patches and Event), in order, so
//! thousands of first-time gate conditions never hold the next deploy.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;

use super::{Candidate, Failure, State};
use crate::controller::sinks::EventSink;
use crate::controller::status::StatusApplier;
use crate::library::types::StatusVariant;
use crate::render::ObjectRef;

/// Work for the status task.
pub(super) enum StatusJob {
    /// The candidate's patches of this variant.
    Write(Arc<Candidate>, StatusVariant),
    /// A failed render: its `render-failed` patches and Event.
    Report(Failure),
}

/// The status task: writes patches and reports failures, in order.
pub(super) struct StatusTask {
    pub(super) applier: StatusApplier,
    pub(super) events: Arc<dyn EventSink>,
    pub(super) state: Arc<State>,
}

impl StatusTask {
    pub(super) async fn run(mut self, mut jobs: mpsc::UnboundedReceiver<StatusJob>) {
        while let Some(job) = jobs.recv().await {
            match job {
                StatusJob::Write(candidate, variant) => self.write(&candidate, variant).await,
                StatusJob::Report(failure) => self.report(failure).await,
            }
        }
    }

    /// Writes the candidate's patches of `variant`.
    async fn write(&mut self, candidate: &Candidate, variant: StatusVariant) {
        let Some(patches) = candidate.patches.get(&variant) else {
            return;
        };
        let current = &candidate.current;
        let report = self
            .applier
            .apply(patches.iter().map(Arc::as_ref), |patch| {
                current.get(&ObjectRef::of_patch(patch)).cloned()
            })
            .await;
        if variant == StatusVariant::Deployed {
            let now = Instant::now();
            let mut gates = 0usize;
            for (_, reference) in &report.written_patches {
                if let Some(since) = candidate.gate_pending_since.get(reference) {
                    gates += 1;
                    self.state.metrics.gate_conditions_set.inc();
                    self.state
                        .metrics
                        .gate_latency_seconds
                        .observe(now.duration_since(*since).as_secs_f64());
                    tracing::debug!(pod = %format!("{}/{}", reference.namespace, reference.name), "readiness gate set: every HAProxy pod routes to it");
                }
            }
            match gates {
                0 => {}
                1 => tracing::info!("readiness gate set on 1 pod: every HAProxy pod routes to it"),
                _ => tracing::info!(
                    "readiness gate set on {gates} pods: every HAProxy pod routes to them"
                ),
            }
        }
        for failure in &report.failed {
            self.state.metrics.status_patch_failures.inc();
            tracing::warn!(object = %failure.object, error = %failure.error, "status patch not written");
        }
    }

    async fn report(&mut self, failure: Failure) {
        if !failure.patches.is_empty() {
            let report = self
                .applier
                .apply(failure.patches.iter().map(Arc::as_ref), |_| None)
                .await;
            for failed in &report.failed {
                tracing::warn!(object = %failed.object, error = %failed.error, "status patch not written");
            }
        }
        self.events.publish(failure.event).await;
    }
}

//! The status task: writes the candidates' status patches and reports
//! failures (their `render-failed` patches and Event), in order, so
//! thousands of first-time gate conditions never hold the next deploy.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::{Candidate, Failure, State};
use crate::controller::owned::OwnedApplier;
use crate::controller::sinks::EventSink;
use crate::library::types::StatusVariant;
use crate::owned::OwnedObjects;
use crate::status_writes::StatusApplier;

/// Work for the status task.
pub(super) enum StatusJob {
    /// The candidate's patches of this variant.
    Write(Arc<Candidate>, StatusVariant),
    /// A failed render: its `render-failed` patches and Event.
    Report(Failure),
}

/// The status task's inbox. Writes coalesce: one slot per variant holds the
/// newest candidate, and a newer one replaces a candidate still waiting
/// there (the newer render's patches are what is true now). A queue of
/// every candidate grew without bound while the first writes of a large
/// gated cluster were under way, since every render in that time queued
/// its own candidate with the whole configuration and the status of every
/// pod still to write: 1,230 MiB at 10,000 gated pods. Failure reports
/// stay in order, each its own Event.
#[derive(Default)]
pub(super) struct StatusInbox {
    jobs: std::sync::Mutex<StatusJobs>,
    /// Holds a permit when nobody waits, so no job is missed.
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct StatusJobs {
    writes: BTreeMap<StatusVariant, Arc<Candidate>>,
    reports: VecDeque<Failure>,
}

impl StatusInbox {
    /// Queues the candidate's patches of `variant`, replacing an older
    /// candidate's that still wait.
    pub(super) fn write(&self, candidate: Arc<Candidate>, variant: StatusVariant) {
        self.lock().writes.insert(variant, candidate);
        self.wake.notify_one();
    }

    /// Queues a failure report behind the ones already waiting.
    pub(super) fn report(&self, failure: Failure) {
        self.lock().reports.push_back(failure);
        self.wake.notify_one();
    }

    /// The next job: failure reports first, then writes by variant.
    pub(super) async fn next(&self) -> StatusJob {
        loop {
            if let Some(job) = self.take() {
                return job;
            }
            self.wake.notified().await;
        }
    }

    fn take(&self) -> Option<StatusJob> {
        let mut jobs = self.lock();
        if let Some(failure) = jobs.reports.pop_front() {
            return Some(StatusJob::Report(failure));
        }
        jobs.writes
            .pop_first()
            .map(|(variant, candidate)| StatusJob::Write(candidate, variant))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StatusJobs> {
        // A poisoned inbox still holds valid jobs.
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The status task: writes patches and reports failures, in order.
pub(super) struct StatusTask {
    pub(super) applier: StatusApplier,
    /// `None` in local mode: owned objects are logged, not applied.
    pub(super) owned: Option<OwnedApplier>,
    /// What local mode logged last, so a render that changes nothing logs
    /// nothing.
    pub(super) shown_owned: Vec<serde_json::Value>,
    pub(super) events: Arc<dyn EventSink>,
    pub(super) state: Arc<State>,
}

impl StatusTask {
    pub(super) async fn run(mut self, inbox: Arc<StatusInbox>) {
        loop {
            match inbox.next().await {
                StatusJob::Write(candidate, variant) => self.write(&candidate, variant).await,
                StatusJob::Report(failure) => self.report(failure).await,
            }
        }
    }

    /// Writes the candidate's patches of `variant`.
    async fn write(&mut self, candidate: &Candidate, variant: StatusVariant) {
        if variant == StatusVariant::Rendered {
            self.apply_owned(&candidate.owned).await;
        }
        let Some(patches) = candidate.patches.get(&variant) else {
            return;
        };
        let report = self.applier.apply(patches.iter()).await;
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

    /// Applies the render's owned objects (leader only: this task runs the
    /// candidates the deployer takes while leading).
    async fn apply_owned(&mut self, owned: &OwnedObjects) {
        let Some(applier) = &mut self.owned else {
            let shown: Vec<serde_json::Value> =
                owned.desired.iter().map(|d| d.manifest.clone()).collect();
            if shown != self.shown_owned {
                for object in &owned.desired {
                    tracing::info!(object = %object, library = %object.library, manifest = %object.manifest, "owned object (local mode shows it; a controller in a cluster applies it)");
                }
                self.shown_owned = shown;
            }
            return;
        };
        let report = applier.reconcile(&owned.desired, &owned.kinds).await;
        if report.applied + report.deleted > 0 {
            tracing::info!(
                applied = report.applied,
                deleted = report.deleted,
                unchanged = report.unchanged,
                "owned objects reconciled"
            );
        }
        for failure in &report.failed {
            tracing::warn!(error = %failure, "owned object not applied");
        }
    }

    async fn report(&mut self, failure: Failure) {
        if !failure.patches.is_empty() {
            let report = self.applier.apply(failure.patches.iter()).await;
            for failed in &report.failed {
                tracing::warn!(object = %failed.object, error = %failed.error, "status patch not written");
            }
        }
        self.events.publish(failure.event).await;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::controller::sinks::FailureEvent;
    use crate::protocol::Bundle;

    fn empty_candidate(sequence: u64) -> Arc<Candidate> {
        Arc::new(Candidate {
            sequence,
            bundle: Arc::new(Bundle::new("global\n".to_owned(), Vec::new())),
            patches: BTreeMap::new(),
            gate_pending_since: HashMap::new(),
            owned: Arc::default(),
            origins: Arc::default(),
        })
    }

    /// The regression of issue 16: every render queued its own candidate
    /// while the first status writes were under way.
    #[tokio::test]
    async fn a_newer_candidate_replaces_the_one_still_waiting_for_its_writes() {
        let inbox = StatusInbox::default();
        let older = empty_candidate(1);
        for sequence in 1..=3 {
            inbox.write(empty_candidate(sequence), StatusVariant::Deployed);
        }
        inbox.write(older.clone(), StatusVariant::Rendered);
        inbox.report(Failure {
            event: FailureEvent {
                reason: "RenderFailed".into(),
                note: "first".into(),
                object: None,
            },
            patches: Vec::new(),
        });
        let mut taken = Vec::new();
        while let Some(job) = inbox.take() {
            taken.push(match job {
                StatusJob::Report(failure) => format!("report {}", failure.event.note),
                StatusJob::Write(candidate, variant) => {
                    format!("{variant:?} {}", candidate.sequence)
                }
            });
        }
        assert_eq!(taken, ["report first", "Rendered 1", "Deployed 3"]);
        assert_eq!(
            Arc::strong_count(&older),
            1,
            "nothing holds a candidate once its writes are taken"
        );
        inbox.write(empty_candidate(4), StatusVariant::Deployed);
        let next = tokio::time::timeout(Duration::from_secs(1), inbox.next()).await;
        assert!(matches!(next, Ok(StatusJob::Write(c, _)) if c.sequence == 4));
    }
}

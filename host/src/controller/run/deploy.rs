//! The deploy task: while leading, pushes the newest candidate to every
//! pod, waits until every live worker runs it, and hands the candidate's
//! status patches to the status task; failures are retried with backoff.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::status_task::StatusInbox;
use super::{Candidate, Failure, Settings, State};
use crate::controller::fleet::{Deployment, Fleet, PodOutcome, ProxyPod};
use crate::controller::metrics::ModeLabels;
use crate::engine::blame_start_up_failure;
use crate::library::types::StatusVariant;
use crate::protocol::FencingToken;

/// The deploy task's state.
pub(super) struct Deployer {
    pub(super) fleet: Fleet,
    /// Status writes go to their own task: thousands of first-time gate
    /// conditions must not hold the next deploy.
    pub(super) status: Arc<StatusInbox>,
    pub(super) state: Arc<State>,
    pub(super) settings: Settings,
}

impl Deployer {
    pub(super) async fn run(
        mut self,
        mut candidates: watch::Receiver<Option<Arc<Candidate>>>,
        mut pods: watch::Receiver<Option<Vec<ProxyPod>>>,
        mut leading: watch::Receiver<Option<u64>>,
        mut failures: mpsc::UnboundedReceiver<Failure>,
    ) {
        let mut rendered_written: Option<u64> = None;
        let mut retry = Backoff::new();
        let mut wake_at = tokio::time::Instant::now() + self.settings.resync;
        loop {
            tokio::select! {
                changed = candidates.changed() => if changed.is_err() { return },
                changed = pods.changed() => {
                    if changed.is_err() { return }
                    let members = pods.borrow_and_update().clone().unwrap_or_default();
                    if let Err(error) = self.fleet.set_pods(members) {
                        tracing::error!(%error, "cannot build clients for the HAProxy pods");
                    }
                    self.state.metrics.fleet_pods.set(self.fleet.pods().len() as i64);
                    self.state.debug.set_fleet(self.fleet.pods());
                }
                changed = leading.changed() => if changed.is_err() { return },
                Some(failure) = failures.recv() => {
                    if leading.borrow().is_some() {
                        self.status.report(failure);
                    }
                    continue;
                }
                _ = tokio::time::sleep_until(wake_at) => {}
            }
            wake_at = tokio::time::Instant::now() + self.settings.resync;
            let Some(epoch) = *leading.borrow() else {
                continue;
            };
            let Some(candidate) = candidates.borrow_and_update().clone() else {
                continue;
            };
            // Every wake deploys: a new candidate, new pods, a new leader, a
            // retry, or the periodic resync. Pods already on the candidate
            // only confirm it (one state request each).
            if rendered_written != Some(candidate.sequence) {
                self.write(&candidate, StatusVariant::Rendered);
                rendered_written = Some(candidate.sequence);
            }
            match self.deploy(&candidate, epoch, &mut candidates).await {
                DeployResult::Converged => {
                    self.state.metrics.seed.converged();
                    self.write(&candidate, StatusVariant::Deployed);
                    retry.reset();
                }
                // Deploy the newer candidate at once: `changed()` in
                // `deploy` already marked it seen, so the select above
                // would sleep until the resync (30 s) with it undeployed:
                // a route waited that long for its status, and an endpoint
                // flip that long to reach HAProxy while its pod exited.
                DeployResult::Superseded => wake_at = tokio::time::Instant::now(),
                DeployResult::Failed(message) => {
                    self.write(&candidate, StatusVariant::DeployFailed);
                    let pause = retry.next();
                    tracing::warn!(%message, retry_in = ?pause, "the fleet does not run the newest configuration yet");
                    wake_at = tokio::time::Instant::now() + pause;
                }
            }
        }
    }

    async fn deploy(
        &mut self,
        candidate: &Candidate,
        epoch: u64,
        candidates: &mut watch::Receiver<Option<Arc<Candidate>>>,
    ) -> DeployResult {
        let id = candidate.bundle.id.as_str();
        let started = Instant::now();
        let debug = &self.state.debug;
        let deployment = Deployment {
            token: FencingToken {
                epoch,
                sequence: candidate.sequence,
            },
            bundle: candidate.bundle.clone(),
        };
        // A newer candidate replaces this push: an agent that does not
        // answer (a hung pod waits out every attempt's timeout) must not
        // hold the newer render back from the pods that do.
        let report = tokio::select! {
            report = self.fleet.deploy(&deployment, |pod| debug.set_pod(pod)) => report,
            _ = candidates.changed() => return DeployResult::Superseded,
        };
        let failed_pods = report
            .pods
            .iter()
            .filter(|pod| matches!(pod.outcome, PodOutcome::Failed(_)))
            .count();
        self.state
            .metrics
            .fleet_failed_pods
            .set(i64::try_from(failed_pods).unwrap_or(i64::MAX));
        for pod in &report.pods {
            let mode = match &pod.outcome {
                PodOutcome::Confirmed => "confirmed",
                PodOutcome::Applied(mode) => mode.as_str(),
                PodOutcome::Failed(_) => "failed",
            };
            self.state
                .metrics
                .deploys
                .get_or_create(&ModeLabels { mode })
                .inc();
        }
        if report.pods.is_empty() {
            return DeployResult::Failed(format!(
                "no HAProxy pods match {} in namespace {}",
                self.settings.proxies.selector, self.settings.proxies.namespace
            ));
        }
        if !report.applied_everywhere() {
            let failed: Vec<String> = report
                .pods
                .iter()
                .filter_map(|pod| match &pod.outcome {
                    PodOutcome::Failed(error) => Some(format!(
                        "{}: {}",
                        pod.pod,
                        blame_start_up_failure(&candidate.bundle.config, &candidate.origins, error)
                    )),
                    _ => None,
                })
                .collect();
            self.publish_fleet(id);
            return DeployResult::Failed(failed.join("; "));
        }
        let converged = if self.fleet.converged_on(id) {
            true
        } else {
            // What the pushes found, while the wait runs.
            self.publish_fleet(id);
            tokio::select! {
                converged = self.fleet.await_convergence(id, self.settings.convergence_wait) => converged,
                _ = candidates.changed() => return DeployResult::Superseded,
            }
        };
        self.publish_fleet(id);
        if converged {
            self.state
                .metrics
                .deploy_seconds
                .observe(started.elapsed().as_secs_f64());
            DeployResult::Converged
        } else {
            let waiting: Vec<String> = self
                .fleet
                .pods()
                .into_iter()
                .filter(|pod| pod.converged.as_deref() != Some(id))
                .map(|pod| match pod.last_error {
                    Some(error) => format!("{}: {error}", pod.pod),
                    None => format!("{}: old workers still running", pod.pod),
                })
                .collect();
            DeployResult::Failed(format!(
                "not every pod runs {id} yet: {}",
                waiting.join("; ")
            ))
        }
    }

    /// After a push or a wait: the converged gauge and the fleet as
    /// `haptic status` shows it.
    fn publish_fleet(&self, id: &str) {
        let pods = self.fleet.pods();
        let converged = pods
            .iter()
            .filter(|pod| pod.converged.as_deref() == Some(id))
            .count();
        self.state.debug.set_fleet(pods);
        self.state
            .metrics
            .fleet_converged_pods
            .set(converged as i64);
    }

    /// Queues the candidate's patches of `variant` for the status task.
    fn write(&self, candidate: &Arc<Candidate>, variant: StatusVariant) {
        // `rendered` always: it also applies the owned objects, and an empty
        // set removes the ones applied before.
        if variant == StatusVariant::Rendered || candidate.patches.contains_key(&variant) {
            self.status.write(candidate.clone(), variant);
        }
    }
}

enum DeployResult {
    Converged,
    /// A newer candidate arrived while waiting.
    Superseded,
    Failed(String),
}

/// Retry pauses: 0.5 s doubling to 10 s.
struct Backoff {
    next: Option<Duration>,
}

impl Backoff {
    fn new() -> Self {
        Self { next: None }
    }

    fn next(&mut self) -> Duration {
        let pause = self.next.unwrap_or(Duration::from_millis(500));
        self.next = Some((pause * 2).min(Duration::from_secs(10)));
        pause
    }

    fn reset(&mut self) {
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_a_ceiling_and_resets() {
        let mut backoff = Backoff::new();
        assert_eq!(backoff.next(), Duration::from_millis(500));
        assert_eq!(backoff.next(), Duration::from_secs(1));
        for _ in 0..10 {
            backoff.next();
        }
        assert_eq!(backoff.next(), Duration::from_secs(10));
        backoff.reset();
        assert_eq!(backoff.next(), Duration::from_millis(500));
    }
}

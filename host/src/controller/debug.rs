//! What the controller knows about why a rollout waits, served read-only as
//! JSON on the metrics port (`/debug/fleet`, `/debug/gates`) and printed by
//! `haptic status`.
//!
//! A gated pod's condition is written once the newest validated render
//! (which routes to the pod) runs on every live worker of every HAProxy pod.
//! So what every waiting gate waits for is the same list: the HAProxy pods
//! and workers not yet on that render (from what their agents last
//! reported), a push that failed, no leader, or renders that keep failing.
//! The render loop, the deploy task and the leader task record their part
//! here; the HTTP handlers only read.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::fleet::PodView;
use crate::protocol::WorkerRole;
use crate::render::ObjectRef;

/// The longest-waiting gates kept for the report; the count covers all.
const GATES_SHOWN: usize = 1_000;

/// `GET /debug/fleet`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// This replica (its pod name).
    pub identity: String,
    /// Whether this replica leads: only the leader deploys, so a follower's
    /// fleet is empty.
    pub leading: bool,
    /// The newest validated render, the one the fleet is being moved to.
    pub newest_render: Option<String>,
    pub pods: Vec<ProxyReport>,
    /// Renders have failed since the newest validated one.
    pub render_failure: Option<RenderFailure>,
}

/// One HAProxy pod as its agent last reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProxyReport {
    pub pod: String,
    pub endpoint: String,
    /// The render every live worker routes per, if they agree.
    pub converged: Option<String>,
    pub workers: Vec<WorkerReport>,
    /// The last push or wait that failed, with the agent's message.
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerReport {
    pub pid: u32,
    /// `current` (takes new connections) or `leaving` (finishing its
    /// connections after a reload).
    pub role: String,
    /// The render this worker routes per.
    pub runs: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenderFailure {
    /// `RenderFailed` or `ConfigRefused` (by `haproxy -c`).
    pub reason: String,
    pub message: String,
    /// Unix seconds of the first failure in a row.
    pub since: u64,
}

/// `GET /debug/gates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatesReport {
    pub leading: bool,
    pub newest_render: Option<String>,
    /// Gated pods with ContainersReady whose condition waits.
    pub waiting: usize,
    /// The longest-waiting of them, oldest first (at most 1,000).
    pub gates: Vec<GateWait>,
    /// What every waiting gate waits for, one line each.
    pub waits_for: Vec<Blocker>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateWait {
    /// `namespace/name`.
    pub pod: String,
    pub waiting_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blocker {
    /// The HAProxy pod it concerns, if one.
    pub haproxy_pod: Option<String>,
    /// The worker it concerns, if one.
    pub worker: Option<u32>,
    /// For a person: "haproxy-1 worker 4711 (leaving) still runs render X".
    pub text: String,
}

/// The record the controller's tasks keep for the reports.
#[derive(Debug, Default)]
pub struct DebugState {
    inner: Mutex<Record>,
}

#[derive(Debug, Default)]
struct Record {
    identity: String,
    newest_render: Option<String>,
    /// Oldest first, at most [`GATES_SHOWN`].
    gates: Vec<(ObjectRef, Instant)>,
    waiting: usize,
    fleet: Vec<PodView>,
    render_failure: Option<RenderFailure>,
}

impl DebugState {
    pub fn set_identity(&self, identity: &str) {
        identity.clone_into(&mut self.lock().identity);
    }

    /// A new validated render and the gates it will set once deployed
    /// (with when each pod started waiting); clears a render failure.
    pub fn set_newest_render<'a>(
        &self,
        id: &str,
        gates: impl ExactSizeIterator<Item = (&'a ObjectRef, &'a Instant)>,
    ) {
        let waiting = gates.len();
        let mut oldest: Vec<(&ObjectRef, Instant)> = gates.map(|(r, since)| (r, *since)).collect();
        if oldest.len() > GATES_SHOWN {
            oldest.select_nth_unstable_by_key(GATES_SHOWN, |(_, since)| *since);
            oldest.truncate(GATES_SHOWN);
        }
        oldest.sort_by_key(|(_, since)| *since);
        let mut record = self.lock();
        record.newest_render = Some(id.to_owned());
        record.gates = oldest
            .into_iter()
            .map(|(reference, since)| (reference.clone(), since))
            .collect();
        record.waiting = waiting;
        record.render_failure = None;
    }

    /// A render failed (or `haproxy -c` refused it): the fleet stays on the
    /// newest validated one.
    pub fn set_render_failure(&self, reason: &str, message: &str) {
        let mut record = self.lock();
        let since = record
            .render_failure
            .as_ref()
            .map_or_else(unix_now, |failure| failure.since);
        record.render_failure = Some(RenderFailure {
            reason: reason.to_owned(),
            message: message.to_owned(),
            since,
        });
    }

    /// The HAProxy pods as the deploy task last saw them.
    pub fn set_fleet(&self, pods: Vec<PodView>) {
        self.lock().fleet = pods;
    }

    /// One pod as a push to it ended (the others may still be pushed to).
    pub fn set_pod(&self, pod: PodView) {
        let mut record = self.lock();
        match record.fleet.iter_mut().find(|known| known.pod == pod.pod) {
            Some(known) => *known = pod,
            None => record.fleet.push(pod),
        }
    }

    /// `leading`: whether this replica leads now (the leader gauge says it).
    pub fn fleet_report(&self, leading: bool) -> FleetReport {
        let record = self.lock();
        FleetReport {
            identity: record.identity.clone(),
            leading,
            newest_render: record.newest_render.clone(),
            pods: record.fleet.iter().map(proxy_report).collect(),
            render_failure: record.render_failure.clone(),
        }
    }

    pub fn gates_report(&self, leading: bool) -> GatesReport {
        let record = self.lock();
        let now = Instant::now();
        GatesReport {
            leading,
            newest_render: record.newest_render.clone(),
            waiting: record.waiting,
            gates: record
                .gates
                .iter()
                .map(|(reference, since)| GateWait {
                    pod: format!("{}/{}", reference.namespace, reference.name),
                    waiting_seconds: now.duration_since(*since).as_secs_f64(),
                })
                .collect(),
            waits_for: blockers(&record, leading),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Record> {
        // A poisoned record still holds a valid last view.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn proxy_report(pod: &PodView) -> ProxyReport {
    ProxyReport {
        pod: pod.pod.clone(),
        endpoint: pod.endpoint.clone(),
        converged: pod.converged.clone(),
        workers: pod
            .workers
            .iter()
            .map(|worker| WorkerReport {
                pid: worker.pid,
                role: role_name(worker.role).to_owned(),
                runs: worker.config_id.clone(),
            })
            .collect(),
        last_error: pod.last_error.clone(),
    }
}

fn role_name(role: WorkerRole) -> &'static str {
    match role {
        WorkerRole::Current => "current",
        WorkerRole::Leaving => "leaving",
    }
}

/// What the waiting gates wait for, in the order a person should look.
fn blockers(record: &Record, leading: bool) -> Vec<Blocker> {
    let mut found = Vec::new();
    let global = |text: String| Blocker {
        haproxy_pod: None,
        worker: None,
        text,
    };
    if !leading {
        found.push(global(format!(
            "{} does not lead: only the leader deploys and writes gates; ask the replica whose haptic_leader is 1",
            if record.identity.is_empty() { "this replica" } else { &record.identity }
        )));
    }
    if let Some(failure) = &record.render_failure {
        found.push(global(format!(
            "the newest renders fail ({}): {}; pods that became ready since the last good render wait for a render that works",
            failure.reason, failure.message
        )));
    }
    let Some(newest) = &record.newest_render else {
        found.push(global("no render has been validated yet".to_owned()));
        return found;
    };
    if leading && record.fleet.is_empty() {
        found.push(global(
            "no HAProxy pod is known: check the HAProxy Deployment and the controller's --proxy-selector".to_owned(),
        ));
    }
    for pod in &record.fleet {
        if pod.converged.as_deref() == Some(newest.as_str()) {
            continue;
        }
        let mut said = false;
        if let Some(error) = &pod.last_error {
            found.push(Blocker {
                haproxy_pod: Some(pod.pod.clone()),
                worker: None,
                text: format!("{}: {error}", pod.pod),
            });
            said = true;
        }
        for worker in pod.workers.iter().filter(|w| w.config_id != *newest) {
            found.push(Blocker {
                haproxy_pod: Some(pod.pod.clone()),
                worker: Some(worker.pid),
                text: format!(
                    "{} worker {} ({}) still runs render {}{}",
                    pod.pod,
                    worker.pid,
                    role_name(worker.role),
                    short_id(&worker.config_id),
                    if pod.last_error.is_some() {
                        " (as last reported)"
                    } else {
                        ""
                    }
                ),
            });
            said = true;
        }
        if !said {
            found.push(Blocker {
                haproxy_pod: Some(pod.pod.clone()),
                worker: None,
                text: format!(
                    "{}: has not reported running render {} yet",
                    pod.pod,
                    short_id(newest)
                ),
            });
        }
    }
    if found.is_empty() && record.waiting > 0 {
        found.push(global(format!(
            "every HAProxy pod runs render {}: the gate conditions are being written",
            short_id(newest)
        )));
    }
    found
}

/// `sha256:0123456789ab`: enough of a render id to tell renders apart.
pub fn short_id(id: &str) -> &str {
    let end = id.find(':').map_or(12, |colon| colon + 13);
    id.get(..end).unwrap_or(id)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests;

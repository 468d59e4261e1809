//! Pod status the way kubelet writes it: container statuses, phase, and the
//! conditions kubelet owns, computed with the rules and wording of
//! `pkg/kubelet/status/generate.go` (k8s v1.35.4).
//!
//! The result is a server-side-apply body for `pods/status` under the field
//! manager [`FIELD_MANAGER`]. It names only the conditions kubelet owns
//! ([`OWNED_CONDITIONS`]); `status.conditions` is a map list keyed by `type`,
//! so conditions other managers applied (readiness gates) are never touched.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "kubelet";

/// Condition types this kubelet writes; all others belong to someone else.
pub const OWNED_CONDITIONS: [&str; 5] = [
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
];

/// `status.phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// A finished container instance.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Terminated {
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: String,
    pub started_at: String,
    pub finished_at: String,
    pub container_id: String,
}

/// A container's current state.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum State {
    Waiting { reason: String, message: String },
    Running { started_at: String },
    Terminated(Terminated),
}

/// What the pod worker knows about one container.
#[derive(Clone, Debug)]
pub(crate) struct ContainerView {
    pub name: String,
    pub image: String,
    pub image_id: String,
    pub container_id: Option<String>,
    pub state: State,
    pub last_terminated: Option<Terminated>,
    pub restart_count: i32,
    pub ready: bool,
    /// `(name, mountPath, readOnly)` from the spec, reported back as kubelet 1.31+ does.
    pub volume_mounts: Vec<(String, String, bool)>,
}

/// What the pod worker knows about the pod.
#[derive(Clone, Debug)]
pub(crate) struct PodView {
    pub init_containers: Vec<ContainerView>,
    pub containers: Vec<ContainerView>,
    pub pod_ip: Option<Ipv4Addr>,
    pub host_ip: Ipv4Addr,
    pub start_time: String,
    /// All containers are stopped for good (deleted pod or finished restart policy).
    pub terminal: bool,
}

/// One condition: status, reason, message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Condition {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: Option<String>,
    pub message: Option<String>,
}

impl Condition {
    fn new(type_: &'static str, ok: bool) -> Self {
        Self {
            type_,
            status: if ok { "True" } else { "False" },
            reason: None,
            message: None,
        }
    }

    fn because(mut self, reason: &str, message: Option<String>) -> Self {
        self.reason = Some(reason.to_string());
        self.message = message.filter(|m| !m.is_empty());
        self
    }
}

/// Go's `%s` of a `[]string`.
fn go_list(names: &[&str]) -> String {
    format!("[{}]", names.join(" "))
}

fn init_complete(c: &ContainerView) -> bool {
    matches!(&c.state, State::Terminated(t) if t.exit_code == 0)
}

/// kubelet's `getPhase`, for regular (non-sidecar) init containers.
pub(crate) fn phase(pod: &Pod, view: &PodView) -> Phase {
    let policy = restart_policy(pod);
    let failed_init = view.init_containers.iter().any(|c| {
        let exit = match (&c.state, &c.last_terminated) {
            (State::Terminated(t), _) | (State::Waiting { .. }, Some(t)) => t.exit_code,
            _ => 0,
        };
        exit != 0
    });
    if failed_init && policy == "Never" {
        return Phase::Failed;
    }
    if !view.init_containers.iter().all(init_complete) {
        if view.terminal {
            return Phase::Failed;
        }
        return Phase::Pending;
    }
    let (mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for c in &view.containers {
        match &c.state {
            State::Running { .. } => running += 1,
            State::Terminated(t) => {
                stopped += 1;
                if t.exit_code == 0 {
                    succeeded += 1;
                }
            }
            State::Waiting { .. } if c.last_terminated.is_some() => stopped += 1,
            State::Waiting { .. } => waiting += 1,
        }
    }
    if waiting > 0 {
        return Phase::Pending;
    }
    if running > 0 {
        return Phase::Running;
    }
    if stopped == 0 {
        return Phase::Pending;
    }
    if view.terminal {
        return if stopped == succeeded {
            Phase::Succeeded
        } else {
            Phase::Failed
        };
    }
    match policy {
        "Always" => Phase::Running,
        _ if stopped == succeeded => Phase::Succeeded,
        "Never" => Phase::Failed,
        // OnFailure with a failed container: it restarts.
        _ => Phase::Running,
    }
}

pub(crate) fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// `GenerateContainersReadyCondition`.
pub(crate) fn containers_ready(view: &PodView, phase: Phase) -> Condition {
    match phase {
        Phase::Succeeded => {
            return Condition::new("ContainersReady", false).because("PodCompleted", None);
        }
        Phase::Failed => {
            return Condition::new("ContainersReady", false).because("PodFailed", None);
        }
        _ => {}
    }
    let unready: Vec<&str> = view
        .containers
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    if unready.is_empty() {
        Condition::new("ContainersReady", true)
    } else {
        let message = format!("containers with unready status: {}", go_list(&unready));
        Condition::new("ContainersReady", false).because("ContainersNotReady", Some(message))
    }
}

/// `GeneratePodReadyCondition`: ContainersReady and every readiness gate True.
pub(crate) fn pod_ready(pod: &Pod, containers_ready: &Condition, phase: Phase) -> Condition {
    if matches!(phase, Phase::Succeeded | Phase::Failed) {
        let reason = if phase == Phase::Succeeded {
            "PodCompleted"
        } else {
            "PodFailed"
        };
        return Condition::new("Ready", false).because(reason, None);
    }
    if containers_ready.status != "True" {
        let mut c = containers_ready.clone();
        c.type_ = "Ready";
        return c;
    }
    let existing = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut messages = Vec::new();
    for gate in gates {
        let t = &gate.condition_type;
        match existing.iter().find(|c| c.type_ == *t) {
            None => messages.push(format!(
                "corresponding condition of pod readiness gate {t:?} does not exist."
            )),
            Some(c) if c.status != "True" => messages.push(format!(
                "the status of pod readiness gate {t:?} is not \"True\", but {}",
                c.status
            )),
            Some(_) => {}
        }
    }
    if messages.is_empty() {
        Condition::new("Ready", true)
    } else {
        Condition::new("Ready", false).because("ReadinessGatesNotReady", Some(messages.join(", ")))
    }
}

/// Every owned condition, in kubelet's order.
pub(crate) fn conditions(pod: &Pod, view: &PodView, phase: Phase) -> Vec<Condition> {
    let incomplete: Vec<&str> = view
        .init_containers
        .iter()
        .filter(|c| !init_complete(c))
        .map(|c| c.name.as_str())
        .collect();
    let initialized = if incomplete.is_empty() || phase == Phase::Succeeded {
        Condition::new("Initialized", true)
    } else {
        let message = format!(
            "containers with incomplete status: {}",
            go_list(&incomplete)
        );
        Condition::new("Initialized", false).because("ContainersNotInitialized", Some(message))
    };
    let cr = containers_ready(view, phase);
    let ready = pod_ready(pod, &cr, phase);
    let sandbox = view.pod_ip.is_some() && !view.terminal;
    vec![
        Condition::new("PodReadyToStartContainers", sandbox),
        initialized,
        ready,
        cr,
        Condition::new("PodScheduled", true),
    ]
}

/// Remembers each owned condition's status and when it last changed, so
/// `lastTransitionTime` moves only on transitions.
#[derive(Debug, Default)]
pub(crate) struct TransitionClock {
    seen: HashMap<&'static str, (&'static str, String)>,
}

impl TransitionClock {
    /// Starts from the conditions already on the pod (another kubelet run or
    /// the binding's PodScheduled).
    pub(crate) fn from_pod(pod: &Pod) -> Self {
        let mut seen = HashMap::new();
        for c in pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
        {
            if let Some(owned) = OWNED_CONDITIONS.iter().find(|t| **t == c.type_) {
                let status = if c.status == "True" { "True" } else { "False" };
                let at = c
                    .last_transition_time
                    .as_ref()
                    .map(|t| format_time(t.0))
                    .unwrap_or_else(now);
                seen.insert(*owned, (status, at));
            }
        }
        Self { seen }
    }

    fn stamp(&mut self, c: &Condition) -> String {
        match self.seen.get(c.type_) {
            Some((status, at)) if *status == c.status => at.clone(),
            _ => {
                let at = now();
                self.seen.insert(c.type_, (c.status, at.clone()));
                at
            }
        }
    }
}

/// The server-side-apply body for `pods/status`.
pub(crate) fn apply_body(pod: &Pod, view: &PodView, clock: &mut TransitionClock) -> Value {
    let phase = phase(pod, view);
    let generation = pod.metadata.generation;
    let conditions: Vec<Value> = conditions(pod, view, phase)
        .iter()
        .map(|c| {
            let mut v = json!({
                "type": c.type_,
                "status": c.status,
                "lastProbeTime": null,
                "lastTransitionTime": clock.stamp(c),
            });
            if let Some(g) = generation {
                v["observedGeneration"] = json!(g);
            }
            if let Some(r) = &c.reason {
                v["reason"] = json!(r);
            }
            if let Some(m) = &c.message {
                v["message"] = json!(m);
            }
            v
        })
        .collect();
    let containers: Vec<Value> = view.containers.iter().map(container_status).collect();
    let mut status = json!({
        "phase": phase.as_str(),
        "conditions": conditions,
        "hostIP": view.host_ip.to_string(),
        "hostIPs": [{"ip": view.host_ip.to_string()}],
        "startTime": view.start_time,
        "containerStatuses": containers,
    });
    if let Some(ip) = view.pod_ip {
        status["podIP"] = json!(ip.to_string());
        status["podIPs"] = json!([{"ip": ip.to_string()}]);
    }
    if let Some(g) = generation {
        status["observedGeneration"] = json!(g);
    }
    if !view.init_containers.is_empty() {
        let inits: Vec<Value> = view.init_containers.iter().map(container_status).collect();
        status["initContainerStatuses"] = json!(inits);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        // The UID makes the apiserver refuse the write if a newer pod took the name.
        "metadata": {
            "name": pod.metadata.name,
            "namespace": pod.metadata.namespace,
            "uid": pod.metadata.uid,
        },
        "status": status,
    })
}

fn terminated_json(t: &Terminated) -> Value {
    let mut v = json!({
        "exitCode": t.exit_code,
        "reason": t.reason,
        "startedAt": t.started_at,
        "finishedAt": t.finished_at,
        "containerID": t.container_id,
    });
    if let Some(s) = t.signal {
        v["signal"] = json!(s);
    }
    v
}

fn container_status(c: &ContainerView) -> Value {
    let state = match &c.state {
        State::Waiting { reason, message } if message.is_empty() => {
            json!({"waiting": {"reason": reason}})
        }
        State::Waiting { reason, message } => {
            json!({"waiting": {"reason": reason, "message": message}})
        }
        State::Running { started_at } => json!({"running": {"startedAt": started_at}}),
        State::Terminated(t) => json!({"terminated": terminated_json(t)}),
    };
    let last = c
        .last_terminated
        .as_ref()
        .map_or_else(|| json!({}), |t| json!({"terminated": terminated_json(t)}));
    let mut v = json!({
        "name": c.name,
        "image": c.image,
        "imageID": c.image_id,
        "ready": c.ready,
        "started": matches!(c.state, State::Running { .. }),
        "restartCount": c.restart_count,
        "state": state,
        "lastState": last,
    });
    if let Some(id) = &c.container_id {
        v["containerID"] = json!(id);
    }
    let mounts: Vec<Value> = c
        .volume_mounts
        .iter()
        .map(|(name, path, read_only)| {
            if *read_only {
                json!({"name": name, "mountPath": path, "readOnly": true, "recursiveReadOnly": "Disabled"})
            } else {
                json!({"name": name, "mountPath": path})
            }
        })
        .collect();
    if !mounts.is_empty() && matches!(c.state, State::Running { .. } | State::Terminated(_)) {
        v["volumeMounts"] = json!(mounts);
    }
    v
}

/// Now, as `metav1.Time` serialises it (RFC 3339, whole seconds, UTC).
pub(crate) fn now() -> String {
    format_time(k8s_openapi::jiff::Timestamp::now())
}

fn format_time(t: k8s_openapi::jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
#[path = "status/tests.rs"]
mod tests;

//! The fleet: every HAProxy pod's agent, what each one runs, and pushing a
//! render to all of them at once.
//!
//! The fleet is converged on render N only when every pod it knows reports
//! every live worker on N (the agent's `converged`). A pod that does not
//! answer, or answers with an error, holds convergence, and with it the
//! readiness gate, until it runs N or leaves the fleet. A pod whose agent
//! already reports N is not pushed to again; that confirmation counts as
//! deployed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::join_all;
use futures::stream::FuturesUnordered;

use crate::protocol::api_tls::ClientTls;
use crate::protocol::{
    AgentClient, ApplyMode, ApplyRequest, Bundle, ClientError, FencingToken, PodState, WorkerState,
};

/// How the fleet reaches agents.
#[derive(Debug, Clone)]
pub struct FleetSettings {
    /// The agents' bearer token.
    pub token: Option<String>,
    pub tls: Option<ClientTls>,
    /// One call to one agent (an apply includes its reload).
    pub timeout: Duration,
    /// Attempts per pod and push for errors that may pass (unreachable, 503).
    pub attempts: u32,
    /// Pause before the second attempt, doubled for each further one.
    pub backoff: Duration,
}

impl Default for FleetSettings {
    fn default() -> Self {
        Self {
            token: None,
            tls: None,
            timeout: Duration::from_secs(35),
            attempts: 3,
            backoff: Duration::from_millis(200),
        }
    }
}

/// An HAProxy pod, as discovery found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPod {
    /// `namespace/name`, for logs and status.
    pub name: String,
    /// `http(s)://<pod IP>:<agent port>`.
    pub endpoint: String,
}

/// A render ready to deploy: the bundle and the fencing token it goes with.
#[derive(Debug, Clone)]
pub struct Deployment {
    pub token: FencingToken,
    pub bundle: Arc<Bundle>,
}

/// What one push did to one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodOutcome {
    /// The agent already reported the bundle on every worker: not pushed.
    Confirmed,
    /// Applied with this mode.
    Applied(ApplyMode),
    /// Not applied: the last error (the agent's message when it gave one).
    Failed(String),
}

/// One pod's share of a deploy.
#[derive(Debug, Clone)]
pub struct PodReport {
    pub pod: String,
    pub outcome: PodOutcome,
    /// Every live worker of the pod runs the bundle.
    pub converged: bool,
}

/// The result of pushing one render to the fleet.
#[derive(Debug, Clone)]
pub struct DeployReport {
    pub id: String,
    pub pods: Vec<PodReport>,
}

impl DeployReport {
    /// Every pod took the bundle (some may still drain old workers).
    pub fn applied_everywhere(&self) -> bool {
        !self.pods.is_empty()
            && self
                .pods
                .iter()
                .all(|p| !matches!(p.outcome, PodOutcome::Failed(_)))
    }
}

/// What the fleet knows of one pod.
#[derive(Debug, Clone)]
pub struct PodView {
    pub pod: String,
    pub endpoint: String,
    /// The id every live worker runs, as last reported.
    pub converged: Option<String>,
    /// Every live worker and what it routes per, as the agent last
    /// reported (empty until it answered once).
    pub workers: Vec<WorkerState>,
    pub last_error: Option<String>,
}

struct Member {
    endpoint: String,
    client: AgentClient,
    converged: Option<String>,
    workers: Vec<WorkerState>,
    last_error: Option<String>,
}

impl Member {
    /// What the agent last reported (`None`: it did not answer, so nothing
    /// is known to be converged; the workers it last reported stay, as the
    /// best knowledge of what still runs there).
    fn observe(&mut self, state: Option<PodState>) {
        match state {
            Some(state) => {
                self.converged = state.converged;
                self.workers = state.workers;
            }
            None => self.converged = None,
        }
    }

    fn view(&self, name: &str) -> PodView {
        PodView {
            pod: name.to_owned(),
            endpoint: self.endpoint.clone(),
            converged: self.converged.clone(),
            workers: self.workers.clone(),
            last_error: self.last_error.clone(),
        }
    }
}

/// The HAProxy pods of one installation.
pub struct Fleet {
    settings: FleetSettings,
    members: BTreeMap<String, Member>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("pods", &self.members.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Fleet {
    pub fn new(settings: FleetSettings) -> Self {
        Self {
            settings,
            members: BTreeMap::new(),
        }
    }

    /// Makes the fleet exactly `pods`. A new pod (or one at a new address)
    /// starts as running nothing, so it holds convergence until it has been
    /// given the current render.
    pub fn set_pods(
        &mut self,
        pods: impl IntoIterator<Item = ProxyPod>,
    ) -> Result<(), ClientError> {
        let mut next = BTreeMap::new();
        for pod in pods {
            let member = match self.members.remove(&pod.name) {
                Some(member) if member.endpoint == pod.endpoint => member,
                _ => Member {
                    client: AgentClient::new(
                        pod.endpoint.clone(),
                        self.settings.token.clone(),
                        self.settings.tls.as_ref(),
                        self.settings.timeout,
                    )?,
                    endpoint: pod.endpoint,
                    converged: None,
                    workers: Vec::new(),
                    last_error: None,
                },
            };
            next.insert(pod.name, member);
        }
        self.members = next;
        Ok(())
    }

    /// The pods, with what each was last seen running.
    pub fn pods(&self) -> Vec<PodView> {
        self.members
            .iter()
            .map(|(name, member)| member.view(name))
            .collect()
    }

    /// Every pod reports every worker on `id` (and there is at least one pod).
    pub fn converged_on(&self, id: &str) -> bool {
        !self.members.is_empty()
            && self
                .members
                .values()
                .all(|m| m.converged.as_deref() == Some(id))
    }

    /// Pushes `deployment` to every pod concurrently. `on_pod` sees each
    /// pod as its push ends, so what the fleet reports (`haptic status`) is
    /// never older than the slowest agent's answer.
    pub async fn deploy(
        &mut self,
        deployment: &Deployment,
        mut on_pod: impl FnMut(PodView),
    ) -> DeployReport {
        let settings = &self.settings;
        let mut pushes: FuturesUnordered<_> = self
            .members
            .iter()
            .map(|(name, member)| {
                let (name, client, known) = (
                    name.clone(),
                    member.client.clone(),
                    member.converged.clone(),
                );
                async move {
                    let outcome = push(settings, &client, known.as_deref(), deployment).await;
                    (name, outcome)
                }
            })
            .collect();
        let mut pods = Vec::with_capacity(self.members.len());
        while let Some((name, (outcome, reported))) = pushes.next().await {
            if let Some(member) = self.members.get_mut(&name) {
                if let Some(state) = reported {
                    member.observe(state);
                }
                member.last_error = match &outcome {
                    PodOutcome::Failed(error) => Some(error.clone()),
                    _ => None,
                };
                on_pod(member.view(&name));
                pods.push(PodReport {
                    converged: member.converged.as_deref() == Some(deployment.bundle.id.as_str()),
                    pod: name,
                    outcome,
                });
            }
        }
        pods.sort_by(|a, b| a.pod.cmp(&b.pod));
        DeployReport {
            id: deployment.bundle.id.clone(),
            pods,
        }
    }

    /// Waits up to `wait` for every pod not yet on `id` to converge on it
    /// (old workers finishing their connections), asking all at once.
    /// Returns whether the whole fleet is converged.
    pub async fn await_convergence(&mut self, id: &str, wait: Duration) -> bool {
        let waits = self
            .members
            .iter()
            .filter(|(_, m)| m.converged.as_deref() != Some(id))
            .map(
                |(name, m)| async move { (name.clone(), m.client.wait_converged(id, wait).await) },
            );
        for (name, result) in join_all(waits).await {
            if let Some(member) = self.members.get_mut(&name) {
                match result {
                    Ok(state) => {
                        member.observe(Some(state));
                        member.last_error = None;
                    }
                    Err(error) => {
                        member.observe(None);
                        member.last_error = Some(error.to_string());
                    }
                }
            }
        }
        self.converged_on(id)
    }
}

/// One pod: confirm or apply, with retries for errors that may pass.
/// Returns the outcome and what the pod reported: `Some(Some(state))` when
/// the agent answered, `Some(None)` when it was lost, `None` when nothing
/// new was learnt.
async fn push(
    settings: &FleetSettings,
    client: &AgentClient,
    known: Option<&str>,
    deployment: &Deployment,
) -> (PodOutcome, Option<Option<PodState>>) {
    let id = deployment.bundle.id.as_str();
    if known == Some(id)
        && let Ok(state) = client.state().await
        && state.converged.as_deref() == Some(id)
    {
        return (PodOutcome::Confirmed, Some(Some(state)));
    }
    let request = ApplyRequest {
        token: deployment.token,
        bundle: (*deployment.bundle).clone(),
    };
    let mut pause = settings.backoff;
    let mut last_error = String::new();
    for attempt in 1..=settings.attempts.max(1) {
        match client.apply(&request).await {
            Ok(response) => {
                return (
                    PodOutcome::Applied(response.mode),
                    Some(Some(response.state)),
                );
            }
            Err(error) => {
                last_error = error.to_string();
                // The agent judged the bundle or the token: asking again
                // gets the same answer.
                if error
                    .code()
                    .is_some_and(|code| code != "haproxy-unavailable" && code != "internal")
                {
                    break;
                }
                tracing::warn!(pod = client.endpoint(), attempt, error = %last_error, "push failed");
                if attempt < settings.attempts {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
            }
        }
    }
    (PodOutcome::Failed(last_error), Some(None))
}

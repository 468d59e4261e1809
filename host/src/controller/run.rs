//! The controller's loop: watches in, renders, validated configurations to
//! every HAProxy pod, status out.
//!
//! Four tasks, joined by channels that keep only what matters:
//!
//! - **sources** ([`super::watch`], [`super::proxies`]): deltas of the
//!   watched objects; the HAProxy pods.
//! - **render**: owns the [`Engine`]. It waits for every watch's first list
//!   (a render of a partial view would deploy a configuration missing
//!   backends), then renders each batch at once; changes that arrive while
//!   it renders queue and are taken together by the next render, so a lone
//!   change pays no coalescing delay and a burst costs one render per
//!   render time. Each render is validated with `haproxy -c` unless it
//!   differs from the last accepted one only in what the agents' runtime
//!   plan covers (see [`needs_validation`]). The newest accepted render is
//!   published as a [`Candidate`]; older ones are dropped unseen.
//! - **deploy**: while leading, pushes the newest candidate to every pod,
//!   waits until every live worker of every pod runs it, then writes its
//!   `deployed` status patches (the readiness gate); `rendered` ones go out
//!   when the candidate is taken. Failures are retried with backoff.
//! - **leader**: the Lease; its epoch fences every push.
//!
//! A refused or failed render is never deployed: the fleet stays on the
//! last good candidate; the failure is logged, counted, sent as a Kubernetes
//! Event on the object the library blamed, and the last good render's
//! `render-failed` patches are written.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::fleet::{Deployment, Fleet, FleetSettings, PodOutcome, ProxyPod};
use super::leader::{ElectionSettings, Elector};
use super::metrics::{LibraryLabels, Metrics, ModeLabels, ResultLabels};
use super::proxies::{self, ProxySettings};
use super::sinks::{ApiEvents, EventSink, FailureEvent};
use super::status::{StatusApplier, StatusMemory};
use super::watch::{self as source, SourceEvent, WatchTarget};
use crate::agent::plan::{self, Plan};
use crate::agent::{Bundle, BundleFile, FencingToken};
use crate::engine::{self, Engine, EngineError};
use crate::library::types::{StatusPatch, StatusVariant};
use crate::render::{ObjectRef, PlannedWarning, Rendered};

/// The readiness gate's condition type.
pub const GATE_CONDITION: &str = "haproxy-haptic.org/load-balancer-ready";

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// This replica (the pod name), for Events and the Lease.
    pub identity: String,
    pub proxies: ProxySettings,
    pub fleet: FleetSettings,
    /// `None`: no election, this replica always leads (one replica only).
    pub election: Option<ElectionSettings>,
    /// `/metrics`, `/healthz`, `/readyz`.
    pub listen: Option<SocketAddr>,
    /// Longest wait, per attempt, for old workers to finish after a reload.
    pub convergence_wait: Duration,
    /// How often the fleet is re-checked when nothing happens (a pod whose
    /// HAProxy lost its configuration is found and fixed).
    pub resync: Duration,
}

/// A validated render, ready for the fleet.
#[derive(Debug)]
pub struct Candidate {
    /// Increases with every render, across restarts (it starts from the
    /// clock): the fencing token's sequence.
    pub sequence: u64,
    pub bundle: Arc<Bundle>,
    pub patches: BTreeMap<StatusVariant, Vec<Arc<StatusPatch>>>,
    /// When the controller first saw each pod whose gate patch is pending
    /// (it then had ContainersReady): the gate latency's start.
    pub gate_pending_since: HashMap<ObjectRef, Instant>,
}

/// What the controller exposes to its HTTP endpoints and tests.
#[derive(Debug, Default)]
pub struct State {
    pub metrics: Metrics,
    /// Every watch has listed and the first render is done (followers too:
    /// their caches are warm).
    pub ready: AtomicBool,
    /// `haptic run`'s in-memory status, served at `/status`.
    pub local_status: std::sync::Mutex<Option<Arc<super::files::LocalStatus>>>,
}

/// Starts the watches for the targets the libraries' plans make.
pub type SourceFn = Box<
    dyn FnOnce(
            &[WatchTarget],
            mpsc::UnboundedSender<SourceEvent>,
        ) -> Vec<tokio::task::JoinHandle<()>>
        + Send,
>;

/// Starts the discovery of the HAProxy instances.
pub type ProxiesFn =
    Box<dyn FnOnce(watch::Sender<Option<Vec<ProxyPod>>>) -> tokio::task::JoinHandle<()> + Send>;

/// Where the controller's inputs come from and its outputs go: the
/// Kubernetes API in a cluster ([`Parts::kubernetes`]), files and local
/// processes for `haptic run`. Everything between is the same.
pub struct Parts {
    pub source: SourceFn,
    pub proxies: ProxiesFn,
    pub status: StatusApplier,
    pub events: Arc<dyn EventSink>,
    /// `None`: this replica always leads.
    pub elector: Option<Arc<Elector>>,
}

impl Parts {
    /// Watches, HAProxy pods, status and Events through the API server;
    /// leader election when `settings.election` asks for it.
    pub async fn kubernetes(client: kube::Client, settings: &Settings) -> anyhow::Result<Self> {
        let elector = match &settings.election {
            Some(election) => Some(Arc::new(
                Elector::new(client.clone(), election.clone()).await?,
            )),
            None => None,
        };
        let source_client = client.clone();
        let proxy_client = client.clone();
        let proxy_settings = settings.proxies.clone();
        Ok(Self {
            source: Box::new(move |targets, events| source::spawn(source_client, targets, events)),
            proxies: Box::new(move |out| {
                tokio::spawn(proxies::discover(proxy_client, proxy_settings, out))
            }),
            status: StatusApplier::new(client.clone()),
            events: Arc::new(ApiEvents::new(
                client,
                &settings.proxies.namespace,
                &settings.identity,
            )),
            elector,
        })
    }
}

/// A render failure, for the deploy task to report while leading.
#[derive(Debug)]
struct Failure {
    event: FailureEvent,
    /// The last good render's `render-failed` patches.
    patches: Vec<Arc<StatusPatch>>,
}

/// Runs the controller against the Kubernetes API until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    engine: Engine,
    settings: Settings,
    state: Arc<State>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let parts = Parts::kubernetes(client, &settings).await?;
    run_with(parts, engine, settings, state, shutdown).await
}

/// Runs the controller on `parts` until `shutdown` resolves.
pub async fn run_with(
    parts: Parts,
    engine: Engine,
    settings: Settings,
    state: Arc<State>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let targets = source::targets(
        engine.watches().map(|(_, watch)| watch),
        &engine.ingest_trims(),
    );
    for target in &targets {
        tracing::info!(watch = %target.describe(), "watching");
    }
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let mut tasks = Tasks((parts.source)(&targets, events_tx));

    let (pods_tx, pods_rx) = watch::channel(None);
    tasks.push((parts.proxies)(pods_tx));

    let (leading_tx, leading_rx) = watch::channel(None);
    let elector = parts.elector;
    if let Some(elector) = &elector {
        tasks.push(tokio::spawn(lead(
            elector.clone(),
            leading_tx,
            state.clone(),
        )));
    } else {
        let _ = leading_tx.send(Some(0));
        state.metrics.leader.set(1);
    }

    let applier = parts.status;
    let memory = applier.memory();
    let (candidates_tx, candidates_rx) = watch::channel(None);
    let (failures_tx, failures_rx) = mpsc::unbounded_channel();
    tasks.push(tokio::spawn(render_loop(
        engine,
        events_rx,
        targets.len(),
        candidates_tx,
        failures_tx,
        memory,
        state.clone(),
    )));

    let status_inbox = Arc::new(StatusInbox::default());
    tasks.push(tokio::spawn(
        StatusTask {
            applier,
            events: parts.events,
            state: state.clone(),
        }
        .run(status_inbox.clone()),
    ));
    let deployer = Deployer {
        fleet: Fleet::new(settings.fleet.clone()),
        status: status_inbox,
        state: state.clone(),
        settings: settings.clone(),
    };
    tasks.push(tokio::spawn(deployer.run(
        candidates_rx,
        pods_rx,
        leading_rx,
        failures_rx,
    )));

    if let Some(listen) = settings.listen {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("listening on {listen} for /metrics and probes: {e}"))?;
        tasks.push(tokio::spawn(serve_http(listener, state.clone())));
    }

    shutdown.await;
    drop(tasks);
    if let Some(elector) = elector {
        // A follower takes over at once instead of after the Lease's term.
        if let Err(error) = elector.release().await {
            tracing::warn!(%error, "releasing the Lease on shutdown");
        }
    }
    Ok(())
}

/// The controller's tasks, aborted together when dropped: on shutdown, and
/// when the future of [`run`] itself is dropped, so nothing keeps deploying
/// behind a controller that is gone.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Tasks {
    fn push(&mut self, task: tokio::task::JoinHandle<()>) {
        self.0.push(task);
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

async fn lead(elector: Arc<Elector>, leading: watch::Sender<Option<u64>>, state: Arc<State>) {
    loop {
        match elector.acquire().await {
            Ok(leadership) => {
                let _ = leading.send(Some(leadership.epoch));
                state.metrics.leader.set(1);
                if let Err(error) = elector.lost().await {
                    tracing::error!(%error, "renewing the Lease");
                }
                let _ = leading.send(None);
                state.metrics.leader.set(0);
            }
            Err(error) => {
                tracing::error!(%error, "taking part in leader election; retrying in 2 s");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

/// Whether `next` must pass `haproxy -c` before it is deployed, given the
/// last configuration that did. Not when the agents' runtime plan covers
/// the difference (server address, port, weight, maintenance): every other
/// line is one HAProxy accepted, the plan checks addresses are literal
/// `ip:port` and weights in range, and those are exactly the changes an
/// endpoint flip makes, which must not pay ~50-150 ms of `haproxy -c` at
/// scale. Map files are left out of the comparison's runtime set (an empty
/// loaded-map list), so any map change is validated: a map entry HAProxy
/// cannot parse would fail the next reload.
pub fn needs_validation(accepted: Option<&Bundle>, next: &Bundle) -> bool {
    match accepted {
        None => true,
        Some(accepted) => matches!(
            plan::plan(accepted, next, &Default::default()),
            Plan::Reload(_)
        ),
    }
}

/// The bundle of a render: what the agents get.
pub fn bundle(rendered: &Rendered) -> Bundle {
    Bundle::new(
        rendered.config.clone(),
        rendered
            .files
            .iter()
            .map(|(path, content)| {
                let mut file = BundleFile::new(path.clone(), content.clone());
                // What the library declared, beyond what the content shows.
                file.secret |= rendered.secret_files.contains(path);
                file
            })
            .collect(),
    )
}

/// The first sequence: milliseconds since the epoch, so a restarted
/// controller (same Lease epoch without election) never reuses one the
/// agents have seen.
fn clock_sequence() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
async fn render_loop(
    mut engine: Engine,
    mut events: mpsc::UnboundedReceiver<SourceEvent>,
    targets: usize,
    candidates: watch::Sender<Option<Arc<Candidate>>>,
    failures: mpsc::UnboundedSender<Failure>,
    memory: StatusMemory,
    state: Arc<State>,
) {
    let mut listed = vec![false; targets];
    let mut pending = Vec::new();
    let mut accepted: Option<Arc<Bundle>> = None;
    let mut last_good: Option<Rendered> = None;
    let mut sequence = clock_sequence();
    let mut gate_seen: HashMap<ObjectRef, Instant> = HashMap::new();
    let mut warned: HashSet<PlannedWarning> = HashSet::new();
    let mut first = true;
    loop {
        // With no watches (no library watches anything) the first render
        // needs no event.
        if !(first && targets == 0) {
            let Some(event) = events.recv().await else {
                return;
            };
            absorb(event, &mut listed, &mut pending);
            while let Ok(event) = events.try_recv() {
                absorb(event, &mut listed, &mut pending);
            }
            if !listed.iter().all(|done| *done) {
                continue;
            }
        }
        first = false;
        let changes = std::mem::take(&mut pending);
        let started = Instant::now();
        let result = tokio::task::block_in_place(|| engine.render(changes));
        state
            .metrics
            .render_seconds
            .observe(started.elapsed().as_secs_f64());
        state.metrics.memory.set_render(&engine.renderer().memory());
        state
            .metrics
            .memory
            .status_remembered
            .set(i64::try_from(memory.len()).unwrap_or(i64::MAX));
        let rendered = match result {
            Ok(rendered) => rendered,
            Err(error) => {
                report_failure(&state, &failures, &last_good, "RenderFailed", &error);
                continue;
            }
        };
        report_new_warnings(&engine, &rendered, &mut warned, &failures);
        let next = bundle(&rendered);
        if needs_validation(accepted.as_deref(), &next) {
            let started = Instant::now();
            let validated = tokio::task::block_in_place(|| engine::validate(&rendered));
            state
                .metrics
                .validate_seconds
                .observe(started.elapsed().as_secs_f64());
            if let Err(error) = validated {
                report_failure(&state, &failures, &last_good, "ConfigRefused", &error);
                continue;
            }
        } else {
            state.metrics.validations_skipped.inc();
        }
        state
            .metrics
            .renders
            .get_or_create(&ResultLabels { result: "ok" })
            .inc();
        sequence = sequence.max(clock_sequence()) + 1;
        let candidate = candidate(&engine, &rendered, &next, sequence, &memory, &mut gate_seen);
        accepted = Some(candidate.bundle.clone());
        last_good = Some(rendered);
        let _ = candidates.send(Some(Arc::new(candidate)));
        state.ready.store(true, Ordering::Relaxed);
    }
}

fn absorb(
    event: SourceEvent,
    listed: &mut [bool],
    pending: &mut Vec<crate::render::ClusterChange>,
) {
    if event.listed
        && let Some(done) = listed.get_mut(event.target)
    {
        *done = true;
    }
    pending.extend(event.changes);
}

fn report_failure(
    state: &State,
    failures: &mpsc::UnboundedSender<Failure>,
    last_good: &Option<Rendered>,
    reason: &'static str,
    error: &EngineError,
) {
    let (result, libraries, object) = match error {
        EngineError::Render { error, object } => (
            "render-failed",
            error.library().map(str::to_owned).into_iter().collect(),
            object.as_deref().cloned(),
        ),
        EngineError::Refused { libraries, .. } => ("refused", libraries.clone(), None),
        _ => ("validate-error", Vec::new(), None),
    };
    state
        .metrics
        .renders
        .get_or_create(&ResultLabels { result })
        .inc();
    for library in libraries {
        state
            .metrics
            .library_errors
            .get_or_create(&LibraryLabels { library })
            .inc();
    }
    tracing::error!(%error, "render not deployed; the fleet stays on the last good configuration");
    let patches = last_good
        .as_ref()
        .and_then(|rendered| rendered.status_patches.get(&StatusVariant::RenderFailed))
        .map(|patches| patches.iter().map(|(_, patch)| patch.clone()).collect())
        .unwrap_or_default();
    let _ = failures.send(Failure {
        event: FailureEvent {
            reason: reason.into(),
            note: error.to_string(),
            object,
        },
        patches,
    });
}

/// Logs and records as Events the library warnings that were not in the
/// previous render: a warning lasts as long as its problem, and its owner
/// hears of it once (and again if it changes), not on every render.
fn report_new_warnings(
    engine: &Engine,
    rendered: &Rendered,
    warned: &mut HashSet<PlannedWarning>,
    failures: &mpsc::UnboundedSender<Failure>,
) {
    let current: HashSet<PlannedWarning> = rendered.warnings.iter().cloned().collect();
    for planned in rendered.warnings.iter().filter(|w| !warned.contains(*w)) {
        let (library, _, warning) = planned;
        let object = warning
            .object
            .as_ref()
            .and_then(|key| engine.object_of(library, key));
        tracing::warn!(library = %library, reason = %warning.reason, "{}", warning.message);
        let _ = failures.send(Failure {
            event: FailureEvent {
                reason: warning.reason.clone().into(),
                note: warning.message.clone(),
                object,
            },
            patches: Vec::new(),
        });
    }
    *warned = current;
}

fn candidate(
    engine: &Engine,
    rendered: &Rendered,
    bundle: &Bundle,
    sequence: u64,
    memory: &StatusMemory,
    gate_seen: &mut HashMap<ObjectRef, Instant>,
) -> Candidate {
    let mut patches: BTreeMap<StatusVariant, Vec<Arc<StatusPatch>>> = BTreeMap::new();
    let mut gate_pending_since = HashMap::new();
    let now = Instant::now();
    for (variant, planned) in &rendered.status_patches {
        for (_, patch) in planned {
            patches.entry(*variant).or_default().push(patch.clone());
            if memory.is_written(patch) {
                continue;
            }
            let reference = ObjectRef {
                api_version: patch.api_version.clone(),
                kind: patch.kind.clone(),
                namespace: patch.namespace.clone(),
                name: patch.name.clone(),
            };
            // A patch the object already holds (a restarted controller, a
            // condition a previous leader set) is remembered as written
            // here rather than carried to the status task with the
            // object's status: candidates once held thousands of those.
            let holding = engine
                .object(&reference)
                .and_then(|object| object.value().get_mut("status").map(Value::take))
                .is_some_and(|status| memory.note_if_holds(patch, &status));
            if holding {
                continue;
            }
            if *variant == StatusVariant::Deployed && is_gate_patch(patch) {
                let since = *gate_seen.entry(reference.clone()).or_insert(now);
                gate_pending_since.insert(reference, since);
            }
        }
    }
    // Forget pods whose gate patch is no longer pending.
    gate_seen.retain(|reference, _| gate_pending_since.contains_key(reference));
    Candidate {
        sequence,
        bundle: Arc::new(bundle.clone()),
        patches,
        gate_pending_since,
    }
}

fn is_gate_patch(patch: &StatusPatch) -> bool {
    patch.kind == "Pod" && patch.status.contains(GATE_CONDITION)
}

/// The deploy task's state.
struct Deployer {
    fleet: Fleet,
    /// Status writes go to their own task: thousands of first-time gate
    /// conditions must not hold the next deploy.
    status: Arc<StatusInbox>,
    state: Arc<State>,
    settings: Settings,
}

/// Work for the status task.
enum StatusJob {
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
struct StatusInbox {
    jobs: std::sync::Mutex<StatusJobs>,
    /// Holds a permit when nobody waits, so no job is missed.
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct StatusJobs {
    writes: BTreeMap<StatusVariant, Arc<Candidate>>,
    reports: std::collections::VecDeque<Failure>,
}

impl StatusInbox {
    /// Queues the candidate's patches of `variant`, replacing an older
    /// candidate's that still wait.
    fn write(&self, candidate: Arc<Candidate>, variant: StatusVariant) {
        self.lock().writes.insert(variant, candidate);
        self.wake.notify_one();
    }

    fn report(&self, failure: Failure) {
        self.lock().reports.push_back(failure);
        self.wake.notify_one();
    }

    /// The next job: failure reports first, then writes by variant.
    async fn next(&self) -> StatusJob {
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
struct StatusTask {
    applier: StatusApplier,
    events: Arc<dyn EventSink>,
    state: Arc<State>,
}

impl Deployer {
    async fn run(
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
                    self.write(&candidate, StatusVariant::Deployed);
                    retry.reset();
                }
                DeployResult::Superseded => {}
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
        let report = self
            .fleet
            .deploy(&Deployment {
                token: FencingToken {
                    epoch,
                    sequence: candidate.sequence,
                },
                bundle: candidate.bundle.clone(),
            })
            .await;
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
                    PodOutcome::Failed(error) => Some(format!("{}: {error}", pod.pod)),
                    _ => None,
                })
                .collect();
            self.update_converged_gauge(id);
            return DeployResult::Failed(failed.join("; "));
        }
        let converged = if self.fleet.converged_on(id) {
            true
        } else {
            tokio::select! {
                converged = self.fleet.await_convergence(id, self.settings.convergence_wait) => converged,
                _ = candidates.changed() => return DeployResult::Superseded,
            }
        };
        self.update_converged_gauge(id);
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

    fn update_converged_gauge(&self, id: &str) {
        let converged = self
            .fleet
            .pods()
            .iter()
            .filter(|pod| pod.converged.as_deref() == Some(id))
            .count();
        self.state
            .metrics
            .fleet_converged_pods
            .set(converged as i64);
    }

    /// Queues the candidate's patches of `variant` for the status task.
    fn write(&self, candidate: &Arc<Candidate>, variant: StatusVariant) {
        if candidate.patches.contains_key(&variant) {
            self.status.write(candidate.clone(), variant);
        }
    }
}

impl StatusTask {
    async fn run(mut self, inbox: Arc<StatusInbox>) {
        loop {
            match inbox.next().await {
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
        let report = self.applier.apply(patches.iter().map(Arc::as_ref)).await;
        if variant == StatusVariant::Deployed {
            let now = Instant::now();
            let mut gates = 0usize;
            for (_, api_version, kind, namespace, name) in &report.written_patches {
                let reference = ObjectRef {
                    api_version: api_version.clone(),
                    kind: kind.clone(),
                    namespace: namespace.clone(),
                    name: name.clone(),
                };
                if let Some(since) = candidate.gate_pending_since.get(&reference) {
                    gates += 1;
                    self.state.metrics.gate_conditions_set.inc();
                    self.state
                        .metrics
                        .gate_latency_seconds
                        .observe(now.duration_since(*since).as_secs_f64());
                    tracing::debug!(pod = %format!("{namespace}/{name}"), "readiness gate set: every HAProxy pod routes to it");
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
                .apply(failure.patches.iter().map(Arc::as_ref))
                .await;
            for failed in &report.failed {
                tracing::warn!(object = %failed.object, error = %failed.error, "status patch not written");
            }
        }
        self.events.publish(failure.event).await;
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

async fn serve_http(listener: tokio::net::TcpListener, state: Arc<State>) {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get({
                let state = state.clone();
                move || async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        state.metrics.encode(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/status",
            get({
                let state = state.clone();
                move || async move {
                    let local = state
                        .local_status
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone();
                    match local {
                        Some(status) => axum::Json(status.snapshot()).into_response(),
                        None => (
                            StatusCode::NOT_FOUND,
                            "status is on the objects in the cluster (kubectl get -o yaml)",
                        )
                            .into_response(),
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || async move {
                if state.ready.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ready")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "waiting for the first list of every watch and the first render",
                    )
                }
            }),
        );
    if let Err(error) = axum::serve(listener, app).await {
        tracing::error!(%error, "serving /metrics and probes");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_of(config: &str) -> Bundle {
        Bundle::new(config.to_owned(), Vec::new())
    }

    #[test]
    fn a_warning_is_reported_when_it_appears_or_changes_not_on_every_render() {
        use crate::library::types::{ObjectKey, Warning};
        let engine = Engine::new(Vec::new(), crate::values::Values::default())
            .expect("an engine without libraries");
        let warning = |message: &str| {
            (
                Arc::<str>::from("ingress"),
                "warning:TLSSecretMissing".to_owned(),
                Arc::new(Warning {
                    object: Some(ObjectKey {
                        watch: "ingresses".into(),
                        namespace: "shop".into(),
                        name: "web".into(),
                    }),
                    reason: "TLSSecretMissing".into(),
                    message: message.into(),
                }),
            )
        };
        let rendered = |warnings: Vec<PlannedWarning>| Rendered {
            warnings,
            ..Rendered::default()
        };
        let (sender, mut received) = mpsc::unbounded_channel();
        let mut warned = HashSet::new();
        let mut reasons = |warnings: Vec<PlannedWarning>| {
            report_new_warnings(&engine, &rendered(warnings), &mut warned, &sender);
            let mut got = Vec::new();
            while let Ok(failure) = received.try_recv() {
                got.push(format!("{}: {}", failure.event.reason, failure.event.note));
            }
            got
        };
        assert_eq!(reasons(vec![warning("gone")]), ["TLSSecretMissing: gone"]);
        assert!(
            reasons(vec![warning("gone")]).is_empty(),
            "same warning, no new Event"
        );
        assert_eq!(
            reasons(vec![warning("still gone")]),
            ["TLSSecretMissing: still gone"],
            "a changed message is news"
        );
        assert!(reasons(Vec::new()).is_empty(), "fixed: nothing to report");
        assert_eq!(
            reasons(vec![warning("gone")]).len(),
            1,
            "back again: reported again"
        );
    }

    #[test]
    fn only_changes_outside_the_runtime_plan_are_validated() {
        let base = "global\n  maxconn 10\nbackend b\n  server s1 10.0.0.1:80 weight 1\n";
        let flipped =
            "global\n  maxconn 10\nbackend b\n  server s1 10.0.0.1:80 weight 1 disabled\n";
        let moved = "global\n  maxconn 10\nbackend b\n  server s1 10.0.0.2:80 weight 1\n";
        let option = "global\n  maxconn 20\nbackend b\n  server s1 10.0.0.1:80 weight 1\n";
        assert!(needs_validation(None, &bundle_of(base)));
        assert!(!needs_validation(
            Some(&bundle_of(base)),
            &bundle_of(flipped)
        ));
        assert!(!needs_validation(Some(&bundle_of(base)), &bundle_of(moved)));
        assert!(!needs_validation(Some(&bundle_of(base)), &bundle_of(base)));
        assert!(needs_validation(Some(&bundle_of(base)), &bundle_of(option)));
        let with_map = Bundle::new(
            base.to_owned(),
            vec![BundleFile::new("maps/hosts.map", "a.example.com b\n")],
        );
        let map_changed = Bundle::new(
            base.to_owned(),
            vec![BundleFile::new("maps/hosts.map", "c.example.com b\n")],
        );
        assert!(
            needs_validation(Some(&with_map), &map_changed),
            "map contents are validated"
        );
    }

    fn empty_candidate(sequence: u64) -> Arc<Candidate> {
        Arc::new(Candidate {
            sequence,
            bundle: Arc::new(bundle_of("global\n")),
            patches: BTreeMap::new(),
            gate_pending_since: HashMap::new(),
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

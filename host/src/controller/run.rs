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
//! - **status**: writes status patches and publishes failure Events, in
//!   order, off the deploy path.
//! - **leader**: the Lease; its epoch fences every push.
//!
//! One file each: `render_loop`, `deploy`, `status_task`, and
//! `http` for `/metrics`, the probes and `/status`.
//!
//! A refused or failed render is never deployed: the fleet stays on the
//! last good candidate; the failure is logged, counted, sent as a Kubernetes
//! Event on the object the library blamed, and the last good render's
//! `render-failed` patches are written.

mod deploy;
mod http;
mod render_loop;
mod status_task;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::debug::DebugState;
use super::fleet::{Fleet, FleetSettings, ProxyPod};
use super::leader::{ElectionSettings, Elector};
use super::metrics::Metrics;
use super::proxies::{self, ProxySettings};
use super::sinks::{ApiEvents, EventSink, FailureEvent};
use crate::engine::Engine;
use crate::library::types::{StatusPatch, StatusVariant};
use crate::protocol::Bundle;
use crate::render::ObjectRef;
use crate::source::{self, SourceEvent, WatchTarget, kubernetes};
use crate::status_writes::StatusApplier;

pub use http::StatusView;
pub use render_loop::{bundle, needs_validation};

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
    /// The owned objects this render asks for, applied with its `rendered`
    /// patches, and the kinds the enabled libraries apply.
    pub owned: Arc<crate::owned::OwnedObjects>,
    /// Which library wrote which lines of the bundle's configuration: a
    /// reload HAProxy refuses at start-up names its library by them.
    pub origins: Arc<crate::render::LineOrigins>,
}

/// What the controller exposes to its HTTP endpoints and tests.
#[derive(Debug, Default)]
pub struct State {
    pub metrics: Metrics,
    /// Why rollouts wait: `/debug/fleet`, `/debug/gates`.
    pub debug: DebugState,
    /// Every watch has listed and the first render is done (followers too:
    /// their caches are warm).
    pub ready: AtomicBool,
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
    /// Applies owned objects; `None` in local mode (`haptic run`), which
    /// logs them instead.
    pub owned: Option<super::owned::OwnedApplier>,
    pub events: Arc<dyn EventSink>,
    /// `None`: this replica always leads.
    pub elector: Option<Arc<Elector>>,
    /// Status the controller keeps itself (`haptic run`), served at
    /// `/status`; `None` in a cluster, where it is on the objects.
    pub status_view: Option<Arc<dyn StatusView>>,
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
            source: Box::new(move |targets, events| {
                kubernetes::spawn(source_client, targets, events)
            }),
            proxies: Box::new(move |out| {
                tokio::spawn(proxies::discover(proxy_client, proxy_settings, out))
            }),
            status: StatusApplier::new(client.clone()),
            owned: Some(super::owned::OwnedApplier::new(client.clone())),
            events: Arc::new(ApiEvents::new(
                client,
                &settings.proxies.namespace,
                &settings.identity,
            )),
            elector,
            status_view: None,
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
pub async fn run_in_cluster(
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
    state.debug.set_identity(&settings.identity);
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
    tasks.push(tokio::spawn(render_loop::run(
        engine,
        events_rx,
        targets.len(),
        candidates_tx,
        failures_tx,
        memory,
        state.clone(),
    )));

    let status_inbox = Arc::new(status_task::StatusInbox::default());
    tasks.push(tokio::spawn(
        status_task::StatusTask {
            applier,
            owned: parts.owned,
            shown_owned: Vec::new(),
            events: parts.events,
            state: state.clone(),
        }
        .run(status_inbox.clone()),
    ));
    let deployer = deploy::Deployer {
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
        tasks.push(tokio::spawn(http::serve(
            listener,
            state.clone(),
            parts.status_view,
        )));
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
/// when the future of [`run_in_cluster`] itself is dropped, so nothing keeps deploying
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

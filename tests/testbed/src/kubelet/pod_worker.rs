//! One task per pod: sets the pod up, runs its containers, probes them, writes
//! its status, and on deletion stops it and makes the final delete.
//!
//! Lifecycle, as kubelet does it:
//! 1. Accept: status `Pending`, containers waiting in `ContainerCreating`.
//! 2. Set up volumes and environments; a missing ConfigMap/Secret keeps the
//!    pod in `ContainerCreating` / `CreateContainerConfigError` and is retried.
//! 3. Start every container, probe them, restart exited ones per
//!    `restartPolicy` (backoff 1 s doubling to 10 s; kubelet's is 10 s to 5 min).
//! 4. On `deletionTimestamp`: run `preStop` hooks, SIGTERM each container's
//!    main process, keep probing, SIGKILL whatever is left when
//!    `deletionGracePeriodSeconds` run out, write the terminal status, then
//!    delete with grace 0 and the pod's UID as precondition.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use nix::sys::signal::Signal;
use serde_json::Value;
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::Shared;
use super::container::{self, Launch, Process};
use super::probe::{self, Tracker};
use super::status::{self, ContainerView, PodView, State, Terminated, TransitionClock};

mod probing;
mod setup;
mod termination;

const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(1);
/// kubelet's generic PLEG relist period.
const RELIST: Duration = Duration::from_secs(1);

enum Event {
    Exited {
        idx: usize,
        instance: u64,
        exit: container::Exit,
    },
    Probed {
        idx: usize,
        instance: u64,
        ok: bool,
    },
    Live {
        idx: usize,
        instance: u64,
        ok: bool,
    },
    /// The preStop hook is done: time for SIGTERM.
    Term {
        idx: usize,
        instance: u64,
    },
}

struct Slot {
    /// An init container: runs to completion, in order, before the app containers.
    init: bool,
    spec: Container,
    view: ContainerView,
    launch: Option<Launch>,
    probe: Option<probe::Spec>,
    tracker: Tracker,
    process: Option<Process>,
    instance: u64,
    restart_at: Option<Instant>,
    backoff: Duration,
    /// Runs the probe at once (kubelet's manual trigger).
    trigger: Option<Arc<Notify>>,
    liveness: Option<probe::Spec>,
    live_tracker: Tracker,
    /// A liveness kill in progress: SIGKILL the group at this time.
    kill_at: Option<Instant>,
}

struct Worker {
    shared: Arc<Shared>,
    pod: Arc<Pod>,
    dir: PathBuf,
    ip: Ipv4Addr,
    start_time: String,
    slots: Vec<Slot>,
    clock: TransitionClock,
    last_written: Option<Value>,
    events: mpsc::UnboundedSender<Event>,
    tasks: JoinSet<()>,
    terminating: Option<Instant>,
    /// The next PLEG relist tick that will notice a started container.
    relist_at: Option<Instant>,
    /// A failed status write is retried then.
    write_retry: Option<Instant>,
    _lease: Option<IpLease>,
}

/// The pod's address, back to the pool when the worker ends.
struct IpLease {
    shared: Arc<Shared>,
    ip: Ipv4Addr,
}

impl Drop for IpLease {
    fn drop(&mut self) {
        self.shared.ips.release(self.ip);
    }
}

/// Runs the pod until it is gone; returns its UID.
pub(crate) async fn run(
    shared: Arc<Shared>,
    mut pods: watch::Receiver<Option<Arc<Pod>>>,
) -> String {
    let Some(pod) = pods.borrow_and_update().clone() else {
        return String::new();
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let lease = if host_network {
        None
    } else {
        let Some(ip) = shared.ips.allocate() else {
            tracing::error!(pod = ?pod.metadata.name, "no free pod IP on this node; the pod stays Pending");
            return uid;
        };
        Some(IpLease {
            shared: shared.clone(),
            ip,
        })
    };
    let ip = lease.as_ref().map_or(shared.node_ip, |l| l.ip);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let inits: Vec<Slot> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .map(|c| new_slot(&shared, c, true, false))
        .collect();
    let has_init = !inits.is_empty();
    let slots = inits
        .into_iter()
        .chain(
            pod.spec
                .iter()
                .flat_map(|s| s.containers.iter())
                .map(|c| new_slot(&shared, c, false, has_init)),
        )
        .collect();
    let mut w = Worker {
        dir: shared.state_dir.join("pods").join(&uid),
        clock: TransitionClock::from_pod(&pod),
        start_time: status::now(),
        shared,
        pod,
        ip,
        slots,
        last_written: None,
        events: tx,
        tasks: JoinSet::new(),
        terminating: None,
        relist_at: None,
        write_retry: None,
        _lease: lease,
    };
    let terminal = matches!(
        w.pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let mut set_up = terminal;
    let mut retry_at = Instant::now();
    loop {
        if w.pod.metadata.deletion_timestamp.is_some() && w.terminating.is_none() {
            w.begin_termination();
        }
        if !set_up && w.terminating.is_none() && Instant::now() >= retry_at {
            match w.set_up().await {
                Ok(()) => {
                    set_up = true;
                    w.start_next();
                }
                Err(()) => retry_at = Instant::now() + RETRY,
            }
        }
        if w.terminating.is_some() && w.slots.iter().all(|s| s.process.is_none()) {
            w.finish(terminal).await;
            return uid;
        }
        if !terminal && !w.write_status().await {
            return uid;
        }
        let next_restart = w.slots.iter().filter_map(|s| s.restart_at).min();
        let wake = [
            next_restart,
            w.terminating,
            (!set_up).then_some(retry_at),
            w.relist_at,
            w.write_retry,
            w.slots.iter().filter_map(|s| s.kill_at).min(),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            changed = pods.changed() => {
                let current = if changed.is_ok() { pods.borrow_and_update().clone() } else { None };
                match current {
                    Some(p) => {
                        // A spec or metadata change is a pod sync; status-only
                        // changes (kubelet's own writes) are not, as in kubelet.
                        let synced = p.metadata.generation != w.pod.metadata.generation
                            || p.metadata.deletion_timestamp != w.pod.metadata.deletion_timestamp;
                        w.pod = p;
                        if synced {
                            w.sync_probes();
                        }
                    }
                    // Gone from the API (force-deleted) or kubelet stopping: just
                    // stop; dropping the worker SIGKILLs its processes.
                    None => {
                        w.remove_volumes();
                        return uid;
                    }
                }
            }
            Some(event) = rx.recv() => w.handle(event),
            () = tokio::time::sleep_until(wake) => w.on_timer(),
        }
    }
}

fn new_slot(shared: &Shared, c: &Container, init: bool, after_init: bool) -> Slot {
    let image = c.image.clone().unwrap_or_default();
    let image_id = shared.config.image_id(&image);
    // kubelet's reason for app containers while init containers run.
    let reason = if after_init {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    Slot {
        init,
        spec: c.clone(),
        view: ContainerView {
            name: c.name.clone(),
            image,
            image_id,
            container_id: None,
            state: waiting(reason, String::new()),
            last_terminated: None,
            restart_count: 0,
            ready: false,
            volume_mounts: c
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| {
                    (
                        m.name.clone(),
                        m.mount_path.clone(),
                        m.read_only.unwrap_or(false),
                    )
                })
                .collect(),
        },
        launch: None,
        probe: None,
        tracker: Tracker::default(),
        process: None,
        instance: 0,
        restart_at: None,
        backoff: BACKOFF_START,
        trigger: None,
        liveness: None,
        live_tracker: Tracker::passing(),
        kill_at: None,
    }
}

fn waiting(reason: &str, message: String) -> State {
    State::Waiting {
        reason: reason.to_string(),
        message,
    }
}

impl Worker {
    fn name(&self) -> String {
        format!(
            "{}/{}",
            self.pod.metadata.namespace.as_deref().unwrap_or_default(),
            self.pod.metadata.name.as_deref().unwrap_or_default()
        )
    }

    fn api(&self) -> Api<Pod> {
        let ns = self.pod.metadata.namespace.as_deref().unwrap_or("default");
        Api::namespaced(self.shared.client.clone(), ns)
    }

    fn start(&mut self, idx: usize) {
        let registry = self.shared.processes.clone();
        let events = self.events.clone();
        let slot = &mut self.slots[idx];
        let Some(mut launch) = slot.launch.clone() else {
            return;
        };
        slot.restart_at = None;
        slot.instance += 1;
        let instance = slot.instance;
        launch.log = launch
            .log
            .with_file_name(format!("{}.log", slot.view.restart_count));
        match container::spawn(&launch, &registry) {
            Ok((process, child)) => {
                let pid = process.pid();
                slot.view.container_id = Some(format!("process://{pid}"));
                slot.view.state = State::Running {
                    started_at: status::now(),
                };
                // No readiness probe: ready as soon as it runs (init containers: once done).
                slot.view.ready = slot.probe.is_none() && !slot.init;
                slot.process = Some(process);
                self.tasks.spawn(async move {
                    let exit = container::wait(child).await;
                    let _ = events.send(Event::Exited {
                        idx,
                        instance,
                        exit,
                    });
                });
                self.start_probes(idx, instance, &launch.env);
            }
            Err(e) => {
                tracing::warn!("{e}");
                slot.view.state = waiting("RunContainerError", e.to_string());
                slot.restart_at = Some(Instant::now() + slot.backoff);
                slot.backoff = (slot.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Probed { idx, instance, ok } => self.readiness_result(idx, instance, ok),
            Event::Live { idx, instance, ok } => self.liveness_result(idx, instance, ok),
            Event::Term { idx, instance } => {
                let slot = &self.slots[idx];
                if slot.instance == instance
                    && let Some(p) = &slot.process
                {
                    p.signal_main(Signal::SIGTERM);
                }
            }
            Event::Exited {
                idx,
                instance,
                exit,
            } => self.exited(idx, instance, exit),
        }
    }

    fn exited(&mut self, idx: usize, instance: u64, exit: container::Exit) {
        let policy = status::restart_policy(&self.pod).to_string();
        let terminating = self.terminating.is_some();
        let slot = &mut self.slots[idx];
        if slot.instance != instance {
            return;
        }
        slot.process = None;
        slot.kill_at = None;
        slot.view.ready = false;
        let started_at = match &slot.view.state {
            State::Running { started_at } => started_at.clone(),
            _ => status::now(),
        };
        let terminated = Terminated {
            exit_code: exit.code,
            signal: exit.signal,
            reason: if exit.code == 0 { "Completed" } else { "Error" }.into(),
            started_at,
            finished_at: status::now(),
            container_id: slot.view.container_id.clone().unwrap_or_default(),
        };
        // Init containers restart only on failure, unless the policy is Never.
        let restart = !terminating
            && match policy.as_str() {
                "Never" => false,
                "OnFailure" => exit.code != 0,
                _ if slot.init => exit.code != 0,
                _ => true,
            };
        let init_done = slot.init && exit.code == 0;
        if restart {
            slot.view.last_terminated = Some(terminated);
            slot.view.restart_count += 1;
            slot.view.state = waiting(
                "CrashLoopBackOff",
                format!(
                    "back-off {}s restarting failed container={}",
                    slot.backoff.as_secs(),
                    slot.view.name
                ),
            );
            slot.restart_at = Some(Instant::now() + slot.backoff);
            slot.backoff = (slot.backoff * 2).min(BACKOFF_MAX);
        } else {
            slot.view.ready = init_done;
            slot.view.state = State::Terminated(terminated);
        }
        if init_done && !terminating {
            self.start_next();
        }
    }

    /// Starts the first init container that has not completed, or, once all
    /// have, every app container (kubelet's order).
    fn start_next(&mut self) {
        let pending_init = self.slots.iter().position(|s| {
            s.init && !matches!(&s.view.state, State::Terminated(t) if t.exit_code == 0)
        });
        match pending_init {
            Some(idx) => {
                let s = &self.slots[idx];
                let failed_for_good = matches!(s.view.state, State::Terminated(_));
                if s.process.is_none() && s.restart_at.is_none() && !failed_for_good {
                    self.start(idx);
                }
            }
            None => {
                for idx in 0..self.slots.len() {
                    if !self.slots[idx].init && self.slots[idx].instance == 0 {
                        self.start(idx);
                    }
                }
            }
        }
    }

    fn on_timer(&mut self) {
        let now = Instant::now();
        for s in &mut self.slots {
            if s.kill_at.is_some_and(|t| t <= now) {
                s.kill_at = None;
                if let Some(p) = &s.process {
                    p.signal(Signal::SIGKILL);
                }
            }
        }
        if self.relist_at.is_some_and(|t| t <= now) {
            self.relist_at = None;
            self.sync_probes();
        }
        if self.terminating.is_some_and(|deadline| now >= deadline) {
            for s in &self.slots {
                if let Some(p) = &s.process {
                    tracing::info!(pod = %self.name(), container = %s.view.name, "grace period over: SIGKILL");
                    p.signal(Signal::SIGKILL);
                }
            }
            // Exits arrive as events; don't fire again.
            self.terminating = Some(now + Duration::from_secs(3600));
        }
        let due: Vec<usize> = (0..self.slots.len())
            .filter(|i| {
                self.terminating.is_none() && self.slots[*i].restart_at.is_some_and(|t| t <= now)
            })
            .collect();
        for idx in due {
            self.start(idx);
        }
    }

    fn view(&self) -> PodView {
        PodView {
            init_containers: self
                .slots
                .iter()
                .filter(|s| s.init)
                .map(|s| s.view.clone())
                .collect(),
            containers: self
                .slots
                .iter()
                .filter(|s| !s.init)
                .map(|s| s.view.clone())
                .collect(),
            pod_ip: Some(self.ip),
            host_ip: self.shared.node_ip,
            start_time: self.start_time.clone(),
            terminal: self.terminating.is_some() && self.slots.iter().all(|s| s.process.is_none()),
        }
    }

    /// Applies the status if it changed; false when the pod is gone for good.
    async fn write_status(&mut self) -> bool {
        let view = self.view();
        let body = status::apply_body(&self.pod, &view, &mut self.clock);
        if self.last_written.as_ref() == Some(&body) {
            self.write_retry = None;
            return true;
        }
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        let params = PatchParams::apply(status::FIELD_MANAGER).force();
        match self
            .api()
            .patch_status(&name, &params, &Patch::Apply(&body))
            .await
        {
            Ok(_) => {
                self.last_written = Some(body);
                self.write_retry = None;
                true
            }
            // Gone, or replaced by a pod of the same name (UID precondition).
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {
                tracing::info!(pod = %self.name(), "pod gone; stopping: {}", e.message);
                false
            }
            Err(e) => {
                tracing::warn!(pod = %self.name(), "writing status (retrying in 1 s): {e}");
                self.write_retry = Some(Instant::now() + RETRY);
                true
            }
        }
    }
}

//! Applying bundles to the local HAProxy and reporting what its workers run.
//!
//! One apply at a time (a lock held for the whole apply): a second request
//! waits, then is judged against what the first left, so a request carrying
//! a token older than the one just applied is refused rather than undoing it.
//!
//! What a worker runs is learned from HAProxy: its `description` (the id of
//! the file it started from), plus the runtime changes this agent applied
//! to that very process, remembered on disk so an agent restart keeps them.

use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::sync::Mutex;
use tracing::Instrument as _;

use super::disk::{AgentState, BOOTSTRAP_ID, ConfigDir, WorkerRecord};
use super::haproxy::{CliError, Haproxy, ProcList, ReloadAnswer, RuntimeError, WorkerInfo};
use super::metrics::{ApplyLabels, Metrics, ModeLabels, ReasonLabels, RoleLabels};
use crate::protocol::plan::{Plan, ReloadReason, plan};
use crate::protocol::runtime_commands::RuntimeCommand;
use crate::protocol::wire::{
    ApplyMode, ApplyRequest, ApplyResponse, Bundle, FencingToken, PodState, WorkerRole, WorkerState,
};
use crate::validate::{self, CONFIG_FILE, ValidationError, Validator};

/// Limits on what one apply may carry.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Configuration plus file contents, in bytes.
    pub max_bundle_bytes: usize,
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bundle_bytes: 64 * 1024 * 1024,
            max_files: 10_000,
        }
    }
}

/// Why an apply was refused or failed. In every case but
/// [`ApplyError::ReloadFailed`] nothing changed; after a failed reload the
/// previous worker keeps serving and the last good files are back on disk.
#[derive(Debug, Error)]
pub enum ApplyError {
    /// The id is not the content's hash.
    #[error(
        "bundle id {claimed} does not match its content (sha256 of it is {computed}); the bundle was altered or built wrongly"
    )]
    BadId { claimed: String, computed: String },
    /// A file path leaves the configuration directory or clashes.
    #[error("{0}")]
    BadPath(String),
    /// The bundle is larger than this agent takes.
    #[error(
        "bundle has {actual} {what}, more than the {limit} this agent takes (raise --max-bundle-bytes / --max-files if this is intended)"
    )]
    TooLarge {
        what: &'static str,
        actual: usize,
        limit: usize,
    },
    /// The bundle sets what the agent owns.
    #[error("{0}")]
    Reserved(String),
    /// The token is older than the newest accepted: a deposed leader.
    #[error(
        "fencing token {offered} is older than {newest}, the newest this agent accepted; a newer leader has taken over"
    )]
    StaleToken {
        offered: FencingToken,
        newest: FencingToken,
    },
    /// The newest token came again with other content.
    #[error(
        "fencing token {token} was already used for bundle {applied}; every render needs a new sequence number"
    )]
    TokenReused {
        token: FencingToken,
        applied: String,
    },
    /// `haproxy -c` refused the bundle.
    #[error("HAProxy refused the bundle; the running configuration keeps serving:\n{0}")]
    Refused(String),
    /// The master did not start a worker from the new files.
    #[error("{0}")]
    ReloadFailed(String),
    /// HAProxy's sockets could not be used.
    #[error(transparent)]
    Haproxy(#[from] CliError),
    /// haproxy could not be run for validation.
    #[error(transparent)]
    Validator(ValidationError),
    /// The configuration directory could not be written.
    #[error(
        "writing the configuration directory {dir}: {source}; HAProxy keeps running the bundle it \
         has. Free space on (or fix the permissions of) that volume; the controller's next push \
         applies the bundle"
    )]
    Disk {
        dir: String,
        #[source]
        source: std::io::Error,
    },
}

impl ApplyError {
    /// The stable code of the error body.
    /// Every [`ApplyError::code`], for metrics exported before the first
    /// refusal.
    pub const CODES: [&'static str; 9] = [
        "bad-id",
        "bad-path",
        "too-large",
        "bad-request",
        "stale-token",
        "refused",
        "reload-failed",
        "haproxy-unavailable",
        "internal",
    ];

    pub fn code(&self) -> &'static str {
        match self {
            ApplyError::BadId { .. } => "bad-id",
            ApplyError::BadPath(_) => "bad-path",
            ApplyError::TooLarge { .. } => "too-large",
            ApplyError::Reserved(_) => "bad-request",
            ApplyError::StaleToken { .. } | ApplyError::TokenReused { .. } => "stale-token",
            ApplyError::Refused(_) => "refused",
            ApplyError::ReloadFailed(_) => "reload-failed",
            ApplyError::Haproxy(_) => "haproxy-unavailable",
            ApplyError::Validator(_) | ApplyError::Disk { .. } => "internal",
        }
    }
}

/// The agent's core: the local HAProxy, its directory, its state.
#[derive(Debug)]
pub struct Applier {
    haproxy: Haproxy,
    dir: ConfigDir,
    validator: Validator,
    limits: Limits,
    reload_timeout: Duration,
    haproxy_version: String,
    /// Held for a whole apply: applies are serialized.
    applying: Mutex<()>,
    /// The agent's records, as last saved. Only an apply changes them (on
    /// a copy, saved and published here), so reading the pod's state never
    /// waits for an apply: probes and convergence polls stay fast during a
    /// long reload.
    state: std::sync::Mutex<AgentState>,
    /// The bundle the last successful apply installed (at start: `current/`),
    /// for what reads the bundle's files beside HAProxy (the SPOA).
    applied: tokio::sync::watch::Sender<Option<String>>,
    pub metrics: Metrics,
}

/// What the workers run right now.
struct Observed {
    state: PodState,
    reloads_failed: u64,
}

impl Applier {
    pub fn new(
        haproxy: Haproxy,
        dir: ConfigDir,
        validator: Validator,
        limits: Limits,
        reload_timeout: Duration,
    ) -> Result<Self, ApplyError> {
        let haproxy_version = validator.version().map_err(ApplyError::Validator)?;
        let state = dir
            .load_state()
            .map_err(|source| disk_error(&dir, source))?;
        let applied = tokio::sync::watch::Sender::new(dir.current().map(|c| c.id));
        Ok(Self {
            applied,
            haproxy,
            dir,
            validator,
            limits,
            reload_timeout,
            haproxy_version,
            applying: Mutex::new(()),
            state: std::sync::Mutex::new(state),
            metrics: Metrics::with_refusal_reasons(&ApplyError::CODES),
        })
    }

    /// Names each bundle an apply installs, from the one installed now.
    pub fn applied(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.applied.subscribe()
    }

    /// The configuration directory the agent writes bundles into.
    pub fn config_dir(&self) -> &ConfigDir {
        &self.dir
    }

    /// The pod's state, learned from HAProxy.
    pub async fn state(&self) -> Result<PodState, ApplyError> {
        let state = self.snapshot();
        Ok(self.observe(&state).await?.state)
    }

    /// Waits until every live worker runs `id` or `timeout` passes, and
    /// returns the state then (the caller reads `converged`).
    pub async fn wait_converged(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<PodState, ApplyError> {
        let deadline = Instant::now() + timeout;
        loop {
            // HAProxy may be restarting: keep asking until the deadline.
            match self.state().await {
                Ok(state) if state.converged.as_deref() == Some(id) => return Ok(state),
                result if Instant::now() >= deadline => return result,
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    /// Ready once the current worker runs a bundle (not the bootstrap).
    pub async fn ready(&self) -> bool {
        self.state().await.is_ok_and(|state| {
            state
                .current_worker()
                .is_some_and(|w| w.config_id != BOOTSTRAP_ID)
        })
    }

    /// Checks and applies `request`; see the module docs.
    pub async fn apply(&self, request: ApplyRequest) -> Result<ApplyResponse, ApplyError> {
        let started = Instant::now();
        let span =
            tracing::info_span!("apply", bundle = %request.bundle.id, token = %request.token);
        let result = self.apply_inner(request).instrument(span).await;
        match &result {
            Ok(response) => {
                self.applied.send_replace(Some(response.id.clone()));
                self.metrics
                    .applies
                    .get_or_create(&ApplyLabels {
                        mode: response.mode.as_str(),
                        result: "applied",
                    })
                    .inc();
                self.metrics
                    .apply_seconds
                    .get_or_create(&ModeLabels {
                        mode: response.mode.as_str(),
                    })
                    .observe(started.elapsed().as_secs_f64());
            }
            Err(
                error @ (ApplyError::ReloadFailed(_)
                | ApplyError::Haproxy(_)
                | ApplyError::Disk { .. }
                | ApplyError::Validator(_)),
            ) => {
                tracing::warn!(error = %error, "apply failed");
                self.metrics
                    .applies
                    .get_or_create(&ApplyLabels {
                        // Failures after the checks happen on the reload
                        // path (a failed runtime apply falls back to it).
                        mode: ApplyMode::Reload.as_str(),
                        result: "failed",
                    })
                    .inc();
            }
            Err(error) => {
                tracing::warn!(error = %error, "bundle refused");
                self.metrics
                    .refused
                    .get_or_create(&ReasonLabels {
                        reason: error.code().to_owned(),
                    })
                    .inc();
            }
        }
        result
    }

    async fn apply_inner(&self, request: ApplyRequest) -> Result<ApplyResponse, ApplyError> {
        let received = Instant::now();
        let ApplyRequest { token, bundle } = request;
        self.check(&bundle)?;
        let _applying = self.applying.lock().await;
        let mut state = self.snapshot();
        match state.newest_token {
            Some(newest) if token < newest => {
                return Err(ApplyError::StaleToken {
                    offered: token,
                    newest,
                });
            }
            Some(newest) if token == newest => {
                if let Some(applied) = self
                    .dir
                    .current()
                    .filter(|c| c.token == token && c.id != bundle.id)
                {
                    return Err(ApplyError::TokenReused {
                        token,
                        applied: applied.id,
                    });
                }
            }
            _ => {
                state.newest_token = Some(token);
                self.save(&state)?;
            }
        }
        let observed = self.observe(&state).await?;
        let Some(current) = observed.state.current_worker().cloned() else {
            return Err(CliError::Unexpected {
                command: "show proc".into(),
                answer: "no current worker: HAProxy is starting or stopping".into(),
            }
            .into());
        };
        if current.config_id == bundle.id {
            // Already running (a retry, or a skipped deploy confirming state);
            // make sure the disk says so too.
            self.install(&bundle, token)?;
            return Ok(ApplyResponse {
                id: bundle.id,
                mode: ApplyMode::Unchanged,
                state: self.state().await?,
            });
        }

        let running = self.dir.read_bundle(&current.config_id).map(|(b, _)| b);
        let decision = match &running {
            Some(running) => plan(running, &bundle, &self.haproxy.loaded_files().await?),
            None => Plan::Reload(ReloadReason::RunningBundleMissing(
                current.config_id.clone(),
            )),
        };
        let commands = match decision {
            Plan::Reload(reason) => Err(reason),
            // Same content under another id cannot happen (the id is its
            // hash); treat it as a runtime apply of nothing.
            Plan::Unchanged => Ok(Vec::new()),
            Plan::Runtime(commands) => Ok(commands),
        };
        let mut runtime_refusal = None;
        let reason = match commands {
            Err(reason) => reason.to_string(),
            Ok(commands) => match self
                .apply_runtime(&mut state, &current, &bundle, token, &commands)
                .await
            {
                Ok(()) => {
                    let certificates = commands
                        .iter()
                        .filter(|c| matches!(c, RuntimeCommand::ReplaceCert { .. }))
                        .count();
                    tracing::info!(
                        commands = commands.len(),
                        certificates,
                        "applied at runtime"
                    );
                    return Ok(ApplyResponse {
                        id: bundle.id,
                        mode: ApplyMode::Runtime,
                        state: self.state().await?,
                    });
                }
                // The reload below starts the worker from the files, which
                // undoes whatever part of the batch did apply.
                Err(error) => {
                    let reason = format!("the runtime apply failed ({error})");
                    runtime_refusal = Some(error);
                    reason
                }
            },
        };
        tracing::info!(%reason, "reloading");
        let state = match self
            .apply_reload(&mut state, &bundle, token, observed, received)
            .await
        {
            Ok(state) => state,
            // Both judges refused: say what each said.
            Err(error) => {
                return Err(match (error, runtime_refusal) {
                    (ApplyError::Refused(output), Some(refusal)) => ApplyError::Refused(format!(
                        "{output}\n(the running worker had refused it at runtime first: {refusal})"
                    )),
                    (error, _) => error,
                });
            }
        };
        Ok(ApplyResponse {
            id: bundle.id,
            mode: ApplyMode::Reload,
            state,
        })
    }

    /// Refuses what no HAProxy should be given, before anything is touched.
    fn check(&self, bundle: &Bundle) -> Result<(), ApplyError> {
        if bundle.files.len() > self.limits.max_files {
            return Err(ApplyError::TooLarge {
                what: "files",
                actual: bundle.files.len(),
                limit: self.limits.max_files,
            });
        }
        if bundle.size() > self.limits.max_bundle_bytes {
            return Err(ApplyError::TooLarge {
                what: "bytes",
                actual: bundle.size(),
                limit: self.limits.max_bundle_bytes,
            });
        }
        let computed = Bundle::content_id(&bundle.config, &bundle.files);
        if computed != bundle.id {
            return Err(ApplyError::BadId {
                claimed: bundle.id.clone(),
                computed,
            });
        }
        let files: Vec<(String, String)> = bundle
            .files
            .iter()
            .map(|f| (f.path.clone(), String::new()))
            .collect();
        validate::check_paths(&files).map_err(|e| ApplyError::BadPath(e.to_string()))?;
        if let Some(file) = bundle
            .files
            .iter()
            .find(|f| f.path.trim_start_matches("./") == super::disk::METADATA_FILE)
        {
            return Err(ApplyError::BadPath(format!(
                "auxiliary file path `{}` is reserved for the agent's own records",
                file.path
            )));
        }
        let mut in_global = false;
        for line in bundle.config.lines() {
            if !line.starts_with(char::is_whitespace) && !line.trim().is_empty() {
                in_global = line.trim() == "global";
            } else if in_global && line.split_whitespace().next() == Some("description") {
                return Err(ApplyError::Reserved(
                    "the configuration sets `description` in `global`, which the agent owns: it records the bundle id there to learn what each worker runs; remove that line".to_owned(),
                ));
            }
        }
        Ok(())
    }

    /// Commands on the current worker, then the files for the next reload.
    async fn apply_runtime(
        &self,
        state: &mut AgentState,
        current: &WorkerState,
        bundle: &Bundle,
        token: FencingToken,
        commands: &[RuntimeCommand],
    ) -> Result<(), RuntimeError> {
        if !commands.is_empty() {
            let pid = self.haproxy.apply_runtime(commands).await?;
            if pid != current.pid {
                return Err(RuntimeError::Refused {
                    command: "show info".into(),
                    answer: format!(
                        "worker {pid} answered instead of {}: HAProxy reloaded meanwhile",
                        current.pid
                    ),
                });
            }
        }
        // The worker routes per the bundle now; record that before anything
        // else can fail, then write the files a reload would start from.
        state.workers.retain(|w| w.pid != current.pid);
        state.workers.push(WorkerRecord {
            pid: current.pid,
            start_time: current.started_at,
            loaded_id: current.loaded_id.clone(),
            config_id: bundle.id.clone(),
        });
        self.install(bundle, token)
            .and_then(|()| self.save(state))
            .map_err(|error| RuntimeError::Refused {
                command: "writing the files".into(),
                answer: error.to_string(),
            })
    }

    /// Switch `current`, reload, wait for the new worker; returns the pod's
    /// state as HAProxy reported it once the new worker ran the bundle.
    async fn apply_reload(
        &self,
        state: &mut AgentState,
        bundle: &Bundle,
        token: FencingToken,
        before: Observed,
        received: Instant,
    ) -> Result<PodState, ApplyError> {
        let dir = self
            .dir
            .write_bundle(bundle, token)
            .map_err(|source| disk_error(&self.dir, source))?;
        let written = Instant::now();
        let previous = self.dir.last_good().or_else(|| self.dir.current());
        let old_pids: Vec<u32> = before.state.workers.iter().map(|w| w.pid).collect();
        // No `haproxy -c` before the reload: the master parses the files
        // with the same parser and, if it refuses them, keeps the old worker
        // serving (its failed-reload count says so). A check beside the
        // reload took a core from the master's parse on a 2-core node; only
        // a failed reload is checked, to tell refused files (removed) from a
        // start-up failure. Refused files leave `current/` at once below,
        // and `haptic haproxy` checks `current/` before starting HAProxy, so
        // no restart ever starts from them.
        self.dir
            .set_current(&bundle.id)
            .map_err(|source| disk_error(&self.dir, source))?;
        let outcome = match self.haproxy.reload().await {
            Err(error) => Err(ApplyError::Haproxy(error)),
            // The master said at once that no new worker started: its
            // start-up log is the cause (a refused file's alerts, an address
            // in use), no `show proc` polling needed.
            Ok(ReloadAnswer {
                succeeded: Some(false),
                startup_log,
            }) => Err(self
                .why_refused(dir)
                .await
                .unwrap_or_else(|| ApplyError::ReloadFailed(format!(
                    "HAProxy's master could not start a worker from bundle {}; the previous worker keeps serving and the last good files were restored. `haproxy -c` accepts the bundle, so the cause is at start-up; HAProxy said:\n{startup_log}",
                    bundle.id
                )))),
            // Returns once the master settled: a new worker, or a failure.
            Ok(_) => match self
                .wait_for_worker(&bundle.id, &old_pids, before.reloads_failed)
                .await
            {
                Err(failed) => Err(self.why_refused(dir).await.unwrap_or(failed)),
                found => found,
            },
        };
        match outcome {
            Ok((procs, new_worker)) => {
                let reloaded = written.elapsed();
                self.dir
                    .set_last_good(&bundle.id)
                    .map_err(|source| disk_error(&self.dir, source))?;
                // What HAProxy just said is the state: the new worker's
                // `show info` answered the wait, and the workers it replaced
                // answered before the reload (a process's pid, start and
                // description never change), so no worker is asked twice.
                // After a reload the master and the new worker are at their
                // busiest; asking again cost ~8 ms at 3,000 routes.
                let mut known: Vec<WorkerInfo> = before
                    .state
                    .workers
                    .iter()
                    .map(|w| WorkerInfo {
                        pid: w.pid,
                        description: w.loaded_id.clone(),
                        start_time: w.started_at,
                    })
                    .collect();
                known.push(new_worker);
                let observed = self.describe(procs, &known, state).await?;
                self.forget_dead_workers(state, &observed.state);
                self.save(state)?;
                let mut keep: Vec<&str> = vec![bundle.id.as_str()];
                keep.extend(observed.state.workers.iter().map(|w| w.loaded_id.as_str()));
                keep.extend(observed.state.workers.iter().map(|w| w.config_id.as_str()));
                if let Err(error) = self.dir.prune(&keep) {
                    tracing::warn!(%error, "could not remove old bundles");
                }
                // Where the apply's time went: the agent's own part up to
                // the files, then HAProxy's reload until the new worker
                // answered (`make bench-agent` reads both).
                tracing::info!(
                    reloads = before.state.reloads + 1,
                    prepare_ms = written.duration_since(received).as_millis() as u64,
                    reload_ms = reloaded.as_millis() as u64,
                    "reloaded"
                );
                Ok(observed.state)
            }
            Err(error) => {
                if let Some(previous) = previous
                    && let Err(restore) = self.dir.set_current(&previous.id)
                {
                    tracing::error!(%restore, "could not restore the last good files");
                }
                let in_use = before
                    .state
                    .workers
                    .iter()
                    .any(|w| w.loaded_id == bundle.id);
                if matches!(error, ApplyError::Refused(_)) && !in_use {
                    let _ = self.dir.remove_bundle(&bundle.id);
                }
                Err(error)
            }
        }
    }

    /// After a failed reload: [`ApplyError::Refused`] with `haproxy -c`'s
    /// words when it refuses the bundle in `dir`, else `None` (the cause was
    /// at start-up, or the check could not run).
    async fn why_refused(&self, dir: std::path::PathBuf) -> Option<ApplyError> {
        let validator = self.validator.clone();
        match tokio::task::spawn_blocking(move || validator.check_dir(&dir, CONFIG_FILE)).await {
            Ok(Err(error @ ValidationError::Refused { .. })) => {
                Some(ApplyError::Refused(error.to_string()))
            }
            _ => None,
        }
    }

    /// Polls `show proc` until a new current worker reports `id` (returning
    /// that `show proc` and the worker's `show info`), the master counts a
    /// failed reload, or the reload timeout passes.
    async fn wait_for_worker(
        &self,
        id: &str,
        old_pids: &[u32],
        failed_before: u64,
    ) -> Result<(ProcList, WorkerInfo), ApplyError> {
        let deadline = Instant::now() + self.reload_timeout;
        let mut last_error = None;
        loop {
            match self.haproxy.show_proc().await {
                Ok(procs) if procs.failed_reloads > failed_before => {
                    return Err(ApplyError::ReloadFailed(format!(
                        "HAProxy's master could not start a worker from bundle {id} (failed reloads: {}); the previous worker keeps serving and the last good files were restored. `haproxy -c` accepted the bundle, so the cause is at start-up, such as an address already in use: HAProxy's own output (the haproxy container's log) names it",
                        procs.failed_reloads
                    )));
                }
                Ok(procs) => {
                    for pid in procs.current.iter().filter(|p| !old_pids.contains(p)) {
                        if let Ok(info) = self.haproxy.worker_info(*pid).await
                            && info.description == id
                        {
                            return Ok((procs, info));
                        }
                    }
                }
                // The master re-executes itself during a reload and may
                // drop connections meanwhile.
                Err(error) => last_error = Some(error),
            }
            if Instant::now() >= deadline {
                return Err(ApplyError::ReloadFailed(format!(
                    "no HAProxy worker reported bundle {id} within {:?} of the reload{}; the last good files were restored",
                    self.reload_timeout,
                    last_error
                        .map(|e| format!(" (last error: {e})"))
                        .unwrap_or_default()
                )));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Writes `bundle`, which a worker runs, and points `current` and
    /// `last-good` at it.
    fn install(&self, bundle: &Bundle, token: FencingToken) -> Result<(), ApplyError> {
        let disk = |source| disk_error(&self.dir, source);
        self.dir.write_bundle(bundle, token).map_err(disk)?;
        if self.dir.current().is_none_or(|c| c.id != bundle.id) {
            self.dir.set_current(&bundle.id).map_err(disk)?;
        }
        if self.dir.last_good().is_none_or(|c| c.id != bundle.id) {
            self.dir.set_last_good(&bundle.id).map_err(disk)?;
        }
        Ok(())
    }

    async fn observe(&self, state: &AgentState) -> Result<Observed, CliError> {
        let procs = self.haproxy.show_proc().await?;
        self.describe(procs, &[], state).await
    }

    /// The pod's state from `procs`, asking each worker's `show info`
    /// unless `known` holds it already.
    async fn describe(
        &self,
        procs: ProcList,
        known: &[WorkerInfo],
        state: &AgentState,
    ) -> Result<Observed, CliError> {
        let mut workers = Vec::with_capacity(procs.current.len() + procs.leaving.len());
        let roles = procs
            .current
            .iter()
            .map(|pid| (*pid, WorkerRole::Current))
            .chain(procs.leaving.iter().map(|pid| (*pid, WorkerRole::Leaving)));
        for (pid, role) in roles {
            let asked = match known.iter().find(|info| info.pid == pid) {
                Some(info) => Ok(info.clone()),
                None => self.haproxy.worker_info(pid).await,
            };
            let info = match asked {
                Ok(info) => info,
                // A leaving worker may exit between the two questions.
                Err(_) if role == WorkerRole::Leaving => continue,
                Err(error) => return Err(error),
            };
            let config_id = state
                .workers
                .iter()
                .find(|r| {
                    r.pid == info.pid
                        && r.start_time == info.start_time
                        && r.loaded_id == info.description
                })
                .map_or_else(|| info.description.clone(), |r| r.config_id.clone());
            workers.push(WorkerState {
                pid,
                role,
                started_at: info.start_time,
                loaded_id: info.description,
                config_id,
            });
        }
        let converged = workers
            .first()
            .map(|w| w.config_id.clone())
            .filter(|id| workers.iter().all(|w| &w.config_id == id));
        for (role, name) in [
            (WorkerRole::Current, "current"),
            (WorkerRole::Leaving, "leaving"),
        ] {
            let count = workers.iter().filter(|w| w.role == role).count();
            self.metrics
                .workers
                .get_or_create(&RoleLabels { role: name })
                .set(count as i64);
        }
        Ok(Observed {
            reloads_failed: procs.failed_reloads,
            state: PodState {
                haproxy_version: self.haproxy_version.clone(),
                applied: self.dir.current(),
                last_good: self.dir.last_good(),
                newest_token: state.newest_token,
                workers,
                converged,
                reloads: procs.reloads,
                failed_reloads: procs.failed_reloads,
            },
        })
    }

    fn forget_dead_workers(&self, state: &mut AgentState, seen: &PodState) {
        state.workers.retain(|r| {
            seen.workers
                .iter()
                .any(|w| w.pid == r.pid && w.started_at == r.start_time)
        });
    }

    fn snapshot(&self) -> AgentState {
        self.state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// Saves `state` to disk, then publishes it to readers.
    fn save(&self, state: &AgentState) -> Result<(), ApplyError> {
        self.dir
            .save_state(state)
            .map_err(|source| disk_error(&self.dir, source))?;
        *self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = state.clone();
        Ok(())
    }
}

fn disk_error(dir: &ConfigDir, source: std::io::Error) -> ApplyError {
    ApplyError::Disk {
        dir: dir.root().display().to_string(),
        source,
    }
}

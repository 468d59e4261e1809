//! One sandboxed library instance: a wasmtime store with WASI stripped to
//! nothing, a memory cap and a per-call deadline, fed deltas by the render
//! pipeline.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, Trap, WasmBacktrace};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::tls::SecretPem;

use super::checks;
use super::component::{ContractExports, ContractPre};
use super::engine::Shared;
use super::guest_output::GuestOutput;
use super::types::{Change, LibraryInfo, Plan, RenderOutput};
use super::{LibraryError, Malformed};

/// Guest functions named in a trap message; the innermost are the telling ones.
const MAX_FRAMES: usize = 6;
/// Log lines one call may send through the host `log` import.
const MAX_LOG_LINES_PER_CALL: usize = 1000;
/// `wasi:random/insecure-seed` for every instance ("haptic" in ASCII).
const INSECURE_SEED: u128 = 0x68_61_70_74_69_63;
/// Longest log message forwarded whole.
const MAX_LOG_LINE: usize = 16 << 10;

/// The level of a line a library logs through the host import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GuestLogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// What a store holds for its library.
pub(super) struct StoreState {
    library: Arc<str>,
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryCap,
    stdout: GuestOutput,
    stderr: GuestOutput,
    /// The last error-level line logged in the current call: a panicking
    /// library's hook reports its message here just before it aborts.
    last_error: Option<String>,
    /// Log lines forwarded and dropped in the current call.
    log_lines: usize,
    log_lines_dropped: usize,
    default_certificate: SecretPem,
}

impl StoreState {
    fn new(library: Arc<str>, memory_limit: usize, default_certificate: SecretPem) -> Self {
        let stdout = GuestOutput::new(library.clone(), "stdout");
        let stderr = GuestOutput::new(library.clone(), "stderr");
        // No preopens, environment, arguments or stdin; sockets and name
        // lookups refused (the default address check denies every address).
        // A fixed insecure seed (what std's HashMap keys come from) makes a
        // library's hash iteration order, and so its output, the same in
        // every instance and process: no reload just because haptic
        // restarted. Secure randomness stays random.
        let wasi = WasiCtxBuilder::new()
            .stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .insecure_random_seed(INSECURE_SEED)
            .build();
        Self {
            library,
            wasi,
            table: ResourceTable::new(),
            limiter: MemoryCap::new(memory_limit),
            stdout,
            stderr,
            last_error: None,
            log_lines: 0,
            log_lines_dropped: 0,
            default_certificate,
        }
    }

    /// The runtime's default certificate (the `tls` import of 0.2.0).
    pub(super) fn default_certificate_pem(&self) -> &SecretPem {
        &self.default_certificate
    }

    /// The host `log` import: the line goes to `tracing`, tagged with the
    /// library. Bounded like stdout so a chatty library cannot flood the log.
    pub(super) fn guest_log(&mut self, level: GuestLogLevel, mut message: String) {
        if crate::tls::holds_private_key(&message) {
            // A library must never log key material; if one does, the line
            // does not reach the log.
            message = "(a log line holding a PEM private key was withheld)".to_owned();
        }
        if message.len() > MAX_LOG_LINE {
            let mut end = MAX_LOG_LINE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str(" [...]");
        }
        if level == GuestLogLevel::Error {
            self.last_error = Some(message.clone());
        }
        if self.log_lines >= MAX_LOG_LINES_PER_CALL {
            self.log_lines_dropped += 1;
            return;
        }
        self.log_lines += 1;
        let library = &*self.library;
        match level {
            GuestLogLevel::Trace => tracing::trace!(library = %library, "{message}"),
            GuestLogLevel::Debug => tracing::debug!(library = %library, "{message}"),
            GuestLogLevel::Info => tracing::info!(library = %library, "{message}"),
            GuestLogLevel::Warn => tracing::warn!(library = %library, "{message}"),
            GuestLogLevel::Error => tracing::error!(library = %library, "{message}"),
        }
    }

    fn begin_call(&mut self) {
        self.last_error = None;
        self.limiter.hit = false;
    }

    fn end_call(&mut self) {
        self.stdout.end_call();
        self.stderr.end_call();
        if self.log_lines_dropped > 0 {
            tracing::warn!(
                library = %self.library,
                "library logged more than {MAX_LOG_LINES_PER_CALL} lines in one call; dropped {}",
                self.log_lines_dropped
            );
        }
        self.log_lines = 0;
        self.log_lines_dropped = 0;
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// [`StoreLimits`] that remembers whether the memory cap was hit, so an
/// out-of-memory trap can be told apart from other traps, and how large the
/// instance's linear memories have grown (they never shrink).
struct MemoryCap {
    limits: StoreLimits,
    hit: bool,
    bytes: usize,
}

impl MemoryCap {
    fn new(memory_limit: usize) -> Self {
        let limits = StoreLimitsBuilder::new()
            .memory_size(memory_limit)
            // Without this Rust's allocation-failure path tries to print and
            // the trap reads like a missing import.
            .trap_on_grow_failure(true)
            .instances(64)
            .memories(16)
            .tables(64)
            .table_elements(1 << 20)
            .build();
        Self {
            limits,
            hit: false,
            bytes: 0,
        }
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let result = self.limits.memory_growing(current, desired, maximum);
        if matches!(result, Ok(true)) {
            self.bytes = (self.bytes + desired).saturating_sub(current);
        } else {
            self.hit = true;
        }
        result
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.hit = true;
        self.limits.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.limits.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.instances()
    }

    fn tables(&self) -> usize {
        self.limits.tables()
    }

    fn memories(&self) -> usize {
        self.limits.memories()
    }
}

/// A live instance of a library: configure it, then render it repeatedly
/// with the changes since the previous render. After a trap it is poisoned
/// and every call fails; make a fresh one with
/// [`LoadedLibrary::instantiate`](super::LoadedLibrary::instantiate).
pub struct LibraryInstance {
    shared: Arc<Shared>,
    store: Store<StoreState>,
    exports: ContractExports,
    poisoned: bool,
}

impl std::fmt::Debug for LibraryInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibraryInstance")
            .field("library", &self.store.data().library)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl LibraryInstance {
    /// Starts an instance that reports errors as `library` (the library's
    /// name, or its origin before it has described itself).
    pub(super) fn start(
        shared: Arc<Shared>,
        pre: &ContractPre,
        label: Arc<str>,
    ) -> Result<Self, LibraryError> {
        let mut store = Store::new(
            &shared.engine,
            StoreState::new(
                label,
                shared.config.memory_limit_bytes,
                shared.default_certificate.clone(),
            ),
        );
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(shared.deadline_ticks());
        let exports = match pre.instantiate(&mut store) {
            Ok(exports) => exports,
            Err(error) => return Err(classify(&shared, &mut store, "start", error)),
        };
        store.data_mut().end_call();
        Ok(Self {
            shared,
            store,
            exports,
            poisoned: false,
        })
    }

    /// Calls `describe`; used once per loaded library.
    pub(super) fn describe(&mut self) -> Result<LibraryInfo, LibraryError> {
        let info = self.call("describe", |exports, store| exports.describe(store))?;
        let info = info.map_err(|problem| self.malformed(None, problem))?;
        checks::check_info(&info).map_err(|problem| self.malformed(None, problem))?;
        Ok(info)
    }

    /// Hands the library the whole `templateLibraries` values tree and
    /// returns what it needs from the cluster. The next render must be
    /// complete.
    pub fn configure(&mut self, values: &serde_json::Value) -> Result<Plan, LibraryError> {
        let values = values.to_string();
        let plan = self.call("configure", |exports, store| {
            exports.configure(store, &values)
        })?;
        let plan = plan.map_err(|error| self.guest_error("configure", error))?;
        checks::check_plan(&plan).map_err(|problem| self.malformed(None, problem))?;
        Ok(plan)
    }

    /// Renders after applying `changes` to the library's view of its objects.
    pub fn render(&mut self, changes: &[Change]) -> Result<RenderOutput, LibraryError> {
        let output = self.call("render", |exports, store| exports.render(store, changes))?;
        let output = output.map_err(|error| self.guest_error("render", error))?;
        checks::check_output(&output).map_err(|(key, problem)| self.malformed(key, problem))?;
        Ok(output)
    }

    /// The bytes of the instance's linear memories (a guest's memory grows
    /// and never shrinks: its high-water mark).
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limiter.bytes
    }

    /// True after a trap: the instance cannot be entered again.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    fn library(&self) -> String {
        self.store.data().library.to_string()
    }

    fn guest_error(&self, call: &'static str, error: super::types::GuestError) -> LibraryError {
        LibraryError::Guest {
            library: self.library(),
            call,
            error: Box::new(error),
        }
    }

    fn malformed(&self, key: Option<String>, problem: Malformed) -> LibraryError {
        LibraryError::Malformed {
            library: self.library(),
            key,
            problem: Box::new(problem),
        }
    }

    fn call<R>(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&ContractExports, &mut Store<StoreState>) -> wasmtime::Result<R>,
    ) -> Result<R, LibraryError> {
        if self.poisoned {
            return Err(LibraryError::Poisoned {
                library: self.library(),
            });
        }
        self.store.set_epoch_deadline(self.shared.deadline_ticks());
        self.store.data_mut().begin_call();
        let result = f(&self.exports, &mut self.store);
        self.store.data_mut().end_call();
        result.map_err(|error| {
            // A failed call may leave the guest half-way through anything.
            self.poisoned = true;
            classify(&self.shared, &mut self.store, call, error)
        })
    }
}

/// Turns a failed call into an error a user can act on.
fn classify(
    shared: &Shared,
    store: &mut Store<StoreState>,
    call: &'static str,
    error: wasmtime::Error,
) -> LibraryError {
    let state = store.data_mut();
    let library = state.library.to_string();
    if state.limiter.hit {
        return LibraryError::OutOfMemory {
            library,
            call,
            limit: shared.config.memory_limit_bytes,
        };
    }
    let trap = error.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::Interrupt) {
        return LibraryError::DeadlineExceeded {
            library,
            call,
            deadline: shared.config.call_deadline,
        };
    }
    if trap == Some(Trap::UnreachableCodeReached)
        && let Some(message) = state.last_error.take()
    {
        return LibraryError::Panic {
            library,
            call,
            message,
        };
    }
    let frames = error
        .downcast_ref::<WasmBacktrace>()
        .map(|backtrace| {
            backtrace
                .frames()
                .iter()
                .filter_map(|frame| frame.func_name())
                .map(demangle)
                .take(MAX_FRAMES)
                .collect()
        })
        .unwrap_or_default();
    LibraryError::Trap {
        library,
        call,
        trap: error.root_cause().to_string(),
        frames,
    }
}

/// `haptic_base::render_global` rather than `_ZN11haptic_base13render_global17h…E`.
fn demangle(name: &str) -> String {
    // The alternate form leaves out the hash.
    format!("{:#}", rustc_demangle::demangle(name))
}

impl Shared {
    /// Epoch ticks for one call: rounded up, plus one because the current
    /// tick may be about to end.
    pub(super) fn deadline_ticks(&self) -> u64 {
        let ticks = self
            .config
            .call_deadline
            .as_nanos()
            .div_ceil(super::engine::EPOCH_TICK.as_nanos().max(1));
        u64::try_from(ticks).unwrap_or(u64::MAX - 1) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_function_names_are_demangled_without_hashes() {
        assert_eq!(
            demangle("_ZN18haptic_misbehaving19trap_without_a_word17h72f053e7225f1ce0E"),
            "haptic_misbehaving::trap_without_a_word"
        );
        assert_eq!(demangle("cabi_realloc"), "cabi_realloc");
        assert_eq!(
            demangle("haptic:template/library@0.1.0#render"),
            "haptic:template/library@0.1.0#render"
        );
    }
}

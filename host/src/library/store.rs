//! What a library's store holds: WASI stripped to nothing, stdout and
//! stderr to `tracing`, the host `log` import, the default certificate and
//! the memory cap that tells an out-of-memory trap from other traps.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::tls::SecretPem;

use super::guest_output::GuestOutput;

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
    spoa_address: Arc<str>,
}

impl StoreState {
    pub(super) fn new(
        library: Arc<str>,
        memory_limit: usize,
        default_certificate: SecretPem,
        spoa_address: Arc<str>,
    ) -> Self {
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
            spoa_address,
        }
    }

    /// The library's name (or origin, before it has described itself).
    pub(super) fn library(&self) -> &Arc<str> {
        &self.library
    }

    /// The store's memory cap, for [`wasmtime::Store::limiter`].
    pub(super) fn limiter(&mut self) -> &mut dyn ResourceLimiter {
        &mut self.limiter
    }

    /// How large the instance's linear memories have grown.
    pub(super) fn memory_bytes(&self) -> usize {
        self.limiter.bytes
    }

    /// Whether the current call tried to grow memory past the cap.
    pub(super) fn memory_cap_hit(&self) -> bool {
        self.limiter.hit
    }

    /// The last error-level line of the current call (a panic's message).
    pub(super) fn take_last_error(&mut self) -> Option<String> {
        self.last_error.take()
    }

    /// The runtime's default certificate (the `tls` import of 0.2.0).
    pub(super) fn default_certificate_pem(&self) -> &SecretPem {
        &self.default_certificate
    }

    /// Where HAProxy reaches the agent's SPOP listener (the `agent` import
    /// of 0.4.0).
    pub(super) fn spoa_address(&self) -> &str {
        &self.spoa_address
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

    pub(super) fn begin_call(&mut self) {
        self.last_error = None;
        self.limiter.hit = false;
    }

    pub(super) fn end_call(&mut self) {
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
/// out-of-memory trap can be told apart from other traps.
struct MemoryCap {
    limits: StoreLimits,
    hit: bool,
    /// How large the instance's linear memories have grown (they never
    /// shrink).
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

//! One sandboxed library instance: a wasmtime store with a per-call
//! deadline, fed deltas by the render pipeline; a failed call is classified
//! into an error a user can act on.

use std::sync::Arc;

use wasmtime::{Store, Trap, WasmBacktrace};

use super::checks;
use super::contract::{ContractExports, ContractPre};
use super::sandbox::Sandbox;
use super::store::StoreState;
use super::types::{Change, GuestError, LibraryInfo, Plan, RenderOutput};
use super::{LibraryError, Malformed};

/// Guest functions named in a trap message; the innermost are the telling ones.
const MAX_FRAMES: usize = 6;

/// A live instance of a library: configure it, then render it repeatedly
/// with the changes since the previous render. After a trap it is poisoned
/// and every call fails; make a fresh one with
/// [`LoadedLibrary::instantiate`](super::LoadedLibrary::instantiate).
pub struct LibraryInstance {
    sandbox: Arc<Sandbox>,
    store: Store<StoreState>,
    exports: ContractExports,
    poisoned: bool,
}

impl std::fmt::Debug for LibraryInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibraryInstance")
            .field("library", self.store.data().library())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl LibraryInstance {
    /// Starts an instance that reports errors as `library` (the library's
    /// name, or its origin before it has described itself).
    pub(super) fn start(
        sandbox: Arc<Sandbox>,
        pre: &ContractPre,
        label: Arc<str>,
    ) -> Result<Self, LibraryError> {
        let mut store = Store::new(
            &sandbox.engine,
            StoreState::new(
                label,
                sandbox.config.memory_limit_bytes,
                sandbox.default_certificate.clone(),
                sandbox.spoa_address.clone(),
            ),
        );
        store.limiter(StoreState::limiter);
        store.set_epoch_deadline(sandbox.deadline_ticks());
        let exports = match pre.instantiate(&mut store) {
            Ok(exports) => exports,
            Err(error) => return Err(classify(&sandbox, &mut store, "start", error)),
        };
        store.data_mut().end_call();
        Ok(Self {
            sandbox,
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
    /// Taken by value: the objects' JSON moves into the call's arguments
    /// instead of being copied (a whole view is megabytes of text).
    pub fn render(&mut self, changes: Vec<Change>) -> Result<RenderOutput, LibraryError> {
        let output = self.call("render", |exports, store| exports.render(store, changes))?;
        let output = output
            .map_err(|error| self.guest_error("render", error))?
            .map_err(|(key, problem)| self.malformed(key, problem))?;
        checks::check_output(&output).map_err(|(key, problem)| self.malformed(key, problem))?;
        Ok(output)
    }

    /// The bytes of the instance's linear memories (a guest's memory grows
    /// and never shrinks: its high-water mark).
    pub fn memory_bytes(&self) -> usize {
        self.store.data().memory_bytes()
    }

    /// True after a trap: the instance cannot be entered again.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    fn library(&self) -> String {
        self.store.data().library().to_string()
    }

    fn guest_error(&self, call: &'static str, error: GuestError) -> LibraryError {
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
        self.store.set_epoch_deadline(self.sandbox.deadline_ticks());
        self.store.data_mut().begin_call();
        let result = f(&self.exports, &mut self.store);
        self.store.data_mut().end_call();
        result.map_err(|error| {
            // A failed call may leave the guest half-way through anything.
            self.poisoned = true;
            classify(&self.sandbox, &mut self.store, call, error)
        })
    }
}

/// Turns a failed call into an error a user can act on.
fn classify(
    sandbox: &Sandbox,
    store: &mut Store<StoreState>,
    call: &'static str,
    error: wasmtime::Error,
) -> LibraryError {
    let state = store.data_mut();
    let library = state.library().to_string();
    if state.memory_cap_hit() {
        return LibraryError::OutOfMemory {
            library,
            call,
            limit: sandbox.config.memory_limit_bytes,
        };
    }
    let trap = error.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::Interrupt) {
        return LibraryError::DeadlineExceeded {
            library,
            call,
            deadline: sandbox.config.call_deadline,
        };
    }
    if trap == Some(Trap::UnreachableCodeReached)
        && let Some(message) = state.take_last_error()
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

//! Loading, sandboxing and calling template libraries.
//!
//! A [`LibraryRuntime`] owns one wasmtime engine. It compiles a component
//! once (memoised by the SHA-256 of its bytes, optionally also on disk), reads
//! which version of the `haptic:template` contract it was built for, picks the
//! matching bindings and asks the library to [describe](LoadedLibrary::info)
//! itself. A [`LoadedLibrary`] is cheap to clone and makes
//! [`LibraryInstance`]s: long-lived stores that are configured, then fed
//! deltas.
//!
//! Every call runs in a sandbox: WASI without filesystem, network,
//! environment or arguments; stdout and stderr go to `tracing`; a wall-clock
//! deadline (epoch interruption) and a memory cap. Whatever a library does —
//! trap, spin, exhaust memory, panic, return nonsense — comes back as a
//! [`LibraryError`] naming it; a trapped instance is
//! [poisoned](LibraryInstance::is_poisoned) and the caller makes a fresh one.

pub mod types;

// A tree, bottom to top (each uses only those before it; `tests/module_tree.rs`
// keeps it so): `types`, `checks` (untrusted output), `guest_output`, `store`
// (a store's state and memory cap), `contract` (the bindings of each contract
// version and dispatch to them), `sandbox` (engine, ticker, linker),
// `instance`, `component` (compiled libraries), `runtime` (the caches and the
// bundled table).
mod checks;
mod component;
mod contract;
mod guest_output;
mod instance;
mod runtime;
mod sandbox;
mod store;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

pub use checks::Malformed;
pub use component::LoadedLibrary;
pub use contract::SUPPORTED_CONTRACTS;
pub use instance::LibraryInstance;
pub use runtime::LibraryRuntime;
use types::GuestError;

/// How the runtime compiles and confines libraries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Wall-clock time one call into a library (`describe`, `configure`,
    /// `render`) may take.
    pub call_deadline: Duration,
    /// Largest linear memory one library instance may grow to.
    pub memory_limit_bytes: usize,
    /// Where wasmtime keeps compiled code between runs (in its `wasmtime`
    /// subdirectory, which wasmtime's cleaner owns); `None` compiles every
    /// component afresh in each process.
    pub cache_dir: Option<PathBuf>,
    /// The certificate (PEM bundle) libraries get from the `tls` import's
    /// `default-certificate`; `None` generates one per runtime.
    pub default_certificate: Option<crate::tls::SecretPem>,
    /// Where HAProxy reaches the agent's SPOP listener, as libraries get it
    /// from the `agent` import's `spoa-address` (contract 0.4.0).
    pub spoa_address: String,
}

/// The agent's SPOP listener unless the operator chooses another: loopback
/// inside the HAProxy pod, where only HAProxy and the agent run.
pub const DEFAULT_SPOA_ADDRESS: &str = "127.0.0.1:12346";

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            call_deadline: Duration::from_secs(5),
            memory_limit_bytes: 512 << 20,
            cache_dir: None,
            default_certificate: None,
            spoa_address: DEFAULT_SPOA_ADDRESS.to_owned(),
        }
    }
}

/// Something went wrong loading or calling a template library. Every variant
/// names the library (by name once it has described itself, by origin before).
#[derive(Debug, Error)]
pub enum LibraryError {
    /// The wasmtime engine or its compile cache could not be set up.
    #[error("cannot start the template library runtime: {cause}")]
    Engine { cause: String },
    /// A library file could not be read.
    #[error("cannot read template library `{origin}`: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a WebAssembly component.
    #[error("`{origin}` is not a WebAssembly component: {cause}")]
    NotAComponent { origin: String, cause: String },
    /// wasmtime refused to compile the component.
    #[error("cannot compile template library `{origin}`: {cause}")]
    Compile { origin: String, cause: String },
    /// The component exports no `haptic:template/library` interface at all.
    #[error(
        "`{origin}` is not a haptic template library: it exports {exports}, but no \
         `haptic:template/library` interface"
    )]
    NotALibrary { origin: String, exports: String },
    /// The component was built for a contract version this host cannot call.
    #[error(
        "`{origin}` was built for haptic:template@{found}; this haptic supports {supported} — \
         rebuild it against wit/haptic-template@{latest}"
    )]
    IncompatibleContract {
        origin: String,
        found: semver::Version,
        /// The supported range(s), e.g. `0.1.x`.
        supported: String,
        /// The newest supported version, e.g. `0.1.0`.
        latest: String,
    },
    /// The component claims the contract but lacks a function or has the wrong
    /// types, or imports something the host does not offer.
    #[error("`{origin}` does not fit haptic:template@{version}: {cause}")]
    Mismatch {
        origin: String,
        version: semver::Version,
        cause: String,
    },
    /// A call ran past the deadline and was interrupted.
    #[error(
        "library `{library}` did not finish `{call}` within {}; it was stopped",
        HumanDuration(*deadline)
    )]
    DeadlineExceeded {
        library: String,
        call: &'static str,
        deadline: Duration,
    },
    /// A call tried to grow memory past the cap.
    #[error(
        "library `{library}` exceeded its memory limit of {} during `{call}`",
        HumanBytes(*limit)
    )]
    OutOfMemory {
        library: String,
        call: &'static str,
        limit: usize,
    },
    /// The library panicked; `message` is what its panic hook reported.
    #[error("library `{library}` panicked during `{call}`: {message}")]
    Panic {
        library: String,
        call: &'static str,
        message: String,
    },
    /// Any other trap, with the guest functions on the stack.
    #[error(
        "library `{library}` crashed during `{call}`: {trap}{}",
        Frames(frames)
    )]
    Trap {
        library: String,
        call: &'static str,
        trap: String,
        /// Guest functions on the stack, innermost first.
        frames: Vec<String>,
    },
    /// The library reported its own error.
    #[error("library `{library}` could not {call}: {error}")]
    Guest {
        library: String,
        call: &'static str,
        error: Box<GuestError>,
    },
    /// The library returned output the host refuses to use.
    #[error("library `{library}` returned malformed output{}: {problem}", ItemKey(key.as_deref()))]
    Malformed {
        library: String,
        /// The output item at fault, when the problem is within one item.
        key: Option<String>,
        #[source]
        problem: Box<Malformed>,
    },
    /// The instance trapped earlier and cannot be entered again.
    #[error(
        "library `{library}`'s instance failed earlier and cannot be used again; make a fresh one"
    )]
    Poisoned { library: String },
}

impl LibraryError {
    /// True for errors after which the instance must not be used again.
    pub fn poisons_instance(&self) -> bool {
        matches!(
            self,
            Self::DeadlineExceeded { .. }
                | Self::OutOfMemory { .. }
                | Self::Panic { .. }
                | Self::Trap { .. }
                | Self::Poisoned { .. }
        )
    }

    /// The library's own account of what went wrong, if it gave one.
    pub fn guest_error(&self) -> Option<&GuestError> {
        match self {
            Self::Guest { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// `5 s`, `200 ms`, `1.5 s`.
struct HumanDuration(Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.0.as_millis();
        if millis < 1000 {
            write!(f, "{millis} ms")
        } else if millis.is_multiple_of(1000) {
            write!(f, "{} s", millis / 1000)
        } else {
            write!(f, "{:.1} s", self.0.as_secs_f64())
        }
    }
}

/// `512 MiB`, `64 KiB`, `1000 bytes`.
struct HumanBytes(usize);

impl fmt::Display for HumanBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (size, unit) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{} {unit}", self.0 / size);
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

struct Frames<'a>(&'a [String]);

impl fmt::Display for Frames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        f.write_str(" (in ")?;
        for (index, frame) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(" <- ")?;
            }
            f.write_str(frame)?;
        }
        f.write_str(")")
    }
}

struct ItemKey<'a>(Option<&'a str>);

impl fmt::Display for ItemKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(key) => write!(f, " in item `{key}`"),
            None => Ok(()),
        }
    }
}

/// A wasmtime error with its causes, on one line.
fn describe_error(error: &wasmtime::Error) -> String {
    format!("{error:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_types_can_cross_threads() {
        // The controller moves instances between tokio tasks and shares
        // loaded libraries; losing these bounds would be a breaking change.
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<LibraryInstance>();
        send_sync::<LoadedLibrary>();
        send_sync::<LibraryRuntime>();
        send_sync::<LibraryError>();
    }

    #[test]
    fn durations_and_sizes_read_naturally() {
        assert_eq!(HumanDuration(Duration::from_secs(5)).to_string(), "5 s");
        assert_eq!(
            HumanDuration(Duration::from_millis(200)).to_string(),
            "200 ms"
        );
        assert_eq!(
            HumanDuration(Duration::from_millis(1500)).to_string(),
            "1.5 s"
        );
        assert_eq!(HumanBytes(512 << 20).to_string(), "512 MiB");
        assert_eq!(HumanBytes(64 << 10).to_string(), "64 KiB");
        assert_eq!(HumanBytes(1000).to_string(), "1000 bytes");
    }

    #[test]
    fn deadline_message_names_library_call_and_limit() {
        let error = LibraryError::DeadlineExceeded {
            library: "ingress".into(),
            call: "render",
            deadline: Duration::from_secs(5),
        };
        assert_eq!(
            error.to_string(),
            "library `ingress` did not finish `render` within 5 s; it was stopped"
        );
        assert!(error.poisons_instance());
    }

    #[test]
    fn trap_message_lists_guest_frames() {
        let error = LibraryError::Trap {
            library: "base".into(),
            call: "render",
            trap: "wasm trap: integer divide by zero".into(),
            frames: vec!["base::render_global".into(), "base::render".into()],
        };
        assert_eq!(
            error.to_string(),
            "library `base` crashed during `render`: wasm trap: integer divide by zero \
             (in base::render_global <- base::render)"
        );
    }
}

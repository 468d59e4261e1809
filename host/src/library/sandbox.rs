//! The sandbox every library of one runtime runs in: the wasmtime engine
//! with epoch interruption and its ticker (call deadlines), the linker with
//! WASI and the host imports, the compile cache on disk and the default
//! certificate.

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::component::Linker;
use wasmtime::{Cache, CacheConfig, Config, Engine};

use crate::tls::{DefaultCertificate, SecretPem};

use super::contract;
use super::store::StoreState;
use super::{LibraryError, RuntimeConfig, describe_error};

/// How often the epoch advances: the granularity of call deadlines.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Set (to anything) to have wasmtime write a perf map of the guests' code.
const PERF_MAP_ENV: &str = "HAPTIC_WASM_PERF_MAP";

/// What every library and instance of one runtime shares. The ticker lives
/// as long as any of them, so deadlines keep working after the
/// [`LibraryRuntime`](super::LibraryRuntime) itself is dropped.
pub(super) struct Sandbox {
    pub(super) engine: Engine,
    pub(super) linker: Linker<StoreState>,
    pub(super) config: RuntimeConfig,
    /// The configured default certificate, or one generated for this runtime.
    pub(super) default_certificate: SecretPem,
    /// [`RuntimeConfig::spoa_address`], shared by every store.
    pub(super) spoa_address: Arc<str>,
    /// wasmtime's compile cache on disk, when configured.
    pub(super) disk_cache: Option<Cache>,
    _ticker: Ticker,
}

/// Advances the engine's epoch every [`EPOCH_TICK`] until dropped.
struct Ticker {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: Engine) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("haptic-epoch".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    engine.increment_epoch();
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // Dropping the sender wakes the thread with `Disconnected`.
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            // The thread only ticks; if it panicked there is nothing to report.
            let _ = thread.join();
        }
    }
}

impl Sandbox {
    /// Starts the engine, its epoch ticker and the linker.
    pub(super) fn start(config: RuntimeConfig) -> Result<Self, LibraryError> {
        let engine_error = |cause: String| LibraryError::Engine { cause };
        let mut wasmtime_config = Config::new();
        wasmtime_config.epoch_interruption(true);
        // `perf record` can name the guests' compiled functions only from a
        // perf map (/tmp/perf-<pid>.map), which wasmtime writes when asked:
        // a diagnostic for profiling renders (docs/performance.md), off in
        // normal runs because the map grows with every compiled function.
        if std::env::var_os(PERF_MAP_ENV).is_some() {
            wasmtime_config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let disk_cache = match &config.cache_dir {
            Some(dir) => Some(disk_cache(dir).map_err(|error| engine_error(error.to_string()))?),
            None => None,
        };
        wasmtime_config.cache(disk_cache.clone());
        let engine =
            Engine::new(&wasmtime_config).map_err(|error| engine_error(describe_error(&error)))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| contract::add_to_linker(&mut linker))
            .map_err(|error| engine_error(describe_error(&error)))?;

        let ticker = Ticker::start(engine.clone()).map_err(|error| {
            engine_error(format!("cannot start the epoch ticker thread: {error}"))
        })?;
        let default_certificate = match &config.default_certificate {
            Some(pem) => pem.clone(),
            None => {
                DefaultCertificate::generate()
                    .map_err(|error| engine_error(error.to_string()))?
                    .pem
            }
        };
        Ok(Self {
            engine,
            linker,
            spoa_address: Arc::from(config.spoa_address.as_str()),
            config,
            default_certificate,
            disk_cache,
            _ticker: ticker,
        })
    }

    /// Epoch ticks for one call: rounded up, plus one because the current
    /// tick may be about to end.
    pub(super) fn deadline_ticks(&self) -> u64 {
        let ticks = self
            .config
            .call_deadline
            .as_nanos()
            .div_ceil(EPOCH_TICK.as_nanos().max(1));
        u64::try_from(ticks).unwrap_or(u64::MAX - 1) + 1
    }
}

/// Why the compile cache directory cannot be used; each names the
/// directory, so the fix (a writable `cacheDir`, or none) is plain.
#[derive(Debug, thiserror::Error)]
enum CacheDirError {
    #[error("cache directory `{}`: {source}; give a non-empty directory path", dir.display())]
    Resolve {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create the cache directory `{}`: {source}; make it writable or choose another", dir.display())]
    Create {
        dir: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot use `{}` as the compile cache: {cause}", dir.display())]
    Unusable {
        dir: std::path::PathBuf,
        cause: String,
    },
}

fn disk_cache(dir: &Path) -> Result<Cache, CacheDirError> {
    // A subdirectory of wasmtime's own: its cache cleaner deletes whatever
    // it finds under its directory, and `~/.cache/haptic` also holds the
    // cargo target directory and helm (it once deleted both).
    let dir =
        std::path::absolute(dir.join("wasmtime")).map_err(|source| CacheDirError::Resolve {
            dir: dir.to_owned(),
            source,
        })?;
    std::fs::create_dir_all(&dir).map_err(|source| CacheDirError::Create {
        dir: dir.clone(),
        source,
    })?;
    let mut cache_config = CacheConfig::new();
    cache_config.with_directory(&dir);
    Cache::new(cache_config).map_err(|error| CacheDirError::Unusable {
        cause: describe_error(&error),
        dir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_is_rounded_up_to_whole_ticks_plus_one() {
        let sandbox = |deadline| {
            Sandbox::start(RuntimeConfig {
                call_deadline: deadline,
                ..RuntimeConfig::default()
            })
            .expect("sandbox starts")
        };
        assert_eq!(sandbox(Duration::from_secs(5)).deadline_ticks(), 501);
        assert_eq!(sandbox(Duration::from_millis(205)).deadline_ticks(), 22);
        assert_eq!(sandbox(Duration::ZERO).deadline_ticks(), 1);
    }

    #[test]
    fn the_ticker_thread_ends_when_dropped() {
        let mut ticker = Ticker::start(Engine::default()).expect("ticker starts");
        let thread = ticker.thread.take().expect("ticker has a thread");
        std::thread::sleep(EPOCH_TICK * 3);
        assert!(!thread.is_finished(), "the ticker runs while held");
        drop(ticker);
        // Would hang (and time the test out) if the thread kept ticking.
        thread.join().expect("ticker thread exits cleanly");
    }
}

//! The wasmtime engine, its epoch ticker and the caches of compiled
//! libraries.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::Linker;
use wasmtime::{Cache, CacheConfig, Config, Engine};

use crate::tls::{DefaultCertificate, SecretPem};

use super::component::{self, LoadedLibrary, Prepared};
use super::instance::StoreState;
use super::{LibraryError, RuntimeConfig, describe_error};

/// How often the epoch advances: the granularity of call deadlines.
pub(super) const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The bundled libraries, by origin.
fn bundled() -> [(&'static str, &'static [u8]); 4] {
    use crate::guests;
    [
        ("bundled:base", guests::BASE),
        ("bundled:ingress", guests::INGRESS),
        ("bundled:kubernetes-backends", guests::KUBERNETES_BACKENDS),
        (
            "bundled:status-patches-150-pod-readiness-gate",
            guests::STATUS_PATCHES_150_POD_READINESS_GATE,
        ),
    ]
}

/// What every library and instance of one runtime shares. The ticker lives
/// as long as any of them, so deadlines keep working after the
/// [`LibraryRuntime`] itself is dropped.
pub(super) struct Shared {
    pub(super) engine: Engine,
    pub(super) linker: Linker<StoreState>,
    pub(super) config: RuntimeConfig,
    /// The configured default certificate, or one generated for this runtime.
    pub(super) default_certificate: SecretPem,
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

/// Compiles, caches and checks template libraries. One per process is
/// enough; it is `Send + Sync`.
pub struct LibraryRuntime {
    shared: Arc<Shared>,
    disk_cache: Option<Cache>,
    /// Libraries by the SHA-256 of their bytes.
    compiled: Mutex<HashMap<String, Arc<Prepared>>>,
}

impl std::fmt::Debug for LibraryRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibraryRuntime")
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl LibraryRuntime {
    /// Starts the engine and its epoch ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, LibraryError> {
        let engine_error = |cause: String| LibraryError::Engine { cause };
        let mut wasmtime_config = Config::new();
        wasmtime_config.epoch_interruption(true);
        let disk_cache = match &config.cache_dir {
            Some(dir) => Some(disk_cache(dir).map_err(engine_error)?),
            None => None,
        };
        wasmtime_config.cache(disk_cache.clone());
        let engine =
            Engine::new(&wasmtime_config).map_err(|error| engine_error(describe_error(&error)))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| component::add_to_linker(&mut linker))
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
            shared: Arc::new(Shared {
                engine,
                linker,
                config,
                default_certificate,
                _ticker: ticker,
            }),
            disk_cache,
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// The configuration this runtime was started with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.shared.config
    }

    /// Loads a library from its bytes; `origin` names it in errors until it
    /// has described itself (`bundled:base` or a path). Bytes loaded before
    /// are not compiled again.
    pub fn load_bytes(&self, origin: &str, bytes: &[u8]) -> Result<LoadedLibrary, LibraryError> {
        let digest = hex::encode(Sha256::digest(bytes));
        if let Some(prepared) = self.memory_cache().get(&digest).cloned() {
            return Ok(LoadedLibrary::new(prepared, origin, self.shared.clone()));
        }
        let prepared = Arc::new(Prepared::new(&self.shared, origin, bytes, digest.clone())?);
        self.memory_cache().insert(digest, prepared.clone());
        Ok(LoadedLibrary::new(prepared, origin, self.shared.clone()))
    }

    /// Like [`load_bytes`](Self::load_bytes) but bypasses (and does not fill)
    /// the in-process cache; wasmtime's disk cache still applies. For
    /// measuring load times.
    pub fn load_bytes_uncached(
        &self,
        origin: &str,
        bytes: &[u8],
    ) -> Result<LoadedLibrary, LibraryError> {
        let digest = hex::encode(Sha256::digest(bytes));
        let prepared = Arc::new(Prepared::new(&self.shared, origin, bytes, digest)?);
        Ok(LoadedLibrary::new(prepared, origin, self.shared.clone()))
    }

    /// Loads a library from a `.wasm` file.
    pub fn load_file(&self, path: &Path) -> Result<LoadedLibrary, LibraryError> {
        let origin = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| LibraryError::Read {
            origin: origin.clone(),
            source,
        })?;
        self.load_bytes(&origin, &bytes)
    }

    /// Loads the libraries bundled into this binary.
    pub fn load_bundled(&self) -> Result<Vec<LoadedLibrary>, LibraryError> {
        bundled()
            .into_iter()
            .map(|(origin, bytes)| self.load_bytes(origin, bytes))
            .collect()
    }

    /// Hits and misses of wasmtime's disk cache so far, when there is one.
    pub fn disk_cache_stats(&self) -> Option<(usize, usize)> {
        self.disk_cache
            .as_ref()
            .map(|cache| (cache.cache_hits(), cache.cache_misses()))
    }

    fn memory_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Prepared>>> {
        // The map is only ever inserted into whole; a panic elsewhere while
        // holding the lock cannot leave it inconsistent.
        self.compiled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn disk_cache(dir: &Path) -> Result<Cache, String> {
    // A subdirectory of wasmtime's own: its cache cleaner deletes whatever
    // it finds under its directory, and `~/.cache/haptic` also holds the
    // cargo target directory and helm (it once deleted both).
    let dir = std::path::absolute(dir.join("wasmtime"))
        .map_err(|error| format!("cache directory `{}`: {error}", dir.display()))?;
    std::fs::create_dir_all(&dir).map_err(|error| {
        format!(
            "cannot create the cache directory `{}`: {error}",
            dir.display()
        )
    })?;
    let mut cache_config = CacheConfig::new();
    cache_config.with_directory(&dir);
    Cache::new(cache_config).map_err(|error| {
        format!(
            "cannot use `{}` as the compile cache: {}",
            dir.display(),
            describe_error(&error)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_is_rounded_up_to_whole_ticks_plus_one() {
        let runtime = |deadline| {
            LibraryRuntime::new(RuntimeConfig {
                call_deadline: deadline,
                ..RuntimeConfig::default()
            })
            .expect("runtime starts")
        };
        assert_eq!(runtime(Duration::from_secs(5)).shared.deadline_ticks(), 501);
        assert_eq!(
            runtime(Duration::from_millis(205)).shared.deadline_ticks(),
            22
        );
        assert_eq!(runtime(Duration::ZERO).shared.deadline_ticks(), 1);
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

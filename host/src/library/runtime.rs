//! The library runtime: one sandbox per process, the caches of compiled
//! libraries (by the SHA-256 of their bytes) and the bundled libraries.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use wasmtime::Cache;

use super::component::{LoadedLibrary, Prepared};
use super::sandbox::Sandbox;
use super::{LibraryError, RuntimeConfig};

/// Compiles, caches and checks template libraries. One per process is
/// enough; it is `Send + Sync`.
pub struct LibraryRuntime {
    sandbox: Arc<Sandbox>,
    /// Libraries by the SHA-256 of their bytes.
    compiled: Mutex<HashMap<String, Arc<Prepared>>>,
}

impl std::fmt::Debug for LibraryRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibraryRuntime")
            .field("config", &self.sandbox.config)
            .finish_non_exhaustive()
    }
}

impl LibraryRuntime {
    /// Starts the engine and its epoch ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, LibraryError> {
        Ok(Self {
            sandbox: Arc::new(Sandbox::start(config)?),
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// The configuration this runtime was started with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.sandbox.config
    }

    /// Loads a library from its bytes; `origin` names it in errors until it
    /// has described itself (`bundled:base` or a path). Bytes loaded before
    /// are not compiled again.
    pub fn load_bytes(&self, origin: &str, bytes: &[u8]) -> Result<LoadedLibrary, LibraryError> {
        let digest = hex::encode(Sha256::digest(bytes));
        if let Some(prepared) = self.memory_cache().get(&digest).cloned() {
            return Ok(LoadedLibrary::new(prepared, origin, self.sandbox.clone()));
        }
        let prepared = Arc::new(Prepared::new(&self.sandbox, origin, bytes, digest.clone())?);
        self.memory_cache().insert(digest, prepared.clone());
        Ok(LoadedLibrary::new(prepared, origin, self.sandbox.clone()))
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
        let prepared = Arc::new(Prepared::new(&self.sandbox, origin, bytes, digest)?);
        Ok(LoadedLibrary::new(prepared, origin, self.sandbox.clone()))
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
        crate::guests::BUNDLED
            .iter()
            .map(|bundled| self.load_bytes(bundled.origin, bundled.bytes))
            .collect()
    }

    /// Hits and misses of wasmtime's disk cache so far, when there is one.
    pub fn disk_cache_stats(&self) -> Option<(usize, usize)> {
        self.sandbox
            .disk_cache
            .as_ref()
            .map(|cache: &Cache| (cache.cache_hits(), cache.cache_misses()))
    }

    fn memory_cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Prepared>>> {
        // The map is only ever inserted into whole; a panic elsewhere while
        // holding the lock cannot leave it inconsistent.
        self.compiled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

//! Compiled libraries: a component's bytes compiled once, matched to its
//! contract version and described, then shared by every [`LoadedLibrary`]
//! made from the same bytes.

use std::sync::Arc;

use semver::Version;
use wasmtime::component::Component;

use super::contract::{Contract, ContractPre};
use super::instance::LibraryInstance;
use super::sandbox::Sandbox;
use super::types::LibraryInfo;
use super::{LibraryError, describe_error};

/// Everything derived from one component's bytes; shared by every
/// [`LoadedLibrary`] loaded from the same bytes.
pub(super) struct Prepared {
    component: Component,
    pre: ContractPre,
    contract_version: Version,
    info: LibraryInfo,
    name: Arc<str>,
    digest: String,
}

impl Prepared {
    /// Compiles `bytes`, matches them to a contract version and asks the
    /// library to describe itself.
    pub(super) fn new(
        sandbox: &Arc<Sandbox>,
        origin: &str,
        bytes: &[u8],
        digest: String,
    ) -> Result<Self, LibraryError> {
        check_header(origin, bytes)?;
        let component =
            Component::new(&sandbox.engine, bytes).map_err(|error| LibraryError::Compile {
                origin: origin.to_owned(),
                cause: describe_error(&error),
            })?;
        let (contract, contract_version) = Contract::of(&sandbox.engine, &component, origin)?;
        let mismatch = |error: wasmtime::Error| LibraryError::Mismatch {
            origin: origin.to_owned(),
            version: contract_version.clone(),
            cause: describe_error(&error),
        };
        let instance_pre = sandbox
            .linker
            .instantiate_pre(&component)
            .map_err(mismatch)?;
        let pre = contract.prepare(instance_pre).map_err(mismatch)?;
        let info = LibraryInstance::start(sandbox.clone(), &pre, origin.into())?.describe()?;
        Ok(Self {
            component,
            pre,
            contract_version,
            name: info.name.as_str().into(),
            info,
            digest,
        })
    }
}

/// A compiled, checked library that makes instances. Cheap to clone.
#[derive(Clone)]
pub struct LoadedLibrary {
    prepared: Arc<Prepared>,
    origin: Arc<str>,
    sandbox: Arc<Sandbox>,
}

impl std::fmt::Debug for LoadedLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedLibrary")
            .field("name", &self.prepared.info.name)
            .field("origin", &self.origin)
            .field("contract_version", &self.prepared.contract_version)
            .finish_non_exhaustive()
    }
}

impl LoadedLibrary {
    pub(super) fn new(prepared: Arc<Prepared>, origin: &str, sandbox: Arc<Sandbox>) -> Self {
        Self {
            prepared,
            origin: origin.into(),
            sandbox,
        }
    }

    /// What the library said about itself.
    pub fn info(&self) -> &LibraryInfo {
        &self.prepared.info
    }

    /// Where it came from: `bundled:<name>` or the file path.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The `haptic:template` version the component was built for.
    pub fn contract_version(&self) -> &Version {
        &self.prepared.contract_version
    }

    /// SHA-256 of the component's bytes, hex.
    pub fn digest(&self) -> &str {
        &self.prepared.digest
    }

    /// True when both were loaded from the same bytes and share one
    /// compilation (the runtime's in-process cache).
    pub fn shares_compilation_with(&self, other: &LoadedLibrary) -> bool {
        Arc::ptr_eq(&self.prepared, &other.prepared)
    }

    /// The compiled component.
    pub fn component(&self) -> &Component {
        &self.prepared.component
    }

    /// A fresh, unconfigured instance.
    pub fn instantiate(&self) -> Result<LibraryInstance, LibraryError> {
        LibraryInstance::start(
            self.sandbox.clone(),
            &self.prepared.pre,
            self.prepared.name.clone(),
        )
    }
}

/// Refuses what is obviously not a component, with a hint at what it is.
fn check_header(origin: &str, bytes: &[u8]) -> Result<(), LibraryError> {
    let not_a_component = |cause: &str| LibraryError::NotAComponent {
        origin: origin.to_owned(),
        cause: cause.to_owned(),
    };
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(not_a_component(
            "it is not WebAssembly at all (no `\\0asm` header); a template library is a `.wasm` \
             component built for the wasm32-wasip2 target",
        ));
    }
    if bytes[4..8] == [1, 0, 0, 0] {
        return Err(not_a_component(
            "it is a core WebAssembly module; build it for the wasm32-wasip2 target (which emits \
             a component) or wrap it with `wasm-tools component new`",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_tell_modules_and_garbage_apart() {
        let module = [0, b'a', b's', b'm', 1, 0, 0, 0];
        let component = [0, b'a', b's', b'm', 0x0d, 0, 1, 0];
        let garbage = b"#!/bin/sh\necho hi\n";
        assert!(matches!(
            check_header("m.wasm", &module),
            Err(LibraryError::NotAComponent { cause, .. }) if cause.contains("core WebAssembly module")
        ));
        assert!(matches!(
            check_header("g.wasm", garbage),
            Err(LibraryError::NotAComponent { cause, .. }) if cause.contains("not WebAssembly at all")
        ));
        assert!(check_header("c.wasm", &component).is_ok());
    }
}

//! Compiled libraries and the contract versions the host can call.
//!
//! A component records the contract it was built for in the name of its
//! export, `haptic:template/library@<version>`. The host reads it before
//! instantiating anything and picks the bindings module for a
//! semver-compatible supported version (the same rule wasmtime uses to match
//! names). Supporting a new contract is a new bindings module plus a
//! [`Contract`] variant and its match arms here.

use std::sync::Arc;

use semver::Version;
use wasmtime::Store;
use wasmtime::component::{Component, InstancePre, Linker};

use super::checks::Malformed;
use super::engine::Shared;
use super::instance::{LibraryInstance, StoreState};
use super::types::{Change, GuestError, LibraryInfo, Plan, RenderOutput};
use super::{LibraryError, describe_error, v0_1_0, v0_2_0};

/// The export that marks a template library; a version follows the `@`.
const LIBRARY_EXPORT: &str = "haptic:template/library@";

/// Contract versions this host has bindings for, oldest first.
pub const SUPPORTED_CONTRACTS: &[Version] = &[v0_1_0::VERSION, v0_2_0::VERSION];

/// A contract version with bindings in this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contract {
    V0_1_0,
    V0_2_0,
}

impl Contract {
    const ALL: &[Contract] = &[Contract::V0_1_0, Contract::V0_2_0];

    fn version(self) -> Version {
        match self {
            Self::V0_1_0 => v0_1_0::VERSION,
            Self::V0_2_0 => v0_2_0::VERSION,
        }
    }

    fn prepare(self, instance_pre: InstancePre<StoreState>) -> wasmtime::Result<ContractPre> {
        match self {
            Self::V0_1_0 => v0_1_0::Pre::new(instance_pre).map(ContractPre::V0_1_0),
            Self::V0_2_0 => v0_2_0::Pre::new(instance_pre).map(ContractPre::V0_2_0),
        }
    }
}

/// Adds the host imports of every supported contract version.
pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    v0_1_0::add_to_linker(linker)?;
    v0_2_0::add_to_linker(linker)
}

/// A component checked against the bindings of its contract version.
pub(super) enum ContractPre {
    V0_1_0(v0_1_0::Pre),
    V0_2_0(v0_2_0::Pre),
}

impl ContractPre {
    pub(super) fn instantiate(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<ContractExports> {
        match self {
            Self::V0_1_0(pre) => pre.instantiate(store).map(ContractExports::V0_1_0),
            Self::V0_2_0(pre) => pre.instantiate(store).map(ContractExports::V0_2_0),
        }
    }
}

/// The exports of one instance, whatever its contract version.
pub(super) enum ContractExports {
    V0_1_0(v0_1_0::Exports),
    V0_2_0(v0_2_0::Exports),
}

impl ContractExports {
    pub(super) fn describe(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<Result<LibraryInfo, Malformed>> {
        match self {
            Self::V0_1_0(exports) => exports.describe(store),
            Self::V0_2_0(exports) => exports.describe(store),
        }
    }

    pub(super) fn configure(
        &self,
        store: &mut Store<StoreState>,
        values: &str,
    ) -> wasmtime::Result<Result<Plan, GuestError>> {
        match self {
            Self::V0_1_0(exports) => exports.configure(store, values),
            Self::V0_2_0(exports) => exports.configure(store, values),
        }
    }

    pub(super) fn render(
        &self,
        store: &mut Store<StoreState>,
        changes: &[Change],
    ) -> wasmtime::Result<Result<RenderOutput, GuestError>> {
        match self {
            Self::V0_1_0(exports) => exports.render(store, changes),
            Self::V0_2_0(exports) => exports.render(store, changes),
        }
    }
}

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
        shared: &Arc<Shared>,
        origin: &str,
        bytes: &[u8],
        digest: String,
    ) -> Result<Self, LibraryError> {
        check_header(origin, bytes)?;
        let component =
            Component::new(&shared.engine, bytes).map_err(|error| LibraryError::Compile {
                origin: origin.to_owned(),
                cause: describe_error(&error),
            })?;
        let (contract, contract_version) = contract_of(shared, &component, origin)?;
        let mismatch = |error: wasmtime::Error| LibraryError::Mismatch {
            origin: origin.to_owned(),
            version: contract_version.clone(),
            cause: describe_error(&error),
        };
        let instance_pre = shared
            .linker
            .instantiate_pre(&component)
            .map_err(mismatch)?;
        let pre = contract.prepare(instance_pre).map_err(mismatch)?;
        let info = LibraryInstance::start(shared.clone(), &pre, origin.into())?.describe()?;
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
    shared: Arc<Shared>,
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
    pub(super) fn new(prepared: Arc<Prepared>, origin: &str, shared: Arc<Shared>) -> Self {
        Self {
            prepared,
            origin: origin.into(),
            shared,
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
            self.shared.clone(),
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

/// Finds the contract version the component was built for and the bindings
/// that can call it.
fn contract_of(
    shared: &Shared,
    component: &Component,
    origin: &str,
) -> Result<(Contract, Version), LibraryError> {
    let component_type = component.component_type();
    let mut exports = Vec::new();
    let mut found = Vec::new();
    for (name, _) in component_type.exports(&shared.engine) {
        exports.push(format!("`{name}`"));
        if let Some(Ok(version)) = name.strip_prefix(LIBRARY_EXPORT).map(Version::parse) {
            found.push(version);
        }
    }
    found.sort();
    for version in found.iter().rev() {
        if let Some(contract) = Contract::ALL
            .iter()
            .find(|contract| compatible(&contract.version(), version))
        {
            return Ok((*contract, version.clone()));
        }
    }
    match found.pop() {
        Some(found) => Err(LibraryError::IncompatibleContract {
            origin: origin.to_owned(),
            found,
            supported: supported_description(),
            latest: latest_supported().to_string(),
        }),
        None => Err(LibraryError::NotALibrary {
            origin: origin.to_owned(),
            exports: if exports.is_empty() {
                "nothing".to_owned()
            } else {
                exports.join(", ")
            },
        }),
    }
}

/// Semver compatibility as the component model applies it to interface
/// names: same major version, or same minor for 0.x, or exactly the same
/// 0.0.x or pre-release.
fn compatible(supported: &Version, found: &Version) -> bool {
    if !supported.pre.is_empty()
        || !found.pre.is_empty()
        || supported.major == 0 && supported.minor == 0
    {
        return (
            supported.major,
            supported.minor,
            supported.patch,
            &supported.pre,
        ) == (found.major, found.minor, found.patch, &found.pre);
    }
    if supported.major != 0 {
        return found.major == supported.major;
    }
    found.major == 0 && found.minor == supported.minor
}

/// `0.1.x`, or `0.1.x and 0.2.x`.
fn supported_description() -> String {
    let ranges: Vec<String> = SUPPORTED_CONTRACTS
        .iter()
        .map(|version| match (version.major, version.minor) {
            (0, 0) => version.to_string(),
            (0, minor) => format!("0.{minor}.x"),
            (major, _) => format!("{major}.x"),
        })
        .collect();
    ranges.join(" and ")
}

fn latest_supported() -> Version {
    SUPPORTED_CONTRACTS
        .iter()
        .max()
        .cloned()
        .unwrap_or(v0_1_0::VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).expect("test versions parse")
    }

    #[test]
    fn compatibility_follows_component_model_semver() {
        assert!(compatible(&v("0.1.0"), &v("0.1.0")));
        assert!(compatible(&v("0.1.0"), &v("0.1.7")));
        assert!(!compatible(&v("0.1.0"), &v("0.2.0")));
        assert!(!compatible(&v("0.1.0"), &v("1.1.0")));
        assert!(!compatible(&v("0.1.0"), &v("0.1.1-rc.1")));
        assert!(compatible(&v("1.0.0"), &v("1.4.2")));
        assert!(!compatible(&v("1.0.0"), &v("2.0.0")));
        assert!(!compatible(&v("0.0.1"), &v("0.0.2")));
    }

    #[test]
    fn supported_versions_are_described_as_ranges() {
        assert_eq!(supported_description(), "0.1.x and 0.2.x");
        assert_eq!(latest_supported(), v("0.2.0"));
    }

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

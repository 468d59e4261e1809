//! The contract versions the host can call, and dispatch to their bindings.
//!
//! A component records the contract it was built for in the name of its
//! export, `haptic:template/library@<version>`. The host reads it before
//! instantiating anything and picks the bindings module for a
//! semver-compatible supported version (the same rule wasmtime uses to match
//! names). Supporting a new contract is a new bindings module plus a
//! [`Contract`] variant and its match arms here. The bindings depend only on
//! the store state and the host's own types below them.

#[macro_use]
mod bindings_common;
mod v0_1_0;
mod v0_2_0;
mod v0_3_0;
mod v0_4_0;

use semver::Version;
use wasmtime::Store;
use wasmtime::component::{Component, InstancePre, Linker};

use super::LibraryError;
use super::checks::Malformed;
use super::store::StoreState;
use super::types::{Change, GuestError, LibraryInfo, Plan, RenderOutput};

/// The export that marks a template library; a version follows the `@`.
const LIBRARY_EXPORT: &str = "haptic:template/library@";

/// Contract versions this host has bindings for, oldest first.
pub const SUPPORTED_CONTRACTS: &[Version] = &[
    v0_1_0::VERSION,
    v0_2_0::VERSION,
    v0_3_0::VERSION,
    v0_4_0::VERSION,
];

/// A contract version with bindings in this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Contract {
    V0_1_0,
    V0_2_0,
    V0_3_0,
    V0_4_0,
}

impl Contract {
    const ALL: &[Contract] = &[
        Contract::V0_1_0,
        Contract::V0_2_0,
        Contract::V0_3_0,
        Contract::V0_4_0,
    ];

    fn version(self) -> Version {
        match self {
            Self::V0_1_0 => v0_1_0::VERSION,
            Self::V0_2_0 => v0_2_0::VERSION,
            Self::V0_3_0 => v0_3_0::VERSION,
            Self::V0_4_0 => v0_4_0::VERSION,
        }
    }

    /// Finds the contract version the component was built for and the
    /// bindings that can call it.
    pub(super) fn of(
        engine: &wasmtime::Engine,
        component: &Component,
        origin: &str,
    ) -> Result<(Contract, Version), LibraryError> {
        let component_type = component.component_type();
        let mut exports = Vec::new();
        let mut found = Vec::new();
        for (name, _) in component_type.exports(engine) {
            exports.push(format!("`{name}`"));
            if let Some(Ok(version)) = name.strip_prefix(LIBRARY_EXPORT).map(Version::parse) {
                found.push(version);
            }
        }
        found.sort();
        for version in found.iter().rev() {
            if let Some(contract) = Self::ALL
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

    pub(super) fn prepare(
        self,
        instance_pre: InstancePre<StoreState>,
    ) -> wasmtime::Result<ContractPre> {
        match self {
            Self::V0_1_0 => v0_1_0::Pre::new(instance_pre).map(ContractPre::V0_1_0),
            Self::V0_2_0 => v0_2_0::Pre::new(instance_pre).map(ContractPre::V0_2_0),
            Self::V0_3_0 => v0_3_0::Pre::new(instance_pre).map(ContractPre::V0_3_0),
            Self::V0_4_0 => v0_4_0::Pre::new(instance_pre).map(ContractPre::V0_4_0),
        }
    }
}

/// Adds the host imports of every supported contract version.
pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    v0_1_0::add_to_linker(linker)?;
    v0_2_0::add_to_linker(linker)?;
    v0_3_0::add_to_linker(linker)?;
    v0_4_0::add_to_linker(linker)
}

/// A component checked against the bindings of its contract version.
pub(super) enum ContractPre {
    V0_1_0(v0_1_0::Pre),
    V0_2_0(v0_2_0::Pre),
    V0_3_0(v0_3_0::Pre),
    V0_4_0(v0_4_0::Pre),
}

impl ContractPre {
    pub(super) fn instantiate(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<ContractExports> {
        match self {
            Self::V0_1_0(pre) => pre.instantiate(store).map(ContractExports::V0_1_0),
            Self::V0_2_0(pre) => pre.instantiate(store).map(ContractExports::V0_2_0),
            Self::V0_3_0(pre) => pre.instantiate(store).map(ContractExports::V0_3_0),
            Self::V0_4_0(pre) => pre.instantiate(store).map(ContractExports::V0_4_0),
        }
    }
}

/// The exports of one instance, whatever its contract version.
pub(super) enum ContractExports {
    V0_1_0(v0_1_0::Exports),
    V0_2_0(v0_2_0::Exports),
    V0_3_0(v0_3_0::Exports),
    V0_4_0(v0_4_0::Exports),
}

impl ContractExports {
    pub(super) fn describe(
        &self,
        store: &mut Store<StoreState>,
    ) -> wasmtime::Result<Result<LibraryInfo, Malformed>> {
        match self {
            Self::V0_1_0(exports) => exports.describe(store),
            Self::V0_2_0(exports) => exports.describe(store),
            Self::V0_3_0(exports) => exports.describe(store),
            Self::V0_4_0(exports) => exports.describe(store),
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
            Self::V0_3_0(exports) => exports.configure(store, values),
            Self::V0_4_0(exports) => exports.configure(store, values),
        }
    }

    pub(super) fn render(
        &self,
        store: &mut Store<StoreState>,
        changes: Vec<Change>,
    ) -> wasmtime::Result<Result<ConvertedOutput, GuestError>> {
        match self {
            Self::V0_1_0(exports) => exports.render(store, changes),
            Self::V0_2_0(exports) => exports.render(store, changes),
            Self::V0_3_0(exports) => exports.render(store, changes),
            Self::V0_4_0(exports) => exports.render(store, changes),
        }
    }
}

/// A render's output as it crossed the contract: converted, or the key of
/// the item that did not convert (a status that is not a JSON object) and
/// why.
pub(in crate::library) type ConvertedOutput = Result<RenderOutput, (Option<String>, Malformed)>;

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

/// `0.1.x`, `0.1.x and 0.2.x`, or `0.1.x, 0.2.x and 0.3.x`.
fn supported_description() -> String {
    let ranges: Vec<String> = SUPPORTED_CONTRACTS
        .iter()
        .map(|version| match (version.major, version.minor) {
            (0, 0) => version.to_string(),
            (0, minor) => format!("0.{minor}.x"),
            (major, _) => format!("{major}.x"),
        })
        .collect();
    match ranges.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => ranges.join(""),
    }
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
        assert_eq!(supported_description(), "0.1.x, 0.2.x, 0.3.x and 0.4.x");
        assert_eq!(latest_supported(), v("0.4.0"));
    }
}

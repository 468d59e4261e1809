//! Bindings for `haptic:template@0.1.0` and their conversion into the host's
//! version-independent [`types`].
//!
//! A released contract is frozen: this module changes only when the host's
//! own types do. What it shares with later versions comes from
//! [`common_bindings!`](super::bindings_common).

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

use crate::library::checks::Malformed;
use crate::library::store::{GuestLogLevel, StoreState};
use crate::library::types;

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/haptic-template@0.1.0",
        world: "template-library",
    });
}

use bindings::haptic::template::types as wit;

/// The contract version these bindings were generated from.
pub(super) const VERSION: semver::Version = semver::Version::new(0, 1, 0);

common_bindings!();

fn plan_from_wit(plan: wit::Plan) -> types::Plan {
    types::Plan {
        watches: plan
            .watches
            .into_iter()
            .map(|watch| types::Watch {
                name: watch.name,
                api_version: watch.api_version,
                kind: watch.kind,
                namespace: watch.namespace,
                label_selector: watch.label_selector,
                field_selector: None,
                ignore_fields: watch.ignore_fields,
            })
            .collect(),
        patches_status_of: plan.patches_status_of,
        applies: Vec::new(),
    }
}

/// Secret text arrived with contract 0.3.0.
fn section_secret(_: &wit::Section) -> bool {
    false
}

fn snippet_secret(_: &wit::Snippet) -> bool {
    false
}

fn item_from_wit(item: wit::Item) -> Result<types::Item, Malformed> {
    Ok(match item {
        wit::Item::Section(section) => section_from_wit(section),
        wit::Item::Snippet(snippet) => snippet_from_wit(snippet),
        wit::Item::File(file) => types::Item::File(Arc::new(types::AuxFile::new(
            file.path,
            file.content,
            false,
        ))),
        wit::Item::StatusPatch(patch) => patch_from_wit(patch)?,
    })
}

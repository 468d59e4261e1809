//! Which objects a watch asks for: the one rule for objects from files
//! (`haptic render`, `haptic test`, local mode) and for a kind the
//! controller lists once for watches with different selectors. The
//! selectors themselves are `haptic_selectors`', which the SDK's test
//! harness uses too.

use std::borrow::Cow;

use haptic_selectors::{Selection, SelectorError};

use super::ClusterObject;
use crate::library::types::Watch;

/// A watch's kind, namespace and selectors, parsed once for many objects.
#[derive(Debug, Clone)]
pub struct WatchFilter {
    api_version: String,
    kind: String,
    selection: Selection,
}

impl WatchFilter {
    /// Parses `watch`'s selectors; the error says which one is wrong.
    pub fn of(watch: &Watch) -> Result<Self, SelectorError> {
        Ok(Self {
            api_version: watch.api_version.clone(),
            kind: watch.kind.clone(),
            selection: Selection::parse(
                &watch.api_version,
                &watch.kind,
                watch.namespace.as_deref(),
                watch.label_selector.as_deref(),
                watch.field_selector.as_deref(),
            )?,
        })
    }

    /// Whether the watch asks for `object`: same apiVersion and kind, the
    /// watch's namespace (none or empty means all), its label selector and
    /// its field selector (the stored text is parsed only for one).
    pub fn selects(&self, object: &ClusterObject) -> bool {
        let reference = &object.reference;
        reference.api_version == self.api_version
            && reference.kind == self.kind
            && self
                .selection
                .matches(&reference.namespace, &object.labels, || {
                    Cow::Owned(object.value())
                })
    }
}

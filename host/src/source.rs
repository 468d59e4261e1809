//! Where the cluster's objects come from, whichever source it is: what one
//! watcher covers ([`WatchTarget`], the libraries' watches grouped by kind)
//! and what a source tells the render loop ([`SourceEvent`]). The
//! Kubernetes API is one source ([`kubernetes`]); `haptic run`'s directory
//! of manifests is another (`crate::local::files`), and `haptic migrate
//! report --cluster` lists once through the first.

pub mod kubernetes;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::library::types::{Kind, Watch};
use crate::render::ClusterChange;

/// What one watcher covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchTarget {
    pub api_version: String,
    pub kind: String,
    /// `None`: every namespace.
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    /// Evaluated by the API server (e.g. `type=kubernetes.io/tls`).
    pub field_selector: Option<String>,
    /// Dropped before storing.
    pub trim: Arc<[String]>,
}

impl WatchTarget {
    /// `Kind` (in namespace `ns`), for logs and errors.
    pub fn describe(&self) -> String {
        let scope = match &self.namespace {
            Some(namespace) => format!(" in namespace {namespace}"),
            None => String::new(),
        };
        let selector = match &self.label_selector {
            Some(selector) => format!(" matching {selector}"),
            None => String::new(),
        };
        let fields = match &self.field_selector {
            Some(selector) => format!(" with fields {selector}"),
            None => String::new(),
        };
        format!(
            "{} ({}){scope}{selector}{fields}",
            self.kind, self.api_version
        )
    }
}

/// One watcher per (apiVersion, kind) of `watches`, with the shared scope.
pub fn targets<'a>(
    watches: impl IntoIterator<Item = &'a Watch>,
    trims: &BTreeMap<Kind, Arc<[String]>>,
) -> Vec<WatchTarget> {
    let mut by_kind: BTreeMap<Kind, Vec<&Watch>> = BTreeMap::new();
    for watch in watches {
        by_kind
            .entry(Kind::of_watch(watch))
            .or_default()
            .push(watch);
    }
    by_kind
        .into_iter()
        .map(|(kind, watches)| {
            let namespace = shared(watches.iter().map(|w| {
                w.namespace
                    .clone()
                    .filter(|namespace| !namespace.is_empty())
            }));
            let label_selector = shared(watches.iter().map(|w| {
                w.label_selector
                    .clone()
                    .filter(|selector| !selector.trim().is_empty())
            }));
            // A kind watched with different field selectors is listed whole;
            // the store gives each library its own part.
            let field_selector = shared(watches.iter().map(|w| {
                w.field_selector
                    .clone()
                    .filter(|selector| !selector.trim().is_empty())
            }));
            WatchTarget {
                trim: trims
                    .get(&kind)
                    .cloned()
                    .unwrap_or_else(|| Arc::from(Vec::new())),
                api_version: kind.api_version,
                kind: kind.kind,
                namespace,
                label_selector,
                field_selector,
            }
        })
        .collect()
}

/// The value every item has, or `None` (the widest scope) when they differ.
fn shared(mut values: impl Iterator<Item = Option<String>>) -> Option<String> {
    let first = values.next()?;
    values
        .all(|value| value == first)
        .then_some(first)
        .flatten()
}

/// What a source tells the render loop.
#[derive(Debug)]
pub struct SourceEvent {
    /// The index of the target in the list the source was started with
    /// ([`kubernetes::spawn`]).
    pub target: usize,
    pub changes: Vec<ClusterChange>,
    /// This event completes a (re-)list.
    pub listed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(
        kind: &str,
        namespace: Option<&str>,
        selector: Option<&str>,
        ignore: &[&str],
    ) -> Watch {
        Watch {
            name: kind.to_lowercase(),
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            label_selector: selector.map(str::to_owned),
            field_selector: None,
            ignore_fields: ignore.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn watches_of_one_kind_share_a_watcher_with_the_wider_scope() {
        let watches = [
            watch(
                "Service",
                Some("shop"),
                Some("app=web"),
                &["status", "spec.a"],
            ),
            watch("Service", Some("shop"), Some("app=api"), &["status"]),
            watch("Pod", None, Some("gate=on"), &["spec"]),
            watch("Pod", Some(""), Some("gate=on"), &["spec"]),
        ];
        let trims = crate::render::ingest_trims(&watches);
        let targets = targets(&watches, &trims);
        assert_eq!(targets.len(), 2);
        let pod = targets.iter().find(|t| t.kind == "Pod").unwrap();
        assert_eq!(pod.namespace, None);
        assert_eq!(pod.label_selector.as_deref(), Some("gate=on"));
        assert_eq!(&*pod.trim, ["spec".to_owned()]);
        let service = targets.iter().find(|t| t.kind == "Service").unwrap();
        assert_eq!(service.namespace.as_deref(), Some("shop"));
        assert_eq!(service.label_selector, None, "selectors differ: the union");
        assert_eq!(
            &*service.trim,
            ["status".to_owned()],
            "only what both ignore"
        );
    }
}

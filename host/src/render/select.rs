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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::manifests::{self, Manifest};

    fn watch(api_version: &str, kind: &str) -> Watch {
        Watch {
            name: "w".into(),
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            ignore_fields: vec![],
        }
    }

    fn load(content: &str) -> Vec<Manifest> {
        manifests::parse(
            Path::new("test.yaml"),
            content,
            &manifests::WatchedKinds::new(),
        )
        .expect("valid manifests")
    }

    fn names(watch: &Watch, manifests: &[Manifest]) -> Vec<String> {
        let filter = WatchFilter::of(watch).expect("valid selectors");
        manifests
            .iter()
            .filter(|m| filter.selects(&m.object))
            .map(|m| m.reference().name.clone())
            .collect()
    }

    #[test]
    fn watches_match_api_version_kind_namespace_and_labels() {
        let manifests = load(
            "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: x, labels: {app: web, tier: front}}\n---\n\
             apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: y, labels: {app: db}}\n---\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x, labels: {app: web}}\n",
        );
        let services = watch("v1", "Service");
        let with = |namespace: Option<&str>, labels: Option<&str>| Watch {
            namespace: namespace.map(Into::into),
            label_selector: labels.map(Into::into),
            ..services.clone()
        };
        assert_eq!(names(&services, &manifests), ["a", "b"]);
        assert_eq!(names(&with(Some("y"), None), &manifests), ["b"]);
        assert_eq!(names(&with(Some(""), None), &manifests), ["a", "b"]);
        assert_eq!(names(&with(None, Some("app=web")), &manifests), ["a"]);
        assert_eq!(names(&with(None, Some("tier")), &manifests), ["a"]);
        assert_eq!(names(&with(None, Some("!tier")), &manifests), ["b"]);
        assert!(names(&watch("apps/v1", "Service"), &manifests).is_empty());
        let error = WatchFilter::of(&with(None, Some("app in ()"))).expect_err("bad");
        assert!(
            error
                .to_string()
                .starts_with("invalid label selector 'app in ()'"),
            "{error}"
        );
    }

    /// Offline, a Secret written without `type:` is the `Opaque` Secret the
    /// API server would have stored: a `type=Opaque` watch finds it, a
    /// `kubernetes.io/tls` watch does not.
    #[test]
    fn a_secret_without_type_is_found_by_a_type_opaque_watch() {
        let manifests = load(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: plain, namespace: shop}\n---\n\
             apiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: shop}\ntype: kubernetes.io/tls\n",
        );
        let by_type = |selector: &str| Watch {
            field_selector: Some(selector.into()),
            ..watch("v1", "Secret")
        };
        assert_eq!(names(&by_type("type=Opaque"), &manifests), ["plain"]);
        assert_eq!(
            names(&by_type("type=kubernetes.io/tls"), &manifests),
            ["cert"]
        );
        assert_eq!(names(&by_type("type!=Opaque"), &manifests), ["cert"]);
        assert_eq!(
            manifests[0].object.value()["type"],
            "Opaque",
            "the library sees it too"
        );
    }
}

//! Which objects a watch selects, written once for every place that decides
//! it: the host's render core (objects from files, and a kind two libraries
//! watch with different selectors, which the controller lists as a union),
//! and the guest SDK's test harness. In a cluster the API server applies a
//! watch's selectors first; here the same rules give the same answer on
//! objects that did not come from an API server.
//!
//! - [`LabelSelector`]: `app=web,tier!=cache`, `env in (prod)`, `!canary`
//!   (`k8s.io/apimachinery/pkg/labels`).
//! - [`FieldSelector`]: `type=kubernetes.io/tls`, `metadata.name!=x`
//!   (`k8s.io/apimachinery/pkg/fields`), read with the API server's defaults
//!   for the fields a selector can name ([`defaults`]).
//! - [`Selection`]: a watch's namespace and both selectors, parsed once.

pub mod defaults;
mod fields;
mod labels;

use std::borrow::Cow;

use serde_json::Value;

pub use fields::{FieldSelector, FieldSelectorError};
pub use labels::{LabelSelector, LabelSelectorError, Labels};

/// A watch's namespace, label selector and field selector, parsed once for
/// many objects of the watch's kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `None`: every namespace.
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

/// A selector of a watch that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid label selector '{selector}': {source}")]
    Label {
        selector: String,
        #[source]
        source: LabelSelectorError,
    },
    #[error("invalid field selector '{selector}': {source}")]
    Field {
        selector: String,
        #[source]
        source: FieldSelectorError,
    },
}

impl SelectorError {
    /// `label` or `field`.
    pub fn which(&self) -> &'static str {
        match self {
            Self::Label { .. } => "label",
            Self::Field { .. } => "field",
        }
    }

    /// The selector as the library wrote it.
    pub fn selector(&self) -> &str {
        match self {
            Self::Label { selector, .. } | Self::Field { selector, .. } => selector,
        }
    }
}

impl Selection {
    /// Parses a watch of `api_version`/`kind`: `namespace` none or empty
    /// means every namespace, absent or blank selectors select everything.
    /// The field selector reads the kind's defaulted fields as the API
    /// server would have filled them in.
    pub fn parse(
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, SelectorError> {
        let label_text = label_selector.unwrap_or_default();
        let field_text = field_selector.unwrap_or_default();
        Ok(Self {
            namespace: namespace.filter(|ns| !ns.is_empty()).map(str::to_owned),
            labels: LabelSelector::parse(label_text).map_err(|source| SelectorError::Label {
                selector: label_text.to_owned(),
                source,
            })?,
            fields: FieldSelector::parse_for(api_version, kind, field_text).map_err(|source| {
                SelectorError::Field {
                    selector: field_text.to_owned(),
                    source,
                }
            })?,
        })
    }

    /// Whether an object of the watch's kind in `namespace` with `labels` is
    /// selected; `object` is asked for only when there is a field selector
    /// (stores that keep objects as text parse them only then).
    pub fn matches<'a>(
        &self,
        namespace: &str,
        labels: &impl Labels,
        object: impl FnOnce() -> Cow<'a, Value>,
    ) -> bool {
        self.namespace.as_deref().is_none_or(|ns| ns == namespace)
            && self.labels.matches(labels)
            && (self.fields.is_empty() || self.fields.matches(&object()))
    }

    /// [`matches`](Self::matches) for an object at hand, reading its
    /// namespace and labels from its metadata.
    pub fn matches_object(&self, object: &Value) -> bool {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        self.matches(namespace, &labels, || Cow::Borrowed(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn namespace_labels_and_fields_all_hold() {
        let secret =
            json!({"metadata": {"namespace": "shop", "name": "db", "labels": {"app": "web"}}});
        let select = |namespace, labels, fields| {
            Selection::parse("v1", "Secret", namespace, labels, fields)
                .expect("valid")
                .matches_object(&secret)
        };
        assert!(select(None, None, None));
        assert!(
            select(Some(""), None, None),
            "empty namespace is every namespace"
        );
        assert!(select(Some("shop"), Some("app=web"), Some("type=Opaque")));
        assert!(!select(Some("other"), None, None));
        assert!(!select(None, Some("app=api"), None));
        assert!(
            !select(None, None, Some("type=kubernetes.io/tls")),
            "a Secret without type is Opaque"
        );
    }

    #[test]
    fn errors_say_which_selector() {
        let error =
            Selection::parse("v1", "Secret", None, Some("app in ()"), None).expect_err("empty set");
        assert_eq!(error.which(), "label");
        assert_eq!(error.selector(), "app in ()");
        let error =
            Selection::parse("v1", "Secret", None, None, Some("type")).expect_err("no operator");
        assert_eq!(error.which(), "field");
        assert!(
            error
                .to_string()
                .starts_with("invalid field selector 'type':"),
            "{error}"
        );
    }
}

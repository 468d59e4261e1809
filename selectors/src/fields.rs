//! Kubernetes field selectors in their string form (`type=kubernetes.io/tls`,
//! `metadata.name!=default`), as `kubectl get --field-selector` and watch
//! list options take them. The API server evaluates a watch's field selector
//! in a cluster; the host evaluates the same selector over files and when
//! two libraries watch one kind with different selectors (the watcher then
//! lists the union and each library gets its own part).
//!
//! Semantics follow `k8s.io/apimachinery/pkg/fields`: comma-separated
//! requirements that must all hold, `=` or `==` for equality and `!=` for
//! inequality; a missing field reads as the API server's default for it
//! ([`crate::defaults`]), else as the empty string. Which fields a kind
//! supports is the API server's business; here any dotted path into the
//! object works, so a selector the server refuses is reported by the
//! controller's watch, not silently accepted.

use serde_json::Value;

/// Why a field selector does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    #[error("it has an empty requirement; remove the extra ','")]
    EmptyRequirement,
    #[error("requirement `{0}` needs `=`, `==` or `!=` (e.g. `type=kubernetes.io/tls`)")]
    NoOperator(String),
    #[error("requirement `{0}` names no field (use a dotted path like `metadata.name`)")]
    NoField(String),
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    path: Vec<String>,
    value: String,
    equal: bool,
    /// What the field reads as when the object lacks it.
    default: &'static str,
}

impl FieldSelector {
    /// Parses the string form for any kind (a missing field reads as the
    /// empty string); the error says which requirement is wrong.
    pub fn parse(selector: &str) -> Result<Self, FieldSelectorError> {
        Self::parse_for("", "", selector)
    }

    /// Parses the string form for objects of `api_version`/`kind`: a field
    /// the object lacks reads as the API server's default for it.
    pub fn parse_for(
        api_version: &str,
        kind: &str,
        selector: &str,
    ) -> Result<Self, FieldSelectorError> {
        let mut requirements = Vec::new();
        for part in selector.split(',').map(str::trim) {
            if part.is_empty() {
                if selector.trim().is_empty() {
                    break;
                }
                return Err(FieldSelectorError::EmptyRequirement);
            }
            let (field, value, equal) = if let Some((field, value)) = part.split_once("!=") {
                (field, value, false)
            } else if let Some((field, value)) = part.split_once("==") {
                (field, value, true)
            } else if let Some((field, value)) = part.split_once('=') {
                (field, value, true)
            } else {
                return Err(FieldSelectorError::NoOperator(part.to_owned()));
            };
            let field = field.trim();
            if field.is_empty() || field.split('.').any(str::is_empty) {
                return Err(FieldSelectorError::NoField(part.to_owned()));
            }
            requirements.push(FieldRequirement {
                path: field.split('.').map(str::to_owned).collect(),
                value: value.trim().to_owned(),
                equal,
                default: crate::defaults::of(api_version, kind, field).unwrap_or_default(),
            });
        }
        Ok(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// True when every requirement holds for `object`.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            let found = requirement
                .path
                .iter()
                .try_fold(object, |value, key| value.get(key));
            let text = match found {
                Some(Value::String(text)) => std::borrow::Cow::Borrowed(text.as_str()),
                Some(Value::Bool(flag)) => flag.to_string().into(),
                Some(Value::Number(number)) => number.to_string().into(),
                _ => requirement.default.into(),
            };
            (text == requirement.value) == requirement.equal
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn matches(selector: &str, object: &Value) -> bool {
        FieldSelector::parse(selector)
            .expect("test selectors parse")
            .matches(object)
    }

    #[test]
    fn equality_inequality_and_missing_fields() {
        let tls =
            json!({"type": "kubernetes.io/tls", "metadata": {"name": "web", "namespace": "shop"}});
        let opaque = json!({"type": "Opaque", "metadata": {"name": "db"}});
        let untyped = json!({"metadata": {"name": "x"}});
        assert!(matches("type=kubernetes.io/tls", &tls));
        assert!(matches("type==kubernetes.io/tls", &tls));
        assert!(!matches("type=kubernetes.io/tls", &opaque));
        assert!(!matches("type=kubernetes.io/tls", &untyped));
        assert!(
            matches("type!=kubernetes.io/tls", &untyped),
            "missing is the empty string"
        );
        assert!(matches("type=", &untyped));
        assert!(matches("type=kubernetes.io/tls,metadata.name=web", &tls));
        assert!(!matches("type=kubernetes.io/tls,metadata.name!=web", &tls));
        assert!(matches("", &opaque));
        assert!(matches(
            "spec.replicas=3",
            &json!({"spec": {"replicas": 3}})
        ));
    }

    #[test]
    fn missing_fields_read_as_the_api_servers_defaults() {
        let matches_secret = |selector: &str, object: &Value| {
            FieldSelector::parse_for("v1", "Secret", selector)
                .expect("test selectors parse")
                .matches(object)
        };
        let untyped = json!({"metadata": {"name": "x"}});
        assert!(matches_secret("type=Opaque", &untyped));
        assert!(!matches_secret("type=kubernetes.io/tls", &untyped));
        assert!(!matches_secret(
            "type=Opaque",
            &json!({"type": "kubernetes.io/tls"})
        ));
        let host_network =
            FieldSelector::parse_for("v1", "Pod", "spec.hostNetwork=false").expect("parses");
        assert!(
            host_network.matches(&json!({"spec": {}})),
            "a typed zero value"
        );
        assert!(!host_network.matches(&json!({"spec": {"hostNetwork": true}})));
        assert!(!matches("type=Opaque", &untyped), "no kind, no defaults");
    }

    #[test]
    fn malformed_selectors_say_what_is_wrong() {
        let error = FieldSelector::parse("type").expect_err("no operator");
        assert!(error.to_string().contains("needs `=`"), "{error}");
        let error = FieldSelector::parse("=tls").expect_err("no field");
        assert!(error.to_string().contains("names no field"), "{error}");
        let error = FieldSelector::parse("metadata..name=x").expect_err("empty segment");
        assert!(error.to_string().contains("names no field"), "{error}");
        let error = FieldSelector::parse("type=a,,b=c").expect_err("empty requirement");
        assert_eq!(error, FieldSelectorError::EmptyRequirement);
        assert!(FieldSelector::parse("  ").expect("blank").is_empty());
    }
}

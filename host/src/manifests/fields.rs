//! Kubernetes field selectors in their string form (`type=kubernetes.io/tls`,
//! `metadata.name!=default`), as `kubectl get --field-selector` and watch
//! list options take them. The API server evaluates a watch's field selector
//! in a cluster; the host evaluates the same selector over files and when
//! two libraries watch one kind with different selectors (the watcher then
//! lists the union and each library gets its own part).
//!
//! Semantics follow `k8s.io/apimachinery/pkg/fields`: comma-separated
//! requirements that must all hold, `=` or `==` for equality and `!=` for
//! inequality; a missing field compares as the empty string. Which fields a
//! kind supports is the API server's business; here any dotted path into the
//! object works, so a selector the server refuses is reported by the
//! controller's watch, not silently accepted.

use serde_json::Value;

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
}

impl FieldSelector {
    /// Parses the string form; the error says which requirement is wrong.
    pub fn parse(selector: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for part in selector.split(',').map(str::trim) {
            if part.is_empty() {
                if selector.trim().is_empty() {
                    break;
                }
                return Err(format!("`{selector}` has an empty requirement"));
            }
            let (field, value, equal) = if let Some((field, value)) = part.split_once("!=") {
                (field, value, false)
            } else if let Some((field, value)) = part.split_once("==") {
                (field, value, true)
            } else if let Some((field, value)) = part.split_once('=') {
                (field, value, true)
            } else {
                return Err(format!(
                    "requirement `{part}` needs `=`, `==` or `!=` (e.g. `type=kubernetes.io/tls`)"
                ));
            };
            let field = field.trim();
            if field.is_empty() || field.split('.').any(str::is_empty) {
                return Err(format!(
                    "requirement `{part}` names no field (use a dotted path like `metadata.name`)"
                ));
            }
            requirements.push(FieldRequirement {
                path: field.split('.').map(str::to_owned).collect(),
                value: value.trim().to_owned(),
                equal,
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
                Some(Value::String(text)) => text.clone(),
                Some(Value::Bool(flag)) => flag.to_string(),
                Some(Value::Number(number)) => number.to_string(),
                _ => String::new(),
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
    fn malformed_selectors_say_what_is_wrong() {
        let error = FieldSelector::parse("type").expect_err("no operator");
        assert!(error.contains("needs `=`"), "{error}");
        let error = FieldSelector::parse("=tls").expect_err("no field");
        assert!(error.contains("names no field"), "{error}");
        let error = FieldSelector::parse("metadata..name=x").expect_err("empty segment");
        assert!(error.contains("names no field"), "{error}");
        let error = FieldSelector::parse("type=a,,b=c").expect_err("empty requirement");
        assert!(error.contains("empty requirement"), "{error}");
        assert!(FieldSelector::parse("  ").expect("blank").is_empty());
    }
}

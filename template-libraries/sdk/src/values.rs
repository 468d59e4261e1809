//! The Helm-style `templateLibraries` values tree.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{Error, Result};

/// Every enabled library's values, keyed by camelCase library name, as the
/// host hands them to `configure`. A library reads its own subtree with
/// [`get`](Self::get) and may read another's with [`library`](Self::library).
#[derive(Debug, Clone, Default)]
pub struct Values {
    tree: Map<String, Value>,
    own_key: String,
    own: Value,
}

impl Values {
    /// Wraps a values tree for the library named `library` (kebab-case),
    /// merging its `defaults` under its own subtree so a library always sees
    /// complete values even when the host sent none.
    pub fn new(tree: Value, library: &str, defaults: &Value) -> Result<Self> {
        let tree = match tree {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => return Err(Error::ValuesNotObject(other.to_string())),
        };
        let own_key = camel_case(library);
        let mut own = defaults.clone();
        if let Some(user) = tree.get(&own_key) {
            merge(&mut own, user);
        }
        Ok(Self { tree, own_key, own })
    }

    /// The library's own values, defaults merged, deserialized as `T`.
    pub fn get<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.own.clone()).map_err(|source| Error::InvalidValues {
            library: self.own_key.clone(),
            source,
        })
    }

    /// The library's own values as JSON.
    pub fn own(&self) -> &Value {
        &self.own
    }

    /// Another library's values by camelCase name (`kubernetesBackends`);
    /// `None` when that library is disabled or absent.
    pub fn library(&self, camel_name: &str) -> Option<&Value> {
        self.tree.get(camel_name)
    }

    /// Another library's values deserialized as `T`; `T::default()` when that
    /// library is absent.
    pub fn library_as<T: DeserializeOwned + Default>(&self, camel_name: &str) -> Result<T> {
        match self.tree.get(camel_name) {
            None => Ok(T::default()),
            Some(value) => {
                serde_json::from_value(value.clone()).map_err(|source| Error::InvalidValues {
                    library: camel_name.to_owned(),
                    source,
                })
            }
        }
    }
}

/// `status-patches-150-pod-readiness-gate` -> `statusPatches150PodReadinessGate`.
pub fn camel_case(kebab: &str) -> String {
    let mut out = String::with_capacity(kebab.len());
    let mut upper = false;
    for c in kebab.chars() {
        if c == '-' || c == '_' {
            upper = !out.is_empty();
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Deep-merges `over` into `base`: objects merge key by key, anything else
/// replaces (Helm's rule, lists included).
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn camel_case_of_library_names() {
        assert_eq!(camel_case("base"), "base");
        assert_eq!(camel_case("kubernetes-backends"), "kubernetesBackends");
        assert_eq!(
            camel_case("status-patches-150-pod-readiness-gate"),
            "statusPatches150PodReadinessGate"
        );
    }

    #[test]
    fn own_values_merge_over_defaults() {
        let tree = json!({"kubernetesBackends": {"podReadinessGate": {"enabled": true}}, "ingress": {"x": 1}});
        let defaults =
            json!({"podReadinessGate": {"enabled": false, "other": 2}, "balance": "roundrobin"});
        let values = Values::new(tree, "kubernetes-backends", &defaults).unwrap();
        assert_eq!(
            values.own(),
            &json!({"podReadinessGate": {"enabled": true, "other": 2}, "balance": "roundrobin"})
        );
        assert_eq!(values.library("ingress"), Some(&json!({"x": 1})));
        assert!(values.library("base").is_none());
    }

    #[test]
    fn values_must_be_an_object() {
        assert!(matches!(
            Values::new(json!([1]), "base", &json!({})),
            Err(Error::ValuesNotObject(_))
        ));
    }
}

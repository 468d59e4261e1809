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
    /// Wraps a values tree for the library named `library` (kebab-case).
    ///
    /// The host sends each enabled library's subtree complete: its declared
    /// defaults with the user's settings merged over them, where a user's
    /// `null` has removed a default (Helm's rule). That subtree is used as
    /// is; merging `defaults` under it again would bring back what the user
    /// removed. Only when the host sent no subtree (a unit test, a bare
    /// `configure`) are `defaults` used.
    pub fn new(tree: Value, library: &str, defaults: &Value) -> Result<Self> {
        let tree = match tree {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => return Err(Error::ValuesNotObject(other.to_string())),
        };
        let own_key = camel_case(library);
        let own = match tree.get(&own_key) {
            Some(own) if !own.is_null() => own.clone(),
            _ => defaults.clone(),
        };
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

    /// The admin's host-claim policy: `base`'s `hostClaims` in the tree
    /// every library receives; no policy (every claim allowed) when `base`
    /// is disabled or has none. See [`crate::claims`].
    pub fn host_claims(
        &self,
    ) -> std::result::Result<crate::claims::HostClaims, crate::claims::PolicyError> {
        crate::claims::HostClaims::from_written(
            self.library("base").and_then(|base| base.get("hostClaims")),
        )
    }

    /// What the host says about the HAProxy its renders are validated with
    /// and served by ([`HaproxyFacts`]); all unknown (no QUIC) from a host
    /// that does not say.
    pub fn haproxy(&self) -> HaproxyFacts {
        self.tree
            .get(HAPROXY_FACTS_KEY)
            .and_then(|facts| serde_json::from_value(facts.clone()).ok())
            .unwrap_or_default()
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

/// The key of the host's facts in the values tree. It cannot name a
/// library: a camelCase library name never starts with `_`.
pub const HAPROXY_FACTS_KEY: &str = "_haproxy";

/// What the host knows of the HAProxy that validates and serves renders
/// (`haproxy -vv`), under [`HAPROXY_FACTS_KEY`] in the values tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaproxyFacts {
    /// `3.0.11-1+deb13u5`; empty when unknown.
    pub version: String,
    /// Built with QUIC (HTTP/3 listeners).
    pub quic: bool,
    /// QUIC through OpenSSL's compatibility layer: listeners need
    /// `limited-quic` in `global`.
    pub quic_openssl_compat: bool,
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

/// Deep-merges `over` into `base` as Helm and the host do: objects merge
/// key by key, a `null` removes the key, anything else replaces (lists
/// included).
pub fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                if value.is_null() {
                    base.remove(key);
                    continue;
                }
                match base.get_mut(key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        let mut fresh = Value::Null;
                        merge(&mut fresh, value);
                        base.insert(key.clone(), fresh);
                    }
                }
            }
        }
        (base, over) => {
            if over.is_object() {
                *base = Value::Object(Map::new());
                merge(base, over);
            } else {
                *base = over.clone();
            }
        }
    }
}

/// The tree as the host sends it: `library`'s subtree is its `defaults`
/// with the user's settings in `tree` merged over them ([`merge`]). For
/// tests that give only the settings a case changes.
pub fn as_the_host_sends(mut tree: Value, library: &str, defaults: &Value) -> Value {
    if let Value::Object(map) = &mut tree {
        let key = camel_case(library);
        let mut own = defaults.clone();
        if let Some(user) = map.get(&key) {
            merge(&mut own, user);
        }
        map.insert(key, own);
    }
    tree
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
    fn the_hosts_subtree_is_used_as_is_and_defaults_only_without_one() {
        let tree = json!({"kubernetesBackends": {"podReadinessGate": {"enabled": true}}, "ingress": {"x": 1}});
        let defaults =
            json!({"podReadinessGate": {"enabled": false, "other": 2}, "balance": "roundrobin"});
        let values = Values::new(tree, "kubernetes-backends", &defaults).unwrap();
        // The host merged defaults already; what it left out was removed.
        assert_eq!(
            values.own(),
            &json!({"podReadinessGate": {"enabled": true}})
        );
        let bare = Values::new(json!({}), "kubernetes-backends", &defaults).unwrap();
        assert_eq!(bare.own(), &defaults);
        assert_eq!(values.library("ingress"), Some(&json!({"x": 1})));
        assert!(values.library("base").is_none());
    }

    #[test]
    fn null_removes_a_default_as_in_helm() {
        let defaults = json!({"global": {"log": "stdout", "maxconn": 10}});
        let tree = as_the_host_sends(
            json!({"base": {"global": {"log": null}}}),
            "base",
            &defaults,
        );
        let values = Values::new(tree, "base", &defaults).unwrap();
        assert_eq!(values.own(), &json!({"global": {"maxconn": 10}}));
    }

    #[test]
    fn values_must_be_an_object() {
        assert!(matches!(
            Values::new(json!([1]), "base", &json!({})),
            Err(Error::ValuesNotObject(_))
        ));
    }
}

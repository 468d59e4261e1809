//! A container's environment, resolved the way kubelet does: `envFrom` first,
//! then `env` in order (later wins), `$(VAR)` references expanded against what
//! is defined so far, then `command`/`args` expanded against the result.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Container, EnvVar, Pod, Secret};
use kube::{Api, Client};

/// Errors resolving a container's environment; kubelet reports them as
/// `CreateContainerConfigError` and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A referenced ConfigMap or Secret does not exist and is not optional.
    #[error("{kind} \"{name}\" not found")]
    NotFound {
        /// `configmap` or `secret`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// A referenced key is missing and the reference is not optional.
    #[error("couldn't find key {key} in {kind} {namespace}/{name}")]
    MissingKey {
        /// `ConfigMap` or `Secret`.
        kind: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Its name.
        name: String,
        /// The key.
        key: String,
    },
    /// A `fieldRef` path this kubelet does not support.
    #[error(
        "unsupported fieldRef {0:?} (supported: metadata.name/namespace/uid/labels/annotations, spec.nodeName, spec.serviceAccountName, status.podIP(s), status.hostIP(s))"
    )]
    FieldPath(String),
    /// Reading a ConfigMap or Secret failed for another reason.
    #[error("reading {kind} {name}: {source}")]
    Api {
        /// `configmap` or `secret`.
        kind: &'static str,
        /// Its name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The addresses a `fieldRef` can name besides metadata.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Addresses {
    pub pod_ip: std::net::Ipv4Addr,
    pub host_ip: std::net::Ipv4Addr,
}

/// Resolves `metadata.*`, `spec.*` and `status.*` field paths (env and
/// downward API volumes share this).
pub(crate) fn field_ref(pod: &Pod, path: &str, addrs: Addresses) -> Result<String, Error> {
    let meta = &pod.metadata;
    let map_key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix("']"))
            .map(str::to_string)
    };
    let spec = pod.spec.as_ref();
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into()),
        "status.podIP" | "status.podIPs" => addrs.pod_ip.to_string(),
        "status.hostIP" | "status.hostIPs" => addrs.host_ip.to_string(),
        "metadata.labels" | "metadata.annotations" => {
            let map = if path == "metadata.labels" {
                &meta.labels
            } else {
                &meta.annotations
            };
            map.iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
        _ => {
            if let Some(k) = map_key("metadata.labels['") {
                meta.labels
                    .as_ref()
                    .and_then(|m| m.get(&k))
                    .cloned()
                    .unwrap_or_default()
            } else if let Some(k) = map_key("metadata.annotations['") {
                meta.annotations
                    .as_ref()
                    .and_then(|m| m.get(&k))
                    .cloned()
                    .unwrap_or_default()
            } else {
                return Err(Error::FieldPath(path.to_string()));
            }
        }
    })
}

async fn config_map(client: &Client, ns: &str, name: &str) -> Result<Option<ConfigMap>, Error> {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|source| Error::Api {
            kind: "configmap",
            name: name.to_string(),
            source,
        })
}

async fn secret(client: &Client, ns: &str, name: &str) -> Result<Option<Secret>, Error> {
    Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|source| Error::Api {
            kind: "secret",
            name: name.to_string(),
            source,
        })
}

/// All string values of a ConfigMap (data and UTF-8 binaryData).
pub(crate) fn config_map_values(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    for (k, v) in cm.binary_data.iter().flatten() {
        out.insert(k.clone(), v.0.clone());
    }
    out
}

/// All values of a Secret (data, then stringData as the apiserver would merge it).
pub(crate) fn secret_values(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

/// Fetches a ConfigMap's or Secret's values; `None` when it is missing and optional.
pub(crate) async fn object_values(
    client: &Client,
    ns: &str,
    secret_kind: bool,
    name: &str,
    optional: bool,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, Error> {
    let values = if secret_kind {
        secret(client, ns, name).await?.map(|s| secret_values(&s))
    } else {
        config_map(client, ns, name)
            .await?
            .map(|c| config_map_values(&c))
    };
    match values {
        Some(v) => Ok(Some(v)),
        None if optional => Ok(None),
        None => Err(Error::NotFound {
            kind: if secret_kind { "secret" } else { "configmap" },
            name: name.to_string(),
        }),
    }
}

/// The container's environment from its spec; `base` (runtime variables such
/// as HOSTNAME) comes first and the spec overrides it.
pub(crate) async fn resolve(
    client: &Client,
    pod: &Pod,
    container: &Container,
    addrs: Addresses,
    base: Vec<(String, String)>,
) -> Result<Vec<(String, String)>, Error> {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut env: Vec<(String, String)> = base;
    let set = |env: &mut Vec<(String, String)>, k: String, v: String| {
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    };
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (is_secret, name, optional) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(c), _) => (false, c.name.clone(), c.optional.unwrap_or(false)),
            (None, Some(s)) => (true, s.name.clone(), s.optional.unwrap_or(false)),
            (None, None) => continue,
        };
        if let Some(values) = object_values(client, &ns, is_secret, &name, optional).await? {
            for (k, v) in values {
                set(
                    &mut env,
                    format!("{prefix}{k}"),
                    String::from_utf8_lossy(&v).into_owned(),
                );
            }
        }
    }
    for var in container.env.iter().flatten() {
        if let Some(value) = env_value(client, pod, &ns, var, addrs, &env).await? {
            set(&mut env, var.name.clone(), value);
        }
    }
    Ok(env)
}

async fn env_value(
    client: &Client,
    pod: &Pod,
    ns: &str,
    var: &EnvVar,
    addrs: Addresses,
    so_far: &[(String, String)],
) -> Result<Option<String>, Error> {
    let Some(from) = &var.value_from else {
        return Ok(Some(expand(
            var.value.as_deref().unwrap_or_default(),
            so_far,
        )));
    };
    if let Some(f) = &from.field_ref {
        return field_ref(pod, &f.field_path, addrs).map(Some);
    }
    let (is_secret, name, key, optional) = match (&from.config_map_key_ref, &from.secret_key_ref) {
        (Some(c), _) => (false, &c.name, &c.key, c.optional.unwrap_or(false)),
        (None, Some(s)) => (true, &s.name, &s.key, s.optional.unwrap_or(false)),
        // resourceFieldRef: no resources are accounted here; kubelet would give the limits.
        _ => return Ok(Some(String::new())),
    };
    let Some(values) = object_values(client, ns, is_secret, name, optional).await? else {
        return Ok(None);
    };
    match values.get(key) {
        Some(v) => Ok(Some(String::from_utf8_lossy(v).into_owned())),
        None if optional => Ok(None),
        None => Err(Error::MissingKey {
            kind: if is_secret { "Secret" } else { "ConfigMap" },
            namespace: ns.to_string(),
            name: name.clone(),
            key: key.clone(),
        }),
    }
}

/// Kubernetes' `$(VAR)` expansion: defined variables are replaced, `$$` is a
/// literal `$`, undefined references stay as written.
pub(crate) fn expand(input: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match env.iter().rev().find(|(k, _)| k == name) {
                        Some((_, v)) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Vec<(String, String)> {
        vec![("A".into(), "1".into()), ("B".into(), "two".into())]
    }

    #[test]
    fn expands_defined_references_and_keeps_the_rest() {
        assert_eq!(expand("$(A)-$(B)", &env()), "1-two");
        assert_eq!(expand("$(C) $$(A) $x", &env()), "$(C) $(A) $x");
        assert_eq!(expand("tail $(", &env()), "tail $(");
    }

    #[test]
    fn resolves_field_paths_like_the_downward_api() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "labels": {"app": "web"}},
            "spec": {"containers": []},
        }))
        .unwrap();
        let addrs = Addresses {
            pod_ip: "10.244.0.9".parse().unwrap(),
            host_ip: "10.244.0.1".parse().unwrap(),
        };
        assert_eq!(field_ref(&pod, "metadata.name", addrs).unwrap(), "p");
        assert_eq!(
            field_ref(&pod, "status.podIP", addrs).unwrap(),
            "10.244.0.9"
        );
        assert_eq!(
            field_ref(&pod, "metadata.labels['app']", addrs).unwrap(),
            "web"
        );
        assert!(field_ref(&pod, "spec.bogus", addrs).is_err());
    }
}

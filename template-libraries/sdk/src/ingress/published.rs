//! Where served Ingresses say they are reached: the `status.loadBalancer`
//! a library writes on each Ingress it serves (clients, `kubectl get
//! ingress`, external-dns and conformance suites read it).
//!
//! Two sources, as other controllers offer them: a fixed address from the
//! values (`publishedAddress`), or the address of a Service
//! (`publishedService: namespace/name`, normally HAProxy's own, which the
//! chart fills in). The fixed address wins when both are set. A Service's
//! address is what the cluster gave it: its load-balancer ingress, else its
//! external IPs, else its cluster IP for a `ClusterIP` Service. A
//! `LoadBalancer` Service still waiting for its address publishes nothing
//! yet: a wrong address would be worse than none.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::k8s::api::core::v1::Service;
use crate::{Context, ObjectKey, Output, Plan, Result, StatusVariant, Values, Watch};

/// `publishedAddress`: empty fields are left out; both empty is no address.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PublishedAddress {
    pub ip: String,
    pub hostname: String,
}

impl PublishedAddress {
    /// Whether neither field is set.
    pub fn is_empty(&self) -> bool {
        self.ip.is_empty() && self.hostname.is_empty()
    }

    fn entry(&self) -> Value {
        let mut entry = Map::new();
        if !self.ip.is_empty() {
            entry.insert("ip".into(), self.ip.clone().into());
        }
        if !self.hostname.is_empty() {
            entry.insert("hostname".into(), self.hostname.clone().into());
        }
        Value::Object(entry)
    }
}

/// What a library publishes, from its values (`publishedAddress`,
/// `publishedService`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Publishing {
    address: PublishedAddress,
    /// `(namespace, name)` of the Service whose address is published.
    service: Option<(String, String)>,
}

impl Publishing {
    /// From the values; `service` is `namespace/name` or empty.
    ///
    /// # Errors
    /// A `service` that is not `namespace/name`, naming the key.
    pub fn new(address: PublishedAddress, service: &str) -> Result<Self> {
        let service = match service.trim() {
            "" => None,
            text => match text.split_once('/') {
                Some((namespace, name))
                    if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
                {
                    Some((namespace.to_owned(), name.to_owned()))
                }
                _ => {
                    return Err(crate::Error::msg(format!(
                        "publishedService {text:?} is not namespace/name (the Service whose \
                         address served Ingresses publish, e.g. haptic/haptic-haproxy)"
                    )));
                }
            },
        };
        Ok(Self { address, service })
    }

    /// The `ingress` library's publishing (its `publishedAddress` and
    /// `publishedService`), for another library serving Ingresses that
    /// publishes haptic's one address when its values name none; nothing
    /// when `ingress` is disabled.
    ///
    /// # Errors
    /// As [`new`](Self::new), for `ingress`'s `publishedService`.
    pub fn of_ingress_library(values: &Values) -> Result<Self> {
        let Some(tree) = values.library("ingress") else {
            return Ok(Self::default());
        };
        let address = tree
            .get("publishedAddress")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        let service = tree
            .get("publishedService")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Self::new(address, service)
    }

    /// Whether anything is published (then the library patches the status
    /// of the kind it serves).
    pub fn is_on(&self) -> bool {
        !self.address.is_empty() || self.service.is_some()
    }

    /// Adds the watch of the published Service (only that one object: a
    /// field selector on its name, in its namespace) to `plan`, under
    /// `watch_name`; a fixed address needs no watch.
    #[must_use]
    pub fn watch(&self, plan: Plan, watch_name: &str) -> Plan {
        match (&self.service, self.address.is_empty()) {
            (Some((namespace, name)), true) => plan.watch(
                Watch::new(watch_name, "v1", "Service")
                    .parse_as::<Service>()
                    .namespace(namespace.clone())
                    .field_selector(format!("metadata.name={name}")),
            ),
            _ => plan,
        }
    }

    /// The status to patch on each served object, `{"loadBalancer":
    /// {"ingress": [...]}}`, or `None` while there is no address yet.
    ///
    /// # Errors
    /// When `watch_name` was not planned by [`watch`](Self::watch).
    pub fn status(&self, ctx: &Context<'_>, watch_name: &str) -> Result<Option<Value>> {
        if !self.address.is_empty() {
            return Ok(Some(load_balancer(vec![self.address.entry()])));
        }
        let Some((namespace, name)) = &self.service else {
            return Ok(None);
        };
        let service = ctx.get::<Service>(watch_name, namespace, name)?;
        Ok(service
            .map(|s| service_addresses(&s))
            .filter(|entries| !entries.is_empty())
            .map(load_balancer))
    }
}

/// Writes `status` (from [`Publishing::status`]) on the Ingress `ingress`, a
/// `deployed`-variant patch: written once the configuration serving it is.
///
/// # Errors
/// As [`Output::status_patch`].
pub fn patch_ingress(out: &mut Output, ingress: &ObjectKey, status: &Value) -> Result<()> {
    out.status_patch(
        StatusVariant::Deployed,
        "networking.k8s.io/v1",
        "Ingress",
        &ingress.namespace,
        &ingress.name,
        status,
    )
}

fn load_balancer(entries: Vec<Value>) -> Value {
    json!({ "loadBalancer": { "ingress": entries } })
}

/// A Service's addresses as `status.loadBalancer.ingress` entries.
fn service_addresses(service: &Service) -> Vec<Value> {
    let from_load_balancer: Vec<Value> = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .map(|i| PublishedAddress {
            ip: i.ip.clone().unwrap_or_default(),
            hostname: i.hostname.clone().unwrap_or_default(),
        })
        .filter(|a| !a.is_empty())
        .map(|a| a.entry())
        .collect();
    if !from_load_balancer.is_empty() {
        return from_load_balancer;
    }
    let spec = service.spec.as_ref();
    let ip_entries = |ips: Vec<String>| -> Vec<Value> {
        ips.into_iter()
            .filter(|ip| !ip.is_empty() && ip != "None")
            .map(|ip| json!({ "ip": ip }))
            .collect()
    };
    let external = ip_entries(
        spec.and_then(|s| s.external_ips.clone())
            .unwrap_or_default(),
    );
    if !external.is_empty() {
        return external;
    }
    match spec.and_then(|s| s.type_.as_deref()).unwrap_or("ClusterIP") {
        "ClusterIP" => ip_entries(
            spec.and_then(|s| s.cluster_ip.clone())
                .into_iter()
                .collect(),
        ),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(value: Value) -> Service {
        serde_json::from_value(value).expect("service")
    }

    #[test]
    fn a_service_publishes_what_the_cluster_gave_it() {
        let lb = service(json!({
            "metadata": {"name": "h", "namespace": "n"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.5"},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}, {"hostname": "lb.example"}]}}
        }));
        assert_eq!(
            service_addresses(&lb),
            [
                json!({"ip": "192.0.2.7"}),
                json!({"hostname": "lb.example"})
            ]
        );
        let pending = service(json!({
            "metadata": {"name": "h", "namespace": "n"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.5"}
        }));
        assert!(
            service_addresses(&pending).is_empty(),
            "no address yet, not the cluster IP"
        );
        let external = service(json!({
            "metadata": {"name": "h", "namespace": "n"},
            "spec": {"type": "NodePort", "clusterIP": "10.0.0.5", "externalIPs": ["198.51.100.1"]}
        }));
        assert_eq!(
            service_addresses(&external),
            [json!({"ip": "198.51.100.1"})]
        );
        let cluster = service(json!({
            "metadata": {"name": "h", "namespace": "n"},
            "spec": {"clusterIP": "10.0.0.5"}
        }));
        assert_eq!(service_addresses(&cluster), [json!({"ip": "10.0.0.5"})]);
        let headless = service(json!({
            "metadata": {"name": "h", "namespace": "n"},
            "spec": {"clusterIP": "None"}
        }));
        assert!(service_addresses(&headless).is_empty());
    }

    #[test]
    fn the_service_must_be_namespace_slash_name() {
        for bad in ["haptic", "/x", "x/", "a/b/c"] {
            let error = Publishing::new(PublishedAddress::default(), bad).expect_err(bad);
            assert!(error.to_string().contains("namespace/name"), "{error}");
        }
        let on = Publishing::new(PublishedAddress::default(), "haptic/haptic-haproxy").expect("ok");
        assert!(on.is_on());
        assert!(
            !Publishing::new(PublishedAddress::default(), "")
                .expect("ok")
                .is_on()
        );
    }
}

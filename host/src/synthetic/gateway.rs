//! The Gateway API at the size issue 21 names, over a [`Cluster`]'s
//! Services: one GatewayClass, [`GatewaySpec::gateways`] Gateways (one HTTP
//! listener each, on a port of its own), [`GatewaySpec::routes`] HTTPRoutes
//! (two matches, a header filter and a backend in another namespace each)
//! and the ReferenceGrants those backends need. Deterministic, as the
//! cluster is: the render bench and the served-on-every-instance bench
//! measure the same objects.

use serde_json::{Value, json};
use std::collections::BTreeSet;

use super::{Cluster, SyntheticError};

/// The namespace every Gateway lives in.
pub const GATEWAY_NAMESPACE: &str = "gateways";

/// Gateway `i` listens on `FIRST_LISTENER_PORT + i`: its own port even where
/// HAProxy binds listener ports as they are (`haptic run`).
pub const FIRST_LISTENER_PORT: usize = 20_000;

/// How many Gateways and HTTPRoutes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewaySpec {
    pub gateways: usize,
    pub routes: usize,
}

impl GatewaySpec {
    /// 1,000 HTTPRoutes over 50 Gateways.
    pub fn benchmark() -> Self {
        Self {
            gateways: 50,
            routes: 1_000,
        }
    }
}

/// The Gateway API objects of one synthetic cluster.
#[derive(Debug, Clone)]
pub struct GatewayObjects {
    spec: GatewaySpec,
    /// (namespace, name, port) of every Service of the cluster.
    services: Vec<(String, String, i64)>,
    /// The namespaces of those Services, sorted.
    namespaces: Vec<String>,
}

impl GatewayObjects {
    /// Routes to the Services of `cluster`, in turn.
    pub fn generate(cluster: &Cluster, spec: GatewaySpec) -> Result<Self, SyntheticError> {
        let services: Vec<(String, String, i64)> = cluster
            .objects()
            .filter(|o| o["kind"] == "Service")
            .filter_map(|o| {
                Some((
                    o["metadata"]["namespace"].as_str()?.to_owned(),
                    o["metadata"]["name"].as_str()?.to_owned(),
                    o["spec"]["ports"][0]["port"].as_i64()?,
                ))
            })
            .collect();
        if services.is_empty() {
            return Err(SyntheticError::NoServices);
        }
        let namespaces: BTreeSet<String> = services.iter().map(|(ns, _, _)| ns.clone()).collect();
        Ok(Self {
            spec,
            services,
            namespaces: namespaces.into_iter().collect(),
        })
    }

    pub fn spec(&self) -> GatewaySpec {
        self.spec
    }

    /// The class, the Gateways' namespace, the Gateways, the grants, then
    /// every route at version 0.
    pub fn objects(&self) -> Vec<Value> {
        let mut objects = vec![
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                "metadata": {"name": "haptic", "resourceVersion": "9000000"},
                "spec": {"controllerName": "haproxy-haptic.org/gateway-controller"}}),
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": GATEWAY_NAMESPACE, "resourceVersion": "9000001"}}),
        ];
        for index in 0..self.spec.gateways {
            objects.push(
                json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": gateway_name(index), "namespace": GATEWAY_NAMESPACE,
                    "resourceVersion": format!("{}", 9_100_000 + index)},
                "spec": {"gatewayClassName": "haptic", "listeners": [
                    {"name": "http", "port": FIRST_LISTENER_PORT + index, "protocol": "HTTP",
                     "allowedRoutes": {"namespaces": {"from": "All"}}}]}}),
            );
        }
        // A route's backend is in another namespace than the route: one
        // grant per namespace, from HTTPRoutes of every namespace used.
        let from: Vec<Value> = self
            .namespaces
            .iter()
            .map(|ns| json!({"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": ns}))
            .collect();
        for (index, namespace) in self.namespaces.iter().enumerate() {
            objects.push(
                json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ReferenceGrant",
                "metadata": {"name": "routes", "namespace": namespace,
                    "resourceVersion": format!("{}", 9_200_000 + index)},
                "spec": {"from": from, "to": [{"group": "", "kind": "Service"}]}}),
            );
        }
        objects.extend((0..self.spec.routes).map(|index| self.route(index, 0)));
        objects
    }

    /// HTTPRoute `index` at `version`: its path prefix is `/v<version>/app`,
    /// so each version is a change a bundle can be searched for.
    pub fn route(&self, index: usize, version: usize) -> Value {
        let (namespace, service, port) = &self.services[index % self.services.len()];
        // The route lives in the namespace after its Service's: a
        // cross-namespace reference for every route (unless the cluster has
        // one namespace).
        let at = self.namespaces.binary_search(namespace).unwrap_or(0);
        let route_namespace = &self.namespaces[(at + 1) % self.namespaces.len()];
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": format!("route-{index}"), "namespace": route_namespace,
                "resourceVersion": format!("{}", 10_000_000 + index * 1_000 + version)},
            "spec": {
                "parentRefs": [{"name": gateway_name(index % self.spec.gateways), "namespace": GATEWAY_NAMESPACE}],
                "hostnames": [format!("r{index}.example.com")],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": Self::path_prefix(version)}},
                                {"path": {"type": "Exact", "value": "/healthz"}, "headers": [{"name": "x-probe", "value": "1"}]}],
                    "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-route", "value": format!("route-{index}")}]}}],
                    "backendRefs": [{"name": service, "namespace": namespace, "port": port}]
                }]
            }
        })
    }

    /// The path prefix of a route at `version`.
    pub fn path_prefix(version: usize) -> String {
        format!("/v{version}/app")
    }
}

fn gateway_name(index: usize) -> String {
    format!("gw-{index}")
}

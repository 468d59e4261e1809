//! A Gateway of one of our classes as the render sees it, and what it
//! publishes: its status and the EndpointSlice behind its Service.

use haptic_sdk::Entry;
use serde_json::{Value, json};

use crate::api::Gateway;
use crate::conditions::Condition;
use crate::listeners::CheckedListener;
use crate::parameters::ClassParameters;
use crate::{api, conditions};

/// A Gateway of one of our classes, with its checked listeners.
pub(crate) struct GatewayModel<'a> {
    pub(crate) entry: Entry<'a, Gateway>,
    pub(crate) listeners: Vec<CheckedListener>,
    /// Its class's parameters.
    pub(crate) parameters: ClassParameters,
    /// Some served listener got no HAProxy port ([`ports::mark_unassigned`]).
    pub(crate) no_port: bool,
}

impl GatewayModel<'_> {
    pub(crate) fn key(&self) -> (&str, &str) {
        (&self.entry.key.namespace, &self.entry.key.name)
    }
}

/// The EndpointSlice behind a selectorless Gateway Service: one endpoint
/// per HAProxy pod with an IP (ready when the pod is Ready and not being
/// deleted), each Service port by name at the HAProxy port it targets.
pub(crate) fn haproxy_endpoints(
    service: &str,
    service_ports: &[Value],
    pods: &[api::HaproxyPod],
) -> Value {
    let ports: Vec<Value> = service_ports
        .iter()
        .map(|p| json!({"name": p["name"], "port": p["targetPort"], "protocol": p["protocol"]}))
        .collect();
    let mut endpoints: Vec<(String, Value)> = pods
        .iter()
        .filter_map(|pod| {
            let ip = pod.status.pod_ip.as_deref().filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok())?;
            let ready = pod.is_ready();
            Some((
                pod.metadata.name.clone(),
                json!({
                    "addresses": [ip],
                    "conditions": {"ready": ready, "serving": ready, "terminating": pod.metadata.deletion_timestamp.is_some()},
                    "targetRef": {"kind": "Pod", "name": pod.metadata.name},
                }),
            ))
        })
        .collect();
    endpoints.sort_by(|a, b| a.0.cmp(&b.0));
    json!({
        "metadata": {"labels": {
            "kubernetes.io/service-name": service,
            "endpointslice.kubernetes.io/managed-by": "gateway-api.haproxy-haptic.org",
        }},
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": endpoints.into_iter().map(|(_, e)| e).collect::<Vec<_>>(),
    })
}

/// The status of a Gateway whose class refused its parameters: not
/// accepted, nothing programmed, no listener served.
pub(crate) fn rejected_class_status(gateway: &Entry<'_, Gateway>, why: &str) -> Value {
    let class = &gateway.spec.gateway_class_name;
    let accepted = Condition::new(
        "Accepted",
        false,
        "InvalidParameters",
        format!("GatewayClass {class} is not accepted: {why}"),
    );
    let programmed = Condition::new(
        "Programmed",
        false,
        "Invalid",
        format!("GatewayClass {class} is not accepted, so the Gateway is not served"),
    );
    json!({
        "addresses": [],
        "conditions": conditions::list(&[accepted, programmed], gateway.metadata.generation),
        "listeners": [],
    })
}

pub(crate) fn gateway_status(g: &GatewayModel<'_>, addresses: &[Value]) -> Value {
    let generation = g.entry.metadata.generation;
    let valid = g.listeners.iter().filter(|l| l.valid).count();
    // Accepted while some listener is (one whose certificate is not there
    // yet still is); the reason says when some are not served.
    let accepted_listeners = g.listeners.iter().filter(|l| l.accepted).count();
    let accepted = if g.listeners.is_empty() || valid == g.listeners.len() {
        Condition::new("Accepted", true, "Accepted", "the Gateway is accepted")
    } else if accepted_listeners > 0 {
        Condition::new(
            "Accepted",
            true,
            "ListenersNotValid",
            "some listeners are not valid (see their conditions)",
        )
    } else {
        Condition::new(
            "Accepted",
            false,
            "ListenersNotValid",
            "no listener is valid (see their conditions)",
        )
    };
    let programmed = if g.no_port {
        Condition::new(
            "Programmed",
            false,
            "NoResources",
            "some listeners got no HAProxy port (see their conditions)",
        )
    } else if valid == 0 {
        Condition::new("Programmed", false, "Invalid", "no listener is valid")
    } else if addresses.is_empty() {
        Condition::new(
            "Programmed",
            false,
            "AddressNotAssigned",
            "the Gateway's Service has no load balancer address yet",
        )
    } else {
        Condition::new(
            "Programmed",
            true,
            "Programmed",
            "every HAProxy pod serves the Gateway",
        )
    };
    let listeners: Vec<Value> = g
        .listeners
        .iter()
        .map(|l| {
            json!({
                "name": l.name,
                "supportedKinds": l.supported_kinds,
                "attachedRoutes": l.attached_routes,
                "conditions": conditions::list(&l.conditions, generation),
            })
        })
        .collect();
    json!({
        "addresses": addresses,
        "conditions": conditions::list(&[accepted, programmed], generation),
        "listeners": listeners,
    })
}

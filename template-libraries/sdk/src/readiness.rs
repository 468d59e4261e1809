//! Endpoint routability and the pod readiness gate
//! `haproxy-haptic.org/load-balancer-ready`, shared by `kubernetes-backends`
//! (which renders the servers) and `status-patches-150-pod-readiness-gate`
//! (which sets the condition on the pods those servers route to), so both
//! apply one rule.
//!
//! The rule: an endpoint is routed when it is ready and not terminating.
//! With the gate enabled, a *not-ready*, not-terminating endpoint is also
//! routed when its pod lists the gate under `spec.readinessGates`, reports
//! `ContainersReady=True` and is not being deleted. Such a pod cannot be
//! Ready before HAProxy routes to it (its gate is unset), so without this
//! exception the gate would wait for routing and routing for Ready.
//!
//! A slice's servers exist only for a Service port the slice serves: same
//! port name (unnamed matches unnamed), TCP, and an IP address type.

pub use crate::slim::{GATE_CONDITION, GatePod, POD_IGNORE_FIELDS, SERVICE_NAME_LABEL};
use crate::slim::{ServicePort, ServicePorts, Slice, SliceEndpoint};

/// The status the gate library applies to a routed gated pod: the gate's
/// condition, `True`. One definition, so the library and the render
/// benchmark's floor (`render-floor`) answer the same patch.
pub fn gate_status() -> serde_json::Value {
    serde_json::json!({
        "conditions": [{
            "type": GATE_CONDITION,
            "status": "True",
            "reason": "RoutedByLoadBalancer",
            "message": "Every HAProxy pod runs a configuration that routes to this pod"
        }]
    })
}

/// `conditions.ready`, where unknown (nil) means ready.
pub fn is_ready(endpoint: &SliceEndpoint) -> bool {
    endpoint.conditions.ready.unwrap_or(true)
}

/// `conditions.terminating`, where unknown (nil) means not terminating.
pub fn is_terminating(endpoint: &SliceEndpoint) -> bool {
    endpoint.conditions.terminating.unwrap_or(false)
}

/// The pod an endpoint points at, as `(namespace, name)`: only a pod of
/// the slice's own namespace (a `targetRef` naming another namespace is
/// ignored, see the module docs).
pub fn endpoint_pod<'a>(
    slice_namespace: &'a str,
    endpoint: &'a SliceEndpoint,
) -> Option<(&'a str, &'a str)> {
    let target = endpoint.target_ref.as_ref()?;
    if target.kind.as_deref() != Some("Pod") {
        return None;
    }
    if target
        .namespace
        .as_deref()
        .is_some_and(|ns| ns != slice_namespace)
    {
        return None;
    }
    let name = target.name.as_deref()?;
    Some((slice_namespace, name))
}

/// Whether the endpoint's state depends on its pod: only a not-ready,
/// not-terminating endpoint can be routed by the gate.
pub fn depends_on_pod(endpoint: &SliceEndpoint) -> bool {
    !is_ready(endpoint) && !is_terminating(endpoint)
}

/// Whether HAProxy should send traffic to this endpoint (see the module
/// docs). `pod` is the endpoint's pod when the gate is enabled and the pod
/// is known; pass `None` with the gate disabled. The gate routes a
/// not-ready endpoint only when its first address (the one HAProxy
/// routes to) is the pod's own.
pub fn is_routed(endpoint: &SliceEndpoint, pod: Option<&GatePod>) -> bool {
    if is_terminating(endpoint) {
        return false;
    }
    is_ready(endpoint)
        || pod.is_some_and(|pod| {
            pod.passes_gate()
                && endpoint
                    .addresses
                    .first()
                    .is_some_and(|address| pod.has_address(address))
        })
}

/// The Service an EndpointSlice belongs to (its `kubernetes.io/service-name` label).
pub fn slice_service(slice: &Slice) -> Option<&str> {
    slice.metadata.labels.service_name.as_deref()
}

/// The target port of `service_port` in `slice`: the slice port with the
/// same name, TCP only. `None` when the slice does not serve that port or
/// holds no IP addresses (FQDN slices).
pub fn slice_port(service_port: &ServicePort, slice: &Slice) -> Option<i32> {
    if !is_tcp(service_port.protocol.as_deref())
        || !matches!(slice.address_type.as_str(), "IPv4" | "IPv6")
    {
        return None;
    }
    let name = service_port.name.as_deref().unwrap_or("");
    slice.ports.iter().find_map(|p| {
        let matches = p.name.as_deref().unwrap_or("") == name && is_tcp(p.protocol.as_deref());
        if matches { p.port } else { None }
    })
}

/// Whether `kubernetes-backends` renders servers from `slice` for
/// `service`: some TCP port of the Service has a matching slice port.
pub fn slice_is_rendered(service: &ServicePorts, slice: &Slice) -> bool {
    service
        .spec
        .ports
        .iter()
        .any(|p| slice_port(p, slice).is_some())
}

/// A missing protocol means TCP.
pub fn is_tcp(protocol: Option<&str>) -> bool {
    protocol.is_none_or(|p| p == "TCP")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn endpoint(ready: Option<bool>, terminating: Option<bool>) -> SliceEndpoint {
        serde_json::from_value(json!({
            "addresses": ["10.0.0.1"],
            "conditions": {"ready": ready, "terminating": terminating},
            "targetRef": {"kind": "Pod", "name": "web-1"}
        }))
        .unwrap()
    }

    fn pod(gated: bool, containers_ready: &str, deleting: bool) -> GatePod {
        let gates = if gated {
            json!([{"conditionType": GATE_CONDITION}])
        } else {
            json!([{"conditionType": "other"}])
        };
        let deletion = if deleting {
            json!("2026-01-01T00:00:00Z")
        } else {
            json!(null)
        };
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "default", "deletionTimestamp": deletion},
            "spec": {"readinessGates": gates},
            "status": {"podIP": "10.0.0.1", "conditions": [{"type": "ContainersReady", "status": containers_ready}, {"type": "Ready", "status": "False"}]}
        }))
        .unwrap()
    }

    #[test]
    fn ready_endpoints_are_routed_and_terminating_ones_never() {
        assert!(is_routed(&endpoint(Some(true), Some(false)), None));
        assert!(
            is_routed(&endpoint(None, None), None),
            "unknown means ready"
        );
        assert!(!is_routed(&endpoint(Some(false), Some(false)), None));
        assert!(!is_routed(
            &endpoint(Some(false), Some(true)),
            Some(&pod(true, "True", false))
        ));
        assert!(!is_routed(&endpoint(Some(true), Some(true)), None));
    }

    #[test]
    fn the_gate_routes_a_not_ready_endpoint_only_with_containers_ready() {
        let not_ready = endpoint(Some(false), Some(false));
        assert!(depends_on_pod(&not_ready));
        assert!(is_routed(&not_ready, Some(&pod(true, "True", false))));
        assert!(!is_routed(&not_ready, Some(&pod(true, "False", false))));
        assert!(
            !is_routed(&not_ready, Some(&pod(false, "True", false))),
            "ungated pod"
        );
        assert!(
            !is_routed(&not_ready, Some(&pod(true, "True", true))),
            "pod being deleted"
        );
    }

    /// Tenant isolation (issue 40): before, `endpoint_pod` took the
    /// `targetRef` namespace as written, so a slice of namespace `attacker`
    /// naming `victim/web-1` counted for that pod, and any address did.
    /// Broken on purpose (both checks removed), this test failed on both
    /// assertions.
    #[test]
    fn an_endpoint_counts_for_a_pod_of_its_own_namespace_at_the_pods_address() {
        let foreign: SliceEndpoint = serde_json::from_value(json!({
            "addresses": ["10.0.0.1"], "conditions": {"ready": false},
            "targetRef": {"kind": "Pod", "namespace": "victim", "name": "web-1"}
        }))
        .unwrap();
        assert_eq!(endpoint_pod("attacker", &foreign), None);
        assert_eq!(endpoint_pod("victim", &foreign), Some(("victim", "web-1")));
        let elsewhere: SliceEndpoint = serde_json::from_value(json!({
            "addresses": ["10.9.9.9"], "conditions": {"ready": false},
            "targetRef": {"kind": "Pod", "name": "web-1"}
        }))
        .unwrap();
        assert!(!is_routed(&elsewhere, Some(&pod(true, "True", false))));
        assert!(is_routed(
            &endpoint(Some(false), Some(false)),
            Some(&pod(true, "True", false))
        ));
    }

    #[test]
    fn slice_ports_join_service_ports_by_name_over_tcp() {
        let slice: Slice = serde_json::from_value(json!({
            "metadata": {"name": "s"}, "addressType": "IPv4", "endpoints": [],
            "ports": [{"name": "http", "port": 8080}, {"name": "dns", "port": 53, "protocol": "UDP"}]
        }))
        .unwrap();
        let port = |v: serde_json::Value| -> ServicePort { serde_json::from_value(v).unwrap() };
        assert_eq!(
            slice_port(&port(json!({"name": "http", "port": 80})), &slice),
            Some(8080)
        );
        assert_eq!(
            slice_port(&port(json!({"port": 80})), &slice),
            None,
            "unnamed does not match named"
        );
        assert_eq!(
            slice_port(
                &port(json!({"name": "dns", "port": 53, "protocol": "UDP"})),
                &slice
            ),
            None
        );
        let service: ServicePorts =
            serde_json::from_value(json!({"spec": {"ports": [{"name": "http", "port": 80}]}}))
                .unwrap();
        assert!(slice_is_rendered(&service, &slice));
        let fqdn = Slice {
            address_type: "FQDN".into(),
            ..slice
        };
        assert!(!slice_is_rendered(&service, &fqdn));
    }

    #[test]
    fn a_trimmed_pod_deserializes() {
        let pod: GatePod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert!(!pod.is_gated());
        assert_eq!(
            endpoint_pod("ns", &endpoint(None, None)),
            Some(("ns", "web-1"))
        );
    }
}

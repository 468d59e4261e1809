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

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use serde::Deserialize;

/// The condition type of the readiness gate.
pub const GATE_CONDITION: &str = "haproxy-haptic.org/load-balancer-ready";

/// The label joining an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What the host drops from Pods before they reach a library: everything
/// but metadata identity, `spec.readinessGates` and `status.conditions`.
/// Pods are the biggest and busiest kind a library can watch.
pub const POD_IGNORE_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.ownerReferences",
    "metadata.finalizers",
    "metadata.generateName",
    "spec.activeDeadlineSeconds",
    "spec.affinity",
    "spec.automountServiceAccountToken",
    "spec.containers",
    "spec.dnsConfig",
    "spec.dnsPolicy",
    "spec.enableServiceLinks",
    "spec.ephemeralContainers",
    "spec.hostAliases",
    "spec.hostIPC",
    "spec.hostNetwork",
    "spec.hostPID",
    "spec.hostUsers",
    "spec.hostname",
    "spec.imagePullSecrets",
    "spec.initContainers",
    "spec.nodeName",
    "spec.nodeSelector",
    "spec.os",
    "spec.overhead",
    "spec.preemptionPolicy",
    "spec.priority",
    "spec.priorityClassName",
    "spec.resourceClaims",
    "spec.resources",
    "spec.restartPolicy",
    "spec.runtimeClassName",
    "spec.schedulerName",
    "spec.schedulingGates",
    "spec.securityContext",
    "spec.serviceAccount",
    "spec.serviceAccountName",
    "spec.setHostnameAsFQDN",
    "spec.shareProcessNamespace",
    "spec.subdomain",
    "spec.terminationGracePeriodSeconds",
    "spec.tolerations",
    "spec.topologySpreadConstraints",
    "spec.volumes",
    "status.containerStatuses",
    "status.ephemeralContainerStatuses",
    "status.hostIP",
    "status.hostIPs",
    "status.initContainerStatuses",
    "status.message",
    "status.nominatedNodeName",
    "status.observedGeneration",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.qosClass",
    "status.reason",
    "status.resize",
    "status.resourceClaimStatuses",
    "status.startTime",
];

/// A Pod as it arrives trimmed by [`POD_IGNORE_FIELDS`]. A full k8s-openapi
/// `Pod` would not deserialize without `spec.containers`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct GatePod {
    pub metadata: PodMetadata,
    pub spec: PodSpec,
    pub status: PodStatus,
}

/// The parts of a Pod's metadata the gate needs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodMetadata {
    pub name: String,
    pub namespace: String,
    pub deletion_timestamp: Option<String>,
}

/// `spec.readinessGates`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    pub readiness_gates: Vec<ReadinessGate>,
}

/// One entry of `spec.readinessGates`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReadinessGate {
    pub condition_type: String,
}

/// `status.conditions`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PodStatus {
    pub conditions: Vec<PodCondition>,
}

/// One pod condition.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

impl GatePod {
    /// Lists the gate under `spec.readinessGates`.
    pub fn is_gated(&self) -> bool {
        self.spec
            .readiness_gates
            .iter()
            .any(|g| g.condition_type == GATE_CONDITION)
    }

    /// The status of condition `type_` (`"True"`, `"False"`, `"Unknown"`).
    pub fn condition(&self, type_: &str) -> Option<&str> {
        self.status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.as_str())
    }

    /// Gated, containers ready, not being deleted: its endpoint may be
    /// routed before the endpoint is ready.
    pub fn passes_gate(&self) -> bool {
        self.is_gated()
            && self.condition("ContainersReady") == Some("True")
            && self.metadata.deletion_timestamp.is_none()
    }

    /// The gate condition is already True on the pod.
    pub fn gate_is_set(&self) -> bool {
        self.condition(GATE_CONDITION) == Some("True")
    }
}

/// `conditions.ready`, where unknown (nil) means ready.
pub fn is_ready(endpoint: &Endpoint) -> bool {
    endpoint
        .conditions
        .as_ref()
        .and_then(|c| c.ready)
        .unwrap_or(true)
}

/// `conditions.terminating`, where unknown (nil) means not terminating.
pub fn is_terminating(endpoint: &Endpoint) -> bool {
    endpoint
        .conditions
        .as_ref()
        .and_then(|c| c.terminating)
        .unwrap_or(false)
}

/// The pod an endpoint points at, as `(namespace, name)`.
pub fn endpoint_pod<'a>(
    slice_namespace: &'a str,
    endpoint: &'a Endpoint,
) -> Option<(&'a str, &'a str)> {
    let target = endpoint.target_ref.as_ref()?;
    if target.kind.as_deref() != Some("Pod") {
        return None;
    }
    let name = target.name.as_deref()?;
    Some((target.namespace.as_deref().unwrap_or(slice_namespace), name))
}

/// Whether HAProxy should send traffic to this endpoint (see the module
/// docs). `pod` is the endpoint's pod when the gate is enabled and the pod
/// is known; pass `None` with the gate disabled.
pub fn is_routed(endpoint: &Endpoint, pod: Option<&GatePod>) -> bool {
    if is_terminating(endpoint) {
        return false;
    }
    is_ready(endpoint) || pod.is_some_and(GatePod::passes_gate)
}

/// The Service an EndpointSlice belongs to (its `kubernetes.io/service-name` label).
pub fn slice_service(slice: &EndpointSlice) -> Option<&str> {
    slice
        .metadata
        .labels
        .as_ref()?
        .get(SERVICE_NAME_LABEL)
        .map(String::as_str)
}

/// The target port of `service_port` in `slice`: the slice port with the
/// same name (unnamed matches unnamed), TCP only. `None` when the slice
/// does not serve that port or holds no IP addresses (FQDN slices).
pub fn slice_port(service_port: &ServicePort, slice: &EndpointSlice) -> Option<i32> {
    if !is_tcp(service_port.protocol.as_deref())
        || !matches!(slice.address_type.as_str(), "IPv4" | "IPv6")
    {
        return None;
    }
    let name = service_port.name.as_deref().unwrap_or("");
    slice.ports.iter().flatten().find_map(|p| {
        let matches = p.name.as_deref().unwrap_or("") == name && is_tcp(p.protocol.as_deref());
        if matches { p.port } else { None }
    })
}

/// Whether `kubernetes-backends` renders servers from `slice` for
/// `service`: some TCP port of the Service has a matching slice port.
pub fn slice_is_rendered(service: &Service, slice: &EndpointSlice) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|ports| ports.iter().any(|p| slice_port(p, slice).is_some()))
}

/// A missing protocol means TCP.
fn is_tcp(protocol: Option<&str>) -> bool {
    protocol.is_none_or(|p| p == "TCP")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn endpoint(ready: Option<bool>, terminating: Option<bool>) -> Endpoint {
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
            "status": {"conditions": [{"type": "ContainersReady", "status": containers_ready}, {"type": "Ready", "status": "False"}]}
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

    #[test]
    fn slice_ports_join_service_ports_by_name_over_tcp() {
        let slice: EndpointSlice = serde_json::from_value(json!({
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
        let service: Service =
            serde_json::from_value(json!({"spec": {"ports": [{"name": "http", "port": 80}]}}))
                .unwrap();
        assert!(slice_is_rendered(&service, &slice));
        let fqdn = EndpointSlice {
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

//! Slim Kubernetes types for the watches that dominate render cost (Pods,
//! EndpointSlices, Services): only the fields the bundled libraries read,
//! so parsing allocates little, plus the `ignore-fields` that keep the
//! host from sending the rest. A full k8s-openapi `Pod` would not even
//! deserialize once trimmed (`spec.containers` is required there).
//!
//! Lists that arrive as `null` read as empty.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer};

/// `null` (or absent, with `#[serde(default)]`) reads as the default.
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The condition type of the pod readiness gate.
pub const GATE_CONDITION: &str = "haproxy-haptic.org/load-balancer-ready";

/// The label joining an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What the host drops from ConfigMaps before they reach a library: the
/// bundled libraries read only `data` (ingress-nginx's custom headers,
/// gateway-api's class parameters), and sharing one list keeps the one
/// ConfigMap watch of the controller trimmed alike whichever is on.
pub const CONFIG_MAP_IGNORE_FIELDS: &[&str] = &[
    "metadata.managedFields",
    "metadata.annotations",
    "metadata.labels",
    "binaryData",
];

/// What the host drops from Pods before they reach a library: everything
/// but metadata identity, `spec.readinessGates`, `status.conditions` and
/// the pod's addresses (`status.podIP`, `status.podIPs`: an endpoint counts
/// for a pod only at the pod's own address).
/// Pods are the biggest and busiest kind a library can watch.
pub const POD_IGNORE_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.creationTimestamp",
    "metadata.generation",
    "metadata.labels",
    "metadata.resourceVersion",
    "metadata.uid",
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
    "status.conditions.lastProbeTime",
    "status.conditions.lastTransitionTime",
    "status.conditions.message",
    "status.conditions.reason",
    "status.containerStatuses",
    "status.ephemeralContainerStatuses",
    "status.hostIP",
    "status.hostIPs",
    "status.initContainerStatuses",
    "status.message",
    "status.nominatedNodeName",
    "status.observedGeneration",
    "status.phase",
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
    #[serde(deserialize_with = "nullable")]
    pub readiness_gates: Vec<ReadinessGate>,
}

/// One entry of `spec.readinessGates`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReadinessGate {
    pub condition_type: ConditionWord,
}

/// `status.conditions`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PodStatus {
    #[serde(deserialize_with = "nullable")]
    pub conditions: Vec<PodCondition>,
    /// `status.podIP`.
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    /// `status.podIPs` (dual stack: one address per family).
    #[serde(rename = "podIPs", deserialize_with = "nullable")]
    pub pod_ips: Vec<PodIp>,
}

/// One entry of `status.podIPs`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PodIp {
    pub ip: String,
}

/// One pod condition.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub type_: ConditionWord,
    pub status: ConditionWord,
}

/// The words pod conditions are made of: the types the kubelet and the
/// scheduler set, the gate's, and the three statuses.
const CONDITION_WORDS: &[&str] = &[
    "True",
    "False",
    "Unknown",
    "PodScheduled",
    "PodReadyToStartContainers",
    "Initialized",
    "ContainersReady",
    "Ready",
    "DisruptionTarget",
    GATE_CONDITION,
];

/// A condition's type or status. One of [`CONDITION_WORDS`] is held without
/// an allocation: a pod carries about six conditions, and two `String`s
/// each were most of what parsing 10,000 pods allocated in a guest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConditionWord(Cow<'static, str>);

impl ConditionWord {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for ConditionWord {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ConditionWord {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl fmt::Display for ConditionWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ConditionWord {
    fn from(word: &str) -> Self {
        match CONDITION_WORDS.iter().find(|known| **known == word) {
            Some(known) => Self(Cow::Borrowed(known)),
            None => Self(Cow::Owned(word.to_owned())),
        }
    }
}

impl<'de> Deserialize<'de> for ConditionWord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct WordVisitor;
        impl serde::de::Visitor<'_> for WordVisitor {
            type Value = ConditionWord;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a condition type or status")
            }
            // Borrowed or not, the text is only compared with the known
            // words: no String unless it is none of them.
            fn visit_str<E: serde::de::Error>(self, word: &str) -> Result<ConditionWord, E> {
                Ok(ConditionWord::from(word))
            }
        }
        deserializer.deserialize_str(WordVisitor)
    }
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

    /// Whether `address` is one of the pod's own (`status.podIP`,
    /// `status.podIPs`). Compared as IP addresses, so `::1` and `0::1`
    /// agree.
    pub fn has_address(&self, address: &str) -> bool {
        let Ok(wanted) = address.parse::<std::net::IpAddr>() else {
            return false;
        };
        self.status
            .pod_ip
            .iter()
            .map(String::as_str)
            .chain(self.status.pod_ips.iter().map(|p| p.ip.as_str()))
            .any(|own| {
                own.parse::<std::net::IpAddr>()
                    .is_ok_and(|own| own == wanted)
            })
    }

    /// The gate condition is already True on the pod.
    pub fn gate_is_set(&self) -> bool {
        self.condition(GATE_CONDITION) == Some("True")
    }
}

/// What the host drops from EndpointSlices: everything but the
/// service-name label, address type, ports and each endpoint's addresses,
/// conditions and pod reference.
pub const SLICE_IGNORE_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.creationTimestamp",
    "metadata.generateName",
    "metadata.generation",
    "metadata.labels.endpointslice.kubernetes.io/managed-by",
    "metadata.ownerReferences",
    "metadata.resourceVersion",
    "metadata.uid",
    "endpoints.deprecatedTopology",
    "endpoints.hints",
    "endpoints.hostname",
    "endpoints.nodeName",
    "endpoints.targetRef.resourceVersion",
    "endpoints.targetRef.uid",
    "endpoints.zone",
];

/// An EndpointSlice (`discovery.k8s.io/v1`) as the libraries read it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Slice {
    pub metadata: SliceMetadata,
    /// `IPv4`, `IPv6` or `FQDN`.
    pub address_type: String,
    #[serde(deserialize_with = "nullable")]
    pub ports: Vec<SlicePort>,
    #[serde(deserialize_with = "nullable")]
    pub endpoints: Vec<SliceEndpoint>,
}

/// The slice's labels, of which only the Service name matters; the others
/// are skipped without allocating.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SliceMetadata {
    #[serde(deserialize_with = "nullable")]
    pub labels: SliceLabels,
}

/// `metadata.labels`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SliceLabels {
    #[serde(rename = "kubernetes.io/service-name")]
    pub service_name: Option<String>,
}

/// One port of a slice.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SlicePort {
    pub name: Option<String>,
    pub port: Option<i32>,
    pub protocol: Option<String>,
}

/// One endpoint of a slice.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SliceEndpoint {
    #[serde(deserialize_with = "nullable")]
    pub addresses: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub conditions: EndpointConditions,
    pub target_ref: Option<TargetRef>,
}

/// `conditions`; `None` means unknown.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct EndpointConditions {
    pub ready: Option<bool>,
    pub serving: Option<bool>,
    pub terminating: Option<bool>,
}

/// `targetRef`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TargetRef {
    pub kind: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

/// What the host drops from Services for libraries that read only ports.
pub const SERVICE_IGNORE_FIELDS: &[&str] = &[
    "metadata.annotations",
    "metadata.creationTimestamp",
    "metadata.labels",
    "metadata.resourceVersion",
    "metadata.uid",
    "spec.clusterIP",
    "spec.clusterIPs",
    "spec.externalIPs",
    "spec.ipFamilies",
    "spec.ipFamilyPolicy",
    "spec.selector",
    "spec.sessionAffinityConfig",
    "status",
];

/// A Service (`v1`) as its ports.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ServicePorts {
    pub spec: ServiceSpec,
}

/// `spec`, reduced to its ports, type and (when kept) cluster IP.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    /// Read only where a watch keeps it (`SERVICE_IGNORE_FIELDS` drops it:
    /// most libraries route to endpoints, and a field nobody reads would
    /// cost every Service's memory).
    #[serde(rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub ports: Vec<ServicePort>,
}

impl ServicePorts {
    /// The cluster IP and `port` as a server address, or `None` for a
    /// Service without one (headless, ExternalName) or a watch that drops
    /// it (`SERVICE_IGNORE_FIELDS`).
    pub fn cluster_ip_address(&self, port: i32) -> Option<std::net::SocketAddr> {
        let ip = self.spec.cluster_ip.as_deref()?.parse().ok()?;
        Some(std::net::SocketAddr::new(ip, u16::try_from(port).ok()?))
    }
}

/// One Service port.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ServicePort {
    pub name: Option<String>,
    pub port: i32,
    pub protocol: Option<String>,
    /// `kubernetes.io/h2c` (HTTP/2 without TLS, gRPC), `kubernetes.io/ws`, ...
    #[serde(rename = "appProtocol")]
    pub app_protocol: Option<String>,
}

/// The `appProtocol` of a Service port that speaks HTTP/2 in clear text
/// (gRPC backends): its servers get `proto h2`.
pub const H2C_APP_PROTOCOL: &str = "kubernetes.io/h2c";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn null_lists_and_missing_parts_read_as_empty() {
        let slice: Slice =
            serde_json::from_value(json!({"metadata": {"labels": null}, "endpoints": null}))
                .unwrap();
        assert!(slice.endpoints.is_empty() && slice.metadata.labels.service_name.is_none());
        let pod: GatePod = serde_json::from_value(
            json!({"metadata": {"name": "p"}, "spec": {"readinessGates": null}}),
        )
        .unwrap();
        assert!(pod.spec.readiness_gates.is_empty());
    }

    #[test]
    fn condition_words_read_alike_known_or_not() {
        let pod: GatePod = serde_json::from_value(json!({
            "spec": {"readinessGates": [{"conditionType": GATE_CONDITION}]},
            "status": {"conditions": [
                {"type": "ContainersReady", "status": "True"},
                {"type": "example.com/custom", "status": "Maybe"},
                {"type": GATE_CONDITION, "status": "False"}
            ]}
        }))
        .unwrap();
        assert!(pod.is_gated());
        assert_eq!(pod.condition("ContainersReady"), Some("True"));
        assert_eq!(pod.condition("example.com/custom"), Some("Maybe"));
        assert!(!pod.gate_is_set());
        assert!(matches!(pod.status.conditions[0].type_.0, Cow::Borrowed(_)));
        assert!(matches!(pod.status.conditions[1].type_.0, Cow::Owned(_)));
        let service: ServicePorts =
            serde_json::from_value(json!({"spec": {"ports": [{"port": 80}]}})).unwrap();
        assert_eq!(service.spec.ports[0].port, 80);
    }

    #[test]
    fn only_the_service_name_label_is_read() {
        let slice: Slice = serde_json::from_value(json!({
            "metadata": {"labels": {"kubernetes.io/service-name": "web", "other": "x"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": false}, "targetRef": {"kind": "Pod", "name": "web-1"}}]
        }))
        .unwrap();
        assert_eq!(slice.metadata.labels.service_name.as_deref(), Some("web"));
        assert_eq!(slice.endpoints[0].conditions.ready, Some(false));
    }
}

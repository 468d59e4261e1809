//! The built-in Kubernetes kinds a manifest may name, and which of them are
//! cluster-scoped. A manifest of any other kind is most likely a typo or an
//! old apiVersion (`networking.k8s.io/v1beta1` Ingress), so the loader refuses
//! it unless some library watches that kind.

/// Whether objects of a kind live in a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Namespaced,
    Cluster,
}

use Scope::{Cluster, Namespaced};

use super::WatchedKinds;
use crate::library::types::Kind;

/// (apiVersion, kind, scope) of the kinds Kubernetes 1.35 serves as stable
/// APIs. `List` is handled by the loader before this table is consulted.
const BUILT_IN: &[(&str, &str, Scope)] = &[
    ("v1", "Binding", Namespaced),
    ("v1", "ComponentStatus", Cluster),
    ("v1", "ConfigMap", Namespaced),
    ("v1", "Endpoints", Namespaced),
    ("v1", "Event", Namespaced),
    ("v1", "LimitRange", Namespaced),
    ("v1", "Namespace", Cluster),
    ("v1", "Node", Cluster),
    ("v1", "PersistentVolume", Cluster),
    ("v1", "PersistentVolumeClaim", Namespaced),
    ("v1", "Pod", Namespaced),
    ("v1", "PodTemplate", Namespaced),
    ("v1", "ReplicationController", Namespaced),
    ("v1", "ResourceQuota", Namespaced),
    ("v1", "Secret", Namespaced),
    ("v1", "Service", Namespaced),
    ("v1", "ServiceAccount", Namespaced),
    ("apps/v1", "ControllerRevision", Namespaced),
    ("apps/v1", "DaemonSet", Namespaced),
    ("apps/v1", "Deployment", Namespaced),
    ("apps/v1", "ReplicaSet", Namespaced),
    ("apps/v1", "StatefulSet", Namespaced),
    ("batch/v1", "CronJob", Namespaced),
    ("batch/v1", "Job", Namespaced),
    ("autoscaling/v1", "HorizontalPodAutoscaler", Namespaced),
    ("autoscaling/v2", "HorizontalPodAutoscaler", Namespaced),
    ("policy/v1", "PodDisruptionBudget", Namespaced),
    ("networking.k8s.io/v1", "Ingress", Namespaced),
    ("networking.k8s.io/v1", "IngressClass", Cluster),
    ("networking.k8s.io/v1", "NetworkPolicy", Namespaced),
    ("networking.k8s.io/v1", "IPAddress", Cluster),
    ("networking.k8s.io/v1", "ServiceCIDR", Cluster),
    ("discovery.k8s.io/v1", "EndpointSlice", Namespaced),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", Cluster),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        Cluster,
    ),
    ("rbac.authorization.k8s.io/v1", "Role", Namespaced),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", Namespaced),
    ("coordination.k8s.io/v1", "Lease", Namespaced),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        Cluster,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        Cluster,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        Cluster,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        Cluster,
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        Cluster,
    ),
    ("apiregistration.k8s.io/v1", "APIService", Cluster),
    ("storage.k8s.io/v1", "CSIDriver", Cluster),
    ("storage.k8s.io/v1", "CSINode", Cluster),
    ("storage.k8s.io/v1", "CSIStorageCapacity", Namespaced),
    ("storage.k8s.io/v1", "StorageClass", Cluster),
    ("storage.k8s.io/v1", "VolumeAttachment", Cluster),
    ("storage.k8s.io/v1", "VolumeAttributesClass", Cluster),
    ("scheduling.k8s.io/v1", "PriorityClass", Cluster),
    ("node.k8s.io/v1", "RuntimeClass", Cluster),
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequest",
        Cluster,
    ),
    ("events.k8s.io/v1", "Event", Namespaced),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", Cluster),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfiguration",
        Cluster,
    ),
    ("resource.k8s.io/v1", "DeviceClass", Cluster),
    ("resource.k8s.io/v1", "ResourceClaim", Namespaced),
    ("resource.k8s.io/v1", "ResourceClaimTemplate", Namespaced),
    ("resource.k8s.io/v1", "ResourceSlice", Cluster),
];

/// The scope of a kind: from the built-in table, else `Namespaced` when the
/// caller declared it (kinds libraries watch are custom resources, and most
/// custom resources are namespaced), else `None` (unknown).
pub fn scope(api_version: &str, kind: &str, extra_kinds: &WatchedKinds) -> Option<Scope> {
    BUILT_IN
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, scope)| *scope)
        .or_else(|| {
            extra_kinds
                .contains_key(&Kind::new(api_version, kind))
                .then_some(Namespaced)
        })
}

/// API versions Kubernetes removed: (apiVersion, kind, the release that
/// removed it, its replacement), so an old manifest gets the fix, not a
/// guess.
const REMOVED: &[(&str, &str, &str, &str)] = &[
    (
        "extensions/v1beta1",
        "Ingress",
        "1.22",
        "networking.k8s.io/v1",
    ),
    (
        "networking.k8s.io/v1beta1",
        "Ingress",
        "1.22",
        "networking.k8s.io/v1",
    ),
    (
        "networking.k8s.io/v1beta1",
        "IngressClass",
        "1.22",
        "networking.k8s.io/v1",
    ),
    (
        "discovery.k8s.io/v1beta1",
        "EndpointSlice",
        "1.25",
        "discovery.k8s.io/v1",
    ),
    ("extensions/v1beta1", "Deployment", "1.16", "apps/v1"),
    ("apps/v1beta1", "Deployment", "1.16", "apps/v1"),
    ("apps/v1beta2", "Deployment", "1.16", "apps/v1"),
    ("policy/v1beta1", "PodDisruptionBudget", "1.25", "policy/v1"),
];

/// A hint for an unknown kind: the replacement of a removed apiVersion, or
/// the apiVersions that do serve a kind of that name (case-insensitively,
/// to catch `ingress`), or where the table lives.
pub fn hint(api_version: &str, kind: &str, extra_kinds: &WatchedKinds) -> String {
    if let Some((_, _, release, replacement)) = REMOVED
        .iter()
        .find(|(v, k, _, _)| *v == api_version && *k == kind)
    {
        return format!(
            "{api_version} {kind} was removed in Kubernetes {release}; use apiVersion: {replacement}"
        );
    }
    let mut known: Vec<String> = BUILT_IN
        .iter()
        .map(|(v, k, _)| (*v, *k))
        .chain(
            extra_kinds
                .keys()
                .map(|k| (k.api_version.as_str(), k.kind.as_str())),
        )
        .filter(|(_, k)| k.eq_ignore_ascii_case(kind))
        .map(|(v, k)| format!("{v} {k}"))
        .collect();
    // A built-in kind a library also watches is listed once.
    known.sort();
    known.dedup();
    if known.is_empty() {
        "it is neither a built-in Kubernetes kind nor a kind any enabled library watches; \
         check the spelling or enable the library that handles it"
            .to_owned()
    } else {
        format!("did you mean {}?", known.join(" or "))
    }
}

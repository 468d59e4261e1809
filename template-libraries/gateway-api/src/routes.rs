//! HTTPRoutes attached to Gateways: each parentRef checked against the
//! Gateway's listeners (sectionName, port, allowedRoutes, hostnames), each
//! backendRef resolved to a `kubernetes-backends` backend, and the route's
//! status per parent.

use std::collections::BTreeMap;

use haptic_sdk::names::backend_name;
use serde_json::{Value, json};

use crate::api::{BackendRef, GROUP, HttpRoute, ParentRef};
use crate::conditions::{self, Condition};
use crate::grants::{Grants, Reference};
use crate::hostnames;
use crate::listeners::CheckedListener;

/// Answers 500: where an invalid backendRef's share of requests goes, as
/// the spec says.
pub const INTERNAL_ERROR_BACKEND: &str = "gateway.internal-error";

/// What the library knows about the cluster for attaching routes.
pub struct Cluster<'a> {
    pub grants: &'a Grants,
    /// Namespace name -> labels.
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    /// (namespace, Service) -> TCP ports.
    pub services: &'a BTreeMap<(String, String), Vec<i32>>,
    /// (namespace, Service) -> its cluster IP (none for a headless one).
    pub cluster_ips: &'a BTreeMap<(String, String), String>,
}

impl Cluster<'_> {
    /// `<cluster IP>:<port>` of Service `namespace/name` (the IP in
    /// brackets for IPv6), where the agent sends what it sends to a
    /// Service, so kube-proxy balances it over the ready endpoints; `None`
    /// for a headless Service.
    pub fn cluster_ip_authority(&self, namespace: &str, name: &str, port: i32) -> Option<String> {
        let ip = self
            .cluster_ips
            .get(&(namespace.to_owned(), name.to_owned()))?
            .parse::<std::net::IpAddr>()
            .ok()?;
        Some(match ip {
            std::net::IpAddr::V6(v6) => format!("[{v6}]:{port}"),
            std::net::IpAddr::V4(v4) => format!("{v4}:{port}"),
        })
    }
}

/// One route attached to one listener.
#[derive(Debug, Clone)]
pub struct Attachment {
    pub listener: String,
    /// The hostnames it serves there (empty: any).
    pub hostnames: Vec<String>,
}

/// A rule's backends: (backend section, weight).
pub type Backends = Vec<(String, u32)>;

/// Resolves a rule's backendRefs; the first problem becomes the route's
/// ResolvedRefs condition. Invalid refs keep their weight, sent to
/// [`INTERNAL_ERROR_BACKEND`], as the spec says.
pub fn resolve_backends(
    route_kind: &str,
    route_namespace: &str,
    refs: &[BackendRef],
    cluster: &Cluster<'_>,
    problem: &mut Option<Condition>,
) -> Backends {
    refs.iter()
        .map(|r| {
            let weight = u32::try_from(r.weight.unwrap_or(1)).unwrap_or(0);
            let service = ServiceRef {
                group: r.group.as_deref(),
                kind: r.kind.as_deref(),
                name: &r.name,
                namespace: r.namespace.as_deref(),
                port: r.port,
            };
            match resolve_service(route_kind, route_namespace, &service, cluster) {
                Ok((namespace, port)) => (backend_name(namespace, &r.name, port), weight),
                Err(condition) => {
                    problem.get_or_insert(condition);
                    (INTERNAL_ERROR_BACKEND.to_owned(), weight)
                }
            }
        })
        .collect()
}

/// A reference to a Service and port, as a backendRef or a mirror's
/// backendRef writes it.
pub struct ServiceRef<'a> {
    pub group: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub name: &'a str,
    pub namespace: Option<&'a str>,
    pub port: Option<i32>,
}

impl<'a> From<&'a crate::api::BackendObjectRef> for ServiceRef<'a> {
    /// A filter's backendRef (RequestMirror, ExternalAuth) as a Service.
    fn from(r: &'a crate::api::BackendObjectRef) -> Self {
        Self {
            group: r.group.as_deref(),
            kind: r.kind.as_deref(),
            name: &r.name,
            namespace: r.namespace.as_deref(),
            port: r.port,
        }
    }
}

/// The Service's namespace and port when `service` names a Service and
/// port that exist and a ReferenceGrant allows; else the ResolvedRefs
/// condition saying why not.
pub fn resolve_service<'a>(
    route_kind: &str,
    route_namespace: &'a str,
    service: &ServiceRef<'a>,
    cluster: &Cluster<'_>,
) -> Result<(&'a str, i32), Condition> {
    let fail = |reason: &'static str, message: String| {
        Condition::new("ResolvedRefs", false, reason, message)
    };
    let group = service.group.unwrap_or("");
    let kind = service.kind.unwrap_or("Service");
    let namespace = service.namespace.unwrap_or(route_namespace);
    let name = service.name;
    if !group.is_empty() || kind != "Service" {
        return Err(fail(
            "InvalidKind",
            format!("backendRef {group}/{kind} {name:?} is not a Service"),
        ));
    }
    let reference = Reference {
        from_group: GROUP,
        from_kind: route_kind,
        from_namespace: route_namespace,
        to_group: "",
        to_kind: "Service",
        to_namespace: namespace,
        to_name: name,
    };
    if !cluster.grants.allows(&reference) {
        return Err(fail(
            "RefNotPermitted",
            format!(
                "Service {namespace}/{name} is in another namespace and no ReferenceGrant there allows {route_kind}s of {route_namespace} to use it"
            ),
        ));
    }
    let ports = cluster
        .services
        .get(&(namespace.to_owned(), name.to_owned()));
    match (ports, service.port) {
        (Some(ports), Some(port)) if ports.contains(&port) => Ok((namespace, port)),
        (Some(_), port) => Err(fail(
            "BackendNotFound",
            format!("Service {namespace}/{name} has no TCP port {port:?}"),
        )),
        (None, _) => Err(fail(
            "BackendNotFound",
            format!("Service {namespace}/{name} does not exist"),
        )),
    }
}

/// The listeners a parentRef attaches `route` to, or the condition saying
/// why none.
pub fn attach(
    route_kind: &str,
    route: &HttpRoute,
    parent: &ParentRef,
    gateway_namespace: &str,
    listeners: &[CheckedListener],
    cluster: &Cluster<'_>,
) -> Result<Vec<Attachment>, Condition> {
    let named: Vec<&CheckedListener> = listeners
        .iter()
        .filter(|l| parent.section_name.as_ref().is_none_or(|s| *s == l.name))
        .filter(|l| parent.port.is_none_or(|p| p == l.port))
        .collect();
    if named.is_empty() {
        return Err(Condition::new(
            "Accepted",
            false,
            "NoMatchingParent",
            "no listener of the Gateway has the parentRef's sectionName and port",
        ));
    }
    let route_namespace = route_namespace_of(route);
    let allowed: Vec<&CheckedListener> = named
        .into_iter()
        .filter(|l| l.accepted)
        .filter(|l| l.supported_kinds.iter().any(|k| k.kind == route_kind))
        .filter(|l| namespace_allowed(l, gateway_namespace, route_namespace, cluster))
        .collect();
    if allowed.is_empty() {
        return Err(Condition::new(
            "Accepted",
            false,
            "NotAllowedByListeners",
            "no listener the parentRef names allows this route (allowedRoutes, or the listener is invalid)",
        ));
    }
    let attached: Vec<Attachment> = allowed
        .into_iter()
        .filter_map(|l| {
            let hostnames = hostnames::effective(l.hostname.as_deref(), &route.spec.hostnames)?;
            Some(Attachment {
                listener: l.name.clone(),
                hostnames: hostnames
                    .into_iter()
                    .filter(|h| hostnames::is_valid(h))
                    .collect(),
            })
        })
        .collect();
    if attached.is_empty() {
        return Err(Condition::new(
            "Accepted",
            false,
            "NoMatchingListenerHostname",
            "no hostname of the route intersects the hostname of a listener it may attach to",
        ));
    }
    Ok(attached)
}

fn route_namespace_of(route: &HttpRoute) -> &str {
    &route.metadata.namespace
}

fn namespace_allowed(
    listener: &CheckedListener,
    gateway_namespace: &str,
    route_namespace: &str,
    cluster: &Cluster<'_>,
) -> bool {
    match &listener.allowed_namespaces {
        crate::listeners::AllowedNamespaces::Same => gateway_namespace == route_namespace,
        crate::listeners::AllowedNamespaces::All => true,
        crate::listeners::AllowedNamespaces::Selector(selector) => cluster
            .namespaces
            .get(route_namespace)
            .is_some_and(|labels| selector.matches(labels)),
        crate::listeners::AllowedNamespaces::None => false,
    }
}

/// One entry of `status.parents`.
pub fn parent_status(
    parent: &ParentRef,
    controller: &str,
    conditions: &[Condition],
    generation: i64,
) -> Value {
    // The API server defaults group and kind; written out, the entry reads
    // the same whichever source the route came from.
    let mut parent = parent.clone();
    parent.group.get_or_insert_with(|| GROUP.to_owned());
    parent.kind.get_or_insert_with(|| "Gateway".to_owned());
    json!({
        "parentRef": parent,
        "controllerName": controller,
        "conditions": conditions::list(conditions, generation),
    })
}

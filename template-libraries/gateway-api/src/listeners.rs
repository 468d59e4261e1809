//! A Gateway's listeners checked one by one: the protocol, the TLS
//! certificates (through ReferenceGrants across namespaces), the route
//! kinds, conflicts on a shared port. Each listener gets its conditions;
//! only a valid one is served.

use std::collections::BTreeMap;

use crate::api::{GROUP, Gateway, LabelSelector, Listener, RouteGroupKind};
use crate::conditions::Condition;
use crate::grants::Grants;
use crate::hostnames;
use crate::tls::Certificates;

/// The route kinds this library serves on an HTTP or HTTPS listener.
pub const HTTP_ROUTE: &str = "HTTPRoute";
pub const GRPC_ROUTE: &str = "GRPCRoute";
const ROUTE_KINDS: [&str; 2] = [HTTP_ROUTE, GRPC_ROUTE];

/// The protocols a listener may have here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    Http,
    Https,
}

impl Protocol {
    fn parse(protocol: &str) -> Option<Self> {
        match protocol {
            "HTTP" => Some(Self::Http),
            "HTTPS" => Some(Self::Https),
            _ => None,
        }
    }

    /// The URL scheme.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// Which namespaces' routes a listener accepts.
#[derive(Debug, Clone)]
pub enum AllowedNamespaces {
    Same,
    All,
    Selector(LabelSelector),
    None,
}

impl AllowedNamespaces {
    fn of(listener: &Listener) -> Self {
        let namespaces = listener
            .allowed_routes
            .as_ref()
            .and_then(|a| a.namespaces.as_ref());
        match namespaces.and_then(|n| n.from.as_deref()) {
            Some("All") => Self::All,
            Some("Selector") => namespaces
                .and_then(|n| n.selector.clone())
                .map_or(Self::None, Self::Selector),
            Some("None") => Self::None,
            _ => Self::Same,
        }
    }
}

/// One listener after its checks.
#[derive(Debug, Clone)]
pub struct CheckedListener {
    pub name: String,
    pub port: i32,
    /// `None` for a protocol this library does not serve.
    pub protocol: Option<Protocol>,
    pub hostname: Option<String>,
    /// Route kinds it accepts (`status.listeners[].supportedKinds`).
    pub supported_kinds: Vec<RouteGroupKind>,
    pub allowed_namespaces: AllowedNamespaces,
    /// Accepted: routes may attach (even while its certificates are
    /// unresolved: the spec counts them in `attachedRoutes`).
    pub accepted: bool,
    /// Served: accepted, certificates resolved, no conflict, a route kind
    /// it serves.
    pub valid: bool,
    /// Certificate files (PEM, relative to haproxy.cfg) of an HTTPS listener.
    pub certificates: Vec<String>,
    pub conditions: Vec<Condition>,
    /// Routes attached (filled in once routes are resolved).
    pub attached_routes: usize,
}

/// Checks every listener of `gateway`.
pub fn check(
    gateway: &Gateway,
    grants: &Grants,
    certificates: &mut Certificates,
) -> Vec<CheckedListener> {
    let namespace = &gateway.metadata.namespace;
    // Listeners sharing a port must agree on the protocol, and on a port
    // two of them may not claim the same hostname.
    let mut protocols_on_port: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
    for listener in &gateway.spec.listeners {
        protocols_on_port
            .entry(listener.port)
            .or_default()
            .push(listener.protocol.as_str());
    }
    let mut hostnames_seen: BTreeMap<(i32, String), usize> = BTreeMap::new();
    for listener in &gateway.spec.listeners {
        *hostnames_seen
            .entry((
                listener.port,
                listener
                    .hostname
                    .clone()
                    .unwrap_or_default()
                    .to_ascii_lowercase(),
            ))
            .or_default() += 1;
    }

    gateway
        .spec
        .listeners
        .iter()
        .map(|listener| {
            let protocol_conflict = protocols_on_port
                .get(&listener.port)
                .is_some_and(|protocols| protocols.iter().any(|p| *p != listener.protocol));
            let hostname_conflict = hostnames_seen
                .get(&(
                    listener.port,
                    listener
                        .hostname
                        .clone()
                        .unwrap_or_default()
                        .to_ascii_lowercase(),
                ))
                .is_some_and(|count| *count > 1);
            check_one(
                namespace,
                listener,
                protocol_conflict,
                hostname_conflict,
                grants,
                certificates,
            )
        })
        .collect()
}

fn check_one(
    namespace: &str,
    listener: &Listener,
    protocol_conflict: bool,
    hostname_conflict: bool,
    grants: &Grants,
    certificates: &mut Certificates,
) -> CheckedListener {
    let mut checked = CheckedListener {
        name: listener.name.clone(),
        port: listener.port,
        protocol: Protocol::parse(&listener.protocol),
        hostname: listener.hostname.as_ref().map(|h| h.to_ascii_lowercase()),
        supported_kinds: Vec::new(),
        allowed_namespaces: AllowedNamespaces::of(listener),
        accepted: false,
        valid: false,
        certificates: Vec::new(),
        conditions: Vec::new(),
        attached_routes: 0,
    };
    let Some(protocol) = checked.protocol else {
        checked.conditions = vec![
            Condition::new(
                "Accepted",
                false,
                "UnsupportedProtocol",
                format!(
                    "protocol {:?} is not served by haptic (HTTP and HTTPS are)",
                    listener.protocol
                ),
            ),
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "the listener is not accepted",
            ),
            Condition::new(
                "ResolvedRefs",
                true,
                "ResolvedRefs",
                "no references to resolve",
            ),
            Condition::new("Conflicted", false, "NoConflicts", "no conflict"),
        ];
        return checked;
    };

    if let Some(hostname) = &checked.hostname
        && !hostnames::is_valid(hostname)
    {
        checked.conditions = vec![
            Condition::new(
                "Accepted",
                false,
                "UnsupportedValue",
                format!("hostname {hostname:?} is not a DNS name"),
            ),
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "the listener is not accepted",
            ),
            Condition::new(
                "ResolvedRefs",
                true,
                "ResolvedRefs",
                "no references to resolve",
            ),
            Condition::new("Conflicted", false, "NoConflicts", "no conflict"),
        ];
        return checked;
    }

    // Route kinds: the defaults for the protocol, or the listed ones this
    // library serves; any other listed kind makes ResolvedRefs False.
    let mut invalid_kinds = Vec::new();
    match listener.allowed_routes.as_ref().map(|a| &a.kinds) {
        Some(kinds) if !kinds.is_empty() => {
            for kind in kinds {
                let group = kind.group.as_deref().unwrap_or(GROUP);
                if group == GROUP && ROUTE_KINDS.contains(&kind.kind.as_str()) {
                    checked.supported_kinds.push(RouteGroupKind {
                        group: Some(GROUP.to_owned()),
                        kind: kind.kind.clone(),
                    });
                } else {
                    invalid_kinds.push(format!("{group}/{}", kind.kind));
                }
            }
        }
        _ => checked
            .supported_kinds
            .extend(ROUTE_KINDS.iter().map(|kind| RouteGroupKind {
                group: Some(GROUP.to_owned()),
                kind: (*kind).to_owned(),
            })),
    }

    let kinds_ok = !checked.supported_kinds.is_empty();
    let mut resolved = if invalid_kinds.is_empty() {
        Condition::new(
            "ResolvedRefs",
            true,
            "ResolvedRefs",
            "all references resolved",
        )
    } else {
        Condition::new(
            "ResolvedRefs",
            false,
            "InvalidRouteKinds",
            format!(
                "route kinds {} are not served by haptic (HTTPRoute and GRPCRoute are)",
                invalid_kinds.join(", ")
            ),
        )
    };

    if protocol == Protocol::Https {
        let tls = listener.tls.clone().unwrap_or_default();
        let mode = tls.mode.as_deref().unwrap_or("Terminate");
        if mode != "Terminate" {
            checked.conditions = vec![
                Condition::new(
                    "Accepted",
                    false,
                    "UnsupportedValue",
                    format!("TLS mode {mode:?} is not served on HTTPS listeners (Terminate is)"),
                ),
                Condition::new(
                    "Programmed",
                    false,
                    "Invalid",
                    "the listener is not accepted",
                ),
                resolved,
                Condition::new("Conflicted", false, "NoConflicts", "no conflict"),
            ];
            return checked;
        }
        match certificates.resolve(namespace, &tls.certificate_refs, grants) {
            Ok(files) => checked.certificates = files,
            Err(problem) => {
                resolved = Condition::new("ResolvedRefs", false, problem.reason, problem.message)
            }
        }
        if tls.certificate_refs.is_empty() && resolved.status {
            resolved = Condition::new(
                "ResolvedRefs",
                false,
                "InvalidCertificateRef",
                "an HTTPS listener needs tls.certificateRefs",
            );
        }
    }

    let certificates_ok =
        checked.protocol != Some(Protocol::Https) || !checked.certificates.is_empty();
    let conflicted = if protocol_conflict {
        Some(Condition::new(
            "Conflicted",
            true,
            "ProtocolConflict",
            format!(
                "another listener on port {} has another protocol",
                listener.port
            ),
        ))
    } else if hostname_conflict {
        Some(Condition::new(
            "Conflicted",
            true,
            "HostnameConflict",
            format!(
                "another listener on port {} has the same hostname",
                listener.port
            ),
        ))
    } else {
        None
    };

    checked.accepted = conflicted.is_none();
    checked.valid = checked.accepted && certificates_ok && kinds_ok;
    let (accepted, programmed) = match (&conflicted, checked.valid) {
        (Some(_), _) => (
            Condition::new(
                "Accepted",
                false,
                "PortUnavailable",
                "the listener conflicts with another one on its port (see Conflicted)",
            ),
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "the listener conflicts with another one",
            ),
        ),
        (None, true) => (
            Condition::new("Accepted", true, "Accepted", "the listener is accepted"),
            Condition::new(
                "Programmed",
                true,
                "Programmed",
                "the listener is programmed",
            ),
        ),
        (None, false) => (
            Condition::new("Accepted", true, "Accepted", "the listener is accepted"),
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "the listener has unresolved references",
            ),
        ),
    };
    checked.conditions = vec![
        accepted,
        programmed,
        resolved,
        conflicted
            .unwrap_or_else(|| Condition::new("Conflicted", false, "NoConflicts", "no conflict")),
    ];
    checked
}

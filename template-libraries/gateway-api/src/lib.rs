//! `gateway-api`: the Gateway API (`gateway.networking.k8s.io`, v1.6
//! standard channel) on HAProxy: GatewayClass, Gateway, HTTPRoute and
//! ReferenceGrant. Off by default (`templateLibraries.gatewayApi.enabled`).
//!
//! - Which objects: GatewayClasses whose `controllerName` is ours
//!   (`haproxy-haptic.org/gateway-controller`), their Gateways, and the
//!   HTTPRoutes whose parentRefs name those Gateways.
//! - Each Gateway its own address: a Service per Gateway (an owned object,
//!   contract 0.3.0) selecting the HAProxy pods, mapping each listener port
//!   to a port HAProxy binds for that Gateway only ([`ports`]);
//!   `status.addresses` is that Service's load balancer address. Its type
//!   and annotations come from the values, or from the GatewayClass's
//!   parameters ([`parameters`]).
//! - Routing: one frontend per Gateway port ([`frontend`]): listener by
//!   host, rule by match ([`matches`]), filters ([`filters`]), backends of
//!   `kubernetes-backends` (`<namespace>_<service>_<port>`), so endpoint
//!   flips stay runtime changes and the readiness gate holds behind routes.
//! - Status: every condition the spec names, with its reasons
//!   ([`listeners`], [`routes`]), `rendered` for GatewayClasses, `deployed`
//!   (once every HAProxy pod runs the render) for Gateways and routes.

pub mod api;
pub mod claims;
pub mod conditions;
pub mod filters;
pub mod frontend;
pub mod grants;
pub mod hostnames;
pub mod listeners;
pub mod matches;
pub mod parameters;
pub mod ports;
pub mod routes;
pub mod tls;

use std::collections::{BTreeMap, BTreeSet};

use haptic_sdk::claims::HostClaims;
use haptic_sdk::ingress::tls::CertificateCache;
use haptic_sdk::names::sanitize;
use haptic_sdk::{
    Context, Entry, Error, Info, Library, ObjectKey, Output, Plan, Result, SectionKind, Slot,
    StatusVariant, Values, Watch,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{
    GROUP, Gateway, GatewayClass, GrpcRoute, HttpRoute, Namespace, ReferenceGrant, Service,
};
use crate::conditions::Condition;
use crate::frontend::{Frontend, MatchEntry, PortListener, RuleOutput};
use crate::grants::Grants;
use crate::listeners::{CheckedListener, GRPC_ROUTE, HTTP_ROUTE, Protocol};
use crate::parameters::{ClassParameters, Invalid};
use crate::routes::{Cluster, INTERNAL_ERROR_BACKEND};
use crate::tls::Certificates;

/// Watch names.
pub const GATEWAY_CLASSES: &str = "gatewayclasses";
pub const GATEWAYS: &str = "gateways";
pub const HTTP_ROUTES: &str = "httproutes";
pub const GRPC_ROUTES: &str = "grpcroutes";
pub const REFERENCE_GRANTS: &str = "referencegrants";
pub const NAMESPACES: &str = "gateway-namespaces";
pub const SERVICES: &str = "gateway-services";
pub const HAPROXY_PODS: &str = "gateway-haproxy-pods";

/// The label the host puts on owned objects; the library finds its own
/// Services' load balancer addresses by it.
const OWNED_BY: &str = "haproxy-haptic.org/owned-by";

/// The features `status.supportedFeatures` of our GatewayClasses lists:
/// what this library implements and the conformance suite checks.
/// Sorted, as the list is a map keyed by name.
pub const SUPPORTED_FEATURES: &[&str] = &[
    "GRPCRoute",
    "Gateway",
    "GatewayHTTPListenerIsolation",
    "GatewayPort8080",
    "HTTPRoute",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendTimeout",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteParentRefPort",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteSchemeRedirect",
    "ReferenceGrant",
];

/// Values under `templateLibraries.gatewayApi`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayValues {
    /// `spec.controllerName` of our GatewayClasses.
    pub controller_name: String,
    /// The Service made for each Gateway.
    pub service: ServiceValues,
    /// The ports HAProxy binds for Gateway listeners.
    pub ports: ports::PortRange,
    /// The address part of each Gateway bind (empty: all addresses).
    pub bind_address: String,
    /// Fixed `status.addresses` (IPs or hostnames) instead of the Services'
    /// load balancer addresses: for `haptic run`, or a fixed VIP.
    pub addresses: Vec<String>,
}

/// `service`: the Service per Gateway.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceValues {
    #[serde(rename = "type")]
    pub type_: String,
    /// Labels of the HAProxy pods (the chart fills them in).
    pub selector: BTreeMap<String, String>,
    /// The HAProxy pods' namespace (the chart fills it in). A Service
    /// selects pods of its own namespace only, and a Gateway's Service lives
    /// in the Gateway's (its owner's); so with this set the Service has no
    /// selector and an EndpointSlice of the library's lists the HAProxy pods
    /// of this namespace matching `selector`. Empty: the Service selects by
    /// `selector` (HAProxy in each Gateway's namespace).
    pub pod_namespace: String,
    pub annotations: BTreeMap<String, String>,
    pub labels: BTreeMap<String, String>,
}

/// Default values.
pub fn defaults() -> Value {
    json!({
        "enabled": false,
        "controllerName": "haproxy-haptic.org/gateway-controller",
        "service": {"type": "LoadBalancer", "selector": {}, "podNamespace": "", "annotations": {}, "labels": {}},
        "ports": {"from": 20000, "to": 29999, "sameAsListener": false, "maxPerNamespace": 0},
        "bindAddress": "",
        "addresses": []
    })
}

/// The `gateway-api` library.
#[derive(Debug)]
pub struct GatewayApi {
    values: GatewayValues,
    /// Secrets checked by the host, kept between renders.
    certificates: CertificateCache,
    /// The admin's host-claim policy (`templateLibraries.base.hostClaims`).
    claims: HostClaims,
}

impl Default for GatewayApi {
    fn default() -> Self {
        Self {
            values: GatewayValues::default(),
            certificates: tls::certificate_cache(),
            claims: HostClaims::default(),
        }
    }
}

impl Library for GatewayApi {
    fn info(&self) -> Info {
        Info::new("gateway-api", env!("CARGO_PKG_VERSION"))
            .order(210)
            .defaults(defaults())
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        let parsed: GatewayValues = values.get()?;
        check_values(&parsed)?;
        self.values = parsed;
        self.claims = values.host_claims()?;
        let pods = &self.values.service;
        let pod_watch = (!pods.pod_namespace.is_empty()).then(|| {
            let selector: Vec<String> = pods
                .selector
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            Watch::new(HAPROXY_PODS, "v1", "Pod")
                .parse_as::<api::HaproxyPod>()
                .namespace(pods.pod_namespace.clone())
                .label_selector(selector.join(","))
                .ignore_fields(["metadata.managedFields", "metadata.annotations", "spec"])
        });
        let trimmed = [
            "metadata.managedFields",
            "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
        ];
        let plan = Plan::default()
            .watch(
                Watch::new(GATEWAY_CLASSES, format!("{GROUP}/v1"), "GatewayClass")
                    .parse_as::<GatewayClass>()
                    .ignore_fields(trimmed.iter().copied().chain(["status"])),
            )
            .watch(
                Watch::new(GATEWAYS, format!("{GROUP}/v1"), "Gateway")
                    .parse_as::<Gateway>()
                    .ignore_fields(trimmed.iter().copied().chain(["status"])),
            )
            .watch(
                Watch::new(HTTP_ROUTES, format!("{GROUP}/v1"), "HTTPRoute")
                    .parse_as::<HttpRoute>()
                    .ignore_fields(trimmed.iter().copied().chain(["status"])),
            )
            .watch(
                Watch::new(GRPC_ROUTES, format!("{GROUP}/v1"), "GRPCRoute")
                    .parse_as::<GrpcRoute>()
                    .ignore_fields(trimmed.iter().copied().chain(["status"])),
            )
            .watch(
                Watch::new(REFERENCE_GRANTS, format!("{GROUP}/v1"), "ReferenceGrant")
                    .parse_as::<ReferenceGrant>()
                    .ignore_fields(trimmed.iter().copied()),
            )
            .watch(
                Watch::new(NAMESPACES, "v1", "Namespace")
                    .parse_as::<Namespace>()
                    .ignore_fields(trimmed.iter().copied().chain(["spec", "status"])),
            )
            .watch(
                Watch::new(SERVICES, "v1", "Service")
                    .parse_as::<Service>()
                    .ignore_fields(trimmed.iter().copied().chain([
                        "spec.selector",
                        "spec.clusterIPs",
                        "spec.ipFamilies",
                        "metadata.annotations",
                    ])),
            )
            .watch(tls::secrets_watch())
            .watch(parameters::watch())
            .applies("discovery.k8s.io/v1", "EndpointSlice")
            .patches_status_of(&format!("{GROUP}/v1"), "GatewayClass")
            .patches_status_of(&format!("{GROUP}/v1"), "Gateway")
            .patches_status_of(&format!("{GROUP}/v1"), "HTTPRoute")
            .patches_status_of(&format!("{GROUP}/v1"), "GRPCRoute")
            .applies("v1", "Service");
        Ok(match pod_watch {
            Some(watch) => plan.watch(watch),
            None => plan,
        })
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        render(&self.values, &self.claims, &mut self.certificates, ctx, out)
    }
}

fn check_values(v: &GatewayValues) -> Result<()> {
    if v.controller_name.is_empty() {
        return Err(Error::msg(
            "templateLibraries.gatewayApi.controllerName is empty; set it to haproxy-haptic.org/gateway-controller or your own controller name",
        ));
    }
    if v.bind_address
        .contains(|c: char| c.is_whitespace() || c.is_control())
    {
        return Err(Error::msg(
            "templateLibraries.gatewayApi.bindAddress holds whitespace; give one address such as 127.0.0.1",
        ));
    }
    v.ports.check().map_err(Error::msg)?;
    Ok(())
}

/// A Gateway of one of our classes, with its checked listeners.
struct GatewayModel<'a> {
    entry: Entry<'a, Gateway>,
    listeners: Vec<CheckedListener>,
    /// Its class's parameters.
    parameters: ClassParameters,
    /// Some served listener got no HAProxy port ([`ports::mark_unassigned`]).
    no_port: bool,
}

impl GatewayModel<'_> {
    fn key(&self) -> (&str, &str) {
        (&self.entry.key.namespace, &self.entry.key.name)
    }
}

fn render(
    v: &GatewayValues,
    policy: &HostClaims,
    cache: &mut CertificateCache,
    ctx: &Context<'_>,
    out: &mut Output,
) -> Result<()> {
    let api_version = format!("{GROUP}/v1");
    // Classes, each with its parameters or why they are refused.
    let mut our_classes: BTreeMap<String, std::result::Result<ClassParameters, Invalid>> =
        BTreeMap::new();
    for class in ctx.objects::<GatewayClass>(GATEWAY_CLASSES)? {
        if class.spec.controller_name != v.controller_name {
            continue;
        }
        let parameters = parameters::resolve(ctx, class.spec.parameters_ref.as_ref())?;
        let accepted = match &parameters {
            Ok(_) => Condition::new("Accepted", true, "Accepted", "haptic serves this class"),
            Err(Invalid(why)) => Condition::new("Accepted", false, "InvalidParameters", why),
        };
        our_classes.insert(class.key.name.clone(), parameters);
        let status = json!({
            "conditions": conditions::list(&[accepted], class.metadata.generation),
            "supportedFeatures": SUPPORTED_FEATURES.iter().map(|f| json!({"name": f})).collect::<Vec<_>>(),
        });
        out.status_patch(
            StatusVariant::Rendered,
            &api_version,
            "GatewayClass",
            "",
            &class.key.name,
            &status,
        )?;
    }
    if our_classes.is_empty() {
        return Ok(());
    }

    let grants_list: Vec<_> = ctx.objects::<ReferenceGrant>(REFERENCE_GRANTS)?.collect();
    let grants = Grants::new(grants_list.iter().map(|g| g.value));
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = ctx
        .objects::<Namespace>(NAMESPACES)?
        .map(|n| (n.key.name.clone(), n.metadata.labels.clone()))
        .collect();
    let mut services = BTreeMap::new();
    let mut owned_addresses: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for service in ctx.objects::<Service>(SERVICES)? {
        let key = (service.key.namespace.clone(), service.key.name.clone());
        let ports = service
            .spec
            .ports
            .iter()
            .filter(|p| p.protocol.as_deref().is_none_or(|p| p == "TCP"))
            .map(|p| p.port)
            .collect();
        services.insert(key.clone(), ports);
        if service
            .metadata
            .labels
            .get(OWNED_BY)
            .is_some_and(|l| l == "gateway-api")
        {
            let addresses = service
                .status
                .load_balancer
                .ingress
                .iter()
                .filter_map(|i| match (&i.ip, &i.hostname) {
                    (Some(ip), _) if !ip.is_empty() => {
                        Some(json!({"type": "IPAddress", "value": ip}))
                    }
                    (_, Some(h)) if !h.is_empty() => Some(json!({"type": "Hostname", "value": h})),
                    _ => None,
                })
                .collect();
            owned_addresses.insert(key, addresses);
        }
    }
    let cluster = Cluster {
        grants: &grants,
        namespaces: &namespaces,
        services: &services,
    };
    let mut certificates = Certificates::load(ctx, cache)?;

    // Gateways, oldest first (they keep their HAProxy ports).
    let mut gateways: Vec<GatewayModel<'_>> = Vec::new();
    for gateway in ctx.objects::<Gateway>(GATEWAYS)? {
        let parameters = match our_classes.get(&gateway.spec.gateway_class_name) {
            None => continue,
            Some(Ok(parameters)) => parameters.clone(),
            Some(Err(Invalid(why))) => {
                // Not served, and says why; its routes see no Gateway of ours.
                out.status_patch(
                    StatusVariant::Deployed,
                    &api_version,
                    "Gateway",
                    &gateway.key.namespace,
                    &gateway.key.name,
                    &rejected_class_status(&gateway, why),
                )?;
                continue;
            }
        };
        let mut listeners = listeners::check(&gateway, &grants, &mut certificates);
        claims::limit_listeners(policy, gateway.key, &mut listeners, out)?;
        gateways.push(GatewayModel {
            entry: gateway,
            listeners,
            parameters,
            no_port: false,
        });
    }
    gateways.sort_by(|a, b| {
        (&a.entry.metadata.creation_timestamp, a.key())
            .cmp(&(&b.entry.metadata.creation_timestamp, b.key()))
    });
    let index: BTreeMap<(String, String), usize> = gateways
        .iter()
        .enumerate()
        .map(|(i, g)| ((g.entry.key.namespace.clone(), g.entry.key.name.clone()), i))
        .collect();
    let allocation = ports::allocate(
        &v.ports,
        gateways.iter().map(|g| {
            let ports: BTreeSet<i32> = g
                .listeners
                .iter()
                .filter(|l| l.valid)
                .map(|l| l.port)
                .collect();
            (
                format!("{}/{}", g.entry.key.namespace, g.entry.key.name),
                ports,
            )
        }),
    );
    for g in &mut gateways {
        let id = format!("{}/{}", g.entry.key.namespace, g.entry.key.name);
        g.no_port = ports::mark_unassigned(&id, &mut g.listeners, &allocation, &v.ports);
    }

    // Frontends per (gateway index, port).
    let mut frontends: BTreeMap<(usize, i32), Frontend> = BTreeMap::new();
    for (i, g) in gateways.iter().enumerate() {
        let id = format!("{}/{}", g.entry.key.namespace, g.entry.key.name);
        for l in g.listeners.iter().filter(|l| l.valid) {
            let (Some(protocol), Some(haproxy_port)) =
                (l.protocol, allocation.get(&(id.clone(), l.port)))
            else {
                continue;
            };
            let name = format!(
                "gateway.{}.{}.{}",
                g.entry.key.namespace, g.entry.key.name, l.port
            );
            let frontend = frontends.entry((i, l.port)).or_insert_with(|| Frontend {
                bind: format!("{}:{haproxy_port}", v.bind_address),
                protocol,
                crt_list: (protocol == Protocol::Https)
                    .then(|| format!("certs/gateway/{}.crt-list", sanitize(&name))),
                name,
                h2: false,
                listeners: Vec::new(),
                entries: Vec::new(),
                rules: BTreeMap::new(),
            });
            frontend.listeners.push(PortListener {
                name: l.name.clone(),
                hostname: l.hostname.clone(),
            });
        }
    }

    // Routes, HTTP and gRPC, oldest first (older routes win ties).
    let mut routes: Vec<RouteView> = Vec::new();
    for route in ctx.objects::<HttpRoute>(HTTP_ROUTES)? {
        routes.push(RouteView::new(HTTP_ROUTE, route.key, route.value.clone()));
    }
    for route in ctx.objects::<GrpcRoute>(GRPC_ROUTES)? {
        routes.push(RouteView::new(GRPC_ROUTE, route.key, route.value.to_http()));
    }
    routes.sort_by(|a, b| {
        (
            &a.route.metadata.creation_timestamp,
            &a.route.metadata.namespace,
            &a.route.metadata.name,
            a.kind,
        )
            .cmp(&(
                &b.route.metadata.creation_timestamp,
                &b.route.metadata.namespace,
                &b.route.metadata.name,
                b.kind,
            ))
    });
    let mut attached_count: BTreeMap<(usize, String), usize> = BTreeMap::new();
    for view in &routes {
        let route = &view.route;
        let route_ns = route.metadata.namespace.as_str();
        let mut parents = Vec::new();
        // Backends and filters are the same for every parent.
        let mut problem: Option<Condition> = None;
        let backends: Vec<routes::Backends> = route
            .spec
            .rules
            .iter()
            .map(|rule| {
                routes::resolve_backends(
                    view.kind,
                    route_ns,
                    &rule.backend_refs,
                    &cluster,
                    &mut problem,
                )
            })
            .collect();
        for parent in &route.spec.parent_refs {
            if parent.group.as_deref().unwrap_or(GROUP) != GROUP
                || parent.kind.as_deref().unwrap_or("Gateway") != "Gateway"
            {
                continue;
            }
            let gw_ns = parent.namespace.as_deref().unwrap_or(route_ns);
            let Some(&gi) = index.get(&(gw_ns.to_owned(), parent.name.clone())) else {
                continue;
            };
            let g = &gateways[gi];
            let attached =
                match routes::attach(view.kind, route, parent, gw_ns, &g.listeners, &cluster) {
                    Ok(all) => claims::limit_attachments(policy, &view.key, view.kind, all, out)?,
                    Err(condition) => Err(condition),
                };
            let accepted = match attached {
                Err(condition) => condition,
                Ok(attachments) => {
                    let mut unsupported: Option<String> = None;
                    for attachment in &attachments {
                        *attached_count
                            .entry((gi, attachment.listener.clone()))
                            .or_default() += 1;
                        let Some(listener) =
                            g.listeners.iter().find(|l| l.name == attachment.listener)
                        else {
                            continue;
                        };
                        let Some(frontend) = frontends.get_mut(&(gi, listener.port)) else {
                            continue;
                        };
                        if view.kind == GRPC_ROUTE {
                            frontend.h2 = true;
                        }
                        let why = add_route(frontend, view, listener, attachment, &backends);
                        if unsupported.is_none() {
                            unsupported = why;
                        }
                    }
                    match unsupported {
                        Some(why) => Condition::new("Accepted", false, "UnsupportedValue", why),
                        None => {
                            Condition::new("Accepted", true, "Accepted", "the route is attached")
                        }
                    }
                }
            };
            let resolved = problem.clone().unwrap_or_else(|| {
                Condition::new(
                    "ResolvedRefs",
                    true,
                    "ResolvedRefs",
                    "all references resolved",
                )
            });
            parents.push(routes::parent_status(
                parent,
                &v.controller_name,
                &[accepted, resolved],
                route.metadata.generation,
            ));
        }
        if !parents.is_empty() {
            out.status_patch(
                StatusVariant::Deployed,
                &api_version,
                view.kind,
                route_ns,
                &route.metadata.name,
                &json!({"parents": parents}),
            )?;
        }
    }

    // Sections, files, Services and Gateway status.
    let mut crt_lists: BTreeMap<String, String> = BTreeMap::new();
    let mut timeouts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for ((gi, _), frontend) in &mut frontends {
        let g = &gateways[*gi];
        if let Some(list) = &frontend.crt_list {
            let mut text = String::new();
            let mut listeners: Vec<&CheckedListener> = g
                .listeners
                .iter()
                .filter(|l| l.valid && frontend.listeners.iter().any(|p| p.name == l.name))
                .collect();
            listeners
                .sort_by_key(|l| std::cmp::Reverse(hostnames::specificity(l.hostname.as_deref())));
            for l in listeners {
                for file in &l.certificates {
                    match &l.hostname {
                        Some(h) => text.push_str(&format!("{file} {h}\n")),
                        None => text.push_str(&format!("{file}\n")),
                    }
                }
            }
            crt_lists.insert(list.clone(), text);
        }
        let rendered = frontend.render();
        out.section(SectionKind::Frontend, frontend.name.clone(), rendered.body)?;
        for (path, content) in rendered.maps {
            out.file(path, content)?;
        }
        for (backend, line) in frontend.timeouts() {
            timeouts.entry(backend).or_default().insert(line);
        }
    }
    // Into `kubernetes-backends`' backends (they exist: the refs resolved).
    for (backend, lines) in timeouts {
        let body: String = lines.into_iter().map(|l| l + "\n").collect();
        out.snippet(SectionKind::Backend, &backend, Slot::RequestRules, 0, body)?;
    }
    for (path, pem) in &certificates.files {
        out.secret_file(path.clone(), pem.clone())?;
    }
    for (path, text) in crt_lists {
        out.file(path, text)?;
    }
    if !gateways.is_empty() {
        out.section(
            SectionKind::Backend,
            INTERNAL_ERROR_BACKEND,
            "    http-request return status 500 content-type text/plain string 'Internal Server Error'\n",
        )?;
    }

    let haproxy_pods: Vec<api::HaproxyPod> = if ctx.count(HAPROXY_PODS) > 0 {
        ctx.objects::<api::HaproxyPod>(HAPROXY_PODS)?
            .map(|p| p.value.clone())
            .collect()
    } else {
        Vec::new()
    };
    for (gi, g) in gateways.iter_mut().enumerate() {
        for l in &mut g.listeners {
            l.attached_routes = attached_count
                .get(&(gi, l.name.clone()))
                .copied()
                .unwrap_or(0);
        }
        let id = format!("{}/{}", g.entry.key.namespace, g.entry.key.name);
        let owner = ObjectKey {
            watch: GATEWAYS.to_owned(),
            namespace: g.entry.key.namespace.clone(),
            name: g.entry.key.name.clone(),
        };
        let service_name = ports::service_name(&g.entry.key.name);
        let service_ports: Vec<Value> = g
            .listeners
            .iter()
            .filter(|l| l.valid)
            .map(|l| l.port)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter_map(|port| {
                let target = allocation.get(&(id.clone(), port))?;
                Some(json!({"name": format!("port-{port}"), "port": port, "targetPort": target, "protocol": "TCP"}))
            })
            .collect();
        let selectorless = !v.service.pod_namespace.is_empty();
        if selectorless && !service_ports.is_empty() {
            out.owned_object(
                &owner,
                "discovery.k8s.io/v1",
                "EndpointSlice",
                service_name.clone(),
                &haproxy_endpoints(&service_name, &service_ports, &haproxy_pods),
            )?;
        }
        if !service_ports.is_empty() {
            let service_type = g
                .parameters
                .service_type
                .as_ref()
                .unwrap_or(&v.service.type_);
            let mut annotations = v.service.annotations.clone();
            annotations.extend(g.parameters.service_annotations.clone());
            let mut labels = v.service.labels.clone();
            labels.insert(
                "gateway.networking.k8s.io/gateway-name".to_owned(),
                g.entry.key.name.clone(),
            );
            out.owned_object(
                &owner,
                "v1",
                "Service",
                service_name.clone(),
                &json!({
                    "metadata": {"labels": labels, "annotations": annotations},
                    "spec": if selectorless {
                        json!({"type": service_type, "ports": service_ports})
                    } else {
                        json!({"type": service_type, "selector": v.service.selector, "ports": service_ports})
                    },
                }),
            )?;
        }
        let addresses: Vec<Value> = if v.addresses.is_empty() {
            owned_addresses
                .get(&(g.entry.key.namespace.clone(), service_name.clone()))
                .cloned()
                .unwrap_or_default()
        } else {
            v.addresses
                .iter()
                .map(|a| {
                    let kind = if a.parse::<std::net::IpAddr>().is_ok() {
                        "IPAddress"
                    } else {
                        "Hostname"
                    };
                    json!({"type": kind, "value": a})
                })
                .collect()
        };
        let status = gateway_status(g, &addresses);
        out.status_patch(
            StatusVariant::Deployed,
            &api_version,
            "Gateway",
            &g.entry.key.namespace,
            &g.entry.key.name,
            &status,
        )?;
    }
    Ok(())
}

/// An HTTPRoute, or a GRPCRoute read as one, named by its watch key.
struct RouteView {
    kind: &'static str,
    /// The watched object's key (warnings are about it).
    key: ObjectKey,
    route: HttpRoute,
}

impl RouteView {
    fn new(kind: &'static str, key: &ObjectKey, mut route: HttpRoute) -> Self {
        // The key is what the host watched: the name and namespace that count.
        route.metadata.namespace.clone_from(&key.namespace);
        route.metadata.name.clone_from(&key.name);
        Self {
            kind,
            key: key.clone(),
            route,
        }
    }

    /// The rule's id in `txn.gw_rule`: `<namespace>/<name>/<rule>`, GRPCRoutes
    /// under `grpc/`, so routes of both kinds may share a name.
    fn rule_id(&self, rule: usize) -> String {
        let m = &self.route.metadata;
        if self.kind == GRPC_ROUTE {
            format!("grpc/{}/{}/{rule}", m.namespace, m.name)
        } else {
            format!("{}/{}/{rule}", m.namespace, m.name)
        }
    }
}

/// The EndpointSlice behind a selectorless Gateway Service: one endpoint
/// per HAProxy pod with an IP (ready when the pod is Ready and not being
/// deleted), each Service port by name at the HAProxy port it targets.
fn haproxy_endpoints(service: &str, service_ports: &[Value], pods: &[api::HaproxyPod]) -> Value {
    let ports: Vec<Value> = service_ports
        .iter()
        .map(|p| json!({"name": p["name"], "port": p["targetPort"], "protocol": "TCP"}))
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

/// Adds one route's rules to a frontend for one listener; returns why a
/// rule could not be served, if one could not.
fn add_route(
    frontend: &mut Frontend,
    view: &RouteView,
    listener: &CheckedListener,
    attachment: &routes::Attachment,
    backends: &[routes::Backends],
) -> Option<String> {
    let mut unsupported = None;
    let protocol = listener.protocol.unwrap_or(Protocol::Http);
    let hosts: Vec<Option<String>> = if attachment.hostnames.is_empty() {
        vec![None]
    } else {
        attachment.hostnames.iter().cloned().map(Some).collect()
    };
    let route = &view.route;
    for (ri, rule) in route.spec.rules.iter().enumerate() {
        let id = view.rule_id(ri);
        let default_match = [api::HttpMatch::default()];
        let rule_matches: &[api::HttpMatch] = if rule.matches.is_empty() {
            &default_match
        } else {
            &rule.matches
        };
        let mut compiled = Vec::new();
        for m in rule_matches {
            match matches::compile(m) {
                Ok(c) => compiled.push(c),
                Err(matches::Unsupported(why)) => {
                    unsupported.get_or_insert(format!("rule {ri}: {why} is not supported"));
                }
            }
        }
        // Filters that need the matched prefix use the first match's.
        let prefix = compiled
            .first()
            .and_then(|c| c.path.prefix().map(str::to_owned));
        let listener_ctx = filters::Listener {
            protocol,
            port: listener.port,
        };
        let compiled_filters = filters::compile(&rule.filters, listener_ctx, prefix.as_deref())
            .and_then(|actions| Ok((actions, filters::rule_timeout(rule.timeouts.as_ref())?)));
        let output = match compiled_filters {
            Ok((actions, timeout_ms)) => RuleOutput {
                actions,
                backends: backends.get(ri).cloned().unwrap_or_default(),
                timeout_ms,
            },
            Err(why) => {
                unsupported.get_or_insert(format!("rule {ri}: {why}"));
                RuleOutput::default()
            }
        };
        frontend.rules.insert(id.clone(), output);
        for (mi, m) in compiled.iter().enumerate() {
            for host in &hosts {
                frontend.entries.push(MatchEntry {
                    listener: listener.name.clone(),
                    host: host.clone(),
                    rule: id.clone(),
                    condition: m.condition.clone(),
                    path: m.path.clone(),
                    path_only: m.path_only,
                    order: (
                        hostnames::specificity(host.as_deref()),
                        m.rank,
                        (
                            route.metadata.creation_timestamp.clone(),
                            route.metadata.namespace.clone(),
                            route.metadata.name.clone(),
                        ),
                        (ri, mi),
                    ),
                });
            }
        }
    }
    unsupported
}

/// The status of a Gateway whose class refused its parameters: not
/// accepted, nothing programmed, no listener served.
fn rejected_class_status(gateway: &Entry<'_, Gateway>, why: &str) -> Value {
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

fn gateway_status(g: &GatewayModel<'_>, addresses: &[Value]) -> Value {
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

haptic_sdk::export_library!(GatewayApi);

#[cfg(test)]
mod tests;

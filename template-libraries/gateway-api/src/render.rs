//! One render: the classes and their parameters, the Gateways and their
//! listeners, ports and certificates, the routes attached to them, and
//! what comes of it (frontends, owned Services and EndpointSlices,
//! statuses).

use std::collections::{BTreeMap, BTreeSet};

use haptic_sdk::claims::HostClaims;
use haptic_sdk::http3::{self, Http3};
use haptic_sdk::ingress::tls::CertificateCache;
use haptic_sdk::names::sanitize;
use haptic_sdk::{Context, ObjectKey, Output, Result, SectionKind, Slot, StatusVariant};
use serde_json::{Value, json};

use crate::api::{
    GROUP, Gateway, GatewayClass, GrpcRoute, HttpRoute, Namespace, ReferenceGrant, Service,
};
use crate::conditions::Condition;
use crate::frontend::{Frontend, PortListener};
use crate::grants::Grants;
use crate::listeners::{CheckedListener, GRPC_ROUTE, HTTP_ROUTE, Protocol};
use crate::parameters::{ClassParameters, Invalid};
use crate::routes::{Cluster, INTERNAL_ERROR_BACKEND};
use crate::tls::Certificates;
use crate::{
    GATEWAY_CLASSES, GATEWAYS, GRPC_ROUTES, GatewayValues, HAPROXY_PODS, HTTP_ROUTES, NAMESPACES,
    OWNED_BY, REFERENCE_GRANTS, SERVICES, SUPPORTED_FEATURES,
};
use crate::{
    api, claims, conditions, external_auth, hostnames, listeners, mirrors, parameters, ports,
    routes,
};
use haptic_sdk::agent::{ExternalAuth, Mirror, MirrorEngine};

use crate::gateway::{GatewayModel, gateway_status, haproxy_endpoints, rejected_class_status};
use crate::rules::{RouteView, add_route};

pub(crate) fn render(
    v: &GatewayValues,
    policy: &HostClaims,
    http3: &Http3,
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
    let mut cluster_ips = BTreeMap::new();
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
        if let Some(ip) = service.spec.cluster_ip.as_ref().filter(|ip| *ip != "None") {
            cluster_ips.insert(key.clone(), ip.clone());
        }
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
        cluster_ips: &cluster_ips,
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
                quic: match http3 {
                    Http3::On(quic) if protocol == Protocol::Https => {
                        u16::try_from(l.port).ok().map(|port| (quic.clone(), port))
                    }
                    _ => None,
                },
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

    if let Http3::Unavailable(why) = http3
        && frontends.values().any(|f| f.crt_list.is_some())
    {
        out.warning(None, http3::UNAVAILABLE_REASON, why.clone())?;
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
        let mut left_out = Vec::new();
        let mirrors: Vec<Option<Mirror>> = route
            .spec
            .rules
            .iter()
            .map(|rule| {
                mirrors::resolve(
                    view.kind,
                    route_ns,
                    &rule.filters,
                    &cluster,
                    &mut problem,
                    &mut left_out,
                )
            })
            .collect();
        let auths: Vec<_> = route
            .spec
            .rules
            .iter()
            .map(|rule| {
                external_auth::resolve(view.kind, route_ns, &rule.filters, &cluster, &mut problem)
            })
            .collect();
        for why in left_out {
            out.warning(
                Some(&view.key),
                "MirrorNotServed",
                format!("{} {route_ns}/{}: {why}", view.kind, route.metadata.name),
            )?;
        }
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
                        let why = add_route(
                            frontend, view, listener, attachment, &backends, &mirrors, &auths,
                        );
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
    // The mirror engine, once, when some rule mirrors.
    let mirror_profiles: BTreeMap<String, Mirror> = frontends
        .values()
        .flat_map(|f| f.rules.iter())
        .filter_map(|(rule, output)| Some((crate::agent_profile(rule), output.mirror.clone()?)))
        .collect();
    if !mirror_profiles.is_empty() {
        let engine = MirrorEngine::new(crate::LIBRARY);
        engine.engine(out)?;
        engine.profiles(out, &mirror_profiles)?;
    }
    // The auth engine likewise; each frontend wrote its own rules.
    let auth_profiles: BTreeMap<String, ExternalAuth> = frontends
        .values()
        .flat_map(|f| f.rules.iter())
        .filter_map(|(rule, output)| Some((crate::agent_profile(rule), output.auth.clone()?)))
        .collect();
    if let Some(slowest) = auth_profiles.values().map(|a| a.timeout_ms).max() {
        let engine = external_auth::engine();
        engine.engine(out, slowest + 1_000)?;
        engine.profiles(out, &auth_profiles)?;
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
            .flat_map(|port| {
                let target = allocation.get(&(id.clone(), port));
                // An HTTPS port serves HTTP/3 on UDP too: the Service
                // carries both protocols (a mixed-protocol Service).
                let https = g
                    .listeners
                    .iter()
                    .any(|l| l.valid && l.port == port && l.protocol == Some(Protocol::Https));
                let tcp = target.map(|target| {
                    json!({"name": format!("port-{port}"), "port": port, "targetPort": target, "protocol": "TCP"})
                });
                let udp = target.filter(|_| https && matches!(http3, Http3::On(_))).map(|target| {
                    json!({"name": format!("port-{port}-quic"), "port": port, "targetPort": target, "protocol": "UDP"})
                });
                tcp.into_iter().chain(udp)
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

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
pub mod external_auth;
pub mod filters;
pub mod frontend;
mod gateway;
pub mod grants;
pub mod hostnames;
pub mod listeners;
pub mod matches;
pub mod mirrors;
pub mod parameters;
pub mod ports;
mod render;
pub mod routes;
mod rules;
pub mod tls;

use std::collections::BTreeMap;

use haptic_sdk::claims::HostClaims;
use haptic_sdk::http3::Http3;
use haptic_sdk::ingress::tls::CertificateCache;
use haptic_sdk::{Context, Error, Info, Library, Output, Plan, Result, Values, Watch};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{
    GROUP, Gateway, GatewayClass, GrpcRoute, HttpRoute, Namespace, ReferenceGrant, Service,
};

/// Watch names.
pub const GATEWAY_CLASSES: &str = "gatewayclasses";
pub const GATEWAYS: &str = "gateways";
pub const HTTP_ROUTES: &str = "httproutes";
pub const GRPC_ROUTES: &str = "grpcroutes";
pub const REFERENCE_GRANTS: &str = "referencegrants";
pub const NAMESPACES: &str = "gateway-namespaces";
pub const SERVICES: &str = "gateway-services";
pub const HAPROXY_PODS: &str = "gateway-haproxy-pods";

/// The library's name, which names its agent engines (auth, mirrors) and
/// their profiles.
pub const LIBRARY: &str = "gateway-api";

/// The agent profile of rule `rule` (`<namespace>/<route>/<index>`):
/// letters, digits, `.`, `-` and `_` only, as the configuration may carry.
pub fn agent_profile(rule: &str) -> String {
    format!(
        "{LIBRARY}.{}",
        haptic_sdk::names::sanitize(&rule.replace('/', "."))
    )
}

/// The label the host puts on owned objects; the library finds its own
/// Services' load balancer addresses by it.
pub(crate) const OWNED_BY: &str = "haproxy-haptic.org/owned-by";

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
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
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
    /// HTTP/3 beside HTTPS listeners (`templateLibraries.base.http3` and
    /// the host's HAProxy).
    http3: Http3,
}

impl Default for GatewayApi {
    fn default() -> Self {
        Self {
            values: GatewayValues::default(),
            certificates: tls::certificate_cache(),
            claims: HostClaims::default(),
            http3: Http3::Off,
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
        self.http3 = Http3::from_values(values);
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
        render::render(
            &self.values,
            &self.claims,
            &self.http3,
            &mut self.certificates,
            ctx,
            out,
        )
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
    // The WIT boundary carries the refusal as text.
    v.ports
        .check()
        .map_err(|error| Error::msg(error.to_string()))?;
    Ok(())
}

haptic_sdk::export_library!(GatewayApi);

#[cfg(test)]
mod tests;

//! The Gateway API objects (`gateway.networking.k8s.io`, v1.6 standard
//! channel) as this library reads them: serde types holding only the fields
//! it uses, every one optional or defaulted, so an object written by a
//! newer API version (or offline, unvalidated) still parses.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// The API group of every Gateway API kind.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// `null` reads as the default (a list the API server sends as `null`).
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The metadata fields the library reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Meta {
    pub name: String,
    pub namespace: String,
    pub generation: i64,
    pub creation_timestamp: String,
    #[serde(deserialize_with = "nullable")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayClass {
    pub metadata: Meta,
    pub spec: GatewayClassSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayClassSpec {
    pub controller_name: String,
    /// Where the class's parameters are ([`crate::parameters`]).
    pub parameters_ref: Option<ParametersRef>,
}

/// `spec.parametersRef` of a GatewayClass.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ParametersRef {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

/// A ConfigMap as the parameters watch keeps it: its name and data.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigMap {
    pub metadata: Meta,
    #[serde(deserialize_with = "nullable")]
    pub data: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gateway {
    pub metadata: Meta,
    pub spec: GatewaySpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(deserialize_with = "nullable")]
    pub listeners: Vec<Listener>,
    #[serde(deserialize_with = "nullable")]
    pub addresses: Vec<GatewayAddress>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayAddress {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Listener {
    pub name: String,
    pub hostname: Option<String>,
    pub port: i32,
    pub protocol: String,
    pub tls: Option<ListenerTls>,
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerTls {
    pub mode: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub certificate_refs: Vec<ObjectReference>,
}

/// A `SecretObjectReference` or a `BackendObjectReference` (same fields,
/// the port only used by the latter).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectReference {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AllowedRoutes {
    pub namespaces: Option<RouteNamespaces>,
    #[serde(deserialize_with = "nullable")]
    pub kinds: Vec<RouteGroupKind>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteNamespaces {
    pub from: Option<String>,
    pub selector: Option<LabelSelector>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelector {
    #[serde(deserialize_with = "nullable")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "nullable")]
    pub match_expressions: Vec<LabelExpression>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelExpression {
    pub key: String,
    pub operator: String,
    #[serde(deserialize_with = "nullable")]
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Whether `labels` match, by Kubernetes' rules; an operator this
    /// library does not know matches nothing.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let value = labels.get(&e.key);
                match e.operator.as_str() {
                    "In" => value.is_some_and(|v| e.values.contains(v)),
                    "NotIn" => !value.is_some_and(|v| e.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteGroupKind {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub kind: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRoute {
    pub metadata: Meta,
    pub spec: HttpRouteSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteSpec {
    #[serde(deserialize_with = "nullable")]
    pub parent_refs: Vec<ParentRef>,
    #[serde(deserialize_with = "nullable")]
    pub hostnames: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub rules: Vec<HttpRule>,
}

/// A route's `parentRef`, echoed as written in the route's status.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default)]
pub struct ParentRef {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRule {
    pub name: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub matches: Vec<HttpMatch>,
    #[serde(deserialize_with = "nullable")]
    pub filters: Vec<HttpFilter>,
    #[serde(deserialize_with = "nullable")]
    pub backend_refs: Vec<BackendRef>,
    pub timeouts: Option<HttpTimeouts>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpTimeouts {
    pub request: Option<String>,
    pub backend_request: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMatch {
    pub path: Option<PathMatch>,
    #[serde(deserialize_with = "nullable")]
    pub headers: Vec<ValueMatch>,
    #[serde(deserialize_with = "nullable")]
    pub query_params: Vec<ValueMatch>,
    pub method: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PathMatch {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub value: Option<String>,
}

/// A header or query parameter match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ValueMatch {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpFilter {
    #[serde(rename = "type")]
    pub type_: String,
    pub request_header_modifier: Option<HeaderModifier>,
    pub response_header_modifier: Option<HeaderModifier>,
    pub request_redirect: Option<RequestRedirect>,
    pub url_rewrite: Option<UrlRewrite>,
    pub request_mirror: Option<RequestMirror>,
    pub external_auth: Option<ExternalAuthFilter>,
}

/// `ExternalAuth` (experimental): an auth service asked about each request
/// before it is routed.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExternalAuthFilter {
    /// `HTTP` or `GRPC`.
    pub protocol: String,
    pub backend_ref: BackendObjectRef,
    pub http: Option<HttpAuthConfig>,
    pub forward_body: Option<ForwardBody>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpAuthConfig {
    /// Prefixed to the request's path in the sub-request.
    pub path: String,
    /// The client's headers sent besides `Authorization`.
    #[serde(deserialize_with = "nullable")]
    pub allowed_headers: Vec<String>,
    /// The auth service's headers copied to the request sent upstream.
    #[serde(deserialize_with = "nullable")]
    pub allowed_response_headers: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ForwardBody {
    pub max_size: i64,
}

/// `RequestMirror`: a copy of each request (or `percent`, or `fraction`, of
/// them) to `backendRef`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestMirror {
    pub backend_ref: BackendObjectRef,
    pub percent: Option<i32>,
    pub fraction: Option<MirrorFraction>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackendObjectRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MirrorFraction {
    pub numerator: i32,
    pub denominator: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderModifier {
    #[serde(deserialize_with = "nullable")]
    pub set: Vec<Header>,
    #[serde(deserialize_with = "nullable")]
    pub add: Vec<Header>,
    #[serde(deserialize_with = "nullable")]
    pub remove: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Header {
    pub name: String,
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestRedirect {
    pub scheme: Option<String>,
    pub hostname: Option<String>,
    pub path: Option<PathModifier>,
    pub port: Option<i32>,
    pub status_code: Option<i32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UrlRewrite {
    pub hostname: Option<String>,
    pub path: Option<PathModifier>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PathModifier {
    #[serde(rename = "type")]
    pub type_: String,
    pub replace_full_path: Option<String>,
    pub replace_prefix_match: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BackendRef {
    pub group: Option<String>,
    pub kind: Option<String>,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<i32>,
    pub weight: Option<i32>,
    #[serde(deserialize_with = "nullable")]
    pub filters: Vec<HttpFilter>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReferenceGrant {
    pub metadata: Meta,
    pub spec: ReferenceGrantSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReferenceGrantSpec {
    #[serde(deserialize_with = "nullable")]
    pub from: Vec<GrantFrom>,
    #[serde(deserialize_with = "nullable")]
    pub to: Vec<GrantTo>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrantFrom {
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrantTo {
    pub group: String,
    pub kind: String,
    pub name: Option<String>,
}

/// A Namespace, for `allowedRoutes.namespaces.from: Selector`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Namespace {
    pub metadata: Meta,
}

/// A Service: its ports (to resolve backendRefs) and, for the Services this
/// library owns, the load balancer addresses (`status.addresses`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Service {
    pub metadata: Meta,
    pub spec: ServiceSpec,
    pub status: ServiceStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceSpec {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    #[serde(rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub ports: Vec<ServicePort>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServicePort {
    pub port: i32,
    pub protocol: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceStatus {
    pub load_balancer: LoadBalancerStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancerStatus {
    #[serde(deserialize_with = "nullable")]
    pub ingress: Vec<LoadBalancerIngress>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancerIngress {
    pub ip: Option<String>,
    pub hostname: Option<String>,
}

/// A GRPCRoute, read as the HTTPRoute it amounts to: gRPC is HTTP/2 with
/// the path `/<service>/<method>`, so a method match is a path match.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRoute {
    pub metadata: Meta,
    pub spec: GrpcRouteSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRouteSpec {
    #[serde(deserialize_with = "nullable")]
    pub parent_refs: Vec<ParentRef>,
    #[serde(deserialize_with = "nullable")]
    pub hostnames: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub rules: Vec<GrpcRule>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRule {
    pub name: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub matches: Vec<GrpcMatch>,
    #[serde(deserialize_with = "nullable")]
    pub filters: Vec<HttpFilter>,
    #[serde(deserialize_with = "nullable")]
    pub backend_refs: Vec<BackendRef>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcMatch {
    pub method: Option<GrpcMethodMatch>,
    #[serde(deserialize_with = "nullable")]
    pub headers: Vec<ValueMatch>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcMethodMatch {
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub service: Option<String>,
    pub method: Option<String>,
}

impl GrpcRoute {
    /// The equivalent HTTPRoute (see [`GrpcMethodMatch::path`]).
    pub fn to_http(&self) -> HttpRoute {
        HttpRoute {
            metadata: self.metadata.clone(),
            spec: HttpRouteSpec {
                parent_refs: self.spec.parent_refs.clone(),
                hostnames: self.spec.hostnames.clone(),
                rules: self
                    .spec
                    .rules
                    .iter()
                    .map(|rule| HttpRule {
                        name: rule.name.clone(),
                        matches: rule
                            .matches
                            .iter()
                            .map(|m| HttpMatch {
                                path: m.method.as_ref().map(GrpcMethodMatch::path),
                                headers: m.headers.clone(),
                                query_params: Vec::new(),
                                method: None,
                            })
                            .collect(),
                        filters: rule.filters.clone(),
                        backend_refs: rule.backend_refs.clone(),
                        timeouts: None,
                    })
                    .collect(),
            },
        }
    }
}

impl GrpcMethodMatch {
    /// The path match of a method match: Exact service and method is the
    /// path `/<service>/<method>`; a service alone the prefix `/<service>`;
    /// a method alone, or regular expressions, a path expression.
    pub fn path(&self) -> PathMatch {
        let service = self.service.as_deref().filter(|s| !s.is_empty());
        let method = self.method.as_deref().filter(|m| !m.is_empty());
        let (type_, value) = match (self.type_.as_deref().unwrap_or("Exact"), service, method) {
            ("Exact", Some(s), Some(m)) => ("Exact", format!("/{s}/{m}")),
            ("Exact", Some(s), None) => ("PathPrefix", format!("/{s}")),
            ("Exact", None, Some(m)) => (
                "RegularExpression",
                format!("^/[^/]+/{}$", haptic_sdk::haproxy::regex_escape(m)),
            ),
            ("Exact", None, None) => ("PathPrefix", "/".to_owned()),
            ("RegularExpression", s, m) => (
                "RegularExpression",
                format!("^/({})/({})$", s.unwrap_or("[^/]+"), m.unwrap_or("[^/]+")),
            ),
            // An unknown type becomes a path type the match compiler refuses
            // by name.
            (other, _, _) => (other, String::new()),
        };
        PathMatch {
            type_: Some(type_.to_owned()),
            value: Some(value),
        }
    }
}

/// An HAProxy pod, for the EndpointSlice behind each Gateway's Service.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaproxyPod {
    pub metadata: PodMeta,
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodMeta {
    pub name: String,
    pub deletion_timestamp: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatus {
    #[serde(rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub conditions: Vec<PodCondition>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

impl HaproxyPod {
    /// Ready and not being deleted.
    pub fn is_ready(&self) -> bool {
        self.metadata.deletion_timestamp.is_none()
            && self
                .status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    }
}

//! `ExternalAuth` filters (protocol `HTTP`) as the agent's auth profiles
//! (`haptic_sdk::agent::AuthEngine` answering [`Answers::PassThrough`],
//! docs/spoa.md): the backendRef resolved like a backendRef (kind,
//! ReferenceGrant, port) and asked at the Service's cluster IP, so
//! kube-proxy balances the sub-requests over the ready endpoints.
//!
//! The sub-request is the request's method, `http.path` then the request's
//! path and query, its Host, `Authorization` and the `allowedHeaders`, no
//! body. A 200 lets the request through with the `allowedResponseHeaders`
//! copied onto it; any other status is the client's answer. Whatever keeps
//! a rule from being asked (a reference that does not resolve, protocol
//! `GRPC`, `forwardBody`) makes the rule answer 500: a route that asked for
//! authentication is never served without it.

use haptic_sdk::agent::{Answers, AuthEngine, ExternalAuth, check_variables, is_safe_header_name};

use crate::api::HttpFilter;
use crate::conditions::Condition;
use crate::filters::FilterError;
use crate::routes::{Cluster, ServiceRef, resolve_service};

/// The headers copied from a 200 when `allowedResponseHeaders` is empty.
/// The spec says "all but Host": HAProxy's rules name each header they
/// set, so haptic copies those auth services commonly answer with
/// (oauth2-proxy's, Authelia's and the `X-Forwarded-*` identity headers);
/// a route wanting another names it.
pub const DEFAULT_RESPONSE_HEADERS: &[&str] = &[
    "X-Auth-Request-User",
    "X-Auth-Request-Email",
    "X-Auth-Request-Groups",
    "X-Auth-Request-Preferred-Username",
    "X-Auth-Request-Access-Token",
    "X-Forwarded-User",
    "X-Forwarded-Email",
    "X-Forwarded-Groups",
    "X-Forwarded-Preferred-Username",
    "Remote-User",
    "Remote-Email",
    "Remote-Groups",
    "Remote-Name",
];

/// The library's auth engine: its profiles' answers pass through
/// ([`Answers::PassThrough`]), the rules each frontend writes and the
/// engine render writes once.
pub fn engine() -> AuthEngine {
    AuthEngine::new(crate::LIBRARY).answering(Answers::PassThrough)
}

/// What a rule's `ExternalAuth` filter comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleAuth {
    /// No `ExternalAuth` filter.
    Open,
    /// The agent asks the auth service with this profile.
    Ask(Box<ExternalAuth>),
    /// Its backendRef does not resolve: the rule answers 500, as a rule
    /// whose backendRefs do not (the route's ResolvedRefs says why).
    Unresolved,
}

/// A rule's `ExternalAuth`; an error is why it cannot be served (the rule
/// answers 500 and the route's `Accepted` condition says why). A backendRef
/// that does not resolve sets the route's ResolvedRefs condition in
/// `problem` (the first problem wins, as for backendRefs).
pub fn resolve(
    route_kind: &str,
    route_namespace: &str,
    filters: &[HttpFilter],
    cluster: &Cluster<'_>,
    problem: &mut Option<Condition>,
) -> Result<RuleAuth, FilterError> {
    let Some(filter) = filters.iter().find_map(|f| f.external_auth.as_ref()) else {
        return Ok(RuleAuth::Open);
    };
    if route_kind != crate::listeners::HTTP_ROUTE {
        return Err(FilterError(format!(
            "ExternalAuth is an HTTPRoute filter; a {route_kind} is not authenticated, so this rule answers 500"
        )));
    }
    if filter.protocol != "HTTP" {
        return Err(FilterError(format!(
            "ExternalAuth protocol {:?} is not served (haptic's agent speaks HTTP to auth services, not Envoy's ext_authz gRPC); this rule answers 500 until the protocol is HTTP",
            filter.protocol
        )));
    }
    if filter.forward_body.as_ref().is_some_and(|b| b.max_size > 0) {
        return Err(FilterError(
            "ExternalAuth forwardBody is not served (the agent sends the auth service no body); this rule answers 500 until forwardBody is removed or its maxSize is 0".to_owned(),
        ));
    }
    let r = &filter.backend_ref;
    let service = ServiceRef::from(r);
    let (namespace, port) = match resolve_service(route_kind, route_namespace, &service, cluster) {
        Ok(found) => found,
        Err(condition) => {
            problem.get_or_insert(condition);
            return Ok(RuleAuth::Unresolved);
        }
    };
    let authority = cluster
        .cluster_ip_authority(namespace, &r.name, port)
        .ok_or_else(|| {
            FilterError(format!(
                "the ExternalAuth Service {namespace}/{} has no cluster IP (headless), where the agent asks it; this rule answers 500",
                r.name
            ))
        })?;
    let http = filter.http.clone().unwrap_or_default();
    // The path is data the agent reads, never configuration; only a `$`
    // the agent would take for a variable is refused.
    check_variables(&http.path).map_err(|why| {
        FilterError(format!(
            "the ExternalAuth path {:?} cannot be sent: {why}; this rule answers 500",
            http.path
        ))
    })?;
    let mut auth = ExternalAuth::new(format!("http://{authority}{}$request_uri", http.path));
    auth.method = "$request_method".to_owned();
    auth.host = Some("$host".to_owned());
    auth.answers = Answers::PassThrough;
    // A denial is the auth service's answer, cookies included.
    auth.always_set_cookie = true;
    auth.client_headers = Some(
        std::iter::once("Authorization".to_owned())
            .chain(http.allowed_headers.iter().map(|h| h.trim().to_owned()))
            .filter(|h| !h.is_empty())
            .collect(),
    );
    auth.response_headers = if http.allowed_response_headers.is_empty() {
        DEFAULT_RESPONSE_HEADERS
            .iter()
            .map(|h| (*h).to_owned())
            .collect()
    } else {
        let (safe, unsafe_names): (Vec<String>, Vec<String>) = http
            .allowed_response_headers
            .iter()
            .map(|h| h.trim().to_owned())
            .partition(|h| is_safe_header_name(h));
        if !unsafe_names.is_empty() {
            return Err(FilterError(format!(
                "ExternalAuth allowedResponseHeaders {unsafe_names:?} are not header names haptic writes (letters, digits and -); this rule answers 500"
            )));
        }
        safe
    };
    Ok(RuleAuth::Ask(Box::new(auth)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::{BackendObjectRef, ExternalAuthFilter, ForwardBody, HttpAuthConfig};
    use crate::grants::Grants;

    fn filter(protocol: &str, service: &str) -> HttpFilter {
        HttpFilter {
            type_: "ExternalAuth".into(),
            external_auth: Some(ExternalAuthFilter {
                protocol: protocol.into(),
                backend_ref: BackendObjectRef {
                    name: service.into(),
                    port: Some(8080),
                    ..BackendObjectRef::default()
                },
                http: Some(HttpAuthConfig {
                    path: "/check".into(),
                    allowed_headers: vec!["Cookie".into()],
                    allowed_response_headers: vec![],
                }),
                forward_body: None,
            }),
            ..HttpFilter::default()
        }
    }

    fn with_cluster<T>(f: impl FnOnce(&Cluster<'_>) -> T) -> T {
        let grants = Grants::default();
        let namespaces = BTreeMap::new();
        let services = BTreeMap::from([
            (("ns".to_owned(), "auth".to_owned()), vec![8080]),
            (("ns".to_owned(), "headless".to_owned()), vec![8080]),
        ]);
        let cluster_ips =
            BTreeMap::from([(("ns".to_owned(), "auth".to_owned()), "10.96.0.7".to_owned())]);
        f(&Cluster {
            grants: &grants,
            namespaces: &namespaces,
            services: &services,
            cluster_ips: &cluster_ips,
        })
    }

    #[test]
    fn an_http_filter_becomes_a_pass_through_profile_at_the_cluster_ip() {
        let resolved = with_cluster(|cluster| {
            resolve(
                "HTTPRoute",
                "ns",
                &[filter("HTTP", "auth")],
                cluster,
                &mut None,
            )
        });
        let Ok(RuleAuth::Ask(auth)) = resolved else {
            panic!("not asked: {resolved:?}");
        };
        assert_eq!(auth.url, "http://10.96.0.7:8080/check$request_uri");
        assert_eq!(auth.method, "$request_method");
        assert_eq!(auth.host.as_deref(), Some("$host"));
        assert_eq!(auth.answers, Answers::PassThrough);
        assert_eq!(
            auth.client_headers,
            Some(vec!["Authorization".to_owned(), "Cookie".to_owned()])
        );
        assert_eq!(auth.response_headers.len(), DEFAULT_RESPONSE_HEADERS.len());
    }

    /// Each refusal is a 500 for the rule, never a route served open.
    #[test]
    fn what_cannot_be_asked_fails_the_rule_closed() {
        with_cluster(|cluster| {
            let mut problem = None;
            let missing = resolve(
                "HTTPRoute",
                "ns",
                &[filter("HTTP", "gone")],
                cluster,
                &mut problem,
            );
            assert_eq!(missing, Ok(RuleAuth::Unresolved));
            assert_eq!(problem.map(|c| c.reason), Some("BackendNotFound"));
            for (route_kind, f) in [
                ("HTTPRoute", filter("GRPC", "auth")),
                ("HTTPRoute", filter("HTTP", "headless")),
                ("GRPCRoute", filter("HTTP", "auth")),
            ] {
                assert!(
                    resolve(route_kind, "ns", &[f], cluster, &mut None).is_err(),
                    "{route_kind}"
                );
            }
            let mut body = filter("HTTP", "auth");
            if let Some(a) = body.external_auth.as_mut() {
                a.forward_body = Some(ForwardBody { max_size: 10 });
            }
            assert!(resolve("HTTPRoute", "ns", &[body], cluster, &mut None).is_err());
            let mut dollar = filter("HTTP", "auth");
            if let Some(a) = dollar.external_auth.as_mut() {
                a.http = Some(HttpAuthConfig {
                    path: "/a$b".into(),
                    ..HttpAuthConfig::default()
                });
            }
            assert!(resolve("HTTPRoute", "ns", &[dollar], cluster, &mut None).is_err());
        });
    }
}

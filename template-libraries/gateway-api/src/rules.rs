//! A route's rules as frontend entries: each rule's matches, filters and
//! backends, for one listener.

use haptic_sdk::ObjectKey;
use haptic_sdk::agent::Mirror;

use crate::api::HttpRoute;
use crate::external_auth::RuleAuth;
use crate::frontend::{Frontend, MatchEntry, RuleOutput};
use crate::listeners::{CheckedListener, GRPC_ROUTE, Protocol};
use crate::{api, filters, hostnames, matches, routes};

/// An HTTPRoute, or a GRPCRoute read as one, named by its watch key.
pub(crate) struct RouteView {
    pub(crate) kind: &'static str,
    /// The watched object's key (warnings are about it).
    pub(crate) key: ObjectKey,
    pub(crate) route: HttpRoute,
}

impl RouteView {
    pub(crate) fn new(kind: &'static str, key: &ObjectKey, mut route: HttpRoute) -> Self {
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
    pub(crate) fn rule_id(&self, rule: usize) -> String {
        let m = &self.route.metadata;
        if self.kind == GRPC_ROUTE {
            format!("grpc/{}/{}/{rule}", m.namespace, m.name)
        } else {
            format!("{}/{}/{rule}", m.namespace, m.name)
        }
    }
}

/// Adds one route's rules to a frontend for one listener; returns why a
/// rule could not be served, if one could not.
pub(crate) fn add_route(
    frontend: &mut Frontend,
    view: &RouteView,
    listener: &CheckedListener,
    attachment: &routes::Attachment,
    backends: &[routes::Backends],
    mirrors: &[Option<Mirror>],
    auths: &[Result<RuleAuth, filters::FilterError>],
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
        let mirror = mirrors.get(ri).cloned().flatten();
        let compiled_filters = compiled_filters.and_then(|compiled| {
            // The agent copies a request as HTTP/1.1: a gRPC call would not
            // survive it.
            if view.kind == GRPC_ROUTE && mirror.is_some() {
                Err(filters::FilterError::from(
                    "RequestMirror on a GRPCRoute is not served (the agent copies requests as HTTP/1.1)",
                ))
            } else {
                Ok(compiled)
            }
        });
        // An auth service that cannot be asked fails the rule (500), never
        // serves it open.
        let auth = auths.get(ri).cloned().unwrap_or(Ok(RuleAuth::Open));
        let output = match (compiled_filters, auth) {
            (Err(why), _) | (_, Err(why)) => {
                unsupported.get_or_insert(format!("rule {ri}: {why}"));
                RuleOutput::default()
            }
            // Its auth service's reference does not resolve: 500, as for a
            // backendRef that does not (ResolvedRefs says why).
            (Ok(_), Ok(RuleAuth::Unresolved)) => RuleOutput::default(),
            (Ok((actions, timeout_ms)), Ok(auth)) => RuleOutput {
                actions,
                backends: backends.get(ri).cloned().unwrap_or_default(),
                timeout_ms,
                mirror,
                auth: match auth {
                    RuleAuth::Ask(profile) => Some(*profile),
                    RuleAuth::Open | RuleAuth::Unresolved => None,
                },
            },
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

//! Canary Ingresses: each joins the main route of the same host and path,
//! which sends the requests the canary's rules select to its backend.

use std::fmt::Write as _;

use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::{Context, Entry, Output, Result};

use super::{Routing, resolve, skipped};
use crate::UNAVAILABLE_BACKEND;
use crate::policy::Policy;

impl Routing {
    /// A canary Ingress: for each of its paths, the main route of the same
    /// host and path sends the requests the canary rules select to the
    /// canary's backend.
    pub(crate) fn add_canary(
        &mut self,
        ctx: &Context<'_>,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        policy: &Policy,
    ) -> Result<()> {
        let Some(canary) = &policy.canary else {
            return Ok(());
        };
        let Some(spec) = ingress.spec.as_ref() else {
            return Ok(());
        };
        let mut backends = Vec::new();
        for rule in spec.rules.iter().flatten() {
            let host = rule.host.as_deref().unwrap_or("").to_ascii_lowercase();
            for path in rule.http.iter().flat_map(|h| &h.paths) {
                let path_text = path.path.as_deref().unwrap_or("/");
                let Some(service) = path.backend.service.as_ref() else {
                    skipped(
                        out,
                        ingress,
                        id,
                        path_text,
                        &host,
                        "a backend without a Service is not supported",
                    )?;
                    continue;
                };
                let Some((main, main_backend)) = self
                    .mains
                    .get(&(host.clone(), path_text.to_owned()))
                    .cloned()
                else {
                    out.warning(
                        Some(ingress.key),
                        "CanaryWithoutMain",
                        format!(
                            "Ingress {id:?} is a canary, but no served Ingress routes host {host:?} path {path_text:?}: create the main Ingress first (the canary never takes requests alone, as in ingress-nginx)"
                        ),
                    )?;
                    continue;
                };
                let main_namespace = main.split_once('/').map_or("", |(ns, _)| ns);
                if !self.canary_across_namespaces && main_namespace != ingress.key.namespace {
                    out.warning(
                        Some(ingress.key),
                        "CanaryAcrossNamespaces",
                        format!(
                            "Ingress {id:?} is a canary of host {host:?} path {path_text:?}, whose main Ingress {main:?} is in another namespace: a canary joins only a main Ingress of its own namespace, so it takes no requests there (an admin may allow it with templateLibraries.ingressNginx.canaryAcrossNamespaces)"
                        ),
                    )?;
                    continue;
                }
                let backend = resolve(ctx, out, ingress, id, service)?;
                if backend == main_backend {
                    continue;
                }
                self.canaries += 1;
                let mark = self.canaries;
                let (namespace, name) = main.split_once('/').unwrap_or(("", main.as_str()));
                let acl = haptic_sdk::ingress::matched_ingress_acl(namespace, name);
                let (request, routing) = &mut self.canary_rules;
                let route = format!("{{ var(txn.ingress_nginx_canary_route) -m int {mark} }}");
                let undecided = "!{ var(txn.ingress_nginx_canary) -m found }";
                // The main Ingress's request for the backend of this path
                // (ingress-nginx merges the canary into that upstream).
                let _ = writeln!(
                    request,
                    "    http-request set-var(txn.ingress_nginx_canary_route) int({mark}) if {acl} {{ var(txn.ingress_nginx_backend) -m str {main_backend} }} !{{ var(txn.ingress_nginx_canary_route) -m found }}"
                );
                let mut decide = |verdict: &str, when: String| {
                    let _ = writeln!(
                        request,
                        "    http-request set-var(txn.ingress_nginx_canary) str({verdict}) if {route} {undecided} {when}"
                    );
                };
                if let Some(header) = &canary.header {
                    let fetch = format!("req.hdr({header})");
                    if let Some(value) = &canary.header_value {
                        decide("yes", format!("{{ {fetch} -m str {value} }}"));
                    } else if let Some(pattern) = &canary.header_pattern {
                        decide(
                            "yes",
                            format!("{{ {fetch} -m reg {} }}", haptic_sdk::names::quote(pattern)),
                        );
                    } else {
                        decide("no", format!("{{ {fetch} -m str never }}"));
                        decide("yes", format!("{{ {fetch} -m str always }}"));
                    }
                }
                if let Some(cookie) = &canary.cookie {
                    decide("no", format!("{{ req.cook({cookie}) -m str never }}"));
                    decide("yes", format!("{{ req.cook({cookie}) -m str always }}"));
                }
                if canary.weight > 0 {
                    decide(
                        "yes",
                        format!("{{ rand({}) -m int lt {} }}", canary.total, canary.weight),
                    );
                }
                let _ = writeln!(
                    routing,
                    "    use_backend {backend} if {route} {{ var(txn.ingress_nginx_canary) -m str yes }}"
                );
                if backend != UNAVAILABLE_BACKEND && !backends.contains(&backend) {
                    backends.push(backend.clone());
                    if let Some(options) = self.ingress_server_options.get(&main).cloned() {
                        self.add_server_options(
                            out,
                            ingress,
                            id,
                            &options,
                            std::slice::from_ref(&backend),
                        )?;
                    }
                    if let Some(rules) = self.ingress_backend_rules.get(&main).cloned() {
                        self.backend_rules
                            .entry(backend.clone())
                            .or_default()
                            .push_str(&rules);
                    }
                }
            }
        }
        self.add_options(out, ingress, id, policy, &backends)
    }
}

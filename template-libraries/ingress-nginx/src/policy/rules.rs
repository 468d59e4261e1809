//! A policy written as HAProxy configuration: the frontend request and
//! response rules on the requests the Ingress routes
//! (`txn.haptic_ingress`), the backend's request rules and options, and the
//! stick tables of the limits.
//!
//! The request rules follow nginx's phases: redirects (rewrite phase)
//! before the request limits (preaccess) before source ranges (access)
//! before the body size (read while the body arrives); then the headers
//! sent to the backend.

use std::fmt::Write as _;

use haptic_sdk::extending::StickCounter;
use haptic_sdk::haproxy;
use haptic_sdk::ingress::matched_ingress_acl;
use haptic_sdk::names::{quote, sanitize};

use crate::lines;
use crate::parse::log_format_literal;

use super::Policy;
use super::cors::{cors_headers, origin_regex};

/// The stick counters of the limits: the ones the SDK's registry of shared
/// resources lists for this library (a test holds the two together), so a
/// library author reads there which are taken.
const RPS_COUNTER: StickCounter = StickCounter::SC0;
const RPM_COUNTER: StickCounter = StickCounter::SC1;
const CONNECTIONS_COUNTER: StickCounter = StickCounter::SC2;

/// The frontend's bwlim-out filter `limit-rate` sets per answer
/// ([`BANDWIDTH_FILTER_LINE`]); it limits only the requests a
/// `set-bandwidth-limit` rule names.
pub const BANDWIDTH_FILTER: &str = "haptic_limit_rate";

/// The filter's declaration, once per frontend that has a `limit-rate`:
/// per-stream limits (each answer its own), whose defaults the rules
/// replace.
pub const BANDWIDTH_FILTER_LINE: &str =
    "    filter bwlim-out haptic_limit_rate default-limit 1m default-period 1s\n";

/// ACME HTTP-01 challenges are never redirected (certificates must renew).
const ACME: &str = "!{ path_beg /.well-known/acme-challenge/ }";

impl Policy {
    /// The backend lines of the affinity and balancing settings (`None`
    /// without any): they belong to the whole backend, so the first
    /// Ingress to set them on a Service port decides.
    pub fn backend_options(&self) -> Option<String> {
        let mut out = String::new();
        if let Some(balance) = &self.balance {
            let _ = writeln!(out, "    balance {balance}");
        }
        if let Some(conditions) = &self.retry_on {
            let _ = writeln!(out, "    retry-on {conditions}");
        }
        if let Some(retries) = self.retries {
            let _ = writeln!(out, "    retries {retries}");
        }
        if let Some(seconds) = self.connect_timeout {
            let _ = writeln!(out, "    timeout connect {seconds}s");
        }
        if let Some(c) = &self.affinity {
            let mut line = format!(
                "    cookie {} insert indirect nocache dynamic httponly",
                c.name
            );
            if c.secure {
                line.push_str(" secure");
            }
            if let Some(domain) = &c.domain {
                let _ = write!(line, " domain {domain}");
            }
            if let Some(same_site) = &c.same_site {
                let _ = write!(line, " attr \"SameSite={same_site}\"");
            }
            if let Some(max_age) = c.max_age {
                let _ = write!(line, " attr \"Max-Age={max_age}\"");
            }
            if let Some(path) = &c.path {
                let _ = write!(line, " attr \"Path={path}\"");
            }
            let _ = writeln!(out, "{line}");
            if !c.secure {
                // ingress-nginx marks the cookie Secure whenever the request
                // came over TLS, whatever session-cookie-secure says.
                let _ = writeln!(
                    out,
                    "    http-after-response replace-header Set-Cookie '^({}=.*)$' '\\1; Secure' if {{ ssl_fc }}",
                    haptic_sdk::haproxy::regex_escape(&c.name)
                );
            }
            // Dynamic cookies hash the server's address with this key: no
            // per-server `cookie` value on kubernetes-backends' lines, and
            // a pod keeps its cookie across renders and reloads.
            let _ = writeln!(out, "    dynamic-cookie-key haptic-ingress-nginx");
        }
        (!out.is_empty()).then_some(out)
    }

    /// The frontend request rules for the requests Ingress `id`
    /// (`namespace/name`) routes. `tls_hosts` are its `spec.tls` hosts and
    /// `hosts` its rules' hosts (aliases included).
    pub fn frontend_rules(&self, id: &str, tls_hosts: &[String], hosts: &[String]) -> String {
        let (namespace, name) = id.split_once('/').unwrap_or(("", id));
        let acl = matched_ingress_acl(namespace, name);
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str("    ");
            out.push_str(&text);
            out.push('\n');
        };
        if self.from_to_www {
            for host in hosts.iter().filter(|h| !h.starts_with('*')) {
                let from = match host.strip_prefix("www.") {
                    Some(bare) => bare.to_owned(),
                    None => format!("www.{host}"),
                };
                line(format!(
                    "http-request redirect code 308 location %[ssl_fc,iif(https,http)]://{host}%[capture.req.uri] if {{ var(txn.haptic_host) -m str {from} }} !{{ var(txn.haptic_ingress) -m found }}"
                ));
            }
        }
        if self.force_ssl_redirect {
            line(format!(
                "http-request redirect scheme https code 308 if !{{ ssl_fc }} {acl} {ACME}"
            ));
        } else if self.ssl_redirect && !tls_hosts.is_empty() {
            // Many TLS hosts: one ACL over several lines, not one line past
            // HAProxy's word limit.
            let name = lines::acl_name(id, "tls_host");
            lines::acl(&name, "var(txn.haptic_host) -m str", tls_hosts)
                .into_iter()
                .for_each(&mut line);
            line(format!(
                "http-request redirect scheme https code 308 if !{{ ssl_fc }} {acl} {name} {ACME}"
            ));
        }
        if let Some((url, code)) = &self.redirect {
            line(format!(
                "http-request redirect location {} code {code} if {acl}",
                quote(&log_format_literal(url))
            ));
        }
        // Quoted as one word: written bare, a `#` in the root cut the line
        // before its `if`, and every host of the frontend redirected.
        if let Some(root) = &self.app_root
            && let Ok(location) = haproxy::argument(&format!(
                "%[ssl_fc,iif(https,http)]://%[req.hdr(host)]{}",
                log_format_literal(root)
            ))
        {
            line(format!(
                "http-request redirect location {location} code 302 if {acl} {{ path / }}"
            ));
        }
        let table = |kind: &str| limit_table(id, kind);
        let exempt = if self.limits.exempt.is_empty() {
            String::new()
        } else {
            let name = lines::acl_name(id, "limit_exempt");
            lines::acl(&name, "src", &self.limits.exempt)
                .into_iter()
                .for_each(&mut line);
            format!(" !{name}")
        };
        for (counter, kind, limit, fetch) in [
            (RPS_COUNTER, "rps", self.limits.rps, "sc_http_req_rate"),
            (RPM_COUNTER, "rpm", self.limits.rpm, "sc_http_req_rate"),
            (
                CONNECTIONS_COUNTER,
                "conn",
                self.limits.connections,
                "sc_conn_cur",
            ),
        ] {
            if let Some(limit) = limit {
                let counter = counter.index();
                let fetch = format!("{fetch}({counter})");
                line(format!(
                    "http-request track-sc{counter} src table {} if {acl}{exempt}",
                    table(kind)
                ));
                // Counts include this request (and its connection): the
                // limit-th is admitted, the next one refused.
                line(format!(
                    "http-request deny deny_status 503 if {acl}{exempt} {{ {fetch} gt {limit} }}"
                ));
            }
        }
        if let Some(deny) = &self.deny {
            let name = lines::acl_name(id, "deny");
            lines::acl(&name, "src", deny)
                .into_iter()
                .for_each(&mut line);
            line(format!("http-request deny deny_status 403 if {acl} {name}"));
        }
        if let Some(allow) = &self.allow {
            let name = lines::acl_name(id, "allow");
            lines::acl(&name, "src", allow)
                .into_iter()
                .for_each(&mut line);
            if self.satisfy_any && self.authenticates() {
                // Either suffices: the range lets a client in unasked, the
                // authentication (auth_condition) asks every other.
                line(format!(
                    "http-request set-var({}) bool(true) if {acl} {name}",
                    super::SOURCE_ALLOWED
                ));
            } else {
                line(format!(
                    "http-request deny deny_status 403 if {acl} !{name}"
                ));
            }
        }
        if let Some(bytes) = self.body_size {
            line(format!(
                "http-request deny deny_status 413 if {acl} {{ req.hdr_val(content-length) gt {bytes} }}"
            ));
        }
        if let Some(bytes) = self.rate_limit {
            line(format!(
                "http-request set-bandwidth-limit {BANDWIDTH_FILTER} limit {bytes} period 1s if {acl}"
            ));
        }
        if let Some(c) = &self.cors {
            let origin = match &c.origins {
                None => "str(*)".to_owned(),
                Some(_) => "req.hdr(origin)".to_owned(),
            };
            let allowed = match &c.origins {
                None => String::new(),
                Some(list) => format!(
                    " {{ req.hdr(origin) -m reg -i {} }}",
                    quote(&origin_regex(list))
                ),
            };
            line(format!(
                "http-request set-var(txn.ingress_nginx_cors) {origin} if {acl}{allowed}"
            ));
            let mut headers = cors_headers(c);
            let _ = write!(headers, " hdr Access-Control-Max-Age {}", c.max_age);
            line(format!(
                "http-request return status 204 content-type text/plain{headers} if {acl} METH_OPTIONS {{ var(txn.ingress_nginx_cors) -m found }}"
            ));
        }
        if let Some(prefix) = &self.forwarded_prefix {
            line(format!(
                "http-request set-header X-Forwarded-Prefix {} if {acl}",
                quote(&log_format_literal(prefix))
            ));
        }
        if let Some(host) = &self.upstream_vhost {
            line(format!("http-request set-header Host {host} if {acl}"));
        }
        out
    }

    /// The frontend response rules for the answers to the requests Ingress
    /// `id` routes: the backend's Set-Cookie and Location rewritten
    /// (`proxy-cookie-*`, `proxy-redirect-*`), `custom` (checked
    /// `custom-headers`, name and value), then the CORS headers.
    pub fn response_rules(&self, id: &str, custom: &[(String, String)]) -> String {
        let (namespace, name) = id.split_once('/').unwrap_or(("", id));
        let acl = matched_ingress_acl(namespace, name);
        let mut out = self.rewrites.rules(&acl);
        for (header, value) in custom {
            let _ = writeln!(
                out,
                "    http-response set-header {header} {} if {acl}",
                quote(&log_format_literal(value))
            );
        }
        let Some(c) = &self.cors else {
            return out;
        };
        let found = "{ var(txn.ingress_nginx_cors) -m found }";
        let mut pairs = vec![
            (
                "Access-Control-Allow-Origin",
                "%[var(txn.ingress_nginx_cors)]".to_owned(),
            ),
            (
                "Access-Control-Allow-Methods",
                quote(&log_format_literal(&c.methods)),
            ),
            (
                "Access-Control-Allow-Headers",
                quote(&log_format_literal(&c.headers)),
            ),
        ];
        if c.credentials {
            pairs.push(("Access-Control-Allow-Credentials", "true".to_owned()));
        }
        if let Some(expose) = &c.expose {
            pairs.push((
                "Access-Control-Expose-Headers",
                quote(&log_format_literal(expose)),
            ));
        }
        // After the response: HAProxy's own answers (basic auth's 401, a
        // limit's 503, an auth service's refusal) carry them too, as
        // ingress-nginx's do.
        for (header, value) in pairs {
            let _ = writeln!(
                out,
                "    http-after-response set-header {header} {value} if {acl} {found}"
            );
        }
        out
    }

    /// The request rules for the backends Ingress `id` routes to (HAProxy
    /// sets a server timeout only in a backend).
    pub fn backend_rules(&self, id: &str) -> String {
        let (namespace, name) = id.split_once('/').unwrap_or(("", id));
        let acl = matched_ingress_acl(namespace, name);
        match self.server_timeout {
            Some(seconds) => {
                format!("    http-request set-timeout server {seconds}s if {acl}\n")
            }
            None => String::new(),
        }
    }

    /// The stick tables the limits need: (section name, body).
    pub fn limit_tables(&self, id: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (kind, limit, store) in [
            ("rps", self.limits.rps, "http_req_rate(1s)"),
            ("rpm", self.limits.rpm, "http_req_rate(60s)"),
            ("conn", self.limits.connections, "conn_cur"),
        ] {
            if limit.is_some() {
                let mut body = String::new();
                let _ = writeln!(
                    body,
                    "    stick-table type ipv6 size 100k expire 2m store {store}"
                );
                out.push((limit_table(id, kind), body));
            }
        }
        out
    }
}

/// The stick table of one limit of one Ingress.
fn limit_table(id: &str, kind: &str) -> String {
    format!(
        "ingress-nginx.limit.{}.{kind}",
        sanitize(&id.replace('/', "."))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counters_are_the_ones_the_registry_lists() {
        let listed: Vec<StickCounter> =
            haptic_sdk::extending::stick_counters_of("ingress-nginx").collect();
        assert_eq!(listed, [RPS_COUNTER, RPM_COUNTER, CONNECTIONS_COUNTER]);
    }
}

//! One HAProxy frontend per Gateway port: the bind, the listener a request
//! belongs to (by its host, most specific listener hostname first), the
//! rule it matches (every match of every attached route, in the spec's
//! precedence), then the rule's filters and backends.
//!
//! ```text
//! frontend gateway.<namespace>.<name>.<port>
//!     bind :<haproxy port> [ssl crt-list certs/gateway/<...>.crt-list]
//!     http-request set-var(txn.gw_host) ...                 the host, lowercase, no port
//!     http-request set-var(txn.gw_listener) str(<listener>) if <host> !{ ...found }
//!     http-request set-var(txn.gw_rule) str(<ns>/<route>/<rule>) if <listener> <host> <match> !{ ...found }
//!     http-request <filter> if { var(txn.gw_rule) -m str <rule> }
//!     http-response <filter> if { var(txn.gw_rule) -m str <rule> }
//!     use_backend <backend> if { var(txn.gw_rule) -m str <rule> } [weight pick]
//!     default_backend haptic.not-found
//! ```

use std::fmt::Write as _;

use crate::filters::RuleActions;
use crate::hostnames;
use crate::listeners::Protocol;
use crate::matches::MatchRank;
use crate::routes::{Backends, INTERNAL_ERROR_BACKEND};

/// The variable holding the rule a request matched,
/// `<route namespace>/<route name>/<rule index>`.
pub const RULE_VARIABLE: &str = "txn.gw_rule";

/// A listener served on this port.
#[derive(Debug, Clone)]
pub struct PortListener {
    pub name: String,
    pub hostname: Option<String>,
}

/// One match of one rule on one listener and hostname.
#[derive(Debug, Clone)]
pub struct MatchEntry {
    pub listener: String,
    pub host: Option<String>,
    pub rule: String,
    pub condition: String,
    pub order: EntryOrder,
}

/// Precedence of a match entry: hostname, match, then the route's age
/// (creationTimestamp, namespace, name), then rule and match index.
pub type EntryOrder = (
    (u8, std::cmp::Reverse<usize>),
    MatchRank,
    (String, String, String),
    (usize, usize),
);

/// A rule's output on this port.
#[derive(Debug, Clone, Default)]
pub struct RuleOutput {
    pub actions: RuleActions,
    pub backends: Backends,
    /// The server timeout, milliseconds: HAProxy 2.6 sets it in a backend
    /// only, so it goes into each backend of the rule ([`Frontend::timeouts`]).
    pub timeout_ms: Option<u64>,
}

/// Everything one frontend is built from.
#[derive(Debug, Clone)]
pub struct Frontend {
    pub name: String,
    pub bind: String,
    pub protocol: Protocol,
    /// The crt-list of an HTTPS port.
    pub crt_list: Option<String>,
    /// A GRPCRoute is attached: an HTTPS bind offers HTTP/2 (ALPN `h2`);
    /// a clear one takes HTTP/2 by its preface anyway.
    pub h2: bool,
    pub listeners: Vec<PortListener>,
    pub entries: Vec<MatchEntry>,
    /// rule id -> output, in id order.
    pub rules: std::collections::BTreeMap<String, RuleOutput>,
}

fn rule_is(rule: &str) -> String {
    format!("{{ var({RULE_VARIABLE}) -m str {rule} }}")
}

impl Frontend {
    /// The section body.
    pub fn body(&mut self) -> String {
        let mut out = String::new();
        match &self.crt_list {
            Some(list) => {
                let alpn = if self.h2 { "h2,http/1.1" } else { "http/1.1" };
                let _ = writeln!(
                    out,
                    "    bind {} ssl crt-list {list} alpn {alpn}",
                    self.bind
                );
            }
            None => {
                let _ = writeln!(out, "    bind {}", self.bind);
            }
        }
        out.push_str("    http-request set-var(txn.gw_host) req.hdr(host),field(1,:),lower\n");
        let mut listeners = self.listeners.clone();
        listeners.sort_by_key(|l| hostnames::specificity(l.hostname.as_deref()));
        for listener in &listeners {
            let host = listener
                .hostname
                .as_deref()
                .map(|h| format!("{} ", hostnames::condition(h)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "    http-request set-var(txn.gw_listener) str({}) if {host}!{{ var(txn.gw_listener) -m found }}",
                listener.name
            );
        }
        self.entries.sort_by(|a, b| a.order.cmp(&b.order));
        for entry in &self.entries {
            let host = entry
                .host
                .as_deref()
                .map(hostnames::condition)
                .unwrap_or_default();
            let terms = [
                format!("{{ var(txn.gw_listener) -m str {} }}", entry.listener),
                host,
                entry.condition.clone(),
                format!("!{{ var({RULE_VARIABLE}) -m found }}"),
            ];
            let terms: Vec<&str> = terms
                .iter()
                .map(String::as_str)
                .filter(|t| !t.is_empty())
                .collect();
            let _ = writeln!(
                out,
                "    http-request set-var({RULE_VARIABLE}) str({}) if {}",
                entry.rule,
                terms.join(" ")
            );
        }
        let mut routing = String::new();
        let mut response = String::new();
        for (rule, output) in &self.rules {
            let is = rule_is(rule);
            for action in &output.actions.request {
                let _ = writeln!(out, "    {} if {is} {}", action.line, action.condition);
            }
            for action in &output.actions.response {
                let _ = writeln!(response, "    {} if {is} {}", action.line, action.condition);
            }
            if output.actions.redirects {
                continue;
            }
            let total: u32 = output.backends.iter().map(|(_, w)| w).sum();
            match output.backends.as_slice() {
                [] => {
                    let _ = writeln!(routing, "    use_backend {INTERNAL_ERROR_BACKEND} if {is}");
                }
                _ if total == 0 => {
                    let _ = writeln!(routing, "    use_backend {INTERNAL_ERROR_BACKEND} if {is}");
                }
                [(backend, _)] => {
                    let _ = writeln!(routing, "    use_backend {backend} if {is}");
                }
                several => {
                    // One draw per request, compared with the running sums
                    // of the weights: backend i gets weight_i / total.
                    let pick = format!("txn.gw_pick_{}", sanitize_var(rule));
                    let _ = writeln!(
                        out,
                        "    http-request set-var({pick}) rand({total}) if {is}"
                    );
                    let mut upper = 0;
                    for (backend, weight) in several {
                        if *weight == 0 {
                            continue;
                        }
                        upper += weight;
                        let _ = writeln!(
                            routing,
                            "    use_backend {backend} if {is} {{ var({pick}) -m int lt {upper} }}"
                        );
                    }
                }
            }
        }
        out.push_str(&response);
        out.push_str(&routing);
        out.push_str("    default_backend haptic.not-found\n");
        out.lines().map(|l| format!("{}\n", l.trim_end())).collect()
    }
}

impl Frontend {
    /// `(backend, line)` for each rule with a timeout: the backend's
    /// `http-request set-timeout server` for requests of that rule.
    pub fn timeouts(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (rule, output) in &self.rules {
            let Some(ms) = output.timeout_ms else {
                continue;
            };
            for (backend, _) in &output.backends {
                if backend != INTERNAL_ERROR_BACKEND {
                    out.push((
                        backend.clone(),
                        format!(
                            "    http-request set-timeout server {ms}ms if {}",
                            rule_is(rule)
                        ),
                    ));
                }
            }
        }
        out
    }
}

/// A variable name part from a rule id.
fn sanitize_var(rule: &str) -> String {
    rule.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

//! One HAProxy frontend per Gateway port: the bind, the listener a request
//! belongs to (by its host, most specific listener hostname first), the
//! rule it matches (every match of every attached route, in the spec's
//! precedence), then the rule's filters and backends.
//!
//! Matches on the path alone (no method, header or query parameter), on an
//! exact hostname or none, are entries of two maps per run of them
//! (exact paths, `map_str`; prefixes, `map_beg`, whose tree answers with the
//! longest), so that adding, moving or removing such a path changes map
//! files only: the host applies that at runtime, without a reload or
//! `haproxy -c` of the whole configuration. A run gathers the map entries
//! that can take their place in it: those no match between them could also
//! select (another listener, another exact hostname or a disjoint path), so
//! HAProxy decides as the spec's precedence says. The keys are
//! `<listener>|<hostname>|<path>`, the hostname empty for "any host";
//! prefixes are keyed with a trailing `/` and looked up with the path and a
//! `/`, so that `/a` matches `/a` and `/a/b` but not `/ab`.
//!
//! ```text
//! frontend gateway.<namespace>.<name>.<port>
//!     bind :<haproxy port> [ssl crt-list certs/gateway/<...>.crt-list]
//!     http-request set-var(txn.gw_host) ...                 the host, lowercase, no port
//!     http-request set-var(txn.gw_listener) str(<listener>) if <host> !{ ...found }
//!     http-request set-var-fmt(txn.gw_key...) ...           the map keys, when some run exists
//!     http-request set-var(txn.gw_rule) str(<ns>/<route>/<rule>) if <listener> <host> <match> !{ ...found }
//!     http-request set-var(txn.gw_rule) var(txn.gw_key),map_str(maps/gateway/<frontend>.<run>.exact.map) if !{ ...found }
//!     ...                                                   the same for prefixes, then "any host"
//!     http-request set-var(txn.gateway_api_auth_profile) ... if { var(txn.gw_rule) -m str <rule> }
//!     filter spoe engine gateway-api-auth ...               the auth service's verdict, when a
//!     http-request send-spoe-group ...                      rule has an ExternalAuth filter,
//!     http-request return status <its status> if ...        before any other filter
//!     http-request <filter> if { var(txn.gw_rule) -m str <rule> }
//!     http-request set-var(txn.gateway_api_mirror_profile) ... if { var(txn.gw_rule) -m str <rule> }
//!     filter spoe engine gateway-api-mirror ...             the copies, when a rule mirrors
//!     http-request send-spoe-group ...
//!     http-response <filter> if { var(txn.gw_rule) -m str <rule> }
//!     use_backend <backend> if { var(txn.gw_rule) -m str <rule> } [weight pick]
//!     default_backend haptic.not-found
//! ```

use std::fmt::Write as _;

use std::collections::BTreeSet;

use haptic_sdk::agent::{ExternalAuth, Mirror, MirrorEngine};
use haptic_sdk::http3::Quic;
use haptic_sdk::names::sanitize;

use crate::filters::RuleActions;
use crate::hostnames;
use crate::listeners::Protocol;
use crate::matches::{MatchRank, PathSet};
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
    pub path: PathSet,
    /// The match is on the path alone.
    pub path_only: bool,
    pub order: EntryOrder,
}

/// Which map of a run an entry goes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MapKind {
    Exact,
    Prefix,
}

impl MatchEntry {
    /// The entry's map and key, if it can be a map entry: a path-only match
    /// of an exact path or prefix, on an exact hostname or none, whose words
    /// are one map key (no space, no `|` but the separators).
    fn map_key(&self) -> Option<(MapKind, String)> {
        let word = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        let host = match &self.host {
            Some(h) if h.starts_with('*') || h.contains('|') => return None,
            Some(h) => h.as_str(),
            None => "",
        };
        if !self.path_only || self.listener.contains('|') || !word(&self.listener) || !word(host) {
            return None;
        }
        let listener = &self.listener;
        match &self.path {
            PathSet::Exact(path) if word(path) => {
                Some((MapKind::Exact, format!("{listener}|{host}|{path}")))
            }
            PathSet::Prefix(prefix) if word(prefix) => {
                Some((MapKind::Prefix, format!("{listener}|{host}|{prefix}/")))
            }
            _ => None,
        }
    }

    /// Some request could be selected by both entries.
    fn may_share_a_request(&self, other: &Self) -> bool {
        let hosts = match (&self.host, &other.host) {
            (Some(a), Some(b)) => hostnames::intersect(a, b).is_some(),
            _ => true,
        };
        self.listener == other.listener && hosts && self.path.overlaps(&other.path)
    }
}

/// The two maps of one run: key -> rule id, the first claim of a key
/// winning (entries come in precedence order).
#[derive(Debug, Default)]
struct RunMaps {
    exact: std::collections::BTreeMap<String, String>,
    prefix: std::collections::BTreeMap<String, String>,
}

impl RunMaps {
    fn claim(&mut self, kind: MapKind, key: String, rule: &str) {
        let map = match kind {
            MapKind::Exact => &mut self.exact,
            MapKind::Prefix => &mut self.prefix,
        };
        map.entry(key).or_insert_with(|| rule.to_owned());
    }
}

/// A line of the matching part of the frontend, in order.
enum Step<'a> {
    Acl(&'a MatchEntry),
    Run(usize),
}

/// A frontend's section body and the map files it reads.
#[derive(Debug)]
pub struct RenderedFrontend {
    pub body: String,
    /// `(path, content)` of each map file.
    pub maps: Vec<(String, String)>,
}

/// The map keys' variables: `txn.gw_key` is `<listener>|<host>|<path>`,
/// `txn.gw_key_any` the same with no host, the `_dir` ones end in `/` for
/// prefix lookups. A host holding `|` (no valid hostname does) gets no
/// host key: its `|` could make the key another host's.
const KEY_LINES: &str = concat!(
    "    http-request set-var-fmt(txn.gw_key_any) \"%[var(txn.gw_listener)]||%[path]\" if { var(txn.gw_listener) -m found }\n",
    "    http-request set-var-fmt(txn.gw_key_any_dir) \"%[var(txn.gw_key_any)]/\" if { var(txn.gw_key_any) -m found }\n",
    "    http-request set-var-fmt(txn.gw_key) \"%[var(txn.gw_listener)]|%[var(txn.gw_host)]|%[path]\" if { var(txn.gw_key_any) -m found } !{ var(txn.gw_host) -m sub | }\n",
    "    http-request set-var-fmt(txn.gw_key_dir) \"%[var(txn.gw_key)]/\" if { var(txn.gw_key) -m found }\n",
);

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
    /// The rule's `RequestMirror` targets ([`crate::mirrors`]).
    pub mirror: Option<Mirror>,
    /// The rule's `ExternalAuth` profile ([`crate::external_auth`]).
    pub auth: Option<ExternalAuth>,
}

/// Everything one frontend is built from.
#[derive(Debug, Clone)]
pub struct Frontend {
    pub name: String,
    pub bind: String,
    pub protocol: Protocol,
    /// The crt-list of an HTTPS port.
    pub crt_list: Option<String>,
    /// HTTP/3 on an HTTPS port: QUIC on the same address over UDP,
    /// advertised with the listener's port (what clients reach through the
    /// Gateway's Service).
    pub quic: Option<(Quic, u16)>,
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
    /// The match entries in precedence order, map entries gathered into
    /// runs.
    fn steps(&mut self) -> (Vec<Step<'_>>, Vec<RunMaps>) {
        self.entries.sort_by(|a, b| a.order.cmp(&b.order));
        let mut steps = Vec::new();
        let mut runs: Vec<RunMaps> = Vec::new();
        // The ACL entries after the open run's lookups: a map entry joining
        // the run is decided before them, so it must not overlap any.
        let mut passed: Vec<&MatchEntry> = Vec::new();
        for entry in &self.entries {
            match entry.map_key() {
                Some((kind, key)) => {
                    let joins = !runs.is_empty()
                        && passed.iter().all(|acl| !acl.may_share_a_request(entry));
                    if !joins {
                        steps.push(Step::Run(runs.len()));
                        runs.push(RunMaps::default());
                        passed.clear();
                    }
                    if let Some(run) = runs.last_mut() {
                        run.claim(kind, key, &entry.rule);
                    }
                }
                None => {
                    steps.push(Step::Acl(entry));
                    passed.push(entry);
                }
            }
        }
        (steps, runs)
    }

    /// The section body and its map files.
    pub fn render(&mut self) -> RenderedFrontend {
        let mut out = String::new();
        match &self.crt_list {
            Some(list) => {
                let alpn = if self.h2 { "h2,http/1.1" } else { "http/1.1" };
                let _ = writeln!(
                    out,
                    "    bind {} ssl crt-list {list} alpn {alpn}",
                    self.bind
                );
                if let Some((quic, port)) = &self.quic
                    && let Some(address) = quic.bind_address(&self.bind)
                {
                    let _ = writeln!(out, "    bind {address} ssl crt-list {list} alpn h3");
                    out.push_str(&quic.alt_svc_rule_on(*port));
                }
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
        let map_base = format!("maps/gateway/{}", sanitize(&self.name));
        let (steps, runs) = self.steps();
        if !runs.is_empty() {
            out.push_str(KEY_LINES);
        }
        let unmatched = format!("!{{ var({RULE_VARIABLE}) -m found }}");
        for step in steps {
            match step {
                Step::Acl(entry) => {
                    let host = entry
                        .host
                        .as_deref()
                        .map(hostnames::condition)
                        .unwrap_or_default();
                    let terms = [
                        format!("{{ var(txn.gw_listener) -m str {} }}", entry.listener),
                        host,
                        entry.condition.clone(),
                        unmatched.clone(),
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
                Step::Run(n) => {
                    for (key, converter, kind) in [
                        ("txn.gw_key", "map_str", "exact"),
                        ("txn.gw_key_dir", "map_beg", "prefix"),
                        ("txn.gw_key_any", "map_str", "exact"),
                        ("txn.gw_key_any_dir", "map_beg", "prefix"),
                    ] {
                        let _ = writeln!(
                            out,
                            "    http-request set-var({RULE_VARIABLE}) var({key}),{converter}({map_base}.{n}.{kind}.map) if {unmatched}"
                        );
                    }
                }
            }
        }
        let mut routing = String::new();
        let mut response = String::new();
        // Authentication first: the auth service sees the request as the
        // client sent it, and a refused one meets no other filter.
        let authenticated: Vec<(&String, &ExternalAuth)> = self
            .rules
            .iter()
            .filter_map(|(rule, output)| Some((rule, output.auth.as_ref()?)))
            .collect();
        if !authenticated.is_empty() {
            let auth = crate::external_auth::engine();
            for (rule, _) in &authenticated {
                out.push_str(&auth.route_rule(&rule_is(rule), &crate::agent_profile(rule)));
            }
            let headers: BTreeSet<String> = authenticated
                .iter()
                .flat_map(|(_, profile)| profile.response_headers.iter().cloned())
                .collect();
            out.push_str(&auth.filter_line());
            out.push_str(&auth.verdict_rules(&headers));
            response.push_str(&auth.response_rules());
        }
        let engine = MirrorEngine::new(crate::LIBRARY);
        let mut mirrored = false;
        for (rule, output) in &self.rules {
            let is = rule_is(rule);
            for action in &output.actions.request {
                let _ = writeln!(out, "    {} if {is} {}", action.line, action.condition);
            }
            if let Some(mirror) = &output.mirror {
                let body = mirror.targets.iter().any(|t| t.body);
                out.push_str(&engine.route_rules(&is, &crate::agent_profile(rule), body));
                mirrored = true;
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
        // The copies go after every rule's filters and before any
        // use_backend (HAProxy warns of http-request rules after them).
        if mirrored {
            out.push_str(&engine.filter_line());
            out.push_str(&engine.send_rules());
        }
        out.push_str(&response);
        out.push_str(&routing);
        out.push_str("    default_backend haptic.not-found\n");
        let mut maps = Vec::new();
        for (n, run) in runs.iter().enumerate() {
            for (kind, entries) in [("exact", &run.exact), ("prefix", &run.prefix)] {
                let content: String = entries
                    .iter()
                    .map(|(key, rule)| format!("{key} {rule}\n"))
                    .collect();
                maps.push((format!("{map_base}.{n}.{kind}.map"), content));
            }
        }
        RenderedFrontend {
            body: out.lines().map(|l| format!("{}\n", l.trim_end())).collect(),
            maps,
        }
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

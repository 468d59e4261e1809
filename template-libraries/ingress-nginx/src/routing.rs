//! The routes and rules of every served Ingress, built Ingress by Ingress
//! (oldest first) and written once: the route maps, the regex map, the
//! backend rules and options, and the frontend's routing. Each child writes
//! one concern of it.

mod auth;
mod backends;
mod canary;
mod fallback;
mod headers;

use std::collections::{BTreeMap, BTreeSet};

use haptic_sdk::agent::{AuthEngine, ExternalAuth, Mirror, MirrorEngine};
use std::fmt::Write as _;

use haptic_sdk::ingress::routes::{self, PathKind, RouteTable};
use haptic_sdk::ingress::{port_text, service_port, service_port_backend};
use haptic_sdk::k8s::api::networking::v1::{Ingress, IngressServiceBackend};
use haptic_sdk::names::{backend_name, map_line};
use haptic_sdk::{Context, Entry, Output, Result, SectionKind, Slot};

use crate::policy::{GlobalAuth, Policy};
use crate::{
    CLUSTER_IP_BACKEND_PREFIX, NGINX_MAPS, REGEX_MAP, REGEX_ROUTES_MAP, SERVICES,
    UNAVAILABLE_BACKEND,
};
use crate::{parse, regex};
use auth::{GLOBAL_AUTH_PROFILE, LIBRARY, agent_profile, basic_auth, external_auth};
use fallback::default_backend;
use headers::config_map_headers;

use fallback::Fallback;

/// A regex location: a `use-regex`/`rewrite-target` path, or another path
/// of a host that has one.
#[derive(Debug, Clone)]
struct RegexRoute {
    /// The host (empty: a rule without host).
    host: String,
    /// The checked path regex ([`regex::path_regex`]).
    regex: String,
    backend: String,
    /// `namespace/name`.
    ingress: String,
    /// The path as the Ingress wrote it: its length orders the locations.
    path: String,
    /// An Exact path: nginx's `location =`, ahead of every regex.
    exact: bool,
}

/// An Exact or Prefix path as the route table took it.
#[derive(Debug, Clone)]
struct PlainPath {
    host: String,
    path: String,
    kind: PathKind,
    backend: String,
    ingress: String,
}

impl PlainPath {
    /// The path as a regex location of its host: an Exact path whole, a
    /// Prefix path by whole segments (as the route table matches it),
    /// case-insensitively as nginx's `~*`.
    fn regex_route(&self) -> RegexRoute {
        let escaped = haptic_sdk::haproxy::regex_escape(&self.path);
        let regex = match self.kind {
            PathKind::Exact => format!("(?:{escaped})$"),
            PathKind::Prefix if self.path.ends_with('/') => format!("(?:{escaped})"),
            PathKind::Prefix => format!("(?:{escaped})(?:/|$)"),
        };
        RegexRoute {
            host: self.host.clone(),
            regex,
            backend: self.backend.clone(),
            ingress: self.ingress.clone(),
            path: self.path.clone(),
            exact: self.kind == PathKind::Exact,
        }
    }
}

/// The regex locations in the order ingress-nginx gives a server's: as
/// soon as one path of a host is a regex, every path of that host is a
/// regex location (so a `rewrite-target` on `/` does not take
/// cert-manager's `/.well-known/acme-challenge/<token>` of another
/// Ingress); exact paths first (nginx's `location =` wins over regexes),
/// then the longest path first, ties in reverse order of the path text,
/// then the older Ingress. Keys carry their host, so hosts never compete.
fn regex_locations(mut routes: Vec<RegexRoute>, plain: &[PlainPath]) -> Vec<RegexRoute> {
    // A host is a regex host when it has a regex route (an alias copies its
    // host's, so it is one too).
    let regex_hosts: BTreeSet<String> = routes.iter().map(|r| r.host.clone()).collect();
    routes.extend(
        plain
            .iter()
            .filter(|p| regex_hosts.contains(&p.host))
            .map(PlainPath::regex_route),
    );
    routes.sort_by(|a, b| {
        b.exact
            .cmp(&a.exact)
            .then_with(|| b.path.len().cmp(&a.path.len()))
            .then_with(|| b.path.cmp(&a.path))
    });
    routes
}

/// The routes and rules of every served Ingress, being built.
#[derive(Default)]
pub(crate) struct Routing {
    table: RouteTable,
    /// Regex routes, in the order the Ingresses came (oldest first);
    /// [`Self::finish`] puts them in nginx's.
    regex: Vec<RegexRoute>,
    /// Exact and prefix paths by host, for the regex hosts among them.
    plain_paths: Vec<PlainPath>,
    /// `server-alias`: (alias, host it names).
    aliases: Vec<(String, String)>,
    /// Request rules per backend (rewrites), by backend.
    backend_rules: BTreeMap<String, String>,
    rewrites: usize,
    default_backend: Option<String>,
    /// Main routes by host and path text, for canaries: (Ingress, backend).
    mains: BTreeMap<(String, String), (String, String)>,
    /// The backend request rules each main Ingress asked for, copied to
    /// its canaries' backends (the main's annotations apply to them).
    ingress_backend_rules: BTreeMap<String, String>,
    /// Backend options (affinity, balance) by backend: (Ingress, lines).
    options: BTreeMap<String, (String, String)>,
    /// Server options (`backend-protocol`, `proxy-ssl-*`) by backend:
    /// (Ingress, options).
    server_options: BTreeMap<String, (String, String)>,
    /// The server options each main Ingress asked for, for its canaries'
    /// backends (ingress-nginx speaks one protocol to both).
    ingress_server_options: BTreeMap<String, String>,
    /// The files of `proxy-ssl-secret`s and `auth-tls-secret`s: path ->
    /// (content, holds a key).
    trust_files: BTreeMap<String, (String, bool)>,
    /// crt-list line options of `auth-tls-*` hosts, oldest Ingress first:
    /// (host, options, Ingress).
    client_hosts: Vec<(String, String, String)>,
    /// Canary rules for the frontend: (request rules, routing rules).
    canary_rules: (String, String),
    canaries: usize,
    /// `default-backend`s, oldest Ingress first.
    fallbacks: Vec<Fallback>,
    /// `service-upstream` backends: name -> the cluster IP's server line.
    cluster_ip_backends: BTreeMap<String, String>,
    /// `canaryAcrossNamespaces`.
    canary_across_namespaces: bool,
    /// Some Ingress has a `limit-rate`: the frontend needs its filter.
    bandwidth_limited: bool,
    /// `auth-url` profiles by name (`ingress-nginx.<namespace>.<name>`,
    /// the global one [`GLOBAL_AUTH_PROFILE`]).
    external_auth: BTreeMap<String, ExternalAuth>,
    /// The values' `globalAuth`, for the Ingresses that take it.
    global_auth: GlobalAuth,
    /// Mirror profiles by name (`mirror-target`).
    mirrors: BTreeMap<String, Mirror>,
}

impl Routing {
    pub(crate) fn new(canary_across_namespaces: bool, global_auth: GlobalAuth) -> Self {
        Self {
            canary_across_namespaces,
            global_auth,
            ..Self::default()
        }
    }

    /// `server-alias` names the whole server in ingress-nginx (its
    /// `server_name`): every path of the host, every Ingress's, is served
    /// under the alias too. The annotated Ingress's own paths are there
    /// already; a path the alias has of its own keeps it.
    fn serve_aliases(&mut self) {
        for (alias, host) in std::mem::take(&mut self.aliases) {
            let plain: Vec<PlainPath> = self
                .plain_paths
                .iter()
                .filter(|p| p.host == host)
                .cloned()
                .collect();
            for p in plain {
                let known = self
                    .plain_paths
                    .iter()
                    .any(|q| q.host == alias && q.path == p.path && q.kind == p.kind);
                if !known
                    && self
                        .table
                        .add(&alias, &p.path, p.kind, &p.backend, &p.ingress)
                        .is_ok()
                {
                    self.plain_paths.push(PlainPath {
                        host: alias.clone(),
                        ..p
                    });
                }
            }
            let regex: Vec<RegexRoute> = self
                .regex
                .iter()
                .filter(|r| r.host == host)
                .cloned()
                .collect();
            for r in regex {
                if !self
                    .regex
                    .iter()
                    .any(|q| q.host == alias && q.regex == r.regex)
                {
                    self.regex.push(RegexRoute {
                        host: alias.clone(),
                        ..r
                    });
                }
            }
        }
    }

    /// The crt-list options `auth-tls-*` asked for, by host, oldest Ingress
    /// first: (host, options, Ingress); the certificates apply them.
    pub(crate) fn take_client_hosts(&mut self) -> Vec<(String, String, String)> {
        std::mem::take(&mut self.client_hosts)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_ingress(
        &mut self,
        ctx: &Context<'_>,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        policy: &Policy,
        frontend: &str,
        tls_secrets: bool,
    ) -> Result<()> {
        let Some(spec) = ingress.spec.as_ref() else {
            return Ok(());
        };
        if self.default_backend.is_none()
            && let Some(service) = spec
                .default_backend
                .as_ref()
                .and_then(|b| b.service.as_ref())
        {
            self.default_backend = Some(resolve(ctx, out, ingress, id, service)?);
        }
        let mut hosts: Vec<String> = Vec::new();
        let mut backends: Vec<String> = Vec::new();
        // Each backend's Service and port as the Ingress names them, for a
        // default backend's X-Service-Name and X-Service-Port.
        let mut services: BTreeMap<String, (String, String)> = BTreeMap::new();
        let mut unavailable = false;
        for rule in spec.rules.iter().flatten() {
            let host = rule.host.as_deref().unwrap_or("").to_ascii_lowercase();
            let rule_hosts: Vec<String> = std::iter::once(host.clone())
                .chain(policy.aliases.iter().filter(|_| !host.is_empty()).cloned())
                .collect();
            for h in &rule_hosts {
                if !h.is_empty() && !hosts.contains(h) {
                    hosts.push(h.clone());
                }
            }
            if !host.is_empty() {
                for alias in &policy.aliases {
                    if !self.aliases.contains(&(alias.clone(), host.clone())) {
                        self.aliases.push((alias.clone(), host.clone()));
                    }
                }
            }
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
                let backend = if policy.service_upstream {
                    self.cluster_ip_backend(ctx, out, ingress, id, service)?
                } else {
                    resolve(ctx, out, ingress, id, service)?
                };
                if backend == UNAVAILABLE_BACKEND {
                    unavailable = true;
                } else if !backends.contains(&backend) {
                    backends.push(backend.clone());
                    services.insert(backend.clone(), (service.name.clone(), port_text(service)));
                }
                for h in &rule_hosts {
                    self.mains
                        .entry((h.clone(), path_text.to_owned()))
                        .or_insert_with(|| (id.to_owned(), backend.clone()));
                }
                if policy.regex_paths {
                    let regex = match regex::path_regex(path_text) {
                        Ok(regex) => regex,
                        Err(why) => {
                            skipped(out, ingress, id, path_text, &host, why.as_str())?;
                            continue;
                        }
                    };
                    for h in &rule_hosts {
                        self.regex.push(RegexRoute {
                            host: h.clone(),
                            regex: regex.clone(),
                            backend: backend.clone(),
                            ingress: id.to_owned(),
                            path: path_text.to_owned(),
                            exact: false,
                        });
                    }
                    if let Some(replacement) = &policy.rewrite
                        && backend != UNAVAILABLE_BACKEND
                    {
                        self.add_rewrite(&backend, id, &regex, replacement);
                    }
                    continue;
                }
                let Some(kind) = PathKind::from_path_type(&path.path_type) else {
                    skipped(
                        out,
                        ingress,
                        id,
                        path_text,
                        &host,
                        "pathType is not Exact, Prefix or ImplementationSpecific",
                    )?;
                    continue;
                };
                for h in &rule_hosts {
                    match self.table.add(h, path_text, kind, &backend, id) {
                        Ok(()) => self.plain_paths.push(PlainPath {
                            host: h.clone(),
                            path: path_text.to_owned(),
                            kind,
                            backend: backend.clone(),
                            ingress: id.to_owned(),
                        }),
                        Err(why) => {
                            skipped(out, ingress, id, path_text, h, &format!("{why:?}"))?;
                        }
                    }
                }
            }
        }
        let rules = policy.backend_rules(id);
        if !rules.is_empty() {
            for backend in &backends {
                self.backend_rules
                    .entry(backend.clone())
                    .or_default()
                    .push_str(&rules);
            }
            self.ingress_backend_rules
                .entry(id.to_owned())
                .or_default()
                .push_str(&rules);
        }
        if let Some(service) = &policy.default_backend
            && let Some(to) = default_backend(ctx, out, ingress, id, service)?
        {
            self.fallbacks.push(Fallback {
                ingress: id.to_owned(),
                backends: backends.clone(),
                services,
                unavailable,
                to,
            });
        }
        self.add_options(out, ingress, id, policy, &backends)?;
        if let Some(options) =
            self.server_options_of(ctx, out, ingress, id, policy, frontend, tls_secrets)?
        {
            self.ingress_server_options
                .insert(id.to_owned(), options.clone());
            self.add_server_options(out, ingress, id, &options, &backends)?;
        }
        if let Some(auth) = &policy.client_auth {
            self.add_client_auth(ctx, out, ingress, id, auth, frontend, tls_secrets, &hosts)?;
        }

        let tls_hosts: Vec<String> = spec
            .tls
            .iter()
            .flatten()
            .flat_map(|t| t.hosts.iter().flatten())
            .map(|h| h.to_ascii_lowercase())
            .filter(|h| parse::host(h, true).is_ok())
            .collect();
        let rules = policy.frontend_rules(id, &tls_hosts, &hosts);
        // The frontend's bwlim-out filter, declared once (in `write`)
        // however many Ingresses limit their answers.
        self.bandwidth_limited |= policy.rate_limit.is_some();
        if !rules.is_empty() {
            out.snippet_keyed(
                format!("ingress-nginx-rules:{id}"),
                SectionKind::Frontend,
                frontend,
                Slot::RequestRules,
                10,
                rules,
            )?;
        }
        // Authentication asks the Ingress's requests, except with
        // `satisfy: any` those from its allowed source ranges.
        let asked = policy.auth_condition(&haptic_sdk::ingress::matched_ingress_acl(
            &ingress.key.namespace,
            &ingress.key.name,
        ));
        if let Some(auth) = &policy.auth {
            basic_auth(ctx, out, ingress, id, auth, &asked, frontend)?;
        }
        let refused = policy.external_auth_refused
            || (policy.global_auth && self.global_auth == GlobalAuth::Refused);
        if refused {
            out.snippet_keyed(
                format!("ingress-nginx-auth-url:{id}"),
                SectionKind::Frontend,
                frontend,
                Slot::RequestRules,
                haptic_sdk::agent::ROUTE_PRIORITY,
                format!("    http-request return status 500 if {asked}\n"),
            )?;
        }
        if let Some(auth) = &policy.external_auth {
            let profile = agent_profile(id);
            let auth = external_auth(ctx, out, ingress, id, auth, policy)?;
            AuthEngine::new(LIBRARY).route(
                out,
                format!("ingress-nginx-auth-url:{id}"),
                frontend,
                &asked,
                &profile,
            )?;
            self.external_auth.insert(profile, auth);
        }
        if let (true, GlobalAuth::Ask(global)) = (policy.global_auth, &self.global_auth) {
            AuthEngine::new(LIBRARY).route(
                out,
                format!("ingress-nginx-auth-url:{id}"),
                frontend,
                &asked,
                GLOBAL_AUTH_PROFILE,
            )?;
            self.external_auth
                .insert(GLOBAL_AUTH_PROFILE.to_owned(), (**global).clone());
        }
        if let Some(target) = &policy.mirror {
            let profile = agent_profile(id);
            let acl =
                haptic_sdk::ingress::matched_ingress_acl(&ingress.key.namespace, &ingress.key.name);
            MirrorEngine::new(LIBRARY).route(
                out,
                format!("ingress-nginx-mirror:{id}"),
                frontend,
                &acl,
                &profile,
                target.body,
            )?;
            self.mirrors.insert(
                profile,
                Mirror {
                    targets: vec![target.clone()],
                },
            );
        }
        let custom = match &policy.custom_headers {
            Some(config_map) => {
                config_map_headers(ctx, out, ingress, "custom-headers", config_map)?
            }
            None => Vec::new(),
        };
        let responses = policy.response_rules(id, &custom);
        if !responses.is_empty() {
            out.snippet_keyed(
                format!("ingress-nginx-responses:{id}"),
                SectionKind::Frontend,
                frontend,
                Slot::ResponseRules,
                10,
                responses,
            )?;
        }
        for (name, body) in policy.limit_tables(id) {
            out.section(SectionKind::Backend, &name, body)?;
        }
        Ok(())
    }

    /// `service-upstream`: a backend of one server, the Service's cluster
    /// IP and port (kube-proxy balances over the ready endpoints), named
    /// after the endpoints' backend. A Service without a cluster IP
    /// (headless) keeps its endpoints, with a warning.
    fn cluster_ip_backend(
        &mut self,
        ctx: &Context<'_>,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        service: &IngressServiceBackend,
    ) -> Result<String> {
        let namespace = ingress.key.namespace.as_str();
        let Some((found, port)) = service_port(ctx, SERVICES, namespace, service)? else {
            return resolve(ctx, out, ingress, id, service);
        };
        let endpoints = backend_name(namespace, &service.name, port);
        let Some(server) = found.cluster_ip_address(port) else {
            out.warning(
                Some(ingress.key),
                "ServiceUpstreamWithoutClusterIP",
                format!(
                    "Ingress {id:?}: Service {namespace}/{} has no cluster IP (headless), so service-upstream is not applied: its requests go to the endpoints",
                    service.name
                ),
            )?;
            return Ok(endpoints);
        };
        let name = format!("{CLUSTER_IP_BACKEND_PREFIX}{endpoints}");
        self.cluster_ip_backends
            .insert(name.clone(), format!("    server cluster-ip {server}\n"));
        Ok(name)
    }

    /// Rewrites the path of the requests Ingress `id` sends to `backend`
    /// through the path `regex`: the first path of the Ingress that
    /// matches marks the request, so one rewrite applies at most.
    fn add_rewrite(&mut self, backend: &str, id: &str, regex: &str, replacement: &str) {
        self.rewrites += 1;
        let mark = self.rewrites;
        let (namespace, name) = id.split_once('/').unwrap_or(("", id));
        let acl = haptic_sdk::ingress::matched_ingress_acl(namespace, name);
        // The regex and replacement were checked (no quote, no control
        // character); the writer quotes them all the same.
        let (Ok(matched), Ok(pattern), Ok(replacement)) = (
            haptic_sdk::haproxy::argument(&format!("^{regex}")),
            haptic_sdk::haproxy::argument(&format!("(?i)^{regex}")),
            haptic_sdk::haproxy::argument(replacement),
        ) else {
            return;
        };
        let lines = format!(
            "    http-request set-var(txn.ingress_nginx_rewrite) int({mark}) if {acl} !{{ var(txn.ingress_nginx_rewrite) -m found }} {{ path -m reg -i {matched} }}\n    http-request replace-path {pattern} {replacement} if {{ var(txn.ingress_nginx_rewrite) -m int {mark} }}\n"
        );
        self.backend_rules
            .entry(backend.to_owned())
            .or_default()
            .push_str(&lines);
        self.ingress_backend_rules
            .entry(id.to_owned())
            .or_default()
            .push_str(&lines);
    }

    pub(crate) fn finish(mut self, frontend: &str, out: &mut Output) -> Result<()> {
        self.serve_aliases();
        if !self.external_auth.is_empty() {
            let engine = AuthEngine::new(LIBRARY);
            let slowest = self.external_auth.values().map(|a| a.timeout_ms).max();
            engine.engine(out, slowest.unwrap_or(5_000) + 1_000)?;
            let headers = self
                .external_auth
                .values()
                .flat_map(|a| a.response_headers.iter().cloned())
                .collect();
            engine.frontend(out, frontend, &headers)?;
            engine.profiles(out, &self.external_auth)?;
        }
        if !self.mirrors.is_empty() {
            let engine = MirrorEngine::new(LIBRARY);
            engine.engine(out)?;
            engine.frontend(out, frontend)?;
            engine.profiles(out, &self.mirrors)?;
        }
        out.file(NGINX_MAPS.exact, self.table.exact_map())?;
        out.file(NGINX_MAPS.prefix, self.table.prefix_map())?;
        out.file(NGINX_MAPS.exact_routes, self.table.exact_routes_map())?;
        out.file(NGINX_MAPS.prefix_routes, self.table.prefix_routes_map())?;
        let mut regex_map = String::from(
            "# haptic ingress-nginx: ^<host>(?i)<path regex> -> backend, first match\n",
        );
        let mut regex_routes = String::from(
            "# haptic ingress-nginx: ^<host>(?i)<path regex> -> namespace/name of the Ingress\n",
        );
        let regex = std::mem::take(&mut self.regex);
        for route in regex_locations(regex, &self.plain_paths) {
            let key = regex::route_key(&route.host, &route.regex);
            if let (Some(a), Some(b)) = (
                map_line(&key, &route.backend),
                map_line(&key, &route.ingress),
            ) {
                regex_map.push_str(&a);
                regex_routes.push_str(&b);
            }
        }
        out.file(REGEX_MAP, regex_map)?;
        out.file(REGEX_ROUTES_MAP, regex_routes)?;

        // Per key, regex paths first (nginx's regex locations), then the
        // exact and prefix maps; the path-alone key (rules without host)
        // last: a host-less regex path must not win over another
        // namespace's host.
        let mut request = routes::host_variable_rules();
        request.push_str(&routes::ingress_variable_rules_with(
            &NGINX_MAPS,
            Some(REGEX_ROUTES_MAP),
        ));
        out.snippet(
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            0,
            request,
        )?;
        let (mut canary_request, mut canary_routing) = self.canary_rules;
        for fallback in &self.fallbacks {
            canary_routing.push_str(&fallback.routing_rules());
            canary_request.push_str(&fallback.request_rules());
        }
        if !canary_request.is_empty() || !self.fallbacks.is_empty() {
            // The backend this library's routing will pick, by the same
            // lookups in the same order, for the canaries and the default
            // backends to compare.
            let mut lookups = String::new();
            for lookup in routes::lookups(Some(REGEX_MAP), NGINX_MAPS.exact, NGINX_MAPS.prefix) {
                let _ = writeln!(
                    lookups,
                    "    http-request set-var(txn.ingress_nginx_backend) {lookup} if !{{ var(txn.ingress_nginx_backend) -m found }}"
                );
            }
            canary_request.insert_str(0, &lookups);
            // After txn.haptic_ingress (0), before the policies (10).
            out.snippet(
                SectionKind::Frontend,
                frontend,
                Slot::RequestRules,
                5,
                canary_request,
            )?;
            // Before every map lookup, so a selected request goes there;
            // canaries first, then the default backends.
            out.snippet(
                SectionKind::Frontend,
                frontend,
                Slot::Routing,
                -10,
                canary_routing,
            )?;
        }
        let routing = routes::routing_rules_with(&NGINX_MAPS, Some(REGEX_MAP));
        out.snippet(SectionKind::Frontend, frontend, Slot::Routing, 0, routing)?;
        if self.bandwidth_limited {
            out.snippet(
                SectionKind::Frontend,
                frontend,
                Slot::Other,
                0,
                crate::policy::BANDWIDTH_FILTER_LINE,
            )?;
        }
        if let Some(backend) = self.default_backend {
            out.snippet(
                SectionKind::Frontend,
                frontend,
                Slot::Routing,
                1000,
                format!("    use_backend {backend}\n"),
            )?;
        }
        for (backend, server) in self.cluster_ip_backends {
            out.section(SectionKind::Backend, &backend, "")?;
            // Where kubernetes-backends puts its servers, so the
            // default-server line of backend-protocol applies here too.
            out.snippet(
                SectionKind::Backend,
                &backend,
                Slot::Other,
                haptic_sdk::extending::SERVERS_PRIORITY,
                server,
            )?;
        }
        for (backend, rules) in self.backend_rules {
            out.snippet(SectionKind::Backend, &backend, Slot::RequestRules, 0, rules)?;
        }
        for (backend, (_, lines)) in self.options {
            out.snippet(SectionKind::Backend, &backend, Slot::Other, 0, lines)?;
        }
        for (backend, (_, options)) in self.server_options {
            haptic_sdk::extending::server_options(
                out,
                format!("ingress-nginx-server-options:{backend}"),
                &backend,
                &options,
            )?;
        }
        for (path, (content, key)) in self.trust_files {
            if key {
                out.secret_file(path, content)?;
            } else {
                out.file(path, content)?;
            }
        }
        out.section(
            SectionKind::Backend,
            UNAVAILABLE_BACKEND,
            "    http-request return status 503 content-type text/plain string 'Service Unavailable'\n",
        )
    }
}

/// A path that is not routed: a warning on the Ingress.
pub(super) fn skipped(
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    id: &str,
    path: &str,
    host: &str,
    why: &str,
) -> Result<()> {
    out.warning(
        Some(ingress.key),
        "PathSkipped",
        // Quoted: the strings reach here unchecked offline.
        format!("Ingress {id:?}: path {path:?} of host {host:?} skipped: {why}"),
    )
}

/// The backend of a Service port, or [`UNAVAILABLE_BACKEND`] (with a
/// warning) when it does not exist.
pub(super) fn resolve(
    ctx: &Context<'_>,
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    id: &str,
    backend: &IngressServiceBackend,
) -> Result<String> {
    if let Some(name) = service_port_backend(ctx, SERVICES, &ingress.key.namespace, backend)? {
        return Ok(name);
    }
    out.warning(
        Some(ingress.key),
        "ServicePortMissing",
        format!(
            "Ingress {id:?}: Service {:?} has no port {:?} (or does not exist); its paths answer 503 until it does",
            backend.name,
            port_text(backend)
        ),
    )?;
    Ok(UNAVAILABLE_BACKEND.to_owned())
}

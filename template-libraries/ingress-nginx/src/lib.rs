//! `ingress-nginx`: serves Ingresses written for ingress-nginx, their
//! `nginx.ingress.kubernetes.io/*` annotations in HAProxy terms, and says
//! for every annotation what it did ([`report`]).
//!
//! - Which Ingresses: `spec.ingressClassName` in `classNames` (default
//!   `nginx`) or naming an IngressClass whose controller is `controller`
//!   (default `k8s.io/ingress-nginx`, so the existing IngressClass of a
//!   cluster moving off ingress-nginx is taken over); the legacy
//!   `kubernetes.io/ingress.class` annotation in `classNames`; class-less
//!   Ingresses when `watchIngressWithoutClass` is set or one of those
//!   IngressClasses is the default: [`NginxClassRules`], in the SDK so
//!   `ingress` stays quiet about the Ingresses this library takes.
//! - Status: with `publishedAddress` set (or `ingress`'s), every served
//!   Ingress gets a `deployed`-variant patch of `status.loadBalancer`, as
//!   `ingress` publishes its own.
//! - Routing: the SDK's routing table ([`haptic_sdk::ingress::routes`],
//!   the bundled `ingress` library's engine) under this library's map
//!   names, plus a regex map for `use-regex` / `rewrite-target` paths
//!   ([`regex`]). Backends are `kubernetes-backends`' (one server per
//!   endpoint, named after its pod), so readiness flips stay runtime
//!   changes and the readiness gate holds for these Ingresses too.
//!   `default-backend` and canaries route before the maps, comparing the
//!   backend the maps would pick (`txn.ingress_nginx_backend`).
//! - TLS: `spec.tls` certificates by SNI from this library's crt-list, on
//!   the one HTTPS bind `ingress` writes (or this library, when `ingress`
//!   serves no TLS): [`haptic_sdk::ingress::tls`].
//! - TLS to the pods (`backend-protocol`, `proxy-ssl-*`: server options)
//!   and client certificates (`auth-tls-*`: crt-list line options and
//!   request rules): [`tls`], the Secrets checked by the SDK's
//!   `trust_material`.
//! - TLS passthrough (`ssl-passthrough` with `sslPassthrough.enabled`): a
//!   TCP frontend on the public HTTPS address routes by SNI
//!   ([`passthrough`]).
//! - Annotations: typed ([`parse`]) before any reaches the configuration
//!   ([`policy`]); the rest are reported from the [`catalogue`]. Snippet
//!   annotations are never applied. `unsupportedAnnotations: refuse`
//!   leaves an Ingress with an annotation haptic does not honour unserved.

pub mod annotations;
pub mod catalogue;
pub mod claims;
pub mod lines;
pub mod parse;
pub mod passthrough;
pub mod policy;
pub mod regex;
pub mod report;
pub mod rewrites;
pub mod tls;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use haptic_sdk::claims::HostClaims;
use haptic_sdk::ingress::claims::Claimed;
use haptic_sdk::ingress::published::{self, PublishedAddress, Publishing};
use haptic_sdk::ingress::routes::{self, PathKind, RouteMaps, RouteTable};
use haptic_sdk::ingress::tls::{
    CertificateCache, Certificates, HttpsBind, INGRESS_NGINX, TlsSecret, TrustMaterial,
    parse_reference, secrets_watch, trust_material,
};
use haptic_sdk::ingress::{NginxClassRules, port_text, service_port, service_port_backend};
use haptic_sdk::k8s::api::core::v1::{ConfigMap, Secret};
use haptic_sdk::k8s::api::networking::v1::{Ingress, IngressClass, IngressServiceBackend};
use haptic_sdk::names::{backend_name, map_line, sanitize};
use haptic_sdk::slim::{CONFIG_MAP_IGNORE_FIELDS, SERVICE_IGNORE_FIELDS, ServicePorts};
use haptic_sdk::{
    Context, Entry, Info, Library, Output, Plan, Result, SectionKind, Slot, Values, Watch,
};
use passthrough::PassthroughRoutes;
use serde::Deserialize;

use crate::annotations::Annotations;
use crate::policy::Policy;

/// Watch names.
pub const INGRESSES: &str = "ingresses";
pub const INGRESS_CLASSES: &str = "ingressclasses";
pub const SERVICES: &str = "services";
/// The Service whose address is published (with `publishedService`, its
/// own or `ingress`'s).
pub const PUBLISHED_SERVICE: &str = "published-service";
/// Opaque Secrets: `auth-secret`'s users, `proxy-ssl-secret`'s CA and
/// client certificate.
pub const SECRETS: &str = "secrets";
/// The ConfigMaps `custom-headers` names.
pub const CONFIG_MAPS: &str = "configmaps";
/// `kubernetes.io/tls` Secrets: the certificates of `spec.tls`.
pub const TLS_SECRETS: &str = "tls-secrets";

/// This library's routing maps (a file has one owner).
pub const NGINX_MAPS: RouteMaps = RouteMaps {
    exact: "maps/ingress-nginx-exact.map",
    prefix: "maps/ingress-nginx-prefix.map",
    exact_routes: "maps/ingress-nginx-exact-routes.map",
    prefix_routes: "maps/ingress-nginx-prefix-routes.map",
};
/// `map_reg` keys of regex paths -> backend, in nginx's order.
pub const REGEX_MAP: &str = "maps/ingress-nginx-regex.map";
/// The same keys -> the Ingress.
pub const REGEX_ROUTES_MAP: &str = "maps/ingress-nginx-regex-routes.map";
/// Answers 503 for routes whose Service or port does not exist.
pub const UNAVAILABLE_BACKEND: &str = "ingress-nginx.unavailable";
/// What the name of a `service-upstream` backend starts with; the rest is
/// the name of the Service port's endpoints backend.
pub const CLUSTER_IP_BACKEND_PREFIX: &str = "ingress-nginx.cluster-ip.";

/// What happens to an Ingress carrying an annotation haptic does not
/// honour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unsupported {
    /// Served without it; reported.
    #[default]
    Warn,
    /// Not served at all; reported.
    Refuse,
}

/// Values under `templateLibraries.ingressNginx`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NginxValues {
    /// `classNames`, `controller`, `watchIngressWithoutClass`: the SDK's
    /// rule, which `ingress` reads too (so it stays quiet about ours).
    #[serde(flatten)]
    pub classes: NginxClassRules,
    pub unsupported_annotations: Unsupported,
    pub annotation_prefix: String,
    pub frontend: String,
    #[serde(default)]
    pub tls: NginxTlsValues,
    /// Published in `status.loadBalancer` of the Ingresses it serves (a
    /// fixed address, or the address of a Service, `namespace/name`); both
    /// empty: what `ingress` publishes (one address for haptic).
    #[serde(default)]
    pub published_address: PublishedAddress,
    #[serde(default)]
    pub published_service: String,
    #[serde(default)]
    pub ssl_passthrough: SslPassthroughValues,
    /// Whether a canary Ingress may join the main Ingress of another
    /// namespace (off: a canary joins only a main Ingress of its own
    /// namespace). ingress-nginx joins any namespace's; in a shared
    /// cluster that lets one namespace take another's traffic (weight 100
    /// takes all of it), so an admin widens it knowingly.
    #[serde(default)]
    pub canary_across_namespaces: bool,
}

/// `sslPassthrough`: ingress-nginx's `--enable-ssl-passthrough`. The SDK's
/// [`HttpsBind`] reads the same keys, so whichever library writes the
/// HTTPS bind moves it to `internalBind`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SslPassthroughValues {
    pub enabled: bool,
    /// Where the HTTPS bind listens while the passthrough frontend takes
    /// the public address: a loopback address and port of the HAProxy pod.
    pub internal_bind: String,
}

impl SslPassthroughValues {
    fn check(&self) -> std::result::Result<(), String> {
        if self.enabled
            && (self.internal_bind.trim().is_empty()
                || self.internal_bind.contains(char::is_whitespace))
        {
            return Err(format!(
                "templateLibraries.ingressNginx.sslPassthrough.internalBind is {:?}; write one address such as \"127.0.0.1:10443\"",
                self.internal_bind
            ));
        }
        Ok(())
    }
}

/// `tls`: whether `spec.tls` certificates are served, and the HTTPS bind
/// and default certificate when `ingress` (whose bind comes first) does
/// not serve TLS itself.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NginxTlsValues {
    pub enabled: bool,
    /// The HTTPS address, e.g. `:8443`.
    pub bind: String,
    /// `namespace/name` of a `kubernetes.io/tls` Secret served when SNI
    /// matches no certificate (ingress-nginx's `--default-ssl-certificate`).
    pub default_certificate: String,
}

impl NginxTlsValues {
    /// Refuses values that would write broken configuration lines.
    fn check(&self) -> std::result::Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if self.bind.trim().is_empty() || self.bind.contains(['\n', '\r']) {
            return Err(
                "templateLibraries.ingressNginx.tls.bind must be one address such as \":8443\""
                    .to_owned(),
            );
        }
        if !self.default_certificate.is_empty()
            && parse_reference(&self.default_certificate).is_none()
        {
            return Err(format!(
                "templateLibraries.ingressNginx.tls.defaultCertificate is {:?}; write it as \
                 namespace/name",
                self.default_certificate
            ));
        }
        Ok(())
    }
}

/// Default values (the library itself is off unless enabled).
pub fn defaults() -> serde_json::Value {
    serde_json::json!({
        "enabled": false,
        "classNames": ["nginx"],
        "controller": "k8s.io/ingress-nginx",
        "watchIngressWithoutClass": false,
        "unsupportedAnnotations": "warn",
        "annotationPrefix": "nginx.ingress.kubernetes.io",
        "frontend": "http",
        "tls": { "enabled": true, "bind": ":8443", "defaultCertificate": "" },
        "publishedAddress": { "ip": "", "hostname": "" },
        "publishedService": "",
        "canaryAcrossNamespaces": false,
        "sslPassthrough": {
            "enabled": false,
            "internalBind": haptic_sdk::ingress::tls::PASSTHROUGH_INTERNAL_BIND,
        },
    })
}

/// The `ingress-nginx` library.
#[derive(Debug)]
pub struct IngressNginx {
    values: NginxValues,
    publishing: Publishing,
    certificates: CertificateCache,
    https: HttpsBind,
    /// The admin's host-claim policy (`templateLibraries.base.hostClaims`).
    claims: HostClaims,
}

impl Default for IngressNginx {
    fn default() -> Self {
        Self {
            values: NginxValues::default(),
            publishing: Publishing::default(),
            certificates: CertificateCache::new(TLS_SECRETS),
            https: HttpsBind::default(),
            claims: HostClaims::default(),
        }
    }
}

impl Library for IngressNginx {
    fn info(&self) -> Info {
        // After `ingress` (200): its route lookups run first, and the two
        // classes' hosts normally differ.
        Info::new("ingress-nginx", env!("CARGO_PKG_VERSION"))
            .order(210)
            .defaults(defaults())
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        self.values = values.get()?;
        self.values.tls.check().map_err(haptic_sdk::Error::msg)?;
        self.values
            .ssl_passthrough
            .check()
            .map_err(haptic_sdk::Error::msg)?;
        self.https = HttpsBind::from_values(values);
        self.claims = values.host_claims()?;
        self.publishing = Publishing::new(
            self.values.published_address.clone(),
            &self.values.published_service,
        )?;
        if !self.publishing.is_on() {
            self.publishing = Publishing::of_ingress_library(values)?;
        }
        let mut plan = Plan::default()
            .watch(
                Watch::new(INGRESSES, "networking.k8s.io/v1", "Ingress")
                    .parse_as::<Ingress>()
                    .ignore_fields([
                        "status",
                        "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
                    ]),
            )
            .watch(
                Watch::new(INGRESS_CLASSES, "networking.k8s.io/v1", "IngressClass")
                    .parse_as::<IngressClass>(),
            )
            .watch(
                Watch::new(SERVICES, "v1", "Service")
                    .parse_as::<ServicePorts>()
                    // The cluster IP is kept for service-upstream.
                    .ignore_fields(
                        SERVICE_IGNORE_FIELDS
                            .iter()
                            .copied()
                            .filter(|field| *field != "spec.clusterIP"),
                    ),
            )
            .watch(
                // The API server filters: no TLS key or token Secret reaches
                // haptic through this watch.
                Watch::new(SECRETS, "v1", "Secret")
                    .parse_as::<Secret>()
                    .field_selector("type=Opaque")
                    .ignore_fields(["metadata.managedFields"]),
            )
            .watch(
                Watch::new(CONFIG_MAPS, "v1", "ConfigMap")
                    .parse_as::<ConfigMap>()
                    .ignore_fields(CONFIG_MAP_IGNORE_FIELDS.iter().copied()),
            );
        if self.values.tls.enabled {
            plan = plan.watch(secrets_watch(TLS_SECRETS));
        }
        if self.publishing.is_on() {
            plan = self
                .publishing
                .watch(plan, PUBLISHED_SERVICE)
                .patches_status_of("networking.k8s.io/v1", "Ingress");
        }
        Ok(plan)
    }

    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
        let published_status = self.publishing.status(ctx, PUBLISHED_SERVICE)?;
        let v = &self.values;
        let classes: Vec<_> = ctx.objects::<IngressClass>(INGRESS_CLASSES)?.collect();
        let classes = v.classes.classes(classes.iter().map(|c| c.value));
        let mut served: Vec<Entry<'_, Ingress>> = ctx
            .objects::<Ingress>(INGRESSES)?
            .filter(|ingress| v.classes.serves(&classes, ingress))
            .collect();
        // Older Ingresses win conflicts, as in ingress-nginx.
        served.sort_by(|a, b| {
            let created = |i: &Entry<'_, Ingress>| i.metadata.creation_timestamp.clone();
            (created(a), a.key).cmp(&(created(b), b.key))
        });
        // What the admin's host-claim policy refuses is taken out here, so
        // routes, certificates, passthrough and redirects never see it.
        let claimed = Claimed::new(&self.claims, &served, out)?;
        let served = claimed.entries(&served);

        let mut routing = Routing {
            canary_across_namespaces: v.canary_across_namespaces,
            ..Routing::default()
        };
        let mut certificates = Certificates::new(&INGRESS_NGINX).claims(self.claims.clone());
        let mut canaries = Vec::new();
        let mut passthrough = PassthroughRoutes::default();
        for ingress in &served {
            let id = format!("{}/{}", ingress.key.namespace, ingress.key.name);
            let Some(spec) = ingress.spec.as_ref() else {
                continue;
            };
            let empty = BTreeMap::new();
            let mut annotations = Annotations::new(
                ingress.metadata.annotations.as_ref().unwrap_or(&empty),
                &v.annotation_prefix,
            );
            let paths: Vec<&str> = spec
                .rules
                .iter()
                .flatten()
                .flat_map(|r| r.http.iter().flat_map(|h| &h.paths))
                .map(|p| p.path.as_deref().unwrap_or("/"))
                .collect();
            let mut policy = Policy::read(
                &mut annotations,
                &paths,
                &ingress.key.namespace,
                self.https.passthrough().is_some(),
            );
            claims::limit_aliases(&self.claims, ingress, &id, &mut policy.aliases, out)?;
            let findings = annotations.finish();
            let refused = v.unsupported_annotations == Unsupported::Refuse
                && findings.iter().any(|f| f.status.is_unsupported());
            report::emit(out, ingress.key, &v.annotation_prefix, &findings, refused)?;
            if refused {
                continue;
            }
            if let Some(status) = &published_status {
                published::patch_ingress(out, ingress.key, status)?;
            }
            if spec.tls.as_ref().is_some_and(|tls| !tls.is_empty()) {
                if v.tls.enabled {
                    certificates.add_ingress(ctx, &mut self.certificates, ingress, out)?;
                } else {
                    out.warning(
                        Some(ingress.key),
                        "TLSCertificateNotServed",
                        format!(
                            "Ingress {id:?} has spec.tls, but templateLibraries.ingressNginx.tls.enabled is false: HTTPS requests for its hosts get the default certificate"
                        ),
                    )?;
                }
            }
            if policy.ssl_passthrough {
                passthrough.add(ctx, out, ingress, &id, SERVICES)?;
            }
            if policy.canary.is_some() {
                // After every main Ingress: a canary joins their routes.
                canaries.push((ingress, id, policy));
                continue;
            }
            routing.add_ingress(ctx, out, ingress, &id, &policy, &v.frontend, v.tls.enabled)?;
        }
        for (ingress, id, policy) in &canaries {
            routing.add_canary(ctx, out, ingress, id, policy)?;
        }
        if v.tls.enabled {
            if self.https.is_written_by(INGRESS_NGINX.name) {
                self.https.write(
                    ctx,
                    &mut self.certificates,
                    out,
                    &v.frontend,
                    &v.tls.bind,
                    &v.tls.default_certificate,
                    "templateLibraries.ingressNginx.tls.defaultCertificate",
                )?;
            }
            for (host, options, id) in std::mem::take(&mut routing.client_hosts) {
                if !certificates.host_options(&host, &options)? {
                    out.warning(
                        None,
                        "AuthTLSHostConflict",
                        format!(
                            "Ingress {id:?}: host {host} already asks for client certificates for an older Ingress; its auth-tls-secret applies to the host's TLS connections"
                        ),
                    )?;
                }
            }
            certificates.finish(ctx, &mut self.certificates, out)?;
        }
        if let Some(bind) = self.https.passthrough() {
            passthrough.finish(out, bind, self.https.is_served())?;
        }
        routing.finish(&v.frontend, out)
    }
}

/// The routes and rules of every served Ingress, being built.
#[derive(Default)]
struct Routing {
    table: RouteTable,
    /// Regex routes in nginx's order: (key, backend, Ingress).
    regex: Vec<(String, String, String)>,
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
}

/// An Ingress's `default-backend`: where its requests go while the Service
/// they route to has no ready endpoint.
struct Fallback {
    /// `namespace/name` of the Ingress.
    ingress: String,
    /// The backends its paths route to (not the unavailable one).
    backends: Vec<String>,
    /// Whether a path of it names a missing Service or port.
    unavailable: bool,
    /// The default-backend Service's backend.
    to: String,
}

impl Fallback {
    /// `use_backend` lines for the frontend's routing, after the canaries
    /// and before the route maps; `txn.ingress_nginx_backend` holds the
    /// backend the maps would pick.
    fn routing_rules(&self) -> String {
        let (namespace, name) = self.ingress.split_once('/').unwrap_or(("", &self.ingress));
        let acl = haptic_sdk::ingress::matched_ingress_acl(namespace, name);
        let mut out = String::new();
        for backend in &self.backends {
            let _ = writeln!(
                out,
                "    use_backend {} if {acl} {{ var(txn.ingress_nginx_backend) -m str {backend} }} {{ nbsrv({backend}) eq 0 }}",
                self.to
            );
        }
        if self.unavailable {
            let _ = writeln!(
                out,
                "    use_backend {} if {acl} {{ var(txn.ingress_nginx_backend) -m str {UNAVAILABLE_BACKEND} }}",
                self.to
            );
        }
        out
    }
}

impl Routing {
    #[allow(clippy::too_many_arguments)]
    fn add_ingress(
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
        let mut regex_routes: Vec<(String, String, String)> = Vec::new();
        let mut backends: Vec<String> = Vec::new();
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
                            skipped(out, ingress, id, path_text, &host, &why)?;
                            continue;
                        }
                    };
                    for h in &rule_hosts {
                        regex_routes.push((
                            regex::route_key(h, &regex),
                            backend.clone(),
                            id.to_owned(),
                        ));
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
                    if let Err(why) = self.table.add(h, path_text, kind, &backend, id) {
                        skipped(out, ingress, id, path_text, h, &format!("{why:?}"))?;
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
        // nginx orders regex locations longest first.
        regex_routes.sort_by_key(|(key, _, _)| std::cmp::Reverse(key.len()));
        self.regex.extend(regex_routes);

        let tls_hosts: Vec<String> = spec
            .tls
            .iter()
            .flatten()
            .flat_map(|t| t.hosts.iter().flatten())
            .map(|h| h.to_ascii_lowercase())
            .filter(|h| parse::host(h, true).is_ok())
            .collect();
        let rules = policy.frontend_rules(id, &tls_hosts, &hosts);
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
        if let Some(auth) = &policy.auth {
            basic_auth(ctx, out, ingress, id, auth, frontend)?;
        }
        let custom = match &policy.custom_headers {
            Some(config_map) => custom_headers(ctx, out, ingress, config_map)?,
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

    /// Affinity and balancing belong to a whole backend: the first Ingress
    /// to set them on a Service port decides; a later one that differs is
    /// told.
    fn add_options(
        &mut self,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        policy: &Policy,
        backends: &[String],
    ) -> Result<()> {
        let Some(lines) = policy.backend_options() else {
            return Ok(());
        };
        for backend in backends {
            match self.options.get(backend) {
                None => {
                    self.options
                        .insert(backend.clone(), (id.to_owned(), lines.clone()));
                }
                Some((owner, theirs)) if *theirs != lines => {
                    out.warning(
                        Some(ingress.key),
                        "BackendSettingsConflict",
                        format!(
                            "Ingress {id:?}: its affinity, balancing, retry or connect-timeout annotations differ from those of Ingress {owner:?} on the same Service port ({backend}); HAProxy has one setting per backend, and the older Ingress's applies"
                        ),
                    )?;
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The server options of an Ingress's protocol to its pods, with its
    /// `proxy-ssl-*` when its Secret serves them (the files recorded for
    /// [`finish`](Self::finish)). A Secret that does not is a warning naming
    /// the Ingress and the Secret, and the Ingress's requests are answered
    /// 503, as ingress-nginx denies the location: never a half line, and
    /// never an unverified connection where verification was asked.
    #[allow(clippy::too_many_arguments)]
    fn server_options_of(
        &mut self,
        ctx: &Context<'_>,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        policy: &Policy,
        frontend: &str,
        tls_secrets: bool,
    ) -> Result<Option<String>> {
        let plain = tls::plain_options(policy.protocol).map(str::to_owned);
        let Some(settings) = &policy.backend_tls else {
            return Ok(plain);
        };
        let (namespace, name) = (settings.namespace.as_str(), settings.name.as_str());
        let checked = if namespace == ingress.key.namespace {
            read_trust(ctx, namespace, name, tls_secrets)?
        } else {
            Err("it is in another namespace, and haptic reads only the Ingress's own namespace's Secrets".to_owned())
        };
        let files = checked.and_then(|material| {
            let mut files = tls::TrustFiles::default();
            if let Some(ca) = material.ca {
                let path = tls::ca_file(namespace, name);
                self.trust_files.insert(path.clone(), (ca, false));
                files.ca = Some(path);
            }
            if let Some(client) = material.client {
                let path = tls::client_file(namespace, name);
                self.trust_files.insert(path.clone(), (client, true));
                files.client = Some(path);
            }
            match settings.unmet(&files) {
                Some(why) => Err(format!("Secret {namespace}/{name}: {why}")),
                None => Ok(files),
            }
        });
        match files {
            Ok(files) => Ok(Some(settings.options(policy.protocol, &files))),
            Err(problem) => {
                out.warning(
                    Some(ingress.key),
                    "ProxySSLSecretUnusable",
                    format!(
                        "Ingress {id:?}: proxy-ssl-secret {namespace}/{name}: {problem}; the requests this Ingress routes are answered 503 until it is usable"
                    ),
                )?;
                let acl = haptic_sdk::ingress::matched_ingress_acl(
                    &ingress.key.namespace,
                    &ingress.key.name,
                );
                // With the policies (10): before any rule that would let
                // the request through to an unverified pod.
                out.snippet_keyed(
                    format!("ingress-nginx-proxy-ssl:{id}"),
                    SectionKind::Frontend,
                    frontend,
                    Slot::RequestRules,
                    10,
                    format!("    http-request deny deny_status 503 if {acl}\n"),
                )?;
                Ok(plain)
            }
        }
    }

    /// `auth-tls-*`: the CA file, the crt-list options of the Ingress's
    /// hosts (applied in [`IngressNginx::render`]) and the request rules. A
    /// Secret that cannot serve is a warning naming the Ingress and the
    /// Secret, and the Ingress's requests are answered 503.
    #[allow(clippy::too_many_arguments)]
    fn add_client_auth(
        &mut self,
        ctx: &Context<'_>,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        auth: &tls::ClientAuth,
        frontend: &str,
        tls_enabled: bool,
        hosts: &[String],
    ) -> Result<()> {
        let (namespace, name) = (auth.namespace.as_str(), auth.name.as_str());
        let acl =
            haptic_sdk::ingress::matched_ingress_acl(&ingress.key.namespace, &ingress.key.name);
        let ca = if !tls_enabled {
            Err("templateLibraries.ingressNginx.tls.enabled is false, so this library has no HTTPS bind to ask for client certificates on".to_owned())
        } else if namespace != ingress.key.namespace {
            Err("it is in another namespace, and haptic reads only the Ingress's own namespace's Secrets".to_owned())
        } else {
            read_trust(ctx, namespace, name, tls_enabled)?.and_then(|material| {
                material
                    .ca
                    .ok_or_else(|| format!("Secret {namespace}/{name} has no `ca.crt`"))
            })
        };
        let rules = match ca {
            Ok(ca) => {
                let path = tls::ca_file(namespace, name);
                self.trust_files.insert(path.clone(), (ca, false));
                if let Some(options) = auth.crt_list_options(&path) {
                    for host in hosts.iter().filter(|h| tls_host_ok(h)) {
                        self.client_hosts
                            .push((host.clone(), options.clone(), id.to_owned()));
                    }
                }
                auth.rules(&acl)
            }
            Err(problem) => {
                out.warning(
                    Some(ingress.key),
                    "AuthTLSSecretUnusable",
                    format!(
                        "Ingress {id:?}: auth-tls-secret {namespace}/{name}: {problem}; the requests this Ingress routes are answered 503 until it is usable"
                    ),
                )?;
                format!("    http-request deny deny_status 503 if {acl}\n")
            }
        };
        // After the policies (10: redirects, source ranges), before basic
        // auth (20).
        out.snippet_keyed(
            format!("ingress-nginx-auth-tls:{id}"),
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            15,
            rules,
        )
    }

    /// `backend-protocol` belongs to a whole backend's servers: the first
    /// Ingress to set it on a Service port decides; a later one that
    /// differs is told.
    fn add_server_options(
        &mut self,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        options: &str,
        backends: &[String],
    ) -> Result<()> {
        for backend in backends {
            match self.server_options.get(backend) {
                None => {
                    self.server_options
                        .insert(backend.clone(), (id.to_owned(), options.to_owned()));
                }
                Some((owner, theirs)) if theirs != options => {
                    out.warning(
                        Some(ingress.key),
                        "BackendSettingsConflict",
                        format!(
                            "Ingress {id:?}: its backend-protocol differs from that of Ingress {owner:?} on the same Service port ({backend}), or its proxy-ssl-* do; HAProxy speaks one protocol to a backend's servers, and the older Ingress's applies"
                        ),
                    )?;
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// A canary Ingress: for each of its paths, the main route of the same
    /// host and path sends the requests the canary rules select to the
    /// canary's backend.
    fn add_canary(
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

    fn finish(self, frontend: &str, out: &mut Output) -> Result<()> {
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
        for (key, backend, ingress) in &self.regex {
            if let (Some(a), Some(b)) = (map_line(key, backend), map_line(key, ingress)) {
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

/// `auth-type: basic`: a secret `userlist` of the Secret's usable users and
/// the rule asking for them; without a usable user every request the
/// Ingress routes is refused (fail closed).
fn basic_auth(
    ctx: &Context<'_>,
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    id: &str,
    auth: &policy::BasicAuth,
    frontend: &str,
) -> Result<()> {
    let namespace = ingress.key.namespace.as_str();
    let acl = haptic_sdk::ingress::matched_ingress_acl(namespace, &ingress.key.name);
    let secret = ctx.get::<Secret>(SECRETS, namespace, &auth.secret)?;
    let data = secret.as_ref().and_then(|s| s.value.data.as_ref());
    let (users, refused) = match data {
        Some(data) if auth.map => {
            let pairs: Vec<(String, String)> = data
                .iter()
                .map(|(user, hash)| (user.clone(), String::from_utf8_lossy(&hash.0).into_owned()))
                .collect();
            haptic_sdk::crypt::users_of(pairs.iter().map(|(u, h)| (u.as_str(), h.as_str())))
        }
        Some(data) => haptic_sdk::crypt::htpasswd_users(
            &data
                .get("auth")
                .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
                .unwrap_or_default(),
        ),
        None => (Vec::new(), Vec::new()),
    };
    for (user, why) in refused {
        out.warning(
            Some(ingress.key),
            "AuthUserLeftOut",
            format!(
                "Ingress {id:?}: user {user} of Secret {:?} is left out: {why}",
                auth.secret
            ),
        )?;
    }
    let rule = if users.is_empty() {
        out.warning(
            Some(ingress.key),
            "AuthSecretUnusable",
            format!(
                "Ingress {id:?}: Secret {:?} (type Opaque, in its namespace) is missing or holds no usable user; every request this Ingress routes is answered 401 until it does",
                auth.secret
            ),
        )?;
        format!("    http-request deny deny_status 401 if {acl}\n")
    } else {
        let userlist = format!("ingress-nginx.auth.{}", sanitize(&id.replace('/', ".")));
        let body: String = users
            .iter()
            .map(|(user, hash)| format!("    user {user} password {hash}\n"))
            .collect();
        out.secret_section(SectionKind::Userlist, userlist.clone(), body)?;
        let realm = if auth.realm.is_empty() {
            String::new()
        } else {
            format!(" realm {}", haptic_sdk::names::quote(&auth.realm))
        };
        format!("    http-request auth{realm} if {acl} !{{ http_auth({userlist}) }}\n")
    };
    // After the source ranges (10), as nginx's access phase runs them.
    out.snippet_keyed(
        format!("ingress-nginx-auth:{id}"),
        SectionKind::Frontend,
        frontend,
        Slot::RequestRules,
        20,
        rule,
    )
}

/// Headers that frame or route the answer: set from a ConfigMap they would
/// break it (a wrong length, a second transfer coding), so never.
const FRAMING_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// The `(name, value)` headers of ConfigMap `config_map` (the Ingress's
/// namespace) for `custom-headers`: each entry checked, a bad one (not a
/// header name, a framing header, a control character in the value) left
/// out with a warning naming the Ingress, the ConfigMap and the key.
fn custom_headers(
    ctx: &Context<'_>,
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    config_map: &str,
) -> Result<Vec<(String, String)>> {
    let namespace = ingress.key.namespace.as_str();
    let id = format!("{namespace}/{}", ingress.key.name);
    let Some(found) = ctx.get::<ConfigMap>(CONFIG_MAPS, namespace, config_map)? else {
        out.warning(
            Some(ingress.key),
            "CustomHeadersMissing",
            format!(
                "Ingress {id:?}: ConfigMap {namespace}/{config_map} of annotation custom-headers does not exist; no custom header is set until it does"
            ),
        )?;
        return Ok(Vec::new());
    };
    let mut headers = Vec::new();
    for (key, value) in found.value.data.iter().flatten() {
        let checked = parse::header_name(key).and_then(|name| {
            if FRAMING_HEADERS.contains(&name.as_str()) {
                Err(format!("{name} frames the answer; HAProxy sets it"))
            } else if value.chars().any(char::is_control) {
                Err("its value holds a control character".to_owned())
            } else {
                Ok(name)
            }
        });
        match checked {
            Ok(name) => headers.push((name, value.clone())),
            Err(why) => out.warning(
                Some(ingress.key),
                "CustomHeaderLeftOut",
                format!(
                    "Ingress {id:?}: key {key:?} of ConfigMap {namespace}/{config_map} (custom-headers) is left out: {why}"
                ),
            )?,
        }
    }
    Ok(headers)
}

/// The CA and client certificate of Secret `namespace/name`, read from the
/// Opaque Secrets, else (when watched) the `kubernetes.io/tls` ones, and
/// checked by the SDK; or why they cannot be used, naming the Secret.
fn read_trust(
    ctx: &Context<'_>,
    namespace: &str,
    name: &str,
    tls_secrets: bool,
) -> Result<std::result::Result<TrustMaterial, String>> {
    let checked = if let Some(secret) = ctx.get::<Secret>(SECRETS, namespace, name)? {
        let data = secret.value.data.as_ref();
        trust_material(|key| Ok(data.and_then(|d| d.get(key)).map(|bytes| bytes.0.clone())))
    } else if let Some(secret) = tls_secrets
        .then(|| ctx.get::<TlsSecret>(TLS_SECRETS, namespace, name))
        .transpose()?
        .flatten()
    {
        trust_material(|key| secret.value.field(key))
    } else {
        let types = if tls_secrets {
            "Opaque or kubernetes.io/tls"
        } else {
            "Opaque (kubernetes.io/tls Secrets are read only with tls.enabled)"
        };
        return Ok(Err(format!(
            "Secret {namespace}/{name} does not exist or is not of type {types}"
        )));
    };
    Ok(checked.map_err(|problem| format!("Secret {namespace}/{name} is unusable: {problem}")))
}

/// A host a crt-list line can name.
fn tls_host_ok(host: &str) -> bool {
    haptic_sdk::ingress::tls::valid_host(host)
}

/// A path that is not routed: a warning on the Ingress.
fn skipped(
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

/// The backend of `default-backend`'s Service (the Ingress's namespace,
/// its first port, as ingress-nginx takes), or `None` with a warning when
/// it does not exist or has no port.
fn default_backend(
    ctx: &Context<'_>,
    out: &mut Output,
    ingress: &Entry<'_, Ingress>,
    id: &str,
    service: &str,
) -> Result<Option<String>> {
    let namespace = ingress.key.namespace.as_str();
    let port = ctx
        .get::<ServicePorts>(SERVICES, namespace, service)?
        .and_then(|s| s.value.spec.ports.first().map(|p| p.port));
    if let Some(port) = port {
        return Ok(Some(backend_name(namespace, service, port)));
    }
    out.warning(
        Some(ingress.key),
        "DefaultBackendMissing",
        format!(
            "Ingress {id:?}: Service {namespace}/{service} of annotation default-backend does not exist or has no port; until it does, requests whose Service has no ready endpoint are answered as without the annotation"
        ),
    )?;
    Ok(None)
}

/// The backend of a Service port, or [`UNAVAILABLE_BACKEND`] (with a
/// warning) when it does not exist.
fn resolve(
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

haptic_sdk::export_library!(IngressNginx);

#[cfg(test)]
mod tenants;
#[cfg(test)]
mod tests;

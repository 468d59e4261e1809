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
pub mod routing;
pub mod tls;
pub mod values;

use std::collections::BTreeMap;

use haptic_sdk::claims::HostClaims;
use haptic_sdk::ingress::claims::Claimed;
use haptic_sdk::ingress::published::{self, Publishing};
use haptic_sdk::ingress::routes::RouteMaps;
use haptic_sdk::ingress::tls::{
    CertificateCache, Certificates, HttpsBind, INGRESS_NGINX, secrets_watch,
};
use haptic_sdk::k8s::api::core::v1::{ConfigMap, Secret};
use haptic_sdk::k8s::api::networking::v1::{Ingress, IngressClass};
use haptic_sdk::slim::{CONFIG_MAP_IGNORE_FIELDS, SERVICE_IGNORE_FIELDS, ServicePorts};
use haptic_sdk::{Context, Entry, Info, Library, Output, Plan, Result, Values, Watch};
use passthrough::PassthroughRoutes;

use crate::annotations::Annotations;
use crate::policy::Policy;
use crate::routing::Routing;
pub use crate::values::{
    NginxTlsValues, NginxValues, SslPassthroughValues, Unsupported, ValuesError, defaults,
};

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
        // The WIT boundary carries the refusal as text.
        let refused = |error: ValuesError| haptic_sdk::Error::msg(error.to_string());
        self.values.tls.check().map_err(refused)?;
        self.values.ssl_passthrough.check().map_err(refused)?;
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

        let (global_auth, global_findings) = policy::read_global_auth(&v.global_auth);
        for finding in global_findings.iter().filter(|f| f.status.is_unsupported()) {
            out.warning(
                None,
                "GlobalAuthKeyNotApplied",
                format!(
                    "templateLibraries.ingressNginx.globalAuth: {} {}: {}",
                    finding.annotation,
                    finding.status.verdict(),
                    finding.status.text()
                ),
            )?;
        }
        let global_configured = global_auth != policy::GlobalAuth::None;
        let mut routing = Routing::new(v.canary_across_namespaces, global_auth);
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
            policy.take_global_auth(global_configured);
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
            for (host, options, id) in routing.take_client_hosts() {
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

haptic_sdk::export_library!(IngressNginx);

#[cfg(test)]
mod tenants;
#[cfg(test)]
mod tests;

//! `ingress`: routes `networking.k8s.io/v1` Ingresses in base's
//! `frontend http`.
//!
//! - Which Ingresses: see [`haptic_sdk::ingress::Classes`] (class `haptic`, controller
//!   `haproxy-haptic.org/controller`, the default-class annotation and the
//!   legacy `kubernetes.io/ingress.class` annotation).
//! - How requests match: see [`haptic_sdk::ingress::routes`] (exact and wildcard hosts, Exact
//!   and Prefix paths with Kubernetes semantics, via two map files so 800
//!   Ingresses stay a handful of config lines).
//! - Where they go: the backend of the Service port by the shared naming
//!   rule ([`haptic_sdk::names::backend_name`]), which `kubernetes-backends`
//!   defines. A port given by name is resolved through the Service (watched
//!   trimmed to its ports). A missing Service or port routes to
//!   `haptic.unavailable` (503). The oldest served Ingress with a
//!   `spec.defaultBackend` catches what no rule matches; without one, base's
//!   404 backend does.
//! - TLS: see [`tls`] (certificates from `kubernetes.io/tls` Secrets by
//!   SNI, a default certificate, HTTPS redirect, HSTS).
//! - Host claims: what the admin's policy (`templateLibraries.base.hostClaims`,
//!   [`haptic_sdk::claims`]) does not let an Ingress's namespace claim (a
//!   rule and its paths, a TLS host, `spec.defaultBackend`) is left out
//!   before anything else reads the Ingress, with a `HostNotAllowed` warning.
//! - Status: every served Ingress gets a `deployed`-variant patch of
//!   `status.loadBalancer`: the fixed `publishedAddress`, or the address of
//!   the `publishedService` (the chart names its HAProxy Service); see
//!   [`haptic_sdk::ingress::published`]. Ingresses of another class get
//!   nothing.

pub mod tls;

use std::collections::HashSet;

use haptic_sdk::k8s::api::networking::v1::{Ingress, IngressClass, IngressServiceBackend};
use haptic_sdk::slim::{SERVICE_IGNORE_FIELDS, ServicePorts};
use haptic_sdk::{
    Context, Entry, Info, Library, ObjectKey, Output, Plan, Result, SectionKind, Slot, Values,
    Watch, log,
};
use serde::Deserialize;

use crate::tls::{TlsRender, TlsValues};
use haptic_sdk::claims::HostClaims;
use haptic_sdk::ingress::claims;
use haptic_sdk::ingress::published::{self, PublishedAddress, Publishing};
use haptic_sdk::ingress::routes::{self, INGRESS_MAPS, PathKind, RouteTable};
use haptic_sdk::ingress::tls::{CertificateCache, HttpsBind};
use haptic_sdk::ingress::{Classes, NginxClassRules, port_text, service_port_backend};

/// Watch names.
pub const INGRESSES: &str = "ingresses";
pub const INGRESS_CLASSES: &str = "ingressclasses";
pub const SERVICES: &str = "ingress-services";
/// The Service whose address is published (only with `publishedService`).
pub const PUBLISHED_SERVICE: &str = "ingress-published-service";

/// Answers 503 for routes whose Service or port does not exist.
pub const UNAVAILABLE_BACKEND: &str = "haptic.unavailable";

/// Values under `templateLibraries.ingress`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressValues {
    /// Our class name, matched by the legacy annotation.
    pub class_name: String,
    /// `spec.controller` of our IngressClasses.
    pub controller: String,
    /// The frontend routing goes into (base's `http`).
    pub frontend: String,
    /// A fixed address for `status.loadBalancer.ingress`.
    #[serde(default)]
    pub published_address: PublishedAddress,
    /// `namespace/name` of the Service whose address is published instead.
    #[serde(default)]
    pub published_service: String,
    /// TLS termination.
    #[serde(default)]
    pub tls: TlsValues,
}

/// Default values.
pub fn defaults() -> serde_json::Value {
    serde_json::json!({
        "className": "haptic",
        "controller": "haproxy-haptic.org/controller",
        "frontend": "http",
        "publishedAddress": { "ip": "", "hostname": "" },
        "publishedService": "",
        "tls": tls::defaults()
    })
}

/// The `ingress` library.
#[derive(Debug)]
pub struct IngressLibrary {
    values: IngressValues,
    publishing: Publishing,
    certificates: CertificateCache,
    https: HttpsBind,
    /// `ingress-nginx`'s class rules when it is enabled: the Ingresses it
    /// serves are not logged as not served.
    nginx: Option<NginxClassRules>,
    /// The admin's host-claim policy (`templateLibraries.base.hostClaims`).
    claims: HostClaims,
}

impl Default for IngressLibrary {
    fn default() -> Self {
        Self {
            values: IngressValues::default(),
            publishing: Publishing::default(),
            certificates: tls::certificate_cache(),
            https: HttpsBind::default(),
            nginx: None,
            claims: HostClaims::default(),
        }
    }
}

impl Library for IngressLibrary {
    fn info(&self) -> Info {
        Info::new("ingress", env!("CARGO_PKG_VERSION"))
            .order(200)
            .defaults(defaults())
    }

    fn plan(&mut self, values: &Values) -> Result<Plan> {
        self.values = values.get()?;
        self.values.tls.check().map_err(haptic_sdk::Error::msg)?;
        self.publishing = Publishing::new(
            self.values.published_address.clone(),
            &self.values.published_service,
        )?;
        self.https = HttpsBind::from_values(values);
        self.nginx = NginxClassRules::from_values(values);
        self.claims = values.host_claims()?;
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
                    .ignore_fields(SERVICE_IGNORE_FIELDS.iter().copied()),
            );
        if self.values.tls.enabled {
            plan = plan.watch(tls::secrets_watch());
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
        let v = &self.values;
        let certificates = &mut self.certificates;
        let classes: Vec<_> = ctx.objects::<IngressClass>(INGRESS_CLASSES)?.collect();
        let nginx = self
            .nginx
            .as_ref()
            .map(|rules| (rules, rules.classes(classes.iter().map(|c| c.value))));
        let classes = Classes::new(classes.iter().map(|c| c.value), &v.controller);
        // Warnings about an Ingress are logged when it changes (or on a
        // complete render), not again on every render of any Ingress.
        let changed: HashSet<&ObjectKey> = ctx.changes().iter().map(|c| &c.key).collect();
        let mut served: Vec<Entry<'_, Ingress>> = Vec::new();
        let mut not_served = 0usize;
        for ingress in ctx.objects::<Ingress>(INGRESSES)? {
            match classes.not_served_because(&ingress, &v.class_name) {
                None => served.push(ingress),
                // Another haptic library serves it: nothing to say.
                Some(_)
                    if nginx
                        .as_ref()
                        .is_some_and(|(rules, classes)| rules.serves(classes, &ingress)) => {}
                Some(reason) => {
                    not_served += 1;
                    if ctx.is_complete() || changed.contains(ingress.key) {
                        log::warn(&format!(
                            "Ingress {}/{} is not served: {reason}",
                            ingress.key.namespace, ingress.key.name
                        ));
                    }
                }
            }
        }
        if ctx.is_complete() && not_served > 0 {
            log::warn(&format!(
                "{not_served} of {} Ingresses are not served (see the lines above)",
                not_served + served.len()
            ));
        }
        // Older Ingresses win conflicts, as with other controllers.
        served.sort_by(|a, b| {
            let created = |i: &Entry<'_, Ingress>| i.metadata.creation_timestamp.clone();
            (created(a), a.key).cmp(&(created(b), b.key))
        });
        // What the admin's host-claim policy refuses is taken out here, so
        // routes, certificates and redirects below never see it.
        let claimed = claims::Claimed::new(&self.claims, &served, out)?;
        let served = claimed.entries(&served);

        let mut table = RouteTable::default();
        let mut default_backend = None;
        for ingress in &served {
            let warn = |message: String| {
                if ctx.is_complete() || changed.contains(ingress.key) {
                    log::warn(&message);
                }
            };
            let namespace = ingress.key.namespace.as_str();
            let Some(spec) = ingress.spec.as_ref() else {
                continue;
            };
            if !v.tls.enabled && spec.tls.as_ref().is_some_and(|tls| !tls.is_empty()) {
                warn(format!(
                    "Ingress {namespace}/{} has spec.tls, but templateLibraries.ingress.tls.enabled is false: its hosts are served over plain HTTP only",
                    ingress.key.name
                ));
            }
            if default_backend.is_none()
                && let Some(backend) = spec
                    .default_backend
                    .as_ref()
                    .and_then(|b| b.service.as_ref())
            {
                default_backend = Some(resolve(ctx, ingress, namespace, backend, &warn)?);
            }
            for rule in spec.rules.iter().flatten() {
                let host = rule.host.as_deref().unwrap_or("");
                for path in rule.http.iter().flat_map(|h| &h.paths) {
                    let Some(service) = path.backend.service.as_ref() else {
                        warn(format!(
                            "ingress {namespace}/{}: a path backend without a Service is not supported; skipped",
                            ingress.key.name
                        ));
                        continue;
                    };
                    let backend = resolve(ctx, ingress, namespace, service, &warn)?;
                    let path_text = path.path.as_deref().unwrap_or("/");
                    let added = match PathKind::from_path_type(&path.path_type) {
                        Some(kind) => table
                            .add(
                                host,
                                path_text,
                                kind,
                                &backend,
                                &format!("{namespace}/{}", ingress.key.name),
                            )
                            .map_err(|why| format!("{why:?}")),
                        None => Err(format!(
                            "pathType {:?} is not Exact, Prefix or ImplementationSpecific",
                            path.path_type
                        )),
                    };
                    // A warning on the Ingress (an Event), so its author sees
                    // why: the strings are quoted, never written raw.
                    if let Err(why) = added {
                        out.warning(
                            Some(ingress.key),
                            "PathSkipped",
                            // Quoted: the name reaches here unchecked
                            // offline, where no API server validated it.
                            format!(
                                "Ingress {:?}: path {path_text:?} of host {host:?} skipped: {why}",
                                format!("{namespace}/{}", ingress.key.name)
                            ),
                        )?;
                    }
                }
            }
        }

        out.file(INGRESS_MAPS.exact, table.exact_map())?;
        out.file(INGRESS_MAPS.prefix, table.prefix_map())?;
        out.file(INGRESS_MAPS.exact_routes, table.exact_routes_map())?;
        out.file(INGRESS_MAPS.prefix_routes, table.prefix_routes_map())?;
        out.snippet(
            SectionKind::Frontend,
            &v.frontend,
            Slot::RequestRules,
            0,
            routes::request_rules(&INGRESS_MAPS),
        )?;
        out.snippet(
            SectionKind::Frontend,
            &v.frontend,
            Slot::Routing,
            0,
            routes::routing_rules(&INGRESS_MAPS),
        )?;
        if let Some(backend) = default_backend {
            out.snippet(
                SectionKind::Frontend,
                &v.frontend,
                Slot::Routing,
                1000,
                format!("    use_backend {backend}\n"),
            )?;
        }
        out.section(
            SectionKind::Backend,
            UNAVAILABLE_BACKEND,
            "    http-request return status 503 content-type text/plain string 'Service Unavailable'\n",
        )?;

        if v.tls.enabled {
            let mut tls = TlsRender::new(&v.tls, &v.frontend, self.claims.clone());
            for ingress in &served {
                tls.add_ingress(ctx, certificates, ingress, out)?;
            }
            tls.finish(ctx, certificates, &self.https, out)?;
        }

        if let Some(status) = self.publishing.status(ctx, PUBLISHED_SERVICE)? {
            for ingress in &served {
                published::patch_ingress(out, ingress.key, &status)?;
            }
        }
        Ok(())
    }
}

/// The backend name for a Service port of an Ingress, or
/// [`UNAVAILABLE_BACKEND`] when the Service or port does not exist.
fn resolve(
    ctx: &Context<'_>,
    ingress: &Entry<'_, Ingress>,
    namespace: &str,
    backend: &IngressServiceBackend,
    warn: &dyn Fn(String),
) -> Result<String> {
    if let Some(name) = service_port_backend(ctx, SERVICES, namespace, backend)? {
        return Ok(name);
    }
    warn(format!(
        "ingress {namespace}/{}: Service {namespace}/{} has no port {:?} (or does not exist); routing to {UNAVAILABLE_BACKEND} (503)",
        ingress.key.name,
        backend.name,
        port_text(backend)
    ));
    Ok(UNAVAILABLE_BACKEND.to_owned())
}

haptic_sdk::export_library!(IngressLibrary);

#[cfg(test)]
mod tenants;
#[cfg(test)]
mod tests;

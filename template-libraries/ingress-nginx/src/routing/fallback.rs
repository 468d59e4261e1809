//! `default-backend`: where an Ingress's requests go while the Service
//! they route to has no ready endpoint.

use std::fmt::Write as _;

use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::names::backend_name;
use haptic_sdk::slim::ServicePorts;
use haptic_sdk::{Context, Entry, Output, Result};

use crate::{SERVICES, UNAVAILABLE_BACKEND};

/// An Ingress's `default-backend`: where its requests go while the Service
/// they route to has no ready endpoint.
pub(super) struct Fallback {
    /// `namespace/name` of the Ingress.
    pub(super) ingress: String,
    /// The backends its paths route to (not the unavailable one).
    pub(super) backends: Vec<String>,
    /// Whether a path of it names a missing Service or port.
    pub(super) unavailable: bool,
    /// The default-backend Service's backend.
    pub(super) to: String,
}

impl Fallback {
    /// `use_backend` lines for the frontend's routing, after the canaries
    /// and before the route maps; `txn.ingress_nginx_backend` holds the
    /// backend the maps would pick.
    pub(super) fn routing_rules(&self) -> String {
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

/// The backend of `default-backend`'s Service (the Ingress's namespace,
/// its first port, as ingress-nginx takes), or `None` with a warning when
/// it does not exist or has no port.
pub(super) fn default_backend(
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

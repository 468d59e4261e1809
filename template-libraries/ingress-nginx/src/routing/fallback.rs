//! `default-backend`: where an Ingress's requests go while the Service
//! they route to has no ready endpoint.

use std::collections::BTreeMap;
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
    /// Each backend's Service and port as the Ingress names them.
    pub(super) services: BTreeMap<String, (String, String)>,
    /// Whether a path of it names a missing Service or port.
    pub(super) unavailable: bool,
    /// The default-backend Service's backend.
    pub(super) to: String,
}

impl Fallback {
    /// The conditions under which a request goes to the default backend
    /// (`txn.ingress_nginx_backend` holds the backend the maps would
    /// pick), each with the Service and port it was meant for.
    fn taken(&self) -> Vec<(String, Option<&(String, String)>)> {
        let (namespace, name) = self.ingress.split_once('/').unwrap_or(("", &self.ingress));
        let acl = haptic_sdk::ingress::matched_ingress_acl(namespace, name);
        let mut out: Vec<(String, Option<&(String, String)>)> = self
            .backends
            .iter()
            .map(|backend| {
                (
                    format!(
                        "{acl} {{ var(txn.ingress_nginx_backend) -m str {backend} }} {{ nbsrv({backend}) eq 0 }}"
                    ),
                    self.services.get(backend),
                )
            })
            .collect();
        if self.unavailable {
            out.push((
                format!("{acl} {{ var(txn.ingress_nginx_backend) -m str {UNAVAILABLE_BACKEND} }}"),
                None,
            ));
        }
        out
    }

    /// `use_backend` lines for the frontend's routing, after the canaries
    /// and before the route maps.
    pub(super) fn routing_rules(&self) -> String {
        self.taken()
            .into_iter()
            .map(|(condition, _)| format!("    use_backend {} if {condition}\n", self.to))
            .collect()
    }

    /// The request rules giving a request sent to the default backend
    /// ingress-nginx's headers (its custom error location's): `X-Code`,
    /// `X-Format`, `X-Original-URI`, `X-Namespace`, `X-Ingress-Name`,
    /// `X-Service-Name`, `X-Service-Port` and an `X-Request-ID` when the
    /// client sent none; after the lookups that set
    /// `txn.ingress_nginx_backend`.
    pub(super) fn request_rules(&self) -> String {
        let (namespace, name) = self.ingress.split_once('/').unwrap_or(("", &self.ingress));
        let mut out = String::new();
        for (condition, service) in self.taken() {
            let mut headers = vec![
                ("X-Code", "503".to_owned()),
                ("X-Format", "%[req.hdr(accept)]".to_owned()),
                ("X-Original-URI", "%[pathq]".to_owned()),
                ("X-Namespace", namespace.to_owned()),
                ("X-Ingress-Name", name.to_owned()),
            ];
            if let Some((service, port)) = service {
                headers.push(("X-Service-Name", service.clone()));
                if !port.is_empty() {
                    headers.push(("X-Service-Port", port.clone()));
                }
            }
            for (header, value) in headers {
                let _ = writeln!(
                    out,
                    "    http-request set-header {header} {value} if {condition}"
                );
            }
            let _ = writeln!(
                out,
                "    http-request set-header X-Request-ID %[uuid] if {condition} !{{ req.hdr(x-request-id) -m found }}"
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

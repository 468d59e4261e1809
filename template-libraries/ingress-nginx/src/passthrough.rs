//! `ssl-passthrough`: TLS connections for an Ingress's hosts go, by the
//! SNI of their ClientHello, to the Service's cluster IP without HAProxy
//! decrypting them, as ingress-nginx's `--enable-ssl-passthrough` proxy
//! does (it too sends them to the cluster IP).
//!
//! With `sslPassthrough.enabled` this library writes a TCP frontend on the
//! public HTTPS address ([`Passthrough::public`]); connections whose SNI no
//! passthrough host claims go on to the HTTPS bind, which then listens on
//! [`Passthrough::internal`] and reads the PROXY protocol header this
//! frontend sends, so `src` (source ranges, limits, X-Forwarded-For) stays
//! the client's. The frontend exists whenever the values turn it on, so an
//! Ingress gaining or losing the annotation changes a map line and, for a
//! new Service port, one backend.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use haptic_sdk::ingress::service_port;
use haptic_sdk::ingress::tls::Passthrough;
use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::names::{backend_name, map_line};
use haptic_sdk::{Context, Entry, Output, Result, SectionKind};

/// SNI host -> passthrough backend.
pub const MAP: &str = "maps/ingress-nginx-passthrough.map";
/// The TCP frontend on the public HTTPS address.
pub const FRONTEND: &str = "ingress-nginx-passthrough";
/// Where the connections no passthrough host claims go: the HTTPS bind.
pub const HTTPS_BACKEND: &str = "ingress-nginx.https";
/// What a passthrough backend's name starts with; the rest is the name of
/// the Service port's endpoints backend.
pub const BACKEND_PREFIX: &str = "ingress-nginx.passthrough.";

/// The passthrough hosts of every served Ingress, oldest Ingress first.
#[derive(Debug, Default)]
pub struct PassthroughRoutes {
    /// Host -> (Ingress `namespace/name`, backend).
    hosts: BTreeMap<String, (String, String)>,
    /// Backend -> its cluster IP server address.
    backends: BTreeMap<String, String>,
}

impl PassthroughRoutes {
    /// Takes the hosts of Ingress `id`, each to the Service of its path `/`
    /// (ingress-nginx's rule: passthrough is per host, the root location's
    /// backend). What cannot be passed through is a warning naming the
    /// Ingress, the host and why.
    pub fn add(
        &mut self,
        ctx: &Context<'_>,
        out: &mut Output,
        ingress: &Entry<'_, Ingress>,
        id: &str,
        services_watch: &str,
    ) -> Result<()> {
        let namespace = ingress.key.namespace.as_str();
        let rules = ingress.spec.iter().flat_map(|s| s.rules.iter().flatten());
        for rule in rules {
            let host = rule.host.as_deref().unwrap_or("").to_ascii_lowercase();
            let skip = |out: &mut Output, why: String| {
                out.warning(
                    Some(ingress.key),
                    "PassthroughHostSkipped",
                    format!("Ingress {id:?}: host {host:?} is not passed through: {why}"),
                )
            };
            if host.is_empty() || host.starts_with('*') {
                skip(
                    out,
                    "ssl-passthrough routes by the exact SNI name, so the rule needs a host that is not a wildcard".into(),
                )?;
                continue;
            }
            let root = rule
                .http
                .iter()
                .flat_map(|h| &h.paths)
                .find(|p| p.path.as_deref().unwrap_or("/") == "/");
            let Some(service) = root.and_then(|p| p.backend.service.as_ref()) else {
                skip(
                    out,
                    "it has no path / to a Service (ssl-passthrough takes the backend of path /, as ingress-nginx)".into(),
                )?;
                continue;
            };
            let Some((found, port)) = service_port(ctx, services_watch, namespace, service)? else {
                skip(
                    out,
                    format!(
                        "Service {namespace}/{} has no such port (or does not exist)",
                        service.name
                    ),
                )?;
                continue;
            };
            let Some(address) = found.cluster_ip_address(port) else {
                skip(
                    out,
                    format!(
                        "Service {namespace}/{} has no cluster IP (headless), which passthrough connections go to",
                        service.name
                    ),
                )?;
                continue;
            };
            if let Some((owner, _)) = self.hosts.get(&host) {
                skip(
                    out,
                    format!("the older Ingress {owner:?} passes it through already"),
                )?;
                continue;
            }
            let backend = format!(
                "{BACKEND_PREFIX}{}",
                backend_name(namespace, &service.name, port)
            );
            self.backends.insert(backend.clone(), address.to_string());
            self.hosts.insert(host, (id.to_owned(), backend));
        }
        Ok(())
    }

    /// Writes the TCP frontend on `bind.public`, its map, the passthrough
    /// backends and, when `https` (an HTTPS bind exists), the hop to it.
    pub fn finish(self, out: &mut Output, bind: &Passthrough, https: bool) -> Result<()> {
        let mut map = String::from("# haptic ingress-nginx: SNI host -> passthrough backend\n");
        for (host, (_, backend)) in &self.hosts {
            if let Some(line) = map_line(host, backend) {
                map.push_str(&line);
            }
        }
        out.file(MAP, map)?;
        let lookup = format!("req.ssl_sni,lower,map_str({MAP})");
        // base's defaults are HTTP ones: tcplog for the log line, and
        // idle-close-on-response off (HAProxy warns it needs HTTP mode).
        // Its `option forwardfor` cannot be negated in 2.6, so `haproxy -c`
        // notes it is ignored for the TCP backends; it is harmless.
        let mut frontend = format!(
            "    mode tcp\n    option tcplog\n    no option idle-close-on-response\n    bind {}\n    tcp-request inspect-delay 5s\n    tcp-request content accept if {{ req.ssl_hello_type 1 }}\n    use_backend %[{lookup}] if {{ {lookup} -m found }}\n",
            bind.public
        );
        if https {
            let _ = writeln!(frontend, "    default_backend {HTTPS_BACKEND}");
            out.section(
                SectionKind::Backend,
                HTTPS_BACKEND,
                format!(
                    "    mode tcp\n    server https {} send-proxy-v2\n",
                    bind.internal
                ),
            )?;
        }
        out.section(SectionKind::Frontend, FRONTEND, frontend)?;
        for (backend, address) in self.backends {
            out.section(
                SectionKind::Backend,
                &backend,
                format!("    mode tcp\n    server cluster-ip {address}\n"),
            )?;
        }
        Ok(())
    }
}

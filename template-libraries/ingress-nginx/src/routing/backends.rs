//! What belongs to a whole backend, and the first Ingress on a Service port
//! decides: affinity and balancing options, the server options of the
//! protocol to the pods (`backend-protocol`, `proxy-ssl-*`), and the client
//! certificates the Ingress's hosts ask for (`auth-tls-*`), with the trust
//! files their Secrets hold.

use haptic_sdk::ingress::tls::{TlsSecret, TrustMaterial, trust_material};
use haptic_sdk::k8s::api::core::v1::Secret;
use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::{Context, Entry, Output, Result, SectionKind, Slot};

use super::Routing;
use crate::policy::Policy;
use crate::tls;
use crate::{SECRETS, TLS_SECRETS};

impl Routing {
    /// Affinity and balancing belong to a whole backend: the first Ingress
    /// to set them on a Service port decides; a later one that differs is
    /// told.
    pub(super) fn add_options(
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
    pub(super) fn server_options_of(
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
            Err(TrustProblem::OtherNamespace)
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
                Some(why) => Err(TrustProblem::Unmet {
                    secret: format!("{namespace}/{name}"),
                    why,
                }),
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
    pub(super) fn add_client_auth(
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
            Err(TrustProblem::NoHttpsBind)
        } else if namespace != ingress.key.namespace {
            Err(TrustProblem::OtherNamespace)
        } else {
            read_trust(ctx, namespace, name, tls_enabled)?.and_then(|material| {
                material.ca.ok_or_else(|| TrustProblem::NoCa {
                    secret: format!("{namespace}/{name}"),
                })
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
    pub(super) fn add_server_options(
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
}

/// Why the Secret of a `proxy-ssl-secret` or `auth-tls-secret` cannot
/// serve: the warning names the Ingress and the Secret with this text, and
/// the Ingress's requests are answered 503.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TrustProblem {
    /// `tls.enabled` is false: no HTTPS bind to ask for client
    /// certificates on.
    NoHttpsBind,
    /// The Secret is in another namespace than the Ingress.
    OtherNamespace,
    /// No Secret `secret` (`namespace/name`) of a type this library reads.
    Missing { secret: String, types: &'static str },
    /// Its data did not pass the SDK's checks (the SDK's text).
    Unusable { secret: String, problem: String },
    /// It lacks what the annotations ask for.
    Unmet { secret: String, why: &'static str },
    /// `auth-tls-secret` without `ca.crt`.
    NoCa { secret: String },
}

impl std::fmt::Display for TrustProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoHttpsBind => f.write_str(
                "templateLibraries.ingressNginx.tls.enabled is false, so this library has no HTTPS bind to ask for client certificates on",
            ),
            Self::OtherNamespace => f.write_str(
                "it is in another namespace, and haptic reads only the Ingress's own namespace's Secrets",
            ),
            Self::Missing { secret, types } => {
                write!(f, "Secret {secret} does not exist or is not of type {types}")
            }
            Self::Unusable { secret, problem } => {
                write!(f, "Secret {secret} is unusable: {problem}")
            }
            Self::Unmet { secret, why } => write!(f, "Secret {secret}: {why}"),
            Self::NoCa { secret } => write!(f, "Secret {secret} has no `ca.crt`"),
        }
    }
}

/// The CA and client certificate of Secret `namespace/name`, read from the
/// Opaque Secrets, else (when watched) the `kubernetes.io/tls` ones, and
/// checked by the SDK; or why they cannot be used, naming the Secret.
fn read_trust(
    ctx: &Context<'_>,
    namespace: &str,
    name: &str,
    tls_secrets: bool,
) -> Result<std::result::Result<TrustMaterial, TrustProblem>> {
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
        return Ok(Err(TrustProblem::Missing {
            secret: format!("{namespace}/{name}"),
            types,
        }));
    };
    Ok(checked.map_err(|problem| TrustProblem::Unusable {
        secret: format!("{namespace}/{name}"),
        problem,
    }))
}

/// A host a crt-list line can name.
fn tls_host_ok(host: &str) -> bool {
    haptic_sdk::ingress::tls::valid_host(host)
}

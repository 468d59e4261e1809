//! Certificates of HTTPS listeners: `kubernetes.io/tls` Secrets, checked by
//! the host, written as one PEM file each (chain, then key) under
//! `certs/gateway/`.

use std::collections::BTreeMap;

use haptic_sdk::ingress::tls::{CertificateCache, TlsSecret};
use haptic_sdk::{Context, Result, Watch};

use crate::api::ObjectReference;
use crate::grants::{Grants, Reference};

/// The watch of TLS Secrets.
pub const SECRETS: &str = "gateway-secrets";

/// Only TLS Secrets (the API server filters), without annotations: the
/// SDK's watch, the one Ingress libraries use.
pub fn secrets_watch() -> Watch {
    haptic_sdk::ingress::tls::secrets_watch(SECRETS)
}

/// The cache of checked Secrets, kept by the library between renders.
pub fn certificate_cache() -> CertificateCache {
    CertificateCache::new(SECRETS)
}

/// Why a listener's certificates cannot be used: its ResolvedRefs reason.
#[derive(Debug, Clone)]
pub struct Problem {
    pub reason: &'static str,
    pub message: String,
}

/// The certificates the render needs: file path -> PEM.
#[derive(Debug, Default)]
pub struct Certificates {
    /// Secrets as the render sees them: (namespace, name) -> PEM or why not.
    secrets: BTreeMap<(String, String), std::result::Result<String, String>>,
    /// Files used by this render.
    pub files: BTreeMap<String, String>,
}

impl Certificates {
    /// Every TLS Secret as this render sees it, each checked by the host
    /// once per resourceVersion (`cache` keeps the answers between renders).
    pub fn load(ctx: &Context<'_>, cache: &mut CertificateCache) -> Result<Self> {
        let mut secrets = BTreeMap::new();
        if ctx.count(SECRETS) > 0 {
            for secret in ctx.objects::<TlsSecret>(SECRETS)? {
                let (namespace, name) = (&secret.key.namespace, &secret.key.name);
                let usable = cache.bundle(ctx, namespace, name)?;
                secrets.insert((namespace.clone(), name.clone()), usable);
            }
        }
        cache.retain_existing(ctx);
        Ok(Self {
            secrets,
            files: BTreeMap::new(),
        })
    }

    /// The files of a listener's `certificateRefs`, or the first problem.
    pub fn resolve(
        &mut self,
        gateway_namespace: &str,
        refs: &[ObjectReference],
        grants: &Grants,
    ) -> std::result::Result<Vec<String>, Problem> {
        let mut files = Vec::new();
        for r in refs {
            let group = r.group.as_deref().unwrap_or("");
            let kind = r.kind.as_deref().unwrap_or("Secret");
            let namespace = r.namespace.as_deref().unwrap_or(gateway_namespace);
            if !group.is_empty() || kind != "Secret" {
                return Err(Problem {
                    reason: "InvalidCertificateRef",
                    message: format!("certificateRef {group}/{kind} {:?} is not a Secret", r.name),
                });
            }
            let reference = Reference {
                from_group: crate::api::GROUP,
                from_kind: "Gateway",
                from_namespace: gateway_namespace,
                to_group: "",
                to_kind: "Secret",
                to_namespace: namespace,
                to_name: &r.name,
            };
            if !grants.allows(&reference) {
                return Err(Problem {
                    reason: "RefNotPermitted",
                    message: format!(
                        "Secret {namespace}/{} is in another namespace and no ReferenceGrant there allows Gateways of {gateway_namespace} to use it",
                        r.name
                    ),
                });
            }
            match self.secrets.get(&(namespace.to_owned(), r.name.clone())) {
                None => {
                    return Err(Problem {
                        reason: "InvalidCertificateRef",
                        message: format!(
                            "Secret {namespace}/{} does not exist (or is not of type kubernetes.io/tls)",
                            r.name
                        ),
                    });
                }
                Some(Err(why)) => {
                    return Err(Problem {
                        reason: "InvalidCertificateRef",
                        message: why.clone(),
                    });
                }
                Some(Ok(pem)) => {
                    let path = format!("certs/gateway/{namespace}_{}.pem", r.name);
                    self.files.insert(path.clone(), pem.clone());
                    files.push(path);
                }
            }
        }
        Ok(files)
    }
}

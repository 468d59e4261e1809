//! An Ingress as the admin's host-claim policy ([`crate::claims`]) lets its
//! namespace claim it: the rules, TLS hosts and `spec.defaultBackend` it
//! may not claim are taken out before any library reads it, so its routes,
//! certificates and redirects all follow one decision.

use crate::claims::{Claim, HostClaims, REASON, Refusal};
use crate::k8s::api::networking::v1::Ingress;
use crate::{Entry, Output, Result};

/// `ingress` without what `policy` refuses its namespace, each refusal a
/// [`REASON`] warning on the Ingress; `None` when nothing is refused (use
/// the Ingress as it is).
///
/// - A rule whose host is refused is left out with its paths; a rule
///   without a host claims every host (its paths are looked up for any
///   host after the host's own routes).
/// - A refused `spec.tls` host is left out; an entry left with no host is
///   dropped (a host-less entry would mean its certificate's names).
/// - `spec.defaultBackend` claims every host (it answers what no route
///   matches, under any host).
pub fn claimed(
    policy: &HostClaims,
    ingress: &Entry<'_, Ingress>,
    out: &mut Output,
) -> Result<Option<Ingress>> {
    if policy.is_open() {
        return Ok(None);
    }
    let Some(spec) = ingress.spec.as_ref() else {
        return Ok(None);
    };
    let namespace = ingress.key.namespace.as_str();
    let what = format!("Ingress {namespace}/{}", ingress.key.name);
    let mut warn = |part: &str, refusal: Refusal| {
        out.warning(
            Some(ingress.key),
            REASON,
            format!("{what}: {part} is not served: {refusal}"),
        )
    };
    let mut refused = false;
    let mut kept = spec.clone();

    if let Some(rules) = kept.rules.as_mut() {
        let mut outcome = Ok(());
        rules.retain(|rule| {
            let host = rule.host.as_deref().filter(|h| !h.is_empty());
            let claim = host.map_or(Claim::AnyHost, Claim::Host);
            match policy.check(namespace, claim) {
                Ok(()) => true,
                Err(refusal) => {
                    refused = true;
                    let part = match host {
                        Some(host) => format!("the rule for host {host}"),
                        None => "a rule without a host".to_owned(),
                    };
                    if outcome.is_ok() {
                        outcome = warn(&part, refusal);
                    }
                    false
                }
            }
        });
        outcome?;
    }
    if kept.default_backend.is_some()
        && let Err(refusal) = policy.check(namespace, Claim::AnyHost)
    {
        refused = true;
        kept.default_backend = None;
        warn("spec.defaultBackend", refusal)?;
    }
    if let Some(entries) = kept.tls.take() {
        let mut checked = Vec::with_capacity(entries.len());
        for mut entry in entries {
            let Some(hosts) = entry.hosts.as_mut().filter(|h| !h.is_empty()) else {
                // Host-less: its certificate's names, checked by
                // `Certificates` once the certificate is read.
                checked.push(entry);
                continue;
            };
            let before = hosts.len();
            let mut outcome = Ok(());
            hosts.retain(|host| match policy.check(namespace, Claim::Host(host)) {
                Ok(()) => true,
                Err(refusal) => {
                    if outcome.is_ok() {
                        outcome = warn(&format!("TLS host {host}"), refusal);
                    }
                    false
                }
            });
            outcome?;
            refused |= hosts.len() < before;
            // Emptied by the policy: dropped, not read as "the
            // certificate's own names".
            if !hosts.is_empty() {
                checked.push(entry);
            }
        }
        kept.tls = Some(checked);
    }
    if !refused {
        return Ok(None);
    }
    let mut copy = ingress.value.clone();
    copy.spec = Some(kept);
    Ok(Some(copy))
}

/// Every served Ingress as [`claimed`] leaves it, for a whole render.
#[derive(Debug, Default)]
pub struct Claimed(Vec<Option<Ingress>>);

impl Claimed {
    /// Applies `policy` to each of `served`, warning on what it refuses.
    pub fn new(
        policy: &HostClaims,
        served: &[Entry<'_, Ingress>],
        out: &mut Output,
    ) -> Result<Self> {
        let mut limited = Vec::with_capacity(served.len());
        for ingress in served {
            limited.push(claimed(policy, ingress, out)?);
        }
        Ok(Self(limited))
    }

    /// `served` (the list given to [`new`](Self::new), in its order) with
    /// each Ingress replaced by what its namespace may claim of it.
    pub fn entries<'a>(&'a self, served: &[Entry<'a, Ingress>]) -> Vec<Entry<'a, Ingress>> {
        served
            .iter()
            .zip(&self.0)
            .map(|(entry, limited)| Entry {
                value: limited.as_ref().unwrap_or(entry.value),
                ..*entry
            })
            .collect()
    }
}

//! The admin's host-claim policy ([`haptic_sdk::claims`]) for what only
//! ingress-nginx reads as hosts. The Ingress's own rules, TLS hosts and
//! default backend are limited by the SDK before this library reads them
//! ([`haptic_sdk::ingress::claims`]); the `server-alias` annotation names
//! more hosts, routed like the rules' hosts, so they answer to the same
//! policy here.

use haptic_sdk::claims::{Claim, HostClaims, REASON};
use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::{Entry, Output, Result};

/// Keeps the aliases the Ingress's namespace may claim; each refused one is
/// a [`REASON`] warning on the Ingress.
pub fn limit_aliases(
    policy: &HostClaims,
    ingress: &Entry<'_, Ingress>,
    id: &str,
    aliases: &mut Vec<String>,
    out: &mut Output,
) -> Result<()> {
    if policy.is_open() {
        return Ok(());
    }
    let mut outcome = Ok(());
    aliases.retain(
        |alias| match policy.check(&ingress.key.namespace, Claim::Host(alias)) {
            Ok(()) => true,
            Err(refusal) => {
                if outcome.is_ok() {
                    outcome = out.warning(
                        Some(ingress.key),
                        REASON,
                        format!("Ingress {id}: server-alias {alias} is not served: {refusal}"),
                    );
                }
                false
            }
        },
    );
    outcome
}

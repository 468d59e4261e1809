//! The admin's host-claim policy ([`haptic_sdk::claims`]) on Gateways and
//! routes.
//!
//! - A listener's `hostname` is claimed by its Gateway's namespace: a
//!   refused one is `Accepted: False` (`UnsupportedValue`, as for a hostname
//!   the library cannot serve), so no route attaches and no certificate is
//!   served for it.
//! - A route's hostnames on a listener (its own intersected with the
//!   listener's) are claimed by the route's namespace: refused ones are left
//!   out; a route left on no listener is `Accepted: False`
//!   (`NotAllowedByListeners`: the policy is one more rule of which routes
//!   a listener takes).
//! - A listener and route that name no hostname serve any host, but only
//!   on their Gateway's own address (each Gateway has its own Service and
//!   ports); who may attach there is the Gateway's `allowedRoutes`, so
//!   this is not a claim the policy checks.
//!
//! Each refusal is also a `HostNotAllowed` warning on the object.

use haptic_sdk::claims::{Claim, HostClaims, REASON};
use haptic_sdk::{ObjectKey, Output, Result};

use crate::conditions::Condition;
use crate::listeners::CheckedListener;
use crate::routes::Attachment;

/// Refuses the listeners of a Gateway in `namespace` (key `gateway`) whose
/// hostname the policy does not give that namespace.
pub fn limit_listeners(
    policy: &HostClaims,
    gateway: &ObjectKey,
    listeners: &mut [CheckedListener],
    out: &mut Output,
) -> Result<()> {
    if policy.is_open() {
        return Ok(());
    }
    for listener in listeners.iter_mut().filter(|l| l.accepted) {
        let Some(hostname) = &listener.hostname else {
            continue;
        };
        let Err(refusal) = policy.check(&gateway.namespace, Claim::Host(hostname)) else {
            continue;
        };
        let message = format!(
            "Gateway {}/{}: listener {:?}: {refusal}",
            gateway.namespace, gateway.name, listener.name
        );
        out.warning(Some(gateway), REASON, message.clone())?;
        listener.accepted = false;
        listener.valid = false;
        listener.certificates.clear();
        let kept = listener
            .conditions
            .iter()
            .filter(|c| c.type_ == "ResolvedRefs" || c.type_ == "Conflicted")
            .cloned();
        listener.conditions = [
            Condition::new("Accepted", false, "UnsupportedValue", message),
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "the listener is not accepted",
            ),
        ]
        .into_iter()
        .chain(kept)
        .collect();
    }
    Ok(())
}

/// Leaves out of `attachments` the hostnames the route's namespace may not
/// claim, and the attachments left with none; each refusal a warning on the
/// route. `Err` is the route's `Accepted` condition when nothing is left.
pub fn limit_attachments(
    policy: &HostClaims,
    route: &ObjectKey,
    kind: &str,
    attachments: Vec<Attachment>,
    out: &mut Output,
) -> Result<std::result::Result<Vec<Attachment>, Condition>> {
    if policy.is_open() {
        return Ok(Ok(attachments));
    }
    let mut kept = Vec::with_capacity(attachments.len());
    let mut first_refusal: Option<String> = None;
    for mut attachment in attachments {
        if attachment.hostnames.is_empty() {
            kept.push(attachment);
            continue;
        }
        let mut refused = Vec::new();
        attachment.hostnames.retain(|host| {
            match policy.check(&route.namespace, Claim::Host(host)) {
                Ok(()) => true,
                Err(refusal) => {
                    refused.push(refusal);
                    false
                }
            }
        });
        for refusal in refused {
            let message = format!(
                "{kind} {}/{}: on listener {:?}: {refusal}",
                route.namespace, route.name, attachment.listener
            );
            out.warning(Some(route), REASON, message.clone())?;
            first_refusal.get_or_insert(message);
        }
        // Emptied by the policy: dropped, never read as "any host".
        if !attachment.hostnames.is_empty() {
            kept.push(attachment);
        }
    }
    match first_refusal {
        Some(message) if kept.is_empty() => Ok(Err(Condition::new(
            "Accepted",
            false,
            "NotAllowedByListeners",
            message,
        ))),
        _ => Ok(Ok(kept)),
    }
}

#[cfg(test)]
mod tests;

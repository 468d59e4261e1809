//! What the bundled `ingress` library publishes about Ingresses, for
//! libraries that add per-Ingress policy (see [`crate::extending`]).
//!
//! `txn.haptic_ingress` holds the Ingress (`namespace/name`) whose route a
//! request takes, set by `ingress`'s request rules at priority `0` from the
//! same lookups, in the same order, as its routing. So two Ingresses on one
//! host can have different policies: a rule conditioned on
//! [`matched_ingress_acl`] applies to exactly the requests that Ingress
//! routes. It is unset for a request no Ingress path matches (including
//! one that only an Ingress's `spec.defaultBackend` serves).

/// The variable naming the matched Ingress, `namespace/name`.
pub const MATCHED_INGRESS_VARIABLE: &str = "txn.haptic_ingress";

/// An anonymous ACL that is true for requests routed by Ingress
/// `namespace/name`: `{ var(txn.haptic_ingress) -m str shop/admin }`. Use it
/// in a `RequestRules` snippet at a priority above `0` (after `ingress` sets
/// the variable) or in any `ResponseRules` snippet. Names of Kubernetes
/// objects cannot hold spaces or braces, so they go in as they are.
pub fn matched_ingress_acl(namespace: &str, name: &str) -> String {
    format!("{{ var({MATCHED_INGRESS_VARIABLE}) -m str {namespace}/{name} }}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acl_names_the_ingress() {
        assert_eq!(
            matched_ingress_acl("shop", "admin"),
            "{ var(txn.haptic_ingress) -m str shop/admin }"
        );
    }
}

//! Tenant isolation (issue 40) for `spec.tls` and the redirect
//! annotation: a hostile Ingress of namespace `attacker` names the
//! victim's host in its `spec.tls` with `ssl-redirect: "true"`.

use haptic_sdk::testing::Harness;
use serde_json::{Value, json};

use super::*;

fn ingress(namespace: &str, name: &str, annotations: Value, host: &str, tls: Value) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"namespace": namespace, "name": name, "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": annotations},
        "spec": {
            "ingressClassName": "haptic",
            "tls": tls,
            "rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]
        }
    })
}

/// Keyed by host alone (`victim.test redirect`), the attacker's TLS entry
/// decided the redirect of the victim's routes on that host: plain HTTP to
/// the victim was redirected. Keyed by host and Ingress now, the victim's
/// routes (`txn.haptic_ingress` = `victim/web`) find no entry. With the old
/// key the map held `victim.test redirect` and this failed.
#[test]
fn a_tls_entry_redirects_only_its_own_ingress() {
    let mut h = Harness::<IngressLibrary>::new(json!({"tls": {"enabled": true}})).unwrap();
    h.apply(
        INGRESS_CLASSES,
        &json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                "metadata": {"name": "haptic"}, "spec": {"controller": "haproxy-haptic.org/controller"}}),
    );
    for ns in ["victim", "attacker"] {
        h.apply(
            SERVICES,
            &json!({"metadata": {"namespace": ns, "name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
        );
    }
    h.apply(
        INGRESSES,
        &ingress("victim", "web", json!({}), "victim.test", json!(null)),
    );
    h.apply(
        INGRESSES,
        &ingress(
            "attacker",
            "tls",
            json!({tls::REDIRECT_ANNOTATION: "true"}),
            "attacker.test",
            json!([{"hosts": ["victim.test"]}]),
        ),
    );
    h.render().unwrap();
    let map = h.file(tls::TLS_MAP).unwrap();
    let keys: Vec<&str> = map
        .lines()
        .filter_map(|l| l.split(' ').next())
        .filter(|k| !k.is_empty())
        .collect();
    assert_eq!(keys, ["victim.test@attacker/tls"], "{map}");
}

/// The admin reserves `victim.test` for namespace `victim`: an Ingress of
/// `attacker` adding a path, a TLS host and a host-less catch-all is
/// refused with a `HostNotAllowed` warning naming the rule; the victim's
/// routes are kept. Without the policy the attacker's path is routed (the
/// documented Kubernetes behaviour).
#[test]
fn the_host_claim_policy_keeps_a_reserved_host_to_its_namespace() {
    let policy = json!({"base": {"hostClaims": {"rules": [
        {"hosts": ["victim.test"], "namespaces": ["victim"]}
    ]}}});
    let setup = |values: Value| {
        let mut h = Harness::<IngressLibrary>::new(values).unwrap();
        h.apply(
            INGRESS_CLASSES,
            &json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                    "metadata": {"name": "haptic"}, "spec": {"controller": "haproxy-haptic.org/controller"}}),
        );
        for ns in ["victim", "attacker"] {
            h.apply(
                SERVICES,
                &json!({"metadata": {"namespace": ns, "name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
            );
        }
        h.apply(
            INGRESSES,
            &ingress("victim", "web", json!({}), "victim.test", json!(null)),
        );
        let mut attacker = ingress(
            "attacker",
            "grab",
            json!({tls::REDIRECT_ANNOTATION: "true"}),
            "victim.test",
            json!([{"hosts": ["victim.test", "attacker.test"], "secretName": "none"}]),
        );
        attacker["spec"]["rules"][0]["http"]["paths"][0]["path"] = json!("/admin");
        attacker["spec"]["rules"]
            .as_array_mut()
            .unwrap()
            .push(json!({"http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}));
        h.apply(INGRESSES, &attacker);
        h.render().unwrap();
        h
    };

    let h = setup(policy);
    let prefix = h.file(INGRESS_MAPS.prefix).unwrap();
    assert!(!prefix.contains("attacker"), "{prefix}");
    assert!(prefix.contains("victim.test/"), "{prefix}");
    let refused: Vec<String> = h
        .warnings()
        .into_iter()
        .filter(|(reason, _)| reason == "HostNotAllowed")
        .map(|(_, message)| message)
        .collect();
    assert_eq!(refused.len(), 3, "{refused:#?}");
    assert!(refused.iter().any(|m| m.contains("Ingress attacker/grab: the rule for host victim.test is not served")
        && m.contains("templateLibraries.base.hostClaims.rules[0] reserves victim.test for namespaces victim")));
    assert!(refused.iter().any(|m| m.contains("a rule without a host")));
    assert!(refused.iter().any(|m| m.contains("TLS host victim.test")));
    let tls_map = h.file(tls::TLS_MAP).unwrap();
    assert!(!tls_map.contains("victim.test"), "{tls_map}");

    // Without the policy: the newer Ingress adds its path under the host.
    let open = setup(json!({}));
    assert!(open.file(INGRESS_MAPS.prefix).unwrap().contains("attacker"));
    assert!(
        open.warnings()
            .iter()
            .all(|(reason, _)| reason != "HostNotAllowed")
    );
}

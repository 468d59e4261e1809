//! The host-claim policy reserves `victim.example.com` for namespace
//! `victim`; a shared Gateway of `infra` takes routes from all namespaces.

use haptic_sdk::SectionKind;
use haptic_sdk::testing::Harness;
use serde_json::{Value, json};

use crate::*;

fn route(namespace: &str, name: &str, created: &str, hostnames: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": namespace, "creationTimestamp": created}, "spec": {
        "parentRefs": [{"name": "gw", "namespace": "infra", "sectionName": "http"}],
        "hostnames": hostnames,
        "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                   "backendRefs": [{"name": "web", "port": 80}]}]}})
}

fn run(base: Value) -> Harness<GatewayApi> {
    let mut h =
        Harness::<GatewayApi>::new(json!({"base": base, "gatewayApi": {"enabled": true}})).unwrap();
    h.apply(GATEWAY_CLASSES, &json!({"metadata": {"name": "haptic"}, "spec": {"controllerName": "haproxy-haptic.org/gateway-controller"}}));
    h.apply(GATEWAYS, &json!({"metadata": {"name": "gw", "namespace": "infra"}, "spec": {"gatewayClassName": "haptic", "listeners": [
        {"name": "http", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "All"}}},
        {"name": "reserved", "port": 80, "protocol": "HTTP", "hostname": "victim.example.com"}
    ]}}));
    for ns in ["victim", "attacker"] {
        h.apply(SERVICES, &json!({"metadata": {"name": "web", "namespace": ns}, "spec": {"ports": [{"port": 80}]}}));
    }
    h.apply(
        HTTP_ROUTES,
        &route(
            "victim",
            "web",
            "2026-01-02T00:00:00Z",
            json!(["victim.example.com"]),
        ),
    );
    // Older than the victim's: without the policy it would win the host.
    h.apply(
        HTTP_ROUTES,
        &route(
            "attacker",
            "grab",
            "2026-01-01T00:00:00Z",
            json!(["victim.example.com"]),
        ),
    );
    h.apply(
        HTTP_ROUTES,
        &route(
            "attacker",
            "mixed",
            "2026-01-01T00:00:00Z",
            json!(["victim.example.com", "attacker.example.com"]),
        ),
    );
    h.render().unwrap();
    h
}

fn status(h: &Harness<GatewayApi>, key: &str) -> Value {
    h.status_patches()
        .into_iter()
        .find_map(|(k, status)| (k == key).then_some(status))
        .unwrap_or_else(|| panic!("no status patch of {key}"))
}

fn condition<'a>(conditions: &'a Value, type_: &str) -> &'a Value {
    conditions
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} in {conditions}"))
}

#[test]
fn a_reserved_hostname_is_refused_on_listeners_and_routes_of_other_namespaces() {
    let h = run(json!({"hostClaims": {"rules": [
        {"hosts": ["victim.example.com"], "namespaces": ["victim"]}
    ]}}));
    let frontend = h
        .section(SectionKind::Frontend, "gateway.infra.gw.80")
        .unwrap();
    let maps: String = h
        .output()
        .values()
        .filter_map(|item| match item {
            haptic_sdk::Item::File { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    let all = format!("{frontend}{maps}");
    assert!(all.contains("victim/web/0"), "{all}");
    assert!(!all.contains("attacker/grab/"), "{all}");
    assert!(all.contains("attacker/mixed/0"), "{all}");

    let grab = status(&h, "attacker/grab");
    let accepted = condition(&grab["parents"][0]["conditions"], "Accepted");
    assert_eq!(accepted["status"], "False");
    assert_eq!(accepted["reason"], "NotAllowedByListeners");
    assert!(
        accepted["message"]
            .as_str()
            .unwrap()
            .contains("hostClaims.rules[0]")
    );
    let mixed = status(&h, "attacker/mixed");
    assert_eq!(
        condition(&mixed["parents"][0]["conditions"], "Accepted")["status"],
        "True"
    );

    let gateway = status(&h, "infra/gw");
    let reserved = gateway["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "reserved")
        .unwrap();
    let accepted = condition(&reserved["conditions"], "Accepted");
    assert_eq!(accepted["status"], "False", "{reserved}");
    let warnings: Vec<String> = h
        .warnings()
        .into_iter()
        .filter(|(reason, _)| reason == "HostNotAllowed")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert!(
        warnings
            .iter()
            .any(|m| m.starts_with("Gateway infra/gw: listener \"reserved\""))
    );
    assert!(
        warnings
            .iter()
            .any(|m| m.starts_with("HTTPRoute attacker/grab:"))
    );
}

#[test]
fn without_the_policy_every_hostname_attaches() {
    let h = run(json!({}));
    assert_eq!(
        condition(
            &status(&h, "attacker/grab")["parents"][0]["conditions"],
            "Accepted"
        )["status"],
        "True"
    );
    assert!(
        h.warnings()
            .iter()
            .all(|(reason, _)| reason != "HostNotAllowed")
    );
}

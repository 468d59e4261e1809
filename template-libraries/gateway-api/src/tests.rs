use super::*;
use haptic_sdk::testing::Harness;

#[test]
fn off_by_default() {
    assert_eq!(defaults()["enabled"], false);
}

#[test]
fn nothing_without_a_class_of_ours() {
    let mut h = Harness::<GatewayApi>::new(json!({})).unwrap();
    h.apply(
        GATEWAY_CLASSES,
        &json!({"metadata": {"name": "other"}, "spec": {"controllerName": "example.com/other"}}),
    );
    h.render().unwrap();
    assert!(
        h.section(SectionKind::Backend, INTERNAL_ERROR_BACKEND)
            .is_none()
    );
}

fn harness() -> Harness<GatewayApi> {
    let mut h = Harness::<GatewayApi>::new(json!({"gatewayApi": {"enabled": true}})).unwrap();
    h.apply(GATEWAY_CLASSES, &json!({"metadata": {"name": "haptic"}, "spec": {"controllerName": "haproxy-haptic.org/gateway-controller"}}));
    h.apply(GATEWAYS, &json!({"metadata": {"name": "gw", "namespace": "ns"}, "spec": {"gatewayClassName": "haptic", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}));
    h
}

/// The rule ids of the frontend's `set-var(txn.gw_rule)` lines, in order.
fn rule_order(h: &Harness<GatewayApi>) -> Vec<String> {
    h.section(SectionKind::Frontend, "gateway.ns.gw.80")
        .unwrap()
        .lines()
        .filter_map(|l| l.split("set-var(txn.gw_rule) str(").nth(1))
        .map(|rest| rest.split(')').next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn matches_follow_the_specs_precedence_across_routes() {
    let mut h = harness();
    h.apply(HTTP_ROUTES, &json!({"metadata": {"name": "old", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {
        "parentRefs": [{"name": "gw"}],
        "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/a"}}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/a"}, "headers": [{"name": "x", "value": "1"}]}]}
        ]}}));
    h.apply(HTTP_ROUTES, &json!({"metadata": {"name": "new", "namespace": "ns", "creationTimestamp": "2026-01-02T00:00:00Z"}, "spec": {
        "parentRefs": [{"name": "gw"}],
        "hostnames": ["exact.example.com"],
        "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]},
        ]}}));
    h.apply(HTTP_ROUTES, &json!({"metadata": {"name": "newer", "namespace": "ns", "creationTimestamp": "2026-01-03T00:00:00Z"}, "spec": {
        "parentRefs": [{"name": "gw"}],
        "rules": [
            {"matches": [{"path": {"type": "Exact", "value": "/a"}}, {"path": {"type": "PathPrefix", "value": "/a/b"}}, {"path": {"type": "PathPrefix", "value": "/a"}, "method": "GET"}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/a"}}]}
        ]}}));
    h.render().unwrap();
    assert_eq!(
        rule_order(&h),
        [
            // A hostname beats any path of a route without one.
            "ns/new/0",
            // Exact, then the longest prefix, then a method, then more
            // headers, then the older route, then the rule order.
            "ns/newer/0",
            "ns/newer/0",
            "ns/newer/0",
            "ns/old/1",
            "ns/old/0",
            "ns/newer/1",
        ]
    );
}

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

#[test]
fn a_gateway_service_in_another_namespace_gets_an_endpoint_slice_of_the_haproxy_pods() {
    let values = json!({"gatewayApi": {"enabled": true, "service": {"selector": {"app": "haproxy"}, "podNamespace": "haptic"}}});
    let mut h = Harness::<GatewayApi>::new(values).unwrap();
    let pods = h
        .plan()
        .watches
        .iter()
        .find(|w| w.name == HAPROXY_PODS)
        .expect("a pod watch");
    assert_eq!(pods.namespace.as_deref(), Some("haptic"));
    assert_eq!(pods.label_selector.as_deref(), Some("app=haproxy"));
    h.apply(GATEWAY_CLASSES, &json!({"metadata": {"name": "haptic"}, "spec": {"controllerName": "haproxy-haptic.org/gateway-controller"}}));
    h.apply(GATEWAYS, &json!({"metadata": {"name": "gw", "namespace": "apps"}, "spec": {"gatewayClassName": "haptic", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}));
    let pod = |name: &str, ip: &str, ready: &str| json!({"metadata": {"name": name, "namespace": "haptic", "labels": {"app": "haproxy"}}, "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": ready}]}});
    h.apply(HAPROXY_PODS, &pod("haproxy-b", "10.244.0.8", "False"));
    h.apply(HAPROXY_PODS, &pod("haproxy-a", "10.244.0.7", "True"));
    h.render().unwrap();
    let owned = |kind: &str| -> Value {
        h.output()
            .values()
            .find_map(|item| match item {
                haptic_sdk::Item::OwnedObject {
                    kind: k, manifest, ..
                } if k == kind => serde_json::from_str(manifest).ok(),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no owned {kind}"))
    };
    let service = owned("Service");
    assert!(service["spec"].get("selector").is_none(), "{service}");
    let target = service["spec"]["ports"][0]["targetPort"].clone();
    let slice = owned("EndpointSlice");
    assert_eq!(
        slice["metadata"]["labels"]["kubernetes.io/service-name"],
        "gw-haptic"
    );
    assert_eq!(
        slice["ports"],
        json!([{"name": "port-80", "port": target, "protocol": "TCP"}])
    );
    assert_eq!(
        slice["endpoints"][0]["addresses"],
        json!(["10.244.0.7"]),
        "{slice}"
    );
    assert_eq!(slice["endpoints"][0]["conditions"]["ready"], true);
    assert_eq!(slice["endpoints"][1]["conditions"]["ready"], false);
}

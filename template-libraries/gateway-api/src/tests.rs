use haptic_sdk::SectionKind;

use super::*;
use crate::routes::INTERNAL_ERROR_BACKEND;
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

/// The rule ids the frontend tries, in order: each `set-var(txn.gw_rule)
/// str(...)` line, and for each map lookup the entries of its map, longest
/// key first (the order `map_beg` prefers; exact keys of one map never
/// select the same request).
fn rule_order(h: &Harness<GatewayApi>) -> Vec<String> {
    let mut order = Vec::new();
    for line in h
        .section(SectionKind::Frontend, "gateway.ns.gw.80")
        .unwrap()
        .lines()
    {
        if let Some(rest) = line.split("set-var(txn.gw_rule) str(").nth(1) {
            order.push(rest.split(')').next().unwrap_or_default().to_owned());
        } else if let Some(rest) = line.split("set-var(txn.gw_rule) var(").nth(1) {
            let any_host = rest.starts_with("txn.gw_key_any");
            let map = rest.split(['(', ')']).nth(2).unwrap_or_default();
            let mut entries: Vec<(&str, &str)> = h
                .file(map)
                .unwrap_or_else(|| panic!("no map {map}"))
                .lines()
                .filter_map(|l| l.split_once(' '))
                .filter(|(key, _)| key.contains("||") == any_host)
                .collect();
            entries.sort_by_key(|(key, _)| std::cmp::Reverse(key.len()));
            order.extend(entries.into_iter().map(|(_, rule)| rule.to_owned()));
        }
    }
    order
}

fn frontend(h: &Harness<GatewayApi>) -> &str {
    h.section(SectionKind::Frontend, "gateway.ns.gw.80")
        .unwrap()
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
            // headers, then the older route. The newer route's second rule
            // has the same prefix as the older one's first: it is never
            // served (the older route wins), so it has no entry.
            "ns/newer/0",
            "ns/newer/0",
            "ns/newer/0",
            "ns/old/1",
            "ns/old/0",
        ]
    );
    // The path-only matches before the method and header ones are one run
    // of maps; `old/0` overlaps them (`/a`), so it opens a second run after.
    assert_eq!(frontend(&h).matches("map_str(").count(), 4);
    assert_eq!(
        h.file("maps/gateway/gateway.ns.gw.80.0.prefix.map"),
        Some("http|exact.example.com|/ ns/new/0\nhttp||/a/b/ ns/newer/0\n")
    );
    assert_eq!(
        h.file("maps/gateway/gateway.ns.gw.80.1.prefix.map"),
        Some("http||/a/ ns/old/0\n")
    );
}

/// A route of each host, as the bench writes them: a header match on
/// `/healthz` and a prefix that moves.
fn host_routes(h: &mut Harness<GatewayApi>, version: u32) {
    for i in 0..3 {
        h.apply(HTTP_ROUTES, &json!({"metadata": {"name": format!("r{i}"), "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": [format!("r{i}.example.com")],
            "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": format!("/v{version}/app")}}]},
                {"matches": [{"path": {"type": "Exact", "value": "/healthz"}, "headers": [{"name": "probe", "value": "1"}]}]}
            ]}}));
    }
}

#[test]
fn a_path_change_changes_maps_only() {
    let mut h = harness();
    host_routes(&mut h, 1);
    h.render().unwrap();
    let before = frontend(&h).to_owned();
    // The header matches of other hosts, and of the same host on another
    // path, cannot select the prefixes' requests: one run for all hosts.
    assert_eq!(before.matches("map_beg(").count(), 2, "{before}");
    assert_eq!(
        h.file("maps/gateway/gateway.ns.gw.80.0.prefix.map"),
        Some(
            "http|r0.example.com|/v1/app/ ns/r0/0\nhttp|r1.example.com|/v1/app/ ns/r1/0\nhttp|r2.example.com|/v1/app/ ns/r2/0\n"
        )
    );
    host_routes(&mut h, 2);
    h.render().unwrap();
    assert_eq!(frontend(&h), before);
    assert!(
        h.file("maps/gateway/gateway.ns.gw.80.0.prefix.map")
            .is_some_and(|m| m.contains("http|r1.example.com|/v2/app/ ns/r1/0"))
    );
}

#[test]
fn a_header_match_on_a_path_a_map_entry_would_take_splits_the_run() {
    let mut h = harness();
    h.apply(HTTP_ROUTES, &json!({"metadata": {"name": "r", "namespace": "ns"}, "spec": {
        "parentRefs": [{"name": "gw"}],
        "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/a/b"}}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/a/b"}, "headers": [{"name": "x", "value": "1"}]}]},
            {"matches": [{"path": {"type": "Exact", "value": "/a/b/c"}}]}
        ]}}));
    h.render().unwrap();
    // The exact path outranks both prefixes; the header one outranks the
    // plain prefix, which must not move before it.
    assert_eq!(rule_order(&h), ["ns/r/2", "ns/r/1", "ns/r/0"]);
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

/// The Service the library asks the host to apply for Gateway `name`.
fn owned_service(h: &Harness<GatewayApi>, name: &str) -> Option<Value> {
    h.output().values().find_map(|item| match item {
        haptic_sdk::Item::OwnedObject {
            kind,
            name: n,
            manifest,
            ..
        } if kind == "Service" && n == name => serde_json::from_str(manifest).ok(),
        _ => None,
    })
}

fn status_of(h: &Harness<GatewayApi>, key: &str) -> Value {
    h.status_patches()
        .into_iter()
        .find_map(|(k, status)| (k == key).then_some(status))
        .unwrap_or_else(|| panic!("no status patch of {key}"))
}

#[test]
fn class_parameters_set_the_service_type_and_follow_their_configmap() {
    let mut h = harness();
    h.apply(GATEWAY_CLASSES, &json!({"metadata": {"name": "haptic"}, "spec": {
        "controllerName": "haproxy-haptic.org/gateway-controller",
        "parametersRef": {"group": "", "kind": "ConfigMap", "namespace": "haptic", "name": "params"}}}));
    h.apply(
        parameters::CONFIG_MAPS,
        &json!({"metadata": {"name": "params", "namespace": "haptic"}, "data": {"service.type": "NodePort"}}),
    );
    h.render().unwrap();
    let service = owned_service(&h, "gw-haptic").expect("a Service");
    assert_eq!(service["spec"]["type"], "NodePort", "{service}");
    assert_eq!(status_of(&h, "/haptic")["conditions"][0]["status"], "True");

    // The ConfigMap goes: the class is refused, the Gateway no longer served.
    h.delete(parameters::CONFIG_MAPS, "haptic", "params");
    h.render().unwrap();
    let class = status_of(&h, "/haptic");
    assert_eq!(class["conditions"][0]["status"], "False");
    assert_eq!(class["conditions"][0]["reason"], "InvalidParameters");
    assert_eq!(
        class["conditions"][0]["message"],
        "ConfigMap haptic/params (spec.parametersRef) does not exist"
    );
    let gateway = status_of(&h, "ns/gw");
    assert_eq!(gateway["conditions"][0]["reason"], "InvalidParameters");
    assert_eq!(gateway["conditions"][1]["status"], "False");
    assert!(owned_service(&h, "gw-haptic").is_none());
    assert!(
        h.section(SectionKind::Frontend, "gateway.ns.gw.80")
            .is_none()
    );
}

#[test]
fn only_configmap_data_reaches_the_library() {
    let h = harness();
    let watch = h
        .plan()
        .watches
        .iter()
        .find(|w| w.name == parameters::CONFIG_MAPS)
        .expect("a ConfigMap watch");
    for field in ["metadata.annotations", "metadata.labels", "binaryData"] {
        assert!(
            watch.ignore_fields.iter().any(|f| f == field),
            "{field} kept"
        );
    }
}

/// An HTTPS frontend serves HTTP/3 when QUIC is on: a QUIC bind beside
/// the TCP one with the same crt-list, alt-svc naming the listener's port
/// (what clients reach through the Gateway's Service). The Service's UDP
/// port and the warning without QUIC need a checked certificate, so the
/// fixture `https-listeners` shows them through the host.
#[test]
fn an_https_frontend_with_quic_binds_it_beside_tcp() {
    let quic = match haptic_sdk::http3::Http3::from_values(
        &haptic_sdk::Values::new(
            json!({"_haproxy": {"version": "3.0.11", "quic": true, "quicOpensslCompat": true}}),
            "gateway-api",
            &json!({}),
        )
        .unwrap(),
    ) {
        haptic_sdk::http3::Http3::On(quic) => quic,
        other => panic!("{other:?}"),
    };
    let frontend = |quic: Option<(haptic_sdk::http3::Quic, u16)>| {
        crate::frontend::Frontend {
            name: "gateway.ns.gw.443".to_owned(),
            bind: ":20000".to_owned(),
            protocol: crate::listeners::Protocol::Https,
            crt_list: Some("certs/gateway/gw.crt-list".to_owned()),
            quic,
            h2: false,
            listeners: Vec::new(),
            entries: Vec::new(),
            rules: std::collections::BTreeMap::new(),
        }
        .render()
        .body
    };
    let body = frontend(Some((quic, 443)));
    assert!(
        body.contains("    bind :20000 ssl crt-list certs/gateway/gw.crt-list alpn http/1.1\n    bind quic4@:20000 ssl crt-list certs/gateway/gw.crt-list alpn h3\n"),
        "{body}"
    );
    assert!(
        body.contains("alt-svc \"h3=\\\":443\\\"; ma=86400\""),
        "{body}"
    );
    let tcp_only = frontend(None);
    assert!(
        !tcp_only.contains("quic") && !tcp_only.contains("alt-svc"),
        "{tcp_only}"
    );
}

use haptic_sdk::testing::Harness;
use haptic_sdk::{Item, SectionKind};
use serde_json::{Value, json};

use super::*;

fn service(name: &str, ports: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "default", "name": name}, "spec": {"ports": ports}})
}

/// `endpoints`: (pod, ip, ready, terminating).
fn slice(name: &str, service: &str, ports: Value, endpoints: &[(&str, &str, bool, bool)]) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(pod, ip, ready, terminating)| {
            json!({
                "addresses": [ip],
                "conditions": {"ready": ready, "serving": ready, "terminating": terminating},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": pod}
            })
        })
        .collect();
    json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": "default", "name": name, "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "ports": ports, "endpoints": endpoints
    })
}

/// The pod's own address (`status.podIP`), as the slices of these tests
/// list it: the gate routes an endpoint only at its pod's address.
fn pod_ip(name: &str) -> &'static str {
    match name {
        "web-2" | "p7" => "10.0.0.2",
        _ => "10.0.0.1",
    }
}

fn pod(name: &str, gated: bool, containers_ready: bool) -> Value {
    let gates = if gated {
        json!([{"conditionType": "haproxy-haptic.org/load-balancer-ready"}])
    } else {
        json!([])
    };
    let status = if containers_ready { "True" } else { "False" };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": "default", "name": name},
        "spec": {"readinessGates": gates},
        "status": {"podIP": pod_ip(name), "conditions": [{"type": "ContainersReady", "status": status}, {"type": "Ready", "status": "False"}]}
    })
}

fn gate_values(enabled: bool) -> Value {
    json!({"kubernetesBackends": {"podReadinessGate": {"enabled": enabled}}})
}

/// The backend's text as merged: its body, then its server lines.
fn backend(h: &Harness<KubernetesBackends>, name: &str) -> String {
    let mut text = h
        .section(SectionKind::Backend, name)
        .unwrap_or_else(|| panic!("no backend {name} in {:?}", h.output().keys()))
        .to_owned();
    if let Some(haptic_sdk::Item::Snippet { lines, .. }) =
        h.output().get(&format!("servers:{name}"))
    {
        text.push_str(lines);
    }
    text
}

#[test]
fn one_backend_per_service_port_and_one_server_per_endpoint() {
    let mut h = Harness::<KubernetesBackends>::new(json!({})).unwrap();
    h.apply(
        SERVICES,
        &service(
            "web",
            json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]),
        ),
    );
    h.apply(
        ENDPOINT_SLICES,
        &slice(
            "web-abc",
            "web",
            json!([{"name": "http", "port": 8080}, {"name": "metrics", "port": 9100}]),
            &[
                ("web-1", "10.0.0.1", true, false),
                ("web-2", "10.0.0.2", false, false),
            ],
        ),
    );
    h.render().unwrap();
    assert_eq!(
        backend(&h, "default_web_80"),
        "    balance roundrobin\n    server web-1 10.0.0.1:8080\n    server web-2 10.0.0.2:8080 disabled\n"
    );
    assert!(backend(&h, "default_web_9090").contains("server web-1 10.0.0.1:9100\n"));
}

#[test]
fn unnamed_ports_match_and_endpoints_without_pods_get_an_address_name() {
    let mut h = Harness::<KubernetesBackends>::new(json!({})).unwrap();
    h.apply(SERVICES, &service("db", json!([{"port": 5432}])));
    let mut s = slice(
        "db-1",
        "db",
        json!([{"port": 5432}]),
        &[("x", "10.0.0.9", true, false)],
    );
    s["endpoints"][0]
        .as_object_mut()
        .unwrap()
        .remove("targetRef");
    h.apply(ENDPOINT_SLICES, &s);
    h.render().unwrap();
    assert!(backend(&h, "default_db_5432").contains("server ep-10.0.0.9 10.0.0.9:5432\n"));
}

#[test]
fn gate_disabled_watches_no_pods_and_keeps_not_ready_endpoints_disabled() {
    let h = Harness::<KubernetesBackends>::new(gate_values(false)).unwrap();
    assert!(h.plan().watches.iter().all(|w| w.kind != "Pod"));
    let h = Harness::<KubernetesBackends>::new(gate_values(true)).unwrap();
    assert!(
        h.plan()
            .watches
            .iter()
            .any(|w| w.name == PODS && w.kind == "Pod")
    );
}

fn gated_case(gate: bool, pod_value: Value, ready: bool, terminating: bool) -> String {
    let mut h = Harness::<KubernetesBackends>::new(gate_values(gate)).unwrap();
    h.apply(SERVICES, &service("web", json!([{"port": 80}])));
    h.apply(
        ENDPOINT_SLICES,
        &slice(
            "web-a",
            "web",
            json!([{"port": 8080}]),
            &[("web-1", "10.0.0.1", ready, terminating)],
        ),
    );
    if gate {
        h.apply(PODS, &pod_value);
    }
    h.render().unwrap();
    backend(&h, "default_web_80")
}

#[test]
fn the_readiness_gate_rule() {
    let enabled = "    server web-1 10.0.0.1:8080\n";
    let disabled = "    server web-1 10.0.0.1:8080 disabled\n";
    assert!(
        gated_case(true, pod("web-1", true, true), false, false).ends_with(enabled),
        "gated, containers ready"
    );
    assert!(
        gated_case(true, pod("web-1", true, false), false, false).ends_with(disabled),
        "containers not ready"
    );
    assert!(
        gated_case(true, pod("web-1", true, true), false, true).ends_with(disabled),
        "terminating"
    );
    assert!(
        gated_case(true, pod("web-1", false, true), false, false).ends_with(disabled),
        "ungated"
    );
    assert!(
        gated_case(false, Value::Null, false, false).ends_with(disabled),
        "gate disabled"
    );
    assert!(
        gated_case(true, pod("other", true, true), false, false).ends_with(disabled),
        "pod unknown"
    );
    // Tenant isolation (issue 40): an endpoint counts for its pod only at
    // the pod's own address; before, any address did and this was enabled.
    let mut elsewhere = pod("web-1", true, true);
    elsewhere["status"]["podIP"] = json!("10.9.9.9");
    assert!(
        gated_case(true, elsewhere, false, false).ends_with(disabled),
        "an endpoint at an address that is not its pod's"
    );
}

#[test]
fn one_endpoint_change_re_renders_one_backend() {
    let mut h = Harness::<KubernetesBackends>::new(gate_values(true)).unwrap();
    for i in 0..50 {
        h.apply(SERVICES, &service(&format!("s{i}"), json!([{"port": 80}])));
        h.apply(
            ENDPOINT_SLICES,
            &slice(
                &format!("s{i}-a"),
                &format!("s{i}"),
                json!([{"port": 8080}]),
                &[(&format!("p{i}"), "10.0.0.1", false, false)],
            ),
        );
        h.apply(PODS, &pod(&format!("p{i}"), true, false));
    }
    // A section and its server lines per backend.
    assert_eq!(h.render().unwrap().upserts.len(), 100);

    h.apply(
        ENDPOINT_SLICES,
        &slice(
            "s7-a",
            "s7",
            json!([{"port": 8080}]),
            &[("p7", "10.0.0.2", true, false)],
        ),
    );
    let delta = h.render().unwrap();
    assert_eq!(
        delta
            .upserts
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>(),
        ["servers:default_s7_80"],
        "a flip changes the server lines only"
    );
    assert!(!delta.complete);

    // A pod whose gate state does not change re-renders nothing.
    let mut unchanged = pod("p9", true, false);
    unchanged["status"]["conditions"][1]["reason"] = json!("Other");
    h.apply(PODS, &unchanged);
    assert!(h.render().unwrap().upserts.is_empty());

    // Its containers become ready: the gate routes it, one backend changes.
    h.apply(PODS, &pod("p9", true, true));
    let delta = h.render().unwrap();
    assert_eq!(delta.upserts.len(), 1);
    match &delta.upserts[0].1 {
        Item::Snippet {
            target_name, lines, ..
        } => {
            assert_eq!(target_name, "default_s9_80");
            assert!(lines.ends_with("server p9 10.0.0.1:8080\n"), "{lines}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn deleting_slices_and_services_removes_servers_and_backends() {
    let mut h = Harness::<KubernetesBackends>::new(json!({})).unwrap();
    h.apply(SERVICES, &service("web", json!([{"port": 80}])));
    h.apply(
        ENDPOINT_SLICES,
        &slice(
            "web-a",
            "web",
            json!([{"port": 8080}]),
            &[("web-1", "10.0.0.1", true, false)],
        ),
    );
    h.render().unwrap();
    h.delete(ENDPOINT_SLICES, "default", "web-a");
    h.render().unwrap();
    assert_eq!(backend(&h, "default_web_80"), "    balance roundrobin\n");
    h.delete(SERVICES, "default", "web");
    let delta = h.render().unwrap();
    assert_eq!(delta.removals, ["section:backend:default_web_80"]);
    assert!(h.output().is_empty());
}

#[test]
fn a_slice_moving_to_another_service_re_renders_both() {
    let mut h = Harness::<KubernetesBackends>::new(json!({})).unwrap();
    h.apply(SERVICES, &service("a", json!([{"port": 80}])));
    h.apply(SERVICES, &service("b", json!([{"port": 80}])));
    h.apply(
        ENDPOINT_SLICES,
        &slice(
            "x",
            "a",
            json!([{"port": 8080}]),
            &[("p", "10.0.0.1", true, false)],
        ),
    );
    h.render().unwrap();
    h.apply(
        ENDPOINT_SLICES,
        &slice(
            "x",
            "b",
            json!([{"port": 8080}]),
            &[("p", "10.0.0.1", true, false)],
        ),
    );
    let delta = h.render().unwrap();
    assert_eq!(
        (delta.upserts.len(), delta.removals.as_slice()),
        (1, ["servers:default_a_80".to_owned()].as_slice())
    );
    assert!(!backend(&h, "default_a_80").contains("server"));
    assert!(backend(&h, "default_b_80").contains("server p 10.0.0.1:8080"));
}

#[test]
fn reconfiguring_renders_everything_again() {
    let mut h = Harness::<KubernetesBackends>::new(gate_values(false)).unwrap();
    h.apply(SERVICES, &service("web", json!([{"port": 80}])));
    h.apply(
        ENDPOINT_SLICES,
        &slice(
            "web-a",
            "web",
            json!([{"port": 8080}]),
            &[("web-1", "10.0.0.1", false, false)],
        ),
    );
    h.render().unwrap();
    h.configure(gate_values(true)).unwrap();
    h.apply(PODS, &pod("web-1", true, true));
    let delta = h.render().unwrap();
    assert!(delta.complete);
    assert!(backend(&h, "default_web_80").ends_with("server web-1 10.0.0.1:8080\n"));
}

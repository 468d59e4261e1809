use haptic_sdk::readiness::GATE_CONDITION;
use haptic_sdk::testing::Harness;
use serde_json::{Value, json};

use super::*;

fn values(enabled: bool) -> Value {
    json!({"kubernetesBackends": {"podReadinessGate": {"enabled": enabled}}})
}

fn service(name: &str) -> Value {
    json!({"metadata": {"namespace": "default", "name": name}, "spec": {"ports": [{"name": "http", "port": 80}]}})
}

/// The address of a pod: one per name, the same in its slice's endpoint
/// and its `status.podIP` (an endpoint counts for a pod only there).
fn ip(pod: &str) -> String {
    let sum: u32 = pod.bytes().map(u32::from).sum();
    format!("10.0.{}.{}", pod.len(), sum % 250 + 1)
}

/// `endpoints`: (pod, ready, terminating).
fn slice(name: &str, service: &str, endpoints: &[(&str, bool, bool)]) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(pod, ready, terminating)| {
            json!({
                "addresses": [ip(pod)],
                "conditions": {"ready": ready, "terminating": terminating},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": pod}
            })
        })
        .collect();
    json!({
        "metadata": {"namespace": "default", "name": name, "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}], "endpoints": endpoints
    })
}

fn pod(name: &str, gated: bool, containers_ready: bool, gate_set: bool) -> Value {
    let gates = if gated {
        json!([{"conditionType": GATE_CONDITION}])
    } else {
        json!([])
    };
    let mut conditions = vec![
        json!({"type": "ContainersReady", "status": if containers_ready { "True" } else { "False" }}),
    ];
    if gate_set {
        conditions.push(json!({"type": GATE_CONDITION, "status": "True"}));
    }
    json!({"metadata": {"namespace": "default", "name": name}, "spec": {"readinessGates": gates}, "status": {"podIP": ip(name), "conditions": conditions}})
}

fn patched(h: &Harness<ReadinessGatePatches>) -> Vec<String> {
    h.status_patches()
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

fn case(pod_value: Value, ready: bool, terminating: bool) -> Vec<String> {
    let mut h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    h.apply(SERVICES, &service("web"));
    h.apply(
        ENDPOINT_SLICES,
        &slice("web-a", "web", &[("web-1", ready, terminating)]),
    );
    h.apply(PODS, &pod_value);
    h.render().unwrap();
    patched(&h)
}

#[test]
fn gate_disabled_watches_nothing_and_patches_nothing() {
    for tree in [values(false), json!({})] {
        let mut h = Harness::<ReadinessGatePatches>::new(tree).unwrap();
        assert!(h.plan().watches.is_empty());
        assert!(h.plan().patches_status_of.is_empty());
        h.render().unwrap();
        assert!(h.output().is_empty());
    }
    let h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    assert_eq!(h.plan().patches_status_of, ["v1/Pod"]);
}

#[test]
fn gated_pods_the_render_routes_to_get_the_condition() {
    assert_eq!(
        case(pod("web-1", true, true, false), false, false),
        ["default/web-1"],
        "gate rule routes it"
    );
    assert_eq!(
        case(pod("web-1", true, true, false), true, false),
        ["default/web-1"],
        "ready endpoint"
    );
    assert!(
        case(pod("web-1", true, false, false), false, false).is_empty(),
        "containers not ready"
    );
    assert!(
        case(pod("web-1", true, true, false), false, true).is_empty(),
        "terminating"
    );
    assert!(
        case(pod("web-1", false, true, false), true, false).is_empty(),
        "not gated"
    );
}

#[test]
fn the_patch_sets_only_the_gate_condition_without_timestamps() {
    let mut h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    h.apply(SERVICES, &service("web"));
    h.apply(
        ENDPOINT_SLICES,
        &slice("web-a", "web", &[("web-1", true, false)]),
    );
    h.apply(PODS, &pod("web-1", true, true, false));
    h.render().unwrap();
    let (_, status) = &h.status_patches()[0];
    assert_eq!(status["conditions"].as_array().unwrap().len(), 1);
    assert_eq!(status["conditions"][0]["type"], GATE_CONDITION);
    assert_eq!(status["conditions"][0]["status"], "True");
    assert!(status["conditions"][0].get("lastTransitionTime").is_none());
}

#[test]
fn pods_not_rendered_by_kubernetes_backends_are_not_routed() {
    let mut h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    // No Service for the slice.
    h.apply(
        ENDPOINT_SLICES,
        &slice("web-a", "web", &[("web-1", true, false)]),
    );
    h.apply(PODS, &pod("web-1", true, true, false));
    h.render().unwrap();
    assert!(patched(&h).is_empty());
    // The Service appears: now it is routed.
    h.apply(SERVICES, &service("web"));
    h.render().unwrap();
    assert_eq!(patched(&h), ["default/web-1"]);
}

#[test]
fn the_condition_is_never_withdrawn_once_set() {
    let mut h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    h.apply(SERVICES, &service("web"));
    h.apply(
        ENDPOINT_SLICES,
        &slice("web-a", "web", &[("web-1", true, false)]),
    );
    h.apply(PODS, &pod("web-1", true, true, false));
    h.render().unwrap();
    // The condition lands on the pod, then the pod drops out of the slice.
    h.apply(PODS, &pod("web-1", true, true, true));
    h.apply(ENDPOINT_SLICES, &slice("web-a", "web", &[]));
    let delta = h.render().unwrap();
    assert!(delta.removals.is_empty());
    assert_eq!(patched(&h), ["default/web-1"]);
    // Only the pod's deletion ends it.
    h.delete(PODS, "default", "web-1");
    let delta = h.render().unwrap();
    assert_eq!(delta.removals.len(), 1);
    assert!(patched(&h).is_empty());
}

#[test]
fn one_change_touches_one_pod() {
    let mut h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    h.apply(SERVICES, &service("web"));
    let endpoints: Vec<(String, bool, bool)> = (0..20)
        .map(|i| (format!("web-{i}"), false, false))
        .collect();
    let refs: Vec<(&str, bool, bool)> = endpoints
        .iter()
        .map(|(p, r, t)| (p.as_str(), *r, *t))
        .collect();
    h.apply(ENDPOINT_SLICES, &slice("web-a", "web", &refs));
    for (name, _, _) in &endpoints {
        h.apply(PODS, &pod(name, true, false, false));
    }
    h.render().unwrap();
    assert!(patched(&h).is_empty());
    h.apply(PODS, &pod("web-7", true, true, false));
    let delta = h.render().unwrap();
    assert_eq!(delta.upserts.len(), 1);
    assert_eq!(patched(&h), ["default/web-7"]);
}

#[test]
fn a_pod_behind_two_services_stays_routed_while_one_slice_lists_it() {
    let mut h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    h.apply(SERVICES, &service("web"));
    h.apply(SERVICES, &service("web-canary"));
    h.apply(
        ENDPOINT_SLICES,
        &slice("web-a", "web", &[("web-1", false, false)]),
    );
    h.apply(
        ENDPOINT_SLICES,
        &slice("canary-a", "web-canary", &[("web-1", false, false)]),
    );
    h.apply(PODS, &pod("web-1", true, true, false));
    h.render().unwrap();
    assert_eq!(patched(&h), ["default/web-1"]);
    h.delete(ENDPOINT_SLICES, "default", "web-a");
    h.render().unwrap();
    assert_eq!(
        patched(&h),
        ["default/web-1"],
        "still listed by the canary slice"
    );
    h.delete(ENDPOINT_SLICES, "default", "canary-a");
    h.render().unwrap();
    assert!(patched(&h).is_empty(), "listed by no slice: not routed");
}

/// Tenant isolation (issue 40): a slice of namespace `attacker`, labelled
/// for the attacker's own Service, whose not-ready endpoint names the
/// victim's gated pod `default/web-1`, made the gate library set the gate
/// on that pod (Ready) though HAProxy routes nothing to it for the
/// victim. So did a slice of the pod's own namespace at an address that
/// is not the pod's. With `endpoint_pod` taking the `targetRef`'s
/// namespace and no address check (the code before), this test failed on
/// the first assertion (`["default/web-1"]`).
#[test]
fn only_an_own_namespace_endpoint_at_the_pods_address_counts() {
    let mut h = Harness::<ReadinessGatePatches>::new(values(true)).unwrap();
    h.apply(
        SERVICES,
        &json!({"metadata": {"namespace": "attacker", "name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
    );
    h.apply(
        ENDPOINT_SLICES,
        &json!({
            "metadata": {"namespace": "attacker", "name": "hijack", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [ip("web-1")], "conditions": {"ready": false},
                           "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-1"}}]
        }),
    );
    h.apply(PODS, &pod("web-1", true, true, false));
    h.render().unwrap();
    assert!(patched(&h).is_empty(), "{:?}", patched(&h));

    h.apply(SERVICES, &service("web"));
    h.apply(
        ENDPOINT_SLICES,
        &json!({
            "metadata": {"namespace": "default", "name": "elsewhere", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.9.9.9"], "conditions": {"ready": false},
                           "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-1"}}]
        }),
    );
    h.render().unwrap();
    assert!(patched(&h).is_empty(), "an address that is not the pod's");

    // The victim's own slice at the pod's address still counts.
    h.apply(
        ENDPOINT_SLICES,
        &slice("web-a", "web", &[("web-1", false, false)]),
    );
    h.render().unwrap();
    assert_eq!(patched(&h), ["default/web-1"]);
}

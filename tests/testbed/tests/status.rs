//! End-to-end tier: haptic's status applier against the real API server.
//! The readiness gate's condition is written by server-side apply under
//! `haptic-deployed`, which then owns that one entry of
//! `status.conditions` and nothing else.

use haptic::status_writes::StatusApplier;
use std::sync::Arc;

use haptic::library::types::{ObjectRef, PatchStatus, StatusPatch, StatusVariant};
use haptic_testbed::control_plane::{ControlPlane, ControlPlaneOptions};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const GATE: &str = "haproxy-haptic.org/load-balancer-ready";

fn gate_patch() -> Arc<StatusPatch> {
    gate_patch_for("web-1")
}

fn gate_patch_for(pod: &str) -> Arc<StatusPatch> {
    let Value::Object(status) = json!({"conditions": [{
        "type": GATE,
        "status": "True",
        "reason": "RoutedByLoadBalancer",
        "message": "Every HAProxy pod runs a configuration that routes to this pod"
    }]}) else {
        unreachable!("a JSON object literal")
    };
    Arc::new(StatusPatch {
        variant: StatusVariant::Deployed,
        object: ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "shop".into(),
            name: pod.into(),
        },
        status: PatchStatus::new(&status),
    })
}

fn condition<'a>(pod: &'a Value, kind: &str) -> Option<&'a Value> {
    pod["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_the_gate_condition_is_owned_by_haptic_deployed_alone() {
    let plane = match ControlPlane::start_with(ControlPlaneOptions::default()).await {
        Ok(plane) => plane,
        Err(e) => panic!("starting the control plane: {e}"),
    };
    let client = plane.admin_client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "shop"}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "shop");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-1"},
        "spec": {
            "readinessGates": [{"conditionType": GATE}],
            "containers": [{"name": "web", "image": "haptic.test/echo"}]
        }
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    // Another controller's condition on the same pod.
    pods.patch_status(
        "web-1",
        &PatchParams::apply("other-controller").force(),
        &Patch::Apply(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "shop"},
            "status": {"conditions": [{"type": "example.com/other", "status": "True"}]}
        })),
    )
    .await
    .expect("other manager's condition");

    let mut applier = StatusApplier::new(client.clone());
    let patch = gate_patch();
    let report = applier.apply([&patch]).await;
    assert_eq!((report.written, report.skipped), (1, 0), "{report:?}");
    assert!(report.failed.is_empty(), "{report:?}");

    let written = serde_json::to_value(pods.get("web-1").await.expect("get")).expect("json");
    assert_eq!(
        condition(&written, GATE).map(|c| &c["status"]),
        Some(&json!("True"))
    );
    assert_eq!(
        condition(&written, "example.com/other").map(|c| &c["status"]),
        Some(&json!("True")),
        "the other manager's condition survives"
    );
    let managed = written["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields");
    let ours: Vec<&Value> = managed
        .iter()
        .filter(|m| m["manager"] == "haptic-deployed")
        .collect();
    assert_eq!(ours.len(), 1, "{managed:?}");
    assert_eq!(ours[0]["subresource"], "status");
    let owned = &ours[0]["fieldsV1"];
    let status_fields: Vec<&String> = owned["f:status"]
        .as_object()
        .expect("f:status")
        .keys()
        .collect();
    assert_eq!(status_fields, ["f:conditions"], "only conditions: {owned}");
    let entries: Vec<&String> = owned["f:status"]["f:conditions"]
        .as_object()
        .expect("entries")
        .keys()
        .collect();
    assert_eq!(
        entries,
        [&format!("k:{{\"type\":\"{GATE}\"}}")],
        "only the gate's entry: {owned}"
    );

    // The same patch again is not sent.
    let version = written["metadata"]["resourceVersion"].clone();
    let report = applier.apply([&patch]).await;
    assert_eq!((report.written, report.skipped), (0, 1));
    // Nor by a new applier (a restarted controller) that sees the pod's status.
    let mut restarted = StatusApplier::new(client.clone());
    let status = written["status"].clone();
    assert!(restarted.memory().note_if_holds(&patch, &status));
    let report = restarted.apply([&patch]).await;
    assert_eq!((report.written, report.skipped), (0, 1));
    let after = serde_json::to_value(pods.get("web-1").await.expect("get")).expect("json");
    assert_eq!(
        after["metadata"]["resourceVersion"], version,
        "nothing was written"
    );

    // A patch for a pod that does not exist fails with the object named.
    let missing = gate_patch_for("gone");
    let report = applier.apply([&missing]).await;
    assert_eq!(report.failed.len(), 1);
    assert!(
        report.failed[0].object.contains("Pod shop/gone"),
        "{:?}",
        report.failed
    );
}

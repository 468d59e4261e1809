//! End-to-end tier: owned objects (contract 0.3.0) against the real API
//! server and garbage collector. The applier creates a Service owned by a
//! parent object, updates it, removes it when no render asks for it, never
//! touches a Service of the same name it did not create, finds what it
//! applied after a restart, and the garbage collector deletes what is left
//! with its owner. The oracle is the API server's own objects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use haptic::controller::{OwnedApplier, OwnedApplyError};
use haptic::owned::{DesiredObject, FIELD_MANAGER, OWNED_BY_LABEL};
use haptic::render::ObjectRef;
use haptic_testbed::control_plane::{ControlPlane, ControlPlaneOptions};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

const NAMESPACE: &str = "shop";

fn reference(kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: NAMESPACE.into(),
        name: name.into(),
    }
}

/// A Service per "Gateway" (a ConfigMap stands in for the Gateway: the
/// mechanism is the same for any owner kind, and the bed has no CRDs).
fn service(name: &str, owner: &ConfigMap, port: u16) -> DesiredObject {
    DesiredObject::new(
        Arc::from("gateway-api"),
        reference("Service", name),
        reference(
            "ConfigMap",
            owner.metadata.name.as_deref().unwrap_or_default(),
        ),
        owner.metadata.uid.as_deref().unwrap_or_default(),
        json!({"spec": {"type": "ClusterIP", "selector": {"app": "haproxy"},
            "ports": [{"name": "http", "port": port, "targetPort": 8080}]}}),
    )
}

async fn until_gone(services: &Api<Service>, name: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if services
            .get_opt(name)
            .await
            .expect("read service")
            .is_none()
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

fn port(service: &Service) -> i32 {
    service
        .spec
        .as_ref()
        .and_then(|spec| spec.ports.as_ref())
        .and_then(|ports| ports.first())
        .map(|port| port.port)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_owned_objects_are_applied_updated_removed_and_never_foreign() {
    let plane = match ControlPlane::start_with(ControlPlaneOptions::default()).await {
        Ok(plane) => plane,
        Err(e) => panic!("starting the control plane: {e}"),
    };
    let client = plane.admin_client();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let services: Api<Service> = Api::namespaced(client.clone(), NAMESPACE);
    let gateway = config_maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "gw"}})).expect("cm"),
        )
        .await
        .expect("owner");
    // A Service a person made, with the name a library will ask for.
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "theirs"},
                "spec": {"ports": [{"port": 9999}]}}))
            .expect("svc"),
        )
        .await
        .expect("foreign service");
    let kinds = vec!["v1/Service".to_owned()];
    let mut applier = OwnedApplier::new(client.clone());

    // Apply.
    let report = applier
        .reconcile(&[service("gw-web", &gateway, 80)], &kinds)
        .await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.applied, 1);
    let created = services.get("gw-web").await.expect("applied");
    assert_eq!(port(&created), 80);
    let owners = created
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        owners[0].uid,
        gateway.metadata.uid.clone().unwrap_or_default()
    );
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(
        created
            .metadata
            .labels
            .clone()
            .unwrap_or_default()
            .get(OWNED_BY_LABEL)
            .map(String::as_str),
        Some("gateway-api")
    );
    assert!(
        created
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .any(|entry| entry.manager.as_deref() == Some(FIELD_MANAGER)
                && entry.operation.as_deref() == Some("Apply")),
        "server-side applied under {FIELD_MANAGER}"
    );

    // Unchanged: no request.
    let report = applier
        .reconcile(&[service("gw-web", &gateway, 80)], &kinds)
        .await;
    assert_eq!((report.applied, report.unchanged), (0, 1));

    // Update.
    let report = applier
        .reconcile(&[service("gw-web", &gateway, 8000)], &kinds)
        .await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(
        port(&services.get("gw-web").await.expect("still there")),
        8000
    );

    // Refusal: the person's Service stays as it was.
    let before: Value =
        serde_json::to_value(services.get("theirs").await.expect("theirs")).expect("json");
    let report = applier
        .reconcile(
            &[
                service("gw-web", &gateway, 8000),
                service("theirs", &gateway, 80),
            ],
            &kinds,
        )
        .await;
    assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
    let error = report.failed[0].to_string();
    assert!(
        matches!(report.failed[0], OwnedApplyError::Foreign { .. })
            && error.contains("Service shop/theirs")
            && error.contains("ConfigMap shop/gw")
            && error.contains("gateway-api"),
        "{error}"
    );
    let after: Value =
        serde_json::to_value(services.get("theirs").await.expect("theirs")).expect("json");
    assert_eq!(
        before, after,
        "a Service haptic did not create is never touched"
    );

    // Removal when no render asks for it; the person's Service stays.
    let report = applier.reconcile(&[], &kinds).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.deleted, 1);
    assert!(until_gone(&services, "gw-web").await, "removed");
    assert!(services.get_opt("theirs").await.expect("read").is_some());

    // A restarted controller finds what an earlier one applied and removes
    // it when nothing asks for it any more.
    let mut first = OwnedApplier::new(client.clone());
    let report = first
        .reconcile(&[service("gw-old", &gateway, 80)], &kinds)
        .await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    drop(first);
    let mut restarted = OwnedApplier::new(client.clone());
    let report = restarted.reconcile(&[], &kinds).await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(
        report.deleted, 1,
        "the leftover is found by its label and manager"
    );
    assert!(until_gone(&services, "gw-old").await, "leftover removed");

    // The garbage collector deletes an owned object with its owner.
    let report = restarted
        .reconcile(&[service("gw-web", &gateway, 80)], &kinds)
        .await;
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    config_maps
        .delete("gw", &DeleteParams::background())
        .await
        .expect("owner deleted");
    assert!(
        until_gone(&services, "gw-web").await,
        "Kubernetes' garbage collector removed the Service with its owner"
    );
    assert!(services.get_opt("theirs").await.expect("read").is_some());
}

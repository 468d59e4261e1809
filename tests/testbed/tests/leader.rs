//! End-to-end tier: leader election on a real Lease. A replica that stops
//! renewing (a crash, no release) is replaced within the Lease's term, and
//! the new leader's epoch is higher, so agents refuse the old one's pushes.

use std::sync::Arc;
use std::time::Duration;

use haptic::controller::{ElectionSettings, Elector};
use haptic_testbed::control_plane::{ControlPlane, ControlPlaneOptions};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

fn settings(identity: &str) -> ElectionSettings {
    ElectionSettings {
        namespace: "haptic".into(),
        lease_name: "haptic-controller".into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
        grace: Duration::from_secs(1),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_a_crashed_leader_is_replaced_within_the_lease_with_a_higher_epoch() {
    let plane = match ControlPlane::start_with(ControlPlaneOptions::default()).await {
        Ok(plane) => plane,
        Err(e) => panic!("starting the control plane: {e}"),
    };
    let client = plane.admin_client();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "haptic"}})).expect("ns"),
        )
        .await
        .expect("namespace");

    let a = Arc::new(
        Elector::new(client.clone(), settings("replica-a"))
            .await
            .expect("elector a"),
    );
    let b = Elector::new(client.clone(), settings("replica-b"))
        .await
        .expect("elector b");
    let first = tokio::time::timeout(Duration::from_secs(15), a.acquire())
        .await
        .expect("a leads in time")
        .expect("a leads");
    let renewing = tokio::spawn({
        let a = a.clone();
        async move { a.lost().await }
    });

    // While A renews, B waits.
    assert!(
        tokio::time::timeout(Duration::from_secs(5), b.acquire())
            .await
            .is_err(),
        "B must not lead while A renews"
    );

    // A crashes: no more renewals, no release.
    renewing.abort();
    let started = std::time::Instant::now();
    let second = tokio::time::timeout(Duration::from_secs(15), b.acquire())
        .await
        .expect("b takes over in time")
        .expect("b leads");
    let took = started.elapsed();
    assert!(second.epoch > first.epoch, "{second:?} after {first:?}");
    println!("takeover after a crashed leader: {took:?} (Lease duration 3 s)");

    // A, were it to come back, learns it lost.
    tokio::time::timeout(Duration::from_secs(10), a.lost())
        .await
        .expect("A notices in time")
        .expect("A's lost() answers");
}

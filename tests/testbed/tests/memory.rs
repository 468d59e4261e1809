//! The controller's memory guard: `haptic controller` as its own process on
//! a reduced TestScale (2,000 gated pods, 200 Services and EndpointSlices,
//! 160 Ingresses, two real HAProxy pods) must stay under a resident-memory
//! ceiling through its seed, the first write of every gate condition and a
//! few Ingress changes, while every pod's status is rewritten round after
//! round (a scheduler retrying pending pods does that on a real cluster). The ceiling has headroom over what the controller
//! needs here; a regression like issue 16's (every render queued its own
//! candidate behind the first status writes: 1,230 MiB at 10,000 pods)
//! passes it within seconds. The figure is the kernel's (`VmHWM`), the
//! gate conditions are counted on the API server.

#[allow(dead_code)]
#[path = "controller/harness.rs"]
mod harness;
#[path = "controller/synthetic.rs"]
mod synthetic;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use haptic::synthetic::{Cluster, ClusterSpec};
use harness::Installation;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use synthetic::{
    ControllerProcess, await_gates, change_host, churn_pod_status, converged_on_new, create_all,
};

/// Peak resident memory the controller may reach here. What it needs at
/// this scale is printed on every run; the ceiling leaves room for the
/// allocator's and a debug build's overhead.
const CEILING_MIB: u64 = 120;

const CHANGES: usize = 5;

/// The fewest rounds of status churn on every pod the run must see.
const MIN_CHURN_ROUNDS: usize = 2;

/// 4 namespaces x (40 Ingresses, 50 Services x 10 endpoints): 2,000 gated
/// pods. `HAPTIC_MEMORY_GUARD_NAMESPACES=20` measures TestScale instead
/// (10,000 gated pods; the ceiling then does not apply, the figure prints).
fn reduced() -> ClusterSpec {
    ClusterSpec {
        namespaces: scale_namespaces(),
        ..ClusterSpec::benchmark()
    }
}

fn scale_namespaces() -> usize {
    std::env::var("HAPTIC_MEMORY_GUARD_NAMESPACES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4)
}

#[test]
fn e2e_controller_memory_stays_under_its_ceiling_with_2000_gated_pods() {
    harness::run(async {
        let installation = Installation::start(true, 2).await;
        let client = installation.client();
        let cluster = Cluster::generate(reduced());
        let created = create_all(&client, &cluster).await;
        let namespaces: Vec<String> = (0..reduced().namespaces)
            .map(|ns| format!("ns-{ns}"))
            .collect();
        let expected_gates = synthetic::ready_endpoints(&cluster);
        assert!(
            expected_gates >= 475 * scale_namespaces(),
            "the reduced cluster routes {expected_gates} pods"
        );

        // Status churn from before the controller starts until the end: every
        // pod's status rewritten round after round, as a scheduler retrying
        // pending pods does, through the seed, the first gate writes and the
        // changes.
        let stop_churn = Arc::new(AtomicBool::new(false));
        let churn = tokio::spawn({
            let (client, namespaces, stop) =
                (client.clone(), namespaces.clone(), stop_churn.clone());
            async move {
                let (mut writes, mut rounds) = (0, 0);
                while !stop.load(Ordering::Relaxed) {
                    writes += churn_pod_status(&client, &namespaces, rounds).await;
                    rounds += 1;
                }
                (writes, rounds)
            }
        });

        let dir = tempfile::tempdir().expect("tempdir");
        let started = Instant::now();
        let controller = ControllerProcess::start(
            dir.path(),
            installation.bed.control_plane().kubeconfig_path(),
        );
        let mut id = converged_on_new(&installation, None, Duration::from_secs(120))
            .await
            .expect("the fleet runs a first configuration");
        let seed = started.elapsed();
        let (gates, took) = await_gates(
            &client,
            &namespaces,
            expected_gates,
            Duration::from_secs(600),
        )
        .await;
        assert_eq!(
            gates, expected_gates,
            "gate conditions True on the API server after {took:?}"
        );
        let ingresses: Api<Ingress> = Api::namespaced(client.clone(), "ns-0");
        for change in 0..CHANGES {
            let host = format!("guard-{change}.example.com");
            change_host(&ingresses, &format!("app-{change}"), &host).await;
            id = converged_on_new(&installation, Some(&id), Duration::from_secs(30))
                .await
                .expect("the change is deployed on every HAProxy pod");
        }
        stop_churn.store(true, Ordering::Relaxed);
        let (churned, rounds) = churn.await.expect("the churn task");
        assert!(
            churned >= MIN_CHURN_ROUNDS * expected_gates,
            "only {churned} pod status writes of churn in {rounds} rounds"
        );
        // A change sent after the churn and deployed: the controller has
        // taken in every churned pod (one render loop takes its events in
        // order).
        change_host(&ingresses, "app-0", "guard-after-churn.example.com").await;
        converged_on_new(&installation, Some(&id), Duration::from_secs(120))
            .await
            .expect("a change after the churn is deployed on every HAProxy pod");
        let (peak, now) = controller.memory_mib();
        println!(
            "controller memory, {created} objects, {gates} gate conditions written, {CHANGES} Ingress changes, \
             {churned} pod status writes of churn in {rounds} rounds: \
             peak {peak} MiB, now {now} MiB (ceiling {CEILING_MIB} MiB; seed {seed:?}, gates {took:?})"
        );
        println!(
            "  resident by mapping: {}",
            synthetic::resident_breakdown(controller.pid())
        );
        match controller.metrics().await {
            Ok(metrics) => {
                for line in synthetic::metric_lines(&metrics, &["haptic_memory_"]) {
                    println!("  {line}");
                }
            }
            Err(error) => println!("no /metrics: {error}"),
        }
        assert!(peak > 0, "no memory figure for pid {}", controller.pid());
        assert!(
            peak <= CEILING_MIB || scale_namespaces() != 4,
            "the controller's peak resident memory {peak} MiB is over its ceiling of {CEILING_MIB} MiB \
             at 2,000 gated pods: profile it (heaptrack) and find what grew"
        );
    });
}

use std::time::Duration;

use super::*;
use crate::protocol::WorkerState;

const NEW: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaa";
const OLD: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbb";

fn worker(pid: u32, role: WorkerRole, runs: &str) -> WorkerState {
    WorkerState {
        pid,
        role,
        started_at: 0,
        loaded_id: runs.to_owned(),
        config_id: runs.to_owned(),
    }
}

fn pod(name: &str, workers: Vec<WorkerState>, last_error: Option<&str>) -> PodView {
    let converged = workers
        .first()
        .map(|w| w.config_id.clone())
        .filter(|id| workers.iter().all(|w| &w.config_id == id));
    PodView {
        pod: name.to_owned(),
        endpoint: format!("http://{name}:8450"),
        converged,
        workers,
        last_error: last_error.map(str::to_owned),
    }
}

fn gated(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: "shop".into(),
        name: name.into(),
    }
}

fn texts(report: &GatesReport) -> Vec<&str> {
    report.waits_for.iter().map(|b| b.text.as_str()).collect()
}

#[test]
fn a_gate_waits_for_each_worker_not_on_the_newest_render() {
    let debug = DebugState::default();
    debug.set_identity("haptic-controller-0");
    let now = Instant::now();
    let (web_a, web_b) = (gated("web-a"), gated("web-b"));
    let gates = [
        (web_a.clone(), now - Duration::from_secs(5)),
        (web_b.clone(), now - Duration::from_secs(70)),
    ];
    debug.set_newest_render(NEW, gates.iter().map(|(r, s)| (r, s)));
    debug.set_fleet(vec![
        pod(
            "haproxy-0",
            vec![worker(10, WorkerRole::Current, NEW)],
            None,
        ),
        pod(
            "haproxy-1",
            vec![
                worker(4711, WorkerRole::Leaving, OLD),
                worker(4712, WorkerRole::Current, NEW),
            ],
            None,
        ),
    ]);
    let report = debug.gates_report(true);
    assert_eq!(report.waiting, 2);
    assert_eq!(
        report
            .gates
            .iter()
            .map(|g| g.pod.as_str())
            .collect::<Vec<_>>(),
        ["shop/web-b", "shop/web-a"],
        "oldest first"
    );
    assert!(report.gates[0].waiting_seconds >= 70.0);
    assert_eq!(
        texts(&report),
        ["haproxy-1 worker 4711 (leaving) still runs render sha256:bbbbbbbbbbbb"]
    );
    assert_eq!(
        report.waits_for[0].haproxy_pod.as_deref(),
        Some("haproxy-1")
    );
    assert_eq!(report.waits_for[0].worker, Some(4711));
}

#[test]
fn an_unreachable_agent_no_leader_and_failing_renders_are_named() {
    let debug = DebugState::default();
    debug.set_identity("haptic-controller-1");
    let now = Instant::now();
    let web = gated("web-a");
    debug.set_newest_render(NEW, [(&web, &now)].into_iter());
    debug.set_render_failure("ConfigRefused", "haproxy -c refused line 12");
    debug.set_fleet(vec![pod(
        "haproxy-0",
        Vec::new(),
        Some("the agent at http://haproxy-0:8450 did not answer within 10s"),
    )]);
    assert_eq!(
        texts(&debug.gates_report(false)),
        [
            "haptic-controller-1 does not lead: only the leader deploys and writes gates; ask the replica whose haptic_leader is 1",
            "the newest renders fail (ConfigRefused): haproxy -c refused line 12; pods that became ready since the last good render wait for a render that works",
            "haproxy-0: the agent at http://haproxy-0:8450 did not answer within 10s",
        ]
    );
    // A newer validated render clears the failure; the replica now leads.
    debug.set_newest_render(NEW, [(&web, &now)].into_iter());
    debug.set_fleet(vec![pod(
        "haproxy-0",
        vec![worker(1, WorkerRole::Current, NEW)],
        None,
    )]);
    assert_eq!(
        texts(&debug.gates_report(true)),
        [
            "every HAProxy pod runs render sha256:aaaaaaaaaaaa: the gate conditions are being written"
        ]
    );
}

#[test]
fn the_report_keeps_the_oldest_thousand_and_counts_all() {
    let debug = DebugState::default();
    let now = Instant::now();
    let gates: Vec<(ObjectRef, Instant)> = (0..1_500u64)
        .map(|n| (gated(&format!("web-{n}")), now - Duration::from_millis(n)))
        .collect();
    debug.set_newest_render(NEW, gates.iter().map(|(r, s)| (r, s)));
    let report = debug.gates_report(false);
    assert_eq!(report.waiting, 1_500);
    assert_eq!(report.gates.len(), 1_000);
    assert_eq!(report.gates[0].pod, "shop/web-1499");
    assert_eq!(report.gates[999].pod, "shop/web-500");
}

#[test]
fn short_ids_keep_the_algorithm_and_twelve_digits() {
    assert_eq!(short_id(NEW), "sha256:aaaaaaaaaaaa");
    assert_eq!(short_id("bootstrap"), "bootstrap");
}

#[test]
fn a_pod_whose_agent_stopped_answering_keeps_its_last_reported_workers() {
    let debug = DebugState::default();
    let now = Instant::now();
    let web = gated("web-a");
    debug.set_newest_render(NEW, [(&web, &now)].into_iter());
    debug.set_fleet(vec![
        pod(
            "haproxy-0",
            vec![worker(10, WorkerRole::Current, OLD)],
            None,
        ),
        pod(
            "haproxy-1",
            vec![worker(20, WorkerRole::Current, OLD)],
            None,
        ),
    ]);
    // haproxy-0's push ends first; haproxy-1's agent has not answered yet.
    debug.set_pod(pod(
        "haproxy-0",
        vec![worker(10, WorkerRole::Current, NEW)],
        None,
    ));
    assert_eq!(
        texts(&debug.gates_report(true)),
        ["haproxy-1 worker 20 (current) still runs render sha256:bbbbbbbbbbbb"]
    );
    debug.set_pod(pod(
        "haproxy-1",
        vec![worker(20, WorkerRole::Current, OLD)],
        Some("no answer within 35s"),
    ));
    assert_eq!(
        texts(&debug.gates_report(true)),
        [
            "haproxy-1: no answer within 35s",
            "haproxy-1 worker 20 (current) still runs render sha256:bbbbbbbbbbbb (as last reported)"
        ]
    );
}

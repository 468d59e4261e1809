use super::*;
use crate::controller::debug::{Blocker, GateWait, ProxyReport, WorkerReport};

const NEW: &str = "sha256:aaaaaaaaaaaaaaaaaaaa";
const OLD: &str = "sha256:bbbbbbbbbbbbbbbbbbbb";

fn reports() -> (FleetReport, GatesReport) {
    let fleet = FleetReport {
        identity: "haptic-controller-0".into(),
        leading: true,
        newest_render: Some(NEW.into()),
        pods: vec![ProxyReport {
            pod: "haptic-haproxy-1".into(),
            endpoint: "http://10.244.0.9:8450".into(),
            converged: None,
            workers: vec![
                WorkerReport {
                    pid: 4711,
                    role: "leaving".into(),
                    runs: OLD.into(),
                },
                WorkerReport {
                    pid: 4712,
                    role: "current".into(),
                    runs: NEW.into(),
                },
            ],
            last_error: None,
        }],
        render_failure: None,
    };
    let gates = GatesReport {
        leading: true,
        newest_render: Some(NEW.into()),
        waiting: 1,
        gates: vec![GateWait {
            pod: "shop/web-1".into(),
            waiting_seconds: 125.0,
        }],
        waits_for: vec![Blocker {
            haproxy_pod: Some("haptic-haproxy-1".into()),
            worker: Some(4711),
            text: "haptic-haproxy-1 worker 4711 (leaving) still runs render sha256:bbbbbbbbbbbb"
                .into(),
        }],
    };
    (fleet, gates)
}

#[test]
fn one_pod_names_the_worker_it_waits_for_and_warns_after_the_limit() {
    let (fleet, gates) = reports();
    let (text, late) = describe(&fleet, &gates, Some("shop/web-1"), Duration::from_secs(60));
    assert_eq!(
        text,
        "shop/web-1: its readiness gate has waited 2m05s for every HAProxy worker to route to it; it waits for:\n  - haptic-haproxy-1 worker 4711 (leaving) still runs render sha256:bbbbbbbbbbbb\n"
    );
    assert!(late);
    let (_, late) = describe(&fleet, &gates, Some("shop/web-1"), Duration::from_secs(600));
    assert!(!late);
    let (text, late) = describe(&fleet, &gates, Some("shop/other"), Duration::from_secs(1));
    assert!(
        text.starts_with("shop/other: no readiness gate waits"),
        "{text}"
    );
    assert!(!late);
}

#[test]
fn the_fleet_view_lists_every_worker_and_the_gates() {
    let (fleet, gates) = reports();
    let (text, _) = describe(&fleet, &gates, None, Duration::from_secs(600));
    for line in [
        "controller haptic-controller-0: leading; newest render sha256:aaaaaaaaaaaa",
        "fleet: 1 HAProxy pod(s), 0 on the newest render",
        "  haptic-haproxy-1 (http://10.244.0.9:8450): workers disagree or unknown",
        "    worker 4711 (leaving) runs sha256:bbbbbbbbbbbb",
        "gates: 1 pod(s) waiting, the oldest for 2m05s",
        "  - haptic-haproxy-1 worker 4711 (leaving) still runs render sha256:bbbbbbbbbbbb",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line:?} missing from:\n{text}"
        );
    }
}

#[tokio::test]
async fn an_unreachable_controller_says_how_to_reach_it() {
    // Nothing listens on port 9 of the loopback address.
    let error = fetch("http://127.0.0.1:9", Duration::from_secs(2))
        .await
        .expect_err("nothing listens there");
    let message = error.to_string();
    assert!(
        message.contains("http://127.0.0.1:9/debug/fleet"),
        "{message}"
    );
    assert!(message.contains("port-forward"), "{message}");
}

use super::*;
use serde_json::json;

fn pod(gates: &[&str], conditions: Value) -> Pod {
    let gates: Vec<Value> = gates.iter().map(|g| json!({"conditionType": g})).collect();
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "generation": 3},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "readinessGates": gates},
        "status": {"conditions": conditions},
    }))
    .unwrap()
}

fn container(name: &str, state: State, ready: bool) -> ContainerView {
    ContainerView {
        name: name.into(),
        image: "haptic.test/echo".into(),
        image_id: "id".into(),
        container_id: Some(format!("process://{name}")),
        state,
        last_terminated: None,
        restart_count: 0,
        ready,
        volume_mounts: Vec::new(),
    }
}

fn running() -> State {
    State::Running {
        started_at: "2026-01-01T00:00:00Z".into(),
    }
}

fn exited(code: i32) -> State {
    State::Terminated(Terminated {
        exit_code: code,
        signal: None,
        reason: if code == 0 { "Completed" } else { "Error" }.into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        finished_at: "2026-01-01T00:00:01Z".into(),
        container_id: "process://1".into(),
    })
}

fn view(a_ready: bool, b_ready: bool) -> PodView {
    PodView {
        init_containers: Vec::new(),
        containers: vec![
            container("a", running(), a_ready),
            container("b", running(), b_ready),
        ],
        pod_ip: Some(Ipv4Addr::new(10, 244, 0, 2)),
        host_ip: Ipv4Addr::new(10, 244, 0, 1),
        start_time: "2026-01-01T00:00:00Z".into(),
        terminal: false,
    }
}

fn find<'a>(conds: &'a [Condition], t: &str) -> &'a Condition {
    conds.iter().find(|c| c.type_ == t).unwrap()
}

#[test]
fn unready_containers_are_listed_like_kubelet_does() {
    let p = pod(&[], json!([]));
    let conds = conditions(&p, &view(false, false), Phase::Running);
    let cr = find(&conds, "ContainersReady");
    assert_eq!(cr.status, "False");
    assert_eq!(cr.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        cr.message.as_deref(),
        Some("containers with unready status: [a b]")
    );
    let ready = find(&conds, "Ready");
    assert_eq!(ready.message, cr.message);
}

#[test]
fn a_missing_gate_keeps_ready_false_with_kubelets_message() {
    let p = pod(&["haptic.dev/deployed"], json!([]));
    let conds = conditions(&p, &view(true, true), Phase::Running);
    assert_eq!(find(&conds, "ContainersReady").status, "True");
    let ready = find(&conds, "Ready");
    assert_eq!(ready.status, "False");
    assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
    assert_eq!(
        ready.message.as_deref(),
        Some(
            "corresponding condition of pod readiness gate \"haptic.dev/deployed\" does not exist."
        )
    );
}

#[test]
fn a_false_gate_is_named_with_its_status_and_a_true_one_makes_the_pod_ready() {
    let p = pod(
        &["x/one", "x/two"],
        json!([{"type": "x/one", "status": "False"}, {"type": "x/two", "status": "True"}]),
    );
    let ready = find(&conditions(&p, &view(true, true), Phase::Running), "Ready").clone();
    assert_eq!(
        ready.message.as_deref(),
        Some("the status of pod readiness gate \"x/one\" is not \"True\", but False")
    );
    let p = pod(
        &["x/one", "x/two"],
        json!([{"type": "x/one", "status": "True"}, {"type": "x/two", "status": "True"}]),
    );
    let ready = find(&conditions(&p, &view(true, true), Phase::Running), "Ready").clone();
    assert_eq!((ready.status, ready.reason), ("True", None));
}

#[test]
fn a_deleted_pod_whose_containers_exited_zero_succeeded_else_failed() {
    let p = pod(&[], json!([]));
    let mut v = view(false, false);
    v.terminal = true;
    v.containers[0].state = exited(0);
    v.containers[1].state = exited(0);
    assert_eq!(phase(&p, &v), Phase::Succeeded);
    v.containers[1].state = exited(137);
    assert_eq!(phase(&p, &v), Phase::Failed);
    let conds = conditions(&p, &v, Phase::Failed);
    assert_eq!(find(&conds, "Ready").reason.as_deref(), Some("PodFailed"));
    assert_eq!(find(&conds, "PodReadyToStartContainers").status, "False");
}

#[test]
fn an_exited_container_of_an_always_pod_keeps_it_running() {
    let p = pod(&[], json!([]));
    let mut v = view(true, true);
    v.containers[0].state = exited(1);
    v.containers[1].state = exited(0);
    assert_eq!(phase(&p, &v), Phase::Running);
    v.containers[0].state = State::Waiting {
        reason: "ContainerCreating".into(),
        message: String::new(),
    };
    assert_eq!(phase(&p, &v), Phase::Pending);
}

#[test]
fn the_apply_body_names_only_owned_conditions_and_keeps_transition_times() {
    let p = pod(&["x/gate"], json!([{"type": "x/gate", "status": "True"}]));
    let mut clock = TransitionClock::default();
    let first = apply_body(&p, &view(true, true), &mut clock);
    let types: Vec<&str> = first["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, OWNED_CONDITIONS);
    assert_eq!(first["status"]["podIP"], "10.244.0.2");
    assert_eq!(first["status"]["observedGeneration"], 3);
    let second = apply_body(&p, &view(true, true), &mut clock);
    assert_eq!(first, second, "no change, so no new transition time");
}

#[test]
fn incomplete_init_containers_keep_the_pod_pending_and_uninitialized() {
    let p = pod(&[], json!([]));
    let mut v = view(false, false);
    v.containers[0].state = State::Waiting {
        reason: "PodInitializing".into(),
        message: String::new(),
    };
    v.containers[1].state = v.containers[0].state.clone();
    v.init_containers = vec![
        container("setup", exited(0), true),
        container("migrate", running(), false),
    ];
    assert_eq!(phase(&p, &v), Phase::Pending);
    let conds = conditions(&p, &v, Phase::Pending);
    let init = find(&conds, "Initialized");
    assert_eq!(init.reason.as_deref(), Some("ContainersNotInitialized"));
    assert_eq!(
        init.message.as_deref(),
        Some("containers with incomplete status: [migrate]")
    );
    v.init_containers[1].state = exited(0);
    v.containers[0].state = running();
    v.containers[1].state = running();
    assert_eq!(phase(&p, &v), Phase::Running);
    assert_eq!(
        find(&conditions(&p, &v, Phase::Running), "Initialized").status,
        "True"
    );
}

#[test]
fn a_failed_init_container_fails_a_never_restarting_pod() {
    let mut p = pod(&[], json!([]));
    p.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let mut v = view(false, false);
    v.init_containers = vec![container("setup", exited(1), false)];
    assert_eq!(phase(&p, &v), Phase::Failed);
}

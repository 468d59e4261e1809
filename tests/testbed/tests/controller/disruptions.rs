//! The scenarios that disrupt a running installation (an agent stopped, a
//! full disk, the API server restarted, HAProxy's master killed, network
//! partitions) and check that gated rollouts hold and then finish.

use super::*;

/// One agent stopped (SIGSTOP, by the pid its kubelet reports) while a
/// gated rollout runs: its HAProxy serves on but cannot be told about the
/// new pod, so no gate may be set; the old pod keeps serving and nothing
/// fails. Once the agent resumes (SIGCONT), the rollout completes.
#[test]
fn e2e_a_stalled_agent_holds_the_gate_until_it_resumes() {
    use nix::sys::signal::{Signal, kill};
    harness::run(async {
        let (installation, controller) = Installation::serving(true, 2).await;
        let watched = Watched::start(&installation).await;
        let victim = &installation.proxies[0];
        let pid = nix::unistd::Pid::from_raw(
            installation
                .container_pid(harness::PROXY_NAMESPACE, &victim.name, "agent")
                .await,
        );
        kill(pid, Signal::SIGSTOP).expect("the agent's pid is live");
        installation.start_rollout(1).await;
        let new_pod = faults::new_pod_held(&installation).await;
        faults::assert_gate_held(
            &installation,
            &new_pod,
            faults::HOLD,
            &format!("{}'s agent was stopped", victim.name),
        )
        .await;
        kill(pid, Signal::SIGCONT).expect("the agent's pid is live");
        let resumed = Instant::now();
        installation.wait_rollout(1).await;
        println!(
            "rollout completed {:?} after the agent resumed",
            resumed.elapsed()
        );
        watched
            .finish()
            .await
            .assert_proven("a stalled agent during a rollout", 2);
        let restarts = installation.restart_counts().await;
        assert!(
            restarts.values().all(|count| *count == 0),
            "a stopped agent is not a dead one: {restarts:?}"
        );
        controller.stop().await;
    });
}

/// Nothing happens for 35 s after renders: no container restarts and no
/// request fails. (Kept from the bed's process kubelet, which once killed
/// an HAProxy pod 10 s after a render when tokio retired the thread that
/// had forked it: a real kubelet must show the same calm.)
#[test]
fn e2e_a_quiet_half_minute_after_a_render_restarts_no_container() {
    harness::run(async {
        let (installation, controller) = Installation::serving(true, 2).await;
        let watched = Watched::start(&installation).await;
        // Renders on more than one runtime thread.
        for round in 1..=3 {
            installation.rollout_restart(round).await;
        }
        tokio::time::sleep(Duration::from_secs(35)).await;
        installation.wait_routed().await;
        let restarts = installation.restart_counts().await;
        println!("after a quiet 35 s: restart counts {restarts:?}");
        assert!(
            restarts.len() >= 5,
            "both HAProxy pods' two containers and the web pod: {restarts:?}"
        );
        assert!(
            restarts.values().all(|count| *count == 0),
            "a container restarted with nothing asking for it: {restarts:?}"
        );
        watched
            .finish()
            .await
            .assert_proven("a quiet half minute", 4);
        controller.stop().await;
    });
}

/// One HAProxy pod's agent with its configuration directory full (a small
/// tmpfs, filled) while a gated rollout runs behind a change that needs a
/// reload: the apply fails with an error naming the directory and the
/// cause, the old worker serves on, no gate is set; once space is freed the
/// rollout completes and nothing failed. The reload is what makes the hold
/// certain: a change the runtime API carries is taken by HAProxy before the
/// agent writes the files, and whether the new pod's first render needs a
/// reload was a race with its readiness (seen once in three runs), so a new
/// Ingress (a new backend) comes first and every later render reloads the
/// full pod, which still runs the bundle before it.
#[test]
fn e2e_a_full_agent_disk_fails_the_apply_clearly_and_holds_the_gate() {
    harness::run(async {
        let mut installation = Installation::start(true, 1).await;
        let tmpfs = faults::Tmpfs::mount(&installation.proxy_dir(1), "4m", harness::IMAGE_USER);
        let full = installation.add_proxy(1).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        installation.wait_gates_set().await;
        let watched = Watched::start(&installation).await;
        let filler = tmpfs.fill();
        bed::create::<k8s_openapi::api::networking::v1::Ingress>(
            &installation.client(),
            APP_NAMESPACE,
            harness::ingress("reload", "reload.example.com", "web"),
        )
        .await
        .expect("Ingress");
        installation.start_rollout(1).await;
        let new_pod = faults::new_pod_held(&installation).await;
        faults::assert_gate_held(
            &installation,
            &new_pod,
            Duration::from_secs(8),
            &format!("{}'s disk was filled", full.name),
        )
        .await;
        let log = faults::agent_log(&installation, &full.name).await;
        let refusal = log
            .lines()
            .find(|line| line.contains("apply failed"))
            .unwrap_or_else(|| panic!("the agent logs the failed apply: {log}"));
        println!("the full disk's apply error: {refusal}");
        assert!(
            refusal.contains("No space left on device")
                && refusal.contains("writing the configuration directory"),
            "the error names the directory and the cause: {refusal}"
        );
        std::fs::remove_file(&filler).expect("free the disk");
        let freed = Instant::now();
        installation.wait_rollout(1).await;
        println!(
            "rollout completed {:?} after the disk was freed",
            freed.elapsed()
        );
        watched
            .finish()
            .await
            .assert_proven("a full agent disk during a rollout", 2);
        controller.stop().await;
        drop(installation);
        drop(tmpfs);
    });
}

/// kube-apiserver killed and restarted while a gated rollout runs: every
/// watch (the controller's, the kubelet's, the checker's) breaks and
/// re-lists; nothing is lost, the rollout completes, the next one too, no
/// gate comes ahead of HAProxy and no request fails.
#[test]
fn e2e_an_apiserver_restart_mid_rollout_loses_nothing() {
    harness::run(async {
        // The first pod's gate is written before the outage (`serving`
        // waits for it): a status write retried after it would land on a
        // pod the rollout is already removing.
        let (mut installation, controller) = Installation::serving(true, 2).await;
        let watched = Watched::start(&installation).await;
        installation.start_rollout(1).await;
        let gone = installation
            .bed
            .control_plane_mut()
            .restart_apiserver(Duration::from_secs(120))
            .await
            .expect("kube-apiserver comes back");
        println!("kube-apiserver restarted mid-rollout: unavailable for {gone:?}");
        installation.wait_rollout(1).await;
        installation.rollout_restart(2).await;
        watched
            .finish()
            .await
            .assert_proven("an apiserver restart mid-rollout", 3);
        controller.stop().await;
    });
}

/// HAProxy's master (the haproxy container's main process, by the pid its
/// kubelet reports) SIGKILLed as soon as a change that reloads it has
/// started a reload, while a gated rollout runs: the kubelet restarts it,
/// it comes back on the configuration on disk, and no gate is set before it
/// routes to the new pod. The load goes through the other HAProxy pod, which
/// must drop nothing; the killed one cannot serve while it is down (a real
/// Service takes it out once its agent's readiness probe fails).
#[test]
fn e2e_haproxy_master_killed_in_a_reload_holds_the_gate_until_it_is_back() {
    /// Kills: in the reload, then at each of two restarts.
    const CRASHES: i32 = 3;
    harness::run(async {
        let (installation, controller) = Installation::serving(true, 2).await;
        let (victim, survivor) = (&installation.proxies[0], &installation.proxies[1]);
        let watched =
            Watched::start_through(&installation, std::slice::from_ref(survivor), 0, 2).await;
        let haproxy = format!("{}/{}/haproxy", harness::PROXY_NAMESPACE, victim.name);
        let before = installation.restart_counts().await;
        let pid = installation
            .container_pid(harness::PROXY_NAMESPACE, &victim.name, "haproxy")
            .await;
        let reloads = oracle::reloads(victim).await.expect("show proc");
        // A new backend: every HAProxy pod reloads.
        bed::create::<k8s_openapi::api::networking::v1::Ingress>(
            &installation.client(),
            APP_NAMESPACE,
            harness::ingress("reload", "reload.example.com", "web"),
        )
        .await
        .expect("Ingress");
        installation.start_rollout(1).await;
        bed::wait_for(
            "the victim's master to reload",
            Duration::from_secs(30),
            || async {
                match oracle::reloads(victim).await {
                    Ok(now) if now > reloads => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await
        .expect("a reload");
        // Killed in the reload, then again each time the kubelet restarts
        // it (its backoff doubles from 1 s): the pod is down for seconds,
        // across the moment the new pod's containers are ready and the gate
        // could be set. Once only, it was back before that moment.
        let killed = Instant::now();
        let mut pid = pid;
        for kill in 1..=CRASHES {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL)
                .expect("the master's pid is live");
            let restarted = bed::wait_for(
                "the kubelet to restart the killed HAProxy",
                Duration::from_secs(60),
                || async {
                    let now = installation.restart_counts().await;
                    let count = now.get(&haproxy).copied().unwrap_or(0);
                    let expected = before.get(&haproxy).copied().unwrap_or(0) + kill;
                    let new_pid = installation
                        .running_container_pid(harness::PROXY_NAMESPACE, &victim.name, "haproxy")
                        .await;
                    match new_pid {
                        Some(new_pid) if count >= expected && new_pid != pid => Ok(new_pid),
                        _ => Err(format!("{now:?}, pid {new_pid:?}")),
                    }
                },
            )
            .await
            .expect("HAProxy restarted");
            println!(
                "HAProxy's master killed ({kill} of {CRASHES}), restarted {:?} after the first kill",
                killed.elapsed()
            );
            pid = restarted;
        }
        installation.wait_rollout(1).await;
        println!(
            "rollout completed {:?} after HAProxy's master was killed",
            killed.elapsed()
        );
        installation.rollout_restart(2).await;
        watched
            .finish()
            .await
            .assert_proven("HAProxy's master killed in a reload", 3);
        controller.stop().await;
    });
}

/// One HAProxy pod's agent cut off (every packet to and from its port
/// dropped, so the controller's pushes hang until their timeout) while a
/// gated rollout runs: its HAProxy serves on, on the old pod; no gate may be
/// set while the path is down; once it heals the rollout completes and
/// nothing failed.
#[test]
fn e2e_a_partitioned_agent_holds_the_gate_until_the_path_heals() {
    harness::run(async {
        let (installation, controller) = Installation::serving(true, 2).await;
        let watched = Watched::start(&installation).await;
        let victim = &installation.proxies[0];
        let partition = faults::Partition::cut(faults::agent_endpoint(victim.ip));
        installation.start_rollout(1).await;
        let new_pod = faults::new_pod_held(&installation).await;
        faults::assert_gate_held(
            &installation,
            &new_pod,
            faults::HOLD,
            &format!("{}'s agent was cut off", victim.name),
        )
        .await;
        partition.heal();
        let healed = Instant::now();
        installation.wait_rollout(1).await;
        println!(
            "rollout completed {:?} after the path to the agent healed",
            healed.elapsed()
        );
        watched
            .finish()
            .await
            .assert_proven("a partitioned agent during a rollout", 2);
        let restarts = installation.restart_counts().await;
        assert!(
            restarts.values().all(|count| *count == 0),
            "a cut-off agent is not a dead one: {restarts:?}"
        );
        controller.stop().await;
    });
}

/// Two replicas on a Lease; the leader's path to the API server cut
/// (packets dropped between it and a relay of its own) while a gated
/// rollout starts. It cannot renew, so the follower takes the Lease with a
/// higher epoch and finishes the rollout; the deposed leader, which cannot
/// tell, keeps deploying its last render on its resync and every agent
/// refuses it by the fencing token. No request fails, no gate comes ahead
/// of HAProxy; after the path heals the next rollout completes too.
#[test]
fn e2e_a_leader_partitioned_from_the_api_server_is_fenced_and_the_new_leader_finishes() {
    harness::run(async {
        let installation = Installation::start(true, 2).await;
        let relay = faults::ApiRelay::start(&installation).await;
        let deposed = installation
            .start_controller_with(
                relay.client(&installation).await,
                "replica-a",
                Some(harness::election("replica-a")),
            )
            .await;
        installation.wait_routed().await;
        installation.wait_gates_set().await;
        let successor = installation.start_replica("replica-b").await;
        assert_eq!(deposed.state.metrics.leader.get(), 1, "replica-a leads");
        let watched = Watched::start(&installation).await;
        let failed_before = failed_deploys(&deposed);
        let partition = faults::Partition::cut(relay.addr);
        let cut = Instant::now();
        installation.rollout_restart(1).await;
        println!(
            "rollout completed {:?} after the leader was cut off (Lease 3 s)",
            cut.elapsed()
        );
        assert_eq!(successor.state.metrics.leader.get(), 1, "replica-b leads");
        // The deposed leader's resync (10 s) pushes its last render to
        // agents that run the successor's by then.
        let refused = bed::wait_for(
            "the deposed leader's push to be refused",
            Duration::from_secs(40),
            || async {
                let mut refusals = Vec::new();
                for proxy in &installation.proxies {
                    let log = faults::agent_log(&installation, &proxy.name).await;
                    match log.lines().find(|line| line.contains("is older than")) {
                        Some(line) => refusals.push(line.to_owned()),
                        None => return Err(format!("{} refused nothing yet", proxy.name)),
                    }
                }
                Ok(refusals)
            },
        )
        .await;
        // The load first: a deposed leader's push taken would have routed
        // HAProxy back to the pod the rollout removed.
        watched
            .finish()
            .await
            .assert_proven("a leader partitioned from the API server", 2);
        let refused = refused.expect("every agent refuses the deposed leader");
        println!("the agents refused the deposed leader: {refused:#?}");
        assert!(
            failed_deploys(&deposed) > failed_before,
            "the deposed leader counts its refused pushes as failed deploys"
        );
        assert_eq!(
            deposed.state.metrics.leader.get(),
            1,
            "replica-a could not have learnt it lost the Lease: the fencing token is what refused it"
        );
        partition.heal();
        let watched = Watched::start(&installation).await;
        installation.rollout_restart(2).await;
        watched
            .finish()
            .await
            .assert_proven("after the partition healed", 2);
        deposed.crash().await;
        successor.stop().await;
    });
}

/// The controller's pushes an agent failed or refused
/// (`haptic_deploys_total{mode="failed"}`).
fn failed_deploys(controller: &harness::RunningController) -> u64 {
    controller
        .state
        .metrics
        .encode()
        .lines()
        .filter(|line| line.starts_with("haptic_deploys_total") && line.contains("mode=\"failed\""))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

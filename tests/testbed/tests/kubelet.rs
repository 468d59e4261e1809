//! The process kubelet against the real control plane: pods it runs behave,
//! for the controllers and clients that watch them, like pods on a cluster.
//!
//! Each test runs its own bed (etcd, kube-apiserver, kube-controller-manager,
//! kubelet) inside its own network namespace. Needs root and the control-plane
//! binaries (`tests/testbed/scripts/build-binaries.sh`).

use std::time::Duration;

use anyhow::{Context as _, ensure};
use haptic_testbed::http;
use haptic_testbed::kubelet::bed::{self, Bed, create, namespace, wait_for};
use haptic_testbed::kubelet::{ECHO_IMAGE, Kubelet, KubeletConfig, NODE_IP, Program};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);
const GATE: &str = "haptic.dev/deployed";

fn config() -> KubeletConfig {
    KubeletConfig::new(bed::NODE_NAME)
        .program(ECHO_IMAGE, Program::new(env!("CARGO_BIN_EXE_echo-server")))
}

fn echo_pod_spec(gates: &[&str], shutdown_delay: &str) -> Value {
    let gates: Vec<Value> = gates.iter().map(|g| json!({"conditionType": g})).collect();
    json!({
        "terminationGracePeriodSeconds": 10,
        "readinessGates": gates,
        "containers": [{
            "name": "echo",
            "image": ECHO_IMAGE,
            "ports": [{"name": "http", "containerPort": 8080}],
            "env": [{"name": "SHUTDOWN_DELAY_SECONDS", "value": shutdown_delay}],
            "readinessProbe": {
                "httpGet": {"path": "/healthz", "port": "http"},
                "periodSeconds": 1,
                "failureThreshold": 1,
            },
        }],
    })
}

fn deployment(name: &str, replicas: i32, pod_spec: Value) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    })
}

/// `(status, reason, message)` of a pod condition.
fn condition(pod: &Pod, type_: &str) -> Option<(String, String, String)> {
    let c = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.0 == "True")
}

fn pod_ip(pod: &Pod) -> Option<String> {
    pod.status.as_ref()?.pod_ip.clone()
}

async fn pods(api: &Api<Pod>, app: &str) -> Result<Vec<Pod>, String> {
    api.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|l| l.items)
        .map_err(|e| e.to_string())
}

/// Endpoints of the Service's slices: address -> (ready, serving, terminating).
async fn endpoints(
    api: &Api<EndpointSlice>,
    service: &str,
) -> Result<Vec<(String, bool, bool, bool)>, String> {
    let slices = api
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for slice in slices.items {
        for e in slice.endpoints {
            let c = e.conditions.unwrap_or_default();
            for a in e.addresses {
                out.push((
                    a,
                    c.ready.unwrap_or(false),
                    c.serving.unwrap_or(false),
                    c.terminating.unwrap_or(false),
                ));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[test]
fn deployment_pods_become_ready_serve_through_their_slice_and_terminate_gracefully()
-> anyhow::Result<()> {
    bed::in_pod_network(async {
        let bed = Bed::start(config()).await?;
        let client = bed.client();
        namespace(&client, "echo").await?;
        create::<Service>(
            &client,
            "echo",
            json!({
                "metadata": {"name": "echo"},
                "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": "http"}]},
            }),
        )
        .await?;
        create::<Deployment>(
            &client,
            "echo",
            deployment("echo", 2, echo_pod_spec(&[], "3")),
        )
        .await?;

        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "echo");
        let ready = wait_for("2 ready echo pods", WAIT, || async {
            let ps = pods(&pod_api, "echo").await?;
            let ready: Vec<Pod> = ps.iter().filter(|p| is_ready(p)).cloned().collect();
            if ready.len() == 2 {
                Ok(ready)
            } else {
                Err(format!("{} of {} ready", ready.len(), ps.len()))
            }
        })
        .await?;
        let ips: Vec<String> = ready.iter().filter_map(pod_ip).collect();
        ensure!(
            ips.len() == 2 && ips[0] != ips[1],
            "each pod has its own IP: {ips:?}"
        );
        for p in &ready {
            let status = p.status.as_ref().context("status")?;
            ensure!(
                status.host_ip.as_deref() == Some(&NODE_IP.to_string()),
                "hostIP {:?}",
                status.host_ip
            );
            ensure!(
                status.phase.as_deref() == Some("Running"),
                "phase {:?}",
                status.phase
            );
            let c = &status
                .container_statuses
                .as_ref()
                .context("containerStatuses")?[0];
            ensure!(c.ready && c.started == Some(true), "container status {c:?}");
            ensure!(
                c.state.as_ref().and_then(|s| s.running.as_ref()).is_some(),
                "running state {c:?}"
            );
            ensure!(
                c.container_id.is_some() && !c.image_id.is_empty(),
                "ids {c:?}"
            );
            // The pod answers on its own address, with its own name.
            let name = p.metadata.name.clone().unwrap_or_default();
            let addr = format!("{}:8080", pod_ip(p).unwrap_or_default()).parse()?;
            let resp = http::get(addr, None, "/hello", &[], Duration::from_secs(5)).await?;
            ensure!(
                resp.status == 200 && resp.body.contains(&format!("pod={name}\n")),
                "{resp:?}"
            );
        }

        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "echo");
        // The apiserver is on the node address, so even `kubernetes` has endpoints.
        let default_slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
        let api_endpoints = endpoints(&default_slices, "kubernetes")
            .await
            .map_err(anyhow::Error::msg)?;
        ensure!(
            api_endpoints
                .iter()
                .any(|e| e.0 == NODE_IP.to_string() && e.1),
            "kubernetes endpoints {api_endpoints:?}"
        );
        let mut want: Vec<(String, bool, bool, bool)> = ips
            .iter()
            .map(|ip| (ip.clone(), true, true, false))
            .collect();
        want.sort();
        wait_for(
            "both pods ready in the Service's EndpointSlice",
            WAIT,
            || async {
                let got = endpoints(&slices, "echo").await?;
                if got == want {
                    Ok(())
                } else {
                    Err(format!("{got:?}"))
                }
            },
        )
        .await?;

        // Delete one pod: it stays in the slice as terminating (not serving once its
        // /healthz says it is draining), then leaves when the kubelet deletes it.
        let victim = &ready[0];
        let (victim_name, victim_ip) = (
            victim.metadata.name.clone().unwrap_or_default(),
            ips[0].clone(),
        );
        pod_api
            .delete(&victim_name, &DeleteParams::default())
            .await?;
        wait_for(
            "the deleted pod terminating and not serving in the slice",
            WAIT,
            || async {
                let got = endpoints(&slices, "echo").await?;
                match got.iter().find(|e| e.0 == victim_ip) {
                    Some((_, false, false, true)) => Ok(()),
                    _ => Err(format!("{got:?}")),
                }
            },
        )
        .await?;
        if let Some(terminating) = pod_api.get_opt(&victim_name).await? {
            ensure!(
                condition(&terminating, "Ready").is_some_and(|c| c.0 == "False"),
                "the slice says not serving because the pod's Ready is False: {:?}",
                condition(&terminating, "Ready")
            );
        }
        wait_for("the deleted pod gone from API and slice", WAIT, || async {
            let got = endpoints(&slices, "echo").await?;
            let gone = pod_api
                .get_opt(&victim_name)
                .await
                .map_err(|e| e.to_string())?
                .is_none();
            if gone && got.iter().all(|e| e.0 != victim_ip) {
                Ok(())
            } else {
                Err(format!("gone={gone} {got:?}"))
            }
        })
        .await?;
        Ok(())
    })?
}

/// Applies the gate condition the way haptic does: server-side apply on
/// `pods/status`, field manager `haptic-deployed`, only that condition entry.
async fn set_gate(pods: &Api<Pod>, name: &str, status: &str) -> anyhow::Result<()> {
    let body = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "status": {"conditions": [{"type": GATE, "status": status}]},
    });
    pods.patch_status(
        name,
        &PatchParams::apply("haptic-deployed"),
        &Patch::Apply(&body),
    )
    .await
    .with_context(|| format!("applying {GATE}={status} to pod {name}"))?;
    Ok(())
}

/// Who owns the condition of `type_` according to managedFields.
fn condition_owners(pod: &Pod, type_: &str) -> Vec<String> {
    let key = format!("k:{{\"type\":\"{type_}\"}}");
    pod.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| {
            m.fields_v1
                .as_ref()
                .and_then(|f| f.0.pointer("/f:status/f:conditions"))
                .and_then(|c| c.get(&key))
                .is_some()
        })
        .filter_map(|m| m.manager.clone())
        .collect()
}

#[test]
fn readiness_gates_hold_ready_and_a_rolling_update_waits_for_the_new_pods_gate()
-> anyhow::Result<()> {
    bed::in_pod_network(async {
        let bed = Bed::start(config()).await?;
        let client = bed.client();
        namespace(&client, "gated").await?;
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "gated");
        create::<Deployment>(
            &client,
            "gated",
            deployment("web", 1, echo_pod_spec(&[GATE], "0")),
        )
        .await?;

        // Containers ready, pod not: the gate's condition does not exist yet.
        let first = wait_for("the pod's containers ready", WAIT, || async {
            let ps = pods(&pod_api, "web").await?;
            ps.into_iter()
                .find(|p| condition(p, "ContainersReady").is_some_and(|c| c.0 == "True"))
                .ok_or_else(|| "no pod with ContainersReady=True".to_string())
        })
        .await?;
        let first_name = first.metadata.name.clone().unwrap_or_default();
        let want = (
            "False".to_string(),
            "ReadinessGatesNotReady".to_string(),
            format!("corresponding condition of pod readiness gate \"{GATE}\" does not exist."),
        );
        ensure!(
            condition(&first, "Ready") == Some(want.clone()),
            "{:?}",
            condition(&first, "Ready")
        );

        // A False gate is named with its status.
        set_gate(&pod_api, &first_name, "False").await?;
        wait_for("Ready=False naming the False gate", WAIT, || async {
            let p = pod_api.get(&first_name).await.map_err(|e| e.to_string())?;
            let msg =
                format!("the status of pod readiness gate \"{GATE}\" is not \"True\", but False");
            match condition(&p, "Ready") {
                Some((s, r, m)) if s == "False" && r == "ReadinessGatesNotReady" && m == msg => {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        })
        .await?;

        set_gate(&pod_api, &first_name, "True").await?;
        let p = wait_for("Ready=True once the gate is True", WAIT, || async {
            let p = pod_api.get(&first_name).await.map_err(|e| e.to_string())?;
            if is_ready(&p) {
                Ok(p)
            } else {
                Err(format!("{:?}", condition(&p, "Ready")))
            }
        })
        .await?;
        // The kubelet's write did not touch the gate: still there, still owned by haptic-deployed only.
        ensure!(
            condition(&p, GATE).is_some_and(|c| c.0 == "True"),
            "gate {:?}",
            condition(&p, GATE)
        );
        ensure!(
            condition_owners(&p, GATE) == ["haptic-deployed"],
            "owners {:?}",
            condition_owners(&p, GATE)
        );
        ensure!(
            condition_owners(&p, "Ready") == ["kubelet"],
            "owners {:?}",
            condition_owners(&p, "Ready")
        );

        // Roll out a new template. maxUnavailable 0: the old pod stays until the new one is Ready.
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), "gated");
        let change = json!({"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}});
        deployments
            .patch("web", &PatchParams::default(), &Patch::Merge(&change))
            .await?;
        let second = wait_for("the new pod's containers ready", WAIT, || async {
            let ps = pods(&pod_api, "web").await?;
            ps.into_iter()
                .find(|p| {
                    p.metadata.name.as_deref() != Some(&first_name)
                        && condition(p, "ContainersReady").is_some_and(|c| c.0 == "True")
                })
                .ok_or_else(|| "no new pod with ContainersReady=True".to_string())
        })
        .await?;
        let second_name = second.metadata.name.clone().unwrap_or_default();
        ensure!(
            !is_ready(&second),
            "the new pod's gate is not set: {:?}",
            condition(&second, "Ready")
        );
        // Give the deployment controller every chance to (wrongly) remove the old pod: it
        // reacts within milliseconds to the new pod's status, so a few probe periods suffice.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let old = pod_api.get(&first_name).await?;
        ensure!(
            old.metadata.deletion_timestamp.is_none() && is_ready(&old),
            "the old pod must stay while the new one is not Ready"
        );

        set_gate(&pod_api, &second_name, "True").await?;
        wait_for(
            "the old pod gone once the new one is Ready",
            WAIT,
            || async {
                let old = pod_api
                    .get_opt(&first_name)
                    .await
                    .map_err(|e| e.to_string())?;
                let new = pod_api.get(&second_name).await.map_err(|e| e.to_string())?;
                match old {
                    None if is_ready(&new) => Ok(()),
                    None => Err("old gone but new not ready".into()),
                    Some(o) => Err(format!(
                        "old pod still there, deleting={}",
                        o.metadata.deletion_timestamp.is_some()
                    )),
                }
            },
        )
        .await?;
        Ok(())
    })?
}

#[test]
fn crashing_and_unhealthy_containers_restart_and_missing_config_holds_a_pod_until_it_appears()
-> anyhow::Result<()> {
    bed::in_pod_network(async {
        let bed = Bed::start(config()).await?;
        let client = bed.client();
        namespace(&client, "life").await?;
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "life");
        create::<Pod>(
            &client,
            "life",
            json!({
                "metadata": {"name": "crasher"},
                "spec": {"containers": [{
                    "name": "main", "image": "docker.io/library/busybox",
                    "command": ["sh", "-c", "echo started; exit 3"],
                }]},
            }),
        )
        .await?;
        create::<Pod>(
            &client,
            "life",
            json!({
                "metadata": {"name": "configured"},
                "spec": {"containers": [{
                    "name": "echo", "image": ECHO_IMAGE,
                    "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "x"}}}],
                }]},
            }),
        )
        .await?;

        create::<Pod>(
            &client,
            "life",
            json!({
                "metadata": {"name": "unhealthy"},
                "spec": {"containers": [{
                    "name": "echo", "image": ECHO_IMAGE, "ports": [{"containerPort": 8080}],
                    // Nothing listens on port 9: the probe fails, kubelet kills and restarts.
                    "livenessProbe": {"tcpSocket": {"port": 9}, "periodSeconds": 1, "failureThreshold": 2},
                }]},
            }),
        )
        .await?;

        // restartPolicy Always: restarted, the exit recorded as lastState, the pod still Running.
        wait_for("the crashing container restarted", WAIT, || async {
            let p = pod_api.get("crasher").await.map_err(|e| e.to_string())?;
            let status = p.status.clone().unwrap_or_default();
            let c = status
                .container_statuses
                .unwrap_or_default()
                .into_iter()
                .next();
            let last_exit = c
                .as_ref()
                .and_then(|c| c.last_state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .map(|t| (t.exit_code, t.reason.clone()));
            match (&c, last_exit, status.phase.as_deref()) {
                (Some(c), Some((3, Some(reason))), Some("Running"))
                    if c.restart_count >= 1 && reason == "Error" =>
                {
                    Ok(())
                }
                _ => Err(format!("{c:?} phase {:?}", status.phase)),
            }
        })
        .await?;

        wait_for(
            "the unhealthy container killed and restarted",
            WAIT,
            || async {
                let p = pod_api.get("unhealthy").await.map_err(|e| e.to_string())?;
                let c = p
                    .status
                    .and_then(|s| s.container_statuses)
                    .unwrap_or_default()
                    .into_iter()
                    .next();
                let killed = c
                    .as_ref()
                    .and_then(|c| c.last_state.as_ref())
                    .and_then(|s| s.terminated.as_ref());
                match (&c, killed) {
                    (Some(c), Some(_)) if c.restart_count >= 1 => Ok(()),
                    _ => Err(format!("{c:?}")),
                }
            },
        )
        .await?;

        // A missing ConfigMap key reference: kubelet's CreateContainerConfigError, Pending.
        wait_for(
            "the configured pod waiting for its ConfigMap",
            WAIT,
            || async {
                let p = pod_api.get("configured").await.map_err(|e| e.to_string())?;
                let status = p.status.clone().unwrap_or_default();
                let waiting = status
                    .container_statuses
                    .unwrap_or_default()
                    .into_iter()
                    .next()
                    .and_then(|c| c.state)
                    .and_then(|s| s.waiting);
                match (&waiting, status.phase.as_deref()) {
                    (Some(w), Some("Pending"))
                        if w.reason.as_deref() == Some("CreateContainerConfigError")
                            && w.message.as_deref() == Some("configmap \"later\" not found") =>
                    {
                        Ok(())
                    }
                    _ => Err(format!("{waiting:?} phase {:?}", status.phase)),
                }
            },
        )
        .await?;
        create::<k8s_openapi::api::core::v1::ConfigMap>(
            &client,
            "life",
            json!({"metadata": {"name": "later"}, "data": {"x": "1"}}),
        )
        .await?;
        wait_for(
            "the configured pod Ready once its ConfigMap exists",
            WAIT,
            || async {
                let p = pod_api.get("configured").await.map_err(|e| e.to_string())?;
                if is_ready(&p) {
                    Ok(())
                } else {
                    Err(format!("{:?}", condition(&p, "Ready")))
                }
            },
        )
        .await?;
        Ok(())
    })?
}

#[test]
fn a_second_kubelet_is_another_node_with_its_own_addresses_and_labels() -> anyhow::Result<()> {
    bed::in_pod_network(async {
        let bed = Bed::start(config()).await?;
        let client = bed.client();
        let edge_config = KubeletConfig::new("edge-node")
            .node_index(1)
            .label("haptic.dev/role", "edge")
            .program(ECHO_IMAGE, Program::new(env!("CARGO_BIN_EXE_echo-server")))
            .api_server_url(bed.control_plane.server_url())?;
        let _edge = Kubelet::start(client.clone(), edge_config).await?;
        let node = Api::<Node>::all(client.clone()).get("edge-node").await?;
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status.clone());
        ensure!(ready.as_deref() == Some("True"), "node Ready {ready:?}");
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default();
        ensure!(
            taints.is_empty(),
            "a Ready node has no not-ready taint: {taints:?}"
        );
        namespace(&client, "nodes").await?;
        create::<Pod>(
            &client,
            "nodes",
            json!({
                "metadata": {"name": "on-edge"},
                "spec": {
                    "nodeSelector": {"haptic.dev/role": "edge"},
                    // Without a readiness probe a pod is Ready as soon as its process runs,
                    // before it listens (as on a real cluster); the probe makes Ready mean serving.
                    "containers": [{
                        "name": "echo", "image": ECHO_IMAGE, "ports": [{"containerPort": 8080}],
                        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 1},
                    }],
                },
            }),
        )
        .await?;
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), "nodes");
        let pod = wait_for("the edge pod Ready", WAIT, || async {
            let p = pod_api.get("on-edge").await.map_err(|e| e.to_string())?;
            if is_ready(&p) {
                Ok(p)
            } else {
                Err(format!("{:?}", p.status))
            }
        })
        .await?;
        let spec = pod.spec.as_ref().context("spec")?;
        let status = pod.status.as_ref().context("status")?;
        ensure!(
            spec.node_name.as_deref() == Some("edge-node"),
            "bound to {:?}",
            spec.node_name
        );
        ensure!(
            status.host_ip.as_deref() == Some("10.244.16.1"),
            "hostIP {:?}",
            status.host_ip
        );
        let ip = pod_ip(&pod).context("podIP")?;
        ensure!(ip.starts_with("10.244.16."), "podIP {ip} in node 1's range");
        let resp = http::get(
            format!("{ip}:8080").parse()?,
            None,
            "/",
            &[],
            Duration::from_secs(5),
        )
        .await?;
        ensure!(resp.body.starts_with("pod=on-edge\n"), "{resp:?}");
        Ok(())
    })?
}

#[test]
fn init_containers_run_in_order_before_the_app_and_a_failed_one_fails_the_pod() -> anyhow::Result<()>
{
    bed::in_pod_network(async {
        let bed = Bed::start(config()).await?;
        let client = bed.client();
        namespace(&client, "init").await?;
        let mount = json!([{"name": "work", "mountPath": "/run/haptic-test/work"}]);
        let sh = |name: &str, script: &str| json!({"name": name, "image": "docker.io/library/busybox", "command": ["sh", "-c", script], "volumeMounts": mount});
        let ok = create::<Pod>(
            &client,
            "init",
            json!({
                "metadata": {"name": "ok"},
                "spec": {
                    "restartPolicy": "Never",
                    "volumes": [{"name": "work", "emptyDir": {}}],
                    "initContainers": [
                        sh("first", "echo one > /run/haptic-test/work/log"),
                        sh("second", "echo two >> /run/haptic-test/work/log"),
                    ],
                    "containers": [sh("app", "cat /run/haptic-test/work/log")],
                },
            }),
        )
        .await?;
        create::<Pod>(
            &client,
            "init",
            json!({
                "metadata": {"name": "broken"},
                "spec": {
                    "restartPolicy": "Never",
                    "volumes": [{"name": "work", "emptyDir": {}}],
                    "initContainers": [sh("fails", "exit 7")],
                    "containers": [sh("app", "echo never")],
                },
            }),
        )
        .await?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), "init");
        let phase_of = |name: &'static str, want: &'static str| {
            let pods = pods.clone();
            async move {
                wait_for(&format!("pod {name} {want}"), WAIT, || async {
                    let p = pods.get(name).await.map_err(|e| e.to_string())?;
                    match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
                        Some(phase) if phase == want => Ok(p),
                        other => Err(format!("phase {other:?}: {:?}", p.status)),
                    }
                })
                .await
            }
        };
        let done = phase_of("ok", "Succeeded").await?;
        let inits = done
            .status
            .as_ref()
            .and_then(|s| s.init_container_statuses.clone())
            .unwrap_or_default();
        let reasons: Vec<Option<String>> = inits
            .iter()
            .map(|c| {
                c.state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .and_then(|t| t.reason.clone())
            })
            .collect();
        ensure!(
            reasons == [Some("Completed".into()), Some("Completed".into())],
            "{inits:?}"
        );
        let uid = ok.metadata.uid.unwrap_or_default();
        let log = std::fs::read_to_string(bed.kubelet.log_path(&uid, "app", 0))?;
        ensure!(
            log == "one\ntwo\n",
            "the app saw the init containers' work in order: {log:?}"
        );

        let broken = phase_of("broken", "Failed").await?;
        let init = condition(&broken, "Initialized");
        ensure!(
            init == Some((
                "False".into(),
                "ContainersNotInitialized".into(),
                "containers with incomplete status: [fails]".into()
            )),
            "{init:?}"
        );
        let app = broken
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        let never_started = app
            .first()
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref());
        ensure!(
            never_started.and_then(|w| w.reason.as_deref()) == Some("PodInitializing"),
            "the app container never ran: {app:?}"
        );
        Ok(())
    })?
}

#[tokio::test]
async fn a_kubelet_outside_the_pod_network_refuses_to_start() -> anyhow::Result<()> {
    // Any client will do: the check comes before the first API call.
    let config = kube::Config::new("http://127.0.0.1:1".parse()?);
    let client = kube::Client::try_from(config)?;
    let config = haptic_testbed::kubelet::bed::echo_config();
    let err = haptic_testbed::kubelet::Kubelet::start(client, config)
        .await
        .err()
        .context("a kubelet started outside the pod network")?;
    ensure!(
        err.to_string()
            .contains("not local in this network namespace"),
        "{err}"
    );
    Ok(())
}

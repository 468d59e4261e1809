//! The chart with the readiness gate, on the real node: `helm install` runs
//! two controller replicas under the chart's ServiceAccount and RBAC
//! (in-cluster config from the projected token) and two HAProxy pods. A
//! gated single-replica echo Deployment is routed by both HAProxy pods and
//! rolled [`ROLLOUTS`] times under load through both, at their pod IPs: no
//! request fails, and each time a new pod's gate turns True every worker of
//! every HAProxy pod already routes to it (its master CLI). `helm upgrade`
//! turns the gate off under load: the ClusterRole loses pods, the controller
//! rolls, routing goes on and a new host is routed. The chart's manifests
//! pass a server-side dry run, the controller is never refused by the
//! apiserver, and `helm uninstall` leaves nothing.
//!
//! The load alone does not prove the gate: run ungated, even without the
//! app's shutdown delay, these rollouts dropped no request here (HAProxy
//! redispatches a refused connection, and the controller had added the new
//! pod by then). What does is the order check, and the gate that is True on
//! every new pod before its predecessor goes (ungated, the test fails:
//! "timed out after 180s waiting for the first web pod's gate; last seen:
//! [None]").

use std::time::{Duration, Instant};

use anyhow::ensure;
use haptic_testbed::app::{GATE, WEB_PORT, ingress};
use haptic_testbed::cluster::{create, namespace, wait_for};
use haptic_testbed::helm;
use haptic_testbed::load::Load;
use haptic_testbed::node::NodeBed;
use haptic_testbed::node::gate::{self, GateCheck, GateOrder, MasterSockets, Route};
use haptic_testbed::node::rollout;
use haptic_testbed::oracle;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::ListParams;

use super::refusals::{ControllerLogs, pod_logs, print_tails};
use super::{
    APP, HAPROXY, HOST, MIN_OK_PER_CLIENT_PER_SECOND, NAMESPACE, WAIT, create_app,
    haproxy_pod_addresses, start_bed, stop_bed, wait_routed,
};

const GATE_VALUE: &str = "controller.templateLibraries.kubernetesBackends.podReadinessGate.enabled";
/// The controller's ClusterRole and ClusterRoleBinding.
const CONTROLLER: &str = "haptic-controller";
const CONTROLLER_PODS: &str = "app.kubernetes.io/component=controller";
const WEB_PODS: &str = "app=web";
/// The host routed once the upgraded controller runs.
const NEW_HOST: &str = "new.example.com";
const ROLLOUTS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_the_chart_installs_routes_gated_rollouts_and_upgrades_the_gate_off()
-> anyhow::Result<()> {
    let started = Instant::now();
    let bed = start_bed().await?;
    // The node lock may have been held by another test's node meanwhile.
    let lock_wait = started.elapsed().saturating_sub(bed.startup_time());
    let logs = ControllerLogs::start(&bed.client(), NAMESPACE, CONTROLLER_PODS);
    let mut timings = vec![("real node".to_owned(), bed.startup_time())];
    if let Err(error) = scenario(&bed, &logs, &mut timings).await {
        print_tails("controller", &logs.logs().await);
        let pods: Api<Pod> = Api::namespaced(bed.client(), NAMESPACE);
        for container in ["agent", "haproxy"] {
            print_tails(container, &pod_logs(&pods, HAPROXY, container).await);
        }
        return Err(error);
    }
    drop(logs);
    println!(
        "total: {:.1?} after {lock_wait:.1?} waiting for the node lock",
        started.elapsed() - lock_wait
    );
    for (what, took) in &timings {
        println!("  {took:>8.1?}  {what}");
    }
    stop_bed(bed).await
}

async fn scenario(
    bed: &NodeBed,
    logs: &ControllerLogs,
    timings: &mut Vec<(String, Duration)>,
) -> anyhow::Result<()> {
    let client = bed.client();
    let kubeconfig = bed.control_plane().kubeconfig_path();
    let mut phase = Instant::now();
    let mut lap = |what: &str, timings: &mut Vec<(String, Duration)>| {
        let took = phase.elapsed();
        println!("{what}: {took:.1?}");
        timings.push((what.to_owned(), took));
        phase = Instant::now();
    };

    // 1. helm install with the gate on; --wait: every pod of the chart Ready.
    let gate_on = format!("{GATE_VALUE}=true");
    logs.refused_or(helm::install(kubeconfig, NAMESPACE, &[&gate_on]))
        .await?;
    lap("helm install --wait", timings);
    let proxies = haproxy_pod_addresses(&client).await?;
    ensure!(proxies.len() == 2, "HAProxy pods: {proxies:?}");
    let controllers = controller_pods(&client).await?;
    ensure!(
        controllers.len() == 2 && controllers.iter().all(|c| c.ready),
        "controller pods after helm install --wait: {controllers:?}"
    );
    check_service_account(&client, &controllers).await?;
    let roles: Api<ClusterRole> = Api::all(client.clone());
    ensure!(
        !pods_rules(&roles.get(CONTROLLER).await?).is_empty(),
        "the gate is on but the ClusterRole has no pods rules"
    );

    // 2. The gated app, routed by both HAProxy pods through the chart's
    // controller: in answers from each, and in every worker's own words.
    create_app(&client, 1, true).await?;
    logs.refused_or(wait_routed(&client, HOST, &[])).await?;
    let sockets = MasterSockets::of(&client, NAMESPACE, HAPROXY).await?;
    let first = logs
        .refused_or(async {
            Ok(wait_for("the first web pod's gate", WAIT, || async {
                let pods = web_pods(&client).await.map_err(|e| e.to_string())?;
                match pods.as_slice() {
                    [pod] if gate::condition(pod, GATE) == Some("True") => Ok(pod.clone()),
                    _ => Err(format!(
                        "{:?}",
                        pods.iter()
                            .map(|p| gate::condition(p, GATE))
                            .collect::<Vec<_>>()
                    )),
                }
            })
            .await?)
        })
        .await?;
    every_worker_routes(&sockets, HOST, &first).await?;
    lap("app routed by both HAProxy pods", timings);

    // 3. Gated rollouts under load through both HAProxy pods: no failed
    // request, and the gate never ahead of a HAProxy worker.
    let check = GateCheck {
        namespace: APP.to_owned(),
        selector: WEB_PODS.to_owned(),
        gate: GATE.to_owned(),
        route: Route::Host(HOST.to_owned()),
        port: WEB_PORT,
        listed: false,
    };
    let order = GateOrder::start(&client, check, sockets.sockets.clone()).await?;
    let load = Load::across(&proxies, HOST, 2);
    for round in 1..=ROLLOUTS {
        let before = rollout::pod_names(&client, APP, WEB_PODS).await?;
        let took = logs
            .refused_or(rollout::restart_and_wait(
                &client, APP, "web", WEB_PODS, WAIT,
            ))
            .await?;
        let pods = web_pods(&client).await?;
        let [pod] = pods.as_slice() else {
            anyhow::bail!("rollout {round} left {} web pods", pods.len());
        };
        let name = pod.metadata.name.clone().unwrap_or_default();
        ensure!(!before.contains(&name), "rollout {round} kept {name}");
        ensure!(
            gate::condition(pod, GATE) == Some("True"),
            "the new pod {name} is Ready without its gate True: {:?}",
            pod.status.as_ref().map(|s| &s.conditions)
        );
        println!("  rollout {round}: {took:.1?}, {name} gate True");
    }
    // The watch sees the last new pod's gate (already True) before it stops.
    wait_for("the gate checked on every new pod", WAIT, || async {
        let seen = order.seen();
        if seen.checked.len() >= ROLLOUTS {
            Ok(())
        } else {
            Err(format!("checked {:?}", seen.checked))
        }
    })
    .await?;
    let seen = load.stop().await;
    let gates = order.stop().await;
    let minimum = seen.minimum_ok(MIN_OK_PER_CLIENT_PER_SECOND);
    println!(
        "  {ROLLOUTS} gated rollouts: {} requests ok (minimum {minimum}), {} failed in {:.1?}; gate checked on {:?}, {} times ahead of a HAProxy worker",
        seen.ok,
        seen.failed(),
        seen.elapsed,
        gates.checked,
        gates.violations.len()
    );
    seen.check(&format!("{ROLLOUTS} gated rollouts"), minimum)?;
    ensure!(
        gates.violations.is_empty(),
        "the gate came ahead of HAProxy: {:#?}",
        gates.violations
    );
    lap("3 gated rollouts under load", timings);

    // 4. helm upgrade turning the gate off (under load): the ClusterRole loses
    // pods, the controller rolls (new values checksum), routing goes on.
    let before = controller_pods(&client).await?;
    let load = Load::across(&proxies, HOST, 2);
    logs.forgive_pods_refusals_from_now().await;
    let gate_off = format!("{GATE_VALUE}=false");
    logs.refused_or(helm::upgrade(kubeconfig, NAMESPACE, &[&gate_off]))
        .await?;
    let left = pods_rules(&roles.get(CONTROLLER).await?);
    ensure!(
        left.is_empty(),
        "the gate is off but the ClusterRole keeps {left:?}"
    );
    let rolled = logs
        .refused_or(async {
            Ok(wait_for("the controller to roll", WAIT, || async {
                let now = controller_pods(&client).await.map_err(|e| e.to_string())?;
                let fresh = now.len() == 2
                    && now.iter().all(|pod| {
                        pod.ready
                            && before.iter().all(|old| {
                                old.name != pod.name && old.values_checksum != pod.values_checksum
                            })
                    });
                if fresh {
                    Ok(now)
                } else {
                    Err(format!("{now:?}"))
                }
            })
            .await?)
        })
        .await?;
    println!("  controller rolled: {before:?} -> {rolled:?}");
    check_service_account(&client, &rolled).await?;
    // The new replicas render and deploy: a new host is routed.
    create::<Ingress>(&client, APP, ingress("web-new", NEW_HOST, "web")).await?;
    logs.refused_or(wait_routed(&client, NEW_HOST, &[])).await?;
    let pods = web_pods(&client).await?;
    let [pod] = pods.as_slice() else {
        anyhow::bail!("{} web pods after the upgrade", pods.len());
    };
    every_worker_routes(&sockets, NEW_HOST, pod).await?;
    let seen = load.stop().await;
    let minimum = seen.minimum_ok(MIN_OK_PER_CLIENT_PER_SECOND);
    println!(
        "  upgrade: {} requests ok (minimum {minimum}), {} failed in {:.1?}",
        seen.ok,
        seen.failed(),
        seen.elapsed
    );
    seen.check("the upgrade turning the gate off", minimum)?;
    lap(
        "helm upgrade (gate off), controller rolled, new host routed",
        timings,
    );

    // 5. The chart's manifests, server-side dry run: defaults and gate on.
    let kubectl = bed.control_plane().bin_dir().join("kubectl");
    namespace(&client, "dry").await?;
    for (what, sets) in [("defaults", vec![]), ("gate on", vec![gate_on.as_str()])] {
        let manifests = helm::template("dry", &sets).await?;
        let kubeconfig = kubeconfig.to_string_lossy();
        let args = [
            "--kubeconfig",
            &kubeconfig,
            "apply",
            "--dry-run=server",
            "-f",
            "-",
        ];
        let out = helm::output(&kubectl, args, Some(&manifests)).await?;
        let applied = out
            .lines()
            .filter(|l| l.ends_with("(server dry run)"))
            .count();
        ensure!(
            applied >= 10,
            "dry run ({what}) applied only {applied} objects:\n{out}"
        );
        println!("  dry run ({what}): {applied} objects");
    }
    lap("kubectl apply --dry-run=server of helm template", timings);

    let copied = logs.logs().await;
    ensure!(
        copied.len() >= 4 && copied.iter().all(|(_, text)| !text.is_empty()),
        "controller logs copied: {:?}",
        copied
            .iter()
            .map(|(pod, text)| (pod, text.len()))
            .collect::<Vec<_>>()
    );
    let forgiven = logs.refusals().await?;
    println!(
        "  controller logs: no refusal but {forgiven} on pods by the old replicas during the upgrade"
    );

    // 6. helm uninstall leaves nothing of the release behind. Refusals are
    // no longer checked: the controller pods being deleted may well log
    // some once their RBAC is gone.
    helm::uninstall(kubeconfig, NAMESPACE).await?;
    let selector = format!("app.kubernetes.io/instance={}", helm::RELEASE);
    let kinds = "deployments,replicasets,pods,services,configmaps,secrets,serviceaccounts,roles,\
                 rolebindings,poddisruptionbudgets,clusterroles,clusterrolebindings,ingressclasses";
    let kubeconfig = kubeconfig.to_string_lossy();
    let args = [
        "--kubeconfig",
        &kubeconfig,
        "get",
        kinds,
        "--all-namespaces",
        "-l",
        &selector,
        "-o",
        "name",
    ];
    wait_for("nothing of the release to be left", WAIT, || async {
        let out = helm::output(&kubectl, args, None)
            .await
            .map_err(|e| format!("{e:#}"))?;
        if out.trim().is_empty() {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await
    .map_err(|e| anyhow::anyhow!("after helm uninstall: {e}"))?;
    lap("helm uninstall, nothing left", timings);
    Ok(())
}

/// Every live worker of every HAProxy pod routes `host` to `pod`, in its own
/// words.
async fn every_worker_routes(sockets: &MasterSockets, host: &str, pod: &Pod) -> anyhow::Result<()> {
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    wait_for(
        &format!("every HAProxy worker to route {host} to {ip}"),
        WAIT,
        || async {
            for (proxy, socket) in &sockets.sockets {
                oracle::every_worker_routes(socket, host, &ip, WEB_PORT)
                    .await
                    .map_err(|error| format!("{proxy}: {error}"))?;
            }
            Ok(())
        },
    )
    .await?;
    Ok(())
}

async fn web_pods(client: &kube::Client) -> anyhow::Result<Vec<Pod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), APP);
    Ok(pods
        .list(&ListParams::default().labels(WEB_PODS))
        .await?
        .items)
}

/// A controller pod as the upgrade sees it.
#[derive(Debug)]
struct ControllerPod {
    name: String,
    /// The `checksum/values` annotation: it changes when the values do.
    values_checksum: String,
    ready: bool,
    service_account: String,
}

/// The release's controller pods not being deleted.
async fn controller_pods(client: &kube::Client) -> anyhow::Result<Vec<ControllerPod>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels(CONTROLLER_PODS))
        .await?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| ControllerPod {
            ready: gate::condition(&p, "Ready") == Some("True"),
            values_checksum: p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("checksum/values").cloned())
                .unwrap_or_default(),
            service_account: p
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_default(),
            name: p.metadata.name.unwrap_or_default(),
        })
        .collect())
}

/// The controller pods run under the ServiceAccount the chart's
/// ClusterRoleBinding binds its ClusterRole to.
async fn check_service_account(
    client: &kube::Client,
    controllers: &[ControllerPod],
) -> anyhow::Result<()> {
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = bindings.get(CONTROLLER).await?;
    ensure!(
        binding.role_ref.kind == "ClusterRole" && binding.role_ref.name == CONTROLLER,
        "{CONTROLLER} binds {:?}",
        binding.role_ref
    );
    let bound: Vec<&str> = binding
        .subjects
        .iter()
        .flatten()
        .filter(|s| s.kind == "ServiceAccount" && s.namespace.as_deref() == Some(NAMESPACE))
        .map(|s| s.name.as_str())
        .collect();
    for pod in controllers {
        ensure!(
            bound.contains(&pod.service_account.as_str()),
            "controller pod {} runs as ServiceAccount {:?}, {CONTROLLER} binds {bound:?}",
            pod.name,
            pod.service_account
        );
    }
    Ok(())
}

/// The ClusterRole's rules on pods or their subresources.
fn pods_rules(role: &ClusterRole) -> Vec<String> {
    role.rules
        .iter()
        .flatten()
        .filter(|r| {
            r.resources
                .iter()
                .flatten()
                .any(|res| res == "pods" || res.starts_with("pods/"))
        })
        .map(|r| format!("{:?} {:?}", r.resources, r.verbs))
        .collect()
}

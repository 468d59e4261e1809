//! Operators' tools on the test bed, against the real parts:
//!
//! - The chart's dashboard and alert rules read metrics the controller and
//!   the agents really export: an installation (a gated app, an HAProxy
//!   pod, the controller with the default certificate) is scraped after
//!   its first deploy, and every `haptic_*` name in
//!   `charts/haptic/files/dashboard.json` and
//!   `charts/haptic/templates/prometheusrule.yaml` must be a series there.
//!   A metric renamed in the code, or a typo in a query, fails here.
//! - `haptic status` explains a rollout stalled on purpose: one HAProxy
//!   pod's agent is stopped (SIGSTOP, the pid its kubelet reports), the new app pod's
//!   gate waits, and `haptic status --pod` must name that HAProxy pod and
//!   the worker still on the old render; once the agent runs again the
//!   gate is set and the command says nothing waits.
//! - `haptic migrate report --cluster` reads the real API server: with
//!   `examples/ingress-nginx/` applied to a control plane, its report is
//!   the offline report of the same files, line for line (the files are
//!   the oracle, not the code that lists the cluster).

#[allow(dead_code)]
#[path = "controller/harness.rs"]
mod harness;
#[allow(dead_code)]
#[path = "controller/synthetic.rs"]
mod synthetic;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use haptic_testbed::cluster as bed;
use haptic_testbed::control_plane::ControlPlane;
use haptic_testbed::http;
use haptic_testbed::paths::haptic_bin;
use harness::{APP_NAMESPACE, Installation, PROXY_NAMESPACE, gate_status};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use synthetic::{CONTROLLER_LISTEN, ControllerProcess, converged_on_new};

/// The files whose queries are checked, relative to the repository.
const CHART_FILES: [&str; 2] = [
    "charts/haptic/files/dashboard.json",
    "charts/haptic/templates/prometheusrule.yaml",
];

/// The suffixes Prometheus's exposition adds to a family's samples.
const SAMPLE_SUFFIXES: [&str; 4] = ["_total", "_bucket", "_sum", "_count"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `haptic_*` metric name in `text` (queries, rule expressions).
fn names_used(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(found) = text[at..].find("haptic_") {
        let start = at + found;
        let preceded_by_word = start > 0 && is_name_byte(bytes[start - 1]);
        let end = start
            + text[start..]
                .bytes()
                .take_while(|byte| is_name_byte(*byte))
                .count();
        if !preceded_by_word {
            names.insert(text[start..end].to_owned());
        }
        at = end;
    }
    names
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The sample names in an exposition text (`name{labels} value` lines).
fn samples(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// `name` is a sample, or a family whose samples carry a suffix (a query
/// on `haptic_renders_total` matches the exported `haptic_renders_total`;
/// `histogram_quantile` reads `_bucket`).
fn exported(name: &str, samples: &BTreeSet<String>) -> bool {
    samples.contains(name)
        || SAMPLE_SUFFIXES
            .iter()
            .any(|suffix| samples.contains(&format!("{name}{suffix}")))
}

#[test]
fn e2e_every_metric_the_dashboard_and_alerts_read_is_exported() {
    harness::run(async {
        let installation = Installation::start(true, 1).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;

        let proxy = &installation.proxies[0];
        let agent = http::get(
            SocketAddr::from((proxy.ip, 8450)),
            None,
            "/metrics",
            &[],
            Duration::from_secs(5),
        )
        .await
        .expect("the agent serves /metrics without a token");
        assert_eq!(agent.status, 200, "agent /metrics: {}", agent.body);
        // The controller's /metrics handler serves exactly this text.
        let mut scraped = samples(&controller.state.metrics.encode());
        scraped.extend(samples(&agent.body));
        assert!(
            scraped.contains("haptic_certificate_expiry_timestamp_seconds"),
            "the default certificate is in the bundle, so its expiry is exported: {scraped:?}"
        );

        let mut checked = 0;
        let mut missing = Vec::new();
        for file in CHART_FILES {
            let text = std::fs::read_to_string(repo().join(file))
                .unwrap_or_else(|error| panic!("reading {file}: {error}"));
            let used = names_used(&text);
            assert!(!used.is_empty(), "{file} reads no haptic_ metric");
            for name in used {
                checked += 1;
                if !exported(&name, &scraped) {
                    missing.push(format!("{file}: {name}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "metrics the chart reads but neither the controller nor the agent exports:\n  {}\nexported: {scraped:?}",
            missing.join("\n  ")
        );
        println!(
            "{checked} metric names in the chart's dashboard and rules, all exported ({} series names scraped)",
            scraped.len()
        );
        controller.stop().await;
    });
}

/// `haptic status` against the controller process: exit code and stdout.
async fn status(args: &[&str]) -> (i32, String) {
    let output = tokio::process::Command::new(haptic_bin())
        .arg("status")
        .arg("--controller")
        .arg(format!("http://{CONTROLLER_LISTEN}"))
        .args(args)
        .output()
        .await
        .expect("haptic status runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (
        output.status.code().unwrap_or(-1),
        format!("{stdout}{stderr}"),
    )
}

/// The app pods (`app=web`) by name, with their gate status.
async fn web_pods(client: &kube::Client) -> Vec<(String, Option<String>, bool)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), APP_NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list pods");
    list.items
        .iter()
        .map(|pod| {
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "ContainersReady" && c.status == "True")
                });
            (
                pod.metadata.name.clone().unwrap_or_default(),
                gate_status(pod).map(str::to_owned),
                ready,
            )
        })
        .collect()
}

#[test]
fn e2e_haptic_status_names_the_haproxy_pod_and_worker_a_stalled_rollout_waits_for() {
    harness::run(async {
        let installation = Installation::start(true, 2).await;
        let client = installation.client();
        let dir = tempfile::tempdir().expect("tempdir");
        let _controller = ControllerProcess::start(
            dir.path(),
            installation.bed.control_plane().kubeconfig_path(),
        );
        converged_on_new(&installation, None, Duration::from_secs(60))
            .await
            .expect("the fleet runs a first configuration");
        installation.wait_routed().await;
        // The first app pod's gate is written once the fleet runs it.
        bed::wait_for("no gate to wait", Duration::from_secs(30), || async {
            let (code, text) = status(&[]).await;
            if code == 0 && text.contains("gates: none waiting") {
                Ok(())
            } else {
                Err(format!("exit {code}: {text}"))
            }
        })
        .await
        .expect("haptic status says nothing waits");

        let before: Vec<String> = web_pods(&client)
            .await
            .into_iter()
            .map(|(n, _, _)| n)
            .collect();
        let stalled = &installation.proxies[1];
        let agent = Pid::from_raw(
            installation
                .container_pid(PROXY_NAMESPACE, &stalled.name, "agent")
                .await,
        );
        kill(agent, Signal::SIGSTOP).expect("SIGSTOP the agent");
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), APP_NAMESPACE);
        deployments
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {
                    "kubectl.kubernetes.io/restartedAt": "stalled"
                }}}}})),
            )
            .await
            .expect("restart the app");
        let waiting = format!("haptic/{} worker ", stalled.name);
        // The other HAProxy pod takes the render within milliseconds; from
        // then on it must not be named, though the stalled push goes on.
        let not_waiting = format!("haptic/{} worker ", installation.proxies[0].name);
        let explained = bed::wait_for(
            "haptic status --pod to explain the new pod's wait",
            Duration::from_secs(60),
            || {
                let (client, before, waiting, not_waiting) = (
                    client.clone(),
                    before.clone(),
                    waiting.clone(),
                    not_waiting.clone(),
                );
                let proxy0 = installation.proxies[0].clone();
                async move {
                    let pods = web_pods(&client).await;
                    let Some((new, gate, _)) = pods
                        .iter()
                        .find(|(name, _, ready)| !before.contains(name) && *ready)
                    else {
                        return Err(format!("no new ContainersReady pod yet: {pods:?}"));
                    };
                    if gate.as_deref() == Some("True") {
                        return Err(format!("{new}'s gate is True with an agent stopped"));
                    }
                    let pod = format!("{APP_NAMESPACE}/{new}");
                    let (code, text) = status(&["--pod", &pod, "--warn-after", "1"]).await;
                    if text.contains(&waiting)
                        && text.contains("still runs render")
                        && !text.contains(&not_waiting)
                    {
                        Ok((pod, code, text))
                    } else {
                        let state = proxy0.agent().state().await.map(|s| s.workers);
                        Err(format!(
                            "{text}(the other HAProxy pod's agent reports {state:?})"
                        ))
                    }
                }
            },
        )
        .await;
        // Past --warn-after the exit code says so (asked while the agent
        // is still stopped).
        let late = match &explained {
            Ok(_) => {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                let pod = explained
                    .as_ref()
                    .map(|(pod, _, _)| pod.clone())
                    .unwrap_or_default();
                Some(status(&["--pod", &pod, "--warn-after", "1"]).await)
            }
            Err(_) => None,
        };
        kill(agent, Signal::SIGCONT).expect("SIGCONT the agent");
        let (pod, _, text) =
            explained.expect("haptic status names the stalled HAProxy pod and worker");
        println!("{text}");
        let (code, text) = late.expect("asked");
        assert_eq!(code, 1, "a gate waiting past --warn-after exits 1: {text}");
        assert!(text.contains(&waiting), "{text}");

        let name = pod.rsplit('/').next().unwrap_or_default().to_owned();
        bed::wait_for(
            "the gate once the agent runs again",
            Duration::from_secs(120),
            || {
                let (client, name) = (client.clone(), name.clone());
                async move {
                    let pods = web_pods(&client).await;
                    match pods.iter().find(|(n, _, _)| *n == name) {
                        Some((_, Some(gate), _)) if gate == "True" => Ok(()),
                        other => Err(format!("{other:?}")),
                    }
                }
            },
        )
        .await
        .expect("the rollout completes");
        // The gate is True in the API server, written by the status task;
        // the report's list of waiting gates is the newest render's, and the
        // render that sees the written condition comes a moment later (the
        // pod's watch event). Until then the report says the conditions are
        // being written, which is true; it must then say nothing waits.
        let written = std::time::Instant::now();
        bed::wait_for(
            "haptic status to say no gate waits once it is True",
            Duration::from_secs(30),
            || {
                let pod = pod.clone();
                async move {
                    let (code, text) = status(&["--pod", &pod]).await;
                    if code == 0 && text.contains("no readiness gate waits") {
                        Ok(())
                    } else {
                        Err(format!("exit {code}: {text}"))
                    }
                }
            },
        )
        .await
        .expect("haptic status catches up with the written gate");
        println!(
            "haptic status said no gate waits {:.0} ms after the API server had it True",
            written.elapsed().as_secs_f64() * 1000.0
        );
    });
}

#[test]
fn names_are_read_whole_and_suffixes_match_families() {
    let used = names_used(
        r#"histogram_quantile(0.95, rate(haptic_agent_apply_duration_seconds_bucket{namespace="x"}[5m])) / xhaptic_not"#,
    );
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["haptic_agent_apply_duration_seconds_bucket"]
    );
    let scraped = samples(
        "# TYPE haptic_renders counter\nhaptic_renders_total{result=\"ok\"} 0\nhaptic_leader 1\n",
    );
    assert!(exported("haptic_renders_total", &scraped));
    assert!(exported("haptic_renders", &scraped));
    assert!(exported("haptic_leader", &scraped));
    assert!(!exported("haptic_leaders", &scraped));
}

/// `haptic migrate report` with `args`, KUBECONFIG set to `kubeconfig`:
/// exit code, stdout and stderr.
async fn migrate_report(
    args: &[&std::ffi::OsStr],
    kubeconfig: &std::path::Path,
) -> (i32, String, String) {
    let output = tokio::process::Command::new(haptic_bin())
        .args(["migrate", "report"])
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
        .expect("haptic migrate report runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Applies every object of `text` (multi-document YAML) by server-side
/// apply, creating the namespaces they name first.
async fn apply_manifests(client: &kube::Client, text: &str) {
    use kube::api::DynamicObject;
    use kube::discovery::{Scope, pinned_kind};
    use serde::Deserialize as _;

    let mut objects = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document).expect("a YAML document");
        if value.is_null() {
            continue;
        }
        let object: DynamicObject = serde_json::from_value(value).expect("a Kubernetes object");
        objects.push(object);
    }
    let namespaces: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| o.metadata.namespace.clone())
        .collect();
    let params = PatchParams::apply("haptic-testbed").force();
    for namespace in namespaces {
        let body =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .patch(&namespace, &params, &Patch::Apply(&body))
            .await
            .expect("namespace applied");
    }
    for object in objects {
        let types = object.types.clone().expect("apiVersion and kind");
        let gvk = kube::api::GroupVersionKind::try_from(&types).expect("a group, version and kind");
        let (resource, capabilities) = pinned_kind(client, &gvk).await.expect("a served kind");
        let name = object.metadata.name.clone().expect("a name");
        let api: Api<DynamicObject> = match (&capabilities.scope, &object.metadata.namespace) {
            (Scope::Namespaced, Some(namespace)) => {
                Api::namespaced_with(client.clone(), namespace, &resource)
            }
            _ => Api::all_with(client.clone(), &resource),
        };
        api.patch(&name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("applying {} {name}: {e}", types.kind));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_migrate_report_of_a_cluster_is_the_report_of_its_manifests() {
    let plane = ControlPlane::start()
        .await
        .unwrap_or_else(|e| panic!("starting the control plane: {e}"));
    let examples = repo().join("examples/ingress-nginx");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&examples)
        .expect("examples/ingress-nginx")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("an example");
        apply_manifests(&plane.admin_client(), &text).await;
    }
    let kubeconfig = plane.kubeconfig_path();
    let offline_args: Vec<&std::ffi::OsStr> = files.iter().map(|f| f.as_os_str()).collect();
    let (code, offline, stderr) = migrate_report(&offline_args, kubeconfig).await;
    assert_eq!(code, 0, "the report of the files failed:\n{stderr}");
    let (code, cluster, stderr) = migrate_report(&["--cluster".as_ref()], kubeconfig).await;
    assert_eq!(code, 0, "the report of the cluster failed:\n{stderr}");
    assert!(
        offline.contains("Total: 5 Ingresses"),
        "the examples' report:\n{offline}"
    );
    assert_eq!(
        cluster, offline,
        "the report of the cluster differs from the report of the manifests applied to it"
    );
    println!(
        "haptic migrate report --cluster: {} lines, the same as of the files",
        cluster.lines().count()
    );
}

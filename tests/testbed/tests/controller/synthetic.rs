//! A synthetic cluster (`haptic::synthetic`) created on the test bed and
//! `haptic controller` run on it as its own process, so its memory is its
//! own: shared by the TestScale bench (`benches/scale.rs`) and the memory
//! guard (`tests/memory.rs`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use haptic::synthetic::Cluster;
use haptic_testbed::cluster as bed;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::Api;
use kube::api::PostParams;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use haptic_testbed::paths::haptic_bin;

use super::harness::{AGENT_TOKEN, GATE, Installation};

/// Where the controller process serves `/metrics`.
pub const CONTROLLER_LISTEN: &str = "127.0.0.1:18451";

/// Makes a synthetic object creatable here: no server-set metadata,
/// non-loopback addresses (the apiserver refuses 127/8 in slices),
/// headless Services without selectors and slices not claimed by the
/// EndpointSlice controller (so it leaves them alone), Pods that no node
/// runs and no scheduler retries.
fn creatable(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "uid", "creationTimestamp"] {
            metadata.remove(field);
        }
    }
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    match kind.as_str() {
        "Service" => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("selector");
                // Headless: TestScale's 1,000 Services would not fit the
                // bed's ClusterIP range (a /24), and kube-proxy skips them,
                // so it adds no load of its own to what is measured. No
                // bundled library reads a ClusterIP.
                spec.insert("clusterIP".into(), json!("None"));
            }
        }
        "EndpointSlice" => {
            object["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] =
                json!("bench.haptic");
        }
        "Pod" => {
            // Bound to a node that does not exist: the scheduler leaves a
            // bound pod alone and no kubelet runs it, so the status churn a
            // run sees is the one it makes (`churn_pod_status`), the same
            // on every run.
            object["spec"]["nodeName"] = json!("haptic-test-never");
            object["spec"]["containers"] = json!([{"name": "app", "image": "haptic.test/echo"}]);
            if let Some(fields) = object.as_object_mut() {
                fields.remove("status");
            }
        }
        _ => {}
    }
    let text = object.to_string().replace("\"127.1.", "\"10.201.");
    serde_json::from_str(&text).unwrap_or(object)
}

async fn create_one<K>(client: kube::Client, namespace: &str, object: &Value) -> bool
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let typed: K = match serde_json::from_value(object.clone()) {
        Ok(typed) => typed,
        Err(error) => {
            eprintln!("synthetic {}: {error}", object["kind"]);
            return false;
        }
    };
    match Api::<K>::namespaced(client, namespace)
        .create(&PostParams::default(), &typed)
        .await
    {
        Ok(_) => true,
        Err(error) => {
            eprintln!(
                "creating {} {namespace}/{}: {error}",
                object["kind"], object["metadata"]["name"]
            );
            false
        }
    }
}

/// Creates the cluster's objects (32 requests in flight); returns how many
/// the API server took.
pub async fn create_all(client: &kube::Client, cluster: &Cluster) -> usize {
    let objects: Vec<Value> = cluster.objects().cloned().map(creatable).collect();
    // Pods are admitted only once their namespace's default ServiceAccount exists.
    for object in objects.iter().filter(|o| o["kind"] == "Namespace") {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if let Err(error) = bed::namespace(client, name).await {
            eprintln!("namespace {name}: {error:#}");
        }
    }
    futures::stream::iter(
        objects
            .iter()
            .filter(|o| o["kind"] != "Namespace" && o["kind"] != "IngressClass"),
    )
    .map(|object| {
        let client = client.clone();
        async move {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned();
            match object["kind"].as_str() {
                Some("Service") => create_one::<Service>(client, &namespace, object).await,
                Some("EndpointSlice") => {
                    create_one::<EndpointSlice>(client, &namespace, object).await
                }
                Some("Pod") => create_one::<Pod>(client, &namespace, object).await,
                Some("Ingress") => create_one::<Ingress>(client, &namespace, object).await,
                _ => true,
            }
        }
    })
    .buffer_unordered(32)
    .filter(|ok| futures::future::ready(*ok))
    .count()
    .await
}

/// A field of `/proc/<pid>/status` in KiB (`VmHWM:` peak resident,
/// `VmRSS:` resident now): the kernel's count, not the process's own.
pub fn memory_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix(field).map(|rest| {
                rest.trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0)
}

/// `haptic controller` as its own process (gate on, no election), killed
/// when dropped.
pub struct ControllerProcess {
    child: Child,
}

impl ControllerProcess {
    pub fn start(dir: &Path, kubeconfig: &Path) -> Self {
        let values = dir.join("values.yaml");
        std::fs::write(
            &values,
            "templateLibraries:\n  base:\n    frontends:\n      http: {bind: \"${POD_IP}:8080\"}\n      healthz: {bind: \"${POD_IP}:8081\"}\n  kubernetesBackends:\n    podReadinessGate: {enabled: true}\n",
        )
        .expect("values");
        let token = dir.join("token");
        std::fs::write(&token, AGENT_TOKEN).expect("token");
        let mut command = Command::new(haptic_bin());
        // `HAPTIC_CONTROLLER_HEAPTRACK=<file>` records the controller's heap
        // with Debian's heaptrack (its preload library on this process only,
        // not on the bench or the HAProxy pods); read it with
        // `heaptrack_interpret < <file> | zstd > p.zst; heaptrack_print p.zst`.
        if let Some(raw) = std::env::var_os("HAPTIC_CONTROLLER_HEAPTRACK") {
            command
                .env("LD_PRELOAD", "/usr/lib/heaptrack/libheaptrack_preload.so")
                .env("DUMP_HEAPTRACK_OUTPUT", raw);
        }
        let child = command
            .args([
                "controller",
                "--namespace",
                "haptic",
                "--no-leader-election",
                "--listen",
                CONTROLLER_LISTEN,
            ])
            .arg("--values")
            .arg(&values)
            .arg("--agent-token-file")
            .arg(&token)
            .env("KUBECONFIG", kubeconfig)
            .env("HAPTIC_LOG", "warn")
            // As the chart runs it (controller-deployment.yaml).
            .env("MALLOC_ARENA_MAX", "1")
            .stdout(Stdio::null())
            .spawn()
            .expect("haptic controller starts");
        Self { child }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak and current resident memory, MiB.
    pub fn memory_mib(&self) -> (u64, u64) {
        (
            memory_kib(self.pid(), "VmHWM:") / 1024,
            memory_kib(self.pid(), "VmRSS:") / 1024,
        )
    }

    /// Its `/metrics` text, or why not.
    pub async fn metrics(&self) -> Result<String, String> {
        haptic_testbed::http::get(
            CONTROLLER_LISTEN.parse().map_err(|e| format!("{e}"))?,
            None,
            "/metrics",
            &[],
            Duration::from_secs(2),
        )
        .await
        .map(|response| response.body)
        .map_err(|error| error.to_string())
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every HAProxy pod's workers all run one id other than
/// `previous` (and not the bootstrap one); returns it.
pub async fn converged_on_new(
    installation: &Installation,
    previous: Option<&str>,
    timeout: Duration,
) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let mut ids = Vec::new();
        for proxy in &installation.proxies {
            ids.push(
                proxy
                    .agent()
                    .state()
                    .await
                    .ok()
                    .and_then(|state| state.converged),
            );
        }
        if let Some(Some(first)) = ids.first()
            && first != "bootstrap"
            && Some(first.as_str()) != previous
            && ids.iter().all(|id| id.as_deref() == Some(first))
        {
            return Some(first.clone());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// Pods in `namespaces` whose gate condition the API server holds True.
pub async fn gates_set(client: &kube::Client, namespaces: &[String]) -> usize {
    let mut set = 0;
    for namespace in namespaces {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let Ok(list) = pods.list(&Default::default()).await else {
            continue;
        };
        set += list
            .items
            .iter()
            .filter(|pod| {
                pod.status
                    .as_ref()
                    .and_then(|status| status.conditions.as_ref())
                    .is_some_and(|conditions| {
                        conditions
                            .iter()
                            .any(|c| c.type_ == GATE && c.status == "True")
                    })
            })
            .count();
    }
    set
}

/// Waits until `expected` gate conditions are True, or `timeout`; returns
/// how many were and how long it took.
pub async fn await_gates(
    client: &kube::Client,
    namespaces: &[String],
    expected: usize,
    timeout: Duration,
) -> (usize, Duration) {
    let started = Instant::now();
    loop {
        let set = gates_set(client, namespaces).await;
        if set >= expected || started.elapsed() > timeout {
            return (set, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Writes a new `PodScheduled` condition message into the status of every
/// pod in `namespaces` (32 writes in flight), as a scheduler retrying
/// unschedulable pods does: status churn on pods the gate library watches
/// that changes nothing it renders. A strategic merge keeps the other
/// conditions (the gate's among them). Returns how many writes the API
/// server took.
pub async fn churn_pod_status(client: &kube::Client, namespaces: &[String], round: usize) -> usize {
    let mut names = Vec::new();
    for namespace in namespaces {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        match pods.list(&Default::default()).await {
            Ok(list) => names.extend(
                list.items
                    .into_iter()
                    .filter_map(|pod| pod.metadata.name)
                    .map(|name| (namespace.clone(), name)),
            ),
            Err(error) => eprintln!("listing the pods of {namespace}: {error}"),
        }
    }
    let patch = json!({"status": {"conditions": [{
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": format!("churn round {round}: 0/1 nodes are available"),
    }]}});
    futures::stream::iter(names)
        .map(|(namespace, name)| {
            let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
            let patch = patch.clone();
            async move {
                pods.patch_status(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Strategic(patch),
                )
                .await
                .map_err(|error| eprintln!("churning {namespace}/{name}: {error}"))
                .is_ok()
            }
        })
        .buffer_unordered(32)
        .filter(|ok| futures::future::ready(*ok))
        .count()
        .await
}

/// The lines of a `/metrics` text whose names start with one of `prefixes`.
pub fn metric_lines<'a>(metrics: &'a str, prefixes: &[&str]) -> Vec<&'a str> {
    metrics
        .lines()
        .filter(|line| prefixes.iter().any(|prefix| line.starts_with(prefix)))
        .collect()
}

/// Changes the host of Ingress `name`'s first rule (a server-side apply
/// that takes the rules over), as a user editing it would; returns when the
/// change was sent.
pub async fn change_host(ingresses: &Api<Ingress>, name: &str, host: &str) -> Instant {
    let mut ingress = ingresses.get(name).await.expect("the Ingress to change");
    if let Some(rule) = ingress
        .spec
        .as_mut()
        .and_then(|spec| spec.rules.as_mut())
        .and_then(|rules| rules.first_mut())
    {
        rule.host = Some(host.to_owned());
    }
    ingress.metadata.managed_fields = None;
    let sent = Instant::now();
    ingresses
        .patch(
            name,
            &kube::api::PatchParams::apply("bench").force(),
            &kube::api::Patch::Apply(&ingress),
        )
        .await
        .expect("the Ingress change");
    sent
}

/// The endpoints the cluster's slices mark ready: the pods the gate library
/// routes to and sets the gate on.
pub fn ready_endpoints(cluster: &Cluster) -> usize {
    cluster
        .objects()
        .filter(|object| object["kind"] == "EndpointSlice")
        .flat_map(|slice| slice["endpoints"].as_array().cloned().unwrap_or_default())
        .filter(|endpoint| endpoint["conditions"]["ready"] == true)
        .count()
}

/// Resident memory of `pid` by mapping (`/proc/<pid>/smaps`): the binary's
/// own pages, each library file, `[heap]`, `[anon]` (other allocator
/// arenas, wasm linear memories and compiled code, thread stacks); in KiB,
/// largest first.
pub fn resident_by_mapping(pid: u32) -> Vec<(String, u64)> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut by_mapping: std::collections::BTreeMap<String, u64> = Default::default();
    let mut current = String::new();
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let is_header = fields
            .first()
            .is_some_and(|range| range.contains('-') && !range.ends_with(':'));
        if is_header {
            current = fields
                .get(5)
                .map_or("[anon]", |path| path)
                .rsplit('/')
                .next()
                .unwrap_or("[anon]")
                .to_owned();
        } else if let ["Rss:", kib, "kB"] = fields.as_slice() {
            *by_mapping.entry(current.clone()).or_default() += kib.parse::<u64>().unwrap_or(0);
        }
    }
    let mut sorted: Vec<(String, u64)> = by_mapping.into_iter().collect();
    sorted.sort_by_key(|(_, kib)| std::cmp::Reverse(*kib));
    sorted
}

/// The largest parts of [`resident_by_mapping`], one line.
pub fn resident_breakdown(pid: u32) -> String {
    resident_by_mapping(pid)
        .into_iter()
        .take(5)
        .map(|(mapping, kib)| format!("{mapping} {} MiB", kib / 1024))
        .collect::<Vec<_>>()
        .join(", ")
}

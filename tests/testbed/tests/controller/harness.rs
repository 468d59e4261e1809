//! A whole installation on the test bed's real node: the real apiserver,
//! controller manager, scheduler, kubelet and kube-proxy, two HAProxy pods
//! (`haptic haproxy` + `haptic agent`, containers of the image `make image`
//! built), an echo Deployment behind a Service and an Ingress, and the
//! controller running in this process on the same render core and deploy
//! path as `haptic controller`. The test process reaches every pod on its
//! own address on the bed's bridge.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use haptic::controller::proxies::ProxySettings;
use haptic::controller::{self, FleetSettings, State};
use haptic::engine::{self, Engine};
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::protocol::AgentClient;
use haptic::values::Values;
pub use haptic_testbed::app::{GATE, ingress};
use haptic_testbed::app::{WebApp, create_web_app};
use haptic_testbed::cluster as bed;
use haptic_testbed::http;
use haptic_testbed::node::{self, HAPTIC_IMAGE, NodeBed};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::oneshot;

pub const HOST: &str = "web.example.com";
pub const PROXY_NAMESPACE: &str = "haptic";
pub const APP_NAMESPACE: &str = "shop";
/// The agents' bearer token (a Secret mounted into every agent).
pub const AGENT_TOKEN: &str = "e2e-agent-token-0123456789abcdef";

/// The image's user and group (`USER` in image/rootfs.sh): the HAProxy
/// pods' configuration directory must be theirs to write.
pub const IMAGE_USER: u32 = 65532;

/// Runs a scenario on a runtime of its own (two workers, as the machine has
/// two cores), with the bed's logging.
pub fn run<F: std::future::Future>(scenario: F) -> F::Output {
    bed::init_tracing();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(scenario)
}

/// One HAProxy pod.
#[derive(Debug, Clone)]
pub struct Proxy {
    pub name: String,
    pub ip: Ipv4Addr,
    /// Its configuration directory (a hostPath, so the test reads bundles and
    /// reaches the master CLI's socket from the host).
    pub dir: PathBuf,
}

impl Proxy {
    pub fn http(&self) -> SocketAddr {
        SocketAddr::from((self.ip, 8080))
    }

    pub fn agent(&self) -> AgentClient {
        AgentClient::new(
            format!("http://{}:8450", self.ip),
            Some(AGENT_TOKEN.to_owned()),
            None,
            Duration::from_secs(5),
        )
        .expect("agent client")
    }

    /// Its HAProxy's master CLI (`haptic haproxy`'s default, in the config dir).
    pub fn master_socket(&self) -> PathBuf {
        self.dir.join("master.sock")
    }
}

/// The controller running in this process.
pub struct RunningController {
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub state: Arc<State>,
}

impl RunningController {
    /// Ends the controller as a crash would: every task gone at once, the
    /// Lease neither renewed nor released.
    pub async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match tokio::time::timeout(Duration::from_secs(10), &mut self.task).await {
            Ok(Ok(Ok(()))) => {}
            other => panic!("the controller did not stop cleanly: {other:?}"),
        }
    }
}

/// Everything a scenario needs.
pub struct Installation {
    pub bed: NodeBed,
    pub proxies: Vec<Proxy>,
    pub values: Values,
    /// Custom libraries (.wasm) the controller loads besides the bundled ones.
    pub libraries: Vec<PathBuf>,
    _dir: tempfile::TempDir,
}

/// The values the bed runs with: the bundled libraries' defaults (HAProxy
/// binds `:8080`, its health check `:8081`), the gate on or off.
pub fn values(gate: bool) -> Values {
    Values::from_value(
        json!({"templateLibraries": {
            "kubernetesBackends": {"podReadinessGate": {"enabled": gate}},
        }}),
        "the test's values",
    )
    .expect("values")
}

impl Installation {
    /// The bed, two HAProxy pods and the app (`replicas`, gated or not);
    /// the controller is started separately.
    pub async fn start(gate: bool, proxies: usize) -> Self {
        assert!(
            NodeBed::has_haptic_image(),
            "haptic's image is not built: run `make image` (IMAGE_PROFILE=dev is enough)"
        );
        let bed = NodeBed::start().await.expect("the real node starts");
        let client = bed.client();
        bed::namespace(&client, PROXY_NAMESPACE)
            .await
            .expect("namespace");
        bed::namespace(&client, APP_NAMESPACE)
            .await
            .expect("namespace");
        bed::create::<k8s_openapi::api::core::v1::Secret>(
            &client,
            PROXY_NAMESPACE,
            json!({"metadata": {"name": "agent-token"}, "stringData": {"token": AGENT_TOKEN}}),
        )
        .await
        .expect("token Secret");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut installation = Self {
            bed,
            proxies: Vec::new(),
            values: values(gate),
            libraries: Vec::new(),
            _dir: dir,
        };
        for index in 0..proxies {
            installation.add_proxy(index).await;
        }
        installation.create_app(gate).await;
        installation
    }

    /// [`Self::start`], the controller started on it, every HAProxy pod
    /// routing the app and, when gated, the app pod's gate set (HAProxy
    /// routes a moment before the gate is written: a scenario that looked
    /// for a pod still held would find that one).
    pub async fn serving(gate: bool, proxies: usize) -> (Self, RunningController) {
        let installation = Self::start(gate, proxies).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;
        if gate {
            installation.wait_gates_set().await;
        }
        (installation, controller)
    }

    /// Waits until every web pod's gate condition is True and the kubelet
    /// has made the pod Ready on it (a moment later).
    pub async fn wait_gates_set(&self) {
        let pods: Api<Pod> = Api::namespaced(self.client(), APP_NAMESPACE);
        bed::wait_for("every web pod's gate", Duration::from_secs(60), || async {
            let list = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .map_err(|e| e.to_string())?;
            let serving = |pod: &Pod| {
                gate_status(pod) == Some("True")
                    && pod
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                        .is_some_and(|c| c.status == "True")
            };
            if !list.items.is_empty() && list.items.iter().all(serving) {
                Ok(())
            } else {
                Err("not yet".to_owned())
            }
        })
        .await
        .expect("gates set");
    }

    pub fn client(&self) -> kube::Client {
        self.bed.client()
    }

    /// Where HAProxy pod `haproxy-<index>` keeps its configuration (a
    /// hostPath), so a test can prepare it before [`Self::add_proxy`].
    pub fn proxy_dir(&self, index: usize) -> PathBuf {
        self._dir.path().join(format!("haproxy-{index}"))
    }

    /// Creates HAProxy pod `haproxy-<index>` and waits for its IP.
    pub async fn add_proxy(&mut self, index: usize) -> Proxy {
        let name = format!("haproxy-{index}");
        let dir = self.proxy_dir(index);
        std::fs::create_dir_all(&dir).expect("proxy dir");
        std::os::unix::fs::chown(&dir, Some(IMAGE_USER), Some(IMAGE_USER))
            .expect("the proxy dir given to the image's user");
        // As the chart runs both containers (haproxy-deployment.yaml).
        let env = json!([
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "MALLOC_ARENA_MAX", "value": "1"},
        ]);
        let mount = json!([{"name": "config", "mountPath": "/var/lib/haptic/haproxy"}]);
        bed::create::<Pod>(
            &self.client(),
            PROXY_NAMESPACE,
            json!({
                "metadata": {"name": name, "labels": {"app.kubernetes.io/component": "haproxy"}},
                "spec": {
                    "volumes": [
                        {"name": "config", "hostPath": {"path": dir.to_string_lossy(), "type": "DirectoryOrCreate"}},
                        {"name": "token", "secret": {"secretName": "agent-token"}},
                    ],
                    "containers": [
                        {"name": "haproxy", "image": HAPTIC_IMAGE,
                         "args": ["haproxy", "--config-dir", "/var/lib/haptic/haproxy"],
                         "env": env, "volumeMounts": mount},
                        {"name": "agent", "image": HAPTIC_IMAGE,
                         "args": ["agent", "--config-dir", "/var/lib/haptic/haproxy", "--listen", "$(POD_IP):8450",
                                  "--token-file", "/etc/haptic/agent-token/token"],
                         "env": env,
                         "volumeMounts": [
                             {"name": "config", "mountPath": "/var/lib/haptic/haproxy"},
                             {"name": "token", "mountPath": "/etc/haptic/agent-token", "readOnly": true},
                         ],
                         "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8450}, "periodSeconds": 1}},
                    ],
                }
            }),
        )
        .await
        .expect("HAProxy pod");
        let pods: Api<Pod> = Api::namespaced(self.client(), PROXY_NAMESPACE);
        let ip = bed::wait_for(
            &format!("{name} to have an IP"),
            Duration::from_secs(60),
            || async {
                let pod = pods.get(&name).await.map_err(|e| e.to_string())?;
                pod.status
                    .and_then(|s| s.pod_ip)
                    .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
                    .ok_or_else(|| "no IP yet".to_owned())
            },
        )
        .await
        .expect("HAProxy pod IP");
        let proxy = Proxy { name, ip, dir };
        self.proxies.push(proxy.clone());
        proxy
    }

    async fn create_app(&self, gate: bool) {
        let client = self.client();
        let app = WebApp {
            replicas: 1,
            gated: gate,
        };
        create_web_app(&client, APP_NAMESPACE, app)
            .await
            .expect("the web app");
        Api::<IngressClass>::all(client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({
                    "metadata": {"name": "haptic"},
                    "spec": {"controller": "haproxy-haptic.org/controller"}
                }))
                .expect("IngressClass"),
            )
            .await
            .expect("IngressClass");
        bed::create::<Ingress>(&client, APP_NAMESPACE, ingress("web", HOST, "web"))
            .await
            .expect("Ingress");
    }

    /// Starts the controller (no leader election unless `lease` is given).
    pub async fn start_controller(&self, client: kube::Client) -> RunningController {
        self.start_controller_with(client, "controller-0", None)
            .await
    }

    /// A replica taking part in leader election on a short Lease.
    pub async fn start_replica(&self, identity: &str) -> RunningController {
        self.start_controller_with(self.client(), identity, Some(election(identity)))
            .await
    }

    pub async fn start_controller_with(
        &self,
        client: kube::Client,
        identity: &str,
        election: Option<controller::ElectionSettings>,
    ) -> RunningController {
        let runtime = LibraryRuntime::new(RuntimeConfig {
            cache_dir: std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/haptic")),
            ..RuntimeConfig::default()
        })
        .expect("library runtime");
        let libraries = engine::load_libraries(&runtime, &self.libraries).expect("libraries");
        let engine = Engine::new(libraries, self.values.clone()).expect("engine");
        let settings = controller::Settings {
            identity: identity.into(),
            proxies: ProxySettings {
                namespace: PROXY_NAMESPACE.into(),
                selector: "app.kubernetes.io/component=haproxy".into(),
                scheme: "http",
                agent_port: 8450,
            },
            fleet: FleetSettings {
                token: Some(AGENT_TOKEN.to_owned()),
                timeout: Duration::from_secs(10),
                ..FleetSettings::default()
            },
            election,
            listen: None,
            convergence_wait: Duration::from_secs(10),
            resync: Duration::from_secs(10),
        };
        let state = Arc::new(State::default());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(controller::run_in_cluster(
            client,
            engine,
            settings,
            state.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        RunningController {
            stop: Some(stop),
            task,
            state,
        }
    }

    /// Waits until every HAProxy pod answers `HOST` from a web pod.
    pub async fn wait_routed(&self) {
        for proxy in &self.proxies {
            let addr = proxy.http();
            bed::wait_for(
                &format!("{} to route {HOST}", proxy.name),
                Duration::from_secs(60),
                || async move {
                    let response = http::get(addr, Some(HOST), "/", &[], Duration::from_secs(2))
                        .await
                        .map_err(|e| e.to_string())?;
                    if response.status == 200 && response.body.contains("pod=web-") {
                        Ok(())
                    } else {
                        Err(format!("{} {}", response.status, response.body))
                    }
                },
            )
            .await
            .expect("routed");
        }
    }

    /// The app Deployment's rolling update: how many pods above and below
    /// the one replica a rollout may go.
    pub async fn set_rollout_strategy(&self, max_surge: u32, max_unavailable: u32) {
        Api::<Deployment>::namespaced(self.client(), APP_NAMESPACE)
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"strategy": {"rollingUpdate": {
                    "maxSurge": max_surge, "maxUnavailable": max_unavailable}}}})),
            )
            .await
            .expect("the Deployment's strategy");
    }

    /// `kubectl rollout restart deployment/web`, then waits for the rollout
    /// to finish (one updated, available replica and no other pod).
    pub async fn rollout_restart(&self, round: usize) -> Duration {
        let started = Instant::now();
        self.start_rollout(round).await;
        self.wait_rollout(round).await;
        started.elapsed()
    }

    /// `kubectl rollout restart deployment/web`, without waiting.
    pub async fn start_rollout(&self, round: usize) {
        let deployments: Api<Deployment> = Api::namespaced(self.client(), APP_NAMESPACE);
        deployments
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {
                    "kubectl.kubernetes.io/restartedAt": format!("round-{round}")
                }}}}})),
            )
            .await
            .expect("restart");
    }

    /// Waits for rollout `round` to finish (one updated, available replica
    /// and no other pod).
    pub async fn wait_rollout(&self, round: usize) {
        let deployments: Api<Deployment> = Api::namespaced(self.client(), APP_NAMESPACE);
        let pods: Api<Pod> = Api::namespaced(self.client(), APP_NAMESPACE);
        bed::wait_for(
            &format!("rollout {round} to finish"),
            Duration::from_secs(90),
            || async {
                let deployment = deployments.get("web").await.map_err(|e| e.to_string())?;
                let generation = deployment.metadata.generation.unwrap_or(0);
                let status = deployment.status.unwrap_or_default();
                let pods = pods
                    .list(&ListParams::default().labels("app=web"))
                    .await
                    .map_err(|e| e.to_string())?;
                let done = status.observed_generation.unwrap_or(0) >= generation
                    && status.updated_replicas == Some(1)
                    && status.available_replicas == Some(1)
                    && status.replicas == Some(1)
                    && pods.items.len() == 1;
                if done {
                    Ok(())
                } else {
                    Err(format!("{status:?}, {} pods", pods.items.len()))
                }
            },
        )
        .await
        .expect("rollout finished");
    }

    /// The host pid of a container's main process, for the container id the
    /// kubelet reports in the pod's status: that process and no other.
    pub async fn container_pid(&self, namespace: &str, pod: &str, container: &str) -> i32 {
        self.running_container_pid(namespace, pod, container)
            .await
            .unwrap_or_else(|| panic!("no running container {container} in {namespace}/{pod}"))
    }

    /// [`Self::container_pid`], or `None` while the status names no running
    /// container (say, between a crash and the kubelet's restart).
    pub async fn running_container_pid(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Option<i32> {
        let pod = Api::<Pod>::namespaced(self.client(), namespace)
            .get(pod)
            .await
            .expect("pod");
        let id = pod
            .status?
            .container_statuses?
            .into_iter()
            .find(|c| c.name == container)?
            .container_id?;
        node::container_pid(&id)
    }

    /// Everything a container logged so far, every run of it, from the
    /// kubelet's log files.
    pub async fn container_log(&self, namespace: &str, pod: &str, container: &str) -> String {
        let uid = Api::<Pod>::namespaced(self.client(), namespace)
            .get(pod)
            .await
            .expect("pod")
            .metadata
            .uid
            .unwrap_or_default();
        node::container_log(namespace, pod, &uid, container)
    }

    /// Every container's restart count in the HAProxy and app namespaces,
    /// by `namespace/pod/container`, as the API server has it.
    pub async fn restart_counts(&self) -> std::collections::BTreeMap<String, i32> {
        let mut counts = std::collections::BTreeMap::new();
        for namespace in [PROXY_NAMESPACE, APP_NAMESPACE] {
            let pods = Api::<Pod>::namespaced(self.client(), namespace)
                .list(&ListParams::default())
                .await
                .expect("pods");
            for pod in pods.items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                for container in pod
                    .status
                    .and_then(|s| s.container_statuses)
                    .unwrap_or_default()
                {
                    counts.insert(
                        format!("{namespace}/{name}/{}", container.name),
                        container.restart_count,
                    );
                }
            }
        }
        counts
    }
}

/// Replica `identity`'s part in leader election, on a short Lease (3 s).
pub fn election(identity: &str) -> controller::ElectionSettings {
    controller::ElectionSettings {
        namespace: PROXY_NAMESPACE.into(),
        lease_name: "haptic-controller".into(),
        identity: identity.into(),
        duration: Duration::from_secs(3),
        grace: Duration::from_secs(1),
    }
}

/// The pod's gate condition status, if present.
pub fn gate_status(pod: &Pod) -> Option<&str> {
    node::gate::condition(pod, GATE)
}

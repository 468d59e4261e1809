//! The faults the scenarios inject, and what they wait for around them.
//!
//! - [`Partition`]: packets between the test process and one TCP endpoint
//!   dropped by iptables rules in the bed's own chain (the sweep removes it
//!   with the bed). A drop, not a reset: the peer sees a silent path, as in
//!   a real partition, and its connections hang until their timeouts.
//! - [`ApiRelay`]: a TCP relay in front of the API server, so one client's
//!   path to it can be partitioned while every other client's stays up.
//! - [`Tmpfs`]: a small filesystem to fill.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use haptic_testbed::cluster as bed;
use haptic_testbed::node::gate::condition;
use haptic_testbed::node::network;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use super::harness::{APP_NAMESPACE, Installation, PROXY_NAMESPACE, gate_status};

/// The path between the test process and one TCP endpoint, cut until healed
/// or dropped (the bed's [`network::Partition`]).
pub struct Partition(Option<network::Partition>);

impl Partition {
    pub fn cut(endpoint: SocketAddr) -> Self {
        Self(Some(network::Partition::cut(endpoint).unwrap_or_else(
            |error| panic!("cutting the path to {endpoint}: {error}"),
        )))
    }

    /// The path carries packets again.
    pub fn heal(mut self) {
        if let Some(partition) = self.0.take() {
            partition.heal().expect("healing the partition");
        }
    }
}

/// A TCP relay to the API server on a port of its own, on the API server's
/// address (its serving certificate names that address, so TLS through the
/// relay verifies as without it). Runs until the test ends.
pub struct ApiRelay {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl ApiRelay {
    pub async fn start(installation: &Installation) -> Self {
        let upstream = api_server_addr(installation);
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(upstream.ip(), 0))
            .await
            .expect("a port for the API relay");
        let addr = listener.local_addr().expect("the relay's address");
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self { addr, task }
    }

    /// An admin client whose every request goes through the relay.
    pub async fn client(&self, installation: &Installation) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(installation.bed.control_plane().kubeconfig_path())
                .expect("the bed's kubeconfig");
        let mut config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions {
                context: Some(haptic_testbed::control_plane::ADMIN_USER.to_owned()),
                ..Default::default()
            },
        )
        .await
        .expect("the admin's client configuration");
        config.cluster_url = format!("https://{}", self.addr)
            .parse()
            .expect("the relay's URL");
        kube::Client::try_from(config).expect("a client through the relay")
    }
}

impl Drop for ApiRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The API server's `ip:port`, from the bed's server URL.
fn api_server_addr(installation: &Installation) -> SocketAddr {
    let url = installation.bed.control_plane().server_url();
    url.strip_prefix("https://")
        .and_then(|rest| rest.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("the API server URL {url} is https://<ip>:<port>"))
}

/// A pod's agent endpoint (`<pod IP>:8450`).
pub fn agent_endpoint(ip: Ipv4Addr) -> SocketAddr {
    SocketAddr::from((ip, 8450))
}

/// A tmpfs mounted over a directory, unmounted when dropped.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts it, owned by `uid` (the container's user must write there).
    pub fn mount(dir: &Path, size: &str, uid: u32) -> Self {
        std::fs::create_dir_all(dir).expect("mount point");
        let options = format!("size={size},uid={uid},gid={uid},mode=0755");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(dir)
            .status()
            .expect("mount");
        assert!(status.success(), "mounting a tmpfs at {}", dir.display());
        Self(dir.to_path_buf())
    }

    /// Fills the filesystem with one file; returns its path.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut file = std::fs::File::create(&path).expect("filler");
        let chunk = vec![0u8; 4096];
        while file.write_all(&chunk).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// When a watch first saw each web pod Ready (the condition's own
/// timestamp has a one-second resolution).
pub struct ReadyTimes {
    seen: std::sync::Arc<std::sync::Mutex<Vec<Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadyTimes {
    pub async fn watch(installation: &Installation) -> Self {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (listed, is_listed) = tokio::sync::oneshot::channel();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut listed = Some(listed);
                let mut ready = std::collections::BTreeSet::new();
                let stream =
                    watcher(pods, watcher::Config::default().labels("app=web")).default_backoff();
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    let pod = match event {
                        Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                        Ok(watcher::Event::InitDone) => {
                            if let Some(listed) = listed.take() {
                                let _ = listed.send(());
                            }
                            continue;
                        }
                        _ => continue,
                    };
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    if condition(&pod, "Ready") == Some("True")
                        && ready.insert(name)
                        && let Ok(mut seen) = seen.lock()
                    {
                        seen.push(Instant::now());
                    }
                }
            })
        };
        tokio::time::timeout(Duration::from_secs(30), is_listed)
            .await
            .expect("the Ready watch lists within 30 s")
            .expect("the Ready watch runs");
        Self { seen, task }
    }

    /// The first pod seen Ready at or after `from` and before `to`.
    pub fn first_within(&self, from: Instant, to: Option<Instant>) -> Option<Instant> {
        let seen = self.seen.lock().ok()?;
        seen.iter()
            .copied()
            .filter(|at| *at >= from && to.is_none_or(|to| *at < to))
            .min()
    }
}

impl Drop for ReadyTimes {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits for the rollout's new web pod (a pod of the Deployment's newest
/// ReplicaSet) to have its containers ready; returns its name. Whether the
/// gate holds it is for the caller to assert: a gate set too early must fail
/// there, with the fault named, not here as a pod never found. (An old pod
/// is never taken for it: the kubelet reflects a gate in `Ready` only a
/// moment after it is written, so "containers ready, pod not" matched the
/// old pod once.)
pub async fn new_pod_held(installation: &Installation) -> String {
    let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
    let sets: Api<ReplicaSet> = Api::namespaced(installation.client(), APP_NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(installation.client(), APP_NAMESPACE);
    bed::wait_for(
        "the new pod's containers to be ready",
        Duration::from_secs(60),
        || async {
            // Once the Deployment controller has seen the rollout, the
            // newest ReplicaSet is the rollout's.
            let deployment = deployments.get("web").await.map_err(|e| e.to_string())?;
            let observed = deployment.status.and_then(|s| s.observed_generation);
            if observed < deployment.metadata.generation {
                return Err("the Deployment controller has not seen the rollout yet".to_owned());
            }
            let newest = sets
                .list(&ListParams::default().labels("app=web"))
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .max_by_key(revision)
                .ok_or("no ReplicaSet yet")?;
            let hash = newest
                .metadata
                .labels
                .unwrap_or_default()
                .remove("pod-template-hash")
                .ok_or("the newest ReplicaSet has no pod-template-hash")?;
            let list = pods
                .list(&ListParams::default().labels(&format!("app=web,pod-template-hash={hash}")))
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .into_iter()
                .find(|pod| condition(pod, "ContainersReady") == Some("True"))
                .and_then(|pod| pod.metadata.name)
                .ok_or_else(|| {
                    format!("no pod of ReplicaSet hash {hash} with its containers ready")
                })
        },
    )
    .await
    .expect("a new pod")
}

/// A ReplicaSet's revision in its Deployment's history.
fn revision(set: &ReplicaSet) -> u64 {
    set.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("deployment.kubernetes.io/revision"))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

/// How long a fault holds a gate: longer than the fleet's 10 s push
/// timeout, so the controller has retried at least once. (A controller that
/// counted an unanswered pod as done only after its last attempt, 3 x 10 s,
/// and the convergence wait would pass this hold: the order checker, which
/// asks HAProxy when the gate is set, is what catches that.)
pub const HOLD: Duration = Duration::from_secs(12);

/// Asserts for `how_long` that web pod `pod` has no gate condition, because
/// of `why`.
pub async fn assert_gate_held(
    installation: &Installation,
    pod: &str,
    how_long: Duration,
    why: &str,
) {
    let pods: Api<Pod> = Api::namespaced(installation.client(), APP_NAMESPACE);
    let held = Instant::now();
    while held.elapsed() < how_long {
        let now = pods.get(pod).await.expect("the new pod");
        assert_eq!(
            gate_status(&now),
            None,
            "the gate was set on {pod} {:?} after {why}",
            held.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Everything the agent container of HAProxy pod `name` logged so far.
pub async fn agent_log(installation: &Installation, name: &str) -> String {
    installation
        .container_log(PROXY_NAMESPACE, name, "agent")
        .await
}

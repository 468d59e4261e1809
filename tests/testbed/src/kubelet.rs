//! A process kubelet: runs pods as local processes and writes their status
//! the way kubelet does, so controllers, EndpointSlices and readiness gates
//! behave as on a real cluster.
//!
//! [`Kubelet::start`] registers a Node (Ready, with a Lease heartbeat), binds
//! pending pods whose `nodeSelector` it matches (no scheduler runs), and runs
//! one [`pod_worker`] per pod bound to it. Several kubelets with distinct
//! [`KubeletConfig::node_index`] make a multi-node bed:
//!
//! - **Network** ([`network`]): every pod gets its own address from
//!   10.244.0.0/16 inside a private network namespace, reported as
//!   `status.podIP(s)`; node N owns 10.244.(16N).0/20 and is its `.1`
//!   (`hostIP`; `hostNetwork` pods share it). Loopback addresses
//!   were the first idea, but the apiserver rejects 127.0.0.0/8 in
//!   EndpointSlices. Programs bind `$HAPTIC_TESTBED_POD_IP` instead of
//!   0.0.0.0 because all pods share the namespace.
//! - **Images** ([`Program`]): an image name maps to a local program; a
//!   container's `command`/`args` replace the program's entrypoint/arguments
//!   as they would an image's; a `command` naming the program's file, alone
//!   or as a path (`/usr/local/bin/haptic`), runs the program. Built in by
//!   convention: [`ECHO_IMAGE`].
//! - **Environment** ([`env`]): `env` (values, `$(VAR)`, fieldRef,
//!   configMapKeyRef, secretKeyRef) and `envFrom`, plus what a runtime adds:
//!   `HOSTNAME` (the pod name) and `KUBERNETES_SERVICE_HOST/PORT` pointing at
//!   the real apiserver address (no kube-proxy translates the Service IP).
//! - **Volumes** ([`volumes`]): ConfigMap, Secret, projected (with a
//!   TokenRequest-issued, pod-bound service account token), downwardAPI,
//!   emptyDir and hostPath, bind-mounted at their `mountPath` in a private
//!   mount namespace per container.
//! - **Probes** ([`probe`]): readiness and liveness `httpGet`/`tcpSocket`/
//!   `exec` with kubelet's timing and thresholds; a failed liveness probe
//!   kills the container (SIGTERM, SIGKILL after the grace period; no preStop)
//!   and the restart policy decides what follows. Like
//!   kubelet, a pod sync runs an extra probe at once for a running container
//!   not yet ready (`prober_manager.go`, `manualTriggerCh`), and a started
//!   container causes a sync at the next PLEG relist tick (every second from
//!   kubelet start), so a pod whose app listens quickly is Ready after 0-1 s
//!   rather than a full period.
//! - **Status** ([`status`]): phase, container statuses, and the conditions
//!   kubelet owns, applied server-side to `pods/status` by field manager
//!   `kubelet`, so readiness-gate conditions written by others are never
//!   overwritten and `Ready` follows them (`ReadinessGatesNotReady`).
//! - **Deletion**: preStop (sleep, httpGet, exec), SIGTERM, probing continues, SIGKILL
//!   at the grace period, terminal status, final delete with UID precondition.
//!   Exec hooks and probes run in a PID namespace of their own
//!   (`container::exec_command`): a `kill 1` there never reaches the
//!   machine's PID 1, nor the container's main process.
//! - **Logs**: `<state_dir>/pods/<uid>/logs/<container>/<restartCount>.log`,
//!   kept after the pod is gone (until the state directory is removed).
//!
//! Init containers run in order to completion before the app containers
//! (`initContainerStatuses`, `Initialized`/`ContainersNotInitialized`).
//!
//! Not done: sidecar init containers (`restartPolicy: Always`; such pods wait
//! with `CreateContainerConfigError`), startup probes,
//! affinity/taints (only `nodeSelector`), resource limits, Service
//! environment variables, ConfigMap/token refresh, `kubectl logs/exec`,
//! securityContext (containers run as the test's user), a PID namespace per
//! container (so a preStop `kill -USR1 1`, HAProxy's soft stop in the chart,
//! does nothing and the hook lasts until the grace period).

pub mod bed;
pub mod container;
pub mod env;
pub mod network;
pub mod node;
pub mod probe;
pub mod status;
pub mod volumes;

mod binder;
mod pod_worker;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use network::{NODE_IP, POD_CIDR, PodNetwork, node_ip};

/// The image the test bed's echo server answers to (see `src/bin/echo-server.rs`).
pub const ECHO_IMAGE: &str = "haptic.test/echo";

/// Errors starting the kubelet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Node could not be registered.
    #[error(transparent)]
    Node(#[from] node::Error),
    /// The state directory could not be created.
    #[error("creating the kubelet state directory {path}: {source}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The node's address is not local here: the kubelet runs outside the pod network.
    #[error(
        "the node address {ip} is not local in this network namespace ({source}); start the kubelet inside a PodNetwork (kubelet::bed::in_pod_network or PodNetwork::block_on)"
    )]
    NotInPodNetwork {
        /// The node address.
        ip: std::net::Ipv4Addr,
        /// The bind error.
        #[source]
        source: std::io::Error,
    },
    /// The apiserver URL given for `KUBERNETES_SERVICE_HOST` is not `scheme://host:port`.
    #[error("apiserver URL {0:?} is not of the form https://HOST:PORT")]
    ApiServerUrl(String),
}

/// A local program standing in for an image.
#[derive(Clone, Debug)]
pub struct Program {
    /// The executable (the image's entrypoint).
    pub path: PathBuf,
    /// Default arguments (the image's CMD), replaced by a container's `args`.
    pub args: Vec<String>,
    /// Environment the image would set; the pod spec's `env` overrides it.
    pub env: Vec<(String, String)>,
}

impl Program {
    /// A program with no default arguments or environment.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// Sets the default arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an environment variable the image would set.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
}

/// How the kubelet runs.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// The Node's name.
    pub node_name: String,
    /// Image name (without tag or digest, or exact) -> program.
    pub programs: HashMap<String, Program>,
    /// Where pod volumes and logs go; `None`: a temporary directory removed on drop.
    pub state_dir: Option<PathBuf>,
    /// The apiserver's host and port, given to containers as
    /// `KUBERNETES_SERVICE_HOST/PORT` (in-cluster clients connect there).
    pub api_server: Option<(String, u16)>,
    /// Bind pods that have no node and whose `nodeSelector` matches this
    /// node's labels (stand in for the scheduler).
    pub bind_pending_pods: bool,
    /// Which slice of the pod network this node owns (0..=15; see
    /// [`network::node_ip`]). Kubelets sharing a bed need distinct indexes.
    pub node_index: u8,
    /// Labels for the Node besides kubelet's own (`kubernetes.io/hostname`, ...).
    pub labels: BTreeMap<String, String>,
}

impl KubeletConfig {
    /// A kubelet for `node_name` with an empty program table, binding pending pods.
    pub fn new(node_name: impl Into<String>) -> Self {
        Self {
            node_name: node_name.into(),
            programs: HashMap::new(),
            state_dir: None,
            api_server: None,
            bind_pending_pods: true,
            node_index: 0,
            labels: BTreeMap::new(),
        }
    }

    /// Makes this node number `index` (0..=15) of the bed, with its own IP range.
    pub fn node_index(mut self, index: u8) -> Self {
        self.node_index = index;
        self
    }

    /// Adds a Node label (for `nodeSelector`s).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Maps `image` to `program`.
    pub fn program(mut self, image: impl Into<String>, program: Program) -> Self {
        self.programs.insert(image.into(), program);
        self
    }

    /// Sets `KUBERNETES_SERVICE_HOST/PORT` from the apiserver URL (`https://127.0.0.1:6443`).
    pub fn api_server_url(mut self, url: &str) -> Result<Self, Error> {
        let bad = || Error::ApiServerUrl(url.to_string());
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let authority = rest.split('/').next().unwrap_or_default();
        let (host, port) = authority.rsplit_once(':').ok_or_else(bad)?;
        let port = port.parse().map_err(|_| bad())?;
        self.api_server = Some((host.trim_matches(['[', ']']).to_string(), port));
        Ok(self)
    }

    pub(crate) fn program_for(&self, image: &str) -> Option<&Program> {
        self.programs
            .get(image)
            .or_else(|| self.programs.get(image_name(image)))
    }

    pub(crate) fn known_images(&self) -> String {
        let mut names: Vec<&str> = self.programs.keys().map(String::as_str).collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// `<image>@sha256:<hash of the program path>`, stable per program.
    pub(crate) fn image_id(&self, image: &str) -> String {
        let path = self
            .program_for(image)
            .map(|p| p.path.to_string_lossy().into_owned())
            .unwrap_or_default();
        let digest = Sha256::digest(path.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}@sha256:{hex}", image_name(image))
    }
}

/// The image without tag or digest: `reg:5000/a/b:1@sha256:..` -> `reg:5000/a/b`.
fn image_name(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    match image.rfind(':') {
        Some(i) if !image[i..].contains('/') => &image[..i],
        _ => image,
    }
}

/// State the kubelet's tasks share.
pub(crate) struct Shared {
    pub(crate) client: Client,
    pub(crate) config: KubeletConfig,
    pub(crate) ips: network::IpAllocator,
    pub(crate) node_ip: std::net::Ipv4Addr,
    pub(crate) state_dir: PathBuf,
    pub(crate) processes: container::Registry,
    /// When the kubelet started: the phase of its PLEG relist ticks.
    pub(crate) epoch: tokio::time::Instant,
}

/// A running kubelet; stops (killing every pod process) when dropped.
pub struct Kubelet {
    task: tokio::task::JoinHandle<()>,
    processes: container::Registry,
    node_name: String,
    state_dir: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet")
            .field("node_name", &self.node_name)
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

impl Kubelet {
    /// Registers the node and starts serving pods on the current runtime.
    pub async fn start(client: Client, config: KubeletConfig) -> Result<Self, Error> {
        let (state_dir, temp) = match &config.state_dir {
            Some(dir) => (dir.clone(), None),
            None => {
                let t = tempfile::Builder::new()
                    .prefix("process-kubelet-")
                    .tempdir()
                    .map_err(|source| Error::StateDir {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        std::fs::create_dir_all(&state_dir).map_err(|source| Error::StateDir {
            path: state_dir.clone(),
            source,
        })?;
        let node_name = config.node_name.clone();
        let node_ip = network::node_ip(config.node_index);
        // Pods bind addresses next to the node's; fail now rather than crash-loop every pod.
        std::net::TcpListener::bind((node_ip, 0)).map_err(|source| Error::NotInPodNetwork {
            ip: node_ip,
            source,
        })?;
        let registration = node::register(&client, &node_name, node_ip, &config.labels).await?;
        let processes = container::Registry::default();
        let shared = Arc::new(Shared {
            client: client.clone(),
            ips: network::IpAllocator::new(config.node_index),
            config,
            node_ip,
            state_dir: state_dir.clone(),
            processes: processes.clone(),
            epoch: tokio::time::Instant::now(),
        });
        let task = tokio::spawn(run(shared, registration));
        tracing::info!(node = %node_name, state_dir = %state_dir.display(), "process kubelet started");
        Ok(Self {
            task,
            processes,
            node_name,
            state_dir,
            _temp: temp,
        })
    }

    /// The Node's name.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// Where pod volumes and logs are.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The log of a container instance (`restart` is its restart count).
    pub fn log_path(&self, pod_uid: &str, container: &str, restart: u32) -> PathBuf {
        self.state_dir
            .join("pods")
            .join(pod_uid)
            .join("logs")
            .join(container)
            .join(format!("{restart}.log"))
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
        self.processes.kill_all();
    }
}

async fn run(shared: Arc<Shared>, registration: node::Registration) {
    let mut background = JoinSet::new();
    let node = shared.config.node_name.clone();
    background.spawn(node::heartbeat(
        shared.client.clone(),
        node.clone(),
        registration,
    ));
    if shared.config.bind_pending_pods {
        let labels = node::node_labels(&node, &shared.config.labels);
        background.spawn(binder::run(shared.client.clone(), node.clone(), labels));
    }
    let pods: Api<Pod> = Api::all(shared.client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut stream = watcher(pods, config).default_backoff().boxed();
    let mut workers: HashMap<String, watch::Sender<Option<Arc<Pod>>>> = HashMap::new();
    let mut running = JoinSet::new();
    let mut listed: Option<Vec<String>> = None;
    loop {
        tokio::select! {
            Some(done) = running.join_next() => {
                if let Ok(uid) = done {
                    workers.remove(&uid);
                }
            }
            event = stream.try_next() => match event {
                Ok(Some(watcher::Event::Init)) => listed = Some(Vec::new()),
                Ok(Some(watcher::Event::InitApply(pod))) => {
                    if let (Some(l), Some(uid)) = (listed.as_mut(), pod.metadata.uid.clone()) {
                        l.push(uid);
                    }
                    deliver(&shared, &mut workers, &mut running, pod);
                }
                Ok(Some(watcher::Event::InitDone)) => {
                    // Pods that vanished while the watch was down.
                    let seen = listed.take().unwrap_or_default();
                    workers.retain(|uid, tx| {
                        let keep = seen.contains(uid);
                        if !keep {
                            let _ = tx.send(None);
                        }
                        keep
                    });
                }
                Ok(Some(watcher::Event::Apply(pod))) => deliver(&shared, &mut workers, &mut running, pod),
                Ok(Some(watcher::Event::Delete(pod))) => {
                    if let Some(tx) = pod.metadata.uid.as_ref().and_then(|u| workers.remove(u)) {
                        let _ = tx.send(None);
                    }
                }
                Ok(None) => return,
                Err(e) => tracing::warn!(node, "watching this node's pods: {e}"),
            },
        }
    }
}

fn deliver(
    shared: &Arc<Shared>,
    workers: &mut HashMap<String, watch::Sender<Option<Arc<Pod>>>>,
    running: &mut JoinSet<String>,
    pod: Pod,
) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    let pod = Arc::new(pod);
    if let Some(tx) = workers.get(&uid) {
        let _ = tx.send(Some(pod));
        return;
    }
    let (tx, rx) = watch::channel(Some(pod));
    workers.insert(uid, tx);
    running.spawn(pod_worker::run(shared.clone(), rx));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_drop_tag_and_digest_but_not_a_registry_port() {
        assert_eq!(image_name("haptic.test/echo:1.2"), "haptic.test/echo");
        assert_eq!(image_name("reg:5000/a/b"), "reg:5000/a/b");
        assert_eq!(image_name("reg:5000/a/b:v1@sha256:00"), "reg:5000/a/b");
    }

    #[test]
    fn programs_are_found_by_exact_image_or_by_name() {
        let config = KubeletConfig::new("n")
            .program(ECHO_IMAGE, Program::new("/bin/echo-server"))
            .program("x:special", Program::new("/bin/x"));
        assert!(config.program_for("haptic.test/echo:v9").is_some());
        assert_eq!(
            config.program_for("x:special").map(|p| p.path.clone()),
            Some(PathBuf::from("/bin/x"))
        );
        assert!(config.program_for("x:other").is_none());
        assert!(
            config
                .image_id(ECHO_IMAGE)
                .starts_with("haptic.test/echo@sha256:")
        );
    }

    #[test]
    fn the_apiserver_url_becomes_host_and_port() {
        let c = KubeletConfig::new("n")
            .api_server_url("https://127.0.0.1:6443")
            .unwrap();
        assert_eq!(c.api_server, Some(("127.0.0.1".into(), 6443)));
        assert!(
            KubeletConfig::new("n")
                .api_server_url("https://nohost")
                .is_err()
        );
    }
}

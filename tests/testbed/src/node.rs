//! The real node: the bed's control plane and kube-scheduler, plus containerd 1.6 with runc, the
//! real kubelet and kube-proxy v1.35.4, CNI bridge networking and a
//! LoadBalancer allocator. Pods are real containers from locally built
//! images, each with its own network namespace and an address on the bed's
//! bridge that the test process reaches directly.
//!
//! ```no_run
//! use haptic_testbed::node::NodeBed;
//! # async fn f() -> anyhow::Result<()> {
//! let bed = NodeBed::start().await?;
//! // ... create pods with bed.client(), talk to them on their pod IPs ...
//! bed.stop().await;
//! # Ok(()) }
//! ```
//!
//! The recipe and the host facts behind it are in DESIGN.md §5. Needs root.
//! One real node runs at a time on a machine ([`lock`]); everything it
//! leaves on the host is swept when it stops and before the next starts
//! ([`cleanup`]).

mod cleanup;
mod containerd;
pub mod gate;
mod host;
mod images;
mod kube_proxy;
mod kubelet;
mod load_balancer;
mod lock;
pub mod network;
pub mod rollout;
mod scheduler;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;

pub use cleanup::leftovers;
pub use images::{
    ECHO_IMAGE, HAPTIC_IMAGE, MOCK_OIDC_IMAGE, OAUTH2_PROXY_IMAGE, PAUSE_IMAGE, TOOLS_IMAGE,
};
pub use kubelet::NODE_NAME;

use crate::control_plane::process::Component;
use crate::control_plane::{
    ControlPlane, ControlPlaneError, ControlPlaneOptions, TokenUser, files,
};

/// Binaries the node runs besides the control plane's.
const NODE_BINARIES: [&str; 3] = ["kubelet", "kube-proxy", "kube-scheduler"];

/// How long each part may take to come up.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Errors starting the real node.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The control plane did not start, or a node process could not.
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    /// A host tool failed.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and stderr, or why it could not run.
        detail: String,
    },
    /// A file operation failed.
    #[error("could not {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The kubelet or kube-proxy binary is missing.
    #[error(
        "{missing} missing in {dir}; build it with `make testbed-binaries` \
         (tests/testbed/scripts/build-binaries.sh)"
    )]
    BinariesMissing {
        /// The directory searched.
        dir: PathBuf,
        /// The binaries not found.
        missing: String,
    },
    /// The locally built images are missing.
    #[error("node images missing in {dir}: {missing}; build them with `make testbed-images`")]
    ImagesMissing {
        /// The directory searched.
        dir: PathBuf,
        /// The archives not found.
        missing: String,
    },
    /// Too little free memory for the node's tmpfs: its files would push
    /// the host into swapping or the OOM killer, and every scenario would
    /// fail for a reason not its own.
    #[error(
        "the test bed's node keeps its files on a tmpfs at {} and needs {needed_mib} MiB \
         of memory for them ({available_mib} MiB available): stop what uses the memory \
         and run again",
        host::NODE_DIR
    )]
    MemoryShort {
        /// MemAvailable now.
        available_mib: u64,
        /// What a run writes.
        needed_mib: u64,
    },
    /// A part did not come up in time.
    #[error(
        "{what} was not ready after {waited:?}; last seen: {last} (logs in {})",
        host::NODE_DIR
    )]
    NotReady {
        /// What was awaited.
        what: String,
        /// How long.
        waited: Duration,
        /// The last observation.
        last: String,
    },
}

/// A control plane with a real node, stopped and swept on drop.
pub struct NodeBed {
    // Field order is drop order: the node's processes before the control
    // plane, the lock last.
    load_balancer: tokio::task::JoinHandle<()>,
    processes: Vec<Component>,
    control_plane: ControlPlane,
    started_in: Duration,
    _lock: lock::NodeLock,
}

impl std::fmt::Debug for NodeBed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeBed")
            .field("processes", &self.processes)
            .field("control_plane", &self.control_plane)
            .finish_non_exhaustive()
    }
}

impl NodeBed {
    /// Waits for the machine's node lock, sweeps what an earlier bed left,
    /// then starts the bridge, the control plane on it, containerd (with the
    /// bed's images imported), the kubelet, kube-proxy and the LoadBalancer
    /// allocator; returns once the Node is Ready.
    pub async fn start() -> Result<Self, Error> {
        let lock = lock::NodeLock::acquire().await?;
        let began = Instant::now();
        let bin_dir = crate::control_plane::files::find_bin_dir()?;
        let missing: Vec<&str> = NODE_BINARIES
            .into_iter()
            .filter(|b| !bin_dir.join(b).is_file())
            .collect();
        if !missing.is_empty() {
            return Err(Error::BinariesMissing {
                dir: bin_dir,
                missing: missing.join(", "),
            });
        }
        let mut archives = images::archives()?;
        // haptic's own image when `make image` has built it (the chart runs it).
        archives.extend(images::haptic_archive());
        // The Gateway API suite's images when they were built (`make gateway-conformance`).
        archives.extend(images::gateway_archives().unwrap_or_default());
        // The Ingress suite's echoserver when it was built (`make ingress-conformance`).
        archives.extend(images::ingress_archives().unwrap_or_default());
        // oauth2-proxy and the mock OIDC provider when they were built (`make oauth2-images`).
        archives.extend(images::oauth2_archives().unwrap_or_default());
        cleanup::sweep();
        host::mount_node_dir()?;
        let started = Self::start_parts(&bin_dir, &archives).await;
        let (processes, control_plane) = match started {
            Ok(parts) => parts,
            Err(error) => {
                // Keep the logs for the error's reader: the next bed sweeps them.
                cleanup::kill_node_processes();
                return Err(error);
            }
        };
        let load_balancer = tokio::spawn(load_balancer::run(control_plane.admin_client()));
        Ok(Self {
            load_balancer,
            processes,
            control_plane,
            started_in: began.elapsed(),
            _lock: lock,
        })
    }

    async fn start_parts(
        bin_dir: &std::path::Path,
        archives: &[PathBuf],
    ) -> Result<(Vec<Component>, ControlPlane), Error> {
        host::create_dir(&host::node_path("logs"))?;
        network::create()?;
        let options = ControlPlaneOptions {
            users: vec![
                TokenUser::new(kubelet::NODE_USER, &["system:nodes"]),
                TokenUser::new(kube_proxy::PROXY_USER, &[]),
                TokenUser::new(scheduler::SCHEDULER_USER, &[]),
            ],
            apiserver_address: Some(network::GATEWAY.into()),
            service_cidr: Some(network::SERVICE_CIDR.to_owned()),
            // A real cluster runs the v1 Endpoints controller too (deprecated, still on by
            // default in 1.35): the Ingress conformance suite waits on Endpoints.
            extra_controllers: vec!["nodelifecycle".to_owned(), "endpoint".to_owned()],
            ..ControlPlaneOptions::default()
        };
        let control_plane = ControlPlane::start_with(options).await?;
        host::write(
            &host::node_path("cni/net.d/10-haptic-testbed.conflist"),
            &network::cni_config(),
        )?;
        let mut processes = vec![containerd::start(READY_TIMEOUT).await?];
        for archive in archives {
            containerd::import(archive)?;
        }
        let kubeconfig = |user: &str| -> Result<PathBuf, Error> {
            let token = control_plane.token_for_user(user).unwrap_or_default();
            let path = host::node_path(&format!("{}.kubeconfig", user.replace(':', "-")));
            files::write_kubeconfig(
                &path,
                control_plane.server_url(),
                control_plane.ca_cert_path(),
                &[(TokenUser::new(user, &[]), token.to_owned())],
                user,
            )?;
            Ok(path)
        };
        processes.push(kubelet::start(bin_dir, &kubeconfig(kubelet::NODE_USER)?)?);
        processes.push(kube_proxy::start(
            bin_dir,
            &kubeconfig(kube_proxy::PROXY_USER)?,
        )?);
        processes.push(scheduler::start(
            bin_dir,
            &kubeconfig(scheduler::SCHEDULER_USER)?,
        )?);
        wait_node_ready(&control_plane.admin_client(), &mut processes).await?;
        Ok((processes, control_plane))
    }

    /// Whether haptic's image (`make image`) was found and imported.
    pub fn has_haptic_image() -> bool {
        images::haptic_archive().is_some()
    }

    /// Whether the Gateway API conformance suite's images were found and
    /// imported (`make testbed-images` with the suite built).
    pub fn has_gateway_conformance_images() -> bool {
        images::gateway_archives().is_some()
    }

    /// Whether the Ingress conformance suite's echoserver image was found
    /// and imported (`make ingress-conformance-images`).
    pub fn has_ingress_conformance_images() -> bool {
        images::ingress_archives().is_some()
    }

    /// Whether oauth2-proxy's and the mock OIDC provider's images were
    /// found and imported (`make oauth2-images`).
    pub fn has_oauth2_images() -> bool {
        images::oauth2_archives().is_some()
    }

    /// An admin client.
    pub fn client(&self) -> kube::Client {
        self.control_plane.admin_client()
    }

    /// The control plane.
    pub fn control_plane(&self) -> &ControlPlane {
        &self.control_plane
    }

    /// The control plane, to restart its apiserver, say.
    pub fn control_plane_mut(&mut self) -> &mut ControlPlane {
        &mut self.control_plane
    }

    /// How long [`Self::start`] took once it held the lock.
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Fails if a node process (containerd, kubelet, kube-proxy, kube-scheduler) has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        for process in &mut self.processes {
            process.ensure_running()?;
        }
        Ok(())
    }

    /// Stops the node and the control plane and sweeps the host.
    pub async fn stop(mut self) {
        self.stop_parts().await;
    }

    /// Stops the node like [`Self::stop`], then returns what it left on the
    /// host ([`leftovers`]), looked at before the node lock goes: once it
    /// does, the next test's node may be starting, and what it creates is
    /// no leftover of this one.
    pub async fn stop_and_find_leftovers(mut self) -> Vec<String> {
        self.stop_parts().await;
        cleanup::leftovers()
    }

    async fn stop_parts(&mut self) {
        self.load_balancer.abort();
        while let Some(mut process) = self.processes.pop() {
            process.kill().await;
        }
        cleanup::sweep();
    }
}

impl Drop for NodeBed {
    fn drop(&mut self) {
        self.load_balancer.abort();
        for process in self.processes.iter_mut().rev() {
            process.start_kill();
        }
        // Synchronous: a panicking test still leaves a clean host.
        cleanup::sweep();
    }
}

/// Where the kubelet keeps a pod's `emptyDir` volume `volume` on the host
/// (so a test reads, say, the HAProxy master socket a pod created there).
pub fn empty_dir_path(pod_uid: &str, volume: &str) -> PathBuf {
    host::node_path("kubelet/root/pods")
        .join(pod_uid)
        .join("volumes/kubernetes.io~empty-dir")
        .join(volume)
}

/// The host pid of a container's main process (its PID 1), from the
/// container id the pod's status reports (`containerd://<id>`): the pid
/// containerd's shim recorded when it started the container, so a signal
/// reaches that process and no other. `None` once the container is gone.
pub fn container_pid(container_id: &str) -> Option<i32> {
    let id = container_id.strip_prefix("containerd://")?;
    let path = host::node_path("containerd/state/io.containerd.runtime.v2.task/k8s.io")
        .join(id)
        .join("init.pid");
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Everything container `container` of pod `namespace/pod` (uid `uid`)
/// logged, every run of it the kubelet kept in order, as the kubelet wrote
/// it (CRI lines: time, stream, tag, text).
pub fn container_log(namespace: &str, pod: &str, uid: &str, container: &str) -> String {
    let dir = host::node_path("pod-logs")
        .join(format!("{namespace}_{pod}_{uid}"))
        .join(container);
    let mut runs: Vec<(u32, PathBuf)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let run = path.file_stem()?.to_str()?.parse().ok()?;
            Some((run, path))
        })
        .collect();
    runs.sort();
    runs.iter()
        .filter_map(|(_, path)| std::fs::read_to_string(path).ok())
        .collect()
}

/// Polls the Node until its Ready condition is True.
async fn wait_node_ready(client: &kube::Client, processes: &mut [Component]) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let began = Instant::now();
    loop {
        for process in processes.iter_mut() {
            process.ensure_running()?;
        }
        let last = match nodes.get_opt(NODE_NAME).await {
            Ok(Some(node)) => {
                let ready = node
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == "Ready");
                match ready {
                    Some(c) if c.status == "True" => return Ok(()),
                    Some(c) => format!("Ready={} ({})", c.status, c.message.unwrap_or_default()),
                    None => "no Ready condition yet".to_owned(),
                }
            }
            Ok(None) => "not registered yet".to_owned(),
            Err(error) => error.to_string(),
        };
        if began.elapsed() > READY_TIMEOUT {
            return Err(Error::NotReady {
                what: format!("node {NODE_NAME}"),
                waited: began.elapsed(),
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

//! Whether the readiness gate ever leads HAProxy on the real node: a watch
//! on an app's pods that, the first time a pod's gate is seen True, asks
//! every live worker of every HAProxy pod through its master CLI
//! ([`crate::oracle`]) whether it already routes to that pod. The answer is
//! HAProxy's own, never the controller's bookkeeping. Also where those
//! master sockets are on the host.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, ResourceExt as _};

use crate::oracle;

/// The master sockets of the HAProxy pods a selector picks, reached through
/// symlinks in a temporary directory: a pod's `config` emptyDir
/// (`/var/lib/haptic-testbed-node/kubelet/root/pods/<uid>/volumes/...`) is
/// longer than a Unix socket address may be (108 bytes), so connecting by
/// it fails with "path must be shorter than SUN_LEN". The links go with it.
#[derive(Debug)]
pub struct MasterSockets {
    _links: tempfile::TempDir,
    /// Each pod's name and its master socket.
    pub sockets: Vec<(String, PathBuf)>,
}

impl MasterSockets {
    /// The sockets of the pods `selector` picks in `namespace`, as they are
    /// now (a pod created later is not among them).
    pub async fn of(
        client: &kube::Client,
        namespace: &str,
        selector: &str,
    ) -> anyhow::Result<Self> {
        let links = tempfile::Builder::new()
            .prefix("hsock")
            .tempdir_in("/tmp")
            .context("a directory for the master socket links")?;
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let list = pods.list(&ListParams::default().labels(selector)).await?;
        ensure!(!list.items.is_empty(), "no pod {selector} in {namespace}");
        let mut sockets = Vec::new();
        for (index, pod) in list.items.iter().enumerate() {
            let uid = pod.uid().unwrap_or_default();
            let link = links.path().join(index.to_string());
            std::os::unix::fs::symlink(super::empty_dir_path(&uid, "config"), &link).with_context(
                || {
                    format!(
                        "linking {} to {}'s config dir",
                        link.display(),
                        pod.name_any()
                    )
                },
            )?;
            sockets.push((pod.name_any(), link.join("master.sock")));
        }
        Ok(Self {
            _links: links,
            sockets,
        })
    }
}

/// What HAProxy is asked about a pod whose gate turned True.
#[derive(Clone, Debug)]
pub enum Route {
    /// Every worker routes this host (its map entries) to a running server at
    /// the pod's address: Ingress routes.
    Host(String),
    /// Every worker has a running server at the pod's address in this
    /// backend: routes that pick their backend by rule (Gateway API).
    Backend(String),
}

impl Route {
    async fn ask(&self, socket: &Path, ip: &str, port: u16) -> Result<(), String> {
        match self {
            Self::Host(host) => oracle::every_worker_routes(socket, host, ip, port).await,
            Self::Backend(backend) => oracle::every_worker_serves(socket, backend, ip, port).await,
        }
    }
}

/// The status of `pod`'s condition `kind` (a readiness gate's, `Ready`):
/// "True", "False", or `None` while unset.
pub fn condition<'a>(pod: &'a Pod, kind: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.as_str())
}

/// Where a pod's gate is checked against HAProxy.
#[derive(Clone, Debug)]
pub struct GateCheck {
    /// The app's namespace.
    pub namespace: String,
    /// The app's pods.
    pub selector: String,
    /// The readiness gate's condition type.
    pub gate: String,
    /// What every HAProxy worker must route to the pod.
    pub route: Route,
    /// The port HAProxy's server for the pod uses.
    pub port: u16,
    /// Whether the pods whose gate was already True when the watch listed
    /// them are asked about too (a scenario that starts watching once its
    /// first pod is served counts that pod as checked).
    pub listed: bool,
}

/// What a [`GateOrder`] found: the pods whose gate it saw turn True, and
/// each time a worker did not route to such a pod yet.
#[derive(Debug, Default, Clone)]
pub struct GateOrderSeen {
    /// The pods checked, in the order their gates turned True.
    pub checked: Vec<String>,
    /// "gate set on <pod> (<ip>) but <HAProxy pod>: <what HAProxy said>".
    pub violations: Vec<String>,
    /// Errors the pod watch recovered from (it backs off and re-lists).
    pub watch_errors: u64,
}

/// Watches the app's pods; the first time a pod's gate is seen True, asks
/// every live worker of every HAProxy pod whether it routes to the pod.
pub struct GateOrder {
    task: tokio::task::JoinHandle<()>,
    found: Arc<Mutex<GateOrderSeen>>,
}

impl GateOrder {
    /// Starts the watch; returns once it has listed the pods that exist
    /// (whose gates were set before and are not checked).
    pub async fn start(
        client: &kube::Client,
        check: GateCheck,
        proxies: Vec<(String, PathBuf)>,
    ) -> anyhow::Result<Self> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &check.namespace);
        let found = Arc::new(Mutex::new(GateOrderSeen::default()));
        let (listed, is_listed) = tokio::sync::oneshot::channel();
        let record = found.clone();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut seen = BTreeSet::new();
            let config = watcher::Config::default().labels(&check.selector);
            let stream = watcher(pods, config).default_backoff();
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let (pod, initial) = match event {
                    Ok(watcher::Event::InitApply(pod)) => (pod, true),
                    Ok(watcher::Event::Apply(pod)) => (pod, false),
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                        continue;
                    }
                    Ok(_) => continue,
                    Err(error) => {
                        tracing::warn!(%error, "gate-order checker: pod watch error, re-listing");
                        if let Ok(mut found) = record.lock() {
                            found.watch_errors += 1;
                        }
                        continue;
                    }
                };
                let name = pod.name_any();
                if condition(&pod, &check.gate) != Some("True")
                    || !seen.insert(name.clone())
                    || (initial && !check.listed)
                {
                    continue;
                }
                let ip = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.clone())
                    .unwrap_or_default();
                let mut violations = Vec::new();
                for (proxy, socket) in &proxies {
                    if let Err(error) = check.route.ask(socket, &ip, check.port).await {
                        violations.push(format!("gate set on {name} ({ip}) but {proxy}: {error}"));
                    }
                }
                if let Ok(mut found) = record.lock() {
                    found.checked.push(name);
                    found.violations.extend(violations);
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), is_listed)
            .await
            .context("the gate-order checker's pod watch did not list within 30 s")?
            .context("the gate-order checker stopped")?;
        Ok(Self { task, found })
    }

    /// What it found so far, while it goes on watching.
    pub fn seen(&self) -> GateOrderSeen {
        self.found.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Stops the watch; what it found.
    pub async fn stop(self) -> GateOrderSeen {
        self.task.abort();
        let _ = self.task.await;
        self.found.lock().map(|f| f.clone()).unwrap_or_default()
    }
}

//! The controller is never refused by the apiserver: a missing RBAC rule
//! shows up as 403s in its log even where it does not stop routing (events).
//! The kubelet removes a deleted pod's logs at its next garbage collection
//! and `helm upgrade` replaces the controller's replicas, so a task copies
//! every controller pod's log off the host while the scenario runs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::ensure;
use haptic_testbed::node::container_log;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, ResourceExt as _};

/// How often the logs are copied: well inside the time a deleted pod's logs
/// stay on the host (until the kubelet's next container GC, a minute).
const POLL: Duration = Duration::from_millis(200);

/// The container the controller runs in, in the chart's controller pods.
const CONTAINER: &str = "controller";

/// Each controller pod's log (by `namespace/pod`), as copied so far.
type Copies = Arc<Mutex<BTreeMap<String, String>>>;

/// The controller's logs, copied off the host while it runs.
pub struct ControllerLogs {
    pods: Api<Pod>,
    selector: String,
    copies: Copies,
    /// Where each log had got when the gate was turned off: past that point
    /// the old replicas may be refused what the new ClusterRole no longer
    /// grants (pods, pods/status) until they are replaced: Helm updates RBAC
    /// and the Deployment together, and the old leader re-applies gate
    /// conditions on resync. Only that is forgiven.
    forgiven_from: Mutex<Vec<(String, usize)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControllerLogs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ControllerLogs {
    /// Starts copying the logs of the `controller` containers of the pods
    /// `selector` picks in `namespace`.
    pub fn start(client: &kube::Client, namespace: &str, selector: &str) -> Self {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let copies = Copies::default();
        let task = {
            let (pods, selector, copies) = (pods.clone(), selector.to_owned(), copies.clone());
            tokio::spawn(async move {
                loop {
                    copy(&pods, &selector, &copies).await;
                    tokio::time::sleep(POLL).await;
                }
            })
        };
        Self {
            pods,
            selector: selector.to_owned(),
            copies,
            forgiven_from: Mutex::new(Vec::new()),
            task,
        }
    }

    /// Every log copied, as it is now on the host or was last seen there.
    pub async fn logs(&self) -> Vec<(String, String)> {
        copy(&self.pods, &self.selector, &self.copies).await;
        self.copies
            .lock()
            .map(|c| c.iter().map(|(p, t)| (p.clone(), t.clone())).collect())
            .unwrap_or_default()
    }

    /// From now on, refusals on pods by the replicas running now are
    /// forgiven (see `forgiven_from`).
    pub async fn forgive_pods_refusals_from_now(&self) {
        let marks = self
            .logs()
            .await
            .into_iter()
            .map(|(path, text)| (path, text.len()))
            .collect();
        if let Ok(mut from) = self.forgiven_from.lock() {
            *from = marks;
        }
    }

    fn forgiven(&self, pod: &str, offset: usize, line: &str) -> bool {
        let from = self
            .forgiven_from
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default();
        from.iter().any(|(p, at)| p == pod && offset >= *at)
            && (line.contains(r#"resource "pods"#) || line.contains(r#"resource \"pods"#))
    }

    /// Fails with every refusal logged that is not forgiven; else how many
    /// were forgiven.
    pub async fn refusals(&self) -> anyhow::Result<usize> {
        let mut forgiven_lines = 0;
        for (pod, text) in &self.logs().await {
            let mut offset = 0;
            let mut refused = Vec::new();
            for line in text.split_inclusive('\n') {
                let lower = line.to_ascii_lowercase();
                let refusal = lower.contains("forbidden")
                    || lower.contains(" 403")
                    || lower.contains("unauthorized");
                if refusal && self.forgiven(pod, offset, line) {
                    forgiven_lines += 1;
                } else if refusal {
                    refused.push(line.trim_end());
                }
                offset += line.len();
            }
            ensure!(
                refused.is_empty(),
                "the controller was refused by the apiserver ({pod}):\n{}",
                refused.join("\n")
            );
        }
        Ok(forgiven_lines)
    }

    /// Runs `work` (a wait), failing at once if the controller logs a
    /// refusal meanwhile rather than when the wait runs out.
    pub async fn refused_or<T>(
        &self,
        work: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        let watch = async {
            loop {
                self.refusals().await?;
                tokio::time::sleep(POLL).await;
            }
        };
        tokio::select! {
            done = work => done,
            refused = watch => refused,
        }
    }
}

/// Copies the `controller` log of every pod `selector` picks into `copies`;
/// a pod gone from the API keeps its last copy.
async fn copy(pods: &Api<Pod>, selector: &str, copies: &Copies) {
    for (pod, text) in pod_logs(pods, selector, CONTAINER).await {
        if let Ok(mut copies) = copies.lock() {
            let copy = copies.entry(pod).or_default();
            // A log only grows (the kubelet rotates at 10 MiB, far off): a
            // shorter text is an older read by the other copier (the task
            // or a check) that finished last.
            if text.len() >= copy.len() {
                *copy = text;
            }
        }
    }
}

/// The log of `container` in each pod `selector` picks, by `namespace/pod`,
/// as the host has it now; nothing when the pods cannot be listed (the
/// next poll tries again).
pub async fn pod_logs(pods: &Api<Pod>, selector: &str, container: &str) -> Vec<(String, String)> {
    let Ok(list) = pods.list(&ListParams::default().labels(selector)).await else {
        return Vec::new();
    };
    list.items
        .iter()
        .map(|pod| {
            let namespace = pod.namespace().unwrap_or_default();
            let (name, uid) = (pod.name_any(), pod.uid().unwrap_or_default());
            let text = container_log(&namespace, &name, &uid, container);
            (format!("{namespace}/{name}"), text)
        })
        .collect()
}

/// Prints the last lines of `logs` (`pod`, its log) of `container`, for a
/// failure's reader.
pub fn print_tails(container: &str, logs: &[(String, String)]) {
    for (pod, text) in logs {
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        eprintln!("--- {pod} {container} (last {} lines)", tail.len());
        for line in tail.into_iter().rev() {
            eprintln!("{line}");
        }
    }
}

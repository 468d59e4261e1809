//! The controller is never refused by the apiserver: a missing RBAC rule
//! shows up as 403s in its log even where it does not stop routing (events).
//! The kubelet removes a deleted pod's logs at its next garbage collection
//! and `helm upgrade` replaces the controller's replicas, so a task copies
//! every controller log off the host while the scenario runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::ensure;
use haptic_testbed::node::container_log_files;

/// How often the logs are copied: well inside the time a deleted pod's logs
/// stay on the host (until the kubelet's next container GC, a minute).
const POLL: Duration = Duration::from_millis(200);

/// Every log of `container` in `namespace`, as copied so far.
type Copies = Arc<Mutex<BTreeMap<PathBuf, String>>>;

/// The controller's logs, copied off the host while it runs.
pub struct ControllerLogs {
    namespace: String,
    copies: Copies,
    /// Where each log had got when the gate was turned off: past that point
    /// the old replicas may be refused what the new ClusterRole no longer
    /// grants (pods, pods/status) until they are replaced: Helm updates RBAC
    /// and the Deployment together, and the old leader re-applies gate
    /// conditions on resync. Only that is forgiven.
    forgiven_from: Mutex<Vec<(PathBuf, usize)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControllerLogs {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ControllerLogs {
    /// Starts copying the `controller` containers' logs in `namespace`.
    pub fn start(namespace: &str) -> Self {
        let copies = Copies::default();
        let task = {
            let (namespace, copies) = (namespace.to_owned(), copies.clone());
            tokio::spawn(async move {
                loop {
                    copy(&namespace, &copies);
                    tokio::time::sleep(POLL).await;
                }
            })
        };
        Self {
            namespace: namespace.to_owned(),
            copies,
            forgiven_from: Mutex::new(Vec::new()),
            task,
        }
    }

    /// Every log copied, as it is now on the host or was last seen there.
    pub fn logs(&self) -> Vec<(PathBuf, String)> {
        copy(&self.namespace, &self.copies);
        self.copies
            .lock()
            .map(|c| c.iter().map(|(p, t)| (p.clone(), t.clone())).collect())
            .unwrap_or_default()
    }

    /// From now on, refusals on pods by the replicas running now are
    /// forgiven (see `forgiven_from`).
    pub fn forgive_pods_refusals_from_now(&self) {
        let marks = self
            .logs()
            .into_iter()
            .map(|(path, text)| (path, text.len()))
            .collect();
        if let Ok(mut from) = self.forgiven_from.lock() {
            *from = marks;
        }
    }

    fn forgiven(&self, path: &Path, offset: usize, line: &str) -> bool {
        let from = self
            .forgiven_from
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default();
        from.iter().any(|(p, at)| p == path && offset >= *at)
            && (line.contains(r#"resource "pods"#) || line.contains(r#"resource \"pods"#))
    }

    /// Fails with every refusal logged that is not forgiven; else how many
    /// were forgiven.
    pub fn refusals(&self) -> anyhow::Result<usize> {
        let mut forgiven_lines = 0;
        for (path, text) in &self.logs() {
            let mut offset = 0;
            let mut refused = Vec::new();
            for line in text.split_inclusive('\n') {
                let lower = line.to_ascii_lowercase();
                let refusal = lower.contains("forbidden")
                    || lower.contains(" 403")
                    || lower.contains("unauthorized");
                if refusal && self.forgiven(path, offset, line) {
                    forgiven_lines += 1;
                } else if refusal {
                    refused.push(line.trim_end());
                }
                offset += line.len();
            }
            ensure!(
                refused.is_empty(),
                "the controller was refused by the apiserver ({}):\n{}",
                path.display(),
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
                self.refusals()?;
                tokio::time::sleep(POLL).await;
            }
        };
        tokio::select! {
            done = work => done,
            refused = watch => refused,
        }
    }
}

/// Copies every log of the `controller` containers in `namespace` into
/// `copies`; a log no longer on the host keeps its last copy.
fn copy(namespace: &str, copies: &Copies) {
    for path in container_log_files(namespace, "controller") {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Ok(mut copies) = copies.lock() {
            copies.insert(path, text);
        }
    }
}

/// Prints the last lines of `logs`, for a failure's reader.
pub fn print_tails(logs: &[(PathBuf, String)]) {
    for (path, text) in logs {
        let tail: Vec<&str> = text.lines().rev().take(40).collect();
        eprintln!("--- {} (last {} lines)", path.display(), tail.len());
        for line in tail.into_iter().rev() {
            eprintln!("{line}");
        }
    }
}

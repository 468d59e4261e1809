//! Which containers of a pod can read its service-account token, in the
//! kernel's own view of each container: the root of a process in that
//! container (`/proc/<pid>/root`, through the container's mount namespace),
//! as the runtime set it up, not what the pod spec says. A container's
//! process is its main one, by the pid containerd recorded for the container
//! id the pod's status reports (`containerd://<id>`).

use std::path::PathBuf;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

/// Where Kubernetes mounts the token, relative to a container's root.
const TOKEN: &str = "var/run/secrets/kubernetes.io/serviceaccount/token";

/// Checks every pod matching `selector` in `namespace`: each named
/// container must (`true`) or must not (`false`) be able to read the token.
/// Never prints the token, only whether it was read.
pub async fn check_token_access(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
    expected: &[(&str, bool)],
) -> anyhow::Result<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods.list(&ListParams::default().labels(selector)).await?;
    ensure!(
        !list.items.is_empty(),
        "no pods {selector} in {namespace} to probe"
    );
    for pod in list.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let statuses = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        for (container, may_read) in expected {
            let id = statuses
                .iter()
                .find(|c| c.name == *container)
                .and_then(|c| c.container_id.clone())
                .with_context(|| format!("pod {name} has no running {container} container"))?;
            let pid = crate::node::container_pid(&id).with_context(|| {
                format!("no process of pod {name} container {container} ({id})")
            })?;
            let read = std::fs::read(in_root_of(pid, TOKEN)?);
            let readable = read.as_ref().is_ok_and(|t| !t.is_empty());
            ensure!(
                readable == *may_read,
                "pod {name} container {container}: the service-account token is {} (expected {}): {}",
                if readable { "readable" } else { "not readable" },
                if *may_read {
                    "readable"
                } else {
                    "not readable"
                },
                read.err().map(|e| e.to_string()).unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// `path` (relative to `/`) as the process `pid` sees it, through
/// `/proc/<pid>/root`: symlinks are followed inside that root (an image may
/// link `/var/run` to `/run`, and an absolute link read from the host would
/// leave the container).
fn in_root_of(pid: i32, path: &str) -> anyhow::Result<PathBuf> {
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let mut resolved = root.clone();
    let mut todo: Vec<String> = path.split('/').rev().map(str::to_owned).collect();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        match part.as_str() {
            "" | "." => continue,
            ".." => {
                if resolved != root {
                    resolved.pop();
                }
                continue;
            }
            _ => {}
        }
        let next = resolved.join(&part);
        match std::fs::read_link(&next) {
            Ok(target) => {
                links += 1;
                ensure!(
                    links < 40,
                    "too many links resolving {path} in pid {pid}'s root"
                );
                let target = target.to_string_lossy().into_owned();
                if target.starts_with('/') {
                    resolved = root.clone();
                }
                todo.extend(target.split('/').rev().map(str::to_owned));
            }
            Err(_) => resolved = next,
        }
    }
    Ok(resolved)
}

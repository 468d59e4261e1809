//! Stands in for kube-scheduler: binds every pending pod of the default
//! scheduler to this node through the `pods/binding` subresource, which is
//! also what makes the apiserver add the `PodScheduled=True` condition. A pod
//! whose `nodeSelector` does not match this node's labels is left for another
//! kubelet; affinities, taints and resources are not considered.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::json;

/// Watches unscheduled pods and binds them, forever.
pub(crate) async fn run(client: Client, node: String, labels: BTreeMap<String, String>) {
    let pods: Api<Pod> = Api::all(client.clone());
    let config = watcher::Config::default().fields("spec.nodeName=");
    let mut stream = watcher(pods, config).default_backoff().boxed();
    loop {
        let event = match stream.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("watching unscheduled pods: {e}");
                continue;
            }
        };
        let pod = match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => p,
            _ => continue,
        };
        let spec = pod.spec.as_ref();
        let scheduler = spec
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        if scheduler != "default-scheduler"
            || pod.metadata.deletion_timestamp.is_some()
            || spec
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| !n.is_empty())
            || !selects(spec.and_then(|s| s.node_selector.as_ref()), &labels)
        {
            continue;
        }
        let (client, node) = (client.clone(), node.clone());
        tokio::spawn(async move { bind(client, pod, node).await });
    }
}

async fn bind(client: Client, pod: Pod, node: String) {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client, &ns);
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns, "uid": pod.metadata.uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    for attempt in 0..5u32 {
        let result: Result<serde_json::Value, _> = api
            .create_subresource("binding", &name, &PostParams::default(), &binding)
            .await;
        match result {
            Ok(_) => return,
            // Already bound, or gone: nothing left to do.
            Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => return,
            Err(e) => {
                tracing::warn!(pod = %format!("{ns}/{name}"), attempt, "binding to {node}: {e}");
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
        }
    }
}

fn selects(selector: Option<&BTreeMap<String, String>>, labels: &BTreeMap<String, String>) -> bool {
    selector
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_selector_must_match_every_label() {
        let labels: BTreeMap<String, String> = [
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string()),
        ]
        .into();
        assert!(selects(None, &labels));
        let one: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
        assert!(selects(Some(&one), &labels));
        let other: BTreeMap<String, String> = [("a".to_string(), "2".to_string())].into();
        assert!(!selects(Some(&other), &labels));
    }
}

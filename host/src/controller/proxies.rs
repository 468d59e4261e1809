//! Discovering the HAProxy pods: a watcher on Pods in the release's
//! namespace matching the proxy label selector.
//!
//! A pod joins the fleet as soon as it has an IP and is not terminating,
//! before it is Ready: its agent must get the current configuration before
//! HAProxy serves from it, and until it answers it holds convergence (and
//! so every readiness gate). A terminating pod leaves at once: Kubernetes
//! takes it out of the Service, and waiting for it would stall gates for
//! its whole grace period.

use std::collections::BTreeMap;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use super::fleet::ProxyPod;

/// Where the HAProxy pods are and how their agents are reached.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    pub namespace: String,
    pub selector: String,
    /// `http` or `https` (mutual TLS).
    pub scheme: &'static str,
    pub agent_port: u16,
}

/// The fleet member a pod makes, if it is one.
pub fn member(pod: &Pod, settings: &ProxySettings) -> Option<ProxyPod> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let status = pod.status.as_ref()?;
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    let ip = status.pod_ip.as_deref().filter(|ip| !ip.is_empty())?;
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_owned()
    };
    Some(ProxyPod {
        name: format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
        endpoint: format!("{}://{host}:{}", settings.scheme, settings.agent_port),
    })
}

/// Watches the HAProxy pods and publishes the fleet's members on `out`
/// after every change (first after the initial list).
pub async fn discover(
    client: kube::Client,
    settings: ProxySettings,
    out: watch::Sender<Option<Vec<ProxyPod>>>,
) {
    let api: Api<Pod> = Api::namespaced(client, &settings.namespace);
    let config = watcher::Config::default()
        .labels(&settings.selector)
        .any_semantic();
    let stream = watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut pods: BTreeMap<String, ProxyPod> = BTreeMap::new();
    let mut listing: BTreeMap<String, ProxyPod> = BTreeMap::new();
    while let Some(event) = stream.next().await {
        match event {
            Err(error) => {
                tracing::warn!(namespace = %settings.namespace, selector = %settings.selector, %error,
                    "watching the HAProxy pods failed; retrying (a 403 means the controller's Role lacks list/watch on pods in its namespace)");
                continue;
            }
            Ok(watcher::Event::Init) => {
                listing.clear();
                continue;
            }
            Ok(watcher::Event::InitApply(pod)) => {
                if let Some(member) = member(&pod, &settings) {
                    listing.insert(member.name.clone(), member);
                }
                continue;
            }
            Ok(watcher::Event::InitDone) => pods = std::mem::take(&mut listing),
            Ok(watcher::Event::Apply(pod)) => {
                let name = format!(
                    "{}/{}",
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default()
                );
                match member(&pod, &settings) {
                    Some(member) => pods.insert(name, member),
                    None => pods.remove(&name),
                };
            }
            Ok(watcher::Event::Delete(pod)) => {
                pods.remove(&format!(
                    "{}/{}",
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
        let next: Vec<ProxyPod> = pods.values().cloned().collect();
        out.send_if_modified(|current| {
            if current.as_ref() == Some(&next) {
                false
            } else {
                *current = Some(next);
                true
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings() -> ProxySettings {
        ProxySettings {
            namespace: "haptic".into(),
            selector: "app=haproxy".into(),
            scheme: "http",
            agent_port: 8450,
        }
    }

    #[test]
    fn a_pod_joins_with_an_ip_and_leaves_when_terminating() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "haptic", "name": "haproxy-1"},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        assert_eq!(member(&pod, &settings()), None, "no IP yet");
        pod.status.as_mut().unwrap().pod_ip = Some("10.244.0.7".into());
        assert_eq!(
            member(&pod, &settings()),
            Some(ProxyPod {
                name: "haptic/haproxy-1".into(),
                endpoint: "http://10.244.0.7:8450".into()
            })
        );
        pod.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-12-01T00:00:00Z".parse().unwrap(),
            ));
        assert_eq!(member(&pod, &settings()), None);
    }
}

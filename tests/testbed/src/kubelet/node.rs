//! The Node object and its heartbeat: registered Ready with capacity,
//! addresses and node info the way kubelet registers itself, then kept alive
//! by renewing its Lease in `kube-node-lease` every 10 s and re-posting the
//! Ready condition's heartbeat every minute. Nothing judges those heartbeats
//! here (the node-lifecycle controller does not run, so the kubelet also lifts
//! the `not-ready` taint a new node gets), but clients reading the node see
//! what they would on a healthy cluster.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::status::{FIELD_MANAGER, now};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// Errors registering the node.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating/applying the Node or its status failed.
    #[error(
        "registering node {node}: {source}; the kubelet's client needs create/patch on nodes and nodes/status"
    )]
    Register {
        /// The node name.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

const LEASE_SECONDS: i32 = 40;

/// When the node became Ready, and its UID (the lease's owner).
#[derive(Clone, Debug)]
pub(crate) struct Registration {
    since: String,
    uid: String,
    ip: Ipv4Addr,
}

fn node_status(node: &str, ip: Ipv4Addr, since: &str) -> Value {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let heartbeat = now();
    let condition = |type_: &str, status: &str, reason: &str, message: &str| {
        json!({
            "type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": heartbeat, "lastTransitionTime": since,
        })
    };
    let resources = json!({"cpu": cpus.to_string(), "memory": "16Gi", "pods": "110", "ephemeral-storage": "50Gi"});
    json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": ip.to_string()},
            {"type": "Hostname", "address": node},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "haptic-testbed", "systemUUID": "haptic-testbed", "bootID": "haptic-testbed",
            "kernelVersion": "", "osImage": "haptic test bed (process kubelet)",
            "containerRuntimeVersion": "process://0.1.0", "kubeletVersion": "v1.35.4",
            "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": std::env::consts::ARCH,
        },
    })
}

/// Creates (or takes over) the Node and posts a Ready status.
pub(crate) async fn register(
    client: &Client,
    node: &str,
    ip: Ipv4Addr,
    labels: &BTreeMap<String, String>,
) -> Result<Registration, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let err = |source| Error::Register {
        node: node.to_string(),
        source,
    };
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let object = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": node_labels(node, labels)},
    });
    let created = api
        .patch(node, &params, &Patch::Apply(&object))
        .await
        .map_err(err)?;
    let registration = Registration {
        since: now(),
        uid: created.metadata.uid.unwrap_or_default(),
        ip,
    };
    post_status(&api, node, ip, &registration.since)
        .await
        .map_err(err)?;
    clear_not_ready_taint(&api, node).await.map_err(err)?;
    Ok(registration)
}

/// The apiserver's TaintNodesByCondition admission taints a new node
/// `node.kubernetes.io/not-ready:NoSchedule`; the node-lifecycle controller
/// (not running here) lifts it once the node is Ready. Done here instead so
/// the node looks as it would on a healthy cluster.
async fn clear_not_ready_taint(api: &Api<Node>, node: &str) -> Result<(), kube::Error> {
    let current = api.get(node).await?;
    let taints = current.spec.and_then(|s| s.taints).unwrap_or_default();
    let kept: Vec<_> = taints
        .iter()
        .filter(|t| t.key != "node.kubernetes.io/not-ready")
        .collect();
    if kept.len() == taints.len() {
        return Ok(());
    }
    let patch = json!({
        "metadata": {"resourceVersion": current.metadata.resource_version},
        "spec": {"taints": if kept.is_empty() { Value::Null } else { json!(kept) }},
    });
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

/// The labels kubelet puts on its node, plus the configured ones.
pub(crate) fn node_labels(
    node: &str,
    extra: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", node),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", arch()),
        ("haptic.dev/testbed", "process-kubelet"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    labels.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

async fn post_status(
    api: &Api<Node>,
    node: &str,
    ip: Ipv4Addr,
    since: &str,
) -> Result<(), kube::Error> {
    let status = node_status(node, ip, since);
    let body =
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}, "status": status});
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch_status(node, &params, &Patch::Apply(&body))
        .await
        .map(drop)
}

/// Renews the lease forever (every 10 s) and the Ready heartbeat every minute.
pub(crate) async fn heartbeat(client: Client, node: String, registration: Registration) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let nodes: Api<Node> = Api::all(client);
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        let renew = k8s_openapi::jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
            .to_string();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": node, "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": registration.uid}],
            },
            "spec": {"holderIdentity": node, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": renew},
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if let Err(e) = leases.patch(&node, &params, &Patch::Apply(&lease)).await {
            tracing::warn!(node, "renewing the node lease: {e}");
        }
        if n % 6 == 5
            && let Err(e) = post_status(&nodes, &node, registration.ip, &registration.since).await
        {
            tracing::warn!(node, "posting node status: {e}");
        }
        n += 1;
    }
}

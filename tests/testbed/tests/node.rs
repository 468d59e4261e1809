//! The real node: a pod from the locally built echo image runs on containerd
//! and runc in its own network namespace; the test process reaches it by pod
//! IP, through its Service's ClusterIP (kube-proxy) and through the
//! LoadBalancer address the bed's allocator gave it, with real HTTP. Stopping
//! the bed leaves nothing on the host (containers, mounts, netns, bridge,
//! iptables chains, files), as the host itself shows.
//!
//! Needs root, `make testbed-binaries testbed-node-setup testbed-images`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use haptic_testbed::cluster::{create, init_tracing, namespace, wait_for};
use haptic_testbed::http;
use haptic_testbed::node::{ECHO_IMAGE, NodeBed, network};
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "node-test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_on_real_containers_answers_by_pod_ip_cluster_ip_and_load_balancer_ip()
-> anyhow::Result<()> {
    init_tracing();
    let bed = NodeBed::start().await?;
    eprintln!("real node ready in {:?}", bed.startup_time());
    let client = bed.client();
    namespace(&client, NS).await?;
    create::<Pod>(
        &client,
        NS,
        json!({
            "metadata": {"name": "echo", "labels": {"app": "echo"}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "echo",
                    "image": ECHO_IMAGE,
                    "ports": [{"name": "http", "containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
                    "securityContext": {
                        "runAsNonRoot": true,
                        "readOnlyRootFilesystem": true,
                        "allowPrivilegeEscalation": false,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }],
            },
        }),
    )
    .await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod_ip: IpAddr = wait_for("the echo pod Ready with an IP", WAIT, || async {
        let pod = pods.get("echo").await.map_err(|e| e.to_string())?;
        let status = pod.status.unwrap_or_default();
        let ready = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        match status.pod_ip {
            Some(ip) if ready => ip.parse().map_err(|e| format!("{ip}: {e}")),
            other => Err(format!(
                "ready={ready} ip={other:?} containers={:?}",
                status.container_statuses
            )),
        }
    })
    .await?;
    let IpAddr::V4(v4) = pod_ip else {
        anyhow::bail!("pod IP {pod_ip} is not IPv4");
    };
    ensure!(
        u32::from(v4) >> (32 - network::POD_SUBNET.1)
            == u32::from(network::POD_SUBNET.0) >> (32 - network::POD_SUBNET.1),
        "pod IP {pod_ip} is outside the bed's pod subnet {:?}",
        network::POD_SUBNET
    );

    // The pod's own answer names it: the container's hostname is the pod's.
    let by_pod_ip = get(SocketAddr::new(pod_ip, 8080)).await?;
    ensure!(
        by_pod_ip.body.contains("pod=echo\n"),
        "pod IP {pod_ip}: {by_pod_ip:?}"
    );

    create::<Service>(
        &client,
        NS,
        json!({
            "metadata": {"name": "echo"},
            "spec": {"type": "LoadBalancer", "selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": "http"}]},
        }),
    )
    .await?;
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let (cluster_ip, lb_ip) = wait_for(
        "the Service's ClusterIP and LoadBalancer IP",
        WAIT,
        || async {
            let svc = services.get("echo").await.map_err(|e| e.to_string())?;
            let cluster_ip = svc.spec.and_then(|s| s.cluster_ip);
            let lb_ip = svc
                .status
                .and_then(|s| s.load_balancer?.ingress?.into_iter().next()?.ip);
            match (cluster_ip, lb_ip) {
                (Some(c), Some(l)) => Ok((c, l)),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await?;
    for (what, ip) in [("ClusterIP", &cluster_ip), ("LoadBalancer IP", &lb_ip)] {
        let ip: IpAddr = ip.parse().with_context(|| format!("{what} {ip}"))?;
        // kube-proxy programs its rules a moment after the EndpointSlice appears.
        let response = wait_for(
            &format!("the echo pod through its {what} {ip}"),
            WAIT,
            || async {
                get(SocketAddr::new(ip, 80))
                    .await
                    .map_err(|e| e.to_string())
            },
        )
        .await?;
        ensure!(
            response.body.contains("pod=echo\n"),
            "{what} {ip}: {response:?}"
        );
    }

    let left = bed.stop_and_find_leftovers().await;
    ensure!(
        left.is_empty(),
        "the stopped node left on the host: {left:#?}"
    );
    Ok(())
}

async fn get(addr: SocketAddr) -> anyhow::Result<http::Response> {
    let response = http::get(addr, None, "/", &[], Duration::from_secs(5)).await?;
    ensure!(response.status == 200, "GET http://{addr}/: {response:?}");
    Ok(response)
}

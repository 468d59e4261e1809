//! The bed's LoadBalancer: gives each `type: LoadBalancer` Service an address
//! from [`LOAD_BALANCER_POOL`] in `status.loadBalancer.ingress`, as MetalLB
//! or cloud-provider-kind would; kube-proxy then routes it like a ClusterIP.
//!
//! Addresses are taken from what the API shows (every Service's current
//! ingress IPs), never from a table of its own, so a restart or a Service
//! someone else patched cannot make it hand one out twice.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;

use super::network::LOAD_BALANCER_POOL;

/// Runs until aborted: on every Service event, assigns addresses to the
/// LoadBalancer Services that have none.
pub(crate) async fn run(client: kube::Client) {
    let services: Api<Service> = Api::all(client);
    let mut events = watcher(services.clone(), watcher::Config::default()).boxed();
    while let Some(event) = events.next().await {
        if event.is_err() {
            // The watcher retries by itself; a refusal shows in the test's wait.
            continue;
        }
        if let Err(error) = assign(&services).await {
            tracing::warn!(%error, "the load-balancer allocator could not assign an address");
        }
    }
}

async fn assign(services: &Api<Service>) -> Result<(), kube::Error> {
    let all = services.list(&ListParams::default()).await?.items;
    let mut used: BTreeSet<Ipv4Addr> = all.iter().flat_map(ingress_ips).collect();
    for service in &all {
        let is_lb = service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
        if !is_lb || !ingress_ips(service).is_empty() {
            continue;
        }
        let Some(ip) = free(&used) else {
            tracing::warn!("the load-balancer pool {LOAD_BALANCER_POOL:?} is exhausted");
            return Ok(());
        };
        let (Some(ns), Some(name)) = (&service.metadata.namespace, &service.metadata.name) else {
            continue;
        };
        let patch = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip.to_string(), "ipMode": "VIP"}]}}});
        Api::<Service>::namespaced(services.clone().into_client(), ns)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        used.insert(ip);
    }
    Ok(())
}

fn ingress_ips(service: &Service) -> Vec<Ipv4Addr> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect()
}

fn free(used: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
    let (first, last) = (
        u32::from(LOAD_BALANCER_POOL.0),
        u32::from(LOAD_BALANCER_POOL.1),
    );
    (first..=last)
        .map(Ipv4Addr::from)
        .find(|ip| !used.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_free_address_of_the_pool_is_given() {
        let mut used = BTreeSet::new();
        assert_eq!(free(&used), Some(LOAD_BALANCER_POOL.0));
        used.insert(LOAD_BALANCER_POOL.0);
        assert_eq!(free(&used), Some(Ipv4Addr::new(10, 89, 0, 201)));
    }
}

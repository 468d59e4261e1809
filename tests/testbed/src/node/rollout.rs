//! Rollouts on the real node: a Deployment restarted the way `kubectl
//! rollout restart` does, awaited until its old pods are gone (the load
//! sent through them is [`crate::load`]'s).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::cluster::wait_for;

/// The names of the pods `selector` picks in `namespace`.
pub async fn pod_names(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<String>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(pods
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect())
}

/// Restarts Deployment `name` as `kubectl rollout restart` does (a new
/// `restartedAt` annotation on its pod template) and waits until the rollout
/// is complete and none of the pods `selector` picked before it is left.
pub async fn restart_and_wait(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    selector: &str,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let old_pods = pod_names(client, namespace, selector).await?;
    let began = Instant::now();
    let restart = json!({"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": format!("{:?}", std::time::SystemTime::now())
    }}}}});
    deployments
        .patch(name, &PatchParams::default(), &Patch::Merge(&restart))
        .await?;
    wait_for(
        &format!("the rollout of {namespace}/{name} to finish (old pods gone)"),
        timeout,
        || async {
            let d = deployments.get(name).await.map_err(|e| e.to_string())?;
            let (spec, status) = (d.spec.unwrap_or_default(), d.status.unwrap_or_default());
            let want = spec.replicas.unwrap_or(1);
            let names = pod_names(client, namespace, selector)
                .await
                .map_err(|e| e.to_string())?;
            let done = status.observed_generation >= d.metadata.generation
                && status.updated_replicas == Some(want)
                && status.available_replicas == Some(want)
                && names.iter().all(|n| !old_pods.contains(n));
            if done {
                Ok(())
            } else {
                Err(format!("{status:?} pods {names:?}"))
            }
        },
    )
    .await?;
    Ok(began.elapsed())
}

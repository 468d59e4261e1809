//! RBAC on the test bed is real: a service account gets what its Role grants
//! and nothing more, whether it calls with a TokenRequest token from the test
//! (the control plane alone: no pod runs) or from inside a pod with the token
//! the kubelet projected into it (on the real node, [`haptic_testbed::node`]).

use std::time::Duration;

use anyhow::{Context as _, ensure};
use haptic_testbed::cluster::{create, init_tracing, namespace, wait_for};
use haptic_testbed::control_plane::ControlPlane;
use haptic_testbed::node::{NodeBed, TOOLS_IMAGE};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{ListParams, LogParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

/// Namespace `ns` with a ServiceAccount `reader` that may read pods and nothing else.
async fn reader_setup(client: &Client, ns: &str) -> anyhow::Result<()> {
    namespace(client, ns).await?;
    create::<ServiceAccount>(client, ns, json!({"metadata": {"name": "reader"}})).await?;
    create::<Role>(
        client,
        ns,
        json!({
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        }),
    )
    .await?;
    create::<RoleBinding>(
        client,
        ns,
        json!({
            "metadata": {"name": "reader-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
        }),
    )
    .await?;
    create::<Secret>(
        client,
        ns,
        json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
    )
    .await?;
    Ok(())
}

fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(e)) if e.code == 403)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_gets_what_its_role_grants_and_nothing_more() -> anyhow::Result<()> {
    init_tracing();
    let plane = ControlPlane::start().await?;
    let admin = plane.admin_client();
    reader_setup(&admin, "team").await?;
    let reader = plane.client_for_service_account("team", "reader").await?;

    let pods: Api<Pod> = Api::namespaced(reader.clone(), "team");
    pods.list(&ListParams::default())
        .await
        .context("listing pods in its namespace is granted")?;
    let elsewhere: Api<Pod> = Api::namespaced(reader.clone(), "default");
    ensure!(
        forbidden(elsewhere.list(&ListParams::default()).await),
        "pods of another namespace"
    );
    let secrets: Api<Secret> = Api::namespaced(reader.clone(), "team");
    ensure!(forbidden(secrets.get("s").await), "secrets are not granted");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}}))?;
    let config_maps: Api<ConfigMap> = Api::namespaced(reader.clone(), "team");
    ensure!(
        forbidden(config_maps.create(&PostParams::default(), &cm).await),
        "creating is not granted"
    );
    plane.stop().await;
    Ok(())
}

/// On the real node: the token is projected by the kubelet, the pod reaches
/// the apiserver through the `kubernetes` Service's ClusterIP (kube-proxy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_calls_the_api_with_its_projected_token_and_sees_its_config() -> anyhow::Result<()> {
    {
        init_tracing();
        let bed = NodeBed::start().await?;
        let admin = bed.client();
        reader_setup(&admin, "team").await?;
        create::<ConfigMap>(
            &admin,
            "team",
            json!({"metadata": {"name": "settings"}, "data": {"greeting": "hello"}}),
        )
        .await?;
        let script = r#"
            sa=/var/run/secrets/kubernetes.io/serviceaccount
            api="https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
            code() { curl -s -o /dev/null -w '%{http_code}' --cacert "$sa/ca.crt" \
                -H "Authorization: Bearer $(cat "$sa/token")" "$api$1"; }
            echo "pods=$(code "/api/v1/namespaces/$NS/pods")"
            echo "secrets=$(code "/api/v1/namespaces/$NS/secrets")"
            echo "namespace=$(cat "$sa/namespace")"
            echo "env=$GREETING"
            echo "file=$(cat /run/haptic-test/settings/greeting)"
            echo "hostname=$HOSTNAME"
            touch /run/haptic-test/settings/new 2>/dev/null && echo writable=yes || echo writable=no
        "#;
        let pod = create::<Pod>(
            &admin,
            "team",
            json!({
                "metadata": {"name": "caller"},
                "spec": {
                    "serviceAccountName": "reader",
                    "restartPolicy": "Never",
                    "volumes": [{"name": "settings", "configMap": {"name": "settings"}}],
                    "containers": [{
                        "name": "caller",
                        "image": TOOLS_IMAGE,
                        "command": ["sh", "-c", script],
                        "env": [
                            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                            {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "greeting"}}},
                        ],
                        "volumeMounts": [{"name": "settings", "mountPath": "/run/haptic-test/settings", "readOnly": true}],
                    }],
                },
            }),
        )
        .await?;
        let pods: Api<Pod> = Api::namespaced(admin.clone(), "team");
        wait_for("the pod to succeed", WAIT, || async {
            let p = pods.get("caller").await.map_err(|e| e.to_string())?;
            match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Succeeded") => Ok(()),
                other => Err(format!("phase {other:?}")),
            }
        })
        .await?;
        let name = pod.metadata.name.unwrap_or_default();
        let log = pods
            .logs(&name, &LogParams::default())
            .await
            .with_context(|| format!("reading the log of pod team/{name}"))?;
        let want = "pods=200\nsecrets=403\nnamespace=team\nenv=hello\nfile=hello\nhostname=caller\nwritable=no\n";
        ensure!(log == want, "pod output:\n{log}");
        bed.stop().await;
        Ok(())
    }
}

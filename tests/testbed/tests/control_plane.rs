//! End-to-end tier: the real control plane built by `make testbed-binaries`.
//!
//! Every test starts its own control plane (free ports, own directory), so they also prove that
//! several run side by side. Test names start with `e2e_` so the tier can be selected:
//! `cargo test -p haptic-testbed --test control_plane` or `cargo test -p haptic-testbed e2e_`.

use std::collections::BTreeMap;
use std::time::Duration;

use haptic_testbed::control_plane::{
    ControlPlane, ControlPlaneOptions, KUBERNETES_VERSION, TokenUser, UNPRIVILEGED_USER,
};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet};
use k8s_openapi::api::core::v1::{
    Container, Namespace, Pod, PodSpec, PodTemplateSpec, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::wait::await_condition;

const WAIT: Duration = Duration::from_secs(60);

/// Starts a control plane or fails with the error's own text, which says what to do
/// (e.g. build the binaries) and where the component logs are.
async fn start(options: ControlPlaneOptions) -> ControlPlane {
    match ControlPlane::start_with(options).await {
        Ok(plane) => plane,
        Err(e) => panic!("starting the control plane: {e}"),
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let namespace = Namespace {
        metadata: meta(name, None),
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
}

fn is_forbidden(result: &Result<impl std::fmt::Debug, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.code == 403)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_reports_the_pinned_version_and_runs_deployments() {
    let plane = start(ControlPlaneOptions::default()).await;
    let client = plane.admin_client();

    let version = client.apiserver_version().await.expect("GET /version");
    assert_eq!(version.git_version, KUBERNETES_VERSION);

    create_namespace(&client, "apps").await;
    let labels = BTreeMap::from([("app".to_owned(), "web".to_owned())]);
    let deployment = Deployment {
        metadata: meta("web", Some("apps")),
        spec: Some(DeploymentSpec {
            replicas: Some(2),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".to_owned(),
                        image: Some("echo".to_owned()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "apps");
    let created = deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    let deployment_uid = created.metadata.uid.expect("deployment uid");

    // The deployment controller reports the ReplicaSet's pods once the replicaset
    // controller has made them; no kubelet runs, so they are created but never ready.
    tokio::time::timeout(
        WAIT,
        await_condition(deployments.clone(), "web", |d: Option<&Deployment>| {
            d.and_then(|d| d.status.as_ref())
                .and_then(|s| s.replicas)
                .is_some_and(|r| r == 2)
        }),
    )
    .await
    .expect("deployment status reports 2 replicas in time")
    .expect("watch deployment");

    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), "apps")
        .list(&ListParams::default())
        .await
        .expect("list replicasets");
    let owned: Vec<&ReplicaSet> = replica_sets
        .items
        .iter()
        .filter(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == deployment_uid && o.controller == Some(true))
        })
        .collect();
    assert_eq!(
        owned.len(),
        1,
        "one ReplicaSet controlled by the Deployment"
    );

    let pods = Api::<Pod>::namespaced(client.clone(), "apps")
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list pods");
    assert_eq!(pods.items.len(), 2);
    for pod in &pods.items {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        assert_eq!(
            phase,
            Some("Pending"),
            "no kubelet runs, so pods stay Pending"
        );
        // The ServiceAccount admission plugin filled in the default account, which exists
        // because the serviceaccount controller runs.
        let account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.as_deref());
        assert_eq!(account, Some("default"));
    }

    plane.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_rbac_decides_for_token_users_and_service_accounts() {
    let plane = start(ControlPlaneOptions {
        users: vec![TokenUser::new("viewer", &[])],
        ..ControlPlaneOptions::default()
    })
    .await;
    let admin = plane.admin_client();
    create_namespace(&admin, "rbac").await;

    let nobody = plane
        .client_for_user(UNPRIVILEGED_USER)
        .await
        .expect("client for the unprivileged user");
    let listed = Api::<Pod>::namespaced(nobody, "rbac")
        .list(&ListParams::default())
        .await;
    assert!(is_forbidden(&listed), "unprivileged user: {listed:?}");

    // The same request succeeds for a user once a RoleBinding grants it, so the 403 above
    // came from RBAC and not from a broken token.
    let viewer = plane
        .client_for_user("viewer")
        .await
        .expect("client for viewer");
    let pods_as_viewer: Api<Pod> = Api::namespaced(viewer, "rbac");
    let before = pods_as_viewer.list(&ListParams::default()).await;
    assert!(is_forbidden(&before), "viewer before binding: {before:?}");
    grant_pod_reading(&admin, "rbac", "User", "viewer").await;
    let after = eventually_allowed(&pods_as_viewer).await;
    assert!(after.is_ok(), "viewer after binding: {after:?}");

    // A real service-account token from the TokenRequest API authenticates (403, not 401).
    let account = ServiceAccount {
        metadata: meta("robot", Some("rbac")),
        ..ServiceAccount::default()
    };
    Api::<ServiceAccount>::namespaced(admin.clone(), "rbac")
        .create(&PostParams::default(), &account)
        .await
        .expect("create service account");
    let robot = plane
        .client_for_service_account("rbac", "robot")
        .await
        .expect("client for the service account");
    let pods_as_robot: Api<Pod> = Api::namespaced(robot, "rbac");
    let before = pods_as_robot.list(&ListParams::default()).await;
    assert!(
        is_forbidden(&before),
        "service account before binding: {before:?}"
    );
    grant_pod_reading(&admin, "rbac", "ServiceAccount", "robot").await;
    let after = eventually_allowed(&pods_as_robot).await;
    assert!(after.is_ok(), "service account after binding: {after:?}");

    assert!(
        plane.client_for_user("nobody-by-that-name").await.is_err(),
        "an unknown token user is an error"
    );
    plane.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_dropping_the_control_plane_kills_its_processes() {
    let plane = start(ControlPlaneOptions::default()).await;
    let pids = plane.pids();
    assert_eq!(
        pids.len(),
        3,
        "etcd, kube-apiserver, kube-controller-manager: {pids:?}"
    );
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    assert!(kubeconfig.is_file());
    drop(plane);

    for (name, pid) in pids {
        // SIGKILL is sent synchronously in Drop; reaping happens in the background, so a
        // zombie for a moment is fine, a live process is not.
        let gone = wait_until_dead(pid).await;
        assert!(gone, "{name} (pid {pid}) still runs after drop");
    }
    assert!(!kubeconfig.exists(), "the temporary directory is removed");
}

/// Lists pods until RBAC's informer has seen a new binding (milliseconds) or 10 s pass.
async fn eventually_allowed(pods: &Api<Pod>) -> Result<(), kube::Error> {
    let mut result = Ok(());
    for _ in 0..200 {
        result = pods.list(&ListParams::default()).await.map(drop);
        if !is_forbidden(&result) {
            return result;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    result
}

async fn wait_until_dead(pid: u32) -> bool {
    for _ in 0..100 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            // Field 3 is the state; `Z` is a zombie (dead, not yet reaped).
            Ok(stat) if stat.rsplit(") ").next().is_some_and(|s| s.starts_with('Z')) => {
                return true;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    false
}

async fn grant_pod_reading(admin: &kube::Client, namespace: &str, kind: &str, name: &str) {
    let role = Role {
        metadata: meta(&format!("read-pods-{name}"), Some(namespace)),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".to_owned()]),
            verbs: vec!["get".to_owned(), "list".to_owned()],
            ..PolicyRule::default()
        }]),
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    let binding = RoleBinding {
        metadata: meta(&format!("read-pods-{name}"), Some(namespace)),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: format!("read-pods-{name}"),
        },
        subjects: Some(vec![Subject {
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: (kind == "ServiceAccount").then(|| namespace.to_owned()),
            api_group: (kind == "User").then(|| "rbac.authorization.k8s.io".to_owned()),
        }]),
    };
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
        .expect("create role binding");
}

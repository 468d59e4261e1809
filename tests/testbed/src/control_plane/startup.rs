//! Starting the components in order and waiting for each to serve.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use kube::config::Kubeconfig;

use super::process::{Component, log_tail};
use super::{
    ADMIN_USER, CONTROLLER_MANAGER_USER, CONTROLLERS, ControlPlaneError, ControlPlaneOptions, POLL,
    SERVICE_CIDR, TokenUser, UNPRIVILEGED_USER, client_from_kubeconfig, files,
};

/// Each readiness probe gets this long before it counts as "not yet".
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What a successful start hands to [`super::ControlPlane`].
pub(super) struct Started {
    pub(super) components: Vec<Component>,
    pub(super) admin: kube::Client,
    pub(super) users: Vec<(TokenUser, String)>,
    pub(super) server_url: String,
    pub(super) kubeconfig: std::path::PathBuf,
    pub(super) ca_file: std::path::PathBuf,
    /// kube-apiserver's flags, to start it again as it was.
    pub(super) apiserver_args: Vec<String>,
}

/// Starts etcd and kube-apiserver together (the apiserver retries etcd until it answers), then
/// kube-controller-manager once the apiserver is ready.
pub(super) async fn run(
    options: &ControlPlaneOptions,
    bin_dir: &Path,
    dir: &Path,
) -> Result<Started, ControlPlaneError> {
    let users = token_users(options)?;
    let tokens_file = dir.join("tokens.csv");
    files::write_token_file(&tokens_file, &users)?;
    let sa_key = dir.join("service-account.key");
    files::generate_service_account_key(&sa_key).await?;

    let etcd_port = crate::ports::free_port();
    let etcd_peer_port = crate::ports::free_port();
    let apiserver_port = crate::ports::free_port();
    let kcm_port = crate::ports::free_port();
    let etcd_url = format!("http://127.0.0.1:{etcd_port}");
    let etcd_peer_url = format!("http://127.0.0.1:{etcd_peer_port}");
    let apiserver_ip = options
        .apiserver_address
        .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let server_url = format!("https://{}", SocketAddr::new(apiserver_ip, apiserver_port));
    let cert_dir = dir.join("apiserver-certs");
    // Written by the apiserver at start: its serving certificate followed by the self-signed
    // CA that issued it, so it doubles as the clients' trust root.
    let ca_file = cert_dir.join("apiserver.crt");
    let sa_key_arg = sa_key.display().to_string();

    let mut components = Vec::with_capacity(3);
    let etcd_args = vec![
        "--name=testbed".to_owned(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={etcd_url}"),
        format!("--advertise-client-urls={etcd_url}"),
        format!("--listen-peer-urls={etcd_peer_url}"),
        format!("--initial-advertise-peer-urls={etcd_peer_url}"),
        format!("--initial-cluster=testbed={etcd_peer_url}"),
        // Test data: durability buys nothing and fsync dominates etcd's latency.
        "--unsafe-no-fsync=true".to_owned(),
        "--log-level=warn".to_owned(),
    ];
    components.push(spawn(bin_dir, dir, "etcd", &etcd_args)?);

    let mut apiserver_args = vec![
        format!("--etcd-servers={etcd_url}"),
        // The self-signed serving certificate names only the advertise address, so the
        // apiserver listens there and nowhere else.
        format!("--bind-address={apiserver_ip}"),
        format!("--advertise-address={apiserver_ip}"),
        format!("--secure-port={apiserver_port}"),
        format!("--cert-dir={}", cert_dir.display()),
        format!("--token-auth-file={}", tokens_file.display()),
        "--authorization-mode=Node,RBAC".to_owned(),
        "--enable-admission-plugins=NodeRestriction".to_owned(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_owned(),
        format!("--service-account-signing-key-file={sa_key_arg}"),
        format!("--service-account-key-file={sa_key_arg}"),
        format!(
            "--service-cluster-ip-range={}",
            options.service_cidr.as_deref().unwrap_or(SERVICE_CIDR)
        ),
        "--allow-privileged=true".to_owned(),
        // Logs and exec go to a node's InternalIP: the bed's node names resolve nowhere.
        "--kubelet-preferred-address-types=InternalIP,Hostname".to_owned(),
        "--profiling=false".to_owned(),
    ];
    if apiserver_ip.is_loopback() {
        // Its loopback address would be refused every 10 s with an error in the log.
        apiserver_args.push("--endpoint-reconciler-type=none".to_owned());
    }
    components.push(spawn(bin_dir, dir, "kube-apiserver", &apiserver_args)?);

    let kubeconfig = dir.join("kubeconfig");
    files::write_kubeconfig(&kubeconfig, &server_url, &ca_file, &users, ADMIN_USER)?;
    let mut admin: Option<kube::Client> = None;
    wait_for(
        "kube-apiserver /readyz",
        &mut components,
        1,
        options.ready_timeout,
        async || {
            // The CA file appears only once the apiserver has generated its certificate.
            if admin.is_none() && ca_file.is_file() {
                admin = admin_client(&kubeconfig).await.ok();
            }
            match &admin {
                Some(client) => get_ok(client, "/readyz").await,
                None => false,
            }
        },
    )
    .await?;
    let admin = admin.ok_or_else(|| ControlPlaneError::Io {
        what: "build the admin client".to_owned(),
        source: std::io::Error::other("the apiserver became ready without a client"),
    })?;

    let kcm_users: Vec<(TokenUser, String)> = users
        .iter()
        .filter(|(u, _)| u.name == CONTROLLER_MANAGER_USER)
        .cloned()
        .collect();
    let kcm_kubeconfig = dir.join("kube-controller-manager.kubeconfig");
    files::write_kubeconfig(
        &kcm_kubeconfig,
        &server_url,
        &ca_file,
        &kcm_users,
        CONTROLLER_MANAGER_USER,
    )?;
    let kcm_kubeconfig = kcm_kubeconfig.display().to_string();
    let kcm_args = vec![
        format!("--kubeconfig={kcm_kubeconfig}"),
        format!("--authentication-kubeconfig={kcm_kubeconfig}"),
        format!("--authorization-kubeconfig={kcm_kubeconfig}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--secure-port={kcm_port}"),
        format!(
            "--cert-dir={}",
            dir.join("kube-controller-manager-certs").display()
        ),
        format!(
            "--controllers={}",
            std::iter::once(CONTROLLERS.to_owned())
                .chain(options.extra_controllers.iter().cloned())
                .collect::<Vec<_>>()
                .join(",")
        ),
        // Each controller acts as its own service account, as in a real cluster, so RBAC
        // denials show up here the way they would there.
        "--use-service-account-credentials=true".to_owned(),
        format!("--service-account-private-key-file={sa_key_arg}"),
        format!("--root-ca-file={}", ca_file.display()),
        "--leader-elect=false".to_owned(),
        "--profiling=false".to_owned(),
    ];
    components.push(spawn(bin_dir, dir, "kube-controller-manager", &kcm_args)?);

    let kcm = insecure_client(&format!("https://127.0.0.1:{kcm_port}"))?;
    wait_for(
        "kube-controller-manager /healthz",
        &mut components,
        2,
        options.ready_timeout,
        async || get_ok(&kcm, "/healthz").await,
    )
    .await?;
    // The serviceaccount controller having made `default/default` shows the controllers run;
    // before that, pods in a fresh namespace can be refused for want of their account.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "default");
    wait_for(
        "the default ServiceAccount",
        &mut components,
        2,
        options.ready_timeout,
        async || {
            matches!(
                tokio::time::timeout(PROBE_TIMEOUT, accounts.get_opt("default")).await,
                Ok(Ok(Some(_)))
            )
        },
    )
    .await?;

    Ok(Started {
        components,
        admin,
        users,
        server_url,
        kubeconfig,
        ca_file,
        apiserver_args,
    })
}

/// Kills kube-apiserver (`components[1]`) as a crash would and starts it
/// again with `args`: the same port, serving certificate (it reuses the one
/// in its `--cert-dir`) and etcd; returns once it is ready.
pub(super) async fn restart_apiserver(
    bin_dir: &Path,
    dir: &Path,
    components: &mut [Component],
    args: &[String],
    admin: &kube::Client,
    timeout: Duration,
) -> Result<(), ControlPlaneError> {
    let Some(apiserver) = components.get_mut(1) else {
        return Err(ControlPlaneError::Io {
            what: "restart kube-apiserver".to_owned(),
            source: std::io::Error::other("the control plane has no apiserver"),
        });
    };
    apiserver.kill().await;
    *apiserver = spawn(bin_dir, dir, "kube-apiserver", args)?;
    wait_for(
        "kube-apiserver /readyz after a restart",
        components,
        1,
        timeout,
        async || get_ok(admin, "/readyz").await,
    )
    .await
}

/// The admin, the controller manager, a user with no permissions, then the caller's users;
/// each with a fresh random token. A name given twice keeps its first definition.
pub(super) fn token_users(
    options: &ControlPlaneOptions,
) -> Result<Vec<(TokenUser, String)>, ControlPlaneError> {
    let mut users = vec![
        TokenUser::new(ADMIN_USER, &["system:masters"]),
        TokenUser::new(CONTROLLER_MANAGER_USER, &[]),
        TokenUser::new(UNPRIVILEGED_USER, &[]),
    ];
    for user in &options.users {
        let bad = std::iter::once(&user.name)
            .chain(&user.groups)
            .find(|s| s.contains([',', '"', '\n', '\r']));
        if let Some(bad) = bad {
            return Err(ControlPlaneError::InvalidUserName(bad.clone()));
        }
        if !users.iter().any(|u| u.name == user.name) {
            users.push(user.clone());
        }
    }
    users
        .into_iter()
        .map(|u| Ok((u, files::random_token()?)))
        .collect()
}

fn spawn(
    bin_dir: &Path,
    dir: &Path,
    name: &'static str,
    args: &[String],
) -> Result<Component, ControlPlaneError> {
    Component::spawn(
        name,
        &bin_dir.join(name),
        args,
        dir.join(format!("{name}.log")),
    )
}

/// Polls `ready` until it holds, failing early if any component exits.
async fn wait_for(
    what: &str,
    components: &mut [Component],
    awaited: usize,
    timeout: Duration,
    mut ready: impl AsyncFnMut() -> bool,
) -> Result<(), ControlPlaneError> {
    let start = Instant::now();
    loop {
        for component in components.iter_mut() {
            component.ensure_running()?;
        }
        if ready().await {
            tracing::debug!(what, elapsed = ?start.elapsed(), "ready");
            return Ok(());
        }
        if start.elapsed() > timeout {
            let log = components
                .get(awaited)
                .map(|c| c.log().to_path_buf())
                .unwrap_or_default();
            return Err(ControlPlaneError::NotReady {
                what: what.to_owned(),
                waited: start.elapsed(),
                tail: log_tail(&log),
                log,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn admin_client(kubeconfig: &Path) -> Result<kube::Client, ControlPlaneError> {
    let parsed =
        Kubeconfig::read_from(kubeconfig).map_err(|source| ControlPlaneError::Kubeconfig {
            user: ADMIN_USER.to_owned(),
            source,
        })?;
    client_from_kubeconfig(parsed, ADMIN_USER).await
}

/// A client for a component's own health endpoint, which serves a certificate it made up.
fn insecure_client(url: &str) -> Result<kube::Client, ControlPlaneError> {
    let uri: http::Uri = url.parse().map_err(|e| ControlPlaneError::Io {
        what: format!("parse the URL {url}"),
        source: std::io::Error::other(e),
    })?;
    let mut config = kube::Config::new(uri);
    config.accept_invalid_certs = true;
    kube::Client::try_from(config).map_err(|source| ControlPlaneError::Kube {
        what: format!("build a client for {url}"),
        source,
    })
}

/// Whether `GET path` answers 2xx within [`PROBE_TIMEOUT`].
async fn get_ok(client: &kube::Client, path: &str) -> bool {
    let Ok(request) = http::Request::get(path).body(Vec::new()) else {
        return false;
    };
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, client.request_text(request)).await,
        Ok(Ok(_))
    )
}

//! A real Kubernetes control plane on loopback: etcd, kube-apiserver and
//! kube-controller-manager, built from source by `tests/testbed/scripts/build-binaries.sh`.
//!
//! [`ControlPlane::start`] picks free ports and a temporary directory, so several test binaries
//! can each run their own. Dropping a [`ControlPlane`] kills every process it started, also when
//! a test panics. Each component logs to a file in the temporary directory; errors name it, and
//! a failed start keeps the directory so the logs can be read.
//!
//! Clients authenticate with static bearer tokens (`--token-auth-file`): [`ADMIN_USER`] is in
//! `system:masters`, every other [`TokenUser`] gets only what RBAC grants it, and
//! [`ControlPlane::client_for_service_account`] gets a real service-account token from the
//! TokenRequest API.

pub(crate) mod files;
pub(crate) mod process;
mod startup;

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

use process::Component;

/// The Kubernetes release the Go helper module pins (`tests/testbed/go/go.mod`).
pub const KUBERNETES_VERSION: &str = "v1.35.4";

/// The user in `system:masters` that [`ControlPlane::admin_client`] acts as.
pub const ADMIN_USER: &str = "admin";

/// A user that no RBAC rule names: every request it makes past discovery is forbidden.
pub const UNPRIVILEGED_USER: &str = "unprivileged";

/// The controller manager's identity, bound to its role by RBAC's bootstrap policy.
const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";

/// The controllers a haptic test needs: Deployments make ReplicaSets make Pods, Services get
/// EndpointSlices, deletion cascades, namespaces get their default ServiceAccount and
/// `kube-root-ca.crt`.
const CONTROLLERS: &str = "deployment,replicaset,endpointslice,endpointslicemirroring,\
    garbagecollector,namespace,serviceaccount,serviceaccount-token,root-ca-cert-publisher";

/// Service ClusterIPs come from loopback: nothing routes them here (no kube-proxy), and a
/// client that dials one by mistake stays on this machine.
const SERVICE_CIDR: &str = "127.96.0.0/16";

/// How often readiness is polled while waiting for a component.
const POLL: Duration = Duration::from_millis(50);

/// Errors starting or using the test-bed control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// The control-plane binaries have not been built (or `HAPTIC_TESTBED_BIN` is wrong).
    #[error(
        "control-plane binaries missing in {dir}: {missing}; build them with `make testbed-binaries` \
         (tests/testbed/scripts/build-binaries.sh) or point HAPTIC_TESTBED_BIN at a directory holding them"
    )]
    BinariesMissing {
        /// The directory that was searched.
        dir: PathBuf,
        /// The binaries not found there.
        missing: String,
    },
    /// A file or process operation failed.
    #[error("could not {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// openssl failed to generate the service-account key.
    #[error("openssl could not generate the service-account key ({status}): {stderr}")]
    Openssl {
        /// openssl's exit status.
        status: std::process::ExitStatus,
        /// What openssl printed.
        stderr: String,
    },
    /// A component binary could not be started.
    #[error("could not start {component} ({binary}): {source}")]
    Spawn {
        /// The component.
        component: &'static str,
        /// The binary that was run.
        binary: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A component exited while the control plane was starting or running.
    #[error("{component} exited ({status}); its log is {log}; last lines:\n{tail}")]
    Exited {
        /// The component.
        component: &'static str,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// Its log file.
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },
    /// A component did not become ready in time.
    #[error("{what} was not ready after {waited:?}; see {log}; last lines:\n{tail}")]
    NotReady {
        /// What was awaited.
        what: String,
        /// How long it was awaited.
        waited: Duration,
        /// The log of the component awaited.
        log: PathBuf,
        /// The end of that log.
        tail: String,
    },
    /// A kubeconfig for a client could not be loaded.
    #[error("could not load the test bed's kubeconfig for {user}: {source}")]
    Kubeconfig {
        /// The user the client was for.
        user: String,
        /// The underlying error.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A Kubernetes client could not be built or a request failed.
    #[error("Kubernetes request to the test bed failed while trying to {what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
    /// A token user's name or group cannot be written to the apiserver's token CSV file.
    #[error(
        "token user name or group {0:?} contains a comma, quote or line break, which the \
         apiserver's --token-auth-file cannot hold; rename it"
    )]
    InvalidUserName(String),
    /// No token user of that name was configured at start.
    #[error("no token user '{0}' in this control plane; add it to ControlPlaneOptions::users")]
    UnknownUser(String),
}

/// A user authenticated by a static bearer token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// The user name requests are authorized as (e.g. `system:node:node-1`).
    pub name: String,
    /// The groups the user belongs to (besides `system:authenticated`).
    pub groups: Vec<String>,
}

impl TokenUser {
    /// A user with the given name and groups.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        Self {
            name: name.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        }
    }
}

/// How to start a control plane.
#[derive(Debug, Clone)]
pub struct ControlPlaneOptions {
    /// Token users besides [`ADMIN_USER`], [`UNPRIVILEGED_USER`] and the controller manager's.
    pub users: Vec<TokenUser>,
    /// How long each component may take to become ready.
    pub ready_timeout: Duration,
    /// Keep the temporary directory (logs, etcd data, kubeconfig) after the control plane stops.
    /// `HAPTIC_TESTBED_KEEP=1` sets it too.
    pub keep_dir: bool,
    /// Where the apiserver listens and what it advertises in the `kubernetes` Service's
    /// endpoints. `None` means 127.0.0.1 and no such endpoints, because the API refuses
    /// loopback endpoint addresses. Set it only to an address local to a network namespace the
    /// test bed made itself (e.g. 10.244.0.1 on its `lo`); [`ControlPlane::server_url`] follows it.
    pub apiserver_address: Option<std::net::IpAddr>,
    /// The Service ClusterIP range; `None` means [`SERVICE_CIDR`] on loopback. The real node
    /// sets one on its own bridge network, where kube-proxy routes it.
    pub service_cidr: Option<String>,
    /// Controllers to run besides [`CONTROLLERS`]. The real node needs
    /// `nodelifecycle`: it lifts the `node.kubernetes.io/not-ready` taint that
    /// admission puts on a new Node once the kubelet reports Ready.
    pub extra_controllers: Vec<String>,
}

impl Default for ControlPlaneOptions {
    fn default() -> Self {
        Self {
            users: Vec::new(),
            ready_timeout: Duration::from_secs(120),
            keep_dir: std::env::var_os("HAPTIC_TESTBED_KEEP").is_some_and(|v| v == "1"),
            apiserver_address: None,
            service_cidr: None,
            extra_controllers: Vec::new(),
        }
    }
}

/// A running control plane; dropping it kills every process it started.
pub struct ControlPlane {
    // Field order is drop order: processes die before their directory goes.
    components: Vec<Component>,
    admin: kube::Client,
    users: Vec<(TokenUser, String)>,
    server_url: String,
    kubeconfig: PathBuf,
    ca_file: PathBuf,
    bin_dir: PathBuf,
    started_in: Duration,
    apiserver_args: Vec<String>,
    dir: PathBuf,
    _dir_guard: tempfile::TempDir,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager with default options and waits
    /// until they serve.
    pub async fn start() -> Result<Self, ControlPlaneError> {
        Self::start_with(ControlPlaneOptions::default()).await
    }

    /// Starts a control plane with `options`. A start whose components exit
    /// or never turn ready is tried once more on fresh ports and a fresh
    /// directory: on a loaded two-core machine the apiserver has been seen
    /// to stall once in tens of starts, and one stall should not fail a CI run.
    /// The first attempt's directory and logs are kept for a look.
    pub async fn start_with(options: ControlPlaneOptions) -> Result<Self, ControlPlaneError> {
        match Self::start_once(&options).await {
            Err(
                error @ (ControlPlaneError::NotReady { .. } | ControlPlaneError::Exited { .. }),
            ) => {
                tracing::warn!(%error, "the control plane did not come up; trying once more");
                Self::start_once(&options).await
            }
            other => other,
        }
    }

    async fn start_once(options: &ControlPlaneOptions) -> Result<Self, ControlPlaneError> {
        let began = std::time::Instant::now();
        let bin_dir = files::find_bin_dir()?;
        let mut guard = tempfile::Builder::new()
            .prefix("haptic-testbed-")
            .tempdir()
            .map_err(|source| ControlPlaneError::Io {
                what: "create a temporary directory for the control plane".to_owned(),
                source,
            })?;
        let result = startup::run(options, &bin_dir, guard.path()).await;
        // A failed start keeps its logs: the error points into this directory.
        guard.disable_cleanup(options.keep_dir || result.is_err());
        let started = result?;
        if options.keep_dir {
            tracing::info!(dir = %guard.path().display(), "keeping the control plane's directory");
        }
        Ok(Self {
            components: started.components,
            admin: started.admin,
            users: started.users,
            server_url: started.server_url,
            kubeconfig: started.kubeconfig,
            ca_file: started.ca_file,
            bin_dir,
            started_in: began.elapsed(),
            apiserver_args: started.apiserver_args,
            dir: guard.path().to_path_buf(),
            _dir_guard: guard,
        })
    }

    /// A client acting as [`ADMIN_USER`] (`system:masters`).
    pub fn admin_client(&self) -> kube::Client {
        self.admin.clone()
    }

    /// A client acting as the token user `name`.
    pub async fn client_for_user(&self, name: &str) -> Result<kube::Client, ControlPlaneError> {
        if self.token_for_user(name).is_none() {
            return Err(ControlPlaneError::UnknownUser(name.to_owned()));
        }
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig).map_err(|source| {
            ControlPlaneError::Kubeconfig {
                user: name.to_owned(),
                source,
            }
        })?;
        client_from_kubeconfig(kubeconfig, name).await
    }

    /// A client acting as service account `namespace/name`, with a one-hour token from the
    /// TokenRequest API (the account must exist).
    pub async fn client_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client, ControlPlaneError> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin_client(), namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(),
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let issued = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|source| ControlPlaneError::Kube {
                what: format!("issue a token for service account {namespace}/{name}"),
                source,
            })?;
        let token = issued.status.map(|s| s.token).unwrap_or_default();
        let user = TokenUser::new(format!("system:serviceaccount:{namespace}:{name}"), &[]);
        let text = files::kubeconfig_text(
            &self.server_url,
            &self.ca_file,
            &[(user.clone(), token)],
            &user.name,
        );
        let kubeconfig =
            Kubeconfig::from_yaml(&text).map_err(|source| ControlPlaneError::Kubeconfig {
                user: user.name.clone(),
                source,
            })?;
        client_from_kubeconfig(kubeconfig, &user.name).await
    }

    /// The bearer token of token user `name`, for processes that build their own client.
    pub fn token_for_user(&self, name: &str) -> Option<&str> {
        self.users
            .iter()
            .find(|(u, _)| u.name == name)
            .map(|(_, token)| token.as_str())
    }

    /// A kubeconfig with one context per token user, the admin's current:
    /// `KUBECONFIG=<this> kubectl get pods` works.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>` unless
    /// [`ControlPlaneOptions::apiserver_address`] says otherwise.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The PEM file that verifies the apiserver's certificate (its self-signed chain).
    pub fn ca_cert_path(&self) -> &Path {
        &self.ca_file
    }

    /// The directory holding etcd, kube-apiserver, kube-controller-manager and kubectl.
    pub fn bin_dir(&self) -> &Path {
        &self.bin_dir
    }

    /// The control plane's temporary directory (logs `*.log`, etcd data, kubeconfig).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How long [`ControlPlane::start`] took, from finding the binaries to running controllers.
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Resident memory of each running component, in bytes.
    pub fn memory(&self) -> Vec<(&'static str, u64)> {
        self.components
            .iter()
            .filter_map(|c| Some((c.name(), c.rss_bytes()?)))
            .collect()
    }

    /// The process id of each running component.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.components
            .iter()
            .filter_map(|c| Some((c.name(), c.pid()?)))
            .collect()
    }

    /// Kills kube-apiserver (SIGKILL, as a crash would) and starts it again
    /// on the same address with the same certificates and etcd, as a
    /// control-plane upgrade or crash does to clients: their watches break
    /// and must re-list. Returns how long it was gone. Call it from the
    /// thread that started the control plane: the new process's parent-death
    /// signal is tied to the calling thread.
    pub async fn restart_apiserver(
        &mut self,
        timeout: Duration,
    ) -> Result<Duration, ControlPlaneError> {
        let began = std::time::Instant::now();
        startup::restart_apiserver(
            &self.bin_dir,
            &self.dir,
            &mut self.components,
            &self.apiserver_args,
            &self.admin,
            timeout,
        )
        .await?;
        Ok(began.elapsed())
    }

    /// Fails if any component has exited since start.
    pub fn check_running(&mut self) -> Result<(), ControlPlaneError> {
        self.components
            .iter_mut()
            .try_for_each(Component::ensure_running)
    }

    /// Stops the components, newest first, and removes the temporary directory (unless kept).
    pub async fn stop(mut self) {
        while let Some(mut component) = self.components.pop() {
            component.kill().await;
        }
    }
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("server_url", &self.server_url)
            .field("dir", &self.dir)
            .field("components", &self.components)
            .finish_non_exhaustive()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        for component in self.components.iter_mut().rev() {
            component.start_kill();
        }
    }
}

async fn client_from_kubeconfig(
    kubeconfig: Kubeconfig,
    user: &str,
) -> Result<kube::Client, ControlPlaneError> {
    let options = KubeConfigOptions {
        context: Some(user.to_owned()),
        ..KubeConfigOptions::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|source| ControlPlaneError::Kubeconfig {
            user: user.to_owned(),
            source,
        })?;
    kube::Client::try_from(config).map_err(|source| ControlPlaneError::Kube {
        what: format!("build a client for {user}"),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_constant_matches_the_go_module() {
        let go_mod = include_str!("../go/go.mod");
        let pinned = go_mod.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("k8s.io/kubernetes"))
                .then(|| words.next())
                .flatten()
        });
        assert_eq!(pinned, Some(KUBERNETES_VERSION));
    }

    #[test]
    fn kubeconfig_has_a_context_per_user_and_survives_odd_names() {
        let users = vec![
            (
                TokenUser::new(ADMIN_USER, &["system:masters"]),
                "t1".to_owned(),
            ),
            (TokenUser::new("system:node:a 'b'", &[]), "t2".to_owned()),
        ];
        let text = files::kubeconfig_text(
            "https://127.0.0.1:6443",
            Path::new("/tmp/x/apiserver.crt"),
            &users,
            ADMIN_USER,
        );
        let parsed = Kubeconfig::from_yaml(&text).expect("valid kubeconfig");
        assert_eq!(parsed.current_context.as_deref(), Some(ADMIN_USER));
        let contexts: Vec<&str> = parsed.contexts.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(contexts, [ADMIN_USER, "system:node:a 'b'"]);
        let cluster = parsed.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
    }

    #[test]
    fn token_file_lists_groups_quoted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        let users = vec![(
            TokenUser::new("system:node:n1", &["system:nodes", "extra"]),
            "abc".to_owned(),
        )];
        files::write_token_file(&path, &users).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(
            text,
            "abc,system:node:n1,system:node:n1,\"system:nodes,extra\"\n"
        );
    }

    #[test]
    fn user_names_that_break_the_token_file_are_refused() {
        let options = ControlPlaneOptions {
            users: vec![TokenUser::new("bob", &["a,b"])],
            ..ControlPlaneOptions::default()
        };
        let err = startup::token_users(&options).expect_err("comma in a group");
        assert!(matches!(err, ControlPlaneError::InvalidUserName(g) if g == "a,b"));
    }

    #[test]
    fn random_tokens_are_long_and_differ() {
        let a = files::random_token().expect("token");
        let b = files::random_token().expect("token");
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}

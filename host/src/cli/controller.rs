//! `haptic controller`: the controller in a cluster.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use super::{LibraryArgs, shutdown_signal};
use haptic::protocol::api_tls;

#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// The release's namespace: where the HAProxy pods and the Lease are.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub namespace: String,
    /// This replica's name (Lease holder, Events' reporting instance).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Label selector of the HAProxy pods in --namespace.
    #[arg(
        long,
        env = "HAPTIC_PROXY_SELECTOR",
        default_value = "app.kubernetes.io/component=haproxy"
    )]
    pub proxy_selector: String,
    /// The agents' API port on each HAProxy pod.
    #[arg(long, default_value_t = 8450)]
    pub agent_port: u16,
    /// File holding the agents' bearer token (re-read at start).
    #[arg(long, env = "HAPTIC_AGENT_TOKEN_FILE")]
    pub agent_token_file: Option<PathBuf>,
    /// PEM CA that signed the agents' serving certificates (then https).
    #[arg(long)]
    pub agent_ca: Option<PathBuf>,
    /// PEM client certificate for agents that require mutual TLS.
    #[arg(long, requires = "agent_client_key", requires = "agent_ca")]
    pub agent_client_cert: Option<PathBuf>,
    /// PEM private key of --agent-client-cert.
    #[arg(long, requires = "agent_client_cert")]
    pub agent_client_key: Option<PathBuf>,
    #[command(flatten)]
    pub libraries: LibraryArgs,
    /// Load every `*.wasm` in this directory as a custom library (a mounted ConfigMap).
    #[arg(long)]
    pub library_dir: Option<PathBuf>,
    /// Validate through `haptic validator` on this Unix socket instead of
    /// running `haproxy -c` in this process (the chart's default).
    #[arg(long, env = "HAPTIC_VALIDATOR_SOCKET")]
    pub validator_socket: Option<PathBuf>,
    /// The Lease for leader election, in --namespace.
    #[arg(long, default_value = "haptic-controller")]
    pub lease_name: String,
    /// How long a leader that stopped renewing keeps the Lease.
    #[arg(long, default_value = "15", value_name = "SECONDS")]
    pub lease_duration: u64,
    /// Lead without a Lease (a single replica only: two would both deploy).
    #[arg(long)]
    pub no_leader_election: bool,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "HAPTIC_CONTROLLER_LISTEN", default_value = "0.0.0.0:8451")]
    pub listen: std::net::SocketAddr,
    /// One push to one agent, including its reload.
    #[arg(long, default_value = "35", value_name = "SECONDS")]
    pub agent_timeout: u64,
}

pub fn run(args: ControllerArgs) -> Result<ExitCode> {
    use haptic::controller::{self, ElectionSettings, FleetSettings, proxies::ProxySettings};

    let values = args.libraries.values()?;
    let mut custom = args.libraries.libraries.clone();
    if let Some(dir) = &args.library_dir {
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("reading the library directory {}", dir.display()))?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|entry| entry.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "wasm"))
            .collect();
        found.sort();
        custom.extend(found);
    }
    let identity = match args.identity.clone() {
        Some(identity) => identity,
        None => std::env::var("HOSTNAME").unwrap_or_else(|_| "haptic-controller".into()),
    };
    let token = match &args.agent_token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the agent token file {}", path.display()))?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let tls = args.agent_ca.clone().map(|ca| api_tls::ClientTls {
        ca,
        identity: args
            .agent_client_cert
            .clone()
            .zip(args.agent_client_key.clone()),
    });
    let settings = controller::Settings {
        identity: identity.clone(),
        proxies: ProxySettings {
            namespace: args.namespace.clone(),
            selector: args.proxy_selector.clone(),
            scheme: if tls.is_some() { "https" } else { "http" },
            agent_port: args.agent_port,
        },
        fleet: FleetSettings {
            token,
            tls,
            timeout: std::time::Duration::from_secs(args.agent_timeout),
            ..FleetSettings::default()
        },
        election: (!args.no_leader_election).then(|| ElectionSettings {
            namespace: args.namespace.clone(),
            lease_name: args.lease_name.clone(),
            identity,
            duration: std::time::Duration::from_secs(args.lease_duration.max(2)),
            grace: std::time::Duration::from_secs((args.lease_duration / 3).max(1)),
        }),
        listen: Some(args.listen),
        convergence_wait: std::time::Duration::from_secs(30),
        resync: std::time::Duration::from_secs(30),
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the controller's runtime")?;
    runtime.block_on(async {
        let started = std::time::Instant::now();
        let libraries = haptic::engine::load_libraries(&args.libraries.runtime(false)?, &custom)?;
        let mut engine = haptic::engine::Engine::new(libraries, values)?;
        if let Some(socket) = &args.validator_socket {
            engine.set_checker(haptic::validate::Checker::Socket(socket.clone()));
        }
        let client = kube::Client::try_default().await.context(
            "connecting to the Kubernetes API (in-cluster service account, or KUBECONFIG)",
        )?;
        let state = std::sync::Arc::new(controller::State::default());
        state.metrics.seed.record("load", started.elapsed());
        controller::run_in_cluster(client, engine, settings, state, shutdown_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

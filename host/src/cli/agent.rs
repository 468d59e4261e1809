//! `haptic agent`: the agent API beside HAProxy in a proxy pod.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use super::{ProxyPaths, shutdown_signal};
use haptic::agent::{self, haproxy::Haproxy, server, spoa};
use haptic::protocol::api_tls;

#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    #[command(flatten)]
    pub paths: ProxyPaths,
    /// Address of the API (`/v1/state`, `/v1/apply`, `/healthz`, `/readyz`, `/metrics`).
    #[arg(long, env = "HAPTIC_AGENT_LISTEN", default_value = "0.0.0.0:8450")]
    pub listen: std::net::SocketAddr,
    /// File holding the bearer token the controller must send (re-read when it changes).
    #[arg(long, env = "HAPTIC_AGENT_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// PEM certificate to serve the API over TLS with.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA: clients of /v1 must present a certificate it signed (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// How long a reload may take to bring up a worker on the new bundle.
    #[arg(long, default_value = "30", value_name = "SECONDS")]
    pub reload_timeout: u64,
    /// Largest bundle taken (configuration plus files, bytes).
    #[arg(long, default_value_t = agent::Limits::default().max_bundle_bytes)]
    pub max_bundle_bytes: usize,
    /// Where HAProxy's SPOE filters reach the agent (SPOP: external
    /// authentication); loopback inside the pod. The controller's
    /// `--spoa-address` must name the same place. `none`: no SPOA (the
    /// other agents of `haptic run`, which share the first one's).
    #[arg(long, env = "HAPTIC_AGENT_SPOA_LISTEN", default_value = haptic::library::DEFAULT_SPOA_ADDRESS)]
    pub spoa_listen: String,
    /// Let auth services be on loopback (`haptic run`, tests): in a pod that
    /// is the pod itself, which a tenant's auth-url must never reach.
    #[arg(long)]
    pub spoa_allow_loopback: bool,
    /// Most auxiliary files in one bundle.
    #[arg(long, default_value_t = agent::Limits::default().max_files)]
    pub max_files: usize,
}

pub fn run(args: AgentArgs) -> Result<ExitCode> {
    let paths = &args.paths;
    let dir = paths.config_dir();
    let applier = agent::Applier::new(
        Haproxy {
            master_socket: paths.master_socket(),
            worker_socket: paths.worker_socket(),
        },
        dir,
        paths.validator()?,
        agent::Limits {
            max_bundle_bytes: args.max_bundle_bytes,
            max_files: args.max_files,
        },
        std::time::Duration::from_secs(args.reload_timeout),
    )
    .context("starting the agent")?;
    let config = server::ServerConfig {
        listen: args.listen,
        token_file: args.token_file,
        tls: match (args.tls_cert, args.tls_key) {
            (Some(cert), Some(key)) => Some(api_tls::ServerTls {
                cert,
                key,
                client_ca: args.tls_client_ca,
            }),
            _ => None,
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the agent's runtime")?;
    runtime.block_on(async {
        let spoa = std::sync::Arc::new(
            spoa::Spoa::new(
                spoa::Profiles::new(applier.config_dir().clone(), applier.applied()),
                spoa::Reach {
                    allow_loopback: args.spoa_allow_loopback,
                },
                applier.metrics.spoa.clone(),
            )
            .context("starting the SPOA's HTTP client")?,
        );
        if args.spoa_listen != "none" {
            tokio::spawn(spoa::serve(spoa, args.spoa_listen.clone()));
        }
        let serving = server::serve(std::sync::Arc::new(applier), config);
        tokio::select! {
            result = serving => result.context("serving the agent API"),
            _ = shutdown_signal() => Ok(()),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

//! The command line: the subcommands, the argument groups several share,
//! and one module per subcommand's front end (what it reads from the
//! command line and what it prints or serves). `main` parses and
//! dispatches; the work itself is the library's.

pub mod agent;
pub mod controller;
pub mod diff;
pub mod haproxy;
pub mod migrate;
pub mod new;
pub mod render;
pub mod run;
pub mod soft_stop;
pub mod status;
pub mod test;
pub mod validator;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

// `agent` here is the `haptic agent` front end, a child module.
use haptic::agent::{self as proxy_agent, disk::ConfigDir};
use haptic::fixtures;
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::tls::{DefaultCertificate, SecretPem};
use haptic::validate::Validator;
use haptic::values::Values;

#[derive(Debug, Parser)]
#[command(
    name = "haptic",
    version,
    about = "Kubernetes ingress controller for HAProxy, configured by WASM template libraries"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Render manifests into a validated haproxy.cfg, its files and planned status patches (no cluster needed).
    Render(render::RenderArgs),
    /// The whole data path on this machine: the controller on a directory of
    /// manifests (watched for edits), local HAProxy processes with their
    /// agents, status shown at /status. Ctrl-C stops everything.
    Run(Box<run::RunArgs>),
    /// Run the controller: watch what the enabled libraries declare, render,
    /// validate with `haproxy -c`, deploy to every HAProxy pod's agent, and
    /// write status (the readiness gate) by server-side apply.
    Controller(Box<controller::ControllerArgs>),
    /// Serve `haproxy -c` to the controller on a Unix socket: the chart runs
    /// it in a container of the controller pod that has no service-account
    /// token, since HAProxy runs code it parses (`lua-load`).
    Validator(validator::ValidatorArgs),
    /// Serve the agent API beside HAProxy in a proxy pod: apply bundles from
    /// the controller (runtime commands or a reload), report what every live
    /// worker runs. HAProxy itself is started by `haptic haproxy`.
    Agent(agent::AgentArgs),
    /// HAProxy's container entry point: prepare the configuration directory
    /// (the last applied bundle, or a bootstrap one), then exec HAProxy in
    /// master-worker mode with its master socket.
    Haproxy(haproxy::HaproxyArgs),
    /// HAProxy's preStop hook: wait --delay seconds (load balancers stop
    /// sending), send HAProxy SIGUSR1 (soft stop: workers finish their
    /// connections) and return once it has exited.
    SoftStop(soft_stop::SoftStopArgs),
    /// Why a rollout waits: the HAProxy fleet (each pod's workers and the
    /// render each routes per) and the readiness gates waiting, with what
    /// they wait for, from the controller's `/debug/fleet` and `/debug/gates`.
    /// Exits 1 when a gate has waited longer than --warn-after.
    Status(status::StatusArgs),
    /// What a change would do: renders OLD and NEW (manifest files or
    /// directories, each with its own values if given) and prints a unified
    /// diff of haproxy.cfg and every file (key material as changed/unchanged
    /// only), the status patches that change, and whether the agents would
    /// apply it at runtime or need a reload. Exits 1 when anything differs.
    Diff(Box<diff::DiffArgs>),
    /// Moving off ingress-nginx.
    #[command(subcommand)]
    Migrate(migrate::MigrateCommand),
    /// Run a template library's fixture tests.
    #[command(after_long_help = fixtures::FORMAT)]
    Test(test::TestArgs),
    /// Start a template library of your own: a standalone Cargo project (SDK
    /// dependency, pinned toolchain, Makefile, fixtures), or with `--lang
    /// python` a Python module (Makefile, unit test, fixtures), whose `make
    /// test` builds it and passes `haptic test` as written.
    New(new::NewArgs),
}

/// The paths HAProxy and the agent share (one emptyDir in a pod).
#[derive(Debug, clap::Args)]
pub struct ProxyPaths {
    /// The configuration directory: bundles, `current/haproxy.cfg`, the agent's state.
    #[arg(
        long,
        env = "HAPTIC_CONFIG_DIR",
        default_value = "/var/lib/haptic/haproxy"
    )]
    pub config_dir: PathBuf,
    /// HAProxy's master CLI socket (default: `<config-dir>/master.sock`).
    #[arg(long, env = "HAPTIC_MASTER_SOCKET")]
    pub master_socket: Option<PathBuf>,
    /// The worker's admin stats socket the agent writes into every
    /// configuration (default: `<config-dir>/worker.sock`).
    #[arg(long, env = "HAPTIC_WORKER_SOCKET")]
    pub worker_socket: Option<PathBuf>,
    /// The haproxy binary (default: `$HAPTIC_HAPROXY`, else `haproxy` on PATH or in /usr/sbin).
    #[arg(long)]
    pub haproxy: Option<PathBuf>,
}

impl ProxyPaths {
    pub fn master_socket(&self) -> PathBuf {
        self.master_socket
            .clone()
            .unwrap_or_else(|| proxy_agent::default_master_socket(&self.config_dir))
    }

    pub fn worker_socket(&self) -> PathBuf {
        self.worker_socket
            .clone()
            .unwrap_or_else(|| proxy_agent::default_worker_socket(&self.config_dir))
    }

    pub fn config_dir(&self) -> ConfigDir {
        ConfigDir::new(self.config_dir.clone(), self.worker_socket())
    }

    pub fn validator(&self) -> Result<Validator> {
        Ok(match &self.haproxy {
            Some(binary) => Validator::new(binary.clone()),
            None => Validator::from_env()?,
        })
    }
}

/// The libraries and values every rendering command takes.
#[derive(Debug, clap::Args)]
pub struct LibraryArgs {
    /// A Helm-style values file (`templateLibraries.<name>...` or `controller.templateLibraries...`).
    #[arg(short = 'f', long = "values", env = "HAPTIC_VALUES")]
    pub values: Option<PathBuf>,
    /// Override a value, e.g. `--set templateLibraries.kubernetesBackends.podReadinessGate.enabled=true`.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub set: Vec<String>,
    /// A custom template library (.wasm component) to render with the bundled ones.
    #[arg(short = 'l', long = "library")]
    pub libraries: Vec<PathBuf>,
    /// The certificate and key (one PEM file) served when SNI matches no TLS
    /// host, unless values name a Secret for it. Created 0600 with a fresh
    /// self-signed certificate when missing, so it stays the same across
    /// runs. Default: `~/.local/state/haptic/default-certificate.pem` for
    /// `render` and `run`; one generated in memory for `controller`.
    #[arg(long, env = "HAPTIC_DEFAULT_CERTIFICATE", value_name = "FILE")]
    pub default_certificate: Option<PathBuf>,
    /// Where HAProxy reaches the agent's SPOP listener (the agents'
    /// `--spoa-listen`), as libraries get it from the `agent` import.
    #[arg(long, env = "HAPTIC_SPOA_ADDRESS", default_value = haptic::library::DEFAULT_SPOA_ADDRESS)]
    pub spoa_address: String,
}

impl LibraryArgs {
    /// The values file (or none) with every `--set` applied.
    pub fn values(&self) -> Result<Values> {
        self.values_from(self.values.as_deref())
    }

    /// `file` (or none) with every `--set` applied.
    pub fn values_from(&self, file: Option<&Path>) -> Result<Values> {
        let mut values = match file {
            Some(path) => Values::load(path)?,
            None => Values::default(),
        };
        for assignment in &self.set {
            values.set_assignment(assignment)?;
        }
        Ok(values)
    }

    /// The library runtime, with the default certificate from
    /// `--default-certificate`, else (when `local`) from the user's state
    /// directory, else generated for this process.
    pub fn runtime(&self, local: bool) -> Result<LibraryRuntime> {
        let path = self
            .default_certificate
            .clone()
            .or_else(|| local.then(DefaultCertificate::local_path).flatten());
        let default_certificate = match path {
            Some(path) => Some(DefaultCertificate::load_or_create(&path)?.pem),
            None => None,
        };
        runtime_with(default_certificate, self.spoa_address.clone())
    }
}

/// The library runtime with a default certificate generated in memory.
pub fn runtime() -> Result<LibraryRuntime> {
    runtime_with(None, haptic::library::DEFAULT_SPOA_ADDRESS.to_owned())
}

fn runtime_with(
    default_certificate: Option<SecretPem>,
    spoa_address: String,
) -> Result<LibraryRuntime> {
    let cache_dir = std::env::var_os("HAPTIC_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/haptic")));
    if let (Some(cache), Some(precompiled)) =
        (&cache_dir, std::env::var_os("HAPTIC_PRECOMPILED_DIR"))
    {
        // Without it every library is compiled again: slower, still correct.
        if let Err(error) = haptic::precompiled::seed(Path::new(&precompiled), cache) {
            tracing::warn!(
                "cannot copy the precompiled libraries of {} into {}: {error}",
                Path::new(&precompiled).display(),
                cache.display()
            );
        }
    }
    LibraryRuntime::new(RuntimeConfig {
        cache_dir,
        default_certificate,
        spoa_address,
        ..RuntimeConfig::default()
    })
    .context("starting the template library runtime")
}

/// SIGTERM or Ctrl-C. The agent holds nothing that needs flushing: every
/// apply is on disk before it is answered, and HAProxy is not its child.
pub async fn shutdown_signal() {
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match terminate.as_mut() {
                Some(signal) => { signal.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}

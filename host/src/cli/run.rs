//! `haptic run`: the whole data path on this machine, from a directory of
//! manifests.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use super::{LibraryArgs, shutdown_signal};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Manifest files or directories (watched; subdirectories too).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub libraries: LibraryArgs,
    /// How many local HAProxy instances (each with its agent) to deploy to.
    #[arg(long, default_value_t = 1)]
    pub proxies: usize,
    /// The first HAProxy's HTTP port on 127.0.0.1; the others count up from it.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Start an echo server on every (loopback) endpoint address of the manifests.
    #[arg(long)]
    pub demo_backends: bool,
    /// Scratch directory for the HAProxy configuration directories (default: a temporary one).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Address of /status, /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8451")]
    pub listen: std::net::SocketAddr,
}

pub fn run(args: RunArgs) -> Result<ExitCode> {
    let values = haptic::local::local_values(args.libraries.values()?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let libraries = haptic::engine::load_libraries(
            &args.libraries.runtime(true)?,
            &args.libraries.libraries,
        )?;
        let engine = haptic::engine::Engine::new(libraries, values.clone())?;
        let options = haptic::local::RunOptions {
            inputs: args.inputs,
            values,
            proxies: args.proxies,
            http_port: args.port,
            demo_backends: args.demo_backends,
            dir: args.dir,
            listen: args.listen,
            spoa_address: args.libraries.spoa_address.clone(),
        };
        haptic::local::run_locally(options, engine, shutdown_signal()).await
    })?;
    Ok(ExitCode::SUCCESS)
}

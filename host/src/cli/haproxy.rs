//! `haptic haproxy`: HAProxy's container entry point.

use anyhow::Result;

use super::ProxyPaths;
use haptic::agent;

#[derive(Debug, clap::Args)]
pub struct HaproxyArgs {
    #[command(flatten)]
    pub paths: ProxyPaths,
    /// Extra arguments passed to haproxy as they are.
    #[arg(last = true)]
    pub extra: Vec<String>,
}

/// Execs HAProxy: returns only when it could not.
pub fn run(args: &HaproxyArgs) -> Result<std::process::ExitCode> {
    let HaproxyArgs { paths, extra } = args;
    let error = agent::launch::exec_haproxy(
        &paths.validator()?,
        &paths.config_dir(),
        &paths.master_socket(),
        extra,
    );
    Err(anyhow::Error::new(error))
}

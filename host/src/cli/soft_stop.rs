//! `haptic soft-stop`: HAProxy's preStop hook.

use std::process::ExitCode;

use anyhow::Result;

use haptic::agent;

#[derive(Debug, clap::Args)]
pub struct SoftStopArgs {
    /// Seconds to wait before stopping.
    #[arg(long, default_value = "0", value_name = "SECONDS")]
    pub delay: u64,
    /// HAProxy's process id (1: the container's main process).
    #[arg(long, default_value = "1")]
    pub pid: i32,
}

pub fn run(args: &SoftStopArgs) -> Result<ExitCode> {
    agent::stop::soft_stop(args.pid, std::time::Duration::from_secs(args.delay))?;
    Ok(ExitCode::SUCCESS)
}

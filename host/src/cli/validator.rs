//! `haptic validator`: `haproxy -c` served to the controller on a Unix
//! socket.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use super::shutdown_signal;

#[derive(Debug, clap::Args)]
pub struct ValidatorArgs {
    /// The socket to listen on (an emptyDir shared with the controller).
    #[arg(long, env = "HAPTIC_VALIDATOR_SOCKET")]
    pub socket: PathBuf,
}

pub fn run(args: &ValidatorArgs) -> Result<ExitCode> {
    let socket = &args.socket;
    let validator = haptic::validate::Validator::from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the validator's runtime")?;
    runtime.block_on(async {
        tokio::select! {
            served = haptic::validate::remote::serve(socket, validator) => served.map_err(anyhow::Error::from),
            () = shutdown_signal() => Ok(()),
        }
    })?;
    Ok(ExitCode::SUCCESS)
}

//! `haptic status`: why a rollout waits, read from a running controller's
//! `/debug/fleet` and `/debug/gates`.

use std::process::ExitCode;

use anyhow::{Context as _, Result};

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The controller's metrics port (`kubectl port-forward` it to reach a cluster's).
    #[arg(
        long,
        env = "HAPTIC_CONTROLLER_URL",
        default_value = "http://127.0.0.1:8451"
    )]
    pub controller: String,
    /// Only this gated pod: what its readiness gate waits for.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub pod: Option<String>,
    /// Exit 1 when a gate has waited longer than this many seconds.
    #[arg(long, default_value = "300", value_name = "SECONDS")]
    pub warn_after: u64,
    /// Print the reports as JSON instead.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &StatusArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let (fleet, gates) = runtime.block_on(haptic::inspect::rollout::fetch(
        &args.controller,
        std::time::Duration::from_secs(10),
    ))?;
    let warn_after = std::time::Duration::from_secs(args.warn_after);
    let (text, late) =
        haptic::inspect::rollout::describe(&fleet, &gates, args.pod.as_deref(), warn_after);
    if args.json {
        let reports = serde_json::json!({"fleet": fleet, "gates": gates});
        println!("{}", serde_json::to_string_pretty(&reports)?);
    } else {
        print!("{text}");
    }
    Ok(if late {
        eprintln!(
            "a readiness gate has waited longer than --warn-after ({}s)",
            args.warn_after
        );
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

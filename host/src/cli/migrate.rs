//! `haptic migrate`: moving off ingress-nginx (`haptic migrate report`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Subcommand;

use super::LibraryArgs;
use haptic::migrate;
use haptic::offline::{self, Job};

#[derive(Debug, Subcommand)]
pub enum MigrateCommand {
    /// Per Ingress the `ingress-nginx` library serves, each
    /// nginx.ingress.kubernetes.io annotation as honoured, honoured with a
    /// stated difference, not honoured (and why) or invalid, with totals:
    /// the same library output the controller turns into Events and its
    /// haptic_ingress_nginx_annotations metric. Renders (and validates)
    /// exactly as `haptic render`, with the library enabled unless the
    /// values say otherwise.
    Report(Box<MigrateReportArgs>),
}

#[derive(Debug, clap::Args)]
pub struct MigrateReportArgs {
    /// Manifest files or directories (e.g. `kubectl get ingress,service,endpointslice,ingressclass -A -o yaml`).
    #[arg(required_unless_present = "cluster", conflicts_with = "cluster")]
    pub inputs: Vec<PathBuf>,
    /// Read the objects from the cluster of the current kubeconfig context
    /// instead (list only, what the enabled libraries watch; nothing is written).
    #[arg(long)]
    pub cluster: bool,
    #[command(flatten)]
    pub libraries: LibraryArgs,
}
pub fn report(args: &MigrateReportArgs) -> Result<ExitCode> {
    let runtime = args.libraries.runtime(true)?;
    let mut values = args.libraries.values()?;
    let library = migrate::LIBRARY;
    let set_by_user = values
        .template_libraries()
        .get(&haptic::values::camel_case(library))
        .is_some_and(|settings| settings.get("enabled").is_some());
    if !set_by_user {
        values.set("templateLibraries.ingressNginx.enabled", "true")?;
    }
    let job = Job {
        inputs: args.inputs.clone(),
        values,
        custom_libraries: args.libraries.libraries.clone(),
        validate: true,
    };
    let loaded = offline::load_libraries(&runtime, &job.custom_libraries)?;
    let output = if args.cluster {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        offline::render_listed(&job, loaded, |targets| {
            tokio.block_on(haptic::source::kubernetes::list_once(targets))
        })?
    } else {
        offline::render(&job, loaded)?
    };
    print!("{}", output.migration);
    if let Some(by) = &output.validated_by {
        eprintln!("the configuration behind this report was validated by {by}");
    }
    Ok(ExitCode::SUCCESS)
}

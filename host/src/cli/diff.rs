//! `haptic diff`: what a change would do, from two renders.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use super::LibraryArgs;
use haptic::offline::{self, Job};

#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The manifests as they are (files or directories).
    pub old: PathBuf,
    /// The manifests as they would be.
    pub new: PathBuf,
    #[command(flatten)]
    pub libraries: LibraryArgs,
    /// Values for OLD instead of --values.
    #[arg(long, value_name = "FILE")]
    pub old_values: Option<PathBuf>,
    /// Values for NEW instead of --values.
    #[arg(long, value_name = "FILE")]
    pub new_values: Option<PathBuf>,
    /// Skip `haproxy -c` of both renders.
    #[arg(long)]
    pub no_validate: bool,
}

pub fn run(args: &DiffArgs) -> Result<ExitCode> {
    let runtime = args.libraries.runtime(true)?;
    let render = |inputs: &Path, values_file: Option<&PathBuf>| -> Result<offline::JobOutput> {
        let values = args.libraries.values_from(
            values_file
                .or(args.libraries.values.as_ref())
                .map(PathBuf::as_path),
        )?;
        let job = Job {
            inputs: vec![inputs.to_path_buf()],
            values,
            custom_libraries: args.libraries.libraries.clone(),
            validate: !args.no_validate,
        };
        let loaded = offline::load_libraries(&runtime, &job.custom_libraries)?;
        offline::render(&job, loaded).with_context(|| format!("rendering {}", inputs.display()))
    };
    let old = render(&args.old, args.old_values.as_ref())?;
    let new = render(&args.new, args.new_values.as_ref())?;
    let difference = haptic::inspect::diff::compare_jobs(&old, &new);
    print!("{difference}");
    Ok(if difference.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

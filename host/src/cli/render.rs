//! `haptic render`: manifests in, a validated configuration, its files and
//! the planned status patches out, on stdout or into a directory; warnings
//! and what was left out on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use super::LibraryArgs;
use haptic::offline::{self, Job};

#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// Manifest files or directories (multi-document YAML, as `kubectl apply -f` takes them).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub libraries: LibraryArgs,
    /// Write haproxy.cfg, files and status-patches/ into this directory instead of stdout.
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Skip `haproxy -c` (not recommended: the result may not load).
    #[arg(long)]
    pub no_validate: bool,
}

/// `haptic render`'s exit status when it rendered and validated the
/// configuration without the objects it failed with (each named on stderr).
const RENDERED_WITH_WITHHELD: u8 = 3;

pub fn run(args: RenderArgs) -> Result<ExitCode> {
    let RenderArgs {
        inputs,
        libraries,
        out,
        no_validate,
    } = args;
    let runtime = libraries.runtime(true)?;
    let job = Job {
        inputs,
        values: libraries.values()?,
        custom_libraries: libraries.libraries,
        validate: !no_validate,
    };
    let loaded = offline::load_libraries(&runtime, &job.custom_libraries)?;
    let output = offline::render(&job, loaded)?;
    for warning in &output.haproxy_warnings {
        eprintln!("haproxy warning: {warning}");
    }
    for blamed in &output.library_warnings {
        let (library, _, warning) = &blamed.warning;
        eprintln!(
            "warning from {library} ({}): {}",
            warning.reason, warning.message
        );
    }
    let records = output.migration_records;
    if records > 0 {
        eprintln!(
            "{records} ingress-nginx annotation(s) honoured as ingress-nginx does (`haptic migrate report` lists every annotation)"
        );
    }
    for warning in &output.self_loops {
        eprintln!("warning: {warning}");
    }
    for withheld in &output.withheld {
        eprintln!(
            "warning ({}): {}",
            haptic::engine::WITHHELD_REASON,
            withheld.message()
        );
    }
    if let Some(isolation) = &output.isolation {
        eprintln!(
            "the render failed with {} object(s), left out above; finding them took {} validation(s), {} ms",
            isolation.withheld.len(),
            isolation.probes,
            isolation.elapsed.as_millis()
        );
    }
    let validated = match &output.validated_by {
        Some(by) => format!("validated by {by}"),
        None => "NOT validated (--no-validate): HAProxy may refuse it".to_owned(),
    };
    match out {
        Some(dir) => {
            offline::write_dir(&output, &dir)
                .with_context(|| format!("writing the render to {}", dir.display()))?;
            eprintln!(
                "wrote haproxy.cfg ({} lines), {} files and {} status patches to {}; {validated}",
                output.rendered.config.lines().count(),
                output.rendered.files.len(),
                output
                    .rendered
                    .status_patches
                    .values()
                    .map(Vec::len)
                    .sum::<usize>(),
                dir.display()
            );
        }
        None => {
            print!("{}", offline::to_text(&output));
            eprintln!("haproxy.cfg {validated}");
        }
    }
    // Rendered, but not everything: a pipeline that checks
    // manifests with `haptic render` must notice.
    Ok(if output.withheld.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(RENDERED_WITH_WITHHELD)
    })
}

//! The `haptic` binary: one entry point, a subcommand per job.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand};

use haptic::fixtures::{self, LibraryUnderTest};
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job};
use haptic::values::Values;

#[derive(Debug, Parser)]
#[command(
    name = "haptic",
    version,
    about = "Kubernetes ingress controller for HAProxy, configured by WASM template libraries"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Render manifests into a validated haproxy.cfg, its files and planned status patches (no cluster needed).
    Render {
        /// Manifest files or directories (multi-document YAML, as `kubectl apply -f` takes them).
        #[arg(required = true)]
        inputs: Vec<PathBuf>,
        /// A Helm-style values file (`templateLibraries.<name>...`).
        #[arg(short = 'f', long = "values")]
        values: Option<PathBuf>,
        /// Override a value, e.g. `--set templateLibraries.kubernetesBackends.podReadinessGate.enabled=true`.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        set: Vec<String>,
        /// A custom template library (.wasm component) to render with the bundled ones.
        #[arg(short = 'l', long = "library")]
        libraries: Vec<PathBuf>,
        /// Write haproxy.cfg, files and status-patches/ into this directory instead of stdout.
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Skip `haproxy -c` (not recommended: the result may not load).
        #[arg(long)]
        no_validate: bool,
    },
    /// Run a template library's fixture tests.
    Test {
        /// A bundled library's name (e.g. `kubernetes-backends`) or the path of a .wasm component.
        library: String,
        /// The directory holding one folder per case (default: `<library>/fixtures` for bundled ones).
        #[arg(long)]
        fixtures: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HAPTIC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<LibraryRuntime> {
    let cache_dir = std::env::var_os("HAPTIC_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/haptic")));
    LibraryRuntime::new(RuntimeConfig {
        cache_dir,
        ..RuntimeConfig::default()
    })
    .context("starting the template library runtime")
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Render {
            inputs,
            values,
            set,
            libraries,
            out,
            no_validate,
        } => {
            let mut values = match values {
                Some(path) => Values::load(&path)?,
                None => Values::default(),
            };
            for assignment in &set {
                values.set_assignment(assignment)?;
            }
            let job = Job {
                inputs,
                values,
                custom_libraries: libraries,
                validate: !no_validate,
            };
            let runtime = runtime()?;
            let loaded = offline::load_libraries(&runtime, &job.custom_libraries)?;
            let output = offline::render(&job, loaded)?;
            for warning in &output.warnings {
                eprintln!("haproxy warning: {warning}");
            }
            match out {
                Some(dir) => {
                    offline::write_dir(&output, &dir)
                        .with_context(|| format!("writing the render to {}", dir.display()))?;
                    eprintln!(
                        "wrote haproxy.cfg ({} lines), {} files and {} status patches to {}",
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
                None => print!("{}", offline::to_text(&output)),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Test {
            library,
            fixtures: dir,
        } => {
            let under_test = if library.ends_with(".wasm") {
                LibraryUnderTest::Custom(PathBuf::from(&library))
            } else {
                LibraryUnderTest::Bundled(library.clone())
            };
            let dir = dir.unwrap_or_else(|| match &under_test {
                LibraryUnderTest::Bundled(name) => PathBuf::from("template-libraries")
                    .join(name)
                    .join("fixtures"),
                LibraryUnderTest::Custom(path) => path.with_file_name("fixtures"),
            });
            let reports = fixtures::run(&runtime()?, &under_test, &dir)?;
            let failed = reports.iter().filter(|r| !r.passed()).count();
            for report in &reports {
                let mark = if report.passed() { "ok  " } else { "FAIL" };
                println!("{mark} {} - {}", report.name, report.description);
                for failure in &report.failures {
                    println!("       {}", failure.replace('\n', "\n       "));
                }
            }
            println!("{} passed, {} failed", reports.len() - failed, failed);
            if reports.is_empty() {
                anyhow::bail!(
                    "no fixture cases found in {} (each case is a folder with expect.yaml)",
                    dir.display()
                );
            }
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

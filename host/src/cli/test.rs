//! `haptic test`: a template library's fixture cases, one line each, with
//! what failed and the `haptic render` that shows a failed case whole.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use haptic::fixtures::{self, LibraryUnderTest};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// A bundled library's name (e.g. `kubernetes-backends`) or the path of a .wasm component.
    pub library: String,
    /// The directory holding one folder per case (default: `template-libraries/<library>/fixtures`
    /// for bundled ones, `./fixtures` for a .wasm).
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
}

pub fn run(args: TestArgs) -> Result<ExitCode> {
    let TestArgs {
        library,
        fixtures: dir,
    } = args;
    let under_test = if library.ends_with(".wasm") {
        LibraryUnderTest::Custom(PathBuf::from(&library))
    } else {
        LibraryUnderTest::Bundled(library.clone())
    };
    let dir = dir.unwrap_or_else(|| match &under_test {
        LibraryUnderTest::Bundled(name) => PathBuf::from("template-libraries")
            .join(name)
            .join("fixtures"),
        LibraryUnderTest::Custom(_) => PathBuf::from("fixtures"),
    });
    let reports = fixtures::run_cases(&super::runtime()?, &under_test, &dir)?;
    let failed = reports.iter().filter(|r| !r.passed()).count();
    for report in &reports {
        let mark = if report.passed() { "ok  " } else { "FAIL" };
        println!("{mark} {} - {}", report.name, report.description);
        for failure in &report.failures {
            println!("       {}", failure.replace('\n', "\n       "));
        }
        if !report.passed() {
            println!(
                "       whole configuration: {}",
                render_command(&dir.join(&report.name), &under_test)
            );
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

/// The `haptic render` that shows a fixture case's whole configuration.
fn render_command(case: &Path, library: &LibraryUnderTest) -> String {
    let mut command = format!("haptic render {}", case.join("manifests.yaml").display());
    let values = case.join("values.yaml");
    if values.is_file() {
        command.push_str(&format!(" -f {}", values.display()));
    }
    if let LibraryUnderTest::Custom(path) = library {
        command.push_str(&format!(" -l {}", path.display()));
    }
    command
}

//! `haptic new`: a template library project of one's own, ready for
//! `make test`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};

use haptic::scaffold::{self, NewLibrary};

#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The directory to create; its last component names the library unless --name does.
    pub dir: PathBuf,
    /// The library's name (kebab-case, e.g. `ip-allow-list`).
    #[arg(long)]
    pub name: Option<String>,
    /// The language: `rust` (a Cargo project) or `python` (a module built with componentize-py).
    #[arg(long, value_enum, default_value_t)]
    pub lang: scaffold::Lang,
    /// The SDK to use: the haptic-sdk crate, or for Python the directory holding `haptic_sdk/`
    /// (default: the SDK of the checkout this haptic was built from).
    #[arg(long)]
    pub sdk: Option<PathBuf>,
}

pub fn run(args: NewArgs) -> Result<ExitCode> {
    let NewArgs {
        dir,
        name,
        lang,
        sdk,
    } = args;

    let name = match name {
        Some(name) => name,
        None => dir
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .context("the directory has no last component to name the library by; pass --name")?,
    };
    let haptic = std::env::current_exe().context("finding this haptic binary for the Makefile")?;
    let new = NewLibrary {
        dir: dir.clone(),
        name,
        lang,
        sdk: sdk.unwrap_or_else(|| scaffold::default_sdk(lang)),
        haptic,
    };
    let written = scaffold::create(&new)?;
    println!(
        "created template library `{}` in {} ({} files)",
        new.name,
        dir.display(),
        written.len()
    );
    println!("next: cd {} && make test", dir.display());
    Ok(ExitCode::SUCCESS)
}

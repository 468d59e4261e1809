//! The `haptic` binary: one entry point, a subcommand per job. The command
//! line's types and each subcommand's front end are [`cli`]'s.

mod cli;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser as _;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The offline jobs print their result; the long-running ones report
    // what they do (deploys, status changes) at info.
    let default_filter = match cli.command {
        Command::Render(_)
        | Command::Diff(_)
        | Command::Migrate(_)
        | Command::Status(_)
        | Command::Test(_)
        | Command::New(_)
        | Command::Haproxy(_)
        | Command::SoftStop(_) => "warn",
        _ => "warn,haptic=info",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HAPTIC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in pod logs.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match dispatch(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Render(args) => cli::render::run(args),
        Command::Status(args) => cli::status::run(&args),
        Command::Diff(args) => cli::diff::run(&args),
        Command::Migrate(cli::migrate::MigrateCommand::Report(args)) => cli::migrate::report(&args),
        Command::New(args) => cli::new::run(args),
        Command::Agent(args) => cli::agent::run(args),
        Command::Validator(args) => cli::validator::run(&args),
        Command::Controller(args) => cli::controller::run(*args),
        Command::Run(args) => cli::run::run(*args),
        Command::Haproxy(args) => cli::haproxy::run(&args),
        Command::SoftStop(args) => cli::soft_stop::run(&args),
        Command::Test(args) => cli::test::run(args),
    }
}

//! `haptic haproxy`: the HAProxy container's entry point. It makes sure the
//! configuration directory holds a complete bundle HAProxy accepts (the
//! bootstrap one on a new pod, the last applied one after a restart, the
//! last good one if the applied one is refused), then replaces itself with
//! HAProxy in master-worker mode, so HAProxy is the container's main
//! process and no haptic code stays between it and its signals.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;

use super::disk::ConfigDir;
use crate::validate::{CONFIG_FILE, Validator};

/// The command line HAProxy runs with: master-worker (`-W`), in the
/// foreground (`-db`), with the master CLI on `master_socket`.
pub fn haproxy_command(haproxy: &Path, dir: &ConfigDir, master_socket: &Path) -> Command {
    let mut command = Command::new(haproxy);
    command
        .arg("-W")
        .arg("-db")
        .arg("-S")
        .arg(format!("{},mode,600", master_socket.display()))
        .arg("-f")
        .arg(dir.current_config())
        .env(crate::validate::BUNDLE_ENV, dir.current_dir());
    command
}

/// Prepares `dir` and execs HAProxy; returns only if that fails.
pub fn exec_haproxy(
    validator: &Validator,
    dir: &ConfigDir,
    master_socket: &Path,
    extra: &[String],
) -> std::io::Error {
    let haproxy = &validator.binary;
    if let Err(error) = prepare(validator, dir) {
        return std::io::Error::new(
            error.kind(),
            format!(
                "preparing the configuration directory {}: {error}",
                dir.root().display()
            ),
        );
    }
    let error = haproxy_command(haproxy, dir, master_socket)
        .args(extra)
        .exec();
    std::io::Error::new(
        error.kind(),
        format!("starting {}: {error}", haproxy.display()),
    )
}

/// A complete bundle in `current/`, and one HAProxy accepts: the agent
/// leaves the judgement of a new bundle to the master's reload, so a
/// refused bundle can sit in `current/` for the moment the master takes to
/// refuse it. A start in that moment must not be a crash loop.
fn prepare(validator: &Validator, dir: &ConfigDir) -> std::io::Result<()> {
    dir.ensure_bootstrap()?;
    let (Some(current), Some(last_good)) = (dir.current(), dir.last_good()) else {
        return Ok(());
    };
    if current.id != last_good.id
        && validator
            .check_dir(&dir.bundle_dir(&current.id), CONFIG_FILE)
            .is_err()
    {
        eprintln!(
            "haptic haproxy: HAProxy refuses bundle {}; starting from the last good bundle {}",
            current.id, last_good.id
        );
        dir.set_current(&last_good.id)?;
    }
    Ok(())
}

//! `haptic haproxy`: the HAProxy container's entry point. It makes sure the
//! configuration directory holds a complete bundle (the bootstrap one on a
//! new pod, the last applied one after a restart), then replaces itself
//! with HAProxy in master-worker mode, so HAProxy is the container's main
//! process and no haptic code stays between it and its signals.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::disk::ConfigDir;

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
        .arg(dir.current_config());
    command
}

/// Prepares `dir` and execs HAProxy; returns only if that fails.
pub fn exec_haproxy(
    haproxy: &Path,
    dir: &ConfigDir,
    master_socket: &Path,
    extra: &[String],
) -> std::io::Error {
    if let Err(error) = dir.ensure_bootstrap() {
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
        format!("starting {}: {error}", PathBuf::from(haproxy).display()),
    )
}

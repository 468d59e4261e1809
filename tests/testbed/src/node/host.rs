//! Running the host's tools (`ip`, `iptables`, `ctr`, `umount`) and where the
//! node keeps its files.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Error;

/// Everything the node writes that it can choose the place of: containerd's
/// root, state and socket, the kubelet's root, CNI configuration and IPAM
/// state, pod logs, component logs. Fixed (not a temporary directory) so that
/// a bed killed without running its destructor is swept by the next one:
/// real-node beds run one at a time ([`super::lock`]).
pub(crate) const NODE_DIR: &str = "/var/lib/haptic-testbed-node";

/// A path inside [`NODE_DIR`].
pub(crate) fn node_path(rel: &str) -> PathBuf {
    Path::new(NODE_DIR).join(rel)
}

/// Runs `program args...`, returning its stdout; a non-zero exit is an error
/// that names the command and carries its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String, Error> {
    let command = format!("{program} {}", args.join(" "));
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| Error::Command {
            command: command.clone(),
            detail: format!("{e} (is it installed? `make testbed-node-setup`)"),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Command {
            command,
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

/// Creates a directory and its parents.
pub(crate) fn create_dir(path: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(path).map_err(|source| Error::Io {
        what: format!("create {}", path.display()),
        source,
    })
}

/// Writes a file, creating its directory.
pub(crate) fn write(path: &Path, text: &str) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        create_dir(dir)?;
    }
    std::fs::write(path, text).map_err(|source| Error::Io {
        what: format!("write {}", path.display()),
        source,
    })
}

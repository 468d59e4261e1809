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

/// What a run writes on top of the kubelet's eviction threshold: images
/// imported into containerd, pod and component logs, HAProxy's files.
const RUN_WRITES_MIB: u64 = 2 * 1024;

/// Fails when the filesystem of [`NODE_DIR`] has less free than the
/// kubelet's `nodefs.available` threshold (1 %, see the kubelet's
/// configuration) plus what a run writes. Seen: at 99 % used, four gate
/// scenarios failed with a gate set early, which pointed at the code.
pub(crate) fn check_free_space() -> Result<(), Error> {
    // The node's directory may not exist yet: its filesystem is its parent's.
    let dir = Path::new(NODE_DIR);
    let probe = if dir.exists() {
        dir
    } else {
        dir.parent().unwrap_or(Path::new("/"))
    };
    let stats = nix::sys::statvfs::statvfs(probe).map_err(|errno| Error::Io {
        what: format!("read the free space of {}", probe.display()),
        source: errno.into(),
    })?;
    let mib = |blocks: u64| blocks.saturating_mul(stats.fragment_size()) / (1024 * 1024);
    let free_mib = mib(stats.blocks_available());
    let size_mib = mib(stats.blocks());
    let needed_mib = size_mib / 100 + RUN_WRITES_MIB;
    if free_mib < needed_mib {
        return Err(Error::DiskFull {
            free_mib,
            size_mib,
            needed_mib,
        });
    }
    Ok(())
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

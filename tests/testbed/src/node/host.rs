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

/// What a run writes: images imported into containerd and unpacked, pod and
/// component logs, HAProxy's files (measured well under 1 GiB; twice that
/// for headroom).
const RUN_WRITES_MIB: u64 = 2 * 1024;

/// The size limit of the node's tmpfs: what a run writes plus the kubelet's
/// `nodefs.available` threshold (1 % of it) with room to spare. A limit, not a
/// reservation: tmpfs takes memory only for what is written.
const NODE_TMPFS_MIB: u64 = 4 * 1024;

/// Mounts a tmpfs of its own at [`NODE_DIR`], so the kubelet's view of its
/// node and image filesystems is that tmpfs, never the host's disk. The host's
/// disk is shared with cargo's target dirs and every other cache: at 99 % used
/// the kubelet evicted the test's pods (four gate scenarios failed with a gate
/// set early, which pointed at the code), and a CI machine whose caches had
/// grown failed every scenario before it began. Memory is what the node's files
/// take now, so this checks the host has it available.
pub(crate) fn mount_node_dir() -> Result<(), Error> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").map_err(|source| Error::Io {
        what: "read /proc/meminfo".to_owned(),
        source,
    })?;
    let available_mib = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kib| kib / 1024);
    if available_mib < RUN_WRITES_MIB {
        return Err(Error::MemoryShort {
            available_mib,
            needed_mib: RUN_WRITES_MIB,
        });
    }
    create_dir(Path::new(NODE_DIR))?;
    let options = format!("size={NODE_TMPFS_MIB}m,mode=0755");
    run(
        "mount",
        &[
            "-t",
            "tmpfs",
            "-o",
            &options,
            "haptic-testbed-node",
            NODE_DIR,
        ],
    )?;
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

//! One real node at a time on a machine.
//!
//! A kubelet and kube-proxy own host-wide things no configuration moves: the
//! `KUBE-*` iptables chains, `/kubepods` cgroups, `/var/log/containers`,
//! the ports 10250/10256. Rather than pretend two could share them, beds
//! with a real node take an exclusive lock on [`LOCK_FILE`] for their whole
//! life; tests that run in parallel queue here. The kernel drops the lock
//! when the process dies, however it dies.

use std::fs::File;

use super::Error;

/// The lock file (on tmpfs: a reboot forgets it).
pub(crate) const LOCK_FILE: &str = "/run/haptic-testbed-node.lock";

/// Holds the lock until dropped.
#[derive(Debug)]
pub(crate) struct NodeLock {
    _file: File,
}

impl NodeLock {
    /// Waits for the lock (on a blocking thread: the wait can last as long
    /// as another test's bed).
    pub(crate) async fn acquire() -> Result<Self, Error> {
        let io = |source| Error::Io {
            what: format!("lock {LOCK_FILE} (one real node at a time)"),
            source,
        };
        let file = tokio::task::spawn_blocking(move || -> std::io::Result<File> {
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(LOCK_FILE)?;
            file.lock()?;
            Ok(file)
        })
        .await
        .map_err(|e| io(std::io::Error::other(e)))?
        .map_err(io)?;
        Ok(Self { _file: file })
    }
}

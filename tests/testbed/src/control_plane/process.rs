//! One control-plane component running as a child process, its output in a log file.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use tokio::process::{Child, Command};

use super::ControlPlaneError;

/// A running etcd, kube-apiserver or kube-controller-manager.
///
/// Dropping it kills the process (SIGKILL), so a panicking test never leaves a control plane
/// behind.
#[derive(Debug)]
pub(crate) struct Component {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Component {
    /// Starts `binary args...` with stdout and stderr appended to `log`.
    ///
    /// The child gets its own process group, so a Ctrl-C in the developer's terminal reaches
    /// only the parent, which then stops the components in order. Where util-linux `setpriv`
    /// exists the child also gets SIGKILL as parent-death signal: if the test process dies
    /// without running destructors (SIGKILL, abort), the kernel still ends the components.
    pub(crate) fn spawn(
        name: &'static str,
        binary: &Path,
        args: &[String],
        log: PathBuf,
    ) -> Result<Self, ControlPlaneError> {
        let out = std::fs::File::create(&log).map_err(|source| ControlPlaneError::Io {
            what: format!("create the {name} log file {}", log.display()),
            source,
        })?;
        let err = out.try_clone().map_err(|source| ControlPlaneError::Io {
            what: format!("duplicate the {name} log file handle"),
            source,
        })?;
        let mut cmd = match setpriv() {
            Some(setpriv) => {
                let mut cmd = Command::new(setpriv);
                cmd.arg("--pdeathsig").arg("KILL").arg("--").arg(binary);
                cmd
            }
            None => Command::new(binary),
        };
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|source| ControlPlaneError::Spawn {
            component: name,
            binary: binary.to_path_buf(),
            source,
        })?;
        Ok(Self { name, child, log })
    }

    /// The component's name, as used in errors.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The file that holds the component's stdout and stderr.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// The process id, while the process runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Fails with the end of the component's log if it has exited.
    pub(crate) fn ensure_running(&mut self) -> Result<(), ControlPlaneError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(self.exited(status)),
            Err(source) => Err(ControlPlaneError::Io {
                what: format!("check whether {} still runs", self.name),
                source,
            }),
        }
    }

    fn exited(&self, status: ExitStatus) -> ControlPlaneError {
        ControlPlaneError::Exited {
            component: self.name,
            status,
            log: self.log.clone(),
            tail: log_tail(&self.log),
        }
    }

    /// Resident set size in bytes, from `/proc/<pid>/status`.
    pub(crate) fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }

    /// Kills the process and reaps it.
    pub(crate) async fn kill(&mut self) {
        // An error here means the process is already gone, which is the goal.
        let _ = self.child.kill().await;
    }

    /// Sends SIGKILL without waiting, for `Drop`.
    pub(crate) fn start_kill(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The last lines of a log file, for error messages; empty if it cannot be read.
pub(crate) fn log_tail(log: &Path) -> String {
    const LINES: usize = 15;
    let Ok(text) = std::fs::read_to_string(log) else {
        return String::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LINES)..].join("\n")
}

fn setpriv() -> Option<&'static Path> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
}

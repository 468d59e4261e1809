//! `haptic soft-stop`: the HAProxy container's preStop hook. The image has
//! no shell, so the hook the chart used to write in `sh` (`sleep; kill -USR1
//! 1; wait`) is this command.
//!
//! HAProxy in master-worker mode stops *hard* on SIGTERM (workers drop what
//! they serve) and *soft* on SIGUSR1 (listeners close, workers finish their
//! connections until `hard-stop-after`, then the master exits). Kubernetes
//! sends SIGTERM once preStop returns, so the hook must send SIGUSR1 and
//! return only when HAProxy has gone; the delay before it lets load
//! balancers and kube-proxy stop sending new connections first.

use std::thread::sleep;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process, test_kill_process};

/// How often the hook checks whether HAProxy has exited.
const POLL: Duration = Duration::from_millis(200);

/// Why the soft stop could not be asked for.
#[derive(Debug, thiserror::Error)]
pub enum StopError {
    /// Process ids are positive.
    #[error("{0} is not a process id (give a positive number, e.g. --pid 1)")]
    BadPid(i32),
    /// The signal was refused (another user's process, or none such).
    #[error(
        "cannot send SIGUSR1 to process {pid}: {source} (run the hook in HAProxy's own container, as its user)"
    )]
    Signal {
        pid: i32,
        #[source]
        source: std::io::Error,
    },
}

/// Waits `delay`, asks `pid` to soft-stop with SIGUSR1 and returns once it
/// has exited. A process already gone is a stop that succeeded.
pub fn soft_stop(pid: i32, delay: Duration) -> Result<(), StopError> {
    let target = Pid::from_raw(pid).ok_or(StopError::BadPid(pid))?;
    sleep(delay);
    match kill_process(target, Signal::USR1) {
        Ok(()) => {}
        Err(rustix::io::Errno::SRCH) => return Ok(()),
        Err(errno) => {
            return Err(StopError::Signal {
                pid,
                source: errno.into(),
            });
        }
    }
    // The kubelet bounds the hook by terminationGracePeriodSeconds; HAProxy
    // bounds itself by hard-stop-after. No deadline of our own is needed.
    // In a container HAProxy is PID 1, and its exit kills this hook with
    // the rest of the PID namespace: the wait ends either way.
    while test_kill_process(target).is_ok() {
        sleep(POLL);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_positive_pid_is_refused_before_waiting() {
        let error = soft_stop(0, Duration::from_secs(3600)).expect_err("pid 0 is refused");
        assert!(
            error.to_string().contains("0 is not a process id"),
            "{error}"
        );
    }

    #[test]
    fn a_process_that_is_gone_has_stopped() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = i32::try_from(child.id()).expect("pid fits");
        child.wait().expect("reap true");
        soft_stop(pid, Duration::ZERO).expect("a reaped process counts as stopped");
    }

    #[test]
    fn waits_until_the_process_exits_on_sigusr1() {
        // `sleep` has no SIGUSR1 handler: the signal ends it, as soft-stop
        // ends HAProxy. The hook must return only once it is reaped.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = i32::try_from(child.id()).expect("pid fits");
        let reaper = std::thread::spawn(move || child.wait().expect("reap sleep"));
        soft_stop(pid, Duration::ZERO).expect("soft stop");
        // A zombie still answers signal 0, so returning at all means the
        // process was reaped (the test hangs otherwise).
        let status = reaper.join().expect("reaper thread");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(Signal::USR1.as_raw())
        );
    }
}

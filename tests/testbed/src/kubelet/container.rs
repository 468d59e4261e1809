//! Running one container instance as a local process.
//!
//! The process gets exactly the environment kubelet would give it (nothing
//! inherited from the test), its own process group standing in for the
//! container's PID namespace, stdout and stderr in a per-instance log file, and
//! `setpriv --pdeathsig KILL`, so it dies with the kubelet even if the kubelet
//! is killed without running destructors.
//!
//! Linux sends the parent-death signal when the *thread* that forked the
//! child exits, not the process. Every container is therefore forked from one
//! thread of the kubelet's own ([`Spawner`]) that lives as long as the
//! kubelet's registry: forked from whichever runtime thread ran the pod
//! worker, a container died whenever tokio retired that thread (a thread that
//! ran `block_in_place`, as the in-process controller does for every render,
//! ends up in the blocking pool and exits after 10 s idle).
//!
//! Volume mounts are made faithful with a private mount namespace per
//! container: `unshare --mount --propagation private` runs a short `bash`
//! script that bind-mounts each volume at its `mountPath` (read-only when
//! asked) and then `exec`s the program, so `/var/run/secrets/kubernetes.io/serviceaccount`
//! holds the pod's token only for that process. The script opens every
//! source before it mounts anything and mounts from those descriptors, as a
//! runtime resolves sources before it builds the container's view: a volume
//! at `/tmp` would otherwise hide the kubelet's own state directory (under
//! `/tmp` by default), and every later volume with it. Missing mount points
//! are created on the host as empty directories (or empty files for a file
//! `subPath`); the host's own contents are never changed. Without volume
//! mounts no namespace is made.
//!
//! Exec probes and exec hooks ([`exec_command`]) run on the host like the
//! container, but in a PID namespace of their own: there is no container PID
//! namespace to join, and a command that signals by number, such as a
//! preStop `kill -USR1 1`, must not reach the test machine's PID 1. Inside,
//! PID 1 is the command itself, so such a signal is dropped (a namespace's
//! init ignores signals it has no handler for) and `kill -0 1` holds while
//! the command runs: a hook that waits for PID 1 to exit runs until the grace
//! period ends.
//!
//! Signals follow a container runtime: SIGTERM goes to the main process only
//! (PID 1 of a container; a supervisor such as the haptic agent decides how
//! its children stop), SIGKILL to the whole group, and when the main process
//! exits, whatever it left behind is SIGKILLed, as a PID namespace's teardown
//! would.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// Errors starting a container process.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The log file could not be created.
    #[error("creating the container log {path}: {source}")]
    Log {
        /// The log path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The process could not be started (setpriv/unshare missing, ...).
    #[error("starting {argv0:?}: {source}; the test bed needs util-linux (setpriv, unshare)")]
    Spawn {
        /// The program.
        argv0: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The kubelet's spawning thread could not be started or is gone.
    #[error("the kubelet's container-spawning thread {0}; the machine may be out of threads")]
    Spawner(&'static str),
    /// The container has nothing to run.
    #[error("the container has no command and its image maps to no program")]
    NoCommand,
}

/// A bind mount into the container's view of the filesystem.
#[derive(Clone, Debug)]
pub(crate) struct Mount {
    pub source: PathBuf,
    pub target: String,
    pub read_only: bool,
}

/// Everything needed to start one container instance.
#[derive(Clone, Debug)]
pub(crate) struct Launch {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub workdir: String,
    pub log: PathBuf,
}

/// Process groups alive right now, so a dropped kubelet can kill them all
/// synchronously, and the thread that forks them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Registry {
    groups: Arc<Mutex<HashSet<i32>>>,
    spawner: Arc<OnceLock<Option<Spawner>>>,
}

/// A job for the spawning thread.
type Job = Box<dyn FnOnce() + Send>;

/// The one thread that forks a kubelet's containers (see the module docs).
/// It is started from a thread of the kubelet's runtime, so it is in the pod
/// network, as is everything it forks, and it ends when the last handle to
/// the registry is dropped.
#[derive(Debug)]
struct Spawner {
    jobs: mpsc::Sender<Job>,
}

impl Spawner {
    fn start() -> Option<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("kubelet-spawner".into())
            .spawn(move || {
                for job in queue {
                    job();
                }
            })
            .ok()?;
        Some(Self { jobs })
    }

    /// Runs `cmd.spawn()` on the spawning thread, registering the child
    /// with the caller's tokio runtime.
    fn spawn(&self, mut cmd: Command) -> Result<std::io::Result<Child>, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Spawner("needs a tokio runtime"))?;
        let (reply, answer) = mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move || {
                let _entered = runtime.enter();
                let _ = reply.send(cmd.spawn());
            }))
            .map_err(|_| Error::Spawner("has stopped"))?;
        answer.recv().map_err(|_| Error::Spawner("has stopped"))
    }
}

impl Registry {
    fn spawner(&self) -> Result<&Spawner, Error> {
        self.spawner
            .get_or_init(Spawner::start)
            .as_ref()
            .ok_or(Error::Spawner("could not be started"))
    }

    fn add(&self, pgid: i32) {
        if let Ok(mut set) = self.groups.lock() {
            set.insert(pgid);
        }
    }

    fn remove(&self, pgid: i32) {
        if let Ok(mut set) = self.groups.lock() {
            set.remove(&pgid);
        }
    }

    /// SIGKILLs every live group.
    pub(crate) fn kill_all(&self) {
        if let Ok(set) = self.groups.lock() {
            for pgid in set.iter() {
                let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
            }
        }
    }
}

/// A running container's process group; SIGKILLed when dropped.
#[derive(Debug)]
pub(crate) struct Process {
    pgid: i32,
    registry: Registry,
}

impl Process {
    pub(crate) fn pid(&self) -> i32 {
        self.pgid
    }

    /// Signals the main process only (a container's PID 1).
    pub(crate) fn signal_main(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.pgid), signal);
    }

    /// Signals the whole group; a group already gone is not an error.
    pub(crate) fn signal(&self, signal: Signal) {
        let _ = killpg(Pid::from_raw(self.pgid), signal);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
        self.registry.remove(self.pgid);
    }
}

/// How a process ended: exit code as kubelet reports it (128+N for signal N).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exit {
    pub code: i32,
    pub signal: Option<i32>,
}

/// Starts the container. The returned child is to be awaited for the exit.
pub(crate) fn spawn(launch: &Launch, registry: &Registry) -> Result<(Process, Child), Error> {
    let argv0 = launch.argv.first().ok_or(Error::NoCommand)?.clone();
    if let Some(dir) = launch.log.parent() {
        std::fs::create_dir_all(dir).map_err(|source| Error::Log {
            path: launch.log.clone(),
            source,
        })?;
    }
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&launch.log)
        .map_err(|source| Error::Log {
            path: launch.log.clone(),
            source,
        })?;
    let log_err = log.try_clone().map_err(|source| Error::Log {
        path: launch.log.clone(),
        source,
    })?;
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL", "--"]);
    if !launch.mounts.is_empty() {
        cmd.args([
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "bash",
            "-c",
        ])
        .arg(mount_script(&launch.mounts))
        .arg("bash");
    }
    cmd.args(&launch.argv)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err))
        .process_group(0)
        .kill_on_drop(true);
    let child = registry
        .spawner()?
        .spawn(cmd)?
        .map_err(|source| Error::Spawn { argv0, source })?;
    let pgid = child.id().map_or(0, |id| id as i32);
    registry.add(pgid);
    Ok((
        Process {
            pgid,
            registry: registry.clone(),
        },
        child,
    ))
}

/// Waits for the process and reports its exit like the container runtime.
pub(crate) async fn wait(mut child: Child) -> Exit {
    match child.wait().await {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => Exit { code, signal: None },
            (None, Some(sig)) => Exit {
                code: 128 + sig,
                signal: Some(sig),
            },
            (None, None) => Exit {
                code: 255,
                signal: None,
            },
        },
        Err(_) => Exit {
            code: 255,
            signal: None,
        },
    }
}

/// An exec probe's or hook's command: `argv` with exactly `env`, in a PID
/// namespace of its own (see the module docs), killed with everything it
/// started when dropped.
pub(crate) fn exec_command(argv: &[String], env: &[(String, String)]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--kill-child", "--"])
        .args(argv)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn mount_script(mounts: &[Mount]) -> String {
    let mut script = String::from("set -e\n");
    // Every source first: a mount may cover the path of a later one's source.
    for (i, m) in mounts.iter().enumerate() {
        let src = quote(&m.source.to_string_lossy());
        script.push_str(&format!("exec {{src{i}}}<{src}\n"));
    }
    for (i, m) in mounts.iter().enumerate() {
        let dst = quote(&m.target);
        if m.source.is_dir() {
            script.push_str(&format!("mkdir -p {dst}\n"));
        } else {
            script.push_str(&format!(
                "mkdir -p \"$(dirname {dst})\"; [ -e {dst} ] || touch {dst}\n"
            ));
        }
        script.push_str(&format!(
            "mount --no-canonicalize --bind \"/proc/self/fd/$src{i}\" {dst}\n"
        ));
        if m.read_only {
            script.push_str(&format!("mount -o remount,bind,ro {dst}\n"));
        }
    }
    for i in 0..mounts.len() {
        script.push_str(&format!("exec {{src{i}}}<&-\n"));
    }
    script.push_str("exec \"$@\"\n");
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mount_script_quotes_paths_and_remounts_read_only() {
        let script = mount_script(&[Mount {
            source: PathBuf::from("/"),
            target: "/etc/it's".into(),
            read_only: true,
        }]);
        assert!(script.contains("exec {src0}<'/'\n"), "{script}");
        assert!(
            script
                .contains(r#"mount --no-canonicalize --bind "/proc/self/fd/$src0" '/etc/it'\''s'"#),
            "{script}"
        );
        assert!(script.contains("exec {src0}<&-\n"), "{script}");
        assert!(script.contains("remount,bind,ro"), "{script}");
        assert!(script.ends_with("exec \"$@\"\n"));
    }

    #[tokio::test]
    async fn a_volume_over_the_kubelets_state_dir_hides_no_other_volume() {
        // The chart mounts an emptyDir at /tmp, where the kubelet keeps every
        // pod's volumes by default, then a Secret volume after it (here
        // inside it, so the test leaves nothing on the host).
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let (empty, secret) = (tmp.path().join("empty"), tmp.path().join("secret"));
        std::fs::create_dir_all(&empty).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("token"), "s3cret").unwrap();
        let launch = Launch {
            argv: vec!["sh".into(), "-c".into(), "cat /tmp/secret/token".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            mounts: vec![
                Mount {
                    source: empty.clone(),
                    target: "/tmp".into(),
                    read_only: false,
                },
                Mount {
                    source: secret,
                    // Inside the /tmp volume: its source is hidden by then.
                    target: "/tmp/secret".into(),
                    read_only: true,
                },
            ],
            workdir: "/".into(),
            log: tmp.path().join("log"),
        };
        let registry = Registry::default();
        let (_process, child) = spawn(&launch, &registry).unwrap();
        let exit = wait(child).await;
        let log = std::fs::read_to_string(tmp.path().join("log")).unwrap();
        assert_eq!((exit.code, log.as_str()), (0, "s3cret"), "{log}");
    }

    #[tokio::test]
    async fn a_spawned_process_logs_and_reports_its_exit_code() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("c/0.log");
        let launch = Launch {
            argv: vec!["sh".into(), "-c".into(), "echo hello $X; exit 3".into()],
            env: vec![
                ("X".into(), "world".into()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ],
            mounts: vec![],
            workdir: "/".into(),
            log: log.clone(),
        };
        let registry = Registry::default();
        let (_process, child) = spawn(&launch, &registry).unwrap();
        let exit = wait(child).await;
        assert_eq!(exit.code, 3);
        assert_eq!(std::fs::read_to_string(log).unwrap(), "hello world\n");
    }

    #[tokio::test]
    async fn sigterm_reaches_the_main_process_only_and_its_exit_kills_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let marker = tmp.path().join("child-saw-term");
        // The main process ignores nothing; its child would record a SIGTERM.
        let script = format!(
            "sh -c 'trap \"touch {m}\" TERM; sleep 30 & wait' & echo $! > {p}; wait",
            m = marker.display(),
            p = tmp.path().join("child.pid").display()
        );
        let launch = Launch {
            argv: vec!["sh".into(), "-c".into(), script],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            mounts: vec![],
            workdir: "/".into(),
            log: tmp.path().join("log"),
        };
        let registry = Registry::default();
        let (process, child) = spawn(&launch, &registry).unwrap();
        let pid_file = tmp.path().join("child.pid");
        while !pid_file.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let child_pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        process.signal_main(Signal::SIGTERM);
        let exit = wait(child).await;
        assert_eq!(exit.signal, Some(15));
        assert!(!marker.exists(), "the child must not get the SIGTERM");
        drop(process);
        // Reaped by init eventually; kill(0) fails once it is gone or a zombie is reaped.
        let mut gone = false;
        for _ in 0..200 {
            let status =
                std::fs::read_to_string(format!("/proc/{child_pid}/stat")).unwrap_or_default();
            if status.is_empty() || status.split_whitespace().nth(2) == Some("Z") {
                gone = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(gone, "the left-over child is killed with the main process");
    }

    #[tokio::test]
    async fn exec_commands_cannot_signal_the_machines_pid_1() {
        // What the chart's preStop hook does to HAProxy, and what a real
        // container's PID 1 would get; here PID 1 is the command itself.
        let argv: Vec<String> = ["sh", "-c", "echo $$; kill -USR1 1 && kill -0 1 && exit 7"]
            .map(String::from)
            .to_vec();
        let env = [("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let out = exec_command(&argv, &env)
            .stdout(Stdio::piped())
            .output()
            .await
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
        assert_eq!(out.status.code(), Some(7), "the command ran to its end");
    }

    #[tokio::test]
    async fn a_container_outlives_the_thread_that_asked_for_it() {
        // As a tokio blocking-pool thread does: ask for a container, then exit.
        let tmp = tempfile::tempdir().unwrap();
        let launch = Launch {
            argv: vec!["sleep".into(), "30".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            mounts: vec![],
            workdir: "/".into(),
            log: tmp.path().join("log"),
        };
        let registry = Registry::default();
        let runtime = tokio::runtime::Handle::current();
        let asker = std::thread::spawn({
            let registry = registry.clone();
            move || {
                let _entered = runtime.enter();
                let spawned = spawn(&launch, &registry).unwrap();
                // Until setpriv has armed the signal and run the program.
                std::thread::sleep(std::time::Duration::from_millis(300));
                spawned
            }
        });
        let (process, mut child) = asker.join().unwrap();
        // A parent-death signal tied to the asking thread fires at once.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert!(
            child.try_wait().unwrap().is_none(),
            "the container died with the thread that asked for it"
        );
        drop(process);
        assert_eq!(wait(child).await.signal, Some(9));
    }

    #[tokio::test]
    async fn sigterm_to_the_group_is_reported_as_128_plus_15() {
        let tmp = tempfile::tempdir().unwrap();
        let launch = Launch {
            argv: vec!["sleep".into(), "30".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            mounts: vec![],
            workdir: "/".into(),
            log: tmp.path().join("log"),
        };
        let registry = Registry::default();
        let (process, child) = spawn(&launch, &registry).unwrap();
        process.signal(Signal::SIGTERM);
        let exit = wait(child).await;
        assert_eq!((exit.code, exit.signal), (143, Some(15)));
    }
}

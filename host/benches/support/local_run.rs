//! `haptic run --proxies N` as the benches drive it: the controller's render
//! loop, deploy path and fleet, each instance a real HAProxy with its own
//! `haptic agent`, over a directory of manifests the bench writes and edits.
//! Shared by `fanout` and `gateway`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use haptic::protocol::AgentClient;

/// HTTP ports count up from here (HTTPS 363 above), clear of `LISTEN` and
/// of the Gateway listener ports (20000 up).
const FIRST_HTTP_PORT: u16 = 30080;
const LISTEN: &str = "127.0.0.1:29451";

/// `haptic run` over `cluster/` in a scratch directory; stopped as Ctrl-C
/// stops it when dropped.
pub struct Run {
    child: Child,
    work: tempfile::TempDir,
}

impl Run {
    /// Fills the cluster directory with `fill`, then starts `haptic run`
    /// with `proxies` instances (and `values`, a values file, if given).
    pub fn start(proxies: usize, values: Option<&str>, fill: impl FnOnce(&Path)) -> Self {
        let work = tempfile::tempdir().expect("tempdir");
        let cluster = work.path().join("cluster");
        std::fs::create_dir_all(&cluster).expect("mkdir");
        fill(&cluster);
        let mut command = Command::new(env!("CARGO_BIN_EXE_haptic"));
        command
            .args(["run", "--proxies", &proxies.to_string()])
            .args(["--port", &FIRST_HTTP_PORT.to_string(), "--listen", LISTEN])
            .arg("--dir")
            .arg(work.path().join("scratch"));
        if let Some(values) = values {
            let path = work.path().join("values.yaml");
            std::fs::write(&path, values).expect("write the values");
            command.arg("--values").arg(path);
        }
        let child = command
            .arg(&cluster)
            .env("HAPTIC_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haptic run starts");
        Self { child, work }
    }

    /// The directory of manifests `haptic run` watches.
    pub fn cluster(&self) -> PathBuf {
        self.work.path().join("cluster")
    }

    /// The controller's process (the agents and HAProxy are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn scratch(&self) -> PathBuf {
        self.work.path().join("scratch")
    }

    /// Every instance's agent, once `haptic run` has listed them.
    pub fn agents(&self) -> Vec<AgentClient> {
        let listing = self.scratch().join("proxies.json");
        let deadline = Instant::now() + Duration::from_secs(300);
        let text = loop {
            // Written once every instance started.
            if let Ok(text) = std::fs::read_to_string(&listing)
                && serde_json::from_str::<serde_json::Value>(&text).is_ok()
            {
                break text;
            }
            assert!(Instant::now() < deadline, "no proxies.json in 300 s");
            std::thread::sleep(Duration::from_millis(50));
        };
        let token = std::fs::read_to_string(self.scratch().join("agent-token")).expect("token");
        let listing: serde_json::Value = serde_json::from_str(&text).expect("proxies.json");
        listing
            .as_array()
            .into_iter()
            .flatten()
            .map(|proxy| {
                AgentClient::new(
                    proxy["agent"].as_str().expect("agent").to_owned(),
                    Some(token.trim().to_owned()),
                    None,
                    Duration::from_secs(10),
                )
                .expect("client")
            })
            .collect()
    }

    /// The controller's `/metrics` text.
    pub fn metrics(&self) -> std::io::Result<String> {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(LISTEN)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        Ok(answer
            .split_once("\r\n\r\n")
            .map_or(answer.clone(), |(_, body)| body.to_owned()))
    }

    /// Whether bundle `id` on the first instance holds `text` in any file.
    pub fn bundle_mentions(&self, id: &str, text: &str) -> bool {
        let config_dir = self.scratch().join("haproxy-0");
        let dir =
            haptic::agent::disk::ConfigDir::new(config_dir.clone(), config_dir.join("worker.sock"))
                .bundle_dir(id);
        contains(&dir, text)
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `text` to `path` as an editor saves a file (a new file renamed
/// over the old, hidden while written): the file source sees one complete
/// change.
pub fn save(path: &Path, text: &str) {
    let name = path.file_name().expect("a file name").to_string_lossy();
    let next = path.with_file_name(format!(".{name}.next"));
    std::fs::write(&next, text).expect("write the manifest");
    std::fs::rename(&next, path).expect("replace the manifest");
}

fn contains(dir: &Path, text: &str) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| {
            let path = entry.path();
            if path.is_dir() {
                contains(&path, text)
            } else {
                std::fs::read_to_string(&path).is_ok_and(|content| content.contains(text))
            }
        })
}

/// Waits until every agent reports all its workers on one id other than
/// `previous` (each agent asked in turn, every 10 ms).
pub async fn converged_on_new(
    agents: &[AgentClient],
    previous: Option<&str>,
    timeout: Duration,
) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let states = futures::future::join_all(agents.iter().map(AgentClient::state)).await;
        let ids: Vec<Option<String>> = states
            .into_iter()
            .map(|state| state.ok().and_then(|state| state.converged))
            .collect();
        if let Some(Some(first)) = ids.first()
            && first != "bootstrap"
            && Some(first.as_str()) != previous
            && ids.iter().all(|id| id.as_deref() == Some(first))
        {
            return Some(first.clone());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// User plus system CPU time of `pid`, in clock ticks (`/proc/<pid>/stat`).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(14) + field(15)
}

/// A `/proc/<pid>/status` figure in MiB (`VmHWM:` peak, `VmRSS:` now).
pub fn memory_mib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        / 1024
}

/// The sample at quantile `q` of sorted `samples`.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The value of sample `name` (its whole name with labels, as `/metrics`
/// prints it), 0 when absent.
pub fn metric(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0.0)
}

//! The fan-out curve: one Ingress change -> every HAProxy instance runs a
//! configuration holding it, with 1, 10, 50 and 100 instances (`haptic run
//! --proxies N`: the controller's render loop, deploy path and fleet, each
//! instance a real HAProxy with its own `haptic agent`). Prints p50, p95
//! and max per N and the controller's CPU time per change; asserts only that
//! every change reached every instance.
//!
//! `cargo bench -p haptic --bench fanout`. `HAPTIC_BENCH_ROUNDS` sets the
//! changes per N (default 100), `HAPTIC_BENCH_FANOUT` the instance counts
//! (default `1,10,50,100`). The file source takes edits as one change after
//! 50 ms (editors write in steps): every figure includes that pause.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use haptic::agent::AgentClient;

/// HTTP ports count up from here (HTTPS 363 above), clear of `LISTEN`.
const FIRST_HTTP_PORT: u16 = 30080;
const LISTEN: &str = "127.0.0.1:29451";

fn main() {
    let rounds: usize = std::env::var("HAPTIC_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let counts: Vec<usize> = std::env::var("HAPTIC_BENCH_FANOUT")
        .unwrap_or_else(|_| "1,10,50,100".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "haptic fan-out benchmark ({} cores, {rounds} changes per N)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for proxies in counts {
        let run = Run::start(proxies);
        let agents = run.agents();
        let mut id = runtime
            .block_on(converged_on_new(&agents, None, Duration::from_secs(300)))
            .expect("every instance runs a first configuration");
        let cpu_before = cpu_ticks(run.child.id());
        let mut samples = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let host = format!("fanout-{round}.example.com");
            let started = run.change_host(&host);
            let deadline = started + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let next = runtime
                    .block_on(converged_on_new(&agents, Some(&id), left))
                    .unwrap_or_else(|| {
                        panic!("change {round} not on all {proxies} instances in 60 s")
                    });
                id = next;
                if run.bundle_mentions(&id, &host) {
                    samples.push(started.elapsed());
                    break;
                }
            }
        }
        let cpu = cpu_ticks(run.child.id()).saturating_sub(cpu_before);
        report(proxies, &mut samples, cpu);
        drop(run);
    }
}

/// `haptic run` over a copy of examples/cluster plus one Ingress of the
/// bench's own; stopped as Ctrl-C stops it when dropped.
struct Run {
    child: Child,
    work: tempfile::TempDir,
}

impl Run {
    fn start(proxies: usize) -> Self {
        let work = tempfile::tempdir().expect("tempdir");
        let cluster = work.path().join("cluster");
        std::fs::create_dir_all(&cluster).expect("mkdir");
        let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
        for entry in std::fs::read_dir(examples).expect("examples/cluster") {
            let entry = entry.expect("entry");
            std::fs::copy(entry.path(), cluster.join(entry.file_name())).expect("copy");
        }
        write_ingress(&cluster, "fanout-start.example.com");
        let child = Command::new(env!("CARGO_BIN_EXE_haptic"))
            .args(["run", "--proxies", &proxies.to_string()])
            .args(["--port", &FIRST_HTTP_PORT.to_string(), "--listen", LISTEN])
            .arg("--dir")
            .arg(work.path().join("scratch"))
            .arg(&cluster)
            .env("HAPTIC_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haptic run starts");
        Self { child, work }
    }

    fn scratch(&self) -> PathBuf {
        self.work.path().join("scratch")
    }

    /// Every instance's agent, once `haptic run` has listed them.
    fn agents(&self) -> Vec<AgentClient> {
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

    /// Writes the bench's Ingress with `host`; returns when it was written.
    fn change_host(&self, host: &str) -> Instant {
        write_ingress(&self.work.path().join("cluster"), host);
        Instant::now()
    }

    /// Whether bundle `id` on the first instance names `host`.
    fn bundle_mentions(&self, id: &str, host: &str) -> bool {
        let config_dir = self.scratch().join("haproxy-0");
        let dir =
            haptic::agent::disk::ConfigDir::new(config_dir.clone(), config_dir.join("worker.sock"))
                .bundle_dir(id);
        contains(&dir, host)
    }
}

/// The bench's Ingress with `host`, saved as an editor saves a file (a new
/// file renamed over the old).
fn write_ingress(cluster: &Path, host: &str) {
    let path = cluster.join("fanout.yaml");
    let text = format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: fanout\n  namespace: shop\nspec:\n  ingressClassName: haptic\n  rules:\n    - host: {host}\n      http:\n        paths:\n          - path: /\n            pathType: Prefix\n            backend:\n              service: {{name: web, port: {{name: http}}}}\n"
    );
    let next = cluster.join(".fanout.yaml.next");
    std::fs::write(&next, text).expect("write the Ingress");
    std::fs::rename(&next, &path).expect("replace the Ingress");
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

/// Waits until every agent reports all its workers on one id other than
/// `previous` (each agent asked in turn, every 10 ms).
async fn converged_on_new(
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
fn cpu_ticks(pid: u32) -> u64 {
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

fn report(proxies: usize, samples: &mut [Duration], cpu_ticks: u64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    // Linux counts CPU time in ticks of 1/100 s (USER_HZ).
    let cpu_ms = cpu_ticks as f64 * 10.0 / samples.len().max(1) as f64;
    println!(
        "{proxies:>3} HAProxy: one Ingress change -> on every instance: n={} p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms; controller CPU {cpu_ms:.1} ms per change",
        samples.len(),
        ms(at(0.5)),
        ms(at(0.95)),
        ms(samples[samples.len() - 1]),
    );
}

//! Load through HAProxy for every scenario: clients that send `GET /` with a
//! Host header, no retries, and count every answer. A 200 is ok; anything
//! else (another status, a refused or reset connection, a timeout, a
//! connection closed mid-answer) is a [`Failure`] kept with when it came,
//! how long it took and what it was, so a scenario can ask not only "did
//! any fail" but "which, when, how fast".
//!
//! Two kinds of client: one connection per request, sent to each address in
//! turn; and kept-alive, one connection per client, a new one only when the
//! server says `Connection: close` (HAProxy does after a reload) or closes.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpStream;

use crate::http;

/// Who sends the load, where, and how fast.
#[derive(Debug, Clone)]
pub struct Clients {
    /// The addresses (HAProxy pods, a Service, a LoadBalancer address).
    pub addrs: Vec<SocketAddr>,
    /// The Host header.
    pub host: String,
    /// Clients opening one connection per request, each going through every
    /// address in turn (from a different one each), so each address takes
    /// its share whatever a load balancer in front would pick.
    pub close: usize,
    /// Clients on kept-alive connections, client `i` to address `i mod n`.
    pub keep_alive: usize,
    /// The pause between one client's requests.
    pub pause: Duration,
    /// How long one request may take before it counts as failed.
    pub timeout: Duration,
}

impl Clients {
    /// `close` one-connection-per-request clients through `addrs` for
    /// `host`, 20 ms apart, 5 s per request.
    pub fn across(addrs: &[SocketAddr], host: &str, close: usize) -> Self {
        Self {
            addrs: addrs.to_vec(),
            host: host.to_owned(),
            close,
            keep_alive: 0,
            pause: Duration::from_millis(20),
            timeout: Duration::from_secs(5),
        }
    }
}

/// One failed request.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Where it was sent.
    pub target: SocketAddr,
    /// When its answer or error came.
    pub at: Instant,
    /// How long it took.
    pub took: Duration,
    /// The HTTP status, if there was an answer.
    pub status: Option<u16>,
    /// The answer's body or the error.
    pub detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.status.map(|s| s.to_string()).unwrap_or_default();
        write!(
            f,
            "{} after {:?}: {status} {}",
            self.target, self.took, self.detail
        )
    }
}

/// What the clients count, shared while they run.
#[derive(Debug, Default)]
struct Counts {
    ok: AtomicU64,
    failures: Mutex<Vec<Failure>>,
}

impl Counts {
    fn fail(&self, target: SocketAddr, sent: Instant, status: Option<u16>, detail: String) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.push(Failure {
                target,
                at: Instant::now(),
                took: sent.elapsed(),
                status,
                detail,
            });
        }
    }
}

/// Running clients, until [`Load::stop`].
pub struct Load {
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
    clients: Vec<tokio::task::JoinHandle<()>>,
    started: Instant,
}

/// What the clients saw.
#[derive(Debug)]
pub struct LoadSeen {
    /// Answers 200.
    pub ok: u64,
    /// Everything else, in the order it came.
    pub failures: Vec<Failure>,
    /// How long the load ran.
    pub elapsed: Duration,
    /// How many clients sent it.
    pub clients: usize,
}

impl LoadSeen {
    /// How many requests failed.
    pub fn failed(&self) -> u64 {
        self.failures.len() as u64
    }

    /// The fewest successes that show every client sent at least
    /// `per_client_per_second` requests a second throughout: fewer, and the
    /// load stalled or died, and "no request failed" says little.
    pub fn minimum_ok(&self, per_client_per_second: f64) -> u64 {
        (self.elapsed.as_secs_f64() * self.clients as f64 * per_client_per_second) as u64
    }

    /// Fails, naming `what` the load ran through, when a request failed or
    /// fewer than `minimum_ok` succeeded.
    pub fn check(&self, what: &str, minimum_ok: u64) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.failures.is_empty(),
            "{} requests failed during {what} ({} ok): {}",
            self.failed(),
            self.ok,
            self.failures
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        );
        anyhow::ensure!(
            self.ok >= minimum_ok,
            "only {} requests succeeded during {what} in {:?} (want >= {minimum_ok}): the load stalled",
            self.ok,
            self.elapsed
        );
        Ok(())
    }
}

impl Load {
    /// Starts `clients` one-connection-per-request clients to `addr` with
    /// `Host: host` ([`Clients::across`]).
    pub fn start(addr: SocketAddr, host: &str, clients: usize) -> Self {
        Self::with(Clients::across(&[addr], host, clients))
    }

    /// [`Clients::across`] started.
    pub fn across(addrs: &[SocketAddr], host: &str, clients: usize) -> Self {
        Self::with(Clients::across(addrs, host, clients))
    }

    /// Starts the clients `spec` describes.
    pub fn with(spec: Clients) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(Counts::default());
        let spec = Arc::new(spec);
        let mut clients = Vec::new();
        if !spec.addrs.is_empty() {
            for client in 0..spec.keep_alive {
                let (spec, counts, stop) = (spec.clone(), counts.clone(), stop.clone());
                clients.push(tokio::spawn(async move {
                    kept_alive(&spec, client, &counts, &stop).await;
                }));
            }
            for client in 0..spec.close {
                let (spec, counts, stop) = (spec.clone(), counts.clone(), stop.clone());
                clients.push(tokio::spawn(async move {
                    one_per_request(&spec, client, &counts, &stop).await;
                }));
            }
        }
        Self {
            stop,
            counts,
            clients,
            started: Instant::now(),
        }
    }

    /// Stops the clients once their requests in flight are answered.
    pub async fn stop(self) -> LoadSeen {
        self.stop.store(true, Ordering::Relaxed);
        let elapsed = self.started.elapsed();
        let clients = self.clients.len();
        let mut panicked = Vec::new();
        for client in self.clients {
            if let Err(error) = client.await {
                panicked.push(error.to_string());
            }
        }
        let mut failures = self
            .counts
            .failures
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default();
        failures.extend(panicked.into_iter().map(|error| Failure {
            target: SocketAddr::from(([0, 0, 0, 0], 0)),
            at: Instant::now(),
            took: Duration::ZERO,
            status: None,
            detail: format!("a load client panicked: {error}"),
        }));
        LoadSeen {
            ok: self.counts.ok.load(Ordering::Relaxed),
            failures,
            elapsed,
            clients,
        }
    }
}

async fn one_per_request(spec: &Clients, client: usize, counts: &Counts, stop: &AtomicBool) {
    let mut turn = client;
    while !stop.load(Ordering::Relaxed) {
        let addr = spec.addrs[turn % spec.addrs.len()];
        turn += 1;
        let sent = Instant::now();
        match http::get(addr, Some(&spec.host), "/", &[], spec.timeout).await {
            Ok(response) if response.status == 200 => {
                counts.ok.fetch_add(1, Ordering::Relaxed);
            }
            Ok(response) => counts.fail(
                addr,
                sent,
                Some(response.status),
                response.body.trim().to_owned(),
            ),
            Err(error) => counts.fail(addr, sent, None, error.to_string()),
        }
        tokio::time::sleep(spec.pause).await;
    }
}

async fn kept_alive(spec: &Clients, client: usize, counts: &Counts, stop: &AtomicBool) {
    let addr = spec.addrs[client % spec.addrs.len()];
    let mut connection: Option<BufReader<TcpStream>> = None;
    while !stop.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let stream = match connection.as_mut() {
            Some(stream) => stream,
            None => match TcpStream::connect(addr).await {
                Ok(stream) => connection.insert(BufReader::new(stream)),
                Err(error) => {
                    counts.fail(addr, sent, None, format!("connect: {error}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        match tokio::time::timeout(spec.timeout, exchange(stream, &spec.host)).await {
            Ok(Ok((200, close))) => {
                counts.ok.fetch_add(1, Ordering::Relaxed);
                if close {
                    connection = None;
                }
            }
            outcome => {
                let status = match &outcome {
                    Ok(Ok((status, _))) => Some(*status),
                    _ => None,
                };
                counts.fail(addr, sent, status, format!("keep-alive: {outcome:?}"));
                connection = None;
            }
        }
        tokio::time::sleep(spec.pause).await;
    }
}

/// One request on a kept-alive connection: (status, the server closes
/// after it).
async fn exchange(stream: &mut BufReader<TcpStream>, host: &str) -> Result<(u16, bool), String> {
    stream
        .get_mut()
        .write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut status_line = String::new();
    if stream
        .read_line(&mut status_line)
        .await
        .map_err(|e| format!("read: {e}"))?
        == 0
    {
        return Err("closed before a response".into());
    }
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let (mut length, mut close) = (0usize, false);
    loop {
        let mut line = String::new();
        stream
            .read_line(&mut line)
            .await
            .map_err(|e| format!("read headers: {e}"))?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            length = value
                .trim()
                .parse()
                .map_err(|_| format!("bad Content-Length in {line:?}"))?;
        }
        if lower.starts_with("connection:") && lower.contains("close") {
            close = true;
        }
    }
    let mut body = vec![0u8; length];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("read body: {e}"))?;
    Ok((status, close))
}

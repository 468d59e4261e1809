//! HAProxy as the oracle: whether every live worker of an HAProxy pod routes
//! a host to a pod, in HAProxy's own words.
//!
//! Each question goes through the pod's master CLI (`master.sock` in its
//! configuration directory, a hostPath the test reads) to one worker by pid
//! (`@!<pid> ...`), current or leaving: `show proc` lists the workers,
//! `show map` and `show map <file>` name the backend the host is routed to,
//! `show servers state <backend>` says whether a server at the pod's address
//! is up and out of maintenance. Nothing here reads the agent's bookkeeping
//! or shares its CLI code, so neither can vouch for itself.
//!
//! The controller scenarios (`tests/controller`) find a pod's socket in its
//! hostPath configuration directory, the chart and Gateway API ones in its
//! `emptyDir`, both on the host.

use std::collections::BTreeSet;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// `srv_op_state` of a running server (`SRV_ST_RUNNING`).
const SERVER_RUNNING: &str = "2";
/// The `srv_admin_state` flags that keep new requests off a server: forced
/// or inherited maintenance (0x01, 0x02), forced or inherited drain (0x08,
/// 0x10), address resolution failure (0x20). Not 0x04, which only records
/// `disabled` in the configuration: HAProxy 2.6.12 shows a server started
/// `disabled` and then set `state ready` as `op=2 admin=4`, and `show stat`
/// counts it up (checked by hand: `disabled` is 5, `drain` 8, `maint` 1).
const SERVER_HELD_BACK: u8 = 0x01 | 0x02 | 0x08 | 0x10 | 0x20;

/// One command on the master CLI; the master answers once the client has
/// shut its write side. While the master re-executes itself in a reload it
/// refuses or resets connections for a moment, so those are retried for 3 s.
async fn master(socket: &Path, command: &str) -> Result<String, String> {
    master_until(socket, command, Instant::now() + Duration::from_secs(3)).await
}

/// [`master`], retrying a refused or reset connection until `deadline`:
/// longer than a re-exec when the question may come while the kubelet
/// restarts a killed HAProxy.
async fn master_until(socket: &Path, command: &str, deadline: Instant) -> Result<String, String> {
    loop {
        match master_once(socket, command).await {
            Err((_, true)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            result => return result.map_err(|(error, _)| error),
        }
    }
}

/// The answer, or the error and whether the master was re-executing.
async fn master_once(socket: &Path, command: &str) -> Result<String, (String, bool)> {
    let exchange = async {
        let mut stream = UnixStream::connect(socket).await?;
        stream.write_all(format!("{command}\n").as_bytes()).await?;
        stream.shutdown().await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    match tokio::time::timeout(Duration::from_secs(5), exchange).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => {
            let reloading = matches!(
                error.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::BrokenPipe
            );
            Err((
                format!("`{command}` on {}: {error}", socket.display()),
                reloading,
            ))
        }
        Err(_) => Err((
            format!("`{command}` on {}: no answer within 5 s", socket.display()),
            false,
        )),
    }
}

/// The pids of every live worker, current and leaving (`show proc` lists
/// them as `<pid> worker ...` under `# workers` and `# old workers`).
pub async fn workers(socket: &Path) -> Result<Vec<u32>, String> {
    workers_until(socket, Instant::now() + Duration::from_secs(3)).await
}

async fn workers_until(socket: &Path, deadline: Instant) -> Result<Vec<u32>, String> {
    let answer = master_until(socket, "show proc", deadline).await?;
    let pids: Vec<u32> = answer
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let pid = fields.next()?.parse().ok()?;
            (fields.next() == Some("worker")).then_some(pid)
        })
        .collect();
    if pids.is_empty() {
        return Err(format!("`show proc` lists no worker: {answer:?}"));
    }
    Ok(pids)
}

/// How long a question about every live worker waits for a master that
/// refuses connections: a scenario kills HAProxy and the kubelet restarts
/// it with a backoff doubling from 1 s, three kills take 7 s.
const MASTER_DOWN_PATIENCE: Duration = Duration::from_secs(30);

/// Asks `question` of every live worker behind `socket`, until every worker
/// `show proc` lists has answered. A worker whose answer failed counts only
/// if it is still listed afterwards: a leaving worker may exit while it is
/// asked, and every worker exits with its master (HAProxy 2.6.12: a
/// SIGKILLed master's worker is gone within 50 ms). While the master
/// refuses connections, HAProxy is down and nothing is live there; the
/// question waits for it to be back and asks the workers it then runs,
/// which loaded the configuration the agent left on disk.
async fn every_live_worker<F, Fut>(socket: &Path, question: F) -> Result<(), String>
where
    F: Fn(u32) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + MASTER_DOWN_PATIENCE;
    let mut asked = BTreeSet::new();
    loop {
        let unasked: Vec<u32> = workers_until(socket, deadline)
            .await?
            .into_iter()
            .filter(|pid| !asked.contains(pid))
            .collect();
        if unasked.is_empty() {
            return Ok(());
        }
        for pid in unasked {
            if let Err(error) = question(pid).await
                && workers_until(socket, deadline).await?.contains(&pid)
            {
                return Err(error);
            }
            asked.insert(pid);
        }
    }
}

/// Whether worker `pid` routes `host` to a running, enabled server at
/// `ip:port`; the error says what HAProxy answered instead.
pub async fn worker_routes(
    socket: &Path,
    pid: u32,
    host: &str,
    ip: &str,
    port: u16,
) -> Result<(), String> {
    let backends = backends_for(socket, pid, host).await?;
    worker_serves(socket, pid, &backends, ip, port)
        .await
        .map_err(|seen| {
            format!(
                "worker {pid} routes {host} to {backends:?}, none of whose servers is up at {ip}:{port}: {seen:?}"
            )
        })
}

/// Whether one of `backends` of worker `pid` has a running, enabled server
/// at `ip:port`; else every server seen (`<backend>/<server ...>`), or what
/// failed.
async fn worker_serves(
    socket: &Path,
    pid: u32,
    backends: &[String],
    ip: &str,
    port: u16,
) -> Result<(), Vec<String>> {
    let mut seen = Vec::new();
    for backend in backends {
        let answer = master(socket, &format!("@!{pid} show servers state {backend}"))
            .await
            .map_err(|error| vec![error])?;
        let servers = parse_servers_state(&answer).ok_or_else(|| {
            vec![format!(
                "worker {pid}: unreadable `show servers state`: {answer:?}"
            )]
        })?;
        if servers.iter().any(|server| server.routes(ip, port)) {
            return Ok(());
        }
        seen.extend(servers.into_iter().map(|s| format!("{backend}/{s}")));
    }
    Err(seen)
}

/// The header of HAProxy's answer to `show map` (3.0.11, checked by hand);
/// any other answer is not the worker's list of maps.
const SHOW_MAP_HEADER: &str = "# id (file) description";

/// How long a worker may take to answer `show map` at all: one just forked
/// by a reload takes its CLI connection only once it is ready (the master
/// then answers for it "Can't connect to the target CLI!" or nothing),
/// which on a loaded machine is more than a moment.
const WORKER_ANSWER_PATIENCE: Duration = Duration::from_secs(3);

/// The worker's answer to `show map`, waiting out a worker not ready to
/// answer yet; an answer that never becomes a map listing is an error that
/// quotes it.
async fn map_listing(socket: &Path, pid: u32) -> Result<String, String> {
    let deadline = Instant::now() + WORKER_ANSWER_PATIENCE;
    loop {
        let listing = master(socket, &format!("@!{pid} show map")).await?;
        if listing.lines().any(|line| line.trim() == SHOW_MAP_HEADER) {
            return Ok(listing);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "worker {pid} did not answer `show map` within {WORKER_ANSWER_PATIENCE:?}: {listing:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The backends `host`'s entries in the worker's maps point at.
async fn backends_for(socket: &Path, pid: u32, host: &str) -> Result<Vec<String>, String> {
    let listing = map_listing(socket, pid).await?;
    // `-1 (maps/ingress-prefix.map) pattern loaded from file ...`
    let maps: Vec<&str> = listing
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('(')?.1.split_once(')').map(|(m, _)| m))
        .collect();
    let mut backends = Vec::new();
    for map in &maps {
        let entries = master(socket, &format!("@!{pid} show map {map}")).await?;
        // `0x55d0c1e0 <key> <value>`
        for line in entries.lines() {
            let mut fields = line.split_whitespace().skip(1);
            // Route identity maps (`ingress-*-routes.map`) name the
            // matched Ingress as `namespace/name`; a backend name never
            // holds a `/` (HAProxy refuses it in a proxy name).
            if let (Some(key), Some(value)) = (fields.next(), fields.next())
                && key.starts_with(host)
                && !value.contains('/')
                && !backends.iter().any(|b| b == value)
            {
                backends.push(value.to_owned());
            }
        }
    }
    if backends.is_empty() {
        return Err(format!(
            "worker {pid}: no map entry routes {host} (maps {maps:?})"
        ));
    }
    Ok(backends)
}

/// One row of `show servers state`.
#[derive(Debug)]
struct Server {
    name: String,
    addr: String,
    port: String,
    op_state: String,
    admin_state: String,
}

impl Server {
    fn routes(&self, ip: &str, port: u16) -> bool {
        self.addr == ip
            && self.port == port.to_string()
            && self.op_state == SERVER_RUNNING
            && self
                .admin_state
                .parse::<u8>()
                .is_ok_and(|flags| flags & SERVER_HELD_BACK == 0)
    }
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}:{} op={} admin={}",
            self.name, self.addr, self.port, self.op_state, self.admin_state
        )
    }
}

/// Rows by the names in the `# be_id be_name srv_id ...` header, so a column
/// HAProxy adds or moves cannot shift a reading.
fn parse_servers_state(answer: &str) -> Option<Vec<Server>> {
    let header: Vec<&str> = answer
        .lines()
        .find_map(|line| line.strip_prefix("# be_id"))
        .map(|rest| {
            std::iter::once("be_id")
                .chain(rest.split_whitespace())
                .collect()
        })?;
    let column = |name: &str| header.iter().position(|h| *h == name);
    let (name, addr, port, op, admin) = (
        column("srv_name")?,
        column("srv_addr")?,
        column("srv_port")?,
        column("srv_op_state")?,
        column("srv_admin_state")?,
    );
    Some(
        answer
            .lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .filter(|fields| fields.len() >= header.len())
            .map(|fields| Server {
                name: fields[name].to_owned(),
                addr: fields[addr].to_owned(),
                port: fields[port].to_owned(),
                op_state: fields[op].to_owned(),
                admin_state: fields[admin].to_owned(),
            })
            .collect(),
    )
}

/// Whether every live worker behind `socket` routes `host` to a server at
/// `ip:port` that is up and enabled (see [`every_live_worker`] for which
/// workers are live).
pub async fn every_worker_routes(
    socket: &Path,
    host: &str,
    ip: &str,
    port: u16,
) -> Result<(), String> {
    every_live_worker(socket, |pid| worker_routes(socket, pid, host, ip, port)).await
}

/// Whether every live worker behind `socket` has a server at `ip:port` up
/// and enabled in `backend`: for routes that pick their backend by rule
/// (the Gateway API's `use_backend ... if { var(txn.gw_rule) ... }`) rather
/// than through a host map, the test names the backend the route's Service
/// gets (`<namespace>_<service>_<port>`, kubernetes-backends' names).
pub async fn every_worker_serves(
    socket: &Path,
    backend: &str,
    ip: &str,
    port: u16,
) -> Result<(), String> {
    let backends = [backend.to_owned()];
    let backends = &backends;
    every_live_worker(socket, |pid| async move {
        worker_serves(socket, pid, backends, ip, port)
            .await
            .map_err(|seen| {
                format!("worker {pid}: no server of {backend} is up at {ip}:{port}: {seen:?}")
            })
    })
    .await
}

/// How many reloads the master behind `socket` performed, in its own
/// `show proc` (`<pid> master <reloads> [failed: <n>] ...`).
pub async fn reloads(socket: &Path) -> Result<u64, String> {
    let answer = master(socket, "show proc").await?;
    answer
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            (fields.next() == Some("master")).then(|| fields.next()?.parse().ok())?
        })
        .ok_or_else(|| format!("no master line in `show proc`: {answer:?}"))
}

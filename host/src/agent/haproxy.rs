//! Talking to a running HAProxy (3.0, master-worker mode) over its sockets.
//!
//! Two sockets, because each does what the other cannot (checked on 2.6.12
//! and again on 3.0.11):
//! - the **master CLI** (`-S master.sock`) lists processes (`show proc`),
//!   reaches any worker by pid (`@!<pid> show info`, old ones included) and
//!   reloads; but it relays only the first command of `@1 c1; c2`, and it
//!   answers only once the client shuts its write side;
//! - the **worker stats socket** (`stats socket ... level admin`, written by
//!   the agent into every configuration) always reaches the current worker
//!   and takes a whole batch on one connection in interactive mode, which is
//!   how runtime changes are applied.

use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::UnixStream;

use crate::protocol::runtime_commands::{LoadedFiles, RuntimeCommand};
use crate::protocol::wire::holds_private_key;

/// How long one CLI exchange may take before HAProxy counts as unreachable.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);
/// The master socket refuses connections for a moment while the master
/// re-executes itself during a reload; connecting is retried this long.
const CONNECT_RETRY_FOR: Duration = Duration::from_secs(3);

/// A failed exchange with HAProxy.
#[derive(Debug, Error)]
pub enum CliError {
    /// The socket could not be reached.
    #[error("cannot connect to HAProxy's {which} socket {}: {source}; is HAProxy running with it (see `haptic haproxy --help`)?", path.display())]
    Connect {
        which: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The exchange broke or timed out.
    #[error("talking to HAProxy's {which} socket {}: {detail}", path.display())]
    Exchange {
        which: &'static str,
        path: PathBuf,
        detail: String,
        /// HAProxy dropped the connection (it does while re-executing).
        reset: bool,
    },
    /// HAProxy answered something this agent cannot read.
    #[error("unexpected answer from HAProxy to `{command}`: {answer}")]
    Unexpected { command: String, answer: String },
}

/// The processes `show proc` lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcList {
    pub master_pid: u32,
    /// Workers taking new connections (one, except for a moment in a reload).
    pub current: Vec<u32>,
    /// Workers left by a reload, still serving their last connections.
    pub leaving: Vec<u32>,
    pub reloads: u64,
    pub failed_reloads: u64,
}

/// What a worker says of itself in `show info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    pub pid: u32,
    /// The `description` in `global`: the config id the worker was started from.
    pub description: String,
    pub start_time: u64,
}

/// The sockets of one HAProxy.
#[derive(Debug, Clone)]
pub struct Haproxy {
    pub master_socket: PathBuf,
    pub worker_socket: PathBuf,
}

impl Haproxy {
    /// `show proc` through the master.
    pub async fn show_proc(&self) -> Result<ProcList, CliError> {
        let answer = self.master("show proc").await?;
        parse_show_proc(&answer).ok_or(CliError::Unexpected {
            command: "show proc".into(),
            answer,
        })
    }

    /// `show info` of the worker `pid`, current or leaving, through the master.
    pub async fn worker_info(&self, pid: u32) -> Result<WorkerInfo, CliError> {
        let command = format!("@!{pid} show info");
        let answer = self.master(&command).await?;
        parse_show_info(&answer).ok_or(CliError::Unexpected { command, answer })
    }

    /// Asks the master to reload. HAProxy 3.0 answers once the new worker
    /// is ready or the reload failed: `Success=1` or `Success=0`, `--`, then
    /// the start-up log (a refused configuration's alerts). The caller still
    /// waits for the new worker in `show proc` (its `show info` is the proof
    /// of which files it loaded).
    pub async fn reload(&self) -> Result<ReloadAnswer, CliError> {
        self.master("reload")
            .await
            .map(|answer| parse_reload(&answer))
    }

    /// The map and certificate files the current worker loaded, by the
    /// names the configuration gave them (relative paths stay relative).
    pub async fn loaded_files(&self) -> Result<LoadedFiles, CliError> {
        let mut answers = self
            .worker_session(&["show map".to_owned(), "show ssl cert".to_owned()])
            .await?
            .into_iter();
        let maps = parse_show_map(&answers.next().unwrap_or_default());
        let certs = parse_show_ssl_cert(&answers.next().unwrap_or_default()).loaded;
        Ok(LoadedFiles { maps, certs })
    }

    /// Applies `commands` to the current worker on one connection and
    /// returns the worker that took them. The batch is written in one go,
    /// so the worker runs all of it; the error names the first command it
    /// refused, with its answer (never a payload). The others stay applied,
    /// which is safe because each one sets a value rather than changing it
    /// by a step, so applying the batch again converges; a refused
    /// certificate keeps the old one (a commit is all or nothing).
    pub async fn apply_runtime(&self, commands: &[RuntimeCommand]) -> Result<u32, RuntimeError> {
        // First exchange: who answers, any ssl cert transaction left open,
        // and a version for every map to replace.
        let rotates = commands
            .iter()
            .any(|c| matches!(c, RuntimeCommand::ReplaceCert { .. }));
        let mut first = vec!["show info".to_owned()];
        if rotates {
            first.push("show ssl cert".to_owned());
        }
        first.extend(commands.iter().filter_map(|c| match c {
            RuntimeCommand::ReplaceMap { map, .. } => Some(format!("prepare map {map}")),
            _ => None,
        }));
        let mut session = WorkerSession::open(&self.worker_socket).await?;
        let answers = session.exchange(&first).await?;
        let mut answers = answers.iter();
        let show_info = answers.next().cloned().unwrap_or_default();
        let info = parse_show_info(&show_info).ok_or_else(|| CliError::Unexpected {
            command: "show info".into(),
            answer: show_info.clone(),
        })?;
        let mut lines = Vec::with_capacity(commands.len());
        let mut checks = Vec::with_capacity(commands.len());
        if rotates {
            let certs = parse_show_ssl_cert(&answers.next().cloned().unwrap_or_default());
            if let Some(open) = certs.transaction {
                // Left by an apply that died between `set` and `abort`; a
                // `set ssl cert` of any file would now update it.
                tracing::warn!(cert = %open, "aborting an unfinished ssl cert transaction");
                lines.push(format!("abort ssl cert {open}"));
                checks.push(Expect::Anything);
            }
        }
        let mut versions = answers;
        for command in commands {
            match command {
                RuntimeCommand::ServerAddress { .. } => {
                    lines.push(command.summary());
                    checks.push(Expect::AddressChanged);
                }
                RuntimeCommand::ServerWeight { .. } | RuntimeCommand::ServerState { .. } => {
                    lines.push(command.summary());
                    checks.push(Expect::Empty);
                }
                RuntimeCommand::ReplaceMap { map, content } => {
                    let answer = versions.next().cloned().unwrap_or_default();
                    let version = answer
                        .trim()
                        .strip_prefix("New version created: ")
                        .and_then(|v| v.parse::<u64>().ok())
                        .ok_or_else(|| RuntimeError::Refused {
                            command: format!("prepare map {map}"),
                            answer: answer.trim().to_owned(),
                        })?;
                    // One `add map` per chunk: the CLI holds a payload in
                    // one buffer (tune.bufsize, 16 kB by default), and a
                    // map of a large cluster is bigger. Entries of one
                    // version keep the order they are added in.
                    for chunk in map_payloads(content, MAP_PAYLOAD_BYTES) {
                        lines.push(format!("add map @{version} {map} <<\n{chunk}"));
                        checks.push(Expect::Empty);
                    }
                    lines.push(format!("commit map @{version} {map}"));
                    checks.push(Expect::Empty);
                }
                RuntimeCommand::ReplaceCert { cert, pem } => {
                    lines.push(format!("set ssl cert {cert} <<\n{}\n", pem.pem()));
                    checks.push(Expect::CertTransaction(cert.clone()));
                    lines.push(format!("commit ssl cert {cert}"));
                    checks.push(Expect::Committed);
                    lines.push(format!("abort ssl cert {cert}"));
                    checks.push(Expect::Anything);
                }
            }
        }
        let answers = session.exchange(&lines).await?;
        for ((line, answer), check) in lines.iter().zip(&answers).zip(&checks) {
            if !check.accepts(answer) {
                // The command without its payload.
                let command = line.lines().next().unwrap_or_default().to_owned();
                return Err(RuntimeError::Refused {
                    command,
                    answer: withhold_key_material(answer.trim()),
                });
            }
        }
        session.close().await;
        Ok(info.pid)
    }

    /// One command on the master CLI, retried while the master is
    /// re-executing itself (it refuses or resets connections meanwhile).
    async fn master(&self, command: &str) -> Result<String, CliError> {
        let started = tokio::time::Instant::now();
        loop {
            match self.master_once(command).await {
                Err(CliError::Exchange { reset: true, .. })
                    if started.elapsed() < CONNECT_RETRY_FOR =>
                {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                result => return result,
            }
        }
    }

    async fn master_once(&self, command: &str) -> Result<String, CliError> {
        let path = &self.master_socket;
        let exchange_error = |detail: String, reset: bool| CliError::Exchange {
            which: "master",
            path: path.clone(),
            detail,
            reset,
        };
        let mut stream = connect_with_retry("master", path).await?;
        let exchange = async {
            stream.write_all(format!("{command}\n").as_bytes()).await?;
            // The master answers only after the client's end of input.
            stream.shutdown().await?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await?;
            Ok::<_, std::io::Error>(answer)
        };
        match tokio::time::timeout(EXCHANGE_TIMEOUT, exchange).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(error)) => Err(exchange_error(
                error.to_string(),
                matches!(
                    error.kind(),
                    std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
                ),
            )),
            Err(_) => Err(exchange_error(
                format!("no answer to `{command}` within {EXCHANGE_TIMEOUT:?}"),
                false,
            )),
        }
    }

    async fn worker_session(&self, commands: &[String]) -> Result<Vec<String>, CliError> {
        let mut session = WorkerSession::open(&self.worker_socket).await?;
        let answers = session.exchange(commands).await?;
        session.close().await;
        Ok(answers)
    }
}

/// A runtime batch that did not apply.
#[derive(Debug, Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Cli(#[from] CliError),
    /// The worker refused a command.
    #[error("HAProxy refused `{command}`: {answer}")]
    Refused { command: String, answer: String },
}

/// What a successful answer looks like.
#[derive(Debug, Clone)]
enum Expect {
    Empty,
    /// `IP changed from ...`, `port changed from ...` or `no need to change the addr...`.
    AddressChanged,
    /// `Transaction created for certificate <cert>!` (or `updated`): a
    /// transaction for this very file. 2.6 answers `set ssl cert B` while
    /// a transaction for A is open by updating A's and naming A.
    CertTransaction(String),
    /// `Committing <cert>.` ... `Success!`.
    Committed,
    /// Clean-up whose answer does not matter.
    Anything,
}

impl Expect {
    fn accepts(&self, answer: &str) -> bool {
        let answer = answer.trim();
        match self {
            Expect::Empty => answer.is_empty(),
            Expect::AddressChanged => {
                answer.is_empty()
                    || answer.contains("changed from")
                    || answer.starts_with("no need to change")
            }
            Expect::CertTransaction(cert) => {
                answer == format!("Transaction created for certificate {cert}!")
                    || answer == format!("Transaction updated for certificate {cert}!")
            }
            Expect::Committed => answer.ends_with("Success!") && !answer.contains("Can't"),
            Expect::Anything => true,
        }
    }
}

/// `text`, or a note in its place if it holds key material: HAProxy's
/// answers go into errors and logs, and none may carry a key.
fn withhold_key_material(text: &str) -> String {
    if holds_private_key(text) {
        "(answer withheld: it holds key material)".to_owned()
    } else {
        text.to_owned()
    }
}

/// The most payload bytes sent in one `add map` (well under HAProxy's
/// default 16 kB buffer, which also holds the command itself).
const MAP_PAYLOAD_BYTES: usize = 8 * 1024;

/// The payloads of `add map ... <<`: the file's entry lines in order, in
/// chunks of at most `limit` bytes (a longer single line is a chunk of its
/// own), each ended by an empty line (which a payload cannot contain, so
/// blank lines and comments are dropped). An empty map gives no chunk.
fn map_payloads(content: &str, limit: usize) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut chunk = String::new();
    for line in content.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if !chunk.is_empty() && chunk.len() + line.len() + 1 > limit {
            chunk.push('\n');
            chunks.push(std::mem::take(&mut chunk));
        }
        chunk.push_str(line);
        chunk.push('\n');
    }
    if !chunk.is_empty() {
        chunk.push('\n');
        chunks.push(chunk);
    }
    chunks
}

/// An interactive (`prompt`) session on the worker socket: commands are
/// written in one go and answers split on the prompt that ends each one.
struct WorkerSession {
    stream: UnixStream,
    path: PathBuf,
    buffer: String,
}

const PROMPT: &str = "\n> ";

impl WorkerSession {
    async fn open(path: &Path) -> Result<Self, CliError> {
        let stream = connect_with_retry("worker stats", path).await?;
        let mut session = Self {
            stream,
            path: path.to_owned(),
            buffer: String::new(),
        };
        // `prompt` answers with the first prompt and nothing else.
        session.exchange(&["prompt".to_owned()]).await?;
        Ok(session)
    }

    /// Sends `commands` and returns one answer per command, in order.
    async fn exchange(&mut self, commands: &[String]) -> Result<Vec<String>, CliError> {
        let mut text = String::new();
        for command in commands {
            text.push_str(command);
            if !command.ends_with('\n') {
                text.push('\n');
            }
        }
        let exchange = async {
            self.stream.write_all(text.as_bytes()).await?;
            let mut answers = Vec::with_capacity(commands.len());
            let mut chunk = vec![0u8; 64 * 1024];
            while answers.len() < commands.len() {
                if let Some(end) = self.buffer.find(PROMPT) {
                    let answer: String = self.buffer.drain(..end + PROMPT.len()).collect();
                    answers.push(clean_answer(&answer[..end]));
                    continue;
                }
                let read = self.stream.read(&mut chunk).await?;
                if read == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!(
                            "HAProxy closed the connection after {} of {} answers",
                            answers.len(),
                            commands.len()
                        ),
                    ));
                }
                self.buffer
                    .push_str(&String::from_utf8_lossy(&chunk[..read]));
            }
            Ok(answers)
        };
        match tokio::time::timeout(EXCHANGE_TIMEOUT, exchange).await {
            Ok(Ok(answers)) => Ok(answers),
            Ok(Err(error)) => Err(CliError::Exchange {
                which: "worker stats",
                path: self.path.clone(),
                detail: error.to_string(),
                reset: false,
            }),
            Err(_) => Err(CliError::Exchange {
                which: "worker stats",
                path: self.path.clone(),
                detail: format!("no answer within {EXCHANGE_TIMEOUT:?}"),
                reset: false,
            }),
        }
    }

    async fn close(mut self) {
        // Best effort: the answers are in; HAProxy closes on `quit` or EOF.
        let _ = self.stream.write_all(b"quit\n").await;
        let _ = self.stream.shutdown().await;
    }
}

/// Drops the `+ ` prompts HAProxy prints for payload lines.
fn clean_answer(answer: &str) -> String {
    let mut rest = answer;
    while let Some(stripped) = rest.strip_prefix("+ ") {
        rest = stripped;
    }
    rest.strip_prefix('\n').unwrap_or(rest).to_owned()
}

async fn connect_with_retry(which: &'static str, path: &Path) -> Result<UnixStream, CliError> {
    let started = tokio::time::Instant::now();
    // Short pauses: a reload is waiting on this connection, and the
    // master's socket comes back within tens of milliseconds.
    let mut pause = Duration::from_millis(1);
    loop {
        match UnixStream::connect(path).await {
            Ok(stream) => return Ok(stream),
            Err(source) => {
                let transient = matches!(
                    source.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
                );
                if !transient || started.elapsed() > CONNECT_RETRY_FOR {
                    return Err(CliError::Connect {
                        which,
                        path: path.to_owned(),
                        source,
                    });
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(5));
            }
        }
    }
}

/// The names in `show map`: `0 (maps/host.map) pattern loaded from file ...`.
fn parse_show_map(answer: &str) -> Vec<String> {
    answer
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let open = line.find('(')?;
            let close = line[open..].find(") ")? + open;
            Some(line[open + 1..close].to_owned())
        })
        .collect()
}

/// What `show ssl cert` lists.
#[derive(Debug, Default, PartialEq, Eq)]
struct ShowSslCert {
    /// Certificate files by the name the configuration (or crt-list) gave.
    loaded: Vec<String>,
    /// The file of the open transaction, if any (HAProxy has at most one).
    transaction: Option<String>,
}

/// Parses 2.6's `show ssl cert`; the `# transaction` part appears only
/// while one is open:
///
/// ```text
/// # transaction
/// *certs/web.pem
/// # filename
/// certs/default.pem
/// certs/web.pem
/// ```
fn parse_show_ssl_cert(answer: &str) -> ShowSslCert {
    let mut listed = ShowSslCert::default();
    for line in answer.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.strip_prefix('*') {
            Some(open) => listed.transaction = Some(open.to_owned()),
            None => listed.loaded.push(line.to_owned()),
        }
    }
    listed
}

/// What the master answered to `reload`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloadAnswer {
    /// `Success=1` or `Success=0`; `None` when the answer had no status
    /// (the master closed the connection while re-executing itself).
    pub succeeded: Option<bool>,
    /// The new process's start-up messages, after the `--` line.
    pub startup_log: String,
}

/// Reads `Success=<0|1>\n--\n<start-up log>`.
fn parse_reload(answer: &str) -> ReloadAnswer {
    let (status, log) = answer.split_once("\n--\n").unwrap_or((answer, ""));
    let succeeded = match status.trim().strip_prefix("Success=") {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    };
    ReloadAnswer {
        succeeded,
        startup_log: log.trim_end().to_owned(),
    }
}

/// Parses 2.6's `show proc`:
///
/// ```text
/// #<PID>          <type>          <reloads>       <uptime>        <version>
/// 3188            master          2 [failed: 0]   0d00h10m45s     2.6.12-1+deb12u4
/// # workers
/// 11334           worker          0               0d00h00m00s     2.6.12-1+deb12u4
/// # old workers
/// 11010           worker          1               0d00h00m16s     2.6.12-1+deb12u4
/// # programs
/// ```
pub fn parse_show_proc(answer: &str) -> Option<ProcList> {
    #[derive(PartialEq)]
    enum Part {
        Master,
        Workers,
        Old,
        Other,
    }
    let mut list = ProcList::default();
    let mut part = Part::Master;
    let mut saw_master = false;
    for line in answer.lines() {
        let line = line.trim();
        match line {
            "# workers" => part = Part::Workers,
            "# old workers" => part = Part::Old,
            _ if line.starts_with('#') => {
                if !line.starts_with("#<PID>") {
                    part = Part::Other;
                }
            }
            "" => {}
            _ => {
                let mut fields = line.split_whitespace();
                let Some(pid) = fields.next().and_then(|p| p.parse::<u32>().ok()) else {
                    continue;
                };
                match part {
                    Part::Master if fields.next() == Some("master") => {
                        saw_master = true;
                        list.master_pid = pid;
                        list.reloads = fields.next()?.parse().ok()?;
                        if let Some(failed) = line.split("[failed: ").nth(1) {
                            list.failed_reloads = failed.split(']').next()?.trim().parse().ok()?;
                        }
                    }
                    Part::Workers if fields.next() == Some("worker") => list.current.push(pid),
                    Part::Old if fields.next() == Some("worker") => list.leaving.push(pid),
                    _ => {}
                }
            }
        }
    }
    saw_master.then_some(list)
}

/// Reads `Pid`, `description` and `Start_time_sec` from `show info`.
pub fn parse_show_info(answer: &str) -> Option<WorkerInfo> {
    let mut pid = None;
    let mut description = String::new();
    let mut start_time = None;
    for line in answer.lines() {
        if let Some(value) = line.strip_prefix("Pid: ") {
            pid = value.trim().parse().ok();
        } else if let Some(value) = line.strip_prefix("description: ") {
            value.trim().clone_into(&mut description);
        } else if let Some(value) = line.strip_prefix("Start_time_sec: ") {
            start_time = value.trim().parse().ok();
        }
    }
    Some(WorkerInfo {
        pid: pid?,
        description,
        start_time: start_time?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_answers_carry_the_status_and_the_start_up_log() {
        // What 3.0.11's master answered to a reload of a refused file.
        let failed = "Success=0\n--\n[NOTICE]   (3592) : haproxy version is 3.0.11-1+deb13u5\n\
            [ALERT]    (3592) : config : parsing [haproxy.cfg:11] : unknown keyword 'bogus' in 'frontend' section\n\
            [WARNING]  (3592) : Loading failure!\n\n";
        let answer = parse_reload(failed);
        assert_eq!(answer.succeeded, Some(false));
        assert!(answer.startup_log.contains("unknown keyword 'bogus'"));
        assert!(answer.startup_log.ends_with("Loading failure!"));
        assert_eq!(parse_reload("Success=1\n--\n\n").succeeded, Some(true));
        assert_eq!(parse_reload("").succeeded, None);
    }

    #[test]
    fn show_proc_with_old_workers_and_failed_reloads() {
        let answer = "#<PID>          <type>          <reloads>       <uptime>        <version>      \n\
            3188            master          2 [failed: 1]   0d00h10m45s     2.6.12-1+deb12u4\n\
            # workers\n\
            11334           worker          0               0d00h00m00s     2.6.12-1+deb12u4\n\
            # old workers\n\
            11010           worker          1               0d00h00m16s     2.6.12-1+deb12u4\n\
            11000           worker          2               0d00h00m36s     2.6.12-1+deb12u4\n\
            # programs\n\n";
        assert_eq!(
            parse_show_proc(answer),
            Some(ProcList {
                master_pid: 3188,
                current: vec![11334],
                leaving: vec![11010, 11000],
                reloads: 2,
                failed_reloads: 1,
            })
        );
        assert_eq!(parse_show_proc("Unknown command\n"), None);
    }

    #[test]
    fn show_info_fields() {
        let answer = "Name: HAProxy\nPid: 42\nUptime_sec: 3\ndescription: sha256:ab\nStart_time_sec: 1796116461\n";
        assert_eq!(
            parse_show_info(answer),
            Some(WorkerInfo {
                pid: 42,
                description: "sha256:ab".into(),
                start_time: 1796116461,
            })
        );
        assert_eq!(parse_show_info("Name: HAProxy\n"), None);
    }

    #[test]
    fn payload_answers_and_map_payloads() {
        assert_eq!(clean_answer("+ + + "), "");
        assert_eq!(clean_answer("No such server.\n"), "No such server.\n");
        assert_eq!(map_payloads("a 1\n\n# c\nb 2", 100), ["a 1\nb 2\n\n"]);
        assert_eq!(
            map_payloads("a 1\nb 2\nc 3\n", 8),
            ["a 1\nb 2\n\n", "c 3\n\n"],
            "chunks keep the order and stay under the limit"
        );
        assert!(map_payloads("# only a comment\n", 100).is_empty());
        assert!(Expect::AddressChanged.accepts("IP changed from '10.0.0.1' to '10.0.0.2'\n"));
        assert!(!Expect::AddressChanged.accepts("No such server.\n"));
        assert!(!Expect::Empty.accepts("Proxy is disabled.\n"));
    }

    #[test]
    fn show_ssl_cert_lists_files_and_the_open_transaction() {
        let idle = "# filename\ncerts/default.pem\ncerts/web.pem\n\n";
        assert_eq!(
            parse_show_ssl_cert(idle),
            ShowSslCert {
                loaded: vec!["certs/default.pem".into(), "certs/web.pem".into()],
                transaction: None,
            }
        );
        let open = "# transaction\n*certs/web.pem\n# filename\ncerts/default.pem\ncerts/web.pem\n";
        assert_eq!(
            parse_show_ssl_cert(open).transaction.as_deref(),
            Some("certs/web.pem")
        );
        assert_eq!(parse_show_ssl_cert(open).loaded.len(), 2);
        assert_eq!(
            parse_show_map(
                "# id (file) description\n0 (maps/hosts.map) pattern loaded from file 'maps/hosts.map' used by map at file 'x' line 9. curr_ver=0 next_ver=0 entry_cnt=1\n"
            ),
            ["maps/hosts.map"]
        );
    }

    #[test]
    fn cert_answers_must_name_the_file_and_succeed() {
        let set = Expect::CertTransaction("certs/web.pem".into());
        assert!(set.accepts("Transaction created for certificate certs/web.pem!\n"));
        assert!(set.accepts("Transaction updated for certificate certs/web.pem!\n"));
        // 2.6's answer when another file's transaction was open: refused.
        assert!(!set.accepts("Transaction updated for certificate certs/other.pem!\n"));
        assert!(!set.accepts("unable to load certificate from file 'certs/web.pem'.\nCan't load the payload\nCan't update certs/web.pem!\n"));
        assert!(Expect::Committed.accepts("Committing certs/web.pem.\nSuccess!\n"));
        assert!(!Expect::Committed.accepts("inconsistencies between private key and certificate loaded 'certs/web.pem'.\nCan't commit certs/web.pem!\n"));
        assert!(
            !Expect::Committed.accepts("No ongoing transaction! !\nCan't commit certs/web.pem!\n")
        );
        assert_eq!(withhold_key_material("No such server."), "No such server.");
        assert!(!withhold_key_material("-----BEGIN PRIVATE KEY-----\nMIGH").contains("MIGH"));
    }
}

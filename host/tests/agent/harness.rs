//! A proxy pod on loopback, as the chart runs it: HAProxy started by the
//! real `haptic haproxy`, the real `haptic agent` beside it, backends that
//! answer with their own name, and a blocking HTTP client that never
//! retries. Shared by the agent's tests and its benchmark.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use haptic::protocol::{AgentClient, ApplyRequest, Bundle, BundleFile, FencingToken, PodState};

pub const TOKEN: &str = "test-token-4f2a";

pub fn haptic_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_haptic"))
}

/// Ports come from the one picker every host test shares: below the
/// kernel's ephemeral range, so no outgoing connection takes one between
/// the pick and HAProxy's bind (seen: "reload-failed ... address already
/// in use" when this picked from `:0`).
pub use crate::support::free_port;

/// A TCP server on loopback: each connection served on a thread of its own
/// by `serve`, until the server is dropped. The auth services and mirror
/// targets of the SPOA's tests.
pub struct ThreadServer {
    pub address: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl ThreadServer {
    pub fn start(serve: impl Fn(TcpStream) + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback server");
        let address = listener.local_addr().expect("address");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let serve = Arc::new(serve);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let serve = serve.clone();
                std::thread::spawn(move || serve(stream));
            }
        });
        Self { address, stop }
    }
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.address);
    }
}

/// One request's head from `reader`: the request line and its headers
/// (names lower-cased), or `None` when the connection ends first.
pub fn read_head(reader: &mut impl BufRead) -> Option<(String, Vec<(String, String)>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let request_line = line.trim().to_owned();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line == "\r\n" {
            return Some((request_line, headers));
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
}

/// A child process killed (and reaped) on drop.
pub struct Process(pub Child);

impl Process {
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One proxy pod: its directory, HAProxy, the agent and a client for it.
pub struct Pod {
    pub dir: tempfile::TempDir,
    pub haproxy: Process,
    pub agent: Option<Process>,
    pub agent_port: u16,
    pub http_port: u16,
    /// Where the agent serves SPOP (`--spoa-listen`), a port of its own so
    /// pods of tests running at once never share an agent.
    pub spoa_port: u16,
    pub client: AgentClient,
    pub agent_args: Vec<String>,
}

impl Pod {
    /// HAProxy from the bootstrap configuration and an agent with a token.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    pub fn start_with(agent_args: &[&str]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("haptic-agent-")
            .tempdir()
            .expect("tempdir");
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).expect("token file");
        let haproxy = start_haproxy(dir.path());
        let agent_port = free_port();
        let mut pod = Pod {
            client: client(agent_port, Some(TOKEN)),
            dir,
            haproxy,
            agent: None,
            agent_port,
            http_port: free_port(),
            spoa_port: free_port(),
            agent_args: agent_args.iter().map(|s| (*s).to_owned()).collect(),
        };
        pod.start_agent();
        pod
    }

    pub fn config_dir(&self) -> PathBuf {
        self.dir.path().join("haproxy")
    }

    /// Starts (or restarts) the agent and waits until it answers.
    pub fn start_agent(&mut self) {
        let log = std::fs::File::options()
            .create(true)
            .append(true)
            .open(self.dir.path().join("agent.log"))
            .expect("agent log");
        let child = Command::new(haptic_binary())
            .arg("agent")
            .arg("--config-dir")
            .arg(self.config_dir())
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.agent_port))
            .arg("--token-file")
            .arg(self.dir.path().join("token"))
            .arg("--spoa-listen")
            .arg(format!("127.0.0.1:{}", self.spoa_port))
            .args(&self.agent_args)
            .env("HAPTIC_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("haptic agent starts");
        self.agent = Some(Process(child));
        wait_for_port(self.agent_port);
    }

    /// Waits until every worker runs `id` and returns that state. A reload
    /// answers once the new worker serves; on a loaded machine the worker it
    /// replaced may still be leaving, so a test that later reads
    /// `converged` settles first instead of racing the old worker's exit.
    pub async fn settle(&self, id: &str) -> PodState {
        let state = self
            .client
            .wait_converged(id, Duration::from_secs(10))
            .await
            .expect("the agent answers");
        assert_eq!(
            state.converged.as_deref(),
            Some(id),
            "every worker runs {id} within 10 s: {state:?}"
        );
        state
    }

    /// `kill -9` of the agent.
    pub fn kill_agent(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            agent.kill();
        }
    }

    /// Kills HAProxy (master and workers) and starts it again the way its
    /// container would restart.
    pub fn restart_haproxy(&mut self) {
        let workers = haproxy_children(self.haproxy.pid());
        self.haproxy.kill();
        for pid in workers {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
        self.haproxy = start_haproxy(self.dir.path());
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }

    pub fn haproxy_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("haproxy.log")).unwrap_or_default()
    }

    /// Everything under the configuration directory, with contents, to
    /// prove a refused request changed nothing.
    pub fn disk_snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut entries = Vec::new();
        snapshot(&self.config_dir(), &mut entries);
        entries.sort();
        entries
    }
}

fn snapshot(dir: &Path, into: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).unwrap_or_default();
            into.push((path, target.into_os_string().into_encoded_bytes()));
        } else if kind.is_dir() {
            snapshot(&path, into);
        } else if path.extension().is_none_or(|e| e != "sock") {
            into.push((path.clone(), std::fs::read(&path).unwrap_or_default()));
        }
    }
}

fn haproxy_children(master: u32) -> Vec<u32> {
    let output = Command::new("pgrep")
        .arg("-P")
        .arg(master.to_string())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    output
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn start_haproxy(pod_dir: &Path) -> Process {
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(pod_dir.join("haproxy.log"))
        .expect("haproxy log");
    let child = Command::new(haptic_binary())
        .arg("haproxy")
        .arg("--config-dir")
        .arg(pod_dir.join("haproxy"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("haptic haproxy starts (apt-get install haproxy)");
    let process = Process(child);
    let master = haptic::agent::default_master_socket(&pod_dir.join("haproxy"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::os::unix::net::UnixStream::connect(&master).is_err() {
        assert!(
            Instant::now() < deadline,
            "HAProxy's master socket never appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    process
}

pub fn client(port: u16, token: Option<&str>) -> AgentClient {
    AgentClient::new(
        format!("http://127.0.0.1:{port}"),
        token.map(str::to_owned),
        None,
        Duration::from_secs(60),
    )
    .expect("client")
}

pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn wait_for_http(port: u16, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if get(port, "localhost", path).is_ok() {
            return;
        }
        assert!(Instant::now() < deadline, "nothing answered on port {port}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Backends that answer every request with their name, on 127.0.0.x.
pub struct Backends {
    stop: Arc<AtomicBool>,
    pub addresses: Vec<SocketAddr>,
}

impl Backends {
    pub fn start(names: &[&str]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let mut addresses = Vec::new();
        for name in names {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
            addresses.push(listener.local_addr().expect("address"));
            let name = (*name).to_owned();
            let stop = stop.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let name = name.clone();
                    std::thread::spawn(move || serve_backend(stream, &name));
                }
            });
        }
        Self { stop, addresses }
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for address in &self.addresses {
            let _ = TcpStream::connect(address);
        }
    }
}

/// Keep-alive HTTP/1.1: answers every request on the connection.
fn serve_backend(stream: TcpStream, name: &str) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut writer = stream;
    loop {
        let mut line = String::new();
        let mut content_length = 0usize;
        // Request line and headers.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                content_length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; content_length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{name}",
            name.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// One response: status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub body: String,
    pub close: bool,
    /// Every header, names lower-cased, in order.
    pub headers: Vec<(String, String)>,
}

impl Response {
    /// The first header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A keep-alive client connection that never retries: a request that
/// fails is an error for the caller to count.
pub struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Connection {
    pub fn open(port: u16) -> std::io::Result<Self> {
        let stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    pub fn request(&mut self, host: &str, path: &str) -> std::io::Result<Response> {
        self.request_with(host, path, &[])
    }

    /// `GET` with `headers` added after `Host` and `User-Agent`.
    pub fn request_with(
        &mut self,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> std::io::Result<Response> {
        let extra: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        write!(
            self.writer,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: haptic-test\r\n{extra}\r\n"
        )?;
        read_response(&mut self.reader)
    }

    /// `method` with `body` (its Content-Length set).
    pub fn send(
        &mut self,
        host: &str,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> std::io::Result<Response> {
        write!(
            self.writer,
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: haptic-test\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )?;
        self.writer.write_all(body)?;
        read_response(&mut self.reader)
    }
}

fn read_response(reader: &mut impl BufRead) -> std::io::Result<Response> {
    let broken =
        |what: &str| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, what.to_owned());
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(broken("connection closed before a response"));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| broken("no status line"))?;
    let mut content_length = 0usize;
    let mut close = false;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(broken("connection closed in the headers"));
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            content_length = value.trim().parse().unwrap_or(0);
        }
        if lower.starts_with("connection:") && lower.contains("close") {
            close = true;
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body)?;
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
        close,
        headers,
    })
}

/// `POST <path>` with a JSON `body` and the bearer token, on a fresh
/// connection: what a controller of another version might send.
pub fn post_json(port: u16, path: &str, body: &str) -> std::io::Result<Response> {
    let mut connection = Connection::open(port)?;
    write!(
        connection.writer,
        "POST {path} HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    read_response(&mut connection.reader)
}

/// One request on a fresh connection.
pub fn get(port: u16, host: &str, path: &str) -> std::io::Result<Response> {
    Connection::open(port)?.request(host, path)
}

/// One request over TLS on a fresh connection, trusting only the
/// certificates in `ca_pem` and sending `sni`: the certificate the server
/// presented (DER) and the response. A certificate `ca_pem` did not sign
/// fails the handshake, which is an error here.
pub fn tls_get(
    port: u16,
    sni: &str,
    ca_pem: &str,
    path: &str,
) -> std::io::Result<(Vec<u8>, Response)> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.map_err(std::io::Error::other)?)
            .map_err(std::io::Error::other)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(std::io::Error::other)?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from(sni.to_owned()).map_err(std::io::Error::other)?;
    let client =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(std::io::Error::other)?;
    let tcp = TcpStream::connect(("127.0.0.1", port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = rustls::StreamOwned::new(client, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n"
    )?;
    tls.flush()?;
    let mut reader = BufReader::new(tls);
    let response = read_response(&mut reader)?;
    let presented = reader
        .get_ref()
        .conn
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| cert.to_vec())
        .ok_or_else(|| std::io::Error::other("the server presented no certificate"))?;
    Ok((presented, response))
}

/// A CA: its certificate, key pair and parameters (to sign with).
pub struct Issuer(
    pub rcgen::Certificate,
    pub rcgen::KeyPair,
    pub rcgen::CertificateParams,
);

pub fn issuer(name: &str) -> Issuer {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.clone().self_signed(&key).expect("self-signed");
    Issuer(cert, key, params)
}

/// A certificate `ca` signed for `name`, as (cert PEM, key PEM).
pub fn leaf(ca: &Issuer, name: &str, server: bool) -> (String, String) {
    let (cert, key) = signed(ca, name, server);
    (cert.pem(), key.serialize_pem())
}

fn signed(ca: &Issuer, name: &str, server: bool) -> (rcgen::Certificate, rcgen::KeyPair) {
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).expect("params");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.extended_key_usages = vec![if server {
        rcgen::ExtendedKeyUsagePurpose::ServerAuth
    } else {
        rcgen::ExtendedKeyUsagePurpose::ClientAuth
    }];
    let key = rcgen::KeyPair::generate().expect("key");
    let issuer = rcgen::Issuer::from_params(&ca.2, &ca.1);
    let cert = params.signed_by(&key, &issuer).expect("signed");
    (cert, key)
}

/// A certificate file as HAProxy loads it (leaf, its CA, key) from a CA of
/// its own, so a client trusting `ca_pem` accepts this generation only.
pub struct CertFile {
    /// The PEM file: chain, then key.
    pub pem: String,
    pub ca_pem: String,
    pub key_pem: String,
    /// The leaf, as a client sees it.
    pub der: Vec<u8>,
}

impl CertFile {
    pub fn new(ca_name: &str, host: &str) -> Self {
        let ca = issuer(ca_name);
        let (cert, key) = signed(&ca, host, true);
        let (ca_pem, key_pem) = (ca.0.pem(), key.serialize_pem());
        Self {
            pem: format!("{}{ca_pem}{key_pem}", cert.pem()),
            der: cert.der().to_vec(),
            ca_pem,
            key_pem,
        }
    }

    /// The key's base64 lines: none may appear in an error or a log.
    pub fn key_lines(&self) -> Vec<&str> {
        self.key_pem
            .lines()
            .filter(|line| !line.starts_with("-----"))
            .collect()
    }
}

/// A server line: name, address, enabled.
pub type Server<'a> = (&'a str, SocketAddr, bool);

/// A configuration like the bundled libraries render: `backends` each with
/// its servers (`name`, address, enabled), routed by host `<backend>.test`.
pub fn config(http_port: u16, backends: &[(&str, Vec<Server<'_>>)], extra: &str) -> String {
    let mut text = format!(
        "global\n    default-path config\n    hard-stop-after 30s\n\n\
         defaults\n    mode http\n    option idle-close-on-response\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n    timeout http-keep-alive 30s\n\n\
         frontend http\n    bind 127.0.0.1:{http_port}\n    use_backend %[req.hdr(host),field(1,:),lower,map_str(maps/hosts.map)] if {{ req.hdr(host),field(1,:),lower,map_str(maps/hosts.map) -m found }}\n    default_backend not-found\n{extra}\n\
         backend not-found\n    http-request return status 404 content-type text/plain string 'no route'\n"
    );
    for (backend, servers) in backends {
        text.push_str(&format!("\nbackend {backend}\n    balance roundrobin\n"));
        for (name, address, enabled) in servers {
            text.push_str(&format!(
                "    server {name} {address}{}\n",
                if *enabled { "" } else { " disabled" }
            ));
        }
    }
    text
}

/// The host map routing `<backend>.test` to each backend.
pub fn hosts_map(backends: &[&str]) -> BundleFile {
    BundleFile::new(
        "maps/hosts.map",
        backends
            .iter()
            .map(|b| format!("{b}.test {b}\n"))
            .collect::<String>(),
    )
}

/// The bundle most tests use: host `web.test` routed to backend `web`
/// with the one server `one` at `server`, plus `extra` frontend lines.
pub fn web_bundle(http_port: u16, server: SocketAddr, extra: &str) -> Bundle {
    bundle(
        config(http_port, &[("web", vec![("one", server, true)])], extra),
        vec![hosts_map(&["web"])],
    )
}

/// Backend `web` with servers `one` and `two`, each enabled or not: the
/// bundle of the tests that flip server states.
pub fn pair_bundle(
    http_port: u16,
    one: (SocketAddr, bool),
    two: (SocketAddr, bool),
    extra: &str,
) -> Bundle {
    bundle(
        config(
            http_port,
            &[("web", vec![("one", one.0, one.1), ("two", two.0, two.1)])],
            extra,
        ),
        vec![hosts_map(&["web"])],
    )
}

/// The crt-list the ingress library writes: one line per Ingress secret.
pub const CRT_LIST: &str = "certs/shop_web.pem web.test\n";

/// Backend `web` with servers `one` and `two` (each enabled or not), served
/// over TLS on `https_port`: `certs/default.pem` for unknown names and, by
/// the crt-list, `certs/shop_web.pem` for `web.test`.
pub fn tls_bundle(
    pod: &Pod,
    https_port: u16,
    servers: [(SocketAddr, bool); 2],
    default: &CertFile,
    shop: &str,
    more: &[(&str, &str)],
) -> Bundle {
    let https = format!(
        "\nfrontend https\n    bind 127.0.0.1:{https_port} ssl crt certs/default.pem crt-list certs/ingress.crt-list\n    default_backend web\n"
    );
    let [(one, one_on), (two, two_on)] = servers;
    let mut crt_list = CRT_LIST.to_owned();
    let mut files = vec![
        hosts_map(&["web"]),
        BundleFile::new("certs/default.pem", default.pem.clone()),
        BundleFile::new("certs/shop_web.pem", shop),
    ];
    for (name, pem) in more {
        crt_list.push_str(&format!("certs/{name}.pem {name}.test\n"));
        files.push(BundleFile::new(format!("certs/{name}.pem"), *pem));
    }
    files.push(BundleFile::new("certs/ingress.crt-list", crt_list));
    bundle(
        config(
            pod.http_port,
            &[("web", vec![("one", one, one_on), ("two", two, two_on)])],
            &https,
        ),
        files,
    )
}

pub fn bundle(config: String, files: Vec<BundleFile>) -> Bundle {
    Bundle::new(config, files)
}

/// Apply requests with increasing fencing tokens.
#[derive(Debug, Default)]
pub struct Tokens {
    pub epoch: u64,
    pub sequence: u64,
}

impl Tokens {
    /// The token the last request carried.
    pub fn last(&self) -> FencingToken {
        FencingToken {
            epoch: self.epoch.max(1),
            sequence: self.sequence,
        }
    }

    pub fn request(&mut self, bundle: &Bundle) -> ApplyRequest {
        self.sequence += 1;
        ApplyRequest {
            token: FencingToken {
                epoch: self.epoch.max(1),
                sequence: self.sequence,
            },
            bundle: bundle.clone(),
        }
    }
}

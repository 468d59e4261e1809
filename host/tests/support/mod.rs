//! What the integration tests that run the real HAProxy share.

// Each test crate compiles this module and uses part of it.
#![allow(dead_code)]

mod ports;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// Like the rest of this module, each test crate uses part of it.
#[allow(unused_imports)]
pub use ports::{free_port, free_ports};

/// HAProxy in the foreground, killed when dropped.
pub struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts HAProxy on `dir/haproxy.cfg` and waits until it listens on `port`.
pub fn start_haproxy(dir: &Path, port: u16) -> Haproxy {
    let child = Command::new(std::env::var("HAPTIC_HAPROXY").unwrap_or_else(|_| "haproxy".into()))
        .args(["-db", "-f", "haproxy.cfg"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("haproxy.log")).expect("log file"))
        .spawn()
        .expect("haproxy starts (apt-get install haproxy)");
    let haproxy = Haproxy(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "haproxy did not listen on {port}: {}",
            std::fs::read_to_string(dir.join("haproxy.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    haproxy
}

/// One plain HTTP/1.1 GET with `Connection: close`.
pub struct Response {
    pub status: u16,
    /// The `Location` header, empty when there is none.
    pub location: String,
    pub body: String,
}

/// [`try_http_get`], for a peer that must answer.
pub fn http_get(port: u16, host: &str, path: &str) -> Response {
    try_http_get(port, host, path).expect("GET through haproxy")
}

/// One GET; an error when nothing listens or the peer does not answer.
pub fn try_http_get(port: u16, host: &str, path: &str) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let location = response
        .lines()
        .find_map(|line| line.strip_prefix("location: "))
        .unwrap_or("")
        .to_owned();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Ok(Response {
        status,
        location,
        body,
    })
}

/// A `haptic run` process, stopped as Ctrl-C stops it when dropped (killed
/// if it has not exited within 15 s).
pub struct LocalRun(pub Child);

impl Drop for LocalRun {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

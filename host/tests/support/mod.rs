//! What the integration tests that run the real HAProxy share.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

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

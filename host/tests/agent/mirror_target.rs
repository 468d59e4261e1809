//! A real mirror target over TCP for the SPOA's tests and bench, and the
//! HAProxy side of request mirroring as `haptic_sdk::agent::MirrorEngine`
//! writes it (docs/spoa.md).

#![allow(dead_code)]

use std::io::{BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use haptic::protocol::{Bundle, BundleFile};

use crate::harness::{Pod, ThreadServer, read_head};

/// One copy as the target received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    /// `GET /a?b HTTP/1.1`.
    pub request_line: String,
    /// Names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Copy {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A mirror target that records every request and answers 200 after
/// `delay` (a slow mirror: 5 s).
pub struct MirrorTarget {
    pub address: SocketAddr,
    seen: Arc<Mutex<Vec<Copy>>>,
    _server: ThreadServer,
}

impl MirrorTarget {
    pub fn start(delay: Duration) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorded = seen.clone();
        let server = ThreadServer::start(move |stream| serve(stream, &recorded, delay));
        Self {
            address: server.address,
            seen,
            _server: server,
        }
    }

    pub fn copies(&self) -> Vec<Copy> {
        self.seen.lock().expect("seen").clone()
    }

    /// Waits up to `within` for at least `count` copies; all of them.
    pub fn wait_for(&self, count: usize, within: Duration) -> Vec<Copy> {
        let deadline = Instant::now() + within;
        loop {
            let copies = self.copies();
            if copies.len() >= count || Instant::now() >= deadline {
                return copies;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn serve(stream: TcpStream, seen: &Mutex<Vec<Copy>>, delay: Duration) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut writer = stream;
    while let Some((request_line, headers)) = read_head(&mut reader) {
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        seen.lock().expect("seen").push(Copy {
            request_line,
            headers,
            body,
        });
        std::thread::sleep(delay);
        if writer
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}

/// HAProxy's side, with the rules `MirrorEngine` writes (but a processing
/// timeout of 3 s, not 100 ms, so an agent that held a client on its
/// mirror would cost seconds, plain in a test): routes under
/// `/copy` mirror to `target` with bodies and Host `shadow.<host>`,
/// `/headers` without bodies, `/slow` to `slow`, `/dead` to `dead`; `/open`
/// is not mirrored. The app answers with the length of the body it got.
pub fn mirror_bundle(pod: &Pod, target: SocketAddr, slow: SocketAddr, dead: SocketAddr) -> Bundle {
    let config = format!(
        "global\n    default-path config\n    hard-stop-after 30s\n\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\n\
         frontend http\n    bind 127.0.0.1:{http}\n    filter spoe engine haptic-mirror config \"${{HAPTIC_BUNDLE}}/mirror.spoe.conf\"\n\
         \x20   http-request set-var(txn.m_profile) str(test.copy) if {{ path_beg /copy }}\n\
         \x20   http-request set-var(txn.m_body) bool(true) if {{ path_beg /copy }}\n\
         \x20   http-request set-var(txn.m_profile) str(test.headers) if {{ path_beg /headers }}\n\
         \x20   http-request set-var(txn.m_profile) str(test.slow) if {{ path_beg /slow }}\n\
         \x20   http-request set-var(txn.m_profile) str(test.dead) if {{ path_beg /dead }}\n\
         \x20   http-request wait-for-body time 1s at-least 8192 if {{ var(txn.m_body) -m found }}\n\
         \x20   http-request set-var(txn.m_length) req.body_len if {{ var(txn.m_body) -m found }}\n\
         \x20   http-request set-var(txn.m_send) bool(true) if {{ var(txn.m_profile) -m found }} !{{ var(txn.m_body) -m found }}\n\
         \x20   http-request set-var(txn.m_send) bool(true) if {{ var(txn.m_body) -m found }} {{ req.body_size le 8192 }} {{ req.body_size,sub(txn.m_length) eq 0 }}\n\
         \x20   http-request set-var(txn.m_data) req.body if {{ var(txn.m_body) -m found }} {{ var(txn.m_send) -m bool }}\n\
         \x20   http-request send-spoe-group haptic-mirror haptic-mirror if {{ var(txn.m_send) -m bool }}\n\
         \x20   default_backend app\n\n\
         backend app\n    option http-buffer-request\n    http-request return status 200 content-type text/plain lf-string \"length=%[req.body_len]\"\n\n\
         backend haptic-mirror-spoa\n    mode tcp\n    option spop-check\n    timeout connect 1s\n    timeout server 30s\n    server agent 127.0.0.1:{spoa} check inter 1s fall 1 rise 1\n",
        http = pod.http_port,
        spoa = pod.spoa_port,
    );
    let spoe = "[haptic-mirror]\nspoe-agent haptic-mirror\n    groups haptic-mirror\n    option var-prefix m\n    option pipelining\n\
         \x20   timeout hello 2s\n    timeout idle 30s\n    timeout processing 3s\n    use-backend haptic-mirror-spoa\n\n\
         spoe-message haptic-mirror\n    args profile=var(txn.m_profile) method=method tls=ssl_fc host=req.hdr(host) pathq=pathq src=src headers=req.hdrs_bin body=var(txn.m_data)\n\n\
         spoe-group haptic-mirror\n    messages haptic-mirror\n";
    let profiles = serde_json::json!({"mirror": {
        "test.copy": {"targets": [{"url": format!("http://{target}"), "host": "shadow.$host"}]},
        "test.headers": {"targets": [{"url": format!("http://{target}$request_uri"), "body": false}]},
        "test.slow": {"targets": [{"url": format!("http://{slow}")}]},
        "test.dead": {"targets": [{"url": format!("http://{dead}"), "timeoutMs": 500}]},
    }});
    Bundle::new(
        config,
        vec![
            BundleFile::new("mirror.spoe.conf", spoe),
            BundleFile::new("spoa/test.json", profiles.to_string()),
        ],
    )
}

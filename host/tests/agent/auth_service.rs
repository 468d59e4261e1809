//! A real auth service over TCP for the SPOA's tests and bench, and the
//! HAProxy side of external authentication as a library writes it
//! (docs/spoa.md). Shared by the SPOA's tests and its benchmark.

#![allow(dead_code)]

use std::io::{BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use haptic::protocol::{Bundle, BundleFile};

use crate::harness::{Pod, ThreadServer, read_head};

/// One request's headers as the auth service saw them, the request line
/// first (as `:request`).
pub type Seen = Vec<(String, String)>;

/// An auth service like oauth2-proxy's `/oauth2/auth`: `session=ada` is a
/// signed-in user (202 with `X-Auth-Request-*` and a refreshed cookie),
/// `session=anonymous` is let in with no user named, `session=banned` is
/// forbidden, no session is 401. An original URL under
/// `/slow` waits 3 s; under `/garbage` the answer is not HTTP. Every
/// request's headers are recorded, and the connections it accepted counted.
pub struct AuthService {
    pub address: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    connections: Arc<AtomicUsize>,
    _server: ThreadServer,
}

impl AuthService {
    pub fn start() -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (recorded, counted) = (seen.clone(), connections.clone());
        let server = ThreadServer::start(move |stream| {
            counted.fetch_add(1, Ordering::SeqCst);
            serve_auth(stream, &recorded);
        });
        Self {
            address: server.address,
            seen,
            connections,
            _server: server,
        }
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }

    /// The connections the agent opened to it so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn serve_auth(stream: TcpStream, seen: &Mutex<Vec<Seen>>) {
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut writer = stream;
    while let Some((request_line, head)) = read_head(&mut reader) {
        let mut headers = vec![(":request".to_owned(), request_line)];
        headers.extend(head);
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let (url, cookie) = (header("x-original-url"), header("cookie"));
        seen.lock().expect("seen").push(headers.clone());
        if url.contains("/garbage") {
            let _ = writer.write_all(b"this is not HTTP\r\n\r\n");
            return;
        }
        if url.contains("/slow") {
            std::thread::sleep(Duration::from_secs(3));
        }
        let answer = if cookie.contains("session=ada") {
            "HTTP/1.1 202 Accepted\r\nX-Auth-Request-User: ada\r\nX-Auth-Request-Email: ada@example.test\r\nSet-Cookie: session=ada; Path=/; HttpOnly\r\nContent-Length: 0\r\n\r\n"
        } else if cookie.contains("session=anonymous") {
            "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
        } else if cookie.contains("session=banned") {
            "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
        } else {
            "HTTP/1.1 401 Unauthorized\r\nSet-Cookie: csrf=1; Path=/\r\nContent-Length: 0\r\n\r\n"
        };
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// HAProxy's side, as a library writes it with docs/spoa.md: routes under
/// `/signin`, `/plain`, `/cached` and `/closing` (keep-alive off) ask the
/// agent with their profile; `/open` does not. The app answers with the user header it received.
pub fn auth_bundle(pod: &Pod, auth: SocketAddr, timeout_ms: u64) -> Bundle {
    let config = format!(
        "global\n    default-path config\n    hard-stop-after 30s\n\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\n\
         frontend http\n    bind 127.0.0.1:{http}\n    filter spoe engine haptic-auth config \"${{HAPTIC_BUNDLE}}/auth.spoe.conf\"\n\
         \x20   http-request set-var(txn.haptic_auth_profile) str(test.signin) if {{ path_beg /signin /slow /garbage }}\n\
         \x20   http-request set-var(txn.haptic_auth_profile) str(test.plain) if {{ path_beg /plain }}\n\
         \x20   http-request set-var(txn.haptic_auth_profile) str(test.cached) if {{ path_beg /cached }}\n\
         \x20   http-request set-var(txn.haptic_auth_profile) str(test.unknown) if {{ path_beg /unknown }}\n\
         \x20   http-request set-var(txn.haptic_auth_profile) str(test.closing) if {{ path_beg /closing }}\n\
         \x20   http-request send-spoe-group haptic-auth haptic-auth if {{ var(txn.haptic_auth_profile) -m found }}\n\
         \x20   http-request redirect location %[var(txn.haptic_auth.location)] code 302 if {{ var(txn.haptic_auth.status) -m int 302 }}\n\
         \x20   http-request return status 401 if {{ var(txn.haptic_auth.status) -m int 401 }}\n\
         \x20   http-request return status 403 if {{ var(txn.haptic_auth.status) -m int 403 }}\n\
         \x20   http-request return status 500 if {{ var(txn.haptic_auth_profile) -m found }} !{{ var(txn.haptic_auth.status) -m int 200 }}\n\
         \x20   http-request del-header X-Auth-Request-User if {{ var(txn.haptic_auth_profile) -m found }}\n\
         \x20   http-request set-header X-Auth-Request-User %[var(txn.haptic_auth.hdr_x_auth_request_user)] if {{ var(txn.haptic_auth.hdr_x_auth_request_user) -m found }}\n\
         \x20   http-after-response add-header Set-Cookie %[var(txn.haptic_auth.cookie_0)] if {{ var(txn.haptic_auth.cookie_0) -m found }}\n\
         \x20   default_backend app\n\n\
         backend app\n    http-request return status 200 content-type text/plain lf-string \"user=%[req.hdr(x-auth-request-user)]\"\n\n\
         backend haptic-spoa\n    mode tcp\n    option spop-check\n    timeout connect 1s\n    timeout server 30s\n    server agent 127.0.0.1:{spoa} check inter 1s fall 1 rise 1\n",
        http = pod.http_port,
        spoa = pod.spoa_port,
    );
    let spoe = format!(
        "[haptic-auth]\nspoe-agent haptic-auth\n    groups haptic-auth\n    option var-prefix haptic_auth\n    option pipelining\n\
         \x20   timeout hello 2s\n    timeout idle 30s\n    timeout processing {processing}ms\n    use-backend haptic-spoa\n\n\
         spoe-message haptic-auth\n    args profile=var(txn.haptic_auth_profile) method=method tls=ssl_fc host=req.hdr(host) pathq=pathq src=src headers=req.hdrs_bin\n\n\
         spoe-group haptic-auth\n    messages haptic-auth\n",
        processing = timeout_ms + 1000,
    );
    let url = format!("http://{auth}/oauth2/auth");
    let profiles = serde_json::json!({"auth": {
        "test.signin": {
            "url": url,
            "signin": "https://$host/oauth2/start",
            "responseHeaders": ["X-Auth-Request-User"],
            "requestHeaders": {"X-Tenant": "shop-$host"},
            "timeoutMs": timeout_ms,
        },
        "test.plain": {"url": url, "timeoutMs": timeout_ms},
        "test.closing": {"url": url, "keepAlive": false, "timeoutMs": timeout_ms},
        "test.cached": {
            "url": url,
            "responseHeaders": ["X-Auth-Request-User"],
            "cache": {"key": "$cookie_session", "statuses": [202], "seconds": 60},
            "timeoutMs": timeout_ms,
        },
    }});
    Bundle::new(
        config,
        vec![
            BundleFile::new("auth.spoe.conf", spoe),
            BundleFile::new("spoa/test.json", profiles.to_string()),
        ],
    )
}

//! A minimal HTTP/1.1 GET client: what kubelet's prober needs (one request per
//! connection, status code, a bounded body) and what tests need to ask a pod
//! who answered. Plain TCP, no pooling, so every call is a fresh connection the
//! way kubelet's probes are.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The body kubelet reads from a probe response at most (10 KiB); tests get
/// the same bound times 100.
const MAX_BODY: usize = 1024 * 1024;

/// Errors from [`get`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Connecting, writing or reading failed (refused, reset, ...).
    #[error("GET http://{addr}{path}: {source}")]
    Io {
        /// The target.
        addr: SocketAddr,
        /// The request path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// No complete response within the timeout.
    #[error("GET http://{addr}{path}: no response within {timeout:?}")]
    Timeout {
        /// The target.
        addr: SocketAddr,
        /// The request path.
        path: String,
        /// The timeout that elapsed.
        timeout: Duration,
    },
    /// The bytes received are not an HTTP/1.x response.
    #[error("GET http://{addr}{path}: malformed response: {detail}")]
    Malformed {
        /// The target.
        addr: SocketAddr,
        /// The request path.
        path: String,
        /// What was wrong.
        detail: String,
    },
}

/// A response: status code, lower-cased headers and the body as text.
#[derive(Clone, Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (lossy UTF-8).
    pub body: String,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// GETs `path` from `addr` with `Connection: close`, extra `headers`, and a
/// `Host` of `host` (default: the address).
pub async fn get(
    addr: SocketAddr,
    host: Option<&str>,
    path: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<Response, Error> {
    match tokio::time::timeout(timeout, exchange(addr, host, path, headers)).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout {
            addr,
            path: path.to_string(),
            timeout,
        }),
    }
}

async fn exchange(
    addr: SocketAddr,
    host: Option<&str>,
    path: &str,
    headers: &[(String, String)],
) -> Result<Response, Error> {
    let io = |source| Error::Io {
        addr,
        path: path.to_string(),
        source,
    };
    let mut stream = TcpStream::connect(addr).await.map_err(io)?;
    let host = host.map_or_else(|| addr.to_string(), str::to_string);
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
    let has = |n: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    if !has("user-agent") {
        request.push_str("User-Agent: kube-probe/1.35\r\n");
    }
    if !has("accept") {
        request.push_str("Accept: */*\r\n");
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(io)?;
    let mut raw = Vec::new();
    (&mut stream)
        .take(MAX_BODY as u64 + 16 * 1024)
        .read_to_end(&mut raw)
        .await
        .map_err(io)?;
    parse(&raw).map_err(|detail| Error::Malformed {
        addr,
        path: path.to_string(),
        detail,
    })
}

fn parse(raw: &[u8]) -> Result<Response, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {} bytes", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("status line {status_line:?}"));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| format!("status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        body = dechunk(&body)?;
    }
    body.truncate(MAX_BODY);
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_text = String::from_utf8_lossy(&data[..eol]);
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| format!("bad chunk size {size_hex:?}"))?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&data[..size]);
        data = data.get(size + 2..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_headers_and_a_plain_body() {
        let r = parse(b"HTTP/1.1 503 Service Unavailable\r\nX-Pod-Name: a\r\n\r\nbusy").unwrap();
        assert_eq!(r.status, 503);
        assert_eq!(r.header("x-pod-name"), Some("a"));
        assert_eq!(r.body, "busy");
    }

    #[test]
    fn joins_a_chunked_body() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse(raw).unwrap().body, "abcde");
    }

    #[test]
    fn rejects_what_is_not_http() {
        assert!(parse(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\n").is_err());
    }
}

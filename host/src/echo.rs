//! The echo backend: an HTTP server that answers every request with who
//! answered and what arrived. `haptic run --demo-backends` puts one on each
//! endpoint of its manifests so an example answers by itself; `haptic test`'s
//! traffic checks put one on each endpoint of a case, read the answer back
//! ([`Echo::parse`]) and so see what HAProxy really forwarded.
//!
//! The answer is text, one `key=value` a line, so `curl` shows it plainly:
//!
//! ```text
//! backend=10.0.0.1:8080
//! method=GET
//! host=shop.example.com
//! path=/cart?item=1
//! protocol=HTTP/1.1
//! tls=false
//! header.x-forwarded-proto=https
//! ```
//!
//! A request may ask for a status with `x-haptic-echo-status: 503` (so a
//! check can see what HAProxy does with a failing backend).
//!
//! It speaks what a pod may: HTTP/1.1 or HTTP/2 (prior knowledge, h2c, as
//! gRPC servers do), in plain text or over TLS (a client hello as the first
//! byte; a self-signed certificate, ALPN `h2` and `http/1.1`), and says which
//! (`protocol=HTTP/2.0`, `tls=true`), so a check sees how HAProxy spoke to
//! the backend.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::library::types::Kind;
use crate::manifests::{self, ManifestError};

/// The response header naming the backend that answered.
pub const BACKEND_HEADER: &str = "x-haptic-demo-backend";
/// The request header asking the echo backend for a status code.
pub const STATUS_HEADER: &str = "x-haptic-echo-status";

/// One endpoint of an EndpointSlice: where an echo backend listens and whose
/// it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub addr: SocketAddr,
    /// `namespace/name` of the Service the slice belongs to.
    pub service: String,
    /// The Pod of the endpoint's `targetRef`, when it names one.
    pub pod: Option<String>,
}

/// Every endpoint `address:port` of the EndpointSlices in `inputs`, ready or
/// not (a not-ready endpoint's server must not answer, which only a listening
/// backend can show). Other objects of the files, whatever their kind, are
/// not read here.
pub fn endpoints(inputs: &[PathBuf]) -> Result<Vec<Endpoint>, ManifestError> {
    let slices = Kind::new("discovery.k8s.io/v1", "EndpointSlice");
    let loaded = manifests::objects_of_kind(inputs, &slices)?;
    let mut found = Vec::new();
    for manifest in &loaded {
        let reference = manifest.reference();
        let namespace = if reference.namespace.is_empty() {
            "default"
        } else {
            &reference.namespace
        };
        let object = manifest.object.value();
        let service = object["metadata"]["labels"]["kubernetes.io/service-name"]
            .as_str()
            .unwrap_or(&reference.name);
        let ports: Vec<u16> = object["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["port"].as_u64().and_then(|p| u16::try_from(p).ok()))
            .collect();
        for endpoint in object["endpoints"].as_array().into_iter().flatten() {
            let pod = endpoint["targetRef"]["name"].as_str().map(str::to_owned);
            for address in endpoint["addresses"].as_array().into_iter().flatten() {
                let Some(ip) = address.as_str().and_then(|a| a.parse::<IpAddr>().ok()) else {
                    continue;
                };
                found.extend(ports.iter().map(|port| Endpoint {
                    addr: SocketAddr::new(ip, *port),
                    service: format!("{namespace}/{service}"),
                    pod: pod.clone(),
                }));
            }
        }
    }
    found.sort();
    found.dedup_by(|a, b| a.addr == b.addr);
    Ok(found)
}

/// The first byte of a TLS connection (a handshake record).
const TLS_HANDSHAKE: u8 = 0x16;

/// Serves echo answers on `listener` until the task is dropped, TLS with a
/// fresh self-signed certificate.
pub async fn serve(listener: tokio::net::TcpListener) {
    // Without a certificate (it cannot be generated) TLS clients fail their
    // handshake, and plain ones are still answered.
    serve_with(listener, generated_acceptor().ok()).await;
}

/// Serves echo answers on `listener`, TLS with `acceptor`'s certificate.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
) {
    let local = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let local = local.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let mut first = [0u8; 1];
            let hello = matches!(stream.peek(&mut first).await, Ok(1) if first[0] == TLS_HANDSHAKE);
            match acceptor.filter(|_| hello) {
                Some(acceptor) => {
                    if let Ok(tls) = acceptor.accept(stream).await {
                        serve_connection(tls, local, true).await;
                    }
                }
                None => serve_connection(stream, local, false).await,
            }
        });
    }
}

/// HTTP/1.1 or HTTP/2, whichever the client speaks.
async fn serve_connection<S>(stream: S, local: String, tls: bool)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let answer = answer(&local, tls, &request);
        async move { Ok::<_, Infallible>(answer) }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// A TLS server with a fresh self-signed certificate.
pub fn generated_acceptor() -> Result<tokio_rustls::TlsAcceptor, String> {
    let generated = crate::tls::DefaultCertificate::generate().map_err(|e| e.to_string())?;
    let (certificate, key) = crate::tls::split_bundle(generated.pem.expose());
    tls_acceptor(&certificate, &key)
}

/// A TLS server presenting `certificate_pem` (a chain) with its key: a
/// fixture's own, so HAProxy can verify the backend against a CA
/// (`echoCertificate` in `expect.yaml`). The error never quotes the key.
pub fn tls_acceptor(
    certificate_pem: &str,
    key_pem: &str,
) -> Result<tokio_rustls::TlsAcceptor, String> {
    use rustls::pki_types::pem::PemObject as _;
    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(certificate_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "the certificate does not parse as PEM".to_owned())?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|_| "the private key does not parse as PEM".to_owned())?;
    let mut config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

fn answer(local: &str, tls: bool, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
    };
    let path = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    // HTTP/2 carries the host in the URI (`:authority`), not a header.
    let host = request
        .uri()
        .authority()
        .map(|a| a.as_str())
        .unwrap_or_else(|| header("host"));
    let mut body = format!(
        "backend={local}\nmethod={}\nhost={host}\npath={path}\nprotocol={:?}\ntls={tls}\n",
        request.method(),
        request.version(),
    );
    for (name, value) in request.headers() {
        let value = String::from_utf8_lossy(value.as_bytes());
        body.push_str(&format!("header.{name}={}\n", value.replace('\n', " ")));
    }
    let status = header(STATUS_HEADER)
        .parse::<u16>()
        .ok()
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::OK);
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = local.parse() {
        response.headers_mut().insert(BACKEND_HEADER, value);
    }
    response
}

/// An echo answer read back: what the backend saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Echo {
    /// `address:port` of the backend that answered.
    pub backend: String,
    pub method: String,
    pub host: String,
    /// Path and query as the backend received them.
    pub path: String,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub protocol: String,
    /// Whether the connection was TLS.
    pub tls: bool,
    /// Request headers as the backend received them (names lowercase; a
    /// repeated header's values joined with `, `).
    pub headers: BTreeMap<String, String>,
}

impl Echo {
    /// Reads an echo answer; `None` when the body is not one (HAProxy itself
    /// answered, or another server did).
    pub fn parse(body: &str) -> Option<Self> {
        let mut echo = Echo::default();
        for line in body.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            match key {
                "backend" => echo.backend = value.to_owned(),
                "method" => echo.method = value.to_owned(),
                "host" => echo.host = value.to_owned(),
                "path" => echo.path = value.to_owned(),
                "protocol" => echo.protocol = value.to_owned(),
                "tls" => echo.tls = value == "true",
                _ => {
                    if let Some(name) = key.strip_prefix("header.") {
                        echo.headers
                            .entry(name.to_owned())
                            .and_modify(|joined: &mut String| {
                                joined.push_str(", ");
                                joined.push_str(value);
                            })
                            .or_insert_with(|| value.to_owned());
                    }
                }
            }
        }
        (!echo.backend.is_empty()).then_some(echo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_reads_back() {
        let body = "backend=10.0.0.1:8080\nmethod=GET\nhost=a.test\npath=/x?y=1\nheader.x-a=1\nheader.x-a=2\n";
        let echo = Echo::parse(body).expect("an echo answer");
        assert_eq!(echo.backend, "10.0.0.1:8080");
        assert_eq!(echo.path, "/x?y=1");
        assert_eq!(echo.headers["x-a"], "1, 2");
        assert_eq!(Echo::parse("<html>503</html>"), None);
    }
}

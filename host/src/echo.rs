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
//! A request may tell the backend how to answer ([`Controls`], the request
//! headers `x-haptic-echo-*`): with a status (`x-haptic-echo-status: 503`),
//! from one endpoint only (`x-haptic-echo-fail: 10.0.0.1:8080`), after a
//! delay (`x-haptic-echo-delay-ms: 3000`), with a `Set-Cookie` or
//! `Location` header; so a check can see what HAProxy does with a failing,
//! slow or redirecting backend.
//!
//! It speaks what a pod may: HTTP/1.1 or HTTP/2 (prior knowledge, h2c, as
//! gRPC servers do), in plain text or over TLS (a client hello as the first
//! byte; a self-signed certificate, ALPN `h2` and `http/1.1`), and says which
//! (`protocol=HTTP/2.0`, `tls=true`; over TLS also `sni=`, `tlsVersion=`
//! and `tlsCipher=`), so a check sees how HAProxy spoke to the backend.

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
                        let session = TlsSession::of(tls.get_ref().1);
                        serve_connection(tls, local, Some(session)).await;
                    }
                }
                None => serve_connection(stream, local, None).await,
            }
        });
    }
}

/// What a TLS client asked for and got: the echo reports it (`sni=`,
/// `tlsVersion=`, `tlsCipher=`), so a check sees the server name, protocol
/// version and cipher suite HAProxy used towards the pod.
#[derive(Debug, Clone, Default)]
struct TlsSession {
    sni: Option<String>,
    version: Option<String>,
    cipher: Option<String>,
}

impl TlsSession {
    fn of(connection: &rustls::ServerConnection) -> Self {
        Self {
            sni: connection.server_name().map(str::to_owned),
            // `TLSv1_3` as rustls writes it becomes `TLSv1.3`, HAProxy's
            // and OpenSSL's spelling.
            version: connection
                .protocol_version()
                .map(|v| format!("{v:?}").replace('_', ".")),
            // IANA's name, e.g. `TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256`.
            cipher: connection
                .negotiated_cipher_suite()
                .map(|suite| format!("{:?}", suite.suite())),
        }
    }
}

/// HTTP/1.1 or HTTP/2, whichever the client speaks.
async fn serve_connection<S>(stream: S, local: String, tls: Option<TlsSession>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let controls = Controls::read(&request, &local);
        let answer = answer(&local, tls.as_ref(), &request, &controls);
        async move {
            if !controls.delay.is_zero() {
                tokio::time::sleep(controls.delay).await;
            }
            Ok::<_, Infallible>(answer)
        }
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

/// The longest delay a request may ask for (`x-haptic-echo-delay-ms`).
pub const MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(30);

/// How a request asks the echo backend to answer: the request headers
/// `x-haptic-echo-*`, all in this one place. None of them is needed for a
/// plain echo; each lets a traffic check play a backend that fails, is
/// slow, sets a cookie or redirects.
///
/// | request header | the backend |
/// | --- | --- |
/// | `x-haptic-echo-status: 503` | answers with that status |
/// | `x-haptic-echo-fail: 10.0.0.1:8080` | only the endpoint at that address answers the status of `x-haptic-echo-status` (503 without it); the others answer 200 |
/// | `x-haptic-echo-delay-ms: 3000` | answers after that many milliseconds (at most [`MAX_DELAY`]) |
/// | `x-haptic-echo-set-cookie: a=1; Path=/x` | adds `Set-Cookie: a=1; Path=/x` (once per occurrence) |
/// | `x-haptic-echo-location: http://a.test/x` | adds `Location: http://a.test/x` |
/// | `x-haptic-echo-www-authenticate: Bearer` | adds `WWW-Authenticate: Bearer` |
/// | `x-haptic-echo-body-bytes: 1048576` | pads the body with that many more bytes (at most [`MAX_PADDING`]): a response whose transfer rate a check measures |
///
/// A value that does not parse (a status that is no HTTP status, a delay
/// that is no number) is ignored: the backend answers as without it.
#[derive(Debug, Clone, Default)]
pub struct Controls {
    pub status: Option<StatusCode>,
    pub delay: std::time::Duration,
    pub set_cookies: Vec<hyper::header::HeaderValue>,
    pub location: Option<hyper::header::HeaderValue>,
    pub www_authenticate: Option<hyper::header::HeaderValue>,
    /// Bytes of padding after the echo report.
    pub padding: usize,
}

/// The most padding a request may ask for (`x-haptic-echo-body-bytes`).
pub const MAX_PADDING: usize = 16 << 20;
/// See [`Controls`].
pub const BODY_BYTES_HEADER: &str = "x-haptic-echo-body-bytes";

/// See [`Controls`].
pub const FAIL_HEADER: &str = "x-haptic-echo-fail";
/// See [`Controls`].
pub const DELAY_HEADER: &str = "x-haptic-echo-delay-ms";
/// See [`Controls`].
pub const SET_COOKIE_HEADER: &str = "x-haptic-echo-set-cookie";
/// See [`Controls`].
pub const LOCATION_HEADER: &str = "x-haptic-echo-location";
/// See [`Controls`].
pub const WWW_AUTHENTICATE_HEADER: &str = "x-haptic-echo-www-authenticate";

impl Controls {
    /// The controls `request` asks of the backend listening at `local`.
    pub fn read<B>(request: &Request<B>, local: &str) -> Self {
        let headers = request.headers();
        let text = |name: &str| headers.get(name).and_then(|h| h.to_str().ok());
        let asked = text(STATUS_HEADER)
            .and_then(|code| code.trim().parse::<u16>().ok())
            .and_then(|code| StatusCode::from_u16(code).ok());
        let status = match text(FAIL_HEADER) {
            None => asked,
            Some(failing) if failing.trim() == local => {
                Some(asked.unwrap_or(StatusCode::SERVICE_UNAVAILABLE))
            }
            Some(_) => None,
        };
        let delay = text(DELAY_HEADER)
            .and_then(|ms| ms.trim().parse::<u64>().ok())
            .map_or(std::time::Duration::ZERO, |ms| {
                std::time::Duration::from_millis(ms).min(MAX_DELAY)
            });
        Self {
            status,
            delay,
            set_cookies: headers.get_all(SET_COOKIE_HEADER).iter().cloned().collect(),
            location: headers.get(LOCATION_HEADER).cloned(),
            www_authenticate: headers.get(WWW_AUTHENTICATE_HEADER).cloned(),
            padding: text(BODY_BYTES_HEADER)
                .and_then(|bytes| bytes.trim().parse::<usize>().ok())
                .map_or(0, |bytes| bytes.min(MAX_PADDING)),
        }
    }
}

fn answer(
    local: &str,
    tls: Option<&TlsSession>,
    request: &Request<Incoming>,
    controls: &Controls,
) -> Response<Full<Bytes>> {
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
        "backend={local}\nmethod={}\nhost={host}\npath={path}\nprotocol={:?}\ntls={}\n",
        request.method(),
        request.version(),
        tls.is_some(),
    );
    if let Some(session) = tls {
        if let Some(sni) = &session.sni {
            body.push_str(&format!("sni={sni}\n"));
        }
        if let Some(version) = &session.version {
            body.push_str(&format!("tlsVersion={version}\n"));
        }
        if let Some(cipher) = &session.cipher {
            body.push_str(&format!("tlsCipher={cipher}\n"));
        }
    }
    for (name, value) in request.headers() {
        let value = String::from_utf8_lossy(value.as_bytes());
        body.push_str(&format!("header.{name}={}\n", value.replace('\n', " ")));
    }
    // The echo report first, so a padded answer still reads back.
    let mut bytes = body.into_bytes();
    bytes.resize(bytes.len() + controls.padding, b'.');
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = controls.status.unwrap_or(StatusCode::OK);
    if let Ok(value) = local.parse() {
        response.headers_mut().insert(BACKEND_HEADER, value);
    }
    for cookie in &controls.set_cookies {
        response
            .headers_mut()
            .append(hyper::header::SET_COOKIE, cookie.clone());
    }
    if let Some(location) = &controls.location {
        response
            .headers_mut()
            .insert(hyper::header::LOCATION, location.clone());
    }
    if let Some(challenge) = &controls.www_authenticate {
        response
            .headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, challenge.clone());
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
    /// The server name the TLS client sent (SNI), if any.
    pub sni: Option<String>,
    /// The TLS version of the connection (`TLSv1.3`).
    pub tls_version: Option<String>,
    /// The cipher suite of the connection, IANA's name.
    pub tls_cipher: Option<String>,
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
                "sni" => echo.sni = Some(value.to_owned()),
                "tlsVersion" => echo.tls_version = Some(value.to_owned()),
                "tlsCipher" => echo.tls_cipher = Some(value.to_owned()),
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

    fn request(headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().uri("/");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).expect("a request")
    }

    #[test]
    fn controls_fail_one_endpoint_and_bound_the_delay() {
        let failing = request(&[(FAIL_HEADER, "10.0.0.2:8080")]);
        assert_eq!(
            Controls::read(&failing, "10.0.0.2:8080").status,
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
        assert_eq!(Controls::read(&failing, "10.0.0.1:8080").status, None);
        let asked = request(&[(FAIL_HEADER, "10.0.0.2:8080"), (STATUS_HEADER, "500")]);
        assert_eq!(
            Controls::read(&asked, "10.0.0.2:8080").status,
            Some(StatusCode::INTERNAL_SERVER_ERROR)
        );
        assert_eq!(Controls::read(&asked, "10.0.0.1:8080").status, None);
        let slow = request(&[(DELAY_HEADER, "99999999")]);
        assert_eq!(Controls::read(&slow, "a").delay, MAX_DELAY);
        let garbage = request(&[(DELAY_HEADER, "soon"), (STATUS_HEADER, "42")]);
        let controls = Controls::read(&garbage, "a");
        assert!(controls.delay.is_zero() && controls.status.is_none());
    }
}

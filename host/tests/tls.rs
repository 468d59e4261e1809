//! TLS termination through the real HAProxy on loopback: the bundled
//! libraries render Ingresses with `spec.tls`, HAProxy serves the rendered
//! bundle, and a TLS client checks which certificate each SNI gets, that
//! requests reach the right Service with `X-Forwarded-Proto`, and that plain
//! HTTP to a TLS host is served by default and redirects when asked to. Bad Secrets leave their hosts on the
//! default certificate and every other host serving.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod support;

use base64::Engine as _;
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job};
use haptic::tls::{DefaultCertificate, split_bundle};
use haptic::values::Values;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use support::{free_port, start_haproxy};

/// A backend that answers with its name and the `X-Forwarded-Proto` it got.
fn spawn_backend(name: &'static str, address: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind(address).expect("bind test backend");
    let local = listener.local_addr().expect("local address");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buffer = [0u8; 8192];
            let read = stream.read(&mut buffer).unwrap_or(0);
            let request = String::from_utf8_lossy(&buffer[..read]).to_ascii_lowercase();
            let proto = request
                .lines()
                .find_map(|line| line.strip_prefix("x-forwarded-proto:"))
                .map(str::trim)
                .unwrap_or("none")
                .to_owned();
            let body = format!("{name} {proto}");
            let response = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    local
}

/// Test certificates: a CA and leaves it signs.
struct Authority {
    key: rcgen::KeyPair,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    certificate: rcgen::Certificate,
}

impl Authority {
    fn new() -> Self {
        let key = rcgen::KeyPair::generate().expect("CA key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "haptic test CA");
        let certificate = params.self_signed(&key).expect("CA certificate");
        let issuer_key = rcgen::KeyPair::from_pem(&key.serialize_pem()).expect("CA key again");
        let issuer = rcgen::Issuer::new(params, issuer_key);
        Self {
            key,
            issuer,
            certificate,
        }
    }

    /// (certificate PEM, key PEM) for `names`, valid from `from` to `until`.
    fn issue(&self, names: &[&str], from: i32, until: i32) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("leaf key");
        let mut params = rcgen::CertificateParams::new(
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .expect("leaf params");
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(until, 1, 1);
        let certificate = params.signed_by(&key, &self.issuer).expect("signed leaf");
        (certificate.pem(), key.serialize_pem())
    }

    fn root(&self) -> CertificateDer<'static> {
        let _ = &self.key;
        self.certificate.der().clone()
    }
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn secret(name: &str, kind: &str, certificate: &str, key: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: app}}\ntype: {kind}\ndata:\n  tls.crt: {}\n  tls.key: {}\n---\n",
        b64(certificate),
        b64(key)
    )
}

fn ingress(name: &str, host: &str, secret: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {{name: {name}, namespace: app}}\nspec:\n  ingressClassName: haptic\n  tls:\n  - hosts: [\"{host}\"]\n    secretName: {secret}\n  rules:\n  - host: \"{host}\"\n    http:\n      paths:\n      - {{path: /, pathType: Prefix, backend: {{service: {{name: web, port: {{number: 80}}}}}}}}\n---\n"
    )
}

/// Accepts any server certificate, so a test can look at what it got.
#[derive(Debug)]
struct ShowMeAnything(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for ShowMeAnything {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn client_config(root: Option<&CertificateDer<'static>>) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("TLS versions");
    let config = match root {
        Some(root) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(root.clone()).expect("test CA is a valid root");
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ShowMeAnything(provider)))
            .with_no_client_auth(),
    };
    Arc::new(config)
}

/// An HTTPS GET with SNI `sni`: the certificate served, and status and body.
fn https_get(
    port: u16,
    sni: &str,
    config: Arc<rustls::ClientConfig>,
) -> Result<(CertificateDer<'static>, u16, String), String> {
    let name = ServerName::try_from(sni.to_owned()).map_err(|e| e.to_string())?;
    let mut connection = rustls::ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let mut socket = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    let mut stream = rustls::Stream::new(&mut connection, &mut socket);
    write!(
        stream,
        "GET / HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("TLS to {sni}: {e}"))?;
    let mut response = Vec::new();
    // HAProxy closes without close_notify after Connection: close; what
    // was read until then is the whole response.
    let _ = stream.read_to_end(&mut response);
    let certificate = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .cloned()
        .ok_or("no server certificate")?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Ok((certificate.into_owned(), status, body))
}

/// A plain HTTP GET: status, the Location header and the body.
fn http_get(port: u16, host: &str, path: &str) -> (u16, String, String) {
    let response = support::http_get(port, host, path);
    (response.status, response.location, response.body)
}

fn der_of(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("test PEM parses")
}

#[test]
fn https_serves_each_host_its_certificate_and_bad_secrets_fall_back_to_the_default() {
    let authority = Authority::new();
    let (foo_certificate, foo_key) = authority.issue(&["foo.bar.com"], 2020, 2120);
    let (wild_certificate, wild_key) = authority.issue(&["*.shop.test"], 2020, 2120);
    let (old_certificate, old_key) = authority.issue(&["old.test"], 2000, 2001);
    let (other_certificate, _) = authority.issue(&["mismatch.test"], 2020, 2120);
    let (_, stray_key) = authority.issue(&["mismatch.test"], 2020, 2120);

    let backend = spawn_backend("web", SocketAddr::from(([127, 0, 78, 1], 0)));
    let mut manifests = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: haptic}\nspec: {controller: haproxy-haptic.org/controller}\n---\n",
    );
    manifests += &format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: app}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {port}}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: app\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports:\n  - {{name: http, port: {port}, protocol: TCP}}\nendpoints:\n  - addresses: [\"127.0.78.1\"]\n    conditions: {{ready: true}}\n---\n",
        port = backend.port()
    );
    // Redirects are off by default; this Ingress turns them on.
    manifests += &ingress("foo", "foo.bar.com", "foo-tls").replacen(
        "metadata: {name: foo, namespace: app}",
        "metadata: {name: foo, namespace: app, annotations: {haproxy-haptic.org/ssl-redirect: \"true\"}}",
        1,
    );
    manifests += &secret("foo-tls", "kubernetes.io/tls", &foo_certificate, &foo_key);
    manifests += &ingress("wild", "*.shop.test", "wild-tls");
    manifests += &secret(
        "wild-tls",
        "kubernetes.io/tls",
        &wild_certificate,
        &wild_key,
    );
    manifests += &ingress("expired", "old.test", "old-tls");
    manifests += &secret("old-tls", "kubernetes.io/tls", &old_certificate, &old_key);
    manifests += &ingress("mismatched", "mismatch.test", "mismatch-tls");
    manifests += &secret(
        "mismatch-tls",
        "kubernetes.io/tls",
        &other_certificate,
        &stray_key,
    );
    manifests += &ingress("opaque", "opaque.test", "opaque-secret");
    manifests += &secret("opaque-secret", "Opaque", &foo_certificate, &foo_key);
    manifests += &ingress("missing", "missing.test", "no-such-secret");
    manifests += "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: plain, namespace: app}\nspec:\n  ingressClassName: haptic\n  rules:\n  - host: plain.test\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}\n";

    let dir = tempfile::tempdir().expect("temp dir");
    let manifests_path = dir.path().join("cluster.yaml");
    std::fs::write(&manifests_path, &manifests).expect("write manifests");
    let (http_port, https_port) = (free_port(), free_port());
    let mut values = Values::default();
    for assignment in [
        format!("templateLibraries.base.frontends.http.bind=127.0.0.1:{http_port}"),
        format!(
            "templateLibraries.base.frontends.healthz.bind=127.0.0.1:{}",
            free_port()
        ),
        format!("templateLibraries.ingress.tls.bind=127.0.0.1:{https_port}"),
    ] {
        values.set_assignment(&assignment).expect("test values");
    }
    let default = DefaultCertificate::generate().expect("default certificate");
    let (default_certificate, _) = split_bundle(default.pem.expose());
    let runtime = LibraryRuntime::new(RuntimeConfig {
        default_certificate: Some(default.pem.clone()),
        ..RuntimeConfig::default()
    })
    .expect("runtime");
    let job = Job {
        inputs: vec![manifests_path],
        values,
        custom_libraries: Vec::new(),
        validate: true,
    };
    let libraries = offline::load_libraries(&runtime, &job.custom_libraries).expect("libraries");
    let output = offline::render(&job, libraries).expect("a render HAProxy accepts");
    let out = dir.path().join("out");
    offline::write_dir(&output, &out).expect("write render");
    let _haproxy = start_haproxy(&out, https_port);

    // Verified against the CA: the Secret's certificate, the right Service,
    // and the backend told it was HTTPS.
    let (served, status, body) = https_get(
        https_port,
        "foo.bar.com",
        client_config(Some(&authority.root())),
    )
    .expect("foo.bar.com verifies against its Secret's CA");
    assert_eq!(served, der_of(&foo_certificate));
    assert_eq!((status, body.as_str()), (200, "web https"));
    let (served, status, _) = https_get(
        https_port,
        "a.shop.test",
        client_config(Some(&authority.root())),
    )
    .expect("a wildcard host verifies");
    assert_eq!((served, status), (der_of(&wild_certificate), 200));

    // Unknown SNI and every bad Secret: the default certificate, and the
    // request still routed.
    let default_der = der_of(&default_certificate);
    for sni in [
        "unknown.test",
        "old.test",
        "mismatch.test",
        "opaque.test",
        "missing.test",
    ] {
        let (served, status, _) =
            https_get(https_port, sni, client_config(None)).expect("TLS with any SNI");
        assert_eq!(served, default_der, "{sni} gets the default certificate");
        if sni != "unknown.test" {
            assert_eq!(status, 200, "{sni} is still routed over HTTPS");
        }
    }

    // Plain HTTP: a TLS host whose Ingress asks for it redirects with 308
    // (method and body kept), except ACME challenges; other TLS hosts (the
    // default, as the Ingress conformance suite expects) and plain hosts
    // are served as they are.
    let (status, location, _) = http_get(http_port, "foo.bar.com", "/cart?id=1");
    assert_eq!(
        (status, location.as_str()),
        (308, "https://foo.bar.com/cart?id=1")
    );
    let (status, _, _) = http_get(
        http_port,
        "foo.bar.com",
        "/.well-known/acme-challenge/token",
    );
    assert_eq!(status, 200, "ACME HTTP-01 challenges are not redirected");
    let (status, _, body) = http_get(http_port, "plain.test", "/");
    assert_eq!((status, body.as_str()), (200, "web http"));
    let (status, _, body) = http_get(http_port, "a.shop.test", "/");
    assert_eq!(
        (status, body.as_str()),
        (200, "web http"),
        "a TLS host is served over plain HTTP by default"
    );

    // One warning per bad Secret, naming the Ingress and the Secret, with
    // no key material.
    let warnings: Vec<String> = output
        .rendered
        .warnings
        .iter()
        .map(|(_, _, warning)| format!("{}: {}", warning.reason, warning.message))
        .collect();
    let expect = [
        ("app/expired", "app/old-tls", "expired"),
        ("app/mismatched", "app/mismatch-tls", "does not match"),
        (
            "app/opaque",
            "app/opaque-secret",
            "not of type kubernetes.io/tls",
        ),
        ("app/missing", "app/no-such-secret", "does not exist"),
    ];
    for (ingress, secret, why) in expect {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("Ingress {ingress}"))
                    && w.contains(&format!("Secret {secret}"))
                    && w.contains(why)),
            "no warning for {ingress} ({why}):\n{}",
            warnings.join("\n")
        );
    }
    assert_eq!(warnings.len(), expect.len(), "{}", warnings.join("\n"));
    for key in [&foo_key, &old_key, &stray_key] {
        let body = key.lines().nth(1).expect("PEM body");
        assert!(!warnings.iter().any(|w| w.contains(body)));
        assert!(
            !offline::to_text(&output).contains(body),
            "no key on stdout"
        );
    }

    // Key material on disk is private.
    use std::os::unix::fs::PermissionsExt as _;
    for file in ["certs/default.pem", "certs/app_foo-tls.pem"] {
        let mode = std::fs::metadata(out.join(file))
            .expect("certificate written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
}

#[test]
fn a_rotated_secret_is_served_at_runtime_by_the_same_worker() {
    // The whole path: a Secret file edited under `haptic run` -> render ->
    // deploy -> the agent's `set ssl cert` -> the next handshake.
    let authority = Authority::new();
    let (first, first_key) = authority.issue(&["foo.bar.com"], 2020, 2120);
    let (second, second_key) = authority.issue(&["foo.bar.com"], 2020, 2120);
    let backend = spawn_backend("web", SocketAddr::from(([127, 0, 79, 1], 0)));
    let work = tempfile::tempdir().expect("temp dir");
    let cluster = work.path().join("cluster");
    std::fs::create_dir(&cluster).expect("cluster dir");
    let mut manifests = String::from(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: haptic}\nspec: {controller: haproxy-haptic.org/controller}\n---\n",
    );
    manifests += &format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: web, namespace: app}}\nspec:\n  ports:\n  - {{name: http, port: 80, targetPort: {port}}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: web-1\n  namespace: app\n  labels: {{kubernetes.io/service-name: web}}\naddressType: IPv4\nports:\n  - {{name: http, port: {port}, protocol: TCP}}\nendpoints:\n  - addresses: [\"127.0.79.1\"]\n    conditions: {{ready: true}}\n---\n",
        port = backend.port()
    );
    manifests += &ingress("foo", "foo.bar.com", "foo-tls");
    std::fs::write(cluster.join("cluster.yaml"), manifests).expect("manifests");
    let secret_file = cluster.join("secret.yaml");
    std::fs::write(
        &secret_file,
        secret("foo-tls", "kubernetes.io/tls", &first, &first_key),
    )
    .expect("secret");

    // `haptic run` serves HTTPS on its HTTP port + 363.
    let http_port = support::free_ports(&[0, 363]);
    let https_port = http_port + 363;
    let scratch = work.path().join("scratch");
    let log = work.path().join("run.log");
    let child = Command::new(env!("CARGO_BIN_EXE_haptic"))
        .args(["run", "--proxies", "1", "--port", &http_port.to_string()])
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--default-certificate")
        .arg(work.path().join("default.pem"))
        .arg("--dir")
        .arg(&scratch)
        .arg(&cluster)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("haptic run starts");
    let _run = support::LocalRun(child);
    let served = || https_get(https_port, "foo.bar.com", client_config(None)).map(|(c, _, _)| c);
    let wait_for = |certificate: &str, timeout: Duration| {
        let want = der_of(certificate);
        let started = Instant::now();
        loop {
            match served() {
                Ok(got) if got == want => return started.elapsed(),
                other if started.elapsed() > timeout => panic!(
                    "foo.bar.com not served the expected certificate after {timeout:?} ({:?}):\n{}",
                    other.map(|_| "another certificate"),
                    std::fs::read_to_string(&log).unwrap_or_default()
                ),
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    };
    wait_for(&first, Duration::from_secs(60));

    let listing: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(scratch.join("proxies.json")).expect("proxies.json"),
    )
    .expect("proxies.json is JSON");
    let token = std::fs::read_to_string(scratch.join("agent-token")).expect("agent token");
    let agent = haptic::protocol::AgentClient::new(
        listing[0]["agent"]
            .as_str()
            .expect("agent endpoint")
            .to_owned(),
        Some(token),
        None,
        Duration::from_secs(5),
    )
    .expect("agent client");
    let tokio = tokio::runtime::Runtime::new().expect("tokio");
    let before = tokio.block_on(agent.state()).expect("agent state");
    let worker = before.current_worker().expect("a worker").pid;

    let rotated = secret("foo-tls", "kubernetes.io/tls", &second, &second_key);
    let staging = secret_file.with_extension("swp");
    std::fs::write(&staging, rotated).expect("write");
    std::fs::rename(&staging, &secret_file).expect("rename");
    let took = wait_for(&second, Duration::from_secs(10));
    println!("rotated certificate served {took:?} after the Secret was saved");

    let after = tokio.block_on(agent.state()).expect("agent state");
    assert_eq!(
        after.current_worker().map(|w| w.pid),
        Some(worker),
        "the same worker serves the new certificate"
    );
    assert_eq!(after.reloads, before.reloads, "no reload for a rotation");
}

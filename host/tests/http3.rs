//! `send.http3` against the real HAProxy 3.0: the fixtures' traffic checker
//! speaks HTTP/3 over QUIC to a hand-written configuration (`limited-quic`,
//! a TCP and a `quic4@` bind on one port number, two certificates picked by
//! SNI, an answer of HAProxy's own and an echo backend), and the answers go
//! through the same comparisons as HTTP/1.1 and HTTP/2 answers: status,
//! headers, body, the endpoint that answered, what the backend received,
//! and which certificate HAProxy chose for the SNI sent.
//!
//! Broken on purpose once: with the `quic4@` bind left out of [`config`]
//! (`run(false, right)` in the first test) that test failed, each HTTP/3
//! check with "request 1 failed: send.http3: no QUIC answer from
//! 127.0.0.1:25137 (UDP) within 5s: HAProxy may lack a QUIC bind on port
//! 25137 (`bind quic4@:25137 ssl crt <pem> alpn h3`), or `limited-quic` in
//! its global section (HAProxy built on an OpenSSL without QUIC support
//! needs it)", while the HTTP/2 check over the TCP bind still passed; the
//! second test keeps that failure checked.

mod support;

use std::path::Path;

use haptic::fixtures::{TrafficCheck, check_traffic_on_loopback};

/// `a.pem` and `b.pem` in `dir`: self-signed certificates (and keys) for
/// `a.test` and `b.test`, as HAProxy's `crt` reads them.
fn write_certificates(dir: &Path) {
    for name in ["a.test", "b.test"] {
        let issued =
            rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("a certificate");
        let pem = format!(
            "{}{}",
            issued.cert.pem(),
            issued.signing_key.serialize_pem()
        );
        let file = format!("{}.pem", &name[..1]);
        std::fs::write(dir.join(file), pem).expect("certificate written");
    }
}

/// A frontend on `port` over TCP (TLS) and, with `quic`, over QUIC on the
/// same UDP port; `a.test`'s certificate is the default, `b.test`'s is
/// chosen by SNI. `/echo` goes to the echo backend on `echo_port`; any
/// other path HAProxy answers itself, telling the HTTP version it spoke
/// (`fc_http_major`) and the SNI it got.
fn config(dir: &Path, port: u16, echo_port: u16, quic: bool) -> String {
    let dir = dir.display();
    let certificates = format!("crt {dir}/a.pem crt {dir}/b.pem");
    let quic_bind = if quic {
        format!("  bind quic4@127.0.0.1:{port} ssl {certificates} alpn h3\n")
    } else {
        String::new()
    };
    format!(
        "global
  limited-quic

defaults
  mode http
  timeout connect 2s
  timeout client 5s
  timeout server 5s

frontend web
  bind 127.0.0.1:{port} ssl {certificates} alpn h2,http/1.1
{quic_bind}  use_backend echo if {{ path_beg /echo }}
  http-request return status 200 content-type text/plain hdr x-http-major \"%[fc_http_major]\" hdr x-sni \"%[ssl_fc_sni]\" lf-string \"hello over HTTP/%[fc_http_major]\" unless {{ path_beg /echo }}

backend echo
  server echo 127.0.0.1:{echo_port}
"
    )
}

fn checks(yaml: &str) -> Vec<TrafficCheck> {
    serde_yaml_ng::from_str(yaml).expect("checks parse")
}

/// Starts the echo backend and HAProxy (with or without the QUIC bind),
/// then runs `yaml`'s checks (`{port}` and `{echo}` replaced) and returns
/// their failures.
fn run(quic: bool, yaml: &str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    write_certificates(dir.path());
    let port = support::free_port();
    let echo_port = support::free_port();
    std::fs::write(
        dir.path().join("haproxy.cfg"),
        config(dir.path(), port, echo_port, quic),
    )
    .expect("config written");
    let checks = checks(
        &yaml
            .replace("{port}", &port.to_string())
            .replace("{echo}", &echo_port.to_string()),
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", echo_port))
            .await
            .expect("echo backend listens");
        let echo = tokio::spawn(haptic::echo::serve(listener));
        // HAProxy binds every listener before it serves: once TCP answers,
        // the QUIC socket is there too.
        let _haproxy = support::start_haproxy(dir.path(), port);
        let failures = check_traffic_on_loopback(&checks).await;
        echo.abort();
        failures
    })
}

#[test]
fn http3_answers_are_compared_like_any_other_and_show_the_certificate_chosen_by_sni() {
    let right = "
- name: HAProxy answers over HTTP/3 with the certificate for the SNI
  send: {scheme: https, http3: true, port: {port}, host: a.test, sni: b.test, path: /hello}
  expect:
    status: 200
    certificate: b.test
    headers: {x-http-major: '3', x-sni: b.test, content-type: text/plain}
    bodyContains: hello over HTTP/3
- name: the default certificate without another SNI
  send: {scheme: https, http3: true, port: {port}, host: a.test}
  expect: {status: 200, certificate: a.test, headers: {x-sni: a.test}}
- name: a backend answers a POST over HTTP/3
  send:
    scheme: https
    http3: true
    port: {port}
    method: POST
    host: shop.test
    sni: b.test
    path: /echo/cart?item=1
    headers: {x-client: h3}
    body: one item
  repeat: 3
  expect:
    status: 200
    endpoint: 127.0.0.1:{echo}
    certificate: b.test
    upstream:
      method: POST
      host: shop.test
      path: /echo/cart?item=1
      protocol: HTTP/1.1
      headers: {x-client: h3, content-length: '8'}
- name: the same certificate over HTTP/2 on the TCP bind
  send: {scheme: https, http2: true, port: {port}, host: a.test, sni: b.test}
  expect: {status: 200, certificate: b.test, headers: {x-http-major: '2'}}
";
    let failures = run(true, right);
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // The comparisons judge HTTP/3 answers for real: wrong expectations
    // fail, each with its line, and contradicting keys are refused by name.
    let wrong = "
- name: wrong certificate and status
  send: {scheme: https, http3: true, port: {port}, host: a.test, sni: b.test}
  expect: {status: 404, certificate: a.test, headers: {x-http-major: '2'}}
- name: wrong endpoint
  send: {scheme: https, http3: true, port: {port}, host: a.test, path: /echo}
  expect: {endpoint: 127.0.0.1:1, upstream: {path: /elsewhere}}
- name: http3 over http
  send: {http3: true, port: {port}, host: a.test}
- name: both protocols
  send: {scheme: https, http2: true, http3: true, port: {port}, host: a.test}
";
    let failures = run(true, wrong).join("\n");
    for expected in [
        "traffic `wrong certificate and status` (GET https://a.test/ over HTTP/3): answer 1 of 1: \
         status 200 (expected 404)",
        "the certificate presented is for b.test (expected one for a.test)",
        "response header x-http-major: \"3\" (expected \"2\")",
        "answered by endpoint 127.0.0.1:",
        "(expected 127.0.0.1:1)",
        "the backend got path \"/echo\" (expected \"/elsewhere\")",
        "traffic `http3 over http` (GET http://a.test/): send.http3 needs `scheme: https`",
        "traffic `both protocols` (GET https://a.test/): send.http2 and send.http3 are both true",
    ] {
        assert!(
            failures.contains(expected),
            "missing {expected:?} in:\n{failures}"
        );
    }
}

#[test]
fn without_a_quic_bind_the_check_names_the_missing_bind() {
    let failures = run(
        false,
        "
- name: no QUIC here
  send: {scheme: https, http3: true, port: {port}, host: a.test}
  expect: {status: 200}
",
    )
    .join("\n");
    for expected in [
        "traffic `no QUIC here` (GET https://a.test/ over HTTP/3): request 1 failed: send.http3: \
         no QUIC answer from 127.0.0.1:",
        "(UDP) within 5s: HAProxy may lack a QUIC bind on port",
        "`limited-quic` in its global section",
    ] {
        assert!(
            failures.contains(expected),
            "missing {expected:?} in:\n{failures}"
        );
    }
}

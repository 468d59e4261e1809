//! TLS termination: certificates served from agent-applied bundles, rotated
//! at runtime (`set ssl cert` + `commit ssl cert`) without a reload, and a
//! refused rotation that leaves the old certificate serving and no key
//! material in any error or log line.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use haptic::protocol::ApplyMode;

use crate::harness::{Backends, CertFile, Pod, Tokens, tls_bundle, tls_get};

/// Asks over TLS until `cert` is presented for `sni` (trusting only its
/// CA) or `within` passes; the backend's answer and how long it took.
fn served_within(port: u16, sni: &str, cert: &CertFile, within: Duration) -> (String, Duration) {
    let started = Instant::now();
    loop {
        let last = match tls_get(port, sni, &cert.ca_pem, "/") {
            Ok((presented, response)) if presented == cert.der => {
                return (response.body, started.elapsed());
            }
            Ok(_) => "another certificate".to_owned(),
            Err(error) => error.to_string(),
        };
        assert!(
            started.elapsed() < within,
            "{sni} was not served the expected certificate within {within:?}: {last}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Neither a key's PEM marker nor any of its base64 lines is in `text`.
fn assert_no_key_material(text: &str, keys: &[&CertFile], what: &str) {
    assert!(!text.contains("PRIVATE KEY"), "{what} shows a key: {text}");
    for key in keys {
        for line in key.key_lines() {
            assert!(!text.contains(line), "{what} shows key material: {text}");
        }
    }
}

/// Every directory under `dir` is 0700 and every file 0600.
fn assert_private(dir: &Path) {
    for entry in std::fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        let metadata = std::fs::symlink_metadata(&path).expect("metadata");
        let mode = metadata.permissions().mode() & 0o777;
        if metadata.is_dir() {
            assert_eq!(mode, 0o700, "{}", path.display());
            assert_private(&path);
        } else {
            assert_eq!(mode, 0o600, "{}", path.display());
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_certificate_is_served_without_a_reload() {
    let pod = Pod::start();
    let backends = Backends::start(&["one", "two"]);
    let [one, two] = [0, 1].map(|i| backends.addresses[i]);
    let https_port = crate::harness::free_port();
    let default = CertFile::new("default CA", "default.test");
    let (first_cert, rotated) = (
        CertFile::new("first CA", "web.test"),
        CertFile::new("rotated CA", "web.test"),
    );
    let mut tokens = Tokens::default();

    let first = tls_bundle(
        &pod,
        https_port,
        [(one, true), (two, false)],
        &default,
        &first_cert.pem,
        &[],
    );
    let applied = pod
        .client
        .apply(&tokens.request(&first))
        .await
        .expect("first apply");
    pod.settle(&first.id).await;
    assert_eq!(applied.mode, ApplyMode::Reload, "from the bootstrap config");
    let worker = applied.state.current_worker().expect("a worker").pid;
    let reloads = applied.state.reloads;
    let within = Duration::from_secs(1);
    assert_eq!(
        served_within(https_port, "web.test", &first_cert, within).0,
        "one"
    );
    // The crt-list picks by SNI; default.test is not in it, and gets the
    // `crt` certificate.
    served_within(https_port, "default.test", &default, within);

    // A new certificate for web.test and a server flip: one runtime plan.
    let next = tls_bundle(
        &pod,
        https_port,
        [(one, false), (two, true)],
        &default,
        &rotated.pem,
        &[],
    );
    let applied = pod
        .client
        .apply(&tokens.request(&next))
        .await
        .expect("rotation");
    assert_eq!(applied.mode, ApplyMode::Runtime, "{}", pod.agent_log());
    assert_eq!(applied.state.current_worker().map(|w| w.pid), Some(worker));
    assert_eq!(applied.state.reloads, reloads);
    assert_eq!(applied.state.converged.as_deref(), Some(next.id.as_str()));
    let (body, took) = served_within(https_port, "web.test", &rotated, within);
    assert_eq!(body, "two", "the server flip applied with the rotation");
    println!("rotated certificate served {took:?} after the apply answered");
    assert!(
        tls_get(https_port, "web.test", &first_cert.ca_pem, "/").is_err(),
        "the old certificate is no longer served"
    );
    served_within(https_port, "default.test", &default, within);

    // The files a reload starts from hold the rotated certificate, and
    // nothing in the configuration directory is open to other users.
    let on_disk =
        std::fs::read_to_string(pod.config_dir().join("current/certs/shop_web.pem")).expect("pem");
    assert_eq!(on_disk, rotated.pem);
    assert_private(&pod.config_dir().join("bundles"));

    // A new certificate (a new crt-list line) needs a reload, and serves.
    let blog = CertFile::new("blog CA", "blog.test");
    let grown = tls_bundle(
        &pod,
        https_port,
        [(one, false), (two, true)],
        &default,
        &rotated.pem,
        &[("blog", &blog.pem)],
    );
    let applied = pod
        .client
        .apply(&tokens.request(&grown))
        .await
        .expect("new certificate");
    assert_eq!(applied.mode, ApplyMode::Reload);
    served_within(https_port, "blog.test", &blog, within);
    served_within(https_port, "web.test", &rotated, within);

    let state = serde_json::to_string(&pod.client.state().await.expect("state")).expect("json");
    for (text, what) in [(pod.agent_log(), "the agent's log"), (state, "/v1/state")] {
        assert_no_key_material(&text, &[&default, &first_cert, &rotated, &blog], what);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_rotation_keeps_the_old_certificate_serving() {
    let pod = Pod::start();
    let backends = Backends::start(&["one", "two"]);
    let servers = [
        (backends.addresses[0], true),
        (backends.addresses[1], false),
    ];
    let https_port = crate::harness::free_port();
    let default = CertFile::new("default CA", "default.test");
    let serving = CertFile::new("serving CA", "web.test");
    let other = CertFile::new("other CA", "web.test");
    let mut tokens = Tokens::default();
    let good = tls_bundle(&pod, https_port, servers, &default, &serving.pem, &[]);
    let applied = pod
        .client
        .apply(&tokens.request(&good))
        .await
        .expect("good");
    pod.settle(&good.id).await;
    let worker = applied.state.current_worker().expect("a worker").pid;
    let within = Duration::from_secs(1);
    served_within(https_port, "web.test", &serving, within);

    let other_leaf = &other.pem[..other.pem.find(&other.ca_pem).expect("chain")];
    let cases = [
        // `set ssl cert` takes it; `commit ssl cert` refuses the pair.
        (
            format!("{other_leaf}{}", serving.key_pem),
            "inconsistencies between private key and certificate",
        ),
        // `set ssl cert` refuses the payload.
        (
            format!(
                "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n{}",
                serving.key_pem
            ),
            "unable to load certificate",
        ),
    ];
    for (pem, refusal) in cases {
        let bad = tls_bundle(&pod, https_port, servers, &default, &pem, &[]);
        let error = pod
            .client
            .apply(&tokens.request(&bad))
            .await
            .expect_err("a broken certificate is refused");
        let message = error.to_string();
        println!("refused rotation: {message}");
        assert_eq!(error.code(), Some("refused"), "{message}");
        assert!(message.contains("certs/shop_web.pem"), "{message}");
        assert!(
            message.contains(refusal) && message.contains("at runtime first"),
            "both the worker's and haproxy -c's refusals are reported: {message}"
        );
        assert_no_key_material(&message, &[&serving, &other], "the error");

        let state = pod.client.state().await.expect("state");
        assert_eq!(state.current_worker().map(|w| w.pid), Some(worker));
        assert_eq!(state.converged.as_deref(), Some(good.id.as_str()));
        assert_eq!(
            served_within(https_port, "web.test", &serving, within).0,
            "one"
        );
    }
    assert_no_key_material(
        &pod.agent_log(),
        &[&default, &serving, &other],
        "the agent's log",
    );

    // An apply that died between `set ssl cert` and its end leaves a
    // transaction open, which would take the next `set ssl cert` of any
    // file. The agent aborts it first: the rotation applies at runtime and
    // the default certificate stays as it was.
    let answer = worker_command(
        &pod,
        &format!("set ssl cert certs/default.pem <<\n{}\n", other.pem),
    );
    assert_eq!(
        answer.trim(),
        "Transaction created for certificate certs/default.pem!"
    );
    let rotated = tls_bundle(&pod, https_port, servers, &default, &other.pem, &[]);
    let applied = pod
        .client
        .apply(&tokens.request(&rotated))
        .await
        .expect("rotation");
    assert_eq!(applied.mode, ApplyMode::Runtime, "{}", pod.agent_log());
    assert_eq!(applied.state.current_worker().map(|w| w.pid), Some(worker));
    served_within(https_port, "web.test", &other, within);
    served_within(https_port, "default.test", &default, within);
    assert!(
        pod.agent_log()
            .contains("aborting an unfinished ssl cert transaction"),
        "{}",
        pod.agent_log()
    );
}

/// One command on the worker's stats socket, as an operator would send it.
fn worker_command(pod: &Pod, command: &str) -> String {
    use std::io::{Read as _, Write as _};
    let socket = haptic::agent::default_worker_socket(&pod.config_dir());
    let mut stream = std::os::unix::net::UnixStream::connect(socket).expect("worker socket");
    stream.write_all(command.as_bytes()).expect("send");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("end of input");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    answer
}

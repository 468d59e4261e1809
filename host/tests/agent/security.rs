//! Refusals: each with a clear status and message, and nothing on disk
//! changed. Mutual TLS: only a client the CA signed reaches the API.

use std::path::Path;
use std::time::Duration;

use haptic::protocol::api_tls::ClientTls;
use haptic::protocol::{AgentClient, ApplyRequest, Bundle, BundleFile, FencingToken};

use crate::harness::{
    Backends, CertFile, Pod, TOKEN, Tokens, client, get, hosts_map, issuer, leaf, post_json,
    web_bundle,
};

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_refused_and_change_nothing() {
    let pod = Pod::start_with(&["--max-bundle-bytes", "100000"]);
    let backends = Backends::start(&["one"]);
    let server = backends.addresses[0];
    let mut tokens = Tokens {
        epoch: 5,
        sequence: 10,
    };
    let good = web_bundle(pod.http_port, server, "");
    pod.client
        .apply(&tokens.request(&good))
        .await
        .expect("good");
    let before = pod.disk_snapshot();
    let next = web_bundle(pod.http_port, server, "    # next\n");

    // No token, a wrong token: 401 and nothing else.
    for token in [None, Some("wrong"), Some("test-token-4f2")] {
        let error = client(pod.agent_port, token)
            .apply(&tokens.request(&next))
            .await
            .expect_err("unauthorized");
        assert_eq!(error.code(), Some("unauthorized"), "{error}");
        assert!(error.to_string().contains("401"));
        let error = client(pod.agent_port, token)
            .state()
            .await
            .expect_err("unauthorized");
        assert_eq!(error.code(), Some("unauthorized"));
    }

    let stale = ApplyRequest {
        token: FencingToken {
            epoch: 4,
            sequence: 999,
        },
        bundle: next.clone(),
    };
    let error = pod.client.apply(&stale).await.expect_err("stale");
    assert_eq!(error.code(), Some("stale-token"));
    assert!(
        error.to_string().contains("409") && error.to_string().contains("epoch 4 sequence 999"),
        "{error}"
    );

    let mut altered = tokens.request(&next);
    altered.bundle.config.push_str("# tampered\n");
    let error = pod.client.apply(&altered).await.expect_err("bad id");
    assert_eq!(error.code(), Some("bad-id"));
    assert!(
        error.to_string().contains("does not match its content"),
        "{error}"
    );

    for path in [
        "../escape.map",
        "/etc/passwd",
        "maps/../../x",
        ".haptic-bundle.json",
    ] {
        let escaping = Bundle::new(next.config.clone(), vec![BundleFile::new(path, "x")]);
        let error = pod
            .client
            .apply(&tokens.request(&escaping))
            .await
            .expect_err("bad path");
        assert_eq!(error.code(), Some("bad-path"), "{path}: {error}");
        assert!(error.to_string().contains(path), "{error}");
    }

    let huge = Bundle::new(
        next.config.clone(),
        vec![BundleFile::new("maps/huge.map", "k v\n".repeat(30_000))],
    );
    let error = pod
        .client
        .apply(&tokens.request(&huge))
        .await
        .expect_err("too large");
    assert_eq!(error.code(), Some("too-large"));
    assert!(error.to_string().contains("413") && error.to_string().contains("--max-bundle-bytes"));

    let owned = Bundle::new(
        format!("{}\nglobal\n    description mine\n", next.config),
        vec![hosts_map(&["web"])],
    );
    let error = pod
        .client
        .apply(&tokens.request(&owned))
        .await
        .expect_err("reserved");
    assert_eq!(error.code(), Some("bad-request"));

    assert!(
        pod.disk_snapshot() == before,
        "a refused request changed the configuration directory"
    );
    let state = pod.client.state().await.expect("state");
    assert_eq!(state.converged.as_deref(), Some(good.id.as_str()));
    assert_eq!(
        state.newest_token,
        Some(FencingToken {
            epoch: 5,
            sequence: 11
        })
    );

    // Health endpoints need no credentials and reveal nothing.
    assert_eq!(
        get(pod.agent_port, "agent", "/healthz")
            .expect("healthz")
            .body,
        "ok"
    );
    let ready = get(pod.agent_port, "agent", "/readyz").expect("readyz");
    assert_eq!((ready.status, ready.body.as_str()), (200, "ready"));
    assert!(
        !pod.agent_log().contains(TOKEN),
        "the token must never be logged"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_body_never_echoes_key_material() {
    let pod = Pod::start();
    let cert = CertFile::new("CA", "web.test");
    // A file given as a bare string: serde quotes the value it rejects.
    let body = serde_json::json!({
        "token": {"epoch": 1, "sequence": 1},
        "bundle": {"id": "x", "config": "global\n", "files": [cert.pem]},
    });
    let answer = post_json(pod.agent_port, "/v1/apply", &body.to_string()).expect("answer");
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(answer.body.contains("bad-request"), "{}", answer.body);
    assert!(answer.body.contains("wrong type"), "{}", answer.body);
    assert!(!answer.body.contains("PRIVATE KEY"), "{}", answer.body);
    for line in cert.key_lines() {
        assert!(!answer.body.contains(line), "{}", answer.body);
    }
    // A bundle from an older controller (no `secret` field) is taken.
    let server = "127.0.0.1:9".parse().expect("address");
    let old = serde_json::to_value(web_bundle(pod.http_port, server, "")).expect("json");
    assert!(!old.to_string().contains("secret"), "{old}");
    let body = serde_json::json!({"token": {"epoch": 1, "sequence": 2}, "bundle": old});
    let answer = post_json(pod.agent_port, "/v1/apply", &body.to_string()).expect("answer");
    assert_eq!(answer.status, 200, "{}", answer.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_waits_for_a_real_bundle() {
    let pod = Pod::start();
    let ready = get(pod.agent_port, "agent", "/readyz").expect("readyz");
    assert_eq!((ready.status, ready.body.as_str()), (503, "not ready"));
    let state = pod.client.state().await.expect("state");
    assert_eq!(state.converged.as_deref(), Some("bootstrap"));
    // The agent reports the HAProxy it runs: the one `haproxy -v` names.
    let expected = haptic::validate::haproxy_version().expect("haproxy -v");
    assert_eq!(state.haproxy_version, expected);
}

fn write_pem(dir: &Path, name: &str, pem: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).expect("write pem");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_lets_in_only_clients_the_ca_signed() {
    let certs = tempfile::tempdir().expect("tempdir");
    let dir = certs.path();
    let ca = issuer("haptic test CA");
    let other_ca = issuer("someone else");
    let server = leaf(&ca, "127.0.0.1", true);
    let client_cert = leaf(&ca, "controller", false);
    let stranger = leaf(&other_ca, "controller", false);
    let ca_file = write_pem(dir, "ca.pem", &ca.0.pem());
    let server_cert = write_pem(dir, "server.pem", &server.0);
    let server_key = write_pem(dir, "server.key", &server.1);
    let pod = Pod::start_with(&[
        "--tls-cert",
        server_cert.to_str().expect("path"),
        "--tls-key",
        server_key.to_str().expect("path"),
        "--tls-client-ca",
        ca_file.to_str().expect("path"),
    ]);
    let endpoint = format!("https://127.0.0.1:{}", pod.agent_port);
    let with_identity = |cert: &(String, String), name: &str| {
        let cert_file = write_pem(dir, &format!("{name}.pem"), &cert.0);
        let key_file = write_pem(dir, &format!("{name}.key"), &cert.1);
        ClientTls {
            ca: ca_file.clone(),
            identity: Some((cert_file, key_file)),
        }
    };
    let timeout = Duration::from_secs(10);

    let trusted = AgentClient::new(
        &endpoint,
        Some(TOKEN.into()),
        Some(&with_identity(&client_cert, "client")),
        timeout,
    )
    .expect("client");
    // Wait until the TLS listener answers.
    let mut state = trusted.state().await;
    for _ in 0..100 {
        if state.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        state = trusted.state().await;
    }
    assert_eq!(
        state.expect("trusted client").converged.as_deref(),
        Some("bootstrap")
    );

    // Right token, no certificate: 401.
    let anonymous = AgentClient::new(
        &endpoint,
        Some(TOKEN.into()),
        Some(&ClientTls {
            ca: ca_file.clone(),
            identity: None,
        }),
        timeout,
    )
    .expect("client");
    let error = anonymous.state().await.expect_err("no certificate");
    assert_eq!(error.code(), Some("unauthorized"), "{error}");

    // A certificate from another CA fails the handshake.
    let foreign = AgentClient::new(
        &endpoint,
        Some(TOKEN.into()),
        Some(&with_identity(&stranger, "stranger")),
        timeout,
    )
    .expect("client");
    let error = foreign.state().await.expect_err("foreign certificate");
    assert_eq!(error.code(), None, "refused in the handshake: {error}");

    // Certificate but wrong token: 401.
    let wrong_token = AgentClient::new(
        &endpoint,
        Some("nope".into()),
        Some(&with_identity(&client_cert, "client2")),
        timeout,
    )
    .expect("client");
    assert_eq!(
        wrong_token.state().await.expect_err("token").code(),
        Some("unauthorized")
    );
}

//! Client connections across reloads: keep-alive clients see no failure,
//! and a connection an old worker still serves holds convergence.

use std::time::Duration;

use haptic::protocol::ApplyMode;
use haptic::protocol::wire::WorkerRole;

use crate::harness::{Backends, Connection, Pod, Tokens, bundle, config, hosts_map};

#[tokio::test(flavor = "multi_thread")]
async fn a_keep_alive_client_sees_no_failure_across_20_reloads() {
    let pod = Pod::start();
    let backends = Backends::start(&["one"]);
    let servers = vec![("one", backends.addresses[0], true)];
    let mut tokens = Tokens::default();
    let render = |i: usize| {
        bundle(
            config(
                pod.http_port,
                &[("web", servers.clone())],
                &format!("    # render {i}\n"),
            ),
            vec![hosts_map(&["web"])],
        )
    };
    pod.client
        .apply(&tokens.request(&render(0)))
        .await
        .expect("first");

    let mut connection = Connection::open(pod.http_port).expect("connect");
    let (mut sent, mut reconnects) = (0, 0);
    for i in 1..=20 {
        let applied = pod
            .client
            .apply(&tokens.request(&render(i)))
            .await
            .expect("reload");
        assert_eq!(applied.mode, ApplyMode::Reload);
        // A client that keeps its connection and sends again, without retrying.
        for _ in 0..3 {
            let response = connection
                .request("web.test", "/")
                .expect("no failed request");
            sent += 1;
            assert_eq!((response.status, response.body.as_str()), (200, "one"));
            if response.close {
                // HAProxy told the client to open a new connection; that is
                // how keep-alive ends, not a failure.
                connection = Connection::open(pod.http_port).expect("reconnect");
                reconnects += 1;
            }
        }
    }
    assert_eq!(sent, 60);
    // The reloads did reach the client's connection: its worker left after
    // answering (how many times depends on when each old worker stopped).
    assert!(
        reconnects > 0,
        "no reload ever closed the client's connection"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_held_across_a_reload_holds_convergence_until_it_ends() {
    let pod = Pod::start();
    let backends = Backends::start(&["one", "two"]);
    let [one, two] = [0, 1].map(|i| backends.addresses[i]);
    let mut tokens = Tokens::default();
    let render = |extra: &str, two_enabled: bool| {
        bundle(
            config(
                pod.http_port,
                &[("web", vec![("one", one, true), ("two", two, two_enabled)])],
                extra,
            ),
            vec![hosts_map(&["web"])],
        )
    };
    let old = render("", false);
    pod.client.apply(&tokens.request(&old)).await.expect("old");
    let mut held = Connection::open(pod.http_port).expect("connect");
    assert_eq!(held.request("web.test", "/").expect("request").body, "one");

    // A structural change: the old worker stays for the held connection.
    let new = render("    # structural\n", false);
    let applied = pod
        .client
        .apply(&tokens.request(&new))
        .await
        .expect("reload");
    assert_eq!(applied.mode, ApplyMode::Reload);
    let state = pod.client.state().await.expect("state");
    let leaving: Vec<_> = state
        .workers
        .iter()
        .filter(|w| w.role == WorkerRole::Leaving)
        .collect();
    assert_eq!(leaving.len(), 1, "{state:?}");
    assert_eq!(leaving[0].config_id, old.id);
    assert_eq!(
        state.current_worker().map(|w| w.config_id.as_str()),
        Some(new.id.as_str())
    );
    assert_eq!(
        state.converged, None,
        "not converged while the old worker routes"
    );

    // A runtime change reaches the current worker only: still not converged.
    let flipped = render("    # structural\n", true);
    let applied = pod
        .client
        .apply(&tokens.request(&flipped))
        .await
        .expect("flip");
    assert_eq!(applied.mode, ApplyMode::Runtime);
    assert_eq!(applied.state.converged, None);
    assert_eq!(
        applied.state.current_worker().map(|w| w.config_id.as_str()),
        Some(flipped.id.as_str())
    );
    let waited = pod
        .client
        .wait_converged(&flipped.id, Duration::from_millis(300))
        .await
        .expect("state");
    assert_eq!(
        waited.converged, None,
        "the held connection keeps the old worker"
    );

    // The held connection's next request is served by the old worker, which
    // then closes it and exits.
    let last = held
        .request("web.test", "/")
        .expect("served by the leaving worker");
    assert_eq!((last.status, last.close), (200, true));
    let waited = pod
        .client
        .wait_converged(&flipped.id, Duration::from_secs(10))
        .await
        .expect("state");
    assert_eq!(waited.converged.as_deref(), Some(flipped.id.as_str()));
    assert!(waited.workers.iter().all(|w| w.role == WorkerRole::Current));
}

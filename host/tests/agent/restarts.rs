//! Restarts: the agent's never touch HAProxy; HAProxy's start from the
//! last applied files.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use haptic::protocol::ApplyMode;

use crate::harness::{Backends, Connection, Pod, Tokens, get, pair_bundle, web_bundle};

/// Requests on keep-alive connections until stopped; counts failures.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(port: u16, expect: &'static str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let (s, n, f) = (stop.clone(), sent.clone(), failed.clone());
        let thread = std::thread::spawn(move || {
            let mut errors = Vec::new();
            let mut connection = None;
            while !s.load(Ordering::Relaxed) {
                let result = match connection.as_mut() {
                    Some(c) => Ok(c),
                    None => Connection::open(port).map(|c| connection.insert(c)),
                }
                .and_then(|c| c.request("web.test", "/"));
                n.fetch_add(1, Ordering::Relaxed);
                match result {
                    Ok(response) if response.status == 200 && response.body == expect => {
                        if response.close {
                            connection = None;
                        }
                    }
                    Ok(response) => {
                        f.fetch_add(1, Ordering::Relaxed);
                        errors.push(format!("{response:?}"));
                    }
                    Err(error) => {
                        f.fetch_add(1, Ordering::Relaxed);
                        errors.push(error.to_string());
                        connection = None;
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            errors
        });
        Self {
            stop,
            sent,
            failed,
            thread: Some(thread),
        }
    }

    /// (sent, failed, the failures).
    fn finish(mut self) -> (usize, usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let errors = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (
            self.sent.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            errors,
        )
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_restarts_never_touch_haproxy_and_keep_runtime_state() {
    let mut pod = Pod::start();
    let backends = Backends::start(&["one", "two"]);
    let [one, two] = [0, 1].map(|i| backends.addresses[i]);
    let mut tokens = Tokens::default();
    let http_port = pod.http_port;
    let render = |one_on, two_on| pair_bundle(http_port, (one, one_on), (two, two_on), "");
    let first = render(true, false);
    pod.client
        .apply(&tokens.request(&first))
        .await
        .expect("first");
    pod.settle(&first.id).await;
    // A runtime change, which only the agent's record knows about.
    let flipped = render(false, true);
    let applied = pod
        .client
        .apply(&tokens.request(&flipped))
        .await
        .expect("flip");
    assert_eq!(applied.mode, ApplyMode::Runtime);
    let worker = applied.state.current_worker().expect("worker").pid;

    let load = Load::start(pod.http_port, "two");
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..3 {
        pod.kill_agent(); // SIGKILL
        std::thread::sleep(Duration::from_millis(100));
        pod.start_agent();
        let state = pod.client.state().await.expect("state after restart");
        assert_eq!(
            state.current_worker().map(|w| w.pid),
            Some(worker),
            "same HAProxy worker"
        );
        assert_eq!(
            state.converged.as_deref(),
            Some(flipped.id.as_str()),
            "{state:?}"
        );
        assert_eq!(state.newest_token, Some(tokens.last()));
    }
    std::thread::sleep(Duration::from_millis(100));
    let (sent, failed, errors) = load.finish();
    assert!(sent > 50, "the load ran ({sent} requests)");
    assert_eq!(failed, 0, "{errors:?}");

    // The restarted agent still applies, from the state it found.
    let back = render(true, false);
    let applied = pod
        .client
        .apply(&tokens.request(&back))
        .await
        .expect("apply after restart");
    assert_eq!(applied.mode, ApplyMode::Runtime);
    assert_eq!(
        get(pod.http_port, "web.test", "/").expect("request").body,
        "one"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn haproxy_restarts_from_the_last_applied_files() {
    let mut pod = Pod::start();
    let backends = Backends::start(&["one", "two"]);
    let [one, two] = [0, 1].map(|i| backends.addresses[i]);
    let mut tokens = Tokens::default();
    let http_port = pod.http_port;
    let render = |one_on, two_on| pair_bundle(http_port, (one, one_on), (two, two_on), "");
    pod.client
        .apply(&tokens.request(&render(true, false)))
        .await
        .expect("first");
    let flipped = render(false, true);
    let applied = pod
        .client
        .apply(&tokens.request(&flipped))
        .await
        .expect("flip");
    assert_eq!(applied.mode, ApplyMode::Runtime);

    pod.restart_haproxy();
    let state = pod
        .client
        .wait_converged(&flipped.id, Duration::from_secs(10))
        .await
        .expect("state");
    assert_eq!(
        state.converged.as_deref(),
        Some(flipped.id.as_str()),
        "{state:?}"
    );
    let worker = state.current_worker().expect("worker");
    assert_eq!(
        worker.loaded_id, flipped.id,
        "started from the runtime-applied files"
    );
    crate::harness::wait_for_http(pod.http_port, "/");
    assert_eq!(
        get(pod.http_port, "web.test", "/").expect("request").body,
        "two"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn haproxy_never_starts_from_refused_files() {
    let mut pod = Pod::start();
    let backends = Backends::start(&["one"]);
    let server = backends.addresses[0];
    let mut tokens = Tokens::default();
    let good = web_bundle(pod.http_port, server, "");
    pod.client
        .apply(&tokens.request(&good))
        .await
        .expect("good");
    pod.settle(&good.id).await;

    // What `current/` holds for a moment while the master refuses a bundle.
    let bad = web_bundle(pod.http_port, server, "    frobnicate\n");
    let dir = haptic::agent::disk::ConfigDir::new(
        pod.config_dir(),
        haptic::agent::default_worker_socket(&pod.config_dir()),
    );
    dir.write_bundle(&bad, tokens.last()).expect("write");
    dir.set_current(&bad.id).expect("link");

    pod.restart_haproxy();
    let state = pod
        .client
        .wait_converged(&good.id, Duration::from_secs(10))
        .await
        .expect("state");
    assert_eq!(
        state.converged.as_deref(),
        Some(good.id.as_str()),
        "{state:?}"
    );
    assert_eq!(state.applied.map(|a| a.id), Some(good.id.clone()));
    assert!(
        pod.haproxy_log()
            .contains("starting from the last good bundle")
    );
}

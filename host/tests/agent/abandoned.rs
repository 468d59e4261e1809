//! An apply whose requester went away still runs to its end: HAProxy
//! serves the new bundle and the agent's records say so, so the pod is never
//! left on half of an apply until the next push.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use haptic::protocol::{AgentClient, BundleFile};

use crate::harness::{Backends, Pod, TOKEN, Tokens, bundle, config, get, hosts_map, web_bundle};

/// How long the slow bundle's Lua file holds HAProxy's parse, in the
/// master's reload and in `haproxy -c` alike: a reload at scale, made slow
/// on purpose and without burning CPU.
const SLOW_PARSE: Duration = Duration::from_millis(1500);

/// The controller's side of the apply gives up long before the reload ends.
const CLIENT_TIMEOUT: Duration = Duration::from_millis(200);

#[tokio::test(flavor = "multi_thread")]
async fn an_apply_abandoned_by_its_requester_mid_reload_still_completes() {
    let pod = Pod::start();
    let backends = Backends::start(&["one", "two"]);
    let [one, two] = [0, 1].map(|i| backends.addresses[i]);
    let mut tokens = Tokens::default();

    let first = web_bundle(pod.http_port, one, "");
    pod.client
        .apply(&tokens.request(&first))
        .await
        .expect("the first apply");
    assert_eq!(
        get(pod.http_port, "web.test", "/").expect("GET").body,
        "one"
    );
    let reloaded_before = pod.agent_log().matches("reloaded").count();

    // A new backend address and a Lua file: a reload, slowed by the parse.
    let slow = bundle(
        config(pod.http_port, &[("web", vec![("one", two, true)])], "").replacen(
            // After `default-path`, which the Lua file's path is relative to.
            "    default-path config\n",
            "    default-path config\n    lua-load slow.lua\n",
            1,
        ),
        vec![
            hosts_map(&["web"]),
            BundleFile::new(
                "slow.lua",
                format!("os.execute(\"sleep {}\")\n", SLOW_PARSE.as_secs_f64()),
            ),
        ],
    );
    let impatient = AgentClient::new(
        format!("http://127.0.0.1:{}", pod.agent_port),
        Some(TOKEN.to_owned()),
        None,
        CLIENT_TIMEOUT,
    )
    .expect("client");
    let sent = Instant::now();
    let answer = impatient.apply(&tokens.request(&slow)).await;
    let gave_up = sent.elapsed();
    assert!(
        answer.is_err() && gave_up < SLOW_PARSE,
        "the requester must give up before the reload ends (after {gave_up:?}): {answer:?}"
    );

    // HAProxy's own word: a current worker started from the slow bundle.
    let master = haptic::agent::default_master_socket(&pod.config_dir());
    let deadline = Instant::now() + Duration::from_secs(20);
    let worker = loop {
        if let Some(pid) = current_worker_on(&master, &slow.id) {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "no HAProxy worker runs {} 20 s after the abandoned apply; agent log:\n{}\nHAProxy log:\n{}",
            slow.id,
            pod.agent_log(),
            pod.haproxy_log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        get(pod.http_port, "web.test", "/").expect("GET").body,
        "two"
    );

    // The agent's records converge on it too: the apply ran to its end
    // (`last-good` is written after the new worker is seen, the last step).
    let deadline = Instant::now() + Duration::from_secs(20);
    let state = loop {
        let state = pod.client.state().await.expect("GET /v1/state");
        let id = |b: &Option<haptic::protocol::wire::BundleRef>| b.as_ref().map(|b| b.id.clone());
        // The log line comes a moment after `last-good`: wait for both.
        if state.converged.as_deref() == Some(slow.id.as_str())
            && id(&state.applied).as_deref() == Some(slow.id.as_str())
            && id(&state.last_good).as_deref() == Some(slow.id.as_str())
            && pod.agent_log().matches("reloaded").count() > reloaded_before
        {
            break state;
        }
        assert!(
            Instant::now() < deadline,
            "the agent's state never converged on {} after its requester went away \
             (HAProxy's worker {worker} runs it): the apply stopped half way. State: {state:?}; \
             agent log:\n{}",
            slow.id,
            pod.agent_log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(state.current_worker().map(|w| w.pid), Some(worker));
    assert_eq!(
        pod.agent_log().matches("reloaded").count(),
        reloaded_before + 1,
        "the agent logs the end of the abandoned reload"
    );
    println!(
        "requester gave up after {gave_up:?}; the apply completed {:?} after it was sent",
        sent.elapsed()
    );
}

/// The pid of a current worker whose `description` (set by the agent to
/// the bundle id) is `id`, asked of HAProxy's master CLI directly.
fn current_worker_on(master: &Path, id: &str) -> Option<u32> {
    let procs = master_cli(master, "show proc")?;
    let mut in_workers = false;
    for line in procs.lines().map(str::trim) {
        if line.starts_with('#') {
            // `#<PID> ...` heads a section; `# workers` starts the current ones.
            if !line.starts_with("#<") {
                in_workers = line == "# workers";
            }
            continue;
        }
        let mut fields = line.split_whitespace();
        let (Some(pid), Some("worker")) = (fields.next(), fields.next()) else {
            continue;
        };
        if !in_workers {
            continue;
        }
        let info = master_cli(master, &format!("@!{pid} show info"))?;
        if info
            .lines()
            .any(|l| l.strip_prefix("description: ").map(str::trim) == Some(id))
        {
            return pid.parse().ok();
        }
    }
    None
}

/// One master CLI command; `None` while the master is re-executing.
fn master_cli(master: &Path, command: &str) -> Option<String> {
    let mut stream = UnixStream::connect(master).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(format!("{command}\n").as_bytes()).ok()?;
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

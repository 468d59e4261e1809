//! The directive policy against the real HAProxy and the real binary:
//! HAProxy decides what a line does (the policy must refuse every spelling
//! under which `haproxy -c` runs a Lua file), and a library that emits
//! `lua-load` is refused by `haptic render` and by the controller under
//! `haptic run` before any agent sees it, and passes with the allow-list.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use haptic::guests::MISBEHAVING_PATH;
use haptic::policy::{Policy, PolicyError};
use haptic::render::Rendered;
use haptic::validate::Validator;

/// What the Lua file prints when HAProxy runs it.
const MARKER: &str = "haptic-policy-test: Lua ran";

/// The line the misbehaving library's `lua-load` mode adds to `global`.
const LUA_LINE: &str = "lua-load scripts/misbehaving.lua";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rendered(config: String, files: &[(&str, &str)]) -> Rendered {
    let lines = config.split('\n').count();
    Rendered {
        config,
        files: files
            .iter()
            .map(|(path, content)| ((*path).to_owned(), (*content).to_owned()))
            .collect(),
        line_origins: vec![(1..lines + 1, Arc::from("test"))],
        ..Rendered::default()
    }
}

/// Every spelling of `lua-load` tried here: HAProxy says which ones load
/// the file; the policy must refuse each of those.
#[test]
fn every_line_under_which_haproxy_runs_lua_is_refused() {
    let validator = Validator::from_env().expect("haproxy (apt-get install haproxy)");
    let lua = format!("core.Alert(\"{MARKER}\")\n");
    let spellings = [
        "lua-load x.lua",
        "\"lua-load\" x.lua",
        "'lua-load' x.lua",
        "lu\"a-lo\"ad x.lua",
        "lua\\x2dload x.lua",
        "\"\"lua-load x.lua",
        "lua-load x.lua\\x00junk",
        "lua-load x.lua#comment",
        "\"${HAPTIC_POLICY_UNSET-lua-load}\" x.lua",
        "lua-load \"${HAPTIC_POLICY_UNSET-x.lua}\"",
        "lua-load-per-thread x.lua",
        "lua-load x.lua\rjunk",
        // Not Lua for HAProxy (checked below that it does not run):
        "lua\\-load x.lua",
        "# lua-load x.lua",
        "description x\rlua-load x.lua",
    ];
    let mut ran = 0;
    for spelling in spellings {
        let config =
            format!("global\n    default-path config\n    {spelling}\ndefaults\n    mode http\n");
        let output = match validator.validate(&config, &[("x.lua".to_owned(), lua.clone())]) {
            Ok(validation) => validation.output,
            Err(error) => error.to_string(),
        };
        let lua_ran = output.contains(MARKER);
        let refused = Policy::default()
            .check(&rendered(config, &[("x.lua", &lua)]))
            .is_err();
        if lua_ran {
            ran += 1;
            assert!(
                refused,
                "HAProxy ran Lua from `{spelling:?}` but the policy let it through"
            );
        }
        println!("{spelling:?}: Lua ran: {lua_ran}, refused: {refused}");
    }
    assert_eq!(ran, 12, "the spellings HAProxy 2.6 loads Lua from changed");
}

/// A file named outside the render is read by `haproxy -c` (here: a map
/// loaded from an absolute path); the policy refuses it first.
#[test]
fn a_file_outside_the_render_is_refused_before_haproxy_reads_it() {
    let work = tempfile::tempdir().expect("tempdir");
    let outside = work.path().join("token");
    std::fs::write(&outside, "s3cret-token\n").expect("write");
    let config = format!(
        "global\n    default-path config\ndefaults\n    mode http\n    timeout client 1s\n    \
         timeout server 1s\n    timeout connect 1s\nfrontend f\n    bind 127.0.0.1:{}\n    \
         http-request set-header x %[req.hdr(y),map_str({})]\n",
        support::free_port(),
        outside.display()
    );
    let validator = Validator::from_env().expect("haproxy");
    // HAProxy itself reads it: remove the file and it refuses the line.
    validator
        .validate(&config, &[])
        .expect("HAProxy loads the outside map");
    std::fs::remove_file(&outside).expect("remove");
    validator
        .validate(&config, &[])
        .expect_err("HAProxy needs the outside map");
    let error = Policy::default()
        .check(&rendered(config, &[]))
        .expect_err("the policy refuses it");
    let PolicyError::Refused { violations } = &error else {
        panic!("{error}");
    };
    assert_eq!(violations.len(), 1, "{error}");
    assert!(error.to_string().contains("is an absolute path"), "{error}");
}

fn haptic(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_haptic"))
        .args(args)
        .output()
        .expect("haptic runs")
}

fn allow_list(dir: &Path) -> PathBuf {
    let values = dir.join("allow-lua.yaml");
    std::fs::write(
        &values,
        "directivePolicy:\n  allow:\n    - library: misbehaving\n      directives: [lua-load]\n",
    )
    .expect("write values");
    values
}

#[test]
fn haptic_render_refuses_a_library_that_emits_lua_load_and_the_allow_list_lets_it_pass() {
    let cluster = repo().join("examples/cluster");
    let cluster = cluster.to_str().expect("utf-8 path");
    let lua_mode = "templateLibraries.misbehaving.mode=lua-load";
    let refused = haptic(&["render", cluster, "-l", MISBEHAVING_PATH, "--set", lua_mode]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("(`{LUA_LINE}`), written by library `misbehaving`"))
            && stderr.contains("line "),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&refused.stdout).contains(LUA_LINE));

    let work = tempfile::tempdir().expect("tempdir");
    let values = allow_list(work.path());
    let values = values.to_str().expect("utf-8 path");
    let allowed = haptic(&[
        "render",
        cluster,
        "-l",
        MISBEHAVING_PATH,
        "--set",
        lua_mode,
        "-f",
        values,
    ]);
    let stdout = String::from_utf8_lossy(&allowed.stdout);
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    assert!(stdout.contains(LUA_LINE), "{stdout}");
    assert!(
        String::from_utf8_lossy(&allowed.stderr).contains("validated by HAProxy")
            || stdout.contains("validated by HAProxy"),
        "not validated"
    );
}

/// `haptic run` (the controller over local agents), stopped when dropped
/// (before its working directory goes: fields drop in order).
struct Run {
    _process: support::LocalRun,
    work: tempfile::TempDir,
}

impl Run {
    fn start(allow: bool) -> Self {
        let work = tempfile::tempdir().expect("tempdir");
        // `haptic run` serves HTTPS on its HTTP port + 363.
        let port = support::free_ports(&[0, 363]);
        let listen = format!("127.0.0.1:{}", support::free_port());
        let mut command = Command::new(env!("CARGO_BIN_EXE_haptic"));
        command.arg("run");
        // The demo backends listen on fixed addresses (127.0.10.1:8080, ...):
        // only the run that must serve takes them, so the two tests of this
        // file, run in parallel, do not compete for them (one lost the race
        // in a loaded CI run: "no demo backend ... Address already in use").
        if allow {
            command.arg("--demo-backends");
        }
        command
            .args(["--proxies", "1"])
            .args(["--port", &port.to_string(), "--listen", &listen])
            .args(["-l", MISBEHAVING_PATH])
            .args(["--set", "templateLibraries.misbehaving.mode=lua-load"])
            .arg("--dir")
            .arg(work.path().join("scratch"))
            .arg(repo().join("examples/cluster"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(work.path().join("run.log")).expect("log"));
        if allow {
            command.arg("-f").arg(allow_list(work.path()));
        }
        let child = command.spawn().expect("haptic run starts");
        let run = Self {
            _process: support::LocalRun(child),
            work,
        };
        std::fs::write(run.work.path().join("port"), port.to_string()).expect("port");
        run
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.work.path().join("run.log")).unwrap_or_default()
    }

    fn port(&self) -> u16 {
        std::fs::read_to_string(self.work.path().join("port"))
            .expect("port")
            .parse()
            .expect("number")
    }

    /// Every file the agent wrote into its HAProxy's configuration directory.
    fn agent_files(&self) -> Vec<(PathBuf, String)> {
        let mut found = Vec::new();
        let mut dirs = vec![self.work.path().join("scratch/haproxy-0")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    found.push((path, text));
                }
            }
        }
        found
    }
}

/// `env()` is HAProxy reading its own environment while it serves (here
/// `PATH`, which every process has; in a pod it could be a credential):
/// the real HAProxy answers with the value, and the policy refuses the line.
#[test]
fn what_env_reads_is_served_by_haproxy_and_the_policy_refuses_it() {
    let work = tempfile::tempdir().expect("tempdir");
    let port = support::free_port();
    let config = format!(
        "global\n    default-path config\ndefaults\n    mode http\n    timeout client 1s\n    \
         timeout server 1s\n    timeout connect 1s\nfrontend f\n    bind 127.0.0.1:{port}\n    \
         http-request return status 200 content-type text/plain lf-string \"%[env(PATH)]\"\n"
    );
    std::fs::write(work.path().join("haproxy.cfg"), &config).expect("write config");
    let haproxy = support::start_haproxy(work.path(), port);
    let served = support::http_get(port, "env.example", "/");
    drop(haproxy);
    let path = std::env::var("PATH").expect("PATH");
    assert_eq!(
        (served.status, served.body.trim()),
        (200, path.as_str()),
        "HAProxy serves its environment through env()"
    );
    let error = Policy::default()
        .check(&rendered(config, &[]))
        .expect_err("the policy refuses env()");
    assert!(
        error
            .to_string()
            .contains("reads the environment variable `PATH`"),
        "{error}"
    );
    assert!(
        !error.to_string().contains(&path),
        "the value is not shown: {error}"
    );
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool, log: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn get_status(port: u16, host: &str) -> Option<u16> {
    support::try_http_get(port, host, "/")
        .ok()
        .map(|response| response.status)
}

#[test]
fn the_controller_refuses_lua_load_before_any_agent_sees_it() {
    let run = Run::start(false);
    wait_for(
        "the refusal in the controller's log",
        || run.log().contains("the directive policy refused"),
        || run.log(),
    );
    let log = run.log();
    assert!(
        log.contains(&format!("(`{LUA_LINE}`), written by library `misbehaving`")),
        "{log}"
    );
    // The agent's HAProxy directory holds no trace of it: not the line, not
    // the Lua file, and HAProxy serves nothing (its bootstrap bundle). The
    // agent writes its bootstrap files as it starts, which on a loaded
    // machine can come after the controller's refusal (seen once with a
    // cold build beside the suite).
    wait_for(
        "the agent's bootstrap files",
        || !run.agent_files().is_empty(),
        || run.log(),
    );
    let files = run.agent_files();
    assert!(!files.is_empty(), "the agent's directory is missing");
    for (path, text) in &files {
        assert!(
            !text.contains("lua-load") && !path.ends_with("misbehaving.lua"),
            "{} reached the agent",
            path.display()
        );
    }
    assert_eq!(get_status(run.port(), "shop.example.com"), None);
}

#[test]
fn the_controller_deploys_lua_load_when_the_allow_list_names_it() {
    let run = Run::start(true);
    wait_for(
        "shop.example.com to be routed",
        || get_status(run.port(), "shop.example.com") == Some(200),
        || run.log(),
    );
    assert!(
        run.agent_files()
            .iter()
            .any(|(path, text)| path.ends_with("haproxy.cfg") && text.contains(LUA_LINE)),
        "the deployed configuration lacks the allowed line"
    );
}

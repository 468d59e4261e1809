//! Secret configuration text end to end, with the `basic-auth` example
//! library (users from a Secret's htpasswd lines, hashes in a `userlist`):
//! no hash reaches `haptic render`'s stdout or stderr, the warnings, or a
//! failing fixture's report; `render -o` writes haproxy.cfg 0600 with the
//! real hashes; and real HAProxy on that directory lets the right password
//! through and nobody else (the oracle is HAProxy, not the render).

mod support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use haptic::guests::EXAMPLE_BASIC_AUTH_PATH;

/// The hashes in the fixture's Secret (all of password `pw`).
const HASHES: &[&str] = &[
    "$6$abcdefgh$KQeXafAQAaOoKTevphVU215RvJdgzyfASRasIOuh12hO8u0r1bGW92ZnTmC9IjsiQ8VPiTXBiZF49dFL1U4wX/",
    "$y$j9T$abcdefghijklmnop$wRwvHNqzMkHLG74uLLCRVTwaZ.a1aIothEUeYGf9oED",
    "$apr1$abcdefgh$5VEbMkemELfbhC5ck.U.z1",
];

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/basic-auth/fixtures")
}

fn haptic(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_haptic"))
        .args(args)
        .output()
        .expect("haptic runs")
}

/// Fails naming the first hash (by position, never by text) that `text`
/// holds, even in part: the digest is what must stay hidden.
fn assert_no_hash(what: &str, text: &str) {
    for (index, hash) in HASHES.iter().enumerate() {
        let digest = hash.rsplit('$').next().unwrap_or(hash);
        assert!(
            !text.contains(digest),
            "{what} shows hash number {index} of the fixture's Secret"
        );
    }
}

fn manifests() -> String {
    fixtures()
        .join("users-from-a-secret/manifests.yaml")
        .display()
        .to_string()
}

#[test]
fn render_shows_no_hash_and_writes_the_config_0600() {
    let shown = haptic(&["render", &manifests(), "-l", EXAMPLE_BASIC_AUTH_PATH]);
    let stdout = String::from_utf8_lossy(&shown.stdout);
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(shown.status.success(), "{stderr}");
    assert_no_hash("haptic render's stdout", &stdout);
    assert_no_hash("haptic render's stderr", &stderr);
    assert!(
        stdout
            .contains("userlist basic_auth_shop_admin\n    user <redacted>\n    user <redacted>\n"),
        "the userlist is shown redacted:\n{stdout}"
    );
    assert!(
        stdout.contains("secret line(s) of haproxy.cfg shown as `<redacted>`"),
        "{stdout}"
    );
    assert!(
        stderr.contains("user carol is left out"),
        "the unusable hash is reported: {stderr}"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let written = haptic(&[
        "render",
        &manifests(),
        "-l",
        EXAMPLE_BASIC_AUTH_PATH,
        "-o",
        &out.display().to_string(),
    ]);
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    assert_no_hash(
        "haptic render -o's stdout",
        &String::from_utf8_lossy(&written.stdout),
    );
    assert_no_hash(
        "haptic render -o's stderr",
        &String::from_utf8_lossy(&written.stderr),
    );
    let config = out.join("haproxy.cfg");
    let mode = std::fs::metadata(&config)
        .expect("written")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "haproxy.cfg holds password hashes");
    let text = std::fs::read_to_string(&config).expect("readable");
    assert!(
        text.contains(&format!("user alice password {}", HASHES[0])),
        "the deployed file holds the real hash"
    );
}

#[test]
fn a_config_without_secret_text_stays_0644() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let missing = fixtures().join("secret-missing-denies/manifests.yaml");
    let written = haptic(&[
        "render",
        &missing.display().to_string(),
        "-l",
        EXAMPLE_BASIC_AUTH_PATH,
        "-o",
        &out.display().to_string(),
    ]);
    assert!(written.status.success());
    let mode = std::fs::metadata(out.join("haproxy.cfg"))
        .expect("written")
        .permissions()
        .mode()
        & 0o777;
    assert_ne!(mode & 0o044, 0, "only secret text makes the file private");
}

#[test]
fn a_failing_fixture_reports_no_hash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let case = dir.path().join("wrong-expectation");
    std::fs::create_dir(&case).expect("case dir");
    std::fs::copy(manifests(), case.join("manifests.yaml")).expect("manifests copied");
    // A prefix of the real line on purpose: the report lists lines that
    // start with a whole-line pattern, which would be the userlist's.
    std::fs::write(
        case.join("expect.yaml"),
        "contains:\n  - \"user alice password\"\n",
    )
    .expect("expectations written");
    let report = haptic(&[
        "test",
        EXAMPLE_BASIC_AUTH_PATH,
        "--fixtures",
        &dir.path().display().to_string(),
    ]);
    let stdout = String::from_utf8_lossy(&report.stdout);
    let stderr = String::from_utf8_lossy(&report.stderr);
    assert!(!report.status.success(), "the case fails:\n{stdout}");
    assert!(stdout.contains("FAIL wrong-expectation"), "{stdout}");
    assert_no_hash("haptic test's report", &stdout);
    assert_no_hash("haptic test's log", &stderr);
}

fn curl(port: u16, credentials: Option<&str>) -> String {
    curl_path(port, "/", credentials)
}

fn curl_path(port: u16, path: &str, credentials: Option<&str>) -> String {
    let mut command = Command::new("curl");
    command.args([
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--max-time",
        "5",
    ]);
    command.args(["-H", "Host: admin.example.com"]);
    if let Some(credentials) = credentials {
        command.arg("-u").arg(credentials);
    }
    let output = command
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl runs (apt-get install curl)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn haproxy_lets_the_right_password_through_and_nobody_else() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    let port = support::free_port();
    let set = |assignment: String| assignment;
    let written = haptic(&[
        "render",
        &manifests(),
        "-l",
        EXAMPLE_BASIC_AUTH_PATH,
        "--set",
        &set(format!(
            "templateLibraries.base.frontends.http.bind=127.0.0.1:{port}"
        )),
        "--set",
        &set(format!(
            "templateLibraries.base.frontends.healthz.bind=127.0.0.1:{}",
            support::free_port()
        )),
        "--set",
        &set(format!(
            "templateLibraries.ingress.tls.bind=127.0.0.1:{}",
            support::free_port()
        )),
        "-o",
        &out.display().to_string(),
    ]);
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let _haproxy = support::start_haproxy(Path::new(&out), port);
    // Past the check, the Ingress's Service does not exist: 503 means the
    // credentials were accepted.
    assert_eq!(curl(port, None), "401", "no credentials");
    assert_eq!(curl(port, Some("alice:pw")), "503", "alice (sha512-crypt)");
    assert_eq!(curl(port, Some("bob:pw")), "503", "bob (yescrypt)");
    assert_eq!(curl(port, Some("alice:wrong")), "401", "a wrong password");
    assert_eq!(curl(port, Some("carol:pw")), "401", "carol was left out");
    // Issue 24, item 3: the policy is the Ingress's, not the host's.
    assert_eq!(
        curl_path(port, "/public", None),
        "503",
        "another Ingress on the same host keeps no auth"
    );
    assert_eq!(curl_path(port, "/publicity", None), "401", "not its path");
}

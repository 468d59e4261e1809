//! The `crypt` import's oracle is HAProxy itself: every hash below sits in a
//! real HAProxy 2.6 `userlist`, one user each, and a request with the right
//! password must get 200 exactly when `check_password_hash` accepts the
//! hash. The hashes were made with libxcrypt (`crypt.crypt` of Python 3.11
//! on Debian 12, `openssl passwd -apr1` for Apache's), all of password `pw`.

mod support;

use std::process::Command;

use haptic::crypt::check_password_hash;

const PASSWORD: &str = "pw";

/// (user, hash). Users with an `x-` prefix hold hashes HAProxy must refuse.
const HASHES: &[(&str, &str)] = &[
    ("des", "abzlUXK5ed5rs"),
    ("md5", "$1$abcdefgh$IQtUouv7y7Q9dRWkQEPCc."),
    (
        "sha256",
        "$5$abcdefgh$ijtOJ//yvc/9bq1g0llFn9dB688BwBDRD90DlKKSKE1",
    ),
    (
        "sha256-rounds",
        "$5$rounds=6000$abcdefgh$Y.CSLrt91za2OwP58qbjdnsa8fL0ylo28BfRMLxfYQB",
    ),
    (
        "sha512",
        "$6$abcdefgh$KQeXafAQAaOoKTevphVU215RvJdgzyfASRasIOuh12hO8u0r1bGW92ZnTmC9IjsiQ8VPiTXBiZF49dFL1U4wX/",
    ),
    (
        "sha512-rounds",
        "$6$rounds=6000$abcdefgh$A83ACoVCcgl/etNkUwxRjVDuxlny38agOzSGshZB7PYcFuYI1GNcjym5ENtBKRAmbUP00/LJbbI5HXYpmC3Kb1",
    ),
    (
        "bcrypt-2b",
        "$2b$12$Fn6LKedQxTcWvwTLTjl0NO/FJN2Favrx33ucOryuln1W1/nXa0Mby",
    ),
    (
        "bcrypt-2a",
        "$2a$12$Fn6LKedQxTcWvwTLTjl0NO/FJN2Favrx33ucOryuln1W1/nXa0Mby",
    ),
    (
        "bcrypt-2y",
        "$2y$12$Fn6LKedQxTcWvwTLTjl0NO/FJN2Favrx33ucOryuln1W1/nXa0Mby",
    ),
    (
        "yescrypt",
        "$y$j9T$abcdefghijklmnop$wRwvHNqzMkHLG74uLLCRVTwaZ.a1aIothEUeYGf9oED",
    ),
    (
        "gost-yescrypt",
        "$gy$j9T$abcdefghijklmnop$FsKX1p0E7/YAeYYYk8JwEoSmY2j55FT86HbjrAKDjV9",
    ),
    (
        "scrypt",
        "$7$CU..../....abcdefghijklmnop$k4rB/qE/dLYU9kop78l/c1wzA0fBVPCRz06ApUewLKC",
    ),
    ("bsdi", "_J9..abcdTZ/33djMPto"),
    (
        "sun-md5",
        "$md5,rounds=904$abcdefgh$$w3kncyGs3rbRyj06gXjjD0",
    ),
    ("nt-hash", "$3$$8cc19b6a8cfeac299c2871c86b38de28"),
    ("sha1", "$sha1$40000$abcdefgh$u9Y4cqwxRyYa7EJDhu3zXThhO6G1"),
    ("x-apr1", "$apr1$abcdefgh$5VEbMkemELfbhC5ck.U.z1"),
    ("x-apache-sha", "{SHA}s0xNMiW4aa8Pi4oPAXWTXQBwnlE="),
    ("x-notahash", "notahash"),
    ("x-sha512-bad", "$6$bad"),
    (
        "x-sha512-short",
        "$6$abcdefgh$KQeXafAQAaOoKTevphVU215RvJdgzyfASRasIOuh12hO8u0r1bGW92ZnTmC9IjsiQ8VPiTXBiZF49dFL1U4wX",
    ),
    ("x-md5-short", "$1$abcdefgh$IQtUouv7y7Q9dRWkQEPCc"),
    (
        "x-bcrypt-cost",
        "$2b$3$Fn6LKedQxTcWvwTLTjl0NO/FJN2Favrx33ucOryuln1W1/nXa0Mby",
    ),
    (
        "x-yescrypt-cut",
        "$y$j9T$abcdefghijklmnop$wRwvHNqzMkHLG74uLLCRVTwaZ.a1aIothEUeYGf9oE",
    ),
    ("x-des-short", "abzlUXK5ed5r"),
];

fn status_with(port: u16, user: &str, password: &str) -> String {
    let output = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
        ])
        .arg("-u")
        .arg(format!("{user}:{password}"))
        .arg(format!("http://127.0.0.1:{port}/"))
        .output()
        .expect("curl runs (apt-get install curl)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn the_check_agrees_with_what_haproxy_matches_at_runtime() {
    let dir = tempfile::tempdir().expect("temp dir");
    let port = support::free_port();
    let mut config = String::from(
        "global\n    maxconn 100\ndefaults\n    mode http\n    timeout client 5s\n    \
         timeout server 5s\n    timeout connect 5s\nuserlist users\n",
    );
    for (user, hash) in HASHES {
        config.push_str(&format!("    user {user} password {hash}\n"));
    }
    config.push_str(&format!(
        "frontend web\n    bind 127.0.0.1:{port}\n    http-request auth unless {{ http_auth(users) }}\n    \
         http-request return status 200 content-type text/plain string ok\n"
    ));
    std::fs::write(dir.path().join("haproxy.cfg"), config).expect("config written");
    let _haproxy = support::start_haproxy(dir.path(), port);

    let mut disagreements = Vec::new();
    for (user, hash) in HASHES {
        let matched = status_with(port, user, PASSWORD) == "200";
        assert_eq!(
            status_with(port, user, "wrong"),
            "401",
            "{user}: a wrong password is refused"
        );
        let accepted = check_password_hash(hash);
        if matched != accepted.is_ok() {
            disagreements.push(format!(
                "{user}: HAProxy {} it, the check says {accepted:?}",
                if matched { "matches" } else { "never matches" }
            ));
        }
        assert_eq!(
            user.starts_with("x-"),
            !matched,
            "{user}: the table's expectation of HAProxy holds"
        );
    }
    assert!(
        disagreements.is_empty(),
        "the check and HAProxy disagree:\n{}",
        disagreements.join("\n")
    );
}

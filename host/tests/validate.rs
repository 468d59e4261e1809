//! `validate` against the real haproxy (Debian's package; `make setup`
//! installs it): what it accepts, what it refuses and where.

use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::time::Duration;

use haptic::validate::{self, Level, ValidationError, Validator};

/// A minimal valid configuration; `extra` lands in the `frontend` section
/// starting at line 12.
fn config(extra: &str) -> String {
    format!(
        "global\n  default-path config\n\
         defaults\n  mode http\n  timeout client 5s\n  timeout server 5s\n  timeout connect 5s\n\
         backend app\n  server s1 127.0.0.1:8080\n\
         frontend www\n  bind 127.0.0.1:18080\n{extra}  default_backend app\n"
    )
}

fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, c)| (p.to_string(), c.to_string()))
        .collect()
}

#[test]
fn a_valid_config_passes_and_its_warnings_carry_line_numbers() {
    let tcp = "global\n  default-path config\ndefaults\n  timeout client 5s\n  timeout server 5s\n  timeout connect 5s\n\
               frontend raw\n  bind 127.0.0.1:18081\n  mode tcp\n  option httplog\n  default_backend b\n\
               backend b\n  mode tcp\n  server s 127.0.0.1:9\n";
    let validation = validate::validate(tcp, &[]).expect("haproxy accepts it");
    let warning = validation
        .warnings
        .iter()
        .find(|m| m.text.contains("option httplog"))
        .unwrap_or_else(|| panic!("a warning about httplog in {:?}", validation.warnings));
    assert_eq!((warning.level, warning.line), (Level::Warning, Some(10)));
    assert_eq!(warning.file.as_deref(), Some("haproxy.cfg"));
    assert!(validate::validate(&config(""), &[]).is_ok());
}

#[test]
fn a_bad_keyword_is_refused_with_its_line() {
    let error = validate::validate(&config("  no-such-keyword on\n"), &[]).expect_err("refused");
    let ValidationError::Refused { messages, output } = &error else {
        panic!("expected Refused, got {error}");
    };
    let alert = messages
        .iter()
        .find(|m| m.level == Level::Alert)
        .expect("an alert");
    assert_eq!(alert.line, Some(12), "{output}");
    assert!(alert.text.contains("no-such-keyword"), "{alert}");
    assert!(error.to_string().contains("no-such-keyword"), "{error}");
}

#[test]
fn a_map_file_is_found_next_to_the_config_only_when_written() {
    let with_map =
        config("  http-request set-var(txn.backend) req.hdr(host),lower,map(maps/hosts.map,app)\n");
    let error = validate::validate(&with_map, &[]).expect_err("the map is missing");
    assert!(error.to_string().contains("maps/hosts.map"), "{error}");
    let ok = validate::validate(
        &with_map,
        &files(&[("maps/hosts.map", "example.com app\n")]),
    );
    assert!(ok.is_ok(), "{ok:?}");
}

#[test]
fn paths_leaving_the_directory_are_refused_before_haproxy_runs() {
    for path in ["../escape.map", "maps/../../escape.map", "/tmp/abs.map"] {
        let error = validate::validate(&config(""), &files(&[(path, "x\n")])).expect_err(path);
        assert!(
            matches!(error, ValidationError::BadPath { .. }),
            "{path}: {error}"
        );
        assert!(error.to_string().contains(path), "{error}");
    }
}

#[test]
fn the_version_is_reported() {
    let version = validate::haproxy_version().expect("haproxy -v");
    assert!(
        version.split('.').take(2).all(|n| n.parse::<u32>().is_ok()),
        "{version}"
    );
    assert_eq!(validate::haproxy_version().expect("cached"), version);
}

#[test]
fn a_missing_binary_and_a_hanging_one_are_errors() {
    let missing = Validator::new(PathBuf::from("/nonexistent/haproxy"));
    let error = missing.validate(&config(""), &[]).expect_err("no binary");
    assert!(
        matches!(error, ValidationError::Run { .. })
            && error.to_string().contains("/nonexistent/haproxy")
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("slow-haproxy");
    std::fs::write(&script, "#!/bin/sh\nsleep 10\n").expect("write script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let slow = Validator {
        binary: script,
        timeout: Duration::from_millis(200),
    };
    let error = slow.validate(&config(""), &[]).expect_err("times out");
    assert!(matches!(error, ValidationError::Timeout { .. }), "{error}");
}

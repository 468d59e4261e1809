use super::*;

const REFUSED: &str = "\
[NOTICE]   (10721) : haproxy version is 2.6.12-1+deb12u4
[NOTICE]   (10721) : path to executable is /usr/sbin/haproxy
[ALERT]    (10721) : config : parsing [haproxy.cfg:3] : unknown keyword 'foo' in 'global' section
[ALERT]    (10721) : config : parsing [maps/sub.cfg:11] : error detected in frontend 'f'
    while parsing 'http-request set-var(txn.x)' rule
[WARNING]  (10721) : config : log format ignored for frontend 'f' since it has no log address.
[ALERT]    (10721) : config : Error(s) found in configuration file : haproxy.cfg
[ALERT]    (10721) : config : Fatal errors found in configuration.
";

#[test]
fn haproxy_output_is_parsed_into_located_messages() {
    let messages = output::parse(REFUSED);
    let summary: Vec<_> = messages
        .iter()
        .map(|m| (m.level, m.file.as_deref(), m.line))
        .collect();
    assert_eq!(
        summary,
        [
            (Level::Alert, Some("haproxy.cfg"), Some(3)),
            (Level::Alert, Some("maps/sub.cfg"), Some(11)),
            (Level::Warning, None, None),
        ]
    );
    assert_eq!(
        messages[0].text,
        "parsing [haproxy.cfg:3] : unknown keyword 'foo' in 'global' section"
    );
    assert!(
        messages[1]
            .text
            .ends_with("frontend 'f'\nwhile parsing 'http-request set-var(txn.x)' rule")
    );
    assert_eq!(
        messages[0].to_string(),
        "alert: parsing [haproxy.cfg:3] : unknown keyword 'foo' in 'global' section"
    );
}

#[test]
fn summary_alerts_stay_when_they_are_all_there_is() {
    let messages = output::parse(
        "[ALERT]    (1) : config : Fatal errors found in configuration.\nConfiguration file is valid\n",
    );
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].text, "Fatal errors found in configuration.");
    assert_eq!(messages[0].line, None);
}

#[test]
fn location_skips_brackets_that_are_not_file_and_line() {
    let messages =
        output::parse("[WARNING]  (1) : config : proxy [f] has [no:x] but [haproxy.cfg:7] does\n");
    assert_eq!(messages[0].line, Some(7));
    assert_eq!(messages[0].file.as_deref(), Some("haproxy.cfg"));
}

#[test]
fn refused_display_shows_haproxys_alerts() {
    let error = ValidationError::Refused {
        messages: output::parse(REFUSED),
        output: REFUSED.to_owned(),
    };
    let text = error.to_string();
    assert!(
        text.contains("  alert: parsing [haproxy.cfg:3] : unknown keyword 'foo'"),
        "{text}"
    );
    assert!(
        !text.contains("log format ignored"),
        "warnings are not the reason: {text}"
    );
    let bare = ValidationError::Refused {
        messages: vec![],
        output: "Segmentation fault\n".to_owned(),
    };
    assert!(bare.to_string().ends_with("Segmentation fault"), "{bare}");
}

#[test]
fn file_paths_must_stay_inside_the_directory() {
    let file = |path: &str| (path.to_owned(), String::new());
    let ok = check_paths(&[
        file("maps/hosts.map"),
        file("./certs/a.pem"),
        file("errors.http"),
    ])
    .expect("valid");
    assert_eq!(
        ok,
        [
            PathBuf::from("maps/hosts.map"),
            "certs/a.pem".into(),
            "errors.http".into()
        ]
    );
    let cases = [
        ("/etc/passwd", "is absolute"),
        ("maps/../../x", "contains `..`"),
        ("..", "contains `..`"),
        ("", "is empty"),
        ("./", "is empty"),
        ("./haproxy.cfg", "would overwrite the configuration itself"),
    ];
    for (path, reason) in cases {
        let error = check_paths(&[file(path)]).expect_err(path);
        assert!(
            matches!(error, ValidationError::BadPath { reason: r, .. } if r == reason),
            "{path:?}: {error}"
        );
    }
    let error = check_paths(&[file("a.map"), file("./a.map")]).expect_err("duplicate");
    assert!(error.to_string().contains("is given twice"), "{error}");
}

#[test]
fn versions_below_the_minimum_are_told_apart() {
    for newer in ["3.0.11-1+deb13u5", "3.0", "3.2.26-1", "3.3-dev4", "10.0.1"] {
        assert!(at_least(newer, MINIMUM_HAPROXY), "{newer}");
    }
    for older in ["2.6.12-1+deb12u4", "2.9.15", "1.8", "", "dev", "3"] {
        assert!(!at_least(older, MINIMUM_HAPROXY), "{older:?}");
    }
}

/// A binary reporting 2.6 (a stand-in script: what matters is the message)
/// is refused with the version found, the minimum and how to get one.
#[test]
fn an_old_haproxy_is_refused_with_the_way_to_a_new_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = dir.path().join("haproxy");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'HAProxy version 2.6.12-1+deb12u4 2025/06/03 - https://haproxy.org/'\n",
    )
    .expect("write");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let error = Validator::new(fake.clone())
        .check_minimum()
        .expect_err("2.6 is too old");
    let message = error.to_string();
    for needle in [
        "2.6.12-1+deb12u4",
        "older than the 3.0",
        "make setup",
        "HAPTIC_HAPROXY",
    ] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
}

use std::sync::Arc;

use super::*;

/// HAProxy 3.0.11's start-up alerts for a QUIC port someone held, as the
/// agent passes them on after a failed reload (`[/path]` is the agent's
/// bundle directory).
const ADDRESS_IN_USE: &str = "HAProxy's master could not start a worker from bundle b1; HAProxy said:
[NOTICE]   (6669) : haproxy version is 3.0.11-1+deb13u5
[ALERT]    (6669) : Binding [/var/lib/haptic/bundles/b1/haproxy.cfg:3] for frontend https: protocol quic4: cannot bind socket (Address already in use) for [0.0.0.0:443].
[ALERT]    (6669) : [haproxy.main()] Some protocols failed to start their listeners! Exiting.";

fn origins() -> LineOrigins {
    LineOrigins {
        by_library: vec![(1..2, Arc::from("base")), (2..4, Arc::from("ingress"))],
        secret: Vec::new(),
    }
}

#[test]
fn a_start_up_alert_about_a_line_names_the_library_that_wrote_it() {
    let config = "global\nfrontend https\n    bind quic4@:443 ssl crt certs/ alpn h3\n";
    let blamed = blame_start_up_failure(config, &origins(), ADDRESS_IN_USE);
    assert!(blamed.starts_with(ADDRESS_IN_USE), "{blamed}");
    assert!(
        blamed.contains(
            "(line 3: `bind quic4@:443 ssl crt certs/ alpn h3`, written by library `ingress`)"
        ),
        "{blamed}"
    );
    // The summary alert names no line of the configuration.
    assert_eq!(blamed.matches("written by library").count(), 1, "{blamed}");
}

#[test]
fn a_report_without_a_line_is_kept_as_it_is() {
    let report = "no HAProxy worker reported bundle b1 within 10s of the reload";
    assert_eq!(
        blame_start_up_failure("global\n", &origins(), report),
        report
    );
}

#[test]
fn a_secret_line_is_named_but_not_shown() {
    let config = "global\nfrontend https\n    bind quic4@:443 ssl crt certs/ alpn h3\n";
    let mut origins = origins();
    // One range: line 3 alone.
    origins.secret = std::iter::once(3..4).collect();
    let blamed = blame_start_up_failure(config, &origins, ADDRESS_IN_USE);
    assert!(blamed.contains("(line 3: `bind <redacted>`"), "{blamed}");
    assert!(!blamed.contains("certs/ alpn"), "{blamed}");
}

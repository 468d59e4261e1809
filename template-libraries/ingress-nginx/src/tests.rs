//! The docs table (`docs/ingress-nginx.md`) and the library agree: every
//! annotation the table lists is one the library knows (it gives a verdict
//! other than "unknown"), and the ones the table says are never applied are
//! the library's snippets.

use crate::catalogue::SNIPPETS;
use crate::policy::{Annotations, Policy};
use crate::report::Status;

const DOCS: &str = include_str!("../../../docs/ingress-nginx.md");

/// (annotation, status column) of every table row.
fn table() -> Vec<(String, String)> {
    DOCS.lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some((name.to_owned(), cells.next()?.to_owned()))
        })
        .collect()
}

fn verdict(annotation: &str) -> Status {
    let key = format!("nginx.ingress.kubernetes.io/{annotation}");
    // A value no parser accepts: a known annotation then answers invalid
    // or not honoured, an unknown one "does not know".
    let value = "\u{1}".to_owned();
    let pairs = [(key, value)];
    let mut a = Annotations::new(
        pairs.iter().map(|(k, v)| (k, v)),
        "nginx.ingress.kubernetes.io",
    );
    let _ = Policy::read(&mut a, &["/"], "ns");
    a.finish()
        .into_iter()
        .find(|f| f.annotation == annotation)
        .map(|f| f.status)
        .unwrap_or_else(|| panic!("{annotation}: no verdict"))
}

#[test]
fn the_docs_table_lists_only_annotations_the_library_knows() {
    let rows = table();
    assert!(
        rows.len() >= 120,
        "the table covers ingress-nginx ({} rows)",
        rows.len()
    );
    for (annotation, status) in &rows {
        if let Status::NotHonoured(why) = verdict(annotation) {
            assert!(
                !why.contains("does not know"),
                "{annotation} is in the docs but unknown to the library"
            );
        }
        assert_eq!(
            status == "never applied",
            SNIPPETS.contains(&annotation.as_str()),
            "{annotation}: the docs say {status:?}"
        );
    }
}

#[test]
fn every_annotation_the_library_applies_is_in_the_table() {
    let rows: Vec<String> = table().into_iter().map(|(name, _)| name).collect();
    for applied in [
        "rewrite-target",
        "use-regex",
        "app-root",
        "permanent-redirect",
        "permanent-redirect-code",
        "temporal-redirect",
        "temporal-redirect-code",
        "from-to-www-redirect",
        "ssl-redirect",
        "force-ssl-redirect",
        "whitelist-source-range",
        "allowlist-source-range",
        "denylist-source-range",
        "limit-rps",
        "limit-rpm",
        "limit-connections",
        "limit-whitelist",
        "proxy-body-size",
        "proxy-read-timeout",
        "proxy-send-timeout",
        "x-forwarded-prefix",
        "upstream-vhost",
        "server-alias",
        "canary",
        "canary-weight",
        "canary-weight-total",
        "canary-by-header",
        "canary-by-header-value",
        "canary-by-header-pattern",
        "canary-by-cookie",
        "affinity",
        "affinity-mode",
        "session-cookie-name",
        "session-cookie-path",
        "session-cookie-max-age",
        "session-cookie-expires",
        "session-cookie-samesite",
        "session-cookie-secure",
        "session-cookie-domain",
        "session-cookie-change-on-failure",
        "upstream-hash-by",
        "load-balance",
        "backend-protocol",
        "proxy-ssl-secret",
        "proxy-ssl-verify",
        "proxy-ssl-verify-depth",
        "proxy-ssl-name",
        "proxy-ssl-server-name",
        "proxy-ssl-protocols",
        "proxy-ssl-ciphers",
        "auth-tls-secret",
        "auth-tls-verify-client",
        "auth-tls-verify-depth",
        "auth-tls-error-page",
        "auth-tls-pass-certificate-to-upstream",
        "auth-tls-match-cn",
    ] {
        assert!(
            rows.iter().any(|r| r == applied),
            "{applied} is missing from docs/ingress-nginx.md"
        );
    }
}

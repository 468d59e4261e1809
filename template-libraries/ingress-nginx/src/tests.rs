//! The docs table (`docs/ingress-nginx.md`) and the library agree: every
//! annotation the table lists is one the library knows (it gives a verdict
//! other than "unknown"), and the ones the table says are never applied are
//! the library's snippets.

use crate::annotations::Annotations;
use crate::catalogue::SNIPPETS;
use crate::policy::Policy;
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
    let _ = Policy::read(&mut a, &["/"], "ns", false);
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
        "proxy-cookie-domain",
        "proxy-cookie-path",
        "proxy-redirect-from",
        "proxy-redirect-to",
    ] {
        assert!(
            rows.iter().any(|r| r == applied),
            "{applied} is missing from docs/ingress-nginx.md"
        );
    }
}

/// The annotation names `catalogue::not_honoured` matches, read from its
/// source: the match arms are the list, so the test cannot drift from it.
fn catalogue_names() -> Vec<String> {
    let source = include_str!("catalogue.rs");
    let body = source
        .split("pub fn not_honoured")
        .nth(1)
        .and_then(|rest| rest.split("_ => return None").next())
        .expect("catalogue.rs has not_honoured with a `_ => return None` arm");
    // A line of patterns: quoted annotation names joined by `|`, perhaps
    // followed by `=>`; a reason string has spaces and is no name.
    let is_name = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    body.lines()
        .filter_map(|line| {
            let patterns = line.split("=>").next()?.trim().trim_start_matches('|');
            let names: Option<Vec<String>> = patterns
                .split('|')
                .map(|p| {
                    let name = p.trim().strip_prefix('"')?.strip_suffix('"')?;
                    is_name(name).then(|| name.to_owned())
                })
                .collect();
            names
        })
        .flatten()
        .collect()
}

/// A catalogue entry is the reason of an annotation the policy does not
/// read; one the policy reads has its own verdict, and the entry is stale
/// (a reason no report can give, and a claim in the code that is false).
#[test]
fn the_catalogue_lists_only_annotations_the_policy_does_not_read() {
    let names = catalogue_names();
    // A floor that catches a parse of catalogue.rs gone wrong (it held 63
    // names before auth-url was honoured, 49 after, 44 once satisfy and
    // enable-global-auth were).
    assert!(names.len() >= 40, "read {} catalogue names", names.len());
    let stale: Vec<&String> = names
        .iter()
        .filter(|name| {
            let why = crate::catalogue::not_honoured(name)
                .unwrap_or_else(|| panic!("{name}: read from the catalogue but not matched by it"));
            verdict(name) != Status::NotHonoured(why.to_owned())
        })
        .collect();
    assert!(
        stale.is_empty(),
        "the policy reads these, so their catalogue entries are stale (remove them): {stale:?}"
    );
}

//! Hostnames as the Gateway API matches them: an exact name, or a wildcard
//! `*.example.com` that matches any name ending in `.example.com` (one
//! label or more, never `example.com` itself), both case-insensitive.

use std::cmp::Reverse;

/// `a` and `b` (each a listener's or a route's hostname) both match this
/// name set: the more specific of the two when one covers the other,
/// `None` when no request could match both.
pub fn intersect(a: &str, b: &str) -> Option<String> {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    match (a.strip_prefix('*'), b.strip_prefix('*')) {
        (None, None) => (a == b).then_some(a),
        (Some(suffix), None) => covers(suffix, &b).then_some(b),
        (None, Some(suffix)) => covers(suffix, &a).then_some(a),
        (Some(sa), Some(sb)) => {
            if sa.ends_with(sb) {
                Some(a)
            } else if sb.ends_with(sa) {
                Some(b)
            } else {
                None
            }
        }
    }
}

/// A wildcard's `.example.com` covers `name` (a longer name ending in it).
fn covers(suffix: &str, name: &str) -> bool {
    name.len() > suffix.len() && name.ends_with(suffix)
}

/// The hostnames a route serves on a listener: the intersection of the
/// route's `hostnames` with the listener's `hostname`. `Some(vec![])` means
/// any host (neither names one); `None` means no hostname intersects and
/// the route does not attach to that listener.
pub fn effective(listener: Option<&str>, route: &[String]) -> Option<Vec<String>> {
    match (listener, route.is_empty()) {
        (None, true) => Some(Vec::new()),
        (None, false) => Some(route.iter().map(|h| h.to_ascii_lowercase()).collect()),
        (Some(l), true) => Some(vec![l.to_ascii_lowercase()]),
        (Some(l), false) => {
            let mut hosts: Vec<String> = route.iter().filter_map(|h| intersect(l, h)).collect();
            hosts.sort();
            hosts.dedup();
            (!hosts.is_empty()).then_some(hosts)
        }
    }
}

/// Sort key putting the most specific hostname first: exact names, then
/// wildcards by length (longest first), then "any host".
pub fn specificity(host: Option<&str>) -> (u8, Reverse<usize>) {
    match host {
        Some(h) if !h.starts_with('*') => (0, Reverse(h.len())),
        Some(h) => (1, Reverse(h.len())),
        None => (2, Reverse(0)),
    }
}

/// The HAProxy condition matching `host` against `txn.gw_host` (the
/// request's host, lowercased, without its port).
pub fn condition(host: &str) -> String {
    match host.strip_prefix('*') {
        Some(suffix) => format!("{{ var(txn.gw_host) -m end {suffix} }}"),
        None => format!("{{ var(txn.gw_host) -m str {host} }}"),
    }
}

/// A hostname the library will write into the configuration: what the API
/// server's validation allows (an optional `*.` and DNS labels), so nothing
/// unvalidated (offline input) becomes config words.
pub fn is_valid(host: &str) -> bool {
    let name = host.strip_prefix("*.").unwrap_or(host);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersections_follow_the_spec() {
        assert_eq!(
            intersect("a.example.com", "A.example.com").as_deref(),
            Some("a.example.com")
        );
        assert_eq!(
            intersect("*.example.com", "a.b.example.com").as_deref(),
            Some("a.b.example.com")
        );
        assert_eq!(intersect("*.example.com", "example.com"), None);
        assert_eq!(
            intersect("*.example.com", "*.b.example.com").as_deref(),
            Some("*.b.example.com")
        );
        assert_eq!(
            intersect("*.b.example.com", "*.example.com").as_deref(),
            Some("*.b.example.com")
        );
        assert_eq!(intersect("*.example.com", "*.example.net"), None);
        assert_eq!(intersect("a.example.com", "b.example.com"), None);
    }

    #[test]
    fn effective_hostnames_of_a_route_on_a_listener() {
        let route = vec!["a.example.com".to_owned(), "b.example.net".to_owned()];
        assert_eq!(effective(None, &[]), Some(vec![]));
        assert_eq!(
            effective(Some("*.example.com"), &[]),
            Some(vec!["*.example.com".to_owned()])
        );
        assert_eq!(
            effective(Some("*.example.com"), &route),
            Some(vec!["a.example.com".to_owned()])
        );
        assert_eq!(effective(Some("*.example.org"), &route), None);
    }

    #[test]
    fn only_dns_names_are_written() {
        assert!(is_valid("a.example.com") && is_valid("*.example.com"));
        assert!(!is_valid("a b") && !is_valid("*") && !is_valid("a..b") && !is_valid("a}b"));
    }
}

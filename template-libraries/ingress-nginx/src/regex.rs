//! Regex paths (`use-regex`, `rewrite-target`) and rewrite targets, checked
//! before they reach HAProxy.
//!
//! ingress-nginx writes such a path as `location ~* "^<path>"`: matched
//! case-insensitively from the start of the URI path, not anchored at its
//! end. HAProxy compiles regexes with PCRE2; a pattern is accepted here only
//! when `regex-syntax` (the parser of Rust's `regex` crate, whose syntax is
//! the common ground of PCRE2 and RE2, the dialect nginx users write for)
//! parses it and it holds nothing a map key or a quoted config word cannot
//! carry. Lookaround and backreferences, which PCRE2 has and `regex-syntax`
//! refuses, are therefore reported invalid rather than guessed at;
//! `haproxy -c` compiles what is accepted, with the real PCRE2, before any
//! render is deployed.

use crate::invalid;
use crate::parse::Invalid;

/// A path regex as written in the Ingress, checked; its leading `^` (which
/// ingress-nginx adds itself) removed. The result is a group, `(?:...)`,
/// so an alternation in it (`/a|victim\.com/`) stays behind the host and
/// the `^` its callers put in front: bare, the second branch of a `|` was
/// matched anywhere in any host's key.
pub fn path_regex(path: &str) -> Result<String, Invalid> {
    let body = path.strip_prefix('^').unwrap_or(path);
    if !body.starts_with('/') {
        return Err(invalid!("{path:?} does not start with /"));
    }
    if body
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '\'' | '"' | '#'))
    {
        return Err(invalid!(
            "{path:?} holds whitespace, a quote or #, which haptic does not write into a regex"
        ));
    }
    checked(path, body)?;
    Ok(format!("(?:{body})"))
}

/// `regex` checked by the SDK's regex writer (what PCRE2, HAProxy's
/// engine, accepts with the meaning Rust gives it).
fn checked(what: &str, regex: &str) -> Result<(), Invalid> {
    haptic_sdk::haproxy::check_regex(regex)
        .map(|_| ())
        .map_err(|error| invalid!("{what:?} {error}; haptic does not write it"))
}

/// A regex matched against a header value (`canary-by-header-pattern`):
/// checked as a path regex is, without the leading `/`; anchored at both
/// ends, as nginx's whole-value match.
pub fn pattern(value: &str) -> Result<String, Invalid> {
    if value.is_empty()
        || value.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '\'' | '"' | '#' | '{' | '}')
        })
    {
        return Err(invalid!(
            "{value:?} holds whitespace, a quote, a brace or #, which haptic does not write into a regex"
        ));
    }
    checked(value, value)?;
    Ok(format!("^(?:{value})$"))
}

/// A regex searched for anywhere in a value, as nginx's `~` does
/// (`auth-tls-match-cn`): checked as [`pattern`] is, not anchored.
pub fn search_pattern(value: &str) -> Result<String, Invalid> {
    pattern(value).map(|_| value.to_owned())
}

/// The number of capture groups of a checked regex.
pub fn capture_groups(regex: &str) -> usize {
    regex_syntax::Parser::new()
        .parse(regex)
        .map(|hir| hir.properties().explicit_captures_len())
        .unwrap_or(0)
}

/// A rewrite target (`/$2`, `/api/$1`) as HAProxy's `replace-path`
/// replacement: `$n` becomes `\n`, `%` is doubled (the replacement is a
/// log-format string). `$` must be followed by a group number no larger
/// than `groups`; nginx variables (`$host`) are refused.
pub fn rewrite_target(target: &str, groups: usize) -> Result<String, Invalid> {
    if target.is_empty()
        || target
            .bytes()
            .any(|b| !b.is_ascii_graphic() || matches!(b, b'\'' | b'"' | b'\\'))
    {
        return Err(invalid!(
            "{target:?} is not a path haptic can write (no spaces, quotes or backslashes)"
        ));
    }
    let mut out = String::new();
    let mut chars = target.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    digits.push(d);
                    chars.next();
                }
                let group: usize = digits.parse().map_err(|_| {
                    format!("{target:?}: only capture groups ($1, $2, ...) can follow $; nginx variables are not available")
                })?;
                if group > groups.min(9) {
                    return Err(invalid!(
                        "{target:?} names group ${group}, but the path has {groups} capture group(s)"
                    ));
                }
                out.push('\\');
                out.push_str(&digits);
            }
            '%' => out.push_str("%%"),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// A map_reg key for `host` (empty: any host) and a checked path regex:
/// the host literally, then the path case-insensitively, as nginx's `~*`.
/// Keys are matched against `<host><path>` (or the path alone for no
/// host), so one map serves all three lookups.
pub fn route_key(host: &str, regex: &str) -> String {
    let mut key = String::from("^");
    key.push_str(&haptic_sdk::haproxy::regex_escape(host));
    key.push_str("(?i)");
    key.push_str(regex);
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rewrite_example_of_ingress_nginx() {
        let regex = path_regex("/something(/|$)(.*)").unwrap();
        assert_eq!(capture_groups(&regex), 2);
        assert_eq!(rewrite_target("/$2", 2), Ok("/\\2".into()));
        assert_eq!(
            route_key("rewrite.bar.com", &regex),
            "^rewrite\\.bar\\.com(?i)(?:/something(/|$)(.*))"
        );
        assert_eq!(route_key("", &path_regex("/x").unwrap()), "^(?i)(?:/x)");
    }

    #[test]
    fn bad_regexes_and_targets_are_refused() {
        assert!(path_regex("/a(").is_err());
        assert!(path_regex("/(?=x)").is_err(), "lookaround");
        assert!(path_regex("/a b").is_err());
        assert!(path_regex("a").is_err());
        assert!(path_regex("/a'").is_err());
        assert!(rewrite_target("/$3", 2).is_err());
        assert!(rewrite_target("/$host", 2).is_err());
        assert!(rewrite_target("/a b", 0).is_err());
        assert_eq!(rewrite_target("/100%", 0), Ok("/100%%".into()));
    }
}

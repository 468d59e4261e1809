//! HAProxy-safe names and escaping, shared by the bundled libraries so that
//! a backend one library defines is the backend another one routes to.

/// Replaces every character HAProxy does not allow in a proxy or server
/// name (anything outside `[A-Za-z0-9_.:-]`) with `_`. An empty input
/// becomes `_`.
pub fn sanitize(name: &str) -> String {
    if name.is_empty() {
        return "_".to_owned();
    }
    name.chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '_' | '.' | ':' | '-' => c,
            _ => '_',
        })
        .collect()
}

/// The backend of one Service port: `<namespace>_<service>_<port>` with the
/// Service port *number* (`default_web_8080`), sanitized.
///
/// Namespaces and Service names are DNS labels (`[a-z0-9-]`), so these names
/// never contain a `.`: fixed backends of the bundled libraries use a dot
/// (`haptic.not-found`) and cannot collide with them.
pub fn backend_name(namespace: &str, service: &str, port: i32) -> String {
    sanitize(&format!("{namespace}_{service}_{port}"))
}

/// One HAProxy configuration word in single quotes, so nothing in `text`
/// (spaces, `#`, `$`, `"`, backslashes) is interpreted. A single quote
/// closes the quoting, adds an escaped quote and reopens it. Control
/// characters cannot be represented on a config line and become spaces.
///
/// For text the library chose; text a user wrote goes through
/// [`crate::haproxy::argument`], which refuses what this would change.
pub fn quote(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    // No length limit here: the caller quotes a word it controls.
    crate::haproxy::single_quoted(&spaced)
}

/// One `key value` line of a map file, or `None` when HAProxy would not
/// read it back as this one entry: see [`crate::haproxy::map_line`] (the
/// key has no whitespace, control character or `#`, the value is one line,
/// the whole fits HAProxy's map line buffer).
pub fn map_line(key: &str, value: &str) -> Option<String> {
    crate::haproxy::map_line(key, value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_follow_the_shared_rule() {
        assert_eq!(backend_name("default", "web", 8080), "default_web_8080");
        assert_eq!(backend_name("team-a", "api-v2", 80), "team-a_api-v2_80");
        assert_eq!(backend_name("weird ns", "a/b", 1), "weird_ns_a_b_1");
    }

    #[test]
    fn sanitize_keeps_only_allowed_characters() {
        assert_eq!(sanitize("web-7d4b9.abc:1_x"), "web-7d4b9.abc:1_x");
        assert_eq!(sanitize("a b\"c'd#é"), "a_b_c_d__");
        assert_eq!(sanitize(""), "_");
    }

    #[test]
    fn quote_protects_every_special_character() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's $HOME \"x\" # \\"), r#"'it'\''s $HOME "x" # \'"#);
        assert_eq!(quote("a\nb"), "'a b'");
    }

    #[test]
    fn map_lines_reject_unusable_keys() {
        assert_eq!(
            map_line("a.example.com/x", "be").as_deref(),
            Some("a.example.com/x be\n")
        );
        assert_eq!(map_line("a b", "be"), None);
        assert_eq!(map_line("", "be"), None);
        assert_eq!(map_line("#x", "be"), None);
        assert_eq!(map_line("/a#b", "be"), None);
        assert_eq!(map_line("k", "a\nb"), None);
    }
}

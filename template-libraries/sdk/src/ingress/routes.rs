//! The routing table: Ingress paths turned into HAProxy map files and the
//! lookups that give them Kubernetes semantics. The bundled `ingress`
//! library and `ingress-nginx` route with it, each under its own map names
//! ([`RouteMaps`]): one routing engine for every Ingress library.
//!
//! Keys are `<host><path>`: the exact host (`a.example.com/foo`), the
//! wildcard (`*.example.com/foo`) or no host (`/foo`).
//!
//! - the exact map (`maps/ingress-exact.map` for `ingress`, `map_str`, whole-key match): `Exact` paths,
//!   and each `Prefix` path itself (`/foo` for Prefix `/foo`).
//! - the prefix map (`maps/ingress-prefix.map`, `map_beg`, longest matching prefix): each
//!   `Prefix` path with a trailing slash (`/foo/`), so `/foo` matches
//!   `/foo`, `/foo/` and `/foo/bar` but not `/foobar` (element-wise, as the
//!   Ingress spec says). A trailing slash on the Ingress path is ignored.
//!   `/` becomes `/` and matches everything.
//!
//! The frontend looks up, in order, the exact host, then the wildcard form
//! of the request's host (its first label replaced by `*`: a wildcard
//! matches exactly one label), then the path alone; in each, the exact map
//! first (a whole-path hit is the longest possible match, and an `Exact`
//! path wins over a `Prefix` one of the same length), then the prefix map.
//! So a rule without host serves any request no host rule claims.
//! `ImplementationSpecific` is treated as `Prefix`. When two Ingresses claim
//! the same host and path, the older one (creationTimestamp, then
//! namespace/name) wins.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::names::map_line;

/// The map files one library routes with, paths relative to haproxy.cfg.
/// A file has one owner, so each Ingress library has its own set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteMaps {
    /// `<key> <backend>`, whole-key match.
    pub exact: &'static str,
    /// `<key>/ <backend>`, longest prefix match.
    pub prefix: &'static str,
    /// The exact map's keys valued with the Ingress (`namespace/name`) that
    /// owns the route: where `txn.haptic_ingress` comes from.
    pub exact_routes: &'static str,
    /// The prefix map's keys valued with the Ingress.
    pub prefix_routes: &'static str,
}

/// The bundled `ingress` library's maps (public names, see
/// [`crate::extending`]).
pub const INGRESS_MAPS: RouteMaps = RouteMaps {
    exact: "maps/ingress-exact.map",
    prefix: "maps/ingress-prefix.map",
    exact_routes: "maps/ingress-exact-routes.map",
    prefix_routes: "maps/ingress-prefix-routes.map",
};

/// How a path matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Exact,
    Prefix,
}

impl PathKind {
    /// `Exact`, `Prefix`, or `ImplementationSpecific` (treated as Prefix);
    /// `None` for anything else (the API server refuses it; another source
    /// may not).
    pub fn from_path_type(path_type: &str) -> Option<Self> {
        match path_type {
            "Exact" => Some(Self::Exact),
            "Prefix" | "ImplementationSpecific" => Some(Self::Prefix),
            _ => None,
        }
    }
}

/// The two maps being built. Insert routes in precedence order (oldest
/// Ingress first): the first claim of a key wins, except that an `Exact`
/// path always wins over a `Prefix` path's whole-path entry.
#[derive(Debug, Default)]
pub struct RouteTable {
    /// key -> (kind, backend, Ingress `namespace/name`).
    exact: BTreeMap<String, (PathKind, String, String)>,
    /// key -> (backend, Ingress).
    prefix: BTreeMap<String, (String, String)>,
}

/// Why a route was not added.
#[derive(Debug, PartialEq, Eq)]
pub enum Skipped {
    /// The path does not start with `/`.
    NotAbsolute,
    /// Host or path holds whitespace, a control character or `#`, or its
    /// map line would pass HAProxy's map line buffer.
    Unmappable,
}

impl RouteTable {
    /// Adds one path of one rule of Ingress `ingress` (`namespace/name`).
    /// `host` is empty for a rule without host.
    pub fn add(
        &mut self,
        host: &str,
        path: &str,
        kind: PathKind,
        backend: &str,
        ingress: &str,
    ) -> Result<(), Skipped> {
        let path = if path.is_empty() { "/" } else { path };
        if !path.starts_with('/') {
            return Err(Skipped::NotAbsolute);
        }
        let host = host.to_ascii_lowercase();
        // The Ingress's name goes into the routes maps: a name no API
        // server would accept (a newline, offline) must not add map lines.
        let key = format!("{host}{path}");
        let kubernetes_name = ingress
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'/'));
        // Both maps of a key must take it: a key one map reads whole and
        // the other splits would route by one and name another Ingress.
        let key_of_prefix = format!("{host}{}/", path.trim_end_matches('/'));
        let fits = [&key, &key_of_prefix]
            .iter()
            .all(|k| map_line(k, backend).is_some() && map_line(k, ingress).is_some());
        if !fits || !kubernetes_name {
            return Err(Skipped::Unmappable);
        }
        match kind {
            PathKind::Exact => {
                let key = format!("{host}{path}");
                match self.exact.get(&key) {
                    Some((PathKind::Exact, _, _)) => {}
                    _ => {
                        self.exact.insert(
                            key,
                            (PathKind::Exact, backend.to_owned(), ingress.to_owned()),
                        );
                    }
                }
            }
            PathKind::Prefix => {
                let trimmed = path.trim_end_matches('/');
                if !trimmed.is_empty() {
                    self.exact
                        .entry(format!("{host}{trimmed}"))
                        .or_insert_with(|| {
                            (PathKind::Prefix, backend.to_owned(), ingress.to_owned())
                        });
                }
                self.prefix
                    .entry(format!("{host}{trimmed}/"))
                    .or_insert_with(|| (backend.to_owned(), ingress.to_owned()));
            }
        }
        Ok(())
    }

    /// The backend a request would reach, mirroring the frontend's lookups
    /// (for tests and for reasoning about the maps).
    pub fn lookup(&self, host: &str, path: &str) -> Option<&str> {
        let host = host.split(':').next().unwrap_or("").to_ascii_lowercase();
        for key_host in [host.clone(), wildcard_of(&host), String::new()] {
            let key = format!("{key_host}{path}");
            if let Some((_, backend, _)) = self.exact.get(&key) {
                return Some(backend);
            }
            let longest = self
                .prefix
                .iter()
                .filter(|(prefix, _)| key.starts_with(prefix.as_str()))
                .max_by_key(|(prefix, _)| prefix.len());
            if let Some((_, (backend, _))) = longest {
                return Some(backend);
            }
        }
        None
    }

    /// The exact map's content, sorted by key.
    pub fn exact_map(&self) -> String {
        let mut out = String::from("# haptic ingress: <host><path> -> backend, whole-key match\n");
        for (key, (_, backend, _)) in &self.exact {
            let _ = writeln!(out, "{key} {backend}");
        }
        out
    }

    /// The exact routes map: the exact map's keys, each with its Ingress.
    pub fn exact_routes_map(&self) -> String {
        let mut out =
            String::from("# haptic ingress: <host><path> -> namespace/name of the Ingress\n");
        for (key, (_, _, ingress)) in &self.exact {
            let _ = writeln!(out, "{key} {ingress}");
        }
        out
    }

    /// The prefix routes map: the prefix map's keys, each with its Ingress.
    pub fn prefix_routes_map(&self) -> String {
        let mut out =
            String::from("# haptic ingress: <host><path>/ -> namespace/name of the Ingress\n");
        for (key, (_, ingress)) in &self.prefix {
            let _ = writeln!(out, "{key} {ingress}");
        }
        out
    }

    /// The prefix map's content, sorted by key.
    pub fn prefix_map(&self) -> String {
        let mut out =
            String::from("# haptic ingress: <host><path>/ -> backend, longest prefix match\n");
        for (key, (backend, _)) in &self.prefix {
            let _ = writeln!(out, "{key} {backend}");
        }
        out
    }

    /// Number of map entries.
    pub fn len(&self) -> usize {
        self.exact.len() + self.prefix.len()
    }

    /// True without any route.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What HAProxy's `regsub(^[^.]+,*)` makes of a host: its first label
/// replaced by `*` (`a.example.com` -> `*.example.com`).
pub fn wildcard_of(host: &str) -> String {
    match host.find('.') {
        Some(0) => host.to_owned(),
        Some(dot) => format!("*{}", &host[dot..]),
        None if host.is_empty() => String::new(),
        None => "*".to_owned(),
    }
}

/// The `frontend http` lines that set the lookup keys, then
/// `txn.haptic_ingress`: the Ingress whose route the request takes, found
/// by the routing's lookups in the routing's order (the first that finds
/// one sets it; a request no Ingress route matches leaves it unset).
pub fn request_rules(maps: &RouteMaps) -> String {
    let mut out = host_variable_rules();
    out.push_str(&ingress_variable_rules(maps));
    out
}

/// The four lines that set `txn.haptic_host`, `txn.haptic_wildcard` and the
/// two lookup keys. Every Ingress library emits them (setting a variable
/// twice to the same value costs nothing), so each works alone.
pub fn host_variable_rules() -> String {
    [
        "    http-request set-var(txn.haptic_host) req.hdr(host),field(1,:),lower",
        "    http-request set-var(txn.haptic_wildcard) var(txn.haptic_host),regsub(^[^.]+,*)",
        "    http-request set-var-fmt(txn.haptic_key_host) \"%[var(txn.haptic_host)]%[path]\"",
        "    http-request set-var-fmt(txn.haptic_key_wildcard) \"%[var(txn.haptic_wildcard)]%[path]\"",
        "",
    ]
    .join("\n")
}

/// The keys the routing looks up, in precedence order: the request's host
/// and path, its wildcard form, the path alone.
pub const LOOKUP_SAMPLES: [&str; 3] = [
    "var(txn.haptic_key_host)",
    "var(txn.haptic_key_wildcard)",
    "path",
];

/// The map lookups (`<sample>,<converter>(<map>)`) of the routing, in
/// precedence order: for each of [`LOOKUP_SAMPLES`], the `regex` map
/// (`map_reg`, for a library with regex paths), then `exact`, then
/// `prefix`. A key's own lookups all come before the next key's: a route
/// without host (the path alone) never wins over a route of the request's
/// host, whatever kind of path either has.
pub fn lookups(regex: Option<&str>, exact: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for sample in LOOKUP_SAMPLES {
        if let Some(regex) = regex {
            out.push(format!("{sample},map_reg({regex})"));
        }
        out.push(format!("{sample},map_str({exact})"));
        out.push(format!("{sample},map_beg({prefix})"));
    }
    out
}

/// The lines that set `txn.haptic_ingress` from `maps`' routes maps (and
/// the regex routes map `regex`, if any), unless an earlier lookup set it.
pub fn ingress_variable_rules_with(maps: &RouteMaps, regex: Option<&str>) -> String {
    let mut out = String::new();
    for lookup in lookups(regex, maps.exact_routes, maps.prefix_routes) {
        let _ = writeln!(
            out,
            "    http-request set-var(txn.haptic_ingress) {lookup} if !{{ var(txn.haptic_ingress) -m found }}"
        );
    }
    out
}

/// The six lines that set `txn.haptic_ingress` from `maps`' routes maps,
/// unless an earlier lookup set it.
pub fn ingress_variable_rules(maps: &RouteMaps) -> String {
    ingress_variable_rules_with(maps, None)
}

/// The `frontend http` lines that route by the maps (and the regex map
/// `regex`, if any), in precedence order.
pub fn routing_rules_with(maps: &RouteMaps, regex: Option<&str>) -> String {
    let mut out = String::new();
    for lookup in lookups(regex, maps.exact, maps.prefix) {
        let _ = writeln!(
            out,
            "    use_backend %[{lookup}] if {{ {lookup} -m found }}"
        );
    }
    out
}

/// The `frontend http` lines that route by the maps, in precedence order.
pub fn routing_rules(maps: &RouteMaps) -> String {
    routing_rules_with(maps, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(routes: &[(&str, &str, PathKind, &str)]) -> RouteTable {
        let mut t = RouteTable::default();
        for (host, path, kind, backend) in routes {
            t.add(host, path, *kind, backend, "ns/ingress").unwrap();
        }
        t
    }

    use PathKind::{Exact, Prefix};

    #[test]
    fn prefix_matches_element_wise() {
        let t = table(&[("", "/foo", Prefix, "foo")]);
        for path in ["/foo", "/foo/", "/foo/bar"] {
            assert_eq!(t.lookup("x", path), Some("foo"), "{path}");
        }
        assert_eq!(t.lookup("x", "/foobar"), None);
        assert_eq!(t.lookup("x", "/"), None);
    }

    #[test]
    fn trailing_slash_of_a_prefix_is_ignored() {
        let t = table(&[("", "/foo/", Prefix, "foo")]);
        assert_eq!(t.lookup("x", "/foo"), Some("foo"));
        assert_eq!(t.lookup("x", "/foo/bar"), Some("foo"));
        assert_eq!(t.lookup("x", "/foobar"), None);
    }

    #[test]
    fn root_prefix_matches_everything() {
        let t = table(&[("", "/", Prefix, "root")]);
        assert_eq!(t.lookup("x", "/"), Some("root"));
        assert_eq!(t.lookup("x", "/anything/at/all"), Some("root"));
    }

    #[test]
    fn longest_prefix_wins() {
        let t = table(&[
            ("", "/", Prefix, "root"),
            ("", "/foo", Prefix, "foo"),
            ("", "/foo/bar", Prefix, "bar"),
        ]);
        assert_eq!(t.lookup("x", "/foo/bar/baz"), Some("bar"));
        assert_eq!(t.lookup("x", "/foo/baz"), Some("foo"));
        assert_eq!(t.lookup("x", "/foo/barbaz"), Some("foo"));
        assert_eq!(t.lookup("x", "/other"), Some("root"));
    }

    #[test]
    fn exact_matches_only_the_whole_path_and_beats_prefix_of_equal_length() {
        let t = table(&[("", "/foo", Prefix, "prefix"), ("", "/foo", Exact, "exact")]);
        assert_eq!(t.lookup("x", "/foo"), Some("exact"));
        assert_eq!(t.lookup("x", "/foo/"), Some("prefix"));
        let t = table(&[("", "/foo", Exact, "exact")]);
        assert_eq!(t.lookup("x", "/foo/"), None);
        assert_eq!(t.lookup("x", "/FOO"), None, "paths are case-sensitive");
    }

    #[test]
    fn longer_prefix_beats_shorter_exact_only_when_it_matches() {
        let t = table(&[
            ("", "/foo", Exact, "exact"),
            ("", "/foo/bar", Prefix, "bar"),
        ]);
        assert_eq!(t.lookup("x", "/foo"), Some("exact"));
        assert_eq!(t.lookup("x", "/foo/bar/x"), Some("bar"));
    }

    #[test]
    fn hosts_exact_then_wildcard_then_none() {
        let t = table(&[
            ("a.example.com", "/", Prefix, "a"),
            ("*.example.com", "/", Prefix, "wild"),
            ("", "/", Prefix, "any"),
        ]);
        assert_eq!(t.lookup("A.Example.com:8080", "/x"), Some("a"));
        assert_eq!(t.lookup("b.example.com", "/x"), Some("wild"));
        assert_eq!(
            t.lookup("c.b.example.com", "/x"),
            Some("any"),
            "a wildcard matches one label"
        );
        assert_eq!(t.lookup("example.com", "/x"), Some("any"));
        assert_eq!(t.lookup("", "/x"), Some("any"));
    }

    #[test]
    fn a_host_rule_that_does_not_match_the_path_falls_through() {
        let t = table(&[
            ("a.example.com", "/api", Prefix, "api"),
            ("", "/", Prefix, "any"),
        ]);
        assert_eq!(t.lookup("a.example.com", "/api/v1"), Some("api"));
        assert_eq!(t.lookup("a.example.com", "/web"), Some("any"));
    }

    #[test]
    fn the_first_claim_wins() {
        let t = table(&[
            ("", "/foo", Prefix, "older"),
            ("", "/foo", Prefix, "newer"),
            ("", "/x", Exact, "older-x"),
            ("", "/x", Exact, "newer-x"),
        ]);
        assert_eq!(t.lookup("h", "/foo/a"), Some("older"));
        assert_eq!(t.lookup("h", "/x"), Some("older-x"));
    }

    #[test]
    fn unusable_paths_are_skipped() {
        let mut t = RouteTable::default();
        assert_eq!(
            t.add("", "foo", Prefix, "b", "ns/i"),
            Err(Skipped::NotAbsolute)
        );
        assert_eq!(
            t.add("", "/a b", Prefix, "b", "ns/i"),
            Err(Skipped::Unmappable)
        );
        assert_eq!(
            t.add("", "/a", Prefix, "b", "ns/a\nglobal"),
            Err(Skipped::Unmappable),
            "the Ingress's name is mapped too"
        );
        assert!(t.is_empty());
    }

    #[test]
    fn wildcard_of_mirrors_the_regsub() {
        assert_eq!(wildcard_of("a.example.com"), "*.example.com");
        assert_eq!(wildcard_of("localhost"), "*");
        assert_eq!(wildcard_of(""), "");
    }

    #[test]
    fn maps_are_sorted_key_value_lines() {
        let t = table(&[
            ("b.example.com", "/y", Exact, "be1"),
            ("a.example.com", "/x", Prefix, "be2"),
        ]);
        assert_eq!(
            t.exact_map().lines().skip(1).collect::<Vec<_>>(),
            ["a.example.com/x be2", "b.example.com/y be1"]
        );
        assert_eq!(
            t.prefix_map().lines().skip(1).collect::<Vec<_>>(),
            ["a.example.com/x/ be2"]
        );
    }
}

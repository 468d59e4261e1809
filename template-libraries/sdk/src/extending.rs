//! Extension points: where a library's lines land, and what the bundled
//! libraries provide for others to build on.
//!
//! This page is a contract, versioned like the WIT (see [Versioning](#versioning)). The
//! order it states is checked by rendering the real libraries
//! (`host/tests/extension_points.rs` and the merge tests in haptic's
//! repository), not only by reading code.
//!
//! # Where snippet lines land
//!
//! Every section has exactly one owner, the library that emits it with
//! [`Output::section`](crate::Output::section). Any library may add lines to
//! it with [`Output::snippet`](crate::Output::snippet). The merged section is:
//!
//! 1. its header line (`frontend http`);
//! 2. the owner's body, as the owner wrote it: always first, whatever the
//!    priorities (nothing can go before `base`'s `bind`);
//! 3. the snippets, ordered by
//!    1. [`Slot`](crate::Slot), in this order: `Acls`, `RequestRules`,
//!       `ResponseRules`, `Routing`, `Other`;
//!    2. priority, ascending: **lower is earlier**; negative priorities come
//!       before the bundled libraries' `0`, and equal ones fall through to
//!    3. library merge order: [`Info::order`](crate::Info::order) ascending,
//!       then the library's name;
//!    4. the item key (derived from the snippet's target, slot, priority and
//!       lines, unless [`Output::snippet_keyed`](crate::Output::snippet_keyed)
//!       names one).
//!
//! # How a body is written
//!
//! A section body and a snippet are text, one HAProxy line per line; the
//! same rules hold for both:
//!
//! - **Indentation**: each line becomes a line of the section, indented by
//!   four spaces unless it already starts with whitespace (write
//!   `"    http-request ...\n"` or `"http-request ...\n"`: the same line).
//!   Trailing whitespace is trimmed; blank lines are dropped, so a body
//!   cannot hold an empty line to separate its parts.
//! - **Line breaks**: a line ends at `\n`; every value you put into a line
//!   must hold none (an annotation value with a newline would start a
//!   directive of its own), which is why the SDK's writers
//!   ([`haproxy::argument`](crate::haproxy::argument),
//!   [`names::quote`](crate::names::quote)) refuse or escape them.
//! - **Comments**: HAProxy reads `#` outside quotes as the start of a
//!   comment to the end of the line, so a whole-line comment
//!   (`# why this rule`) is kept as written, and a `#` in an unquoted value
//!   cuts the line there (its `if` condition with it): quote values that may
//!   hold one. The host's policy checks read the words as HAProxy does, so
//!   a comment is never judged, and text after one is never run.
//! - **One owner**: the body comes first and is the owner's alone; add to
//!   another library's section only through snippets.
//!
//! HAProxy evaluates `http-request` rules in file order and the
//! `use_backend` rules only after all of them, first match wins; the slots
//! keep each kind of rule together so HAProxy never warns about a rule placed
//! after a `use_backend`. With the bundled libraries, a custom library's
//! request rule at priority `-200` and its routing rule at `500`, the
//! `frontend http` section reads:
//!
//! ```text
//! frontend http
//!     bind :8080                                      base, the body
//!     default_backend haptic.not-found                base, the body
//!     http-request deny if ...                        yours: RequestRules, -200
//!     http-request set-var(txn.haptic_host) ...       ingress: RequestRules, 0 (four set-var lines, then
//!                                                      six that set txn.haptic_ingress)
//!     http-request set-header X-Forwarded-Proto ...   ingress: RequestRules, 5 (TLS: two lines)
//!     http-request set-var(txn.haptic_tls) ...        ingress: RequestRules, 10 (txn.haptic_tls and
//!                                                      the HTTPS redirect)
//!     http-response set-header alt-svc ...            ingress: ResponseRules, 0 (HTTP/3 served)
//!     use_backend %[var(txn.haptic_key_host),map_str(maps/ingress-exact.map)] if ...
//!                                                     ingress: Routing, 0 (six map lookups)
//!     use_backend yours if ...                        yours: Routing, 500
//!     use_backend default_web_80                      ingress: Routing, 1000 (spec.defaultBackend)
//!     bind :8443 ssl crt certs/default.pem crt-list ... ingress: Other, 0 (with TLS enabled)
//!     bind quic4@:8443 ssl crt ... alpn h3            ingress: Other, 0 (HTTP/3, where the HAProxy
//!                                                      serves QUIC: haptic_sdk::http3)
//! ```
//!
//! So a request rule that reads a `txn.haptic_*` variable needs a priority
//! **above 0** (at `-200` it runs before `ingress` sets them); a response
//! rule (`ResponseRules`) may read them at any priority. A routing rule
//! below `0` wins over every Ingress route; at `1` to `999` it catches what
//! no Ingress rule matched, before an Ingress default backend does; and
//! `default_backend haptic.not-found` takes the rest.
//!
//! # Options on a backend's servers
//!
//! `kubernetes-backends` writes a backend's `server` lines as a snippet of
//! that backend at [`Slot::Other`](crate::Slot::Other), priority
//! [`SERVERS_PRIORITY`]. HAProxy applies a `default-server` line to the
//! `server` lines after it, so a library that routes to a backend and needs
//! its servers to speak TLS or HTTP/2 (`ssl verify none`, `proto h2`) calls
//! [`server_options`]: one `default-server` line before the servers. The
//! server lines themselves do not change, so endpoint readiness flips stay
//! runtime changes. Two libraries asking options of one backend both apply,
//! the later line winning a keyword both set; a library should ask one set
//! per backend and warn about its own conflicts.
//!
//! # What the bundled libraries provide
//!
//! | name | kind | provided by | what it is |
//! | --- | --- | --- | --- |
//! | `global`, `defaults` (unnamed) | sections | `base` | add lines with [`Slot::Other`](crate::Slot::Other) |
//! | `http` | frontend | `base` | where routing hangs: body `bind <templateLibraries.base.frontends.http.bind>` and `default_backend haptic.not-found` |
//! | `healthz`, `stats` (off by default) | frontends | `base` | probes and HAProxy's stats page |
//! | `haptic.not-found` | backend | `base` | answers 404; the `http` frontend's default |
//! | `haptic.unavailable` | backend | `ingress` | answers 503; where a route to a missing Service port goes |
//! | `<namespace>_<service>_<port>` | backends | `kubernetes-backends` | one per Service port, named by [`names::backend_name`](crate::names::backend_name); servers named after their pods |
//! | `txn.haptic_host` | variable | `ingress` | the request's `Host` header without its port, lowercased (`shop.example.com`) |
//! | `txn.haptic_wildcard` | variable | `ingress` | `txn.haptic_host` with its first label replaced by `*` (`*.example.com`) |
//! | `txn.haptic_key_host` | variable | `ingress` | `txn.haptic_host` followed by the path (`shop.example.com/cart`): the key of the Ingress maps |
//! | `txn.haptic_key_wildcard` | variable | `ingress` | `txn.haptic_wildcard` followed by the path |
//! | `txn.haptic_ingress` | variable | `ingress` | the Ingress (`namespace/name`) whose path the request matched, by the routing's own lookups and order; unset when none did. Write an ACL on it with [`ingress::matched_ingress_acl`](crate::ingress::matched_ingress_acl) (added with contract 0.3.0) |
//! | `txn.haptic_tls` | variable | `ingress` | for a request routed to an Ingress (`txn.haptic_ingress`) that lists the request's host in its `spec.tls`, `redirect` or `no-redirect`; unset otherwise (set at priority 10) |
//! | `maps/ingress-exact.map`, `maps/ingress-prefix.map` | files | `ingress` | `<key> <backend>` per Ingress path (read them; a file has one owner) |
//! | `maps/ingress-exact-routes.map`, `maps/ingress-prefix-routes.map` | files | `ingress` | the same keys, `<key> <namespace>/<name>` of the Ingress: where `txn.haptic_ingress` comes from |
//! | `maps/ingress-tls.map`, `certs/ingress.crt-list`, `certs/default.pem` | files | `ingress` | TLS hosts, the SNI list, the default certificate (`certs/default.pem` and the HTTPS bind come from the first library of [`ingress::tls::HTTPS_LIBRARIES`](crate::ingress::tls::HTTPS_LIBRARIES) serving TLS) |
//! | `servers:<backend>` snippets | backend lines | `kubernetes-backends` | the `server` lines, at `Other` priority [`SERVERS_PRIORITY`]; options on them with [`server_options`] |
//!
//! The variables are set for every request in the frontend `ingress` routes
//! in (`templateLibraries.ingress.frontend`, `http` by default) whenever the
//! `ingress` library is enabled, even before any Ingress exists. A snippet
//! into a section that no enabled library defines fails the render, naming
//! both (enable `base`, or define the section yourself).
//!
//! # Shared HAProxy resources
//!
//! Some things HAProxy has few of, and two libraries using the same one on
//! the same request would silently share or lose it. The SDK keeps the
//! registry of which bundled library holds which ([`SHARED_RESOURCES`]):
//! read it before you take one, and prefer one no bundled library holds.
//!
//! - **Stick counters** (`track-sc0` to `track-sc2`, `sc_*(<n>)` fetches):
//!   HAProxy 2.6 tracks at most three per request ([`STICK_COUNTERS`]),
//!   and a counter already tracked on a request ignores a second
//!   `track-sc<n>`. `ingress-nginx` holds all three, on the requests of an
//!   Ingress with a `limit-rps` (sc0), `limit-rpm` (sc1) or
//!   `limit-connections` (sc2) annotation only ([`StickCounter`]). A library
//!   that tracks a counter must do so only on requests those Ingresses do
//!   not route (`!{ var(txn.haptic_ingress) -m found }` or its own frontend),
//!   or accept that the first tracker wins; the lowest counter no enabled
//!   bundled library uses is free for everything else.
//! - **Stick tables** are named sections, so their names are the resource:
//!   `ingress-nginx.limit.*` are `ingress-nginx`'s; name yours after your
//!   library.
//! - **Variables**: `txn.haptic_*` are `ingress`'s, `txn.ingress_nginx_*`
//!   `ingress-nginx`'s and `txn.gw_*` `gateway-api`'s (read the ones in the
//!   table above, never set them); name yours `txn.<your library>_*`.
//!
//! # Versioning
//!
//! The slots, the order rule and the names in the table are public: a
//! released haptic keeps them, as it keeps a released WIT version. Renaming
//! or removing one is a breaking change of the library that provides it, made
//! only in a new major version and announced in `template-libraries/README.md`;
//! adding one is not. Anything not listed (other variables, ACL names, the
//! lines of a section's body, the order of the maps' entries) may change in
//! any release; do not match on it.

/// The priority of `kubernetes-backends`' `server` lines in their backend's
/// [`Slot::Other`](crate::Slot::Other): after every other library's lines
/// there (keep yours below it).
pub const SERVERS_PRIORITY: i32 = 1_000_000;

/// The priority [`server_options`] writes at.
pub const SERVER_OPTIONS_PRIORITY: i32 = 900_000;

/// Asks for `options` (HAProxy server keywords, one line, such as
/// `ssl verify none alpn h2`) on every server of `backend` (a
/// `kubernetes-backends` backend, [`crate::names::backend_name`]): a
/// `default-server` line before its server lines. `key` names the item
/// (unique in your library, e.g. `server-options:<backend>`). Options with
/// a line break are refused.
pub fn server_options(
    out: &mut crate::Output,
    key: impl Into<String>,
    backend: &str,
    options: &str,
) -> crate::Result<()> {
    if options.contains(['\n', '\r']) {
        return Err(crate::Error::msg(format!(
            "server options for backend {backend} must be one line"
        )));
    }
    out.snippet_keyed(
        key,
        crate::SectionKind::Backend,
        backend,
        crate::Slot::Other,
        SERVER_OPTIONS_PRIORITY,
        format!("    default-server {options}\n"),
    )
}

/// HAProxy 2.6's stick counters per request: `sc0` to `sc2` (its
/// `MAX_SESS_STKCTR`; `tune.stick-counters` arrived in 2.8).
pub const STICK_COUNTERS: u8 = 3;

/// One of HAProxy's stick counters (`sc0` .. `sc2`): what a
/// `track-sc<n>` action and the `sc_*(<n>)` fetches name. Only the ones
/// HAProxy 2.6 has can be made ([`StickCounter::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StickCounter(u8);

impl StickCounter {
    pub const SC0: Self = Self(0);
    pub const SC1: Self = Self(1);
    pub const SC2: Self = Self(2);

    /// Counter `index`, if HAProxy 2.6 has it.
    pub const fn new(index: u8) -> Option<Self> {
        if index < STICK_COUNTERS {
            Some(Self(index))
        } else {
            None
        }
    }

    /// Its number, as in `track-sc<n>` and `sc_http_req_rate(<n>)`.
    pub const fn index(self) -> u8 {
        self.0
    }
}

/// A shared HAProxy resource a bundled library holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedResource {
    StickCounter(StickCounter),
}

/// Who holds a [`SharedResource`], and on which requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    pub resource: SharedResource,
    /// The bundled library's name ([`Info::name`](crate::Info)).
    pub library: &'static str,
    /// On which requests it holds the resource, and what for.
    pub scope: &'static str,
}

/// The registry of the shared resources the bundled libraries hold (see
/// [Shared HAProxy resources](#shared-haproxy-resources)). A bundled
/// library takes only what it is listed for here; its tests check that.
pub const SHARED_RESOURCES: &[Holding] = &[
    Holding {
        resource: SharedResource::StickCounter(StickCounter::SC0),
        library: "ingress-nginx",
        scope: "requests of an Ingress with limit-rps: requests per second per client address",
    },
    Holding {
        resource: SharedResource::StickCounter(StickCounter::SC1),
        library: "ingress-nginx",
        scope: "requests of an Ingress with limit-rpm: requests per minute per client address",
    },
    Holding {
        resource: SharedResource::StickCounter(StickCounter::SC2),
        library: "ingress-nginx",
        scope: "requests of an Ingress with limit-connections: connections per client address",
    },
];

/// The stick counters `library` holds, in order.
pub fn stick_counters_of(library: &str) -> impl Iterator<Item = StickCounter> + '_ {
    SHARED_RESOURCES
        .iter()
        .filter(move |holding| holding.library == library)
        .map(|holding| match holding.resource {
            SharedResource::StickCounter(counter) => counter,
        })
}

/// The stick counters no bundled library holds.
pub fn free_stick_counters() -> impl Iterator<Item = StickCounter> {
    (0..STICK_COUNTERS)
        .filter_map(StickCounter::new)
        .filter(|counter| {
            !SHARED_RESOURCES
                .iter()
                .any(|holding| holding.resource == SharedResource::StickCounter(*counter))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_resource_is_held_twice() {
        for (i, a) in SHARED_RESOURCES.iter().enumerate() {
            for b in &SHARED_RESOURCES[i + 1..] {
                assert_ne!(a.resource, b.resource, "{a:?} and {b:?}");
            }
        }
    }

    #[test]
    fn only_haproxys_counters_exist() {
        assert_eq!(StickCounter::new(2), Some(StickCounter::SC2));
        assert_eq!(StickCounter::new(STICK_COUNTERS), None);
        // ingress-nginx holds all three today: none is free.
        assert_eq!(free_stick_counters().count(), 0);
        assert_eq!(
            stick_counters_of("ingress-nginx").collect::<Vec<_>>(),
            [StickCounter::SC0, StickCounter::SC1, StickCounter::SC2]
        );
    }
}

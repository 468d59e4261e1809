//! The agent beside every HAProxy as a per-request extension (contract
//! 0.4.0's `agent` import): external authentication and request mirroring
//! through HAProxy's SPOE filter, answered by `haptic agent` (docs/spoa.md
//! is the contract this module writes to).
//!
//! A library describes each route's auth service as an [`ExternalAuth`]
//! profile and writes three things, all through [`AuthEngine`] (mirrors:
//! [`Mirror`] profiles through [`MirrorEngine`], the same way):
//!
//! - once, the engine: the SPOE file, the `mode tcp` backend to the agent at
//!   [`spoa_address`], and in each frontend the filter and the rules acting
//!   on the verdict ([`AuthEngine::frontend`]);
//! - per route, a rule naming its profile when the route's ACL matches
//!   ([`AuthEngine::route`]);
//! - the profiles, as the bundle file the agent reads
//!   ([`AuthEngine::profiles`]).
//!
//! No user text reaches `haproxy.cfg` except header names, which
//! [`ExternalAuth::new`] checks are HTTP tokens of letters, digits and `-`:
//! URLs, sign-in pages and cache keys travel as data the agent reads.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::{Output, Result, SectionKind, Slot};

/// The message the agent answers for external authentication.
pub const AUTH_MESSAGE: &str = "haptic-auth";
/// Most `Set-Cookie` headers of the auth service passed to the client.
pub const MAX_COOKIES: usize = 4;
/// The request rules' priority: after source ranges (10) and basic auth
/// (20), as nginx's access phase runs `auth_request` after `allow`/`deny`.
pub const ROUTE_PRIORITY: i32 = 25;
const VERDICT_PRIORITY: i32 = 26;

/// Where HAProxy reaches the agent's SPOP listener, in HAProxy's address
/// syntax (`127.0.0.1:12346`). The operator chooses it; outside
/// WebAssembly (native tests) it is the host's default.
pub fn spoa_address() -> String {
    #[cfg(target_arch = "wasm32")]
    {
        crate::wit::haptic::template::agent::spoa_address()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        "127.0.0.1:12346".to_owned()
    }
}

/// One route's auth service, as the agent reads it (docs/spoa.md). Text
/// fields may use the nginx variables docs/spoa.md lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalAuth {
    pub url: String,
    pub method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signin: Option<String>,
    pub signin_redirect_param: String,
    pub response_headers: Vec<String>,
    pub request_headers: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<String>,
    pub always_set_cookie: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<AuthCache>,
    pub timeout_ms: u64,
    /// How the agent turns the auth service's answer into the verdict; it
    /// must be the engine's ([`AuthEngine::answering`]).
    #[serde(skip_serializing_if = "Answers::is_ingress_nginx")]
    pub answers: Answers,
    /// The client's headers sent to the auth service: every one when
    /// `None` (ingress-nginx), else only these names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_headers: Option<Vec<String>>,
    /// The sub-request's Host header (nginx variables allowed); `None`: the
    /// URL's authority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Keep the connection to the auth service for the next sub-request
    /// (the agent's pool); `false` closes it after each.
    #[serde(skip_serializing_if = "is_true")]
    pub keep_alive: bool,
}

fn is_true(value: &bool) -> bool {
    *value
}

/// How the agent turns an auth service's answer into the verdict, and the
/// rules [`AuthEngine`] writes for it (docs/spoa.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answers {
    /// ingress-nginx's `auth_request`: 2xx passes, 401 (or a 302 to the
    /// sign-in page) and 403 are answered, anything else is 500.
    #[default]
    IngressNginx,
    /// The Gateway API's `ExternalAuth` (HTTP): 200 passes; any other
    /// status is handed to the client (those in [`PASSED_STATUSES`] and
    /// the redirects with a `Location`; others 403), with the service's
    /// `WWW-Authenticate` and cookies.
    PassThrough,
}

impl Answers {
    fn is_ingress_nginx(&self) -> bool {
        *self == Self::IngressNginx
    }
}

/// The denials a pass-through engine answers with the auth service's own
/// status; any other is answered 403 (HAProxy's `return` takes a fixed
/// status, so each is a rule).
pub const PASSED_STATUSES: &[u16] = &[
    400, 401, 402, 403, 404, 405, 407, 409, 410, 413, 422, 429, 500, 502, 503, 504,
];

/// The redirects a pass-through engine answers with the auth service's
/// status and `Location` (those HAProxy's `redirect` takes).
pub const PASSED_REDIRECTS: &[u16] = &[301, 302, 303, 307, 308];

/// Answers kept by the agent: requests whose `key` expands the same share
/// the answer for `seconds` when its status is one of `statuses`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthCache {
    pub key: String,
    pub statuses: Vec<u16>,
    pub seconds: u64,
}

impl ExternalAuth {
    /// A profile asking `url` (`http://` or `https://`) with `GET`, no
    /// sign-in page, no headers copied, 5 s to answer.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            method: "GET".to_owned(),
            signin: None,
            signin_redirect_param: "rd".to_owned(),
            response_headers: Vec::new(),
            request_headers: BTreeMap::new(),
            request_redirect: None,
            always_set_cookie: false,
            cache: None,
            timeout_ms: 5_000,
            answers: Answers::IngressNginx,
            client_headers: None,
            host: None,
            keep_alive: true,
        }
    }
}

/// The nginx variables the agent expands in a profile's text (docs/spoa.md),
/// besides `$http_<header>`, `$cookie_<name>` and `$arg_<name>`.
pub const VARIABLES: &[&str] = &[
    "$escaped_request_uri",
    "$pass_access_scheme",
    "$request_method",
    "$remote_addr",
    "$request_uri",
    "$http_host",
    "$scheme",
    "$host",
    "$uri",
    "$args",
];

/// Checks that every `$name` in `text` is one the agent expands, and that
/// `text` holds no control character; the error names the first that is not.
pub fn check_variables(text: &str) -> std::result::Result<(), String> {
    if text.chars().any(char::is_control) {
        return Err("it holds a control character".to_owned());
    }
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        rest = &rest[at..];
        let end = rest[1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(rest.len(), |end| end + 1);
        let name = &rest[..end];
        let known = VARIABLES.contains(&name)
            || ["$http_", "$cookie_", "$arg_"]
                .iter()
                .any(|prefix| name.len() > prefix.len() && name.starts_with(prefix));
        if !known {
            return Err(format!(
                "{name} is not a variable haptic's agent expands ({}, $http_<header>, $cookie_<name>, $arg_<name>)",
                VARIABLES.join(", ")
            ));
        }
        rest = &rest[end..];
    }
    Ok(())
}

/// Whether `name` may be written into the configuration as a header name:
/// letters, digits and `-` (every header auth services return; HAProxy
/// would read `#`, quotes or spaces as syntax).
pub fn is_safe_header_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The variable (without the engine's prefix) a copied header comes back
/// in: `X-Auth-Request-User` -> `hdr_x_auth_request_user`.
pub fn header_variable(name: &str) -> String {
    let mut variable = String::from("hdr_");
    variable.extend(name.chars().map(|c| match c.to_ascii_lowercase() {
        c if c.is_ascii_alphanumeric() => c,
        _ => '_',
    }));
    variable
}

/// One library's external authentication engine: its SPOE file, backend,
/// variables and profile file are named after `name` (the library), so two
/// libraries never share one.
#[derive(Debug, Clone)]
pub struct AuthEngine {
    name: String,
    prefix: String,
    answers: Answers,
}

impl AuthEngine {
    /// The engine of library `library` (`ingress-nginx`), answering as
    /// ingress-nginx does.
    pub fn new(library: &str) -> Self {
        let (name, prefix) = engine_names(library, "auth");
        Self {
            name,
            prefix,
            answers: Answers::IngressNginx,
        }
    }

    /// The same engine answering as `answers` says; its profiles must say
    /// the same.
    pub fn answering(mut self, answers: Answers) -> Self {
        self.answers = answers;
        self
    }

    fn profile_variable(&self) -> String {
        format!("txn.{}_profile", self.prefix)
    }

    fn variable(&self, name: &str) -> String {
        format!("txn.{}.{name}", self.prefix)
    }

    fn spoe_path(&self) -> String {
        format!("{}.spoe.conf", self.name)
    }

    fn backend(&self) -> String {
        format!("{}-spoa", self.name)
    }

    /// The SPOE file and the backend to the agent, once per render.
    /// `processing_ms` bounds HAProxy's wait for a verdict: above every
    /// profile's own timeout, so the agent answers 500 first.
    pub fn engine(&self, out: &mut Output, processing_ms: u64) -> Result<()> {
        let args = format!("profile=var({}) {REQUEST_ARGS}", self.profile_variable());
        let spoe = spoe_file(&self.name, &self.prefix, processing_ms, AUTH_MESSAGE, &args);
        out.file(self.spoe_path(), spoe)?;
        agent_backend(out, &self.backend())
    }

    /// The filter and the verdict's rules in `frontend`, as snippets:
    /// [`Self::filter_line`], [`Self::verdict_rules`] and
    /// [`Self::response_rules`].
    pub fn frontend(
        &self,
        out: &mut Output,
        frontend: &str,
        headers: &BTreeSet<String>,
    ) -> Result<()> {
        let key = |what: &str| format!("{}:{what}:{frontend}", self.name);
        spoe_filter(out, key("filter"), frontend, &self.name, &self.spoe_path())?;
        out.snippet_keyed(
            key("verdict"),
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            VERDICT_PRIORITY,
            self.verdict_rules(headers),
        )?;
        out.snippet_keyed(
            key("cookies"),
            SectionKind::Frontend,
            frontend,
            Slot::ResponseRules,
            0,
            self.response_rules(),
        )
    }

    /// The engine's `filter spoe` line, for a library writing its frontend
    /// whole (it goes anywhere in the section).
    pub fn filter_line(&self) -> String {
        spoe_filter_line(&self.name, &self.spoe_path())
    }

    /// The request rules asking the agent and acting on its verdict, after
    /// every route's [`Self::route_rule`] and before any `use_backend`:
    /// ingress-nginx's answers (a redirect, 401 or 403 as the agent says,
    /// 500 when it could not say) or the auth service's own status
    /// ([`Answers::PassThrough`]); either way 500 when the profile was set
    /// and no verdict came (fails closed). Then `headers` replaced by what
    /// the auth service named (a client's own are dropped on every
    /// authenticated route).
    pub fn verdict_rules(&self, headers: &BTreeSet<String>) -> String {
        let profile = self.profile_variable();
        let status = self.variable("status");
        let location = self.variable("location");
        let asked = format!("{{ var({profile}) -m found }}");
        let mut rules = format!(
            "    http-request send-spoe-group {name} {name} if {asked}\n",
            name = self.name
        );
        let is = |code: u16| format!("{{ var({status}) -m int {code} }}");
        match self.answers {
            Answers::IngressNginx => {
                rules.push_str(&format!(
                    "    http-request redirect location %[var({location})] code 302 if {}\n\
                     \x20   http-request return status 401 if {}\n\
                     \x20   http-request return status 403 if {}\n\
                     \x20   http-request return status 500 if {asked} !{}\n",
                    is(302),
                    is(401),
                    is(403),
                    is(200),
                ));
            }
            Answers::PassThrough => {
                rules.push_str(&format!(
                    "    http-request return status 500 if {asked} !{{ var({status}) -m found }}\n"
                ));
                for code in PASSED_REDIRECTS {
                    rules.push_str(&format!(
                        "    http-request redirect location %[var({location})] code {code} if {} {{ var({location}) -m found }}\n",
                        is(*code)
                    ));
                }
                for code in PASSED_STATUSES {
                    rules.push_str(&format!(
                        "    http-request return status {code} if {}\n",
                        is(*code)
                    ));
                }
                rules.push_str(&format!(
                    "    http-request return status 403 if {asked} !{}\n",
                    is(200)
                ));
            }
        }
        for header in headers.iter().filter(|h| is_safe_header_name(h)) {
            let value = self.variable(&header_variable(header));
            rules.push_str(&format!(
                "    http-request del-header {header} if {asked}\n\
                 \x20   http-request set-header {header} %[var({value})] if {{ var({value}) -m found }}\n"
            ));
        }
        rules
    }

    /// The `http-after-response` rules (after-response, so HAProxy's own
    /// 401, 403 and redirects carry them too): the auth service's cookies,
    /// and for [`Answers::PassThrough`] its `WWW-Authenticate`.
    pub fn response_rules(&self) -> String {
        let mut rules: String = (0..MAX_COOKIES)
            .map(|n| {
                let cookie = self.variable(&format!("cookie_{n}"));
                format!(
                    "    http-after-response add-header Set-Cookie %[var({cookie})] if {{ var({cookie}) -m found }}\n"
                )
            })
            .collect();
        if self.answers == Answers::PassThrough {
            let challenge = self.variable("www_authenticate");
            rules.push_str(&format!(
                "    http-after-response set-header WWW-Authenticate %[var({challenge})] if {{ var({challenge}) -m found }}\n"
            ));
        }
        rules
    }

    /// The rule naming profile `profile` for requests `acl` matches, in
    /// `frontend`, under `key`. `profile` must be a name of letters,
    /// digits, `.`, `-` and `_` ([`crate::names::sanitize`] makes one).
    pub fn route(
        &self,
        out: &mut Output,
        key: impl Into<String>,
        frontend: &str,
        acl: &str,
        profile: &str,
    ) -> Result<()> {
        out.snippet_keyed(
            key,
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            ROUTE_PRIORITY,
            self.route_rule(acl, profile),
        )
    }

    /// [`Self::route`]'s line, for a library writing its frontend whole.
    pub fn route_rule(&self, acl: &str, profile: &str) -> String {
        format!(
            "    http-request set-var({}) str({profile}) if {acl}\n",
            self.profile_variable()
        )
    }

    /// The profiles, as the bundle file `spoa/<engine>.json` the agent reads.
    pub fn profiles(
        &self,
        out: &mut Output,
        profiles: &BTreeMap<String, ExternalAuth>,
    ) -> Result<()> {
        profile_file(out, &self.name, "auth", profiles)
    }
}

/// An engine's name (`<library>-<kind>`: its SPOE file, backend, profile
/// file) and its variables' prefix (the same with `_` for anything but
/// letters and digits).
fn engine_names(library: &str, kind: &str) -> (String, String) {
    let prefix: String = library
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    (format!("{library}-{kind}"), format!("{prefix}_{kind}"))
}

/// The bundle file `spoa/<engine>.json` the agent reads: `{"<kind>": profiles}`.
fn profile_file<T: Serialize>(
    out: &mut Output,
    engine: &str,
    kind: &str,
    profiles: &BTreeMap<String, T>,
) -> Result<()> {
    let text =
        serde_json::to_string_pretty(&BTreeMap::from([(kind, profiles)])).map_err(|error| {
            crate::Error::msg(format!("the {kind} profiles do not serialize: {error}"))
        })?;
    out.file(format!("spoa/{engine}.json"), text)
}

/// The request as every message carries it (docs/spoa.md).
const REQUEST_ARGS: &str =
    "method=method tls=ssl_fc host=req.hdr(host) pathq=pathq src=src headers=req.hdrs_bin";

/// An SPOE file: engine `name` with one group of one message, variables
/// under `prefix`, HAProxy waiting at most `processing_ms` for an answer
/// from the backend `<name>-spoa`.
fn spoe_file(name: &str, prefix: &str, processing_ms: u64, message: &str, args: &str) -> String {
    format!(
        "[{name}]\n\
         spoe-agent {name}\n\
         \x20   groups {name}\n\
         \x20   option var-prefix {prefix}\n\
         \x20   option pipelining\n\
         \x20   timeout hello 2s\n\
         \x20   timeout idle 30s\n\
         \x20   timeout processing {processing_ms}ms\n\
         \x20   use-backend {name}-spoa\n\n\
         spoe-message {message}\n\
         \x20   args {args}\n\n\
         spoe-group {name}\n\
         \x20   messages {message}\n"
    )
}

/// The `mode tcp` backend HAProxy reaches the agent's SPOP listener by.
/// The agent is health-checked over SPOP every second: while it is down,
/// a message fails at once (auth: 500, mirrors: no copy) instead of each
/// request waiting out the engine's processing timeout.
fn agent_backend(out: &mut Output, backend: &str) -> Result<()> {
    out.section(
        SectionKind::Backend,
        backend,
        format!(
            "    mode tcp\n    option spop-check\n    timeout connect 1s\n    timeout server 30s\n    server agent {} check inter 1s fall 1 rise 1\n",
            spoa_address()
        ),
    )
}

/// The SPOE filter of engine `engine` in `frontend`; its file is read from
/// the bundle HAProxy runs (`${HAPTIC_BUNDLE}`, docs/spoa.md).
fn spoe_filter(
    out: &mut Output,
    key: String,
    frontend: &str,
    engine: &str,
    path: &str,
) -> Result<()> {
    out.snippet_keyed(
        key,
        SectionKind::Frontend,
        frontend,
        Slot::Other,
        0,
        spoe_filter_line(engine, path),
    )
}

fn spoe_filter_line(engine: &str, path: &str) -> String {
    format!("    filter spoe engine {engine} config \"${{HAPTIC_BUNDLE}}/{path}\"\n")
}

/// The message the agent answers for request mirroring.
pub const MIRROR_MESSAGE: &str = "haptic-mirror";
/// The largest request body a mirror copies, in bytes: HAProxy sends a body
/// only when it holds all of it, and one SPOE frame carries it (16 KiB
/// with the headers). Requests with longer bodies are not mirrored.
pub const MIRROR_BODY_LIMIT: usize = 8_192;
/// The mirror rules' priorities: after the auth verdict (26), as nginx
/// mirrors in its content phase, after access and auth.
pub const MIRROR_ROUTE_PRIORITY: i32 = 27;
const MIRROR_PRIORITY: i32 = 28;

/// One route's mirror targets, as the agent reads them (docs/spoa.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    pub targets: Vec<MirrorTarget>,
}

/// Where one copy of each request goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MirrorTarget {
    /// `http://` or `https://`, nginx variables allowed; a URL without a
    /// path gets the original path and query.
    pub url: String,
    /// The copy's Host header (nginx variables allowed); default the URL's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Copy the request's body (up to [`MIRROR_BODY_LIMIT`]).
    pub body: bool,
    /// The share of requests copied (Gateway API's `percent` N is N/100).
    pub fraction: Fraction,
    pub timeout_ms: u64,
}

/// `numerator` requests in `denominator` (1 in 1: every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fraction {
    pub numerator: u32,
    pub denominator: u32,
}

impl MirrorTarget {
    /// Every request to `url`, with its body, 5 s for each copy.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            host: None,
            body: true,
            fraction: Fraction {
                numerator: 1,
                denominator: 1,
            },
            timeout_ms: 5_000,
        }
    }
}

/// One library's mirroring engine: its SPOE file, backend, variables and
/// profile file are named after the library, beside its [`AuthEngine`]'s.
#[derive(Debug, Clone)]
pub struct MirrorEngine {
    name: String,
    prefix: String,
}

impl MirrorEngine {
    /// The engine of library `library` (`ingress-nginx`).
    pub fn new(library: &str) -> Self {
        let (name, prefix) = engine_names(library, "mirror");
        Self { name, prefix }
    }

    fn variable(&self, what: &str) -> String {
        format!("txn.{}_{what}", self.prefix)
    }

    fn spoe_path(&self) -> String {
        format!("{}.spoe.conf", self.name)
    }

    /// The SPOE file and the backend to the agent, once per render. The
    /// agent answers at once (the copies go out after), so HAProxy waits
    /// at most 100 ms, and goes on without a copy past that.
    pub fn engine(&self, out: &mut Output) -> Result<()> {
        let args = format!(
            "profile=var({}) {REQUEST_ARGS} body=var({})",
            self.variable("profile"),
            self.variable("data")
        );
        let spoe = spoe_file(&self.name, &self.prefix, 100, MIRROR_MESSAGE, &args);
        out.file(self.spoe_path(), spoe)?;
        agent_backend(out, &format!("{}-spoa", self.name))
    }

    /// The filter and the rules sending the message in `frontend`, as
    /// snippets ([`Self::filter_line`] and [`Self::send_rules`]).
    pub fn frontend(&self, out: &mut Output, frontend: &str) -> Result<()> {
        let key = |what: &str| format!("{}:{what}:{frontend}", self.name);
        spoe_filter(out, key("filter"), frontend, &self.name, &self.spoe_path())?;
        out.snippet_keyed(
            key("send"),
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            MIRROR_PRIORITY,
            self.send_rules(),
        )
    }

    /// The SPOE filter line, for a library that writes its frontend whole.
    pub fn filter_line(&self) -> String {
        spoe_filter_line(&self.name, &self.spoe_path())
    }

    /// The rules sending the message, after every route's
    /// [`Self::route_rules`] and before any `use_backend`. A route that
    /// copies bodies waits up to 1 s for one; the message goes when HAProxy
    /// holds the whole body within [`MIRROR_BODY_LIMIT`] (else the request
    /// is not mirrored; it is served all the same).
    pub fn send_rules(&self) -> String {
        let profile = self.variable("profile");
        let body = self.variable("body");
        let length = self.variable("length");
        let send = self.variable("send");
        format!(
            "    http-request wait-for-body time 1s at-least {limit} if {{ var({body}) -m found }}\n\
             \x20   http-request set-var({length}) req.body_len if {{ var({body}) -m found }}\n\
             \x20   http-request set-var({send}) bool(true) if {{ var({profile}) -m found }} !{{ var({body}) -m found }}\n\
             \x20   http-request set-var({send}) bool(true) if {{ var({body}) -m found }} {{ req.body_size le {limit} }} {{ req.body_size,sub({length}) eq 0 }}\n\
             \x20   http-request set-var({data}) req.body if {{ var({body}) -m found }} {{ var({send}) -m bool }}\n\
             \x20   http-request send-spoe-group {name} {name} if {{ var({send}) -m bool }}\n",
            limit = MIRROR_BODY_LIMIT,
            data = self.variable("data"),
            name = self.name,
        )
    }

    /// The rules naming profile `profile` for requests `acl` matches in
    /// `frontend`, under `key`, as a snippet ([`Self::route_rules`]).
    pub fn route(
        &self,
        out: &mut Output,
        key: impl Into<String>,
        frontend: &str,
        acl: &str,
        profile: &str,
        body: bool,
    ) -> Result<()> {
        out.snippet_keyed(
            key,
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            MIRROR_ROUTE_PRIORITY,
            self.route_rules(acl, profile, body),
        )
    }

    /// The rules naming profile `profile` for requests `acl` matches;
    /// `body`: whether any of its targets copies bodies. `profile` as for
    /// [`AuthEngine::route`].
    pub fn route_rules(&self, acl: &str, profile: &str, body: bool) -> String {
        let mut rules = format!(
            "    http-request set-var({}) str({profile}) if {acl}\n",
            self.variable("profile")
        );
        if body {
            rules.push_str(&format!(
                "    http-request set-var({}) bool(true) if {acl}\n",
                self.variable("body")
            ));
        }
        rules
    }

    /// The profiles, as the bundle file `spoa/<engine>.json` the agent reads.
    pub fn profiles(&self, out: &mut Output, profiles: &BTreeMap<String, Mirror>) -> Result<()> {
        profile_file(out, &self.name, "mirror", profiles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_that_are_syntax_are_refused() {
        assert!(is_safe_header_name("X-Auth-Request-User"));
        for bad in ["", "X User", "X#", "X\"", "X'y", "a\nb", "é"] {
            assert!(!is_safe_header_name(bad), "{bad:?}");
        }
        assert_eq!(
            header_variable("X-Auth-Request-User"),
            "hdr_x_auth_request_user"
        );
    }

    #[test]
    fn only_variables_the_agent_expands_pass() {
        assert!(check_variables("https://$host/start?rd=$escaped_request_uri").is_ok());
        assert!(check_variables("$http_authorization$cookie_session$arg_x").is_ok());
        assert!(check_variables("$server_name").is_err());
        assert!(check_variables("$http_").is_err());
        assert!(check_variables("a\nb").is_err());
    }

    /// Each denial status the agent may pass through has its own rule
    /// before the catch-all 403, and a missing verdict is 500 first: an
    /// agent that is down never lets a request through.
    #[test]
    fn a_pass_through_engine_answers_the_services_status_and_fails_closed() {
        let headers = BTreeSet::from(["X-User".to_owned()]);
        let passing = AuthEngine::new("gateway-api").answering(Answers::PassThrough);
        let rules = passing.verdict_rules(&headers);
        let at = |needle: &str| {
            rules
                .find(needle)
                .unwrap_or_else(|| panic!("{needle:?} not in\n{rules}"))
        };
        let missing = at(
            "return status 500 if { var(txn.gateway_api_auth_profile) -m found } !{ var(txn.gateway_api_auth.status) -m found }",
        );
        let too_many = at("return status 429 if { var(txn.gateway_api_auth.status) -m int 429 }");
        let see_other = at("code 303 if { var(txn.gateway_api_auth.status) -m int 303 }");
        let rest = at(
            "return status 403 if { var(txn.gateway_api_auth_profile) -m found } !{ var(txn.gateway_api_auth.status) -m int 200 }",
        );
        assert!(missing < see_other && see_other < too_many && too_many < rest);
        assert!(
            passing
                .response_rules()
                .contains("set-header WWW-Authenticate")
        );
        let nginx = AuthEngine::new("ingress-nginx");
        assert!(!nginx.verdict_rules(&headers).contains("status 429"));
        assert!(!nginx.response_rules().contains("WWW-Authenticate"));
    }
}

//! The agent beside every HAProxy as a per-request extension (contract
//! 0.4.0's `agent` import): external authentication through HAProxy's SPOE
//! filter, answered by `haptic agent` (docs/spoa.md is the contract this
//! module writes to).
//!
//! A library describes each route's auth service as an [`ExternalAuth`]
//! profile and writes three things, all through [`AuthEngine`]:
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
}

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
}

impl AuthEngine {
    /// The engine of library `library` (`ingress-nginx`).
    pub fn new(library: &str) -> Self {
        let prefix = library
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect::<String>();
        Self {
            name: format!("{library}-auth"),
            prefix: format!("{prefix}_auth"),
        }
    }

    fn profile_variable(&self) -> String {
        format!("txn.{}_profile", self.prefix)
    }

    fn variable(&self, name: &str) -> String {
        format!("txn.{}.{name}", self.prefix)
    }

    fn spoe_path(&self) -> String {
        format!("spoe/{}.conf", self.name)
    }

    fn backend(&self) -> String {
        format!("{}-spoa", self.name)
    }

    /// The SPOE file and the backend to the agent, once per render.
    /// `processing_ms` bounds HAProxy's wait for a verdict: above every
    /// profile's own timeout, so the agent answers 500 first.
    pub fn engine(&self, out: &mut Output, processing_ms: u64) -> Result<()> {
        let spoe = format!(
            "[{name}]\n\
             spoe-agent {name}\n\
             \x20   groups {name}\n\
             \x20   option var-prefix {prefix}\n\
             \x20   option pipelining\n\
             \x20   timeout hello 2s\n\
             \x20   timeout idle 30s\n\
             \x20   timeout processing {processing_ms}ms\n\
             \x20   use-backend {backend}\n\n\
             spoe-message {AUTH_MESSAGE}\n\
             \x20   args profile=var({profile}) method=method tls=ssl_fc host=req.hdr(host) pathq=pathq src=src headers=req.hdrs_bin\n\n\
             spoe-group {name}\n\
             \x20   messages {AUTH_MESSAGE}\n",
            name = self.name,
            prefix = self.prefix,
            backend = self.backend(),
            profile = self.profile_variable(),
        );
        out.file(self.spoe_path(), spoe)?;
        out.section(
            SectionKind::Backend,
            self.backend(),
            format!(
                "    mode tcp\n    timeout connect 1s\n    timeout server 30s\n    server agent {}\n",
                spoa_address()
            ),
        )
    }

    /// The filter and the verdict's rules in `frontend`: a redirect, 401 or
    /// 403 as the agent says, 500 when it could not say (fails closed),
    /// `headers` replaced by what the auth service named (a client's own
    /// are dropped on every authenticated route), and its cookies.
    pub fn frontend(
        &self,
        out: &mut Output,
        frontend: &str,
        headers: &BTreeSet<String>,
    ) -> Result<()> {
        let key = |what: &str| format!("{}:{what}:{frontend}", self.name);
        out.snippet_keyed(
            key("filter"),
            SectionKind::Frontend,
            frontend,
            Slot::Other,
            0,
            format!(
                "    filter spoe engine {} config \"${{HAPTIC_BUNDLE}}/{}\"\n",
                self.name,
                self.spoe_path()
            ),
        )?;
        let profile = self.profile_variable();
        let status = self.variable("status");
        let mut rules = format!(
            "    http-request send-spoe-group {name} {name} if {{ var({profile}) -m found }}\n\
             \x20   http-request redirect location %[var({location})] code 302 if {{ var({status}) -m int 302 }}\n\
             \x20   http-request return status 401 if {{ var({status}) -m int 401 }}\n\
             \x20   http-request return status 403 if {{ var({status}) -m int 403 }}\n\
             \x20   http-request return status 500 if {{ var({profile}) -m found }} !{{ var({status}) -m int 200 }}\n",
            name = self.name,
            location = self.variable("location"),
        );
        for header in headers.iter().filter(|h| is_safe_header_name(h)) {
            let value = self.variable(&header_variable(header));
            rules.push_str(&format!(
                "    http-request del-header {header} if {{ var({profile}) -m found }}\n\
                 \x20   http-request set-header {header} %[var({value})] if {{ var({value}) -m found }}\n"
            ));
        }
        out.snippet_keyed(
            key("verdict"),
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            VERDICT_PRIORITY,
            rules,
        )?;
        let cookies: String = (0..MAX_COOKIES)
            .map(|n| {
                let cookie = self.variable(&format!("cookie_{n}"));
                format!(
                    "    http-after-response add-header Set-Cookie %[var({cookie})] if {{ var({cookie}) -m found }}\n"
                )
            })
            .collect();
        out.snippet_keyed(
            key("cookies"),
            SectionKind::Frontend,
            frontend,
            Slot::ResponseRules,
            0,
            cookies,
        )
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
            format!(
                "    http-request set-var({}) str({profile}) if {acl}\n",
                self.profile_variable()
            ),
        )
    }

    /// The profiles, as the bundle file `spoa/<engine>.json` the agent reads.
    pub fn profiles(
        &self,
        out: &mut Output,
        profiles: &BTreeMap<String, ExternalAuth>,
    ) -> Result<()> {
        #[derive(Serialize)]
        struct File<'a> {
            auth: &'a BTreeMap<String, ExternalAuth>,
        }
        let text = serde_json::to_string_pretty(&File { auth: profiles }).map_err(|error| {
            crate::Error::msg(format!("the auth profiles do not serialize: {error}"))
        })?;
        out.file(format!("spoa/{}.json", self.name), text)
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
}

//! HTTPRoute filters as HAProxy actions, each conditioned on the rule the
//! request matched (`{ var(txn.gw_rule) -m str <rule> }`).
//!
//! - `RequestHeaderModifier`: `http-request set-header` / `add-header` /
//!   `del-header`; `ResponseHeaderModifier` the `http-response` ones.
//! - `RequestRedirect`: `http-request redirect` (`prefix` when the path is
//!   kept, so the query string is kept too; `location` otherwise).
//! - `URLRewrite`: `http-request set-path` and the `Host` header.
//! - `RequestMirror`: accepted here; its copies are the agent's
//!   ([`crate::mirrors`]).
//! - `ExternalAuth`: accepted here; the agent asks the auth service
//!   ([`crate::external_auth`]).
//!
//! Values are HAProxy log-format strings: `%` is doubled and the whole
//! value single-quoted, so nothing a route author writes is interpreted.

use haptic_sdk::names::quote;

use crate::api::{HeaderModifier, HttpFilter, PathModifier, RequestRedirect, UrlRewrite};
use crate::hostnames;
use crate::listeners::Protocol;

/// Why a rule's filters (or its timeouts) cannot be served: the text of its
/// route's `Accepted`/`ResolvedRefs` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError(pub String);

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FilterError {}

impl From<&str> for FilterError {
    fn from(why: &str) -> Self {
        Self(why.to_owned())
    }
}

/// The lines one rule adds to its frontend.
#[derive(Debug, Default, Clone)]
pub struct RuleActions {
    /// `http-request` rules (without the rule condition, added by the caller).
    pub request: Vec<Action>,
    /// `http-response` rules.
    pub response: Vec<Action>,
    /// The rule answers with a redirect: no backend.
    pub redirects: bool,
}

/// One action and an extra condition (ANDed with the rule's).
#[derive(Debug, Clone)]
pub struct Action {
    pub line: String,
    pub condition: String,
}

impl Action {
    fn new(line: String) -> Self {
        Self {
            line,
            condition: String::new(),
        }
    }
}

/// Where the rule is served: what a redirect keeps by default.
#[derive(Debug, Clone, Copy)]
pub struct Listener {
    pub protocol: Protocol,
    /// The Gateway's listener port (what clients connect to), not the port
    /// HAProxy binds.
    pub port: i32,
}

/// The filter types this library implements.
pub const SUPPORTED: &[&str] = &[
    "RequestHeaderModifier",
    "ResponseHeaderModifier",
    "RequestRedirect",
    "URLRewrite",
    "RequestMirror",
    "ExternalAuth",
];

/// Compiles a rule's filters; `prefix` is the path prefix the match used
/// (for `ReplacePrefixMatch`). An unsupported filter is an error naming it.
pub fn compile(
    filters: &[HttpFilter],
    listener: Listener,
    prefix: Option<&str>,
) -> Result<RuleActions, FilterError> {
    let mut actions = RuleActions::default();
    for filter in filters {
        match filter.type_.as_str() {
            "RequestHeaderModifier" => {
                let m = filter
                    .request_header_modifier
                    .as_ref()
                    .ok_or(FilterError::from(
                        "RequestHeaderModifier without requestHeaderModifier",
                    ))?;
                header_actions("http-request", m, &mut actions.request)?;
            }
            "ResponseHeaderModifier" => {
                let m = filter
                    .response_header_modifier
                    .as_ref()
                    .ok_or(FilterError::from(
                        "ResponseHeaderModifier without responseHeaderModifier",
                    ))?;
                header_actions("http-response", m, &mut actions.response)?;
            }
            "RequestRedirect" => {
                let r = filter
                    .request_redirect
                    .as_ref()
                    .ok_or(FilterError::from("RequestRedirect without requestRedirect"))?;
                redirect(r, listener, prefix, &mut actions.request)?;
                actions.redirects = true;
            }
            "URLRewrite" => {
                let r = filter
                    .url_rewrite
                    .as_ref()
                    .ok_or(FilterError::from("URLRewrite without urlRewrite"))?;
                rewrite(r, prefix, &mut actions.request)?;
            }
            // Resolved beside the backendRefs (`crate::mirrors`): its copies
            // are the agent's, not an action here.
            "RequestMirror" => {
                if filter.request_mirror.is_none() {
                    return Err(FilterError::from("RequestMirror without requestMirror"));
                }
            }
            // Resolved beside the backendRefs too (`crate::external_auth`):
            // the agent asks the auth service.
            "ExternalAuth" => {
                if filter.external_auth.is_none() {
                    return Err(FilterError::from("ExternalAuth without externalAuth"));
                }
            }
            other => {
                return Err(FilterError(format!(
                    "filter type {other:?} is not supported (haptic serves {})",
                    SUPPORTED.join(", ")
                )));
            }
        }
    }
    Ok(actions)
}

fn header_actions(
    keyword: &str,
    m: &HeaderModifier,
    out: &mut Vec<Action>,
) -> Result<(), FilterError> {
    for header in &m.set {
        check_header_name(&header.name)?;
        out.push(Action::new(format!(
            "{keyword} set-header {} {}",
            header.name,
            log_format(&header.value)?
        )));
    }
    // `add` appends to the header's value (`a` becomes `a,b`), as the spec
    // says, rather than adding a second header line.
    let fetch = if keyword == "http-request" {
        "req.fhdr"
    } else {
        "res.fhdr"
    };
    for header in &m.add {
        check_header_name(&header.name)?;
        let added = log_format(&header.value)?;
        let name = header.name.to_ascii_lowercase();
        let appended = quote(&format!(
            "%[{fetch}({name})],{}",
            header.value.replace('%', "%%")
        ));
        out.push(Action {
            line: format!("{keyword} set-header {} {appended}", header.name),
            condition: format!("{{ {fetch}({name}) -m found }}"),
        });
        out.push(Action {
            line: format!("{keyword} add-header {} {added}", header.name),
            condition: format!("!{{ {fetch}({name}) -m found }}"),
        });
    }
    for name in &m.remove {
        check_header_name(name)?;
        out.push(Action::new(format!("{keyword} del-header {name}")));
    }
    Ok(())
}

fn check_header_name(name: &str) -> Result<(), FilterError> {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Ok(())
    } else {
        Err(FilterError(format!(
            "header name {name:?} is not served (letters, digits, -, _ and . only)"
        )))
    }
}

/// A literal as a quoted log-format string.
fn log_format(text: &str) -> Result<String, FilterError> {
    if text.chars().any(char::is_control) {
        return Err(FilterError(format!(
            "value {text:?} holds control characters"
        )));
    }
    Ok(quote(&text.replace('%', "%%")))
}

/// A path or hostname the route gives: what the API server accepts.
fn literal_path(path: &str) -> Result<&str, FilterError> {
    if path.starts_with('/') && !path.chars().any(|c| c.is_control() || c.is_whitespace()) {
        Ok(path)
    } else {
        Err(FilterError(format!(
            "path {path:?} is not an absolute path without spaces"
        )))
    }
}

/// The new path of a `ReplacePrefixMatch` for `prefix` (trailing `/`
/// removed): one action, the replacement then the rest of the path after
/// the prefix (from its `/`). One action, not one for the path equal to the
/// prefix and one for a longer path: the second's condition would read the
/// path the first had just set (`/prefix` rewritten to `/`, then `/`
/// "longer" than nothing, cut to an empty path HAProxy answers 400 to).
/// Replaced by `/`, the `/` is written and the rest taken one byte later,
/// so the bare prefix gives `/`, not an empty path (`bytes` past the end
/// is empty). `line(fmt)` writes the action.
fn prefix_replacement(
    replacement: &str,
    prefix: Option<&str>,
    line: impl Fn(&str) -> String,
    out: &mut Vec<Action>,
) -> Result<(), FilterError> {
    let prefix = prefix.ok_or(FilterError::from(
        "ReplacePrefixMatch needs a PathPrefix match",
    ))?;
    let replacement = literal_path(replacement)?.trim_end_matches('/');
    let (head, skip) = if replacement.is_empty() {
        ("/", prefix.len() + 1)
    } else {
        (replacement, prefix.len())
    };
    out.push(Action::new(line(&format!(
        "{}%[path,bytes({skip})]",
        head.replace('%', "%%")
    ))));
    Ok(())
}

fn redirect(
    r: &RequestRedirect,
    listener: Listener,
    prefix: Option<&str>,
    out: &mut Vec<Action>,
) -> Result<(), FilterError> {
    let scheme = match r.scheme.as_deref() {
        None => listener.protocol.scheme(),
        Some("http") => "http",
        Some("https") => "https",
        Some(other) => {
            return Err(FilterError(format!(
                "redirect scheme {other:?} is not http or https"
            )));
        }
    };
    let host = match r.hostname.as_deref() {
        Some(h) if hostnames::is_valid(h) && !h.starts_with('*') => h.to_ascii_lowercase(),
        Some(h) => {
            return Err(FilterError(format!(
                "redirect hostname {h:?} is not a DNS name"
            )));
        }
        None => "%[var(txn.gw_host)]".to_owned(),
    };
    // No port: the scheme's own when the scheme changes, else the
    // listener's; a scheme's well-known port is left out of the URL.
    let port = match (r.port, &r.scheme) {
        (Some(port), _) => Some(port),
        (None, Some(_)) => None,
        (None, None) => Some(listener.port),
    };
    let port = port.filter(|p| !matches!((scheme, p), ("http", 80) | ("https", 443)));
    let origin = match port {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    };
    let code = match r.status_code.unwrap_or(302) {
        code @ (301 | 302 | 303 | 307 | 308) => code,
        other => {
            return Err(FilterError(format!(
                "redirect status code {other} is not 301, 302, 303, 307 or 308"
            )));
        }
    };
    match r.path.as_ref() {
        None => out.push(Action::new(format!(
            "http-request redirect prefix {} code {code}",
            quote(&origin)
        ))),
        Some(PathModifier {
            type_,
            replace_full_path,
            replace_prefix_match,
        }) => {
            // `location` replaces path and query: put the query back.
            let with_query = |path: &str| {
                vec![
                    (
                        format!(
                            "http-request redirect location {} code {code}",
                            quote(&format!("{origin}{path}?%[query]"))
                        ),
                        "{ query -m found }",
                    ),
                    (
                        format!(
                            "http-request redirect location {} code {code}",
                            quote(&format!("{origin}{path}"))
                        ),
                        "!{ query -m found }",
                    ),
                ]
            };
            let mut paths: Vec<Action> = Vec::new();
            match type_.as_str() {
                "ReplaceFullPath" => {
                    let path = literal_path(replace_full_path.as_deref().unwrap_or("/"))?;
                    paths.push(Action::new(path.replace('%', "%%")));
                }
                "ReplacePrefixMatch" => {
                    prefix_replacement(
                        replace_prefix_match.as_deref().unwrap_or("/"),
                        prefix,
                        str::to_owned,
                        &mut paths,
                    )?;
                }
                other => return Err(FilterError(format!("redirect path type {other:?}"))),
            }
            for path in paths {
                for (line, query) in with_query(&path.line) {
                    let condition = [path.condition.as_str(), query]
                        .iter()
                        .filter(|c| !c.is_empty())
                        .copied()
                        .collect::<Vec<_>>()
                        .join(" ");
                    out.push(Action { line, condition });
                }
            }
        }
    }
    Ok(())
}

fn rewrite(r: &UrlRewrite, prefix: Option<&str>, out: &mut Vec<Action>) -> Result<(), FilterError> {
    if let Some(host) = &r.hostname {
        if !hostnames::is_valid(host) || host.starts_with('*') {
            return Err(FilterError(format!(
                "rewrite hostname {host:?} is not a DNS name"
            )));
        }
        out.push(Action::new(format!("http-request set-header host {host}")));
    }
    if let Some(PathModifier {
        type_,
        replace_full_path,
        replace_prefix_match,
    }) = &r.path
    {
        match type_.as_str() {
            "ReplaceFullPath" => {
                let path = literal_path(replace_full_path.as_deref().unwrap_or("/"))?;
                out.push(Action::new(format!(
                    "http-request set-path {}",
                    quote(&path.replace('%', "%%"))
                )));
            }
            "ReplacePrefixMatch" => prefix_replacement(
                replace_prefix_match.as_deref().unwrap_or("/"),
                prefix,
                |fmt| format!("http-request set-path {}", quote(fmt)),
                out,
            )?,
            other => return Err(FilterError(format!("rewrite path type {other:?}"))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HTTP: Listener = Listener {
        protocol: Protocol::Http,
        port: 80,
    };

    fn lines(filter: serde_json::Value, prefix: Option<&str>) -> Vec<String> {
        let filters: Vec<HttpFilter> = serde_json::from_value(json!([filter])).unwrap();
        let a = compile(&filters, HTTP, prefix).unwrap();
        a.request
            .iter()
            .chain(&a.response)
            .map(|a| format!("{} if {}", a.line, a.condition))
            .collect()
    }

    #[test]
    fn header_values_are_quoted_literals() {
        let l = lines(
            json!({"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-A", "value": "50% off"}], "remove": ["X-B"]}}),
            None,
        );
        assert_eq!(
            l,
            [
                "http-request set-header X-A '50%% off' if ",
                "http-request del-header X-B if "
            ]
        );
    }

    #[test]
    fn redirects_keep_what_they_do_not_change() {
        let l = lines(
            json!({"type": "RequestRedirect", "requestRedirect": {"hostname": "example.org"}}),
            None,
        );
        assert_eq!(
            l,
            ["http-request redirect prefix 'http://example.org' code 302 if "]
        );
        let l = lines(
            json!({"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "port": 8443, "statusCode": 301}}),
            None,
        );
        assert_eq!(
            l,
            ["http-request redirect prefix 'https://%[var(txn.gw_host)]:8443' code 301 if "]
        );
    }

    #[test]
    fn prefix_replacement_keeps_the_rest_of_the_path() {
        let l = lines(
            json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new/"}}}),
            Some("/old"),
        );
        assert_eq!(l, ["http-request set-path '/new%[path,bytes(4)]' if "]);
        let l = lines(
            json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}),
            Some("/old"),
        );
        assert_eq!(l, ["http-request set-path '/%[path,bytes(5)]' if "]);
    }

    #[test]
    fn unsupported_filters_are_named() {
        let filters: Vec<HttpFilter> = serde_json::from_value(json!([{"type": "CORS"}])).unwrap();
        let err = compile(&filters, HTTP, None).unwrap_err();
        assert!(err.0.contains("CORS"), "{err}");
    }
}

/// A Gateway API duration (`1h`, `500ms`, `1m30s`; GEP-2257) in
/// milliseconds; `None` when it is not one.
pub fn duration_ms(text: &str) -> Option<u64> {
    let mut total: u64 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 5 {
            return None;
        }
        let value: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (1, 2)
        } else if rest.starts_with('h') {
            (3_600_000, 1)
        } else if rest.starts_with('m') {
            (60_000, 1)
        } else if rest.starts_with('s') {
            (1_000, 1)
        } else {
            return None;
        };
        total = total.checked_add(value.checked_mul(unit)?)?;
        rest = &rest[len..];
    }
    Some(total)
}

/// The server timeout of a rule: the shorter of `request` and
/// `backendRequest` (HAProxy times the server's answer; `0s` means none).
pub fn rule_timeout(
    timeouts: Option<&crate::api::HttpTimeouts>,
) -> Result<Option<u64>, FilterError> {
    let Some(t) = timeouts else {
        return Ok(None);
    };
    let mut shortest: Option<u64> = None;
    for value in [&t.request, &t.backend_request].into_iter().flatten() {
        let ms = duration_ms(value).ok_or_else(|| {
            FilterError(format!(
                "timeout {value:?} is not a duration such as 10s or 500ms"
            ))
        })?;
        if ms > 0 {
            shortest = Some(shortest.map_or(ms, |s| s.min(ms)));
        }
    }
    Ok(shortest)
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn durations_follow_gep_2257() {
        assert_eq!(duration_ms("500ms"), Some(500));
        assert_eq!(duration_ms("1h2m3s4ms"), Some(3_723_004));
        assert_eq!(duration_ms("0s"), Some(0));
        assert_eq!(duration_ms("1.5s"), None);
        assert_eq!(duration_ms(""), None);
        assert_eq!(duration_ms("10d"), None);
    }
}

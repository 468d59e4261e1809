//! `proxy-cookie-domain`, `proxy-cookie-path` and `proxy-redirect-from` /
//! `proxy-redirect-to`: nginx's `proxy_cookie_domain <from> <to>`,
//! `proxy_cookie_path <from> <to>` and `proxy_redirect <from> <to>`, which
//! rewrite the backend's answers, as `http-response replace-header` rules on
//! the answers to the requests the Ingress routes.
//!
//! nginx's semantics, kept here:
//! - cookie domain: a `Set-Cookie` whose `Domain` attribute equals `from`
//!   (case-insensitive, a leading dot of the attribute kept) gets `to`;
//! - cookie path: a `Set-Cookie` whose `Path` attribute starts with `from`
//!   (case-sensitive) gets that start replaced by `to`
//!   (`/two/ /`: `Path=/two/some/` becomes `Path=/some/`);
//! - redirect: a `Location` that starts with `from` gets that start
//!   replaced by `to`.
//!
//! `off` turns each off; `proxy-redirect-from: default` is nginx's default
//! rewrite of its own upstream name (`http://upstream_balancer/`), which no
//! backend sends, so nothing is written. nginx's regex forms (`~`) and
//! variables (`$host`) are refused; the texts are literal: they are
//! regex-escaped into the match and `%`-doubled into the replacement (a
//! log-format string), and both are single-quoted.

use std::fmt::Write as _;

use haptic_sdk::haproxy::regex_escape;
use haptic_sdk::names::quote;

use crate::annotations::Annotations;
use crate::invalid;
use crate::parse::Invalid;
use crate::parse::{self, log_format_literal};
use crate::report::Status;

/// One `<from> <to>` pair, both checked literal texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    pub from: String,
    pub to: String,
}

/// The answer rewrites of one Ingress.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rewrites {
    pub cookie_domain: Option<Rewrite>,
    pub cookie_path: Option<Rewrite>,
    pub redirect: Option<Rewrite>,
}

/// A text nginx would read as a regex or a variable, or that haptic does
/// not write into a config word.
fn literal(text: &str, what: &str) -> Result<String, Invalid> {
    if text.starts_with('~') {
        return Err(invalid!(
            "{text:?}: nginx's regex form (~) is not supported, only a literal {what}"
        ));
    }
    if text.contains('$') {
        return Err(invalid!(
            "{text:?}: nginx variables ($...) are not supported, only a literal {what}"
        ));
    }
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'))
    {
        return Err(invalid!(
            "{text:?} is not a {what} haptic can write (no spaces, quotes or backslashes)"
        ));
    }
    Ok(text.to_owned())
}

/// `"<from> <to>"`, or `off` (`None`).
fn pair(value: &str) -> Result<Option<(String, String)>, Invalid> {
    let words: Vec<&str> = value.split_whitespace().collect();
    match words.as_slice() {
        ["off"] => Ok(None),
        [from, to] => Ok(Some(((*from).to_owned(), (*to).to_owned()))),
        _ => Err(invalid!(
            "{value:?} is not \"<from> <to>\" (two words) or \"off\""
        )),
    }
}

/// `proxy-cookie-domain`: two domain names (a leading dot ignored, as
/// nginx ignores it).
pub fn cookie_domain(value: &str) -> Result<Option<Rewrite>, Invalid> {
    let Some((from, to)) = pair(value)? else {
        return Ok(None);
    };
    let domain = |text: &str| -> Result<String, Invalid> {
        let text = literal(text, "domain")?;
        parse::host(text.trim_start_matches('.'), false)
    };
    Ok(Some(Rewrite {
        from: domain(&from)?,
        to: domain(&to)?,
    }))
}

/// `proxy-cookie-path`: two paths starting with `/`.
pub fn cookie_path(value: &str) -> Result<Option<Rewrite>, Invalid> {
    let Some((from, to)) = pair(value)? else {
        return Ok(None);
    };
    let path = |text: &str| parse::path(&literal(text, "path")?);
    Ok(Some(Rewrite {
        from: path(&from)?,
        to: path(&to)?,
    }))
}

/// A `proxy-redirect-from` or `-to` value: one word, a URL or a path.
fn redirect_text(value: &str) -> Result<String, Invalid> {
    let text = value.trim();
    if text.split_whitespace().count() != 1 {
        return Err(invalid!("{value:?} is not one word"));
    }
    literal(text, "URL or path")
}

impl Rewrites {
    /// Reads the four annotations, recording a verdict for each.
    pub fn read(a: &mut Annotations<'_>) -> Self {
        let mut r = Self::default();
        if let Some(rewrite) = a.honoured("proxy-cookie-domain", cookie_domain, |rewrite| match &rewrite {
                Some(w) => format!("a Set-Cookie of the backend with Domain={} (any case, a leading dot kept) gets Domain={} (http-response replace-header)", w.from, w.to),
                None => "off: the backend's cookies keep their Domain".to_owned(),
            }) {
            r.cookie_domain = rewrite;
        }
        if let Some(rewrite) = a.honoured("proxy-cookie-path", cookie_path, |rewrite| match &rewrite {
                Some(w) => format!("a Set-Cookie of the backend whose Path starts with {} gets that start replaced by {} (http-response replace-header)", w.from, w.to),
                None => "off: the backend's cookies keep their Path".to_owned(),
            }) {
            r.cookie_path = rewrite;
        }
        let from = a.parsed("proxy-redirect-from", redirect_text);
        let to = a.parsed("proxy-redirect-to", redirect_text);
        match (from, to) {
            (Some((key, from)), to) if from == "off" || from == "default" => {
                a.record(key, Status::Honoured(if from == "off" {
                    "off: the backend's Location is passed as it is".to_owned()
                } else {
                    "default: nginx's default rewrites only a Location naming its own upstream (http://upstream_balancer/), which no backend sends; the backend's Location is passed as it is".to_owned()
                }));
                if let Some((key, _)) = to {
                    a.record(
                        key,
                        Status::Honoured(format!(
                            "disregarded, as in ingress-nginx: proxy-redirect-from is {from}"
                        )),
                    );
                }
            }
            (Some((from_key, from)), Some((to_key, to))) if to != "off" => {
                let text = format!("a Location of the backend that starts with {from} gets that start replaced by {to} (http-response replace-header; nginx also rewrites Refresh, HAProxy here does not)");
                a.record(from_key, Status::Differs(text.clone()));
                a.record(to_key, Status::Differs(text));
                r.redirect = Some(Rewrite { from, to });
            }
            (Some((from_key, _)), to) => {
                a.record(
                    from_key,
                    Status::NotHonoured(
                        "proxy-redirect-to is missing, invalid or off: the two are used together, as in ingress-nginx".into(),
                    ),
                );
                if let Some((key, _)) = to {
                    a.record(
                        key,
                        Status::Honoured("off: the backend's Location is passed as it is".into()),
                    );
                }
            }
            (None, Some((key, _))) => a.record(
                key,
                Status::NotHonoured(
                    "proxy-redirect-from is missing or invalid: the two are used together, as in ingress-nginx".into(),
                ),
            ),
            (None, None) => {}
        }
        r
    }

    /// The `http-response` rules, each ending with ` if <acl>` (the
    /// Ingress's requests).
    pub fn rules(&self, acl: &str) -> String {
        let mut out = String::new();
        if let Some(w) = &self.cookie_domain {
            let pattern = format!(
                "^(.*;[ \\t]*(?i:domain)=\\.?)(?i:{})([ \\t]*(;.*)?)$",
                regex_escape(&w.from)
            );
            let replacement = format!("\\1{}\\2", log_format_literal(&w.to));
            replace_header(&mut out, "Set-Cookie", &pattern, &replacement, acl);
        }
        if let Some(w) = &self.cookie_path {
            let pattern = format!("^(.*;[ \\t]*(?i:path)=){}(.*)$", regex_escape(&w.from));
            let replacement = format!("\\1{}\\2", log_format_literal(&w.to));
            replace_header(&mut out, "Set-Cookie", &pattern, &replacement, acl);
        }
        if let Some(w) = &self.redirect {
            let pattern = format!("^{}(.*)$", regex_escape(&w.from));
            let replacement = format!("{}\\1", log_format_literal(&w.to));
            replace_header(&mut out, "Location", &pattern, &replacement, acl);
        }
        out
    }
}

/// One `http-response replace-header` line for the Ingress's answers.
fn replace_header(out: &mut String, header: &str, pattern: &str, replacement: &str, acl: &str) {
    let _ = writeln!(
        out,
        "    http-response replace-header {header} {} {} if {acl}",
        quote(pattern),
        quote(replacement)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_into_literal_pairs() {
        assert_eq!(
            cookie_domain("localhost example.org"),
            Ok(Some(Rewrite {
                from: "localhost".into(),
                to: "example.org".into()
            }))
        );
        assert_eq!(
            cookie_domain(".Internal.svc .shop.test").map(|r| r.map(|r| (r.from, r.to))),
            Ok(Some(("internal.svc".into(), "shop.test".into())))
        );
        assert_eq!(cookie_domain("off"), Ok(None));
        assert!(cookie_domain("~\\.svc$ shop.test").is_err());
        assert!(cookie_domain("a.svc $host").is_err());
        assert!(cookie_domain("a.svc").is_err());
        assert!(cookie_domain("a.svc b.test c.test").is_err());
        assert_eq!(
            cookie_path("/two/ /"),
            Ok(Some(Rewrite {
                from: "/two/".into(),
                to: "/".into()
            }))
        );
        assert!(cookie_path("two /").is_err());
        assert!(cookie_path("/a'b /").is_err());
        assert!(redirect_text("http://a b").is_err());
        assert!(redirect_text("https://$host/").is_err());
        assert_eq!(
            redirect_text(" http://web:8080/ "),
            Ok("http://web:8080/".into())
        );
    }

    #[test]
    fn rules_match_literally_and_replace_literally() {
        let r = Rewrites {
            cookie_domain: None,
            cookie_path: None,
            redirect: Some(Rewrite {
                from: "http://web.app.svc:8080/".into(),
                to: "https://shop.test/a%20b/".into(),
            }),
        };
        assert_eq!(
            r.rules("ACL"),
            "    http-response replace-header Location '^http\\://web\\.app\\.svc\\:8080/(.*)$' 'https://shop.test/a%%20b/\\1' if ACL\n"
        );
        assert_eq!(regex_escape("a.b*c"), "a\\.b\\*c");
    }
}

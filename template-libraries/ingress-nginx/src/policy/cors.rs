//! `enable-cors` and its `cors-*`, ingress-nginx's defaults filled in; the
//! checked origins as one regex and the preflight answer's headers, which
//! [`super::rules`] writes.

use crate::annotations::Annotations;
use crate::invalid;
use crate::parse;
use crate::parse::Invalid;
use crate::report::Status;

use super::{Cors, Policy};
use crate::parse::log_format_literal;
use haptic_sdk::haproxy;
use haptic_sdk::names::quote;

impl Policy {
    pub(super) fn read_cors(&mut self, a: &mut Annotations<'_>) {
        let names = [
            "cors-allow-origin",
            "cors-allow-methods",
            "cors-allow-headers",
            "cors-expose-headers",
            "cors-allow-credentials",
            "cors-max-age",
        ];
        let on = a.parsed("enable-cors", parse::boolean);
        let Some((key, true)) = on else {
            if let Some((key, false)) = on {
                a.record(key, Status::Honoured("CORS off".into()));
            }
            a.not_honoured(&names, "enable-cors is not \"true\" on this Ingress");
            return;
        };
        a.record(key, Status::Honoured("preflight OPTIONS requests from an allowed origin are answered 204 with the Access-Control-* headers, and other answers carry them".into()));
        let mut c = Cors {
            origins: None,
            methods: "GET, PUT, POST, DELETE, PATCH, OPTIONS".into(),
            headers: "DNT,Keep-Alive,User-Agent,X-Requested-With,If-Modified-Since,Cache-Control,Content-Type,Range,Authorization".into(),
            expose: None,
            credentials: true,
            max_age: 1_728_000,
        };
        if let Some((key, allowed)) = a.parsed("cors-allow-origin", origins) {
            let status = match (&allowed.list, allowed.skipped.is_empty()) {
                (None, _) => Status::Honoured("any origin (*)".to_owned()),
                (Some(list), true) => Status::Honoured(format!(
                    "the request's Origin is echoed when it is one of {}",
                    list.join(", ")
                )),
                (Some(list), false) => Status::Invalid(format!(
                    "{} left out (not an origin: scheme://host[:port]), as ingress-nginx skips them; the request's Origin is echoed when it is one of {}",
                    // Quoted: the entries are the user's text as written.
                    allowed
                        .skipped
                        .iter()
                        .map(|entry| format!("{entry:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if list.is_empty() {
                        "none (no origin is allowed)".to_owned()
                    } else {
                        list.join(", ")
                    }
                )),
            };
            a.record(key, status);
            c.origins = allowed.list;
        }
        if let Some(methods) = a.honoured(
            "cors-allow-methods",
            |v| token_list(v, true),
            |methods| format!("Access-Control-Allow-Methods: {methods}"),
        ) {
            c.methods = methods;
        }
        if let Some(headers) = a.honoured(
            "cors-allow-headers",
            |v| token_list(v, false),
            |headers| format!("Access-Control-Allow-Headers: {headers}"),
        ) {
            c.headers = headers;
        }
        if let Some(expose) = a.honoured(
            "cors-expose-headers",
            |v| token_list(v, false),
            |expose| format!("Access-Control-Expose-Headers: {expose}"),
        ) {
            c.expose = Some(expose);
        }
        if let Some(credentials) =
            a.honoured("cors-allow-credentials", parse::boolean, |&credentials| {
                format!(
                    "Access-Control-Allow-Credentials is {}",
                    if credentials {
                        "sent (true)"
                    } else {
                        "not sent"
                    }
                )
            })
        {
            c.credentials = credentials;
        }
        if let Some(age) = a.honoured(
            "cors-max-age",
            |v| parse::number(v, 0..=u64::from(u32::MAX)),
            |age| format!("Access-Control-Max-Age: {age}"),
        ) {
            c.max_age = age;
        }
        self.cors = Some(c);
    }
}

/// The `hdr` arguments of a CORS answer (preflight).
pub(super) fn cors_headers(c: &Cors) -> String {
    let mut out = format!(
        " hdr Access-Control-Allow-Origin %[var(txn.ingress_nginx_cors)] hdr Access-Control-Allow-Methods {} hdr Access-Control-Allow-Headers {}",
        quote(&log_format_literal(&c.methods)),
        quote(&log_format_literal(&c.headers))
    );
    if c.credentials {
        out.push_str(" hdr Access-Control-Allow-Credentials true");
    }
    out
}

/// `cors-allow-origin` read: the allowed origins (`None`: any, `*`) and the
/// entries left out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedOrigins {
    list: Option<Vec<String>>,
    skipped: Vec<String>,
}

/// One origin: `scheme://host[:port]`, any scheme (`tauri://localhost:3000`
/// is an origin to ingress-nginx too), `*.` standing for one label.
fn origin(text: &str) -> Result<(), Invalid> {
    let (scheme, rest) = text
        .split_once("://")
        .ok_or_else(|| invalid!("{text:?} is not an origin (scheme://host[:port])"))?;
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'.' || b == b'-');
    if !scheme_ok {
        return Err(invalid!("{text:?} does not start with a URL scheme"));
    }
    let (host, port) = rest.split_once(':').unwrap_or((rest, ""));
    parse::host(host, true)?;
    if !port.is_empty() {
        parse::number(port, 1..=65_535)?;
    }
    Ok(())
}

/// `cors-allow-origin`: `*` (any) or a comma-separated list of origins;
/// entries that are not origins are left out, as ingress-nginx leaves them
/// out (one bad entry does not open the Ingress to every origin). Left
/// with none, no origin is allowed.
fn origins(value: &str) -> Result<AllowedOrigins, Invalid> {
    let entries: Vec<&str> = value
        .split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if entries.is_empty() || entries.contains(&"*") {
        return Ok(AllowedOrigins {
            list: None,
            skipped: Vec::new(),
        });
    }
    let (good, bad): (Vec<&str>, Vec<&str>) =
        entries.into_iter().partition(|entry| origin(entry).is_ok());
    let list: Vec<String> = good.into_iter().map(str::to_owned).collect();
    let skipped = bad.into_iter().map(str::to_owned).collect();
    // Thousands of origins made one regex PCRE2 refuses ("regular
    // expression is too large"), and `haproxy -c` every namespace's render.
    haproxy::check_regex(&origin_regex(&list)).map_err(|e| {
        format!(
            "{} origins make a regular expression that {e}; list fewer origins or use *",
            list.len()
        )
    })?;
    Ok(AllowedOrigins {
        list: Some(list),
        skipped,
    })
}

/// The checked origins as one anchored regex (`*.` matches one label; a
/// scheme's `.` and `+` are literal).
pub(super) fn origin_regex(origins: &[String]) -> String {
    let alternatives: Vec<String> = origins
        .iter()
        .map(|o| {
            o.replace('.', "\\.")
                .replace('+', "\\+")
                .replace('*', "[a-z0-9-]+")
        })
        .collect();
    format!("^({})$", alternatives.join("|"))
}

/// A comma-separated list of tokens (methods: letters only), normalized to
/// `A, B`.
fn token_list(value: &str, methods: bool) -> Result<String, Invalid> {
    let items: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let good = |t: &&str| {
        if methods {
            t.bytes().all(|b| b.is_ascii_alphabetic())
        } else {
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'*')
        }
    };
    if items.is_empty() || !items.iter().all(good) {
        return Err(invalid!(
            "{value:?} is not a comma-separated list of {}",
            if methods { "methods" } else { "header names" }
        ));
    }
    Ok(items.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_entry_is_left_out_and_any_scheme_is_an_origin() {
        let read = origins("https://a.test, b.test, tauri://localhost:3000, git+ssh://h.test")
            .expect("a list with one bad entry reads");
        assert_eq!(
            read.list,
            Some(vec![
                "https://a.test".to_owned(),
                "tauri://localhost:3000".to_owned(),
                "git+ssh://h.test".to_owned()
            ])
        );
        assert_eq!(read.skipped, vec!["b.test".to_owned()]);
        assert_eq!(origins("b.test, *").expect("any").list, None);
        assert_eq!(origins("b.test").expect("none left").list, Some(Vec::new()));
        assert!(origin_regex(&["git+ssh://h.test".to_owned()]).contains(r"git\+ssh://h\.test"));
    }
}

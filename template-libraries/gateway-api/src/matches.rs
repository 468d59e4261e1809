//! HTTPRoute matches turned into HAProxy conditions, with the precedence
//! the spec orders them by.
//!
//! Paths: `Exact` is `{ path -m str /p }`; `PathPrefix` `/p` matches `/p`
//! and `/p/...` element-wise (`{ path -m reg ^/p(/|$) }`, the prefix
//! escaped), `/` matches everything; `RegularExpression` is HAProxy's PCRE.
//! Headers compare the whole value (`req.fhdr`), query parameters the first
//! value (`url_param`), the method `method`.

use std::cmp::Reverse;

use haptic_sdk::haproxy::{MAX_WORDS_PER_LINE, check_regex, regex_escape};
use haptic_sdk::names::quote;

use crate::api::HttpMatch;

/// A match ready for the configuration.
#[derive(Debug, Clone)]
pub struct CompiledMatch {
    /// HAProxy condition terms (ANDed), possibly empty.
    pub condition: String,
    /// The paths the match selects.
    pub path: PathSet,
    /// Nothing but the path is matched (no method, header or query
    /// parameter): the match can be a map entry ([`crate::frontend`]).
    pub path_only: bool,
    /// Precedence (lower sorts first) within one hostname.
    pub rank: MatchRank,
}

/// The paths a match selects, to tell whether two matches can select the
/// same request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathSet {
    Exact(String),
    /// The prefix, trailing `/` removed (`""` is every path).
    Prefix(String),
    /// A regular expression: any path, as far as this library can tell.
    Pattern,
}

impl PathSet {
    /// The path prefix matched, trailing `/` removed, for prefix
    /// replacements (`ReplacePrefixMatch`); `None` for other path kinds.
    pub fn prefix(&self) -> Option<&str> {
        match self {
            Self::Prefix(p) => Some(p),
            _ => None,
        }
    }

    /// Some path is selected by both (element-wise prefixes, as served).
    pub fn overlaps(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Pattern, _) | (_, Self::Pattern) => true,
            (Self::Exact(a), Self::Exact(b)) => a == b,
            (Self::Exact(path), Self::Prefix(prefix))
            | (Self::Prefix(prefix), Self::Exact(path)) => under(path, prefix),
            (Self::Prefix(a), Self::Prefix(b)) => under(a, b) || under(b, a),
        }
    }
}

/// `path` is `prefix` or below it, element-wise.
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Exact path, then longest prefix, then regular expressions; then a
/// method, then more headers, then more query parameters.
pub type MatchRank = (u8, Reverse<usize>, u8, Reverse<usize>, Reverse<usize>);

/// Why a match cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// Compiles one match (`matches: []` means one match of prefix `/`).
pub fn compile(m: &HttpMatch) -> Result<CompiledMatch, Unsupported> {
    let mut terms: Vec<String> = Vec::new();
    let kind = m
        .path
        .as_ref()
        .and_then(|p| p.type_.as_deref())
        .unwrap_or("PathPrefix");
    let value = m
        .path
        .as_ref()
        .and_then(|p| p.value.as_deref())
        .unwrap_or("/");
    check_text("path", value)?;
    let (path_rank, path) = match kind {
        "Exact" => {
            terms.push(format!("{{ path -m str {} }}", quote(value)));
            ((0, Reverse(value.len())), PathSet::Exact(value.to_owned()))
        }
        "PathPrefix" => {
            let trimmed = value.trim_end_matches('/');
            if !trimmed.is_empty() {
                terms.push(format!(
                    "{{ path -m reg {} }}",
                    quote(&format!("^{}(/|$)", regex_escape(trimmed)))
                ));
            }
            (
                (1, Reverse(trimmed.len())),
                PathSet::Prefix(trimmed.to_owned()),
            )
        }
        "RegularExpression" => {
            pcre2("path", value)?;
            terms.push(format!("{{ path -m reg {} }}", quote(value)));
            ((2, Reverse(value.len())), PathSet::Pattern)
        }
        other => return Err(Unsupported(format!("path match type {other:?}"))),
    };
    if let Some(method) = &m.method {
        if !method.bytes().all(|b| b.is_ascii_uppercase()) || method.is_empty() {
            return Err(Unsupported(format!("method {method:?}")));
        }
        terms.push(format!("{{ method {method} }}"));
    }
    for header in &m.headers {
        check_name("header", &header.name)?;
        check_text("header value", &header.value)?;
        let fetch = format!("req.fhdr({})", header.name.to_ascii_lowercase());
        terms.push(value_term(&fetch, header.type_.as_deref(), &header.value)?);
    }
    for param in &m.query_params {
        check_name("query parameter", &param.name)?;
        check_text("query parameter value", &param.value)?;
        let fetch = format!("url_param({})", param.name);
        terms.push(value_term(&fetch, param.type_.as_deref(), &param.value)?);
    }
    // Each term is whole words (values are quoted), so its words count
    // outside quotes; HAProxy refuses a line past its limit, and with it
    // every namespace's render.
    let words: usize = terms.iter().map(|t| words_outside_quotes(t)).sum();
    if words > CONDITION_WORDS {
        return Err(Unsupported(format!(
            "a match with {} header and {} query parameter conditions ({words} words; HAProxy reads \
             {MAX_WORDS_PER_LINE} words a line, which leaves {CONDITION_WORDS} for a match's \
             conditions): split it into matches with fewer conditions",
            m.headers.len(),
            m.query_params.len()
        )));
    }
    Ok(CompiledMatch {
        condition: terms.join(" "),
        path,
        path_only: m.method.is_none() && m.headers.is_empty() && m.query_params.is_empty(),
        rank: (
            path_rank.0,
            path_rank.1,
            u8::from(m.method.is_none()),
            Reverse(m.headers.len()),
            Reverse(m.query_params.len()),
        ),
    })
}

/// The words a match's conditions may take: the line that selects a rule
/// ([`crate::frontend`]) also holds `http-request set-var(txn.gw_rule)
/// str(<rule>) if` (4 words), the listener and host terms (6 each) and the
/// not-yet-matched term (5).
pub const CONDITION_WORDS: usize = MAX_WORDS_PER_LINE - 4 - 6 - 6 - 5;

/// HAProxy's words of `text`: runs of non-space characters, a single-quoted
/// string (as [`quote`] writes it, `'\''` included) one word with them.
fn words_outside_quotes(text: &str) -> usize {
    let (mut words, mut in_word, mut quoted, mut escaped) = (0, false, false, false);
    for c in text.chars() {
        if c == ' ' && !quoted && !escaped {
            in_word = false;
            continue;
        }
        if !in_word {
            in_word = true;
            words += 1;
        }
        if escaped {
            escaped = false;
        } else if c == '\\' && !quoted {
            escaped = true;
        } else if c == '\'' {
            quoted = !quoted;
        }
    }
    words
}

/// A `RegularExpression` value as the SDK's regex writer checks it: what
/// PCRE2 (HAProxy's engine) compiles with the meaning the user meant. One
/// it refuses would make `haproxy -c` refuse every namespace's render.
fn pcre2(what: &str, value: &str) -> Result<(), Unsupported> {
    check_regex(value)
        .map(|_| ())
        .map_err(|e| Unsupported(format!("regular expression {value:?} for {what} ({e})")))
}

fn value_term(fetch: &str, kind: Option<&str>, value: &str) -> Result<String, Unsupported> {
    match kind.unwrap_or("Exact") {
        "Exact" => Ok(format!("{{ {fetch} -m str {} }}", quote(value))),
        "RegularExpression" => {
            pcre2(fetch, value)?;
            Ok(format!("{{ {fetch} -m reg {} }}", quote(value)))
        }
        other => Err(Unsupported(format!("match type {other:?}"))),
    }
}

/// Header and parameter names go into fetch arguments: letters, digits and
/// `-_.` only (HAProxy would read `)` or `,` as syntax).
fn check_name(what: &str, name: &str) -> Result<(), Unsupported> {
    if !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        Ok(())
    } else {
        Err(Unsupported(format!("{what} name {name:?}")))
    }
}

/// Values are quoted; a line break cannot be.
fn check_text(what: &str, text: &str) -> Result<(), Unsupported> {
    if text.chars().any(char::is_control) {
        Err(Unsupported(format!("{what} {text:?} (control characters)")))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(value: serde_json::Value) -> CompiledMatch {
        compile(&serde_json::from_value(value).unwrap()).unwrap()
    }

    #[test]
    fn paths_become_conditions() {
        assert_eq!(m(json!({})).condition, "");
        assert_eq!(
            m(json!({"path": {"type": "Exact", "value": "/a"}})).condition,
            "{ path -m str '/a' }"
        );
        assert_eq!(
            m(json!({"path": {"value": "/a.b/"}})).condition,
            "{ path -m reg '^/a\\.b(/|$)' }"
        );
        assert_eq!(
            m(json!({"path": {"value": "/a.b/"}})).path.prefix(),
            Some("/a.b")
        );
    }

    #[test]
    fn paths_overlap_element_wise() {
        let exact = |p: &str| PathSet::Exact(p.into());
        let prefix = |p: &str| PathSet::Prefix(p.into());
        assert!(exact("/a").overlaps(&exact("/a")));
        assert!(!exact("/a").overlaps(&exact("/b")));
        assert!(exact("/a/b").overlaps(&prefix("/a")));
        assert!(exact("/a").overlaps(&prefix("/a")));
        assert!(!exact("/ab").overlaps(&prefix("/a")));
        assert!(prefix("").overlaps(&exact("/x")));
        assert!(prefix("/a").overlaps(&prefix("/a/b")));
        assert!(!prefix("/a").overlaps(&prefix("/ab")));
        assert!(PathSet::Pattern.overlaps(&exact("/x")));
    }

    #[test]
    fn headers_queries_and_methods_are_anded() {
        let c = m(
            json!({"method": "GET", "headers": [{"name": "Version", "value": "two"}], "queryParams": [{"name": "q", "value": "a b", "type": "RegularExpression"}]}),
        );
        assert_eq!(
            c.condition,
            "{ method GET } { req.fhdr(version) -m str 'two' } { url_param(q) -m reg 'a b' }"
        );
    }

    #[test]
    fn precedence_follows_the_spec() {
        let exact = m(json!({"path": {"type": "Exact", "value": "/a"}}));
        let long = m(json!({"path": {"value": "/a/b"}}));
        let short = m(json!({"path": {"value": "/a"}}));
        let with_method = m(json!({"path": {"value": "/a"}, "method": "GET"}));
        let with_header =
            m(json!({"path": {"value": "/a"}, "headers": [{"name": "x", "value": "1"}]}));
        assert!(exact.rank < long.rank && long.rank < short.rank);
        assert!(with_method.rank < with_header.rank && with_header.rank < short.rank);
    }

    #[test]
    fn what_would_break_a_line_is_refused() {
        let bad: HttpMatch =
            serde_json::from_value(json!({"headers": [{"name": "a)b", "value": "x"}]})).unwrap();
        assert!(compile(&bad).is_err());
        let bad: HttpMatch =
            serde_json::from_value(json!({"path": {"type": "Exact", "value": "/a\nb"}})).unwrap();
        assert!(compile(&bad).is_err());
    }

    /// Tenant isolation (issue 40): a RegularExpression PCRE2 refuses made
    /// `haproxy -c` refuse the render of every namespace; the SDK's regex
    /// writer refuses it here, on the route alone.
    #[test]
    fn words_count_quoted_values_as_one() {
        assert_eq!(words_outside_quotes("{ req.fhdr(x) -m str 'a b' }"), 6);
        assert_eq!(
            words_outside_quotes(&format!("{{ path -m str {} }}", quote("it's a b"))),
            6
        );
    }

    /// The spec allows 16 headers and 16 query parameters per match: 32
    /// terms of 6 words on the line that selects the rule, where HAProxy
    /// reads 63 and `haproxy -c` refused every namespace's render.
    #[test]
    fn a_match_past_the_line_limit_is_unsupported() {
        let headers: Vec<_> = (0..16)
            .map(|i| json!({"name": format!("x-h{i}"), "value": "a b"}))
            .collect();
        let many = serde_json::from_value(json!({"headers": headers})).unwrap();
        let Err(Unsupported(why)) = compile(&many) else {
            panic!("16 headers compiled onto one line");
        };
        assert!(
            why.contains("16 header and 0 query parameter conditions"),
            "{why}"
        );
        let few = json!({"path": {"type": "PathPrefix", "value": "/a"}, "method": "GET",
            "headers": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}],
            "queryParams": [{"name": "c", "value": "3"}, {"name": "d", "value": "4"}]});
        let compiled = m(few);
        assert!(words_outside_quotes(&compiled.condition) <= CONDITION_WORDS);
    }

    #[test]
    fn regexes_pcre2_refuses_are_unsupported() {
        for value in ["\\u0041", "(?u)a", "\\x{100}", "\\p{Letter}", "a{70000}"] {
            let path = json!({"path": {"type": "RegularExpression", "value": format!("/{value}")}});
            let header =
                json!({"headers": [{"type": "RegularExpression", "name": "x", "value": value}]});
            for m in [path, header] {
                let m: crate::api::HttpMatch = serde_json::from_value(m).unwrap();
                assert!(compile(&m).is_err(), "{value}");
            }
        }
        assert!(
            compile(
                &serde_json::from_value(
                    json!({"path": {"type": "RegularExpression", "value": "/v[0-9]+"}})
                )
                .unwrap()
            )
            .is_ok()
        );
    }
}

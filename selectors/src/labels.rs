//! Kubernetes label selectors in their string form (`app=web,tier!=cache`,
//! `env in (prod,staging)`, `!canary`), as `kubectl get -l` and watch list
//! options take them, so a library's watch filters files exactly as it
//! would filter the API server's answer.
//!
//! Grammar and semantics follow `k8s.io/apimachinery/pkg/labels`: requirements
//! are comma-separated and all must hold; `!=` and `notin` also match objects
//! without the label; `in`/`notin` need at least one value.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

/// Why a label selector does not parse; each names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelSelectorError {
    #[error("expected a label key after '!', found {found}")]
    NoKeyAfterNot { found: String },
    #[error("expected a value after the operator on '{key}', found {found}")]
    NoValue { key: String, found: String },
    #[error("expected '=', '==', '!=', 'in' or 'notin' after '{key}', found {found}")]
    NoOperator { key: String, found: String },
    #[error("expected a label key, found {found}")]
    NoKey { found: String },
    #[error("expected ',' between requirements, found {found}")]
    NoComma { found: String },
    #[error("expected '(' after 'in'/'notin' on '{key}'")]
    NoSet { key: String },
    #[error("the value set of '{key}' is empty; 'in' and 'notin' need at least one value")]
    EmptySet { key: String },
    #[error("unexpected {found} in the value set of '{key}'; write values as (a,b)")]
    BadSet { key: String, found: String },
    #[error(
        "the '{0}' operator is not supported in label selectors here; use in/notin with the values"
    )]
    Unsupported(char),
    #[error(
        "'{0}' is not a valid label key (an optional DNS prefix and '/', then at most 63 \
         alphanumerics, '-', '_' or '.', starting and ending alphanumeric)"
    )]
    BadKey(String),
    #[error(
        "'{0}' is not a valid label value (at most 63 alphanumerics, '-', '_' or '.', \
         starting and ending alphanumeric)"
    )]
    BadValue(String),
}

use LabelSelectorError as E;

/// Anything that answers "what is the value of label `key`": a manifest's
/// `metadata.labels` or a store's label map.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for HashMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// Labels whose value is not a string count as absent (the API server would
/// have refused them).
impl Labels for Map<String, Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

impl<T: Labels> Labels for Option<&T> {
    fn label(&self, key: &str) -> Option<&str> {
        self.and_then(|labels| labels.label(key))
    }
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Exists,
    NotExists,
    In(Vec<String>),
    NotIn(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    Not,
    Eq,
    NotEq,
    Open,
    Close,
    Comma,
}

impl LabelSelector {
    /// Parses the string form; the error says what is wrong and where.
    pub fn parse(selector: &str) -> Result<Self, LabelSelectorError> {
        let tokens = lex(selector)?;
        let mut tokens = tokens.into_iter().peekable();
        let mut requirements = Vec::new();
        if tokens.peek().is_none() {
            return Ok(Self { requirements });
        }
        loop {
            let requirement = match tokens.next() {
                Some(Token::Not) => match tokens.next() {
                    Some(Token::Ident(key)) => Requirement {
                        key: checked_key(key)?,
                        op: Op::NotExists,
                    },
                    other => {
                        return Err(E::NoKeyAfterNot {
                            found: describe(other.as_ref()),
                        });
                    }
                },
                Some(Token::Ident(key)) => {
                    let key = checked_key(key)?;
                    let op = match tokens.peek() {
                        None | Some(Token::Comma) => Op::Exists,
                        Some(Token::Eq) | Some(Token::NotEq) => {
                            let negated = tokens.next() == Some(Token::NotEq);
                            let value = match tokens.peek() {
                                Some(Token::Ident(_)) => match tokens.next() {
                                    Some(Token::Ident(value)) => value,
                                    _ => String::new(),
                                },
                                None | Some(Token::Comma) => String::new(),
                                other => {
                                    return Err(E::NoValue {
                                        found: describe(other),
                                        key,
                                    });
                                }
                            };
                            let values = vec![checked_value(value)?];
                            if negated {
                                Op::NotIn(values)
                            } else {
                                Op::In(values)
                            }
                        }
                        Some(Token::Ident(word)) if word == "in" || word == "notin" => {
                            let negated = word == "notin";
                            tokens.next();
                            let values = set(&key, &mut tokens)?;
                            if negated {
                                Op::NotIn(values)
                            } else {
                                Op::In(values)
                            }
                        }
                        other => {
                            return Err(E::NoOperator {
                                found: describe(other),
                                key,
                            });
                        }
                    };
                    Requirement { key, op }
                }
                other => {
                    return Err(E::NoKey {
                        found: describe(other.as_ref()),
                    });
                }
            };
            requirements.push(requirement);
            match tokens.next() {
                None => break,
                Some(Token::Comma) => continue,
                other => {
                    return Err(E::NoComma {
                        found: describe(other.as_ref()),
                    });
                }
            }
        }
        Ok(Self { requirements })
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &impl Labels) -> bool {
        self.requirements.iter().all(|requirement| {
            let value = labels.label(&requirement.key);
            match (&requirement.op, value) {
                (Op::Exists, found) => found.is_some(),
                (Op::NotExists, found) => found.is_none(),
                (Op::In(values), Some(found)) => values.iter().any(|v| v == found),
                (Op::In(_), None) => false,
                (Op::NotIn(values), Some(found)) => !values.iter().any(|v| v == found),
                (Op::NotIn(_), None) => true,
            }
        })
    }
}

fn set(
    key: &str,
    tokens: &mut impl Iterator<Item = Token>,
) -> Result<Vec<String>, LabelSelectorError> {
    if tokens.next() != Some(Token::Open) {
        return Err(E::NoSet {
            key: key.to_owned(),
        });
    }
    let mut values = Vec::new();
    let mut expect_value = true;
    loop {
        match tokens.next() {
            Some(Token::Ident(value)) if expect_value => {
                values.push(checked_value(value)?);
                expect_value = false;
            }
            Some(Token::Comma) if !expect_value => expect_value = true,
            Some(Token::Close) if !expect_value => break,
            Some(Token::Close) if values.is_empty() => {
                return Err(E::EmptySet {
                    key: key.to_owned(),
                });
            }
            other => {
                return Err(E::BadSet {
                    key: key.to_owned(),
                    found: describe(other.as_ref()),
                });
            }
        }
    }
    Ok(values)
}

fn lex(selector: &str) -> Result<Vec<Token>, LabelSelectorError> {
    let mut tokens = Vec::new();
    let mut chars = selector.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            ',' => tokens.push(Token::Comma),
            '(' => tokens.push(Token::Open),
            ')' => tokens.push(Token::Close),
            '=' => {
                chars.next_if_eq(&'=');
                tokens.push(Token::Eq);
            }
            '!' => {
                if chars.next_if_eq(&'=').is_some() {
                    tokens.push(Token::NotEq);
                } else {
                    tokens.push(Token::Not);
                }
            }
            '<' | '>' => return Err(E::Unsupported(c)),
            c => {
                let mut word = String::from(c);
                while let Some(next) =
                    chars.next_if(|n| !n.is_whitespace() && !",()=!<>".contains(*n))
                {
                    word.push(next);
                }
                tokens.push(Token::Ident(word));
            }
        }
    }
    Ok(tokens)
}

fn describe(token: Option<&Token>) -> String {
    match token {
        None => "the end of the selector".to_owned(),
        Some(Token::Ident(word)) => format!("'{word}'"),
        Some(Token::Not) => "'!'".to_owned(),
        Some(Token::Eq) => "'='".to_owned(),
        Some(Token::NotEq) => "'!='".to_owned(),
        Some(Token::Open) => "'('".to_owned(),
        Some(Token::Close) => "')'".to_owned(),
        Some(Token::Comma) => "','".to_owned(),
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name.
fn checked_key(key: String) -> Result<String, LabelSelectorError> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key.as_str()),
    };
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            })
    });
    if prefix_ok && !name.is_empty() && is_label_value(name) {
        Ok(key)
    } else {
        Err(E::BadKey(key))
    }
}

fn checked_value(value: String) -> Result<String, LabelSelectorError> {
    if is_label_value(&value) {
        Ok(value)
    } else {
        Err(E::BadValue(value))
    }
}

fn is_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.is_empty()
        || (bytes.len() <= 63
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn label_selector_semantics() {
        let labels = json!({"app": "web", "env": "prod", "example.com/team": "a"});
        let labels = labels.as_object();
        let map: std::collections::BTreeMap<String, String> =
            [("app", "web"), ("env", "prod"), ("example.com/team", "a")]
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .into();
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app = web , env=prod", true),
            ("app=db", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app!=web", false),
            ("env in (prod, staging)", true),
            ("env in (staging)", false),
            ("env notin (staging)", true),
            ("env notin (prod,staging)", false),
            ("missing notin (x)", true),
            ("missing in (x)", false),
            ("example.com/team=a", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("missing=", false),
            ("app,!missing,env=prod", true),
        ];
        for (selector, expected) in cases {
            let parsed =
                LabelSelector::parse(selector).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
            assert_eq!(parsed.matches(&labels), expected, "{selector:?}");
            assert_eq!(parsed.matches(&map), expected, "{selector:?} on a BTreeMap");
        }
        assert!(
            LabelSelector::parse("a=")
                .expect("empty value")
                .matches(&json!({"a": ""}).as_object())
        );
        assert!(
            !LabelSelector::parse("a")
                .expect("valid")
                .matches(&json!({"a": 1}).as_object())
        );
    }

    #[test]
    fn bad_label_selectors_are_refused_with_a_reason() {
        for selector in [
            "app in ()",
            "app in (a",
            "=x",
            "app web",
            "app=a,",
            "-bad=x",
            "app>1",
            "a b c",
            "!",
            "a=(b)",
        ] {
            assert!(
                LabelSelector::parse(selector).is_err(),
                "{selector:?} should be refused"
            );
        }
        let error = LabelSelector::parse("app in ()").expect_err("empty set");
        assert!(error.to_string().contains("at least one value"), "{error}");
    }
}

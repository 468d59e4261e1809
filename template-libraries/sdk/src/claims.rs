//! The admin's host-claim policy: which namespaces may claim which hosts.
//!
//! Ingress has no host ownership (the oldest Ingress wins a host and path,
//! and a newer one of another namespace can still add a path or a TLS
//! certificate under that host); Gateway API routes attach to whatever
//! their Gateway allows. On a shared cluster the admin reserves hosts for
//! namespaces in the values, read by every routing library:
//!
//! ```yaml
//! templateLibraries:
//!   base:
//!     hostClaims:
//!       default: allow          # or deny: hosts no rule covers are refused
//!       rules:
//!         - hosts: [shop.example.com, "*.shop.example.com"]
//!           namespaces: [shop, shop-*]
//! ```
//!
//! The policy lives under `base` because every routing library hangs its
//! lines on base's frontends; with `base` disabled no policy applies.
//!
//! How a claim is decided ([`HostClaims::check`]):
//! - A host pattern is an exact name, a wildcard `*.shop.example.com`
//!   (every name ending in `.shop.example.com`, at any depth, never
//!   `shop.example.com` itself), or `*` (every host).
//! - The **most specific** pattern covering the claimed host decides (exact,
//!   then the longest wildcard, then `*`): the namespace must match one of
//!   the namespaces of the rules holding that pattern. So a rule for
//!   `*.example.com` does not let its namespaces take `shop.example.com`
//!   when another rule reserves it.
//! - A claimed wildcard (or a host-less claim, which serves every host)
//!   also serves every reserved host beneath it that has no route of its
//!   own, so it needs the rules of every pattern beneath it as well.
//! - A host no pattern covers follows `default`.
//!
//! Namespace patterns are names with `*` matching any run of characters
//! (`shop-*`, `*`).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// The warning reason of a refused claim, on the object that made it.
pub const REASON: &str = "HostNotAllowed";

/// Where the policy sits in the values.
pub const VALUES_PATH: &str = "templateLibraries.base.hostClaims";

/// `templateLibraries.base.hostClaims` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HostClaimsValues {
    /// What hosts no rule covers get.
    pub default: DefaultAction,
    /// The reservations.
    pub rules: Vec<RuleValues>,
}

/// `default`: whether a host no rule covers may be claimed by anyone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DefaultAction {
    /// Any namespace may claim it (the Kubernetes behaviour).
    #[default]
    Allow,
    /// No namespace may.
    Deny,
}

/// One rule: these hosts only for these namespaces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuleValues {
    /// Host patterns: `shop.example.com`, `*.shop.example.com`, `*`.
    pub hosts: Vec<String>,
    /// Namespace patterns: `shop`, `shop-*`, `*`.
    pub namespaces: Vec<String>,
}

/// Why the policy in the values cannot be used. The libraries refuse to
/// plan with it: a policy read half would open hosts the admin closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The subtree does not have the policy's shape.
    #[error("{VALUES_PATH} is invalid: {0}")]
    Shape(String),
    /// A rule names no host or no namespace.
    #[error("{VALUES_PATH}.rules[{rule}] needs at least one host and one namespace")]
    EmptyRule {
        /// Index of the rule.
        rule: usize,
    },
    /// A host pattern is not a DNS name, `*.` and a DNS name, or `*`.
    #[error(
        "{VALUES_PATH}.rules[{rule}].hosts has {host:?}: write a lowercase DNS name, \"*.\" and a DNS name, or \"*\""
    )]
    InvalidHost {
        /// Index of the rule.
        rule: usize,
        /// The pattern as written.
        host: String,
    },
    /// A namespace pattern has characters no namespace has.
    #[error(
        "{VALUES_PATH}.rules[{rule}].namespaces has {namespace:?}: write a namespace name, where \"*\" matches any characters"
    )]
    InvalidNamespace {
        /// Index of the rule.
        rule: usize,
        /// The pattern as written.
        namespace: String,
    },
}

/// A host as an object claims it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim<'a> {
    /// An exact name or a `*.` wildcard, as written in the object.
    Host(&'a str),
    /// Every host: an Ingress rule without a host, an Ingress's
    /// `spec.defaultBackend`.
    AnyHost,
}

impl fmt::Display for Claim<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host(host) => write!(f, "host {host}"),
            Self::AnyHost => f.write_str("every host (no host given)"),
        }
    }
}

/// A refused claim; its `Display` is the end of a warning message (after
/// the object's name) saying which rule refused it and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A rule reserves the host (or a host beneath the claimed wildcard)
    /// for other namespaces.
    #[error(
        "{claim} is not allowed for namespace {namespace}: {VALUES_PATH}.rules[{rule}] reserves {pattern} for namespaces {namespaces}{}; \
         use a host of your own, or ask the cluster admin to add {namespace} to that rule",
        beneath_text(.beneath)
    )]
    Reserved {
        /// What was claimed (`host x`, `every host`).
        claim: String,
        /// The claiming namespace.
        namespace: String,
        /// The first rule holding the deciding pattern.
        rule: usize,
        /// The deciding pattern.
        pattern: String,
        /// The namespaces the rules holding it allow.
        namespaces: String,
        /// The pattern is narrower than the claim (a host a wildcard or
        /// host-less claim would serve).
        beneath: bool,
    },
    /// No rule covers the host and `default` is `deny`.
    #[error(
        "{claim} is not allowed for namespace {namespace}: no rule of {VALUES_PATH} covers it and its default is deny; \
         ask the cluster admin for a rule giving it to {namespace}"
    )]
    Denied {
        /// What was claimed.
        claim: String,
        /// The claiming namespace.
        namespace: String,
    },
}

fn beneath_text(beneath: &bool) -> &'static str {
    if *beneath {
        " (a host beneath what is claimed, which it would serve)"
    } else {
        ""
    }
}

impl Refusal {
    /// The warning reason ([`REASON`]).
    pub fn reason(&self) -> &'static str {
        REASON
    }
}

/// A host pattern, checked.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Pattern {
    /// `*`.
    Any,
    /// `*.suffix`, holding the suffix (`shop.example.com`).
    Wildcard(String),
    /// An exact name.
    Exact(String),
}

impl Pattern {
    fn parse(text: &str) -> Option<Self> {
        if text == "*" {
            return Some(Self::Any);
        }
        match text.strip_prefix("*.") {
            Some(suffix) => dns_name(suffix).then(|| Self::Wildcard(suffix.to_owned())),
            None => dns_name(text).then(|| Self::Exact(text.to_owned())),
        }
    }

    /// A claim, lowercased; `None` for a host no request can carry (the
    /// libraries skip those anyway).
    fn of_claim(claim: Claim<'_>) -> Option<Self> {
        match claim {
            Claim::AnyHost => Some(Self::Any),
            Claim::Host(host) => Self::parse(&host.to_ascii_lowercase()),
        }
    }

    /// Every host `other` matches, this matches too (a pattern covers
    /// itself).
    fn covers(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Any, _) => true,
            (Self::Wildcard(s), Self::Exact(name)) => is_beneath(name, s),
            (Self::Wildcard(s), Self::Wildcard(t)) => t == s || is_beneath(t, s),
            (Self::Exact(a), Self::Exact(b)) => a == b,
            _ => false,
        }
    }

    /// Higher is more specific. Patterns covering one claim are nested, so
    /// this orders them.
    fn specificity(&self) -> (u8, usize) {
        match self {
            Self::Any => (0, 0),
            Self::Wildcard(suffix) => (1, suffix.len()),
            Self::Exact(name) => (2, name.len()),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Any => f.write_str("every host (*)"),
            Self::Wildcard(suffix) => write!(f, "*.{suffix}"),
            Self::Exact(name) => f.write_str(name),
        }
    }
}

/// `name` ends in `.suffix`.
fn is_beneath(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len() + 1
        && name.ends_with(suffix)
        && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
}

/// A lowercase DNS name (labels of letters, digits and `-`).
fn dns_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// A namespace pattern: a name with `*` for any run of characters.
fn namespace_pattern(pattern: &str) -> bool {
    !pattern.is_empty()
        && pattern.len() <= 63
        && pattern
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'*')
}

/// Glob match where `*` matches any run of characters (iterative, with
/// one backtrack point: linear enough for names of 63 characters).
fn glob(pattern: &str, name: &str) -> bool {
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// The rules holding one pattern, merged.
#[derive(Debug, Clone)]
struct Reservation {
    /// The first rule holding it (named in warnings).
    rule: usize,
    namespaces: Vec<String>,
}

impl Reservation {
    fn allows(&self, namespace: &str) -> bool {
        self.namespaces.iter().any(|p| glob(p, namespace))
    }
}

/// The checked policy. The default value allows every claim.
#[derive(Debug, Clone, Default)]
pub struct HostClaims {
    default: DefaultAction,
    /// Each pattern once, with the namespaces of every rule holding it.
    reserved: BTreeMap<Pattern, Reservation>,
}

impl HostClaims {
    /// The policy as written under `base`'s `hostClaims` (read by
    /// [`crate::Values::host_claims`]); no policy (every claim allowed)
    /// for `None` or `null`.
    pub fn from_written(tree: Option<&serde_json::Value>) -> Result<Self, PolicyError> {
        let Some(tree) = tree.filter(|tree| !tree.is_null()) else {
            return Ok(Self::default());
        };
        let written: HostClaimsValues = serde_json::from_value(tree.clone())
            .map_err(|error| PolicyError::Shape(error.to_string()))?;
        Self::new(&written)
    }

    /// Checks the written policy.
    pub fn new(written: &HostClaimsValues) -> Result<Self, PolicyError> {
        let mut reserved: BTreeMap<Pattern, Reservation> = BTreeMap::new();
        for (rule, values) in written.rules.iter().enumerate() {
            if values.hosts.is_empty() || values.namespaces.is_empty() {
                return Err(PolicyError::EmptyRule { rule });
            }
            if let Some(bad) = values.namespaces.iter().find(|n| !namespace_pattern(n)) {
                return Err(PolicyError::InvalidNamespace {
                    rule,
                    namespace: bad.clone(),
                });
            }
            for host in &values.hosts {
                let pattern = Pattern::parse(host).ok_or_else(|| PolicyError::InvalidHost {
                    rule,
                    host: host.clone(),
                })?;
                let entry = reserved.entry(pattern).or_insert_with(|| Reservation {
                    rule,
                    namespaces: Vec::new(),
                });
                for namespace in &values.namespaces {
                    if !entry.namespaces.contains(namespace) {
                        entry.namespaces.push(namespace.clone());
                    }
                }
            }
        }
        Ok(Self {
            default: written.default,
            reserved,
        })
    }

    /// Whether the policy restricts anything (libraries skip the checks
    /// when it does not).
    pub fn is_open(&self) -> bool {
        self.default == DefaultAction::Allow && self.reserved.is_empty()
    }

    /// Whether `namespace` may claim `claim`. A host that is not a DNS name
    /// or wildcard is not this policy's business (the libraries refuse it
    /// on their own) and is allowed here.
    pub fn check(&self, namespace: &str, claim: Claim<'_>) -> Result<(), Refusal> {
        if self.is_open() {
            return Ok(());
        }
        let Some(claimed) = Pattern::of_claim(claim) else {
            return Ok(());
        };
        let refused =
            |pattern: &Pattern, reservation: &Reservation, beneath: bool| Refusal::Reserved {
                claim: claim.to_string(),
                namespace: namespace.to_owned(),
                rule: reservation.rule,
                pattern: pattern.to_string(),
                namespaces: reservation.namespaces.join(", "),
                beneath,
            };
        let deciding = self
            .reserved
            .iter()
            .filter(|(pattern, _)| pattern.covers(&claimed))
            .max_by_key(|(pattern, _)| pattern.specificity());
        match deciding {
            Some((pattern, reservation)) if !reservation.allows(namespace) => {
                return Err(refused(pattern, reservation, false));
            }
            Some(_) => {}
            None if self.default == DefaultAction::Deny => {
                return Err(Refusal::Denied {
                    claim: claim.to_string(),
                    namespace: namespace.to_owned(),
                });
            }
            None => {}
        }
        // A wildcard or host-less claim serves what is reserved beneath it.
        if let Some((pattern, reservation)) = self.reserved.iter().find(|(pattern, r)| {
            **pattern != claimed && claimed.covers(pattern) && !r.allows(namespace)
        }) {
            return Err(refused(pattern, reservation, true));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

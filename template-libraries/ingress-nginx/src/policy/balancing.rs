//! The annotations of a whole backend: cookie affinity
//! (`affinity`, `session-cookie-*`), balancing (`load-balance`,
//! `upstream-hash-by`) and retries (`proxy-next-upstream*`). HAProxy sets
//! them per backend, so the first Ingress on a Service port decides
//! ([`crate::routing`]).

use crate::annotations::Annotations;
use crate::invalid;
use crate::parse;
use crate::parse::Invalid;
use crate::report::Status;

use super::{Affinity, Policy};

impl Policy {
    pub(super) fn read_backend(&mut self, a: &mut Annotations<'_>) {
        let cookie_names = [
            "affinity-mode",
            "affinity-canary-behavior",
            "session-cookie-name",
            "session-cookie-path",
            "session-cookie-max-age",
            "session-cookie-expires",
            "session-cookie-samesite",
            "session-cookie-secure",
            "session-cookie-domain",
            "session-cookie-conditional-samesite-none",
            "session-cookie-change-on-failure",
        ];
        match a.take("affinity") {
            Some((key, "cookie")) => {
                let mut cookie = Affinity {
                    name: "INGRESSCOOKIE".into(),
                    ..Affinity::default()
                };
                if let Some(name) = a.honoured("session-cookie-name", parse::cookie_name, |name| {
                    format!("the cookie is {name}")
                }) {
                    cookie.name = name;
                }
                if let Some(path) = a.honoured("session-cookie-path", parse::path, |path| {
                    format!("the cookie's Path is {path}")
                }) {
                    cookie.path = Some(path);
                }
                for name in ["session-cookie-max-age", "session-cookie-expires"] {
                    if let Some(seconds) = a.honoured(name, |v| parse::number(v, 1..=u64::from(u32::MAX)), |seconds| format!("the cookie lives {seconds} s (Max-Age; browsers prefer it to Expires)")) {
                        cookie.max_age = Some(cookie.max_age.map_or(seconds, |m| m.max(seconds)));
                    }
                }
                if let Some(same_site) = a.honoured(
                    "session-cookie-samesite",
                    |v| match v.trim() {
                        "None" | "Lax" | "Strict" => Ok(v.trim().to_owned()),
                        other => Err(invalid!("{other:?} is not None, Lax or Strict")),
                    },
                    |same_site| format!("the cookie's SameSite is {same_site}"),
                ) {
                    cookie.same_site = Some(same_site);
                }
                if let Some(secure) =
                    a.honoured("session-cookie-secure", parse::boolean, |&secure| {
                        if secure {
                            "the cookie is Secure".to_owned()
                        } else {
                            "the cookie is Secure on HTTPS requests only (ingress-nginx marks it so whenever the request came over TLS)".to_owned()
                        }
                    })
                {
                    cookie.secure = secure;
                }
                if let Some(domain) = a.honoured(
                    "session-cookie-domain",
                    |v| parse::host(v.trim_start_matches('.'), false),
                    |domain| format!("the cookie's Domain is {domain}"),
                ) {
                    cookie.domain = Some(domain);
                }
                if let Some((key, mode)) = a.take("affinity-mode") {
                    let status = match mode {
                        "persistent" => Status::Honoured("a client stays on its pod while the pod serves".into()),
                        "balanced" => Status::Differs("HAProxy keeps every pinned client on its pod (persistent); it does not move some to new pods when the Deployment scales up".into()),
                        other => Status::Invalid(format!("{other:?} is not balanced or persistent")),
                    };
                    a.record(key, status);
                }
                if let Some((key, change)) =
                    a.parsed("session-cookie-change-on-failure", parse::boolean)
                {
                    a.record(key, if change {
                        Status::Honoured("a request whose pod fails is sent to another pod, which then sets the cookie (option redispatch)".into())
                    } else {
                        Status::Differs("base's option redispatch moves a client whose pod fails to another pod, as with true".into())
                    });
                }
                a.record(key, Status::Differs(format!("HAProxy inserts cookie {} (dynamic per pod, HttpOnly) and sends a client back to its pod while that pod serves. Difference: HAProxy keeps a cookie per Service port, not per Ingress path, so another Ingress of the same Service port (without affinity) pins its clients too, and the first Ingress to set affinity on the port decides its attributes", cookie.name)));
                self.affinity = Some(cookie);
            }
            Some((key, other)) => {
                a.record(
                    key,
                    Status::Invalid(format!("{other:?}: cookie is the only affinity")),
                );
            }
            None => {}
        }
        if self.affinity.is_none() {
            a.not_honoured(&cookie_names, "affinity is not cookie on this Ingress");
        }
        if let Some((key, (conditions, dropped))) = a.parsed("proxy-next-upstream", retry_on) {
            let text = format!(
                "HAProxy retries on another pod on: retry-on {conditions} (a request whose body outgrows HAProxy's buffer is not retried)"
            );
            a.record(
                key,
                if dropped.is_empty() {
                    Status::Honoured(text)
                } else {
                    Status::Differs(format!(
                        "{text}; HAProxy cannot retry on {}",
                        dropped.join(", ")
                    ))
                },
            );
            self.retry_on = Some(conditions);
        }
        if let Some((key, tries)) =
            a.parsed("proxy-next-upstream-tries", |v| parse::number(v, 0..=100))
        {
            if tries == 0 {
                a.record(
                    key,
                    Status::Differs("0 (no limit in nginx): HAProxy keeps base's retries".into()),
                );
            } else {
                a.record(
                    key,
                    Status::Honoured(format!("at most {tries} tries: retries {}", tries - 1)),
                );
                self.retries = Some(tries - 1);
            }
        }
        if let Some(balance) = a.honoured("upstream-hash-by", upstream_hash, |balance| {
            format!("consistent hashing: balance {balance}")
        }) {
            self.balance = Some(format!("{balance}\n    hash-type consistent"));
        }
        if let Some((key, algorithm)) = a.take("load-balance") {
            let (status, balance) = match algorithm.trim() {
                "round_robin" => (Status::Honoured("balance roundrobin".into()), Some("roundrobin")),
                "ewma" => (Status::Differs("balance leastconn: HAProxy picks the pod with the fewest connections, nginx's ewma the lowest moving average of latency".into()), Some("leastconn")),
                other => (Status::Invalid(format!("{other:?} is not round_robin or ewma")), None),
            };
            if self.balance.is_some() && balance.is_some() {
                a.record(
                    key,
                    Status::NotHonoured(
                        "upstream-hash-by is set and wins, as in ingress-nginx".into(),
                    ),
                );
            } else {
                a.record(key, status);
                self.balance = balance.map(str::to_owned);
            }
        }
    }
}

/// `proxy-next-upstream`'s conditions as HAProxy's `retry-on` words, and
/// the ones HAProxy cannot retry on.
fn retry_on(value: &str) -> Result<(String, Vec<String>), Invalid> {
    let mut words: Vec<&str> = Vec::new();
    let mut dropped = Vec::new();
    for condition in value.split_whitespace() {
        let mapped: &[&str] = match condition {
            "off" => &["none"],
            "error" => &["conn-failure", "empty-response"],
            "timeout" => &["conn-failure", "response-timeout"],
            "invalid_header" => &["junk-response"],
            "http_403" => &["403"],
            "http_404" => &["404"],
            "http_500" => &["500"],
            "http_502" => &["502"],
            "http_503" => &["503"],
            "http_504" => &["504"],
            // HAProxy 3.0 retries on 429 (2.6 could not).
            "http_429" => &["429"],
            "non_idempotent" => {
                dropped.push(condition.to_owned());
                &[]
            }
            other => {
                return Err(invalid!(
                    "{other:?} is not one of error, timeout, invalid_header, http_403, http_404, http_429, http_500, http_502, http_503, http_504, non_idempotent, off"
                ));
            }
        };
        for word in mapped {
            if !words.contains(word) {
                words.push(word);
            }
        }
    }
    if words.contains(&"none") {
        words = vec!["none"];
    }
    if words.is_empty() {
        return Err(invalid!(
            "{value:?} names no condition HAProxy can retry on"
        ));
    }
    Ok((words.join(" "), dropped))
}

/// `upstream-hash-by`'s nginx variable as a `balance` algorithm.
fn upstream_hash(value: &str) -> Result<String, Invalid> {
    let text = value.trim();
    let named = |prefix: &str| {
        text.strip_prefix(prefix)
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    };
    Ok(match text {
        "$request_uri" => "uri whole".to_owned(),
        "$uri" => "uri".to_owned(),
        "$remote_addr" | "$binary_remote_addr" => "source".to_owned(),
        "$host" | "$http_host" => "hdr(host)".to_owned(),
        _ => {
            if let Some(header) = named("$http_") {
                format!("hdr({})", header.replace('_', "-"))
            } else if let Some(arg) = named("$arg_") {
                format!("url_param {arg}")
            } else {
                return Err(invalid!(
                    "{text:?}: haptic hashes by $request_uri, $uri, $remote_addr, $host, $http_<header> or $arg_<name>"
                ));
            }
        }
    })
}

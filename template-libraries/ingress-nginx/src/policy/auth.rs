//! `auth-type: basic` and its `auth-secret*`, `auth-realm`: users from a
//! Secret of the Ingress's namespace. `auth-url` and its companions: the
//! agent beside HAProxy asks the auth service about each request
//! (`haptic_sdk::agent`, docs/spoa.md).

use haptic_sdk::agent::{AuthCache, ExternalAuth, check_variables, is_safe_header_name};

use crate::annotations::Annotations;
use crate::invalid;
use crate::parse::{self, Invalid};
use crate::report::{Finding, Status};

use super::{BasicAuth, Policy};

impl Policy {
    pub(super) fn read_auth(&mut self, a: &mut Annotations<'_>) {
        let names = ["auth-secret", "auth-secret-type", "auth-realm"];
        match a.take("auth-type") {
            Some((key, "basic")) => {
                let secret = a.parsed("auth-secret", |v| {
                    let name = v.trim();
                    let good = !name.is_empty()
                        && name.len() <= 253
                        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
                    if good {
                        Ok(name.to_owned())
                    } else {
                        Err(invalid!("{name:?} is not the name of a Secret in the Ingress's namespace (haptic reads no Secret of another namespace)"))
                    }
                });
                let Some((secret_key, secret)) = secret else {
                    a.record(key, Status::Invalid("auth-secret is missing or invalid: no users to check, so nothing is applied".into()));
                    a.not_honoured(&names[1..], "auth-secret is missing or invalid");
                    return;
                };
                a.record(secret_key, Status::Differs(format!("the users of Secret {secret} (type Opaque), in a userlist; a hash HAProxy's crypt(3) cannot compute (htpasswd -m's $apr1$, which ingress-nginx accepts) leaves its user out with a warning: make hashes with htpasswd -B or mkpasswd -m sha-512")));
                let mut map = false;
                if let Some((key, kind)) = a.take("auth-secret-type") {
                    let status = match kind.trim() {
                        "auth-file" => Status::Honoured("htpasswd lines under the key auth".into()),
                        "auth-map" => {
                            map = true;
                            Status::Honoured("one key per user, its value the hash".into())
                        }
                        other => Status::Invalid(format!(
                            "{other:?} is not auth-file or auth-map; auth-file is used"
                        )),
                    };
                    a.record(key, status);
                }
                let mut realm = String::new();
                if let Some((key, text)) = a.take("auth-realm") {
                    if text
                        .chars()
                        .any(|c| c.is_control() || c == '\'' || c == '"')
                    {
                        a.record(
                            key,
                            Status::Invalid(format!(
                                "{text:?}: a realm without quotes or control characters"
                            )),
                        );
                    } else {
                        realm = text.trim().to_owned();
                        a.record(key, Status::Honoured(format!("the realm is {realm:?}")));
                    }
                }
                a.record(key, Status::Honoured("requests without valid credentials are answered 401 with WWW-Authenticate: Basic".into()));
                self.auth = Some(BasicAuth { secret, map, realm });
            }
            Some((key, other)) => {
                let why = if other == "digest" {
                    "digest authentication has no HAProxy counterpart".to_owned()
                } else {
                    format!("{other:?} is not basic or digest")
                };
                a.record(key, Status::NotHonoured(why));
                a.not_honoured(&names, "auth-type is not basic");
            }
            None => {
                a.not_honoured(&names, "auth-type is not set to basic on this Ingress");
            }
        }
    }
}

/// The annotations of external authentication besides `auth-url`.
const EXTERNAL: &[&str] = &[
    "auth-method",
    "auth-signin",
    "auth-signin-redirect-param",
    "auth-response-headers",
    "auth-request-redirect",
    "auth-cache-key",
    "auth-cache-duration",
    "auth-always-set-cookie",
    "auth-keepalive",
    "auth-keepalive-share-vars",
    "auth-keepalive-requests",
    "auth-keepalive-timeout",
];

/// An `auth-url`/`auth-signin` URL: http(s), with only variables the agent
/// expands.
fn auth_url(value: &str) -> Result<String, Invalid> {
    let url = parse::url(value)?;
    check_variables(&url).map_err(|why| invalid!("{url:?}: {why}"))?;
    Ok(url)
}

/// `auth-cache-duration`: status codes then a time (`200 202 401 5m`);
/// a time alone keeps 200, 301 and 302 answers, as nginx's
/// `proxy_cache_valid`.
fn cache_duration(value: &str) -> Result<(Vec<u16>, u64), Invalid> {
    let words: Vec<&str> = value.split_whitespace().collect();
    let Some((time, codes)) = words.split_last() else {
        return Err(invalid!(
            "{value:?} is empty; write codes then a time, e.g. \"200 202 401 5m\""
        ));
    };
    let (digits, unit) = time.split_at(
        time.find(|c: char| !c.is_ascii_digit())
            .unwrap_or(time.len()),
    );
    let multiplier = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(invalid!("{time:?} is not a time (30s, 5m, 1h, 1d)")),
    };
    let seconds = digits
        .parse::<u64>()
        .ok()
        .filter(|n| (1..=7 * 86_400).contains(&(n * multiplier)))
        .ok_or_else(|| invalid!("{time:?} is not a time from 1s to 7d"))?
        * multiplier;
    let statuses = if codes.is_empty() {
        vec![200, 301, 302]
    } else {
        codes
            .iter()
            .map(|code| {
                code.parse::<u16>()
                    .ok()
                    .filter(|c| (100..=599).contains(c))
                    .ok_or_else(|| invalid!("{code:?} is not an HTTP status"))
            })
            .collect::<Result<_, _>>()?
    };
    Ok((statuses, seconds))
}

impl Policy {
    pub(super) fn read_external_auth(&mut self, a: &mut Annotations<'_>, namespace: &str) {
        if let Some(on) = a.honoured("enable-global-auth", parse::boolean, |on| {
            if *on {
                "the global auth-url (values globalAuth) is asked for this Ingress's requests unless it has an auth-url of its own (the default)".to_owned()
            } else {
                "the global auth-url (values globalAuth) is not asked for this Ingress's requests".to_owned()
            }
        }) {
            self.global_auth &= on;
        }
        let Some((url_key, raw)) = a.take("auth-url") else {
            a.not_honoured(EXTERNAL, "auth-url is not set on this Ingress");
            a.not_honoured(
                &["auth-proxy-set-headers"],
                "auth-url is not set on this Ingress",
            );
            return;
        };
        let url = match auth_url(raw) {
            Ok(url) => url,
            Err(why) => {
                // Fail closed: an Ingress that asked for authentication is
                // never served without it (ingress-nginx drops the
                // annotation and serves it open).
                a.record(
                    url_key,
                    Status::Invalid(format!(
                        "{}; every request of this Ingress is answered 500 until it is fixed",
                        why.into_reason()
                    )),
                );
                a.not_honoured(EXTERNAL, "auth-url is not valid");
                a.not_honoured(&["auth-proxy-set-headers"], "auth-url is not valid");
                self.external_auth_refused = true;
                return;
            }
        };
        a.record(url_key, Status::Differs(format!("haptic's agent (beside each HAProxy, through an SPOE filter) asks {url} about every request with ingress-nginx's headers (X-Original-URL, X-Original-Method, X-Auth-Request-Redirect, X-Forwarded-*, the client's headers and cookies, no body): 2xx lets it through, 401 and 403 are answered as such, anything else or no answer within 5 s is a 500")));
        let mut auth = ExternalAuth::new(url);
        if let Some(method) = a.honoured(
            "auth-method",
            |v| {
                let method = v.trim().to_ascii_uppercase();
                if !method.is_empty()
                    && method.len() <= 16
                    && method.bytes().all(|b| b.is_ascii_uppercase())
                {
                    Ok(method)
                } else {
                    Err(invalid!("{v:?} is not an HTTP method"))
                }
            },
            |m| format!("the sub-request's method is {m}"),
        ) {
            auth.method = method;
        }
        auth.signin = a.honoured("auth-signin", auth_url, |s| {
            format!("a 401 sends the client to {s} (302), with the original URL in its redirect parameter unless the URL has one")
        });
        if let Some(param) = a.honoured(
            "auth-signin-redirect-param",
            |v| {
                let text = v.trim();
                if !text.is_empty()
                    && text.len() <= 64
                    && text
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    Ok(text.to_owned())
                } else {
                    Err(invalid!(
                        "{v:?} is not a query parameter name (letters, digits, _ and -)"
                    ))
                }
            },
            |p| format!("the sign-in URL carries the original URL in {p}"),
        ) {
            auth.signin_redirect_param = param;
        }
        if let Some((key, value)) = a.take("auth-response-headers") {
            let (good, bad): (Vec<String>, Vec<String>) = value
                .split(',')
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .partition(|h| is_safe_header_name(h));
            let status = if bad.is_empty() {
                Status::Differs(format!(
                    "{} are copied from a 2xx answer to the request sent upstream; the client's own are dropped on every authenticated route",
                    good.join(", ")
                ))
            } else {
                Status::Invalid(format!(
                    "{} left out: a header name haptic writes is letters, digits and -; {} are copied",
                    bad.join(", "),
                    if good.is_empty() {
                        "none".to_owned()
                    } else {
                        good.join(", ")
                    }
                ))
            };
            a.record(key, status);
            auth.response_headers = good;
        }
        auth.request_redirect = a.honoured(
            "auth-request-redirect",
            |v| {
                let text = v.trim().to_owned();
                check_variables(&text).map_err(|why| invalid!("{text:?}: {why}"))?;
                Ok(text)
            },
            |r| format!("X-Auth-Request-Redirect is {r:?}"),
        );
        let cache_key = a.parsed("auth-cache-key", |v| {
            let text = v.trim().to_owned();
            if text.is_empty() {
                return Err(invalid!(
                    "an empty cache key would share one answer among every client"
                ));
            }
            check_variables(&text).map_err(|why| invalid!("{text:?}: {why}"))?;
            Ok(text)
        });
        let duration = a.parsed("auth-cache-duration", cache_duration);
        match (cache_key, duration) {
            (Some((key_key, key)), duration) => {
                let (statuses, seconds) = duration
                    .as_ref()
                    .map_or((vec![200, 202, 401], 300), |(_, d)| d.clone());
                a.record(
                    key_key,
                    Status::Honoured(format!(
                        "the agent keeps answers per {key:?}, bounded to 10,000 across the pod"
                    )),
                );
                if let Some((duration_key, _)) = duration {
                    a.record(
                        duration_key,
                        Status::Honoured(format!("statuses {statuses:?} kept {seconds} s")),
                    );
                }
                auth.cache = Some(AuthCache {
                    key,
                    statuses,
                    seconds,
                });
            }
            (None, Some((duration_key, _))) => {
                a.record(
                    duration_key,
                    Status::NotHonoured("auth-cache-key is not set: nothing is cached".into()),
                );
            }
            (None, None) => {}
        }
        if let Some(always) = a.honoured("auth-always-set-cookie", parse::boolean, |on| {
            if *on {
                "the auth service's Set-Cookie reaches the client whatever it answered".into()
            } else {
                "the auth service's Set-Cookie reaches the client when access is granted".into()
            }
        }) {
            auth.always_set_cookie = always;
        }
        if let Some((key, name)) = super::upstream::own_namespace_object(
            a,
            "auth-proxy-set-headers",
            "ConfigMap",
            namespace,
        ) {
            a.record(key, Status::Honoured(format!("the data of ConfigMap {namespace}/{name} are added to the auth sub-request as headers")));
            self.auth_proxy_headers = Some(name);
        }
        read_auth_keepalive(a, &mut auth);
        self.external_auth = Some(auth);
    }
}

/// `auth-keepalive*`: the agent's pool of connections to auth services is
/// its own (up to 64 idle per host, each kept 60 s); `0` connections closes
/// each after its sub-request, as nginx does without keepalive.
fn read_auth_keepalive(a: &mut Annotations<'_>, auth: &mut ExternalAuth) {
    const POOL: &str = "the agent keeps its own pool of connections to each auth service host (up to 64 idle, each kept 60 s)";
    if let Some((key, n)) = a.parsed("auth-keepalive", |v| parse::number(v, 0..=1_000_000)) {
        let status = if n == 0 {
            auth.keep_alive = false;
            Status::Honoured(
                "0: the agent closes its connection to the auth service after each sub-request"
                    .to_owned(),
            )
        } else {
            Status::Differs(format!(
                "{n}: {POOL}, not {n} per Ingress; 0 would close each connection"
            ))
        };
        a.record(key, status);
    }
    if let Some((key, n)) = a.parsed("auth-keepalive-requests", |v| {
        parse::number(v, 1..=u64::from(u32::MAX))
    }) {
        a.record(
            key,
            Status::Differs(format!(
                "{POOL}; a kept connection serves any number of sub-requests, not at most {n}"
            )),
        );
    }
    if let Some((key, n)) = a.parsed("auth-keepalive-timeout", |v| parse::number(v, 1..=86_400)) {
        a.record(
            key,
            Status::Differs(format!(
                "{POOL}; an idle connection is kept 60 s, not {n} s"
            )),
        );
    }
    if let Some((key, _)) = a.parsed("auth-keepalive-share-vars", parse::boolean) {
        a.record(key, Status::Differs("the sub-request carries the client's headers as the client sent them (X-Request-ID among them when it sent one); nginx variables set while routing are not shared".to_owned()));
    }
}

/// What the values' `globalAuth` (ingress-nginx's `global-auth-*`
/// ConfigMap keys) come to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GlobalAuth {
    /// No `global-auth-url`.
    #[default]
    None,
    /// Asked for every Ingress that takes it ([`Policy::take_global_auth`]).
    Ask(Box<ExternalAuth>),
    /// `global-auth-url` is not valid: every Ingress it would cover is
    /// answered 500 until it is fixed (fails closed).
    Refused,
}

/// Reads `global-auth-*` keys (values `globalAuth`) with the reader of the
/// `auth-*` annotations, so a key means what its annotation means; the
/// findings name the keys (`global-auth-method`), for the warnings.
pub fn read_global_auth(
    keys: &std::collections::BTreeMap<String, String>,
) -> (GlobalAuth, Vec<Finding>) {
    const PREFIX: &str = "values.globalAuth";
    let mut findings = Vec::new();
    let mut renamed = Vec::new();
    for (key, value) in keys {
        match key.strip_prefix("global-") {
            Some(name) if name.starts_with("auth-") && name != "auth-proxy-set-headers" => {
                renamed.push((format!("{PREFIX}/{name}"), value.clone()));
            }
            _ => findings.push(Finding {
                // Quoted unless plainly a key name: it reaches a warning.
                annotation: if key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    key.clone()
                } else {
                    format!("{key:?}")
                },
                status: Status::NotHonoured("not one of ingress-nginx's global-auth-* keys (global-auth-url, -method, -signin, -signin-redirect-param, -response-headers, -request-redirect, -cache-key, -cache-duration, -always-set-cookie)".to_owned()),
            }),
        }
    }
    if renamed.is_empty() {
        return (GlobalAuth::None, findings);
    }
    let mut a = Annotations::new(renamed.iter().map(|(k, v)| (k, v)), PREFIX);
    let mut policy = Policy::default();
    policy.read_external_auth(&mut a, "");
    findings.extend(a.finish().into_iter().map(|finding| Finding {
        annotation: format!("global-{}", finding.annotation),
        ..finding
    }));
    let auth = match (policy.external_auth, policy.external_auth_refused) {
        (Some(auth), _) => GlobalAuth::Ask(Box::new(auth)),
        (None, true) => GlobalAuth::Refused,
        (None, false) => GlobalAuth::None,
    };
    (auth, findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_keys_read_as_their_annotations_and_odd_keys_are_named() {
        let keys = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let (auth, findings) = read_global_auth(&keys(&[
            ("global-auth-url", "https://auth.example/check"),
            ("global-auth-method", "post"),
            ("global-auth-snippet", "return 200;"),
            ("auth-url", "https://elsewhere/"),
        ]));
        let GlobalAuth::Ask(profile) = auth else {
            panic!("not asked: {auth:?}");
        };
        assert_eq!(
            (profile.url.as_str(), profile.method.as_str()),
            ("https://auth.example/check", "POST")
        );
        let named: Vec<&str> = findings.iter().map(|f| f.annotation.as_str()).collect();
        assert!(named.contains(&"auth-url"), "{named:?}");
        assert!(named.contains(&"global-auth-snippet"), "{named:?}");
        assert!(named.contains(&"global-auth-url"), "{named:?}");
        let (refused, _) = read_global_auth(&keys(&[("global-auth-url", "ftp://x")]));
        assert_eq!(refused, GlobalAuth::Refused);
        assert_eq!(read_global_auth(&keys(&[])).0, GlobalAuth::None);
    }

    #[test]
    fn cache_durations_read_as_nginx_reads_them() {
        assert_eq!(
            cache_duration("200 202 401 5m").ok(),
            Some((vec![200, 202, 401], 300))
        );
        assert_eq!(cache_duration("30s").ok(), Some((vec![200, 301, 302], 30)));
        assert_eq!(cache_duration("200 1h").ok(), Some((vec![200], 3_600)));
        // A bare number is a time in seconds, as nginx reads it.
        assert_eq!(cache_duration("200").ok(), Some((vec![200, 301, 302], 200)));
        for bad in ["", "5x", "999 5m", "200 0s", "200 8d"] {
            assert!(cache_duration(bad).is_err(), "{bad:?}");
        }
    }
}

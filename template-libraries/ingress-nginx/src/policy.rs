//! One Ingress's annotations read into a typed [`Policy`], with a
//! [`Finding`] for every annotation, and the policy written as HAProxy
//! rules on the requests that Ingress routes (`txn.haptic_ingress`).
//!
//! The rules follow nginx's phases: redirects (rewrite phase) before the
//! request limits (preaccess) before source ranges (access) before the
//! body size (read while the body arrives); then the headers sent to the
//! backend and its timeout.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use haptic_sdk::haproxy;
use haptic_sdk::ingress::matched_ingress_acl;
use haptic_sdk::names::{quote, sanitize};

use crate::catalogue;
use crate::lines;
use crate::parse::{self, log_format_literal};
use crate::regex;
use crate::report::{Finding, Status};
use crate::rewrites::Rewrites;
use crate::tls::{self, BackendTls, ClientAuth, Protocol};

/// ACME HTTP-01 challenges are never redirected (certificates must renew).
const ACME: &str = "!{ path_beg /.well-known/acme-challenge/ }";

/// An Ingress's annotations under the prefix, taken one by one as the
/// policy reads them; whatever is left is reported from the catalogue.
pub struct Annotations<'a> {
    values: BTreeMap<String, &'a str>,
    findings: Vec<Finding>,
}

impl<'a> Annotations<'a> {
    /// The annotations of `all` under `prefix` (`nginx.ingress.kubernetes.io`).
    pub fn new(all: impl IntoIterator<Item = (&'a String, &'a String)>, prefix: &str) -> Self {
        let values = all
            .into_iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix(prefix)?.strip_prefix('/')?;
                Some((name.to_owned(), v.as_str()))
            })
            .collect();
        Self {
            values,
            findings: Vec::new(),
        }
    }

    /// Whether the Ingress carries any of them.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.findings.is_empty()
    }

    pub(crate) fn take(&mut self, name: &str) -> Option<(String, &'a str)> {
        self.values.remove_entry(name)
    }

    pub(crate) fn record(&mut self, annotation: String, status: Status) {
        self.findings.push(Finding { annotation, status });
    }

    /// Parses one annotation: `None` when absent or invalid (then recorded
    /// as invalid); the caller records the verdict of a good value.
    pub(crate) fn parsed<T>(
        &mut self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<(String, T)> {
        let (key, value) = self.take(name)?;
        match parse(value) {
            Ok(parsed) => Some((key, parsed)),
            Err(why) => {
                self.record(key, Status::Invalid(why));
                None
            }
        }
    }

    /// Every annotation's verdict, the unread ones from the catalogue.
    pub fn finish(mut self) -> Vec<Finding> {
        for (name, _) in std::mem::take(&mut self.values) {
            let why = catalogue::not_honoured(&name).map_or_else(
                || {
                    "haptic does not know this annotation (not one of ingress-nginx's, or misspelt)"
                        .to_owned()
                },
                str::to_owned,
            );
            self.record(name, Status::NotHonoured(why));
        }
        self.findings
            .sort_by(|a, b| a.annotation.cmp(&b.annotation));
        self.findings
    }
}

/// Requests per client over a window, and concurrent connections.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Limits {
    pub rps: Option<u64>,
    pub rpm: Option<u64>,
    pub connections: Option<u64>,
    /// Sources never limited (`limit-whitelist`).
    pub exempt: Vec<String>,
}

/// `canary: "true"`: how requests choose this Ingress's backend over the
/// main Ingress's for the same host and path (precedence: header, cookie,
/// weight, as in ingress-nginx).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Canary {
    pub header: Option<String>,
    pub header_value: Option<String>,
    /// A checked regex, matched against the whole header value.
    pub header_pattern: Option<String>,
    pub cookie: Option<String>,
    pub weight: u64,
    pub total: u64,
}

/// `enable-cors` and its `cors-*`, ingress-nginx's defaults filled in.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cors {
    /// Allowed origins (`None`: any, `*`); a `*.` in one stands for a label.
    pub origins: Option<Vec<String>>,
    pub methods: String,
    pub headers: String,
    pub expose: Option<String>,
    pub credentials: bool,
    pub max_age: u64,
}

/// `auth-type: basic`: users from a Secret of the Ingress's namespace.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BasicAuth {
    pub secret: String,
    /// `auth-map`: a key per user; else `auth-file`: htpasswd lines in `auth`.
    pub map: bool,
    pub realm: String,
}

/// `affinity: cookie` and its `session-cookie-*`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Affinity {
    pub name: String,
    pub path: Option<String>,
    pub max_age: Option<u64>,
    pub same_site: Option<String>,
    pub secure: bool,
    pub domain: Option<String>,
}

/// What the annotations of one Ingress ask for, typed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Paths are regexes (`use-regex`, or implied by `rewrite-target`).
    pub regex_paths: bool,
    /// The `replace-path` replacement (`\2`), checked.
    pub rewrite: Option<String>,
    /// Redirect plain HTTP to HTTPS for the Ingress's TLS hosts.
    pub ssl_redirect: bool,
    /// ... for all its hosts.
    pub force_ssl_redirect: bool,
    /// `permanent-redirect` / `temporal-redirect`: URL and code.
    pub redirect: Option<(String, u16)>,
    /// `app-root`: where `/` redirects (302).
    pub app_root: Option<String>,
    /// `from-to-www-redirect`.
    pub from_to_www: bool,
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
    /// Largest request body in bytes.
    pub body_size: Option<u64>,
    /// `timeout server` for the Ingress's requests, seconds.
    pub server_timeout: Option<u64>,
    pub forwarded_prefix: Option<String>,
    pub upstream_vhost: Option<String>,
    /// Extra hosts served like the Ingress's own (`server-alias`).
    pub aliases: Vec<String>,
    pub limits: Limits,
    /// This is a canary Ingress.
    pub canary: Option<Canary>,
    pub affinity: Option<Affinity>,
    /// A `balance` line (`load-balance`, `upstream-hash-by`).
    pub balance: Option<String>,
    pub cors: Option<Cors>,
    /// `custom-headers`: the ConfigMap, in the Ingress's namespace, whose
    /// data are headers set on the answers ([`crate::custom_headers`]).
    pub custom_headers: Option<String>,
    /// `default-backend`: the Service, in the Ingress's namespace, that
    /// takes this Ingress's requests while their own Service has no ready
    /// endpoint.
    pub default_backend: Option<String>,
    pub auth: Option<BasicAuth>,
    /// `retry-on` conditions (`proxy-next-upstream`).
    pub retry_on: Option<String>,
    /// `retries` (`proxy-next-upstream-tries` minus the first try).
    pub retries: Option<u64>,
    /// `ssl-passthrough` (with `sslPassthrough.enabled`): TLS connections
    /// for the Ingress's hosts go undecrypted to the Service
    /// ([`crate::passthrough`]).
    pub ssl_passthrough: bool,
    /// `service-upstream`: route to the Service's cluster IP, not its
    /// endpoints.
    pub service_upstream: bool,
    /// `timeout connect` of the backend, seconds (`proxy-connect-timeout`).
    pub connect_timeout: Option<u64>,
    /// How HAProxy speaks to the pods (`backend-protocol`).
    pub protocol: Protocol,
    /// `proxy-ssl-*` (with a TLS protocol and `proxy-ssl-secret`).
    pub backend_tls: Option<BackendTls>,
    /// `auth-tls-*` (with `auth-tls-secret`).
    pub client_auth: Option<ClientAuth>,
    /// `proxy-cookie-*`, `proxy-redirect-*`: the backend's answers
    /// rewritten.
    pub rewrites: Rewrites,
}

impl Policy {
    /// Reads the annotations; `paths` are the Ingress's paths (for the
    /// capture groups a rewrite target may use), `namespace` the Ingress's
    /// (Secrets of another are not read); `passthrough_on`: whether the
    /// values turn on TLS passthrough. Unread annotations stay in
    /// `annotations` for [`Annotations::finish`].
    pub fn read(
        a: &mut Annotations<'_>,
        paths: &[&str],
        namespace: &str,
        passthrough_on: bool,
    ) -> Self {
        let mut p = Self::default();
        if p.read_passthrough(a, passthrough_on) {
            // TLS is not terminated, so nothing HTTP applies to those
            // connections; ingress-nginx ignores the other annotations.
            for (name, _) in std::mem::take(&mut a.values) {
                a.record(name, Status::NotHonoured("ignored on an ssl-passthrough Ingress, as in ingress-nginx: its TLS connections are not decrypted".into()));
            }
            return p;
        }
        p.read_canary(a);
        p.read_backend(a);
        (p.protocol, p.backend_tls) = tls::read_backend(a, namespace);
        if p.canary.is_some() {
            // ingress-nginx ignores a canary's other annotations: the main
            // Ingress's apply to its requests.
            for (name, _) in std::mem::take(&mut a.values) {
                a.record(name, Status::NotHonoured("ignored on a canary Ingress, as in ingress-nginx: the main Ingress's annotations apply to the canary's requests".into()));
            }
            return p;
        }
        p.read_paths(a, paths);
        p.read_cors(a);
        p.read_custom_headers(a, namespace);
        p.read_default_backend(a, namespace);
        p.read_auth(a);
        p.client_auth = tls::read_client_auth(a, namespace);
        p.read_redirects(a);
        p.read_access(a);
        p.read_upstream(a);
        p.rewrites = Rewrites::read(a);
        p
    }

    /// `ssl-passthrough`; whether it is on for this Ingress.
    fn read_passthrough(&mut self, a: &mut Annotations<'_>, passthrough_on: bool) -> bool {
        let Some((key, on)) = a.parsed("ssl-passthrough", parse::boolean) else {
            return false;
        };
        let status = match (on, passthrough_on) {
            (false, _) => Status::Honoured("TLS is terminated by HAProxy".into()),
            (true, false) => Status::NotHonoured("templateLibraries.ingressNginx.sslPassthrough.enabled is false (ingress-nginx's --enable-ssl-passthrough); HAProxy terminates TLS for this Ingress".into()),
            (true, true) => Status::Differs("TLS connections for the Ingress's hosts go by SNI, undecrypted, to the cluster IP of the Service of path / (frontend ingress-nginx-passthrough, mode tcp), as in ingress-nginx; the readiness gate does not vouch for pods reached this way".into()),
        };
        a.record(key, status);
        self.ssl_passthrough = on && passthrough_on;
        self.ssl_passthrough
    }

    fn read_canary(&mut self, a: &mut Annotations<'_>) {
        let names = [
            "canary-by-header",
            "canary-by-header-value",
            "canary-by-header-pattern",
            "canary-by-cookie",
            "canary-weight",
            "canary-weight-total",
        ];
        let on = a.parsed("canary", parse::boolean);
        let Some((key, true)) = on else {
            if let Some((key, false)) = on {
                a.record(
                    key,
                    Status::Honoured("not a canary: routed as its own Ingress".into()),
                );
            }
            for name in names {
                if let Some((key, _)) = a.take(name) {
                    a.record(
                        key,
                        Status::NotHonoured("canary is not \"true\" on this Ingress".into()),
                    );
                }
            }
            return;
        };
        a.record(key, Status::Honoured("a canary: its paths take requests from the main Ingress of the same host and path by header, cookie, then weight".into()));
        let mut c = Canary {
            total: 100,
            ..Canary::default()
        };
        if let Some((key, total)) =
            a.parsed("canary-weight-total", |v| parse::number(v, 1..=1_000_000))
        {
            a.record(key, Status::Honoured(format!("weights are out of {total}")));
            c.total = total;
        }
        if let Some((key, weight)) = a.parsed("canary-weight", |v| parse::number(v, 0..=1_000_000))
        {
            if weight > c.total {
                a.record(
                    key,
                    Status::Invalid(format!("{weight} is above canary-weight-total {}", c.total)),
                );
            } else {
                a.record(
                    key,
                    Status::Honoured(format!(
                        "{weight} of {} requests (rand) go to the canary",
                        c.total
                    )),
                );
                c.weight = weight;
            }
        }
        if let Some((key, header)) = a.parsed("canary-by-header", header_name) {
            a.record(
                key,
                Status::Honoured(format!(
                    "{header}: always sends a request to the canary, never keeps it away"
                )),
            );
            c.header = Some(header);
        }
        if let Some((key, value)) = a.parsed("canary-by-header-value", plain_word) {
            a.record(
                key,
                Status::Honoured(format!(
                    "the header equal to {value} sends a request to the canary"
                )),
            );
            c.header_value = Some(value);
        }
        if let Some((key, pattern)) = a.parsed("canary-by-header-pattern", regex::pattern) {
            let status = if c.header_value.is_some() {
                Status::NotHonoured(
                    "canary-by-header-value is set and wins, as in ingress-nginx".into(),
                )
            } else {
                c.header_pattern = Some(pattern);
                Status::Honoured(
                    "a header matching the PCRE2 pattern sends a request to the canary".into(),
                )
            };
            a.record(key, status);
        }
        if let Some((key, cookie)) = a.parsed("canary-by-cookie", parse::cookie_name) {
            a.record(
                key,
                Status::Honoured(format!(
                    "cookie {cookie}=always sends a request to the canary, never keeps it away"
                )),
            );
            c.cookie = Some(cookie);
        }
        self.canary = Some(c);
    }

    fn read_backend(&mut self, a: &mut Annotations<'_>) {
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
                if let Some((key, name)) = a.parsed("session-cookie-name", parse::cookie_name) {
                    a.record(key, Status::Honoured(format!("the cookie is {name}")));
                    cookie.name = name;
                }
                if let Some((key, path)) = a.parsed("session-cookie-path", parse::path) {
                    a.record(
                        key,
                        Status::Honoured(format!("the cookie's Path is {path}")),
                    );
                    cookie.path = Some(path);
                }
                for name in ["session-cookie-max-age", "session-cookie-expires"] {
                    if let Some((key, seconds)) =
                        a.parsed(name, |v| parse::number(v, 1..=u64::from(u32::MAX)))
                    {
                        a.record(key, Status::Honoured(format!("the cookie lives {seconds} s (Max-Age; browsers prefer it to Expires)")));
                        cookie.max_age = Some(cookie.max_age.map_or(seconds, |m| m.max(seconds)));
                    }
                }
                if let Some((key, same_site)) =
                    a.parsed("session-cookie-samesite", |v| match v.trim() {
                        "None" | "Lax" | "Strict" => Ok(v.trim().to_owned()),
                        other => Err(format!("{other:?} is not None, Lax or Strict")),
                    })
                {
                    a.record(
                        key,
                        Status::Honoured(format!("the cookie's SameSite is {same_site}")),
                    );
                    cookie.same_site = Some(same_site);
                }
                if let Some((key, secure)) = a.parsed("session-cookie-secure", parse::boolean) {
                    a.record(
                        key,
                        Status::Honoured(format!(
                            "the cookie is {}Secure",
                            if secure { "" } else { "not " }
                        )),
                    );
                    cookie.secure = secure;
                }
                if let Some((key, domain)) = a.parsed("session-cookie-domain", |v| {
                    parse::host(v.trim_start_matches('.'), false)
                }) {
                    a.record(
                        key,
                        Status::Honoured(format!("the cookie's Domain is {domain}")),
                    );
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
                a.record(key, Status::Honoured(format!("HAProxy inserts cookie {} (dynamic per pod, HttpOnly) and sends a client back to its pod while that pod serves", cookie.name)));
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
            for name in cookie_names {
                if let Some((key, _)) = a.take(name) {
                    a.record(
                        key,
                        Status::NotHonoured("affinity is not cookie on this Ingress".into()),
                    );
                }
            }
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
                        "{text}; HAProxy 2.6 cannot retry on {}",
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
        if let Some((key, balance)) = a.parsed("upstream-hash-by", upstream_hash) {
            a.record(
                key,
                Status::Honoured(format!("consistent hashing: balance {balance}")),
            );
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

    /// The backend lines of the affinity and balancing settings (`None`
    /// without any): they belong to the whole backend, so the first
    /// Ingress to set them on a Service port decides.
    pub fn backend_options(&self) -> Option<String> {
        let mut out = String::new();
        if let Some(balance) = &self.balance {
            let _ = writeln!(out, "    balance {balance}");
        }
        if let Some(conditions) = &self.retry_on {
            let _ = writeln!(out, "    retry-on {conditions}");
        }
        if let Some(retries) = self.retries {
            let _ = writeln!(out, "    retries {retries}");
        }
        if let Some(seconds) = self.connect_timeout {
            let _ = writeln!(out, "    timeout connect {seconds}s");
        }
        if let Some(c) = &self.affinity {
            let mut line = format!(
                "    cookie {} insert indirect nocache dynamic httponly",
                c.name
            );
            if c.secure {
                line.push_str(" secure");
            }
            if let Some(domain) = &c.domain {
                let _ = write!(line, " domain {domain}");
            }
            if let Some(same_site) = &c.same_site {
                let _ = write!(line, " attr \"SameSite={same_site}\"");
            }
            if let Some(max_age) = c.max_age {
                let _ = write!(line, " attr \"Max-Age={max_age}\"");
            }
            if let Some(path) = &c.path {
                let _ = write!(line, " attr \"Path={path}\"");
            }
            let _ = writeln!(out, "{line}");
            // Dynamic cookies hash the server's address with this key: no
            // per-server `cookie` value on kubernetes-backends' lines, and
            // a pod keeps its cookie across renders and reloads.
            let _ = writeln!(out, "    dynamic-cookie-key haptic-ingress-nginx");
        }
        (!out.is_empty()).then_some(out)
    }

    fn read_auth(&mut self, a: &mut Annotations<'_>) {
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
                        Err(format!("{name:?} is not the name of a Secret in the Ingress's namespace (haptic reads no Secret of another namespace)"))
                    }
                });
                let Some((secret_key, secret)) = secret else {
                    a.record(key, Status::Invalid("auth-secret is missing or invalid: no users to check, so nothing is applied".into()));
                    for name in &names[1..] {
                        if let Some((key, _)) = a.take(name) {
                            a.record(
                                key,
                                Status::NotHonoured("auth-secret is missing or invalid".into()),
                            );
                        }
                    }
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
                for name in names {
                    if let Some((key, _)) = a.take(name) {
                        a.record(key, Status::NotHonoured("auth-type is not basic".into()));
                    }
                }
            }
            None => {
                for name in names {
                    if let Some((key, _)) = a.take(name) {
                        a.record(
                            key,
                            Status::NotHonoured(
                                "auth-type is not set to basic on this Ingress".into(),
                            ),
                        );
                    }
                }
            }
        }
    }

    /// `custom-headers: [<namespace>/]<ConfigMap>`. Only the Ingress's own
    /// namespace is read: a ConfigMap of another would let an Ingress
    /// publish another team's configuration in its answers.
    fn read_custom_headers(&mut self, a: &mut Annotations<'_>, namespace: &str) {
        let Some((key, name)) = own_namespace_object(a, "custom-headers", "ConfigMap", namespace)
        else {
            return;
        };
        a.record(
            key,
            Status::Honoured(format!(
                "the data of ConfigMap {namespace}/{name} set as headers of the answers (http-response set-header)"
            )),
        );
        self.custom_headers = Some(name);
    }

    /// `default-backend: <Service>` (the Ingress's namespace; ingress-nginx
    /// takes its first port). Its part in `custom-http-errors` is not
    /// honoured: that annotation is not.
    fn read_default_backend(&mut self, a: &mut Annotations<'_>, namespace: &str) {
        let Some((key, name)) = own_namespace_object(a, "default-backend", "Service", namespace)
        else {
            return;
        };
        a.record(
            key,
            Status::Honoured(format!(
                "requests whose Service has no ready endpoint go to Service {namespace}/{name} (its first port), as in ingress-nginx; its error pages for custom-http-errors are not served (that annotation is not honoured)"
            )),
        );
        self.default_backend = Some(name);
    }

    fn read_cors(&mut self, a: &mut Annotations<'_>) {
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
            for name in names {
                if let Some((key, _)) = a.take(name) {
                    a.record(
                        key,
                        Status::NotHonoured("enable-cors is not \"true\" on this Ingress".into()),
                    );
                }
            }
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
        if let Some((key, origins)) = a.parsed("cors-allow-origin", origins) {
            a.record(
                key,
                Status::Honoured(match &origins {
                    None => "any origin (*)".to_owned(),
                    Some(list) => format!(
                        "the request's Origin is echoed when it is one of {}",
                        list.join(", ")
                    ),
                }),
            );
            c.origins = origins;
        }
        if let Some((key, methods)) = a.parsed("cors-allow-methods", |v| token_list(v, true)) {
            a.record(
                key,
                Status::Honoured(format!("Access-Control-Allow-Methods: {methods}")),
            );
            c.methods = methods;
        }
        if let Some((key, headers)) = a.parsed("cors-allow-headers", |v| token_list(v, false)) {
            a.record(
                key,
                Status::Honoured(format!("Access-Control-Allow-Headers: {headers}")),
            );
            c.headers = headers;
        }
        if let Some((key, expose)) = a.parsed("cors-expose-headers", |v| token_list(v, false)) {
            a.record(
                key,
                Status::Honoured(format!("Access-Control-Expose-Headers: {expose}")),
            );
            c.expose = Some(expose);
        }
        if let Some((key, credentials)) = a.parsed("cors-allow-credentials", parse::boolean) {
            a.record(
                key,
                Status::Honoured(format!(
                    "Access-Control-Allow-Credentials is {}",
                    if credentials {
                        "sent (true)"
                    } else {
                        "not sent"
                    }
                )),
            );
            c.credentials = credentials;
        }
        if let Some((key, age)) = a.parsed("cors-max-age", |v| {
            parse::number(v, 0..=u64::from(u32::MAX))
        }) {
            a.record(
                key,
                Status::Honoured(format!("Access-Control-Max-Age: {age}")),
            );
            c.max_age = age;
        }
        self.cors = Some(c);
    }

    fn read_paths(&mut self, a: &mut Annotations<'_>, paths: &[&str]) {
        if let Some((key, on)) = a.parsed("use-regex", parse::boolean) {
            self.regex_paths = on;
            a.record(key, Status::Differs("paths are PCRE2 regexes matched case-insensitively from the start of the path, as nginx's `~*`; they are looked up before this Ingress class's Exact and Prefix paths of the same host, and only this Ingress's paths become regexes (nginx makes every path of the host one)".into()));
        }
        if let Some((key, target)) = a.take("rewrite-target") {
            let groups = paths
                .iter()
                .filter_map(|p| regex::path_regex(p).ok())
                .map(|r| regex::capture_groups(&r))
                .min()
                .unwrap_or(0);
            match regex::rewrite_target(target, groups) {
                Ok(replacement) => {
                    self.regex_paths = true;
                    self.rewrite = Some(replacement);
                    a.record(key, Status::Honoured("the path is rewritten by HAProxy's replace-path in the Service's backend, capture groups as \\1, the query kept; the paths are regexes (implied, as in ingress-nginx)".into()));
                }
                Err(why) => a.record(key, Status::Invalid(why)),
            }
        }
    }

    fn read_redirects(&mut self, a: &mut Annotations<'_>) {
        self.ssl_redirect = true;
        if let Some((key, on)) = a.parsed("ssl-redirect", parse::boolean) {
            self.ssl_redirect = on;
            a.record(
                key,
                Status::Honoured(format!(
                    "plain HTTP to this Ingress's TLS hosts is {} (308, ACME challenges excepted)",
                    if on {
                        "redirected to HTTPS"
                    } else {
                        "served, not redirected"
                    }
                )),
            );
        }
        if let Some((key, on)) = a.parsed("force-ssl-redirect", parse::boolean) {
            self.force_ssl_redirect = on;
            a.record(key, Status::Honoured("plain HTTP to every host of this Ingress is redirected to HTTPS with 308, TLS section or not (ACME challenges excepted)".into()));
        }
        let permanent_code = a.parsed("permanent-redirect-code", parse::redirect_code);
        let temporal_code = a.parsed("temporal-redirect-code", parse::redirect_code);
        let permanent = a.parsed("permanent-redirect", parse::url);
        let temporal = a.parsed("temporal-redirect", parse::url);
        // ingress-nginx reads the temporal redirect first and ignores the
        // permanent one when both are set.
        if let Some((key, url)) = temporal {
            let code = temporal_code.as_ref().map_or(302, |(_, c)| *c);
            a.record(
                key,
                Status::Honoured(format!(
                    "every request is answered {code} with Location {url}"
                )),
            );
            self.redirect = Some((url, code));
            if let Some((key, _)) = permanent {
                a.record(
                    key,
                    Status::NotHonoured(
                        "temporal-redirect is set too and wins, as in ingress-nginx".into(),
                    ),
                );
            }
        } else if let Some((key, url)) = permanent {
            let code = permanent_code.as_ref().map_or(301, |(_, c)| *c);
            a.record(
                key,
                Status::Honoured(format!(
                    "every request is answered {code} with Location {url}"
                )),
            );
            self.redirect = Some((url, code));
        }
        for (key, code) in [permanent_code, temporal_code].into_iter().flatten() {
            let status = if self.redirect.as_ref().is_some_and(|(_, c)| *c == code) {
                Status::Honoured(format!("the redirect's status is {code}"))
            } else {
                Status::NotHonoured("its redirect annotation is absent or not in effect".into())
            };
            a.record(key, status);
        }
        if let Some((key, root)) = a.parsed("app-root", parse::path) {
            a.record(
                key,
                Status::Honoured(format!(
                    "a request for / is answered 302 with Location <scheme>://<host>{root}"
                )),
            );
            self.app_root = Some(root);
        }
        if let Some((key, on)) = a.parsed("from-to-www-redirect", parse::boolean) {
            self.from_to_www = on;
            a.record(key, Status::Honoured("a request for the www. form of a rule's host (or the bare form of a www. host) is answered 308 to the rule's host, path and query kept".into()));
        }
    }

    fn read_access(&mut self, a: &mut Annotations<'_>) {
        for name in ["whitelist-source-range", "allowlist-source-range"] {
            if let Some((key, list)) = a.parsed(name, parse::cidrs) {
                a.record(
                    key,
                    Status::Honoured(format!(
                        "requests from outside {} are answered 403",
                        list.join(", ")
                    )),
                );
                self.allow.get_or_insert_with(Vec::new).extend(list);
            }
        }
        if let Some((key, list)) = a.parsed("denylist-source-range", parse::cidrs) {
            a.record(
                key,
                Status::Honoured(format!(
                    "requests from {} are answered 403",
                    list.join(", ")
                )),
            );
            self.deny = Some(list);
        }
        let window = "HAProxy counts each client's requests over a sliding window and answers 503 above the limit, with no burst allowance (nginx admits bursts of limit-burst-multiplier, default 5, times the rate); the count is per HAProxy pod, as nginx's is per nginx pod";
        if let Some((key, n)) = a.parsed("limit-rps", |v| parse::number(v, 1..=1_000_000)) {
            a.record(
                key,
                Status::Differs(format!(
                    "at most {n} requests per second per client address: {window}"
                )),
            );
            self.limits.rps = Some(n);
        }
        if let Some((key, n)) = a.parsed("limit-rpm", |v| parse::number(v, 1..=60_000_000)) {
            a.record(
                key,
                Status::Differs(format!(
                    "at most {n} requests per minute per client address: {window}"
                )),
            );
            self.limits.rpm = Some(n);
        }
        if let Some((key, n)) = a.parsed("limit-connections", |v| parse::number(v, 1..=1_000_000)) {
            a.record(
                key,
                Status::Honoured(format!(
                    "a client address with {n} connections open is answered 503 on a new request"
                )),
            );
            self.limits.connections = Some(n);
        }
        if let Some((key, list)) = a.parsed("limit-whitelist", parse::cidrs) {
            a.record(
                key,
                Status::Honoured(format!("{} are never rate limited", list.join(", "))),
            );
            self.limits.exempt = list;
        }
        if let Some((key, size)) = a.parsed("proxy-body-size", parse::size) {
            let text = match size {
                Some(bytes) => format!(
                    "a request whose Content-Length exceeds {bytes} bytes is answered 413; a chunked body without Content-Length is not counted (HAProxy would have to buffer it)"
                ),
                None => "no body size limit".to_owned(),
            };
            a.record(
                key,
                if size.is_some() {
                    Status::Differs(text)
                } else {
                    Status::Honoured(text)
                },
            );
            self.body_size = size;
        }
    }

    fn read_upstream(&mut self, a: &mut Annotations<'_>) {
        let read = a.parsed("proxy-read-timeout", parse::seconds);
        let send = a.parsed("proxy-send-timeout", parse::seconds);
        let longest = read.iter().chain(&send).map(|(_, s)| *s).max();
        if let Some((key, s)) = read {
            a.record(key, Status::Honoured(format!("HAProxy's server timeout for this Ingress's requests is {}s (http-request set-timeout server)", longest.unwrap_or(s))));
        }
        if let Some((key, _)) = send {
            a.record(key, Status::Differs(format!("HAProxy has one server timeout for both directions: {}s, the longer of proxy-read-timeout and proxy-send-timeout", longest.unwrap_or_default())));
        }
        self.server_timeout = longest;
        if let Some((key, on)) = a.parsed("service-upstream", parse::boolean) {
            a.record(
                key,
                if on {
                    Status::Differs("requests go to the Service's cluster IP, one server kube-proxy balances (as in ingress-nginx): the readiness gate does not vouch for these pods, and HAProxy's affinity and balancing see one server".into())
                } else {
                    Status::Honoured("routed to the endpoints".into())
                },
            );
            self.service_upstream = on;
        }
        if let Some((key, seconds)) = a.parsed("proxy-connect-timeout", parse::seconds) {
            a.record(key, Status::Differs(format!("timeout connect {seconds}s on the backend of each Service port the Ingress routes to: HAProxy 2.6 sets it per backend, not per request, so the oldest Ingress on a Service port decides (BackendSettingsConflict for the others)")));
            self.connect_timeout = Some(seconds);
        }
        if let Some((key, prefix)) = a.parsed("x-forwarded-prefix", parse::path) {
            a.record(
                key,
                Status::Honoured(format!("the backend receives X-Forwarded-Prefix: {prefix}")),
            );
            self.forwarded_prefix = Some(prefix);
        }
        if let Some((key, host)) = a.parsed("upstream-vhost", |v| {
            let (name, port) = v.trim().split_once(':').unwrap_or((v.trim(), ""));
            let host = parse::host(name, false)?;
            if !port.is_empty() {
                parse::number(port, 1..=65_535)?;
                return Ok(format!("{host}:{port}"));
            }
            Ok(host)
        }) {
            a.record(
                key,
                Status::Honoured(format!("the backend receives Host: {host}")),
            );
            self.upstream_vhost = Some(host);
        }
        if let Some((key, hosts)) = a.parsed("server-alias", parse::hosts) {
            a.record(
                key,
                Status::Honoured(format!(
                    "{} are routed like this Ingress's hosts",
                    hosts.join(", ")
                )),
            );
            self.aliases = hosts;
        }
    }

    /// The frontend request rules for the requests Ingress `id`
    /// (`namespace/name`) routes. `tls_hosts` are its `spec.tls` hosts and
    /// `hosts` its rules' hosts (aliases included).
    pub fn frontend_rules(&self, id: &str, tls_hosts: &[String], hosts: &[String]) -> String {
        let (namespace, name) = id.split_once('/').unwrap_or(("", id));
        let acl = matched_ingress_acl(namespace, name);
        let mut out = String::new();
        let mut line = |text: String| {
            out.push_str("    ");
            out.push_str(&text);
            out.push('\n');
        };
        if self.from_to_www {
            for host in hosts.iter().filter(|h| !h.starts_with('*')) {
                let from = match host.strip_prefix("www.") {
                    Some(bare) => bare.to_owned(),
                    None => format!("www.{host}"),
                };
                line(format!(
                    "http-request redirect code 308 location %[ssl_fc,iif(https,http)]://{host}%[capture.req.uri] if {{ var(txn.haptic_host) -m str {from} }} !{{ var(txn.haptic_ingress) -m found }}"
                ));
            }
        }
        if self.force_ssl_redirect {
            line(format!(
                "http-request redirect scheme https code 308 if !{{ ssl_fc }} {acl} {ACME}"
            ));
        } else if self.ssl_redirect && !tls_hosts.is_empty() {
            // Many TLS hosts: one ACL over several lines, not one line past
            // HAProxy's word limit.
            let name = lines::acl_name(id, "tls_host");
            lines::acl(&name, "var(txn.haptic_host) -m str", tls_hosts)
                .into_iter()
                .for_each(&mut line);
            line(format!(
                "http-request redirect scheme https code 308 if !{{ ssl_fc }} {acl} {name} {ACME}"
            ));
        }
        if let Some((url, code)) = &self.redirect {
            line(format!(
                "http-request redirect location {} code {code} if {acl}",
                quote(&log_format_literal(url))
            ));
        }
        // Quoted as one word: written bare, a `#` in the root cut the line
        // before its `if`, and every host of the frontend redirected.
        if let Some(root) = &self.app_root
            && let Ok(location) = haproxy::argument(&format!(
                "%[ssl_fc,iif(https,http)]://%[req.hdr(host)]{}",
                log_format_literal(root)
            ))
        {
            line(format!(
                "http-request redirect location {location} code 302 if {acl} {{ path / }}"
            ));
        }
        let table = |kind: &str| limit_table(id, kind);
        let exempt = if self.limits.exempt.is_empty() {
            String::new()
        } else {
            let name = lines::acl_name(id, "limit_exempt");
            lines::acl(&name, "src", &self.limits.exempt)
                .into_iter()
                .for_each(&mut line);
            format!(" !{name}")
        };
        for (counter, kind, limit, fetch) in [
            (0, "rps", self.limits.rps, "sc_http_req_rate(0)"),
            (1, "rpm", self.limits.rpm, "sc_http_req_rate(1)"),
            (2, "conn", self.limits.connections, "sc_conn_cur(2)"),
        ] {
            if let Some(limit) = limit {
                line(format!(
                    "http-request track-sc{counter} src table {} if {acl}{exempt}",
                    table(kind)
                ));
                // Counts include this request (and its connection): the
                // limit-th is admitted, the next one refused.
                line(format!(
                    "http-request deny deny_status 503 if {acl}{exempt} {{ {fetch} gt {limit} }}"
                ));
            }
        }
        if let Some(deny) = &self.deny {
            let name = lines::acl_name(id, "deny");
            lines::acl(&name, "src", deny)
                .into_iter()
                .for_each(&mut line);
            line(format!("http-request deny deny_status 403 if {acl} {name}"));
        }
        if let Some(allow) = &self.allow {
            let name = lines::acl_name(id, "allow");
            lines::acl(&name, "src", allow)
                .into_iter()
                .for_each(&mut line);
            line(format!(
                "http-request deny deny_status 403 if {acl} !{name}"
            ));
        }
        if let Some(bytes) = self.body_size {
            line(format!(
                "http-request deny deny_status 413 if {acl} {{ req.hdr_val(content-length) gt {bytes} }}"
            ));
        }
        if let Some(c) = &self.cors {
            let origin = match &c.origins {
                None => "str(*)".to_owned(),
                Some(_) => "req.hdr(origin)".to_owned(),
            };
            let allowed = match &c.origins {
                None => String::new(),
                Some(list) => format!(
                    " {{ req.hdr(origin) -m reg -i {} }}",
                    quote(&origin_regex(list))
                ),
            };
            line(format!(
                "http-request set-var(txn.ingress_nginx_cors) {origin} if {acl}{allowed}"
            ));
            let mut headers = cors_headers(c);
            let _ = write!(headers, " hdr Access-Control-Max-Age {}", c.max_age);
            line(format!(
                "http-request return status 204 content-type text/plain{headers} if {acl} METH_OPTIONS {{ var(txn.ingress_nginx_cors) -m found }}"
            ));
        }
        if let Some(prefix) = &self.forwarded_prefix {
            line(format!(
                "http-request set-header X-Forwarded-Prefix {} if {acl}",
                quote(&log_format_literal(prefix))
            ));
        }
        if let Some(host) = &self.upstream_vhost {
            line(format!("http-request set-header Host {host} if {acl}"));
        }
        out
    }

    /// The frontend response rules for the answers to the requests Ingress
    /// `id` routes: the backend's Set-Cookie and Location rewritten
    /// (`proxy-cookie-*`, `proxy-redirect-*`), `custom` (checked
    /// `custom-headers`, name and value), then the CORS headers.
    pub fn response_rules(&self, id: &str, custom: &[(String, String)]) -> String {
        let (namespace, name) = id.split_once('/').unwrap_or(("", id));
        let acl = matched_ingress_acl(namespace, name);
        let mut out = self.rewrites.rules(&acl);
        for (header, value) in custom {
            let _ = writeln!(
                out,
                "    http-response set-header {header} {} if {acl}",
                quote(&log_format_literal(value))
            );
        }
        let Some(c) = &self.cors else {
            return out;
        };
        let found = "{ var(txn.ingress_nginx_cors) -m found }";
        let mut pairs = vec![
            (
                "Access-Control-Allow-Origin",
                "%[var(txn.ingress_nginx_cors)]".to_owned(),
            ),
            (
                "Access-Control-Allow-Methods",
                quote(&log_format_literal(&c.methods)),
            ),
            (
                "Access-Control-Allow-Headers",
                quote(&log_format_literal(&c.headers)),
            ),
        ];
        if c.credentials {
            pairs.push(("Access-Control-Allow-Credentials", "true".to_owned()));
        }
        if let Some(expose) = &c.expose {
            pairs.push((
                "Access-Control-Expose-Headers",
                quote(&log_format_literal(expose)),
            ));
        }
        for (header, value) in pairs {
            let _ = writeln!(
                out,
                "    http-response set-header {header} {value} if {acl} {found}"
            );
        }
        out
    }

    /// The request rules for the backends Ingress `id` routes to (HAProxy
    /// sets a server timeout only in a backend).
    pub fn backend_rules(&self, id: &str) -> String {
        let (namespace, name) = id.split_once('/').unwrap_or(("", id));
        let acl = matched_ingress_acl(namespace, name);
        match self.server_timeout {
            Some(seconds) => {
                format!("    http-request set-timeout server {seconds}s if {acl}\n")
            }
            None => String::new(),
        }
    }

    /// The stick tables the limits need: (section name, body).
    pub fn limit_tables(&self, id: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (kind, limit, store) in [
            ("rps", self.limits.rps, "http_req_rate(1s)"),
            ("rpm", self.limits.rpm, "http_req_rate(60s)"),
            ("conn", self.limits.connections, "conn_cur"),
        ] {
            if limit.is_some() {
                let mut body = String::new();
                let _ = writeln!(
                    body,
                    "    stick-table type ipv6 size 100k expire 2m store {store}"
                );
                out.push((limit_table(id, kind), body));
            }
        }
        out
    }
}

/// The `hdr` arguments of a CORS answer (preflight).
fn cors_headers(c: &Cors) -> String {
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

/// `cors-allow-origin`: `*` (any: `None`) or a comma-separated list of
/// `scheme://host[:port]` origins, `*.` standing for one label.
fn origins(value: &str) -> Result<Option<Vec<String>>, String> {
    let list: Vec<&str> = value
        .split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if list.is_empty() || list.contains(&"*") {
        return Ok(None);
    }
    for origin in &list {
        let rest = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
            .ok_or_else(|| format!("{origin:?} is not an origin (scheme://host[:port])"))?;
        let (host, port) = rest.split_once(':').unwrap_or((rest, ""));
        parse::host(host, true)?;
        if !port.is_empty() {
            parse::number(port, 1..=65_535)?;
        }
    }
    let list: Vec<String> = list.into_iter().map(str::to_owned).collect();
    // Thousands of origins made one regex PCRE2 refuses ("regular
    // expression is too large"), and `haproxy -c` every namespace's render.
    haproxy::check_regex(&origin_regex(&list)).map_err(|e| {
        format!(
            "{} origins make a regular expression that {e}; list fewer origins or use *",
            list.len()
        )
    })?;
    Ok(Some(list))
}

/// The checked origins as one anchored regex (`*.` matches one label).
fn origin_regex(origins: &[String]) -> String {
    let alternatives: Vec<String> = origins
        .iter()
        .map(|o| o.replace('.', "\\.").replace('*', "[a-z0-9-]+"))
        .collect();
    format!("^({})$", alternatives.join("|"))
}

/// A comma-separated list of tokens (methods: letters only), normalized to
/// `A, B`.
fn token_list(value: &str, methods: bool) -> Result<String, String> {
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
        return Err(format!(
            "{value:?} is not a comma-separated list of {}",
            if methods { "methods" } else { "header names" }
        ));
    }
    Ok(items.join(", "))
}

/// Annotation `name`'s `[<namespace>/]<object>` when the object is in the
/// Ingress's `namespace` and its name is valid: `(key, object name)`; else
/// recorded (another namespace is not honoured: an Ingress must not reach
/// another team's objects, as for Secrets) and `None`.
fn own_namespace_object(
    a: &mut Annotations<'_>,
    name: &str,
    kind: &str,
    namespace: &str,
) -> Option<(String, String)> {
    let (key, value) = a.take(name)?;
    let value = value.trim();
    let (of, object) = value.split_once('/').unwrap_or((namespace, value));
    if of != namespace {
        a.record(
            key,
            Status::NotHonoured(format!(
                "{kind} {value:?} is in another namespace than the Ingress ({namespace}); haptic reads only the Ingress's own, as for Secrets"
            )),
        );
        return None;
    }
    if !is_object_name(object) {
        a.record(
            key,
            Status::Invalid(format!("{value:?} does not name a {kind}")),
        );
        return None;
    }
    Some((key, object.to_owned()))
}

/// A Kubernetes object name (DNS subdomain: lowercase letters, digits,
/// `-` and `.`).
fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// An HTTP header name (RFC 7230 token), lowercased.
pub(crate) fn header_name(value: &str) -> Result<String, String> {
    let text = value.trim();
    // Without `#`: a comment outside quotes in haproxy.cfg.
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!$&*+-.^_|~".contains(&b);
    if text.is_empty() || !text.bytes().all(token) {
        return Err(format!("{text:?} is not a header name"));
    }
    Ok(text.to_ascii_lowercase())
}

/// One word of printable ASCII without quotes or backslashes.
fn plain_word(value: &str) -> Result<String, String> {
    let text = value.trim();
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\' | b'{' | b'}'))
    {
        return Err(format!(
            "{text:?} is not a single word without quotes, braces or backslashes"
        ));
    }
    Ok(text.to_owned())
}

/// `proxy-next-upstream`'s conditions as HAProxy's `retry-on` words, and
/// the ones HAProxy 2.6 cannot retry on.
fn retry_on(value: &str) -> Result<(String, Vec<String>), String> {
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
            "http_429" | "non_idempotent" => {
                dropped.push(condition.to_owned());
                &[]
            }
            other => {
                return Err(format!(
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
        return Err(format!("{value:?} names no condition HAProxy can retry on"));
    }
    Ok((words.join(" "), dropped))
}

/// `upstream-hash-by`'s nginx variable as a `balance` algorithm.
fn upstream_hash(value: &str) -> Result<String, String> {
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
                return Err(format!(
                    "{text:?}: haptic hashes by $request_uri, $uri, $remote_addr, $host, $http_<header> or $arg_<name>"
                ));
            }
        }
    })
}

/// The stick table of one limit of one Ingress.
fn limit_table(id: &str, kind: &str) -> String {
    format!(
        "ingress-nginx.limit.{}.{kind}",
        sanitize(&id.replace('/', "."))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)], paths: &[&str]) -> (Policy, Vec<Finding>) {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (format!("nginx.ingress.kubernetes.io/{k}"), (*v).to_owned()))
            .collect();
        let mut a = Annotations::new(
            owned.iter().map(|(k, v)| (k, v)),
            "nginx.ingress.kubernetes.io",
        );
        let p = Policy::read(&mut a, paths, "ns", false);
        (p, a.finish())
    }

    fn status<'a>(findings: &'a [Finding], name: &str) -> &'a Status {
        &findings
            .iter()
            .find(|f| f.annotation == name)
            .unwrap()
            .status
    }

    #[test]
    fn every_annotation_gets_exactly_one_verdict() {
        let (_, findings) = read(
            &[
                ("rewrite-target", "/$2"),
                ("use-regex", "true"),
                ("limit-rps", "ten"),
                ("configuration-snippet", "more_set_headers x;"),
                ("no-such", "x"),
                ("canary", "false"),
                ("enable-cors", "false"),
                ("custom-headers", "other/headers"),
            ],
            &["/api(/|$)(.*)"],
        );
        assert_eq!(findings.len(), 8, "{findings:?}");
        assert!(matches!(
            status(&findings, "rewrite-target"),
            Status::Honoured(_)
        ));
        assert!(
            matches!(status(&findings, "limit-rps"), Status::Invalid(w) if w.contains("\"ten\""))
        );
        assert!(
            matches!(status(&findings, "configuration-snippet"), Status::NotHonoured(w) if w.contains("never applies"))
        );
        assert!(
            matches!(status(&findings, "no-such"), Status::NotHonoured(w) if w.contains("does not know"))
        );
    }

    #[test]
    fn a_rewrite_naming_a_missing_group_is_invalid_and_changes_nothing() {
        let (policy, findings) = read(&[("rewrite-target", "/$3")], &["/api(/|$)(.*)"]);
        assert!(matches!(
            status(&findings, "rewrite-target"),
            Status::Invalid(_)
        ));
        assert_eq!(policy.rewrite, None);
        assert!(!policy.regex_paths);
    }

    #[test]
    fn temporal_wins_over_permanent() {
        let (policy, findings) = read(
            &[
                ("permanent-redirect", "https://a.example.com/"),
                ("temporal-redirect", "https://b.example.com/"),
            ],
            &[],
        );
        assert_eq!(
            policy.redirect,
            Some(("https://b.example.com/".into(), 302))
        );
        assert!(matches!(
            status(&findings, "permanent-redirect"),
            Status::NotHonoured(_)
        ));
    }

    #[test]
    fn invalid_values_never_reach_the_rules() {
        let (policy, findings) = read(
            &[
                ("whitelist-source-range", "10.0.0.0/8 } or { always_true"),
                ("permanent-redirect", "https://x.example.com/ if TRUE"),
                ("upstream-vhost", "a b"),
                ("x-forwarded-prefix", "/x'y"),
            ],
            &[],
        );
        assert!(
            findings
                .iter()
                .all(|f| matches!(f.status, Status::Invalid(_))),
            "{findings:?}"
        );
        let rules = policy.frontend_rules("ns/web", &[], &[]);
        assert!(
            !rules.contains("always_true") && !rules.contains("TRUE") && !rules.contains("a b"),
            "{rules}"
        );
    }
}

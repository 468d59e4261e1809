//! One Ingress's annotations read into a typed [`Policy`], with a
//! [`Finding`](crate::report::Finding) for every annotation
//! ([`Annotations`]), family by family: each child module reads one family
//! of annotations; [`rules`] writes the policy as HAProxy configuration.
//! The TLS annotations ([`crate::tls`]) and the answer rewrites
//! ([`crate::rewrites`]) are families of their own beside this module:
//! [`crate::routing`] reads their Secrets.

mod access;
mod auth;
mod balancing;
mod canary;
mod cors;
mod mirror;
mod paths;
mod redirects;
mod rules;
mod upstream;

pub use auth::{GlobalAuth, read_global_auth};
pub use rules::BANDWIDTH_FILTER_LINE;

use crate::annotations::Annotations;
use crate::parse;
use crate::report::Status;
use crate::rewrites::Rewrites;
use crate::tls::{self, BackendTls, ClientAuth, Protocol};

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
    /// Bytes per second an answer is sent at (`limit-rate`).
    pub rate_limit: Option<u64>,
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
    /// `auth-url` and its companions: the agent asks the auth service.
    pub external_auth: Option<haptic_sdk::agent::ExternalAuth>,
    /// `auth-proxy-set-headers`: a ConfigMap of the Ingress's namespace
    /// whose data are headers added to the auth sub-request.
    pub auth_proxy_headers: Option<String>,
    /// `auth-url` is set but not valid: every request is refused.
    pub external_auth_refused: bool,
    /// The global auth-url (values `globalAuth`) may apply: not turned off
    /// by `enable-global-auth: "false"`, and the Ingress is neither a
    /// canary nor an ssl-passthrough one.
    pub global_auth: bool,
    /// `satisfy: any`: a client in the allowed source ranges needs no
    /// authentication (others still do).
    pub satisfy_any: bool,
    /// `mirror-target` and its companions: the agent copies each request.
    pub mirror: Option<haptic_sdk::agent::MirrorTarget>,
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

/// Set for a request from the Ingress's allowed source ranges when
/// `satisfy: any` lets those in without authentication.
pub const SOURCE_ALLOWED: &str = "txn.ingress_nginx_source_allowed";

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
            a.not_honoured_rest("ignored on an ssl-passthrough Ingress, as in ingress-nginx: its TLS connections are not decrypted");
            return p;
        }
        p.read_canary(a);
        p.read_backend(a);
        (p.protocol, p.backend_tls) = tls::read_backend(a, namespace);
        if p.canary.is_some() {
            // ingress-nginx ignores a canary's other annotations: the main
            // Ingress's apply to its requests.
            a.not_honoured_rest("ignored on a canary Ingress, as in ingress-nginx: the main Ingress's annotations apply to the canary's requests");
            return p;
        }
        p.global_auth = true;
        p.read_paths(a, paths);
        p.read_cors(a);
        p.read_custom_headers(a, namespace);
        p.read_default_backend(a, namespace);
        p.read_auth(a);
        p.read_external_auth(a, namespace);
        p.read_mirror(a);
        p.client_auth = tls::read_client_auth(a, namespace);
        p.read_redirects(a);
        p.read_access(a);
        p.read_upstream(a);
        p.rewrites = Rewrites::read(a);
        p
    }

    /// Settles whether the global auth-url covers the Ingress: one is
    /// `configured` (values `globalAuth`), the Ingress has no auth-url of
    /// its own and did not opt out (`enable-global-auth: "false"`).
    pub fn take_global_auth(&mut self, configured: bool) {
        self.global_auth &=
            configured && self.external_auth.is_none() && !self.external_auth_refused;
    }

    /// Whether the Ingress's requests are authenticated (basic, its
    /// auth-url, the global one), even if only to be refused.
    pub fn authenticates(&self) -> bool {
        self.auth.is_some()
            || self.external_auth.is_some()
            || self.external_auth_refused
            || self.global_auth
    }

    /// The condition under which the Ingress's authentication applies:
    /// `acl` (its requests), but with `satisfy: any` not to a client in its
    /// allowed source ranges (nginx's `satisfy any`: either suffices).
    pub fn auth_condition(&self, acl: &str) -> String {
        if self.satisfy_any && self.allow.is_some() {
            format!("{acl} !{{ var({SOURCE_ALLOWED}) -m bool }}")
        } else {
            acl.to_owned()
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Finding;

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

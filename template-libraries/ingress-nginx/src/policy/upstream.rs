//! What reaches the backend and how: timeouts, `service-upstream`,
//! `x-forwarded-prefix`, `upstream-vhost`, `server-alias`, and the objects
//! of the Ingress's namespace the annotations name (`custom-headers`'
//! ConfigMap, `default-backend`'s Service).

use crate::annotations::Annotations;
use crate::parse;
use crate::report::Status;

use super::Policy;

impl Policy {
    /// `custom-headers: [<namespace>/]<ConfigMap>`. Only the Ingress's own
    /// namespace is read: a ConfigMap of another would let an Ingress
    /// publish another team's configuration in its answers.
    pub(super) fn read_custom_headers(&mut self, a: &mut Annotations<'_>, namespace: &str) {
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
    pub(super) fn read_default_backend(&mut self, a: &mut Annotations<'_>, namespace: &str) {
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

    pub(super) fn read_upstream(&mut self, a: &mut Annotations<'_>) {
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
        if let Some(prefix) = a.honoured("x-forwarded-prefix", parse::path, |prefix| {
            format!("the backend receives X-Forwarded-Prefix: {prefix}")
        }) {
            self.forwarded_prefix = Some(prefix);
        }
        if let Some(host) = a.honoured(
            "upstream-vhost",
            |v| {
                let (name, port) = v.trim().split_once(':').unwrap_or((v.trim(), ""));
                let host = parse::host(name, false)?;
                if !port.is_empty() {
                    parse::number(port, 1..=65_535)?;
                    return Ok(format!("{host}:{port}"));
                }
                Ok(host)
            },
            |host| format!("the backend receives Host: {host}"),
        ) {
            self.upstream_vhost = Some(host);
        }
        if let Some(hosts) = a.honoured("server-alias", parse::hosts, |hosts| {
            format!("{} name this Ingress's hosts whole: every Ingress's paths of them are served under the aliases too", hosts.join(", "))
        }) {
            self.aliases = hosts;
        }
    }
}

/// Annotation `name`'s `[<namespace>/]<object>` when the object is in the
/// Ingress's `namespace` and its name is valid: `(key, object name)`; else
/// recorded (another namespace is not honoured: an Ingress must not reach
/// another team's objects, as for Secrets) and `None`.
pub(super) fn own_namespace_object(
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

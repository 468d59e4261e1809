//! The library's values (`templateLibraries.ingressNginx`), their
//! defaults and the checks that refuse values which would write broken
//! configuration lines.

use haptic_sdk::ingress::NginxClassRules;
use haptic_sdk::ingress::published::PublishedAddress;
use haptic_sdk::ingress::tls::parse_reference;
use serde::Deserialize;

/// What happens to an Ingress carrying an annotation haptic does not
/// honour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unsupported {
    /// Served without it; reported.
    #[default]
    Warn,
    /// Not served at all; reported.
    Refuse,
}

/// Values under `templateLibraries.ingressNginx`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NginxValues {
    /// `classNames`, `controller`, `watchIngressWithoutClass`: the SDK's
    /// rule, which `ingress` reads too (so it stays quiet about ours).
    #[serde(flatten)]
    pub classes: NginxClassRules,
    pub unsupported_annotations: Unsupported,
    pub annotation_prefix: String,
    pub frontend: String,
    #[serde(default)]
    pub tls: NginxTlsValues,
    /// Published in `status.loadBalancer` of the Ingresses it serves (a
    /// fixed address, or the address of a Service, `namespace/name`); both
    /// empty: what `ingress` publishes (one address for haptic).
    #[serde(default)]
    pub published_address: PublishedAddress,
    #[serde(default)]
    pub published_service: String,
    #[serde(default)]
    pub ssl_passthrough: SslPassthroughValues,
    /// Whether a canary Ingress may join the main Ingress of another
    /// namespace (off: a canary joins only a main Ingress of its own
    /// namespace). ingress-nginx joins any namespace's; in a shared
    /// cluster that lets one namespace take another's traffic (weight 100
    /// takes all of it), so an admin widens it knowingly.
    #[serde(default)]
    pub canary_across_namespaces: bool,
    /// ingress-nginx's `global-auth-*` ConfigMap keys, as in that
    /// ConfigMap (`global-auth-url`: `https://...`): an `auth-url` for
    /// every served Ingress without its own
    /// ([`crate::policy::read_global_auth`]).
    #[serde(default)]
    pub global_auth: std::collections::BTreeMap<String, String>,
}

/// `sslPassthrough`: ingress-nginx's `--enable-ssl-passthrough`. The SDK's
/// [`HttpsBind`] reads the same keys, so whichever library writes the
/// HTTPS bind moves it to `internalBind`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SslPassthroughValues {
    pub enabled: bool,
    /// Where the HTTPS bind listens while the passthrough frontend takes
    /// the public address: a loopback address and port of the HAProxy pod.
    pub internal_bind: String,
}

impl SslPassthroughValues {
    pub(crate) fn check(&self) -> std::result::Result<(), ValuesError> {
        if self.enabled
            && (self.internal_bind.trim().is_empty()
                || self.internal_bind.contains(char::is_whitespace))
        {
            return Err(ValuesError::InternalBind(self.internal_bind.clone()));
        }
        Ok(())
    }
}

/// `tls`: whether `spec.tls` certificates are served, and the HTTPS bind
/// and default certificate when `ingress` (whose bind comes first) does
/// not serve TLS itself.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NginxTlsValues {
    pub enabled: bool,
    /// The HTTPS address, e.g. `:8443`.
    pub bind: String,
    /// `namespace/name` of a `kubernetes.io/tls` Secret served when SNI
    /// matches no certificate (ingress-nginx's `--default-ssl-certificate`).
    pub default_certificate: String,
}

impl NginxTlsValues {
    /// Refuses values that would write broken configuration lines.
    pub(crate) fn check(&self) -> std::result::Result<(), ValuesError> {
        if !self.enabled {
            return Ok(());
        }
        if self.bind.trim().is_empty() || self.bind.contains(['\n', '\r']) {
            return Err(ValuesError::TlsBind);
        }
        if !self.default_certificate.is_empty()
            && parse_reference(&self.default_certificate).is_none()
        {
            return Err(ValuesError::DefaultCertificate(
                self.default_certificate.clone(),
            ));
        }
        Ok(())
    }
}

/// Values that would write broken configuration lines; the render is
/// refused with this text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValuesError {
    /// `tls.bind` is empty or spans lines.
    TlsBind,
    /// `tls.defaultCertificate` is not `namespace/name`.
    DefaultCertificate(String),
    /// `sslPassthrough.internalBind` is empty or holds whitespace.
    InternalBind(String),
}

impl std::fmt::Display for ValuesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TlsBind => f.write_str(
                "templateLibraries.ingressNginx.tls.bind must be one address such as \":8443\"",
            ),
            Self::DefaultCertificate(value) => write!(
                f,
                "templateLibraries.ingressNginx.tls.defaultCertificate is {value:?}; write it as \
                 namespace/name"
            ),
            Self::InternalBind(value) => write!(
                f,
                "templateLibraries.ingressNginx.sslPassthrough.internalBind is {value:?}; write one address such as \"127.0.0.1:10443\""
            ),
        }
    }
}

impl std::error::Error for ValuesError {}

/// Default values (the library itself is off unless enabled).
pub fn defaults() -> serde_json::Value {
    serde_json::json!({
        "enabled": false,
        "classNames": ["nginx"],
        "controller": "k8s.io/ingress-nginx",
        "watchIngressWithoutClass": false,
        "unsupportedAnnotations": "warn",
        "annotationPrefix": "nginx.ingress.kubernetes.io",
        "frontend": "http",
        "tls": { "enabled": true, "bind": ":8443", "defaultCertificate": "" },
        "publishedAddress": { "ip": "", "hostname": "" },
        "publishedService": "",
        "canaryAcrossNamespaces": false,
        "globalAuth": {},
        "sslPassthrough": {
            "enabled": false,
            "internalBind": haptic_sdk::ingress::tls::PASSTHROUGH_INTERNAL_BIND,
        },
    })
}

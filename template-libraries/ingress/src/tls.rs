//! TLS termination for the Ingresses' `spec.tls`.
//!
//! - Certificates come from `kubernetes.io/tls` Secrets in the Ingress's
//!   namespace, watched with a field selector so no other Secret ever
//!   reaches haptic. The host checks each one (`haptic_sdk::tls`): PEM,
//!   key matches certificate, not expired, and which names it covers.
//! - Each usable Secret becomes one secret file `certs/<ns>_<name>.pem`
//!   (chain, then key) and one line of `certs/ingress.crt-list` with the
//!   Ingress's TLS hosts as SNI filters (wildcards like `*.example.com`
//!   included). The older Ingress wins a host two claim, as for routes.
//! - `certs/default.pem` is served when SNI matches no line, and for every
//!   host whose Secret is unusable: the Secret named in
//!   `tls.defaultCertificate.secret`, else the host's own certificate.
//! - One `bind` line is added to the routing frontend, so HTTPS requests go
//!   through the same host and path rules as HTTP.
//! - `maps/ingress-tls.map` marks TLS hosts (`redirect` or `no-redirect`);
//!   the frontend sets `txn.haptic_tls` from it, redirects plain HTTP for
//!   `redirect` hosts (308 by default: unlike 301, clients keep the method
//!   and body of a POST), except ACME HTTP-01 challenges, and adds HSTS on
//!   HTTPS responses when enabled. `X-Forwarded-Proto` is set on every
//!   request (a client's own value is replaced).
//!
//! Problems never break the configuration: a missing or unusable Secret is
//! a warning on the Ingress (an Event in a cluster) naming the Secret and
//! the reason, and its hosts get the default certificate. No key material
//! appears in a warning or log line.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use base64::Engine as _;
use haptic_sdk::k8s::api::networking::v1::Ingress;
use haptic_sdk::tls::{CertificateInfo, check_certificate, default_certificate};
use haptic_sdk::{Context, Entry, ObjectKey, Output, Result, SectionKind, Slot, Watch};
use serde::Deserialize;

/// The watch of TLS Secrets.
pub const SECRETS: &str = "ingress-tls-secrets";
/// The crt-list the HTTPS bind loads.
pub const CRT_LIST: &str = "certs/ingress.crt-list";
/// The certificate served when SNI matches nothing.
pub const DEFAULT_CERTIFICATE: &str = "certs/default.pem";
/// TLS hosts and whether plain HTTP to them redirects.
pub const TLS_MAP: &str = "maps/ingress-tls.map";
/// Per-Ingress override of `tls.redirect` (`"true"` or `"false"`).
pub const REDIRECT_ANNOTATION: &str = "haproxy-haptic.org/ssl-redirect";

/// `templateLibraries.ingress.tls`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsValues {
    pub enabled: bool,
    /// The HTTPS address, e.g. `:8443`.
    pub bind: String,
    pub default_certificate: DefaultCertificateValues,
    /// Redirect plain HTTP to HTTPS for TLS hosts. Off by default: the
    /// Ingress specification says nothing of redirects and the upstream
    /// conformance suite (host_rules) expects plain HTTP to a TLS host to be
    /// served; `tls.redirect` or the per-Ingress annotation turn it on.
    pub redirect: bool,
    /// 301, 302, 303, 307 or 308.
    pub redirect_code: u16,
    pub hsts: HstsValues,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DefaultCertificateValues {
    /// `namespace/name` of a `kubernetes.io/tls` Secret; empty uses the
    /// host's certificate.
    pub secret: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HstsValues {
    pub enabled: bool,
    pub max_age: u64,
    pub include_sub_domains: bool,
    pub preload: bool,
}

/// A Kubernetes object name (DNS-1123 subdomain): lowercase letters,
/// digits, `-` and `.`, at most 253 characters, alphanumeric at both ends.
fn valid_object_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

/// Defaults under `tls`.
pub fn defaults() -> serde_json::Value {
    serde_json::json!({
        "enabled": true,
        "bind": ":8443",
        "defaultCertificate": { "secret": "" },
        "redirect": false,
        "redirectCode": 308,
        "hsts": { "enabled": false, "maxAge": 31_536_000, "includeSubDomains": false, "preload": false }
    })
}

impl TlsValues {
    /// Refuses values that would write broken configuration lines.
    pub fn check(&self) -> std::result::Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        if self.bind.trim().is_empty() || self.bind.contains(['\n', '\r']) {
            return Err(
                "templateLibraries.ingress.tls.bind must be one address such as \":8443\""
                    .to_owned(),
            );
        }
        if ![301, 302, 303, 307, 308].contains(&self.redirect_code) {
            return Err(format!(
                "templateLibraries.ingress.tls.redirectCode is {}; use 301, 302, 303, 307 or 308",
                self.redirect_code
            ));
        }
        if !self.default_certificate.secret.is_empty()
            && parse_reference(&self.default_certificate.secret).is_none()
        {
            return Err(format!(
                "templateLibraries.ingress.tls.defaultCertificate.secret is {:?}; write it as \
                 namespace/name",
                self.default_certificate.secret
            ));
        }
        Ok(())
    }
}

/// The watch of TLS Secrets: only `kubernetes.io/tls`, and without
/// annotations (`kubectl apply` copies the whole Secret, key included, into
/// one).
pub fn secrets_watch() -> Watch {
    Watch::new(SECRETS, "v1", "Secret")
        .parse_as::<TlsSecret>()
        .field_selector("type=kubernetes.io/tls")
        .ignore_fields(["metadata.annotations"])
}

/// A Secret as the TLS code needs it. Data stays base64 text until used,
/// so no parse error can quote key material.
#[derive(Clone, Default, Deserialize)]
pub struct TlsSecret {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

impl std::fmt::Debug for TlsSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSecret")
            .field("type", &self.type_)
            .field("data", &self.data.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A Secret that passed the checks: its file content and names.
#[derive(Clone)]
struct UsableCertificate {
    bundle: String,
    info: CertificateInfo,
}

/// Check results by Secret, kept while its resourceVersion stays the same:
/// the host's check parses keys, and a render of one changed Ingress must
/// not redo it for every Secret.
#[derive(Default)]
pub struct CertificateCache {
    checked: HashMap<(String, String), (String, std::result::Result<UsableCertificate, String>)>,
}

impl std::fmt::Debug for CertificateCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CertificateCache({} Secrets)", self.checked.len())
    }
}

impl CertificateCache {
    fn check(
        &mut self,
        ctx: &Context<'_>,
        namespace: &str,
        name: &str,
    ) -> Result<std::result::Result<UsableCertificate, String>> {
        let Some(secret) = ctx.get::<TlsSecret>(SECRETS, namespace, name)? else {
            self.checked
                .remove(&(namespace.to_owned(), name.to_owned()));
            return Ok(Err(format!(
                "Secret {namespace}/{name} does not exist or is not of type kubernetes.io/tls"
            )));
        };
        let key = (namespace.to_owned(), name.to_owned());
        if let Some((version, outcome)) = self.checked.get(&key)
            && version == secret.resource_version
        {
            return Ok(still_valid(outcome.clone()));
        }
        let outcome = usable(secret.value)
            .map_err(|problem| format!("Secret {namespace}/{name} is unusable: {problem}"));
        self.checked
            .insert(key, (secret.resource_version.to_owned(), outcome.clone()));
        Ok(outcome)
    }

    /// Forgets Secrets that no longer exist.
    fn retain_existing(&mut self, ctx: &Context<'_>) {
        self.checked.retain(|(namespace, name), _| {
            matches!(ctx.get::<TlsSecret>(SECRETS, namespace, name), Ok(Some(_)))
        });
    }
}

/// A cached success still expires with time.
fn still_valid(
    outcome: std::result::Result<UsableCertificate, String>,
) -> std::result::Result<UsableCertificate, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    match outcome {
        Ok(certificate) if certificate.info.not_after < now => {
            Err("the certificate has expired".to_owned())
        }
        other => other,
    }
}

fn usable(secret: &TlsSecret) -> std::result::Result<UsableCertificate, String> {
    let field = |name: &str| -> std::result::Result<String, String> {
        let encoded = secret
            .data
            .get(name)
            .filter(|value| !value.is_empty())
            .ok_or_else(|| format!("it has no `{name}`"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| format!("its `{name}` is not base64"))?;
        String::from_utf8(bytes).map_err(|_| format!("its `{name}` is not PEM text"))
    };
    let certificate = field("tls.crt")?;
    let key = field("tls.key")?;
    let info = check_certificate(&certificate, &key)?;
    let mut bundle = certificate;
    if !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    bundle.push_str(&key);
    if !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    Ok(UsableCertificate { bundle, info })
}

/// `namespace/name`.
fn parse_reference(reference: &str) -> Option<(&str, &str)> {
    let (namespace, name) = reference.split_once('/')?;
    let valid = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    (valid(namespace) && valid(name)).then_some((namespace, name))
}

/// A host name HAProxy can take as an SNI filter and a map key.
fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'*'))
}

/// What TLS adds to one render.
pub struct TlsRender<'v> {
    values: &'v TlsValues,
    frontend: &'v str,
    /// SNI host -> certificate file, first claim wins.
    hosts: BTreeMap<String, String>,
    /// Certificate file -> content.
    files: BTreeMap<String, String>,
    /// TLS host -> redirect plain HTTP.
    redirects: BTreeMap<String, bool>,
}

impl<'v> TlsRender<'v> {
    pub fn new(values: &'v TlsValues, frontend: &'v str) -> Self {
        Self {
            values,
            frontend,
            hosts: BTreeMap::new(),
            files: BTreeMap::new(),
            redirects: BTreeMap::new(),
        }
    }

    /// Adds the `spec.tls` of one served Ingress (call oldest first).
    pub fn add_ingress(
        &mut self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        ingress: &Entry<'_, Ingress>,
        out: &mut Output,
    ) -> Result<()> {
        let Some(entries) = ingress.spec.as_ref().and_then(|spec| spec.tls.as_ref()) else {
            return Ok(());
        };
        let namespace = ingress.key.namespace.as_str();
        let what = format!("Ingress {namespace}/{}", ingress.key.name);
        let redirect = match ingress
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REDIRECT_ANNOTATION))
            .map(String::as_str)
        {
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                out.warning(
                    Some(ingress.key),
                    "InvalidAnnotation",
                    format!(
                        "{what}: annotation {REDIRECT_ANNOTATION} is {other:?}; it takes \"true\" \
                         or \"false\", so the default ({}) applies",
                        self.values.redirect
                    ),
                )?;
                self.values.redirect
            }
            None => self.values.redirect,
        };
        for entry in entries {
            let mut hosts: Vec<String> = entry
                .hosts
                .iter()
                .flatten()
                .map(|h| h.to_ascii_lowercase())
                .collect();
            let Some(secret_name) = entry.secret_name.as_deref().filter(|s| !s.is_empty()) else {
                out.warning(
                    Some(ingress.key),
                    "TLSSecretMissing",
                    format!(
                        "{what}: a spec.tls entry names no secretName; its hosts {} are served \
                         with the default certificate",
                        list(&hosts)
                    ),
                )?;
                self.mark_redirects(&hosts, redirect);
                continue;
            };
            // The name becomes a file name and a crt-list word: only what
            // the API server accepts as an object name (a DNS subdomain).
            if !valid_object_name(secret_name) {
                out.warning(
                    Some(ingress.key),
                    "TLSSecretInvalid",
                    format!(
                        "{what}: secretName {secret_name:?} is not a valid Secret name; {} served \
                         with the default certificate",
                        served_phrase(&hosts)
                    ),
                )?;
                self.mark_redirects(&hosts, redirect);
                continue;
            }
            let certificate = match cache.check(ctx, namespace, secret_name)? {
                Ok(certificate) => certificate,
                Err(problem) => {
                    let reason = if problem.contains("does not exist") {
                        "TLSSecretMissing"
                    } else {
                        "TLSSecretInvalid"
                    };
                    out.warning(
                        Some(ingress.key),
                        reason,
                        format!(
                            "{what}: {problem}; {} served with the default certificate",
                            served_phrase(&hosts)
                        ),
                    )?;
                    self.mark_redirects(&hosts, redirect);
                    continue;
                }
            };
            if hosts.is_empty() {
                // No hosts: the certificate's own names (what other
                // controllers do with a host-less TLS entry).
                hosts.clone_from(&certificate.info.dns_names);
            }
            let file = format!("certs/{namespace}_{secret_name}.pem");
            for host in &hosts {
                if !valid_host(host) {
                    out.warning(
                        Some(ingress.key),
                        "TLSHostInvalid",
                        format!("{what}: TLS host {host:?} is not a DNS name; skipped"),
                    )?;
                    continue;
                }
                if !certificate.info.covers(host) {
                    out.warning(
                        Some(ingress.key),
                        "TLSHostNotCovered",
                        format!(
                            "{what}: the certificate of Secret {namespace}/{secret_name} is not \
                             valid for {host} (it covers {}); {host} is served with the default \
                             certificate",
                            list(&certificate.info.dns_names)
                        ),
                    )?;
                } else if !self.hosts.contains_key(host) {
                    self.hosts.insert(host.clone(), file.clone());
                    self.files
                        .entry(file.clone())
                        .or_insert_with(|| certificate.bundle.clone());
                }
                self.redirects.entry(host.clone()).or_insert(redirect);
            }
        }
        Ok(())
    }

    fn mark_redirects(&mut self, hosts: &[String], redirect: bool) {
        for host in hosts.iter().filter(|h| valid_host(h)) {
            self.redirects.entry(host.clone()).or_insert(redirect);
        }
    }

    /// Emits the files and frontend lines.
    pub fn finish(
        self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        out: &mut Output,
    ) -> Result<()> {
        cache.retain_existing(ctx);
        let default = self.default_certificate(ctx, cache, out)?;
        out.secret_file(DEFAULT_CERTIFICATE, default)?;
        for (file, content) in &self.files {
            out.secret_file(file.clone(), content.clone())?;
        }
        let mut by_file: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (host, file) in &self.hosts {
            by_file.entry(file).or_default().push(host);
        }
        let mut crt_list = String::new();
        for (file, hosts) in by_file {
            let _ = writeln!(crt_list, "{file} {}", hosts.join(" "));
        }
        out.file(CRT_LIST, crt_list)?;
        let mut map = String::new();
        for (host, redirect) in &self.redirects {
            let flag = if *redirect { "redirect" } else { "no-redirect" };
            let _ = writeln!(map, "{host} {flag}");
        }
        out.file(TLS_MAP, map)?;

        let v = self.values;
        out.snippet(
            SectionKind::Frontend,
            self.frontend,
            Slot::Other,
            0,
            format!(
                "    bind {} ssl crt {DEFAULT_CERTIFICATE} crt-list {CRT_LIST} alpn h2,http/1.1\n",
                v.bind
            ),
        )?;
        // After the routing variables (priority 0) are set.
        let mut rules = String::new();
        rules.push_str("    http-request set-header X-Forwarded-Proto https if { ssl_fc }\n");
        rules.push_str("    http-request set-header X-Forwarded-Proto http if !{ ssl_fc }\n");
        let _ = writeln!(
            rules,
            "    http-request set-var(txn.haptic_tls) var(txn.haptic_host),map_str({TLS_MAP})"
        );
        let _ = writeln!(
            rules,
            "    http-request set-var(txn.haptic_tls) var(txn.haptic_wildcard),map_str({TLS_MAP}) if !{{ var(txn.haptic_tls) -m found }}"
        );
        let _ = writeln!(
            rules,
            "    http-request redirect scheme https code {} if !{{ ssl_fc }} {{ var(txn.haptic_tls) -m str redirect }} !{{ path_beg /.well-known/acme-challenge/ }}",
            v.redirect_code
        );
        out.snippet(
            SectionKind::Frontend,
            self.frontend,
            Slot::RequestRules,
            10,
            rules,
        )?;
        if v.hsts.enabled {
            let mut header = format!("max-age={}", v.hsts.max_age);
            if v.hsts.include_sub_domains {
                header.push_str("; includeSubDomains");
            }
            if v.hsts.preload {
                header.push_str("; preload");
            }
            out.snippet(
                SectionKind::Frontend,
                self.frontend,
                Slot::ResponseRules,
                0,
                format!(
                    "    http-response set-header Strict-Transport-Security \"{header}\" if {{ ssl_fc }} {{ var(txn.haptic_tls) -m found }}\n"
                ),
            )?;
        }
        Ok(())
    }

    /// The Secret of `defaultCertificate.secret` when it is usable, else the
    /// host's certificate.
    fn default_certificate(
        &self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        out: &mut Output,
    ) -> Result<String> {
        let reference = &self.values.default_certificate.secret;
        if let Some((namespace, name)) = parse_reference(reference) {
            match cache.check(ctx, namespace, name)? {
                Ok(certificate) => return Ok(certificate.bundle),
                Err(problem) => {
                    let key = ObjectKey::new(SECRETS, namespace, name);
                    out.warning(
                        Some(&key),
                        "DefaultCertificateUnusable",
                        format!(
                            "templateLibraries.ingress.tls.defaultCertificate.secret: {problem}; \
                             serving haptic's own default certificate instead"
                        ),
                    )?;
                }
            }
        }
        Ok(default_certificate())
    }
}

fn list(hosts: &[String]) -> String {
    if hosts.is_empty() {
        "(none)".to_owned()
    } else {
        hosts.join(", ")
    }
}

fn served_phrase(hosts: &[String]) -> String {
    match hosts {
        [] => "its hosts are".to_owned(),
        [one] => format!("{one} is"),
        many => format!("{} are", many.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_hosts_are_checked() {
        assert_eq!(parse_reference("shop/web-tls"), Some(("shop", "web-tls")));
        assert_eq!(parse_reference("web-tls"), None);
        assert_eq!(parse_reference("shop/"), None);
        assert_eq!(parse_reference("Shop/x"), None);
        assert!(valid_host("*.example.com"));
        assert!(!valid_host("a b"));
        assert!(!valid_host(""));
    }

    #[test]
    fn values_that_would_break_lines_are_refused() {
        let mut values: TlsValues =
            serde_json::from_value(defaults()).expect("defaults deserialize");
        assert!(values.check().is_ok());
        values.redirect_code = 200;
        assert!(values.check().unwrap_err().contains("redirectCode"));
        values.redirect_code = 308;
        values.bind = ":443\n    daemon".into();
        assert!(values.check().unwrap_err().contains("tls.bind"));
        values.bind = ":443".into();
        values.default_certificate.secret = "nonamespace".into();
        assert!(values.check().unwrap_err().contains("namespace/name"));
    }

    #[test]
    fn secret_debug_shows_no_data() {
        let secret = TlsSecret {
            type_: "kubernetes.io/tls".into(),
            data: [("tls.key".to_owned(), "c2VjcmV0".to_owned())].into(),
        };
        let shown = format!("{secret:?}");
        assert!(
            shown.contains("tls.key") && !shown.contains("c2VjcmV0"),
            "{shown}"
        );
    }

    #[test]
    fn bad_secret_data_is_described_without_quoting_it() {
        let secret = TlsSecret {
            type_: "kubernetes.io/tls".into(),
            data: [
                ("tls.crt".to_owned(), "bm90IGEgY2VydA==".to_owned()),
                ("tls.key".to_owned(), "!!!c2VjcmV0!!!".to_owned()),
            ]
            .into(),
        };
        let Err(problem) = usable(&secret) else {
            panic!("bad base64 is unusable");
        };
        assert_eq!(problem, "its `tls.key` is not base64");
        let missing = TlsSecret::default();
        assert_eq!(
            usable(&missing).err().as_deref(),
            Some("it has no `tls.crt`")
        );
    }
}

//! Certificates for Ingresses' `spec.tls`, and the one HTTPS bind every
//! Ingress library's certificates are served on.
//!
//! - Certificates come from `kubernetes.io/tls` Secrets in the Ingress's
//!   namespace ([`secrets_watch`], a field selector so no other Secret
//!   reaches haptic). The host checks each one ([`crate::tls`]): PEM, key
//!   matches certificate, not expired, and which names it covers.
//! - Each library that serves Ingresses over HTTPS writes its own crt-list
//!   ([`HttpsLibrary::crt_list`]) and certificate files ([`Certificates`]):
//!   one line per usable Secret with the Ingress's TLS hosts as SNI filters.
//!   A file has one owner, so two libraries never write the same path.
//! - HAProxy takes several `crt-list` on one `bind`, and the first one that
//!   names an SNI serves it (measured with 2.6.12). So the HTTPS frontend
//!   has one bind line naming the crt-list of every enabled library in
//!   [`HTTPS_LIBRARIES`] order ([`HttpsBind`]); the first of them writes it,
//!   with the default certificate and `X-Forwarded-Proto`. A host claimed
//!   in two libraries gets the earlier library's certificate, as its routes
//!   win too (`ingress` merges first).
//!
//! Problems never break the configuration: a missing or unusable Secret is
//! a warning on the Ingress (an Event in a cluster) naming the Secret and
//! the reason, and its hosts get the default certificate. No key material
//! appears in a warning or log line.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use base64::Engine as _;
use serde::Deserialize;

use crate::claims::{Claim, HostClaims};
use crate::http3::{self, Http3};
use crate::k8s::api::networking::v1::Ingress;
use crate::tls::{CertificateInfo, check_certificate, default_certificate};
use crate::values::camel_case;
use crate::{Context, Entry, ObjectKey, Output, Result, SectionKind, Slot, Values, Watch};

mod trust;

pub use trust::{TrustMaterial, trust_material};

/// The certificate served when SNI matches no crt-list line.
pub const DEFAULT_CERTIFICATE: &str = "certs/default.pem";

/// A library whose Ingresses' certificates the HTTPS bind serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpsLibrary {
    /// The library's name; its values must have `tls.enabled`.
    pub name: &'static str,
    /// Its crt-list.
    pub crt_list: &'static str,
    /// What its certificate files' paths start with.
    pub certificate_prefix: &'static str,
}

/// The bundled `ingress` library's certificates.
pub static INGRESS: HttpsLibrary = HttpsLibrary {
    name: "ingress",
    crt_list: "certs/ingress.crt-list",
    certificate_prefix: "certs/",
};

/// The bundled `ingress-nginx` library's certificates.
pub static INGRESS_NGINX: HttpsLibrary = HttpsLibrary {
    name: "ingress-nginx",
    crt_list: "certs/ingress-nginx.crt-list",
    certificate_prefix: "certs/ingress-nginx.",
};

/// The libraries sharing the HTTPS bind, in the order their crt-lists are
/// named (the first to name an SNI serves it).
pub static HTTPS_LIBRARIES: [&HttpsLibrary; 2] = [&INGRESS, &INGRESS_NGINX];

/// The HTTPS bind as the values decide it: which libraries serve
/// certificates on it, and which of them writes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpsBind {
    serving: Vec<&'static HttpsLibrary>,
    passthrough: Option<Passthrough>,
    http3: Option<Http3>,
}

/// ingress-nginx's TLS passthrough (`sslPassthrough.enabled`): its TCP
/// frontend takes the public HTTPS address and routes by SNI, sending the
/// connections it does not pass through to the HTTPS bind, which then
/// listens on `internal` with the PROXY protocol (so `src` stays the
/// client's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passthrough {
    /// The HTTPS address clients connect to: the writing library's
    /// `tls.bind` (ingress-nginx's when none serves TLS).
    pub public: String,
    /// Where the HTTPS bind listens instead (a loopback address: the
    /// directive policy keeps binds on network addresses).
    pub internal: String,
}

/// ingress-nginx's `sslPassthrough.internalBind` default.
pub const PASSTHROUGH_INTERNAL_BIND: &str = "127.0.0.1:10443";

impl HttpsBind {
    /// The libraries of [`HTTPS_LIBRARIES`] that are enabled with
    /// `tls.enabled: true` (the host hands every library every enabled
    /// library's values).
    pub fn from_values(values: &Values) -> Self {
        let serving = HTTPS_LIBRARIES
            .iter()
            .copied()
            .filter(|library| {
                values
                    .library(&camel_case(library.name))
                    .and_then(|tree| tree.get("tls"))
                    .and_then(|tls| tls.get("enabled"))
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false)
            })
            .collect::<Vec<_>>();
        let tls_bind = |library: &str| {
            values
                .library(library)
                .and_then(|tree| tree.get("tls"))
                .and_then(|tls| tls.get("bind"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let passthrough = values
            .library("ingressNginx")
            .and_then(|tree| tree.get("sslPassthrough"))
            .filter(|p| p.get("enabled").and_then(serde_json::Value::as_bool) == Some(true))
            .map(|p| Passthrough {
                public: serving
                    .first()
                    .and_then(|writer| tls_bind(&camel_case(writer.name)))
                    .or_else(|| tls_bind("ingressNginx"))
                    .unwrap_or_else(|| ":8443".to_owned()),
                internal: p
                    .get("internalBind")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or(PASSTHROUGH_INTERNAL_BIND)
                    .to_owned(),
            });
        Self {
            serving,
            passthrough,
            http3: Some(Http3::from_values(values)),
        }
    }

    /// ingress-nginx's TLS passthrough, when its values turn it on.
    pub fn passthrough(&self) -> Option<&Passthrough> {
        self.passthrough.as_ref()
    }

    /// Whether any library serves certificates on the bind (so there is an
    /// HTTPS bind at all).
    pub fn is_served(&self) -> bool {
        !self.serving.is_empty()
    }

    /// Whether `library` writes the bind line (it is the first serving one).
    pub fn is_written_by(&self, library: &str) -> bool {
        self.serving.first().is_some_and(|l| l.name == library)
    }

    /// The bind line's crt-lists, in order.
    pub fn crt_lists(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.serving.iter().map(|library| library.crt_list)
    }

    /// Writes the bind on `address` (with [`Passthrough`], on its internal
    /// address with `accept-proxy`) into `frontend`, the default
    /// certificate (the Secret `default_secret`, `namespace/name`, when
    /// usable, else the host's) and the `X-Forwarded-Proto` rules. Call it
    /// only from the library [`is_written_by`](Self::is_written_by) names.
    /// `values_path` names the setting in a warning
    /// (`templateLibraries.ingress.tls.defaultCertificate.secret`).
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        out: &mut Output,
        frontend: &str,
        address: &str,
        default_secret: &str,
        values_path: &str,
    ) -> Result<()> {
        let default = chosen_default_certificate(ctx, cache, out, default_secret, values_path)?;
        out.secret_file(DEFAULT_CERTIFICATE, default)?;
        let listen = match &self.passthrough {
            Some(p) => format!("{} accept-proxy", p.internal),
            None => address.to_owned(),
        };
        let mut certificates = format!("crt {DEFAULT_CERTIFICATE}");
        for crt_list in self.crt_lists() {
            let _ = write!(certificates, " crt-list {crt_list}");
        }
        let mut line = format!("    bind {listen} ssl {certificates} alpn h2,http/1.1\n");
        // HTTP/3 on the address clients reach (with passthrough too: its
        // TCP frontend leaves the UDP port free, and only this frontend's
        // answers advertise HTTP/3, so passed-through hosts are never
        // asked for over QUIC).
        let public = self
            .passthrough
            .as_ref()
            .map_or(address, |p| p.public.as_str());
        match &self.http3 {
            Some(Http3::On(quic)) => match quic.bind_address(public) {
                Some(quic_address) => {
                    let _ = writeln!(line, "    bind {quic_address} ssl {certificates} alpn h3");
                    out.snippet_keyed(
                        "https-bind:alt-svc",
                        SectionKind::Frontend,
                        frontend,
                        Slot::ResponseRules,
                        0,
                        quic.alt_svc_rule(),
                    )?;
                }
                None => out.warning(
                    None,
                    http3::UNAVAILABLE_REASON,
                    format!(
                        "HTTP/3 is not served on frontend {frontend}: QUIC cannot listen on the HTTPS bind address {public} (one address and port is needed); HTTPS stays on TCP"
                    ),
                )?,
            },
            Some(Http3::Unavailable(why)) => {
                out.warning(None, http3::UNAVAILABLE_REASON, why.clone())?
            }
            Some(Http3::Off) | None => {}
        }
        out.snippet(SectionKind::Frontend, frontend, Slot::Other, 0, line)?;
        // Before the policies of priority 10 read it; a client's own value
        // is replaced.
        out.snippet_keyed(
            "https-bind:forwarded-proto",
            SectionKind::Frontend,
            frontend,
            Slot::RequestRules,
            5,
            "    http-request set-header X-Forwarded-Proto https if { ssl_fc }\n    http-request set-header X-Forwarded-Proto http if !{ ssl_fc }\n",
        )
    }
}

/// The watch of TLS Secrets named `name`: only `kubernetes.io/tls`, and
/// without annotations (`kubectl apply` copies the whole Secret, key
/// included, into one).
pub fn secrets_watch(name: &str) -> Watch {
    Watch::new(name, "v1", "Secret")
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

impl TlsSecret {
    /// The decoded bytes of data key `name`, `None` when absent; the error
    /// names the key, never its data.
    pub fn field(&self, name: &str) -> std::result::Result<Option<Vec<u8>>, String> {
        self.data
            .get(name)
            .map(|encoded| {
                base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .map_err(|_| format!("its `{name}` is not base64"))
            })
            .transpose()
    }
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

type Checked = std::result::Result<UsableCertificate, String>;

/// Check results by Secret, kept while its resourceVersion stays the same:
/// the host's check parses keys, and a render of one changed Ingress must
/// not redo it for every Secret.
pub struct CertificateCache {
    watch: String,
    checked: HashMap<(String, String), (String, Checked)>,
}

impl std::fmt::Debug for CertificateCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CertificateCache({} Secrets)", self.checked.len())
    }
}

impl CertificateCache {
    /// A cache of the Secrets of the watch `watch` ([`secrets_watch`]).
    pub fn new(watch: &str) -> Self {
        Self {
            watch: watch.to_owned(),
            checked: HashMap::new(),
        }
    }

    fn check(&mut self, ctx: &Context<'_>, namespace: &str, name: &str) -> Result<Checked> {
        let Some(secret) = ctx.get::<TlsSecret>(&self.watch, namespace, name)? else {
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

    /// The file HAProxy loads for Secret `namespace/name` (certificate
    /// chain, then key), or why it cannot be served, naming the Secret and
    /// never quoting its data. The `gateway-api` library's listeners use it
    /// too: one check of a Secret for every library.
    pub fn bundle(
        &mut self,
        ctx: &Context<'_>,
        namespace: &str,
        name: &str,
    ) -> Result<std::result::Result<String, String>> {
        Ok(self
            .check(ctx, namespace, name)?
            .map(|certificate| certificate.bundle))
    }

    /// Forgets Secrets that no longer exist; once per render.
    pub fn retain_existing(&mut self, ctx: &Context<'_>) {
        let watch = &self.watch;
        self.checked.retain(|(namespace, name), _| {
            matches!(ctx.get::<TlsSecret>(watch, namespace, name), Ok(Some(_)))
        });
    }
}

/// A cached success still expires with time.
fn still_valid(outcome: Checked) -> Checked {
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

fn usable(secret: &TlsSecret) -> Checked {
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
    usable_pair(field("tls.crt")?, &field("tls.key")?)
}

/// A certificate chain and its key, checked by the host, as one bundle.
fn usable_pair(certificate: String, key: &str) -> Checked {
    let info = check_certificate(&certificate, key)?;
    let mut bundle = certificate;
    if !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    bundle.push_str(key);
    if !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    Ok(UsableCertificate { bundle, info })
}

/// `namespace/name` of an object, both parts lowercase DNS labels.
pub fn parse_reference(reference: &str) -> Option<(&str, &str)> {
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
pub fn valid_host(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'*'))
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

/// One library's certificates in one render: SNI hosts to files, the
/// files, and its crt-list.
pub struct Certificates {
    library: &'static HttpsLibrary,
    /// SNI host -> certificate file, first claim wins.
    hosts: BTreeMap<String, String>,
    /// Certificate file -> content.
    files: BTreeMap<String, String>,
    /// SNI host -> crt-list line options (`verify optional ca-file ...`).
    options: BTreeMap<String, String>,
    /// Which namespaces may serve a certificate for which hosts.
    claims: HostClaims,
}

impl Certificates {
    /// The certificates of `library` (an entry of [`HTTPS_LIBRARIES`]).
    pub fn new(library: &'static HttpsLibrary) -> Self {
        Self {
            library,
            hosts: BTreeMap::new(),
            files: BTreeMap::new(),
            options: BTreeMap::new(),
            claims: HostClaims::default(),
        }
    }

    /// Serves a certificate for a host only to the namespaces the admin's
    /// host-claim policy lets claim it ([`crate::claims`]). Explicit TLS
    /// hosts are taken out before ([`super::claims::claimed`]); this
    /// catches the names a host-less `spec.tls` entry takes from its
    /// certificate.
    pub fn claims(mut self, policy: HostClaims) -> Self {
        self.claims = policy;
        self
    }

    /// Asks for crt-list line `options` (ssl bind options HAProxy takes on
    /// a crt-list line, such as `verify optional ca-file <file>`) on the
    /// line of `host`: its own certificate's, or the default certificate's
    /// when it has none. The first ask for a host wins (ask oldest Ingress
    /// first); returns whether this one did. Options with a line break or
    /// a bracket are refused.
    pub fn host_options(&mut self, host: &str, options: &str) -> Result<bool> {
        if options.contains(['\n', '\r', '[', ']']) || !valid_host(host) {
            return Err(crate::Error::msg(format!(
                "crt-list options for host {host:?} must be one line without brackets"
            )));
        }
        if self.options.contains_key(host) {
            return Ok(false);
        }
        self.options.insert(host.to_owned(), options.to_owned());
        Ok(true)
    }

    /// Adds the `spec.tls` of one served Ingress (call oldest first: the
    /// older Ingress wins a host two claim). Returns every valid TLS host
    /// it names, served with its own certificate or not (a host-less entry
    /// names its certificate's), for the caller's HTTPS redirects.
    pub fn add_ingress(
        &mut self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        ingress: &Entry<'_, Ingress>,
        out: &mut Output,
    ) -> Result<Vec<String>> {
        let mut tls_hosts = Vec::new();
        let Some(entries) = ingress.spec.as_ref().and_then(|spec| spec.tls.as_ref()) else {
            return Ok(tls_hosts);
        };
        let namespace = ingress.key.namespace.as_str();
        let what = format!("Ingress {namespace}/{}", ingress.key.name);
        for entry in entries {
            let mut hosts: Vec<String> = entry
                .hosts
                .iter()
                .flatten()
                .map(|h| h.to_ascii_lowercase())
                .collect();
            let unserved = |hosts: &[String], tls_hosts: &mut Vec<String>| {
                tls_hosts.extend(hosts.iter().filter(|h| valid_host(h)).cloned());
            };
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
                unserved(&hosts, &mut tls_hosts);
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
                unserved(&hosts, &mut tls_hosts);
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
                    unserved(&hosts, &mut tls_hosts);
                    continue;
                }
            };
            if hosts.is_empty() {
                // No hosts: the certificate's own names (what other
                // controllers do with a host-less TLS entry).
                hosts.clone_from(&certificate.info.dns_names);
            }
            let file = format!(
                "{}{namespace}_{secret_name}.pem",
                self.library.certificate_prefix
            );
            for host in &hosts {
                if !valid_host(host) {
                    out.warning(
                        Some(ingress.key),
                        "TLSHostInvalid",
                        format!("{what}: TLS host {host:?} is not a DNS name; skipped"),
                    )?;
                    continue;
                }
                if let Err(refusal) = self.claims.check(namespace, Claim::Host(host)) {
                    out.warning(
                        Some(ingress.key),
                        crate::claims::REASON,
                        format!("{what}: TLS host {host} (a name of its certificate) is not served: {refusal}"),
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
                tls_hosts.push(host.clone());
            }
        }
        Ok(tls_hosts)
    }

    /// Writes the certificate files and the crt-list.
    pub fn finish(
        self,
        ctx: &Context<'_>,
        cache: &mut CertificateCache,
        out: &mut Output,
    ) -> Result<()> {
        cache.retain_existing(ctx);
        for (file, content) in &self.files {
            out.secret_file(file.clone(), content.clone())?;
        }
        let mut by_file: BTreeMap<(&str, Option<&str>), Vec<&str>> = BTreeMap::new();
        for (host, file) in &self.hosts {
            let options = self.options.get(host).map(String::as_str);
            by_file.entry((file, options)).or_default().push(host);
        }
        for (host, options) in &self.options {
            if !self.hosts.contains_key(host) {
                by_file
                    .entry((DEFAULT_CERTIFICATE, Some(options)))
                    .or_default()
                    .push(host);
            }
        }
        // Through the SDK's writer: thousands of hosts on one certificate
        // are several lines (one line holds at most 2,048 words), not one
        // HAProxy refuses.
        let mut crt_list = String::new();
        for ((file, options), hosts) in by_file {
            let Ok((lines, _)) = crate::haproxy::crt_list_lines(file, options, &hosts) else {
                continue;
            };
            for line in lines {
                crt_list.push_str(&line);
                crt_list.push('\n');
            }
        }
        out.file(self.library.crt_list, crt_list)
    }
}

/// The Secret `reference` (`namespace/name`) when it is usable, else the
/// host's certificate.
fn chosen_default_certificate(
    ctx: &Context<'_>,
    cache: &mut CertificateCache,
    out: &mut Output,
    reference: &str,
    values_path: &str,
) -> Result<String> {
    if let Some((namespace, name)) = parse_reference(reference) {
        match cache.check(ctx, namespace, name)? {
            Ok(certificate) => return Ok(certificate.bundle),
            Err(problem) => {
                let key = ObjectKey::new(cache.watch.clone(), namespace, name);
                out.warning(
                    Some(&key),
                    "DefaultCertificateUnusable",
                    format!(
                        "{values_path}: {problem}; serving haptic's own default certificate instead"
                    ),
                )?;
            }
        }
    }
    Ok(default_certificate())
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
mod tests;

//! The TLS annotations: `backend-protocol` with `proxy-ssl-*` (HAProxy as a
//! TLS client of the pods, as server options) and, in [`ClientAuth`],
//! `auth-tls-*` (HAProxy asking clients for a certificate, as crt-list line
//! options and request rules). Values are typed here; the Secrets they name are read at render
//! time through the SDK's [`trust_material`](haptic_sdk::ingress::tls::trust_material).

use crate::annotations::Annotations;
use crate::invalid;
use crate::parse;
use crate::parse::Invalid;
use crate::report::Status;

/// How HAProxy speaks to the pods (`backend-protocol`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 in plain text (the default).
    #[default]
    Http,
    /// HTTP/1.1 over TLS.
    Https,
    /// HTTP/2 in plain text (GRPC, H2C).
    H2c,
    /// HTTP/2 over TLS (GRPCS).
    Grpcs,
}

impl Protocol {
    pub fn is_tls(self) -> bool {
        matches!(self, Self::Https | Self::Grpcs)
    }
}

/// A TLS protocol version, in order, with HAProxy's name for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls10,
    Tls11,
    Tls12,
    Tls13,
}

impl TlsVersion {
    pub fn haproxy(self) -> &'static str {
        match self {
            Self::Tls10 => "TLSv1.0",
            Self::Tls11 => "TLSv1.1",
            Self::Tls12 => "TLSv1.2",
            Self::Tls13 => "TLSv1.3",
        }
    }
}

/// `proxy-ssl-*`: how HAProxy checks the pods' certificates and what it
/// presents to them. Only with `backend-protocol` HTTPS or GRPCS and a
/// `proxy-ssl-secret`, as in ingress-nginx.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendTls {
    /// `proxy-ssl-secret`: `namespace/name`.
    pub namespace: String,
    pub name: String,
    /// `proxy-ssl-verify: on`.
    pub verify: bool,
    /// `proxy-ssl-name`: the name the pod's certificate must be valid for.
    pub server_name: Option<String>,
    /// `proxy-ssl-server-name: on`: send it as SNI.
    pub send_sni: bool,
    /// `proxy-ssl-protocols`: lowest and highest version.
    pub versions: Option<(TlsVersion, TlsVersion)>,
    /// `proxy-ssl-ciphers`, checked.
    pub ciphers: Option<String>,
}

/// Where the checked files of a `proxy-ssl-secret` are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustFiles {
    pub ca: Option<String>,
    pub client: Option<String>,
}

/// The CA file of Secret `namespace/name` (public certificates only).
pub fn ca_file(namespace: &str, name: &str) -> String {
    format!("certs/ingress-nginx.ca/{namespace}_{name}.pem")
}

/// The client certificate file (with its key) of Secret `namespace/name`.
pub fn client_file(namespace: &str, name: &str) -> String {
    format!("certs/ingress-nginx.client/{namespace}_{name}.pem")
}

impl BackendTls {
    /// Why the Secret's files cannot serve these settings, if they cannot.
    pub fn unmet(&self, files: &TrustFiles) -> Option<&'static str> {
        (self.verify && files.ca.is_none())
            .then_some("it has no `ca.crt`, which proxy-ssl-verify: on needs")
    }

    /// The server options, `files` the Secret's checked files: one whole
    /// line (call [`unmet`](Self::unmet) first).
    pub fn options(&self, protocol: Protocol, files: &TrustFiles) -> String {
        let mut words = vec!["ssl".to_owned()];
        match (&files.ca, self.verify) {
            (Some(ca), true) => {
                words.push(format!("verify required ca-file {ca}"));
                if let Some(name) = &self.server_name {
                    words.push(format!("verifyhost {name}"));
                }
            }
            _ => words.push("verify none".to_owned()),
        }
        if let (true, Some(name)) = (self.send_sni, &self.server_name) {
            words.push(format!("sni str({name})"));
        }
        if let Some(client) = &files.client {
            words.push(format!("crt {client}"));
        }
        if let Some((low, high)) = self.versions {
            words.push(format!(
                "ssl-min-ver {} ssl-max-ver {}",
                low.haproxy(),
                high.haproxy()
            ));
        }
        if let Some(ciphers) = &self.ciphers {
            words.push(format!("ciphers {ciphers}"));
        }
        if protocol == Protocol::Grpcs {
            words.push("alpn h2".to_owned());
        }
        words.join(" ")
    }
}

/// The server options of a protocol without `proxy-ssl-*`: ingress-nginx
/// verifies no pod certificate unless told, hence `verify none`.
pub fn plain_options(protocol: Protocol) -> Option<&'static str> {
    match protocol {
        Protocol::Http => None,
        Protocol::Https => Some("ssl verify none"),
        Protocol::H2c => Some("proto h2"),
        Protocol::Grpcs => Some("ssl verify none alpn h2"),
    }
}

const PROXY_SSL_OTHERS: [&str; 6] = [
    "proxy-ssl-verify",
    "proxy-ssl-verify-depth",
    "proxy-ssl-name",
    "proxy-ssl-server-name",
    "proxy-ssl-protocols",
    "proxy-ssl-ciphers",
];

/// Reads `backend-protocol` and the `proxy-ssl-*` annotations of an Ingress
/// of `namespace`.
pub fn read_backend(a: &mut Annotations<'_>, namespace: &str) -> (Protocol, Option<BackendTls>) {
    let protocol = read_protocol(a);
    let leave = |a: &mut Annotations<'_>, why: &str| a.not_honoured(&PROXY_SSL_OTHERS, why);
    let Some((key, value)) = a.take("proxy-ssl-secret") else {
        leave(
            a,
            "proxy-ssl-secret is not set on this Ingress, and ingress-nginx applies no proxy-ssl-* without it",
        );
        return (protocol, None);
    };
    if !protocol.is_tls() {
        let why = "backend-protocol is not HTTPS or GRPCS on this Ingress: the pods are spoken to in plain text, so no TLS setting applies (as in ingress-nginx)";
        a.record(key, Status::NotHonoured(why.to_owned()));
        leave(a, why);
        return (protocol, None);
    }
    let (secret_namespace, name) = match secret_reference(value) {
        Ok(parts) => parts,
        Err(why) => {
            a.record(key, Status::Invalid(why.into_reason()));
            leave(a, "proxy-ssl-secret is invalid");
            return (protocol, None);
        }
    };
    if secret_namespace == namespace {
        a.record(key, Status::Honoured(format!("Secret {secret_namespace}/{name} (Opaque or kubernetes.io/tls): its ca.crt checks the pods' certificates (ca-file) and its tls.crt with tls.key is presented to them (crt); while it is missing or unusable, this Ingress's requests are answered 503, as ingress-nginx denies such a location")));
    } else {
        a.record(key, Status::Differs(format!("Secret {secret_namespace}/{name} is in another namespace: haptic reads only the Ingress's own namespace's Secrets (an Ingress must not borrow another namespace's client key), so this Ingress's requests are answered 503")));
    }
    let mut tls = BackendTls {
        namespace: secret_namespace,
        name,
        verify: false,
        server_name: None,
        send_sni: false,
        versions: None,
        ciphers: None,
    };
    if let Some((key, verify)) = a.parsed("proxy-ssl-verify", on_off) {
        let text = if verify {
            "the pods' certificates must chain to the Secret's ca.crt: server option verify required ca-file; a pod that fails is not used (503 when none passes)"
        } else {
            "the pods' certificates are not verified (the default): verify none"
        };
        a.record(key, Status::Honoured(text.to_owned()));
        tls.verify = verify;
    }
    if let Some((key, depth)) = a.parsed("proxy-ssl-verify-depth", |v| parse::number(v, 0..=100)) {
        a.record(key, Status::Differs(format!("{depth}: HAProxy (3.0 too) has no verify depth for server certificates; a chain of any length to ca.crt is accepted")));
    }
    if let Some((key, name)) = a.parsed("proxy-ssl-name", |v| parse::host(v, false)) {
        let text = if tls.verify {
            Status::Honoured(format!(
                "the pods' certificates must be valid for {name}: verifyhost"
            ))
        } else {
            Status::Honoured(format!(
                "{name}: proxy-ssl-verify is off, so no name is checked (as in nginx); it is sent as SNI with proxy-ssl-server-name: on"
            ))
        };
        a.record(key, text);
        tls.server_name = Some(name);
    }
    if let Some((key, on)) = a.parsed("proxy-ssl-server-name", on_off) {
        let status = match (on, &tls.server_name) {
            (true, Some(name)) => Status::Honoured(format!("SNI {name} is sent: sni str({name})")),
            (true, None) => Status::Differs("no SNI is sent without proxy-ssl-name (nginx sends its internal upstream name, upstream_balancer)".to_owned()),
            (false, _) => Status::Honoured("no SNI is sent (the default)".to_owned()),
        };
        a.record(key, status);
        tls.send_sni = on;
    }
    if let Some((key, (low, high, dropped))) = a.parsed("proxy-ssl-protocols", protocols) {
        let range = format!(
            "ssl-min-ver {} ssl-max-ver {}",
            low.haproxy(),
            high.haproxy()
        );
        let status = if dropped.is_empty() {
            Status::Honoured(range)
        } else {
            Status::Differs(format!(
                "{range}; HAProxy offers a range of versions, so {} is in it too",
                dropped.join(", ")
            ))
        };
        a.record(key, status);
        tls.versions = Some((low, high));
    }
    if let Some(ciphers) = a.honoured("proxy-ssl-ciphers", ciphers, |ciphers| {
        format!("ciphers {ciphers} (TLS 1.2 and below; TLS 1.3 suites stay OpenSSL's, as in nginx)")
    }) {
        tls.ciphers = Some(ciphers);
    }
    (protocol, Some(tls))
}

/// `backend-protocol`.
fn read_protocol(a: &mut Annotations<'_>) -> Protocol {
    let Some((key, value)) = a.take("backend-protocol") else {
        return Protocol::Http;
    };
    let (protocol, status) = match value.trim().to_ascii_uppercase().as_str() {
        "HTTP" => (Protocol::Http, Status::Honoured("HTTP/1.1 to the pods (the default)".into())),
        "HTTPS" => (
            Protocol::Https,
            Status::Honoured("TLS to the pods, their certificate not verified unless proxy-ssl-verify says so (as ingress-nginx): server option ssl verify none".into()),
        ),
        "GRPC" | "H2C" => (
            Protocol::H2c,
            Status::Honoured("HTTP/2 without TLS to the pods (h2c): server option proto h2".into()),
        ),
        "GRPCS" => (
            Protocol::Grpcs,
            Status::Honoured("HTTP/2 over TLS to the pods, their certificate not verified unless proxy-ssl-verify says so: server options ssl verify none alpn h2".into()),
        ),
        "AUTO_HTTP" | "FCGI" | "AJP" => (
            Protocol::Http,
            Status::NotHonoured(format!("{value}: HAProxy backends here speak HTTP/1.1, HTTP/2 (h2c) or either over TLS; the pods get HTTP/1.1")),
        ),
        _ => (
            Protocol::Http,
            Status::Invalid(format!("{value:?} is not HTTP, HTTPS, GRPC, GRPCS, H2C, AUTO_HTTP, FCGI or AJP")),
        ),
    };
    a.record(key, status);
    protocol
}

/// `on` / `off`, as ingress-nginx's `proxy-ssl-verify` takes them.
pub fn on_off(value: &str) -> Result<bool, Invalid> {
    match value.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(invalid!("{other:?} is not \"on\" or \"off\"")),
    }
}

/// `namespace/name` of a Secret, as ingress-nginx's TLS annotations name one.
pub fn secret_reference(value: &str) -> Result<(String, String), Invalid> {
    let text = value.trim();
    haptic_sdk::ingress::tls::parse_reference(text)
        .filter(|(_, name)| name.len() <= 253)
        .map(|(namespace, name)| (namespace.to_owned(), name.to_owned()))
        .ok_or_else(|| invalid!("{text:?} is not namespace/name of a Secret"))
}

/// `proxy-ssl-protocols`: nginx's version names, space separated, as the
/// lowest and highest TLS version and the versions in between the list
/// left out. SSLv2 and SSLv3 are refused (HAProxy's OpenSSL has neither).
fn protocols(value: &str) -> Result<(TlsVersion, TlsVersion, Vec<&'static str>), Invalid> {
    let mut versions = Vec::new();
    for word in value.split_whitespace() {
        versions.push(match word {
            "TLSv1" => TlsVersion::Tls10,
            "TLSv1.1" => TlsVersion::Tls11,
            "TLSv1.2" => TlsVersion::Tls12,
            "TLSv1.3" => TlsVersion::Tls13,
            "SSLv2" | "SSLv3" => {
                return Err(invalid!(
                    "{word}: HAProxy's OpenSSL speaks TLSv1 to TLSv1.3 only"
                ));
            }
            other => {
                return Err(invalid!(
                    "{other:?} is not one of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3"
                ));
            }
        });
    }
    let (Some(low), Some(high)) = (versions.iter().min(), versions.iter().max()) else {
        return Err(Invalid::from("no protocol version"));
    };
    let all = [
        (TlsVersion::Tls10, "TLSv1"),
        (TlsVersion::Tls11, "TLSv1.1"),
        (TlsVersion::Tls12, "TLSv1.2"),
        (TlsVersion::Tls13, "TLSv1.3"),
    ];
    let dropped = all
        .iter()
        .filter(|(v, _)| v > low && v < high && !versions.contains(v))
        .map(|(_, name)| *name)
        .collect();
    Ok((*low, *high, dropped))
}

/// OpenSSL's cipher-list keywords that select ciphers (HAProxy 2.6's
/// OpenSSL 3.0).
const CIPHER_KEYWORDS: &[&str] = &[
    "DEFAULT",
    "ALL",
    "HIGH",
    "MEDIUM",
    "LOW",
    "COMPLEMENTOFDEFAULT",
    "COMPLEMENTOFALL",
    "aNULL",
    "eNULL",
    "NULL",
    "kRSA",
    "aRSA",
    "RSA",
    "kDHE",
    "kEDH",
    "DH",
    "DHE",
    "EDH",
    "ADH",
    "kECDHE",
    "kEECDH",
    "ECDH",
    "ECDHE",
    "EECDH",
    "AECDH",
    "aECDSA",
    "ECDSA",
    "aDSS",
    "DSS",
    "PSK",
    "kPSK",
    "SRP",
    "TLSv1.2",
    "TLSv1",
    "SSLv3",
    "AES",
    "AES128",
    "AES256",
    "AESGCM",
    "AESCCM",
    "AESCCM8",
    "CHACHA20",
    "CAMELLIA",
    "CAMELLIA128",
    "CAMELLIA256",
    "ARIA",
    "ARIA128",
    "ARIA256",
    "3DES",
    "DES",
    "RC4",
    "IDEA",
    "SEED",
    "MD5",
    "SHA",
    "SHA1",
    "SHA256",
    "SHA384",
    "SUITEB128",
    "SUITEB128ONLY",
    "SUITEB192",
];

/// A cipher suite name of OpenSSL's list (`ECDHE-RSA-AES128-GCM-SHA256`):
/// upper-case words of letters and digits joined by `-`, naming a known
/// key exchange or cipher.
fn cipher_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    let known_start = [
        "ECDHE",
        "DHE",
        "ADH",
        "AECDH",
        "AES128",
        "AES256",
        "CAMELLIA128",
        "CAMELLIA256",
        "ARIA128",
        "ARIA256",
        "RSA",
        "PSK",
        "SRP",
        "NULL",
    ];
    parts.len() >= 2
        && known_start.contains(&parts[0])
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        })
        && parts.iter().any(|p| {
            p.starts_with("AES")
                || p.starts_with("CHACHA20")
                || p.starts_with("CAMELLIA")
                || p.starts_with("ARIA")
                || *p == "NULL"
        })
}

/// `proxy-ssl-ciphers`: an OpenSSL cipher list of known names and keywords
/// (`:`, `,` or spaces between, `!`, `-`, `+` before, `+` joining, and
/// `@STRENGTH`), normalized to `:` between. At least one item must select
/// ciphers and none may remove `ALL` or `DEFAULT`: an empty list makes
/// HAProxy refuse the whole configuration.
fn ciphers(value: &str) -> Result<String, Invalid> {
    let items: Vec<&str> = value
        .split([':', ',', ' '])
        .filter(|s| !s.is_empty())
        .collect();
    let mut selects = false;
    for item in &items {
        if *item == "@STRENGTH" {
            continue;
        }
        let (removes, body) = match item.strip_prefix(['!', '-']) {
            Some(rest) => (true, rest),
            None => (false, item.strip_prefix('+').unwrap_or(item)),
        };
        let known = |part: &str| CIPHER_KEYWORDS.contains(&part) || cipher_name(part);
        if body.is_empty() || !body.split('+').all(known) {
            return Err(invalid!(
                "{item:?} is not an OpenSSL cipher name or keyword (such as ECDHE-RSA-AES128-GCM-SHA256, HIGH, !aNULL)"
            ));
        }
        if removes && matches!(body, "ALL" | "DEFAULT" | "HIGH" | "COMPLEMENTOFDEFAULT") {
            return Err(invalid!(
                "{item:?} removes too much: the list must leave ciphers to speak"
            ));
        }
        if !removes && !item.starts_with('+') {
            selects |= matches!(body, "DEFAULT" | "ALL" | "HIGH" | "MEDIUM") || cipher_name(body);
        }
    }
    if !selects {
        return Err(invalid!(
            "{value:?} selects no cipher by name or by DEFAULT, ALL, HIGH or MEDIUM"
        ));
    }
    Ok(items.join(":"))
}

/// `auth-tls-verify-client`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum VerifyClient {
    /// A certificate the CA signed is required (the default).
    #[default]
    On,
    /// One is asked for; without one the request passes.
    Optional,
    /// No certificate is asked for.
    Off,
}

/// `auth-tls-*`: HAProxy asks the clients of the Ingress's hosts for a
/// certificate signed by the `ca.crt` of `auth-tls-secret` (crt-list line
/// options on the HTTPS bind) and checks it per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientAuth {
    pub namespace: String,
    pub name: String,
    pub verify: VerifyClient,
    /// `auth-tls-error-page`: where a request without a certificate goes.
    pub error_page: Option<String>,
    /// `auth-tls-pass-certificate-to-upstream: "true"`.
    pub pass_certificate: bool,
    /// `auth-tls-match-cn`: a checked regex on the subject DN.
    pub match_cn: Option<String>,
}

/// The TLS fetches of the client certificate as ingress-nginx's headers
/// carry them (nginx's `$ssl_client_s_dn` is RFC 2253: `CN=a,O=b`).
const SUBJECT_DN: &str = "ssl_c_s_dn(,0,rfc2253)";
const ISSUER_DN: &str = "ssl_c_i_dn(,0,rfc2253)";

impl ClientAuth {
    /// The crt-list line options of the Ingress's hosts, `ca` the checked
    /// CA file; `None` when no certificate is asked for. `verify optional`
    /// even for `on`: a client without a certificate then gets ingress-nginx's
    /// 400 from [`rules`](Self::rules) instead of a failed handshake.
    pub fn crt_list_options(&self, ca: &str) -> Option<String> {
        (self.verify != VerifyClient::Off).then(|| format!("verify optional ca-file {ca}"))
    }

    /// The frontend request rules for the requests Ingress `acl` routes:
    /// the client's own `ssl-client-*` headers dropped (they would claim a
    /// verification), the checks, then the headers ingress-nginx sends.
    pub fn rules(&self, acl: &str) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let mut line = |text: String| {
            let _ = writeln!(out, "    {text}");
        };
        for header in [
            "ssl-client-cert",
            "ssl-client-verify",
            "ssl-client-subject-dn",
            "ssl-client-issuer-dn",
        ] {
            line(format!("http-request del-header {header} if {acl}"));
        }
        if self.verify == VerifyClient::Off {
            return out;
        }
        if self.verify == VerifyClient::On {
            if let Some(page) = &self.error_page {
                line(format!(
                    "http-request redirect location {} code 302 if {acl} !{{ ssl_c_used }}",
                    haptic_sdk::names::quote(&parse::log_format_literal(page))
                ));
            }
            line(format!(
                "http-request deny deny_status 400 if {acl} !{{ ssl_c_used }}"
            ));
        }
        if let Some(pattern) = &self.match_cn {
            line(format!(
                "http-request deny deny_status 403 if {acl} !{{ {SUBJECT_DN} -m reg {} }}",
                haptic_sdk::names::quote(pattern)
            ));
        }
        // With `verify optional`, a certificate is only used once it
        // verified: a failing one ends the handshake.
        line(format!(
            "http-request set-header ssl-client-verify SUCCESS if {acl} {{ ssl_c_used }}"
        ));
        line(format!(
            "http-request set-header ssl-client-verify NONE if {acl} !{{ ssl_c_used }}"
        ));
        line(format!(
            "http-request set-header ssl-client-subject-dn %[{SUBJECT_DN}] if {acl} {{ ssl_c_used }}"
        ));
        line(format!(
            "http-request set-header ssl-client-issuer-dn %[{ISSUER_DN}] if {acl} {{ ssl_c_used }}"
        ));
        if self.pass_certificate {
            line(format!(
                "http-request set-header ssl-client-cert -----BEGIN%%20CERTIFICATE-----%%0A%[ssl_c_der,base64,url_enc]%%0A-----END%%20CERTIFICATE-----%%0A if {acl} {{ ssl_c_used }}"
            ));
        }
        out
    }
}

const AUTH_TLS_OTHERS: [&str; 5] = [
    "auth-tls-verify-client",
    "auth-tls-verify-depth",
    "auth-tls-error-page",
    "auth-tls-pass-certificate-to-upstream",
    "auth-tls-match-cn",
];

/// Reads the `auth-tls-*` annotations of an Ingress of `namespace`.
pub fn read_client_auth(a: &mut Annotations<'_>, namespace: &str) -> Option<ClientAuth> {
    let leave = |a: &mut Annotations<'_>, why: &str| a.not_honoured(&AUTH_TLS_OTHERS, why);
    let Some((key, value)) = a.take("auth-tls-secret") else {
        leave(
            a,
            "auth-tls-secret is not set on this Ingress, and ingress-nginx applies no auth-tls-* without it",
        );
        return None;
    };
    let (secret_namespace, name) = match secret_reference(value) {
        Ok(parts) => parts,
        Err(why) => {
            a.record(key, Status::Invalid(why.into_reason()));
            leave(a, "auth-tls-secret is invalid");
            return None;
        }
    };
    if secret_namespace == namespace {
        a.record(key, Status::Honoured(format!("the ca.crt of Secret {secret_namespace}/{name} (Opaque or kubernetes.io/tls) checks client certificates for this Ingress's hosts: crt-list line options verify optional ca-file on the HTTPS bind; while it is missing or unusable, this Ingress's requests are answered 503, as ingress-nginx denies such a location")));
    } else {
        a.record(key, Status::Differs(format!("Secret {secret_namespace}/{name} is in another namespace: haptic reads only the Ingress's own namespace's Secrets, so this Ingress's requests are answered 503")));
    }
    let mut auth = ClientAuth {
        namespace: secret_namespace,
        name,
        verify: VerifyClient::On,
        error_page: None,
        pass_certificate: false,
        match_cn: None,
    };
    if let Some((key, value)) = a.take("auth-tls-verify-client") {
        let (verify, status) = match value.trim() {
            "on" => (Some(VerifyClient::On), Status::Differs("a certificate the CA signed is required: without one 400, as in ingress-nginx; one the CA did not sign fails the TLS handshake, where nginx answers 400".into())),
            "optional" => (Some(VerifyClient::Optional), Status::Differs("a certificate is asked for and, when sent, must be signed by the CA: one the CA did not sign fails the TLS handshake, where nginx answers 400".into())),
            "optional_no_ca" => (Some(VerifyClient::Optional), Status::Differs("handled as optional: HAProxy verifies a certificate it asks for on a crt-list line, so one the CA did not sign fails the TLS handshake instead of reaching the backend".into())),
            "off" => (Some(VerifyClient::Off), Status::Honoured("no certificate is asked for".into())),
            other => (None, Status::Invalid(format!("{other:?} is not on, off, optional or optional_no_ca; on applies"))),
        };
        a.record(key, status);
        if let Some(verify) = verify {
            auth.verify = verify;
        }
    }
    if let Some((key, depth)) = a.parsed("auth-tls-verify-depth", |v| parse::number(v, 1..=100)) {
        a.record(key, Status::Differs(format!("{depth}: HAProxy (3.0 too) has no verify depth on a crt-list line; a chain of any length to ca.crt is accepted")));
    }
    if let Some((key, page)) = a.parsed("auth-tls-error-page", parse::url) {
        let status = if auth.verify == VerifyClient::On {
            Status::Differs(format!(
                "a request without a certificate is redirected (302) to {page}; a certificate the CA did not sign fails the TLS handshake before any page can be shown"
            ))
        } else {
            Status::NotHonoured("auth-tls-verify-client is not on: no request is refused".into())
        };
        a.record(key, status);
        auth.error_page = Some(page);
    }
    if let Some((key, pass)) = a.parsed("auth-tls-pass-certificate-to-upstream", parse::boolean) {
        let status = if pass {
            Status::Differs("the backend receives ssl-client-cert, the URL-encoded PEM certificate as in ingress-nginx, its base64 on one line".into())
        } else {
            Status::Honoured("the certificate is not passed (the default)".into())
        };
        a.record(key, status);
        auth.pass_certificate = pass;
    }
    if let Some(pattern) = a.honoured("auth-tls-match-cn", crate::regex::search_pattern, |_| "a request whose certificate's subject DN (RFC 2253, CN=...) does not match the PCRE2 pattern is answered 403".into()) {
        auth.match_cn = Some(pattern);
    }
    Some(auth)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_become_a_range_and_say_what_it_adds() {
        assert_eq!(
            protocols("TLSv1.2 TLSv1.3"),
            Ok((TlsVersion::Tls12, TlsVersion::Tls13, vec![]))
        );
        assert_eq!(
            protocols("TLSv1 TLSv1.2"),
            Ok((TlsVersion::Tls10, TlsVersion::Tls12, vec!["TLSv1.1"]))
        );
        assert!(protocols("SSLv3 TLSv1.2").is_err());
        assert!(protocols("TLSv1.2; ssl-max-ver").is_err());
        assert!(protocols("").is_err());
    }

    #[test]
    fn cipher_lists_are_checked_word_by_word() {
        assert_eq!(
            ciphers("ECDHE-RSA-AES128-GCM-SHA256 , HIGH:!aNULL:!MD5"),
            Ok("ECDHE-RSA-AES128-GCM-SHA256:HIGH:!aNULL:!MD5".to_owned())
        );
        assert_eq!(ciphers("ECDHE+AESGCM:HIGH"), Ok("ECDHE+AESGCM:HIGH".into()));
        for bad in [
            "HIGH crt /etc/passwd",
            "NOPE-CIPHER",
            "!aNULL",
            "HIGH:!ALL",
            "ECDHE-RSA-AES128-GCM-SHA256\nverify none",
            "",
        ] {
            assert!(ciphers(bad).is_err(), "{bad:?} passed");
        }
    }

    #[test]
    fn options_are_one_whole_line() {
        let tls = BackendTls {
            namespace: "shop".into(),
            name: "pods-ca".into(),
            verify: true,
            server_name: Some("web.shop.svc".into()),
            send_sni: true,
            versions: Some((TlsVersion::Tls12, TlsVersion::Tls13)),
            ciphers: Some("HIGH".into()),
        };
        let files = TrustFiles {
            ca: Some(ca_file("shop", "pods-ca")),
            client: None,
        };
        assert_eq!(tls.unmet(&files), None);
        assert_eq!(
            tls.options(Protocol::Grpcs, &files),
            "ssl verify required ca-file certs/ingress-nginx.ca/shop_pods-ca.pem verifyhost web.shop.svc sni str(web.shop.svc) ssl-min-ver TLSv1.2 ssl-max-ver TLSv1.3 ciphers HIGH alpn h2"
        );
        assert!(tls.unmet(&TrustFiles::default()).is_some());
    }
}

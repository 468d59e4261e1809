//! Certificates for TLS termination: the checks a library asks for before it
//! serves a Secret's certificate (`haptic:template/tls@0.2.0`), and the
//! default certificate served when SNI matches no host.
//!
//! Key material never leaves this module in anything but the PEM a library
//! asked for: errors describe what is wrong in words, [`SecretPem`]'s `Debug`
//! is redacted, and files are written with mode 0600.

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use thiserror::Error;
use x509_parser::extensions::GeneralName;

/// The marker of every PEM private key block (`PRIVATE KEY`, `RSA PRIVATE
/// KEY`, `EC PRIVATE KEY`, `ENCRYPTED PRIVATE KEY`).
const PRIVATE_KEY_MARKER: &str = "PRIVATE KEY-----";

/// True when `content` holds a PEM private key: such a file is secret
/// whatever the library that wrote it said.
pub fn holds_private_key(content: &str) -> bool {
    content.contains(PRIVATE_KEY_MARKER)
}

/// PEM text that holds key material. Cheap to clone; `Debug` shows only
/// its size.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretPem(Arc<str>);

impl SecretPem {
    pub fn new(pem: impl Into<Arc<str>>) -> Self {
        Self(pem.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretPem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretPem(<{} bytes redacted>)", self.0.len())
    }
}

/// What a certificate that passed [`check_certificate`] is good for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// Subject alternative DNS names, else the common name.
    pub dns_names: Vec<String>,
    /// Seconds since the Unix epoch.
    pub not_before: i64,
    pub not_after: i64,
}

/// What is wrong with a certificate and key a library asked about: one
/// sentence for a person (the library passes it on in a warning), never
/// quoting the input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CertificateError {
    #[error("the certificate is not valid PEM ({0})")]
    CertificatePem(&'static str),
    #[error("the certificate holds no `BEGIN CERTIFICATE` block")]
    NoCertificate,
    #[error("the private key is encrypted; HAProxy needs it unencrypted")]
    EncryptedKey,
    #[error("the private key is not a PEM PKCS#1, PKCS#8 or SEC1 key ({0})")]
    KeyPem(&'static str),
    #[error("the certificate cannot be parsed as X.509 ({0})")]
    X509(String),
    #[error("the private key is not an RSA, ECDSA or Ed25519 key HAProxy can use")]
    KeyType,
    #[error("the private key does not match the certificate")]
    KeyMismatch,
    #[error("the certificate expired on {0}")]
    Expired(String),
    #[error("the certificate is not valid before {0}")]
    NotYetValid(String),
}

/// Checks a certificate chain and its private key the way HAProxy will load
/// them, at time `now` (seconds since the Unix epoch). The error is one
/// sentence for a person and never quotes the input.
pub fn check_certificate(
    certificate_pem: &str,
    private_key_pem: &str,
    now: i64,
) -> Result<CertificateInfo, CertificateError> {
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(certificate_pem.as_bytes())
            .collect::<Result<_, _>>()
            .map_err(|error| CertificateError::CertificatePem(pem_error(&error)))?;
    let Some(leaf) = chain.first() else {
        return Err(CertificateError::NoCertificate);
    };
    if private_key_pem.contains("ENCRYPTED PRIVATE KEY") {
        return Err(CertificateError::EncryptedKey);
    }
    let key = PrivateKeyDer::from_pem_slice(private_key_pem.as_bytes())
        .map_err(|error| CertificateError::KeyPem(pem_error(&error)))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|error| CertificateError::X509(error.to_string()))?;
    let provider = rustls::crypto::ring::default_provider();
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|_| CertificateError::KeyType)?;
    rustls::sign::CertifiedKey::new(chain.clone(), signing_key)
        .keys_match()
        .map_err(|_| CertificateError::KeyMismatch)?;

    let validity = parsed.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    if now > not_after {
        return Err(CertificateError::Expired(
            validity
                .not_after
                .to_rfc2822()
                .unwrap_or_else(|_| not_after.to_string()),
        ));
    }
    if now < not_before {
        return Err(CertificateError::NotYetValid(
            validity
                .not_before
                .to_rfc2822()
                .unwrap_or_else(|_| not_before.to_string()),
        ));
    }
    let dns_names = names_of(&parsed);
    Ok(CertificateInfo {
        dns_names,
        not_before,
        not_after,
    })
}

/// The DNS names a certificate is valid for: its subject alternative
/// names, else its common name; lowercase.
fn names_of(parsed: &x509_parser::certificate::X509Certificate<'_>) -> Vec<String> {
    let names: Vec<String> = match parsed.subject_alternative_name() {
        Ok(Some(names)) => names
            .value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(name) => Some(name.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if !names.is_empty() {
        return names;
    }
    parsed
        .subject()
        .iter_common_name()
        .filter_map(|name| name.as_str().ok())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// The DNS names of a DER certificate (what a TLS server presented);
/// `None` when it does not parse.
pub fn der_certificate_names(der: &[u8]) -> Option<Vec<String>> {
    let (_, parsed) = x509_parser::parse_x509_certificate(der).ok()?;
    Some(names_of(&parsed))
}

/// rustls-pki-types' PEM errors can quote the offending section; keep only
/// what kind of error it was.
/// The `notAfter` (Unix seconds) of the first certificate in `content`,
/// the one HAProxy presents from a PEM bundle; `None` when it holds no
/// parseable certificate. For the expiry metric: a file that is not a
/// certificate is simply not one.
pub fn first_certificate_not_after(content: &str) -> Option<i64> {
    if !content.contains("-----BEGIN CERTIFICATE-----") {
        return None;
    }
    let leaf = CertificateDer::pem_slice_iter(content.as_bytes())
        .next()?
        .ok()?;
    let (_, parsed) = x509_parser::parse_x509_certificate(&leaf).ok()?;
    Some(parsed.validity().not_after.timestamp())
}

fn pem_error(error: &rustls::pki_types::pem::Error) -> &'static str {
    use rustls::pki_types::pem::Error as E;
    match error {
        E::MissingSectionEnd { .. } => "a section has no END line",
        E::IllegalSectionStart { .. } => "a BEGIN line is malformed",
        E::Base64Decode(_) => "the base64 inside does not decode",
        E::NoItemsFound => "no PEM block of the expected type",
        _ => "unreadable",
    }
}

/// Seconds since the Unix epoch, now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Why the default certificate could not be set up.
#[derive(Debug, Error)]
pub enum DefaultCertificateError {
    #[error("cannot read the default certificate {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot write the default certificate {}: {source}; name a writable file with \
         --default-certificate",
        path.display()
    )]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the default certificate {} is unusable: {problem}; fix it, or delete it and haptic \
         generates a new one",
        path.display()
    )]
    Unusable {
        path: PathBuf,
        problem: CertificateError,
    },
    #[error("cannot generate a default certificate: {0}")]
    Generate(String),
}

/// The certificate served when SNI matches no host, as one PEM bundle
/// (certificate, then key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultCertificate {
    pub pem: SecretPem,
    /// Where it lives, when it was loaded from or saved to a file.
    pub path: Option<PathBuf>,
}

impl DefaultCertificate {
    /// A fresh self-signed certificate, kept in memory only.
    pub fn generate() -> Result<Self, DefaultCertificateError> {
        Ok(Self {
            pem: generate_self_signed()?,
            path: None,
        })
    }

    /// The certificate in `path`; when the file does not exist, a fresh one
    /// written there (mode 0600), so it stays the same across renders and
    /// restarts.
    pub fn load_or_create(path: &Path) -> Result<Self, DefaultCertificateError> {
        match std::fs::read_to_string(path) {
            Ok(pem) => {
                let (certificate, key) = split_bundle(&pem);
                check_certificate(&certificate, &key, unix_now()).map_err(|problem| {
                    DefaultCertificateError::Unusable {
                        path: path.to_owned(),
                        problem,
                    }
                })?;
                Ok(Self {
                    pem: SecretPem::new(pem),
                    path: Some(path.to_owned()),
                })
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                let pem = generate_self_signed()?;
                write_secret_file(path, pem.expose()).map_err(|source| {
                    DefaultCertificateError::Write {
                        path: path.to_owned(),
                        source,
                    }
                })?;
                tracing::info!(path = %path.display(), "generated a self-signed default certificate");
                Ok(Self {
                    pem,
                    path: Some(path.to_owned()),
                })
            }
            Err(source) => Err(DefaultCertificateError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// `$XDG_STATE_HOME/haptic/default-certificate.pem`, else
    /// `~/.local/state/haptic/default-certificate.pem`: where local commands
    /// keep the generated certificate.
    pub fn local_path() -> Option<PathBuf> {
        let state = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME").map(|home| Path::new(&home).join(".local/state"))
            })?;
        Some(state.join("haptic").join("default-certificate.pem"))
    }
}

/// Splits a PEM bundle into its certificate blocks and its key block.
pub fn split_bundle(pem: &str) -> (String, String) {
    let (mut certificates, mut key) = (String::new(), String::new());
    let mut block = String::new();
    for line in pem.lines() {
        block.push_str(line);
        block.push('\n');
        if line.starts_with("-----END ") {
            if line.contains(PRIVATE_KEY_MARKER) {
                key.push_str(&block);
            } else {
                certificates.push_str(&block);
            }
            block.clear();
        }
    }
    (certificates, key)
}

fn generate_self_signed() -> Result<SecretPem, DefaultCertificateError> {
    let generate = || -> Result<String, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "haptic default certificate");
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2125, 1, 1);
        let certificate = params.self_signed(&key)?;
        Ok(format!("{}{}", certificate.pem(), key.serialize_pem()))
    };
    generate()
        .map(SecretPem::new)
        .map_err(|error| DefaultCertificateError::Generate(error.to_string()))
}

/// Writes `content` to `path` with mode 0600, creating the parent (0700).
pub fn write_secret_file(path: &Path, content: &str) -> std::io::Result<()> {
    if let Some(parent) = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && !p.exists())
    {
        std::fs::create_dir_all(parent)?;
        std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(content.as_bytes())?;
    // An existing file keeps its mode through `open`; make it 0600 anyway.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

#[cfg(test)]
mod tests;

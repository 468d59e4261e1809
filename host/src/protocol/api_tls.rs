//! TLS for the agent's API (rustls with ring): the server side with an
//! optional client CA (mutual TLS), and the controller's client side.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use thiserror::Error;
use tokio_rustls::TlsAcceptor;

/// The server's certificate files.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Clients must present a certificate this CA signed.
    pub client_ca: Option<PathBuf>,
}

/// The client's trust and identity.
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// The CA that signed the agents' serving certificates.
    pub ca: PathBuf,
    /// The client certificate and key, for agents that require mutual TLS.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// A TLS file that cannot be used. Never carries key material: only paths
/// and what was wrong.
#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {what} from {}: {detail}", path.display())]
    Read {
        what: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("the TLS configuration is unusable: {0}")]
    Config(String),
}

fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |detail: String| TlsError::Read {
        what,
        path: path.to_owned(),
        detail,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| read(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read(e.to_string()))?;
    if certs.is_empty() {
        return Err(read("no PEM certificate in the file".to_owned()));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    // The parser's error names the PEM problem, not the key's bytes.
    PrivateKeyDer::from_pem_file(path).map_err(|e| TlsError::Read {
        what: "a private key",
        path: path.to_owned(),
        detail: e.to_string(),
    })
}

fn roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(path, "CA certificates")? {
        roots
            .add(cert)
            .map_err(|e| TlsError::Config(format!("CA file {}: {e}", path.display())))?;
    }
    Ok(roots)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The acceptor for the agent's listener.
pub fn acceptor(files: &ServerTls) -> Result<TlsAcceptor, TlsError> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &files.client_ca {
        Some(ca) => {
            // Unauthenticated connections are let through the handshake so
            // probes reach /healthz; the API refuses them with 401.
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots(ca)?), provider())
                    .allow_unauthenticated()
                    .build()
                    .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(
            certificates(&files.cert, "the serving certificate")?,
            private_key(&files.key)?,
        )
        .map_err(|e| {
            TlsError::Config(format!(
                "{} and {}: {e}",
                files.cert.display(),
                files.key.display()
            ))
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The controller's TLS client configuration.
pub fn client_config(files: &ClientTls) -> Result<rustls::ClientConfig, TlsError> {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots(&files.ca)?);
    match &files.identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                certificates(cert, "the client certificate")?,
                private_key(key)?,
            )
            .map_err(|e| {
                TlsError::Config(format!("{} and {}: {e}", cert.display(), key.display()))
            }),
        None => Ok(builder.with_no_client_auth()),
    }
}

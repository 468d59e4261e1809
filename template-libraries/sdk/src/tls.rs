//! Certificates, checked by the host (`haptic:template/tls@0.3.0`): a
//! library hands over a Secret's PEM and learns whether HAProxy can serve it
//! and for which names, without carrying X.509 or crypto code itself.
//!
//! Outside WebAssembly (native unit tests) there is no host: checks fail with
//! a message saying so, and there is no default certificate. Test TLS with
//! `haptic test` fixtures, which run on the real host.

/// What the host found in a certificate that passed its checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// DNS names the certificate is valid for (subject alternative names,
    /// else the common name), lowercase; may hold wildcards like
    /// `*.example.com`.
    pub dns_names: Vec<String>,
    /// Seconds since the Unix epoch.
    pub not_before: i64,
    pub not_after: i64,
}

impl CertificateInfo {
    /// True when the certificate covers `host` (an exact name, or a wildcard
    /// one label deep: `*.example.com` covers `a.example.com`, not
    /// `example.com` nor `a.b.example.com`).
    pub fn covers(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        self.dns_names.iter().any(|name| {
            if name == &host {
                return true;
            }
            match (name.strip_prefix("*."), host.split_once('.')) {
                (Some(suffix), Some((label, rest))) => !label.is_empty() && rest == suffix,
                _ => false,
            }
        })
    }
}

/// Checks a certificate chain and its private key (both PEM): at least one
/// certificate, an unencrypted key HAProxy can load that matches the first
/// certificate, and now within its validity. The error is one sentence
/// (`the private key does not match the certificate`) and never contains
/// key material.
pub fn check_certificate(
    certificate_pem: &str,
    private_key_pem: &str,
) -> Result<CertificateInfo, String> {
    #[cfg(target_arch = "wasm32")]
    {
        crate::wit::haptic::template::tls::check_certificate(certificate_pem, private_key_pem).map(
            |info| CertificateInfo {
                dns_names: info.dns_names,
                not_before: info.not_before,
                not_after: info.not_after,
            },
        )
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = (certificate_pem, private_key_pem);
        Err(
            "certificates are checked by the haptic host; test TLS with `haptic test` fixtures"
                .to_owned(),
        )
    }
}

/// The host's default certificate with its key, one PEM bundle to write as a
/// [secret file](crate::Output::secret_file) and serve when SNI matches no
/// host. Empty outside WebAssembly.
pub fn default_certificate() -> String {
    #[cfg(target_arch = "wasm32")]
    {
        crate::wit::haptic::template::tls::default_certificate()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_cover_one_label() {
        let info = CertificateInfo {
            dns_names: vec!["*.example.com".into(), "foo.bar.com".into()],
            not_before: 0,
            not_after: 0,
        };
        assert!(info.covers("a.example.com"));
        assert!(info.covers("FOO.bar.com"));
        assert!(!info.covers("example.com"));
        assert!(!info.covers("a.b.example.com"));
        assert!(!info.covers(".example.com"));
        assert!(!info.covers("bar.com"));
    }
}

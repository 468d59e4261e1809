//! What a Secret holds for TLS beyond a served certificate (CA
//! certificates, a client certificate with its key), read and checked for
//! the libraries that make HAProxy a TLS client or ask clients for
//! certificates (ingress-nginx's `proxy-ssl-secret`, `auth-tls-secret`).

use std::fmt::Write as _;

use base64::Engine as _;

use super::usable_pair;

/// What a Secret holds for TLS beyond a served certificate, as
/// ingress-nginx reads it for `proxy-ssl-secret` and `auth-tls-secret`:
/// the CA certificates that check a peer (`ca.crt`) and a certificate with
/// its key (`tls.crt`, `tls.key`) that HAProxy presents as a client.
#[derive(Clone, Default)]
pub struct TrustMaterial {
    /// The CA certificates of `ca.crt`, re-encoded PEM blocks only (so a
    /// key pasted into it never reaches the file).
    pub ca: Option<String>,
    /// `tls.crt` and `tls.key`, checked by the host like a served
    /// certificate: a file for [`Output::secret_file`] only.
    pub client: Option<String>,
}

impl std::fmt::Debug for TrustMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustMaterial")
            .field("ca", &self.ca.is_some())
            .field("client", &self.client.is_some())
            .finish()
    }
}

/// Reads and checks a Secret's `ca.crt`, and its `tls.crt` with `tls.key`
/// when both are present. `field` gives a data key's decoded bytes (the
/// caller's watch decides how a Secret arrives). The error names the key at
/// fault and never quotes data; a Secret with none of them is an error.
pub fn trust_material(
    field: impl Fn(&str) -> std::result::Result<Option<Vec<u8>>, String>,
) -> std::result::Result<TrustMaterial, String> {
    let text = |name: &str| -> std::result::Result<Option<String>, String> {
        match field(name)?.filter(|bytes| !bytes.is_empty()) {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| format!("its `{name}` is not PEM text")),
        }
    };
    let ca = text("ca.crt")?
        .map(|pem| ca_certificates(&pem).map_err(|why| format!("its `ca.crt` {why}")))
        .transpose()?;
    let client = match (text("tls.crt")?, text("tls.key")?) {
        (Some(certificate), Some(key)) => Some(usable_pair(certificate, &key)?.bundle),
        (None, None) => None,
        (Some(_), None) => return Err("it has `tls.crt` but no `tls.key`".to_owned()),
        (None, Some(_)) => return Err("it has `tls.key` but no `tls.crt`".to_owned()),
    };
    if ca.is_none() && client.is_none() {
        return Err("it has neither `ca.crt` nor `tls.crt` and `tls.key`".to_owned());
    }
    Ok(TrustMaterial { ca, client })
}

/// The CERTIFICATE blocks of a PEM text, each checked to be base64 of one
/// DER SEQUENCE holding a SEQUENCE (a certificate's shape; HAProxy, which
/// parses it fully, refuses the whole configuration over a broken CA file,
/// so garbage is stopped here), written back as PEM without anything else.
pub(super) fn ca_certificates(pem: &str) -> std::result::Result<String, String> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = String::new();
    let mut block: Option<String> = None;
    for line in pem.lines().map(str::trim) {
        match (&mut block, line) {
            (None, BEGIN) => block = Some(String::new()),
            (Some(body), END) => {
                let der = base64::engine::general_purpose::STANDARD
                    .decode(body.as_bytes())
                    .map_err(|_| "holds a CERTIFICATE block that is not base64".to_owned())?;
                if !is_certificate_shaped(&der) {
                    return Err("holds a CERTIFICATE block that is not a certificate".to_owned());
                }
                let _ = writeln!(out, "{BEGIN}");
                let encoded = base64::engine::general_purpose::STANDARD.encode(&der);
                for chunk in encoded.as_bytes().chunks(64) {
                    let _ = writeln!(out, "{}", String::from_utf8_lossy(chunk));
                }
                let _ = writeln!(out, "{END}");
                block = None;
            }
            (Some(body), text) => body.push_str(text),
            (None, _) => {}
        }
    }
    if block.is_some() {
        return Err("has a CERTIFICATE block without its END line".to_owned());
    }
    if out.is_empty() {
        return Err("holds no CERTIFICATE block".to_owned());
    }
    Ok(out)
}

/// A DER SEQUENCE spanning all of `der` whose first element is a SEQUENCE.
fn is_certificate_shaped(der: &[u8]) -> bool {
    let header = |bytes: &[u8]| -> Option<(usize, usize)> {
        // (header length, content length) of a SEQUENCE.
        if bytes.first() != Some(&0x30) {
            return None;
        }
        let first = *bytes.get(1)?;
        if first < 0x80 {
            return Some((2, usize::from(first)));
        }
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let mut length = 0usize;
        for byte in bytes.get(2..2 + count)? {
            length = (length << 8) | usize::from(*byte);
        }
        Some((2 + count, length))
    };
    let Some((outer, length)) = header(der) else {
        return false;
    };
    outer + length == der.len()
        && header(&der[outer..]).is_some_and(|(inner, l)| outer + inner + l <= der.len())
}

//! What the runtime API can change in a running worker: the commands of a
//! runtime batch, the certificate payloads they carry, and the files a
//! worker loaded. The controller plans them ([`super::plan`]) and the agent
//! sends them (the agent's `haproxy` module), so they belong to neither.

use super::wire::Redacted;

/// One command of a runtime batch, applied to the current worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeCommand {
    /// `set server <backend>/<server> addr <ip> port <port>`.
    ServerAddress {
        backend: String,
        server: String,
        address: String,
        port: u16,
    },
    /// `set server <backend>/<server> weight <weight>`.
    ServerWeight {
        backend: String,
        server: String,
        weight: u32,
    },
    /// `set server <backend>/<server> state ready|maint`.
    ServerState {
        backend: String,
        server: String,
        enabled: bool,
    },
    /// Replace a loaded map's entries atomically and in file order:
    /// `prepare map`, `add map @<version>` with the file as payload, `commit map`.
    ReplaceMap { map: String, content: String },
    /// Replace a loaded certificate file's chain and key: `set ssl cert
    /// <cert> <<` with the PEM as payload, `commit ssl cert <cert>`, then
    /// `abort ssl cert <cert>`, which after a commit finds nothing to abort
    /// and after a refusal drops the transaction (HAProxy keeps one open
    /// across connections, and a later `set ssl cert` of another file would
    /// update it instead of opening its own).
    ReplaceCert { cert: String, pem: CertPayload },
}

/// A certificate file's PEM as the CLI takes it as a payload: no empty
/// lines (an empty line ends a payload). Holds key material, so its Debug
/// output is its size only.
#[derive(Clone, PartialEq, Eq)]
pub struct CertPayload(String);

/// The most payload bytes one `set ssl cert` may carry. HAProxy reads the
/// command and its payload into one buffer (tune.bufsize, 16 kB by
/// default); on 2.6.12 a command of 16,235 bytes was taken and one of
/// 16,479 made HAProxy close the connection without an answer. A chain of
/// four RSA-4096 certificates with its key is ~9 kB.
pub const CERT_PAYLOAD_BYTES: usize = 14 * 1024;

/// Why the runtime API cannot take a certificate file (the agent reloads
/// instead). Never quotes the file: it holds a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertPayloadError {
    #[error("it has CRLF line ends")]
    CrlfLineEnds,
    #[error("it has an empty line inside a PEM block")]
    EmptyLineInBlock,
    #[error("it is empty")]
    Empty,
    #[error("it has {0} bytes, more than the {CERT_PAYLOAD_BYTES} one runtime command can carry")]
    TooLarge(usize),
}

impl CertPayload {
    /// The payload for `content`, or why the runtime API cannot take it
    /// (the caller reloads instead).
    pub fn new(content: &str) -> Result<Self, CertPayloadError> {
        if content.contains('\r') {
            // `\r\n\r\n` would not end the payload: the commands after it
            // would be read as PEM.
            return Err(CertPayloadError::CrlfLineEnds);
        }
        let mut payload = String::with_capacity(content.len());
        let mut in_block = false;
        for line in content.lines() {
            if line.trim().is_empty() {
                if in_block {
                    return Err(CertPayloadError::EmptyLineInBlock);
                }
                // Between blocks PEM readers skip it; the CLI would stop there.
                continue;
            }
            if line.starts_with("-----BEGIN ") {
                in_block = true;
            } else if line.starts_with("-----END ") {
                in_block = false;
            }
            payload.push_str(line);
            payload.push('\n');
        }
        if payload.is_empty() {
            return Err(CertPayloadError::Empty);
        }
        if payload.len() > CERT_PAYLOAD_BYTES {
            return Err(CertPayloadError::TooLarge(payload.len()));
        }
        Ok(Self(payload))
    }

    /// The PEM as it goes after `set ssl cert <name> <<`: only the agent's
    /// worker session reads it, and it never reaches a message.
    pub fn pem(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for CertPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Redacted(self.0.len()).fmt(f)
    }
}

impl RuntimeCommand {
    /// The command for a person and for the server commands' wire: a
    /// `set server` line exactly as HAProxy is sent it; a map or
    /// certificate replacement by what it replaces (its payload is never
    /// shown).
    pub fn summary(&self) -> String {
        match self {
            RuntimeCommand::ServerAddress {
                backend,
                server,
                address,
                port,
            } => format!("set server {backend}/{server} addr {address} port {port}"),
            RuntimeCommand::ServerWeight {
                backend,
                server,
                weight,
            } => format!("set server {backend}/{server} weight {weight}"),
            RuntimeCommand::ServerState {
                backend,
                server,
                enabled,
            } => {
                let state = if *enabled { "ready" } else { "maint" };
                format!("set server {backend}/{server} state {state}")
            }
            RuntimeCommand::ReplaceMap { map, content } => format!(
                "replace the entries of map {map} ({} lines)",
                content.lines().count()
            ),
            RuntimeCommand::ReplaceCert { cert, .. } => {
                format!("replace certificate {cert} (chain and key, not shown)")
            }
        }
    }
}

/// The files a worker loaded, by the names its configuration gave them
/// (`show map`, `show ssl cert`): what runtime commands can change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadedFiles {
    pub maps: Vec<String>,
    pub certs: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cert_payloads_are_pem_without_empty_lines_and_never_shown() {
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n\n-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----";
        let payload = CertPayload::new(pem).expect("payload");
        assert_eq!(
            payload.0,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n",
            "an empty line between blocks is dropped (it would end the payload)"
        );
        let shown = format!(
            "{:?}",
            RuntimeCommand::ReplaceCert {
                cert: "certs/web.pem".into(),
                pem: payload,
            }
        );
        assert!(
            shown.contains("certs/web.pem")
                && !shown.contains("MIGH")
                && !shown.contains("PRIVATE"),
            "{shown}"
        );
        for (bad, why) in [
            (
                "-----BEGIN CERTIFICATE-----\nMIIB\n\nMIIB\n-----END CERTIFICATE-----\n",
                "inside a PEM block",
            ),
            (
                "-----BEGIN CERTIFICATE-----\r\nMIIB\r\n-----END CERTIFICATE-----\r\n",
                "CRLF",
            ),
            ("\n\n", "empty"),
        ] {
            let error = CertPayload::new(bad).expect_err(why).to_string();
            assert!(error.contains(why), "{error}");
        }
        let huge = format!(
            "-----BEGIN CERTIFICATE-----\n{}-----END CERTIFICATE-----\n",
            format!("{}\n", "A".repeat(64)).repeat(250)
        );
        assert!(
            CertPayload::new(&huge)
                .expect_err("too large")
                .to_string()
                .contains("more than")
        );
    }
}

//! The agent's API as data: what the controller sends and what the agent
//! answers. Shared by the agent's server and the controller's
//! client ([`super::client`]), so both sides read one definition.
//!
//! Paths: `POST /v1/apply` takes an [`ApplyRequest`] and answers an
//! [`ApplyResponse`] (or an [`ErrorBody`]); `GET /v1/state` answers a
//! [`PodState`]. `GET /healthz`, `GET /readyz` and `GET /metrics` need no
//! credentials and reveal no configuration.

use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The leader's fencing token: its Lease epoch, then the render sequence
/// within that epoch. Compared lexicographically, so a new leader (higher
/// epoch) always wins over a deposed one, whatever their sequences.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FencingToken {
    pub epoch: u64,
    pub sequence: u64,
}

impl PartialOrd for FencingToken {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FencingToken {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.epoch, self.sequence).cmp(&(other.epoch, other.sequence))
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "epoch {} sequence {}", self.epoch, self.sequence)
    }
}

/// One auxiliary file of a bundle, at a path relative to the configuration
/// directory (`default-path config` makes the configuration's relative paths
/// resolve there).
///
/// `secret` marks key material (a certificate file with its private key).
/// It is left out of the JSON when false and defaults to false, so agents
/// and controllers of either age read each other, and it is not part of the
/// [`Bundle::content_id`] for the same reason. Treat a file as secret by
/// [`BundleFile::is_secret`], which also catches unflagged keys. Debug
/// output shows a secret file's size, never its content.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleFile {
    pub path: String,
    pub content: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub secret: bool,
}

impl BundleFile {
    /// A file flagged secret when its content holds key material.
    pub fn new(path: impl Into<String>, content: impl Into<String>) -> Self {
        let content = content.into();
        Self {
            path: path.into(),
            secret: holds_private_key(&content),
            content,
        }
    }

    /// Whether the content must never be shown: flagged by the sender, or
    /// holding key material whatever the flag says.
    pub fn is_secret(&self) -> bool {
        self.secret || holds_private_key(&self.content)
    }
}

impl fmt::Debug for BundleFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut file = f.debug_struct("BundleFile");
        file.field("path", &self.path);
        if self.is_secret() {
            file.field("content", &Redacted(self.content.len()));
        } else {
            file.field("content", &self.content);
        }
        file.field("secret", &self.secret).finish()
    }
}

pub use crate::tls::holds_private_key;

/// Stands in for secret text in Debug output: its size only.
pub struct Redacted(pub usize);

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<redacted: {} bytes of key material>", self.0)
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// A rendered configuration as one unit: `haproxy.cfg`, its files, and the
/// content id the agent recomputes before trusting anything else. Debug
/// output redacts secret files (and a configuration holding key material).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    /// [`Bundle::content_id`] of the rest, as the sender computed it.
    pub id: String,
    pub config: String,
    #[serde(default)]
    pub files: Vec<BundleFile>,
}

impl Bundle {
    /// A bundle whose id is computed from its content.
    pub fn new(config: String, mut files: Vec<BundleFile>) -> Self {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let id = Self::content_id(&config, &files);
        Self { id, config, files }
    }

    /// `sha256:<hex>` over the configuration and every file (path and
    /// content, in path order), each length-prefixed so no two different
    /// bundles encode alike.
    pub fn content_id(config: &str, files: &[BundleFile]) -> String {
        let mut sorted: Vec<&BundleFile> = files.iter().collect();
        sorted.sort_by(|a, b| a.path.cmp(&b.path));
        let mut hash = Sha256::new();
        let mut part = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_be_bytes());
            hash.update(bytes);
        };
        part(config.as_bytes());
        for file in sorted {
            part(file.path.as_bytes());
            part(file.content.as_bytes());
        }
        format!("sha256:{}", hex::encode(hash.finalize()))
    }

    /// Bytes of configuration and file content, the figure size limits use.
    pub fn size(&self) -> usize {
        self.config.len()
            + self
                .files
                .iter()
                .map(|f| f.path.len() + f.content.len())
                .sum::<usize>()
    }
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut bundle = f.debug_struct("Bundle");
        bundle.field("id", &self.id);
        // Never the text: it may hold key material or secret lines (password
        // hashes) that only the controller's render knows are secret.
        bundle.field("config", &Redacted(self.config.len()));
        bundle.field("files", &self.files).finish()
    }
}

/// `POST /v1/apply`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApplyRequest {
    pub token: FencingToken,
    pub bundle: Bundle,
}

/// How the agent brought HAProxy to the bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApplyMode {
    /// The current worker already ran it; nothing was done.
    Unchanged,
    /// Commands on the worker's stats socket (server state, address,
    /// weight, map entries); files written for the next reload.
    Runtime,
    /// Files written and HAProxy reloaded through its master socket.
    Reload,
}

impl ApplyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyMode::Unchanged => "unchanged",
            ApplyMode::Runtime => "runtime",
            ApplyMode::Reload => "reload",
        }
    }
}

/// The answer to a successful apply: the current worker runs the bundle.
/// `state.converged` says whether every live worker does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApplyResponse {
    pub id: String,
    pub mode: ApplyMode,
    pub state: PodState,
}

/// A bundle on disk, as the state reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleRef {
    pub id: String,
    pub token: FencingToken,
}

/// Whether a worker takes new connections or is leaving after a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkerRole {
    Current,
    Leaving,
}

/// One live HAProxy worker process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerState {
    pub pid: u32,
    pub role: WorkerRole,
    /// Unix seconds, from the worker's own `show info`.
    pub started_at: u64,
    /// The config id the worker started from (its `description`).
    pub loaded_id: String,
    /// The config id the worker routes per: `loaded_id` plus the runtime
    /// changes the agent applied to this very process.
    pub config_id: String,
}

/// `GET /v1/state`: what this pod runs, learned from HAProxy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PodState {
    pub haproxy_version: String,
    /// What `current/` on disk holds: what HAProxy starts from next.
    pub applied: Option<BundleRef>,
    /// The newest bundle a worker was seen running; restored when a reload fails.
    pub last_good: Option<BundleRef>,
    /// The newest fencing token accepted; older ones are refused.
    pub newest_token: Option<FencingToken>,
    /// Every live worker, current and leaving.
    pub workers: Vec<WorkerState>,
    /// The config id every live worker routes per, if they agree. The pod
    /// runs render N only when this is N.
    pub converged: Option<String>,
    /// Reloads the master performed and how many of them failed.
    pub reloads: u64,
    pub failed_reloads: u64,
}

impl PodState {
    /// The worker taking new connections, if HAProxy is up.
    pub fn current_worker(&self) -> Option<&WorkerState> {
        self.workers.iter().find(|w| w.role == WorkerRole::Current)
    }
}

/// The body of every error answer: a stable code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// One of `unauthorized`, `bad-request`, `bad-id`, `bad-path`,
    /// `too-large`, `stale-token`, `refused`, `reload-failed`, `haproxy-unavailable`, `internal`.
    pub code: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> BundleFile {
        BundleFile::new(path, content)
    }

    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";
    const CERT: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----\n";

    #[test]
    fn content_id_covers_config_paths_and_contents_but_not_file_order() {
        let a = Bundle::new("cfg".into(), vec![file("a", "1"), file("b", "2")]);
        let reordered = Bundle::content_id("cfg", &[file("b", "2"), file("a", "1")]);
        assert_eq!(a.id, reordered);
        assert!(a.id.starts_with("sha256:") && a.id.len() == 7 + 64);
        for other in [
            Bundle::content_id("cfg2", &[file("a", "1"), file("b", "2")]),
            Bundle::content_id("cfg", &[file("a", "1"), file("c", "2")]),
            Bundle::content_id("cfg", &[file("a", "1"), file("b", "3")]),
            // Moving bytes between fields must change the id (length prefixes).
            Bundle::content_id("cf", &[file("ga", "1"), file("b", "2")]),
        ] {
            assert_ne!(a.id, other);
        }
    }

    #[test]
    fn tokens_order_by_epoch_first() {
        let t = |epoch, sequence| FencingToken { epoch, sequence };
        assert!(t(2, 0) > t(1, 99));
        assert!(t(1, 5) > t(1, 4));
        assert_eq!(t(1, 5).cmp(&t(1, 5)), Ordering::Equal);
    }

    #[test]
    fn the_secret_flag_is_optional_on_the_wire_both_ways() {
        // What an older controller sends: no flag, read as not secret.
        let old: BundleFile =
            serde_json::from_str(r#"{"path":"maps/a.map","content":"k v\n"}"#).expect("old form");
        assert!(!old.secret);
        // Not secret: serialised exactly as before, so an older agent reads it.
        assert_eq!(
            serde_json::to_string(&old).expect("json"),
            r#"{"path":"maps/a.map","content":"k v\n"}"#
        );
        let pem = BundleFile::new("certs/a.pem", format!("{CERT}{KEY}"));
        assert!(pem.secret, "key material is flagged by the constructor");
        let json = serde_json::to_string(&pem).expect("json");
        assert!(json.ends_with(r#","secret":true}"#), "{json}");
        assert_eq!(
            serde_json::from_str::<BundleFile>(&json).expect("read"),
            pem
        );
        // The flag is a handling hint, not content: ids agree across versions.
        assert_eq!(
            Bundle::content_id("cfg", std::slice::from_ref(&pem)),
            Bundle::content_id(
                "cfg",
                &[BundleFile {
                    secret: false,
                    ..pem.clone()
                }]
            )
        );
    }

    #[test]
    fn debug_output_never_shows_key_material() {
        let flagged = BundleFile {
            path: "certs/flagged.pem".into(),
            content: CERT.into(),
            secret: true,
        };
        // Unflagged, but holding a key: secret all the same.
        let unflagged = BundleFile {
            path: "certs/unflagged.pem".into(),
            content: format!("{CERT}{KEY}"),
            secret: false,
        };
        assert!(flagged.is_secret() && unflagged.is_secret());
        let map = file("maps/a.map", "k v\n");
        assert!(!map.is_secret());
        let bundle = Bundle::new(format!("global\n# {KEY}"), vec![flagged, unflagged, map]);
        let request = ApplyRequest {
            token: FencingToken::default(),
            bundle,
        };
        for shown in [format!("{request:?}"), format!("{request:#?}")] {
            assert!(!shown.contains("PRIVATE KEY"), "{shown}");
            assert!(!shown.contains("MIGHAgEAMBMGByqGSM49"), "{shown}");
            assert!(!shown.contains("MIIBszCCAVmgAwIBAgIUQ"), "{shown}");
            assert!(
                shown.contains("certs/flagged.pem") && shown.contains("redacted"),
                "{shown}"
            );
            assert!(shown.contains("k v"), "other files stay readable: {shown}");
        }
    }

    #[test]
    fn key_material_is_any_pem_private_key() {
        for key in [
            "-----BEGIN PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----",
            "-----BEGIN ENCRYPTED PRIVATE KEY-----",
        ] {
            assert!(holds_private_key(&format!("x\n{key}\nAAAA\n")), "{key}");
        }
        assert!(!holds_private_key(CERT));
        assert!(!holds_private_key("-----BEGIN PUBLIC KEY-----\n"));
    }
}

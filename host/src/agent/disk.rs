//! The configuration directory HAProxy and the agent share, laid out so
//! that a crash at any instant leaves HAProxy a complete, validated set:
//!
//! ```text
//! <dir>/bundles/<hash>/haproxy.cfg   the bundle's configuration + the agent's `global` lines
//! <dir>/bundles/<hash>/<files...>    its maps, certificates, error pages
//! <dir>/bundles/<hash>/.haptic-bundle.json   id, fencing token, file list
//! <dir>/current   -> bundles/<hash>  what HAProxy starts and reloads from (`-f current/haproxy.cfg`)
//! <dir>/last-good -> bundles/<hash>  the newest bundle a worker was seen running
//! <dir>/agent-state.json             newest fencing token, runtime changes per worker
//! ```
//!
//! A bundle directory is written under a staging name, then renamed into
//! place; `current` and `last-good` are symlinks replaced by rename. Both
//! renames are atomic, so a process killed at any instant (agent or
//! HAProxy) leaves either the old set or the new one, never a mix.
//!
//! Certificates and their keys live here, so the agent keeps everything it
//! writes to its own user: files 0600, directories 0700 (HAProxy runs as
//! the same user, as the chart has it).
//!
//! Nothing is fsynced, on purpose: the directory is a pod's `emptyDir`,
//! which a process crash leaves intact (the page cache survives it) and a
//! node crash deletes with the pod. Durability against power loss would buy
//! nothing and cost milliseconds on every endpoint flip.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::protocol::wire::{Bundle, BundleFile, BundleRef, FencingToken};
use crate::validate::CONFIG_FILE;

/// The id of the configuration HAProxy starts with before any bundle came.
pub const BOOTSTRAP_ID: &str = "bootstrap";
/// File names inside a bundle directory that belong to the agent.
pub const METADATA_FILE: &str = ".haptic-bundle.json";
/// Where the agent's own lines start in a written `haproxy.cfg`.
const AGENT_MARKER: &str =
    "# ---- haptic agent: the lines below are the agent's, not the bundle's\n";
const CURRENT: &str = "current";
const LAST_GOOD: &str = "last-good";
const STATE_FILE: &str = "agent-state.json";

/// The configuration used before the first bundle: no listeners, only the
/// sockets the agent needs. HAProxy serves nothing until a real bundle comes.
const BOOTSTRAP_CONFIG: &str = "global\n    default-path config\n";

/// What the agent remembers across its own restarts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentState {
    pub newest_token: Option<FencingToken>,
    /// Workers that took runtime changes: they route per `config_id`, not
    /// per the `description` they started with.
    pub workers: Vec<WorkerRecord>,
}

/// A worker process the agent changed at runtime. A record counts only for
/// the very process it names (pid, start time and loaded id all match), so
/// a restarted HAProxy that reuses a pid is never mistaken for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub pid: u32,
    pub start_time: u64,
    pub loaded_id: String,
    pub config_id: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Metadata {
    id: String,
    token: FencingToken,
    files: Vec<String>,
    /// The files flagged secret (absent in bundles older agents wrote).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secret_files: Vec<String>,
}

/// The shared configuration directory.
#[derive(Debug, Clone)]
pub struct ConfigDir {
    root: PathBuf,
    worker_socket: PathBuf,
}

impl ConfigDir {
    /// `worker_socket` is written into every configuration as HAProxy's
    /// admin stats socket.
    pub fn new(root: PathBuf, worker_socket: PathBuf) -> Self {
        Self {
            root,
            worker_socket,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path HAProxy is started with.
    pub fn current_config(&self) -> PathBuf {
        self.root.join(CURRENT).join(CONFIG_FILE)
    }

    /// `current`, the link to the bundle HAProxy loads next: a path read
    /// at each load, never resolved once (`crate::validate::BUNDLE_ENV`).
    pub fn current_dir(&self) -> PathBuf {
        self.root.join(CURRENT)
    }

    /// The directory of bundle `id`.
    pub fn bundle_dir(&self, id: &str) -> PathBuf {
        self.root.join("bundles").join(dir_name(id))
    }

    /// Makes sure `current` names a complete bundle, writing the bootstrap
    /// configuration when there is none (a new pod). An existing one is
    /// kept: a restarted HAProxy starts from the last applied files.
    pub fn ensure_bootstrap(&self) -> std::io::Result<()> {
        if self.current().is_some() {
            return Ok(());
        }
        let bootstrap = Bundle {
            id: BOOTSTRAP_ID.to_owned(),
            config: BOOTSTRAP_CONFIG.to_owned(),
            files: Vec::new(),
        };
        self.write_bundle(&bootstrap, FencingToken::default())?;
        self.point(CURRENT, BOOTSTRAP_ID)
    }

    /// Writes `bundle` into its own directory (once: an existing complete
    /// directory is the same content, its name being the content hash).
    pub fn write_bundle(&self, bundle: &Bundle, token: FencingToken) -> std::io::Result<PathBuf> {
        let target = self.bundle_dir(&bundle.id);
        if self.is_complete(&bundle.id) {
            return Ok(target);
        }
        let bundles = self.root.join("bundles");
        create_private_dir(&bundles)?;
        // An older agent made it world-readable; nothing below it may be.
        fs::set_permissions(&bundles, fs::Permissions::from_mode(0o700))?;
        let staging = bundles.join(format!(
            ".staging-{}-{}",
            dir_name(&bundle.id),
            std::process::id()
        ));
        if staging.exists() {
            fs::remove_dir_all(&staging)?;
        }
        create_private_dir(&staging)?;
        // The configuration as sent, then the agent's lines, written one
        // after the other: joining them first would hold a second copy of
        // the whole configuration at the agent's peak.
        write_file_parts(
            &staging.join(CONFIG_FILE),
            &[
                bundle.config.as_bytes(),
                self.agent_lines(bundle).as_bytes(),
            ],
        )?;
        for file in &bundle.files {
            write_file(&staging.join(&file.path), file.content.as_bytes())?;
        }
        let metadata = Metadata {
            id: bundle.id.clone(),
            token,
            files: bundle.files.iter().map(|f| f.path.clone()).collect(),
            secret_files: bundle
                .files
                .iter()
                .filter(|f| f.secret)
                .map(|f| f.path.clone())
                .collect(),
        };
        write_file(&staging.join(METADATA_FILE), &to_json(&metadata)?)?;
        if target.exists() {
            // An incomplete leftover of a crash.
            fs::remove_dir_all(&target)?;
        }
        fs::rename(&staging, &target)?;
        Ok(target)
    }

    /// Reads bundle `id` back as it was sent (without the agent's lines).
    pub fn read_bundle(&self, id: &str) -> Option<(Bundle, FencingToken)> {
        let dir = self.bundle_dir(id);
        let metadata: Metadata =
            serde_json::from_slice(&fs::read(dir.join(METADATA_FILE)).ok()?).ok()?;
        if metadata.id != id {
            return None;
        }
        // Cut in place: the agent's peak holds this beside the new bundle.
        let mut config = fs::read_to_string(dir.join(CONFIG_FILE)).ok()?;
        config.truncate(config.rfind(&format!("\n{AGENT_MARKER}"))?);
        let mut files = Vec::with_capacity(metadata.files.len());
        for path in metadata.files {
            let content = fs::read_to_string(dir.join(&path)).ok()?;
            let secret = metadata.secret_files.contains(&path);
            files.push(BundleFile {
                path,
                content,
                secret,
            });
        }
        Some((
            Bundle {
                id: metadata.id,
                config,
                files,
            },
            metadata.token,
        ))
    }

    /// Removes bundle `id`'s directory (a bundle HAProxy refused).
    pub fn remove_bundle(&self, id: &str) -> std::io::Result<()> {
        match fs::remove_dir_all(self.bundle_dir(id)) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }

    /// What `current` names.
    pub fn current(&self) -> Option<BundleRef> {
        self.linked(CURRENT)
    }

    /// What `last-good` names.
    pub fn last_good(&self) -> Option<BundleRef> {
        self.linked(LAST_GOOD)
    }

    pub fn set_current(&self, id: &str) -> std::io::Result<()> {
        self.point(CURRENT, id)
    }

    pub fn set_last_good(&self, id: &str) -> std::io::Result<()> {
        self.point(LAST_GOOD, id)
    }

    /// Deletes every bundle directory except those in `keep` (and leftover
    /// staging directories).
    pub fn prune(&self, keep: &[&str]) -> std::io::Result<()> {
        let keep: Vec<String> = keep.iter().map(|id| dir_name(id)).collect();
        let Ok(entries) = fs::read_dir(self.root.join("bundles")) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !keep.contains(&name) {
                fs::remove_dir_all(entry.path())?;
            }
        }
        Ok(())
    }

    /// The agent's state, or the empty state on a new pod.
    pub fn load_state(&self) -> std::io::Result<AgentState> {
        match fs::read(self.root.join(STATE_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(AgentState::default()),
            Err(error) => Err(error),
        }
    }

    /// Replaces the agent's state atomically.
    pub fn save_state(&self, state: &AgentState) -> std::io::Result<()> {
        create_private_dir(&self.root)?;
        let staging = self.root.join(format!(".{STATE_FILE}.tmp"));
        write_file(&staging, &to_json(state)?)?;
        fs::rename(&staging, self.root.join(STATE_FILE))
    }

    /// What the agent appends to a bundle's configuration.
    fn agent_lines(&self, bundle: &Bundle) -> String {
        // A second `global` section is legal and merges into the first; being
        // last, its `description` is the one `show info` reports.
        format!(
            "\n{AGENT_MARKER}global\n    description {}\n    stats socket {} mode 600 level admin\n",
            bundle.id,
            self.worker_socket.display()
        )
    }

    fn is_complete(&self, id: &str) -> bool {
        self.bundle_dir(id).join(METADATA_FILE).is_file()
    }

    /// What `link` points at, read from the bundle's metadata (the
    /// directory name alone drops the `sha256:` prefix); `None` when the
    /// link or the bundle is missing or incomplete.
    fn linked(&self, link: &str) -> Option<BundleRef> {
        let target = fs::read_link(self.root.join(link)).ok()?;
        let metadata = self.root.join(target).join(METADATA_FILE);
        let metadata: Metadata = serde_json::from_slice(&fs::read(metadata).ok()?).ok()?;
        Some(BundleRef {
            id: metadata.id,
            token: metadata.token,
        })
    }

    fn point(&self, link: &str, id: &str) -> std::io::Result<()> {
        let staging = self.root.join(format!(".{link}.tmp"));
        let _ = fs::remove_file(&staging);
        std::os::unix::fs::symlink(Path::new("bundles").join(dir_name(id)), &staging)?;
        fs::rename(&staging, self.root.join(link))
    }
}

/// A bundle's directory name: its hash without the algorithm prefix.
fn dir_name(id: &str) -> String {
    id.strip_prefix("sha256:").unwrap_or(id).to_owned()
}

fn to_json(value: &impl Serialize) -> std::io::Result<Vec<u8>> {
    serde_json::to_vec_pretty(value).map_err(std::io::Error::other)
}

/// Creates `path` and its missing parents with mode 0700 (an existing
/// directory is left as it is).
fn create_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Writes `path` (creating its parent) with mode 0600: certificates and
/// keys live here too.
fn write_file(path: &Path, content: &[u8]) -> std::io::Result<()> {
    write_file_parts(path, &[content])
}

/// [`write_file`] of `parts`, one after the other.
fn write_file_parts(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(parent) = path.parent() {
        create_private_dir(parent)?;
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    for part in parts {
        file.write_all(part)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, ConfigDir) {
        let temp = tempfile::tempdir().expect("tempdir");
        let config = ConfigDir::new(temp.path().to_owned(), temp.path().join("worker.sock"));
        (temp, config)
    }

    fn bundle(config: &str) -> Bundle {
        Bundle::new(
            config.to_owned(),
            vec![
                BundleFile::new("maps/a.map", "k v\n"),
                BundleFile {
                    path: "certs/flagged.pem".into(),
                    content: "-----BEGIN CERTIFICATE-----\n".into(),
                    secret: true,
                },
            ],
        )
    }

    #[test]
    fn bundles_round_trip_without_the_agents_lines() {
        let (_temp, dir) = dir();
        let token = FencingToken {
            epoch: 2,
            sequence: 7,
        };
        for config in ["global\n    log stdout\n", "no trailing newline"] {
            let b = bundle(config);
            let path = dir.write_bundle(&b, token).expect("write");
            let written = fs::read_to_string(path.join(CONFIG_FILE)).expect("read");
            assert!(written.contains(&format!("description {}", b.id)));
            assert_eq!(dir.read_bundle(&b.id), Some((b, token)));
        }
    }

    #[test]
    fn links_name_bundles_and_bootstrap_keeps_what_exists() {
        let (_temp, dir) = dir();
        dir.ensure_bootstrap().expect("bootstrap");
        assert_eq!(dir.current().map(|r| r.id).as_deref(), Some(BOOTSTRAP_ID));
        let b = bundle("global\n");
        dir.write_bundle(&b, FencingToken::default())
            .expect("write");
        dir.set_current(&b.id).expect("link");
        dir.ensure_bootstrap().expect("bootstrap again");
        assert_eq!(dir.current().map(|r| r.id), Some(b.id.clone()));
        assert!(dir.current_config().is_file());
        dir.prune(&[&b.id]).expect("prune");
        assert!(!dir.bundle_dir(BOOTSTRAP_ID).exists());
        assert!(dir.bundle_dir(&b.id).exists());
    }

    #[test]
    fn state_round_trips_and_starts_empty() {
        let (_temp, dir) = dir();
        assert_eq!(dir.load_state().expect("empty"), AgentState::default());
        let state = AgentState {
            newest_token: Some(FencingToken {
                epoch: 1,
                sequence: 3,
            }),
            workers: vec![WorkerRecord {
                pid: 9,
                start_time: 100,
                loaded_id: "a".into(),
                config_id: "b".into(),
            }],
        };
        dir.save_state(&state).expect("save");
        assert_eq!(dir.load_state().expect("load"), state);
    }

    #[test]
    fn nothing_written_is_readable_by_other_users() {
        let (temp, dir) = dir();
        // A directory an older agent left world-readable.
        fs::create_dir_all(temp.path().join("bundles")).expect("old bundles dir");
        fs::set_permissions(
            temp.path().join("bundles"),
            fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        let b = bundle("global\n");
        dir.write_bundle(&b, FencingToken::default())
            .expect("write");
        dir.save_state(&AgentState::default()).expect("state");
        let mut checked = 0;
        let mut pending = vec![temp.path().join("bundles")];
        while let Some(path) = pending.pop() {
            let metadata = fs::symlink_metadata(&path).expect("metadata");
            let mode = metadata.permissions().mode() & 0o777;
            if metadata.is_dir() {
                assert_eq!(mode, 0o700, "{}", path.display());
                pending.extend(
                    fs::read_dir(&path)
                        .expect("list")
                        .map(|e| e.expect("entry").path()),
                );
            } else {
                assert_eq!(mode, 0o600, "{}", path.display());
            }
            checked += 1;
        }
        // bundles/, the bundle, certs/, maps/ and four files.
        assert_eq!(checked, 8);
        let state = fs::metadata(temp.path().join(STATE_FILE)).expect("state file");
        assert_eq!(state.permissions().mode() & 0o777, 0o600);
    }
}

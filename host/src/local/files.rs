//! The file source: manifests in files and directories (as `kubectl apply
//! -f` takes them, subdirectories included) instead of the Kubernetes API,
//! watched for changes with `notify`.
//!
//! Every load delivers each watched kind whose objects changed as one
//! re-list, so the store derives what changed (an edited object, a removed
//! document, a deleted file) exactly as after a watch reconnect. Only files
//! whose text changed are parsed again, and a kind whose objects are all as
//! last sent is not sent: at 12,000 objects, parsing every file and
//! re-listing every kind took about half a second of CPU per edit (`make
//! bench-gateway`). Editors that save by writing a
//! new file and renaming it over the old one work, because the directories
//! are watched, not the files. A bad edit (YAML that does not parse, a
//! document without a name) is logged with its file and document and
//! nothing is delivered: the last good view, and so the last good
//! configuration, keeps serving.
//!
//! Status written by the controller lands on these in-memory objects
//! ([`LocalStatus`]) and is laid over the files' content on every load.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use notify::{RecursiveMode, Watcher};
use serde_json::Value;
use sha2::Digest as _;
use tokio::sync::{Notify, mpsc};

use crate::controller::run::StatusView;
use crate::controller::status::{StatusWriteError, StatusWriter};
use crate::controller::watch::{SourceEvent, WatchTarget};
use crate::library::types::{Kind, StatusPatch};
use crate::manifests;
use crate::render::{ClusterChange, ClusterObject, ObjectRef};

/// The status the controller wrote, by object, and a signal to reload.
#[derive(Debug, Default)]
pub struct LocalStatus {
    statuses: Mutex<BTreeMap<ObjectRef, Value>>,
    changed: Notify,
}

impl StatusView for LocalStatus {
    fn snapshot(&self) -> Value {
        LocalStatus::snapshot(self)
    }
}

impl LocalStatus {
    /// Every object's written status, for `/status`.
    pub fn snapshot(&self) -> Value {
        let statuses = self.lock();
        Value::Array(
            statuses
                .iter()
                .map(|(r, status)| {
                    serde_json::json!({
                        "apiVersion": r.api_version, "kind": r.kind,
                        "namespace": r.namespace, "name": r.name, "status": status,
                    })
                })
                .collect(),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ObjectRef, Value>> {
        self.statuses
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl StatusWriter for LocalStatus {
    fn write<'a>(&'a self, patch: &'a StatusPatch) -> BoxFuture<'a, Result<(), StatusWriteError>> {
        Box::pin(async move {
            let reference = &patch.object;
            let status = patch.status.to_value();
            tracing::info!(
                "status of {} {}/{} by {}: {}",
                reference.kind,
                reference.namespace,
                reference.name,
                patch.variant.field_manager(),
                summary(&status)
            );
            merge_status(
                self.lock().entry(reference.clone()).or_insert(Value::Null),
                &status,
            );
            self.changed.notify_one();
            Ok(())
        })
    }
}

/// `type=status` of each condition, else the JSON.
fn summary(status: &Value) -> String {
    match status.get("conditions").and_then(Value::as_array) {
        Some(conditions) => conditions
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c.get("type").and_then(Value::as_str).unwrap_or("?"),
                    c.get("status").and_then(Value::as_str).unwrap_or("?")
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => status.to_string(),
    }
}

/// Server-side apply's merge, as far as status needs it: objects field by
/// field, lists of objects keyed by `type` (conditions) entry by entry,
/// anything else replaced.
pub fn merge_status(current: &mut Value, patch: &Value) {
    match (current, patch) {
        (Value::Object(current), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_status(current.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (Value::Array(current), Value::Array(patch))
            if patch.iter().all(|e| e.get("type").is_some()) =>
        {
            for entry in patch {
                match current
                    .iter_mut()
                    .find(|c| c.get("type") == entry.get("type"))
                {
                    Some(existing) => merge_status(existing, entry),
                    None => current.push(entry.clone()),
                }
            }
        }
        (current, patch) => *current = patch.clone(),
    }
}

/// Loads `inputs` once per change and delivers every target as a re-list.
pub fn spawn(
    inputs: Vec<PathBuf>,
    status: Arc<LocalStatus>,
    targets: &[WatchTarget],
    events: mpsc::UnboundedSender<SourceEvent>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let targets = targets.to_vec();
    vec![tokio::spawn(async move {
        let (touched_tx, mut touched) = mpsc::unbounded_channel::<()>();
        // Keep the watcher alive as long as the task.
        let _watcher = match watch_paths(&inputs, touched_tx) {
            Ok(watcher) => Some(watcher),
            Err(error) => {
                tracing::error!(%error, "cannot watch the manifests for changes; they are read once");
                None
            }
        };
        let kinds: BTreeSet<Kind> = targets
            .iter()
            .map(|t| Kind::new(&t.api_version, &t.kind))
            .collect();
        // The files' objects as last read; a status change re-sends them
        // with the new status laid over, without reading the files again.
        let mut files: Option<Vec<(ObjectRef, Value)>> = None;
        let mut parsed = ParsedFiles::default();
        // What each target's last re-list held, by object and version.
        let mut sent: Vec<Option<u64>> = vec![None; targets.len()];
        let mut read_files = true;
        loop {
            if read_files {
                match parsed.read(&inputs, &kinds) {
                    Ok(objects) => files = Some(objects),
                    Err(error) => tracing::error!(
                        "{error}; the last good configuration keeps serving until the manifests are fixed"
                    ),
                }
            }
            if let Some(objects) = &files {
                for (index, changes) in relists(objects, &targets, &status).into_iter().enumerate()
                {
                    let fingerprint = Some(fingerprint(&changes));
                    if sent[index] == fingerprint {
                        continue;
                    }
                    sent[index] = fingerprint;
                    let event = SourceEvent {
                        target: index,
                        changes,
                        listed: true,
                    };
                    if events.send(event).is_err() {
                        return;
                    }
                }
            }
            tokio::select! {
                touched_now = touched.recv() => {
                    if touched_now.is_none() { return }
                    read_files = true;
                }
                () = status.changed.notified() => read_files = false,
            }
            // Editors write in several steps: take them as one change.
            tokio::time::sleep(Duration::from_millis(50)).await;
            while touched.try_recv().is_ok() {
                read_files = true;
            }
        }
    })]
}

fn watch_paths(
    inputs: &[PathBuf],
    touched: mpsc::UnboundedSender<()>,
) -> notify::Result<notify::RecommendedWatcher> {
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|event| !event.kind.is_access()) {
            let _ = touched.send(());
        }
    })?;
    for input in inputs {
        // A file is watched through its directory, so a save by rename
        // (a new inode under the old name) is seen.
        let path = if input.is_dir() {
            input.clone()
        } else {
            input
                .parent()
                .map(|p| {
                    if p.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        p.to_path_buf()
                    }
                })
                .unwrap_or_else(|| PathBuf::from("."))
        };
        watcher.watch(&path, RecursiveMode::Recursive)?;
    }
    Ok(watcher)
}

/// Each file's text and objects as last parsed, so a read parses only the
/// files whose text changed.
#[derive(Debug, Default)]
struct ParsedFiles {
    files: BTreeMap<PathBuf, (String, Vec<manifests::Manifest>)>,
}

impl ParsedFiles {
    /// The objects of the watched kinds in `inputs`, as
    /// [`manifests::load_paths`] reads them.
    fn read(
        &mut self,
        inputs: &[PathBuf],
        kinds: &BTreeSet<Kind>,
    ) -> Result<Vec<(ObjectRef, Value)>, manifests::ManifestError> {
        // Untrimmed here: statuses are laid over the whole object before
        // each target's trim applies.
        let kinds = manifests::untrimmed(kinds.iter().cloned());
        let mut files = BTreeMap::new();
        let mut all = Vec::new();
        for path in manifests::manifest_files(inputs)? {
            let content = std::fs::read_to_string(&path).map_err(|source| {
                manifests::ManifestError::Read {
                    path: path.clone(),
                    source,
                }
            })?;
            let manifests = match self.files.remove(&path) {
                Some((before, manifests)) if before == content => manifests,
                _ => manifests::parse(&path, &content, &kinds)?,
            };
            all.extend(manifests.iter().cloned());
            files.insert(path, (content, manifests));
        }
        // A file that failed to parse is parsed again next time; the others
        // keep their objects.
        self.files = files;
        manifests::check_duplicates(&all)?;
        Ok(all
            .into_iter()
            .map(|manifest| (manifest.object.reference.clone(), manifest.object.value()))
            .collect())
    }
}

/// What a re-list holds: its objects and their versions, hashed.
fn fingerprint(changes: &[ClusterChange]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for change in changes {
        if let ClusterChange::Relisted { objects, .. } = change {
            objects.len().hash(&mut hasher);
            for object in objects {
                object.reference.hash(&mut hasher);
                object.resource_version.hash(&mut hasher);
            }
        }
    }
    hasher.finish()
}

/// One re-list per target: the files' objects with the written statuses
/// laid over them, each with a resourceVersion that is a hash of its
/// content. Libraries skip an object whose resourceVersion they have seen,
/// and a file's own resourceVersion (if any) does not change when a person
/// edits the object.
fn relists(
    objects: &[(ObjectRef, Value)],
    targets: &[WatchTarget],
    status: &LocalStatus,
) -> Vec<Vec<ClusterChange>> {
    let statuses = status.lock().clone();
    let mut by_kind: BTreeMap<(&str, &str), Vec<ClusterObject>> = BTreeMap::new();
    for (reference, object) in objects {
        let Some(target) = targets
            .iter()
            .find(|t| t.api_version == reference.api_version && t.kind == reference.kind)
        else {
            continue;
        };
        let mut object = object.clone();
        if let Some(fields) = object.as_object_mut() {
            if let Some(written) = statuses.get(reference) {
                merge_status(fields.entry("status").or_insert(Value::Null), written);
            }
            if let Some(metadata) = fields.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("resourceVersion");
            }
            let digest = sha2::Sha256::digest(object.to_string().as_bytes());
            object["metadata"]["resourceVersion"] =
                Value::String(format!("file-{}", hex::encode(&digest[..8])));
        }
        if let Some(object) = ClusterObject::trimmed(&object, target.trim.clone()) {
            by_kind
                .entry((target.api_version.as_str(), target.kind.as_str()))
                .or_default()
                .push(object);
        }
    }
    targets
        .iter()
        .map(|target| {
            vec![ClusterChange::Relisted {
                api_version: target.api_version.clone(),
                kind: target.kind.clone(),
                objects: by_kind
                    .remove(&(target.api_version.as_str(), target.kind.as_str()))
                    .unwrap_or_default(),
            }]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_merges_conditions_by_type_and_keeps_the_others() {
        let mut current = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "ContainersReady", "status": "True"}]});
        merge_status(
            &mut current,
            &json!({"conditions": [{"type": "haproxy-haptic.org/load-balancer-ready", "status": "True"}]}),
        );
        merge_status(
            &mut current,
            &json!({"conditions": [{"type": "Ready", "status": "True"}]}),
        );
        assert_eq!(
            current,
            json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "ContainersReady", "status": "True"},
                {"type": "haproxy-haptic.org/load-balancer-ready", "status": "True"}]})
        );
    }
}

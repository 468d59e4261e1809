//! The file source: manifests in files and directories (as `kubectl apply
//! -f` takes them, subdirectories included) instead of the Kubernetes API,
//! watched for changes with `notify`.
//!
//! The first load delivers each watched kind as one list; later loads
//! deliver only the objects that changed (applied or deleted), as a watch
//! does. Only files whose text changed are parsed again, and an object is
//! prepared again (its written status laid over, its resourceVersion
//! derived, its trimmed form built) only when its file was parsed again or
//! its status changed: at 12,000 objects, preparing and re-listing every
//! object on each edit took ~350 ms of CPU per change (`make
//! bench-gateway`, perf). Editors that save by writing a
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
use crate::library::types::{Kind, StatusPatch};
use crate::manifests;
use crate::render::{ClusterChange, ClusterObject, ObjectRef};
use crate::source::{SourceEvent, WatchTarget};
use crate::status_writes::{StatusWriteError, StatusWriter};

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
        // The files' objects as last read; a status change re-sends the
        // objects it touched without reading the files again.
        let mut parsed = ParsedFiles::default();
        let mut deliveries = Deliveries::new(targets.len());
        let mut read_files = true;
        loop {
            if read_files && let Err(error) = parsed.read(&inputs, &kinds) {
                tracing::error!(
                    "{error}; the last good configuration keeps serving until the manifests are fixed"
                );
            }
            if parsed.loaded {
                let statuses = status.lock().clone();
                for event in deliveries.events(&parsed, &targets, &statuses) {
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
/// files whose text changed. Each file's objects carry the serial of the
/// parse that made them: what is derived from an object holds until its
/// file is parsed again.
#[derive(Debug, Default)]
struct ParsedFiles {
    files: BTreeMap<PathBuf, ParsedFile>,
    /// A read succeeded: `files` are the objects of the last good one.
    loaded: bool,
    parses: u64,
}

#[derive(Debug, Clone)]
struct ParsedFile {
    content: Arc<str>,
    serial: u64,
    manifests: Arc<[manifests::Manifest]>,
}

impl ParsedFiles {
    /// Reads the objects of the watched kinds in `inputs`, as
    /// [`manifests::load_paths`] reads them; after an error the last good
    /// read stays.
    fn read(
        &mut self,
        inputs: &[PathBuf],
        kinds: &BTreeSet<Kind>,
    ) -> Result<(), manifests::ManifestError> {
        // Untrimmed here: statuses are laid over the whole object before
        // each target's trim applies.
        let kinds = manifests::untrimmed(kinds.iter().cloned());
        let mut files = BTreeMap::new();
        for path in manifests::manifest_files(inputs)? {
            let content = std::fs::read_to_string(&path).map_err(|source| {
                manifests::ManifestError::Read {
                    path: path.clone(),
                    source,
                }
            })?;
            let file = match self.files.get(&path) {
                Some(file) if *file.content == *content => file.clone(),
                _ => {
                    let manifests = manifests::parse(&path, &content, &kinds)?;
                    self.parses += 1;
                    ParsedFile {
                        content: content.into(),
                        serial: self.parses,
                        manifests: manifests.into(),
                    }
                }
            };
            files.insert(path, file);
        }
        manifests::check_duplicates(files.values().flat_map(|file| file.manifests.iter()))?;
        self.files = files;
        self.loaded = true;
        Ok(())
    }

    /// Every object with the serial of its file's parse.
    fn manifests(&self) -> impl Iterator<Item = (u64, &manifests::Manifest)> {
        self.files
            .values()
            .flat_map(|file| file.manifests.iter().map(|m| (file.serial, m)))
    }
}

/// An object as last prepared for delivery: from which parse, under which
/// written status.
#[derive(Debug)]
struct Prepared {
    target: usize,
    serial: u64,
    status: Option<Value>,
    object: Option<ClusterObject>,
}

/// What the file source delivered: each object as prepared, and per target
/// each object's resourceVersion as last sent (`None` before its list).
#[derive(Debug)]
struct Deliveries {
    prepared: BTreeMap<ObjectRef, Prepared>,
    sent: Vec<Option<BTreeMap<ObjectRef, String>>>,
}

impl Deliveries {
    fn new(targets: usize) -> Self {
        Self {
            prepared: BTreeMap::new(),
            sent: vec![None; targets],
        }
    }

    /// The events that bring each target to the files' objects with the
    /// written `statuses` laid over: a list the first time, then the
    /// objects applied and deleted since.
    fn events(
        &mut self,
        parsed: &ParsedFiles,
        targets: &[WatchTarget],
        statuses: &BTreeMap<ObjectRef, Value>,
    ) -> Vec<SourceEvent> {
        let mut prepared = BTreeMap::new();
        for (serial, manifest) in parsed.manifests() {
            let reference = manifest.reference();
            let Some(target) = targets
                .iter()
                .position(|t| t.api_version == reference.api_version && t.kind == reference.kind)
            else {
                continue;
            };
            let written = statuses.get(reference);
            let entry = match self.prepared.remove(reference) {
                Some(entry) if entry.serial == serial && entry.status.as_ref() == written => entry,
                _ => Prepared {
                    target,
                    serial,
                    status: written.cloned(),
                    object: prepare(manifest, written, &targets[target]),
                },
            };
            prepared.insert(reference.clone(), entry);
        }
        self.prepared = prepared;
        let mut current: Vec<BTreeMap<&ObjectRef, &ClusterObject>> =
            vec![BTreeMap::new(); targets.len()];
        for (reference, entry) in &self.prepared {
            if let Some(object) = &entry.object {
                current[entry.target].insert(reference, object);
            }
        }
        let mut events = Vec::new();
        for (index, (target, objects)) in targets.iter().zip(current).enumerate() {
            let versions = || {
                objects
                    .iter()
                    .map(|(reference, object)| {
                        ((*reference).clone(), object.resource_version.clone())
                    })
                    .collect()
            };
            let Some(sent) = &self.sent[index] else {
                self.sent[index] = Some(versions());
                events.push(SourceEvent {
                    target: index,
                    changes: vec![ClusterChange::Relisted {
                        api_version: target.api_version.clone(),
                        kind: target.kind.clone(),
                        objects: objects.values().map(|object| (*object).clone()).collect(),
                    }],
                    listed: true,
                });
                continue;
            };
            let mut changes: Vec<ClusterChange> = objects
                .iter()
                .filter(|(reference, object)| {
                    sent.get(**reference) != Some(&object.resource_version)
                })
                .map(|(_, object)| ClusterChange::Applied((*object).clone()))
                .collect();
            changes.extend(
                sent.keys()
                    .filter(|reference| !objects.contains_key(reference))
                    .map(|reference| ClusterChange::Deleted(reference.clone())),
            );
            if !changes.is_empty() {
                self.sent[index] = Some(versions());
                events.push(SourceEvent {
                    target: index,
                    changes,
                    listed: false,
                });
            }
        }
        events
    }
}

/// An object as its target stores it: the written status laid over the
/// file's object, and a resourceVersion that is a hash of that content.
/// Libraries skip an object whose resourceVersion they have seen, and a
/// file's own resourceVersion (if any) does not change when a person edits
/// the object.
fn prepare(
    manifest: &manifests::Manifest,
    written: Option<&Value>,
    target: &WatchTarget,
) -> Option<ClusterObject> {
    let mut object = manifest.object.value();
    if let Some(fields) = object.as_object_mut() {
        if let Some(written) = written {
            merge_status(fields.entry("status").or_insert(Value::Null), written);
        }
        if let Some(metadata) = fields.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("resourceVersion");
        }
        let digest = sha2::Sha256::digest(object.to_string().as_bytes());
        object["metadata"]["resourceVersion"] =
            Value::String(format!("file-{}", hex::encode(&digest[..8])));
    }
    ClusterObject::trimmed(&object, target.trim.clone())
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

    fn service(name: &str, port: u16) -> String {
        format!(
            "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: shop}}\nspec: {{ports: [{{port: {port}}}]}}\n"
        )
    }

    /// What each event of a load changes, as `applied <name>` / `deleted
    /// <name>` / `listed <n>`.
    fn load(
        parsed: &mut ParsedFiles,
        deliveries: &mut Deliveries,
        dir: &std::path::Path,
        statuses: &BTreeMap<ObjectRef, Value>,
    ) -> Vec<String> {
        let targets = [WatchTarget {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            trim: Arc::from(Vec::new()),
        }];
        let kinds = BTreeSet::from([Kind::new("v1", "Service")]);
        parsed
            .read(&[dir.to_owned()], &kinds)
            .expect("the manifests parse");
        deliveries
            .events(parsed, &targets, statuses)
            .into_iter()
            .flat_map(|event| event.changes)
            .map(|change| match change {
                ClusterChange::Applied(object) => format!("applied {}", object.reference.name),
                ClusterChange::Deleted(reference) => format!("deleted {}", reference.name),
                ClusterChange::Relisted { objects, .. } => format!("listed {}", objects.len()),
            })
            .collect()
    }

    #[test]
    fn after_the_first_list_only_what_changed_is_delivered() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.yaml"), service("a", 80)).expect("write");
        std::fs::write(dir.path().join("b.yaml"), service("b", 80)).expect("write");
        let (mut parsed, mut deliveries) = (ParsedFiles::default(), Deliveries::new(1));
        let none = BTreeMap::new();
        let mut load = |statuses: &BTreeMap<ObjectRef, Value>| {
            load(&mut parsed, &mut deliveries, dir.path(), statuses)
        };
        assert_eq!(load(&none), ["listed 2"]);
        assert!(load(&none).is_empty(), "nothing changed, nothing sent");
        std::fs::write(dir.path().join("a.yaml"), service("a", 81)).expect("write");
        assert_eq!(load(&none), ["applied a"]);
        let b = ObjectRef {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: "shop".into(),
            name: "b".into(),
        };
        let written = BTreeMap::from([(
            b,
            json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}),
        )]);
        assert_eq!(
            load(&written),
            ["applied b"],
            "a written status is laid over"
        );
        assert!(load(&written).is_empty());
        std::fs::remove_file(dir.path().join("b.yaml")).expect("remove");
        assert_eq!(load(&written), ["deleted b"]);
        // A file that does not parse leaves the last good objects.
        std::fs::write(dir.path().join("a.yaml"), "kind: [broken").expect("write");
        let kinds = BTreeSet::from([Kind::new("v1", "Service")]);
        assert!(parsed.read(&[dir.path().to_owned()], &kinds).is_err());
        assert_eq!(parsed.manifests().count(), 1);
    }
}

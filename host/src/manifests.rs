//! Kubernetes objects from files: the offline source behind `haptic render`
//! and `haptic test`, and the way benchmarks feed a generated cluster.
//!
//! Paths are read as `kubectl apply -f` reads them: directories recursively
//! (`.yaml`, `.yml`, `.json`, in sorted order so a render is reproducible),
//! multi-document YAML, empty documents skipped, `List`/`*List` items
//! expanded. Each object is normalised the way the API server would return
//! it: namespaced kinds get `metadata.namespace` (`default` when absent),
//! the fields the API server defaults on create that a field selector can
//! name are filled in (a Secret without `type` is `Opaque`,
//! [`haptic_selectors::defaults`]), and objects without
//! `metadata.resourceVersion` get a short content hash so libraries can cache
//! per-object work by it. The result is the render core's [`ClusterObject`],
//! the same the controller's watch produces, so one selection rule
//! ([`crate::render::WatchFilter`]) serves both.

mod kinds;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize as _;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use crate::library::types::Kind;
use crate::render::{ClusterObject, ObjectRef};
pub use kinds::Scope;

/// The kinds accepted besides the built-in ones (the kinds libraries watch),
/// each with the `ignore-fields` paths every watch of it ignores, dropped at
/// load as the controller's watch drops them ([`crate::render::ingest_trims`]).
pub type WatchedKinds = BTreeMap<Kind, Arc<[String]>>;

/// `kinds` accepted with nothing trimmed.
pub fn untrimmed(kinds: impl IntoIterator<Item = Kind>) -> WatchedKinds {
    kinds
        .into_iter()
        .map(|kind| (kind, Arc::from(Vec::new())))
        .collect()
}

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Source {
    pub path: PathBuf,
    /// 1-based index of the YAML document within the file.
    pub document: usize,
    /// 1-based index within a `List` document's `items`, when it came from one.
    pub item: Option<usize>,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (document {}", self.path.display(), self.document)?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        f.write_str(")")
    }
}

/// One Kubernetes object read from a manifest, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub source: Source,
    /// The object as the API server would return it (namespace, defaults
    /// and `metadata.resourceVersion` filled in), trimmed as its kind's
    /// watches ask.
    pub object: ClusterObject,
}

impl Manifest {
    /// Which object it is (the namespace is empty for cluster-scoped kinds).
    pub fn reference(&self) -> &ObjectRef {
        &self.object.reference
    }
}

/// Why manifests could not be loaded or matched.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A path could not be read (missing file, permissions).
    #[error("cannot read {}: {source}; check that the path exists and is readable", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A document is not valid YAML (or JSON).
    #[error("{at} is not valid YAML: {message}; fix the syntax at that line and column")]
    Yaml { at: Source, message: String },
    /// A document or list item is not a mapping.
    #[error(
        "{at} is a {found}, not a Kubernetes object; every document must be a mapping with apiVersion, kind and metadata"
    )]
    NotAnObject { at: Source, found: &'static str },
    /// A required field is missing or not a string.
    #[error(
        "{at} has no {field} (or it is not a string); every object needs apiVersion, kind and metadata.name"
    )]
    MissingField { at: Source, field: &'static str },
    /// `kind` is not a built-in kind for that apiVersion nor one a library watches.
    #[error("{at}: unknown kind {kind} in apiVersion {api_version}: {hint}")]
    UnknownKind {
        at: Box<Source>,
        api_version: String,
        kind: String,
        hint: String,
    },
    /// The same object is defined twice.
    #[error("{object} is defined twice, in {first} and in {second}; remove one of them")]
    Duplicate {
        /// `apiVersion kind namespace/name`.
        object: String,
        first: Box<Source>,
        second: Box<Source>,
    },
}

/// Loads every object under `paths` (files or directories, in the order
/// given; directory contents sorted), accepting the built-in kinds and
/// `extra_kinds`. Two definitions of one object are an error naming both.
pub fn load_paths<P: AsRef<Path>>(
    paths: &[P],
    extra_kinds: &WatchedKinds,
) -> Result<Vec<Manifest>, ManifestError> {
    let manifests = load_where(paths, extra_kinds, |_| true)?;
    check_duplicates(&manifests)?;
    Ok(manifests)
}

/// The documents under `paths` that `wanted` keeps, parsed.
fn load_where<P: AsRef<Path>>(
    paths: &[P],
    extra_kinds: &WatchedKinds,
    wanted: impl Fn(&Value) -> bool,
) -> Result<Vec<Manifest>, ManifestError> {
    let mut manifests = Vec::new();
    for file in manifest_files(paths)? {
        let content = std::fs::read_to_string(&file).map_err(|source| ManifestError::Read {
            path: file.clone(),
            source,
        })?;
        manifests.extend(parse_where(&file, &content, extra_kinds, &wanted)?);
    }
    Ok(manifests)
}

/// The manifest files under `paths`, in the order [`load_paths`] reads
/// them: a file named is read whatever its extension, a directory's
/// `.yaml`, `.yml` and `.json` files sorted, subdirectories included.
pub fn manifest_files<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<PathBuf>, ManifestError> {
    let mut files = Vec::new();
    for path in paths {
        collect_files(path.as_ref(), true, &mut files)?;
    }
    Ok(files)
}

/// Every object of `kind` under `paths` (files or directories, as
/// [`load_paths`] reads them). Documents of other kinds are skipped unread,
/// whatever they are, so a case or example that also holds custom resources
/// (a Gateway) still yields its EndpointSlices.
pub fn objects_of_kind<P: AsRef<Path>>(
    paths: &[P],
    kind: &Kind,
) -> Result<Vec<Manifest>, ManifestError> {
    load_where(paths, &untrimmed([kind.clone()]), |value| {
        value.get("kind").and_then(Value::as_str) == Some(&kind.kind)
            && value.get("apiVersion").and_then(Value::as_str) == Some(&kind.api_version)
    })
}

/// Parses one file's content (any number of YAML or JSON documents) as if
/// it had been read from `path`. Does not check for duplicates: [`load`]
/// does that across files.
pub fn parse(
    path: &Path,
    content: &str,
    extra_kinds: &WatchedKinds,
) -> Result<Vec<Manifest>, ManifestError> {
    parse_where(path, content, extra_kinds, |_| true)
}

/// [`parse`] of the documents `wanted` keeps; the others are not read.
fn parse_where(
    path: &Path,
    content: &str,
    extra_kinds: &WatchedKinds,
    wanted: impl Fn(&Value) -> bool,
) -> Result<Vec<Manifest>, ManifestError> {
    let mut manifests = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(content).enumerate() {
        let at = Source {
            path: path.to_owned(),
            document: index + 1,
            item: None,
        };
        let value = Value::deserialize(document).map_err(|error| ManifestError::Yaml {
            at: at.clone(),
            message: error.to_string(),
        })?;
        if wanted(&value) {
            manifests.extend(from_value(at, value, extra_kinds)?);
        }
    }
    Ok(manifests)
}

/// Builds manifests from in-memory objects (a generated cluster), each
/// numbered as a document of the pseudo-file `origin`; duplicates are refused.
pub fn from_objects(
    origin: &Path,
    objects: impl IntoIterator<Item = Value>,
    extra_kinds: &WatchedKinds,
) -> Result<Vec<Manifest>, ManifestError> {
    let mut manifests = Vec::new();
    for (index, object) in objects.into_iter().enumerate() {
        let at = Source {
            path: origin.to_owned(),
            document: index + 1,
            item: None,
        };
        manifests.extend(from_value(at, object, extra_kinds)?);
    }
    check_duplicates(&manifests)?;
    Ok(manifests)
}

/// Turns one document into manifests: none for an empty document, the
/// items of a list, or the object itself.
pub fn from_value(
    at: Source,
    value: Value,
    extra_kinds: &WatchedKinds,
) -> Result<Vec<Manifest>, ManifestError> {
    let Value::Object(mut object) = value else {
        return match value {
            Value::Null => Ok(Vec::new()),
            other => Err(ManifestError::NotAnObject {
                at,
                found: type_name(&other),
            }),
        };
    };
    let kind = string_field(&object, "kind").ok_or_else(|| ManifestError::MissingField {
        at: at.clone(),
        field: "kind",
    })?;
    // `kubectl get -o yaml` of nothing is a `List` whose items are null.
    if kind == "List" && object.get("items").is_none_or(Value::is_null) {
        return Ok(Vec::new());
    }
    if at.item.is_none()
        && kind.ends_with("List")
        && object.get("items").is_some_and(Value::is_array)
    {
        let api_version = string_field(&object, "apiVersion");
        let item_kind = kind
            .strip_suffix("List")
            .filter(|k| !k.is_empty())
            .map(str::to_owned);
        let Some(Value::Array(items)) = object.remove("items") else {
            return Ok(Vec::new());
        };
        let mut manifests = Vec::new();
        for (index, item) in items.into_iter().enumerate() {
            let item_at = Source {
                item: Some(index + 1),
                ..at.clone()
            };
            // Typed lists (`ServiceList` from `kubectl get -o yaml`) may leave
            // kind and apiVersion off their items; they are the list's.
            let item = match (item, &item_kind) {
                (Value::Object(mut fields), Some(item_kind)) => {
                    if !fields.contains_key("kind") {
                        fields.insert("kind".into(), Value::String(item_kind.clone()));
                        if let (false, Some(v)) = (fields.contains_key("apiVersion"), &api_version)
                        {
                            fields.insert("apiVersion".into(), Value::String(v.clone()));
                        }
                    }
                    Value::Object(fields)
                }
                (item, _) => item,
            };
            manifests.extend(from_value(item_at, item, extra_kinds)?);
        }
        return Ok(manifests);
    }
    let missing = |field| ManifestError::MissingField {
        at: at.clone(),
        field,
    };
    let api_version = string_field(&object, "apiVersion").ok_or_else(|| missing("apiVersion"))?;
    let Some(scope) = kinds::scope(&api_version, &kind, extra_kinds) else {
        return Err(ManifestError::UnknownKind {
            hint: kinds::hint(&api_version, &kind, extra_kinds),
            at: Box::new(at),
            api_version,
            kind,
        });
    };
    let Some(Value::Object(metadata)) = object.get_mut("metadata") else {
        return Err(missing("metadata.name"));
    };
    if string_field(metadata, "name").is_none() {
        return Err(missing("metadata.name"));
    }
    match scope {
        // The API server ignores a namespace on a cluster-scoped object.
        Scope::Cluster => {
            metadata.remove("namespace");
        }
        Scope::Namespaced => {
            let namespace = string_field(metadata, "namespace")
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| "default".to_owned());
            metadata.insert("namespace".into(), Value::String(namespace));
        }
    }
    let has_version = string_field(metadata, "resourceVersion").is_some();
    haptic_selectors::defaults::apply(&api_version, &kind, &mut object);
    if !has_version {
        let hash = content_hash(&object);
        if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
            metadata.insert("resourceVersion".into(), Value::String(hash));
        }
    }
    // Present by now: apiVersion, kind and metadata.name were checked above.
    let object = ClusterObject::ingested(&Value::Object(object), extra_kinds)
        .ok_or_else(|| missing("metadata.name"))?;
    Ok(vec![Manifest { source: at, object }])
}

/// Refuses two definitions of one object, naming both.
pub fn check_duplicates<'a>(
    manifests: impl IntoIterator<Item = &'a Manifest>,
) -> Result<(), ManifestError> {
    let mut seen: HashMap<&ObjectRef, &Source> = HashMap::new();
    for m in manifests {
        let reference = m.reference();
        if let Some(first) = seen.insert(reference, &m.source) {
            let name = if reference.namespace.is_empty() {
                reference.name.clone()
            } else {
                format!("{}/{}", reference.namespace, reference.name)
            };
            return Err(ManifestError::Duplicate {
                object: format!("{} {} {name}", reference.api_version, reference.kind),
                first: Box::new(first.clone()),
                second: Box::new(m.source.clone()),
            });
        }
    }
    Ok(())
}

/// Files under `path`: the path itself when it is a file (any extension, as
/// kubectl takes a named file), else manifest files found recursively.
fn collect_files(path: &Path, named: bool, files: &mut Vec<PathBuf>) -> Result<(), ManifestError> {
    let read_error = |source| ManifestError::Read {
        path: path.to_owned(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(read_error)?;
    if !metadata.is_dir() {
        let manifest_ext = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
        if named || manifest_ext {
            files.push(path.to_owned());
        }
        return Ok(());
    }
    let mut entries = std::fs::read_dir(path)
        .map_err(read_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_error)?;
    entries.sort();
    for entry in entries {
        collect_files(&entry, false, files)?;
    }
    Ok(())
}

fn string_field(object: &Map<String, Value>, field: &str) -> Option<String> {
    object.get(field).and_then(Value::as_str).map(str::to_owned)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// 12 hex digits of the SHA-256 of the object's JSON: stable for equal
/// content, different for any change that matters to a library.
fn content_hash(object: &Map<String, Value>) -> String {
    let json = serde_json::to_vec(object).unwrap_or_default();
    let digest = Sha256::digest(&json);
    hex::encode(&digest[..6])
}

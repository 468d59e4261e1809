//! The host's view of the cluster, and which part of it each library sees.
//!
//! Objects are stored once, as JSON text trimmed at ingest by the fields
//! every watch of their kind ignores (the source knows those from the plans,
//! [`ingest_trims`]); each library gets them filtered by its watches and
//! trimmed further by what its own watch ignores beyond that, under its own
//! keys. Text rather than `serde_json::Value` trees: a parsed tree costs
//! several times its text in memory, and the common case (a library's watch
//! ignores exactly what was trimmed at ingest) hands the text over as is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod select;

pub use select::WatchFilter;

use super::RenderError;
pub use crate::library::types::ObjectRef;
use crate::library::types::{Change, Kind, Object, ObjectKey, Watch};

/// A Kubernetes object as the host stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterObject {
    pub reference: ObjectRef,
    pub resource_version: String,
    pub labels: BTreeMap<String, String>,
    /// The object as JSON, without the `trimmed` paths.
    json: Box<str>,
    /// The `ignore-fields` paths removed at ingest.
    trimmed: Arc<[String]>,
}

impl ClusterObject {
    /// Builds the stored form of an object, whole; `None` when it lacks
    /// apiVersion, kind or metadata.name (sources reject those before they
    /// get here).
    pub fn from_value(value: serde_json::Value) -> Option<Self> {
        Self::trimmed(&value, Arc::from(Vec::new()))
    }

    /// Builds the stored form the way every source does: trimmed by what
    /// every watch of its kind ignores (`trims`, from [`ingest_trims`]).
    pub fn ingested(
        value: &serde_json::Value,
        trims: &BTreeMap<Kind, Arc<[String]>>,
    ) -> Option<Self> {
        let field = |name: &str| value.get(name).and_then(|v| v.as_str()).unwrap_or_default();
        let trim = trims
            .get(&Kind::new(field("apiVersion"), field("kind")))
            .cloned()
            .unwrap_or_else(|| Arc::from(Vec::new()));
        Self::trimmed(value, trim)
    }

    /// Builds the stored form without the fields at `paths` (dotted
    /// `ignore-fields` paths), so the store never holds what no watch of the
    /// kind reads.
    pub fn trimmed(value: &serde_json::Value, paths: Arc<[String]>) -> Option<Self> {
        Self::trimmed_by(value, &IngestTrim::new(&paths))
    }

    /// [`Self::trimmed`] with the paths made ready once for every object of
    /// a watch (a list of 10,000 pods built the pods' tree of some 70 paths
    /// 10,000 times).
    pub fn trimmed_by(value: &serde_json::Value, trim: &IngestTrim<'_>) -> Option<Self> {
        let paths = Arc::clone(trim.paths);
        let text = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let reference = ObjectRef {
            api_version: text("/apiVersion")?,
            kind: text("/kind")?,
            namespace: text("/metadata/namespace").unwrap_or_default(),
            name: text("/metadata/name")?,
        };
        let resource_version = text("/metadata/resourceVersion").unwrap_or_default();
        let labels = value
            .pointer("/metadata/labels")
            .and_then(|labels| labels.as_object())
            .map(|labels| {
                labels
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        // Serializing a value cannot fail: its keys are strings.
        let json = serde_json::to_string(&Trimmed {
            value,
            ignored: &trim.tree,
        })
        .unwrap_or_default()
        .into_boxed_str();
        Some(Self {
            reference,
            resource_version,
            labels,
            json,
            trimmed: paths,
        })
    }

    /// The stored JSON text (trimmed at ingest).
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The stored object parsed (trimmed at ingest).
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(&self.json).unwrap_or(serde_json::Value::Null)
    }
}

/// For each (apiVersion, kind) the watches name, the `ignore-fields` paths
/// every one of them ignores: what the store may drop at ingest.
pub fn ingest_trims<'a>(
    watches: impl IntoIterator<Item = &'a Watch>,
) -> BTreeMap<Kind, Arc<[String]>> {
    let mut common: BTreeMap<Kind, BTreeSet<String>> = BTreeMap::new();
    for watch in watches {
        let paths: BTreeSet<String> = watch.ignore_fields.iter().cloned().collect();
        common
            .entry(Kind::of_watch(watch))
            .and_modify(|shared| shared.retain(|path| paths.contains(path)))
            .or_insert(paths);
    }
    common
        .into_iter()
        .map(|(kind, paths)| (kind, paths.into_iter().collect::<Vec<_>>().into()))
        .collect()
}

/// A change to the cluster view.
#[derive(Debug, Clone)]
pub enum ClusterChange {
    Applied(ClusterObject),
    Deleted(ObjectRef),
    /// A watch's (re-)list: every stored object of this apiVersion and kind
    /// is replaced by `objects`; the ones not among them are deleted (a
    /// watch that reconnects after missing events learns of deletions only
    /// this way).
    Relisted {
        api_version: String,
        kind: String,
        objects: Vec<ClusterObject>,
    },
}

#[derive(Default)]
pub(super) struct ClusterStore {
    objects: BTreeMap<ObjectRef, Arc<ClusterObject>>,
    /// Objects whose latest version every library is shown something else
    /// of: the ones a refused render was isolated to (see
    /// `crate::engine`), and the trial sets while it isolates. An object
    /// that changes again or goes away is shown as it is again
    /// ([`Self::apply`]): its owner may have fixed it.
    withheld: BTreeMap<ObjectRef, Withheld>,
    /// For each object changed since [`Self::settle`], its version then
    /// (`None`: it did not exist): what withholding its change shows.
    prior: BTreeMap<ObjectRef, Option<Arc<ClusterObject>>>,
}

/// What the libraries see of an object whose change is withheld.
#[derive(Debug, Clone)]
enum Withheld {
    /// Nothing, as if it were deleted: it is new since the last settled
    /// render, or its settled version takes part in the failure too.
    Hidden,
    /// Its version at the last settled render, which HAProxy accepted.
    Pinned(Arc<ClusterObject>),
}

impl ClusterStore {
    pub(super) fn objects(&self) -> impl Iterator<Item = &ClusterObject> {
        self.objects.values().map(Arc::as_ref)
    }

    /// How many objects are stored, and the bytes of their JSON text.
    pub(super) fn size(&self) -> (usize, usize) {
        let bytes = self.objects.values().map(|object| object.json.len()).sum();
        (self.objects.len(), bytes)
    }

    pub(super) fn get(&self, reference: &ObjectRef) -> Option<&ClusterObject> {
        self.objects.get(reference).map(Arc::as_ref)
    }

    /// The objects whose change is withheld from the libraries, each with
    /// whether they are shown their settled version (`true`) or nothing.
    pub(super) fn withheld(&self) -> impl Iterator<Item = (&ObjectRef, bool)> {
        self.withheld
            .iter()
            .map(|(reference, withheld)| (reference, matches!(withheld, Withheld::Pinned(_))))
    }

    /// Withholds exactly `withheld` from the libraries from now on (not
    /// stored: left out): one already withheld stays as it is; one changed
    /// since the last settle is shown its version then (or nothing if it is
    /// new); any other is hidden. Returns the references whose view
    /// changed, which the next render hands the libraries as changes.
    pub(super) fn set_withheld(&mut self, withheld: BTreeSet<ObjectRef>) -> BTreeSet<ObjectRef> {
        let mut next = BTreeMap::new();
        for reference in withheld {
            if !self.objects.contains_key(&reference) {
                continue;
            }
            let shown = match self.withheld.remove(&reference) {
                Some(kept) => kept,
                None => match self.prior.get(&reference) {
                    Some(Some(settled)) => Withheld::Pinned(Arc::clone(settled)),
                    _ => Withheld::Hidden,
                },
            };
            next.insert(reference, shown);
        }
        let mut toggled: BTreeSet<ObjectRef> =
            std::mem::take(&mut self.withheld).into_keys().collect();
        toggled.extend(next.keys().cloned());
        self.withheld = next;
        toggled
    }

    /// Whether `reference` changed since the last [`Self::settle`].
    pub(super) fn is_unsettled(&self, reference: &ObjectRef) -> bool {
        self.prior.contains_key(reference)
    }

    /// A render was accepted: the versions now stored are the settled ones.
    pub(super) fn settle(&mut self) {
        self.prior.clear();
    }

    /// What the libraries are shown of `reference`: its withheld view, or
    /// the stored object.
    fn visible(&self, reference: &ObjectRef) -> Option<&Arc<ClusterObject>> {
        match self.withheld.get(reference) {
            Some(Withheld::Hidden) => None,
            Some(Withheld::Pinned(settled)) => Some(settled),
            None => self.objects.get(reference),
        }
    }

    /// Records `reference`'s settled version before its first change since
    /// the last settle, and shows it as it is again if it was withheld.
    fn changing(&mut self, reference: &ObjectRef) {
        if !self.prior.contains_key(reference) {
            let settled = self.objects.get(reference).cloned();
            self.prior.insert(reference.clone(), settled);
        }
        self.withheld.remove(reference);
    }

    /// Applies changes and returns the references that changed.
    pub(super) fn apply(&mut self, changes: Vec<ClusterChange>) -> BTreeSet<ObjectRef> {
        let mut changed = BTreeSet::new();
        for change in changes {
            match change {
                ClusterChange::Applied(object) => {
                    // The same version again (a resync) changes nothing
                    // the libraries see, and keeps a withheld view.
                    if self
                        .objects
                        .get(&object.reference)
                        .is_none_or(|stored| **stored != object)
                    {
                        self.changing(&object.reference);
                    }
                    changed.insert(object.reference.clone());
                    self.objects
                        .insert(object.reference.clone(), Arc::new(object));
                }
                ClusterChange::Deleted(reference) => {
                    self.changing(&reference);
                    self.objects.remove(&reference);
                    changed.insert(reference);
                }
                ClusterChange::Relisted {
                    api_version,
                    kind,
                    objects,
                } => {
                    let listed: BTreeSet<&ObjectRef> =
                        objects.iter().map(|object| &object.reference).collect();
                    let gone: Vec<ObjectRef> = self
                        .objects
                        .keys()
                        .filter(|r| r.api_version == api_version && r.kind == kind)
                        .filter(|r| !listed.contains(r))
                        .cloned()
                        .collect();
                    for reference in gone {
                        self.changing(&reference);
                        self.objects.remove(&reference);
                        changed.insert(reference);
                    }
                    for object in objects {
                        // An unchanged object (same resourceVersion and
                        // content) is no change for the libraries.
                        if self
                            .objects
                            .get(&object.reference)
                            .is_some_and(|stored| **stored == object)
                        {
                            continue;
                        }
                        self.changing(&object.reference);
                        changed.insert(object.reference.clone());
                        self.objects
                            .insert(object.reference.clone(), Arc::new(object));
                    }
                }
            }
        }
        changed
    }

    /// Everything `watches` select, trimmed, under the library's keys.
    pub(super) fn view(
        &self,
        library: &str,
        watches: &[Watch],
    ) -> Result<BTreeMap<ObjectKey, Object>, RenderError> {
        let mut view = BTreeMap::new();
        for watch in watches {
            let selector = selector(library, watch)?;
            let mut trim = WatchTrim::new(watch);
            for reference in self.objects.keys() {
                if let Some(object) = self.visible(reference)
                    && selector.selects(object)
                {
                    let object = trim.library_object(object);
                    view.insert(object.key.clone(), object);
                }
            }
        }
        Ok(view)
    }

    /// What changed for one library: objects its watches now select are
    /// applied; objects it saw that are gone or no longer selected are deleted.
    pub(super) fn changes_for(
        &self,
        library: &str,
        watches: &[Watch],
        changed: &BTreeSet<ObjectRef>,
        seen: &BTreeSet<ObjectKey>,
    ) -> Result<Vec<Change>, RenderError> {
        let mut changes = Vec::new();
        for watch in watches {
            let selector = selector(library, watch)?;
            let mut trim = WatchTrim::new(watch);
            for reference in changed {
                if reference.api_version != watch.api_version || reference.kind != watch.kind {
                    continue;
                }
                let key = ObjectKey {
                    watch: watch.name.clone(),
                    namespace: reference.namespace.clone(),
                    name: reference.name.clone(),
                };
                match self.visible(reference) {
                    Some(object) if selector.selects(object) => {
                        changes.push(Change::Applied(trim.library_object(object)));
                    }
                    _ if seen.contains(&key) => changes.push(Change::Deleted(key)),
                    _ => {}
                }
            }
        }
        Ok(changes)
    }
}

fn selector(library: &str, watch: &Watch) -> Result<WatchFilter, RenderError> {
    WatchFilter::of(watch).map_err(|problem| RenderError::BadWatch {
        library: library.to_owned(),
        watch: watch.name.clone(),
        problem: Box::new(problem),
    })
}

/// How one watch's objects reach its library: trimmed by what the watch
/// ignores beyond what ingest already removed, under the library's keys.
struct WatchTrim<'a> {
    watch: &'a Watch,
    ignored: IgnoreTree<'a>,
    /// The last ingest trim list seen, and whether it already removed
    /// everything the watch ignores. Every object of a kind shares one list
    /// (an `Arc` from [`ingest_trims`]), so the answer is the same for all
    /// of them; asking it of each pod anew (some 70 paths against 70) was
    /// most of the host's share of a full feed of 10,000 pods.
    covered_by: Option<(Arc<[String]>, bool)>,
}

impl<'a> WatchTrim<'a> {
    fn new(watch: &'a Watch) -> Self {
        Self {
            watch,
            ignored: IgnoreTree::new(&watch.ignore_fields),
            covered_by: None,
        }
    }

    /// Whether ingest's trim of `object` removed all the watch ignores.
    fn ingest_covers(&mut self, object: &ClusterObject) -> bool {
        match &self.covered_by {
            Some((trimmed, covers)) if Arc::ptr_eq(trimmed, &object.trimmed) => *covers,
            _ => {
                let covers = self
                    .ignored
                    .whole
                    .iter()
                    .all(|path| object.trimmed.iter().any(|t| t == path));
                self.covered_by = Some((Arc::clone(&object.trimmed), covers));
                covers
            }
        }
    }

    fn library_object(&mut self, object: &ClusterObject) -> Object {
        // Usually ingest removed everything, and then the stored text is
        // the library's as is.
        let json = if self.ingest_covers(object) {
            object.json.to_string()
        } else {
            // Serializing a value cannot fail: its keys are strings.
            serde_json::to_string(&Trimmed {
                value: &object.value(),
                ignored: &self.ignored,
            })
            .unwrap_or_default()
        };
        Object {
            key: ObjectKey {
                watch: self.watch.name.clone(),
                namespace: object.reference.namespace.clone(),
                name: object.reference.name.clone(),
            },
            resource_version: object.resource_version.clone(),
            json,
        }
    }
}

/// The paths ingest removes from every object of a kind, as a tree built
/// once per watch (see [`ClusterObject::trimmed_by`]).
#[derive(Debug)]
pub struct IngestTrim<'a> {
    paths: &'a Arc<[String]>,
    tree: IgnoreTree<'a>,
}

impl<'a> IngestTrim<'a> {
    pub fn new(paths: &'a Arc<[String]>) -> Self {
        Self {
            paths,
            tree: IgnoreTree::new(paths),
        }
    }

    /// Whether `path` (dotted) is removed whole.
    pub fn removes(&self, path: &str) -> bool {
        self.tree.whole.contains(path)
    }
}

/// A watch's `ignore-fields` as a tree, built once per watch: at each level
/// the paths that may name a key whole (`kubectl.kubernetes.io/...`
/// annotation keys contain dots) and, by first segment, the paths that lead
/// further down.
#[derive(Debug, Default)]
struct IgnoreTree<'a> {
    whole: BTreeSet<&'a str>,
    children: BTreeMap<&'a str, IgnoreTree<'a>>,
}

impl<'a> IgnoreTree<'a> {
    fn new(paths: &'a [String]) -> Self {
        let mut tree = Self::default();
        for path in paths.iter().filter(|path| !path.is_empty()) {
            tree.insert(path);
        }
        tree
    }

    fn insert(&mut self, path: &'a str) {
        self.whole.insert(path);
        if let Some((head, rest)) = path.split_once('.') {
            self.children.entry(head).or_default().insert(rest);
        }
    }

    fn is_empty(&self) -> bool {
        self.whole.is_empty()
    }
}

/// Serializes a value without the fields its watch ignores (`ignore-fields`:
/// dotted paths such as `metadata.managedFields`; where a path meets a list
/// the rest applies to every element; a path that is a whole key removes it,
/// so annotation keys with dots work; paths that lead nowhere are ignored),
/// without copying the object first: a full view of a large cluster trims
/// tens of thousands of objects.
struct Trimmed<'a> {
    value: &'a serde_json::Value,
    ignored: &'a IgnoreTree<'a>,
}

impl serde::Serialize for Trimmed<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        use serde_json::Value;

        if self.ignored.is_empty() {
            return self.value.serialize(serializer);
        }
        match self.value {
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Trimmed {
                        value: item,
                        ignored: self.ignored,
                    })?;
                }
                seq.end()
            }
            Value::Object(fields) => {
                let mut map = serializer.serialize_map(None)?;
                for (key, child) in fields {
                    if self.ignored.whole.contains(key.as_str()) {
                        continue;
                    }
                    match self.ignored.children.get(key.as_str()) {
                        Some(ignored) => map.serialize_entry(
                            key,
                            &Trimmed {
                                value: child,
                                ignored,
                            },
                        )?,
                        None => map.serialize_entry(key, child)?,
                    }
                }
                map.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn trimmed(value: &serde_json::Value, paths: &[&str]) -> serde_json::Value {
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        let json = serde_json::to_string(&Trimmed {
            value,
            ignored: &IgnoreTree::new(&paths),
        })
        .unwrap();
        serde_json::from_str(&json).unwrap()
    }

    #[test]
    fn trim_removes_paths_through_maps_lists_and_dotted_keys() {
        let pod = json!({
            "metadata": {"name": "p", "managedFields": [{}], "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "1"}},
            "spec": {"containers": [{"name": "a", "env": [1]}, {"name": "b", "env": [2]}], "nodeName": "n"},
        });
        let pod = trimmed(
            &pod,
            &[
                "metadata.managedFields",
                "metadata.annotations.kubectl.kubernetes.io/last-applied-configuration",
                "spec.containers.env",
                "status.nothing",
                "",
            ],
        );
        assert_eq!(
            pod,
            json!({
                "metadata": {"name": "p", "annotations": {"keep": "1"}},
                "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n"},
            })
        );
        assert!(trimmed(&pod, &["spec"]).get("spec").is_none());
        assert_eq!(trimmed(&pod, &[]), pod);
    }

    /// A watch namespace of "" means every namespace, as in manifests.
    #[test]
    fn empty_watch_namespace_selects_every_namespace() {
        let watch = Watch {
            name: "services".into(),
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: Some(String::new()),
            label_selector: Some("app=web".into()),
            field_selector: None,
            ignore_fields: Vec::new(),
        };
        let object = ClusterObject::from_value(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"namespace": "shop", "name": "web", "labels": {"app": "web"}}}),
        )
        .unwrap();
        assert!(selector("lib", &watch).unwrap().selects(&object));
        let other = Watch {
            label_selector: Some("app=api".into()),
            ..watch
        };
        assert!(!selector("lib", &other).unwrap().selects(&object));
    }
}

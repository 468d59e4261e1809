//! Merges the output items of every library into one haproxy.cfg, its
//! auxiliary files and the planned status patches.
//!
//! Sections have exactly one owner; snippets go into a section some library
//! owns, in slot order. Two libraries claiming the same section or file is an
//! error that names both, because silently picking one would make the result
//! depend on load order.
//!
//! The merge is incremental: the cache keeps what the last merge made of
//! every item, and a merge takes back and puts in only the items the
//! libraries changed (the render core says which), then assembles the file
//! from per-section texts, re-rendering only the sections whose items
//! changed. One changed endpoint costs its section's text and a few map
//! updates, not a pass over ten thousand items.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;

use thiserror::Error;

mod rendered;
pub use rendered::{
    LineOrigins, PlannedObject, PlannedPatch, PlannedWarning, Rendered, redact_line,
};

use crate::library::types::{
    AuxFile, Item, OwnedObject, Section, SectionKind, Slot, Snippet, StatusPatch, StatusVariant,
    Warning,
};

/// One library's current output, in the order libraries merge.
#[derive(Debug, Clone, Copy)]
pub struct LibraryItems<'a> {
    pub library: &'a Arc<str>,
    pub items: &'a BTreeMap<String, Item>,
    /// What changed since the merge that filled the cache.
    pub changed: Changed<'a>,
}

/// Why the libraries' outputs could not be merged.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum MergeError {
    /// Two libraries (or two items of one) define the same section.
    #[error(
        "section `{section}` is defined by both `{first}` and `{second}`; disable one of them or rename the section in one"
    )]
    SectionConflict {
        section: String,
        first: String,
        second: String,
    },
    /// Two libraries write the same auxiliary file.
    #[error(
        "file `{path}` is written by both `{first}` and `{second}`; each file must have one owner"
    )]
    FileConflict {
        path: String,
        first: String,
        second: String,
    },
    /// Two libraries (or two items of one) patch the status of the same
    /// object in the same variant: they would share one field manager, and
    /// server-side apply would let the second silently drop the first's
    /// fields.
    #[error(
        "the {variant} status of {object} is patched by both `{first}` and `{second}`; one object's status per variant must have one owner"
    )]
    StatusConflict {
        variant: &'static str,
        object: String,
        first: String,
        second: String,
    },
    /// A snippet targets a section no enabled library defines.
    #[error(
        "library `{library}` adds lines to `{section}`, which no enabled library defines; enable the library that owns it (usually `base`)"
    )]
    MissingSection { library: String, section: String },
    /// Two items ask for the same owned object: they would fight over its
    /// fields under one field manager.
    #[error(
        "{object} is asked for by both `{first}` and `{second}`; an owned object must have one owner"
    )]
    OwnedObjectConflict {
        object: String,
        first: String,
        second: String,
    },
    /// Nothing defines the `global` section, so HAProxy cannot run.
    #[error(
        "no library defines the `global` section; enable the `base` library or a replacement for it"
    )]
    NoGlobal,
}

fn display_section(kind: SectionKind, name: &str) -> String {
    if name.is_empty() {
        kind.keyword().to_owned()
    } else {
        format!("{} {name}", kind.keyword())
    }
}

/// What changed in one library's items since the merge that filled the
/// cache. The render core knows it from the library's output: a delta
/// names the keys it upserts and removes.
#[derive(Debug, Clone, Copy)]
pub enum Changed<'a> {
    /// Anything may have (a complete output, a new instance): this merge
    /// starts over.
    All,
    /// Only these keys, each with the item it held at the last merge
    /// (`None`: it held none).
    Keys(&'a BTreeMap<String, Option<Item>>),
}

/// An item's place in merge order: its library's position, its key.
type ItemId = (usize, String);

/// Where a section sorts in the file ([`section_order`]), owned.
type TargetKey = (u8, bool, String);

/// One section of the file: the items that define it (one, unless two
/// conflict), the snippets that go into it, and its text until one of them
/// changes.
struct Target {
    kind: SectionKind,
    name: String,
    owners: BTreeMap<ItemId, Arc<Section>>,
    /// In the order they go into the section: slot, priority, library
    /// position, item key.
    snippets: BTreeMap<(Slot, i32, ItemId), Arc<Snippet>>,
    text: Option<SectionText>,
}

/// The rendered text of one section.
struct SectionText {
    text: String,
    /// Line ranges relative to the section's first line (0-based).
    origins: Vec<(Range<usize>, Arc<str>)>,
    /// Secret line ranges, relative as `origins`.
    secret: Vec<Range<usize>>,
    lines: usize,
}

/// A status patch by what it patches, for finding two owners of one.
#[derive(Clone)]
struct PatchIdentity(Arc<StatusPatch>);

impl PartialEq for PatchIdentity {
    fn eq(&self, other: &Self) -> bool {
        self.0.variant == other.0.variant && self.0.object == other.0.object
    }
}

impl Eq for PatchIdentity {}

impl std::hash::Hash for PatchIdentity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.variant.hash(state);
        self.0.object.hash(state);
    }
}

/// An owned object by what it names (apiVersion, kind, namespace, name).
#[derive(Clone)]
struct OwnedIdentity(Arc<OwnedObject>);

impl OwnedIdentity {
    fn names(&self) -> (&str, &str, &str, &str) {
        let object = &self.0;
        (
            &object.api_version,
            &object.kind,
            &object.owner.namespace,
            &object.name,
        )
    }
}

impl PartialEq for OwnedIdentity {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for OwnedIdentity {}

impl std::hash::Hash for OwnedIdentity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.names().hash(state);
    }
}

/// What the last merge made of every item, kept so the next merge takes
/// in only the items that changed: one changed endpoint costs its own
/// section's text and a few map updates, not a pass over every item.
#[derive(Default)]
pub struct MergeCache {
    /// The libraries of the last merge, in order; `None` until a merge
    /// succeeded (and after one failed): the next merge starts over.
    libraries: Option<Vec<Arc<str>>>,
    targets: BTreeMap<TargetKey, Target>,
    files: BTreeMap<String, BTreeMap<ItemId, Arc<AuxFile>>>,
    patches: BTreeMap<StatusVariant, BTreeMap<ItemId, Arc<StatusPatch>>>,
    /// Who patches what: one item, unless two conflict (a sorted `Vec`: a
    /// B-tree node per patch would cost ten times the memory).
    patch_owners: HashMap<PatchIdentity, Vec<ItemId>>,
    warnings: BTreeMap<ItemId, Arc<Warning>>,
    owned: BTreeMap<ItemId, Arc<OwnedObject>>,
    owned_owners: HashMap<OwnedIdentity, Vec<ItemId>>,
}

/// What one merge added or removed, to check for conflicts and missing
/// sections once every change is in (a key that moves within a library
/// is briefly held twice).
#[derive(Default)]
struct Touched {
    targets: BTreeSet<TargetKey>,
    files: BTreeSet<String>,
    patches: Vec<PatchIdentity>,
    owned: Vec<OwnedIdentity>,
}

/// Merges the outputs of `libraries` (already in merge order). The cache
/// holds what the last merge made; the items each library says changed
/// are taken back and put in again, and the configuration is assembled
/// from cached section texts. A merge from an empty cache (the first, after
/// a failure, after a complete output) takes in every item: the same
/// mechanism with everything changed.
pub fn merge(
    libraries: &[LibraryItems<'_>],
    cache: &mut MergeCache,
) -> Result<Rendered, MergeError> {
    let same_libraries = cache.libraries.as_ref().is_some_and(|merged| {
        merged.len() == libraries.len()
            && merged
                .iter()
                .zip(libraries)
                .all(|(merged, library)| Arc::ptr_eq(merged, library.library))
    });
    let incremental = same_libraries
        && libraries
            .iter()
            .all(|library| matches!(library.changed, Changed::Keys(_)));
    let mut touched = Touched::default();
    if incremental {
        for (position, library) in libraries.iter().enumerate() {
            let Changed::Keys(keys) = library.changed else {
                continue;
            };
            for (key, old) in keys {
                let new = library.items.get(key);
                if let (Some(old), Some(new)) = (old, new)
                    && same_item(old, new)
                {
                    continue;
                }
                let id = (position, key.clone());
                if let Some(old) = old {
                    cache.take_back(&id, old, &mut touched);
                }
                if let Some(new) = new {
                    cache.take_in(id, new, &mut touched);
                }
            }
        }
    } else {
        *cache = MergeCache::default();
        for (position, library) in libraries.iter().enumerate() {
            for (key, item) in library.items {
                cache.take_in((position, key.clone()), item, &mut touched);
            }
        }
    }
    let names: Vec<&Arc<str>> = libraries.iter().map(|library| library.library).collect();
    match cache.check(&touched, &names) {
        Ok(()) => {
            cache.libraries = Some(names.iter().map(|name| (*name).clone()).collect());
            Ok(cache.assemble(&names))
        }
        Err(error) => {
            // Start over next time rather than keep a state no merge from
            // scratch would make.
            *cache = MergeCache::default();
            Err(error)
        }
    }
}

/// The very same item (libraries share unchanged items).
fn same_item(a: &Item, b: &Item) -> bool {
    match (a, b) {
        (Item::Section(a), Item::Section(b)) => Arc::ptr_eq(a, b),
        (Item::Snippet(a), Item::Snippet(b)) => Arc::ptr_eq(a, b),
        (Item::File(a), Item::File(b)) => Arc::ptr_eq(a, b),
        (Item::StatusPatch(a), Item::StatusPatch(b)) => Arc::ptr_eq(a, b),
        (Item::Warning(a), Item::Warning(b)) => Arc::ptr_eq(a, b),
        (Item::OwnedObject(a), Item::OwnedObject(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

fn claim(owners: &mut Vec<ItemId>, id: ItemId) {
    if let Err(at) = owners.binary_search(&id) {
        owners.insert(at, id);
    }
}

fn release(owners: &mut Vec<ItemId>, id: &ItemId) {
    if let Ok(at) = owners.binary_search(id) {
        owners.remove(at);
    }
}

fn target_key(kind: SectionKind, name: &str) -> TargetKey {
    let (rank, named, name) = section_order(kind, name);
    (rank, named, name.to_owned())
}

impl MergeCache {
    fn target(&mut self, kind: SectionKind, name: &str, touched: &mut Touched) -> &mut Target {
        let key = target_key(kind, name);
        touched.targets.insert(key.clone());
        let target = self.targets.entry(key).or_insert_with(|| Target {
            kind,
            name: name.to_owned(),
            owners: BTreeMap::new(),
            snippets: BTreeMap::new(),
            text: None,
        });
        target.text = None;
        target
    }

    fn take_in(&mut self, id: ItemId, item: &Item, touched: &mut Touched) {
        match item {
            Item::Section(section) => {
                self.target(section.kind, &section.name, touched)
                    .owners
                    .insert(id, section.clone());
            }
            Item::Snippet(snippet) => {
                self.target(snippet.target_kind, &snippet.target_name, touched)
                    .snippets
                    .insert((snippet.slot, snippet.priority, id), snippet.clone());
            }
            Item::File(file) => {
                touched.files.insert(file.path.clone());
                self.files
                    .entry(file.path.clone())
                    .or_default()
                    .insert(id, file.clone());
            }
            Item::StatusPatch(patch) => {
                let identity = PatchIdentity(patch.clone());
                let owners = self.patch_owners.entry(identity.clone()).or_default();
                claim(owners, id.clone());
                if owners.len() > 1 {
                    touched.patches.push(identity);
                }
                self.patches
                    .entry(patch.variant)
                    .or_default()
                    .insert(id, patch.clone());
            }
            Item::Warning(warning) => {
                self.warnings.insert(id, warning.clone());
            }
            Item::OwnedObject(object) => {
                let identity = OwnedIdentity(object.clone());
                let owners = self.owned_owners.entry(identity.clone()).or_default();
                claim(owners, id.clone());
                if owners.len() > 1 {
                    touched.owned.push(identity);
                }
                self.owned.insert(id, object.clone());
            }
        }
    }

    fn take_back(&mut self, id: &ItemId, item: &Item, touched: &mut Touched) {
        match item {
            Item::Section(section) => {
                self.target(section.kind, &section.name, touched)
                    .owners
                    .remove(id);
            }
            Item::Snippet(snippet) => {
                self.target(snippet.target_kind, &snippet.target_name, touched)
                    .snippets
                    .remove(&(snippet.slot, snippet.priority, id.clone()));
            }
            Item::File(file) => {
                touched.files.insert(file.path.clone());
                if let Some(owners) = self.files.get_mut(&file.path) {
                    owners.remove(id);
                }
            }
            Item::StatusPatch(patch) => {
                let identity = PatchIdentity(patch.clone());
                if let Some(owners) = self.patch_owners.get_mut(&identity) {
                    release(owners, id);
                    if owners.is_empty() {
                        self.patch_owners.remove(&identity);
                    }
                }
                if let Some(patches) = self.patches.get_mut(&patch.variant) {
                    patches.remove(id);
                    if patches.is_empty() {
                        self.patches.remove(&patch.variant);
                    }
                }
            }
            Item::Warning(_) => {
                self.warnings.remove(id);
            }
            Item::OwnedObject(object) => {
                let identity = OwnedIdentity(object.clone());
                if let Some(owners) = self.owned_owners.get_mut(&identity) {
                    release(owners, id);
                    if owners.is_empty() {
                        self.owned_owners.remove(&identity);
                    }
                }
                self.owned.remove(id);
            }
        }
    }

    /// Conflicts and missing sections among what this merge touched (what
    /// it did not touch passed the merge before), and the `global` section.
    /// Drops sections and files nothing holds any more.
    fn check(&mut self, touched: &Touched, names: &[&Arc<str>]) -> Result<(), MergeError> {
        let name = |id: &ItemId| names[id.0].to_string();
        let two = |owners: Vec<&ItemId>| {
            let first = owners.first().map(|id| name(id)).unwrap_or_default();
            let second = owners.get(1).map(|id| name(id)).unwrap_or_default();
            (first, second)
        };
        for key in &touched.targets {
            let Some(target) = self.targets.get(key) else {
                continue;
            };
            if target.owners.len() > 1 {
                let (first, second) = two(target.owners.keys().take(2).collect());
                return Err(MergeError::SectionConflict {
                    section: display_section(target.kind, &target.name),
                    first,
                    second,
                });
            }
            if target.owners.is_empty() && target.snippets.is_empty() {
                self.targets.remove(key);
            }
        }
        for path in &touched.files {
            let Some(owners) = self.files.get(path) else {
                continue;
            };
            if owners.len() > 1 {
                let (first, second) = two(owners.keys().take(2).collect());
                return Err(MergeError::FileConflict {
                    path: path.clone(),
                    first,
                    second,
                });
            }
            if owners.is_empty() {
                self.files.remove(path);
            }
        }
        for identity in &touched.patches {
            if let Some(owners) = self.patch_owners.get(identity)
                && owners.len() > 1
            {
                let patch = &identity.0;
                let (first, second) = two(owners.iter().take(2).collect());
                return Err(MergeError::StatusConflict {
                    variant: patch.variant.as_str(),
                    object: format!(
                        "{} {}/{}",
                        patch.object.kind, patch.object.namespace, patch.object.name
                    ),
                    first,
                    second,
                });
            }
        }
        for identity in &touched.owned {
            if let Some(owners) = self.owned_owners.get(identity)
                && owners.len() > 1
            {
                let object = &identity.0;
                let (first, second) = two(owners.iter().take(2).collect());
                return Err(MergeError::OwnedObjectConflict {
                    object: format!("{} {}/{}", object.kind, object.owner.namespace, object.name),
                    first,
                    second,
                });
            }
        }
        // The first library (in merge order) whose lines have no section.
        let missing = touched
            .targets
            .iter()
            .filter_map(|key| self.targets.get(key))
            .filter(|target| target.owners.is_empty())
            .filter_map(|target| {
                let ((_, _, id), _) = target.snippets.iter().min_by(|a, b| a.0.2.cmp(&b.0.2))?;
                Some((id, target))
            })
            .min_by(|a, b| a.0.cmp(b.0));
        if let Some((id, target)) = missing {
            return Err(MergeError::MissingSection {
                library: name(id),
                section: display_section(target.kind, &target.name),
            });
        }
        if !self
            .targets
            .contains_key(&target_key(SectionKind::Global, ""))
        {
            return Err(MergeError::NoGlobal);
        }
        Ok(())
    }

    /// The configuration and everything beside it, from what the cache
    /// holds (checked: one owner of everything).
    fn assemble(&mut self, names: &[&Arc<str>]) -> Rendered {
        let mut rendered = Rendered::default();
        let mut next_line = 1;
        for target in self.targets.values_mut() {
            let Some((owner, section)) = target.owners.iter().next() else {
                continue;
            };
            let owner = names[owner.0];
            let text = target
                .text
                .get_or_insert_with(|| section_text(owner, section, target.snippets.iter(), names));
            rendered.config.push_str(&text.text);
            rendered.config.push('\n');
            for range in &text.secret {
                let range = range.start + next_line..range.end + next_line;
                match rendered.secret_lines.last_mut() {
                    Some(last) if last.end == range.start => last.end = range.end,
                    _ => rendered.secret_lines.push(range),
                }
            }
            for (range, library) in &text.origins {
                let range = range.start + next_line..range.end + next_line;
                match rendered.line_origins.last_mut() {
                    Some((last, owner))
                        if Arc::ptr_eq(owner, library) && last.end == range.start =>
                    {
                        last.end = range.end
                    }
                    _ => rendered.line_origins.push((range, library.clone())),
                }
            }
            next_line += text.lines + 1;
        }
        for (path, owners) in &self.files {
            let Some(((position, _), file)) = owners.iter().next() else {
                continue;
            };
            rendered
                .file_origins
                .insert(path.clone(), names[*position].clone());
            rendered.files.insert(path.clone(), file.content.clone());
            if file.secret {
                rendered.secret_files.insert(path.clone());
            }
        }
        // Patches in library order, then item-key order: deterministic
        // without sorting ten thousand of them.
        for (variant, patches) in &self.patches {
            rendered.status_patches.insert(
                *variant,
                patches
                    .iter()
                    .map(|((position, _), patch)| (names[*position].clone(), patch.clone()))
                    .collect(),
            );
        }
        rendered.warnings = self
            .warnings
            .iter()
            .map(|((position, key), warning)| {
                (names[*position].clone(), key.clone(), warning.clone())
            })
            .collect();
        rendered.owned_objects = self
            .owned
            .iter()
            .map(|((position, _), object)| (names[*position].clone(), object.clone()))
            .collect();
        rendered
    }
}

/// One section's text: its header and body by its owner, then each
/// snippet by its library.
fn section_text<'a>(
    owner: &Arc<str>,
    section: &Section,
    snippets: impl Iterator<Item = (&'a (Slot, i32, ItemId), &'a Arc<Snippet>)>,
    names: &[&Arc<str>],
) -> SectionText {
    let mut writer = SectionWriter::default();
    writer.line(&display_section(section.kind, &section.name), owner);
    writer.block(&section.body, owner, section.secret);
    for ((_, _, (position, _)), snippet) in snippets {
        writer.block(&snippet.lines, names[*position], snippet.secret);
    }
    SectionText {
        lines: writer.lines,
        text: writer.text,
        origins: writer.origins,
        secret: writer.secret,
    }
}

/// Where a section goes in the file: HAProxy needs `global` first and
/// `defaults` before the proxies that inherit from it (unnamed first);
/// resolvers, peers, userlists and caches before the proxies that name them
/// reads best. Sections of one kind sort by name.
fn section_order(kind: SectionKind, name: &str) -> (u8, bool, &str) {
    let rank = match kind {
        SectionKind::Global => 0,
        SectionKind::Defaults => 1,
        SectionKind::Userlist => 2,
        SectionKind::Resolvers => 3,
        SectionKind::Peers => 4,
        SectionKind::Ring => 5,
        SectionKind::Cache => 6,
        SectionKind::HttpErrors => 7,
        SectionKind::Frontend => 8,
        SectionKind::Listen => 9,
        SectionKind::Backend => 10,
    };
    (rank, !name.is_empty(), name)
}

/// Builds one section's text while recording which library wrote each line.
#[derive(Default)]
struct SectionWriter {
    text: String,
    lines: usize,
    origins: Vec<(Range<usize>, Arc<str>)>,
    secret: Vec<Range<usize>>,
}

impl SectionWriter {
    fn record(&mut self, lines: usize, library: &Arc<str>) {
        if lines == 0 {
            return;
        }
        let start = self.lines;
        self.lines += lines;
        match self.origins.last_mut() {
            Some((range, owner)) if Arc::ptr_eq(owner, library) && range.end == start => {
                range.end = self.lines
            }
            _ => self.origins.push((start..self.lines, library.clone())),
        }
    }

    fn line(&mut self, line: &str, library: &Arc<str>) {
        self.text.push_str(line);
        self.text.push('\n');
        self.record(1, library);
    }

    /// Writes a body, indenting lines the library left unindented.
    fn block(&mut self, lines: &str, library: &Arc<str>, secret: bool) {
        let start = self.lines;
        let mut count = 0;
        for line in lines.lines() {
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                continue;
            }
            if !trimmed.starts_with(char::is_whitespace) {
                self.text.push_str("    ");
            }
            self.text.push_str(trimmed);
            self.text.push('\n');
            count += 1;
        }
        self.record(count, library);
        if secret && count > 0 {
            self.secret.push(start..self.lines);
        }
    }
}

#[cfg(test)]
mod tests;

//! Merges the output items of every library into one haproxy.cfg, its
//! auxiliary files and the planned status patches.
//!
//! Sections have exactly one owner; snippets go into a section some library
//! owns, in slot order. Two libraries claiming the same section or file is an
//! error that names both, because silently picking one would make the result
//! depend on load order.
//!
//! The text of each section is cached: items are shared (`Arc`), so a section
//! whose body and snippets are the very same items as last time is reused
//! as is, and one changed endpoint costs one section's text, not the file's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;

use thiserror::Error;

use crate::library::types::{
    Item, ObjectRef, OwnedObject, Section, SectionKind, Slot, Snippet, StatusPatch, StatusVariant,
    Warning,
};

/// One library's current output, in the order libraries merge.
#[derive(Debug, Clone, Copy)]
pub struct LibraryItems<'a> {
    pub library: &'a Arc<str>,
    pub items: &'a BTreeMap<String, Item>,
}

/// A status patch the render plans, with the library that made it.
pub type PlannedPatch = (Arc<str>, Arc<StatusPatch>);

/// An object a library asks the host to apply, with the library.
pub type PlannedObject = (Arc<str>, Arc<OwnedObject>);

/// A warning a library keeps in its output: (library, item key, warning).
pub type PlannedWarning = (Arc<str>, String, Arc<Warning>);

/// A merged render: what gets validated and deployed. Its `Debug` shows
/// secret lines redacted and secret files by size only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The whole haproxy.cfg.
    pub config: String,
    /// Auxiliary files by path relative to the configuration directory.
    pub files: BTreeMap<String, String>,
    /// Planned status patches by variant.
    pub status_patches: BTreeMap<StatusVariant, Vec<PlannedPatch>>,
    /// Which library wrote which lines of `config` (1-based, end exclusive),
    /// so HAProxy's complaint about line 42 can name the library.
    pub line_origins: Vec<(Range<usize>, Arc<str>)>,
    /// Which library wrote each file.
    pub file_origins: BTreeMap<String, Arc<str>>,
    /// Files that hold key material: written 0600, never shown.
    pub secret_files: BTreeSet<String>,
    /// Problems libraries worked around, in merge order.
    pub warnings: Vec<PlannedWarning>,
    /// Lines of `config` that hold secret text (1-based, end exclusive):
    /// shown redacted, and the file is written 0600 while there are any.
    pub secret_lines: Vec<Range<usize>>,
    /// Objects the libraries ask the host to apply, in merge order.
    pub owned_objects: Vec<PlannedObject>,
}

impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: BTreeMap<&str, std::borrow::Cow<'_, str>> = self
            .files
            .iter()
            .map(|(path, content)| {
                let shown = if self.secret_files.contains(path) {
                    std::borrow::Cow::Owned(format!("<{} bytes redacted>", content.len()))
                } else {
                    std::borrow::Cow::Borrowed(content.as_str())
                };
                (path.as_str(), shown)
            })
            .collect();
        f.debug_struct("Rendered")
            .field("config", &self.shown_config())
            .field("files", &files)
            .field("status_patches", &self.status_patches)
            .field("line_origins", &self.line_origins)
            .field("file_origins", &self.file_origins)
            .field("secret_files", &self.secret_files)
            .field("warnings", &self.warnings)
            .field("secret_lines", &self.secret_lines)
            .field("owned_objects", &self.owned_objects)
            .finish()
    }
}

impl Rendered {
    /// The library that wrote `line` (1-based) of the configuration.
    pub fn library_at_line(&self, line: usize) -> Option<&str> {
        let index = self
            .line_origins
            .partition_point(|(range, _)| range.end <= line);
        self.line_origins
            .get(index)
            .filter(|(range, _)| range.contains(&line))
            .map(|(_, library)| &**library)
    }

    /// The configuration holds secret text (a library marked it).
    pub fn holds_secret_text(&self) -> bool {
        !self.secret_lines.is_empty()
    }

    /// Line `line` (1-based) of the configuration is secret text.
    pub fn is_secret_line(&self, line: usize) -> bool {
        let index = self.secret_lines.partition_point(|range| range.end <= line);
        self.secret_lines
            .get(index)
            .is_some_and(|range| range.contains(&line))
    }

    /// The configuration as it may be shown: each secret line cut to its
    /// first word and `<redacted>`, so line numbers and structure stay.
    pub fn shown_config(&self) -> std::borrow::Cow<'_, str> {
        if self.secret_lines.is_empty() {
            return std::borrow::Cow::Borrowed(&self.config);
        }
        let mut shown = String::with_capacity(self.config.len());
        for (index, line) in self.config.split_inclusive('\n').enumerate() {
            if self.is_secret_line(index + 1) {
                shown.push_str(&redact_line(line));
                shown.push('\n');
            } else {
                shown.push_str(line);
            }
        }
        std::borrow::Cow::Owned(shown)
    }
}

/// A secret line as it may be shown: its indentation, its first word (a
/// keyword such as `user`), then `<redacted>`.
pub fn redact_line(line: &str) -> String {
    let body = line.trim_end();
    let indent = &body[..body.len() - body.trim_start().len()];
    match body.split_whitespace().next() {
        Some(first) => format!("{indent}{first} <redacted>"),
        None => String::new(),
    }
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

type SectionId = (SectionKind, String);

fn display_section(kind: SectionKind, name: &str) -> String {
    if name.is_empty() {
        kind.keyword().to_owned()
    } else {
        format!("{} {name}", kind.keyword())
    }
}

/// Where a snippet goes within its section: slot, priority, the position of
/// its library in merge order, its item key.
type SnippetOrder<'a> = (Slot, i32, usize, &'a str);

/// One section and what goes into it, as collected for this merge.
struct Gathered<'a> {
    owner: &'a Arc<str>,
    section: &'a Arc<Section>,
    /// Each snippet with its order and library.
    snippets: Vec<(SnippetOrder<'a>, &'a Arc<Snippet>, &'a Arc<str>)>,
}

/// The rendered text of one section and the items it was made from.
struct CachedSection {
    section: Arc<Section>,
    snippets: Vec<Arc<Snippet>>,
    owners: Vec<Arc<str>>,
    text: String,
    /// Line ranges relative to the section's first line (0-based).
    origins: Vec<(Range<usize>, Arc<str>)>,
    /// Secret line ranges, relative as `origins`.
    secret: Vec<Range<usize>>,
    lines: usize,
}

impl CachedSection {
    fn matches(&self, gathered: &Gathered<'_>) -> bool {
        Arc::ptr_eq(&self.section, gathered.section)
            && Arc::ptr_eq(&self.owners[0], gathered.owner)
            && self.snippets.len() == gathered.snippets.len()
            && self
                .snippets
                .iter()
                .zip(&self.owners[1..])
                .zip(&gathered.snippets)
                .all(|((cached, owner), (_, snippet, library))| {
                    Arc::ptr_eq(cached, snippet) && Arc::ptr_eq(owner, library)
                })
    }

    fn render(gathered: &Gathered<'_>) -> Self {
        let mut writer = SectionWriter::default();
        writer.line(
            &display_section(gathered.section.kind, &gathered.section.name),
            gathered.owner,
        );
        writer.block(
            &gathered.section.body,
            gathered.owner,
            gathered.section.secret,
        );
        for (_, snippet, library) in &gathered.snippets {
            writer.block(&snippet.lines, library, snippet.secret);
        }
        let mut owners = vec![gathered.owner.clone()];
        owners.extend(
            gathered
                .snippets
                .iter()
                .map(|(_, _, library)| (*library).clone()),
        );
        Self {
            section: gathered.section.clone(),
            snippets: gathered
                .snippets
                .iter()
                .map(|(_, snippet, _)| (*snippet).clone())
                .collect(),
            owners,
            lines: writer.lines,
            text: writer.text,
            origins: writer.origins,
            secret: writer.secret,
        }
    }
}

/// Section texts kept between merges.
#[derive(Default)]
pub struct MergeCache {
    sections: HashMap<SectionId, CachedSection>,
}

/// Merges the outputs of `libraries` (already in merge order), reusing the
/// text of sections that did not change since the merge that filled `cache`.
pub fn merge(
    libraries: &[LibraryItems<'_>],
    cache: &mut MergeCache,
) -> Result<Rendered, MergeError> {
    let mut sections: BTreeMap<(u8, bool, &str), (SectionKind, Gathered<'_>)> = BTreeMap::new();
    // Who patches what: (variant, apiVersion, kind, namespace, name).
    let mut patch_owners: HashMap<(StatusVariant, &ObjectRef), &Arc<str>> = HashMap::new();
    // Who asks for which object: (apiVersion, kind, namespace, name).
    let mut object_owners: HashMap<(&str, &str, &str, &str), &Arc<str>> = HashMap::new();
    let mut rendered = Rendered::default();

    for library in libraries {
        for (key, item) in library.items {
            match item {
                Item::Section(section) => {
                    let order = section_order(section.kind, &section.name);
                    if let Some((_, existing)) = sections.get(&order) {
                        return Err(MergeError::SectionConflict {
                            section: display_section(section.kind, &section.name),
                            first: existing.owner.to_string(),
                            second: library.library.to_string(),
                        });
                    }
                    let gathered = Gathered {
                        owner: library.library,
                        section,
                        snippets: Vec::new(),
                    };
                    sections.insert(order, (section.kind, gathered));
                }
                Item::File(file) => {
                    if let Some(first) = rendered.file_origins.get(&file.path) {
                        return Err(MergeError::FileConflict {
                            path: file.path.clone(),
                            first: first.to_string(),
                            second: library.library.to_string(),
                        });
                    }
                    rendered
                        .file_origins
                        .insert(file.path.clone(), library.library.clone());
                    rendered
                        .files
                        .insert(file.path.clone(), file.content.clone());
                    if file.secret {
                        rendered.secret_files.insert(file.path.clone());
                    }
                }
                Item::StatusPatch(patch) => {
                    let identity = (patch.variant, &patch.object);
                    if let Some(first) = patch_owners.insert(identity, library.library) {
                        return Err(MergeError::StatusConflict {
                            variant: patch.variant.as_str(),
                            object: format!(
                                "{} {}/{}",
                                patch.object.kind, patch.object.namespace, patch.object.name
                            ),
                            first: first.to_string(),
                            second: library.library.to_string(),
                        });
                    }
                    rendered
                        .status_patches
                        .entry(patch.variant)
                        .or_default()
                        .push((library.library.clone(), patch.clone()))
                }
                Item::Warning(warning) => {
                    rendered
                        .warnings
                        .push((library.library.clone(), key.clone(), warning.clone()));
                }
                Item::OwnedObject(object) => {
                    let identity = (
                        object.api_version.as_str(),
                        object.kind.as_str(),
                        object.owner.namespace.as_str(),
                        object.name.as_str(),
                    );
                    if let Some(first) = object_owners.insert(identity, library.library) {
                        return Err(MergeError::OwnedObjectConflict {
                            object: format!(
                                "{} {}/{}",
                                object.kind, object.owner.namespace, object.name
                            ),
                            first: first.to_string(),
                            second: library.library.to_string(),
                        });
                    }
                    rendered
                        .owned_objects
                        .push((library.library.clone(), object.clone()));
                }
                Item::Snippet(_) => {}
            }
        }
    }

    // Snippets second, so a snippet may target a section of a library that
    // merges after its own.
    for (position, library) in libraries.iter().enumerate() {
        for (key, item) in library.items {
            if let Item::Snippet(snippet) = item {
                let order = section_order(snippet.target_kind, &snippet.target_name);
                let Some((_, gathered)) = sections.get_mut(&order) else {
                    return Err(MergeError::MissingSection {
                        library: library.library.to_string(),
                        section: display_section(snippet.target_kind, &snippet.target_name),
                    });
                };
                gathered.snippets.push((
                    (snippet.slot, snippet.priority, position, key.as_str()),
                    snippet,
                    library.library,
                ));
            }
        }
    }

    if !sections.contains_key(&section_order(SectionKind::Global, "")) {
        return Err(MergeError::NoGlobal);
    }

    let mut used = HashMap::with_capacity(sections.len());
    let mut next_line = 1;
    for (_, (kind, mut gathered)) in sections {
        gathered.snippets.sort_by(|a, b| a.0.cmp(&b.0));
        let id = (kind, gathered.section.name.clone());
        let cached = match cache.sections.remove(&id) {
            Some(cached) if cached.matches(&gathered) => cached,
            _ => CachedSection::render(&gathered),
        };
        rendered.config.push_str(&cached.text);
        rendered.config.push('\n');
        for range in &cached.secret {
            let range = range.start + next_line..range.end + next_line;
            match rendered.secret_lines.last_mut() {
                Some(last) if last.end == range.start => last.end = range.end,
                _ => rendered.secret_lines.push(range),
            }
        }
        for (range, library) in &cached.origins {
            let range = range.start + next_line..range.end + next_line;
            match rendered.line_origins.last_mut() {
                Some((last, owner)) if Arc::ptr_eq(owner, library) && last.end == range.start => {
                    last.end = range.end
                }
                _ => rendered.line_origins.push((range, library.clone())),
            }
        }
        next_line += cached.lines + 1;
        used.insert(id, cached);
    }
    // Sections that are gone drop out of the cache with their items.
    cache.sections = used;

    // Patches stay in library order, then item-key order: deterministic
    // without sorting ten thousand of them on every change.
    Ok(rendered)
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

//! Merges the output items of every library into one haproxy.cfg, its
//! auxiliary files and the planned status patches.
//!
//! Sections have exactly one owner; snippets go into a section some library
//! owns, in slot order. Two libraries claiming the same section or file is an
//! error that names both, because silently picking one would make the result
//! depend on load order.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::ops::Range;

use thiserror::Error;

use crate::library::types::{Item, SectionKind, Slot, StatusPatch, StatusVariant};

/// One library's current output, in the order libraries merge.
#[derive(Debug, Clone, Copy)]
pub struct LibraryItems<'a> {
    pub library: &'a str,
    pub items: &'a BTreeMap<String, Item>,
}

/// A merged render: what gets validated and deployed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The whole haproxy.cfg.
    pub config: String,
    /// Auxiliary files by path relative to the configuration directory.
    pub files: BTreeMap<String, String>,
    /// Planned status patches by variant, each with the library that made it.
    pub status_patches: BTreeMap<StatusVariant, Vec<(String, StatusPatch)>>,
    /// Which library wrote which lines of `config` (1-based, end exclusive),
    /// so HAProxy's complaint about line 42 can name the library.
    pub line_origins: Vec<(Range<usize>, String)>,
    /// Which library wrote each file.
    pub file_origins: BTreeMap<String, String>,
}

impl Rendered {
    /// The library that wrote `line` (1-based) of the configuration.
    pub fn library_at_line(&self, line: usize) -> Option<&str> {
        self.line_origins
            .iter()
            .find(|(range, _)| range.contains(&line))
            .map(|(_, library)| library.as_str())
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
    #[error("file `{path}` is written by both `{first}` and `{second}`; each file must have one owner")]
    FileConflict {
        path: String,
        first: String,
        second: String,
    },
    /// A snippet targets a section no enabled library defines.
    #[error(
        "library `{library}` adds lines to `{section}`, which no enabled library defines; enable the library that owns it (usually `base`)"
    )]
    MissingSection { library: String, section: String },
    /// Nothing defines the `global` section, so HAProxy cannot run.
    #[error("no library defines the `global` section; enable the `base` library or a replacement for it")]
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

struct SectionEntry<'a> {
    owner: &'a str,
    body: &'a str,
    /// (slot, priority, library position, key, lines, library)
    snippets: Vec<(Slot, i32, usize, &'a str, &'a str, &'a str)>,
}

/// Merges the outputs of `libraries` (already in merge order).
pub fn merge(libraries: &[LibraryItems<'_>]) -> Result<Rendered, MergeError> {
    let mut sections: BTreeMap<SectionId, SectionEntry<'_>> = BTreeMap::new();
    let mut rendered = Rendered::default();

    for library in libraries {
        for item in library.items.values() {
            match item {
                Item::Section(section) => {
                    let id = (section.kind, section.name.clone());
                    if let Some(existing) = sections.get(&id) {
                        return Err(MergeError::SectionConflict {
                            section: display_section(section.kind, &section.name),
                            first: existing.owner.to_owned(),
                            second: library.library.to_owned(),
                        });
                    }
                    sections.insert(
                        id,
                        SectionEntry {
                            owner: library.library,
                            body: &section.body,
                            snippets: Vec::new(),
                        },
                    );
                }
                Item::File(file) => {
                    if let Some(first) = rendered.file_origins.get(&file.path) {
                        return Err(MergeError::FileConflict {
                            path: file.path.clone(),
                            first: first.clone(),
                            second: library.library.to_owned(),
                        });
                    }
                    rendered
                        .file_origins
                        .insert(file.path.clone(), library.library.to_owned());
                    rendered
                        .files
                        .insert(file.path.clone(), file.content.clone());
                }
                Item::StatusPatch(patch) => rendered
                    .status_patches
                    .entry(patch.variant)
                    .or_default()
                    .push((library.library.to_owned(), patch.clone())),
                Item::Snippet(_) => {}
            }
        }
    }

    // Snippets second, so a snippet may target a section of a library that
    // merges after its own.
    for (position, library) in libraries.iter().enumerate() {
        for (key, item) in library.items {
            if let Item::Snippet(snippet) = item {
                let id = (snippet.target_kind, snippet.target_name.clone());
                let Some(entry) = sections.get_mut(&id) else {
                    return Err(MergeError::MissingSection {
                        library: library.library.to_owned(),
                        section: display_section(snippet.target_kind, &snippet.target_name),
                    });
                };
                entry.snippets.push((
                    snippet.slot,
                    snippet.priority,
                    position,
                    key,
                    &snippet.lines,
                    library.library,
                ));
            }
        }
    }

    if !sections.contains_key(&(SectionKind::Global, String::new())) {
        return Err(MergeError::NoGlobal);
    }

    let mut writer = ConfigWriter::default();
    // `global` first and unnamed `defaults` before named ones: HAProxy applies
    // a defaults section to the proxies that follow it.
    let order = |(kind, name): &SectionId| (section_rank(*kind), !name.is_empty(), name.clone());
    let mut entries: Vec<(&SectionId, &mut SectionEntry<'_>)> = sections.iter_mut().collect();
    entries.sort_by_key(|(id, _)| order(id));
    for (id, entry) in entries {
        entry.snippets.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
        writer.line(&display_section(id.0, &id.1), entry.owner);
        writer.block(entry.body, entry.owner);
        for (_, _, _, _, lines, library) in &entry.snippets {
            writer.block(lines, library);
        }
        writer.blank();
    }
    let ConfigWriter {
        text,
        origins,
        ..
    } = writer;
    rendered.config = text;
    rendered.line_origins = origins;
    for patches in rendered.status_patches.values_mut() {
        patches.sort_by(|a, b| {
            (&a.1.kind, &a.1.namespace, &a.1.name, &a.0).cmp(&(&b.1.kind, &b.1.namespace, &b.1.name, &b.0))
        });
    }
    Ok(rendered)
}

/// Where a kind of section goes in the file: HAProxy needs `global` first,
/// `defaults` before the proxies that inherit from it, and resolvers, peers,
/// userlists and caches declared before the proxies that name them reads best.
fn section_rank(kind: SectionKind) -> u8 {
    match kind {
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
    }
}

/// Builds the config text while recording which library wrote each line.
#[derive(Default)]
struct ConfigWriter {
    text: String,
    next_line: usize,
    origins: Vec<(Range<usize>, String)>,
}

impl ConfigWriter {
    fn record(&mut self, lines: usize, library: &str) {
        if lines == 0 {
            return;
        }
        let start = self.next_line + 1;
        let end = start + lines;
        self.next_line += lines;
        match self.origins.last_mut() {
            Some((range, owner)) if owner == library && range.end == start => range.end = end,
            _ => self.origins.push((start..end, library.to_owned())),
        }
    }

    fn line(&mut self, line: &str, library: &str) {
        let _ = writeln!(self.text, "{line}");
        self.record(1, library);
    }

    /// Writes a body, indenting lines the library left unindented.
    fn block(&mut self, lines: &str, library: &str) {
        let mut count = 0;
        for line in lines.lines() {
            let trimmed = line.trim_end();
            if trimmed.is_empty() {
                continue;
            }
            if trimmed.starts_with(char::is_whitespace) {
                self.text.push_str(trimmed);
            } else {
                self.text.push_str("    ");
                self.text.push_str(trimmed);
            }
            self.text.push('\n');
            count += 1;
        }
        self.record(count, library);
    }

    fn blank(&mut self) {
        self.text.push('\n');
        self.next_line += 1;
    }
}

#[cfg(test)]
mod tests;

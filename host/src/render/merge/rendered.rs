//! A merged render, as validated, deployed and shown: the configuration
//! with which library wrote each line, the files, what the libraries plan
//! (status patches, owned objects, warnings), and the secret parts shown
//! redacted.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

use crate::library::types::{OwnedObject, StatusPatch, StatusVariant, Warning};

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
        library_at(&self.line_origins, line)
    }

    /// Which library wrote which lines and which lines are secret, apart
    /// from the render: what a deployed configuration keeps so that
    /// HAProxy's start-up alert about a line can still name its library.
    pub fn origins(&self) -> LineOrigins {
        LineOrigins {
            by_library: self.line_origins.clone(),
            secret: self.secret_lines.clone(),
        }
    }

    /// The configuration holds secret text (a library marked it).
    pub fn holds_secret_text(&self) -> bool {
        !self.secret_lines.is_empty()
    }

    /// Line `line` (1-based) of the configuration is secret text.
    pub fn is_secret_line(&self, line: usize) -> bool {
        in_ranges(&self.secret_lines, line)
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

/// Which library wrote which lines of a configuration (1-based, end
/// exclusive, in order) and which of its lines hold secret text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineOrigins {
    /// Line ranges with the library that wrote them.
    pub by_library: Vec<(Range<usize>, Arc<str>)>,
    /// Line ranges that hold secret text (shown redacted).
    pub secret: Vec<Range<usize>>,
}

impl LineOrigins {
    /// The library that wrote `line` (1-based).
    pub fn library_at_line(&self, line: usize) -> Option<&str> {
        library_at(&self.by_library, line)
    }

    /// Line `line` (1-based) holds secret text.
    pub fn is_secret_line(&self, line: usize) -> bool {
        in_ranges(&self.secret, line)
    }
}

fn library_at(origins: &[(Range<usize>, Arc<str>)], line: usize) -> Option<&str> {
    let index = origins.partition_point(|(range, _)| range.end <= line);
    origins
        .get(index)
        .filter(|(range, _)| range.contains(&line))
        .map(|(_, library)| &**library)
}

fn in_ranges(ranges: &[Range<usize>], line: usize) -> bool {
    let index = ranges.partition_point(|range| range.end <= line);
    ranges.get(index).is_some_and(|range| range.contains(&line))
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

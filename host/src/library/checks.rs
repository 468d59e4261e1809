//! Checks on what a library hands back. Libraries are untrusted: anything
//! that could corrupt another library's part of the configuration, escape the
//! configuration directory or confuse the merge is refused here, as the
//! library's error.

use std::collections::HashSet;

use thiserror::Error;

use super::types::{
    Item, LibraryInfo, ObjectRef, OwnedObject, Plan, RenderOutput, SectionKind, StatusPatch,
    Warning,
};

/// What is wrong with a library's output.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Malformed {
    /// An upserted item has an empty key.
    #[error("an item has an empty key")]
    EmptyKey,
    /// Two upserted items share a key.
    #[error("two items share this key")]
    DuplicateKey,
    /// A key is both upserted and removed in the same output.
    #[error("the item is both added and removed in the same output")]
    UpsertedAndRemoved,
    /// A removal names an empty key.
    #[error("a removal names an empty key")]
    EmptyRemoval,
    /// A section or snippet target has a name HAProxy would reject or misread.
    #[error("{what} name {name:?} {why}")]
    BadName {
        what: &'static str,
        name: String,
        why: &'static str,
    },
    /// Text that would open a new section, smuggling configuration out of the
    /// section it belongs to.
    #[error(
        "line {line} ({text:?}) would open a new `{keyword}` section; a library may only \
         write inside the section it targets"
    )]
    OpensSection {
        line: usize,
        keyword: &'static str,
        text: String,
    },
    /// Text that HAProxy cannot read.
    #[error("line {line} contains a NUL byte")]
    NulByte { line: usize },
    /// An auxiliary file path that is not a plain relative path inside the
    /// configuration directory.
    #[error("file path {path:?} {why}")]
    BadPath { path: String, why: &'static str },
    /// A status patch with a required field left empty.
    #[error("status patch has an empty `{field}`")]
    EmptyStatusField { field: &'static str },
    /// A status patch whose `status` is not a JSON object.
    #[error("status patch for {kind} {name:?}: `status` is not a JSON object: {why}")]
    BadStatus {
        kind: String,
        name: String,
        why: String,
    },
    /// The library's own name cannot key its values.
    #[error("library name {0:?} is not kebab-case (lowercase letters, digits and `-`)")]
    BadLibraryName(String),
    /// The library's default values are not a JSON object.
    #[error("default values are not a JSON object: {0}")]
    BadDefaultValues(String),
    /// A watch in the library's plan is unusable.
    #[error("watch {name:?} {why}")]
    BadWatch { name: String, why: &'static str },
    /// A warning the host could not log or record as an Event.
    #[error("warning: {0}")]
    BadWarning(String),
    /// An owned object the host could not apply.
    #[error("owned object {kind} {name:?}: {why}")]
    BadOwnedObject {
        kind: String,
        name: String,
        why: String,
    },
    /// A plan's `applies` entry is not `apiVersion/kind`.
    #[error(
        "applies {0:?} is not `apiVersion/kind` (e.g. `v1/Service`); Secrets may not be applied"
    )]
    BadApplies(String),
}

/// Checks what `describe` returned.
pub(super) fn check_info(info: &LibraryInfo) -> Result<(), Malformed> {
    let name = &info.name;
    let kebab = !name.is_empty()
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !kebab {
        return Err(Malformed::BadLibraryName(name.clone()));
    }
    if !info.default_values.is_object() {
        return Err(Malformed::BadDefaultValues(format!(
            "got {}",
            json_kind(&info.default_values)
        )));
    }
    Ok(())
}

/// Checks what `configure` returned.
pub(super) fn check_plan(plan: &Plan) -> Result<(), Malformed> {
    let mut names = HashSet::new();
    for watch in &plan.watches {
        let bad = |why| Malformed::BadWatch {
            name: watch.name.clone(),
            why,
        };
        if watch.name.is_empty() {
            return Err(bad("has an empty name"));
        }
        if !names.insert(watch.name.as_str()) {
            return Err(bad("is declared twice"));
        }
        if watch.api_version.is_empty() || watch.kind.is_empty() {
            return Err(bad("needs both an apiVersion and a kind"));
        }
    }
    for kind in &plan.applies {
        match kind.rsplit_once('/') {
            Some((api_version, kind_name))
                if !api_version.is_empty() && !kind_name.is_empty() && kind_name != "Secret" => {}
            _ => return Err(Malformed::BadApplies(kind.clone())),
        }
    }
    Ok(())
}

/// Checks what `render` returned. On failure, returns the key of the item at
/// fault (when there is one) with the problem.
pub(super) fn check_output(output: &RenderOutput) -> Result<(), (Option<String>, Malformed)> {
    let mut keys = HashSet::with_capacity(output.upserts.len());
    for (key, item) in &output.upserts {
        if key.is_empty() {
            return Err((None, Malformed::EmptyKey));
        }
        if !keys.insert(key.as_str()) {
            return Err((Some(key.clone()), Malformed::DuplicateKey));
        }
        check_item(item).map_err(|problem| (Some(key.clone()), problem))?;
    }
    for key in &output.removals {
        if key.is_empty() {
            return Err((None, Malformed::EmptyRemoval));
        }
        if keys.contains(key.as_str()) {
            return Err((Some(key.clone()), Malformed::UpsertedAndRemoved));
        }
    }
    Ok(())
}

fn check_item(item: &Item) -> Result<(), Malformed> {
    match item {
        Item::Section(section) => {
            check_section_name("section", section.kind, &section.name)?;
            check_text(&section.body).map_err(|problem| redact_if(section.secret, problem))
        }
        Item::Snippet(snippet) => {
            check_section_name("snippet target", snippet.target_kind, &snippet.target_name)?;
            check_text(&snippet.lines).map_err(|problem| redact_if(snippet.secret, problem))
        }
        Item::File(file) => check_path(&file.path),
        Item::StatusPatch(patch) => check_status_patch(patch),
        Item::Warning(warning) => check_warning(warning),
        Item::OwnedObject(object) => check_owned_object(object),
    }
}

/// Errors are logged and shown: a line of secret text must not be in one.
fn redact_if(secret: bool, problem: Malformed) -> Malformed {
    match problem {
        Malformed::OpensSection { line, keyword, .. } if secret => Malformed::OpensSection {
            line,
            keyword,
            text: "<redacted>".to_owned(),
        },
        other => other,
    }
}

/// An owned object must be one the API server can take as is: a name it
/// accepts, and a manifest that is a JSON object.
fn check_owned_object(object: &OwnedObject) -> Result<(), Malformed> {
    let bad = |why: String| Malformed::BadOwnedObject {
        kind: object.kind.clone(),
        name: object.name.clone(),
        why,
    };
    if object.api_version.is_empty() || object.kind.is_empty() {
        return Err(bad("needs both an apiVersion and a kind".to_owned()));
    }
    if object.kind == "Secret" {
        return Err(bad(
            "Secrets may not be owned objects: local mode shows owned objects".to_owned(),
        ));
    }
    let dns_name = !object.name.is_empty()
        && object.name.len() <= 253
        && object.name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && object.name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && object
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'));
    if !dns_name {
        return Err(bad(
            "the name must be lowercase letters, digits, `-` and `.` (a DNS subdomain)".to_owned(),
        ));
    }
    if object.owner.name.is_empty() {
        return Err(bad("names no owner".to_owned()));
    }
    match serde_json::from_str::<serde_json::Value>(&object.manifest) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(other) => Err(bad(format!(
            "the manifest is not a JSON object (got {})",
            json_kind(&other)
        ))),
        Err(error) => Err(bad(format!("the manifest is not JSON: {error}"))),
    }
}

/// A warning becomes a log line and an Event: a reason Kubernetes accepts
/// (CamelCase, at most 128 characters) and a message without key material.
fn check_warning(warning: &Warning) -> Result<(), Malformed> {
    let reason = &warning.reason;
    let camel_case = reason.len() <= 128
        && reason.starts_with(|c: char| c.is_ascii_uppercase())
        && reason.chars().all(|c| c.is_ascii_alphanumeric());
    if !camel_case {
        return Err(Malformed::BadWarning(format!(
            "reason `{reason}` must be CamelCase letters and digits, at most 128 characters"
        )));
    }
    if warning.message.trim().is_empty() {
        return Err(Malformed::BadWarning("the message is empty".to_owned()));
    }
    if crate::tls::holds_private_key(&warning.message) {
        return Err(Malformed::BadWarning(
            "the message holds a PEM private key; never put key material in a warning".to_owned(),
        ));
    }
    check_text(&warning.message)
}

/// HAProxy accepts letters, digits, `-`, `_`, `.` and `:` in section names
/// (`invalid_char()` in its parser); anything else is refused or, worse, read
/// as a second argument or a new line.
fn check_section_name(what: &'static str, kind: SectionKind, name: &str) -> Result<(), Malformed> {
    let bad = |why| Malformed::BadName {
        what,
        name: name.to_owned(),
        why,
    };
    match kind {
        SectionKind::Global if !name.is_empty() => {
            return Err(bad("must be empty: `global` takes no name"));
        }
        SectionKind::Global | SectionKind::Defaults if name.is_empty() => return Ok(()),
        _ if name.is_empty() => return Err(bad("is empty")),
        _ => {}
    }
    if name.chars().any(char::is_whitespace) {
        return Err(bad("contains whitespace"));
    }
    let valid = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'));
    if !valid {
        return Err(bad(
            "may only contain letters, digits, `-`, `_`, `.` and `:`",
        ));
    }
    Ok(())
}

fn check_text(text: &str) -> Result<(), Malformed> {
    for (index, line) in text.split('\n').enumerate() {
        let number = index + 1;
        if line.contains('\0') {
            return Err(Malformed::NulByte { line: number });
        }
        // Treat a carriage return as a line break too: safer than guessing
        // how every HAProxy version reads one.
        for piece in line.split('\r') {
            let first_word = piece.split_whitespace().next().unwrap_or_default();
            if let Some((keyword, _)) = crate::haproxy_syntax::section_keyword(first_word) {
                return Err(Malformed::OpensSection {
                    line: number,
                    keyword,
                    text: line.to_owned(),
                });
            }
        }
    }
    Ok(())
}

fn check_path(path: &str) -> Result<(), Malformed> {
    let bad = |why| Malformed::BadPath {
        path: path.to_owned(),
        why,
    };
    if path.is_empty() {
        return Err(bad("is empty"));
    }
    if path.starts_with('/') {
        return Err(bad(
            "is absolute; paths are relative to the configuration directory",
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(bad("contains a control character"));
    }
    for segment in path.split('/') {
        match segment {
            "" => return Err(bad("has an empty segment (`//` or a trailing `/`)")),
            "." => return Err(bad("has a `.` segment; write the plain path")),
            ".." => return Err(bad("leaves the configuration directory (`..`)")),
            _ => {}
        }
    }
    Ok(())
}

fn check_status_patch(patch: &StatusPatch) -> Result<(), Malformed> {
    // Cluster-scoped objects (e.g. a GatewayClass) have an empty namespace,
    // as in `ObjectKey`.
    for (field, value) in [
        ("apiVersion", &patch.object.api_version),
        ("kind", &patch.object.kind),
        ("name", &patch.object.name),
    ] {
        if value.is_empty() {
            return Err(Malformed::EmptyStatusField { field });
        }
    }
    Ok(())
}

/// A status patch's `status` text from a library's output, parsed where it
/// crosses the contract; anything but a JSON object is malformed.
pub(super) fn parse_status(
    object: &ObjectRef,
    status: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, Malformed> {
    let bad = |why: String| Malformed::BadStatus {
        kind: object.kind.clone(),
        name: object.name.clone(),
        why,
    };
    match serde_json::from_str::<serde_json::Value>(status) {
        Ok(serde_json::Value::Object(status)) => Ok(status),
        Ok(value) => Err(bad(format!("got {}", json_kind(&value)))),
        Err(error) => Err(bad(error.to_string())),
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;

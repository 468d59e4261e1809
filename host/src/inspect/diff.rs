//! `haptic diff`: what a change of manifests or values would do to the
//! HAProxy configuration, its files and the status patches, and how the
//! agents would apply it.
//!
//! Both sides are rendered by the offline job (the controller's render
//! core). How it would go in is the agents' own planning code
//! ([`crate::protocol::plan`]) from the old bundle to the new one, with the
//! maps and certificates the old configuration reads taken as loaded (what
//! a worker running it has loaded).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use crate::controller::run::bundle;
use crate::offline;
use crate::protocol::plan::{self, Plan};
use crate::protocol::runtime_commands::RuntimeCommand;
use crate::render::Rendered;

/// The difference between two renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// A unified diff of haproxy.cfg, secret lines redacted (`None`:
    /// unchanged).
    pub config: Option<String>,
    pub files: Vec<FileChange>,
    /// Status patches, by variant and object, that appear, go or change.
    pub status: Vec<StatusChange>,
    /// Objects the libraries ask the host to apply (owned objects) that
    /// appear, go or change.
    pub owned: Vec<OwnedChange>,
    pub apply: Apply,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedChange {
    /// `Service shop/web-gateway`.
    pub object: String,
    /// A unified diff of the manifest server-side apply would send (all `-`
    /// for one the host would delete).
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    Added {
        path: String,
        secret: bool,
    },
    Removed {
        path: String,
    },
    /// `diff` is `None` for a file holding key material: shown as changed only.
    Changed {
        path: String,
        diff: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusChange {
    /// `deployed Pod shop/web-1`.
    pub patch: String,
    /// A unified diff of the patch's YAML (all `+` for a new one).
    pub diff: String,
}

/// How the agents would take the new render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Apply {
    Unchanged,
    /// Runtime commands on the running workers, no reload, no `haproxy -c`.
    Runtime(Vec<String>),
    /// A reload, for this first difference.
    Reload(String),
}

impl Difference {
    /// Whether anything at all differs.
    pub fn is_empty(&self) -> bool {
        self.config.is_none()
            && self.files.is_empty()
            && self.status.is_empty()
            && self.owned.is_empty()
            && self.apply == Apply::Unchanged
    }
}

/// Compares two offline jobs: their renders and the owned objects the
/// controller would apply.
pub fn compare_jobs(old: &offline::JobOutput, new: &offline::JobOutput) -> Difference {
    Difference {
        owned: owned_changes(&old.owned_objects, &new.owned_objects),
        ..compare(&old.rendered, &new.rendered)
    }
}

/// Compares two renders (owned objects aside: see [`compare_jobs`]).
pub fn compare(old: &Rendered, new: &Rendered) -> Difference {
    let (old_bundle, new_bundle) = (bundle(old), bundle(new));
    let apply = match plan::plan(&old_bundle, &new_bundle, &plan::expected_loads(&old_bundle)) {
        Plan::Unchanged => Apply::Unchanged,
        Plan::Runtime(commands) => {
            Apply::Runtime(commands.iter().map(RuntimeCommand::summary).collect())
        }
        Plan::Reload(reason) => Apply::Reload(reason.to_string()),
    };
    Difference {
        config: config_change(old, new),
        files: file_changes(old, new),
        status: status_changes(old, new),
        owned: Vec::new(),
        apply,
    }
}

/// The configuration's diff as it may be shown: secret lines redacted
/// (`user <redacted>`), and a line saying so when secret text changed.
fn config_change(old: &Rendered, new: &Rendered) -> Option<String> {
    if old.config == new.config {
        return None;
    }
    let shown = unified(&old.shown_config(), &new.shown_config(), "haproxy.cfg");
    let secret_changed = secret_text(old) != secret_text(new);
    match (shown, secret_changed) {
        (Some(diff), false) => Some(diff),
        (Some(diff), true) => Some(format!(
            "{diff}haproxy.cfg: secret lines changed (not shown)\n"
        )),
        (None, _) => Some("haproxy.cfg: secret lines changed (not shown)\n".to_owned()),
    }
}

fn secret_text(rendered: &Rendered) -> Vec<&str> {
    rendered
        .config
        .lines()
        .enumerate()
        .filter(|(index, _)| rendered.is_secret_line(index + 1))
        .map(|(_, line)| line)
        .collect()
}

fn file_changes(old: &Rendered, new: &Rendered) -> Vec<FileChange> {
    let mut changes = Vec::new();
    let secret = |path: &str| old.secret_files.contains(path) || new.secret_files.contains(path);
    for (path, content) in &old.files {
        match new.files.get(path) {
            None => changes.push(FileChange::Removed { path: path.clone() }),
            Some(next) if next != content => changes.push(FileChange::Changed {
                path: path.clone(),
                diff: (!secret(path))
                    .then(|| unified(content, next, path))
                    .flatten(),
            }),
            Some(_) => {}
        }
    }
    for path in new.files.keys().filter(|p| !old.files.contains_key(*p)) {
        changes.push(FileChange::Added {
            path: path.clone(),
            secret: secret(path),
        });
    }
    changes.sort_by(|a, b| file_path(a).cmp(file_path(b)));
    changes
}

fn file_path(change: &FileChange) -> &str {
    match change {
        FileChange::Added { path, .. }
        | FileChange::Removed { path }
        | FileChange::Changed { path, .. } => path,
    }
}

/// Each render's patches as YAML documents by `variant kind ns/name`.
fn patch_documents(rendered: &Rendered) -> BTreeMap<String, String> {
    rendered
        .status_patches
        .iter()
        .flat_map(|(variant, patches)| {
            patches.iter().map(move |(library, patch)| {
                (
                    format!(
                        "{} {} {}/{}",
                        variant.as_str(),
                        patch.object.kind,
                        patch.object.namespace,
                        patch.object.name
                    ),
                    offline::status_patches_yaml(&[(library.clone(), patch.clone())]),
                )
            })
        })
        .collect()
}

fn status_changes(old: &Rendered, new: &Rendered) -> Vec<StatusChange> {
    document_changes(&patch_documents(old), &patch_documents(new))
        .into_iter()
        .map(|(patch, diff)| StatusChange { patch, diff })
        .collect()
}

/// The documents (by name) that appear, go or change, each with its
/// unified diff, in name order.
fn document_changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let before = old.get(key).map_or("", String::as_str);
            let after = new.get(key).map_or("", String::as_str);
            unified(before, after, key).map(|diff| (key.clone(), diff))
        })
        .collect()
}

fn owned_changes(
    old: &[crate::owned::DesiredObject],
    new: &[crate::owned::DesiredObject],
) -> Vec<OwnedChange> {
    let documents = |objects: &[crate::owned::DesiredObject]| -> BTreeMap<String, String> {
        objects
            .iter()
            .map(|object| {
                (
                    object.to_string(),
                    serde_yaml_ng::to_string(&object.manifest).unwrap_or_default(),
                )
            })
            .collect()
    };
    document_changes(&documents(old), &documents(new))
        .into_iter()
        .map(|(object, diff)| OwnedChange { object, diff })
        .collect()
}

/// A unified diff with three lines of context, `None` when equal.
fn unified(old: &str, new: &str, name: &str) -> Option<String> {
    if old == new {
        return None;
    }
    Some(
        similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(3)
            .header(&format!("a/{name}"), &format!("b/{name}"))
            .to_string(),
    )
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "no difference: the same configuration, files and status");
        }
        if let Some(diff) = &self.config {
            f.write_str(diff)?;
        }
        for change in &self.files {
            match change {
                FileChange::Added { path, secret } => {
                    let note = if *secret {
                        " (key material, not shown)"
                    } else {
                        ""
                    };
                    writeln!(f, "file {path}: added{note}")?;
                }
                FileChange::Removed { path } => writeln!(f, "file {path}: removed")?,
                FileChange::Changed { path, diff: None } => {
                    writeln!(f, "file {path}: changed (key material, not shown)")?;
                }
                FileChange::Changed {
                    diff: Some(diff), ..
                } => f.write_str(diff)?,
            }
        }
        for change in &self.status {
            writeln!(f, "status patch {}:", change.patch)?;
            f.write_str(&change.diff)?;
        }
        for change in &self.owned {
            writeln!(
                f,
                "owned object {} (server-side applied as {}):",
                change.object,
                crate::owned::FIELD_MANAGER
            )?;
            f.write_str(&change.diff)?;
        }
        let mut summary = String::new();
        match &self.apply {
            Apply::Unchanged => summary
                .push_str("apply: unchanged (the agents' bundle is the same; only status or owned objects differ)"),
            Apply::Runtime(commands) if commands.is_empty() => summary
                .push_str("apply: runtime (files change on disk only; no command, no reload)"),
            Apply::Runtime(commands) => {
                let _ = write!(
                    summary,
                    "apply: runtime ({} command{} on the running workers, no reload)",
                    commands.len(),
                    if commands.len() == 1 { "" } else { "s" }
                );
                for command in commands {
                    let _ = write!(summary, "\n  {command}");
                }
            }
            Apply::Reload(reason) => {
                let _ = write!(summary, "apply: reload ({reason})");
            }
        }
        writeln!(f, "{summary}")
    }
}

#[cfg(test)]
mod tests;

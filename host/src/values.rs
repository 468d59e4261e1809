//! Helm-style values: the file a user passes with `--values` (the chart's
//! own `values.yaml` works as is) plus `--set a.b=c` overrides, reduced to
//! the one tree every template library's `configure` receives.
//!
//! Library settings live under `templateLibraries.<camelCaseName>`, or
//! `controller.templateLibraries.<camelCaseName>` in the chart's layout;
//! both are accepted and merged (top level wins). Everything else in the file
//! belongs to the chart and is ignored here. A key under `templateLibraries`
//! that names no library is an error, so a typo cannot silently leave a
//! feature at its default.

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The two places library settings may live, merged in this order.
const LIBRARY_ROOTS: [&[&str]; 2] = [&["controller", "templateLibraries"], &["templateLibraries"]];

/// A values tree, validated on every change.
#[derive(Debug, Clone, PartialEq)]
pub struct Values {
    root: Value,
}

impl Default for Values {
    fn default() -> Self {
        Self {
            root: Value::Object(Map::new()),
        }
    }
}

/// Why values could not be read or applied.
#[derive(Debug, thiserror::Error)]
pub enum ValuesError {
    /// The values file could not be read.
    #[error("cannot read values file {}: {source}; check the path passed with --values", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The values file is not valid YAML.
    #[error("values file {} is not valid YAML: {source}; fix the syntax at that line and column", path.display())]
    Yaml {
        path: PathBuf,
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A part of the tree has the wrong type (a list where a mapping belongs,
    /// a string for `enabled`).
    #[error("{origin}: `{path}` must be {expected}, found {found}")]
    WrongType {
        /// The file, or the `--set` assignment, that made the tree wrong.
        origin: String,
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    /// A key under `templateLibraries` names no loaded library.
    #[error(
        "templateLibraries.{key} names no template library (known: {}){hint}; \
         fix the key or load the library",
        known.join(", ")
    )]
    UnknownLibrary {
        key: String,
        known: Vec<String>,
        /// A suggestion such as "; did you mean `kubernetesBackends`?".
        hint: String,
    },
    /// A `--set` argument is malformed.
    #[error("invalid --set `{assignment}`: {reason}; write it as path.to.key=value")]
    BadAssignment { assignment: String, reason: String },
}

impl Values {
    /// Reads a YAML values file; an empty file is an empty tree.
    pub fn load(path: &Path) -> Result<Self, ValuesError> {
        let text = std::fs::read_to_string(path).map_err(|source| ValuesError::Read {
            path: path.to_owned(),
            source,
        })?;
        let root: Value = serde_yaml_ng::from_str(&text).map_err(|source| ValuesError::Yaml {
            path: path.to_owned(),
            source,
        })?;
        Self::from_value(root, &path.display().to_string())
    }

    /// Builds values from an already parsed tree; `origin` names it in errors.
    pub fn from_value(root: Value, origin: &str) -> Result<Self, ValuesError> {
        let root = if root.is_null() {
            Value::Object(Map::new())
        } else {
            root
        };
        let values = Self { root };
        values.check(origin)?;
        Ok(values)
    }

    /// The whole tree as given (chart settings included).
    pub fn as_value(&self) -> &Value {
        &self.root
    }

    /// Applies a `--set path.to.key=value` argument.
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), ValuesError> {
        let (path, value) =
            assignment
                .split_once('=')
                .ok_or_else(|| ValuesError::BadAssignment {
                    assignment: assignment.to_owned(),
                    reason: "there is no '='".to_owned(),
                })?;
        self.set(path, value)
    }

    /// Sets the value at a dotted path (`\.` escapes a dot inside a key),
    /// creating mappings on the way and replacing whatever was there. The
    /// value is read as a YAML scalar: `true` is a boolean, `3` a number,
    /// `"3"` a string; a value starting with `[` or `{` may be a flow list
    /// or mapping; `null` removes a library default. Anything else is a string.
    pub fn set(&mut self, path: &str, value: &str) -> Result<(), ValuesError> {
        let origin = format!("--set {path}={value}");
        let keys = split_path(path);
        if keys.iter().any(String::is_empty) {
            return Err(ValuesError::BadAssignment {
                assignment: format!("{path}={value}"),
                reason: "the path has an empty key".to_owned(),
            });
        }
        let mut updated = self.root.clone();
        let mut node = &mut updated;
        for key in &keys {
            if !node.is_object() {
                *node = Value::Object(Map::new());
            }
            let Value::Object(map) = node else { break };
            node = map.entry(key.clone()).or_insert(Value::Null);
        }
        *node = parse_scalar(value);
        let candidate = Self { root: updated };
        candidate.check(&origin)?;
        *self = candidate;
        Ok(())
    }

    /// `templateLibraries.<camelCase name>.enabled`, true unless set false.
    pub fn is_enabled(&self, library_name: &str) -> bool {
        self.is_enabled_over(library_name, &Value::Null)
    }

    /// [`Self::is_enabled`] for a library whose default values may say
    /// `enabled: false` (an opt-in library such as `gateway-api`): the
    /// user's setting wins, then the library's default, then true.
    pub fn is_enabled_over(&self, library_name: &str, defaults: &Value) -> bool {
        self.template_libraries()
            .get(&camel_case(library_name))
            .and_then(|library| library.get("enabled"))
            .and_then(Value::as_bool)
            .or_else(|| defaults.get("enabled").and_then(Value::as_bool))
            .unwrap_or(true)
    }

    /// The user's `templateLibraries` settings, both layouts merged.
    pub fn template_libraries(&self) -> Map<String, Value> {
        let mut merged = Value::Object(Map::new());
        for root in LIBRARY_ROOTS {
            if let Some(subtree) = lookup(&self.root, root).filter(|s| !s.is_null()) {
                merge_layer(&mut merged, subtree, true);
            }
        }
        match merged {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// The tree every library's `configure` receives: for each enabled
    /// library of `libraries` (name, default values), its camelCase key maps
    /// to its defaults with the user's settings merged over them (mappings
    /// merge key by key; scalars and lists replace; `null` removes).
    ///
    /// Pass every loaded library, disabled ones too: a key naming none of
    /// them is refused as a typo.
    pub fn library_tree(&self, libraries: &[(String, Value)]) -> Result<Value, ValuesError> {
        let user = self.template_libraries();
        let known: Vec<String> = libraries.iter().map(|(name, _)| camel_case(name)).collect();
        if let Some(key) = user.keys().find(|key| !known.contains(key)) {
            return Err(ValuesError::UnknownLibrary {
                hint: suggestion(key, &known),
                key: key.clone(),
                known,
            });
        }
        let mut tree = Map::new();
        for (name, defaults) in libraries {
            if !self.is_enabled_over(name, defaults) {
                continue;
            }
            let key = camel_case(name);
            let mut merged = defaults.clone();
            if let Some(settings) = user.get(&key).filter(|s| !s.is_null()) {
                merge(&mut merged, settings);
            }
            tree.insert(key, merged);
        }
        Ok(Value::Object(tree))
    }

    /// Checks the shapes the rest of the module relies on, so accessors
    /// need not fail.
    fn check(&self, origin: &str) -> Result<(), ValuesError> {
        let wrong = |path: String, expected, found: &Value| ValuesError::WrongType {
            origin: origin.to_owned(),
            path,
            expected,
            found: type_name(found),
        };
        if !self.root.is_object() {
            return Err(wrong(
                "(the whole file)".to_owned(),
                "a mapping",
                &self.root,
            ));
        }
        for root in LIBRARY_ROOTS {
            let root_path = root.join(".");
            if let Some(parent) = lookup(&self.root, &root[..root.len() - 1])
                && !parent.is_object()
                && !parent.is_null()
            {
                return Err(wrong(root[..root.len() - 1].join("."), "a mapping", parent));
            }
            let libraries = match lookup(&self.root, root) {
                None | Some(Value::Null) => continue,
                Some(Value::Object(libraries)) => libraries,
                Some(other) => return Err(wrong(root_path, "a mapping of library names", other)),
            };
            for (key, library) in libraries {
                let path = format!("{root_path}.{key}");
                match library {
                    Value::Null => {}
                    Value::Object(settings) => match settings.get("enabled") {
                        None | Some(Value::Bool(_)) => {}
                        Some(other) => {
                            return Err(wrong(format!("{path}.enabled"), "true or false", other));
                        }
                    },
                    other => return Err(wrong(path, "a mapping of the library's settings", other)),
                }
            }
        }
        Ok(())
    }
}

/// `kubernetes-backends` -> `kubernetesBackends`: the key a library's values
/// live under, as Helm values are conventionally camelCase.
pub fn camel_case(library_name: &str) -> String {
    let mut out = String::with_capacity(library_name.len());
    for (index, part) in library_name
        .split(['-', '_'])
        .filter(|p| !p.is_empty())
        .enumerate()
    {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            if index == 0 {
                out.push(first);
            } else {
                out.extend(first.to_uppercase());
            }
            out.push_str(chars.as_str());
        }
    }
    out
}

/// Deep merge of `overlay` into `base`: mappings merge key by key, a `null`
/// in the overlay removes the key (as in Helm), anything else replaces.
pub fn merge(base: &mut Value, overlay: &Value) {
    merge_layer(base, overlay, false);
}

/// The merge itself; `keep_nulls` is for stacking user layers, whose nulls
/// must survive until they meet the defaults they remove.
fn merge_layer(base: &mut Value, overlay: &Value, keep_nulls: bool) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                if value.is_null() && !keep_nulls {
                    base.remove(key);
                } else if let Some(existing) = base.get_mut(key).filter(|e| !e.is_null()) {
                    merge_layer(existing, value, keep_nulls);
                } else {
                    let mut fresh = Value::Null;
                    merge_layer(&mut fresh, value, keep_nulls);
                    base.insert(key.clone(), fresh);
                }
            }
        }
        (base, overlay) => {
            if overlay.is_object() {
                *base = Value::Object(Map::new());
                merge_layer(base, overlay, keep_nulls);
            } else {
                *base = overlay.clone();
            }
        }
    }
}

fn lookup<'a>(root: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(root, |node, key| node.get(key))
}

fn split_path(path: &str) -> Vec<String> {
    let mut keys = vec![String::new()];
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let (Some(next), Some(last)) = (chars.next(), keys.last_mut()) {
                    last.push(next);
                }
            }
            '.' => keys.push(String::new()),
            c => {
                if let Some(last) = keys.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    keys
}

fn parse_scalar(raw: &str) -> Value {
    if raw.is_empty() {
        return Value::String(String::new());
    }
    match serde_yaml_ng::from_str::<Value>(raw) {
        Ok(value @ (Value::Array(_) | Value::Object(_))) if raw.starts_with(['[', '{']) => value,
        Ok(Value::Array(_) | Value::Object(_)) | Err(_) => Value::String(raw.to_owned()),
        Ok(value) => value,
    }
}

/// "; did you mean `x`?" for a near miss (case, dashes, two typos), else "".
fn suggestion(key: &str, known: &[String]) -> String {
    let normal = |s: &str| s.replace(['-', '_'], "").to_lowercase();
    known
        .iter()
        .find(|candidate| normal(candidate) == normal(key))
        .or_else(|| {
            known
                .iter()
                .find(|candidate| edit_distance(candidate, key) <= 2)
        })
        .map(|candidate| format!("; did you mean `{candidate}`?"))
        .unwrap_or_default()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

//! The directive policy: what a rendered haproxy.cfg may contain before
//! `haproxy -c` ever reads it.
//!
//! `haproxy -c` is not a passive check: HAProxy runs the body of a
//! `lua-load` file while parsing, reads any file a `crt` or `map()` names,
//! and expands environment variables. So every configuration is judged
//! here first, line by line as HAProxy reads it ([`words`]), and refused
//! when a line runs code or touches the process ([`rules`]: `lua-load`,
//! `program` sections, `setenv`, `ssl-engine`, ...), expands an environment
//! variable, or names a file that is not one of the render's own files.
//! Each refusal names the line, what it does and the library that wrote it.
//!
//! Cluster admins may lift a refusal for one library by name in the values
//! (off by default):
//!
//! ```yaml
//! directivePolicy:          # or controller.directivePolicy (the chart's layout)
//!   allow:
//!     - library: my-lua-library
//!       directives: [lua-load]             # as the refusal names them
//!       files: [/etc/ssl/certs/ca-certificates.crt]   # absolute paths it may read
//! ```
//!
//! Files stay checked for an allowed directive: an allowed `lua-load` must
//! still load a file of the render. Environment variables may appear in a
//! `bind` address (`"${POD_IP}:8080"`); `environment-variables` in
//! `directives` allows the library's lines to expand them anywhere.

mod rules;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path};

use serde_json::Value;
use thiserror::Error;

use crate::haproxy_syntax::{Section, section_of, words};
use crate::render::Rendered;
use crate::validate::BUNDLE_ENV;
use crate::values::Values;
use rules::Finding;

/// Where the allow-list lives in the values, in the order they merge.
const VALUES_ROOTS: [&[&str]; 2] = [&["controller", "directivePolicy"], &["directivePolicy"]];

/// The allow-list name of environment variable expansion.
pub const ENVIRONMENT: &str = "environment-variables";

/// How many refused lines one error lists.
const LISTED: usize = 20;

/// Why a configuration was refused, or the allow-list could not be read.
#[derive(Debug, Error)]
pub enum PolicyError {
    /// The allow-list in the values is malformed.
    #[error(
        "values: `{path}` {problem}; write it as directivePolicy.allow: \
         [{{library: <name>, directives: [<directive>, ...], files: [<absolute path>, ...]}}]"
    )]
    BadValues { path: String, problem: String },
    /// The configuration has lines the policy refuses.
    #[error("{}", describe(violations))]
    Refused { violations: Vec<Violation> },
}

impl PolicyError {
    /// The libraries that wrote refused lines.
    pub fn libraries(&self) -> Vec<String> {
        let Self::Refused { violations } = self else {
            return Vec::new();
        };
        let mut libraries: Vec<String> = violations.iter().map(|v| v.library.clone()).collect();
        libraries.dedup();
        libraries.sort();
        libraries.dedup();
        libraries
    }
}

/// One refused line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The line of haproxy.cfg (1-based).
    pub line: usize,
    /// The line as shown (environment values never are).
    pub text: String,
    /// The library that wrote the line.
    pub library: String,
    /// What is wrong with it.
    pub problem: Problem,
}

/// What a refused line does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// It runs code or touches the process.
    Forbidden {
        directive: String,
        why: &'static str,
    },
    /// It expands an environment variable.
    Environment { variable: String },
    /// It names a file of the bundle below a subdirectory through
    /// `${HAPTIC_BUNDLE}` (an SPOE filter's file): HAProxy would go on
    /// reading the configuration from that subdirectory.
    BundleSubdirectory { path: String },
    /// It reads an environment variable at run time (`env()`).
    EnvironmentFetch { variable: String },
    /// It names a file outside the render.
    File {
        directive: String,
        path: String,
        why: &'static str,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            line,
            text,
            library,
            problem,
        } = self;
        write!(
            f,
            "line {line} (`{text}`), written by library `{library}`: "
        )?;
        match problem {
            Problem::Forbidden { directive, why } => write!(
                f,
                "`{directive}` {why}; libraries may not emit it unless the values allow it for \
                 this library: directivePolicy.allow: [{{library: {library}, directives: [\"{directive}\"]}}]"
            ),
            Problem::Environment { variable } => write!(
                f,
                "expands the environment variable `{variable}`, which differs between the \
                 validator and the HAProxy pods and may hold credentials; write the value itself, \
                 or allow it: directivePolicy.allow: [{{library: {library}, directives: [{ENVIRONMENT}]}}]"
            ),
            Problem::BundleSubdirectory { path } => write!(
                f,
                "names `{path}`, a file in a subdirectory of the bundle: HAProxy parses an SPOE \
                 filter's file from its own directory and resolves every relative path after it \
                 from there, so the rest of the configuration would not load; write the file at \
                 the bundle's root (`${{{BUNDLE_ENV}}}/<name>`)"
            ),
            Problem::EnvironmentFetch { variable } => write!(
                f,
                "reads the environment variable `{variable}` of the HAProxy pods at run time \
                 (`env()`), which may hold credentials and would reach whatever the line \
                 does with it (a header, a log); write the value itself, or allow it: \
                 directivePolicy.allow: [{{library: {library}, directives: [{ENVIRONMENT}]}}]"
            ),
            Problem::File {
                directive,
                path,
                why,
            } => write!(
                f,
                "`{directive}` names `{path}`, which {why}; a library must reference the files \
                 it writes itself (relative paths), or the values must allow an absolute path: \
                 directivePolicy.allow: [{{library: {library}, files: [\"{path}\"]}}]"
            ),
        }
    }
}

fn describe(violations: &[Violation]) -> String {
    let mut text = format!(
        "the directive policy refused the rendered configuration ({} line{}):",
        violations.len(),
        if violations.len() == 1 { "" } else { "s" }
    );
    for violation in violations.iter().take(LISTED) {
        text.push_str("\n  ");
        text.push_str(&violation.to_string());
    }
    if violations.len() > LISTED {
        text.push_str(&format!("\n  ... and {} more", violations.len() - LISTED));
    }
    text
}

/// What the values allow one library.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Allowance {
    directives: BTreeSet<String>,
    files: BTreeSet<String>,
}

/// The allow-list: by library name, what it may emit beyond the default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    allowed: BTreeMap<String, Allowance>,
}

impl Policy {
    /// The policy the values set (`directivePolicy.allow`, or under
    /// `controller.`); with neither, nothing is allowed beyond the default.
    pub fn from_values(values: &Values) -> Result<Self, PolicyError> {
        let mut policy = Self::default();
        for root in VALUES_ROOTS {
            let mut node = Some(values.as_value());
            for key in root {
                node = node.and_then(|n| n.get(key));
            }
            let Some(node) = node.filter(|n| !n.is_null()) else {
                continue;
            };
            policy.read(&root.join("."), node)?;
        }
        Ok(policy)
    }

    fn read(&mut self, path: &str, node: &Value) -> Result<(), PolicyError> {
        let bad = |path: String, problem: &str| PolicyError::BadValues {
            path,
            problem: problem.to_owned(),
        };
        let Value::Object(map) = node else {
            return Err(bad(path.to_owned(), "must be a mapping"));
        };
        if let Some(key) = map.keys().find(|k| *k != "allow") {
            return Err(bad(
                format!("{path}.{key}"),
                "is not a known key (only `allow`)",
            ));
        }
        let entries = match map.get("allow") {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::Array(entries)) => entries,
            Some(_) => return Err(bad(format!("{path}.allow"), "must be a list")),
        };
        for (index, entry) in entries.iter().enumerate() {
            let at = format!("{path}.allow[{index}]");
            let Value::Object(entry) = entry else {
                return Err(bad(at, "must be a mapping"));
            };
            if let Some(key) = entry
                .keys()
                .find(|k| !["library", "directives", "files"].contains(&k.as_str()))
            {
                return Err(bad(format!("{at}.{key}"), "is not a known key"));
            }
            let Some(Value::String(library)) = entry.get("library") else {
                return Err(bad(format!("{at}.library"), "must name a library"));
            };
            let strings = |key: &str| -> Result<Vec<String>, PolicyError> {
                match entry.get(key) {
                    None | Some(Value::Null) => Ok(Vec::new()),
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|item| match item {
                            Value::String(s) if !s.is_empty() => Ok(s.clone()),
                            _ => Err(bad(format!("{at}.{key}"), "must be a list of names")),
                        })
                        .collect(),
                    Some(_) => Err(bad(format!("{at}.{key}"), "must be a list")),
                }
            };
            let directives = strings("directives")?;
            let files = strings("files")?;
            if let Some(file) = files.iter().find(|f| !f.starts_with('/')) {
                return Err(bad(
                    format!("{at}.files"),
                    &format!(
                        "lists `{file}`, which is not an absolute path (the render's own files need no allowance)"
                    ),
                ));
            }
            let allowance = self.allowed.entry(library.clone()).or_default();
            allowance.directives.extend(directives);
            allowance.files.extend(files);
        }
        Ok(())
    }

    /// Judges every line of `rendered.config`; refuses with every violation.
    pub fn check(&self, rendered: &Rendered) -> Result<(), PolicyError> {
        let mut violations = Vec::new();
        let mut section = Section::None;
        for (index, line) in rendered.config.split('\n').enumerate() {
            let number = index + 1;
            let words = words::split(line);
            if words.words.is_empty() {
                continue;
            }
            let library = rendered.library_at_line(number).unwrap_or("(unknown)");
            let allowance = self.allowed.get(library);
            let allows =
                |directive: &str| allowance.is_some_and(|a| a.directives.contains(directive));
            let mut refuse = |problem| {
                violations.push(Violation {
                    line: number,
                    text: shown(line, &words),
                    library: library.to_owned(),
                    problem,
                })
            };
            // A `bind` address is where the environment belongs: per-pod
            // addresses and ports (`"${POD_IP}:8080"`, `haptic run`'s ports).
            let bind_address = usize::from(words.get(0) == "bind") * 2;
            // The bundle's own directory as a path's first part is no
            // environment: the file is judged as the render's (rules.rs).
            let expanded = words
                .expands
                .iter()
                .enumerate()
                .filter(|(index, _)| *index >= bind_address)
                .filter(|(index, names)| {
                    !(names.iter().all(|n| n == BUNDLE_ENV)
                        && rules::bundle_relative(words.get(*index)).is_some())
                })
                .flat_map(|(_, names)| names)
                .next();
            if let Some(path) = words
                .expands
                .iter()
                .enumerate()
                .filter(|(_, names)| names.iter().any(|n| n == BUNDLE_ENV))
                .filter_map(|(index, _)| rules::bundle_relative(words.get(index)))
                .find(|path| path.contains('/'))
            {
                refuse(Problem::BundleSubdirectory {
                    path: path.to_owned(),
                });
            }
            if !allows(ENVIRONMENT)
                && let Some(variable) = expanded
            {
                refuse(Problem::Environment {
                    variable: variable.clone(),
                });
            }
            if let Some(opened) = section_of(words.get(0)) {
                section = opened;
                if opened == Section::Program && !allows("program") {
                    refuse(Problem::Forbidden {
                        directive: "program".to_owned(),
                        why: "starts and supervises a program beside HAProxy",
                    });
                }
                continue;
            }
            for finding in rules::findings(section, &words) {
                match finding {
                    Finding::Forbidden { directive, why } if !allows(&directive) => {
                        refuse(Problem::Forbidden { directive, why })
                    }
                    Finding::Forbidden { .. } => {}
                    Finding::EnvironmentFetch { variable } if !allows(ENVIRONMENT) => {
                        refuse(Problem::EnvironmentFetch { variable })
                    }
                    Finding::EnvironmentFetch { .. } => {}
                    Finding::File { directive, path } => {
                        let files = allowance.map(|a| &a.files);
                        if let Err(why) = inside_render(&path, rendered, files) {
                            refuse(Problem::File {
                                directive,
                                path,
                                why,
                            });
                        } else if directive == "crt-list" {
                            for listed in crt_list_files(rendered.files.get(&path)) {
                                if let Err(why) = inside_render(&listed, rendered, files) {
                                    refuse(Problem::File {
                                        directive: format!("crt-list {path}"),
                                        path: listed,
                                        why,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(PolicyError::Refused { violations })
        }
    }
}

/// Whether `path` is a file (or a directory of files) of the render, or an
/// absolute path the library's allowance lists.
fn inside_render(
    path: &str,
    rendered: &Rendered,
    allowed: Option<&BTreeSet<String>>,
) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    if path.starts_with('/') {
        return if allowed.is_some_and(|files| files.contains(path)) {
            Ok(())
        } else {
            Err("is an absolute path outside the configuration directory")
        };
    }
    // HAProxy's own pseudo-file: the system's trust store.
    if path == "@system-ca" {
        return Ok(());
    }
    let mut normal = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => normal.push(part.to_string_lossy()),
            Component::CurDir => {}
            _ => return Err("leaves the configuration directory"),
        }
    }
    let normal = normal.join("/");
    let directory = format!("{normal}/");
    if rendered.files.contains_key(&normal)
        || rendered
            .files
            .keys()
            .any(|file| file.starts_with(&directory))
    {
        Ok(())
    } else {
        Err("is not a file of the render")
    }
}

/// The certificate and CA files a crt-list names: the first word of each
/// line and the files its `[...]` options name.
fn crt_list_files(content: Option<&String>) -> Vec<String> {
    let mut files = Vec::new();
    for line in content.map(String::as_str).unwrap_or_default().lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = words.first().filter(|w| !w.starts_with('#')) else {
            continue;
        };
        files.push((*first).to_owned());
        for pair in words.windows(2) {
            let option = pair[0].trim_start_matches('[');
            if ["ca-file", "crl-file", "ca-verify-file"].contains(&option) {
                files.push(pair[1].trim_end_matches(']').to_owned());
            }
        }
    }
    files
}

/// A refused line as an error shows it: trimmed and bounded, and without
/// the values of environment directives.
fn shown(line: &str, words: &words::Words) -> String {
    let directive = words.get(0);
    if directive.ends_with("setenv") {
        return format!("{directive} {} ...", words.get(1));
    }
    let line = line.trim().escape_debug().to_string();
    match line.char_indices().nth(160) {
        Some((cut, _)) => format!("{} ...", &line[..cut]),
        None => line,
    }
}

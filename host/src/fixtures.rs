//! Fixture tests for template libraries (`haptic test`): a library author
//! checks what a library renders for given manifests and values, without a
//! cluster.
//!
//! A case is a directory:
//! - `manifests.yaml`: the input objects (multi-document YAML);
//! - `values.yaml` (optional): the Helm-style values tree;
//! - `expect.yaml`: what must hold (see [`Expectations`] and [`FORMAT`]).
//!
//! The library under test renders together with the enabled bundled
//! libraries, so the merged configuration is complete and every successful
//! case is also checked with the real `haproxy -c`.
//!
//! Every case renders before any is checked, because a negative assertion
//! (`absent`, `absentFiles`) must be witnessed by another case of the
//! directory that renders what it forbids: one that matches nothing
//! anywhere would pass whatever the library does.

mod expect;
mod traffic;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use thiserror::Error;

pub use self::expect::{Expectations, ExpectedOwned, ExpectedPatch, FORMAT, Pattern};
pub use self::traffic::{Http3Answer, TrafficCheck, check_traffic_on_loopback, http3_get};
use crate::library::LibraryRuntime;
use crate::library::types::StatusVariant;
use crate::offline::{self, Job, JobOutput};
use crate::render::Rendered;
use crate::values::Values;

/// Why fixtures could not be run at all (a failing case is a result, not this).
#[derive(Debug, Error)]
pub enum FixtureError {
    /// The fixtures directory is missing or unreadable.
    #[error(
        "cannot read fixtures in {path}: {source}; pass the directory that holds one folder per case"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The library under test could not be loaded.
    #[error(transparent)]
    Load(#[from] offline::JobError),
    /// No bundled library has that name.
    #[error(
        "no bundled template library is named `{0}`; bundled ones: {1}. To test your own, pass the path of its .wasm"
    )]
    UnknownLibrary(String, String),
}

/// Which library a run tests.
#[derive(Debug, Clone)]
pub enum LibraryUnderTest {
    /// A bundled library, by name.
    Bundled(String),
    /// A component file, rendered together with the bundled libraries.
    Custom(PathBuf),
}

/// The outcome of one case.
#[derive(Debug)]
pub struct CaseReport {
    pub name: String,
    pub description: String,
    /// Empty when the case passed.
    pub failures: Vec<String>,
}

impl CaseReport {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Case directories under `fixtures`, sorted.
pub fn discover(fixtures: &Path) -> Result<Vec<PathBuf>, FixtureError> {
    let read = |source| FixtureError::Read {
        path: fixtures.to_owned(),
        source,
    };
    let mut cases = Vec::new();
    for entry in std::fs::read_dir(fixtures).map_err(read)? {
        let path = entry.map_err(read)?.path();
        if path.join("expect.yaml").is_file() {
            cases.push(path);
        }
    }
    cases.sort();
    Ok(cases)
}

/// Runs every case under `fixtures` against `library`.
pub fn run_cases(
    runtime: &LibraryRuntime,
    library: &LibraryUnderTest,
    fixtures: &Path,
) -> Result<Vec<CaseReport>, FixtureError> {
    let name = match library {
        LibraryUnderTest::Bundled(name) => {
            let bundled = runtime.load_bundled().map_err(offline::JobError::from)?;
            if !bundled.iter().any(|l| &l.info().name == name) {
                let names: Vec<String> = bundled.iter().map(|l| l.info().name.clone()).collect();
                return Err(FixtureError::UnknownLibrary(name.clone(), names.join(", ")));
            }
            name.clone()
        }
        LibraryUnderTest::Custom(path) => runtime
            .load_file(path)
            .map_err(offline::JobError::from)?
            .info()
            .name
            .clone(),
    };
    let cases: Vec<CaseRun> = discover(fixtures)?
        .iter()
        .map(|dir| CaseRun::render(runtime, library, dir))
        .collect();
    Ok(cases
        .iter()
        .enumerate()
        .map(|(index, case)| {
            let others: Vec<&Rendered> = cases
                .iter()
                .enumerate()
                .filter(|(other, _)| *other != index)
                .filter_map(|(_, other)| other.rendered())
                .collect();
            case.report(&name, &others)
        })
        .collect())
}

/// One case, rendered but not yet checked.
struct CaseRun {
    name: String,
    dir: PathBuf,
    expect: Result<Expectations, ExpectationsError>,
    outcome: Result<JobOutput, offline::JobError>,
}

impl CaseRun {
    fn render(runtime: &LibraryRuntime, library: &LibraryUnderTest, dir: &Path) -> Self {
        Self {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            dir: dir.to_owned(),
            expect: read_expectations(&dir.join("expect.yaml")),
            outcome: render_case(runtime, library, dir),
        }
    }

    fn rendered(&self) -> Option<&Rendered> {
        self.outcome.as_ref().ok().map(|output| &output.rendered)
    }

    /// Checks the case; `others` are the renders of the directory's other
    /// cases, the witnesses of its negative assertions.
    fn report(&self, library: &str, others: &[&Rendered]) -> CaseReport {
        let mut report = CaseReport {
            name: self.name.clone(),
            description: String::new(),
            failures: Vec::new(),
        };
        let expect = match &self.expect {
            Ok(expect) => expect,
            Err(failure) => {
                report.failures.push(failure.to_string());
                return report;
            }
        };
        report.description.clone_from(&expect.description);
        let failures = &mut report.failures;
        match (&self.outcome, &expect.error) {
            (Err(error), Some(expected)) => {
                let message = error_chain(error);
                if !message.contains(expected.as_str()) {
                    failures.push(format!(
                        "expected an error containing {expected:?}, got: {message}"
                    ));
                }
            }
            (Err(error), None) => failures.push(format!("render failed: {}", error_chain(error))),
            (Ok(_), Some(expected)) => failures.push(format!(
                "expected an error containing {expected:?}, but the render succeeded"
            )),
            (Ok(output), None) => {
                check(
                    &output.rendered,
                    &output.withheld,
                    expect,
                    library,
                    others,
                    failures,
                );
                if let Some(expected) = &expect.owned_objects {
                    check_owned(&output.owned_objects, expected, library, failures);
                }
                failures.extend(traffic::run(
                    &[self.dir.join("manifests.yaml")],
                    output,
                    &expect.traffic,
                    expect.echo_certificate.as_deref(),
                ));
            }
        }
        let unchecked = expect.render_keys();
        if expect.error.is_some() && !unchecked.is_empty() {
            failures.push(format!(
                "`error` expects the render to fail, so there is nothing to check {} against; \
                 move {} to a case that renders",
                unchecked.join(", "),
                if unchecked.len() == 1 { "it" } else { "them" }
            ));
        }
        report
    }
}

/// Why a case's `expect.yaml` cannot be used: a failure of that case.
#[derive(Debug, Error)]
enum ExpectationsError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not a valid expectation file: {source} (`haptic test --help` lists the keys)", path.display())]
    Parse {
        path: PathBuf,
        source: serde_yaml_ng::Error,
    },
}

fn read_expectations(path: &Path) -> Result<Expectations, ExpectationsError> {
    let text = std::fs::read_to_string(path).map_err(|source| ExpectationsError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_yaml_ng::from_str(&text).map_err(|source| ExpectationsError::Parse {
        path: path.to_owned(),
        source,
    })
}

fn render_case(
    runtime: &LibraryRuntime,
    library: &LibraryUnderTest,
    case: &Path,
) -> Result<JobOutput, offline::JobError> {
    let values_path = case.join("values.yaml");
    let mut values = if values_path.is_file() {
        Values::load(&values_path)?
    } else {
        Values::default()
    };
    // The library under test renders, also one that is off by default
    // (`gateway-api`), unless the case turns it off itself.
    if let LibraryUnderTest::Bundled(name) = library {
        let key = crate::values::camel_case(name);
        let set = values
            .template_libraries()
            .get(&key)
            .is_some_and(|settings| settings.get("enabled").is_some());
        if !set {
            values.set(&format!("templateLibraries.{key}.enabled"), "true")?;
        }
    }
    let custom = match library {
        LibraryUnderTest::Custom(path) => vec![path.clone()],
        LibraryUnderTest::Bundled(_) => Vec::new(),
    };
    let job = Job {
        inputs: vec![case.join("manifests.yaml")],
        values,
        custom_libraries: custom,
        validate: true,
    };
    let libraries = offline::load_libraries(runtime, &job.custom_libraries)?;
    offline::render(&job, libraries)
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !message.contains(&cause_text) {
            let _ = write!(message, ": {cause_text}");
        }
        source = cause.source();
    }
    message
}

fn check(
    rendered: &Rendered,
    withheld: &[offline::WithheldManifest],
    expect: &Expectations,
    library: &str,
    others: &[&Rendered],
    failures: &mut Vec<String>,
) {
    let config = &rendered.config;
    // Patterns match the real text; reports show secret lines redacted.
    let shown = rendered.shown_config();
    for pattern in &expect.contains {
        if !pattern.matches_any(config) {
            failures.push(missing("haproxy.cfg", pattern, &shown));
        }
    }
    for pattern in &expect.absent {
        if let Some(index) = config.lines().position(|line| pattern.matches(line)) {
            failures.push(format!(
                "haproxy.cfg has `{}`, which matches absent {pattern}",
                shown.lines().nth(index).unwrap_or_default().trim()
            ));
        } else if !others
            .iter()
            .any(|other| pattern.matches_any(&other.config))
        {
            failures.push(format!(
                "absent {pattern} is vacuous: no case of this directory renders such a line, so \
                 it would pass whatever the library does. A string matches a whole line, \
                 {{substring: ...}} part of one; fix the pattern or add a case that renders \
                 it{}",
                closest_lines(
                    pattern,
                    std::iter::once(shown.clone())
                        .chain(others.iter().map(|o| o.shown_config()))
                        .collect::<Vec<_>>()
                        .iter()
                        .map(|text| &**text)
                )
            ));
        }
    }
    for (path, patterns) in &expect.files {
        match rendered.files.get(path) {
            None => failures.push(format!(
                "no file `{path}` was rendered{}",
                list_files(rendered)
            )),
            Some(content) if rendered.secret_files.contains(path) => {
                // Key material: say what did not match, never show lines.
                for pattern in patterns.iter().filter(|p| !p.matches_any(content)) {
                    failures.push(format!(
                        "file `{path}` (key material, its lines are not shown) has no line \
                         matching {pattern}"
                    ));
                }
            }
            Some(content) => {
                for pattern in patterns.iter().filter(|p| !p.matches_any(content)) {
                    failures.push(missing(&format!("file `{path}`"), pattern, content));
                }
            }
        }
    }
    // An object the render failed with, withheld from it, is a warning on
    // that object like a library's own.
    let warnings: String = rendered
        .warnings
        .iter()
        .map(|(_, _, warning)| format!("{}: {}\n", warning.reason, warning.message))
        .chain(withheld.iter().map(|withheld| {
            format!(
                "{}: {}\n",
                crate::engine::WITHHELD_REASON,
                withheld.message()
            )
        }))
        .collect();
    for pattern in &expect.warnings {
        if !pattern.matches_any(&warnings) {
            failures.push(if warnings.is_empty() {
                format!("the render has no warnings; none matches {pattern}")
            } else {
                missing("the list of warnings", pattern, &warnings)
            });
        }
    }
    for path in &expect.absent_files {
        if rendered.files.contains_key(path) {
            failures.push(format!(
                "file `{path}` was rendered, which the case lists in absentFiles"
            ));
        } else if !others.iter().any(|other| other.files.contains_key(path)) {
            let mut rendered: Vec<&str> = others
                .iter()
                .flat_map(|other| other.files.keys().map(String::as_str))
                .collect();
            rendered.sort_unstable();
            rendered.dedup();
            let close = similar::get_close_matches(path.as_str(), &rendered, 3, 0.5);
            let hint = if close.is_empty() {
                String::new()
            } else {
                format!(" (other cases render {})", close.join(", "))
            };
            failures.push(format!(
                "absentFiles entry `{path}` is vacuous: no case of this directory renders that \
                 file, so it would pass whatever the library does; fix the path or add a case \
                 that renders it{hint}"
            ));
        }
    }
    for (variant_name, expected) in &expect.status_patches {
        let Some(variant) = StatusVariant::ALL
            .into_iter()
            .find(|v| v.as_str() == variant_name)
        else {
            failures.push(format!(
                "unknown status variant `{variant_name}` in expect.yaml (use rendered, deployed, render-failed or deploy-failed)"
            ));
            continue;
        };
        let mut actual: Vec<ExpectedPatch> = rendered
            .status_patches
            .get(&variant)
            .into_iter()
            .flatten()
            .filter(|(owner, _)| &**owner == library)
            .map(|(_, patch)| ExpectedPatch {
                api_version: patch.object.api_version.clone(),
                kind: patch.object.kind.clone(),
                namespace: patch.object.namespace.clone(),
                name: patch.object.name.clone(),
                status: patch.status.to_value(),
            })
            .collect();
        let mut expected = expected.clone();
        let sort_key = |p: &ExpectedPatch| (p.kind.clone(), p.namespace.clone(), p.name.clone());
        actual.sort_by_key(sort_key);
        expected.sort_by_key(sort_key);
        if actual != expected {
            failures.push(format!(
                "`{variant_name}` status patches of `{library}` differ (- expected, + actual):\n{}",
                diff(&patches_yaml(&expected), &patches_yaml(&actual))
            ));
        }
    }
}

/// The library under test's owned objects against the case's list.
fn check_owned(
    actual: &[crate::owned::DesiredObject],
    expected: &[ExpectedOwned],
    library: &str,
    failures: &mut Vec<String>,
) {
    let actual: Vec<&crate::owned::DesiredObject> =
        actual.iter().filter(|o| &*o.library == library).collect();
    let identity = |api_version: &str, kind: &str, namespace: &str, name: &str| {
        let shown = if namespace.is_empty() {
            name.to_owned()
        } else {
            format!("{namespace}/{name}")
        };
        format!("{kind} {shown} ({api_version})")
    };
    let asked: Vec<String> = actual
        .iter()
        .map(|o| {
            identity(
                &o.reference.api_version,
                &o.reference.kind,
                &o.reference.namespace,
                &o.reference.name,
            )
        })
        .collect();
    for want in expected {
        let name = identity(&want.api_version, &want.kind, &want.namespace, &want.name);
        let Some(index) = asked.iter().position(|a| *a == name) else {
            failures.push(format!(
                "`{library}` asks for no owned object {name}; it asks for: {}",
                if asked.is_empty() {
                    "none".to_owned()
                } else {
                    asked.join(", ")
                }
            ));
            continue;
        };
        let manifest = &actual[index].manifest;
        if !want.manifest.is_null() && !crate::status_writes::holds(&want.manifest, manifest) {
            failures.push(format!(
                "owned {name} lacks fields the case expects (- expected, + applied manifest):\n{}",
                diff(
                    &serde_yaml_ng::to_string(&want.manifest).unwrap_or_default(),
                    &serde_yaml_ng::to_string(manifest).unwrap_or_default()
                )
            ));
        }
    }
    for name in &asked {
        let listed = expected.iter().any(|want| {
            identity(&want.api_version, &want.kind, &want.namespace, &want.name) == *name
        });
        if !listed {
            failures.push(format!(
                "`{library}` asks for owned {name}, which the case's ownedObjects does not list"
            ));
        }
    }
}

/// A pattern no line matched, with the lines closest to it as a diff.
fn missing(what: &str, pattern: &Pattern, text: &str) -> String {
    format!(
        "{what} has no line matching {pattern}{}",
        closest_lines(pattern, [text])
    )
}

/// The lines of `texts` most like `pattern`, shown as `-` expected / `+`
/// rendered.
fn closest_lines<'a>(pattern: &Pattern, texts: impl IntoIterator<Item = &'a str>) -> String {
    let mut lines: Vec<&str> = texts
        .into_iter()
        .flat_map(str::lines)
        .map(str::trim)
        .collect();
    lines.sort_unstable();
    lines.dedup();
    let close = similar::get_close_matches(pattern.text(), &lines, 3, 0.5);
    let partial: Vec<&str> = match pattern {
        // A prefix of longer lines is the classic whole-line mistake; the
        // ratio alone ranks such lines low.
        Pattern::Line(line) => lines
            .iter()
            .copied()
            .filter(|l| l.starts_with(line.trim()) && !close.contains(l))
            .take(3)
            .collect(),
        Pattern::Substring(_) => Vec::new(),
    };
    if close.is_empty() && partial.is_empty() {
        return String::new();
    }
    let mut out = format!("; closest rendered lines:\n  - {}", pattern.text());
    for line in partial.iter().chain(&close) {
        let _ = write!(out, "\n  + {line}");
    }
    out
}

fn list_files(rendered: &Rendered) -> String {
    if rendered.files.is_empty() {
        " (the render has no files)".to_owned()
    } else {
        let names: Vec<&str> = rendered.files.keys().map(String::as_str).collect();
        format!(" (rendered: {})", names.join(", "))
    }
}

fn patches_yaml(patches: &[ExpectedPatch]) -> String {
    if patches.is_empty() {
        return "[]\n".to_owned();
    }
    serde_yaml_ng::to_string(patches).unwrap_or_else(|e| format!("(not serializable: {e})\n"))
}

/// A line diff of two texts, without file headers.
fn diff(expected: &str, actual: &str) -> String {
    similar::TextDiff::from_lines(expected, actual)
        .iter_all_changes()
        .map(|change| {
            let sign = match change.tag() {
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Equal => ' ',
            };
            format!("  {sign} {}", change.value().trim_end_matches('\n'))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

//! Fixture tests for template libraries (`haptic test`): a library author
//! checks what a library renders for given manifests and values, without a
//! cluster.
//!
//! A case is a directory:
//! - `manifests.yaml`: the input objects (multi-document YAML);
//! - `values.yaml` (optional): the Helm-style values tree;
//! - `expect.yaml`: what must hold (see [`Expectations`]).
//!
//! The library under test renders together with the enabled bundled
//! libraries, so the merged configuration is complete and every successful
//! case is also checked with the real `haproxy -c`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

use crate::library::LibraryRuntime;
use crate::library::types::StatusVariant;
use crate::offline::{self, Job, JobOutput};
use crate::values::Values;

/// What a case expects, from its `expect.yaml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectations {
    /// What the case is about, shown in reports.
    #[serde(default)]
    pub description: String,
    /// Lines that must each equal some line of haproxy.cfg (whitespace trimmed).
    #[serde(default)]
    pub contains: Vec<String>,
    /// Lines that must not appear in haproxy.cfg.
    #[serde(default)]
    pub absent: Vec<String>,
    /// Per auxiliary file, lines it must contain.
    #[serde(default)]
    pub files: BTreeMap<String, Vec<String>>,
    /// Per variant (`rendered`, `deployed`, ...), exactly the status patches the
    /// library under test must plan; an empty list means none.
    #[serde(default)]
    pub status_patches: BTreeMap<String, Vec<ExpectedPatch>>,
    /// The render must fail with an error containing this text.
    #[serde(default)]
    pub error: Option<String>,
}

/// A status patch a case expects.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExpectedPatch {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub namespace: String,
    pub name: String,
    pub status: serde_json::Value,
}

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
pub fn run(
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
    discover(fixtures)?
        .iter()
        .map(|case| Ok(run_case(runtime, library, &name, case)))
        .collect()
}

fn run_case(
    runtime: &LibraryRuntime,
    library: &LibraryUnderTest,
    name: &str,
    case: &Path,
) -> CaseReport {
    let mut report = CaseReport {
        name: case
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        description: String::new(),
        failures: Vec::new(),
    };
    let expect = match read_expectations(&case.join("expect.yaml")) {
        Ok(expect) => expect,
        Err(failure) => {
            report.failures.push(failure);
            return report;
        }
    };
    report.description.clone_from(&expect.description);
    let outcome = render_case(runtime, library, case);
    match (outcome, &expect.error) {
        (Err(error), Some(expected)) => {
            let message = error_chain(&error);
            if !message.contains(expected.as_str()) {
                report.failures.push(format!(
                    "expected an error containing {expected:?}, got: {message}"
                ));
            }
        }
        (Err(error), None) => report
            .failures
            .push(format!("render failed: {}", error_chain(&error))),
        (Ok(_), Some(expected)) => report.failures.push(format!(
            "expected an error containing {expected:?}, but the render succeeded"
        )),
        (Ok(output), None) => check(&output, &expect, name, &mut report.failures),
    }
    report
}

fn read_expectations(path: &Path) -> Result<Expectations, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_yaml_ng::from_str(&text)
        .map_err(|e| format!("{} is not a valid expectation file: {e}", path.display()))
}

fn render_case(
    runtime: &LibraryRuntime,
    library: &LibraryUnderTest,
    case: &Path,
) -> Result<JobOutput, offline::JobError> {
    let values_path = case.join("values.yaml");
    let values = if values_path.is_file() {
        Values::load(&values_path)?
    } else {
        Values::default()
    };
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

fn check(output: &JobOutput, expect: &Expectations, library: &str, failures: &mut Vec<String>) {
    let rendered = &output.rendered;
    let has_line = |text: &str, line: &str| text.lines().any(|l| l.trim() == line.trim());
    for line in &expect.contains {
        if !has_line(&rendered.config, line) {
            failures.push(format!("haproxy.cfg lacks the line `{line}`"));
        }
    }
    for line in &expect.absent {
        if has_line(&rendered.config, line) {
            failures.push(format!(
                "haproxy.cfg has the line `{line}`, which the case says must be absent"
            ));
        }
    }
    for (path, lines) in &expect.files {
        match rendered.files.get(path) {
            None => failures.push(format!("no file `{path}` was rendered")),
            Some(content) => {
                for line in lines.iter().filter(|line| !has_line(content, line)) {
                    failures.push(format!("file `{path}` lacks the line `{line}`"));
                }
            }
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
                api_version: patch.api_version.clone(),
                kind: patch.kind.clone(),
                namespace: patch.namespace.clone(),
                name: patch.name.clone(),
                status: serde_json::from_str(&patch.status).unwrap_or(serde_json::Value::Null),
            })
            .collect();
        let mut expected = expected.clone();
        let sort_key = |p: &ExpectedPatch| (p.kind.clone(), p.namespace.clone(), p.name.clone());
        actual.sort_by_key(sort_key);
        expected.sort_by_key(sort_key);
        if actual != expected {
            failures.push(format!(
                "`{variant_name}` status patches of `{library}` differ:\n  expected: {}\n  actual:   {}",
                serde_json::to_string(&expected).unwrap_or_default(),
                serde_json::to_string(&actual).unwrap_or_default()
            ));
        }
    }
}

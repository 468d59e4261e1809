//! The offline job behind `haptic render` and `haptic test`: manifests and
//! values in, a validated configuration, its files and the planned status
//! patches out. No cluster is involved; the render core ([`crate::engine`])
//! is the controller's own, so only the source of objects differs.

mod loopback;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::engine::{self, BlamedWarning, Engine, EngineError, Isolation, WithheldObject};
use crate::library::{LibraryRuntime, LoadedLibrary};
use crate::manifests::{self, Manifest, ManifestError};
use crate::render::{ClusterChange, Rendered};
use crate::source::WatchTarget;
use crate::validate::Validator;
use crate::values::Values;

/// What one offline render takes.
#[derive(Debug, Clone, Default)]
pub struct Job {
    /// Manifest files and directories.
    pub inputs: Vec<PathBuf>,
    /// The values tree (defaults when empty).
    pub values: Values,
    /// Custom libraries (`.wasm` components) rendered with the bundled ones.
    pub custom_libraries: Vec<PathBuf>,
    /// Run `haproxy -c` on the result.
    pub validate: bool,
}

/// The result of a successful offline render.
#[derive(Debug, Clone)]
pub struct JobOutput {
    pub rendered: Rendered,
    /// HAProxy's warnings about an accepted configuration.
    pub haproxy_warnings: Vec<String>,
    /// The libraries' warnings that are problems, each with the object it
    /// blames (see [`crate::engine::FinishedRender::warnings`]).
    pub library_warnings: Vec<BlamedWarning>,
    /// How many library warnings record an ingress-nginx annotation
    /// honoured as ingress-nginx does.
    pub migration_records: usize,
    /// The ingress-nginx migration report (`haptic migrate report`).
    pub migration: crate::migrate::Report,
    /// What validated it (`HAProxy 2.6.12 (/usr/sbin/haproxy -c)`); `None`
    /// when validation was skipped.
    pub validated_by: Option<String>,
    /// Frontends that would listen on a loopback backend's own address and
    /// port when run on this machine (see [`loopback`]).
    pub self_loops: Vec<String>,
    /// The objects the libraries ask the host to apply, as a cluster would
    /// get them (shown and written here, never applied).
    pub owned_objects: Vec<crate::owned::DesiredObject>,
    /// Objects the render failed with, left out of it (see
    /// [`Engine::finish_render`]); the rest rendered.
    pub withheld: Vec<WithheldManifest>,
    /// What finding them cost, when the render had to be isolated.
    pub isolation: Option<Isolation>,
}

/// An object left out of an offline render, with the manifest it came from.
#[derive(Debug, Clone)]
pub struct WithheldManifest {
    pub withheld: WithheldObject,
    /// `file document N`, when the object came from a manifest.
    pub source: Option<String>,
}

impl WithheldManifest {
    /// The warning a person reads: the object, its manifest, the cause.
    pub fn message(&self) -> String {
        match &self.source {
            Some(source) => format!("{} (from {source})", self.withheld.message()),
            None => self.withheld.message(),
        }
    }
}

/// Why an offline render failed.
#[derive(Debug, Error)]
pub enum JobError {
    /// A manifest could not be read.
    #[error(transparent)]
    Manifests(#[from] ManifestError),
    /// The engine failed; `source_hint` names the manifest at fault when known.
    #[error("{error}{}", .source_hint.as_deref().map(|hint| format!(" (from {hint})")).unwrap_or_default())]
    Engine {
        error: Box<EngineError>,
        source_hint: Option<String>,
    },
    /// A library asked for an owned object the host could not apply.
    #[error(transparent)]
    Owned(#[from] crate::owned::OwnedError),
    /// The objects could not be listed from the cluster.
    #[error("listing the cluster's objects: {0}")]
    Listing(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl From<EngineError> for JobError {
    fn from(error: EngineError) -> Self {
        Self::Engine {
            error: Box::new(error),
            source_hint: None,
        }
    }
}

impl From<crate::library::LibraryError> for JobError {
    fn from(error: crate::library::LibraryError) -> Self {
        EngineError::from(error).into()
    }
}

impl From<crate::values::ValuesError> for JobError {
    fn from(error: crate::values::ValuesError) -> Self {
        EngineError::from(error).into()
    }
}

/// Loads the bundled libraries plus `custom` ones (see [`engine::load_libraries`]).
pub fn load_libraries(
    runtime: &LibraryRuntime,
    custom: &[PathBuf],
) -> Result<Vec<LoadedLibrary>, JobError> {
    Ok(engine::load_libraries(runtime, custom)?)
}

/// Renders `job` with those of `libraries` its values enable.
pub fn render(job: &Job, libraries: Vec<LoadedLibrary>) -> Result<JobOutput, JobError> {
    // Configuring first tells which kinds the libraries watch, so manifests
    // of those kinds (custom resources too) are accepted, trimmed as the
    // controller's watch trims them.
    let engine = Engine::new(libraries, job.values.clone())?;
    let manifests = manifests::load_paths(&job.inputs, &engine.ingest_trims())?;
    let changes = manifests
        .iter()
        .map(|manifest| ClusterChange::Applied(manifest.object.clone()))
        .collect();
    finish(job, engine, changes, &manifests)
}

/// Renders `job` with the objects `list` returns for the watch targets of
/// the enabled libraries (as the controller would watch them) instead of
/// manifest files: `haptic migrate report --cluster`.
pub fn render_listed<E>(
    job: &Job,
    libraries: Vec<LoadedLibrary>,
    list: impl FnOnce(&[WatchTarget]) -> Result<Vec<ClusterChange>, E>,
) -> Result<JobOutput, JobError>
where
    E: std::error::Error + Send + Sync + 'static,
{
    let engine = Engine::new(libraries, job.values.clone())?;
    let targets = crate::source::targets(
        engine.watches().map(|(_, watch)| watch),
        &engine.ingest_trims(),
    );
    let changes = list(&targets).map_err(|error| JobError::Listing(Box::new(error)))?;
    finish(job, engine, changes, &[])
}

fn finish(
    job: &Job,
    mut engine: Engine,
    changes: Vec<ClusterChange>,
    manifests: &[Manifest],
) -> Result<JobOutput, JobError> {
    let finished = engine
        .finish_render(changes, |_| job.validate)
        .map_err(|error| JobError::Engine {
            source_hint: source_hint(&error, manifests),
            error: Box::new(error),
        })?;
    let validated_by = if finished.validated {
        Some(validator()?)
    } else {
        None
    };
    let withheld = finished
        .withheld
        .iter()
        .map(|withheld| WithheldManifest {
            source: manifests
                .iter()
                .find(|m| m.reference() == &withheld.object)
                .map(|m| format!("{} document {}", m.source.path.display(), m.source.document)),
            withheld: withheld.clone(),
        })
        .collect();
    if let Some(problem) = finished.owned_problems.into_iter().next() {
        return Err(problem.into());
    }
    Ok(JobOutput {
        owned_objects: finished.owned.desired,
        self_loops: loopback::self_loops(&finished.rendered.config),
        rendered: finished.rendered,
        haproxy_warnings: finished.haproxy_warnings,
        library_warnings: finished.warnings,
        migration_records: finished.migration_records,
        migration: finished.migration,
        validated_by,
        withheld,
        isolation: finished.isolation,
    })
}

/// The HAProxy that validates renders, as a report names it.
fn validator() -> Result<String, JobError> {
    let validator = Validator::from_env().map_err(EngineError::Validate)?;
    let version = validator.version().map_err(EngineError::Validate)?;
    Ok(format!(
        "HAProxy {version} (`{} -c`)",
        validator.binary.display()
    ))
}

/// Finds the manifest behind a library's complaint about an object.
fn source_hint(error: &EngineError, manifests: &[Manifest]) -> Option<String> {
    let EngineError::Render {
        object: Some(object),
        ..
    } = error
    else {
        return None;
    };
    manifests
        .iter()
        .find(|m| m.reference() == &**object)
        .map(|m| format!("{} document {}", m.source.path.display(), m.source.document))
}

/// Writes `haproxy.cfg`, the auxiliary files and `status-patches/<variant>.yaml` into `dir`.
pub fn write_dir(output: &JobOutput, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let config = dir.join("haproxy.cfg");
    if output.rendered.holds_secret_text() {
        crate::tls::write_secret_file(&config, &output.rendered.config)?;
    } else {
        std::fs::write(config, &output.rendered.config)?;
    }
    for (path, content) in &output.rendered.files {
        let target = dir.join(path);
        if output.rendered.secret_files.contains(path) {
            crate::tls::write_secret_file(&target, content)?;
            continue;
        }
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(target, content)?;
    }
    if !output.owned_objects.is_empty() {
        std::fs::write(
            dir.join("owned-objects.yaml"),
            owned_objects_yaml(&output.owned_objects),
        )?;
    }
    let patches_dir = dir.join("status-patches");
    std::fs::create_dir_all(&patches_dir)?;
    for (variant, patches) in &output.rendered.status_patches {
        std::fs::write(
            patches_dir.join(format!("{}.yaml", variant.as_str())),
            status_patches_yaml(patches),
        )?;
    }
    Ok(())
}

/// Everything as one text: the configuration, then each file and the
/// planned status patches under comment headers.
pub fn to_text(output: &JobOutput) -> String {
    let mut text = output.rendered.shown_config().into_owned();
    if output.rendered.holds_secret_text() {
        let _ = writeln!(
            text,
            "# ---- {} secret line(s) of haproxy.cfg shown as `<redacted>`; `-o DIR` writes the file with mode 0600",
            output
                .rendered
                .secret_lines
                .iter()
                .map(|range| range.len())
                .sum::<usize>()
        );
    }
    for (path, content) in &output.rendered.files {
        if output.rendered.secret_files.contains(path) {
            let _ = writeln!(
                text,
                "# ---- file: {path} (key material, {} bytes, not shown; `-o DIR` writes it with mode 0600)",
                content.len()
            );
            continue;
        }
        let _ = write!(text, "# ---- file: {path}\n{content}");
        if !content.ends_with('\n') {
            text.push('\n');
        }
    }
    if !output.owned_objects.is_empty() {
        let _ = writeln!(
            text,
            "# ---- owned objects (a controller applies them; render and run do not)"
        );
        text.push_str(&owned_objects_yaml(&output.owned_objects));
    }
    for (variant, patches) in &output.rendered.status_patches {
        let _ = writeln!(text, "# ---- status patches: {}", variant.as_str());
        text.push_str(&status_patches_yaml(patches));
    }
    text
}

fn owned_objects_yaml(objects: &[crate::owned::DesiredObject]) -> String {
    let mut text = String::new();
    for object in objects {
        let _ = writeln!(
            text,
            "# library: {}, owner: {}, field manager: {}",
            object.library,
            crate::owned::display(&object.owner),
            crate::owned::FIELD_MANAGER
        );
        text.push_str("---\n");
        text.push_str(&serde_yaml_ng::to_string(&object.manifest).unwrap_or_default());
    }
    text
}

pub(crate) fn status_patches_yaml(patches: &[crate::render::PlannedPatch]) -> String {
    let mut text = String::new();
    for (library, patch) in patches {
        let object = &patch.object;
        let document = serde_json::json!({
            "apiVersion": object.api_version,
            "kind": object.kind,
            "metadata": {"namespace": object.namespace, "name": object.name},
            "status": patch.status.to_value(),
        });
        let _ = writeln!(
            text,
            "# library: {library}, field manager: {}",
            patch.variant.field_manager()
        );
        text.push_str("---\n");
        text.push_str(&serde_yaml_ng::to_string(&document).unwrap_or_default());
    }
    text
}

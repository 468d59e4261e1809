//! The offline job behind `haptic render` and `haptic test`: manifests and
//! values in, a validated configuration, its files and the planned status
//! patches out. No cluster is involved; the same libraries and merge rules as
//! the controller are.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::library::{LibraryError, LibraryRuntime, LoadedLibrary};
use crate::manifests::{self, Manifest, ManifestError};
use crate::render::{ClusterChange, ClusterObject, RenderError, Rendered, Renderer};
use crate::validate::{self, ValidationError};
use crate::values::{Values, ValuesError};

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
    pub warnings: Vec<String>,
}

/// Why an offline render failed.
#[derive(Debug, Error)]
pub enum JobError {
    /// A manifest could not be read.
    #[error(transparent)]
    Manifests(#[from] ManifestError),
    /// The values could not be read or name an unknown library.
    #[error(transparent)]
    Values(#[from] ValuesError),
    /// A library could not be loaded.
    #[error(transparent)]
    Load(#[from] LibraryError),
    /// Two libraries have the same name.
    #[error(
        "two template libraries are named `{name}` ({first} and {second}); rename the custom one"
    )]
    DuplicateLibrary {
        name: String,
        first: String,
        second: String,
    },
    /// Rendering failed; `source_hint` names the manifest at fault when known.
    #[error("{error}{}", .source_hint.as_deref().map(|hint| format!(" (from {hint})")).unwrap_or_default())]
    Render {
        error: RenderError,
        source_hint: Option<String>,
    },
    /// HAProxy refused the rendered configuration; `report` holds its
    /// messages, each with the library that wrote the line.
    #[error("HAProxy refused the rendered configuration:\n{report}")]
    Refused {
        report: String,
        error: ValidationError,
    },
    /// HAProxy could not be run.
    #[error(transparent)]
    Validate(ValidationError),
}

/// Loads the bundled libraries plus `custom` ones, refusing two of the same
/// name. Disabled ones are loaded too: their names make the values' keys
/// valid; [`render`] leaves them out.
pub fn load_libraries(
    runtime: &LibraryRuntime,
    custom: &[PathBuf],
) -> Result<Vec<LoadedLibrary>, JobError> {
    let mut libraries = runtime.load_bundled()?;
    for path in custom {
        let library = runtime.load_file(path)?;
        if let Some(existing) = libraries
            .iter()
            .find(|l| l.info().name == library.info().name)
        {
            return Err(JobError::DuplicateLibrary {
                name: library.info().name.clone(),
                first: existing.origin().to_owned(),
                second: library.origin().to_owned(),
            });
        }
        libraries.push(library);
    }
    Ok(libraries)
}

/// Renders `job` with those of `libraries` its values enable.
pub fn render(job: &Job, libraries: Vec<LoadedLibrary>) -> Result<JobOutput, JobError> {
    let defaults: Vec<(String, serde_json::Value)> = libraries
        .iter()
        .map(|library| {
            (
                library.info().name.clone(),
                library.info().default_values.clone(),
            )
        })
        .collect();
    let tree = job.values.library_tree(&defaults)?;
    let enabled = libraries
        .into_iter()
        .filter(|library| job.values.is_enabled(&library.info().name))
        .collect();
    let mut renderer = Renderer::new(enabled, tree);

    // Configuring first tells which kinds the libraries watch, so manifests
    // of those kinds (custom resources too) are accepted.
    renderer.prepare().map_err(|error| JobError::Render {
        error,
        source_hint: None,
    })?;
    let watched: BTreeSet<(String, String)> = renderer
        .watches()
        .map(|(_, watch)| (watch.api_version.clone(), watch.kind.clone()))
        .collect();
    let manifests = manifests::load_paths(&job.inputs, &watched)?;
    let changes = manifests
        .iter()
        .filter_map(|manifest| ClusterObject::from_value(manifest.object.clone()))
        .map(ClusterChange::Applied)
        .collect();

    let rendered = renderer.render(changes).map_err(|error| JobError::Render {
        source_hint: source_hint(&error, &renderer, &manifests),
        error,
    })?;
    let warnings = if job.validate {
        check(&rendered)?
    } else {
        Vec::new()
    };
    Ok(JobOutput { rendered, warnings })
}

/// Validates with `haproxy -c`, naming the library behind each complaint.
pub fn check(rendered: &Rendered) -> Result<Vec<String>, JobError> {
    let files: Vec<(String, String)> = rendered
        .files
        .iter()
        .map(|(path, content)| (path.clone(), content.clone()))
        .collect();
    match validate::validate(&rendered.config, &files) {
        Ok(validation) => Ok(validation
            .warnings
            .iter()
            .map(|message| annotate(rendered, message))
            .collect()),
        Err(error @ ValidationError::Refused { .. }) => {
            let mut report = String::new();
            if let ValidationError::Refused { messages, .. } = &error {
                for message in messages {
                    let _ = writeln!(report, "  {}", annotate(rendered, message));
                }
            }
            Err(JobError::Refused { report, error })
        }
        Err(error) => Err(JobError::Validate(error)),
    }
}

fn annotate(rendered: &Rendered, message: &validate::Message) -> String {
    // Line numbers in messages about map or certificate files are theirs.
    let about_config = message.file.as_deref() == Some(validate::CONFIG_FILE);
    match message.line.filter(|_| about_config).and_then(|line| {
        rendered
            .library_at_line(line)
            .map(|library| (line, library))
    }) {
        Some((line, library)) => format!(
            "{} (line {line}: `{}`, written by library `{library}`)",
            message,
            rendered
                .config
                .lines()
                .nth(line.saturating_sub(1))
                .unwrap_or("")
                .trim()
        ),
        None => message.to_string(),
    }
}

/// Finds the manifest behind a library's complaint about an object.
fn source_hint(error: &RenderError, renderer: &Renderer, manifests: &[Manifest]) -> Option<String> {
    let (library, key) = error.object()?;
    let (_, watch) = renderer
        .watches()
        .find(|(name, watch)| *name == library && watch.name == key.watch)?;
    manifests
        .iter()
        .find(|m| {
            m.api_version == watch.api_version
                && m.kind == watch.kind
                && m.namespace == key.namespace
                && m.name == key.name
        })
        .map(|m| format!("{} document {}", m.source.path.display(), m.source.document))
}

/// Writes `haproxy.cfg`, the auxiliary files and `status-patches/<variant>.yaml` into `dir`.
pub fn write_dir(output: &JobOutput, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("haproxy.cfg"), &output.rendered.config)?;
    for (path, content) in &output.rendered.files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(target, content)?;
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
    let mut text = output.rendered.config.clone();
    for (path, content) in &output.rendered.files {
        let _ = write!(text, "# ---- file: {path}\n{content}");
        if !content.ends_with('\n') {
            text.push('\n');
        }
    }
    for (variant, patches) in &output.rendered.status_patches {
        let _ = writeln!(text, "# ---- status patches: {}", variant.as_str());
        text.push_str(&status_patches_yaml(patches));
    }
    text
}

fn status_patches_yaml(patches: &[crate::render::PlannedPatch]) -> String {
    let mut text = String::new();
    for (library, patch) in patches {
        let status: serde_json::Value = serde_json::from_str(&patch.status)
            .unwrap_or(serde_json::Value::String(patch.status.clone()));
        let document = serde_json::json!({
            "apiVersion": patch.api_version,
            "kind": patch.kind,
            "metadata": {"namespace": patch.namespace, "name": patch.name},
            "status": status,
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

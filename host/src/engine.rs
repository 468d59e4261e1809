//! The render core every caller shares: `haptic render`, the controller and
//! `haptic run` differ only in where objects come from and where renders go.
//!
//! An [`Engine`] owns the library set (bundled and custom, disabled ones
//! included so their values keys stay valid), the values tree, and one
//! [`Renderer`] over the libraries the values enable. It turns changes into
//! a [`Rendered`] configuration, validates one with the real `haproxy -c`
//! (each complaint naming the library that wrote the line), and finishes
//! it ([`Engine::finish_render`]): every caller gets the same
//! [`FinishedRender`], with the objects the libraries blamed, the owned
//! objects to apply and the migration records already worked out.

mod finish;
mod isolate;
#[cfg(test)]
mod tests;

pub use finish::{BlamedWarning, FinishedRender};
pub use isolate::{Isolation, PROBE_BUDGET, WITHHELD_REASON, WithheldObject, display};

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;

use crate::library::types::{Kind, ObjectKey, Watch};
use crate::library::{LibraryError, LibraryRuntime, LoadedLibrary};
use crate::policy::{Policy, PolicyError};
use crate::render::{
    ClusterChange, ClusterObject, LineOrigins, ObjectRef, RenderError, Rendered, Renderer,
};
use crate::validate::{self, ValidationError};
use crate::values::{Values, ValuesError};

/// Why the engine could not produce or accept a configuration.
#[derive(Debug, Error)]
pub enum EngineError {
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
    /// Rendering failed; `object` is the object the library blamed, when
    /// it named one that is in the cluster view. The message names that
    /// object by kind (`Ingress shop/admin`), not by the library's watch.
    #[error("{}", render_message(error, object.as_deref()))]
    Render {
        error: RenderError,
        object: Option<Box<ObjectRef>>,
    },
    /// HAProxy refused the rendered configuration; `report` holds its
    /// messages, each with the library that wrote the line.
    #[error("HAProxy refused the rendered configuration:\n{report}")]
    Refused {
        report: String,
        /// The libraries that wrote the refused lines.
        libraries: Vec<String>,
        error: ValidationError,
    },
    /// HAProxy could not be run.
    #[error(transparent)]
    Validate(ValidationError),
    /// The directive policy refused the configuration before HAProxy read
    /// it, or its allow-list in the values is malformed.
    #[error(transparent)]
    Policy(#[from] PolicyError),
}

/// Loads the bundled libraries plus `custom` ones, refusing two of the same
/// name. Disabled ones are loaded too: their names make the values' keys
/// valid; the engine leaves them out of renders.
pub fn load_libraries(
    runtime: &LibraryRuntime,
    custom: &[PathBuf],
) -> Result<Vec<LoadedLibrary>, EngineError> {
    let mut libraries = runtime.load_bundled()?;
    for path in custom {
        let library = runtime.load_file(path)?;
        if let Some(existing) = libraries
            .iter()
            .find(|l| l.info().name == library.info().name)
        {
            return Err(EngineError::DuplicateLibrary {
                name: library.info().name.clone(),
                first: existing.origin().to_owned(),
                second: library.origin().to_owned(),
            });
        }
        libraries.push(library);
    }
    Ok(libraries)
}

/// The library set, the values, and the renderer over what they enable.
pub struct Engine {
    libraries: Vec<LoadedLibrary>,
    values: Values,
    policy: Policy,
    renderer: Renderer,
    /// Who runs `haproxy -c` (in a cluster, the validator process).
    checker: validate::Checker,
    /// Objects a refused render was isolated to, each with its cause;
    /// their changes are withheld from the libraries until they change
    /// again ([`isolate`]).
    withheld: BTreeMap<ObjectRef, String>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("libraries", &self.libraries)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `libraries` (every loaded one) configured by `values`;
    /// the enabled libraries are configured at once, so their watches are
    /// known before the first object arrives.
    pub fn new(libraries: Vec<LoadedLibrary>, values: Values) -> Result<Self, EngineError> {
        let (enabled, tree) = enabled(&libraries, &values)?;
        let mut engine = Self {
            libraries,
            policy: Policy::from_values(&values)?,
            values,
            renderer: Renderer::new(enabled, tree),
            checker: validate::Checker::default(),
            withheld: BTreeMap::new(),
        };
        engine.prepare()?;
        Ok(engine)
    }

    /// New values: libraries they enable start rendering, those they
    /// disable stop, every enabled one is reconfigured. The cluster view is
    /// kept. Watches may change: callers re-read [`Self::watches`].
    pub fn set_values(&mut self, values: Values) -> Result<(), EngineError> {
        let (enabled, tree) = enabled(&self.libraries, &values)?;
        let policy = Policy::from_values(&values)?;
        self.renderer.replace_libraries(enabled, tree);
        // Values may be what a withheld object needed (a directive allowed,
        // a library enabled): every object is tried again.
        self.renderer.withhold(std::collections::BTreeSet::new());
        self.withheld.clear();
        self.policy = policy;
        self.values = values;
        self.prepare()
    }

    /// The values in force.
    pub fn values(&self) -> &Values {
        &self.values
    }

    fn prepare(&mut self) -> Result<(), EngineError> {
        self.renderer
            .prepare()
            .map_err(|error| EngineError::Render {
                error,
                object: None,
            })
    }

    /// Every watch of every enabled library: (library, watch).
    pub fn watches(&self) -> impl Iterator<Item = (&str, &Watch)> {
        self.renderer.watches()
    }

    /// The kinds (`apiVersion/kind`) `library` applies as owned objects.
    pub fn applies<'a>(&'a self, library: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.renderer.applies(library)
    }

    /// What the store may drop at ingest for each (apiVersion, kind): the
    /// fields every watch of that kind ignores.
    pub fn ingest_trims(&self) -> BTreeMap<Kind, Arc<[String]>> {
        crate::render::ingest_trims(self.watches().map(|(_, watch)| watch))
    }

    /// One object of the cluster view (trimmed at ingest).
    pub fn object(&self, reference: &ObjectRef) -> Option<&ClusterObject> {
        self.renderer.object(reference)
    }

    /// The renderer, for timings and the cluster view.
    pub fn renderer(&self) -> &Renderer {
        &self.renderer
    }

    /// Applies `changes` and renders. On error the previous good outputs are
    /// kept for the next attempt and the error names the blamed object when
    /// the library named one.
    pub fn render(&mut self, changes: Vec<ClusterChange>) -> Result<Rendered, EngineError> {
        self.renderer
            .render(changes)
            .map_err(|error| EngineError::Render {
                object: self.blamed_object(&error),
                error,
            })
    }

    /// Applies `changes`, renders, when `needs_check` says so (always where
    /// nothing was accepted before) validates, and finishes the render
    /// ([`finish`]): the one way every caller turns changes into a
    /// configuration to deploy or show.
    ///
    /// A render that fails because of its content (a library's error, the
    /// policy, `haproxy -c`) is isolated ([`isolate`]): the changes of the
    /// namespaced objects it fails with are withheld and the rest is
    /// returned, validated. The error is returned only when no such objects exist;
    /// the caller then keeps its last good configuration.
    pub fn finish_render(
        &mut self,
        changes: Vec<ClusterChange>,
        needs_check: impl FnOnce(&Rendered) -> bool,
    ) -> Result<FinishedRender, EngineError> {
        let started = Instant::now();
        let attempt = self.render(changes).and_then(|rendered| {
            let render_time = started.elapsed();
            if !needs_check(&rendered) {
                return Ok((rendered, false, Vec::new(), render_time, None));
            }
            let validating = Instant::now();
            let warnings = self.validate(&rendered)?;
            Ok((
                rendered,
                true,
                warnings,
                render_time,
                Some(validating.elapsed()),
            ))
        });
        let (rendered, validated, haproxy_warnings, render_time, validate_time, isolation) =
            match attempt {
                Ok((rendered, validated, warnings, render_time, validate_time)) => (
                    rendered,
                    validated,
                    warnings,
                    render_time,
                    validate_time,
                    None,
                ),
                Err(error) if isolate::isolable(&error) => {
                    let (rendered, warnings, isolation) = self.isolate(error)?;
                    (
                        rendered,
                        true,
                        warnings,
                        started.elapsed(),
                        None,
                        Some(isolation),
                    )
                }
                Err(error) => return Err(error),
            };
        self.renderer.settle();
        // An object that changed again or went away is shown as it is; its
        // old cause is no longer news.
        let still: std::collections::BTreeSet<&ObjectRef> = self
            .renderer
            .withheld()
            .map(|(reference, _)| reference)
            .collect();
        self.withheld.retain(|object, _| still.contains(object));
        let checked = finish::Checked {
            rendered,
            validated,
            haproxy_warnings,
            withheld: self.withheld_objects(),
            isolation,
            render_time,
            validate_time,
        };
        Ok(FinishedRender::new(self, checked))
    }

    /// The objects whose changes are withheld now, with their causes.
    pub fn withheld_objects(&self) -> Vec<WithheldObject> {
        self.renderer
            .withheld()
            .filter_map(|(object, settled_kept)| {
                Some(WithheldObject {
                    cause: self.withheld.get(object)?.clone(),
                    object: object.clone(),
                    settled_kept,
                })
            })
            .collect()
    }

    /// Judges `rendered` by the directive policy, then validates it with
    /// `haproxy -c`, naming the library behind each complaint. The policy
    /// comes first because `haproxy -c` runs what it reads (`lua-load`).
    /// Returns HAProxy's warnings about an accepted configuration.
    pub fn validate(&self, rendered: &Rendered) -> Result<Vec<String>, EngineError> {
        self.policy.check(rendered)?;
        haproxy_check(rendered, &self.checker)
    }

    /// Validates through `checker` from now on (the controller's
    /// `--validator-socket`).
    pub fn set_checker(&mut self, checker: validate::Checker) {
        self.checker = checker;
    }

    /// The cluster object a library's error names, if it is in the view.
    fn blamed_object(&self, error: &RenderError) -> Option<Box<ObjectRef>> {
        let (library, key) = error.object()?;
        self.object_of(library, key).map(Box::new)
    }

    /// The cluster object behind `library`'s key for it (as its errors and
    /// warnings name objects), if it is in the view.
    pub fn object_of(&self, library: &str, key: &ObjectKey) -> Option<ObjectRef> {
        let (_, watch) = self
            .watches()
            .find(|(name, watch)| *name == library && watch.name == key.watch)?;
        let reference = ObjectRef {
            api_version: watch.api_version.clone(),
            kind: watch.kind.clone(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
        self.object(&reference).map(|_| reference)
    }
}

/// A render error's text, with the object a library blamed named by its
/// kind: the watch name (`ingresses`) is the library's own label, which the
/// reader of the error never saw.
fn render_message(error: &RenderError, object: Option<&ObjectRef>) -> String {
    if let (RenderError::Library { library, error }, Some(object)) = (error, object)
        && let LibraryError::Guest { call, error, .. } = &**error
        && error.object.is_some()
    {
        let name = if object.namespace.is_empty() {
            object.name.clone()
        } else {
            format!("{}/{}", object.namespace, object.name)
        };
        return format!(
            "library `{library}` could not {call}: {} {name}: {}",
            object.kind, error.message
        );
    }
    error.to_string()
}

/// The libraries `values` enable and the values tree they are configured with.
fn enabled(
    libraries: &[LoadedLibrary],
    values: &Values,
) -> Result<(Vec<LoadedLibrary>, serde_json::Value), EngineError> {
    let defaults: Vec<(String, serde_json::Value)> = libraries
        .iter()
        .map(|library| {
            (
                library.info().name.clone(),
                library.info().default_values.clone(),
            )
        })
        .collect();
    let mut tree = values.library_tree(&defaults)?;
    // What the libraries may know of the HAProxy in use (a QUIC bind only
    // where it serves QUIC). In a cluster the controller's image holds the
    // same binary its validator runs. No HAProxy here: no facts, and the
    // libraries write nothing that depends on them.
    if let Some(facts) = validate::Validator::from_env()
        .and_then(|validator| validator.facts())
        .ok()
        .and_then(|facts| serde_json::to_value(facts).ok())
        && let Some(map) = tree.as_object_mut()
    {
        map.insert(validate::HAPROXY_FACTS_KEY.to_owned(), facts);
    }
    let enabled = libraries
        .iter()
        .filter(|library| {
            values.is_enabled_by_default(&library.info().name, &library.info().default_values)
        })
        .cloned()
        .collect();
    Ok((enabled, tree))
}

/// Validates with `haproxy -c`, naming the library behind each complaint.
/// Only [`Engine::validate`] calls it, after the directive policy.
fn haproxy_check(
    rendered: &Rendered,
    checker: &validate::Checker,
) -> Result<Vec<String>, EngineError> {
    let files: Vec<(String, String)> = rendered
        .files
        .iter()
        .map(|(path, content)| (path.clone(), content.clone()))
        .collect();
    match checker.validate(&rendered.config, &files) {
        Ok(validation) if validation.warnings.is_empty() => Ok(Vec::new()),
        Ok(validation) => {
            let origins = rendered.origins();
            Ok(validation
                .warnings
                .iter()
                .map(|message| annotate_line(&rendered.config, &origins, message).0)
                .collect())
        }
        Err(error @ ValidationError::Refused { .. }) => {
            let mut report = String::new();
            let mut libraries = Vec::new();
            if let ValidationError::Refused { messages, .. } = &error {
                let origins = rendered.origins();
                for message in messages {
                    let (text, library) = annotate_line(&rendered.config, &origins, message);
                    let _ = writeln!(report, "  {text}");
                    if let Some(library) = library
                        && !libraries.contains(&library)
                    {
                        libraries.push(library);
                    }
                }
            }
            Err(EngineError::Refused {
                report,
                libraries,
                error,
            })
        }
        Err(error) => Err(EngineError::Validate(error)),
    }
}

/// Line `line` (1-based) of `config` as it may be shown.
fn shown_line(config: &str, origins: &LineOrigins, line: usize) -> String {
    let text = config
        .lines()
        .nth(line.saturating_sub(1))
        .unwrap_or("")
        .trim();
    if origins.is_secret_line(line) {
        crate::render::redact_line(text)
    } else {
        text.to_owned()
    }
}

/// HAProxy's message with the line and library it is about, for a
/// configuration and the origins of its lines.
fn annotate_line(
    config: &str,
    origins: &LineOrigins,
    message: &validate::Message,
) -> (String, Option<String>) {
    // Line numbers in messages about map or certificate files are theirs.
    // `haproxy -c` names the file as run from its scratch directory, a
    // master's reload by its path in the agent's directory.
    let about_config = message.file.as_deref().is_some_and(|file| {
        std::path::Path::new(file).file_name() == Some(std::ffi::OsStr::new(validate::CONFIG_FILE))
    });
    match message
        .line
        .filter(|_| about_config)
        .and_then(|line| origins.library_at_line(line).map(|library| (line, library)))
    {
        Some((line, library)) => (
            format!(
                "{} (line {line}: `{}`, written by library `{library}`)",
                message,
                shown_line(config, origins, line)
            ),
            Some(library.to_owned()),
        ),
        None => (message.to_string(), None),
    }
}

/// An agent's report of a configuration HAProxy would not start (an address
/// or a QUIC port someone else holds: `haproxy -c` does not bind), with the
/// line and library each of HAProxy's alerts in it is about. The report is
/// kept whole; what HAProxy's alerts point at follows it.
pub fn blame_start_up_failure(config: &str, origins: &LineOrigins, report: &str) -> String {
    let blamed: Vec<String> = validate::parse_messages(report)
        .iter()
        .filter(|message| message.level == validate::Level::Alert)
        .filter_map(|message| match annotate_line(config, origins, message) {
            (text, Some(_)) => Some(text),
            (_, None) => None,
        })
        .collect();
    if blamed.is_empty() {
        report.to_owned()
    } else {
        format!("{report}\nwhich is about: {}", blamed.join("; "))
    }
}

//! Finishing a render: everything a caller needs from an accepted render,
//! assembled once. The controller, `haptic render`, `haptic run` and
//! `haptic test` take a [`FinishedRender`] from
//! [`Engine::finish_render`] and only decide where its parts go (agents and
//! the API server, files and stderr, fixture checks); none of them looks
//! objects up or sorts warnings itself, so what one shows is what another
//! deploys.

use std::time::Duration;

use serde_json::{Map, Value};

use super::{Engine, Isolation, WithheldObject};
use crate::migrate;
use crate::owned::{self, DesiredObject, OwnedError, OwnedObjects};
use crate::render::{ObjectRef, PlannedWarning, Rendered};

/// A render the engine accepted, finished: the configuration, files and
/// status patches, and what the host derives from them.
#[derive(Debug)]
pub struct FinishedRender {
    pub rendered: Rendered,
    /// Whether `haproxy -c` read it (the caller may skip validation for a
    /// change the agents apply at runtime, see [`Engine::finish_render`]).
    pub validated: bool,
    /// HAProxy's warnings about it (none when it was not validated).
    pub haproxy_warnings: Vec<String>,
    /// Every object whose change a render failed with, withheld: this
    /// render's and earlier ones' (until they change again).
    pub withheld: Vec<WithheldObject>,
    /// When this render first failed and was isolated: the cost.
    pub isolation: Option<Isolation>,
    /// Time spent rendering (isolation's trials included).
    pub render_time: Duration,
    /// Time spent validating the accepted render, when it was.
    pub validate_time: Option<Duration>,
    /// The libraries' warnings that are problems, each with the object it
    /// blames; honoured ingress-nginx annotations are records instead
    /// ([`Self::migration`]).
    pub warnings: Vec<BlamedWarning>,
    /// The objects the libraries ask the host to apply.
    pub owned: OwnedObjects,
    /// Owned objects that cannot be applied, each naming its library.
    pub owned_problems: Vec<OwnedError>,
    /// The ingress-nginx migration report of this render.
    pub migration: migrate::Report,
    /// How many of the libraries' warnings are records of an ingress-nginx
    /// annotation honoured as ingress-nginx does.
    pub migration_records: usize,
}

/// A library's warning with the cluster object it names, when that object
/// is in the cluster view (the library names it by its own watch).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BlamedWarning {
    pub warning: PlannedWarning,
    pub object: Option<ObjectRef>,
}

impl FinishedRender {
    /// `checked`'s render finished by `engine`.
    pub(super) fn new(engine: &Engine, checked: Checked) -> Self {
        let rendered = checked.rendered;
        let mut warnings = Vec::new();
        let mut migration_records = 0;
        for planned in &rendered.warnings {
            let (library, _, warning) = planned;
            if migrate::is_record(library, &warning.reason) {
                migration_records += 1;
                continue;
            }
            warnings.push(BlamedWarning {
                object: warning
                    .object
                    .as_ref()
                    .and_then(|key| engine.object_of(library, key)),
                warning: planned.clone(),
            });
        }
        let (desired, owned_problems) = desired_objects(engine, &rendered);
        let mut kinds: Vec<String> = engine
            .renderer()
            .libraries()
            .flat_map(|library| engine.applies(&library.name).map(str::to_owned))
            .collect();
        kinds.sort();
        kinds.dedup();
        Self {
            migration: migrate::Report::of(&rendered),
            migration_records,
            warnings,
            owned: OwnedObjects { desired, kinds },
            owned_problems,
            rendered,
            validated: checked.validated,
            haproxy_warnings: checked.haproxy_warnings,
            withheld: checked.withheld,
            isolation: checked.isolation,
            render_time: checked.render_time,
            validate_time: checked.validate_time,
        }
    }
}

/// What [`Engine::finish_render`] has once the render is accepted, before
/// it is finished.
pub(super) struct Checked {
    pub rendered: Rendered,
    pub validated: bool,
    pub haproxy_warnings: Vec<String>,
    pub withheld: Vec<WithheldObject>,
    pub isolation: Option<Isolation>,
    pub render_time: Duration,
    pub validate_time: Option<Duration>,
}

/// The manifests of every owned object of `rendered`, with the problems of
/// those that cannot be applied (each names the library).
fn desired_objects(engine: &Engine, rendered: &Rendered) -> (Vec<DesiredObject>, Vec<OwnedError>) {
    let mut desired = Vec::new();
    let mut problems = Vec::new();
    for (library, object) in &rendered.owned_objects {
        let reference = ObjectRef {
            api_version: object.api_version.clone(),
            kind: object.kind.clone(),
            namespace: object.owner.namespace.clone(),
            name: object.name.clone(),
        };
        let kind = format!("{}/{}", object.api_version, object.kind);
        if !engine.applies(library).any(|planned| planned == kind) {
            problems.push(OwnedError::NotPlanned {
                library: library.to_string(),
                object: owned::display(&reference),
                kind,
            });
            continue;
        }
        let Some(owner) = engine.object_of(library, &object.owner) else {
            problems.push(OwnedError::OwnerNotWatched {
                library: library.to_string(),
                object: owned::display(&reference),
                owner: object.owner.to_string(),
            });
            continue;
        };
        let uid = engine
            .object(&owner)
            .and_then(|stored| {
                stored
                    .value()
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        // The render's checks let only JSON objects through.
        let body = serde_json::from_str(&object.manifest).unwrap_or(Value::Object(Map::new()));
        if let Some(problem) = owned::label_problem(library, &reference, &body) {
            problems.push(problem);
            continue;
        }
        desired.push(DesiredObject::new(
            library.clone(),
            reference,
            owner,
            &uid,
            body,
        ));
    }
    (desired, problems)
}

//! Failure isolation: a refused render is narrowed to the objects that
//! cause it, their changes are withheld and the rest deploys.
//!
//! In a shared cluster one namespace's object must not freeze every other
//! namespace's changes. When a render fails (a library's error or trap,
//! outputs that do not merge, the directive policy, `haproxy -c`), the
//! engine looks for a smallest set of namespaced objects whose changes,
//! withheld, make the render pass. Withholding an object's change shows
//! the libraries the version of it the last accepted render had, so a
//! tenant's bad edit leaves its route serving as it was; a new object, or
//! one that had not changed, is hidden as if deleted. It tries the
//! likeliest first:
//!
//! 1. the object a library blamed in its error;
//! 2. of the objects the implicated libraries watch (the library that
//!    failed or wrote a refused line only ever saw its own watches'
//!    objects), those changed since the last accepted render (a running
//!    controller's renders were accepted until this change);
//! 3. every object the implicated libraries watch;
//! 4. every object changed since the last accepted render;
//! 5. every namespaced object.
//!
//! A pool is tried whole first (one validation); only a pool whose
//! withholding passes is searched, by halving, for one culprit at a time: about
//! `log2(pool)` validations per culprit, and never more than
//! [`PROBE_BUDGET`] in all. Within a pool the objects changed last and
//! created last come first, so of two objects that only fail together (two
//! Ingresses claiming one name) the newer one is withheld.
//!
//! Cluster-scoped objects (IngressClasses, GatewayClasses) are the admin's
//! and are never withheld; neither are the values. When nothing can be
//! isolated the render fails as before and the last good configuration
//! keeps serving.
//!
//! A withheld object stays so until it changes or is deleted
//! ([`crate::render::Renderer::withhold`]); then it is tried again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::{Engine, EngineError};
use crate::render::{ObjectRef, Rendered};

/// The most validations one isolation may run (each a render and a
/// `haproxy -c`, ~0.1-0.2 s at TestScale): enough for three culprits among
/// 10,000 objects.
pub const PROBE_BUDGET: usize = 48;

/// The longest cause kept for a withheld object (a Kubernetes Event's note
/// is limited to 1 KiB).
const CAUSE_LIMIT: usize = 900;

/// The reason an object whose change a render failed with is reported
/// under: an Event's reason in a cluster, a warning's in `haptic render`
/// and fixtures.
pub const WITHHELD_REASON: &str = "ObjectRefused";

/// An object whose change the render failed with, withheld from it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WithheldObject {
    pub object: ObjectRef,
    /// What failed while it was in the render (HAProxy's message with the
    /// line and library, a library's error), shortened to one Event's note.
    pub cause: String,
    /// The render has the object as the last accepted render had it;
    /// otherwise the object is left out.
    pub settled_kept: bool,
}

impl WithheldObject {
    /// One sentence for the object's owner: what happened and what to do.
    pub fn message(&self) -> String {
        let done = if self.settled_kept {
            "its latest change was not deployed (the version deployed before keeps serving)"
        } else {
            "it was left out of the HAProxy configuration"
        };
        format!(
            "{}: {done} because the render failed with it; every other change was deployed. {} Fix or delete it: it is tried again when it changes.",
            display(&self.object),
            self.cause
        )
    }
}

/// The cost of isolating one refused render.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// Renders validated while isolating (each a render and a `haproxy -c`).
    pub probes: usize,
    /// Time from the refusal to the accepted render.
    pub elapsed: Duration,
    /// Objects newly withheld.
    pub withheld: Vec<ObjectRef>,
}

/// `Kind namespace/name`, as messages name an object.
pub fn display(object: &ObjectRef) -> String {
    if object.namespace.is_empty() {
        format!("{} {}", object.kind, object.name)
    } else {
        format!("{} {}/{}", object.kind, object.namespace, object.name)
    }
}

/// Whether withholding objects could make a render that failed this way pass:
/// the failure came from the render's content, not from the machinery.
pub(super) fn isolable(error: &EngineError) -> bool {
    matches!(
        error,
        EngineError::Render { .. } | EngineError::Refused { .. } | EngineError::Policy(_)
    )
}

/// `text` shortened to at most [`CAUSE_LIMIT`] bytes on a character
/// boundary, on one line.
fn cause_of(error: &EngineError) -> String {
    let text = error.to_string();
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.len() <= CAUSE_LIMIT {
        return one_line;
    }
    let mut end = CAUSE_LIMIT;
    while !one_line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &one_line[..end])
}

/// A render that passed validation, with HAProxy's warnings about it.
type Passed = (Rendered, Vec<String>);

/// What a trial render gave: passed, or refused (why).
type Probe = Result<Passed, EngineError>;

impl Engine {
    /// Isolates `error`, the failure of the render just attempted: finds
    /// the objects to withhold, withholds them and returns the render
    /// without their changes (validated), or `error` when nothing can be
    /// isolated.
    pub(super) fn isolate(
        &mut self,
        error: EngineError,
    ) -> Result<(Rendered, Vec<String>, Isolation), EngineError> {
        let started = Instant::now();
        let base: BTreeSet<ObjectRef> = self
            .renderer
            .withheld()
            .map(|(reference, _)| reference.clone())
            .collect();
        let pools = self.pools(&error, &base);
        let mut search = Search {
            engine: self,
            base: &base,
            probes: 0,
            passed: None,
        };
        let mut found = None;
        for pool in pools {
            if let Some(culprits) = search.culprits(pool, &error) {
                found = Some(culprits);
                break;
            }
            if search.probes >= PROBE_BUDGET {
                break;
            }
        }
        let probes = search.probes;
        let passed = search.passed.take();
        let Some(culprits) = found else {
            tracing::warn!(
                probes,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "a refused render could not be isolated to namespaced objects; the last good configuration keeps serving"
            );
            // Show what the trials withheld again.
            self.renderer.withhold(base);
            return Err(error);
        };
        let mut withheld = base;
        withheld.extend(culprits.keys().cloned());
        // The trial that withheld exactly these is the answer; the
        // libraries take the difference from the last trial at the next
        // render.
        let reused = passed
            .filter(|(set, _)| *set == withheld)
            .map(|(_, probe)| probe);
        self.renderer.withhold(withheld);
        let mut extra = 0;
        let answer = match reused {
            Some(answer) => Ok(answer),
            None => {
                extra = 1;
                self.probe()
            }
        };
        let (rendered, warnings) = match answer {
            Ok(accepted) => accepted,
            Err(again) => {
                // The trials passed with this set; a render that fails now
                // is not one withholding objects can fix.
                let before = self
                    .renderer
                    .withheld()
                    .map(|(reference, _)| reference)
                    .filter(|r| !culprits.contains_key(*r))
                    .cloned()
                    .collect();
                self.renderer.withhold(before);
                return Err(again);
            }
        };
        let newly: Vec<ObjectRef> = culprits.keys().cloned().collect();
        for (object, cause) in culprits {
            self.withheld.insert(object, cause);
        }
        let isolation = Isolation {
            probes: probes + extra,
            elapsed: started.elapsed(),
            withheld: newly,
        };
        let named: Vec<String> = isolation.withheld.iter().map(display).collect();
        tracing::warn!(
            probes = isolation.probes,
            elapsed_ms = isolation.elapsed.as_millis() as u64,
            withheld = %named.join(", "),
            "a refused render was isolated: the changes of the objects named were withheld and the rest is deployed"
        );
        Ok((rendered, warnings, isolation))
    }

    /// Renders the view as it is now (no new changes) and validates it.
    fn probe(&mut self) -> Probe {
        let rendered = self.renderer.render(Vec::new()).map_err(|error| {
            let object = self.blamed_object(&error);
            EngineError::Render { error, object }
        })?;
        let warnings = self.validate(&rendered)?;
        Ok((rendered, warnings))
    }

    /// The pools to search, likeliest first, each ordered newest first;
    /// empty and repeated pools are left out.
    fn pools(&self, error: &EngineError, base: &BTreeSet<ObjectRef>) -> Vec<Vec<ObjectRef>> {
        let unsettled = |reference: &ObjectRef| self.renderer.is_unsettled(reference);
        // Every namespaced object not already withheld, with its sort key:
        // changed since the last accepted render first, then the newest.
        let mut all: Vec<(bool, String, ObjectRef)> = self
            .renderer
            .cluster()
            .filter(|object| !object.reference.namespace.is_empty())
            .filter(|object| !base.contains(&object.reference))
            .map(|object| {
                (
                    !unsettled(&object.reference),
                    creation_timestamp(object.json()),
                    object.reference.clone(),
                )
            })
            .collect();
        // Not yet changed sorts after changed (false < true); newest
        // timestamp first.
        all.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| b.1.cmp(&a.1))
                .then(a.2.cmp(&b.2))
        });
        let all: Vec<ObjectRef> = all.into_iter().map(|(_, _, reference)| reference).collect();

        let mut pools = Vec::new();
        if let EngineError::Render {
            object: Some(object),
            ..
        } = error
            && all.contains(object)
        {
            pools.push(vec![(**object).clone()]);
        }
        let changed: Vec<ObjectRef> = all.iter().filter(|r| unsettled(r)).cloned().collect();
        let implicated = implicated_libraries(error);
        let watched: Vec<ObjectRef> = if implicated.is_empty() {
            Vec::new()
        } else {
            let filters = self.renderer.watch_filters(&implicated);
            all.iter()
                .filter(|reference| {
                    self.renderer
                        .object(reference)
                        .is_some_and(|object| filters.iter().any(|f| f.selects(object)))
                })
                .cloned()
                .collect()
        };
        // Narrowest first: what changed of what the implicated libraries
        // see, then all they see, then all that changed.
        pools.push(watched.iter().filter(|r| unsettled(r)).cloned().collect());
        pools.push(watched);
        pools.push(changed);
        pools.push(all);
        let mut seen: Vec<Vec<ObjectRef>> = Vec::new();
        pools.retain(|pool| {
            if pool.is_empty() || seen.contains(pool) {
                return false;
            }
            seen.push(pool.clone());
            true
        });
        pools
    }
}

/// The libraries a failure names: the one whose render failed, the ones
/// that wrote lines HAProxy or the policy refused.
fn implicated_libraries(error: &EngineError) -> BTreeSet<String> {
    match error {
        EngineError::Render { error, .. } => {
            error.library().map(str::to_owned).into_iter().collect()
        }
        EngineError::Refused { libraries, .. } => libraries.iter().cloned().collect(),
        EngineError::Policy(error) => error.libraries().into_iter().collect(),
        _ => BTreeSet::new(),
    }
}

/// The object's `metadata.creationTimestamp` as stored (RFC 3339 in UTC,
/// which sorts as text), or empty; read from the text without parsing the
/// whole object.
fn creation_timestamp(json: &str) -> String {
    const FIELD: &str = "\"creationTimestamp\":\"";
    json.find(FIELD)
        .and_then(|start| {
            let rest = &json[start + FIELD.len()..];
            rest.find('"').map(|end| rest[..end].to_owned())
        })
        .unwrap_or_default()
}

/// One isolation's trials against the engine.
struct Search<'a> {
    engine: &'a mut Engine,
    /// What was withheld before the failure (isolated earlier).
    base: &'a BTreeSet<ObjectRef>,
    probes: usize,
    /// The last trial that passed: what it withheld and what it gave.
    passed: Option<(BTreeSet<ObjectRef>, Passed)>,
}

impl Search<'_> {
    /// Renders and validates with `trial` withheld on top of the base; the
    /// failure's text when it still fails, `None` when it passes or the
    /// budget is spent (then `spent` tells).
    fn passes_without(&mut self, trial: &[ObjectRef]) -> Option<Result<(), String>> {
        if self.probes >= PROBE_BUDGET {
            return None;
        }
        self.probes += 1;
        let mut withheld = self.base.clone();
        withheld.extend(trial.iter().cloned());
        self.engine.renderer.withhold(withheld.clone());
        Some(match self.engine.probe() {
            Ok(answer) => {
                self.passed = Some((withheld, answer));
                Ok(())
            }
            Err(error) => Err(cause_of(&error)),
        })
    }

    /// The culprits in `pool`, each with the failure seen while it was in
    /// the render, or `None` when the render fails without all of the pool
    /// too (or the budget runs out).
    fn culprits(
        &mut self,
        pool: Vec<ObjectRef>,
        error: &EngineError,
    ) -> Option<BTreeMap<ObjectRef, String>> {
        if self.passes_without(&pool)?.is_err() {
            return None;
        }
        let mut culprits: Vec<(ObjectRef, String)> = Vec::new();
        let mut rest = pool;
        // The failure with only the culprits found so far withheld.
        let mut failing = cause_of(error);
        loop {
            // Invariant: withholding culprits + all of `rest` passes;
            // withholding the culprits alone fails with `failing`. Find
            // the shortest prefix of `rest` that, withheld too, passes:
            // its last object is a culprit.
            let (mut bad, mut good) = (0, rest.len());
            let mut bad_cause = failing.clone();
            while good - bad > 1 {
                let middle = bad + (good - bad) / 2;
                let mut trial: Vec<ObjectRef> = culprits.iter().map(|(r, _)| r.clone()).collect();
                trial.extend(rest[..middle].iter().cloned());
                match self.passes_without(&trial)? {
                    Ok(()) => good = middle,
                    Err(cause) => {
                        bad = middle;
                        bad_cause = cause;
                    }
                }
            }
            rest.truncate(good);
            let culprit = rest.pop()?;
            culprits.push((culprit, bad_cause));
            if rest.is_empty() {
                // By the invariant, withholding the culprits alone passes.
                return Some(culprits.into_iter().collect());
            }
            let found: Vec<ObjectRef> = culprits.iter().map(|(r, _)| r.clone()).collect();
            match self.passes_without(&found)? {
                Ok(()) => return Some(culprits.into_iter().collect()),
                Err(cause) => failing = cause,
            }
        }
    }
}

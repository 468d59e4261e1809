//! The render task: owns the [`Engine`], waits for every watch's first
//! list, renders each batch of changes at once, validates what the agents'
//! runtime plan does not cover and publishes the newest accepted render as
//! a [`Candidate`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::{Candidate, Failure, GATE_CONDITION, State};
use crate::controller::metrics::{LibraryLabels, ResultLabels};
use crate::controller::sinks::FailureEvent;
use crate::engine::{BlamedWarning, Engine, EngineError, FinishedRender, WithheldObject};
use crate::library::types::{StatusPatch, StatusVariant};
use crate::protocol::plan::{self, Plan};
use crate::protocol::runtime_commands::LoadedFiles;
use crate::protocol::{Bundle, BundleFile};
use crate::render::{ObjectRef, PlannedWarning, Rendered};
use crate::source::SourceEvent;
use crate::status_writes::StatusMemory;

/// Whether `next` must pass `haproxy -c` before it is deployed, given the
/// last configuration that did. Not when the agents' runtime plan covers
/// the difference: server address, port, weight and maintenance (every
/// other line is one HAProxy accepted, the plan checks addresses are
/// literal `ip:port` and weights in range), and map entries of maps whose
/// new content the host judged loadable ([`plan::maps_judged_loadable`]:
/// the entry rules of HAProxy's map parser, pinned against the real
/// binary). Those are the changes an endpoint flip and an Ingress host or
/// path edit make, which must not pay ~50-150 ms of `haproxy -c` at scale.
/// Certificates and every other change are validated.
pub fn needs_validation(accepted: Option<&Bundle>, next: &Bundle) -> bool {
    match accepted {
        None => true,
        Some(accepted) => {
            let runtime = LoadedFiles {
                maps: plan::maps_judged_loadable(accepted, next),
                certs: Vec::new(),
            };
            matches!(plan::plan(accepted, next, &runtime), Plan::Reload(_))
        }
    }
}

/// The bundle of a render: what the agents get.
pub fn bundle(rendered: &Rendered) -> Bundle {
    Bundle::new(
        rendered.config.clone(),
        rendered
            .files
            .iter()
            .map(|(path, content)| {
                let mut file = BundleFile::new(path.clone(), content.clone());
                // What the library declared, beyond what the content shows.
                file.secret |= rendered.secret_files.contains(path);
                file
            })
            .collect(),
    )
}

/// The first sequence: milliseconds since the epoch, so a restarted
/// controller (same Lease epoch without election) never reuses one the
/// agents have seen.
fn clock_sequence() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    mut engine: Engine,
    mut events: mpsc::UnboundedReceiver<SourceEvent>,
    targets: usize,
    candidates: watch::Sender<Option<Arc<Candidate>>>,
    failures: mpsc::UnboundedSender<Failure>,
    memory: StatusMemory,
    state: Arc<State>,
) {
    let mut listed = vec![false; targets];
    let mut pending = Vec::new();
    let mut accepted: Option<Arc<Bundle>> = None;
    let mut last_good: Option<Rendered> = None;
    let mut sequence = clock_sequence();
    let mut gate_seen: HashMap<ObjectRef, Instant> = HashMap::new();
    let mut warned: HashSet<PlannedWarning> = HashSet::new();
    let mut withheld_reported: HashSet<WithheldObject> = HashSet::new();
    let mut first = true;
    let libraries = engine.renderer().memory().libraries;
    state
        .metrics
        .init_libraries(libraries.iter().map(|(library, _)| library.as_str()));
    loop {
        // With no watches (no library watches anything) the first render
        // needs no event.
        if !(first && targets == 0) {
            let Some(event) = events.recv().await else {
                return;
            };
            absorb(event, &mut listed, &mut pending, &state);
            while let Ok(event) = events.try_recv() {
                absorb(event, &mut listed, &mut pending, &state);
            }
            if !listed.iter().all(|done| *done) {
                continue;
            }
        }
        if first {
            state
                .metrics
                .seed
                .record("lists", state.metrics.seed.since_made());
        }
        first = false;
        let changes = std::mem::take(&mut pending);
        let started = Instant::now();
        // The bundle the validation question was asked of, kept so the
        // accepted render's is not built twice (the common case: a render
        // that needed no isolation is the one asked about).
        let mut asked: Option<Arc<Bundle>> = None;
        let result = tokio::task::block_in_place(|| {
            engine.finish_render(changes, |rendered| {
                let next = Arc::new(bundle(rendered));
                let needed = needs_validation(accepted.as_deref(), &next);
                asked = Some(next);
                needed
            })
        });
        let render_time = result
            .as_ref()
            .map_or_else(|_| started.elapsed(), |checked| checked.render_time);
        state.metrics.seed.record("render", render_time);
        state
            .metrics
            .render_seconds
            .observe(render_time.as_secs_f64());
        state.metrics.memory.set_render(&engine.renderer().memory());
        state
            .metrics
            .memory
            .status_remembered
            .set(i64::try_from(memory.len()).unwrap_or(i64::MAX));
        let checked = match result {
            Ok(checked) => checked,
            Err(error) => {
                let reason = match error {
                    EngineError::Refused { .. } | EngineError::Policy(_) => "ConfigRefused",
                    _ => "RenderFailed",
                };
                report_failure(&state, &failures, &last_good, reason, &error);
                continue;
            }
        };
        report_withheld(&checked, &mut withheld_reported, &failures, &state);
        report_new_warnings(&checked.warnings, &mut warned, &failures);
        for problem in &checked.owned_problems {
            tracing::warn!(error = %problem, "owned object not applied");
        }
        state
            .metrics
            .ingress_nginx_annotations
            .set(&checked.migration);
        let rendered = checked.rendered;
        // Built once and shared: the candidate, the fleet and the next
        // render's comparison all hold this one copy.
        let next = match asked {
            Some(next) if checked.isolation.is_none() => next,
            _ => Arc::new(bundle(&rendered)),
        };
        if checked.validated {
            if let Some(took) = checked.validate_time {
                state.metrics.seed.record("validate", took);
                state.metrics.validate_seconds.observe(took.as_secs_f64());
            }
            // Files change only in renders that are validated.
            state.metrics.certificates.set_bundle(&next);
        } else {
            state.metrics.validations_skipped.inc();
        }
        state
            .metrics
            .renders
            .get_or_create(&ResultLabels { result: "ok" })
            .inc();
        sequence = sequence.max(clock_sequence()) + 1;
        let candidate = candidate(
            &engine,
            &rendered,
            checked.owned,
            next,
            sequence,
            &memory,
            &mut gate_seen,
        );
        state
            .metrics
            .gates
            .set(candidate.gate_pending_since.values());
        state
            .debug
            .set_newest_render(&candidate.bundle.id, candidate.gate_pending_since.iter());
        accepted = Some(candidate.bundle.clone());
        last_good = Some(rendered);
        let _ = candidates.send(Some(Arc::new(candidate)));
        state.metrics.seed.published();
        state.ready.store(true, Ordering::Relaxed);
    }
}

fn absorb(
    event: SourceEvent,
    listed: &mut [bool],
    pending: &mut Vec<crate::render::ClusterChange>,
    state: &State,
) {
    if event.listed
        && let Some(done) = listed.get_mut(event.target)
    {
        *done = true;
        for change in &event.changes {
            if let crate::render::ClusterChange::Relisted {
                api_version, kind, ..
            } = change
            {
                state.metrics.seed.listed(format!("{kind} ({api_version})"));
            }
        }
    }
    pending.extend(event.changes);
}

fn report_failure(
    state: &State,
    failures: &mpsc::UnboundedSender<Failure>,
    last_good: &Option<Rendered>,
    reason: &'static str,
    error: &EngineError,
) {
    let (result, libraries, object) = match error {
        EngineError::Render { error, object } => (
            "render-failed",
            error.library().map(str::to_owned).into_iter().collect(),
            object.as_deref().cloned(),
        ),
        EngineError::Refused { libraries, .. } => ("refused", libraries.clone(), None),
        EngineError::Policy(error) => ("refused", error.libraries(), None),
        _ => ("validate-error", Vec::new(), None),
    };
    state
        .metrics
        .renders
        .get_or_create(&ResultLabels { result })
        .inc();
    for library in libraries {
        state
            .metrics
            .library_errors
            .get_or_create(&LibraryLabels { library })
            .inc();
    }
    tracing::error!(%error, "render not deployed; the fleet stays on the last good configuration");
    state.debug.set_render_failure(reason, &error.to_string());
    let patches = last_good
        .as_ref()
        .and_then(|rendered| rendered.status_patches.get(&StatusVariant::RenderFailed))
        .map(|patches| patches.iter().map(|(_, patch)| patch.clone()).collect())
        .unwrap_or_default();
    let _ = failures.send(Failure {
        event: FailureEvent {
            reason: reason.into(),
            note: error.to_string(),
            object,
        },
        patches,
    });
}

/// Records as a Warning Event on each object a refused render was isolated
/// to, once while its change stays withheld (and again when its cause
/// changes), and counts what isolation cost.
fn report_withheld(
    checked: &FinishedRender,
    reported: &mut HashSet<WithheldObject>,
    failures: &mpsc::UnboundedSender<Failure>,
    state: &State,
) {
    if let Some(isolation) = &checked.isolation {
        // The first attempt was refused, like any refused render.
        state
            .metrics
            .renders
            .get_or_create(&ResultLabels { result: "refused" })
            .inc();
        state.metrics.isolations.inc();
        state
            .metrics
            .isolation_probes
            .observe(isolation.probes as f64);
        state
            .metrics
            .isolation_seconds
            .observe(isolation.elapsed.as_secs_f64());
    }
    state
        .metrics
        .objects_withheld
        .set(i64::try_from(checked.withheld.len()).unwrap_or(i64::MAX));
    let current: HashSet<WithheldObject> = checked.withheld.iter().cloned().collect();
    for withheld in checked.withheld.iter().filter(|w| !reported.contains(*w)) {
        tracing::warn!(object = %crate::engine::display(&withheld.object), "{}", withheld.message());
        let _ = failures.send(Failure {
            event: FailureEvent {
                reason: crate::engine::WITHHELD_REASON.into(),
                note: withheld.message(),
                object: Some(withheld.object.clone()),
            },
            patches: Vec::new(),
        });
    }
    *reported = current;
}

/// Logs and records as Events the library warnings that were not in the
/// previous render: a warning lasts as long as its problem, and its owner
/// hears of it once (and again if it changes), not on every render.
/// Honoured annotations are records, not problems: the engine left them
/// out (the metric and `haptic migrate report` show them).
fn report_new_warnings(
    warnings: &[BlamedWarning],
    warned: &mut HashSet<PlannedWarning>,
    failures: &mpsc::UnboundedSender<Failure>,
) {
    for blamed in warnings.iter().filter(|w| !warned.contains(&w.warning)) {
        let (library, _, warning) = &blamed.warning;
        tracing::warn!(library = %library, reason = %warning.reason, "{}", warning.message);
        let _ = failures.send(Failure {
            event: FailureEvent {
                reason: warning.reason.clone().into(),
                note: warning.message.clone(),
                object: blamed.object.clone(),
            },
            patches: Vec::new(),
        });
    }
    *warned = warnings.iter().map(|w| w.warning.clone()).collect();
}

fn candidate(
    engine: &Engine,
    rendered: &Rendered,
    owned: crate::owned::OwnedObjects,
    bundle: Arc<Bundle>,
    sequence: u64,
    memory: &StatusMemory,
    gate_seen: &mut HashMap<ObjectRef, Instant>,
) -> Candidate {
    let mut patches: BTreeMap<StatusVariant, Vec<Arc<StatusPatch>>> = BTreeMap::new();
    let mut gate_pending_since = HashMap::new();
    let now = Instant::now();
    for (variant, planned) in &rendered.status_patches {
        for (_, patch) in planned {
            patches.entry(*variant).or_default().push(patch.clone());
            if memory.is_written(patch) {
                continue;
            }
            let reference = patch.object.clone();
            // A patch the object already holds (a restarted controller, a
            // condition a previous leader set) is remembered as written
            // here rather than carried to the status task with the
            // object's status: candidates once held thousands of those.
            let holding = engine
                .object(&reference)
                .and_then(|object| object.value().get_mut("status").map(Value::take))
                .is_some_and(|status| memory.note_if_holds(patch, &status));
            if holding {
                continue;
            }
            if *variant == StatusVariant::Deployed && is_gate_patch(patch) {
                let since = *gate_seen.entry(reference.clone()).or_insert(now);
                gate_pending_since.insert(reference, since);
            }
        }
    }
    // Forget pods whose gate patch is no longer pending.
    gate_seen.retain(|reference, _| gate_pending_since.contains_key(reference));
    Candidate {
        sequence,
        bundle,
        patches,
        gate_pending_since,
        owned: Arc::new(owned),
        origins: Arc::new(rendered.origins()),
    }
}

/// A Pod's patch that sets the readiness gate's condition, told by the
/// patch's structure: a `conditions` entry of the gate's type.
fn is_gate_patch(patch: &StatusPatch) -> bool {
    patch.object.kind == "Pod" && patch.status.sets_condition(GATE_CONDITION)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle_of(config: &str) -> Bundle {
        Bundle::new(config.to_owned(), Vec::new())
    }

    #[test]
    fn a_warning_is_reported_when_it_appears_or_changes_not_on_every_render() {
        use crate::library::types::{ObjectKey, Warning};
        let warning = |message: &str| BlamedWarning {
            object: None,
            warning: (
                Arc::<str>::from("ingress"),
                "warning:TLSSecretMissing".to_owned(),
                Arc::new(Warning {
                    object: Some(ObjectKey {
                        watch: "ingresses".into(),
                        namespace: "shop".into(),
                        name: "web".into(),
                    }),
                    reason: "TLSSecretMissing".into(),
                    message: message.into(),
                }),
            ),
        };
        let (sender, mut received) = mpsc::unbounded_channel();
        let mut warned = HashSet::new();
        let mut reasons = |warnings: Vec<BlamedWarning>| {
            report_new_warnings(&warnings, &mut warned, &sender);
            let mut got = Vec::new();
            while let Ok(failure) = received.try_recv() {
                got.push(format!("{}: {}", failure.event.reason, failure.event.note));
            }
            got
        };
        assert_eq!(reasons(vec![warning("gone")]), ["TLSSecretMissing: gone"]);
        assert!(
            reasons(vec![warning("gone")]).is_empty(),
            "same warning, no new Event"
        );
        assert_eq!(
            reasons(vec![warning("still gone")]),
            ["TLSSecretMissing: still gone"],
            "a changed message is news"
        );
        assert!(reasons(Vec::new()).is_empty(), "fixed: nothing to report");
        assert_eq!(
            reasons(vec![warning("gone")]).len(),
            1,
            "back again: reported again"
        );
    }

    #[test]
    fn only_changes_outside_the_runtime_plan_are_validated() {
        let base = "global\n  maxconn 10\nbackend b\n  server s1 10.0.0.1:80 weight 1\n";
        let flipped =
            "global\n  maxconn 10\nbackend b\n  server s1 10.0.0.1:80 weight 1 disabled\n";
        let moved = "global\n  maxconn 10\nbackend b\n  server s1 10.0.0.2:80 weight 1\n";
        let option = "global\n  maxconn 20\nbackend b\n  server s1 10.0.0.1:80 weight 1\n";
        assert!(needs_validation(None, &bundle_of(base)));
        assert!(!needs_validation(
            Some(&bundle_of(base)),
            &bundle_of(flipped)
        ));
        assert!(!needs_validation(Some(&bundle_of(base)), &bundle_of(moved)));
        assert!(!needs_validation(Some(&bundle_of(base)), &bundle_of(base)));
        assert!(needs_validation(Some(&bundle_of(base)), &bundle_of(option)));
        let reading = |converter: &str, map: &str| {
            Bundle::new(
                format!(
                    "{base}frontend f\n  use_backend %[req.hdr(host),{converter}(maps/hosts.map)]\n"
                ),
                vec![BundleFile::new("maps/hosts.map", map)],
            )
        };
        assert!(
            !needs_validation(
                Some(&reading("map_str", "a.example.com b\n")),
                &reading("map_str", "c.example.com b\n")
            ),
            "a string map takes any entry: a runtime change"
        );
        assert!(
            needs_validation(
                Some(&reading("map_str_int", "a.example.com 1\n")),
                &reading("map_str_int", "a.example.com one\n")
            ),
            "an entry HAProxy refuses goes through haproxy -c, which refuses it"
        );
        assert!(
            needs_validation(
                Some(&reading("map_reg", "^a b\n")),
                &reading("map_reg", "^c b\n")
            ),
            "regex maps are validated"
        );
        let unread = |map: &str| {
            Bundle::new(
                base.to_owned(),
                vec![BundleFile::new("maps/hosts.map", map)],
            )
        };
        assert!(
            needs_validation(Some(&unread("a b\n")), &unread("c b\n")),
            "a file no map converter reads is validated"
        );
    }

    #[test]
    fn a_gate_patch_is_told_by_its_conditions_not_by_a_substring() {
        use crate::library::types::{ObjectRef, PatchStatus, StatusVariant};
        let patch = |kind: &str, status: Value| StatusPatch {
            object: ObjectRef {
                api_version: "v1".into(),
                kind: kind.into(),
                namespace: "shop".into(),
                name: "web-0".into(),
            },
            variant: StatusVariant::Deployed,
            status: match status {
                Value::Object(status) => PatchStatus::new(&status),
                _ => panic!("test statuses are objects"),
            },
        };
        let gate = serde_json::json!({"conditions": [{"type": GATE_CONDITION, "status": "True"}]});
        assert!(is_gate_patch(&patch("Pod", gate.clone())));
        assert!(!is_gate_patch(&patch("Service", gate)));
        let mentions = serde_json::json!({"message": format!("waiting for {GATE_CONDITION}")});
        assert!(
            !is_gate_patch(&patch("Pod", mentions)),
            "naming the condition elsewhere does not make a gate patch"
        );
        let other = serde_json::json!({"conditions": [{"type": "Ready", "status": "True"}]});
        assert!(!is_gate_patch(&patch("Pod", other)));
    }
}

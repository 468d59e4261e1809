//! The render pipeline: keeps one long-lived instance per template library,
//! feeds each only the objects it watches (and, after the first render, only
//! what changed), and merges their outputs into one configuration.
//!
//! Failure containment: a library that traps, times out or returns bad output
//! fails the render with an error naming it; its previous output is kept and
//! its instance is rebuilt from the cluster view on the next render, so the
//! host never serves a half-applied delta.

mod merge;
mod store;

pub use merge::{
    Changed, LibraryItems, LineOrigins, MergeCache, MergeError, PlannedObject, PlannedPatch,
    PlannedWarning, Rendered, merge, redact_line,
};
pub use store::{ClusterChange, ClusterObject, IngestTrim, ObjectRef, WatchFilter, ingest_trims};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::library::types::{Change, Item, LibraryInfo, ObjectKey, Plan, Watch};
use crate::library::{LibraryError, LibraryInstance, LoadedLibrary};
use store::ClusterStore;

/// Why a render produced no configuration.
#[derive(Debug, Error)]
pub enum RenderError {
    /// A library failed (trap, timeout, its own error, malformed output);
    /// the message names the library. Shown, not chained: its text is the
    /// whole story.
    #[error("{error}")]
    Library {
        library: String,
        error: Box<LibraryError>,
    },
    /// A watch a library asked for cannot be evaluated: its label or its
    /// field selector does not parse (the error says which).
    #[error("template library `{library}` asked for watch `{watch}` with an {problem}")]
    BadWatch {
        library: String,
        watch: String,
        #[source]
        problem: Box<haptic_selectors::SelectorError>,
    },
    /// The outputs of the libraries do not fit together.
    #[error(transparent)]
    Merge(#[from] MergeError),
}

impl RenderError {
    /// The library and the object it complained about, when it named one.
    pub fn object(&self) -> Option<(&str, &ObjectKey)> {
        match self {
            Self::Library { library, error } => {
                let key = error.guest_error()?.object.as_ref()?;
                Some((library, key))
            }
            _ => None,
        }
    }

    /// The library at fault, if one is.
    pub fn library(&self) -> Option<&str> {
        match self {
            Self::Library { library, .. } | Self::BadWatch { library, .. } => Some(library),
            Self::Merge(_) => None,
        }
    }
}

/// How long each part of the last render took.
#[derive(Debug, Clone, Default)]
pub struct RenderTimings {
    /// Per library, in merge order.
    pub libraries: Vec<LibraryTiming>,
    /// Merging all outputs into one configuration.
    pub merge: Duration,
}

/// Where one library's share of a render went.
#[derive(Debug, Clone, Default)]
pub struct LibraryTiming {
    pub library: String,
    /// Everything for this library, host side included.
    pub total: Duration,
    /// Inside the library's calls (instantiate, configure, render).
    pub guest: Duration,
}

/// What a [`Renderer`] holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryUse {
    /// Objects in the cluster view.
    pub objects: usize,
    /// Their stored JSON text (trimmed at ingest).
    pub object_bytes: usize,
    /// Each library instance's linear memory, by library.
    pub libraries: Vec<(String, usize)>,
}

struct LibrarySlot {
    name: Arc<str>,
    library: LoadedLibrary,
    instance: Option<LibraryInstance>,
    plan: Plan,
    /// The objects this library currently sees, by its own keys.
    objects: BTreeSet<ObjectKey>,
    /// The library's last good output.
    items: BTreeMap<String, Item>,
    /// What changed in `items` since the last merge.
    unmerged: Unmerged,
    /// The instance must be (re)built and configured before the next render:
    /// first use, after a failure, after values changed.
    stale: bool,
    /// The current instance has been given the whole view; later renders
    /// send it deltas.
    fed: bool,
}

impl LibrarySlot {
    fn name(&self) -> &str {
        &self.name
    }
}

/// What changed in a library's items since the last merge: what the merge
/// takes in again.
enum Unmerged {
    /// Everything may have (a complete output).
    All,
    /// These keys, each with the item it held at the last merge.
    Keys(BTreeMap<String, Option<Item>>),
}

impl Unmerged {
    fn nothing() -> Self {
        Self::Keys(BTreeMap::new())
    }

    /// `key` held `was` before this change; the first change since the
    /// merge says what the merge saw.
    fn record(&mut self, key: &str, was: Option<Item>) {
        if let Self::Keys(keys) = self
            && !keys.contains_key(key)
        {
            keys.insert(key.to_owned(), was);
        }
    }

    /// Whether the merge takes in every item anyway.
    fn is_all(&self) -> bool {
        matches!(self, Self::All)
    }

    fn changed(&self) -> Changed<'_> {
        match self {
            Self::All => Changed::All,
            Self::Keys(keys) => Changed::Keys(keys),
        }
    }
}

/// Renders a set of libraries over a changing cluster view.
pub struct Renderer {
    slots: Vec<LibrarySlot>,
    values: serde_json::Value,
    cluster: ClusterStore,
    merge_cache: MergeCache,
    timings: RenderTimings,
    /// Objects withheld or shown again since the last render: changes for
    /// the libraries although the cluster did not change.
    toggled: BTreeSet<ObjectRef>,
}

impl Renderer {
    /// A renderer for `libraries` (merged in ascending `order`, then name),
    /// configured with the whole `templateLibraries` values tree.
    pub fn new(libraries: Vec<LoadedLibrary>, values: serde_json::Value) -> Self {
        Self {
            slots: slots(libraries),
            values,
            cluster: ClusterStore::default(),
            merge_cache: MergeCache::default(),
            timings: RenderTimings::default(),
            toggled: BTreeSet::new(),
        }
    }

    /// Replaces the set of libraries and the values tree (values that
    /// enable or disable a library), keeping the cluster view: every library
    /// starts fresh on the next render, which hands each the whole view.
    pub fn replace_libraries(&mut self, libraries: Vec<LoadedLibrary>, values: serde_json::Value) {
        self.slots = slots(libraries);
        self.values = values;
        self.merge_cache = MergeCache::default();
    }

    /// The libraries in merge order.
    pub fn libraries(&self) -> impl Iterator<Item = &LibraryInfo> {
        self.slots.iter().map(|slot| slot.library.info())
    }

    /// Every watch of every library, as planned by the last render.
    pub fn watches(&self) -> impl Iterator<Item = (&str, &Watch)> {
        self.slots.iter().flat_map(|slot| {
            slot.plan
                .watches
                .iter()
                .map(move |watch| (slot.name(), watch))
        })
    }

    /// The kinds (`apiVersion/kind`) `library` applies as owned objects, as
    /// planned by the last render.
    pub fn applies<'a>(&'a self, library: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.slots
            .iter()
            .filter(move |slot| slot.name() == library)
            .flat_map(|slot| slot.plan.applies.iter().map(String::as_str))
    }

    /// Replaces the values tree; every library is reconfigured on the next render.
    pub fn set_values(&mut self, values: serde_json::Value) {
        self.values = values;
        for slot in &mut self.slots {
            slot.stale = true;
        }
    }

    /// Timings of the last render.
    pub fn timings(&self) -> &RenderTimings {
        &self.timings
    }

    /// The objects in the cluster view.
    pub fn cluster(&self) -> impl Iterator<Item = &ClusterObject> {
        self.cluster.objects()
    }

    /// What the cluster view and the library instances hold, for the
    /// memory gauges.
    pub fn memory(&self) -> MemoryUse {
        let (objects, object_bytes) = self.cluster.size();
        MemoryUse {
            objects,
            object_bytes,
            libraries: self
                .slots
                .iter()
                .map(|slot| {
                    let bytes = slot
                        .instance
                        .as_ref()
                        .map_or(0, LibraryInstance::memory_bytes);
                    (slot.name().to_owned(), bytes)
                })
                .collect(),
        }
    }

    /// One object of the cluster view.
    pub fn object(&self, reference: &ObjectRef) -> Option<&ClusterObject> {
        self.cluster.get(reference)
    }

    /// The objects whose change is withheld from the libraries (see
    /// [`Self::withhold`]), each with whether the libraries see its
    /// settled version (`true`) or nothing.
    pub fn withheld(&self) -> impl Iterator<Item = (&ObjectRef, bool)> {
        self.cluster.withheld()
    }

    /// Withholds exactly `withheld` from every library from the next render
    /// on: an object changed since the last [`Self::settle`] is shown as it
    /// was then (hidden if it is new), any other is hidden, as if deleted;
    /// one withheld already stays as it is; the others are shown as they
    /// are. An object that changes again or goes away is shown as it is.
    pub fn withhold(&mut self, withheld: BTreeSet<ObjectRef>) {
        let toggled = self.cluster.set_withheld(withheld);
        self.toggled.extend(toggled);
    }

    /// Whether `reference` changed since the last [`Self::settle`].
    pub fn is_unsettled(&self, reference: &ObjectRef) -> bool {
        self.cluster.is_unsettled(reference)
    }

    /// The versions stored now are the settled ones: the engine calls it
    /// once a render is accepted.
    pub fn settle(&mut self) {
        self.cluster.settle();
    }

    /// The watches of the libraries named in `libraries`, parsed once to be
    /// asked of many objects (a watch whose selector does not parse selects
    /// nothing: its library fails every render anyway).
    pub fn watch_filters(&self, libraries: &BTreeSet<String>) -> Vec<WatchFilter> {
        self.slots
            .iter()
            .filter(|slot| libraries.contains(slot.name()))
            .flat_map(|slot| slot.plan.watches.iter())
            .filter_map(|watch| WatchFilter::of(watch).ok())
            .collect()
    }

    /// Applies `changes` to the cluster view and renders. On error the
    /// previous good outputs are kept for the next attempt.
    ///
    /// Libraries are independent, so when more than one must take in the
    /// whole view (first render, new values, recovery) they render on
    /// threads of their own; a single change stays on this thread, where a
    /// thread's start would cost more than it saves.
    pub fn render(&mut self, changes: Vec<ClusterChange>) -> Result<Rendered, RenderError> {
        let mut changed = self.cluster.apply(changes);
        changed.append(&mut self.toggled);
        let (values, cluster) = (&self.values, &self.cluster);
        let full_feeds = self
            .slots
            .iter()
            .filter(|slot| slot.needs_full_feed())
            .count();
        let results: Vec<(Result<(), RenderError>, LibraryTiming)> = if full_feeds > 1 {
            std::thread::scope(|scope| {
                let workers: Vec<_> = self
                    .slots
                    .iter_mut()
                    .map(|slot| scope.spawn(|| slot.render(values, cluster, &changed)))
                    .collect();
                workers
                    .into_iter()
                    .map(|worker| {
                        worker
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                    .collect()
            })
        } else {
            self.slots
                .iter_mut()
                .map(|slot| slot.render(values, cluster, &changed))
                .collect()
        };

        self.timings = RenderTimings::default();
        let mut first_error = None;
        for (slot, (result, timing)) in self.slots.iter_mut().zip(results) {
            self.timings.libraries.push(timing);
            if let Err(error) = result {
                // The guest may hold a half-applied view; rebuild it next time.
                slot.stale = true;
                slot.instance = None;
                first_error.get_or_insert(error);
            }
        }
        if let Some(error) = first_error {
            return Err(error);
        }
        let started = Instant::now();
        let libraries: Vec<LibraryItems<'_>> = self
            .slots
            .iter()
            .map(|slot| LibraryItems {
                library: &slot.name,
                items: &slot.items,
                changed: slot.unmerged.changed(),
            })
            .collect();
        let rendered = merge(&libraries, &mut self.merge_cache);
        // Merged, or failed and the cache starts over: either way the next
        // merge needs no record of these changes.
        for slot in &mut self.slots {
            slot.unmerged = Unmerged::nothing();
        }
        self.timings.merge = started.elapsed();
        Ok(rendered?)
    }

    /// Instantiates and configures every library that needs it, so their
    /// watches are known before the first objects arrive.
    pub fn prepare(&mut self) -> Result<(), RenderError> {
        for slot in &mut self.slots {
            if let Err(error) = slot.prepare(&self.values) {
                slot.stale = true;
                return Err(error);
            }
        }
        Ok(())
    }
}

/// One slot per library, in merge order (ascending `order`, then name).
fn slots(mut libraries: Vec<LoadedLibrary>) -> Vec<LibrarySlot> {
    libraries
        .sort_by(|a, b| (a.info().order, &a.info().name).cmp(&(b.info().order, &b.info().name)));
    libraries
        .into_iter()
        .map(|library| LibrarySlot {
            name: Arc::from(library.info().name.as_str()),
            library,
            instance: None,
            plan: Plan::default(),
            objects: BTreeSet::new(),
            items: BTreeMap::new(),
            unmerged: Unmerged::All,
            stale: true,
            fed: false,
        })
        .collect()
}

impl LibrarySlot {
    /// Whether the next render must hand this library the whole view.
    fn needs_full_feed(&self) -> bool {
        self.stale
            || !self.fed
            || self
                .instance
                .as_ref()
                .is_none_or(LibraryInstance::is_poisoned)
    }

    fn prepare(&mut self, values: &serde_json::Value) -> Result<(), RenderError> {
        if !self.stale
            && self
                .instance
                .as_ref()
                .is_some_and(|instance| !instance.is_poisoned())
        {
            return Ok(());
        }
        let fail = library_error(self.name());
        let mut instance = self.library.instantiate().map_err(&fail)?;
        self.plan = instance.configure(values).map_err(&fail)?;
        self.instance = Some(instance);
        self.stale = false;
        self.fed = false;
        Ok(())
    }

    /// Renders this library's share, timing it.
    fn render(
        &mut self,
        values: &serde_json::Value,
        cluster: &ClusterStore,
        changed: &BTreeSet<ObjectRef>,
    ) -> (Result<(), RenderError>, LibraryTiming) {
        let started = Instant::now();
        let mut guest = Duration::ZERO;
        let result = self.render_timed(values, cluster, changed, &mut guest);
        let timing = LibraryTiming {
            library: self.name().to_owned(),
            total: started.elapsed(),
            guest,
        };
        (result, timing)
    }

    fn render_timed(
        &mut self,
        values: &serde_json::Value,
        cluster: &ClusterStore,
        changed: &BTreeSet<ObjectRef>,
        guest: &mut Duration,
    ) -> Result<(), RenderError> {
        let started = Instant::now();
        self.prepare(values)?;
        *guest += started.elapsed();
        let library_name = self.name().to_owned();

        let changes = if self.fed {
            let changes =
                cluster.changes_for(&library_name, &self.plan.watches, changed, &self.objects)?;
            if changes.is_empty() && !self.items.is_empty() {
                return Ok(());
            }
            for change in &changes {
                match change {
                    Change::Applied(object) => {
                        self.objects.insert(object.key.clone());
                    }
                    Change::Deleted(key) => {
                        self.objects.remove(key);
                    }
                }
            }
            changes
        } else {
            // A fresh instance sees the whole view at once. The view's keys
            // move into the record of what the library sees (sorted, so the
            // set is built in one pass) rather than being copied.
            let view = cluster.view(&library_name, &self.plan.watches)?;
            let (keys, changes): (Vec<ObjectKey>, Vec<Change>) = view
                .into_iter()
                .map(|(key, object)| (key, Change::Applied(object)))
                .unzip();
            self.objects = keys.into_iter().collect();
            changes
        };

        let Some(instance) = self.instance.as_mut() else {
            return Ok(());
        };
        let started = Instant::now();
        let output = instance
            .render(changes)
            .map_err(library_error(&library_name));
        *guest += started.elapsed();
        let output = output?;
        self.fed = true;
        if output.complete {
            self.items.clear();
            self.unmerged = Unmerged::All;
        }
        for key in output.removals {
            let was = self.items.remove(&key);
            self.unmerged.record(&key, was);
        }
        for (key, item) in output.upserts {
            // One walk of the items per upsert: a complete output (every
            // item new, nothing to record) needs no copy of the key.
            if self.unmerged.is_all() {
                self.items.insert(key, item);
            } else {
                let was = self.items.insert(key.clone(), item);
                self.unmerged.record(&key, was);
            }
        }
        Ok(())
    }
}

fn library_error(library: &str) -> impl Fn(LibraryError) -> RenderError + use<> {
    let library = library.to_owned();
    move |error| RenderError::Library {
        library: library.clone(),
        error: Box::new(error),
    }
}

//! The library's view of its watched objects, kept between renders and
//! updated from the host's changes. Each object is parsed once per
//! resourceVersion into the type its watch declares.

use std::any::{Any, TypeId};
use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Deref;
use std::rc::Rc;

pub use crate::key::ObjectKey;
use crate::watch::{Parser, Watch};
use crate::{Error, Plan, Result, Values};

/// A change as the host sends it.
#[derive(Debug, Clone)]
pub enum IncomingChange {
    /// Created or updated.
    Applied {
        key: ObjectKey,
        resource_version: String,
        json: String,
    },
    /// Gone.
    Deleted(ObjectKey),
}

/// One object: parsed on arrival, or for a [lazy](Watch::lazy) watch on
/// first access.
pub(crate) struct Stored {
    key: ObjectKey,
    resource_version: String,
    value: OnceCell<Box<dyn Any>>,
    /// The JSON of a lazy object not parsed yet.
    raw: RefCell<Option<String>>,
    parser: Parser,
    type_name: &'static str,
}

impl Stored {
    /// The parsed object. A lazy object that does not parse is logged once
    /// and then reads as absent.
    fn value<T: 'static>(&self) -> Option<&T> {
        if self.value.get().is_none() {
            let raw = self.raw.borrow_mut().take()?;
            match (self.parser)(&raw) {
                Ok(value) => {
                    let _ = self.value.set(value);
                }
                Err(e) => {
                    crate::log::warn(&format!(
                        "cannot read {} (resourceVersion {}) as {}: {e}; ignoring it",
                        self.key, self.resource_version, self.type_name
                    ));
                    return None;
                }
            }
        }
        self.value.get()?.downcast_ref()
    }
}

struct WatchStore {
    watch: Watch,
    /// namespace -> name -> object; ordered so renders are deterministic.
    objects: BTreeMap<String, BTreeMap<String, Rc<Stored>>>,
    len: usize,
}

/// All watched objects of one library instance.
#[derive(Default)]
pub(crate) struct Store {
    watches: BTreeMap<String, WatchStore>,
    /// Objects whose latest version failed to parse, with why: left out of
    /// the view and reported as warnings (for a [strict](Watch::strict)
    /// watch, every render fails) until they are fixed or deleted, so a bad
    /// object never silently disappears from the configuration.
    broken: BTreeMap<ObjectKey, String>,
}

impl Store {
    /// Adopts a new plan. Objects of a watch that is still planned with the
    /// same definition are kept; the host sends the objects of new or changed
    /// watches as `applied` changes.
    pub(crate) fn set_plan(&mut self, plan: &Plan) {
        let mut old = std::mem::take(&mut self.watches);
        for watch in &plan.watches {
            let kept = old
                .remove(&watch.name)
                .filter(|store| same_definition(&store.watch, watch));
            let store = match kept {
                Some(store) => store,
                None => WatchStore {
                    watch: watch.clone(),
                    objects: BTreeMap::new(),
                    len: 0,
                },
            };
            self.watches.insert(watch.name.clone(), store);
        }
        let watches = &self.watches;
        self.broken
            .retain(|key, _| watches.contains_key(&key.watch));
    }

    /// Applies the host's changes and returns them collapsed to one entry
    /// per object (state before the batch vs after), ordered by key.
    /// Re-sending an object at the resourceVersion already held is no change.
    /// Without `track` (a complete render, which ignores the list) nothing is
    /// collected.
    pub(crate) fn apply(
        &mut self,
        changes: Vec<IncomingChange>,
        track: bool,
    ) -> Result<Vec<Changed>> {
        let mut collapsed: BTreeMap<ObjectKey, Changed> = BTreeMap::new();
        for change in changes {
            // The key moves into the stored object: 21k objects at seed are
            // 63k string allocations saved.
            let next = match change {
                IncomingChange::Applied {
                    key,
                    resource_version,
                    json,
                } => {
                    let store = self
                        .watches
                        .get(&key.watch)
                        .ok_or_else(|| Error::UnknownWatch { key: key.clone() })?;
                    let held = store
                        .objects
                        .get(&key.namespace)
                        .and_then(|names| names.get(&key.name))
                        .is_some_and(|s| s.resource_version == resource_version);
                    if held && (self.broken.is_empty() || !self.broken.contains_key(&key)) {
                        continue;
                    }
                    let (value, raw) = if store.watch.lazy {
                        (OnceCell::new(), Some(json))
                    } else {
                        match (store.watch.parser)(&json) {
                            Ok(value) => (OnceCell::from(value), None),
                            Err(source) => {
                                let error = Error::InvalidObject {
                                    key: key.clone(),
                                    resource_version,
                                    type_name: store.watch.type_name,
                                    source,
                                };
                                self.broken.insert(key.clone(), error.to_string());
                                let previous = self.put(&key, None);
                                if track {
                                    record(&mut collapsed, &key, previous, None);
                                }
                                continue;
                            }
                        }
                    };
                    let stored = Rc::new(Stored {
                        key,
                        resource_version,
                        value,
                        raw: RefCell::new(raw),
                        parser: store.watch.parser,
                        type_name: store.watch.type_name,
                    });
                    if !self.broken.is_empty() {
                        self.broken.remove(&stored.key);
                    }
                    let previous = self.put(&stored.key, Some(Rc::clone(&stored)));
                    if track {
                        record(
                            &mut collapsed,
                            &stored.key,
                            previous,
                            Some(Rc::clone(&stored)),
                        );
                    }
                    continue;
                }
                IncomingChange::Deleted(key) => {
                    if !self.watches.contains_key(&key.watch) {
                        return Err(Error::UnknownWatch { key });
                    }
                    self.broken.remove(&key);
                    key
                }
            };
            let previous = self.put(&next, None);
            if track {
                record(&mut collapsed, &next, previous, None);
            }
        }
        let watches = &self.watches;
        if let Some((key, message)) = self
            .broken
            .iter()
            .find(|(key, _)| watches.get(&key.watch).is_some_and(|w| w.watch.strict))
        {
            return Err(Error::object(key, message.clone()));
        }
        Ok(collapsed
            .into_values()
            .filter(|c| c.previous.is_some() || c.current.is_some())
            .collect())
    }

    /// Objects of non-strict watches that did not parse, with why.
    pub(crate) fn unreadable(&self) -> impl Iterator<Item = (&ObjectKey, &str)> {
        self.broken
            .iter()
            .filter(|(key, _)| {
                self.watches
                    .get(&key.watch)
                    .is_some_and(|store| !store.watch.strict)
            })
            .map(|(key, message)| (key, message.as_str()))
    }

    /// Stores or removes one object; returns what was there. One walk of
    /// the namespace's names either way: a complete feed puts every
    /// object, and each comparison of two names is a byte-wise `memcmp` in
    /// the guest.
    fn put(&mut self, key: &ObjectKey, value: Option<Rc<Stored>>) -> Option<Rc<Stored>> {
        let store = self.watches.get_mut(&key.watch)?;
        match value {
            Some(value) => {
                // Most objects share a namespace already present: look it up
                // before allocating a key for it.
                if !store.objects.contains_key(&key.namespace) {
                    store.objects.insert(key.namespace.clone(), BTreeMap::new());
                }
                let names = store.objects.get_mut(&key.namespace)?;
                let previous = names.insert(key.name.clone(), value);
                if previous.is_none() {
                    store.len += 1;
                }
                previous
            }
            None => {
                let names = store.objects.get_mut(&key.namespace)?;
                let previous = names.remove(&key.name);
                if names.is_empty() {
                    store.objects.remove(&key.namespace);
                }
                if previous.is_some() {
                    store.len -= 1;
                }
                previous
            }
        }
    }

    fn watch_store<T: 'static>(&self, watch: &str) -> Result<&WatchStore> {
        let store = self
            .watches
            .get(watch)
            .ok_or_else(|| Error::NotPlanned(watch.to_owned()))?;
        if store.watch.type_id != TypeId::of::<T>() {
            return Err(Error::WrongType {
                watch: watch.to_owned(),
                declared: store.watch.type_name,
                requested: std::any::type_name::<T>(),
            });
        }
        Ok(store)
    }
}

/// Folds one change into the batch's per-object account.
fn record(
    collapsed: &mut BTreeMap<ObjectKey, Changed>,
    key: &ObjectKey,
    previous: Option<Rc<Stored>>,
    current: Option<Rc<Stored>>,
) {
    match collapsed.get_mut(key) {
        Some(change) => change.current = current,
        None => {
            collapsed.insert(
                key.clone(),
                Changed {
                    key: key.clone(),
                    previous,
                    current,
                },
            );
        }
    }
}

fn same_definition(a: &Watch, b: &Watch) -> bool {
    a.api_version == b.api_version
        && a.kind == b.kind
        && a.namespace == b.namespace
        && a.label_selector == b.label_selector
        && a.ignore_fields == b.ignore_fields
        && a.type_id == b.type_id
        && a.lazy == b.lazy
        && a.strict == b.strict
}

/// One object as a library sees it; dereferences to the parsed value.
#[derive(Debug)]
pub struct Entry<'a, T> {
    pub key: &'a ObjectKey,
    pub resource_version: &'a str,
    pub value: &'a T,
}

impl<T> Clone for Entry<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Entry<'_, T> {}

impl<T> Deref for Entry<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

fn entry<T: 'static>(stored: &Stored) -> Option<Entry<'_, T>> {
    Some(Entry {
        key: &stored.key,
        resource_version: &stored.resource_version,
        value: stored.value::<T>()?,
    })
}

/// How one object changed during the batch of changes this render applied.
pub struct Changed {
    /// The object.
    pub key: ObjectKey,
    previous: Option<Rc<Stored>>,
    current: Option<Rc<Stored>>,
}

impl fmt::Debug for Changed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Changed")
            .field("key", &self.key)
            .field("created", &self.previous.is_none())
            .field("deleted", &self.current.is_none())
            .finish()
    }
}

impl Changed {
    /// The watch the object belongs to.
    pub fn watch(&self) -> &str {
        &self.key.watch
    }

    /// The object before this batch (`None` if it is new).
    pub fn previous<T: 'static>(&self) -> Option<&T> {
        self.previous.as_ref()?.value()
    }

    /// The object now (`None` if it was deleted).
    pub fn current<T: 'static>(&self) -> Option<&T> {
        self.current.as_ref()?.value()
    }

    /// True when the object no longer exists.
    pub fn is_deleted(&self) -> bool {
        self.current.is_none()
    }
}

/// What a render sees: the objects, what changed since the previous render,
/// and the values.
pub struct Context<'a> {
    store: &'a Store,
    changes: &'a [Changed],
    values: &'a Values,
    complete: bool,
}

impl fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("changes", &self.changes.len())
            .field("complete", &self.complete)
            .finish()
    }
}

impl<'a> Context<'a> {
    pub(crate) fn new(
        store: &'a Store,
        changes: &'a [Changed],
        values: &'a Values,
        complete: bool,
    ) -> Self {
        Self {
            store,
            changes,
            values,
            complete,
        }
    }

    /// True when this render must produce the whole output and rebuild any
    /// incremental cache (after `plan`, or after a failed render). The
    /// changes list is then not a reliable account of what changed.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The values the library was configured with.
    pub fn values(&self) -> &'a Values {
        self.values
    }

    /// Every object of a watch, ordered by namespace then name.
    pub fn objects<T: 'static>(
        &self,
        watch: &str,
    ) -> Result<impl Iterator<Item = Entry<'a, T>> + 'a> {
        let store = self.store.watch_store::<T>(watch)?;
        Ok(store
            .objects
            .values()
            .flat_map(|names| names.values())
            .filter_map(|stored| entry::<T>(stored)))
    }

    /// Every object of a watch in one namespace, ordered by name.
    pub fn objects_in<T: 'static>(
        &self,
        watch: &str,
        namespace: &str,
    ) -> Result<impl Iterator<Item = Entry<'a, T>> + 'a> {
        let store = self.store.watch_store::<T>(watch)?;
        Ok(store
            .objects
            .get(namespace)
            .into_iter()
            .flat_map(|names| names.values())
            .filter_map(|stored| entry::<T>(stored)))
    }

    /// One object by namespace and name.
    pub fn get<T: 'static>(
        &self,
        watch: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Entry<'a, T>>> {
        let store = self.store.watch_store::<T>(watch)?;
        Ok(store
            .objects
            .get(namespace)
            .and_then(|names| names.get(name))
            .and_then(|stored| entry::<T>(stored)))
    }

    /// How many objects a watch holds (0 for a watch not planned).
    pub fn count(&self, watch: &str) -> usize {
        self.store.watches.get(watch).map_or(0, |s| s.len)
    }

    /// Every object that changed since the previous render, ordered by key.
    pub fn changes(&self) -> &'a [Changed] {
        self.changes
    }

    /// The changes of one watch.
    pub fn changes_of(&self, watch: &'a str) -> impl Iterator<Item = &'a Changed> + 'a {
        self.changes.iter().filter(move |c| c.key.watch == watch)
    }
}

//! The library's lifecycle behind the WIT exports: values, the object store,
//! the previous output and the complete/delta bookkeeping. Independent of
//! the bindings, so native tests drive it through [`Harness`](crate::testing::Harness).

use std::collections::BTreeMap;

use crate::objects::{IncomingChange, Store};
use crate::output::{Delta, SentItems};
use crate::{Context, Info, Library, Output, Plan, Result, Values};

/// One library instance and everything the SDK keeps for it.
pub(crate) struct Runtime<T> {
    library: T,
    info: Info,
    values: Values,
    store: Store,
    /// Fingerprints of what the host holds.
    sent: SentItems,
    /// Renders so far, to tell this render's items from older ones.
    renders: u64,
    /// The next render must send the whole output.
    complete_next: bool,
    /// The `ObjectUnreadable` warnings sent, by item key, with their text.
    unreadable_sent: BTreeMap<String, String>,
}

/// The warning reason for an object left out because it does not parse.
pub const UNREADABLE_REASON: &str = "ObjectUnreadable";

impl<T: Library> Runtime<T> {
    pub(crate) fn new() -> Self {
        let library = T::default();
        let info = library.info();
        Self {
            library,
            info,
            values: Values::default(),
            store: Store::default(),
            sent: SentItems::default(),
            renders: 0,
            complete_next: true,
            unreadable_sent: BTreeMap::new(),
        }
    }

    pub(crate) fn info(&self) -> &Info {
        &self.info
    }

    /// Takes the whole values tree and returns the plan for it.
    pub(crate) fn configure(&mut self, tree: serde_json::Value) -> Result<Plan> {
        self.complete_next = true;
        let values = Values::new(tree, &self.info.name, &self.info.defaults)?;
        let plan = self.library.plan(&values)?;
        self.values = values;
        self.store.set_plan(&plan);
        Ok(plan)
    }

    /// Applies changes and renders. With nothing changed and no complete
    /// render due, the library is not called at all.
    pub(crate) fn render(&mut self, changes: Vec<IncomingChange>) -> Result<Delta> {
        let result = self.render_inner(changes);
        if result.is_err() {
            // What was sent was handed to the failed render; start over.
            self.sent.clear();
            self.unreadable_sent.clear();
            self.complete_next = true;
        }
        result
    }

    fn render_inner(&mut self, changes: Vec<IncomingChange>) -> Result<Delta> {
        let complete = self.complete_next;
        let changed = self.store.apply(changes, !complete)?;
        let unreadable: BTreeMap<String, (crate::ObjectKey, String)> = self
            .store
            .unreadable()
            .map(|(key, why)| {
                (
                    format!("warning:{UNREADABLE_REASON}:{key}"),
                    (key.clone(), why.to_owned()),
                )
            })
            .collect();
        let unreadable_changed = unreadable.len() != self.unreadable_sent.len()
            || unreadable
                .iter()
                .zip(&self.unreadable_sent)
                .any(|((key, (_, why)), (sent_key, sent_why))| key != sent_key || why != sent_why);
        if changed.is_empty() && !complete && !unreadable_changed {
            return Ok(Delta::default());
        }
        let sent = if complete {
            SentItems::default()
        } else {
            std::mem::take(&mut self.sent)
        };
        self.renders += 1;
        let mut out = Output::new(sent, self.renders);
        let ctx = Context::new(&self.store, &changed, &self.values, complete);
        self.library.render(&ctx, &mut out)?;
        // After the library: in retain mode its items stay unless removed,
        // so warnings of objects fixed since are removed by key.
        for key in self.unreadable_sent.keys() {
            if !unreadable.contains_key(key) {
                out.remove(key);
            }
        }
        self.unreadable_sent.clear();
        for (item_key, (object, why)) in unreadable {
            out.put(
                item_key.clone(),
                crate::Item::Warning {
                    object: Some(object),
                    reason: UNREADABLE_REASON.to_owned(),
                    message: format!(
                        "{why}; the object is left out of the configuration until it is fixed"
                    ),
                },
            )?;
            self.unreadable_sent.insert(item_key, why);
        }
        let (sent, delta) = out.finish(complete);
        self.sent = sent;
        self.complete_next = false;
        Ok(delta)
    }
}

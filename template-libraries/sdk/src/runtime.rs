//! The library's lifecycle behind the WIT exports: values, the object store,
//! the previous output and the complete/delta bookkeeping. Independent of
//! the bindings, so native tests drive it through [`Harness`](crate::testing::Harness).

use std::collections::BTreeMap;

use crate::objects::{IncomingChange, Store};
use crate::output::{Delta, Item};
use crate::{Context, Info, Library, Output, Plan, Result, Values};

/// One library instance and everything the SDK keeps for it.
pub(crate) struct Runtime<T> {
    library: T,
    info: Info,
    values: Values,
    store: Store,
    previous: BTreeMap<String, Item>,
    /// The next render must send the whole output.
    complete_next: bool,
}

impl<T: Library> Runtime<T> {
    pub(crate) fn new() -> Self {
        let library = T::default();
        let info = library.info();
        Self {
            library,
            info,
            values: Values::default(),
            store: Store::default(),
            previous: BTreeMap::new(),
            complete_next: true,
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
            // The previous output was handed to the failed render; start over.
            self.previous.clear();
            self.complete_next = true;
        }
        result
    }

    fn render_inner(&mut self, changes: Vec<IncomingChange>) -> Result<Delta> {
        let changed = self.store.apply(changes)?;
        let complete = self.complete_next;
        if changed.is_empty() && !complete {
            return Ok(Delta::default());
        }
        let previous = if complete {
            BTreeMap::new()
        } else {
            std::mem::take(&mut self.previous)
        };
        let mut out = Output::new(previous);
        let ctx = Context::new(&self.store, &changed, &self.values, complete);
        self.library.render(&ctx, &mut out)?;
        let (items, delta) = out.finish(complete);
        self.previous = items;
        self.complete_next = false;
        Ok(delta)
    }
}

#[cfg(test)]
mod tests;

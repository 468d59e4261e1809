//! Drives a library natively, without a host: for unit tests of libraries.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::objects::IncomingChange;
use crate::output::{Delta, Item};
use crate::runtime::Runtime;
use crate::{Library, ObjectKey, Plan, Result};

/// A library instance fed by hand, the way the host feeds it.
///
/// ```
/// # use haptic_sdk::{testing::Harness, Context, Info, Library, Output, Result};
/// #[derive(Default)]
/// struct Hello;
/// impl Library for Hello {
///     fn info(&self) -> Info { Info::new("hello", "0.1.0") }
///     fn render(&mut self, _: &Context<'_>, out: &mut Output) -> Result<()> {
///         out.file("hello.txt", "hi\n")
///     }
/// }
/// let mut harness = Harness::<Hello>::new(serde_json::json!({})).unwrap();
/// let delta = harness.render().unwrap();
/// assert!(delta.complete);
/// assert_eq!(harness.output().len(), 1);
/// ```
pub struct Harness<T> {
    runtime: Runtime<T>,
    plan: Plan,
    pending: Vec<IncomingChange>,
    output: BTreeMap<String, Item>,
    next_version: u64,
}

impl<T> std::fmt::Debug for Harness<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("pending", &self.pending.len())
            .finish()
    }
}

impl<T: Library> Harness<T> {
    /// A fresh instance configured with a `templateLibraries` tree; the
    /// library's own settings are merged over its defaults as the host does
    /// ([`crate::values::as_the_host_sends`]).
    pub fn new(values: Value) -> Result<Self> {
        let mut runtime = Runtime::<T>::new();
        let values = host_tree(&runtime, values);
        let plan = runtime.configure(values)?;
        Ok(Self {
            runtime,
            plan,
            pending: Vec::new(),
            output: BTreeMap::new(),
            next_version: 1,
        })
    }

    /// The plan from the last configure.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Configures again with new values.
    pub fn configure(&mut self, values: Value) -> Result<&Plan> {
        let values = host_tree(&self.runtime, values);
        self.plan = self.runtime.configure(values)?;
        Ok(&self.plan)
    }

    /// Queues an object for the next render. Namespace and name come from
    /// its metadata; the resourceVersion from `metadata.resourceVersion`, or
    /// a fresh one per call.
    pub fn apply(&mut self, watch: &str, object: &Value) {
        let metadata = &object["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let resource_version = match metadata["resourceVersion"].as_str() {
            Some(version) => version.to_owned(),
            None => {
                self.next_version += 1;
                format!("h{}", self.next_version)
            }
        };
        self.pending.push(IncomingChange::Applied {
            key: ObjectKey::new(watch, text(&metadata["namespace"]), text(&metadata["name"])),
            resource_version,
            json: object.to_string(),
        });
    }

    /// Queues a deletion for the next render.
    pub fn delete(&mut self, watch: &str, namespace: &str, name: &str) {
        self.pending.push(IncomingChange::Deleted(ObjectKey::new(
            watch, namespace, name,
        )));
    }

    /// Renders the queued changes and folds the delta into [`output`](Self::output).
    pub fn render(&mut self) -> Result<Delta> {
        let changes = std::mem::take(&mut self.pending);
        let delta = self.runtime.render(changes)?;
        if delta.complete {
            self.output.clear();
        }
        for key in &delta.removals {
            self.output.remove(key);
        }
        for (key, item) in &delta.upserts {
            self.output.insert(key.clone(), item.clone());
        }
        Ok(delta)
    }

    /// The library's whole output as the host would hold it.
    pub fn output(&self) -> &BTreeMap<String, Item> {
        &self.output
    }

    /// The body of one section of the output.
    pub fn section(&self, kind: crate::SectionKind, name: &str) -> Option<&str> {
        match self.output.get(&crate::output::section_key(kind, name))? {
            Item::Section { body, .. } => Some(body),
            _ => None,
        }
    }

    /// The content of one file of the output.
    pub fn file(&self, path: &str) -> Option<&str> {
        match self.output.get(&format!("file:{path}"))? {
            Item::File { content, .. } => Some(content),
            _ => None,
        }
    }

    /// Every warning of the output as `(reason, message)`.
    pub fn warnings(&self) -> Vec<(String, String)> {
        self.output
            .values()
            .filter_map(|item| match item {
                Item::Warning {
                    reason, message, ..
                } => Some((reason.clone(), message.clone())),
                _ => None,
            })
            .collect()
    }

    /// Every status patch of the output as `(namespace/name, status JSON)`.
    pub fn status_patches(&self) -> Vec<(String, Value)> {
        self.output
            .values()
            .filter_map(|item| match item {
                Item::StatusPatch {
                    namespace,
                    name,
                    status,
                    ..
                } => Some((
                    format!("{namespace}/{name}"),
                    serde_json::from_str(status).unwrap_or(Value::Null),
                )),
                _ => None,
            })
            .collect()
    }
}

fn host_tree<T: Library>(runtime: &Runtime<T>, values: Value) -> Value {
    let info = runtime.info();
    crate::values::as_the_host_sends(values, &info.name, &info.defaults)
}

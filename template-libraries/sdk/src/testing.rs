//! Drives a library natively, without a host: for unit tests of libraries.

use std::collections::{BTreeMap, BTreeSet};

use haptic_selectors::{Selection, defaults};
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
    /// Objects the library holds (applied and selected), so an update its
    /// watch no longer selects becomes a deletion, as the host sends it.
    delivered: BTreeSet<ObjectKey>,
    /// A watch whose selector does not parse: the next render fails with it,
    /// as the host's render would.
    bad_watch: Option<String>,
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
            delivered: BTreeSet::new(),
            bad_watch: None,
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

    /// Queues an object for the next render, as the host would send it for
    /// `watch`: with the API server's defaults filled in (a Secret without
    /// `type` is `Opaque`), and only when the watch's namespace, label
    /// selector and field selector select it, by the host's own rules
    /// (`haptic_selectors`); an object it no longer selects is deleted.
    /// Namespace and name come from its metadata; the resourceVersion from
    /// `metadata.resourceVersion`, or a fresh one per call.
    pub fn apply(&mut self, watch: &str, object: &Value) {
        let mut object = object.clone();
        let planned = self.plan.watches.iter().find(|w| w.name == watch);
        if let (Some(planned), Value::Object(fields)) = (planned, &mut object) {
            defaults::apply(&planned.api_version, &planned.kind, fields);
        }
        let metadata = &object["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let key = ObjectKey::new(watch, text(&metadata["namespace"]), text(&metadata["name"]));
        if let Some(planned) = planned {
            match Selection::parse(
                &planned.api_version,
                &planned.kind,
                planned.namespace.as_deref(),
                planned.label_selector.as_deref(),
                planned.field_selector.as_deref(),
            ) {
                Ok(selection) if !selection.matches_object(&object) => {
                    if self.delivered.remove(&key) {
                        self.pending.push(IncomingChange::Deleted(key));
                    }
                    return;
                }
                Ok(_) => {}
                Err(error) => {
                    self.bad_watch = Some(format!("watch `{watch}` has an {error}"));
                }
            }
        }
        let resource_version = match metadata["resourceVersion"].as_str() {
            Some(version) => version.to_owned(),
            None => {
                self.next_version += 1;
                format!("h{}", self.next_version)
            }
        };
        self.delivered.insert(key.clone());
        self.pending.push(IncomingChange::Applied {
            key,
            resource_version,
            json: object.to_string(),
        });
    }

    /// Queues a deletion for the next render.
    pub fn delete(&mut self, watch: &str, namespace: &str, name: &str) {
        let key = ObjectKey::new(watch, namespace, name);
        self.delivered.remove(&key);
        self.pending.push(IncomingChange::Deleted(key));
    }

    /// Renders the queued changes and folds the delta into [`output`](Self::output).
    pub fn render(&mut self) -> Result<Delta> {
        if let Some(problem) = self.bad_watch.take() {
            return Err(crate::Error::msg(format!(
                "{problem}; fix the selector in the library's plan"
            )));
        }
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

#[cfg(test)]
mod lifecycle;

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::Harness;
    use crate::{Context, Info, Library, Output, Plan, Result, Values, Watch};

    /// Lists the Secrets its `type=Opaque` watch delivers, with the type
    /// it sees.
    #[derive(Default)]
    struct OpaqueSecrets;

    impl Library for OpaqueSecrets {
        fn info(&self) -> Info {
            Info::new("opaque-secrets", "0.1.0")
        }

        fn plan(&mut self, _: &Values) -> Result<Plan> {
            Ok(Plan::default()
                .watch(Watch::new("secrets", "v1", "Secret").field_selector("type=Opaque")))
        }

        fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()> {
            let mut seen = String::new();
            for secret in ctx.objects::<Value>("secrets")? {
                let kind = secret["type"].as_str().unwrap_or("none");
                seen.push_str(&format!("{} {kind}\n", secret.key.name));
            }
            out.file("secrets.txt", seen)
        }
    }

    fn secret(name: &str, kind: Option<&str>) -> Value {
        let mut secret = json!({"metadata": {"namespace": "shop", "name": name}});
        if let Some(kind) = kind {
            secret["type"] = json!(kind);
        }
        secret
    }

    #[test]
    fn field_selectors_select_as_the_host_does() -> Result<()> {
        let mut harness = Harness::<OpaqueSecrets>::new(json!({}))?;
        harness.apply("secrets", &secret("cert", Some("kubernetes.io/tls")));
        harness.apply("secrets", &secret("plain", None));
        harness.apply("secrets", &secret("db", Some("Opaque")));
        harness.render()?;
        assert_eq!(
            harness.file("secrets.txt"),
            Some("db Opaque\nplain Opaque\n"),
            "a TLS Secret does not reach a type=Opaque watch; one without type is Opaque"
        );
        harness.apply("secrets", &secret("db", Some("kubernetes.io/tls")));
        harness.render()?;
        assert_eq!(
            harness.file("secrets.txt"),
            Some("plain Opaque\n"),
            "an object the watch no longer selects is deleted"
        );
        Ok(())
    }

    #[derive(Default)]
    struct BadSelector;

    impl Library for BadSelector {
        fn info(&self) -> Info {
            Info::new("bad-selector", "0.1.0")
        }

        fn plan(&mut self, _: &Values) -> Result<Plan> {
            Ok(Plan::default().watch(Watch::new("secrets", "v1", "Secret").field_selector("type")))
        }

        fn render(&mut self, _: &Context<'_>, _: &mut Output) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_selector_that_does_not_parse_fails_the_render() -> Result<()> {
        let mut harness = Harness::<BadSelector>::new(json!({}))?;
        harness.apply("secrets", &secret("db", None));
        let error = harness.render().expect_err("bad field selector");
        assert!(
            error.to_string().contains("invalid field selector 'type'"),
            "{error}"
        );
        Ok(())
    }
}

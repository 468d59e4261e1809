//! The trait a template library implements, and what it says about itself.

pub use crate::watch::{Plan, Watch};
use crate::{Context, Output, Result, Values};

/// A template library. One value lives as long as its WebAssembly instance:
/// caches kept in `self` survive between renders.
///
/// The host calls, in order: [`info`](Self::info) once, then
/// [`plan`](Self::plan) whenever the values change, then
/// [`render`](Self::render) whenever watched objects changed. After `plan`,
/// or after a failed render, the next render is *complete*
/// ([`Context::is_complete`]): incremental caches must be rebuilt from
/// [`Context`]'s objects.
pub trait Library: Default + 'static {
    /// Name, version, order and default values. Must not depend on values.
    fn info(&self) -> Info;

    /// What the library watches for these values. The default watches
    /// nothing, for libraries that only render from values.
    fn plan(&mut self, values: &Values) -> Result<Plan> {
        let _ = values;
        Ok(Plan::default())
    }

    /// Writes the library's output for the current objects and values.
    ///
    /// By default `out` expects the whole output every time and the SDK sends
    /// the host only what differs from the previous render. A library that
    /// tracks changes itself calls [`Output::retain_previous`] and emits only
    /// what changed.
    fn render(&mut self, ctx: &Context<'_>, out: &mut Output) -> Result<()>;
}

/// What a library says about itself.
#[derive(Debug, Clone)]
pub struct Info {
    /// Kebab-case name, e.g. `kubernetes-backends`; its camelCase form is the
    /// library's key in the values tree.
    pub name: String,
    /// The library's own version.
    pub version: String,
    /// Libraries render and merge in ascending order; ties break by name.
    pub order: u32,
    /// Default values (a JSON object), merged under the user's values.
    pub defaults: serde_json::Value,
}

impl Info {
    /// A library at order 100 with no defaults.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            order: 100,
            defaults: serde_json::Value::Object(serde_json::Map::new()),
        }
    }

    /// Sets the order.
    #[must_use]
    pub fn order(mut self, order: u32) -> Self {
        self.order = order;
        self
    }

    /// Sets the default values (a JSON object).
    #[must_use]
    pub fn defaults(mut self, defaults: serde_json::Value) -> Self {
        self.defaults = defaults;
        self
    }
}

//! The key of one watched object, as the host and the library name it.

use std::fmt;

/// Identifies one watched object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The watch the object belongs to.
    pub watch: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    /// A key from its parts.
    pub fn new(
        watch: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            watch: watch.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.watch, self.name)
        } else {
            write!(f, "{} {}/{}", self.watch, self.namespace, self.name)
        }
    }
}

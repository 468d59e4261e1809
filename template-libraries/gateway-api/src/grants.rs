//! ReferenceGrants: a reference from one namespace to an object in another
//! (a route's backend, a Gateway's certificate) holds only when the target
//! namespace grants it.

use crate::api::ReferenceGrant;

/// The grants of the cluster, as a flat list.
#[derive(Debug, Default)]
pub struct Grants {
    /// (target namespace, from group, from kind, from namespace, to group,
    /// to kind, to name or any).
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    namespace: String,
    from: (String, String, String),
    to: (String, String, Option<String>),
}

/// One reference to check.
pub struct Reference<'a> {
    pub from_group: &'a str,
    pub from_kind: &'a str,
    pub from_namespace: &'a str,
    pub to_group: &'a str,
    pub to_kind: &'a str,
    pub to_namespace: &'a str,
    pub to_name: &'a str,
}

impl Grants {
    pub fn new<'a>(grants: impl IntoIterator<Item = &'a ReferenceGrant>) -> Self {
        let mut entries = Vec::new();
        for grant in grants {
            for from in &grant.spec.from {
                for to in &grant.spec.to {
                    entries.push(Entry {
                        namespace: grant.metadata.namespace.clone(),
                        from: (
                            from.group.clone(),
                            from.kind.clone(),
                            from.namespace.clone(),
                        ),
                        to: (to.group.clone(), to.kind.clone(), to.name.clone()),
                    });
                }
            }
        }
        Self { entries }
    }

    /// Whether the reference is allowed: same namespace, or granted.
    pub fn allows(&self, r: &Reference<'_>) -> bool {
        r.from_namespace == r.to_namespace
            || self.entries.iter().any(|e| {
                e.namespace == r.to_namespace
                    && e.from.0 == r.from_group
                    && e.from.1 == r.from_kind
                    && e.from.2 == r.from_namespace
                    && e.to.0 == r.to_group
                    && e.to.1 == r.to_kind
                    && e.to.2.as_deref().is_none_or(|name| name == r.to_name)
            })
    }
}

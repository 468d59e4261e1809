//! The output builder: sections, snippets, files and status patches under
//! stable keys, turned into a delta against the previous render.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};

use crate::{Error, ObjectKey, Result};

/// HAProxy configuration section kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SectionKind {
    Global,
    Defaults,
    Frontend,
    Backend,
    Listen,
    Userlist,
    Resolvers,
    Peers,
    Cache,
    Ring,
    HttpErrors,
}

impl SectionKind {
    /// The keyword that opens such a section.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Defaults => "defaults",
            Self::Frontend => "frontend",
            Self::Backend => "backend",
            Self::Listen => "listen",
            Self::Userlist => "userlist",
            Self::Resolvers => "resolvers",
            Self::Peers => "peers",
            Self::Cache => "cache",
            Self::Ring => "ring",
            Self::HttpErrors => "http-errors",
        }
    }
}

/// Where lines added to a section go. A section is its owner's body, then
/// the snippets by slot in the order below, then by priority (lower first),
/// library order and key; [`crate::extending`] shows where the bundled
/// libraries' lines sit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    /// `acl` declarations, first, so every rule can name them.
    Acls,
    /// `http-request` and `tcp-request` rules, run in file order for every
    /// request. `ingress` sets the `txn.haptic_*` variables here at priority
    /// 0: read them above 0.
    RequestRules,
    /// `http-response` and `http-after-response` rules, run after every
    /// request rule (so the `txn.haptic_*` variables are set).
    ResponseRules,
    /// `use_backend` and other routing decisions; the first that matches
    /// wins. `ingress` routes at 0 (map lookups) and 1000 (an Ingress's
    /// default backend).
    Routing,
    /// Anything else: options, timeouts, `server` lines, lines for
    /// `global` and `defaults`.
    Other,
}

impl Slot {
    fn as_str(self) -> &'static str {
        match self {
            Self::Acls => "acls",
            Self::RequestRules => "request-rules",
            Self::ResponseRules => "response-rules",
            Self::Routing => "routing",
            Self::Other => "other",
        }
    }
}

/// Which moment of the deploy a status patch belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusVariant {
    Rendered,
    Deployed,
    RenderFailed,
    DeployFailed,
}

impl StatusVariant {
    /// Kebab-case name, as in the WIT contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rendered => "rendered",
            Self::Deployed => "deployed",
            Self::RenderFailed => "render-failed",
            Self::DeployFailed => "deploy-failed",
        }
    }
}

/// One output item.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Item {
    /// A whole section this library owns.
    Section {
        kind: SectionKind,
        name: String,
        body: String,
        /// The body is secret text (see [`Output::secret_section`]).
        secret: bool,
    },
    /// Lines added into a section some library owns.
    Snippet {
        target_kind: SectionKind,
        target_name: String,
        slot: Slot,
        priority: i32,
        lines: String,
        /// The lines are secret text (see [`Output::secret_snippet`]).
        secret: bool,
    },
    /// A file next to haproxy.cfg, path relative to its directory.
    /// `secret`: it holds key material (see [`Output::secret_file`]).
    File {
        path: String,
        content: String,
        secret: bool,
    },
    /// A server-side-apply patch of an object's status (a JSON object).
    StatusPatch {
        variant: StatusVariant,
        api_version: String,
        kind: String,
        namespace: String,
        name: String,
        status: String,
    },
    /// A problem with the input the library worked around (see
    /// [`Output::warning`]).
    Warning {
        object: Option<ObjectKey>,
        reason: String,
        message: String,
    },
    /// An object the host applies in the cluster, owned by a watched object
    /// (see [`Output::owned_object`]).
    OwnedObject {
        owner: ObjectKey,
        api_version: String,
        kind: String,
        name: String,
        /// A JSON object.
        manifest: String,
    },
}

/// What one render sends the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    /// `upserts` is the whole output; the host drops what it held before.
    pub complete: bool,
    /// New or changed items, in the order the library emitted them.
    pub upserts: Vec<(String, Item)>,
    /// Keys of items that are gone, ordered.
    pub removals: Vec<String>,
}

/// What the SDK remembers of an item it sent: a 128-bit fingerprint of its
/// content rather than the content, so a library's output is not held
/// twice (once here, once by the host).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    fingerprint: u128,
    /// The render that last emitted it.
    seen: u64,
    /// The render that first emitted it.
    born: u64,
}

/// Everything sent so far, by key. Hashed, not ordered: every item of
/// every render is looked up here, and the keys share long prefixes
/// (`status:deployed:v1:Pod:<namespace>/`) that made each of a B-tree's
/// comparisons a long byte-wise `memcmp` in the guest (9,909 status patches:
/// the larger part of the gate library's render). A fixed hasher, so a
/// library's behaviour does not depend on a random seed; nothing reads the
/// map in order (`finish` sorts what it removes).
pub(crate) type SentItems = HashMap<String, Sent, BuildHasherDefault<DefaultHasher>>;

fn fingerprint(item: &Item) -> u128 {
    let mut low = DefaultHasher::new();
    item.hash(&mut low);
    let mut high = DefaultHasher::new();
    0x9e37_79b9_7f4a_7c15_u64.hash(&mut high);
    item.hash(&mut high);
    (u128::from(high.finish()) << 64) | u128::from(low.finish())
}

/// Collects a render's output.
///
/// Every item has a key that is stable across renders; the builder derives
/// it from the item's identity (`section:backend:default_web_8080`,
/// `file:maps/hosts.map`, `status:deployed:v1:Pod:ns/name`; snippets by
/// target, slot, priority and a hash of their lines) unless the library
/// gives one ([`snippet_keyed`](Self::snippet_keyed), [`put`](Self::put)).
///
/// By default a render emits its whole output and the SDK sends the host
/// what differs from the previous render. After
/// [`retain_previous`](Self::retain_previous) the previous output is kept
/// and the render only upserts and removes.
#[derive(Debug, Default)]
pub struct Output {
    sent: SentItems,
    render: u64,
    retain: bool,
    upserts: Vec<(String, Item)>,
    removed: Vec<String>,
}

impl Output {
    pub(crate) fn new(sent: SentItems, render: u64) -> Self {
        Self {
            sent,
            render,
            ..Self::default()
        }
    }

    /// Keeps every item of the previous render that this render does not
    /// replace or [`remove`](Self::remove). On a complete render the previous
    /// output is empty, so the library must emit everything.
    pub fn retain_previous(&mut self) {
        self.retain = true;
    }

    /// Adds a whole section, keyed `section:<kind>:<name>`.
    pub fn section(
        &mut self,
        kind: SectionKind,
        name: impl Into<String>,
        body: impl Into<String>,
    ) -> Result<()> {
        self.put_section(kind, name.into(), body.into(), false)
    }

    /// Adds a whole section whose body is secret text, such as a `userlist`
    /// of password hashes. HAProxy needs such text in haproxy.cfg itself
    /// (a userlist cannot come from a file); the host shows each body line
    /// as its first word and `<redacted>` in `haptic render`, fixture
    /// reports, validation errors and logs, and writes haproxy.cfg with
    /// mode 0600 while it holds any. Check hashes with
    /// [`crypt::check_password_hash`](crate::crypt::check_password_hash).
    pub fn secret_section(
        &mut self,
        kind: SectionKind,
        name: impl Into<String>,
        body: impl Into<String>,
    ) -> Result<()> {
        self.put_section(kind, name.into(), body.into(), true)
    }

    fn put_section(
        &mut self,
        kind: SectionKind,
        name: String,
        body: String,
        secret: bool,
    ) -> Result<()> {
        let key = section_key(kind, &name);
        self.put(
            key,
            Item::Section {
                kind,
                name,
                body,
                secret,
            },
        )
    }

    /// Adds lines into a section another library (or this one) defines,
    /// after that section's body. Within `slot`, snippets sort by `priority`
    /// ascending (lower is earlier, negative allowed), then by library order
    /// ([`Info::order`](crate::Info::order), then name), then by key; see
    /// [`crate::extending`] for where the bundled libraries' lines sit. A
    /// target no enabled library defines fails the render.
    pub fn snippet(
        &mut self,
        target_kind: SectionKind,
        target_name: impl Into<String>,
        slot: Slot,
        priority: i32,
        lines: impl Into<String>,
    ) -> Result<()> {
        let target_name = target_name.into();
        let lines = lines.into();
        let mut hasher = DefaultHasher::new();
        lines.hash(&mut hasher);
        let mut key = format!(
            "snippet:{}:{}:{}:{}:{:016x}",
            target_kind.keyword(),
            target_name,
            slot.as_str(),
            priority,
            hasher.finish()
        );
        // Identical snippets are legal; number repeats so each keeps a key.
        let base_len = key.len();
        let mut n = 1;
        while self.emitted(&key) {
            n += 1;
            key.truncate(base_len);
            let _ = write!(key, "~{n}");
        }
        self.put(
            key,
            Item::Snippet {
                target_kind,
                target_name,
                slot,
                priority,
                lines,
                secret: false,
            },
        )
    }

    /// Adds a snippet under a key the library chooses (for example one per
    /// object, so a library in retain mode can replace it).
    pub fn snippet_keyed(
        &mut self,
        key: impl Into<String>,
        target_kind: SectionKind,
        target_name: impl Into<String>,
        slot: Slot,
        priority: i32,
        lines: impl Into<String>,
    ) -> Result<()> {
        self.put(
            key.into(),
            Item::Snippet {
                target_kind,
                target_name: target_name.into(),
                slot,
                priority,
                lines: lines.into(),
                secret: false,
            },
        )
    }

    /// Adds a snippet whose lines are secret text (an `Authorization` value
    /// a backend needs), under a key the library chooses; shown redacted as
    /// for a [`secret_section`](Self::secret_section). Keep other lines in
    /// snippets of their own so they stay readable.
    pub fn secret_snippet(
        &mut self,
        key: impl Into<String>,
        target_kind: SectionKind,
        target_name: impl Into<String>,
        slot: Slot,
        priority: i32,
        lines: impl Into<String>,
    ) -> Result<()> {
        self.put(
            key.into(),
            Item::Snippet {
                target_kind,
                target_name: target_name.into(),
                slot,
                priority,
                lines: lines.into(),
                secret: true,
            },
        )
    }

    /// Asks the host to keep an object applied in the cluster, owned by the
    /// watched object `owner` (for example a Service per Gateway), keyed
    /// `owned:<apiVersion>:<kind>:<name>`. `manifest` holds the fields the
    /// library owns (`spec`, `metadata.labels`, ...); the host adds
    /// apiVersion, kind, name, the owner's namespace and an ownerReference,
    /// server-side applies it under the field manager `haptic-owned`, and
    /// deletes it when no render emits it any more. It never touches an
    /// object of that name it did not create. The kind must be in the plan's
    /// [`applies`](crate::Plan::applies). In `haptic render` and `haptic run`
    /// it is shown or written, not applied.
    pub fn owned_object(
        &mut self,
        owner: &ObjectKey,
        api_version: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
        manifest: &serde_json::Value,
    ) -> Result<()> {
        let (api_version, kind, name) = (api_version.into(), kind.into(), name.into());
        self.put(
            format!("owned:{api_version}:{kind}:{name}"),
            Item::OwnedObject {
                owner: owner.clone(),
                api_version,
                kind,
                name,
                manifest: manifest.to_string(),
            },
        )
    }

    /// Adds an auxiliary file, keyed `file:<path>`.
    pub fn file(&mut self, path: impl Into<String>, content: impl Into<String>) -> Result<()> {
        self.put_file(path.into(), content.into(), false)
    }

    /// Adds a file that holds key material (a certificate with its private
    /// key), keyed `file:<path>`: the host writes it with mode 0600 and never
    /// shows its content in logs, errors or test reports.
    pub fn secret_file(
        &mut self,
        path: impl Into<String>,
        content: impl Into<String>,
    ) -> Result<()> {
        self.put_file(path.into(), content.into(), true)
    }

    fn put_file(&mut self, path: String, content: String, secret: bool) -> Result<()> {
        self.put(
            format!("file:{path}"),
            Item::File {
                path,
                content,
                secret,
            },
        )
    }

    /// Reports a problem with `object` that the library worked around (a
    /// missing TLS Secret served with the default certificate, say). The host
    /// logs it when it first appears or changes and, in a cluster, records a
    /// Kubernetes Event of type Warning on the object. Emit it on every
    /// render while the problem lasts; it is gone when a render no longer
    /// emits it; the same warning emitted twice in a render is kept once.
    /// `reason` is CamelCase (`TLSSecretMissing`); `message` is one
    /// sentence for a person and must never contain key material.
    pub fn warning(
        &mut self,
        object: Option<&ObjectKey>,
        reason: &str,
        message: impl Into<String>,
    ) -> Result<()> {
        let message = message.into();
        let about = object.map_or_else(String::new, |key| {
            format!("{}:{}/{}", key.watch, key.namespace, key.name)
        });
        let mut hash = DefaultHasher::new();
        message.hash(&mut hash);
        let key = format!("warning:{reason}:{about}:{:016x}", hash.finish());
        // The same warning twice in one render (a host listed twice, say)
        // is one warning, not a duplicate key that fails the render.
        if self
            .sent
            .get(&key)
            .is_some_and(|sent| sent.seen == self.render)
        {
            return Ok(());
        }
        self.put(
            key,
            Item::Warning {
                object: object.cloned(),
                reason: reason.to_owned(),
                message,
            },
        )
    }

    /// Adds a status patch, keyed
    /// `status:<variant>:<apiVersion>:<kind>:<namespace>/<name>`. `status`
    /// is serialized here; build it with `serde_json::json!` so keys are
    /// ordered and the output is deterministic.
    pub fn status_patch(
        &mut self,
        variant: StatusVariant,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        status: &serde_json::Value,
    ) -> Result<()> {
        self.status_patch_json(
            variant,
            api_version,
            kind,
            namespace,
            name,
            status.to_string(),
        )
    }

    /// [`status_patch`](Self::status_patch) with `status` already serialized
    /// (a JSON object), for a status shared by many objects.
    pub fn status_patch_json(
        &mut self,
        variant: StatusVariant,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        status: String,
    ) -> Result<()> {
        self.put(
            status_key(variant, api_version, kind, namespace, name),
            Item::StatusPatch {
                variant,
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                status,
            },
        )
    }

    /// Adds any item under an explicit key.
    pub fn put(&mut self, key: String, item: Item) -> Result<()> {
        let fingerprint = fingerprint(&item);
        match self.sent.get_mut(&key) {
            Some(sent) if sent.seen == self.render => return Err(Error::DuplicateKey(key)),
            Some(sent) => {
                sent.seen = self.render;
                if sent.fingerprint == fingerprint {
                    return Ok(());
                }
                sent.fingerprint = fingerprint;
            }
            None => {
                let sent = Sent {
                    fingerprint,
                    seen: self.render,
                    born: self.render,
                };
                self.sent.insert(key.clone(), sent);
            }
        }
        self.upserts.push((key, item));
        Ok(())
    }

    /// Removes an item of the previous render (retain mode).
    pub fn remove(&mut self, key: &str) {
        let Some(sent) = self.sent.remove(key) else {
            return;
        };
        if sent.seen == self.render {
            self.upserts.retain(|(k, _)| k != key);
        }
        // An item born in this render never reached the host.
        if sent.born != self.render {
            self.removed.push(key.to_owned());
        }
    }

    /// Removes a section of the previous render (retain mode).
    pub fn remove_section(&mut self, kind: SectionKind, name: &str) {
        self.remove(&section_key(kind, name));
    }

    /// Removes a status patch of the previous render (retain mode).
    pub fn remove_status_patch(
        &mut self,
        variant: StatusVariant,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) {
        self.remove(&status_key(variant, api_version, kind, namespace, name));
    }

    /// Whether this render already emitted `key`.
    pub fn emitted(&self, key: &str) -> bool {
        self.sent.get(key).is_some_and(|s| s.seen == self.render)
    }

    /// Finishes the render: what was sent, and the delta to send.
    pub(crate) fn finish(mut self, complete: bool) -> (SentItems, Delta) {
        if !self.retain {
            let render = self.render;
            let removed = &mut self.removed;
            self.sent.retain(|key, sent| {
                let keep = sent.seen == render;
                if !keep {
                    removed.push(key.clone());
                }
                keep
            });
        }
        self.removed.sort();
        let delta = Delta {
            complete,
            upserts: self.upserts,
            removals: if complete { Vec::new() } else { self.removed },
        };
        (self.sent, delta)
    }
}

/// The key [`Output::section`] uses.
pub fn section_key(kind: SectionKind, name: &str) -> String {
    format!("section:{}:{name}", kind.keyword())
}

/// The key [`Output::status_patch`] uses.
pub fn status_key(
    variant: StatusVariant,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> String {
    format!(
        "status:{}:{api_version}:{kind}:{namespace}/{name}",
        variant.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(
        previous: SentItems,
        complete: bool,
        f: impl FnOnce(&mut Output),
    ) -> (SentItems, Delta) {
        let render = previous.values().map(|s| s.seen).max().unwrap_or(0) + 1;
        let mut out = Output::new(
            if complete {
                SentItems::default()
            } else {
                previous
            },
            render,
        );
        f(&mut out);
        out.finish(complete)
    }

    fn keys(delta: &Delta) -> Vec<&str> {
        delta.upserts.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn full_mode_sends_only_differences() {
        let (sent, delta) = render(SentItems::default(), true, |out| {
            out.section(SectionKind::Backend, "a", "server a 1.1.1.1:80")
                .unwrap();
            out.section(SectionKind::Backend, "b", "server b 1.1.1.2:80")
                .unwrap();
        });
        assert!(delta.complete);
        assert_eq!(delta.upserts.len(), 2);
        let (_, delta) = render(sent, false, |out| {
            out.section(SectionKind::Backend, "a", "server a 1.1.1.1:80")
                .unwrap();
            out.section(SectionKind::Backend, "c", "").unwrap();
        });
        assert!(!delta.complete);
        assert_eq!(keys(&delta), ["section:backend:c"]);
        assert_eq!(delta.removals, ["section:backend:b"]);
    }

    /// A host listed twice in one Ingress gave the same warning twice and
    /// the duplicate key failed the whole render.
    #[test]
    fn the_same_warning_twice_is_one_warning() {
        let (_, delta) = render(SentItems::default(), true, |out| {
            out.warning(None, "HostNotAllowed", "same").unwrap();
            out.warning(None, "HostNotAllowed", "same").unwrap();
            out.warning(None, "HostNotAllowed", "other").unwrap();
        });
        assert_eq!(delta.upserts.len(), 2);
    }

    #[test]
    fn a_changed_item_is_sent_again() {
        let (sent, _) = render(SentItems::default(), true, |out| {
            out.file("maps/a.map", "x 1\n").unwrap();
        });
        let (_, delta) = render(sent, false, |out| {
            out.file("maps/a.map", "x 2\n").unwrap();
        });
        assert_eq!(keys(&delta), ["file:maps/a.map"]);
        assert!(delta.removals.is_empty());
    }

    #[test]
    fn retain_mode_keeps_untouched_items() {
        let (sent, _) = render(SentItems::default(), true, |out| {
            out.section(SectionKind::Backend, "a", "1").unwrap();
            out.section(SectionKind::Backend, "b", "1").unwrap();
        });
        let (sent, delta) = render(sent, false, |out| {
            out.retain_previous();
            out.section(SectionKind::Backend, "a", "2").unwrap();
        });
        assert_eq!(delta.upserts.len(), 1);
        assert!(delta.removals.is_empty());
        assert_eq!(sent.len(), 2);
        let (sent, delta) = render(sent, false, |out| {
            out.retain_previous();
            out.remove_section(SectionKind::Backend, "b");
        });
        assert_eq!(delta.removals, ["section:backend:b"]);
        assert_eq!(sent.len(), 1);
    }

    #[test]
    fn an_item_added_and_removed_in_one_render_is_not_sent() {
        let (sent, _) = render(SentItems::default(), true, |out| {
            out.section(SectionKind::Backend, "a", "1").unwrap();
        });
        let (_, delta) = render(sent, false, |out| {
            out.retain_previous();
            out.section(SectionKind::Backend, "new", "1").unwrap();
            out.remove_section(SectionKind::Backend, "new");
            out.section(SectionKind::Backend, "a", "2").unwrap();
            out.remove_section(SectionKind::Backend, "a");
        });
        assert!(delta.upserts.is_empty());
        assert_eq!(delta.removals, ["section:backend:a"]);
    }

    #[test]
    fn duplicate_sections_are_an_error_and_duplicate_snippets_are_not() {
        let mut out = Output::new(SentItems::default(), 1);
        out.section(SectionKind::Frontend, "http", "").unwrap();
        assert!(matches!(
            out.section(SectionKind::Frontend, "http", ""),
            Err(Error::DuplicateKey(_))
        ));
        out.snippet(
            SectionKind::Frontend,
            "http",
            Slot::Acls,
            0,
            "acl x always_true",
        )
        .unwrap();
        out.snippet(
            SectionKind::Frontend,
            "http",
            Slot::Acls,
            0,
            "acl x always_true",
        )
        .unwrap();
        let (sent, delta) = out.finish(true);
        assert_eq!(sent.len(), 3);
        assert_eq!(delta.upserts.len(), 3);
    }
}

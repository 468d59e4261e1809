//! The host's own view of the template-library contract, independent of the
//! WIT version a component was built against. Bindings for each supported
//! version convert into these types.

use std::fmt;
use std::sync::Arc;

/// A set of Kubernetes objects a library wants to see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watch {
    pub name: String,
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    /// Contract 0.2.0 and later; always `None` for 0.1.0 libraries.
    pub field_selector: Option<String>,
    pub ignore_fields: Vec<String>,
}

/// What a library says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryInfo {
    pub name: String,
    pub version: String,
    pub order: u32,
    /// Default values, a JSON object.
    pub default_values: serde_json::Value,
}

/// What a configured library needs from the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub watches: Vec<Watch>,
    /// `apiVersion/kind` of objects whose status the library patches.
    pub patches_status_of: Vec<String>,
    /// `apiVersion/kind` of objects the library asks the host to apply
    /// (contract 0.3.0; empty before).
    pub applies: Vec<String>,
}

/// Identifies one watched object within one library.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub watch: String,
    pub namespace: String,
    pub name: String,
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

/// One watched object as JSON, already trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub key: ObjectKey,
    pub resource_version: String,
    pub json: String,
}

/// A change to a library's set of objects since its previous render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Applied(Object),
    Deleted(ObjectKey),
}

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
    /// The keyword that opens such a section in haproxy.cfg.
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

/// A whole configuration section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub kind: SectionKind,
    pub name: String,
    pub body: String,
    /// The body holds secret text: shown redacted, haproxy.cfg written 0600
    /// (contract 0.3.0; false before).
    pub secret: bool,
}

/// Where a snippet's lines go within their target section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Slot {
    Acls,
    RequestRules,
    ResponseRules,
    Routing,
    Other,
}

/// Lines added into a section some library defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    pub target_kind: SectionKind,
    pub target_name: String,
    pub slot: Slot,
    pub priority: i32,
    pub lines: String,
    /// The lines hold secret text (contract 0.3.0; false before).
    pub secret: bool,
}

/// A file written next to haproxy.cfg (path relative to its directory).
#[derive(Clone, PartialEq, Eq)]
pub struct AuxFile {
    pub path: String,
    pub content: String,
    /// Holds key material: written 0600, never shown. Set by
    /// [`AuxFile::new`] for any content with a PEM private key, whatever the
    /// library said.
    pub secret: bool,
}

impl AuxFile {
    pub fn new(path: String, content: String, declared_secret: bool) -> Self {
        let secret = declared_secret || crate::tls::holds_private_key(&content);
        Self {
            path,
            content,
            secret,
        }
    }
}

impl fmt::Debug for AuxFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("AuxFile");
        debug.field("path", &self.path);
        if self.secret {
            debug.field(
                "content",
                &format_args!("<{} bytes redacted>", self.content.len()),
            );
        } else {
            debug.field("content", &self.content);
        }
        debug.field("secret", &self.secret).finish()
    }
}

/// A problem with the input that a library worked around (contract 0.2.0).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Warning {
    pub object: Option<ObjectKey>,
    /// CamelCase, e.g. `TLSSecretMissing`.
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusVariant {
    Rendered,
    Deployed,
    RenderFailed,
    DeployFailed,
}

impl StatusVariant {
    pub const ALL: [StatusVariant; 4] = [
        Self::Rendered,
        Self::Deployed,
        Self::RenderFailed,
        Self::DeployFailed,
    ];

    /// Kebab-case name, as in the WIT contract and output directories.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rendered => "rendered",
            Self::Deployed => "deployed",
            Self::RenderFailed => "render-failed",
            Self::DeployFailed => "deploy-failed",
        }
    }

    /// The server-side-apply field manager that writes this variant.
    pub fn field_manager(self) -> &'static str {
        match self {
            Self::Rendered => "haptic-rendered",
            Self::Deployed => "haptic-deployed",
            Self::RenderFailed => "haptic-render-failed",
            Self::DeployFailed => "haptic-deploy-failed",
        }
    }
}

/// An apiVersion and kind (`networking.k8s.io/v1` `Ingress`): what a watch
/// names, what the controller runs one watcher for, what ingest trims by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind {
    pub api_version: String,
    pub kind: String,
}

impl Kind {
    pub fn new(api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    /// The kind `watch` names.
    pub fn of_watch(watch: &Watch) -> Self {
        Self::new(&watch.api_version, &watch.kind)
    }

    /// The kind of the object `reference` names.
    pub fn of_object(reference: &ObjectRef) -> Self {
        Self::new(&reference.api_version, &reference.kind)
    }

    /// Whether `reference` names an object of this kind.
    pub fn is_kind_of(&self, reference: &ObjectRef) -> bool {
        self.api_version == reference.api_version && self.kind == reference.kind
    }
}

impl fmt::Display for Kind {
    /// `Kind (apiVersion)`, as logs and errors name a kind.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.kind, self.api_version)
    }
}

/// Identifies an object in the cluster: what a status patch is for and
/// what the render core's cluster view is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    /// `Kind namespace/name` (`Kind name` when cluster-scoped), as errors
    /// and logs name an object.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// A server-side-apply patch of an object's `status`, checked once where it
/// crosses the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPatch {
    pub variant: StatusVariant,
    pub object: ObjectRef,
    /// The JSON object applied as `status`.
    pub status: PatchStatus,
}

/// The JSON object a status patch applies, held as its compact text with
/// the one structural fact the host asks of it (the condition types it
/// sets) taken out when it is made. A render at 10,000 gated pods holds
/// 9,909 patches: parsed (`serde_json::Map`) they took 16.1 MiB, as text
/// 2.6 MiB (`make bench`, docs/performance.md); the few consumers that
/// need the value (a status write, a comparison with the cluster's status)
/// parse one patch at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchStatus {
    /// Compact JSON of an object. Serialised from a `serde_json::Map`,
    /// whose keys are sorted, so equal objects have equal text.
    text: Box<str>,
    /// The `type` of every entry of `conditions`, in order.
    condition_types: Box<[Box<str>]>,
}

impl PatchStatus {
    pub fn new(status: &serde_json::Map<String, serde_json::Value>) -> Self {
        let condition_types = status
            .get("conditions")
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|condition| condition.get("type")?.as_str())
            .map(Box::from)
            .collect();
        Self {
            // Serialized as the map itself, not a cloned `Value` of it (one
            // deep copy per patch, 9,909 of them in a full render); the text
            // is the same. Serializing a map cannot fail: its keys are strings.
            text: serde_json::to_string(status)
                .unwrap_or_default()
                .into_boxed_str(),
            condition_types,
        }
    }

    /// The object, parsed from its text.
    pub fn to_map(&self) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::from_str(&self.text) {
            Ok(serde_json::Value::Object(map)) => map,
            // `text` is always serialised from an object by `new`.
            _ => unreachable!("a PatchStatus holds the text of a JSON object"),
        }
    }

    /// The object as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::Value::Object(self.to_map())
    }

    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the patch sets a condition of this type.
    pub fn sets_condition(&self, condition_type: &str) -> bool {
        self.condition_types
            .iter()
            .any(|set| &**set == condition_type)
    }
}

/// An object the library asks the host to apply in the cluster, owned by a
/// watched object (contract 0.3.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedObject {
    /// The watched object that owns it; the object lives in its namespace.
    pub owner: ObjectKey,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    /// The fields the library owns, a JSON object.
    pub manifest: String,
}

/// One piece of a library's output. Shared, so the host keeps an item that
/// did not change without copying it and can tell by identity that a cached
/// piece of configuration is still valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Section(Arc<Section>),
    Snippet(Arc<Snippet>),
    File(Arc<AuxFile>),
    StatusPatch(Arc<StatusPatch>),
    Warning(Arc<Warning>),
    OwnedObject(Arc<OwnedObject>),
}

/// The result of one render call: a whole output or a delta.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderOutput {
    pub complete: bool,
    pub upserts: Vec<(String, Item)>,
    pub removals: Vec<String>,
}

/// A library's own account of why it could not render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestError {
    pub message: String,
    pub object: Option<ObjectKey>,
}

impl fmt::Display for GuestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.object {
            Some(object) => write!(f, "{object}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

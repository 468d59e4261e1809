//! What a library watches: its plan, and each watch's objects, selectors
//! and the type its objects are parsed into.

use std::any::{Any, TypeId};
use std::fmt;

use serde::de::DeserializeOwned;

/// A library's answer to a set of values: what it watches.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The watches, each with a unique name.
    pub watches: Vec<Watch>,
    /// `apiVersion/kind` of objects whose status the library patches.
    pub patches_status_of: Vec<String>,
    /// `apiVersion/kind` of objects the library asks the host to apply
    /// ([`Output::owned_object`](crate::Output::owned_object)).
    pub applies: Vec<String>,
}

impl Plan {
    /// Adds a watch.
    #[must_use]
    pub fn watch(mut self, watch: Watch) -> Self {
        self.watches.push(watch);
        self
    }

    /// Declares that the library patches the status of `api_version/kind`.
    #[must_use]
    pub fn patches_status_of(mut self, api_version: &str, kind: &str) -> Self {
        self.patches_status_of.push(format!("{api_version}/{kind}"));
        self
    }

    /// Declares that the library asks the host to apply objects of
    /// `api_version/kind` (a Service per Gateway): the host checks it may
    /// create, patch, list and delete them, and finds the ones it applied
    /// before a restart. Secrets may not be applied.
    #[must_use]
    pub fn applies(mut self, api_version: &str, kind: &str) -> Self {
        self.applies.push(format!("{api_version}/{kind}"));
        self
    }
}

/// Parses one object's JSON into the watch's declared type.
pub(crate) type Parser = fn(&str) -> std::result::Result<Box<dyn Any>, serde_json::Error>;

fn parse_as<T: DeserializeOwned + 'static>(
    json: &str,
) -> std::result::Result<Box<dyn Any>, serde_json::Error> {
    Ok(Box::new(serde_json::from_str::<T>(json)?))
}

/// A set of Kubernetes objects a library wants to see, and the Rust type
/// each object is parsed into (once per resourceVersion).
///
/// # Which objects a watch gets
///
/// One rule decides it everywhere, the `haptic-selectors` crate: in a
/// cluster (after the API server's own filtering), in `haptic render` and
/// `haptic test` over manifest files, and in [`crate::testing::Harness`].
/// An object matches when it has the watch's apiVersion and kind, is in its
/// namespace (none: every namespace), and matches its label and field
/// selectors. Objects read from files get the API server's defaults first,
/// for every defaulted field a field selector can name: a Secret without
/// `type` is `Opaque`, a Pod without `spec.restartPolicy` is `Always` (the
/// table is `haptic_selectors::defaults::DEFAULTS`).
///
/// # What it costs in a cluster, and the RBAC it needs
///
/// The controller runs one list and one watch per apiVersion/kind, shared
/// by every enabled library's watches of that kind. When they all name the
/// same namespace, label selector and field selector, the API server is
/// asked for exactly that; where they differ, that part of the request is
/// dropped and the host filters per library. So a library watching
/// `type=kubernetes.io/tls` Secrets beside another watching
/// `type=Opaque` Secrets (or every Secret) makes the controller list and
/// watch every Secret, and with different namespaces every namespace:
/// memory and API-server load grow with all Secrets of the cluster, though
/// each library still sees only its own. RBAC cannot grant by selector:
/// any watch of a kind needs `list` and `watch` on that resource (a
/// ClusterRole when the shared scope is every namespace, which is the case
/// whenever the watches' namespaces differ or one names none); add them
/// for a custom library with its `customLibraries[].rbac` rules in the chart.
///
/// Watching every Opaque Secret is the common case of this: the bundled
/// `ingress` library watches `type=kubernetes.io/tls` Secrets in every
/// namespace while TLS is on (the default), so a `type=Opaque` watch beside
/// it makes the controller list and watch **every Secret of the cluster**
/// (one watcher, no field selector) and hold each in memory, trimmed only
/// of the fields both watches ignore; each library still sees its own. The
/// chart's ClusterRole already grants `get`, `list` and `watch` on
/// `secrets` cluster-wide then. With TLS off
/// (`controller.templateLibraries.ingress.tls.enabled: false`)
/// the controller lists only what the library asks for, and the library
/// needs `rbac: [{apiGroups: [""], resources: [secrets], verbs: [get, list,
/// watch]}]` in its `customLibraries` entry (RBAC has no per-type grant, so
/// that is every Secret either way). A namespace or label selector on the
/// library's watch narrows what the controller lists only while no other
/// watch of Secrets differs from it (with TLS off).
#[derive(Clone)]
pub struct Watch {
    /// Unique within the library, e.g. `endpointslices`.
    pub name: String,
    /// e.g. `discovery.k8s.io/v1`.
    pub api_version: String,
    /// e.g. `EndpointSlice`.
    pub kind: String,
    /// Only this namespace; `None` for all.
    pub namespace: Option<String>,
    /// A label selector such as `app=web,tier!=cache`.
    pub label_selector: Option<String>,
    /// A field selector such as `type=kubernetes.io/tls`, evaluated by the
    /// API server, and by the host where watches of the kind differ (see
    /// [which objects a watch gets](Watch#which-objects-a-watch-gets)).
    pub field_selector: Option<String>,
    /// Dotted paths removed by the host before the object reaches the library.
    pub ignore_fields: Vec<String>,
    pub(crate) parser: Parser,
    pub(crate) type_id: TypeId,
    pub(crate) type_name: &'static str,
    pub(crate) lazy: bool,
    pub(crate) strict: bool,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("name", &self.name)
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("namespace", &self.namespace)
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("ignore_fields", &self.ignore_fields)
            .field("type", &self.type_name)
            .field("lazy", &self.lazy)
            .field("strict", &self.strict)
            .finish()
    }
}

impl Watch {
    /// Watches every object of `api_version`/`kind`, parsed as
    /// [`serde_json::Value`] until [`parse_as`](Self::parse_as) says otherwise.
    /// `metadata.managedFields` is dropped by default.
    pub fn new(
        name: impl Into<String>,
        api_version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            ignore_fields: vec!["metadata.managedFields".to_owned()],
            parser: parse_as::<serde_json::Value>,
            type_id: TypeId::of::<serde_json::Value>(),
            type_name: std::any::type_name::<serde_json::Value>(),
            lazy: false,
            strict: false,
        }
    }

    /// Parses each object as `T` (a k8s-openapi type, or a small serde struct
    /// for kinds trimmed with [`ignore_fields`](Self::ignore_fields)).
    #[must_use]
    pub fn parse_as<T: DeserializeOwned + 'static>(mut self) -> Self {
        self.parser = parse_as::<T>;
        self.type_id = TypeId::of::<T>();
        self.type_name = std::any::type_name::<T>();
        self
    }

    /// Parses each object on first access instead of on arrival, for a
    /// watch whose objects are mostly never read (the pods of ready
    /// endpoints, say): a performance option. An object that then fails to
    /// parse is logged and reads as absent.
    ///
    /// Without it an object is parsed on arrival, and one that does not
    /// parse as the watch's type (an Ingress the API server accepted but
    /// k8s-openapi refuses) is left out of the library's view: the SDK
    /// emits a warning `ObjectUnreadable` naming it (the host logs it and
    /// records an Event on it) and the rest of the render goes on. The
    /// warning goes away when the object is fixed or deleted.
    /// [`strict`](Self::strict) fails the render instead.
    #[must_use]
    pub fn lazy(mut self) -> Self {
        self.lazy = true;
        self
    }

    /// Fails every render while an object of this watch does not parse,
    /// instead of leaving it out with a warning: for a watch where a
    /// missing object would make the configuration wrong rather than
    /// smaller. The last good configuration stays deployed meanwhile.
    #[must_use]
    pub fn strict(mut self) -> Self {
        self.strict = true;
        self
    }

    /// Only objects in `namespace`.
    #[must_use]
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects matching a label selector.
    #[must_use]
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects matching a field selector, e.g. `type=kubernetes.io/tls`
    /// for TLS Secrets. The API server filters, so other objects never cost
    /// the host memory unless another library watches the kind with a
    /// different selector ([what that costs](Watch#what-it-costs-in-a-cluster-and-the-rbac-it-needs));
    /// which fields a kind supports is the API server's (Secrets: `type`,
    /// `metadata.name`, `metadata.namespace`). A field an object lacks reads
    /// as the API server's default for it (a Secret without `type` is
    /// `Opaque`).
    #[must_use]
    pub fn field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Also drops these dotted paths before the object is stored.
    #[must_use]
    pub fn ignore_fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.ignore_fields
            .extend(fields.into_iter().map(Into::into));
        self
    }
}

//! The Kubernetes source: one kube-runtime watcher per kind the enabled
//! libraries watch, feeding the render loop deltas.
//!
//! Watches of one kind share a watcher: its namespace and label selector
//! are the libraries' own when they all agree, else the wider one (every
//! namespace, no selector) and the store filters per library. Objects are
//! trimmed before they are stored by the fields every watch of the kind
//! ignores, so a cluster-wide Pod watch holds only what the gate's rule reads.
//!
//! A watcher's (re-)list is buffered until it completes and then delivered
//! as one [`ClusterChange::Relisted`], so the store replaces the kind's
//! objects at once and derives the deletions a reconnect may have missed.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use thiserror::Error;
use tokio::sync::mpsc;

use super::{SourceEvent, WatchTarget};
use crate::render::{ClusterChange, ClusterObject, IngestTrim, ObjectRef};

/// Starts a watcher per target on the current runtime. Errors (a missing
/// RBAC rule, an unknown kind, a dropped connection) are logged naming the
/// kind and retried with backoff; the store keeps what it had.
pub fn spawn(
    client: kube::Client,
    targets: &[WatchTarget],
    events: mpsc::UnboundedSender<SourceEvent>,
) -> Vec<tokio::task::JoinHandle<()>> {
    targets
        .iter()
        .cloned()
        .enumerate()
        .map(|(index, target)| tokio::spawn(run(client.clone(), index, target, events.clone())))
        .collect()
}

async fn run(
    client: kube::Client,
    index: usize,
    target: WatchTarget,
    events: mpsc::UnboundedSender<SourceEvent>,
) {
    let (group, version) = match target.api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", target.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &target.kind);
    // Resolving the resource (its plural, for custom resources too) needs
    // discovery; retry until it answers, as a CRD may be installed later.
    let resource = loop {
        match kube::discovery::pinned_kind(&client, &gvk).await {
            Ok((resource, _)) => break resource,
            Err(error) => {
                tracing::error!(watch = %target.describe(), %error, "cannot resolve the kind; is its CRD installed? retrying in 10 s");
                tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            }
        }
    };
    let api: Api<DynamicObject> = match &target.namespace {
        Some(namespace) => Api::namespaced_with(client, namespace, &resource),
        None => Api::all_with(client, &resource),
    };
    // kube's pages of 500: pages of 2,000 listed TestScale's 10,000 pods
    // no faster here (medians of 5 within noise, `make bench-scale`'s floor
    // lines) and raised the controller's peak from 164 to 213 MiB (n=1), as every
    // page sits whole and untrimmed in memory until taken in.
    let mut config = watcher::Config::default().any_semantic();
    if let Some(selector) = &target.label_selector {
        config = config.labels(selector);
    }
    if let Some(selector) = &target.field_selector {
        config = config.fields(selector);
    }
    let mut listing = Listing {
        trim: Arc::clone(&target.trim),
        resource: resource.clone(),
        batch: config
            .page_size
            .and_then(|size| usize::try_from(size).ok())
            .unwrap_or(500),
        page: Vec::new(),
        stored: Vec::new(),
    };
    let stream = watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let trim = IngestTrim::new(&target.trim);
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(watch = %target.describe(), %error, "watch failed; retrying (a 403 means the controller's RBAC lacks get/list/watch on it)");
                continue;
            }
        };
        let (changes, listed) = match event {
            watcher::Event::Init => {
                listing.clear();
                continue;
            }
            watcher::Event::InitApply(object) => {
                listing.push(object);
                continue;
            }
            watcher::Event::InitDone => (
                vec![ClusterChange::Relisted {
                    api_version: target.api_version.clone(),
                    kind: target.kind.clone(),
                    objects: listing.finish(&target).await,
                }],
                true,
            ),
            watcher::Event::Apply(object) => (
                stored(&trim, &resource, object)
                    .map(ClusterChange::Applied)
                    .into_iter()
                    .collect(),
                false,
            ),
            watcher::Event::Delete(object) => (
                vec![ClusterChange::Deleted(ObjectRef {
                    api_version: target.api_version.clone(),
                    kind: target.kind.clone(),
                    namespace: object.metadata.namespace.unwrap_or_default(),
                    name: object.metadata.name.unwrap_or_default(),
                })],
                false,
            ),
        };
        let event = SourceEvent {
            target: index,
            changes,
            listed,
        };
        if events.send(event).is_err() {
            return;
        }
    }
}

/// A (re-)list being taken in. Its objects are stored a page at a time on
/// the blocking pool: kube's watcher asks for the next page only once this
/// one is consumed, so the API server prepares it while this one is
/// trimmed, instead of each waiting on the other (TestScale's 10,000 pods
/// are the seed's longest list).
struct Listing {
    trim: Arc<[String]>,
    resource: ApiResource,
    /// Objects per batch: the watcher's page size.
    batch: usize,
    page: Vec<DynamicObject>,
    stored: Vec<tokio::task::JoinHandle<Vec<ClusterObject>>>,
}

impl Listing {
    fn push(&mut self, object: DynamicObject) {
        self.page.push(object);
        if self.page.len() >= self.batch {
            self.store_page();
        }
    }

    fn store_page(&mut self) {
        if self.page.is_empty() {
            return;
        }
        let page = std::mem::take(&mut self.page);
        let trim = Arc::clone(&self.trim);
        let resource = self.resource.clone();
        self.stored.push(tokio::task::spawn_blocking(move || {
            let trim = IngestTrim::new(&trim);
            page.into_iter()
                .filter_map(|object| stored(&trim, &resource, object))
                .collect()
        }));
    }

    /// Every object listed, in the order listed.
    async fn finish(&mut self, target: &WatchTarget) -> Vec<ClusterObject> {
        self.store_page();
        let mut objects = Vec::new();
        for batch in std::mem::take(&mut self.stored) {
            match batch.await {
                Ok(batch) => objects.extend(batch),
                // Only a panic in `stored` gets here, a defect: it ends the
                // watch as it did before pages were stored apart. A partial
                // list must never reach the store, which would take every
                // object missing from it for deleted.
                Err(error) => {
                    tracing::error!(watch = %target.describe(), %error, "storing a page of listed objects panicked");
                    std::panic::resume_unwind(error.into_panic());
                }
            }
        }
        objects
    }

    /// A new list starts: what the last one took in is dropped.
    fn clear(&mut self) {
        self.page.clear();
        for batch in self.stored.drain(..) {
            batch.abort();
        }
    }
}

/// Clears one field of an object's metadata.
type ClearMetadata = fn(&mut ObjectMeta);

/// The metadata fields a trim may drop before they become JSON. Not the
/// name, namespace, resourceVersion or labels: the stored form's identity
/// and the label selectors read them before the trim applies.
const DROPPABLE_METADATA: &[(&str, ClearMetadata)] = &[
    ("metadata.managedFields", |m| m.managed_fields = None),
    ("metadata.annotations", |m| m.annotations = None),
    ("metadata.ownerReferences", |m| m.owner_references = None),
    ("metadata.finalizers", |m| m.finalizers = None),
    ("metadata.generateName", |m| m.generate_name = None),
    ("metadata.generation", |m| m.generation = None),
    ("metadata.creationTimestamp", |m| {
        m.creation_timestamp = None
    }),
    ("metadata.deletionTimestamp", |m| {
        m.deletion_timestamp = None
    }),
    ("metadata.deletionGracePeriodSeconds", |m| {
        m.deletion_grace_period_seconds = None
    }),
    ("metadata.selfLink", |m| m.self_link = None),
    ("metadata.uid", |m| m.uid = None),
];

/// Why [`list_once`] failed.
#[derive(Debug, Error)]
pub enum ListError {
    /// No Kubernetes client (kubeconfig or in-cluster account).
    #[error("connecting to the Kubernetes API (KUBECONFIG or the in-cluster service account): {0}")]
    Client(#[source] kube::Error),
    /// A kind the libraries watch is unknown to the API server.
    #[error("resolving {kind}: {source} (is its CRD installed?)")]
    Resolve {
        kind: String,
        #[source]
        source: kube::Error,
    },
    /// Listing a kind failed.
    #[error("listing {watch}: {source} (a 403 means your account may not list them)")]
    List {
        watch: String,
        #[source]
        source: kube::Error,
    },
}

/// Lists every target once, as a watch's first list sees it, for a one-off
/// render of a live cluster (`haptic migrate report --cluster`): read only.
pub async fn list_once(targets: &[WatchTarget]) -> Result<Vec<ClusterChange>, ListError> {
    let client = kube::Client::try_default()
        .await
        .map_err(ListError::Client)?;
    let mut changes = Vec::new();
    for target in targets {
        let (group, version) = match target.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", target.api_version.as_str()),
        };
        let gvk = GroupVersionKind::gvk(group, version, &target.kind);
        let (resource, _) =
            kube::discovery::pinned_kind(&client, &gvk)
                .await
                .map_err(|source| ListError::Resolve {
                    kind: target.describe(),
                    source,
                })?;
        let api: Api<DynamicObject> = match &target.namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let mut params = kube::api::ListParams::default();
        if let Some(selector) = &target.label_selector {
            params = params.labels(selector);
        }
        if let Some(selector) = &target.field_selector {
            params = params.fields(selector);
        }
        let list = api.list(&params).await.map_err(|source| ListError::List {
            watch: target.describe(),
            source,
        })?;
        let trim = IngestTrim::new(&target.trim);
        changes.push(ClusterChange::Relisted {
            api_version: target.api_version.clone(),
            kind: target.kind.clone(),
            objects: list
                .items
                .into_iter()
                .filter_map(|object| stored(&trim, &resource, object))
                .collect(),
        });
    }
    Ok(changes)
}

/// The stored form: apiVersion and kind set (list items come without them),
/// trimmed by `trim`, the watch's. The object's fields are moved into the
/// value, not copied, and the metadata fields the trim removes whole are
/// dropped before the metadata becomes a JSON value: at ingest every object
/// of a large list passes here, and `managedFields` is most of a pod's
/// metadata.
pub fn stored(
    trim: &IngestTrim<'_>,
    resource: &ApiResource,
    object: DynamicObject,
) -> Option<ClusterObject> {
    let DynamicObject {
        mut metadata, data, ..
    } = object;
    for (path, clear) in DROPPABLE_METADATA {
        if trim.removes(path) {
            clear(&mut metadata);
        }
    }
    let mut fields = match data {
        serde_json::Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    fields.insert("metadata".into(), serde_json::to_value(metadata).ok()?);
    fields.insert(
        "apiVersion".into(),
        serde_json::Value::String(resource.api_version.clone()),
    );
    fields.insert(
        "kind".into(),
        serde_json::Value::String(resource.kind.clone()),
    );
    ClusterObject::trimmed_by(&serde_json::Value::Object(fields), trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every Pod, in every namespace, with `trim` dropped.
    fn every_pod(trim: &[&str]) -> WatchTarget {
        WatchTarget {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            trim: trim.iter().map(|path| (*path).to_owned()).collect(),
        }
    }

    #[test]
    fn a_listed_object_is_stored_with_its_kind_and_without_trimmed_fields() {
        let target = every_pod(&["metadata.managedFields", "metadata.ownerReferences", "spec"]);
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        // As a list item arrives: no apiVersion or kind.
        let object = |body| -> DynamicObject { serde_json::from_value(body).unwrap() };
        let pod = serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "shop", "resourceVersion": "7",
                         "labels": {"app": "web"}, "managedFields": [{"manager": "kubelet"}],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web-5d", "uid": "u1"}],
                         "annotations": {"team": "shop"}},
            "spec": {"nodeName": "n1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        // A watch that reads managedFields keeps them.
        let untrimmed = Arc::from(Vec::new());
        let whole =
            stored(&IngestTrim::new(&untrimmed), &resource, object(pod.clone())).expect("stored");
        let whole: serde_json::Value = serde_json::from_str(whole.json()).unwrap();
        assert_eq!(whole["metadata"]["managedFields"][0]["manager"], "kubelet");
        assert_eq!(whole["spec"]["nodeName"], "n1");
        let stored =
            stored(&IngestTrim::new(&target.trim), &resource, object(pod)).expect("stored");
        assert_eq!(stored.reference.kind, "Pod");
        assert_eq!(stored.reference.api_version, "v1");
        assert_eq!(stored.reference.namespace, "shop");
        assert_eq!(stored.resource_version, "7");
        let json: serde_json::Value = serde_json::from_str(stored.json()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "shop", "resourceVersion": "7",
                             "labels": {"app": "web"}, "annotations": {"team": "shop"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}
            })
        );
    }

    /// A listing taken in page by page on the blocking pool hands over every
    /// object once, in the order listed and trimmed; a list that restarts
    /// drops what its predecessor took in.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_listing_keeps_every_page_in_order_and_a_restart_drops_the_old_one() {
        let target = every_pod(&["spec"]);
        let pod = |name: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "shop", "resourceVersion": "1"},
                "spec": {"nodeName": "n1"}
            }))
            .expect("a pod")
        };
        let mut listing = Listing {
            trim: Arc::clone(&target.trim),
            resource: ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
            batch: 3,
            page: Vec::new(),
            stored: Vec::new(),
        };
        let names = |objects: &[ClusterObject]| -> Vec<String> {
            objects.iter().map(|o| o.reference.name.clone()).collect()
        };

        // Seven objects: two full pages and one partial, stored apart.
        for i in 0..7 {
            listing.push(pod(&format!("web-{i}")));
        }
        assert_eq!(
            listing.stored.len(),
            2,
            "full pages go to the blocking pool"
        );
        let objects = listing.finish(&target).await;
        assert_eq!(
            names(&objects),
            (0..7).map(|i| format!("web-{i}")).collect::<Vec<_>>()
        );
        assert!(
            objects.iter().all(|o| !o.json().contains("nodeName")),
            "the watch's trim applies to every page"
        );

        // A re-list that restarts midway keeps only what follows the restart.
        for i in 0..4 {
            listing.push(pod(&format!("old-{i}")));
        }
        listing.clear();
        listing.push(pod("new-0"));
        assert_eq!(names(&listing.finish(&target).await), ["new-0"]);
    }
}

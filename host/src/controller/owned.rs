//! Applies the owned objects of accepted renders (see [`crate::owned`]) and
//! removes the ones no render asks for any more. Leader only, off the
//! deploy path (the status task calls it for each `rendered` candidate).
//!
//! "Never an object the host did not create" is checked on the object
//! itself, not on memory: before each apply and each delete the applier
//! reads the object, and one without both the host's field manager
//! (`haptic-owned` in `metadata.managedFields`) and the
//! `haproxy-haptic.org/owned-by` label is left untouched and reported.
//! The same two marks let a restarted controller find what it applied
//! earlier (a list by label per planned kind), so an object the libraries
//! stopped asking for while no controller ran is still removed.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;
use thiserror::Error;

use crate::owned::{DesiredObject, FIELD_MANAGER, OWNED_BY_LABEL, display};
use crate::render::ObjectRef;

/// Why an owned object was not applied or removed.
#[derive(Debug, Error)]
pub enum OwnedApplyError {
    /// An object of that name exists and the host did not create it.
    #[error(
        "{object} already exists and haptic did not create it (it lacks the `{FIELD_MANAGER}` field manager and the `{OWNED_BY_LABEL}` label); library `{library}` asked for it for {owner}, and haptic leaves it untouched. Delete or rename that object, or have the library choose another name"
    )]
    Foreign {
        object: String,
        owner: String,
        library: String,
    },
    /// The API server does not serve the kind.
    #[error(
        "the API server does not serve `{kind}` ({source}); install its CRD or disable the library"
    )]
    UnknownKind {
        kind: String,
        #[source]
        source: Box<kube::Error>,
    },
    /// The API server refused a request (RBAC, schema, a missing namespace).
    #[error("{action} {object}: {message} ({code})")]
    Refused {
        action: &'static str,
        object: String,
        message: String,
        code: u16,
    },
    /// A request got no answer.
    #[error("{action} {object}: {source}")]
    Request {
        action: &'static str,
        object: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// What one [`OwnedApplier::reconcile`] did.
#[derive(Debug, Default)]
pub struct OwnedReport {
    pub applied: usize,
    pub unchanged: usize,
    pub deleted: usize,
    pub failed: Vec<OwnedApplyError>,
}

/// Keeps the cluster's owned objects as the latest accepted render asks.
pub struct OwnedApplier {
    client: kube::Client,
    /// What this process applied (or found applied) and still holds, with
    /// the manifest last applied (`Null` when found after a restart).
    applied: BTreeMap<ObjectRef, Value>,
    /// Kinds (`apiVersion/kind`) already searched for earlier objects.
    swept: BTreeSet<String>,
    resources: HashMap<String, (ApiResource, Scope)>,
}

impl OwnedApplier {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            applied: BTreeMap::new(),
            swept: BTreeSet::new(),
            resources: HashMap::new(),
        }
    }

    /// Applies `desired` and deletes what the host applied before and no
    /// longer desires. `kinds` are the kinds every enabled library's plan
    /// applies: each is searched once for objects applied before a restart.
    pub async fn reconcile(&mut self, desired: &[DesiredObject], kinds: &[String]) -> OwnedReport {
        let mut report = OwnedReport::default();
        let mut all_kinds: BTreeSet<String> = kinds.iter().cloned().collect();
        all_kinds.extend(desired.iter().map(|object| kind_of(&object.reference)));
        for kind in all_kinds {
            if self.swept.contains(&kind) {
                continue;
            }
            match self.sweep(&kind).await {
                Ok(()) => {
                    self.swept.insert(kind);
                }
                Err(error) => report.failed.push(error),
            }
        }
        let wanted: BTreeSet<&ObjectRef> = desired.iter().map(|d| &d.reference).collect();
        for object in desired {
            if self.applied.get(&object.reference) == Some(&object.manifest) {
                report.unchanged += 1;
                continue;
            }
            match self.apply(object).await {
                Ok(()) => {
                    report.applied += 1;
                    self.applied
                        .insert(object.reference.clone(), object.manifest.clone());
                }
                Err(error) => report.failed.push(error),
            }
        }
        let gone: Vec<ObjectRef> = self
            .applied
            .keys()
            .filter(|reference| !wanted.contains(reference))
            .cloned()
            .collect();
        for reference in gone {
            match self.delete(&reference).await {
                Ok(deleted) => {
                    report.deleted += usize::from(deleted);
                    self.applied.remove(&reference);
                }
                Err(error) => report.failed.push(error),
            }
        }
        report
    }

    /// Finds objects of `kind` a previous run applied.
    async fn sweep(&mut self, kind: &str) -> Result<(), OwnedApplyError> {
        let (resource, _) = self.resource(kind).await?;
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let list = api
            .list(&ListParams::default().labels(OWNED_BY_LABEL))
            .await
            .map_err(|error| request_error("listing", kind.to_owned(), error))?;
        for object in list.items.iter().filter(|object| is_ours(object)) {
            let reference = ObjectRef {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
                namespace: object.metadata.namespace.clone().unwrap_or_default(),
                name: object.metadata.name.clone().unwrap_or_default(),
            };
            self.applied.entry(reference).or_insert(Value::Null);
        }
        Ok(())
    }

    async fn apply(&mut self, object: &DesiredObject) -> Result<(), OwnedApplyError> {
        let api = self.api(&object.reference).await?;
        let name = object.reference.name.as_str();
        let shown = display(&object.reference);
        match api.get_opt(name).await {
            Ok(Some(existing)) if !is_ours(&existing) => {
                return Err(OwnedApplyError::Foreign {
                    object: shown,
                    owner: display(&object.owner),
                    library: object.library.to_string(),
                });
            }
            Ok(_) => {}
            Err(error) => return Err(request_error("reading", shown, error)),
        }
        // `force`: the fields are the host's by design; a conflict means a
        // person edited an owned field, which the next render puts back.
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(name, &params, &Patch::Apply(&object.manifest))
            .await
            .map(drop)
            .map_err(|error| request_error("applying", shown, error))
    }

    /// Deletes the object if it is still the host's; `false` when it was
    /// gone already or is no longer the host's (left alone).
    async fn delete(&mut self, reference: &ObjectRef) -> Result<bool, OwnedApplyError> {
        let api = self.api(reference).await?;
        let shown = display(reference);
        match api.get_opt(&reference.name).await {
            Ok(Some(existing)) if is_ours(&existing) => {}
            Ok(_) => return Ok(false),
            Err(error) => return Err(request_error("reading", shown, error)),
        }
        match api
            .delete(&reference.name, &DeleteParams::background())
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => Err(request_error("deleting", shown, error)),
        }
    }

    async fn api(&mut self, reference: &ObjectRef) -> Result<Api<DynamicObject>, OwnedApplyError> {
        let (resource, scope) = self.resource(&kind_of(reference)).await?;
        Ok(match scope {
            Scope::Cluster => Api::all_with(self.client.clone(), &resource),
            Scope::Namespaced => {
                Api::namespaced_with(self.client.clone(), &reference.namespace, &resource)
            }
        })
    }

    /// The resource (plural, scope) of `apiVersion/kind`, from discovery.
    async fn resource(&mut self, kind: &str) -> Result<(ApiResource, Scope), OwnedApplyError> {
        if let Some(found) = self.resources.get(kind) {
            return Ok(found.clone());
        }
        let (api_version, kind_name) = kind.rsplit_once('/').unwrap_or(("", kind));
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind_name);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|source| OwnedApplyError::UnknownKind {
                kind: kind.to_owned(),
                source: Box::new(source),
            })?;
        let found = (resource, capabilities.scope);
        self.resources.insert(kind.to_owned(), found.clone());
        Ok(found)
    }
}

/// `apiVersion/kind`, as plans name kinds.
fn kind_of(reference: &ObjectRef) -> String {
    format!("{}/{}", reference.api_version, reference.kind)
}

/// The host created it: its field manager holds fields of it and it carries
/// the library label the host sets.
fn is_ours(object: &DynamicObject) -> bool {
    let managed = object
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .any(|entry| entry.manager.as_deref() == Some(FIELD_MANAGER));
    let labelled = object
        .metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(OWNED_BY_LABEL));
    managed && labelled
}

fn request_error(action: &'static str, object: String, error: kube::Error) -> OwnedApplyError {
    match error {
        kube::Error::Api(status) => OwnedApplyError::Refused {
            action,
            object,
            message: status.message,
            code: status.code,
        },
        other => OwnedApplyError::Request {
            action,
            object,
            source: Box::new(other),
        },
    }
}

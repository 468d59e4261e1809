//! The WIT exports: converts between the bindings and the SDK's own types,
//! and keeps the one library instance of this WebAssembly instance.

use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::Once;

use crate::objects::IncomingChange;
use crate::output::{Delta, Item, SectionKind, Slot, StatusVariant};
use crate::runtime::Runtime;
use crate::wit::exports::haptic::template::library::Guest;
use crate::wit::haptic::template::types as w;
use crate::{Error, Library, ObjectKey, Plan};

thread_local! {
    /// The instance's library. A component instance runs one library and one
    /// call at a time, so a thread-local (of the only thread) is enough.
    static RUNTIME: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// Implements the WIT exports for a [`Library`]; named by
/// [`export_library!`](crate::export_library).
#[doc(hidden)]
#[derive(Debug)]
pub struct Adapter<T>(PhantomData<T>);

fn with_runtime<T: Library, R>(f: impl FnOnce(&mut Runtime<T>) -> R) -> R {
    static PANIC_HOOK: Once = Once::new();
    PANIC_HOOK.call_once(crate::log::install_panic_hook);
    RUNTIME.with(|cell| {
        let mut slot = cell.borrow_mut();
        if !slot.as_ref().is_some_and(|b| b.is::<Runtime<T>>()) {
            *slot = Some(Box::new(Runtime::<T>::new()));
        }
        match slot.as_mut().and_then(|b| b.downcast_mut::<Runtime<T>>()) {
            Some(runtime) => f(runtime),
            // Unreachable: the slot was just filled with a Runtime<T>.
            None => panic!("haptic-sdk: library state has an unexpected type"),
        }
    })
}

impl<T: Library> Guest for Adapter<T> {
    fn describe() -> w::LibraryInfo {
        with_runtime::<T, _>(|runtime| {
            let info = runtime.info();
            w::LibraryInfo {
                name: info.name.clone(),
                version: info.version.clone(),
                order: info.order,
                default_values: info.defaults.to_string(),
            }
        })
    }

    fn configure(values: String) -> Result<w::Plan, w::RenderError> {
        let tree: serde_json::Value = serde_json::from_str(&values)
            .map_err(|e| render_error(&Error::ValuesNotObject(format!("not JSON: {e}"))))?;
        with_runtime::<T, _>(|runtime| runtime.configure(tree))
            .map(plan_to_wit)
            .map_err(|e| render_error(&e))
    }

    fn render(changes: Vec<w::Change>) -> Result<w::RenderOutput, w::RenderError> {
        let changes = changes.into_iter().map(change_from_wit).collect();
        with_runtime::<T, _>(|runtime| runtime.render(changes))
            .map(delta_to_wit)
            .map_err(|e| render_error(&e))
    }
}

fn render_error(error: &Error) -> w::RenderError {
    w::RenderError {
        message: error.to_string(),
        object: error.object_key().map(key_to_wit),
    }
}

fn key_to_wit(key: &ObjectKey) -> w::ObjectKey {
    w::ObjectKey {
        watch: key.watch.clone(),
        namespace: key.namespace.clone(),
        name: key.name.clone(),
    }
}

fn key_from_wit(key: w::ObjectKey) -> ObjectKey {
    ObjectKey {
        watch: key.watch,
        namespace: key.namespace,
        name: key.name,
    }
}

fn change_from_wit(change: w::Change) -> IncomingChange {
    match change {
        w::Change::Applied(object) => IncomingChange::Applied {
            key: key_from_wit(object.key),
            resource_version: object.resource_version,
            json: object.json,
        },
        w::Change::Deleted(key) => IncomingChange::Deleted(key_from_wit(key)),
    }
}

fn plan_to_wit(plan: Plan) -> w::Plan {
    w::Plan {
        watches: plan
            .watches
            .into_iter()
            .map(|watch| w::Watch {
                name: watch.name,
                api_version: watch.api_version,
                kind: watch.kind,
                namespace: watch.namespace,
                label_selector: watch.label_selector,
                field_selector: watch.field_selector,
                ignore_fields: watch.ignore_fields,
            })
            .collect(),
        patches_status_of: plan.patches_status_of,
        applies: plan.applies,
    }
}

fn delta_to_wit(delta: Delta) -> w::RenderOutput {
    w::RenderOutput {
        complete: delta.complete,
        upserts: delta
            .upserts
            .into_iter()
            .map(|(key, item)| w::KeyedItem {
                key,
                item: item_to_wit(item),
            })
            .collect(),
        removals: delta.removals,
    }
}

fn item_to_wit(item: Item) -> w::Item {
    match item {
        Item::Section {
            kind,
            name,
            body,
            secret,
        } => w::Item::Section(w::Section {
            kind: kind_to_wit(kind),
            name,
            body,
            secret,
        }),
        Item::Snippet {
            target_kind,
            target_name,
            slot,
            priority,
            lines,
            secret,
        } => w::Item::Snippet(w::Snippet {
            target_kind: kind_to_wit(target_kind),
            target_name,
            slot: match slot {
                Slot::Acls => w::Slot::Acls,
                Slot::RequestRules => w::Slot::RequestRules,
                Slot::ResponseRules => w::Slot::ResponseRules,
                Slot::Routing => w::Slot::Routing,
                Slot::Other => w::Slot::Other,
            },
            priority,
            lines,
            secret,
        }),
        Item::OwnedObject {
            owner,
            api_version,
            kind,
            name,
            manifest,
        } => w::Item::OwnedObject(w::OwnedObject {
            owner: key_to_wit(&owner),
            api_version,
            kind,
            name,
            manifest,
        }),
        Item::File {
            path,
            content,
            secret,
        } => w::Item::File(w::AuxFile {
            path,
            content,
            secret,
        }),
        Item::Warning {
            object,
            reason,
            message,
        } => w::Item::Warning(w::Warning {
            object: object.as_ref().map(key_to_wit),
            reason,
            message,
        }),
        Item::StatusPatch {
            variant,
            api_version,
            kind,
            namespace,
            name,
            status,
        } => w::Item::StatusPatch(w::StatusPatch {
            variant: match variant {
                StatusVariant::Rendered => w::StatusVariant::Rendered,
                StatusVariant::Deployed => w::StatusVariant::Deployed,
                StatusVariant::RenderFailed => w::StatusVariant::RenderFailed,
                StatusVariant::DeployFailed => w::StatusVariant::DeployFailed,
            },
            api_version,
            kind,
            namespace,
            name,
            status,
        }),
    }
}

fn kind_to_wit(kind: SectionKind) -> w::SectionKind {
    match kind {
        SectionKind::Global => w::SectionKind::Global,
        SectionKind::Defaults => w::SectionKind::Defaults,
        SectionKind::Frontend => w::SectionKind::Frontend,
        SectionKind::Backend => w::SectionKind::Backend,
        SectionKind::Listen => w::SectionKind::Listen,
        SectionKind::Userlist => w::SectionKind::Userlist,
        SectionKind::Resolvers => w::SectionKind::Resolvers,
        SectionKind::Peers => w::SectionKind::Peers,
        SectionKind::Cache => w::SectionKind::Cache,
        SectionKind::Ring => w::SectionKind::Ring,
        SectionKind::HttpErrors => w::SectionKind::HttpErrors,
    }
}

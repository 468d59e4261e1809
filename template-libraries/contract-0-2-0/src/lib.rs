//! A template library frozen on `haptic:template@0.2.0`: the SDK moved on
//! to 0.3.0, so this one uses wit-bindgen directly against the released
//! 0.2.0 contract, and the host's contract tests prove such libraries keep
//! loading and rendering beside newer ones. It renders one backend and, to
//! touch 0.2.0's additions, a warning and a secret file.

// wit-bindgen's glue (exports, canonical ABI) is unsafe code; nothing else is.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/haptic-template@0.2.0",
        world: "template-library",
    });

    use super::Frozen;
    export!(Frozen);
}

use bindings::exports::haptic::template::library::Guest;
use bindings::haptic::template::types::{
    AuxFile, Change, Item, KeyedItem, LibraryInfo, Plan, RenderError, RenderOutput, Section,
    SectionKind, Warning,
};

struct Frozen;

impl Guest for Frozen {
    fn describe() -> LibraryInfo {
        LibraryInfo {
            name: "contract-0-2-0".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            order: 910,
            default_values: "{}".into(),
        }
    }

    fn configure(_values: String) -> Result<Plan, RenderError> {
        Ok(Plan {
            watches: Vec::new(),
            patches_status_of: Vec::new(),
        })
    }

    fn render(_changes: Vec<Change>) -> Result<RenderOutput, RenderError> {
        Ok(RenderOutput {
            complete: true,
            upserts: vec![
                KeyedItem {
                    key: "backend".into(),
                    item: Item::Section(Section {
                        kind: SectionKind::Backend,
                        name: "contract-0-2-0".into(),
                        body: "http-request return status 200".into(),
                    }),
                },
                KeyedItem {
                    key: "file".into(),
                    item: Item::File(AuxFile {
                        path: "contract-0-2-0/token".into(),
                        content: "not shown\n".into(),
                        secret: true,
                    }),
                },
                KeyedItem {
                    key: "warning".into(),
                    item: Item::Warning(Warning {
                        object: None,
                        reason: "FrozenContract".into(),
                        message: "this library is built for contract 0.2.0 on purpose.".into(),
                    }),
                },
            ],
            removals: Vec::new(),
        })
    }
}

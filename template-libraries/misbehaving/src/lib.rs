//! A template library that misbehaves on request, so the host's sandbox tests
//! can prove that every kind of failure becomes an error naming the library
//! while the host keeps running.
//!
//! The mode comes from its values, `templateLibraries.misbehaving.mode`:
//!
//! - `ok`: renders one backend section.
//! - `loop`: spins forever in `render` (the deadline must stop it).
//! - `oom`: allocates until the memory limit stops it.
//! - `panic`: panics with [`PANIC_MESSAGE`].
//! - `malformed`: returns a section named `"a b\nc"` and a file `../etc/passwd`.
//! - `error`: returns a render error naming an object.
//!
//! It deliberately depends only on `wit-bindgen`, not on the SDK, so it tests
//! the raw contract.

// wit-bindgen's glue (exports, canonical ABI) is unsafe code; nothing else is.
#[allow(unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit/haptic-template@0.1.0",
        world: "template-library",
    });

    use super::Misbehaving;
    export!(Misbehaving);
}

use std::sync::{Mutex, Once};

use bindings::exports::haptic::template::library::Guest;
use bindings::haptic::template::host::log;
use bindings::haptic::template::types::{
    AuxFile, Change, Item, KeyedItem, LibraryInfo, LogLevel, ObjectKey, Plan, RenderError,
    RenderOutput, Section, SectionKind,
};

/// The message the `panic` mode panics with; tests look for it.
pub const PANIC_MESSAGE: &str = "misbehaving library panicked on purpose";

static MODE: Mutex<String> = Mutex::new(String::new());
static PANIC_HOOK: Once = Once::new();

struct Misbehaving;

impl Guest for Misbehaving {
    fn describe() -> LibraryInfo {
        install_panic_hook();
        LibraryInfo {
            name: "misbehaving".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            order: 900,
            default_values: r#"{"mode":"ok"}"#.into(),
        }
    }

    fn configure(values: String) -> Result<Plan, RenderError> {
        install_panic_hook();
        let values: serde_json::Value =
            serde_json::from_str(&values).map_err(|error| RenderError {
                message: format!("values are not JSON: {error}"),
                object: None,
            })?;
        let mode = values
            .pointer("/misbehaving/mode")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("ok")
            .to_string();
        if !["ok", "loop", "oom", "panic", "malformed", "error"].contains(&mode.as_str()) {
            return Err(RenderError {
                message: format!("unknown mode `{mode}`"),
                object: None,
            });
        }
        *MODE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = mode;
        Ok(Plan {
            watches: Vec::new(),
            patches_status_of: Vec::new(),
        })
    }

    fn render(_changes: Vec<Change>) -> Result<RenderOutput, RenderError> {
        install_panic_hook();
        let mode = MODE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        match mode.as_str() {
            "loop" => spin(),
            "oom" => exhaust_memory(),
            "panic" => panic!("{PANIC_MESSAGE}"),
            "malformed" => Ok(complete(vec![
                KeyedItem {
                    key: "bad-section".into(),
                    item: Item::Section(Section {
                        kind: SectionKind::Backend,
                        name: "a b\nc".into(),
                        body: "    server s1 127.0.0.1:80\n".into(),
                    }),
                },
                KeyedItem {
                    key: "bad-file".into(),
                    item: Item::File(AuxFile {
                        path: "../etc/passwd".into(),
                        content: "root::0:0::/root:/bin/sh\n".into(),
                    }),
                },
            ])),
            "error" => Err(RenderError {
                message: "the misbehaving library refuses this object".into(),
                object: Some(ObjectKey {
                    watch: "services".into(),
                    namespace: "default".into(),
                    name: "refused".into(),
                }),
            }),
            _ => Ok(complete(vec![KeyedItem {
                key: "backend".into(),
                item: Item::Section(Section {
                    kind: SectionKind::Backend,
                    name: "misbehaving-ok".into(),
                    body: "    server s1 127.0.0.1:8080\n".into(),
                }),
            }])),
        }
    }
}

fn complete(upserts: Vec<KeyedItem>) -> RenderOutput {
    RenderOutput {
        complete: true,
        upserts,
        removals: Vec::new(),
    }
}

/// With `panic = "abort"` a panic is an `unreachable` trap that says nothing;
/// the hook hands the message and location to the host first.
fn install_panic_hook() {
    PANIC_HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            log(LogLevel::Error, &info.to_string());
        }));
    });
}

fn spin() -> ! {
    let mut counter = 0u64;
    loop {
        counter = std::hint::black_box(counter.wrapping_add(1));
    }
}

fn exhaust_memory() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        // Touch every block so nothing can be optimised away.
        hoard.push(vec![1u8; 1 << 20]);
        std::hint::black_box(&hoard);
    }
}

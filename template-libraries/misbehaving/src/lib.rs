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
//! - `trap`: executes `unreachable` without panicking (no message to report).
//! - `hash-order`: reports the iteration order of a `HashSet` as its render
//!   error, so the host can check that two instances agree.
//! - `escape`: prints to stdout and stderr, tries to read a host file, list
//!   the environment and open a TCP connection, and reports what happened as
//!   its render error (the host's sandbox should have refused all of it).
//! - `lua-load`: adds `lua-load scripts/misbehaving.lua` to `global` and ships
//!   that file, a directive the host's policy refuses unless values allow it.
//! - `tenant`: watches ConfigMaps in every namespace and writes a backend
//!   section for each, holding its `data.line` as a line (a tenant's text a
//!   careless library passes through: HAProxy or the policy may refuse it);
//!   a ConfigMap whose `data.panic` is `"true"` makes it panic. The host
//!   must drop that one object and deploy the rest.
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

use std::collections::BTreeMap;
use std::sync::{Mutex, Once};

use bindings::exports::haptic::template::library::Guest;
use bindings::haptic::template::host::log;
use bindings::haptic::template::types::{
    AuxFile, Change, Item, KeyedItem, LibraryInfo, LogLevel, ObjectKey, Plan, RenderError,
    RenderOutput, Section, SectionKind, Slot, Snippet, Watch,
};

/// The message the `panic` mode panics with; tests look for it.
pub const PANIC_MESSAGE: &str = "misbehaving library panicked on purpose";

const MODES: &[&str] = &[
    "ok",
    "loop",
    "oom",
    "panic",
    "malformed",
    "error",
    "escape",
    "trap",
    "hash-order",
    "lua-load",
    "tenant",
];

/// The `tenant` mode's view: each ConfigMap (`namespace/name`) and its data.
static CONFIG_MAPS: Mutex<BTreeMap<(String, String), serde_json::Value>> =
    Mutex::new(BTreeMap::new());

/// The Lua file the `lua-load` mode ships and loads.
pub const LUA_FILE: &str = "scripts/misbehaving.lua";

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
        if !MODES.contains(&mode.as_str()) {
            return Err(RenderError {
                message: format!("unknown mode `{mode}`"),
                object: None,
            });
        }
        let watches = if mode == "tenant" {
            vec![Watch {
                name: "config-maps".into(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: None,
                label_selector: None,
                ignore_fields: Vec::new(),
            }]
        } else {
            Vec::new()
        };
        *MODE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = mode;
        Ok(Plan {
            watches,
            patches_status_of: Vec::new(),
        })
    }

    fn render(changes: Vec<Change>) -> Result<RenderOutput, RenderError> {
        install_panic_hook();
        let mode = MODE
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        match mode.as_str() {
            "loop" => spin(),
            "oom" => exhaust_memory(),
            "panic" => panic!("{PANIC_MESSAGE}"),
            "trap" => trap_without_a_word(),
            "hash-order" => Err(RenderError {
                message: hash_order(),
                object: None,
            }),
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
            "lua-load" => Ok(complete(lua_load())),
            "tenant" => Ok(complete(tenant(changes))),
            "escape" => Err(RenderError {
                message: try_to_escape(),
                object: None,
            }),
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

/// A backend per ConfigMap with its `data.line`, after taking in `changes`;
/// panics on a ConfigMap whose `data.panic` is `"true"`.
fn tenant(changes: Vec<Change>) -> Vec<KeyedItem> {
    let mut maps = CONFIG_MAPS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for change in changes {
        match change {
            Change::Applied(object) => {
                let data = serde_json::from_str::<serde_json::Value>(&object.json)
                    .ok()
                    .and_then(|value| value.get("data").cloned())
                    .unwrap_or_default();
                maps.insert((object.key.namespace, object.key.name), data);
            }
            Change::Deleted(key) => {
                maps.remove(&(key.namespace, key.name));
            }
        }
    }
    maps.iter()
        .map(|((namespace, name), data)| {
            if data.get("panic").and_then(serde_json::Value::as_str) == Some("true") {
                panic!("{PANIC_MESSAGE}: ConfigMap {namespace}/{name}");
            }
            let line = data
                .get("line")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("timeout server 5s");
            let section = format!("misbehaving-{namespace}-{name}")
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect::<String>();
            KeyedItem {
                key: format!("tenant:{namespace}/{name}"),
                item: Item::Section(Section {
                    kind: SectionKind::Backend,
                    name: section,
                    body: format!("    {line}\n"),
                }),
            }
        })
        .collect()
}

/// A line that runs code inside HAProxy, with the file it loads.
fn lua_load() -> Vec<KeyedItem> {
    vec![
        KeyedItem {
            key: "lua-load".into(),
            item: Item::Snippet(Snippet {
                target_kind: SectionKind::Global,
                target_name: String::new(),
                slot: Slot::Other,
                priority: 0,
                lines: format!("    lua-load {LUA_FILE}\n"),
            }),
        },
        KeyedItem {
            key: "lua-file".into(),
            item: Item::File(AuxFile {
                path: LUA_FILE.into(),
                content: "-- loaded by the misbehaving test library; does nothing\n".into(),
            }),
        },
    ]
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
            // One line, as the host shows it: `panicked at src/lib.rs:9:5: message`.
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(no message)");
            let location = info
                .location()
                .map(|at| format!("{}:{}:{}", at.file(), at.line(), at.column()))
                .unwrap_or_else(|| "an unknown location".into());
            log(
                LogLevel::Error,
                &format!("panicked at {location}: {message}"),
            );
        }));
    });
}

fn try_to_escape() -> String {
    println!("misbehaving: hello from stdout");
    eprintln!("misbehaving: hello from stderr");
    let file = match std::fs::read_to_string("/etc/passwd") {
        Ok(content) => format!("read {} bytes", content.len()),
        Err(error) => format!("failed ({error})"),
    };
    let listing = match std::fs::read_dir(".") {
        Ok(entries) => format!("listed {} entries", entries.count()),
        Err(error) => format!("failed ({error})"),
    };
    let connect = match std::net::TcpStream::connect("127.0.0.1:22") {
        Ok(_) => "connected".to_string(),
        Err(error) => format!("failed ({error})"),
    };
    let lookup = match std::net::ToSocketAddrs::to_socket_addrs("localhost:80") {
        Ok(addresses) => format!("resolved {} addresses", addresses.count()),
        Err(error) => format!("failed ({error})"),
    };
    format!(
        "read /etc/passwd: {file}; read_dir .: {listing}; env: {} vars; args: {}; \
         connect 127.0.0.1:22: {connect}; lookup localhost: {lookup}",
        std::env::vars().count(),
        std::env::args().count(),
    )
}

fn hash_order() -> String {
    let set: std::collections::HashSet<String> = (0..32).map(|n| format!("backend-{n}")).collect();
    set.into_iter().collect::<Vec<_>>().join(",")
}

#[inline(never)]
fn trap_without_a_word() -> ! {
    // Natively (clippy, docs) there is no wasm trap; aborting is the nearest.
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    #[cfg(not(target_arch = "wasm32"))]
    std::process::abort()
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

//! The sandbox holds: every way a library can misbehave becomes an error that
//! names it, the host keeps running, and a fresh instance of the same library
//! works afterwards. Uses the `haptic-misbehaving` test library.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use haptic::guests::MISBEHAVING_PATH;
use haptic::library::types::{Item, SectionKind};
use haptic::library::{LibraryError, LibraryRuntime, LoadedLibrary, Malformed, RuntimeConfig};
use serde_json::json;

const PANIC_MESSAGE: &str = "misbehaving library panicked on purpose";

fn runtime(config: RuntimeConfig) -> LibraryRuntime {
    LibraryRuntime::new(config).expect("runtime starts")
}

fn misbehaving(runtime: &LibraryRuntime) -> LoadedLibrary {
    runtime
        .load_file(Path::new(MISBEHAVING_PATH))
        .expect("the misbehaving library loads")
}

fn values(mode: &str) -> serde_json::Value {
    json!({ "misbehaving": { "mode": mode } })
}

/// Renders once in `mode` and returns the error it must give.
fn fail_in(library: &LoadedLibrary, mode: &str) -> (LibraryError, bool) {
    let mut instance = library.instantiate().expect("instance starts");
    instance
        .configure(&values(mode))
        .expect("configure succeeds in every mode");
    let error = instance
        .render(Vec::new())
        .expect_err("rendering in this mode fails");
    println!("{mode}: {error}");
    (error, instance.is_poisoned())
}

/// A fresh instance of the same loaded library renders normally.
fn assert_recovers(library: &LoadedLibrary) {
    let mut instance = library.instantiate().expect("a fresh instance starts");
    instance.configure(&values("ok")).expect("configure ok");
    let output = instance
        .render(Vec::new())
        .expect("a fresh instance renders");
    assert!(output.complete);
    assert_eq!(output.upserts.len(), 1);
    match &output.upserts[0].1 {
        Item::Section(section) => {
            assert_eq!(section.kind, SectionKind::Backend);
            assert_eq!(section.name, "misbehaving-ok");
        }
        other => panic!("expected the ok backend, got {other:?}"),
    }
}

#[test]
fn describes_itself_and_renders_ok() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    assert_eq!(library.info().name, "misbehaving");
    assert_eq!(library.info().order, 900);
    assert_eq!(library.info().default_values, json!({ "mode": "ok" }));
    assert_eq!(library.contract_version().to_string(), "0.1.0");
    assert_eq!(library.origin(), MISBEHAVING_PATH);
    assert_recovers(&library);
}

#[test]
fn an_endless_loop_is_stopped_at_the_deadline() {
    let runtime = runtime(RuntimeConfig {
        call_deadline: Duration::from_millis(200),
        ..RuntimeConfig::default()
    });
    let library = misbehaving(&runtime);
    let started = Instant::now();
    let (error, poisoned) = fail_in(&library, "loop");
    println!("loop stopped after {:?}", started.elapsed());
    assert!(
        matches!(error, LibraryError::DeadlineExceeded { call: "render", .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "library `misbehaving` did not finish `render` within 200 ms; it was stopped"
    );
    assert!(poisoned);
    assert_recovers(&library);
}

#[test]
fn running_out_of_memory_is_reported_against_the_limit() {
    let runtime = runtime(RuntimeConfig {
        memory_limit_bytes: 64 << 20,
        ..RuntimeConfig::default()
    });
    let library = misbehaving(&runtime);
    let (error, poisoned) = fail_in(&library, "oom");
    assert!(
        matches!(error, LibraryError::OutOfMemory { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "library `misbehaving` exceeded its memory limit of 64 MiB during `render`"
    );
    assert!(poisoned);
    assert_recovers(&library);
}

#[test]
fn a_panic_reports_its_message_and_location() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let (error, poisoned) = fail_in(&library, "panic");
    let LibraryError::Panic { message, .. } = &error else {
        panic!("expected a panic, got {error:?}");
    };
    assert!(message.contains(PANIC_MESSAGE), "{message}");
    assert!(
        message.contains("src/lib.rs:"),
        "location missing: {message}"
    );
    assert!(
        error
            .to_string()
            .starts_with("library `misbehaving` panicked during `render`: "),
        "{error}"
    );
    assert!(poisoned);
    assert_recovers(&library);
}

#[test]
fn a_trap_names_the_guest_functions_on_the_stack() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let (error, poisoned) = fail_in(&library, "trap");
    let LibraryError::Trap { trap, frames, .. } = &error else {
        panic!("expected a trap, got {error:?}");
    };
    assert!(trap.contains("unreachable"), "{trap}");
    assert!(
        frames
            .first()
            .is_some_and(|frame| frame.ends_with("trap_without_a_word")),
        "{frames:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("library `misbehaving` crashed during `render`: "),
        "{error}"
    );
    assert!(poisoned);
    assert_recovers(&library);
}

#[test]
fn a_poisoned_instance_refuses_further_calls() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let mut instance = library.instantiate().expect("instance starts");
    instance.configure(&values("panic")).expect("configure");
    assert!(instance.render(Vec::new()).is_err());
    let again = instance
        .render(Vec::new())
        .expect_err("a poisoned instance fails");
    assert!(matches!(again, LibraryError::Poisoned { .. }), "{again:?}");
    assert!(
        again.to_string().contains("library `misbehaving`"),
        "{again}"
    );
}

#[test]
fn malformed_output_names_the_item_and_the_problem() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let (error, poisoned) = fail_in(&library, "malformed");
    let LibraryError::Malformed {
        library: name,
        key,
        problem,
    } = &error
    else {
        panic!("expected malformed output, got {error:?}");
    };
    assert_eq!(name, "misbehaving");
    assert_eq!(key.as_deref(), Some("bad-section"));
    assert!(
        matches!(problem.as_ref(), Malformed::BadName { name, .. } if name == "a b\nc"),
        "{problem:?}"
    );
    assert!(
        error.to_string().starts_with(
            "library `misbehaving` returned malformed output in item `bad-section`: section name"
        ),
        "{error}"
    );
    // The library's fault, not a crash: the instance itself is still sound.
    assert!(!poisoned);
    assert_recovers(&library);
}

#[test]
fn the_library_own_error_names_the_object() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let (error, poisoned) = fail_in(&library, "error");
    let guest = error.guest_error().expect("the library's own error");
    let object = guest.object.as_ref().expect("names an object");
    assert_eq!(
        (
            object.watch.as_str(),
            object.namespace.as_str(),
            object.name.as_str()
        ),
        ("services", "default", "refused")
    );
    assert_eq!(
        error.to_string(),
        "library `misbehaving` could not render: services default/refused: \
         the misbehaving library refuses this object"
    );
    assert!(!poisoned);
}

#[test]
fn the_sandbox_has_no_files_environment_or_network() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let (error, _) = fail_in(&library, "escape");
    let report = &error.guest_error().expect("the library reports").message;
    println!("{report}");
    assert!(report.contains("read /etc/passwd: failed"), "{report}");
    assert!(report.contains("read_dir .: failed"), "{report}");
    assert!(report.contains("env: 0 vars; args: 0"), "{report}");
    assert!(report.contains("connect 127.0.0.1:22: failed"), "{report}");
    assert!(report.contains("lookup localhost: failed"), "{report}");
}

/// Log output captured from a thread-local `tracing` subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[test]
fn printed_and_logged_lines_reach_tracing_tagged_with_the_library() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(captured.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::TRACE)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        fail_in(&library, "escape");
        fail_in(&library, "panic");
    });
    let log = String::from_utf8_lossy(&captured.0.lock().expect("capture lock")).into_owned();
    let line_with = |text: &str| {
        log.lines()
            .find(|line| line.contains(text))
            .unwrap_or_else(|| panic!("no log line with {text:?} in:\n{log}"))
            .to_owned()
    };
    let stdout = line_with("hello from stdout");
    assert!(stdout.contains("library=misbehaving"), "{stdout}");
    assert!(stdout.contains("stream=\"stdout\""), "{stdout}");
    assert!(line_with("hello from stderr").contains("stream=\"stderr\""));
    let panic = line_with(PANIC_MESSAGE);
    assert!(panic.contains("ERROR"), "{panic}");
    assert!(panic.contains("library=misbehaving"), "{panic}");
}

#[test]
fn hash_map_order_is_the_same_in_every_instance() {
    // A library iterating a HashMap must render the same bytes in every
    // instance and every process, or each restart would reload HAProxy.
    let first_runtime = runtime(RuntimeConfig::default());
    let second_runtime = runtime(RuntimeConfig::default());
    let orders: Vec<String> = [&first_runtime, &first_runtime, &second_runtime]
        .into_iter()
        .map(|runtime| {
            let (error, _) = fail_in(&misbehaving(runtime), "hash-order");
            error
                .guest_error()
                .expect("the order is reported")
                .message
                .clone()
        })
        .collect();
    assert_eq!(orders[0].split(',').count(), 32, "{}", orders[0]);
    assert_eq!(orders[0], orders[1]);
    assert_eq!(orders[0], orders[2]);
}

#[test]
fn unknown_values_are_the_library_error_at_configure() {
    let runtime = runtime(RuntimeConfig::default());
    let library = misbehaving(&runtime);
    let mut instance = library.instantiate().expect("instance starts");
    let error = instance
        .configure(&values("sideways"))
        .expect_err("unknown mode is refused");
    assert_eq!(
        error.to_string(),
        "library `misbehaving` could not configure: unknown mode `sideways`"
    );
}

/// A component exporting the library interface at `version` with no
/// functions: enough for the host to read the version.
fn component_exporting(name: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component
             (core module $m (func (export "f")))
             (core instance $i (instantiate $m))
             (func $f (canon lift (core func $i "f")))
             (instance $lib (export "describe" (func $f)))
             (export "{name}" (instance $lib)))"#
    ))
    .expect("test component assembles")
}

#[test]
fn an_incompatible_contract_version_is_refused() {
    let runtime = runtime(RuntimeConfig::default());
    let bytes = component_exporting("haptic:template/library@9.0.0");
    let error = runtime
        .load_bytes("future.wasm", &bytes)
        .expect_err("9.0.0 is refused");
    assert!(
        matches!(error, LibraryError::IncompatibleContract { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "`future.wasm` was built for haptic:template@9.0.0; this haptic supports 0.1.x, \
         0.2.x, 0.3.x and 0.4.x — rebuild it against wit/haptic-template@0.4.0"
    );
}

#[test]
fn a_compatible_version_with_the_wrong_shape_is_a_mismatch() {
    let runtime = runtime(RuntimeConfig::default());
    let bytes = component_exporting("haptic:template/library@0.1.0");
    let error = runtime
        .load_bytes("hollow.wasm", &bytes)
        .expect_err("a library without its functions is refused");
    assert!(matches!(error, LibraryError::Mismatch { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("`hollow.wasm` does not fit haptic:template@0.1.0: "),
        "{error}"
    );
}

#[test]
fn a_component_that_is_no_library_is_refused() {
    let runtime = runtime(RuntimeConfig::default());
    let bytes = component_exporting("greeter");
    let error = runtime
        .load_bytes("greeter.wasm", &bytes)
        .expect_err("not a library");
    assert_eq!(
        error.to_string(),
        "`greeter.wasm` is not a haptic template library: it exports `greeter`, but no \
         `haptic:template/library` interface"
    );
}

#[test]
fn files_that_are_not_components_are_refused() {
    let runtime = runtime(RuntimeConfig::default());
    let module = wat::parse_str("(module)").expect("module assembles");
    let error = runtime
        .load_bytes("core.wasm", &module)
        .expect_err("a core module is refused");
    assert!(
        error.to_string().starts_with(
            "`core.wasm` is not a WebAssembly component: it is a core WebAssembly module"
        ),
        "{error}"
    );
    let error = runtime
        .load_bytes("notes.txt", b"just some text, long enough")
        .expect_err("text is refused");
    assert!(
        matches!(error, LibraryError::NotAComponent { .. }),
        "{error:?}"
    );

    let mut corrupt = std::fs::read(MISBEHAVING_PATH).expect("read the test library");
    corrupt.truncate(corrupt.len() / 2);
    let error = runtime
        .load_bytes("truncated.wasm", &corrupt)
        .expect_err("a truncated component is refused");
    assert!(matches!(error, LibraryError::Compile { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("cannot compile template library `truncated.wasm`: ")
    );

    let error = runtime
        .load_file(Path::new("/nonexistent/library.wasm"))
        .expect_err("a missing file is refused");
    assert!(matches!(error, LibraryError::Read { .. }), "{error:?}");
}

#[test]
fn the_same_bytes_are_compiled_once() {
    let runtime = runtime(RuntimeConfig::default());
    let bytes = std::fs::read(MISBEHAVING_PATH).expect("read the test library");
    let first = runtime.load_bytes("first", &bytes).expect("loads");
    let second = runtime.load_bytes("second", &bytes).expect("loads again");
    assert!(first.shares_compilation_with(&second));
    assert_eq!(first.digest(), second.digest());
    assert_eq!(second.origin(), "second", "each load keeps its own origin");
    let uncached = runtime.load_bytes_uncached("third", &bytes).expect("loads");
    assert!(!uncached.shares_compilation_with(&first));
}

#[test]
fn a_second_process_reads_compiled_code_from_the_disk_cache() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let config = RuntimeConfig {
        cache_dir: Some(dir.path().join("cache")),
        ..RuntimeConfig::default()
    };
    let bytes = std::fs::read(MISBEHAVING_PATH).expect("read the test library");
    let first = runtime(config.clone());
    first.load_bytes("first", &bytes).expect("loads");
    assert_eq!(
        first.disk_cache_stats(),
        Some((0, 1)),
        "compiled and stored"
    );
    drop(first);
    let second = runtime(config);
    let library = second
        .load_bytes("second", &bytes)
        .expect("loads from the cache");
    assert_eq!(
        second.disk_cache_stats(),
        Some((1, 0)),
        "read back, not compiled"
    );
    assert_recovers(&library);
    assert_eq!(runtime(RuntimeConfig::default()).disk_cache_stats(), None);
}

#[test]
fn an_unusable_cache_directory_is_reported() {
    let file = tempfile::NamedTempFile::new().expect("temporary file");
    let error = LibraryRuntime::new(RuntimeConfig {
        cache_dir: Some(file.path().join("cache")),
        ..RuntimeConfig::default()
    })
    .expect_err("a cache under a file cannot be created");
    assert!(matches!(error, LibraryError::Engine { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("cannot create the cache directory"),
        "{error}"
    );
}

#[test]
fn libraries_outlive_their_runtime() {
    let library = misbehaving(&runtime(RuntimeConfig {
        call_deadline: Duration::from_millis(100),
        ..RuntimeConfig::default()
    }));
    // The runtime is gone; the deadline must still be enforced.
    let (error, _) = fail_in(&library, "loop");
    assert!(
        matches!(error, LibraryError::DeadlineExceeded { .. }),
        "{error:?}"
    );
    assert_recovers(&library);
}

//! Template libraries written in Python (componentize-py, the SDK in
//! `template-libraries/sdk-python`): the sandbox holds for them as it does
//! for Rust guests, and the Python port of the maintenance-mode example
//! renders what the Rust one renders.
//!
//! The components are built by `make python-guests` (componentize-py is not
//! a cargo dependency), which the tests find through `HAPTIC_PYTHON_GUESTS`;
//! so the tests are ignored by a plain `cargo test` and run by
//! `make python-test` (part of `make test`):
//! `HAPTIC_PYTHON_GUESTS=<dir> cargo test -p haptic --test python -- --include-ignored`.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use haptic::engine::{self, Engine};
use haptic::fixtures::{self, LibraryUnderTest};
use haptic::library::types::Item;
use haptic::library::{LibraryError, LibraryRuntime, LoadedLibrary, RuntimeConfig};
use haptic::offline::{self, Job};
use haptic::values::Values;
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(1);
const MEMORY_LIMIT: usize = 128 << 20;

/// One runtime for every test here: a Python component takes ~20 s to
/// compile cold, so they share one compilation, and wasmtime's disk cache
/// (`HAPTIC_CACHE_DIR`, as the CLI's, when set; else under the target
/// directory) so a second run compiles nothing.
static RUNTIME: LazyLock<LibraryRuntime> = LazyLock::new(|| {
    let cache_dir = std::env::var_os("HAPTIC_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python-guests-cache"));
    LibraryRuntime::new(RuntimeConfig {
        call_deadline: DEADLINE,
        memory_limit_bytes: MEMORY_LIMIT,
        cache_dir: Some(cache_dir),
        ..RuntimeConfig::default()
    })
    .expect("runtime starts")
});

fn component(file: &str) -> PathBuf {
    let dir = std::env::var_os("HAPTIC_PYTHON_GUESTS").unwrap_or_else(|| {
        panic!("HAPTIC_PYTHON_GUESTS is not set; build the components and run these tests with `make python-test`")
    });
    let path = Path::new(&dir).join(file);
    assert!(
        path.exists(),
        "{} is missing; build it with `make python-guests`",
        path.display()
    );
    path
}

/// Loaded once: tests running in parallel would otherwise each compile it
/// (the runtime's in-process cache is filled after compiling).
static MISBEHAVING: LazyLock<LoadedLibrary> = LazyLock::new(|| {
    RUNTIME
        .load_file(&component("misbehaving_python.wasm"))
        .expect("the misbehaving Python library loads")
});

/// The Python example, loaded once; later loads of its file (the fixture
/// runner's) find it in the runtime's in-process cache.
static EXAMPLE: LazyLock<PathBuf> = LazyLock::new(|| {
    let path = component("maintenance_mode_python.wasm");
    RUNTIME.load_file(&path).expect("the Python example loads");
    path
});

fn misbehaving() -> LoadedLibrary {
    MISBEHAVING.clone()
}

fn values(mode: &str) -> serde_json::Value {
    json!({ "misbehavingPython": { "mode": mode } })
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
    let names: Vec<&str> = output.upserts.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(names, ["section:backend:misbehaving-python-ok"]);
    assert!(matches!(output.upserts[0].1, Item::Section(_)));
}

/// Every other library still renders in the same runtime: the bundled ones
/// and the Rust example, over the example's fixture cluster.
fn assert_others_render() {
    let rust_example = PathBuf::from(haptic::guests::EXAMPLE_MAINTENANCE_MODE_PATH);
    let (config, _) = render_with(&rust_example);
    assert!(config.contains("frontend http"), "{config}");
    assert!(
        config.contains("http-request return status 503"),
        "{config}"
    );
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn a_python_library_describes_itself() {
    let library = misbehaving();
    assert_eq!(library.info().name, "misbehaving-python");
    assert_eq!(library.info().order, 900);
    assert_eq!(library.info().default_values, json!({ "mode": "ok" }));
    assert_eq!(library.contract_version().to_string(), "0.3.0");
    assert_recovers(&library);
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn an_endless_python_loop_is_stopped_at_the_deadline() {
    let library = misbehaving();
    let started = Instant::now();
    let (error, poisoned) = fail_in(&library, "loop");
    let elapsed = started.elapsed();
    println!("loop stopped after {elapsed:?}");
    assert!(
        matches!(error, LibraryError::DeadlineExceeded { call: "render", .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "library `misbehaving-python` did not finish `render` within 1 s; it was stopped"
    );
    assert!(
        elapsed >= DEADLINE,
        "stopped before the deadline: {elapsed:?}"
    );
    assert!(poisoned);
    assert_recovers(&library);
    assert_others_render();
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn unbounded_python_allocation_is_stopped_at_the_memory_cap() {
    let library = misbehaving();
    let (error, poisoned) = fail_in(&library, "oom");
    assert!(
        matches!(error, LibraryError::OutOfMemory { call: "render", .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "library `misbehaving-python` exceeded its memory limit of 128 MiB during `render`"
    );
    assert!(poisoned);
    assert_recovers(&library);
    assert_others_render();
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn an_unexpected_exception_is_the_library_error_with_its_line() {
    let library = misbehaving();
    let (error, poisoned) = fail_in(&library, "raise");
    // The line that raises, read from the source the component was built from.
    let source = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../template-libraries/misbehaving-python/misbehaving_python.py"),
    )
    .expect("the library's source");
    let line = source
        .lines()
        .position(|line| line.contains(r#"{}["no such key"]"#))
        .expect("the raising line")
        + 1;
    assert_eq!(
        error.to_string(),
        format!(
            "library `misbehaving-python` could not render: KeyError: 'no such key' \
             (at misbehaving_python.py:{line}, in render)"
        )
    );
    // An exception leaves the interpreter sound; the SDK starts the next
    // render complete.
    assert!(!poisoned);
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn a_python_library_has_no_files_environment_or_network() {
    let (error, _) = fail_in(&misbehaving(), "escape");
    let report = &error.guest_error().expect("the library reports").message;
    println!("{report}");
    assert!(report.contains("read /etc/passwd: failed"), "{report}");
    assert!(report.contains("listdir /: failed"), "{report}");
    assert!(report.contains("env: 0 vars"), "{report}");
    assert!(report.contains("connect 127.0.0.1:22: failed"), "{report}");
}

/// The Secrets of the contract mode's cluster: one TLS, one Opaque, one
/// without `type` (which the API server would have stored as Opaque).
const CONTRACT_SECRETS: &str = "\
apiVersion: v1
kind: Secret
metadata: {name: site-tls, namespace: shop}
type: kubernetes.io/tls
data: {}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
type: Opaque
---
apiVersion: v1
kind: Secret
metadata: {name: untyped, namespace: shop}
";

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn a_python_library_uses_every_import_and_output_kind_of_contract_0_3_0() {
    // The real host: its field-selector rule, its crypt and tls checks, its
    // merge of secret text, warnings and owned objects, validated by haproxy.
    let _loaded = misbehaving();
    let dir = tempfile::tempdir().expect("temp dir");
    let manifests = dir.path().join("secrets.yaml");
    std::fs::write(&manifests, CONTRACT_SECRETS).expect("manifests written");
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.misbehavingPython.mode=contract")
        .expect("values");
    let job = Job {
        inputs: vec![manifests],
        values,
        custom_libraries: vec![component("misbehaving_python.wasm")],
        validate: true,
    };
    let libraries = offline::load_libraries(&RUNTIME, &job.custom_libraries).expect("loads");
    let output = offline::render(&job, libraries).expect("renders and validates");
    let rendered = &output.rendered;
    let report = rendered
        .files
        .get("contract-python/report.txt")
        .expect("the report file");
    println!("{report}");
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(
        lines[0], "secret shop/site-tls",
        "only the TLS Secret reaches a type=kubernetes.io/tls watch"
    );
    assert_eq!(lines[1], "hash good: sha512-crypt weak=False");
    assert!(
        lines[2].starts_with("hash apache: refused: ") && !lines[2].contains("$apr1$pythonsd$9U"),
        "the host refuses Apache MD5 without quoting it: {}",
        lines[2]
    );
    assert!(
        lines[3].starts_with("default certificate: ") && !lines[3].contains("refused"),
        "the host's default certificate passes its own check: {}",
        lines[3]
    );
    assert!(
        lines[4].starts_with("bad certificate: refused: "),
        "{}",
        lines[4]
    );
    assert_eq!(lines.len(), 5, "{report}");
    assert!(
        rendered
            .secret_files
            .contains("contract-python/default.pem")
    );
    assert!(!rendered.secret_files.contains("contract-python/report.txt"));
    // secret_lines are 1-based line numbers; the body follows the header.
    let header = rendered
        .config
        .lines()
        .position(|line| line == "userlist contract-python-users")
        .expect("the userlist section")
        + 1;
    assert!(
        rendered
            .secret_lines
            .iter()
            .any(|lines| lines.contains(&(header + 1))),
        "the userlist body is secret text: {:?}",
        rendered.secret_lines
    );
    assert!(
        !rendered
            .secret_lines
            .iter()
            .any(|lines| lines.contains(&header)),
        "the header line is not"
    );
    let warnings: Vec<_> = rendered
        .warnings
        .iter()
        .filter(|(_, _, warning)| warning.reason == "ContractPython")
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", rendered.warnings);
    assert!(format!("{:?}", warnings[0]).contains("site-tls"));
    assert_eq!(
        output.owned_objects.len(),
        1,
        "one ConfigMap owned by the TLS Secret"
    );
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn a_render_that_loops_fails_and_the_next_one_renders() {
    // Through the engine the controller uses: the failure names the library,
    // and the same engine renders again once the library behaves.
    let _loaded = misbehaving();
    let libraries = engine::load_libraries(&RUNTIME, &[component("misbehaving_python.wasm")])
        .expect("libraries load");
    let mut loop_values = Values::default();
    loop_values
        .set_assignment("templateLibraries.misbehavingPython.mode=loop")
        .expect("values");
    let mut engine = Engine::new(libraries, loop_values).expect("engine starts");
    let error = engine
        .render(Vec::new())
        .expect_err("the loop fails the render");
    assert!(
        error
            .to_string()
            .contains("library `misbehaving-python` did not finish `render`"),
        "{error}"
    );
    engine.set_values(Values::default()).expect("values");
    let rendered = engine
        .render(Vec::new())
        .expect("renders once the library behaves");
    assert!(rendered.config.contains("backend misbehaving-python-ok"));
    assert!(rendered.config.contains("frontend http"));
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn the_python_example_passes_its_fixtures_and_the_rust_examples() {
    let library = LibraryUnderTest::Custom(EXAMPLE.clone());
    let examples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples");
    for dir in ["maintenance-mode-python", "maintenance-mode"] {
        let reports = fixtures::run_cases(&RUNTIME, &library, &examples.join(dir).join("fixtures"))
            .expect("fixtures run");
        assert!(reports.len() >= 2, "{dir} ships its fixture cases");
        let failures: Vec<String> = reports
            .iter()
            .filter(|r| !r.passed())
            .map(|r| format!("{dir}/{}: {}", r.name, r.failures.join("; ")))
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
#[ignore = "needs the Python components: `make python-test`"]
fn the_python_and_rust_examples_render_the_same_configuration() {
    let (rust_config, rust_files) =
        render_with(Path::new(haptic::guests::EXAMPLE_MAINTENANCE_MODE_PATH));
    let (python_config, python_files) = render_with(&EXAMPLE);
    assert!(
        python_config.contains("http-request return status 503"),
        "{python_config}"
    );
    assert_eq!(python_config, rust_config);
    assert_eq!(python_files, rust_files);
}

/// Renders the example's annotated fixture cluster with the bundled
/// libraries plus `library`: haproxy.cfg and the files.
fn render_with(library: &Path) -> (String, Vec<(String, String)>) {
    let job = Job {
        inputs: vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
            "../examples/maintenance-mode/fixtures/annotated-host-answers-503/manifests.yaml",
        )],
        ..Job::default()
    };
    let libraries =
        offline::load_libraries(&RUNTIME, &[library.to_owned()]).expect("libraries load");
    let output = offline::render(&job, libraries).expect("renders");
    let files = output
        .rendered
        .files
        .iter()
        .map(|(path, content)| (path.clone(), content.clone()))
        .collect();
    (output.rendered.config, files)
}

//! Failure isolation against the real `haproxy -c`: a render that fails
//! because of one namespace's object drops that object and renders the
//! rest, so no tenant can freeze the others (`haptic::engine`'s isolate
//! module).
//!
//! The hostile objects are ConfigMaps that the misbehaving test library, in
//! its `tenant` mode, turns into configuration carelessly: a line HAProxy
//! refuses, a directive the policy refuses, or a panic. The victim is the
//! example cluster's `shop` namespace, served by the bundled libraries.
//!
//! Broken on purpose (2026-12-07): with `isolable()` answering false for
//! every error (no isolation), each test here failed with the render's
//! error ("HAProxy refused the rendered configuration", "could not render:
//! ... panicked"), as the controller did before isolation.

use std::path::{Path, PathBuf};
use std::time::Instant;

use haptic::guests::MISBEHAVING_PATH;
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job, JobOutput};
use haptic::values::Values;

fn cluster() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster")
}

/// A ConfigMap the `tenant` mode renders, with `data`.
fn config_map(namespace: &str, name: &str, data: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{namespace: {namespace}, name: {name}}}\ndata: {data}\n"
    )
}

/// Renders the example cluster plus `extra` manifests with the misbehaving
/// library in `tenant` mode.
fn render(dir: &Path, extra: &str) -> Result<JobOutput, offline::JobError> {
    let file = dir.join("tenants.yaml");
    std::fs::write(&file, extra).expect("write manifests");
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.misbehaving.mode=tenant")
        .expect("mode value");
    let job = Job {
        inputs: vec![cluster(), file],
        values,
        custom_libraries: vec![PathBuf::from(MISBEHAVING_PATH)],
        validate: true,
    };
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
    let libraries = offline::load_libraries(&runtime, &job.custom_libraries).expect("libraries");
    offline::render(&job, libraries)
}

fn withheld(output: &JobOutput) -> Vec<String> {
    output
        .withheld
        .iter()
        .map(|w| haptic::engine::display(&w.withheld.object))
        .collect()
}

/// What the victim's routing looks like in a render: its hosts' map file.
fn routes_shop(output: &JobOutput) -> bool {
    output
        .rendered
        .files
        .values()
        .any(|content| content.contains("shop.example.com"))
}

fn print_cost(case: &str, output: &JobOutput, took: std::time::Duration) {
    let isolation = output.isolation.as_ref().expect("the render was isolated");
    println!(
        "{case}: isolated to {:?} with {} validations in {} ms (whole offline render {} ms)",
        withheld(output),
        isolation.probes,
        isolation.elapsed.as_millis(),
        took.as_millis()
    );
}

#[test]
fn a_line_haproxy_refuses_drops_only_its_object() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = [
        config_map("tenant-a", "fine", "{line: 'timeout server 7s'}"),
        config_map("attacker", "evil", "{line: 'no-such-keyword at all'}"),
        config_map("tenant-b", "fine", "{}"),
    ]
    .concat();
    let started = Instant::now();
    let output = render(dir.path(), &manifests).expect("the rest renders");
    print_cost("a line HAProxy refuses", &output, started.elapsed());
    assert_eq!(withheld(&output), ["ConfigMap attacker/evil"]);
    let message = output.withheld[0].message();
    assert!(
        message.contains("no-such-keyword") && message.contains("tenants.yaml"),
        "the warning names HAProxy's complaint and the manifest: {message}"
    );
    let config = &output.rendered.config;
    assert!(
        config.contains("backend misbehaving-tenant-a-fine"),
        "{config}"
    );
    assert!(
        config.contains("backend misbehaving-tenant-b-fine"),
        "{config}"
    );
    assert!(!config.contains("no-such-keyword"), "{config}");
    assert!(routes_shop(&output), "the victim is still routed");
    assert!(output.validated_by.is_some(), "validated by HAProxy");
}

#[test]
fn a_directive_the_policy_refuses_and_a_panic_drop_their_objects_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = [
        config_map("tenant-a", "fine", "{}"),
        config_map(
            "attacker",
            "loads-code",
            "{line: 'external-check command /bin/true'}",
        ),
        config_map("other-attacker", "crashes", "{panic: 'true'}"),
    ]
    .concat();
    let started = Instant::now();
    let output = render(dir.path(), &manifests).expect("the rest renders");
    print_cost("policy and panic", &output, started.elapsed());
    assert_eq!(
        withheld(&output),
        [
            "ConfigMap attacker/loads-code",
            "ConfigMap other-attacker/crashes"
        ]
    );
    assert!(
        output
            .rendered
            .config
            .contains("backend misbehaving-tenant-a-fine"),
        "the well-behaved tenant is rendered"
    );
    assert!(routes_shop(&output));
}

#[test]
fn a_failure_no_object_causes_is_not_isolated() {
    // A values-driven bind address HAProxy cannot parse: the admin's, not a
    // tenant's. Dropping objects cannot help; the error is the render's.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tenants.yaml");
    std::fs::write(&file, config_map("tenant-a", "fine", "{}")).expect("write");
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.base.frontends.http.bind=not-an-address:99999")
        .expect("value");
    let job = Job {
        inputs: vec![cluster(), file],
        values,
        custom_libraries: Vec::new(),
        validate: true,
    };
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
    let libraries = offline::load_libraries(&runtime, &[]).expect("libraries");
    let error = offline::render(&job, libraries).expect_err("nothing to isolate");
    assert!(error.to_string().contains("library `base`"), "{error}");
}

/// `haptic render` renders the rest, names the withheld object on stderr and
/// exits 3, so a pipeline checking manifests notices.
#[test]
fn haptic_render_names_the_withheld_object_and_exits_3() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tenants.yaml");
    std::fs::write(
        &file,
        config_map("attacker", "evil", "{line: 'no-such-keyword'}"),
    )
    .expect("write");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_haptic"))
        .arg("render")
        .arg(cluster())
        .arg(&file)
        .args(["-l", MISBEHAVING_PATH])
        .args(["--set", "templateLibraries.misbehaving.mode=tenant"])
        .output()
        .expect("haptic render runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("ObjectRefused") && stderr.contains("ConfigMap attacker/evil"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("shop.example.com"), "the rest is rendered");
}

/// A running engine: a tenant's bad edit of an object the fleet already
/// serves keeps that object's accepted version in the render (its route
/// keeps serving as it was), while another tenant's change in the same
/// batch deploys; the owner's next edit is tried again and deploys.
#[test]
fn a_bad_edit_keeps_the_accepted_version_and_the_next_edit_is_tried_again() {
    use haptic::engine::{Engine, load_libraries};
    use haptic::render::{ClusterChange, ClusterObject};

    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
    let libraries =
        load_libraries(&runtime, &[PathBuf::from(MISBEHAVING_PATH)]).expect("libraries");
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.misbehaving.mode=tenant")
        .expect("mode value");
    let mut engine = Engine::new(libraries, values).expect("engine");
    let map = |namespace: &str, line: &str, version: &str| {
        ClusterChange::Applied(
            ClusterObject::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": namespace, "name": "app", "resourceVersion": version},
                "data": {"line": line},
            }))
            .expect("a complete object"),
        )
    };
    let first = engine
        .finish_render(
            vec![
                map("tenant-a", "timeout server 7s", "1"),
                map("tenant-b", "timeout server 1s", "1"),
            ],
            |_| true,
        )
        .expect("a clean start");
    assert!(first.isolation.is_none() && first.withheld.is_empty());

    // tenant-a's edit is refused; tenant-b's edit in the same batch deploys.
    let second = engine
        .finish_render(
            vec![
                map("tenant-a", "no-such-keyword", "2"),
                map("tenant-b", "timeout server 2s", "2"),
            ],
            |_| true,
        )
        .expect("isolated");
    let config = &second.rendered.config;
    assert!(config.contains("timeout server 7s"), "{config}");
    assert!(config.contains("timeout server 2s"), "{config}");
    assert!(!config.contains("no-such-keyword"), "{config}");
    assert_eq!(second.withheld.len(), 1);
    assert!(second.withheld[0].settled_kept, "the accepted version kept");
    assert!(
        second.withheld[0]
            .message()
            .contains("ConfigMap tenant-a/app: its latest change was not deployed"),
        "{}",
        second.withheld[0].message()
    );

    // Another tenant's later change: no isolation needed, still withheld.
    let third = engine
        .finish_render(vec![map("tenant-b", "timeout server 3s", "3")], |_| true)
        .expect("renders");
    assert!(third.isolation.is_none());
    assert!(third.rendered.config.contains("timeout server 3s"));
    assert!(third.rendered.config.contains("timeout server 7s"));
    assert_eq!(third.withheld.len(), 1, "still withheld until it changes");

    // Fixed by its owner: tried again and deployed, nothing withheld.
    let fourth = engine
        .finish_render(vec![map("tenant-a", "timeout server 8s", "4")], |_| true)
        .expect("renders");
    assert!(fourth.rendered.config.contains("timeout server 8s"));
    assert!(fourth.withheld.is_empty());
}

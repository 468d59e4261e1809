//! End to end through the offline job: the bundled libraries over the example
//! cluster, validated by the real `haproxy -c`.

use std::path::PathBuf;

use haptic::library::types::StatusVariant;
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job, JobError};
use haptic::values::Values;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn runtime() -> LibraryRuntime {
    LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts")
}

fn render(values: Values, inputs: Vec<PathBuf>) -> Result<offline::JobOutput, JobError> {
    let runtime = runtime();
    let job = Job {
        inputs,
        values,
        custom_libraries: Vec::new(),
        validate: true,
    };
    let libraries = offline::load_libraries(&runtime, &job.custom_libraries)?;
    offline::render(&job, libraries)
}

fn has_line(config: &str, line: &str) -> bool {
    config.lines().any(|l| l.trim() == line)
}

#[test]
fn example_cluster_renders_and_haproxy_accepts_it() {
    let output =
        render(Values::default(), vec![repo().join("examples/cluster")]).expect("example renders");
    let config = &output.rendered.config;
    assert!(config.starts_with("global\n"), "{config}");
    // One backend per service port, one server per endpoint named after its pod.
    assert!(config.contains("backend shop_web_80"), "{config}");
    assert!(
        has_line(config, "server web-7d9c6-aaaaa 127.0.10.1:8080"),
        "{config}"
    );
    // Not ready and terminating endpoints stay in the file, disabled.
    assert!(
        has_line(config, "server web-7d9c6-bbbbb 127.0.10.2:8080 disabled"),
        "{config}"
    );
    assert!(
        has_line(config, "server api-5f8b9-ddddd 127.0.11.2:9000 disabled"),
        "{config}"
    );
    // Gate off: the gated new pod is only as ready as its endpoint says.
    assert!(
        has_line(
            config,
            "server checkout-7f5e9-new22 127.0.12.2:8080 disabled"
        ),
        "{config}"
    );
    assert!(
        output
            .rendered
            .status_patches
            .get(&StatusVariant::Deployed)
            .is_none_or(|patches| patches.iter().all(|(_, patch)| patch.object.kind != "Pod"))
    );
}

#[test]
fn readiness_gate_enables_the_gated_pod_and_plans_its_condition() {
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.kubernetesBackends.podReadinessGate.enabled=true")
        .expect("valid assignment");
    let output = render(values, vec![repo().join("examples/cluster")]).expect("example renders");
    let config = &output.rendered.config;
    assert!(
        has_line(config, "server checkout-7f5e9-new22 127.0.12.2:8080"),
        "{config}"
    );
    let patches = output
        .rendered
        .status_patches
        .get(&StatusVariant::Deployed)
        .expect("deployed patches planned");
    let new_pod = patches
        .iter()
        .find(|(_, patch)| {
            patch.object.kind == "Pod" && patch.object.name == "checkout-7f5e9-new22"
        })
        .expect("a patch for the gated pod");
    assert_eq!(&*new_pod.0, "status-patches-150-pod-readiness-gate");
    let status = new_pod.1.status.to_value();
    assert_eq!(
        status["conditions"][0]["type"],
        "haproxy-haptic.org/load-balancer-ready"
    );
    assert_eq!(status["conditions"][0]["status"], "True");
}

#[test]
fn a_bad_manifest_is_named_by_file_and_document() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("broken.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Service\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: [oops\n",
    )
    .expect("write manifest");
    let error = render(Values::default(), vec![file]).expect_err("broken YAML is refused");
    let message = error.to_string();
    assert!(message.contains("broken.yaml"), "{message}");
    assert!(message.contains("document 2"), "{message}");
}

#[test]
fn a_config_haproxy_refuses_names_the_library_that_wrote_the_line() {
    // A values-driven bind address that HAProxy cannot parse.
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.base.frontends.http.bind=not-an-address:99999")
        .expect("valid assignment");
    let error = render(values, vec![repo().join("examples/cluster")]).expect_err("haproxy refuses");
    let message = error.to_string();
    assert!(message.contains("HAProxy refused"), "{message}");
    assert!(message.contains("library `base`"), "{message}");
}

/// `null` in values removes a default, as in Helm, in what the library
/// itself receives: `base` writes no `log` line when its default is nulled.
#[test]
fn null_in_values_removes_a_default_from_what_the_library_sees() {
    let inputs = vec![repo().join("examples/cluster")];
    let with_default = render(Values::default(), inputs.clone()).expect("renders");
    assert!(
        has_line(
            &with_default.rendered.config,
            "log stdout format raw local0"
        ),
        "{}",
        with_default.rendered.config
    );
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.base.global.log=null")
        .expect("--set");
    let removed = render(values, inputs).expect("renders");
    let global: Vec<&str> = removed
        .rendered
        .config
        .lines()
        .take_while(|line| !line.starts_with("defaults"))
        .collect();
    assert!(
        !global.iter().any(|line| line.trim().starts_with("log ")),
        "{global:#?}"
    );
}

#[test]
fn an_unreadable_object_is_left_out_with_a_warning_on_it() {
    // Issue 24, item 4 (was issue 11's error test): an Ingress the typed
    // parse refuses no longer fails the render; the warning is on the
    // object, which the controller resolves to its kind for the Event.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: admin, namespace: shop}\nspec: {rules: 5}\n",
    )
    .expect("manifest");
    let output = render(Values::default(), vec![path]).expect("the rest renders");
    let warnings = &output.rendered.warnings;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let (library, _, warning) = &warnings[0];
    assert_eq!(&**library, "ingress");
    assert_eq!(warning.reason, "ObjectUnreadable");
    let object = warning.object.as_ref().expect("names the object");
    assert_eq!(
        (object.namespace.as_str(), object.name.as_str()),
        ("shop", "admin")
    );
    assert!(
        warning.message.contains("left out of the configuration"),
        "{}",
        warning.message
    );
}

#[test]
fn the_example_cluster_is_warned_about_binding_its_own_endpoints() {
    // Issue 11: base's default `bind :8080` covers the example's loopback
    // endpoints on port 8080, and nothing said so.
    let output = render(Values::default(), vec![repo().join("examples/cluster")]).expect("renders");
    assert_eq!(output.self_loops.len(), 1, "{:?}", output.self_loops);
    assert!(
        output.self_loops[0].contains("`frontend http` binds `:8080`, which includes 127."),
        "{:?}",
        output.self_loops
    );
    let by = output.validated_by.as_deref().unwrap_or_default();
    let version = haptic::validate::haproxy_version().expect("haproxy -v");
    assert!(
        by.starts_with(&format!("HAProxy {version} (")) && by.ends_with(" -c`)"),
        "{by}"
    );

    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.base.frontends.http.bind=127.0.0.1:8080")
        .expect("assignment");
    let output = render(values, vec![repo().join("examples/cluster")]).expect("renders");
    assert!(output.self_loops.is_empty(), "{:?}", output.self_loops);
}

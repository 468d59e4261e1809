//! Owned objects through the whole offline path: a library on the SDK asks
//! for a Service per labelled ConfigMap (contract 0.3.0's `owned-object`),
//! and `haptic render` shows and writes the manifest a controller would
//! apply, with the owner reference resolved from the watched owner, without
//! applying anything. (The controller's applier is proven against a real
//! API server in `tests/testbed/tests/owned.rs`.)

use std::path::PathBuf;

use haptic::guests::OWNED_OBJECTS_PATH;
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job, JobError};
use haptic::owned::OWNED_BY_LABEL;
use haptic::values::Values;
use serde_json::json;

const MANIFESTS: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: gw
  namespace: shop
  uid: 0d4c6c1e-0000-4000-8000-000000000001
  labels: {haptic.test/gateway: "true"}
data: {port: "8000"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: plain
  namespace: shop
data: {port: "9000"}
"#;

fn job(dir: &std::path::Path, values: Values) -> Result<offline::JobOutput, JobError> {
    let manifests = dir.join("manifests.yaml");
    std::fs::write(&manifests, MANIFESTS).expect("manifests written");
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
    let job = Job {
        inputs: vec![manifests],
        values,
        custom_libraries: vec![PathBuf::from(OWNED_OBJECTS_PATH)],
        validate: true,
    };
    let libraries = offline::load_libraries(&runtime, &job.custom_libraries).expect("libraries");
    offline::render(&job, libraries)
}

#[test]
fn render_shows_and_writes_owned_objects_as_a_controller_would_apply_them() {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = job(dir.path(), Values::default()).expect("renders");
    assert_eq!(output.owned_objects.len(), 1, "only the labelled ConfigMap");
    let object = &output.owned_objects[0];
    assert_eq!(object.to_string(), "Service shop/gw-gateway");
    assert_eq!(&*object.library, "owned-objects");
    let manifest = &object.manifest;
    assert_eq!(manifest["apiVersion"], "v1");
    assert_eq!(manifest["metadata"]["namespace"], "shop");
    assert_eq!(
        manifest["metadata"]["labels"][OWNED_BY_LABEL],
        "owned-objects"
    );
    assert_eq!(
        manifest["metadata"]["labels"]["app.kubernetes.io/name"],
        "haproxy"
    );
    assert_eq!(
        manifest["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "gw",
            "uid": "0d4c6c1e-0000-4000-8000-000000000001", "controller": true}])
    );
    assert_eq!(manifest["spec"]["ports"][0]["port"], 8000);

    let text = offline::to_text(&output);
    assert!(text.contains("# ---- owned objects"), "{text}");
    assert!(
        text.contains(
            "# library: owned-objects, owner: ConfigMap shop/gw, field manager: haptic-owned"
        ),
        "{text}"
    );
    assert!(text.contains("name: gw-gateway"), "{text}");

    let out = dir.path().join("out");
    offline::write_dir(&output, &out).expect("written");
    let written =
        std::fs::read_to_string(out.join("owned-objects.yaml")).expect("owned-objects.yaml");
    assert!(written.contains("kind: Service"), "{written}");
    assert!(
        written.contains("haproxy-haptic.org/owned-by: owned-objects"),
        "{written}"
    );
}

#[test]
fn an_owned_object_of_a_kind_the_plan_does_not_declare_fails_the_render() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.ownedObjects.declare=false")
        .expect("value");
    let error = job(dir.path(), values).expect_err("refused").to_string();
    assert!(
        error.contains("library `owned-objects` asks for Service shop/gw-gateway")
            && error.contains("does not declare that it applies `v1/Service`"),
        "{error}"
    );
}

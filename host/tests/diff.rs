//! `haptic diff` as a user runs it: the example cluster before and after an
//! edit, rendered and validated by the real `haproxy -c`; the verdict on
//! how the agents would apply it comes from their own planning code.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A copy of `examples/cluster` in `dir/name`, with `edit` applied to shop.yaml.
fn cluster(dir: &Path, name: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
    let copy = dir.join(name);
    std::fs::create_dir_all(&copy).expect("copy dir");
    for entry in std::fs::read_dir(repo().join("examples/cluster")).expect("examples") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, copy.join(path.file_name().expect("a file"))).expect("copy");
    }
    let shop = copy.join("shop.yaml");
    let text = std::fs::read_to_string(&shop).expect("shop.yaml");
    std::fs::write(&shop, edit(text)).expect("write shop.yaml");
    copy
}

/// `haptic diff`'s exit code and stdout.
fn diff(args: &[&Path]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_haptic"))
        .arg("diff")
        .args(args)
        .env("HAPTIC_DEFAULT_CERTIFICATE", args[0].join("../default.pem"))
        .output()
        .expect("haptic runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.code().is_some(), "killed: {stderr}");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn a_host_edit_goes_in_at_runtime_and_a_new_backend_needs_a_reload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = cluster(dir.path(), "old", |text| text);
    let renamed = cluster(dir.path(), "renamed", |text| {
        text.replace("host: shop.example.com", "host: store.example.com")
    });
    let (code, out) = diff(&[&old, &renamed]);
    assert_eq!(code, 1, "a difference exits 1:\n{out}");
    assert!(out.contains("+store.example.com/ shop_web_80"), "{out}");
    assert!(out.contains("-shop.example.com/ shop_web_80"), "{out}");
    // Each map the host keys (routes, and the route identity maps beside
    // them) is replaced at runtime; nothing reloads.
    assert!(
        out.contains("commands on the running workers, no reload)"),
        "{out}"
    );
    assert!(
        out.contains("  replace the entries of map maps/ingress-prefix.map (5 lines)"),
        "{out}"
    );
    assert!(
        !out.contains("--- a/haproxy.cfg"),
        "haproxy.cfg is unchanged:\n{out}"
    );

    let search = cluster(dir.path(), "search", |text| {
        text + "---
apiVersion: v1
kind: Service
metadata: {name: search, namespace: shop}
spec:
  selector: {app: search}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: search, namespace: shop}
spec:
  ingressClassName: haptic
  rules:
    - host: search.example.com
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: search, port: {number: 80}}}}
"
    });
    let (code, out) = diff(&[&old, &search]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("+backend shop_search_80"), "{out}");
    assert!(
        out.contains("apply: reload (the configuration has"),
        "{out}"
    );

    let (code, out) = diff(&[&old, &old]);
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "no difference: the same configuration, files and status\n"
        )
    );
}

#[test]
fn a_values_change_shows_the_status_patches_it_adds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cluster = cluster(dir.path(), "cluster", |text| text);
    let gate = dir.path().join("gate.yaml");
    std::fs::write(
        &gate,
        "templateLibraries:\n  kubernetesBackends:\n    podReadinessGate: {enabled: true}\n",
    )
    .expect("values");
    let (code, out) = diff(&[&cluster, &cluster, Path::new("--new-values"), &gate]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("status patch deployed Pod shop/checkout-7f5e9-new22:"),
        "{out}"
    );
    assert!(
        out.contains("+    type: haproxy-haptic.org/load-balancer-ready"),
        "{out}"
    );
    assert!(
        out.contains("set server shop_checkout_80/checkout-7f5e9-new22 state ready"),
        "{out}"
    );
}

#[test]
fn owned_objects_that_appear_or_change_are_shown() {
    // The owned-objects test library asks for a Service per ConfigMap
    // labelled haptic.test/gateway, its port from the ConfigMap's data.
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, port: &str, labelled: bool| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).expect("dir");
        let labels = if labelled {
            "\n  labels: {haptic.test/gateway: \"true\"}"
        } else {
            ""
        };
        std::fs::write(
            path.join("gw.yaml"),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gw\n  namespace: shop\n  uid: 0d4c6c1e-0000-4000-8000-000000000001{labels}\ndata: {{port: \"{port}\"}}\n"
            ),
        )
        .expect("manifest");
        path
    };
    let (none, first, second) = (
        write("none", "8000", false),
        write("first", "8000", true),
        write("second", "9000", true),
    );
    let library = Path::new(haptic::guests::OWNED_OBJECTS_PATH);
    let (code, out) = diff(&[&none, &first, Path::new("--library"), library]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("owned object Service shop/gw-gateway (server-side applied as haptic-owned):"),
        "{out}"
    );
    assert!(out.contains("+kind: Service"), "{out}");
    let (code, out) = diff(&[&first, &second, Path::new("--library"), library]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("-    port: 8000"), "{out}");
    assert!(out.contains("+    port: 9000"), "{out}");
}

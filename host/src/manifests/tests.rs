use std::path::Path;

use super::*;
use crate::library::types::Watch;
use crate::render::WatchFilter;

fn parse_str(content: &str) -> Result<Vec<Manifest>, ManifestError> {
    parse(Path::new("test.yaml"), content, &WatchedKinds::new())
}

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n";

#[test]
fn multi_document_yaml_skips_empty_documents_and_numbers_the_rest() {
    let content = format!(
        "---\n# only a comment\n---\n{SERVICE}---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: apps\n"
    );
    let manifests = parse_str(&content).expect("valid manifests");
    let found: Vec<_> = manifests
        .iter()
        .map(|m| {
            (
                m.source.document,
                m.reference().kind.as_str(),
                m.reference().namespace.as_str(),
                m.reference().name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (2, "Service", "default", "web"),
            (4, "Namespace", "", "apps")
        ]
    );
}

#[test]
fn namespace_defaults_and_is_written_into_the_object() {
    let manifests = parse_str(SERVICE).expect("valid");
    assert_eq!(
        manifests[0].object.value()["metadata"]["namespace"],
        "default"
    );
    let cluster_scoped = parse_str(
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: haptic\n  namespace: ignored\n",
    )
    .expect("valid");
    assert_eq!(cluster_scoped[0].reference().namespace, "");
    assert!(
        cluster_scoped[0].object.value()["metadata"]
            .get("namespace")
            .is_none()
    );
}

#[test]
fn synthetic_resource_version_follows_content_and_keeps_a_given_one() {
    let a = parse_str(SERVICE).expect("valid");
    let b = parse_str(SERVICE).expect("valid");
    let changed = parse_str(&format!("{SERVICE}spec:\n  type: ClusterIP\n")).expect("valid");
    assert_eq!(a[0].object.resource_version.len(), 12);
    assert_eq!(a[0].object.resource_version, b[0].object.resource_version);
    assert_ne!(
        a[0].object.resource_version,
        changed[0].object.resource_version
    );
    let given = parse_str(&format!("{SERVICE}  resourceVersion: \"42\"\n")).expect("valid");
    assert_eq!(given[0].object.resource_version, "42");
}

#[test]
fn lists_are_expanded_and_typed_list_items_inherit_kind() {
    let content = r#"{"apiVersion": "v1", "kind": "ServiceList", "items": [
        {"metadata": {"name": "a", "namespace": "x"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "b"}}]}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: c}
---
apiVersion: v1
kind: List
items: []
---
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
"#;
    let manifests = parse_str(content).expect("valid");
    let found: Vec<_> = manifests
        .iter()
        .map(|m| {
            (
                m.reference().kind.as_str(),
                m.reference().name.as_str(),
                m.source.document,
                m.source.item,
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("Service", "a", 1, Some(1)),
            ("Service", "b", 1, Some(2)),
            ("ConfigMap", "c", 2, Some(1))
        ]
    );
}

#[test]
fn invalid_yaml_names_file_document_and_line() {
    let error = parse_str(&format!(
        "{SERVICE}---\nkind: Service\nmetadata: [unclosed\n"
    ))
    .expect_err("invalid");
    let text = error.to_string();
    assert!(
        matches!(error, ManifestError::Yaml { ref at, .. } if at.document == 2),
        "{text}"
    );
    assert!(
        text.contains("test.yaml (document 2)") && text.contains("line 7"),
        "{text}"
    );
}

#[test]
fn structural_errors_say_what_is_missing() {
    let cases = [
        ("- a\n- b\n", "is a list, not a Kubernetes object"),
        ("kind: Service\nmetadata: {name: x}\n", "has no apiVersion"),
        ("apiVersion: v1\nmetadata: {name: x}\n", "has no kind"),
        (
            "apiVersion: v1\nkind: Service\nmetadata: {}\n",
            "has no metadata.name",
        ),
        ("apiVersion: v1\nkind: Service\n", "has no metadata.name"),
    ];
    for (content, expected) in cases {
        let error = parse_str(content).expect_err(content).to_string();
        assert!(error.contains(expected), "{content:?}: {error}");
        assert!(error.contains("test.yaml (document 1)"), "{error}");
    }
}

#[test]
fn unknown_kinds_are_refused_unless_a_library_watches_them() {
    let old = "apiVersion: networking.k8s.io/v1beta1\nkind: Ingress\nmetadata: {name: x}\n";
    let error = parse_str(old)
        .expect_err("v1beta1 Ingress is not served")
        .to_string();
    assert!(
        error.contains(
            "networking.k8s.io/v1beta1 Ingress was removed in Kubernetes 1.22; use apiVersion: networking.k8s.io/v1"
        ),
        "{error}"
    );
    let typo = "apiVersion: networking.k8s.io/v2\nkind: Ingress\nmetadata: {name: x}\n";
    let error = parse_str(typo).expect_err("no v2").to_string();
    assert_eq!(
        error.matches("networking.k8s.io/v1 Ingress").count(),
        1,
        "the suggestion is named once: {error}"
    );
    let custom = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: x}\n";
    let error = parse_str(custom).expect_err("unknown CRD").to_string();
    assert!(
        error.contains("unknown kind Widget in apiVersion example.com/v1"),
        "{error}"
    );
    let accepted = parse(
        Path::new("w.yaml"),
        custom,
        &untrimmed([Kind::new("example.com/v1", "Widget")]),
    )
    .expect("watched kind");
    assert_eq!(accepted[0].reference().namespace, "default");
}

#[test]
fn directories_load_recursively_sorted_and_duplicates_name_both_places() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("b.yaml"), SERVICE.replace("web", "b")).expect("write");
    std::fs::write(dir.path().join("a.yml"), SERVICE.replace("web", "a")).expect("write");
    std::fs::write(
        dir.path().join("sub/c.json"),
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"c"}}"#,
    )
    .expect("write");
    std::fs::write(dir.path().join("notes.txt"), "not a manifest").expect("write");
    let names: Vec<_> = load_paths(&[dir.path()], &WatchedKinds::new())
        .expect("valid")
        .into_iter()
        .map(|m| m.reference().name.clone())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);

    std::fs::write(
        dir.path().join("sub/d.yaml"),
        format!("{SERVICE}---\n{}", SERVICE.replace("web", "a")),
    )
    .expect("write");
    let error = load_paths(&[dir.path()], &WatchedKinds::new()).expect_err("duplicate");
    let text = error.to_string();
    assert!(matches!(error, ManifestError::Duplicate { .. }), "{text}");
    assert!(
        text.contains("a.yml (document 1)") && text.contains("d.yaml (document 2)"),
        "{text}"
    );
    assert!(text.contains("v1 Service default/a"), "{text}");
}

#[test]
fn a_missing_path_is_a_read_error_naming_it() {
    let error = load_paths(&[Path::new("/nonexistent/manifests")], &WatchedKinds::new())
        .expect_err("missing");
    assert!(
        error.to_string().contains("/nonexistent/manifests"),
        "{error}"
    );
}

// Selection of loaded manifests by the render core's rule.

fn watch(api_version: &str, kind: &str) -> Watch {
    Watch {
        name: "w".into(),
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: None,
        label_selector: None,
        field_selector: None,
        ignore_fields: vec![],
    }
}

fn load(content: &str) -> Vec<Manifest> {
    parse(Path::new("test.yaml"), content, &WatchedKinds::new()).expect("valid manifests")
}

fn names(watch: &Watch, manifests: &[Manifest]) -> Vec<String> {
    let filter = WatchFilter::of(watch).expect("valid selectors");
    manifests
        .iter()
        .filter(|m| filter.selects(&m.object))
        .map(|m| m.reference().name.clone())
        .collect()
}

#[test]
fn watches_match_api_version_kind_namespace_and_labels() {
    let manifests = load(
        "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: x, labels: {app: web, tier: front}}\n---\n\
         apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: y, labels: {app: db}}\n---\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: x, labels: {app: web}}\n",
    );
    let services = watch("v1", "Service");
    let with = |namespace: Option<&str>, labels: Option<&str>| Watch {
        namespace: namespace.map(Into::into),
        label_selector: labels.map(Into::into),
        ..services.clone()
    };
    assert_eq!(names(&services, &manifests), ["a", "b"]);
    assert_eq!(names(&with(Some("y"), None), &manifests), ["b"]);
    assert_eq!(names(&with(Some(""), None), &manifests), ["a", "b"]);
    assert_eq!(names(&with(None, Some("app=web")), &manifests), ["a"]);
    assert_eq!(names(&with(None, Some("tier")), &manifests), ["a"]);
    assert_eq!(names(&with(None, Some("!tier")), &manifests), ["b"]);
    assert!(names(&watch("apps/v1", "Service"), &manifests).is_empty());
    let error = WatchFilter::of(&with(None, Some("app in ()"))).expect_err("bad");
    assert!(
        error
            .to_string()
            .starts_with("invalid label selector 'app in ()'"),
        "{error}"
    );
}

/// Offline, a Secret written without `type:` is the `Opaque` Secret the
/// API server would have stored: a `type=Opaque` watch finds it, a
/// `kubernetes.io/tls` watch does not.
#[test]
fn a_secret_without_type_is_found_by_a_type_opaque_watch() {
    let manifests = load(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: plain, namespace: shop}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: shop}\ntype: kubernetes.io/tls\n",
    );
    let by_type = |selector: &str| Watch {
        field_selector: Some(selector.into()),
        ..watch("v1", "Secret")
    };
    assert_eq!(names(&by_type("type=Opaque"), &manifests), ["plain"]);
    assert_eq!(
        names(&by_type("type=kubernetes.io/tls"), &manifests),
        ["cert"]
    );
    assert_eq!(names(&by_type("type!=Opaque"), &manifests), ["cert"]);
    assert_eq!(
        manifests[0].object.value()["type"],
        "Opaque",
        "the library sees it too"
    );
}

use serde_json::json;

use super::*;

fn libraries() -> Vec<(String, Value)> {
    vec![
        (
            "base".to_owned(),
            json!({"frontends": {"http": {"bind": ":80"}, "https": {"bind": ":443"}}}),
        ),
        (
            "kubernetes-backends".to_owned(),
            json!({"podReadinessGate": {"enabled": false}, "balance": "roundrobin", "ports": [80]}),
        ),
        (
            "status-patches-150-pod-readiness-gate".to_owned(),
            json!({}),
        ),
    ]
}

fn from_yaml(text: &str) -> Result<Values, ValuesError> {
    Values::from_value(
        serde_yaml_ng::from_str(text).expect("test YAML parses"),
        "values.yaml",
    )
}

#[test]
fn camel_case_matches_helm_keys() {
    assert_eq!(camel_case("kubernetes-backends"), "kubernetesBackends");
    assert_eq!(
        camel_case("status-patches-150-pod-readiness-gate"),
        "statusPatches150PodReadinessGate"
    );
    assert_eq!(camel_case("base"), "base");
    assert_eq!(camel_case("maintenance-mode"), "maintenanceMode");
}

#[test]
fn library_tree_merges_defaults_under_user_values() {
    let values = from_yaml(
        "templateLibraries:\n  kubernetesBackends:\n    podReadinessGate: {enabled: true}\n    ports: [8080, 9090]\n  \
         base:\n    frontends:\n      https: ~\n",
    )
    .expect("valid");
    let tree = values.library_tree(&libraries()).expect("known libraries");
    assert_eq!(
        tree,
        json!({
            "base": {"frontends": {"http": {"bind": ":80"}}},
            "kubernetesBackends": {"podReadinessGate": {"enabled": true}, "balance": "roundrobin", "ports": [8080, 9090]},
            "statusPatches150PodReadinessGate": {},
        })
    );
}

#[test]
fn disabled_libraries_are_left_out_and_enabled_defaults_to_true() {
    let values =
        from_yaml("templateLibraries:\n  statusPatches150PodReadinessGate:\n    enabled: false\n")
            .expect("valid");
    assert!(!values.is_enabled("status-patches-150-pod-readiness-gate"));
    assert!(values.is_enabled("kubernetes-backends"));
    assert!(Values::default().is_enabled("base"));
    let tree = values.library_tree(&libraries()).expect("known");
    let keys: Vec<_> = tree.as_object().expect("object").keys().cloned().collect();
    assert_eq!(keys, ["base", "kubernetesBackends"]);
}

#[test]
fn a_library_off_by_default_is_enabled_only_when_asked() {
    let opt_in = json!({"enabled": false, "port": 1});
    assert!(!Values::default().is_enabled_over("gateway-api", &opt_in));
    let on = from_yaml("templateLibraries:\n  gatewayApi:\n    enabled: true\n").expect("valid");
    assert!(on.is_enabled_over("gateway-api", &opt_in));
    let tree = on
        .library_tree(&[("gateway-api".to_owned(), opt_in.clone())])
        .expect("known");
    assert_eq!(tree["gatewayApi"], json!({"enabled": true, "port": 1}));
    let off = Values::default()
        .library_tree(&[("gateway-api".to_owned(), opt_in)])
        .expect("known");
    assert_eq!(off, json!({}));
}

#[test]
fn the_charts_layout_is_accepted_and_the_top_level_wins() {
    let values = from_yaml(
        "controller:\n  replicaCount: 2\n  templateLibraries:\n    kubernetesBackends:\n      balance: leastconn\n      \
         enabled: false\ntemplateLibraries:\n  kubernetesBackends:\n    enabled: true\n",
    )
    .expect("valid");
    assert!(values.is_enabled("kubernetes-backends"));
    let tree = values.library_tree(&libraries()).expect("known");
    assert_eq!(tree["kubernetesBackends"]["balance"], "leastconn");
}

#[test]
fn an_unknown_library_key_is_refused_with_a_suggestion() {
    let values = from_yaml("templateLibraries:\n  kubernetesBackend:\n    enabled: false\n")
        .expect("valid shape");
    let error = values.library_tree(&libraries()).expect_err("typo");
    let text = error.to_string();
    assert!(
        text.contains("templateLibraries.kubernetesBackend names no template library"),
        "{text}"
    );
    assert!(
        text.contains("known: base, kubernetesBackends, statusPatches150PodReadinessGate"),
        "{text}"
    );
    assert!(text.contains("did you mean `kubernetesBackends`"), "{text}");
    let kebab = from_yaml("templateLibraries:\n  kubernetes-backends: {}\n").expect("valid shape");
    let text = kebab
        .library_tree(&libraries())
        .expect_err("kebab key")
        .to_string();
    assert!(text.contains("did you mean `kubernetesBackends`"), "{text}");
    let far = from_yaml("templateLibraries:\n  certManager: {}\n").expect("valid shape");
    let text = far
        .library_tree(&libraries())
        .expect_err("unknown")
        .to_string();
    assert!(!text.contains("did you mean"), "{text}");
}

#[test]
fn wrong_shapes_are_refused_naming_origin_and_path() {
    let cases = [
        (
            "- a\n",
            "values.yaml: `(the whole file)` must be a mapping, found a list",
        ),
        (
            "templateLibraries: [a]\n",
            "`templateLibraries` must be a mapping of library names, found a list",
        ),
        (
            "controller: 3\n",
            "`controller` must be a mapping, found a number",
        ),
        (
            "templateLibraries:\n  base: true\n",
            "`templateLibraries.base` must be a mapping",
        ),
        (
            "controller:\n  templateLibraries:\n    base: {enabled: 'no'}\n",
            "`controller.templateLibraries.base.enabled` must be true or false, found a string",
        ),
    ];
    for (text, expected) in cases {
        let error = from_yaml(text).expect_err(text).to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
}

#[test]
fn set_parses_yaml_scalars_and_refuses_breaking_the_shape() {
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.kubernetesBackends.podReadinessGate.enabled=true")
        .expect("ok");
    values
        .set("templateLibraries.base.maxconn", "3")
        .expect("ok");
    values
        .set("templateLibraries.base.name", "\"3\"")
        .expect("ok");
    values
        .set("templateLibraries.base.bind", "not-an-address:99999")
        .expect("ok");
    values
        .set("templateLibraries.base.url", "http://x: y")
        .expect("ok");
    values
        .set("templateLibraries.base.ports", "[80, 443]")
        .expect("ok");
    values
        .set("templateLibraries.base.annotations.example\\.com/key", "v")
        .expect("ok");
    values.set("templateLibraries.base.empty", "").expect("ok");
    let base = &values.as_value()["templateLibraries"]["base"];
    assert_eq!(
        values.as_value()["templateLibraries"]["kubernetesBackends"]["podReadinessGate"]["enabled"],
        true
    );
    assert_eq!(base["maxconn"], 3);
    assert_eq!(base["name"], "3");
    assert_eq!(base["bind"], "not-an-address:99999");
    assert_eq!(base["url"], "http://x: y");
    assert_eq!(base["ports"], json!([80, 443]));
    assert_eq!(base["annotations"]["example.com/key"], "v");
    assert_eq!(base["empty"], "");

    values
        .set("templateLibraries.base.enabled", "false")
        .expect("ok");
    assert!(!values.is_enabled("base"));
    let before = values.clone();
    let error = values
        .set("templateLibraries.base.enabled", "maybe")
        .expect_err("not a bool");
    assert!(
        error
            .to_string()
            .starts_with("--set templateLibraries.base.enabled=maybe:"),
        "{error}"
    );
    assert_eq!(
        values, before,
        "a refused --set leaves the values unchanged"
    );
    assert!(values.set_assignment("templateLibraries.base").is_err());
    assert!(values.set("templateLibraries..x", "1").is_err());
}

#[test]
fn load_reads_files_and_names_them_in_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("values.yaml");
    std::fs::write(&good, "templateLibraries:\n  base:\n    enabled: false\n").expect("write");
    assert!(!Values::load(&good).expect("valid").is_enabled("base"));
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "# nothing\n").expect("write");
    assert_eq!(
        Values::load(&empty).expect("empty is fine"),
        Values::default()
    );
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "templateLibraries:\n  base: [unclosed\n").expect("write");
    let text = Values::load(&bad).expect_err("invalid YAML").to_string();
    assert!(text.contains("bad.yaml") && text.contains("line"), "{text}");
    let text = Values::load(&dir.path().join("missing.yaml"))
        .expect_err("missing")
        .to_string();
    assert!(text.contains("missing.yaml"), "{text}");
}

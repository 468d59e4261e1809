use super::*;
use crate::library::types::{AuxFile, PatchStatus, Section, Slot, Snippet, StatusVariant, Watch};

fn section(kind: SectionKind, name: &str, body: &str) -> Item {
    Item::Section(std::sync::Arc::new(Section {
        kind,
        name: name.into(),
        body: body.into(),
        secret: false,
    }))
}

fn snippet(target_kind: SectionKind, target_name: &str, lines: &str) -> Item {
    Item::Snippet(std::sync::Arc::new(Snippet {
        target_kind,
        target_name: target_name.into(),
        slot: Slot::Routing,
        priority: 0,
        lines: lines.into(),
        secret: false,
    }))
}

fn file(path: &str) -> Item {
    Item::File(std::sync::Arc::new(AuxFile::new(
        path.into(),
        String::new(),
        false,
    )))
}

fn ingress(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "networking.k8s.io/v1".into(),
        kind: "Ingress".into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn patch(namespace: &str, name: &str, status: &str) -> Item {
    let object = ingress(namespace, name);
    Item::StatusPatch(std::sync::Arc::new(StatusPatch {
        variant: StatusVariant::Rendered,
        status: PatchStatus::new(
            &parse_status(&object, status).expect("test statuses are JSON objects"),
        ),
        object,
    }))
}

fn output(items: Vec<(&str, Item)>, removals: &[&str]) -> RenderOutput {
    RenderOutput {
        complete: false,
        upserts: items.into_iter().map(|(k, i)| (k.to_owned(), i)).collect(),
        removals: removals.iter().map(|r| (*r).to_owned()).collect(),
    }
}

fn problem_with(item: Item) -> Malformed {
    match check_output(&output(vec![("item", item)], &[])) {
        Err((Some(key), problem)) => {
            assert_eq!(key, "item", "the error names the item at fault");
            problem
        }
        other => panic!("expected a malformed item, got {other:?}"),
    }
}

#[test]
fn well_formed_output_passes() {
    let good = output(
        vec![
            (
                "global",
                section(SectionKind::Global, "", "    maxconn 1000\n"),
            ),
            (
                "defaults",
                section(SectionKind::Defaults, "", "    mode http\n"),
            ),
            (
                "be",
                section(
                    SectionKind::Backend,
                    "ns_svc_80",
                    "    server s1 10.0.0.1:80 check\n",
                ),
            ),
            (
                "route",
                snippet(
                    SectionKind::Frontend,
                    "http",
                    "    use_backend ns_svc_80 if { hdr(host) -i a }\n",
                ),
            ),
            ("map", file("maps/hosts.map")),
            ("status", patch("shop", "web", r#"{"loadBalancer":{}}"#)),
            ("cluster-status", patch("", "gateway-class", "{}")),
        ],
        &["old-item"],
    );
    assert_eq!(check_output(&good), Ok(()));
}

#[test]
fn keys_must_be_present_unique_and_not_also_removed() {
    let be = || section(SectionKind::Backend, "b", "");
    assert_eq!(
        check_output(&output(vec![("", be())], &[])),
        Err((None, Malformed::EmptyKey))
    );
    assert_eq!(
        check_output(&output(vec![("k", be()), ("k", be())], &[])),
        Err((Some("k".into()), Malformed::DuplicateKey))
    );
    assert_eq!(
        check_output(&output(vec![("k", be())], &["k"])),
        Err((Some("k".into()), Malformed::UpsertedAndRemoved))
    );
    assert_eq!(
        check_output(&output(vec![], &[""])),
        Err((None, Malformed::EmptyRemoval))
    );
}

#[test]
fn section_names_must_be_haproxy_identifiers() {
    for name in ["a b\nc", "a b", "", "ns/svc", "x\ty", "name;"] {
        let problem = problem_with(section(SectionKind::Backend, name, ""));
        assert!(
            matches!(&problem, Malformed::BadName { name: n, .. } if n == name),
            "{name:?} gave {problem:?}"
        );
    }
    assert!(matches!(
        problem_with(section(SectionKind::Global, "named", "")),
        Malformed::BadName { .. }
    ));
    assert!(matches!(
        problem_with(snippet(SectionKind::Frontend, "", "")),
        Malformed::BadName {
            what: "snippet target",
            ..
        }
    ));
    for name in ["ns_svc-80", "a.b:c", "Backend1"] {
        assert_eq!(check_item(&section(SectionKind::Backend, name, "")), Ok(()));
    }
}

#[test]
fn text_may_not_open_another_section() {
    let problem = problem_with(snippet(
        SectionKind::Frontend,
        "http",
        "    use_backend a\nbackend evil\n    server x 1.2.3.4:80\n",
    ));
    assert_eq!(
        problem,
        Malformed::OpensSection {
            line: 2,
            keyword: "backend",
            text: "backend evil".into()
        }
    );
    // HAProxy ignores indentation when it looks for section keywords.
    assert!(matches!(
        problem_with(section(SectionKind::Backend, "b", "    listen stats\n")),
        Malformed::OpensSection {
            keyword: "listen",
            ..
        }
    ));
    assert!(matches!(
        problem_with(section(
            SectionKind::Backend,
            "b",
            "    option httpchk\r global\n"
        )),
        Malformed::OpensSection {
            keyword: "global",
            ..
        }
    ));
    assert_eq!(
        problem_with(section(SectionKind::Backend, "b", "ok\n\0")),
        Malformed::NulByte { line: 2 }
    );
    // Keywords inside a line are fine.
    assert_eq!(
        check_item(&section(
            SectionKind::Backend,
            "b",
            "    http-request cache-use c\n    stick-table type ip size 1k peers p\n"
        )),
        Ok(())
    );
}

#[test]
fn file_paths_stay_inside_the_configuration_directory() {
    for path in [
        "../etc/passwd",
        "/etc/passwd",
        "maps//a",
        "maps/",
        "",
        "./a",
        "a/../../b",
        "a\nb",
    ] {
        let problem = problem_with(file(path));
        assert!(
            matches!(&problem, Malformed::BadPath { path: p, .. } if p == path),
            "{path:?} gave {problem:?}"
        );
    }
    assert_eq!(check_item(&file("certs/site.pem")), Ok(()));
    assert_eq!(check_item(&file("a..b")), Ok(()));
}

#[test]
fn status_patches_need_a_target_and_a_json_object() {
    assert_eq!(
        problem_with(patch("ns", "", "{}")),
        Malformed::EmptyStatusField { field: "name" }
    );
    assert!(matches!(
        parse_status(&ingress("ns", "web"), "[1]"),
        Err(Malformed::BadStatus { why, .. }) if why == "got an array"
    ));
    assert!(matches!(
        parse_status(&ingress("ns", "web"), "{not json"),
        Err(Malformed::BadStatus { .. })
    ));
}

#[test]
fn library_info_needs_a_kebab_case_name_and_object_defaults() {
    let info = |name: &str, defaults: serde_json::Value| LibraryInfo {
        name: name.into(),
        version: "1.0.0".into(),
        order: 0,
        default_values: defaults,
    };
    assert_eq!(
        check_info(&info("kubernetes-backends", serde_json::json!({}))),
        Ok(())
    );
    for name in ["", "Kubernetes", "a_b", "-a", "a-", "a--b", "a b"] {
        assert_eq!(
            check_info(&info(name, serde_json::json!({}))),
            Err(Malformed::BadLibraryName(name.into()))
        );
    }
    assert_eq!(
        check_info(&info("a", serde_json::json!([]))),
        Err(Malformed::BadDefaultValues("got an array".into()))
    );
}

#[test]
fn plans_need_unique_named_watches() {
    let watch = |name: &str, kind: &str| Watch {
        name: name.into(),
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: None,
        label_selector: None,
        field_selector: None,
        ignore_fields: Vec::new(),
    };
    let plan = |watches| Plan {
        watches,
        patches_status_of: Vec::new(),
        applies: Vec::new(),
    };
    assert_eq!(
        check_plan(&plan(vec![
            watch("svc", "Service"),
            watch("eps", "Endpoints")
        ])),
        Ok(())
    );
    assert!(matches!(
        check_plan(&plan(vec![watch("svc", "Service"), watch("svc", "Pod")])),
        Err(Malformed::BadWatch {
            why: "is declared twice",
            ..
        })
    ));
    assert!(matches!(
        check_plan(&plan(vec![watch("", "Service")])),
        Err(Malformed::BadWatch { .. })
    ));
    assert!(matches!(
        check_plan(&plan(vec![watch("svc", "")])),
        Err(Malformed::BadWatch { .. })
    ));
}

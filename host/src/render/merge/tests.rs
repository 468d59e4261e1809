use std::collections::BTreeMap;

use super::*;
use crate::library::types::{AuxFile, ObjectRef, PatchStatus};

fn section(kind: SectionKind, name: &str, body: &str) -> Item {
    Item::Section(Arc::new(Section {
        kind,
        name: name.into(),
        body: body.into(),
        secret: false,
    }))
}

fn snippet(kind: SectionKind, name: &str, slot: Slot, priority: i32, lines: &str) -> Item {
    Item::Snippet(Arc::new(Snippet {
        target_kind: kind,
        target_name: name.into(),
        slot,
        priority,
        lines: lines.into(),
        secret: false,
    }))
}

fn name(library: &str) -> Arc<str> {
    Arc::from(library)
}

fn merge_once(libraries: &[LibraryItems<'_>]) -> Result<Rendered, MergeError> {
    merge(libraries, &mut MergeCache::default())
}

fn items(entries: &[(&str, Item)]) -> BTreeMap<String, Item> {
    entries
        .iter()
        .map(|(key, item)| ((*key).to_owned(), item.clone()))
        .collect()
}

#[test]
fn sections_are_ordered_and_snippets_follow_slots() {
    let base = items(&[
        (
            "b",
            section(
                SectionKind::Backend,
                "default",
                "http-request return status 404",
            ),
        ),
        (
            "f",
            section(
                SectionKind::Frontend,
                "http",
                "bind :8080\ndefault_backend default",
            ),
        ),
        ("g", section(SectionKind::Global, "", "maxconn 100")),
        ("d", section(SectionKind::Defaults, "", "mode http")),
    ]);
    let ingress = items(&[
        (
            "route",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::Routing,
                0,
                "use_backend web if is_web",
            ),
        ),
        (
            "acl",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::Acls,
                0,
                "acl is_web hdr(host) web",
            ),
        ),
    ]);
    let rendered = merge_once(&[
        LibraryItems {
            library: &name("base"),
            items: &base,
            changed: Changed::All,
        },
        LibraryItems {
            library: &name("ingress"),
            items: &ingress,
            changed: Changed::All,
        },
    ])
    .unwrap();
    let expected = "global\n    maxconn 100\n\ndefaults\n    mode http\n\nfrontend http\n    bind :8080\n    \
                    default_backend default\n    acl is_web hdr(host) web\n    use_backend web if is_web\n\n\
                    backend default\n    http-request return status 404\n\n";
    assert_eq!(rendered.config, expected);
    assert_eq!(rendered.library_at_line(10), Some("ingress"));
    assert_eq!(rendered.library_at_line(2), Some("base"));
}

#[test]
fn two_owners_of_one_section_name_both() {
    let a = items(&[("g", section(SectionKind::Global, "", ""))]);
    let b = items(&[("x", section(SectionKind::Global, "", ""))]);
    let error = merge_once(&[
        LibraryItems {
            library: &name("base"),
            items: &a,
            changed: Changed::All,
        },
        LibraryItems {
            library: &name("custom"),
            items: &b,
            changed: Changed::All,
        },
    ])
    .unwrap_err();
    assert_eq!(
        error,
        MergeError::SectionConflict {
            section: "global".into(),
            first: "base".into(),
            second: "custom".into()
        }
    );
}

#[test]
fn two_owners_of_one_file_name_both() {
    let file = Item::File(Arc::new(AuxFile::new(
        "maps/hosts.map".into(),
        String::new(),
        false,
    )));
    let a = items(&[
        ("g", section(SectionKind::Global, "", "")),
        ("m", file.clone()),
    ]);
    let b = items(&[("m", file)]);
    let error = merge_once(&[
        LibraryItems {
            library: &name("ingress"),
            items: &a,
            changed: Changed::All,
        },
        LibraryItems {
            library: &name("custom"),
            items: &b,
            changed: Changed::All,
        },
    ])
    .unwrap_err();
    assert!(
        error.to_string().contains("`ingress` and `custom`"),
        "{error}"
    );
}

#[test]
fn snippet_without_target_names_library_and_section() {
    let a = items(&[
        ("g", section(SectionKind::Global, "", "")),
        (
            "s",
            snippet(
                SectionKind::Frontend,
                "https",
                Slot::Routing,
                0,
                "use_backend x",
            ),
        ),
    ]);
    let error = merge_once(&[LibraryItems {
        library: &name("ingress"),
        items: &a,
        changed: Changed::All,
    }])
    .unwrap_err();
    assert_eq!(
        error,
        MergeError::MissingSection {
            library: "ingress".into(),
            section: "frontend https".into()
        }
    );
}

#[test]
fn missing_global_is_an_error() {
    let a = items(&[("b", section(SectionKind::Backend, "x", ""))]);
    assert_eq!(
        merge_once(&[LibraryItems {
            library: &name("x"),
            items: &a,
            changed: Changed::All,
        }])
        .unwrap_err(),
        MergeError::NoGlobal
    );
}

#[test]
fn cached_sections_follow_changes() {
    let base_name = name("base");
    let backends_name = name("backends");
    let base = items(&[("g", section(SectionKind::Global, "", "maxconn 100"))]);
    let mut backends = items(&[
        (
            "a",
            section(SectionKind::Backend, "a", "server a1 127.0.0.1:1"),
        ),
        (
            "b",
            section(SectionKind::Backend, "b", "server b1 127.0.0.1:2"),
        ),
    ]);
    let mut cache = MergeCache::default();
    let no_changes = BTreeMap::new();
    let merge_with =
        |backends: &BTreeMap<String, Item>, changed: Changed<'_>, cache: &mut MergeCache| {
            let libraries = [
                LibraryItems {
                    library: &base_name,
                    items: &base,
                    changed: match changed {
                        Changed::All => Changed::All,
                        Changed::Keys(_) => Changed::Keys(&no_changes),
                    },
                },
                LibraryItems {
                    library: &backends_name,
                    items: backends,
                    changed,
                },
            ];
            merge(&libraries, cache).unwrap()
        };
    let first = merge_with(&backends, Changed::All, &mut cache);
    assert_eq!(
        first,
        merge_with(&backends, Changed::All, &mut MergeCache::default())
    );

    let was: BTreeMap<String, Option<Item>> = ["a", "b"]
        .into_iter()
        .map(|key| (key.to_owned(), backends.get(key).cloned()))
        .collect();
    backends.insert(
        "b".into(),
        section(SectionKind::Backend, "b", "server b1 127.0.0.1:2 disabled"),
    );
    backends.remove("a");
    let second = merge_with(&backends, Changed::Keys(&was), &mut cache);
    // The cached merge equals a merge from scratch, changes included.
    assert_eq!(
        second,
        merge_with(&backends, Changed::All, &mut MergeCache::default())
    );
    assert!(second.config.contains("server b1 127.0.0.1:2 disabled"));
    assert!(!second.config.contains("backend a"));
    assert_eq!(second.library_at_line(4), Some("backends"));
}

fn status(variant: StatusVariant, pod: &str, json: &str) -> Item {
    let serde_json::Value::Object(status) = serde_json::from_str(json).expect("test JSON") else {
        panic!("test statuses are objects");
    };
    Item::StatusPatch(Arc::new(StatusPatch {
        object: ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: "shop".into(),
            name: pod.into(),
        },
        variant,
        status: PatchStatus::new(&status),
    }))
}

/// One field manager per variant: two libraries patching one object's
/// status in one variant would drop each other's fields, so it is an error
/// naming both; other variants and other objects are not.
#[test]
fn two_libraries_patching_one_objects_status_in_one_variant_conflict() {
    let global = items(&[("g", section(SectionKind::Global, "", "maxconn 1"))]);
    let a = items(&[
        ("p1", status(StatusVariant::Deployed, "web-1", r#"{"a":1}"#)),
        ("p2", status(StatusVariant::Rendered, "web-1", r#"{"a":1}"#)),
    ]);
    let b_other_pod = items(&[("p", status(StatusVariant::Deployed, "web-2", r#"{"b":1}"#))]);
    let b_same = items(&[("p", status(StatusVariant::Deployed, "web-1", r#"{"b":1}"#))]);
    let (base, lib_a, lib_b) = (name("base"), name("lib-a"), name("lib-b"));
    let fine = merge_once(&[
        LibraryItems {
            library: &base,
            items: &global,
            changed: Changed::All,
        },
        LibraryItems {
            library: &lib_a,
            items: &a,
            changed: Changed::All,
        },
        LibraryItems {
            library: &lib_b,
            items: &b_other_pod,
            changed: Changed::All,
        },
    ])
    .expect("distinct objects or variants do not conflict");
    assert_eq!(fine.status_patches[&StatusVariant::Deployed].len(), 2);
    let error = merge_once(&[
        LibraryItems {
            library: &base,
            items: &global,
            changed: Changed::All,
        },
        LibraryItems {
            library: &lib_a,
            items: &a,
            changed: Changed::All,
        },
        LibraryItems {
            library: &lib_b,
            items: &b_same,
            changed: Changed::All,
        },
    ])
    .expect_err("a conflict");
    assert_eq!(
        error,
        MergeError::StatusConflict {
            variant: "deployed",
            object: "Pod shop/web-1".into(),
            first: "lib-a".into(),
            second: "lib-b".into(),
        }
    );
    assert!(error.to_string().contains("`lib-a` and `lib-b`"), "{error}");
}

#[test]
fn snippets_sort_by_slot_then_priority_then_library_then_key() {
    // The order the SDK documents (`haptic_sdk::extending`): the owner's
    // body first whatever the priorities, then slot, priority ascending,
    // library merge position, item key.
    let base = items(&[
        ("g", section(SectionKind::Global, "", "maxconn 100")),
        ("f", section(SectionKind::Frontend, "http", "bind :8080")),
    ]);
    let first = items(&[
        (
            "z",
            snippet(SectionKind::Frontend, "http", Slot::Other, -900, "option a"),
        ),
        (
            "y",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::Routing,
                0,
                "use_backend first0",
            ),
        ),
        (
            "x",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::RequestRules,
                0,
                "http-request first0",
            ),
        ),
        (
            "b",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::ResponseRules,
                5,
                "http-response first5-b",
            ),
        ),
        (
            "a",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::ResponseRules,
                5,
                "http-response first5-a",
            ),
        ),
    ]);
    let second = items(&[
        (
            "a",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::RequestRules,
                -200,
                "http-request second-200",
            ),
        ),
        (
            "b",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::RequestRules,
                0,
                "http-request second0",
            ),
        ),
        (
            "c",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::Acls,
                1000,
                "acl second1000 always_true",
            ),
        ),
        (
            "d",
            snippet(
                SectionKind::Frontend,
                "http",
                Slot::Routing,
                -1,
                "use_backend second-1",
            ),
        ),
    ]);
    let rendered = merge_once(&[
        LibraryItems {
            library: &name("base"),
            items: &base,
            changed: Changed::All,
        },
        LibraryItems {
            library: &name("first"),
            items: &first,
            changed: Changed::All,
        },
        LibraryItems {
            library: &name("second"),
            items: &second,
            changed: Changed::All,
        },
    ])
    .unwrap();
    let frontend: Vec<&str> = rendered
        .config
        .lines()
        .skip_while(|line| *line != "frontend http")
        .take_while(|line| !line.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        frontend,
        [
            "frontend http",
            "bind :8080",
            "acl second1000 always_true",
            "http-request second-200",
            "http-request first0",
            "http-request second0",
            "http-response first5-a",
            "http-response first5-b",
            "use_backend second-1",
            "use_backend first0",
            "option a",
        ]
    );
}

#[test]
fn secret_lines_are_tracked_and_shown_redacted() {
    let hash = "$6$abcdefgh$KQeXafAQAaOoKTevphVU215RvJdgzyf";
    let userlist = Item::Section(Arc::new(Section {
        kind: SectionKind::Userlist,
        name: "auth".into(),
        body: format!("user alice password {hash}\nuser bob password {hash}"),
        secret: true,
    }));
    let header = Item::Snippet(Arc::new(Snippet {
        target_kind: SectionKind::Frontend,
        target_name: "http".into(),
        slot: Slot::RequestRules,
        priority: 0,
        lines: "http-request set-header Authorization \"Basic dG9rZW4=\"".into(),
        secret: true,
    }));
    let base = items(&[
        ("g", section(SectionKind::Global, "", "maxconn 100")),
        ("f", section(SectionKind::Frontend, "http", "bind :8080")),
    ]);
    let auth = items(&[("u", userlist), ("h", header)]);
    let (base_name, auth_name) = (name("base"), name("auth"));
    let rendered = merge_once(&[
        LibraryItems {
            library: &base_name,
            items: &base,
            changed: Changed::All,
        },
        LibraryItems {
            library: &auth_name,
            items: &auth,
            changed: Changed::All,
        },
    ])
    .expect("merges");
    assert!(rendered.holds_secret_text());
    assert!(rendered.config.contains(hash), "the real text is deployed");
    let shown = rendered.shown_config();
    assert!(!shown.contains(hash), "{shown}");
    assert!(!shown.contains("dG9rZW4="), "{shown}");
    assert!(shown.contains("    user <redacted>\n"), "{shown}");
    assert!(shown.contains("    http-request <redacted>\n"), "{shown}");
    assert!(shown.contains("userlist auth\n"), "headers stay: {shown}");
    assert!(
        shown.contains("    bind :8080\n"),
        "other lines stay: {shown}"
    );
    assert_eq!(
        shown.lines().count(),
        rendered.config.lines().count(),
        "line numbers stay"
    );
    let debug = format!("{rendered:?}");
    assert!(!debug.contains(hash), "Debug redacts too: {debug}");
}

/// The incremental merge against a merge from scratch of the same items,
/// over seeded random changes by three libraries: sections, snippets,
/// files, patches, warnings and owned objects appear, change, move and go,
/// conflicts and missing sections come and are fixed. After every change
/// both agree, on the configuration and on the error.
#[test]
fn incremental_merges_equal_merges_from_scratch() {
    let names = [name("base"), name("ingress"), name("backends")];
    let mut outputs: Vec<BTreeMap<String, Item>> = vec![BTreeMap::new(); names.len()];
    outputs[0].insert("g".into(), section(SectionKind::Global, "", "maxconn 1"));
    outputs[0].insert("common".into(), section(SectionKind::Backend, "common", ""));
    let mut cache = MergeCache::default();
    let mut changed: Vec<BTreeMap<String, Option<Item>>> = vec![BTreeMap::new(); names.len()];
    let mut all = true;
    let mut rng = fastrand::Rng::with_seed(16);
    let (mut errors, mut merged) = (0, 0);
    for round in 0..3_000 {
        let library = rng.usize(..names.len());
        let key = format!("k{}", rng.usize(..12));
        // Mostly an identity of the item's own; one in ten is shared, so
        // two items may claim it.
        let own = if rng.usize(..10) == 0 {
            "shared".to_owned()
        } else {
            format!("l{library}{key}")
        };
        let item = match rng.usize(..8) {
            0 => None,
            1 | 2 => Some(section(SectionKind::Backend, &own, &format!("# {round}"))),
            3 => {
                // Into base's section, or one that may not be there.
                let target = if rng.usize(..5) == 0 {
                    format!("l{}k{}", rng.usize(..3), rng.usize(..12))
                } else {
                    "common".to_owned()
                };
                Some(snippet(
                    SectionKind::Backend,
                    &target,
                    Slot::Other,
                    rng.i32(-2..2),
                    &format!("# snippet {round}"),
                ))
            }
            4 => Some(Item::File(Arc::new(AuxFile {
                path: format!("maps/{own}.map"),
                content: format!("{round}\n"),
                secret: false,
            }))),
            5 => Some(status(
                StatusVariant::Deployed,
                &own,
                &format!(r#"{{"r":{round}}}"#),
            )),
            6 => Some(Item::Warning(Arc::new(Warning {
                object: None,
                reason: "Test".into(),
                message: format!("{round}"),
            }))),
            _ => Some(Item::OwnedObject(Arc::new(OwnedObject {
                owner: crate::library::types::ObjectKey {
                    watch: "services".into(),
                    namespace: "shop".into(),
                    name: "web".into(),
                },
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: own.clone(),
                manifest: format!("{{\"r\":{round}}}"),
            }))),
        };
        let old = match item {
            Some(item) => outputs[library].insert(key.clone(), item),
            None => outputs[library].remove(&key),
        };
        changed[library].entry(key).or_insert(old);
        // Now and then a library sends a complete output.
        all |= rng.usize(..200) == 0;
        let libraries: Vec<LibraryItems<'_>> = names
            .iter()
            .zip(&outputs)
            .zip(&changed)
            .map(|((library, items), changed)| LibraryItems {
                library,
                items,
                changed: if all {
                    Changed::All
                } else {
                    Changed::Keys(changed)
                },
            })
            .collect();
        let incremental = merge(&libraries, &mut cache);
        let scratch = merge_once(&libraries);
        assert_eq!(incremental, scratch, "round {round}");
        if incremental.is_ok() {
            merged += 1;
        } else {
            errors += 1;
        }
        changed.iter_mut().for_each(BTreeMap::clear);
        all = false;
    }
    // Both paths were taken many times.
    assert!(
        merged > 300 && errors > 300,
        "{merged} merged, {errors} errors"
    );
}

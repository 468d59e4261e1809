use std::collections::BTreeMap;

use super::*;
use crate::library::types::{AuxFile, Section, Snippet};

fn section(kind: SectionKind, name: &str, body: &str) -> Item {
    Item::Section(Section {
        kind,
        name: name.into(),
        body: body.into(),
    })
}

fn snippet(kind: SectionKind, name: &str, slot: Slot, priority: i32, lines: &str) -> Item {
    Item::Snippet(Snippet {
        target_kind: kind,
        target_name: name.into(),
        slot,
        priority,
        lines: lines.into(),
    })
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
        ("b", section(SectionKind::Backend, "default", "http-request return status 404")),
        ("f", section(SectionKind::Frontend, "http", "bind :8080\ndefault_backend default")),
        ("g", section(SectionKind::Global, "", "maxconn 100")),
        ("d", section(SectionKind::Defaults, "", "mode http")),
    ]);
    let ingress = items(&[
        ("route", snippet(SectionKind::Frontend, "http", Slot::Routing, 0, "use_backend web if is_web")),
        ("acl", snippet(SectionKind::Frontend, "http", Slot::Acls, 0, "acl is_web hdr(host) web")),
    ]);
    let rendered = merge(&[
        LibraryItems { library: "base", items: &base },
        LibraryItems { library: "ingress", items: &ingress },
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
    let error = merge(&[
        LibraryItems { library: "base", items: &a },
        LibraryItems { library: "custom", items: &b },
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
    let file = Item::File(AuxFile {
        path: "maps/hosts.map".into(),
        content: String::new(),
    });
    let a = items(&[("g", section(SectionKind::Global, "", "")), ("m", file.clone())]);
    let b = items(&[("m", file)]);
    let error = merge(&[
        LibraryItems { library: "ingress", items: &a },
        LibraryItems { library: "custom", items: &b },
    ])
    .unwrap_err();
    assert!(error.to_string().contains("`ingress` and `custom`"), "{error}");
}

#[test]
fn snippet_without_target_names_library_and_section() {
    let a = items(&[
        ("g", section(SectionKind::Global, "", "")),
        ("s", snippet(SectionKind::Frontend, "https", Slot::Routing, 0, "use_backend x")),
    ]);
    let error = merge(&[LibraryItems { library: "ingress", items: &a }]).unwrap_err();
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
        merge(&[LibraryItems { library: "x", items: &a }]).unwrap_err(),
        MergeError::NoGlobal
    );
}

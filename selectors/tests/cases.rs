//! The selection rule's shared cases (`selectors/cases.json`), run against
//! this crate. The Python SDK runs the same file against its port of the
//! rule (`template-libraries/sdk-python/tests/test_selectors.py`), so the two
//! cannot drift apart without one of them failing.

use haptic_selectors::{FieldSelector, LabelSelector, Selection, defaults};
use serde_json::Value;

fn cases() -> Value {
    serde_json::from_str(include_str!("../cases.json")).expect("cases.json is JSON")
}

fn list<'a>(cases: &'a Value, key: &str) -> &'a Vec<Value> {
    cases[key]
        .as_array()
        .unwrap_or_else(|| panic!("cases.json has no list `{key}`"))
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[test]
fn label_selectors() {
    let cases = cases();
    for group in list(&cases, "labelSelectors") {
        let labels = group["labels"].as_object();
        for case in list(group, "selects") {
            let selector = text(&case[0]);
            let parsed =
                LabelSelector::parse(selector).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
            assert_eq!(
                parsed.matches(&labels),
                case[1].as_bool().expect("expected is a bool"),
                "{selector:?} on {labels:?}"
            );
        }
    }
    for case in list(&cases, "badLabelSelectors") {
        let selector = text(&case[0]);
        let error = LabelSelector::parse(selector).expect_err(selector);
        assert!(
            error.to_string().contains(text(&case[1])),
            "{selector:?}: {error}"
        );
    }
}

#[test]
fn field_selectors() {
    let cases = cases();
    for group in list(&cases, "fieldSelectors") {
        let (api_version, kind) = (text(&group["apiVersion"]), text(&group["kind"]));
        for case in list(group, "selects") {
            let selector = text(&case[0]);
            let parsed = FieldSelector::parse_for(api_version, kind, selector)
                .unwrap_or_else(|e| panic!("{selector:?}: {e}"));
            assert_eq!(
                parsed.matches(&group["object"]),
                case[1].as_bool().expect("expected is a bool"),
                "{selector:?} on {kind} {}",
                group["object"]
            );
        }
    }
    for case in list(&cases, "badFieldSelectors") {
        let selector = text(&case[0]);
        let error = FieldSelector::parse(selector).expect_err(selector);
        assert!(
            error.to_string().contains(text(&case[1])),
            "{selector:?}: {error}"
        );
    }
    for blank in list(&cases, "blankFieldSelectors") {
        assert!(FieldSelector::parse(text(blank)).expect("blank").is_empty());
    }
}

#[test]
fn defaults_are_the_table_and_fill_only_what_is_missing() {
    let cases = cases();
    let table: Vec<Value> = defaults::DEFAULTS
        .iter()
        .map(|d| {
            serde_json::json!({"apiVersion": d.api_version, "kind": d.kind, "path": d.path,
                "value": d.value, "stored": d.stored})
        })
        .collect();
    assert_eq!(
        &table,
        list(&cases, "defaults"),
        "cases.json lists DEFAULTS as they are"
    );
    for case in list(&cases, "appliedDefaults") {
        let Value::Object(mut object) = case["object"].clone() else {
            panic!("test objects are mappings");
        };
        defaults::apply(text(&case["apiVersion"]), text(&case["kind"]), &mut object);
        assert_eq!(Value::Object(object), case["applied"], "{case}");
    }
}

fn parse_watch(watch: &Value) -> Result<Selection, haptic_selectors::SelectorError> {
    Selection::parse(
        text(&watch["apiVersion"]),
        text(&watch["kind"]),
        watch["namespace"].as_str(),
        watch["labelSelector"].as_str(),
        watch["fieldSelector"].as_str(),
    )
}

#[test]
fn selections() {
    let cases = cases();
    for case in list(&cases, "selections") {
        let selection = parse_watch(&case["watch"]).expect("valid watch");
        assert_eq!(
            selection.matches_object(&case["object"]),
            case["selected"].as_bool().expect("selected is a bool"),
            "{case}"
        );
    }
    for case in list(&cases, "badSelections") {
        let error = parse_watch(&case["watch"]).expect_err("invalid watch");
        assert_eq!(error.which(), text(&case["which"]));
        assert!(
            error.to_string().starts_with(text(&case["says"])),
            "{error}"
        );
    }
}

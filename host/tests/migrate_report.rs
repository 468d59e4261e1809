//! `haptic migrate report` on the shipped `examples/ingress-nginx/`: the
//! report is complete. The oracle is the manifests, read here with a YAML
//! parser of their own, not the library's bookkeeping: every
//! `nginx.ingress.kubernetes.io/*` annotation of every Ingress of class
//! `nginx` is in the report exactly once, the totals add up to them, and
//! the snippets are reported as never applied.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

const PREFIX: &str = "nginx.ingress.kubernetes.io/";

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/ingress-nginx")
}

/// `namespace/name` -> the annotation names (without prefix), from the files.
fn annotations_in_the_manifests() -> BTreeMap<String, BTreeSet<String>> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(examples()).expect("examples/ingress-nginx exists") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: serde_json::Value =
                serde::Deserialize::deserialize(document).expect("valid YAML");
            if value["kind"] != "Ingress" {
                continue;
            }
            assert_eq!(value["spec"]["ingressClassName"], "nginx", "{path:?}");
            let id = format!(
                "{}/{}",
                value["metadata"]["namespace"].as_str().expect("namespaced"),
                value["metadata"]["name"].as_str().expect("named")
            );
            let names = value["metadata"]["annotations"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(key, _)| key.strip_prefix(PREFIX).map(str::to_owned))
                .collect();
            found.insert(id, names);
        }
    }
    found
}

#[test]
fn the_report_covers_every_annotation_of_the_examples() {
    let output = Command::new(env!("CARGO_BIN_EXE_haptic"))
        .args(["migrate", "report"])
        .arg(examples())
        .output()
        .expect("haptic runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("validated by HAProxy"),
        "the report's render is validated: {stderr}"
    );

    let expected = annotations_in_the_manifests();
    assert_eq!(expected.len(), 5, "four apps, the canary pair has two");
    let mut reported: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    let verdicts = ["honoured", "differs", "not-honoured", "invalid"];
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("Ingress ") {
            let (id, state) = rest.split_once(": ").expect("Ingress <id>: <state>");
            assert_eq!(state, "served", "{line}");
            current = Some(id.to_owned());
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [verdict, annotation, why, ..] = words[..]
            && verdicts.contains(&verdict)
        {
            assert!(!why.is_empty(), "every verdict says why: {line}");
            let id = current
                .clone()
                .expect("an annotation line under an Ingress");
            reported.entry(id).or_default().push(annotation.to_owned());
        }
    }
    for (id, names) in &expected {
        let mut got = reported.get(id).cloned().unwrap_or_default();
        got.sort();
        let want: Vec<String> = names.iter().cloned().collect();
        assert_eq!(got, want, "Ingress {id}: each annotation once\n{stdout}");
    }
    let total: usize = expected.values().map(BTreeSet::len).sum();
    assert!(
        stdout.contains(&format!(
            "Total: {} Ingresses (0 refused), {total} annotations,",
            expected.len()
        )),
        "{stdout}"
    );
    for snippet in ["configuration-snippet", "server-snippet"] {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(snippet))
            .unwrap_or_else(|| panic!("{snippet} is reported\n{stdout}"));
        assert!(
            line.trim_start().starts_with("not-honoured") && line.contains("never applies"),
            "{line}"
        );
    }
}

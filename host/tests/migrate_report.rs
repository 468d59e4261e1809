//! `haptic migrate report` on the shipped `examples/ingress-nginx/`: the
//! report is complete. The oracle is the manifests, read here with a YAML
//! parser of their own, not the library's bookkeeping: every
//! `nginx.ingress.kubernetes.io/*` annotation of every Ingress of class
//! `nginx` is in the report exactly once, the totals add up to them, and
//! the snippets are reported as never applied. The controller's metric
//! (`haptic run`, the controller's render loop on the same manifests)
//! counts the same annotations.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    // `ingress` renders too; it knows ingress-nginx takes these Ingresses
    // and says nothing of them.
    assert!(
        !stderr.contains("is not served"),
        "ingress logs nothing about the nginx-class Ingresses: {stderr}"
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

/// Ports of its own (tests run in parallel; `tests/run.rs` uses 28xxx).
const HTTP_PORT: u16 = 29080;
const LISTEN: &str = "127.0.0.1:29451";

fn metrics() -> Option<String> {
    let mut stream = TcpStream::connect(LISTEN).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Stops `haptic run` as Ctrl-C does when the test ends, passing or not.
struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
    }
}

#[test]
fn the_controllers_metric_counts_the_same_annotations() {
    let child = Command::new(env!("CARGO_BIN_EXE_haptic"))
        .arg("run")
        .arg(examples())
        .args(["--set", "templateLibraries.ingressNginx.enabled=true"])
        .args(["--port", &HTTP_PORT.to_string(), "--listen", LISTEN])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haptic run starts");
    let _stop = Stop(child);
    let expected = annotations_in_the_manifests();
    let total: usize = expected.values().map(BTreeSet::len).sum();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Some(text) = metrics() {
            // haptic_ingress_nginx_annotations{annotation="x",verdict="y"} n
            let mut by_annotation: BTreeMap<String, f64> = BTreeMap::new();
            for line in text
                .lines()
                .filter(|l| l.starts_with("haptic_ingress_nginx_annotations{"))
            {
                let annotation = line
                    .split("annotation=\"")
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .unwrap_or_default()
                    .to_owned();
                let value: f64 = line
                    .rsplit(' ')
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0);
                *by_annotation.entry(annotation).or_default() += value;
            }
            let sum: f64 = by_annotation.values().sum();
            if sum as usize == total {
                for (id, names) in &expected {
                    for name in names {
                        assert!(
                            by_annotation.contains_key(name),
                            "Ingress {id}'s {name} has no series:\n{text}"
                        );
                    }
                }
                return;
            }
            last = text;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("the metric never counted the {total} annotations of the examples:\n{last}");
}

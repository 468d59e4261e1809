//! The chart's dashboard and alert rules read metrics the controller and
//! the agents really export: an installation on the test bed (a gated app,
//! an HAProxy pod, the controller with the default certificate) is scraped
//! after its first deploy, and every `haptic_*` name in
//! `charts/haptic/files/dashboard.json` and
//! `charts/haptic/templates/prometheusrule.yaml` must be a series there.
//! A metric renamed in the code, or a typo in a query, fails here.

#[allow(dead_code)]
#[path = "controller/harness.rs"]
mod harness;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use haptic_testbed::kubelet::{bed, http};
use harness::Installation;

/// The files whose queries are checked, relative to the repository.
const CHART_FILES: [&str; 2] = [
    "charts/haptic/files/dashboard.json",
    "charts/haptic/templates/prometheusrule.yaml",
];

/// The suffixes Prometheus's exposition adds to a family's samples.
const SAMPLE_SUFFIXES: [&str; 4] = ["_total", "_bucket", "_sum", "_count"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `haptic_*` metric name in `text` (queries, rule expressions).
fn names_used(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(found) = text[at..].find("haptic_") {
        let start = at + found;
        let preceded_by_word = start > 0 && is_name_byte(bytes[start - 1]);
        let end = start
            + text[start..]
                .bytes()
                .take_while(|byte| is_name_byte(*byte))
                .count();
        if !preceded_by_word {
            names.insert(text[start..end].to_owned());
        }
        at = end;
    }
    names
}

fn is_name_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The sample names in an exposition text (`name{labels} value` lines).
fn samples(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

/// `name` is a sample, or a family whose samples carry a suffix (a query
/// on `haptic_renders_total` matches the exported `haptic_renders_total`;
/// `histogram_quantile` reads `_bucket`).
fn exported(name: &str, samples: &BTreeSet<String>) -> bool {
    samples.contains(name)
        || SAMPLE_SUFFIXES
            .iter()
            .any(|suffix| samples.contains(&format!("{name}{suffix}")))
}

#[test]
fn e2e_every_metric_the_dashboard_and_alerts_read_is_exported() {
    bed::in_pod_network(async {
        let installation = Installation::start(true, 1).await;
        let controller = installation.start_controller(installation.client()).await;
        installation.wait_routed().await;

        let proxy = &installation.proxies[0];
        let agent = http::get(
            SocketAddr::from((proxy.ip, 8450)),
            None,
            "/metrics",
            &[],
            Duration::from_secs(5),
        )
        .await
        .expect("the agent serves /metrics without a token");
        assert_eq!(agent.status, 200, "agent /metrics: {}", agent.body);
        // The controller's /metrics handler serves exactly this text.
        let mut scraped = samples(&controller.state.metrics.encode());
        scraped.extend(samples(&agent.body));
        assert!(
            scraped.contains("haptic_certificate_expiry_timestamp_seconds"),
            "the default certificate is in the bundle, so its expiry is exported: {scraped:?}"
        );

        let mut checked = 0;
        let mut missing = Vec::new();
        for file in CHART_FILES {
            let text = std::fs::read_to_string(repo().join(file))
                .unwrap_or_else(|error| panic!("reading {file}: {error}"));
            let used = names_used(&text);
            assert!(!used.is_empty(), "{file} reads no haptic_ metric");
            for name in used {
                checked += 1;
                if !exported(&name, &scraped) {
                    missing.push(format!("{file}: {name}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "metrics the chart reads but neither the controller nor the agent exports:\n  {}\nexported: {scraped:?}",
            missing.join("\n  ")
        );
        println!(
            "{checked} metric names in the chart's dashboard and rules, all exported ({} series names scraped)",
            scraped.len()
        );
        controller.stop().await;
    })
    .expect("the pod network");
}

#[test]
fn names_are_read_whole_and_suffixes_match_families() {
    let used = names_used(
        r#"histogram_quantile(0.95, rate(haptic_agent_apply_duration_seconds_bucket{namespace="x"}[5m])) / xhaptic_not"#,
    );
    assert_eq!(
        used.into_iter().collect::<Vec<_>>(),
        ["haptic_agent_apply_duration_seconds_bucket"]
    );
    let scraped = samples(
        "# TYPE haptic_renders counter\nhaptic_renders_total{result=\"ok\"} 0\nhaptic_leader 1\n",
    );
    assert!(exported("haptic_renders_total", &scraped));
    assert!(exported("haptic_renders", &scraped));
    assert!(exported("haptic_leader", &scraped));
    assert!(!exported("haptic_leaders", &scraped));
}

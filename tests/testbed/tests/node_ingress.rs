//! The upstream Ingress conformance suite
//! (kubernetes-sigs/ingress-controller-conformance: `features/*.feature`
//! run by godog) against haptic installed by the chart **with its default
//! values** on the real node, with the image `make image` built.
//!
//! The oracle is the suite itself: it creates its own namespaces, echo
//! Deployments, Services, TLS Secrets and Ingresses of class `haptic`, waits
//! for each Ingress's `status.loadBalancer` (the chart publishes its HAProxy
//! Service's address: with the default `ClusterIP` Service, its cluster IP,
//! which kube-proxy routes on the bed's network), and sends its HTTP and
//! HTTPS requests there, checking what its echoserver saw.
//!
//! The suite is built from a checkout (no module proxy serves it) by
//! `tests/testbed/scripts/build-ingress-conformance.sh`; see
//! `make ingress-conformance`. With `HAPTIC_CONFORMANCE_REPORT_DIR` set the
//! per-scenario report is written there (docs/conformance/).
//!
//! Needs root, `make testbed-binaries testbed-node-setup testbed-images
//! image ingress-conformance-images` and helm.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, ensure};
use haptic_testbed::cluster::init_tracing;
use haptic_testbed::node::NodeBed;
use haptic_testbed::paths::target_dir;
use serde::Deserialize;

const NAMESPACE: &str = "haptic";
/// The chart's IngressClass (`templateLibraries.ingress.className`).
const INGRESS_CLASS: &str = "haptic";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the suite built from a checkout of its repository: make ingress-conformance"]
async fn e2e_conformance_the_ingress_suite_passes_with_default_values() -> anyhow::Result<()> {
    init_tracing();
    // The commit under test is the one at the start: the image and chart were built from it.
    let commit = head_commit();
    let suite = suite_dir()?;
    ensure!(
        NodeBed::has_haptic_image(),
        "haptic's image is not built: run `make image` (IMAGE_PROFILE=dev is enough)"
    );
    ensure!(
        NodeBed::has_ingress_conformance_images(),
        "the suite's echoserver image is not built: run `make ingress-conformance-images`"
    );
    let bed = NodeBed::start().await?;
    let kubeconfig = bed.control_plane().kubeconfig_path().to_owned();
    let began = Instant::now();
    haptic_testbed::helm::install(&kubeconfig, NAMESPACE, &[]).await?;
    eprintln!(
        "chart installed with its default values in {:?}",
        began.elapsed()
    );

    let out_dir = target_dir().join("ingress-conformance");
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir)?;
    let log = out_dir.join("suite.log");
    let ran = Instant::now();
    let status = std::process::Command::new(suite.join("ingress-conformance.test"))
        .current_dir(&suite)
        .args([
            "-format=cucumber",
            "-no-colors",
            &format!("-ingress-class={INGRESS_CLASS}"),
            "-wait-time-for-ingress-status=2m",
            "-wait-time-for-ready=3m",
            "-test.timeout=30m",
        ])
        .arg(format!("-output-directory={}", out_dir.display()))
        .env("KUBECONFIG", &kubeconfig)
        .stdout(std::fs::File::create(&log)?)
        .stderr(std::fs::File::create(out_dir.join("suite.stderr"))?)
        .status()
        .context("running the suite")?;
    let results = results(&out_dir)?;
    let passed = results.values().filter(|r| r.passed()).count();
    eprintln!(
        "Ingress conformance: {passed} of {} scenarios passed in {:?} ({status}); reports in {}",
        results.len(),
        ran.elapsed(),
        out_dir.display()
    );
    for (scenario, result) in &results {
        eprintln!("  {result}  {scenario}");
    }
    if let Some(dir) = std::env::var_os("HAPTIC_CONFORMANCE_REPORT_DIR") {
        let path = PathBuf::from(dir).join("ingress-controller-conformance.md");
        std::fs::write(&path, report(&results, &commit))?;
        eprintln!("report written to {}", path.display());
    }
    ensure!(
        !results.is_empty(),
        "the suite reported no scenario (see {})",
        log.display()
    );
    let failed: Vec<String> = results
        .iter()
        .filter(|(_, r)| !r.passed())
        .map(|(name, r)| format!("{name}: {}", r.failure))
        .collect();
    ensure!(
        failed.is_empty() && status.success(),
        "{} of {} scenarios did not pass ({status}):\n{}",
        failed.len(),
        results.len(),
        failed.join("\n")
    );
    bed.stop().await;
    Ok(())
}

/// The built suite: `HAPTIC_INGRESS_CONFORMANCE_DIR`, else what the build
/// script prints (it builds once from `HAPTIC_INGRESS_CONFORMANCE_SRC`).
fn suite_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("HAPTIC_INGRESS_CONFORMANCE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    let script = haptic_testbed::helm::repo_root()
        .join("tests/testbed/scripts/build-ingress-conformance.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .context("running build-ingress-conformance.sh")?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let stdout = String::from_utf8(out.stdout)?;
    Ok(PathBuf::from(stdout.lines().last().unwrap_or_default()))
}

/// One scenario's outcome (a scenario outline's examples are one each).
#[derive(Debug, Default)]
struct Outcome {
    steps: usize,
    passed_steps: usize,
    /// The first step that did not pass, with what it said.
    failure: String,
}

impl Outcome {
    fn passed(&self) -> bool {
        self.steps > 0 && self.steps == self.passed_steps
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.passed() { "PASS" } else { "FAIL" })
    }
}

/// The cucumber JSON godog writes per feature.
#[derive(Deserialize)]
struct Feature {
    name: String,
    #[serde(default)]
    elements: Vec<Scenario>,
}

#[derive(Deserialize)]
struct Scenario {
    name: String,
    #[serde(default)]
    line: u32,
    #[serde(default)]
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    keyword: String,
    name: String,
    result: StepResult,
}

#[derive(Deserialize)]
struct StepResult {
    status: String,
    #[serde(default)]
    error_message: String,
}

/// Every scenario of every `*-report.json` in `dir`, keyed by
/// "feature: scenario (line)".
fn results(dir: &Path) -> anyhow::Result<BTreeMap<String, Outcome>> {
    let mut results = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.to_string_lossy().ends_with("-report.json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        if text.trim().is_empty() {
            continue;
        }
        let features: Vec<Feature> = serde_json::from_str(&text)
            .with_context(|| format!("reading the suite's report {}", path.display()))?;
        for feature in features {
            for scenario in feature.elements {
                let mut outcome = Outcome::default();
                for step in &scenario.steps {
                    outcome.steps += 1;
                    if step.result.status == "passed" {
                        outcome.passed_steps += 1;
                    } else if outcome.failure.is_empty() {
                        outcome.failure = format!(
                            "{}{} -> {} {}",
                            step.keyword, step.name, step.result.status, step.result.error_message
                        );
                    }
                }
                let key = format!(
                    "{}: {} (line {})",
                    feature.name, scenario.name, scenario.line
                );
                results.insert(key, outcome);
            }
        }
    }
    Ok(results)
}

/// The checked-out commit, short.
fn head_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(haptic_testbed::helm::repo_root())
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The Markdown report for docs/conformance/.
fn report(results: &BTreeMap<String, Outcome>, commit: &str) -> String {
    let passed = results.values().filter(|r| r.passed()).count();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .unwrap_or_default();
    let mut out = format!(
        "# Ingress conformance (kubernetes-sigs/ingress-controller-conformance)\n\n\
         haptic {} at commit {}, run {} by `make ingress-conformance`: the chart with its \
         default values on the test bed's real node (kubelet v1.35.4, containerd, runc, CNI, \
         kube-proxy). Suite commit f91a799 (its last), features `features/*.feature`; the one \
         change to it is the echoserver image's digest, dropped so the locally built image is \
         found (tests/testbed/scripts/build-ingress-conformance.sh).\n\n\
         **{passed} of {} scenarios passed.**\n\n| result | feature: scenario |\n| --- | --- |\n",
        env!("CARGO_PKG_VERSION"),
        commit,
        date.trim(),
        results.len()
    );
    for (scenario, outcome) in results {
        out.push_str(&format!("| {outcome} | {scenario} |\n"));
    }
    let failed: Vec<_> = results.iter().filter(|(_, o)| !o.passed()).collect();
    if !failed.is_empty() {
        out.push_str("\n## What failed\n\n");
        for (scenario, outcome) in failed {
            out.push_str(&format!("- {scenario}: {}\n", outcome.failure.trim()));
        }
    }
    out
}

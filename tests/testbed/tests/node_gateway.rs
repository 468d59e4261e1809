//! Gateway API on the real node, with the chart, the image `make image`
//! built and the `gateway-api` library on.
//!
//! The conformance suite (`sigs.k8s.io/gateway-api/conformance`,
//! the release tests/testbed/gateway-conformance pins) against haptic on the
//! real node: the chart with the image `make image` built and the
//! `gateway-api` library on, GatewayClass `haptic`, then the suite's own
//! binary (`go test -c`) with `--gateway-class=haptic
//! --conformance-profiles=GATEWAY-HTTP` (`HAPTIC_GATEWAY_PROFILES` names
//! others, `GATEWAY-HTTP,GATEWAY-GRPC`) and `--supported-features` read from
//! what the GatewayClass declares. The oracle is the suite itself: its
//! requests go to each Gateway's LoadBalancer address on the bed's network,
//! its backends are its own echo-basic pods.
//!
//! Three selections, by `HAPTIC_GATEWAY_CONFORMANCE`:
//! - unset or `subset`: [`CI_SUBSET`], one test per mechanism (the report
//!   goes to the target directory);
//! - `all` (`make gateway-conformance`, and `make e2e-test` with
//!   `HAPTIC_GATEWAY_REPORT_DIR` in the target dir): every test of the
//!   profiles, the report written to `docs/conformance/` with the date and
//!   commit;
//! - `Name,Name,...`: those tests only (to iterate on a failing one), the
//!   report in the target directory.
//!
//! `HAPTIC_GATEWAY_TRY_FEATURES=Name,...` adds extended features the
//! library does not declare yet to `--supported-features`, to see whether
//! they pass before declaring them.
//!
//! The gated rollout behind an HTTPRoute: a single-replica echo Deployment
//! with the readiness gate, behind a Gateway and an HTTPRoute, restarted
//! [`RESTARTS`] times under load through the Gateway's LoadBalancer address:
//! no request may fail, and each time a new pod's gate turns True every
//! worker of every HAProxy pod must already route to it, in HAProxy's own
//! words (the master CLI, [`haptic_testbed::oracle`]).
//!
//! Needs root, `make testbed-binaries testbed-node-setup testbed-images
//! image` (IMAGE_PROFILE=dev is enough) and helm.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use haptic_testbed::app::{GATE, WebApp, create_web_app};
use haptic_testbed::cluster::{init_tracing, namespace, wait_for};
use haptic_testbed::load::Load;
use haptic_testbed::node::NodeBed;
use haptic_testbed::node::gate::{GateCheck, GateOrder, GateOrderSeen, MasterSockets, Route};
use haptic_testbed::node::rollout;
use haptic_testbed::paths::target_dir;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, ResourceExt as _};
use serde_json::json;

const NAMESPACE: &str = "haptic";
const GATEWAY_CLASS: &str = "haptic";
const CONTROLLER_NAME: &str = "haproxy-haptic.org/gateway-controller";
/// The suite's profiles unless `HAPTIC_GATEWAY_PROFILES` names others.
const DEFAULT_PROFILES: &str = "GATEWAY-HTTP";
const WAIT: Duration = Duration::from_secs(180);

/// The chart's values for the suite: the `gateway-api` library on and the
/// Gateway API CRDs the chart vendors (the release the suite checks). Each
/// Gateway gets a LoadBalancer Service (the library's default), which the
/// bed's allocator gives an address on the bed's network.
const CHART_VALUES: &[&str] = &[
    "controller.templateLibraries.gatewayApi.enabled=true",
    "gatewayAPI.installCRDs=true",
];

/// The readiness gate's condition (`kubernetes-backends`' gate library).
const GATE_VALUE: &str =
    "controller.templateLibraries.kubernetesBackends.podReadinessGate.enabled=true";
const APP_NAMESPACE: &str = "shop";
const HOST: &str = "web.example.com";
/// The backend the HTTPRoute's rule uses: kubernetes-backends' for Service
/// shop/web port 80 (the route picks it by rule, not through a host map).
const BACKEND: &str = "shop_web_80";
const HAPROXY: &str = "app.kubernetes.io/component=haproxy";
/// Restarts of the gated Deployment under load.
const RESTARTS: usize = 10;
/// The fewest successful requests per second of load (2 clients, one
/// request per connection, 20 ms apart) that show it ran throughout.
const MIN_OK_PER_SECOND: f64 = 10.0;

/// One core test per mechanism the rest build on (attachment and status, a
/// route reaching a backend, matching, cross-namespace grants, a Gateway of
/// its own address): about 30 s of suite, to iterate on the harness.
const CI_SUBSET: &[&str] = &[
    "GatewayClassObservedGenerationBump",
    "HTTPRouteSimpleSameNamespace",
    "HTTPRouteMatching",
    "HTTPRouteCrossNamespace",
    "HTTPRouteReferenceGrant",
    "HTTPRouteMultipleGateways",
];

// Ignored by a plain `cargo test`: it needs the image `make image` builds
// and the suite's build. `make e2e-test` (so CI) runs all of both profiles
// after image-test built the image (about 2.5 min of suite and set-up on two
// cores, the suite's build 160 s cold on top), its report in the target
// dir; `make gateway-conformance` runs it alone and commits the report.
#[ignore = "needs haptic's image and the suite's build; run make gateway-conformance (make e2e-test runs it too)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_conformance_the_gateway_api_suite_passes_on_the_real_node() -> anyhow::Result<()> {
    init_tracing();
    let selection = Selection::from_env()?;
    let profiles = profiles()?;
    let suite = Suite::find()?;
    ensure!(
        NodeBed::has_haptic_image(),
        "haptic's image is not built: run `make image` (IMAGE_PROFILE=dev is enough)"
    );
    ensure!(
        NodeBed::has_gateway_conformance_images(),
        "the conformance suite's images (echo-basic, dns) are not built: run `make testbed-images`"
    );
    let bed = NodeBed::start().await?;
    let client = bed.client();
    let kubeconfig = bed.control_plane().kubeconfig_path().to_owned();

    let began = Instant::now();
    install_chart(&kubeconfig, &[]).await?;
    let mut features = gateway_class_features(&client).await?;
    eprintln!(
        "haptic installed with GatewayClass {GATEWAY_CLASS} accepted in {:?}; it declares: {}",
        began.elapsed(),
        features.join(",")
    );
    let trying = features_to_try()?;
    if !trying.is_empty() {
        eprintln!(
            "also trying (HAPTIC_GATEWAY_TRY_FEATURES, not declared): {}",
            trying.join(",")
        );
        features.extend(trying);
    }

    let out_dir = selection.report_dir();
    std::fs::create_dir_all(&out_dir)?;
    let report = out_dir.join(selection.report_name(&suite.version, &profiles));
    // Logs stay in the target dir for every selection: only the report is
    // committed, the suite's and the pods' logs are for the reader of a run.
    let log_dir = target_dir().join("gateway-conformance");
    std::fs::create_dir_all(&log_dir)?;
    let log = log_dir.join(format!("gateway-conformance-{}.log", selection.name()));
    let ran = Instant::now();
    // One version for the suite's report and its header: the commit at the
    // start (a commit during the hour-long run must not relabel it).
    let version = implementation_version();
    let status = suite
        .run(
            &kubeconfig,
            &profiles,
            &features,
            &selection,
            &report,
            &log,
            &version,
        )
        .await?;
    let results = parse_results(&std::fs::read_to_string(&log)?);
    save_pod_logs(
        &client,
        &log_dir.join(format!("haptic-{}", selection.name())),
    )
    .await;
    eprintln!(
        "Gateway API {} {} ({}): {} in {:?}; suite log {}, report {}",
        suite.version,
        profiles.join(","),
        selection.name(),
        summary(&results),
        ran.elapsed(),
        log.display(),
        report.display()
    );
    for (test, result) in &results {
        eprintln!("  {result:<4} {test}");
    }
    if let Selection::All = selection {
        stamp_report(&report, &version, ran.elapsed())?;
    }
    ensure!(
        status.success(),
        "the conformance suite failed ({status}): {}; its errors:\n{}\n(all of it in {})",
        summary(&results),
        suite_errors(&std::fs::read_to_string(&log)?),
        log.display()
    );
    match selection.required() {
        Some(tests) => {
            let missing: Vec<&String> = tests
                .iter()
                .filter(|t| results.get(*t).map(String::as_str) != Some("PASS"))
                .collect();
            ensure!(missing.is_empty(), "not passed: {missing:?}");
        }
        // The suite's own verdict: core and every declared extended feature
        // `success`, no core test skipped.
        None => check_report(&std::fs::read_to_string(&report)?, &profiles)?,
    }
    bed.stop().await;
    Ok(())
}

/// Features the suite checks on top of what the GatewayClass declares
/// (`HAPTIC_GATEWAY_TRY_FEATURES=Name,Name`): to find out whether one
/// passes before the library declares it.
fn features_to_try() -> anyhow::Result<Vec<String>> {
    let Ok(names) = std::env::var("HAPTIC_GATEWAY_TRY_FEATURES") else {
        return Ok(Vec::new());
    };
    ensure!(
        names.chars().all(|c| c.is_ascii_alphanumeric() || c == ','),
        "HAPTIC_GATEWAY_TRY_FEATURES={names}: say feature names separated by commas"
    );
    Ok(names
        .split(',')
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Which tests run.
enum Selection {
    Subset,
    All,
    Named(Vec<String>),
}

impl Selection {
    fn from_env() -> anyhow::Result<Self> {
        match std::env::var("HAPTIC_GATEWAY_CONFORMANCE").as_deref() {
            Err(_) | Ok("" | "subset") => Ok(Self::Subset),
            Ok("all") => Ok(Self::All),
            Ok(names) if names.chars().all(|c| c.is_ascii_alphanumeric() || c == ',') => {
                Ok(Self::Named(
                    names
                        .split(',')
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned)
                        .collect(),
                ))
            }
            Ok(other) => bail!(
                "HAPTIC_GATEWAY_CONFORMANCE={other}: say `subset`, `all` or test names separated by commas"
            ),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Self::Subset => "subset",
            Self::All => "all",
            Self::Named(_) => "named",
        }
    }

    /// The tests that must pass (all of the profile's: the report decides).
    fn required(&self) -> Option<Vec<String>> {
        match self {
            Self::Subset => Some(CI_SUBSET.iter().map(|t| (*t).to_owned()).collect()),
            Self::Named(names) => Some(names.clone()),
            Self::All => None,
        }
    }

    /// The full run's report is committed (`make gateway-conformance`)
    /// unless `HAPTIC_GATEWAY_REPORT_DIR` names another directory (`make
    /// e2e-test` runs it all too, and must not rewrite the committed one);
    /// the subset's stays in the target dir.
    fn report_dir(&self) -> PathBuf {
        match self {
            Self::Subset | Self::Named(_) => target_dir().join("gateway-conformance"),
            Self::All => std::env::var_os("HAPTIC_GATEWAY_REPORT_DIR")
                .filter(|dir| !dir.is_empty())
                .map_or_else(
                    || haptic_testbed::helm::repo_root().join("docs/conformance"),
                    PathBuf::from,
                ),
        }
    }

    fn report_name(&self, version: &str, profiles: &[String]) -> String {
        format!(
            "gateway-api-{version}-{}-{}.yaml",
            profiles.join("+"),
            self.name()
        )
    }

    /// `go test` arguments that select the tests.
    fn test_run(&self) -> String {
        match self.required() {
            Some(tests) => format!("^TestConformance$/^({})$", tests.join("|")),
            None => "^TestConformance$".to_owned(),
        }
    }
}

/// The suite's binary and its release.
struct Suite {
    version: String,
    binary: PathBuf,
}

impl Suite {
    fn find() -> anyhow::Result<Self> {
        let module_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("gateway-conformance");
        let go_mod = std::fs::read_to_string(module_dir.join("go.mod"))?;
        let version = go_mod
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("sigs.k8s.io/gateway-api/conformance ")
                    .map(|v| v.trim().to_owned())
            })
            .context("tests/testbed/gateway-conformance/go.mod pins no conformance release")?;
        let cache = std::env::var_os("HAPTIC_TESTBED_CACHE").map_or_else(
            || {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/haptic-testbed")
            },
            PathBuf::from,
        );
        let binary = cache
            .join(format!("gateway-api-{version}"))
            .join("conformance.test");
        ensure!(
            binary.is_file(),
            "no {}: run `make gateway-conformance-binaries`",
            binary.display()
        );
        Ok(Self { version, binary })
    }

    /// Runs the suite against the bed, its output (`-test.v`) into `log`.
    #[allow(clippy::too_many_arguments)]
    async fn run(
        &self,
        kubeconfig: &Path,
        profiles: &[String],
        features: &[String],
        selection: &Selection,
        report: &Path,
        log: &Path,
        version: &str,
    ) -> anyhow::Result<std::process::ExitStatus> {
        let log_file = std::fs::File::create(log)?;
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .arg("-test.v")
            .arg(format!("-test.run={}", selection.test_run()))
            .arg("-test.timeout=90m")
            .arg(format!("--gateway-class={GATEWAY_CLASS}"))
            .arg(format!("--conformance-profiles={}", profiles.join(",")))
            .arg(format!("--supported-features={}", features.join(",")))
            .arg(format!("--report-output={}", report.display()))
            .arg("--organization=haptic")
            .arg("--project=haptic")
            .arg("--url=https://github.com/haproxy-haptic/haptic")
            .arg(format!("--version={version}"))
            .arg("--contact=https://github.com/haproxy-haptic/haptic/issues")
            .env("KUBECONFIG", kubeconfig)
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .kill_on_drop(true);
        Ok(command.status().await?)
    }
}

/// The chart with haptic's image and the `gateway-api` library on.
async fn install_chart(kubeconfig: &Path, extra: &[&str]) -> anyhow::Result<()> {
    let values: Vec<&str> = CHART_VALUES.iter().chain(extra).copied().collect();
    haptic_testbed::helm::install(kubeconfig, NAMESPACE, &values)
        .await
        .context("helm install")
}

/// Creates GatewayClass `haptic` unless the chart did, waits for the
/// library to accept it, and returns the features it declares.
async fn gateway_class_features(client: &kube::Client) -> anyhow::Result<Vec<String>> {
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "GatewayClass");
    let classes: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    if classes.get_opt(GATEWAY_CLASS).await?.is_none() {
        let class: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": CONTROLLER_NAME},
        }))?;
        classes.create(&PostParams::default(), &class).await?;
    }
    let features = wait_for(
        "GatewayClass haptic Accepted, with its supportedFeatures",
        WAIT,
        || async {
            let class = classes
                .get(GATEWAY_CLASS)
                .await
                .map_err(|e| e.to_string())?;
            let status = &class.data["status"];
            let accepted = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Accepted" && c["status"] == "True");
            let features: Vec<String> = status["supportedFeatures"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f["name"].as_str().map(str::to_owned))
                .collect();
            if accepted && !features.is_empty() {
                Ok(features)
            } else {
                Err(format!("status: {status}"))
            }
        },
    )
    .await?;
    Ok(features)
}

/// `--- PASS: TestConformance/<Test>` lines of the suite's log: the result
/// of each test of the profile (subtests of a test are not counted).
fn parse_results(log: &str) -> BTreeMap<String, String> {
    log.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let rest = line.strip_prefix("--- ")?;
            let (result, rest) = rest.split_once(": ")?;
            let test = rest.strip_prefix("TestConformance/")?;
            let test = test.split_whitespace().next()?;
            (!test.contains('/')).then(|| (test.to_owned(), result.to_owned()))
        })
        .collect()
}

/// Fails unless each profile of the report says `success` for core (with
/// no skipped test) and for the extended features declared.
fn check_report(report: &str, profiles: &[String]) -> anyhow::Result<()> {
    let report: serde_json::Value = serde_yaml_ng::from_str(report)?;
    for name in profiles {
        let profile = report["profiles"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name.as_str())
            .with_context(|| format!("the report has no {name} profile"))?;
        let core = &profile["core"];
        ensure!(
            core["result"] == "success" && core["statistics"]["Skipped"].as_u64() == Some(0),
            "{name} core: {core}"
        );
        let extended = &profile["extended"];
        ensure!(
            extended.is_null() || extended["result"] == "success",
            "{name} extended: {extended}"
        );
    }
    Ok(())
}

/// The profiles to run: `HAPTIC_GATEWAY_PROFILES` (names separated by
/// commas), else [`DEFAULT_PROFILES`].
fn profiles() -> anyhow::Result<Vec<String>> {
    let names =
        std::env::var("HAPTIC_GATEWAY_PROFILES").unwrap_or_else(|_| DEFAULT_PROFILES.into());
    let profiles: Vec<String> = names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    ensure!(
        !profiles.is_empty()
            && profiles
                .iter()
                .all(|p| p.chars().all(|c| c.is_ascii_uppercase() || c == '-')),
        "HAPTIC_GATEWAY_PROFILES={names}: say profile names separated by commas, such as GATEWAY-HTTP,GATEWAY-GRPC"
    );
    Ok(profiles)
}

/// The suite's own error messages: testify's `Error:`, `Test:` and
/// `Messages:` fields (`\t<label>\t<value>`, a continued value has an empty
/// label), at most 40 lines.
fn suite_errors(log: &str) -> String {
    let mut out = Vec::new();
    let mut capturing = false;
    for line in log.lines() {
        let mut fields = line.split('\t').skip(1);
        let (Some(label), Some(value)) = (fields.next(), fields.next()) else {
            capturing = false;
            continue;
        };
        match label.trim() {
            "" if capturing => out.push(format!("    {}", value.trim())),
            label @ ("Error:" | "Test:" | "Messages:") => {
                capturing = true;
                out.push(format!("{label} {}", value.trim()));
            }
            _ => capturing = false,
        }
    }
    out.truncate(40);
    out.join("\n")
}

fn summary(results: &BTreeMap<String, String>) -> String {
    let count = |r: &str| results.values().filter(|v| *v == r).count();
    format!(
        "{} passed, {} failed, {} skipped",
        count("PASS"),
        count("FAIL"),
        count("SKIP")
    )
}

/// Every container's log of haptic's pods (controller, HAProxy, agent) into
/// `<prefix>-<pod>-<container>.log`, for the reader of a failed run: the bed
/// sweeps the node's logs when it stops. Best effort: a log that cannot be
/// read is named on stderr.
async fn save_pod_logs(client: &kube::Client, prefix: &Path) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = match pods.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(error) => {
            eprintln!("listing haptic's pods for their logs: {error}");
            return;
        }
    };
    for pod in &list.items {
        let name = pod.name_any();
        let containers = pod.spec.iter().flat_map(|s| &s.containers);
        for container in containers.map(|c| c.name.clone()) {
            let params = kube::api::LogParams {
                container: Some(container.clone()),
                ..Default::default()
            };
            let path = PathBuf::from(format!("{}-{name}-{container}.log", prefix.display()));
            match pods.logs(&name, &params).await {
                Ok(text) => {
                    if let Err(error) = std::fs::write(&path, text) {
                        eprintln!("writing {}: {error}", path.display());
                    }
                }
                Err(error) => eprintln!("reading the log of {name}/{container}: {error}"),
            }
        }
    }
}

/// haptic's version and the commit the run tested.
fn implementation_version() -> String {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(haptic_testbed::helm::repo_root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{}+{commit}", env!("CARGO_PKG_VERSION"))
}

/// The report's verdict in a line: per profile, core and extended passed of
/// run, and what was skipped (`GATEWAY-HTTP core 36/36, extended 21/21, 0
/// skipped`).
fn report_statistics(report: &str) -> anyhow::Result<String> {
    let report: serde_json::Value = serde_yaml_ng::from_str(report)?;
    let count = |stats: &serde_json::Value, key: &str| stats[key].as_u64().unwrap_or(0);
    let mut lines = Vec::new();
    for profile in report["profiles"].as_array().into_iter().flatten() {
        let mut parts = Vec::new();
        let mut skipped = 0;
        for level in ["core", "extended"] {
            let stats = &profile[level]["statistics"];
            if stats.is_null() {
                continue;
            }
            let passed = count(stats, "Passed");
            parts.push(format!(
                "{level} {passed}/{}",
                passed + count(stats, "Failed")
            ));
            skipped += count(stats, "Skipped");
        }
        let name = profile["name"].as_str().unwrap_or("unnamed profile");
        lines.push(format!("{name} {}, {skipped} skipped", parts.join(", ")));
    }
    ensure!(!lines.is_empty(), "the report has no profiles");
    Ok(lines.join("; "))
}

/// The committed report says when and on what it ran, above the suite's YAML.
fn stamp_report(report: &Path, version: &str, took: Duration) -> anyhow::Result<()> {
    let body = std::fs::read_to_string(report)
        .with_context(|| format!("the suite wrote no report at {}", report.display()))?;
    let header = format!(
        "# Gateway API conformance, haptic {version} on the real-node test bed (make gateway-conformance): {}, {} s of suite\n",
        report_statistics(&body)?,
        took.as_secs()
    );
    std::fs::write(report, header + &body)?;
    Ok(())
}

// Ignored by a plain `cargo test`: it needs the image `make image` builds.
// `make e2e-test` (so CI) runs it after image-test built the image, about
// 2 min; `make gateway-rollout-test` runs it alone.
#[ignore = "needs haptic's image; run make gateway-rollout-test (make e2e-test runs it too)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_gated_rollouts_behind_an_httproute_drop_no_request_and_the_gate_never_leads_haproxy()
-> anyhow::Result<()> {
    init_tracing();
    ensure!(
        NodeBed::has_haptic_image(),
        "haptic's image is not built: run `make image` (IMAGE_PROFILE=dev is enough)"
    );
    let bed = NodeBed::start().await?;
    let client = bed.client();
    install_chart(bed.control_plane().kubeconfig_path(), &[GATE_VALUE]).await?;
    gateway_class_features(&client).await?;
    create_gated_app(&client).await?;
    let gateway = gateway_address(&client).await?;
    wait_for("web routed through the Gateway", WAIT, || async {
        match haptic_testbed::http::get(gateway, Some(HOST), "/", &[], Duration::from_secs(5)).await
        {
            Ok(r) if r.status == 200 && r.body.contains("pod=web-") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await?;

    let sockets = MasterSockets::of(&client, NAMESPACE, HAPROXY).await?;
    let proxies = &sockets.sockets;
    // The 200 above came from the HAProxy pod kube-proxy picked; the load
    // starts once every worker of every HAProxy pod serves the web pod.
    let web: Api<Pod> = Api::namespaced(client.clone(), APP_NAMESPACE);
    wait_for(
        "every HAProxy worker to serve the web pod",
        WAIT,
        || async {
            let pods = web
                .list(&ListParams::default().labels("app=web"))
                .await
                .map_err(|e| e.to_string())?;
            let ip = pods
                .items
                .iter()
                .find_map(|pod| pod.status.as_ref()?.pod_ip.clone())
                .ok_or("no web pod with an address")?;
            for (proxy, socket) in proxies {
                haptic_testbed::oracle::every_worker_serves(socket, BACKEND, &ip, 8080)
                    .await
                    .map_err(|error| format!("{proxy}: {error}"))?;
            }
            Ok(())
        },
    )
    .await?;
    let check = GateCheck {
        namespace: APP_NAMESPACE.to_owned(),
        selector: "app=web".to_owned(),
        gate: GATE.to_owned(),
        route: Route::Backend(BACKEND.to_owned()),
        port: 8080,
        listed: false,
    };
    let checker = GateOrder::start(&client, check, proxies.clone()).await?;
    let load = Load::start(gateway, HOST, 2);
    let mut rollouts = Vec::new();
    for _ in 0..RESTARTS {
        rollouts
            .push(rollout::restart_and_wait(&client, APP_NAMESPACE, "web", "app=web", WAIT).await?);
    }
    // The last new pod's gate is seen by the checker before the load stops.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = load.stop().await;
    let GateOrderSeen {
        checked,
        violations,
        ..
    } = checker.stop().await;
    let logs = target_dir().join("gateway-conformance");
    if std::fs::create_dir_all(&logs).is_ok() {
        save_pod_logs(&client, &logs.join("haptic-rollout")).await;
    }
    let slowest = rollouts.iter().max().copied().unwrap_or_default();
    let minimum = (seen.elapsed.as_secs_f64() * MIN_OK_PER_SECOND) as u64;
    eprintln!(
        "{RESTARTS} gated rollouts behind an HTTPRoute on the real node: {} ok, {} failed over {:?} \
         (minimum {minimum}); slowest rollout {slowest:?}; gate checked on {} new pods, {} times \
         ahead of a HAProxy worker",
        seen.ok,
        seen.failed(),
        seen.elapsed,
        checked.len(),
        violations.len()
    );
    ensure!(
        seen.failures.is_empty(),
        "{} requests failed: {:#?}",
        seen.failed(),
        seen.failures
    );
    ensure!(
        seen.ok >= minimum,
        "only {} requests succeeded (want >= {minimum})",
        seen.ok
    );
    ensure!(
        violations.is_empty(),
        "the gate came ahead of HAProxy: {violations:#?}"
    );
    ensure!(
        checked.len() >= RESTARTS,
        "the gate was checked on {} new pods, want {RESTARTS}: {checked:?}",
        checked.len()
    );
    bed.stop().await;
    Ok(())
}

/// The gated echo Deployment (one replica, surge 1), its Service, a Gateway
/// of class `haptic` with one HTTP listener and an HTTPRoute for [`HOST`].
async fn create_gated_app(client: &kube::Client) -> anyhow::Result<()> {
    namespace(client, APP_NAMESPACE).await?;
    create_web_app(
        client,
        APP_NAMESPACE,
        WebApp {
            replicas: 1,
            gated: true,
        },
    )
    .await?;
    for object in [
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "web", "namespace": APP_NAMESPACE},
            "spec": {"gatewayClassName": GATEWAY_CLASS,
                     "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]},
        }),
        json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": APP_NAMESPACE},
            "spec": {"parentRefs": [{"name": "web"}], "hostnames": [HOST],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
        }),
    ] {
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", &kind);
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), APP_NAMESPACE, &ApiResource::from_gvk(&gvk));
        api.create(&PostParams::default(), &serde_json::from_value(object)?)
            .await
            .with_context(|| format!("creating {kind} {APP_NAMESPACE}/web"))?;
    }
    Ok(())
}

/// The Gateway's address (`status.addresses`, from its LoadBalancer
/// Service) and its listener's port.
async fn gateway_address(client: &kube::Client) -> anyhow::Result<std::net::SocketAddr> {
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "Gateway");
    let gateways: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), APP_NAMESPACE, &ApiResource::from_gvk(&gvk));
    Ok(wait_for("the Gateway's address", WAIT, || async {
        let gateway = gateways.get("web").await.map_err(|e| e.to_string())?;
        let status = &gateway.data["status"];
        status["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|a| format!("{}:80", a["value"].as_str()?).parse().ok())
            .ok_or_else(|| format!("status: {status}"))
    })
    .await?)
}

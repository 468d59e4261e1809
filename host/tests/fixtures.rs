//! Every bundled library's fixture cases, run the way `haptic test <name>`
//! runs them (each successful case is also checked by the real `haproxy -c`).

use std::path::PathBuf;

use haptic::fixtures::{self, LibraryUnderTest};
use haptic::library::{LibraryRuntime, RuntimeConfig};

#[test]
fn bundled_library_fixtures_pass() {
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../template-libraries");
    let mut failures = Vec::new();
    let mut cases = 0;
    for library in haptic::guests::BUNDLED.iter().map(|bundled| bundled.name) {
        let dir = root.join(library).join("fixtures");
        let reports = fixtures::run_cases(
            &runtime,
            &LibraryUnderTest::Bundled(library.to_owned()),
            &dir,
        )
        .unwrap_or_else(|error| panic!("running {library} fixtures: {error}"));
        assert!(
            !reports.is_empty(),
            "{library} ships no fixture cases in {}",
            dir.display()
        );
        cases += reports.len();
        for report in reports.into_iter().filter(|r| !r.passed()) {
            failures.push(format!(
                "{library}/{}: {}",
                report.name,
                report.failures.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn example_libraries_pass_their_own_fixtures() {
    // The examples a library author copies, tested the way their READMEs say.
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    for (wasm, name) in [
        (
            haptic::guests::EXAMPLE_MAINTENANCE_MODE_PATH,
            "maintenance-mode",
        ),
        (
            haptic::guests::EXAMPLE_SOURCE_ALLOW_LIST_PATH,
            "source-allow-list",
        ),
        (haptic::guests::EXAMPLE_BASIC_AUTH_PATH, "basic-auth"),
    ] {
        let library = LibraryUnderTest::Custom(PathBuf::from(wasm));
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name)
            .join("fixtures");
        let reports = fixtures::run_cases(&runtime, &library, &dir).expect("example fixtures run");
        assert!(reports.len() >= 2, "{name} ships its fixture cases");
        let failures: Vec<String> = reports
            .iter()
            .filter(|r| !r.passed())
            .map(|r| format!("{name} {}: {}", r.name, r.failures.join("; ")))
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

#[test]
fn a_failing_expectation_is_reported() {
    // The runner must be able to fail: an expectation that cannot hold.
    let dir = tempfile::tempdir().expect("temp dir");
    let case = dir.path().join("impossible");
    std::fs::create_dir(&case).expect("case dir");
    std::fs::write(case.join("manifests.yaml"), "").expect("manifests");
    std::fs::write(
        case.join("expect.yaml"),
        "description: impossible\ncontains: [\"server nowhere 0.0.0.0:1\"]\nstatusPatches: {deployed: []}\n",
    )
    .expect("expect");
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let reports = fixtures::run_cases(
        &runtime,
        &LibraryUnderTest::Bundled("base".into()),
        dir.path(),
    )
    .expect("runs");
    assert_eq!(reports.len(), 1);
    assert!(!reports[0].passed());
    assert!(
        reports[0].failures[0].contains("server nowhere"),
        "{:?}",
        reports[0].failures
    );
}

#[test]
fn warnings_are_checked_and_secret_files_never_shown() {
    // An Ingress whose TLS Secret is missing: the warning is there, a
    // warning that is not fails, and a failing pattern on the default
    // certificate (key material) does not print its lines.
    let dir = tempfile::tempdir().expect("temp dir");
    let manifests = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\nspec:\n  ingressClassName: haptic\n  tls: [{hosts: [a.test], secretName: gone}]\n  rules: [{host: a.test}]\n---\napiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: haptic}\nspec: {controller: haproxy-haptic.org/controller}\n";
    case(
        dir.path(),
        "missing-secret",
        manifests,
        "warnings:\n  - {substring: \"TLSSecretMissing: Ingress default/web: Secret default/gone does not exist\"}\n  - {substring: \"TLSSecretInvalid\"}\nfiles:\n  certs/default.pem: [\"no such line\"]\n",
    );
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let reports = fixtures::run_cases(
        &runtime,
        &LibraryUnderTest::Bundled("ingress".into()),
        dir.path(),
    )
    .expect("runs");
    let failures = failures_of(&reports, "missing-secret");
    assert_eq!(failures.len(), 2, "{failures:#?}");
    assert!(
        failures.iter().any(
            |f| f.starts_with("the list of warnings has no line matching")
                && f.contains("TLSSecretInvalid")
        ),
        "{failures:#?}"
    );
    assert!(
        failures
            .iter()
            .any(|f| f.contains("key material, its lines are not shown")),
        "{failures:#?}"
    );
    assert!(
        !failures.iter().any(|f| f.contains("PRIVATE KEY")),
        "{failures:#?}"
    );
}

/// Writes one case into `dir`.
fn case(dir: &std::path::Path, name: &str, manifests: &str, expect: &str) {
    let case = dir.join(name);
    std::fs::create_dir(&case).expect("case dir");
    std::fs::write(case.join("manifests.yaml"), manifests).expect("manifests");
    std::fs::write(case.join("expect.yaml"), expect).expect("expect");
}

fn failures_of<'a>(reports: &'a [fixtures::CaseReport], name: &str) -> &'a [String] {
    &reports
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .failures
}

#[test]
fn a_vacuous_absent_is_reported_not_passed() {
    // Issue 11: `absent: ["http-request deny"]` passed while deny lines
    // were present, because a string matches whole lines only.
    let manifests = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/source-allow-list/fixtures/annotated-hosts-allow-listed-sources/manifests.yaml"),
    )
    .expect("example manifests");
    let dir = tempfile::tempdir().expect("temp dir");
    case(
        dir.path(),
        "whole-line",
        &manifests,
        "absent: [\"http-request deny\"]\n",
    );
    case(
        dir.path(),
        "substring",
        &manifests,
        "absent: [{substring: \"http-request deny\"}]\n",
    );
    case(
        dir.path(),
        "no-such-file",
        &manifests,
        "absentFiles: [maps/allow-list.lst]\n",
    );
    case(
        dir.path(),
        "empty",
        "",
        "absent: [{substring: \"http-request deny\"}]\n",
    );
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let library = LibraryUnderTest::Custom(PathBuf::from(
        haptic::guests::EXAMPLE_SOURCE_ALLOW_LIST_PATH,
    ));
    let reports = fixtures::run_cases(&runtime, &library, dir.path()).expect("runs");

    let whole_line = failures_of(&reports, "whole-line");
    assert_eq!(whole_line.len(), 1, "{whole_line:?}");
    assert!(whole_line[0].contains("is vacuous"), "{whole_line:?}");
    assert!(
        whole_line[0].contains("+ http-request deny deny_status 403 if"),
        "shows the lines it did not match: {whole_line:?}"
    );
    let substring = failures_of(&reports, "substring");
    assert!(
        substring.len() == 1 && substring[0].contains("which matches absent a line containing"),
        "{substring:?}"
    );
    let file = failures_of(&reports, "no-such-file");
    assert!(
        file.len() == 1 && file[0].contains("is vacuous"),
        "{file:?}"
    );
    // Witnessed by the other cases, which render deny lines.
    assert!(failures_of(&reports, "empty").is_empty());
}

#[test]
fn a_failing_case_shows_the_closest_lines_and_a_patch_diff() {
    let dir = tempfile::tempdir().expect("temp dir");
    case(
        dir.path(),
        "typo",
        "",
        "contains: [\"bind :8008\"]\nfiles: {maps/none.map: []}\nstatusPatches: {deployed: [{apiVersion: v1, kind: Pod, name: p, status: {}}]}\n",
    );
    case(
        dir.path(),
        "error-and-lines",
        "",
        "error: refused\ncontains: [frontend http]\n",
    );
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let reports = fixtures::run_cases(
        &runtime,
        &LibraryUnderTest::Bundled("base".into()),
        dir.path(),
    )
    .expect("runs");
    let typo = failures_of(&reports, "typo");
    assert_eq!(typo.len(), 3, "{typo:?}");
    assert!(
        typo[0].contains("  - bind :8008\n  + bind :8080"),
        "{typo:?}"
    );
    assert!(
        typo[1].contains("no file `maps/none.map` was rendered"),
        "{typo:?}"
    );
    assert!(
        typo[2].contains("- - apiVersion: v1") && typo[2].contains("+ []"),
        "{typo:?}"
    );
    let error = failures_of(&reports, "error-and-lines");
    assert!(
        error
            .iter()
            .any(|f| f.contains("nothing to check contains against")),
        "{error:?}"
    );
}

#[test]
fn traffic_that_does_not_get_its_answers_fails_the_case() {
    // The property the `traffic` key exists for: a check passes on what the
    // real HAProxy answered, so a wrong expectation must fail, each kind of
    // mismatch with its own line.
    let manifests = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../template-libraries/ingress/fixtures/traffic-matching-rules/manifests.yaml"),
    )
    .expect("bundled fixture manifests");
    let dir = tempfile::tempdir().expect("temp dir");
    case(
        dir.path(),
        "wrong",
        &manifests,
        "traffic:
  - name: routed elsewhere
    send: {host: a.test, path: /api}
    repeat: 10
    expect: {status: 200, service: app/web}
  - name: nobody answers an unknown host
    send: {host: unknown.test}
    expect: {service: app/web, upstream: {path: /}}
  - name: a share that is not there
    send: {host: a.test}
    repeat: 50
    shares: {app/api: 50}
    tolerance: 30
    atLeast: {429: 1}
  - name: a share measured too briefly to hold
    send: {host: a.test}
    repeat: 50
    shares: {app/web: 50}
",
    );
    case(
        dir.path(),
        "right",
        &manifests,
        "traffic:
  - name: a prefix
    send: {host: a.test, path: /api/v1?x=1}
    expect: {status: 200, service: app/api, pod: api-1, upstream: {path: /api/v1?x=1, host: a.test}}
",
    );
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let reports = fixtures::run_cases(
        &runtime,
        &LibraryUnderTest::Bundled("ingress".into()),
        dir.path(),
    )
    .expect("runs");
    assert!(failures_of(&reports, "right").is_empty(), "{reports:#?}");
    let failures = failures_of(&reports, "wrong").join("\n");
    for expected in [
        "traffic `routed elsewhere` (GET http://a.test/api): answer 1 of 10: answered by app/api (expected app/web)",
        "traffic `nobody answers an unknown host` (GET http://unknown.test/): answer 1 of 1: answered by none (expected app/web); no backend answered",
        "app/api gave 0.0% of 50 answers, expected 50% ± 30",
        "traffic `a share measured too briefly to hold` (GET http://a.test/): the share of app/web (50% ± 3 over 50 requests) would fail by chance: its spread is 7.07 points",
        "repeat at least 4445 times or widen the tolerance",
        "0 of 50 answers had status 429, expected at least 1",
    ] {
        assert!(
            failures.contains(expected),
            "missing {expected:?} in:\n{failures}"
        );
    }
}

#[test]
fn owned_objects_are_checked_exactly_with_a_subset_of_each_manifest() {
    let manifests = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: gw
  namespace: shop
  uid: 0d4c6c1e-0000-4000-8000-000000000001
  labels: {haptic.test/gateway: "true"}
data: {port: "8000"}
"#;
    let dir = tempfile::tempdir().expect("temp dir");
    case(
        dir.path(),
        "right",
        manifests,
        "ownedObjects:
  - apiVersion: v1
    kind: Service
    namespace: shop
    name: gw-gateway
    manifest:
      metadata:
        ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: gw, uid: 0d4c6c1e-0000-4000-8000-000000000001, controller: true}]
",
    );
    case(
        dir.path(),
        "wrong",
        manifests,
        "ownedObjects:
  - {apiVersion: v1, kind: Service, namespace: shop, name: gw-gateway, manifest: {spec: {type: NodePort}}}
  - {apiVersion: v1, kind: Service, namespace: shop, name: other}
",
    );
    case(dir.path(), "none-expected", manifests, "ownedObjects: []\n");
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let library = LibraryUnderTest::Custom(PathBuf::from(haptic::guests::OWNED_OBJECTS_PATH));
    let reports = fixtures::run_cases(&runtime, &library, dir.path()).expect("runs");
    assert!(failures_of(&reports, "right").is_empty(), "{reports:#?}");
    let wrong = failures_of(&reports, "wrong").join("\n");
    for expected in [
        "owned Service shop/gw-gateway (v1) lacks fields the case expects",
        "-   type: NodePort",
        "`owned-objects` asks for no owned object Service shop/other (v1); it asks for: Service shop/gw-gateway (v1)",
    ] {
        assert!(
            wrong.contains(expected),
            "missing {expected:?} in:\n{wrong}"
        );
    }
    let none = failures_of(&reports, "none-expected").join("\n");
    assert!(
        none.contains("asks for owned Service shop/gw-gateway (v1), which the case's ownedObjects does not list"),
        "{none}"
    );
}

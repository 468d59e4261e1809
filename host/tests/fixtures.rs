//! Every bundled library's fixture cases, run the way `haptic test <name>`
//! runs them (each successful case is also checked by the real `haproxy -c`).

use std::path::PathBuf;

use haptic::fixtures::{self, LibraryUnderTest};
use haptic::library::{LibraryRuntime, RuntimeConfig};

const BUNDLED: &[&str] = &[
    "base",
    "ingress",
    "kubernetes-backends",
    "status-patches-150-pod-readiness-gate",
];

#[test]
fn bundled_library_fixtures_pass() {
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime starts");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../template-libraries");
    let mut failures = Vec::new();
    let mut cases = 0;
    for library in BUNDLED {
        let dir = root.join(library).join("fixtures");
        let reports = fixtures::run(
            &runtime,
            &LibraryUnderTest::Bundled((*library).to_owned()),
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
    ] {
        let library = LibraryUnderTest::Custom(PathBuf::from(wasm));
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../examples")
            .join(name)
            .join("fixtures");
        let reports = fixtures::run(&runtime, &library, &dir).expect("example fixtures run");
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
    let reports = fixtures::run(
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

//! Contract versions side by side: components built for
//! `haptic:template@0.1.0` (the misbehaving library) and `@0.2.0` (the
//! contract-0-2-0 library), both on wit-bindgen directly and frozen on
//! purpose, load and render in one runtime, one render, with the bundled
//! libraries built for 0.4.0 (0.3.0 is the Python SDK's: `make python-test`).

use std::path::{Path, PathBuf};

use haptic::guests::{CONTRACT_0_2_0_PATH, MISBEHAVING_PATH};
use haptic::library::{LibraryRuntime, RuntimeConfig};
use haptic::offline::{self, Job};
use haptic::values::Values;

#[test]
fn contract_0_1_0_and_0_2_0_libraries_render_beside_0_4_0_ones() {
    let runtime = LibraryRuntime::new(RuntimeConfig::default()).expect("runtime");
    let bundled = runtime.load_bundled().expect("bundled libraries load");
    for library in &bundled {
        assert_eq!(
            library.contract_version().to_string(),
            "0.4.0",
            "{} is bundled on the newest contract",
            library.info().name
        );
    }
    let old = runtime
        .load_file(Path::new(MISBEHAVING_PATH))
        .expect("a 0.1.0 component still loads");
    assert_eq!(old.contract_version().to_string(), "0.1.0");
    let frozen = runtime
        .load_file(Path::new(CONTRACT_0_2_0_PATH))
        .expect("a 0.2.0 component still loads");
    assert_eq!(frozen.contract_version().to_string(), "0.2.0");

    let cluster = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
    let mut values = Values::default();
    values
        .set_assignment("templateLibraries.misbehaving.mode=ok")
        .expect("mode value");
    let job = Job {
        inputs: vec![cluster],
        values,
        custom_libraries: vec![
            PathBuf::from(MISBEHAVING_PATH),
            PathBuf::from(CONTRACT_0_2_0_PATH),
        ],
        validate: true,
    };
    let libraries = offline::load_libraries(&runtime, &job.custom_libraries).expect("libraries");
    let output = offline::render(&job, libraries).expect("both contracts render together");
    let config = &output.rendered.config;
    assert!(
        config.contains("backend misbehaving-ok"),
        "the 0.1.0 library's section is in the render:\n{config}"
    );
    assert!(
        config.contains("backend contract-0-2-0"),
        "the 0.2.0 library's section is in the render:\n{config}"
    );
    assert!(
        output
            .rendered
            .secret_files
            .contains("contract-0-2-0/token"),
        "the 0.2.0 library's secret file stays secret"
    );
    assert!(
        output
            .rendered
            .warnings
            .iter()
            .any(|(_, _, warning)| warning.reason == "FrozenContract"),
        "the 0.2.0 library's warning arrives"
    );
    assert!(
        config.contains("ssl crt certs/default.pem crt-list certs/ingress.crt-list"),
        "the 0.4.0 ingress library's HTTPS bind is in the render:\n{config}"
    );
}

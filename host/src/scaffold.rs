//! `haptic new`: a standalone template library project that builds and
//! passes `haptic test` as written, wherever it is created, in Rust (a Cargo
//! project) or Python (`--lang python`: a module built with componentize-py).
//!
//! The project depends on the guest SDK by path. By default that is the SDK
//! of the checkout this binary was built from (the one place an SDK is sure
//! to exist on this machine, and the one whose contract this binary speaks);
//! `--sdk` names another. A git dependency would need the repository to be
//! reachable, which a fresh or offline machine cannot promise. The project's
//! `Cargo.lock` starts as a copy of that checkout's, so the SDK's
//! dependencies resolve to the versions it was tested with, already in
//! cargo's cache; cargo drops the entries the library does not use. A
//! Python project's Makefile names that checkout's Python SDK and WIT
//! directory the same way.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::values::camel_case;

/// The language of a new library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Lang {
    /// A Cargo project on the Rust SDK (`template-libraries/sdk`).
    #[default]
    Rust,
    /// A Python module on the Python SDK (`template-libraries/sdk-python`),
    /// built with componentize-py.
    Python,
}

/// What `haptic new` creates.
#[derive(Debug, Clone)]
pub struct NewLibrary {
    /// The project directory; must not exist or be empty.
    pub dir: PathBuf,
    /// The library's name (kebab-case).
    pub name: String,
    /// The language it is written in.
    pub lang: Lang,
    /// The SDK directory the project uses: the `haptic-sdk` crate, or the
    /// Python SDK (the directory holding `haptic_sdk/`).
    pub sdk: PathBuf,
    /// The haptic binary the project's Makefile runs.
    pub haptic: PathBuf,
}

/// Why a project could not be created.
#[derive(Debug, Error)]
pub enum ScaffoldError {
    /// The name cannot be a library's name.
    #[error(
        "`{0}` cannot name a template library: use lowercase letters, digits and single `-`, starting with a letter (e.g. `ip-allow-list`); pass --name to choose one other than the directory's"
    )]
    BadName(String),
    /// The directory already holds something.
    #[error("{} already exists and is not empty; choose a new directory", .0.display())]
    NotEmpty(PathBuf),
    /// No SDK where one was expected.
    #[error(
        "no haptic-sdk crate at {} ({why}); pass --sdk with the path of a haptic checkout's template-libraries/sdk",
        path.display()
    )]
    NoSdk { path: PathBuf, why: String },
    /// No Python SDK, or no contract next to it, where one was expected.
    #[error(
        "no haptic Python SDK at {} ({why}); pass --sdk with the path of a haptic checkout's template-libraries/sdk-python",
        path.display()
    )]
    NoPythonSdk { path: PathBuf, why: String },
    /// Writing the project failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The SDK of the checkout this binary was built from.
pub fn default_sdk(lang: Lang) -> PathBuf {
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    match lang {
        Lang::Rust => checkout.join("template-libraries/sdk"),
        Lang::Python => checkout.join("template-libraries/sdk-python"),
    }
}

/// The contract the SDKs of this checkout speak, the newest the host loads.
pub fn contract() -> String {
    crate::library::SUPPORTED_CONTRACTS
        .iter()
        .max()
        .map(ToString::to_string)
        .unwrap_or_default()
}

/// The fixture cases every new project starts with, whatever its language
/// (the Rust and Python templates do the same): an annotated Ingress with
/// its Service and endpoint, so nothing but the library's own lines
/// differs from a clean render, and `traffic` through the real HAProxy.
const FIXTURES: [(&str, &str); 4] = [
    (
        "fixtures/annotated-ingress-gets-header/manifests.yaml",
        include_str!(
            "../templates/new-library/fixtures/annotated-ingress-gets-header/manifests.yaml"
        ),
    ),
    (
        "fixtures/annotated-ingress-gets-header/expect.yaml",
        include_str!("../templates/new-library/fixtures/annotated-ingress-gets-header/expect.yaml"),
    ),
    (
        "fixtures/unannotated-ingress-untouched/manifests.yaml",
        include_str!(
            "../templates/new-library/fixtures/unannotated-ingress-untouched/manifests.yaml"
        ),
    ),
    (
        "fixtures/unannotated-ingress-untouched/expect.yaml",
        include_str!("../templates/new-library/fixtures/unannotated-ingress-untouched/expect.yaml"),
    ),
];

/// The Rust project's files, relative to its directory, with `{{...}}` to fill.
const RUST_TEMPLATE: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../templates/new-library/Cargo.toml.in"),
    ),
    (
        "Makefile",
        include_str!("../templates/new-library/Makefile.in"),
    ),
    (
        "README.md",
        include_str!("../templates/new-library/README.md.in"),
    ),
    (
        ".gitignore",
        include_str!("../templates/new-library/gitignore.in"),
    ),
    // The toolchain haptic itself is pinned to, with the wasm target.
    (
        "rust-toolchain.toml",
        include_str!("../../rust-toolchain.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/new-library/lib.rs.in"),
    ),
    FIXTURES[0],
    FIXTURES[1],
    FIXTURES[2],
    FIXTURES[3],
];

/// The Python project's files; paths may hold `{{module}}` too.
const PYTHON_TEMPLATE: &[(&str, &str)] = &[
    (
        "Makefile",
        include_str!("../templates/new-library-python/Makefile.in"),
    ),
    (
        "README.md",
        include_str!("../templates/new-library-python/README.md.in"),
    ),
    (
        ".gitignore",
        include_str!("../templates/new-library-python/gitignore.in"),
    ),
    (
        "src/{{module}}.py",
        include_str!("../templates/new-library-python/src/library.py.in"),
    ),
    (
        "tests/test_{{module}}.py",
        include_str!("../templates/new-library-python/tests/test_library.py.in"),
    ),
    // The fixture cases are the Rust project's: the libraries do the same.
    FIXTURES[0],
    FIXTURES[1],
    FIXTURES[2],
    FIXTURES[3],
];

/// Whether `name` is a library name the host accepts and a Cargo package
/// name (kebab-case, starting with a letter).
pub fn valid_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Creates the project; returns the files written, relative to `dir`.
pub fn create(new: &NewLibrary) -> Result<Vec<PathBuf>, ScaffoldError> {
    if !valid_name(&new.name) {
        return Err(ScaffoldError::BadName(new.name.clone()));
    }
    let not_empty = std::fs::read_dir(&new.dir).is_ok_and(|mut entries| entries.next().is_some());
    if not_empty {
        return Err(ScaffoldError::NotEmpty(new.dir.clone()));
    }
    let (sdk, wit) = match new.lang {
        Lang::Rust => (check_sdk(&new.sdk)?, PathBuf::new()),
        Lang::Python => check_python_sdk(&new.sdk)?,
    };
    let write = |relative: &Path, content: &[u8]| {
        let path = new.dir.join(relative);
        let result = match path.parent() {
            Some(parent) => std::fs::create_dir_all(parent),
            None => Ok(()),
        }
        .and_then(|()| std::fs::write(&path, content));
        result.map_err(|source| ScaffoldError::Write { path, source })
    };
    let substitutions = [
        ("{{name}}", new.name.clone()),
        ("{{crate}}", new.name.replace('-', "_")),
        ("{{type}}", type_name(&new.name)),
        ("{{key}}", camel_case(&new.name)),
        ("{{module}}", new.name.replace('-', "_")),
        (
            "{{sdk}}",
            match new.lang {
                Lang::Rust => toml_path(&sdk),
                Lang::Python => sdk.display().to_string(),
            },
        ),
        ("{{wit}}", wit.display().to_string()),
        ("{{contract}}", contract()),
        ("{{haptic}}", new.haptic.display().to_string()),
    ];
    let fill = |template: &str| {
        substitutions
            .iter()
            .fold(template.to_owned(), |text, (token, value)| {
                text.replace(token, value)
            })
    };
    let template = match new.lang {
        Lang::Rust => RUST_TEMPLATE,
        Lang::Python => PYTHON_TEMPLATE,
    };
    let mut written = Vec::new();
    for (relative, content) in template {
        let relative = PathBuf::from(fill(relative));
        write(&relative, fill(content).as_bytes())?;
        written.push(relative);
    }
    // The checkout's lock, when there is one (a vendored SDK may come
    // without): the SDK's dependencies at their tested versions.
    let lock = sdk.join("../../Cargo.lock");
    if new.lang == Lang::Rust
        && let Ok(content) = std::fs::read(&lock)
    {
        write(Path::new("Cargo.lock"), &content)?;
        written.push(PathBuf::from("Cargo.lock"));
    }
    Ok(written)
}

/// The Python SDK directory and the contract's WIT directory beside it (in
/// the same checkout), both absolute, once they are known to be there.
fn check_python_sdk(sdk: &Path) -> Result<(PathBuf, PathBuf), ScaffoldError> {
    let no_sdk = |why: String| ScaffoldError::NoPythonSdk {
        path: sdk.to_owned(),
        why,
    };
    if !sdk.join("haptic_sdk/__init__.py").is_file() {
        return Err(no_sdk("it has no haptic_sdk/__init__.py".into()));
    }
    let sdk = std::fs::canonicalize(sdk).map_err(|e| no_sdk(e.to_string()))?;
    let wit = sdk.join(format!("../../wit/haptic-template@{}", contract()));
    let wit = std::fs::canonicalize(&wit).map_err(|e| {
        no_sdk(format!(
            "the contract it speaks, {}, is not beside it: {e}",
            wit.display()
        ))
    })?;
    Ok((sdk, wit))
}

/// The SDK directory, absolute, once it is known to hold `haptic-sdk`.
fn check_sdk(sdk: &Path) -> Result<PathBuf, ScaffoldError> {
    let no_sdk = |why: String| ScaffoldError::NoSdk {
        path: sdk.to_owned(),
        why,
    };
    let manifest = std::fs::read_to_string(sdk.join("Cargo.toml"))
        .map_err(|e| no_sdk(format!("cannot read its Cargo.toml: {e}")))?;
    if !manifest.contains("name = \"haptic-sdk\"") {
        return Err(no_sdk(
            "its Cargo.toml is not the haptic-sdk package".into(),
        ));
    }
    std::fs::canonicalize(sdk).map_err(|e| no_sdk(e.to_string()))
}

/// `ip-allow-list` -> `IpAllowList`.
fn type_name(name: &str) -> String {
    let key = camel_case(name);
    let mut chars = key.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// A path inside a TOML basic string.
fn toml_path(path: &Path) -> String {
    path.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_in(dir: &Path, name: &str) -> NewLibrary {
        NewLibrary {
            dir: dir.join(name),
            name: name.to_owned(),
            lang: Lang::Rust,
            sdk: default_sdk(Lang::Rust),
            haptic: PathBuf::from("/usr/local/bin/haptic"),
        }
    }

    #[test]
    fn writes_a_standalone_project_with_every_placeholder_filled() {
        let temp = tempfile::tempdir().unwrap();
        let written = create(&new_in(temp.path(), "ip-allow-list")).unwrap();
        assert!(written.contains(&PathBuf::from("Cargo.lock")));
        let dir = temp.path().join("ip-allow-list");
        for file in &written {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            for token in [
                "{{name}}",
                "{{crate}}",
                "{{type}}",
                "{{key}}",
                "{{sdk}}",
                "{{haptic}}",
            ] {
                assert!(!text.contains(token), "{} keeps {token}", file.display());
            }
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("name = \"ip-allow-list\""));
        assert!(manifest.contains("\n[workspace]\n"), "its own workspace");
        assert!(!manifest.contains(".workspace = true"), "inherits nothing");
        let sdk = std::fs::canonicalize(default_sdk(Lang::Rust)).unwrap();
        assert!(manifest.contains(&format!("path = \"{}\"", sdk.display())));
        let source = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
        assert!(source.contains("pub struct IpAllowList"));
        assert!(source.contains("templateLibraries.ipAllowList.header"));
        let makefile = std::fs::read_to_string(dir.join("Makefile")).unwrap();
        assert!(makefile.contains("HAPTIC ?= /usr/local/bin/haptic"));
        assert!(makefile.contains("release/ip_allow_list.wasm"));
        assert!(
            makefile.contains("\n\t$(CARGO) build"),
            "recipes start with a tab"
        );
    }

    #[test]
    fn writes_a_python_project_naming_the_sdk_and_contract_of_this_checkout() {
        let temp = tempfile::tempdir().unwrap();
        let mut new = new_in(temp.path(), "ip-allow-list");
        new.lang = Lang::Python;
        new.sdk = default_sdk(Lang::Python);
        let written = create(&new).unwrap();
        assert!(written.contains(&PathBuf::from("src/ip_allow_list.py")));
        assert!(written.contains(&PathBuf::from("tests/test_ip_allow_list.py")));
        assert!(!written.contains(&PathBuf::from("Cargo.lock")));
        let dir = temp.path().join("ip-allow-list");
        for file in &written {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            for token in [
                "{{name}}",
                "{{module}}",
                "{{type}}",
                "{{key}}",
                "{{sdk}}",
                "{{wit}}",
                "{{contract}}",
                "{{haptic}}",
            ] {
                assert!(!text.contains(token), "{} keeps {token}", file.display());
            }
        }
        let makefile = std::fs::read_to_string(dir.join("Makefile")).unwrap();
        let sdk = std::fs::canonicalize(default_sdk(Lang::Python)).unwrap();
        assert!(makefile.contains(&format!("HAPTIC_SDK ?= {}\n", sdk.display())));
        assert!(makefile.contains(&format!("/wit/haptic-template@{}\n", contract())));
        assert!(makefile.contains("componentize ip_allow_list -p src"));
        let source = std::fs::read_to_string(dir.join("src/ip_allow_list.py")).unwrap();
        assert!(source.contains("class IpAllowList(haptic.Library):"));
        assert!(source.contains("Library = haptic.export(IpAllowList)"));

        let mut elsewhere = new_in(temp.path(), "fresh");
        elsewhere.lang = Lang::Python;
        let error = create(&elsewhere).unwrap_err();
        assert!(
            matches!(error, ScaffoldError::NoPythonSdk { .. }),
            "the Rust SDK is not a Python one: {error}"
        );
    }

    #[test]
    fn refuses_bad_names_a_used_directory_and_a_missing_sdk() {
        let temp = tempfile::tempdir().unwrap();
        for name in ["IpAllow", "ip_allow", "-ip", "ip--allow", "9ip", ""] {
            let error = create(&new_in(temp.path(), name)).unwrap_err();
            assert!(
                matches!(error, ScaffoldError::BadName(_)),
                "{name}: {error}"
            );
        }
        std::fs::create_dir(temp.path().join("taken")).unwrap();
        std::fs::write(temp.path().join("taken/file"), "").unwrap();
        let error = create(&new_in(temp.path(), "taken")).unwrap_err();
        assert!(error.to_string().contains("not empty"), "{error}");
        let mut elsewhere = new_in(temp.path(), "fresh");
        elsewhere.sdk = temp.path().to_owned();
        let error = create(&elsewhere).unwrap_err();
        assert!(error.to_string().contains("pass --sdk"), "{error}");
        assert!(!temp.path().join("fresh").exists(), "nothing written");
    }
}

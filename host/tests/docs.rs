//! What the READMEs say about the code, kept true (issue 11: "a few dozen
//! lines" and "about 100 lines" for an example of 168).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// (library lines before the unit tests, code lines among them, unit test lines).
fn count(source: &str) -> (usize, usize, usize) {
    let lines: Vec<&str> = source.lines().collect();
    let tests = lines
        .iter()
        .position(|line| *line == "#[cfg(test)]")
        .unwrap_or(lines.len());
    let library = &lines[..tests];
    let code = library
        .iter()
        .map(|line| line.trim())
        .filter(|line| !line.is_empty() && !line.starts_with("//"))
        .count();
    (library.len(), code, lines.len() - tests)
}

fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn sizes_in_the_readmes_are_the_sizes_of_the_code() {
    for (source, readme, claim) in [
        (
            "examples/maintenance-mode/src/lib.rs",
            "examples/maintenance-mode/README.md",
            "{library} lines of Rust ({code} of them code, the rest comments) plus {tests} lines of unit tests",
        ),
        (
            "examples/source-allow-list/src/lib.rs",
            "examples/source-allow-list/README.md",
            "{library} lines of Rust ({code} of them code) plus {tests} lines of unit tests",
        ),
        (
            "host/templates/new-library/lib.rs.in",
            "README.md",
            "{code} lines of code plus tests",
        ),
    ] {
        let (library, code, tests) = count(&read(&repo().join(source)));
        let expected = claim
            .replace("{library}", &library.to_string())
            .replace("{code}", &code.to_string())
            .replace("{tests}", &tests.to_string());
        // Compared with line breaks as spaces: rewrapping is no change.
        let text = words(&read(&repo().join(readme)));
        assert!(
            text.contains(&expected),
            "{readme} should say \"{expected}\" about {source}"
        );
    }
}

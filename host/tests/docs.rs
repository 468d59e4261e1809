//! What the READMEs say about the code, kept true (issue 11: "a few dozen
//! lines" and "about 100 lines" for an example of 168), and every link
//! between them and docs/ leading somewhere (issue 41 moved each
//! subsystem's reference out of the README into a page of its own).

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
            "docs/new-library.md",
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

/// The Markdown files whose relative links are checked: the README, every
/// page under docs/ and the READMEs that link into them.
fn linked_pages() -> Vec<PathBuf> {
    let mut pages = vec![
        repo().join("README.md"),
        repo().join("charts/haptic/README.md"),
        repo().join("examples/maintenance-mode/README.md"),
        repo().join("template-libraries/README.md"),
    ];
    let mut dirs = vec![repo().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(path);
            }
        }
    }
    pages
}

/// The targets of `[text](target)` links in `markdown`, outside code.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    targets
}

/// GitHub's anchor for a heading: lower case, spaces to dashes, and
/// everything but letters, digits, `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn every_relative_link_in_the_readme_and_docs_leads_somewhere() {
    let mut broken = Vec::new();
    for page in linked_pages() {
        let text = read(&page);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a page's directory").join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if let Some(fragment) = fragment
                && file.extension().is_some_and(|ext| ext == "md")
            {
                let found = read(&file)
                    .lines()
                    .filter_map(|line| line.strip_prefix('#'))
                    .map(|line| anchor(line.trim_start_matches('#')))
                    .any(|heading| heading == fragment);
                if !found {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_gives_the_two_commands_first_and_stays_short() {
    let readme = read(&repo().join("README.md"));
    let first: Vec<&str> = readme.lines().take(6).collect();
    assert_eq!(first[0], "# haptic");
    assert!(first[3].starts_with("make run "), "{first:?}");
    assert!(first[4].starts_with("make test "), "{first:?}");
    // Each subsystem's reference is a page under docs/, linked from the
    // README's tour; the README itself is for a newcomer's first minutes.
    assert!(
        readme.len() < 8 * 1024,
        "README.md is {} bytes",
        readme.len()
    );
}

//! The modules of every crate in the workspace form a tree (issue 17): no
//! import circle between the modules of one parent, the way kube-rs's
//! modules depend only downward. `make lint` runs this test.
//!
//! Each crate is parsed with `syn` from its root, following `mod` items to
//! their files. Every path a module names (`use` trees, paths in code and
//! types) is resolved against the module tree, through the imports of the
//! modules it passes (`super::LoadedLibrary` re-exported from
//! `super::component` counts as naming `component`). A reference from a
//! module into a sibling's subtree is an edge between the two siblings; a
//! child using its parent's own items (its error type, say) is not. Then
//! every parent's sibling graph must be acyclic. Paths inside macro
//! invocations are not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module by its path from the crate root (`["library", "instance"]`).
type ModulePath = Vec<String>;

/// One module of a crate: where it lives, what it declares and imports,
/// and the paths it names (already made absolute where they start with
/// `crate`, `super` or `self`).
#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    children: BTreeSet<String>,
    /// Names brought in by `use`, to the absolute path they stand for.
    imports: BTreeMap<String, ModulePath>,
    /// Absolute paths this module names.
    references: Vec<ModulePath>,
}

#[derive(Debug, Default)]
struct Crate {
    modules: BTreeMap<ModulePath, Module>,
}

/// An edge between two siblings, with one reference that makes it.
#[derive(Debug, Clone)]
struct Edge {
    from: String,
    to: String,
    because: String,
}

impl Crate {
    fn parse(root: &Path) -> Self {
        let mut krate = Crate::default();
        krate.parse_file(root, Vec::new(), true);
        krate
    }

    /// Parses the file of module `path`; `owns_dir` is true for crate roots
    /// and `mod.rs` files, whose children live beside them.
    fn parse_file(&mut self, file: &Path, path: ModulePath, owns_dir: bool) {
        let source = std::fs::read_to_string(file)
            .unwrap_or_else(|error| panic!("reading {}: {error}", file.display()));
        let syntax = syn::parse_file(&source)
            .unwrap_or_else(|error| panic!("parsing {}: {error}", file.display()));
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let children_dir = if owns_dir {
            dir.clone()
        } else {
            let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            dir.join(stem)
        };
        let mut collector = Collector {
            krate: self,
            file: file.to_path_buf(),
            source_dir: dir,
            children_dir,
            stack: vec![path],
            pending: Vec::new(),
        };
        collector.enter();
        collector.visit_file(&syntax);
        let pending = std::mem::take(&mut collector.pending);
        for (child_file, child_path, owns) in pending {
            self.parse_file(&child_file, child_path, owns);
        }
    }

    /// The module a path points into: descends through child modules and
    /// follows imports (`super::Name` where the parent re-exports `Name`
    /// from a child).
    fn resolve(&self, path: &[String]) -> ModulePath {
        let mut path = path.to_vec();
        let mut module: ModulePath = Vec::new();
        let mut index = 0;
        let mut hops = 0;
        while index < path.len() && hops < 32 {
            let Some(node) = self.modules.get(&module) else {
                break;
            };
            let segment = &path[index];
            if node.children.contains(segment) {
                module.push(segment.clone());
                index += 1;
            } else if let Some(target) = node.imports.get(segment) {
                hops += 1;
                let mut rest = target.clone();
                rest.extend_from_slice(&path[index + 1..]);
                path = rest;
                module.clear();
                index = 0;
            } else {
                break;
            }
        }
        module
    }

    /// Every edge between siblings, grouped by their parent.
    fn sibling_edges(&self) -> BTreeMap<ModulePath, Vec<Edge>> {
        let mut edges: BTreeMap<ModulePath, Vec<Edge>> = BTreeMap::new();
        for (from, module) in &self.modules {
            for reference in &module.references {
                let to = self.resolve(reference);
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                // A module using its own subtree or an ancestor's items.
                if common == from.len() || common == to.len() {
                    continue;
                }
                edges
                    .entry(from[..common].to_vec())
                    .or_default()
                    .push(Edge {
                        from: from[common].clone(),
                        to: to[common].clone(),
                        because: format!(
                            "{} names `{}`",
                            module.file.display(),
                            reference.join("::")
                        ),
                    });
            }
        }
        edges
    }

    /// The import circles: each as the siblings in order, with a reference
    /// for every step.
    fn circles(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (parent, edges) in self.sibling_edges() {
            let mut graph: BTreeMap<&str, BTreeMap<&str, &Edge>> = BTreeMap::new();
            for edge in &edges {
                graph
                    .entry(&edge.from)
                    .or_default()
                    .entry(&edge.to)
                    .or_insert(edge);
            }
            for circle in cycles(&graph) {
                let parent = if parent.is_empty() {
                    "the crate root".to_owned()
                } else {
                    format!("`{}`", parent.join("::"))
                };
                let steps: Vec<String> = circle
                    .iter()
                    .map(|edge| format!("  {} -> {}: {}", edge.from, edge.to, edge.because))
                    .collect();
                found.push(format!(
                    "import circle among the modules of {parent}:\n{}",
                    steps.join("\n")
                ));
            }
        }
        found
    }
}

/// One simple cycle per strongly connected component with more than one
/// module (Tarjan's algorithm would find the same sets; a DFS from each
/// module is plenty for a few dozen nodes).
fn cycles<'a>(graph: &BTreeMap<&'a str, BTreeMap<&'a str, &'a Edge>>) -> Vec<Vec<&'a Edge>> {
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    let mut found = Vec::new();
    for &start in graph.keys() {
        if reported.contains(start) {
            continue;
        }
        if let Some(path) = path_back(graph, start) {
            reported.extend(path.iter().map(|edge| edge.from.as_str()));
            found.push(path);
        }
    }
    found
}

/// A path of edges from `start` back to itself, breadth first (the
/// shortest circle through it).
fn path_back<'a>(
    graph: &BTreeMap<&'a str, BTreeMap<&'a str, &'a Edge>>,
    start: &'a str,
) -> Option<Vec<&'a Edge>> {
    let mut came_by: BTreeMap<&str, &Edge> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for (&next, &edge) in graph.get(node).into_iter().flatten() {
            if next == start {
                let mut path = vec![edge];
                let mut at = node;
                while at != start {
                    let step = came_by[at];
                    path.push(step);
                    at = step.from.as_str();
                }
                path.reverse();
                return Some(path);
            }
            if !came_by.contains_key(next) {
                came_by.insert(next, edge);
                queue.push_back(next);
            }
        }
    }
    None
}

/// Walks one file, keeping the stack of inline modules it is in.
struct Collector<'k> {
    krate: &'k mut Crate,
    file: PathBuf,
    source_dir: PathBuf,
    children_dir: PathBuf,
    stack: Vec<ModulePath>,
    /// Out-of-line modules to parse after this file: file, path, owns_dir.
    pending: Vec<(PathBuf, ModulePath, bool)>,
}

impl Collector<'_> {
    fn current(&self) -> &ModulePath {
        self.stack
            .last()
            .expect("the stack holds the file's module")
    }

    fn enter(&mut self) {
        let path = self.current().clone();
        self.krate.modules.entry(path).or_default().file = self.file.clone();
    }

    fn module(&mut self) -> &mut Module {
        let path = self.current().clone();
        self.krate.modules.entry(path).or_default()
    }

    /// Makes a path absolute when it starts with `crate`, `super`, `self`
    /// or a child module of the current one; `None` for everything else
    /// (external crates, local items, single names).
    fn absolute(&self, segments: &[String]) -> Option<ModulePath> {
        let current = self.current();
        let first = segments.first()?;
        let mut base: ModulePath = match first.as_str() {
            "crate" => Vec::new(),
            "self" => current.clone(),
            "super" => current.clone(),
            name if self
                .krate
                .modules
                .get(current)
                .is_some_and(|m| m.children.contains(name)) =>
            {
                let mut path = current.clone();
                path.push(name.to_owned());
                return Some(path.into_iter().chain(segments[1..].to_vec()).collect());
            }
            _ => return None,
        };
        let mut rest = &segments[1..];
        if first == "super" {
            base.pop();
        }
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let name = name.ident.to_string();
                self.import(prefix, &name, &name);
            }
            syn::UseTree::Rename(rename) => {
                self.import(
                    prefix,
                    &rename.ident.to_string(),
                    &rename.rename.to_string(),
                );
            }
            syn::UseTree::Glob(_) => {
                if let Some(target) = self.absolute(prefix) {
                    self.module().references.push(target);
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// `use prefix::name as alias;` (`self` names the prefix itself).
    fn import(&mut self, prefix: &[String], name: &str, alias: &str) {
        let mut segments = prefix.to_vec();
        if name != "self" {
            segments.push(name.to_owned());
        }
        let Some(target) = self.absolute(&segments) else {
            return;
        };
        let alias = if alias == "self" {
            segments.last().cloned().unwrap_or_default()
        } else {
            alias.to_owned()
        };
        let module = self.module();
        module.imports.insert(alias, target.clone());
        module.references.push(target);
    }

    fn child_file(&self, item: &syn::ItemMod) -> (PathBuf, bool) {
        let name = item.ident.to_string();
        for attr in &item.attrs {
            if attr.path().is_ident("path")
                && let syn::Meta::NameValue(meta) = &attr.meta
                && let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(path),
                    ..
                }) = &meta.value
            {
                // rustc gives a `#[path]` file its directory, as if it were
                // a `mod.rs`: its children live beside it.
                return (self.source_dir.join(path.value()), true);
            }
        }
        let flat = self.children_dir.join(format!("{name}.rs"));
        if flat.exists() {
            (flat, false)
        } else {
            (self.children_dir.join(&name).join("mod.rs"), true)
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let name = item.ident.to_string();
        self.module().children.insert(name.clone());
        let mut path = self.current().clone();
        path.push(name);
        match &item.content {
            Some(_) => {
                self.stack.push(path);
                self.enter();
                syn::visit::visit_item_mod(self, item);
                self.stack.pop();
            }
            None => {
                let (file, owns_dir) = self.child_file(item);
                self.pending.push((file, path, owns_dir));
            }
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.segments.len() > 1 {
            let segments: Vec<String> = path
                .segments
                .iter()
                .map(|segment| segment.ident.to_string())
                .collect();
            if let Some(target) = self.absolute(&segments) {
                self.module().references.push(target);
            }
        }
        syn::visit::visit_path(self, path);
    }
}

/// The checkout to check: this one, or `HAPTIC_MODULE_TREE_REPO` (to
/// show the check on another tree, e.g. an older commit's).
fn repo() -> PathBuf {
    std::env::var_os("HAPTIC_MODULE_TREE_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."))
}

/// The workspace's members, read from the root `Cargo.toml`'s
/// `members = [...]` list (a plain text scan: the list is one string a
/// line, and the test needs no TOML parser for that).
fn workspace_members(repo: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml"))
        .unwrap_or_else(|error| panic!("reading the workspace's Cargo.toml: {error}"));
    let list = manifest
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
        .expect("the workspace's Cargo.toml lists its members");
    list.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .map(|line| line.trim_end_matches(',').trim_matches('"'))
        .filter(|member| !member.is_empty())
        .map(|member| repo.join(member))
        .collect()
}

/// Every crate root of one package: its library, binaries, integration
/// tests and benches (each target is a crate of its own, with its own
/// module tree; a test's `mod support;` is parsed as part of it).
fn package_roots(package: &Path) -> Vec<PathBuf> {
    let mut roots = vec![package.join("src/lib.rs"), package.join("src/main.rs")];
    for dir in ["src/bin", "tests", "benches", "examples"] {
        let Ok(entries) = std::fs::read_dir(package.join(dir)) else {
            continue;
        };
        let mut entries: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
        entries.sort();
        for entry in entries {
            if entry.extension().is_some_and(|ext| ext == "rs") {
                roots.push(entry);
            } else if entry.join("main.rs").exists() {
                roots.push(entry.join("main.rs"));
            }
        }
    }
    roots.retain(|root| root.exists());
    roots
}

/// The crate roots of every workspace member: the host, the test bed, the
/// selectors, the guest SDK, every template library and every example
/// library.
fn crate_roots() -> Vec<PathBuf> {
    workspace_members(&repo())
        .iter()
        .flat_map(|package| package_roots(package))
        .collect()
}

#[test]
fn the_modules_of_every_crate_form_a_tree() {
    let circles: Vec<String> = crate_roots()
        .iter()
        .flat_map(|root| Crate::parse(root).circles())
        .collect();
    assert!(
        circles.is_empty(),
        "{}\n\nmove what both sides need into a module below them (see docs/layout.md, \
         inside host/src/)",
        circles.join("\n\n")
    );
}

/// The check covers every member: a member the scan misses (a new list
/// layout in `Cargo.toml`, a crate without `src/lib.rs` or `src/main.rs`)
/// would pass unchecked.
#[test]
fn every_workspace_member_is_checked() {
    let repo = repo();
    let members = workspace_members(&repo);
    assert!(
        members
            .iter()
            .any(|m| m.ends_with("template-libraries/ingress-nginx")),
        "{members:?}"
    );
    for member in &members {
        assert!(
            member.join("src/lib.rs").exists() || member.join("src/main.rs").exists(),
            "{} has no crate root the check parses",
            member.display()
        );
    }
}

#[test]
fn the_check_sees_a_circle_through_a_re_export() {
    // a -> b directly, b -> a through the parent's re-export of `a::Item`.
    let dir = tempfile::tempdir().expect("temporary directory");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).expect("writing a fixture file")
    };
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::Item;\n");
    write("a.rs", "use super::b::Other;\npub struct Item;\n");
    write("b.rs", "pub struct Other(super::Item);\n");
    write("c.rs", "use crate::a::Item;\nuse super::b;\n");
    let circles = Crate::parse(&dir.path().join("lib.rs")).circles();
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(circles[0].contains("a -> b"), "{}", circles[0]);
    assert!(circles[0].contains("b -> a"), "{}", circles[0]);
    assert!(!circles[0].contains("c ->"), "{}", circles[0]);
}

#[test]
fn a_child_using_its_parents_items_is_not_a_circle() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let write = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).expect("writing a fixture file")
    };
    write("lib.rs", "mod a;\npub use a::Item;\npub enum Error {}\n");
    write(
        "a.rs",
        "pub struct Item(super::Error);\n#[cfg(test)]\nmod tests { use super::*; }\n",
    );
    assert!(
        Crate::parse(&dir.path().join("lib.rs"))
            .circles()
            .is_empty()
    );
}

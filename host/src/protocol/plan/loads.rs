//! Which files a worker will have loaded from a bundle, told from its
//! configuration: what `show map` and `show ssl cert` would list once
//! HAProxy runs it. For predicting a plan without a running worker
//! (`haptic diff`); the agent itself asks HAProxy.

use super::super::runtime_commands::LoadedFiles;
use super::super::wire::Bundle;
use super::normal;
use crate::haproxy_syntax::maps::MapReader;

/// The maps the configuration's `map*(<file>)` converters read and the
/// certificates its `crt <file>` arguments and crt-lists name, limited to
/// files of the bundle, by the names the configuration gives them.
pub fn expected_loads(bundle: &Bundle) -> LoadedFiles {
    let in_bundle = |name: &str| bundle.files.iter().any(|f| normal(&f.path) == normal(name));
    let mut loaded = LoadedFiles::default();
    for line in bundle.config.lines() {
        for name in map_arguments(line) {
            if in_bundle(name) && !loaded.maps.iter().any(|m| m == name) {
                loaded.maps.push(name.to_owned());
            }
        }
        let mut words = line.split_whitespace();
        while let Some(word) = words.next() {
            let Some(name) = words.clone().next() else {
                break;
            };
            match word {
                "crt" if in_bundle(name) => push_new(&mut loaded.certs, name),
                "crt-list" => {
                    if let Some(list) = bundle
                        .files
                        .iter()
                        .find(|f| normal(&f.path) == normal(name))
                    {
                        for entry in list
                            .content
                            .lines()
                            .filter_map(|l| l.split_whitespace().next())
                        {
                            if !entry.starts_with('#') && in_bundle(entry) {
                                push_new(&mut loaded.certs, entry);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
    loaded
}

fn push_new(names: &mut Vec<String>, name: &str) {
    if !names.iter().any(|n| n == name) {
        names.push(name.to_owned());
    }
}

/// The file argument of every `map`, `map_str`, `map_beg`, ... converter.
fn map_arguments(line: &str) -> impl Iterator<Item = &str> {
    map_readers(line).map(|(_, file)| file)
}

/// Every `map*` converter of `line` with its file argument:
/// `("map_beg", "maps/ingress-prefix.map")`.
fn map_readers(line: &str) -> impl Iterator<Item = (&str, &str)> {
    line.match_indices("map").filter_map(move |(at, _)| {
        let preceded = line[..at].chars().next_back();
        if preceded.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let rest = &line[at + 3..];
        let rest = rest.strip_prefix('_').map_or(rest, |suffix| {
            suffix.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_')
        });
        let converter = &line[at..line.len() - rest.len()];
        let argument = rest.strip_prefix('(')?;
        let end = argument.find([',', ')'])?;
        Some((converter, argument[..end].trim())).filter(|(_, name)| !name.is_empty())
    })
}

/// The maps `running`'s configuration reads whose new content in `next` the
/// host has judged loadable: every converter reading the map is one whose
/// entries [`MapReader`] knows, and every entry passes. A change to such a
/// map needs no `haproxy -c`; any other map change still does.
pub fn maps_judged_loadable(running: &Bundle, next: &Bundle) -> Vec<String> {
    let mut readers: Vec<(&str, Vec<&str>)> = Vec::new();
    for (converter, file) in running.config.lines().flat_map(map_readers) {
        match readers.iter_mut().find(|(name, _)| *name == file) {
            Some((_, converters)) => converters.push(converter),
            None => readers.push((file, vec![converter])),
        }
    }
    readers
        .into_iter()
        .filter(|(file, converters)| {
            let Some(content) = next
                .files
                .iter()
                .find(|f| normal(&f.path) == normal(file))
                .map(|f| f.content.as_str())
            else {
                return false;
            };
            converters.iter().all(|converter| {
                MapReader::of_converter(converter).is_some_and(|r| r.check(content).is_ok())
            })
        })
        .map(|(file, _)| file.to_owned())
        .collect()
}

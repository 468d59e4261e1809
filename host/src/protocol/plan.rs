//! Choosing the cheapest correct way from the bundle a worker runs to a new
//! one: runtime commands when only what HAProxy's runtime API can set has
//! changed, a reload otherwise.
//!
//! Runtime-settable, per HAProxy 2.6: a `server` line's address and port,
//! its `weight`, `disabled` (maintenance) or not, the entries of a map file
//! the worker loaded, and the content (chain and key) of a certificate file
//! the worker loaded (`show ssl cert`). Everything else (a new server, a new
//! backend, an option, a new certificate file, a changed crt-list) needs a
//! reload. The comparison is line by line, so it is exact: any difference
//! it does not understand is a reload.
//!
//! Why no `haproxy -c` for a runtime plan: every other line is identical to
//! a bundle HAProxy already loaded, addresses are checked here to be literal
//! `ip:port` and weights to be in HAProxy's range, and the worker itself
//! refuses a value it would not load (which turns the apply into a
//! validated reload). Validation costs ~50-150 ms at scale; an endpoint
//! readiness flip must not pay it.

mod loads;

use std::net::SocketAddr;

use super::runtime_commands::{CertPayload, CertPayloadError, LoadedFiles, RuntimeCommand};
use super::wire::{Bundle, BundleFile};

pub use loads::{expected_loads, maps_judged_loadable};

/// What it takes to go from one bundle to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The same content.
    Unchanged,
    /// These commands on the current worker, in order.
    Runtime(Vec<RuntimeCommand>),
    /// A reload, and the first difference that needs it (for the log).
    Reload(ReloadReason),
}

/// Why a bundle cannot be applied to the running worker: the first
/// difference the runtime API cannot carry, named for the agent's log
/// (never quoting a file's content).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadReason {
    #[error("the running bundle {0} is not on disk")]
    RunningBundleMissing(String),
    #[error("the configuration has {new} lines instead of {old}")]
    LineCount { old: usize, new: usize },
    /// Only the line's first word (its keyword) is kept: the agent cannot
    /// tell a secret line (a userlist's password hash) from another.
    #[error("line {number} changed (a `{keyword}` line)")]
    LineChanged { number: usize, keyword: String },
    #[error("the set of auxiliary files changed")]
    FileSetChanged,
    #[error("certificate file {path} changed and cannot be replaced at runtime: {why}")]
    CertNotReplaceable {
        path: String,
        #[source]
        why: CertPayloadError,
    },
    #[error("file {0} changed and is neither a map nor a certificate HAProxy loaded")]
    NotLoaded(String),
    #[error("file {0} holds key material and HAProxy loaded it as a map")]
    SecretMap(String),
}

/// The plan from `running` to `next`; `loaded` are the map and certificate
/// files the running worker loaded, by the names the configuration gave
/// (none: every file change is a reload).
pub fn plan(running: &Bundle, next: &Bundle, loaded: &LoadedFiles) -> Plan {
    if running.config == next.config && running.files == next.files {
        return Plan::Unchanged;
    }
    let mut commands = Vec::new();
    if let Err(reason) = diff_config(&running.config, &next.config, &mut commands) {
        return Plan::Reload(reason);
    }
    if let Err(reason) = diff_files(running, next, loaded, &mut commands) {
        return Plan::Reload(reason);
    }
    if commands.is_empty() {
        // Only byte-level differences the runtime cannot see (e.g. spacing
        // in a map file): the files on disk change, the worker need not.
        return Plan::Runtime(Vec::new());
    }
    Plan::Runtime(commands)
}

fn diff_config(
    old: &str,
    new: &str,
    commands: &mut Vec<RuntimeCommand>,
) -> Result<(), ReloadReason> {
    // Counted, then walked, without collecting the lines: two vectors of
    // 17,500 line slices each (TestScale) were over half a megabyte at the
    // agent's peak.
    let (old_count, new_count) = (old.lines().count(), new.lines().count());
    if old_count != new_count {
        return Err(ReloadReason::LineCount {
            old: old_count,
            new: new_count,
        });
    }
    let mut section = "";
    for (number, (old_line, new_line)) in old.lines().zip(new.lines()).enumerate() {
        if !old_line.starts_with(char::is_whitespace) && !old_line.is_empty() {
            section = old_line.trim();
        }
        if old_line == new_line {
            continue;
        }
        let changed = || ReloadReason::LineChanged {
            number: number + 1,
            keyword: new_line
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned(),
        };
        let backend = section
            .strip_prefix("backend ")
            .or_else(|| section.strip_prefix("listen "))
            .map(str::trim)
            .ok_or_else(changed)?;
        let (old_server, new_server) =
            match (ServerLine::parse(old_line), ServerLine::parse(new_line)) {
                (Some(a), Some(b)) if a.name == b.name && a.other == b.other => (a, b),
                _ => return Err(changed()),
            };
        let state = |enabled| RuntimeCommand::ServerState {
            backend: backend.to_owned(),
            server: new_server.name.to_owned(),
            enabled,
        };
        // Order matters to traffic: take a server out before moving it, and
        // put it back only once its address and weight are right.
        if !new_server.enabled && old_server.enabled {
            commands.push(state(false));
        }
        if old_server.address != new_server.address {
            commands.push(RuntimeCommand::ServerAddress {
                backend: backend.to_owned(),
                server: new_server.name.to_owned(),
                address: new_server.address.ip().to_string(),
                port: new_server.address.port(),
            });
        }
        if old_server.weight != new_server.weight {
            commands.push(RuntimeCommand::ServerWeight {
                backend: backend.to_owned(),
                server: new_server.name.to_owned(),
                weight: new_server.weight,
            });
        }
        if new_server.enabled && !old_server.enabled {
            commands.push(state(true));
        }
    }
    Ok(())
}

/// A path as HAProxy and the bundle may both spell it: `./certs/a.pem`,
/// `certs//a.pem` and `certs/a.pem` are one file. HAProxy itself does not
/// normalize: a runtime command must use the name it reported.
fn normal(path: &str) -> String {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect();
    let root = if path.starts_with('/') { "/" } else { "" };
    format!("{root}{}", parts.join("/"))
}

fn diff_files(
    running: &Bundle,
    next: &Bundle,
    loaded: &LoadedFiles,
    commands: &mut Vec<RuntimeCommand>,
) -> Result<(), ReloadReason> {
    let (old, new) = (by_path(running), by_path(next));
    if !old.iter().map(|(p, _)| p).eq(new.iter().map(|(p, _)| p)) {
        return Err(ReloadReason::FileSetChanged);
    }
    for ((path, old_file), (_, new_file)) in old.iter().zip(&new) {
        if old_file.content == new_file.content {
            continue;
        }
        // One file may be loaded under several spellings; each is its own
        // certificate store in HAProxy.
        let certs: Vec<&String> = loaded.certs.iter().filter(|c| normal(c) == *path).collect();
        if !certs.is_empty() {
            let pem = CertPayload::new(&new_file.content).map_err(|why| {
                ReloadReason::CertNotReplaceable {
                    path: path.to_string(),
                    why,
                }
            })?;
            commands.extend(certs.into_iter().map(|cert| RuntimeCommand::ReplaceCert {
                cert: cert.clone(),
                pem: pem.clone(),
            }));
            continue;
        }
        let Some(map) = loaded.maps.iter().find(|m| normal(m) == *path) else {
            return Err(ReloadReason::NotLoaded(path.to_string()));
        };
        if old_file.is_secret() || new_file.is_secret() {
            // Never a map payload: commands are logged when refused.
            return Err(ReloadReason::SecretMap(path.to_string()));
        }
        if map_entries(&old_file.content).eq(map_entries(&new_file.content)) {
            continue;
        }
        commands.push(RuntimeCommand::ReplaceMap {
            map: map.clone(),
            content: new_file.content.clone(),
        });
    }
    Ok(())
}

/// A bundle's files by normalized path, in path order.
fn by_path(bundle: &Bundle) -> Vec<(String, &BundleFile)> {
    let mut files: Vec<(String, &BundleFile)> =
        bundle.files.iter().map(|f| (normal(&f.path), f)).collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

fn map_entries(content: &str) -> impl Iterator<Item = &str> {
    content
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// A `server` line split into what the runtime API can set and the rest.
#[derive(Debug, PartialEq, Eq)]
struct ServerLine<'a> {
    name: &'a str,
    address: SocketAddr,
    weight: u32,
    enabled: bool,
    /// Every other word, in order: must not change for a runtime apply.
    other: Vec<&'a str>,
}

impl<'a> ServerLine<'a> {
    fn parse(line: &'a str) -> Option<Self> {
        let mut words = line.split_whitespace();
        if words.next()? != "server" {
            return None;
        }
        let name = words.next()?;
        let address: SocketAddr = words.next()?.parse().ok()?;
        let mut server = ServerLine {
            name,
            address,
            weight: 1,
            enabled: true,
            other: Vec::new(),
        };
        while let Some(word) = words.next() {
            match word {
                "disabled" => server.enabled = false,
                "enabled" => server.enabled = true,
                "weight" => {
                    server.weight = words.next()?.parse().ok().filter(|w| *w <= 256)?;
                }
                _ => server.other.push(word),
            }
        }
        Some(server)
    }
}

#[cfg(test)]
mod tests;

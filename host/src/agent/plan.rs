//! Choosing the cheapest correct way from the bundle a worker runs to a new
//! one: runtime commands when only what HAProxy's runtime API can set has
//! changed, a reload otherwise.
//!
//! Runtime-settable, per HAProxy 2.6: a `server` line's address and port,
//! its `weight`, `disabled` (maintenance) or not, and the entries of a map
//! file the worker loaded. Everything else (a new server, a new backend, an
//! option, a changed certificate) needs a reload. The comparison is line by
//! line, so it is exact: any difference it does not understand is a reload.
//!
//! Why no `haproxy -c` for a runtime plan: every other line is identical to
//! a bundle HAProxy already loaded, addresses are checked here to be literal
//! `ip:port` and weights to be in HAProxy's range, and the worker itself
//! refuses a value it would not load (which turns the apply into a
//! validated reload). Validation costs ~50-150 ms at scale; an endpoint
//! readiness flip must not pay it.

use std::net::SocketAddr;

use super::haproxy::RuntimeCommand;
use super::wire::Bundle;

/// What it takes to go from one bundle to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The same content.
    Unchanged,
    /// These commands on the current worker, in order.
    Runtime(Vec<RuntimeCommand>),
    /// A reload, and the first difference that needs it (for the log).
    Reload(String),
}

/// The plan from `running` to `next`; `loaded_maps` are the map files the
/// running worker loaded (`show map`), by the name the configuration gave.
pub fn plan(running: &Bundle, next: &Bundle, loaded_maps: &[String]) -> Plan {
    if running.config == next.config && running.files == next.files {
        return Plan::Unchanged;
    }
    let mut commands = Vec::new();
    if let Err(reason) = diff_config(&running.config, &next.config, &mut commands) {
        return Plan::Reload(reason);
    }
    if let Err(reason) = diff_files(running, next, loaded_maps, &mut commands) {
        return Plan::Reload(reason);
    }
    if commands.is_empty() {
        // Only byte-level differences the runtime cannot see (e.g. spacing
        // in a map file): the files on disk change, the worker need not.
        return Plan::Runtime(Vec::new());
    }
    Plan::Runtime(commands)
}

fn diff_config(old: &str, new: &str, commands: &mut Vec<RuntimeCommand>) -> Result<(), String> {
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
        (old.lines().collect(), new.lines().collect());
    if old_lines.len() != new_lines.len() {
        return Err(format!(
            "the configuration has {} lines instead of {}",
            new_lines.len(),
            old_lines.len()
        ));
    }
    let mut section = "";
    for (number, (old_line, new_line)) in old_lines.iter().zip(&new_lines).enumerate() {
        if !old_line.starts_with(char::is_whitespace) && !old_line.is_empty() {
            section = old_line.trim();
        }
        if old_line == new_line {
            continue;
        }
        let changed = || format!("line {} changed: `{}`", number + 1, new_line.trim());
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

fn diff_files(
    running: &Bundle,
    next: &Bundle,
    loaded_maps: &[String],
    commands: &mut Vec<RuntimeCommand>,
) -> Result<(), String> {
    let normal = |path: &str| path.trim_start_matches("./").to_owned();
    let mut old: Vec<(String, &str)> = running
        .files
        .iter()
        .map(|f| (normal(&f.path), f.content.as_str()))
        .collect();
    let mut new: Vec<(String, &str)> = next
        .files
        .iter()
        .map(|f| (normal(&f.path), f.content.as_str()))
        .collect();
    old.sort();
    new.sort();
    let names = |files: &[(String, &str)]| files.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
    if names(&old) != names(&new) {
        return Err("the set of auxiliary files changed".to_owned());
    }
    for ((path, old_content), (_, new_content)) in old.iter().zip(&new) {
        if old_content == new_content {
            continue;
        }
        if !loaded_maps.iter().any(|m| normal(m) == *path) {
            return Err(format!(
                "file {path} changed and is not a map HAProxy loaded"
            ));
        }
        if map_entries(old_content).eq(map_entries(new_content)) {
            continue;
        }
        let map = loaded_maps
            .iter()
            .find(|m| normal(m) == *path)
            .cloned()
            .unwrap_or_else(|| path.clone());
        commands.push(RuntimeCommand::ReplaceMap {
            map,
            content: (*new_content).to_owned(),
        });
    }
    Ok(())
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

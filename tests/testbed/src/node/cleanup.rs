//! Removing everything a node left on the host, and finding what is left.
//!
//! [`sweep`] runs when a bed stops, from `Drop` too, and before a bed starts
//! (a bed killed without its destructor is swept by the next). It works from
//! what the host shows, never from the bed's own bookkeeping:
//! - processes: the pods' containers are whatever runs in a `/kubepods`
//!   cgroup (only this node's kubelet makes one on this machine: the image
//!   test drives containerd without CRI);
//!   containerd, its shims, the kubelet and kube-proxy are whatever names
//!   [`NODE_DIR`] on its command line;
//! - mounts under [`NODE_DIR`] and the CRI's network namespaces
//!   (`/run/netns/cni-*`);
//! - the bridge, iptables chains `KUBE-*` (kubelet's and kube-proxy's) and
//!   `HAPTIC-TESTBED`, `HAPTIC-TESTBED-LB` and `HAPTIC-TESTBED-CUT` with the jumps to them, in filter, nat and mangle, for
//!   IPv4 and IPv6;
//! - files outside [`NODE_DIR`]: `/var/log/containers` links into it,
//!   libcni's cache for the bed's network, then [`NODE_DIR`] itself.
//!
//! [`leftovers`] lists what of that still exists; a test checks it is empty
//! after a stop.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::host::{self, NODE_DIR, node_path};
use super::network::{
    self, BRIDGE, CNI_NETWORK, GUARD_CHAIN, LOAD_BALANCER_GUARD_CHAIN, PARTITION_CHAIN,
};

const NETNS_DIR: &str = "/run/netns";
const CONTAINER_LOGS: &str = "/var/log/containers";
const CNI_CACHE: &str = "/var/lib/cni/results";
const TABLES: [&str; 3] = ["filter", "nat", "mangle"];
const IPTABLES: [&str; 2] = ["iptables", "ip6tables"];

/// Removes everything listed in the module docs. Best effort: each step runs
/// even if one before failed; failures are logged (a later [`leftovers`]
/// names what stayed).
pub(crate) fn sweep() {
    keep_logs_if_asked();
    // Containers first: their shims would restart nothing, but a container
    // still running keeps its mounts and network namespace busy.
    kill_node_processes();
    for mount in mounts() {
        if let Err(error) = host::run("umount", &["--lazy", &mount]) {
            tracing::warn!(%error, "sweeping the node");
        }
    }
    for netns in cri_netns() {
        let _ = std::fs::remove_file(netns);
    }
    remove_kubepods_cgroups();
    if Path::new("/sys/class/net").join(BRIDGE).exists()
        && let Err(error) = host::run("ip", &["link", "del", BRIDGE])
    {
        tracing::warn!(%error, "sweeping the node");
    }
    for iptables in IPTABLES {
        for table in TABLES {
            remove_chains(iptables, table);
        }
    }
    if let Err(error) = network::restore_ip_forward() {
        tracing::warn!(%error, "sweeping the node");
    }
    for link in container_log_links() {
        let _ = std::fs::remove_file(link);
    }
    for file in cni_cache_files() {
        let _ = std::fs::remove_file(file);
    }
    if let Err(error) = std::fs::remove_dir_all(NODE_DIR)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(%error, dir = NODE_DIR, "sweeping the node");
    }
}

/// Kills the node's containers and processes, keeping its files (a failed
/// start's logs); the next [`sweep`] removes the rest.
pub(crate) fn kill_node_processes() {
    kill_until_gone("containers", container_pids);
    kill_until_gone("node processes", node_pids);
}

/// What of a node is still on the host, one line each; empty when clean.
pub fn leftovers() -> Vec<String> {
    let mut found = Vec::new();
    found.extend(
        container_pids()
            .iter()
            .map(|p| format!("container process {p}")),
    );
    found.extend(node_pids().iter().map(|p| format!("node process {p}")));
    found.extend(mounts().into_iter().map(|m| format!("mount {m}")));
    found.extend(
        cri_netns()
            .iter()
            .map(|n| format!("network namespace {}", n.display())),
    );
    found.extend(
        kubepods_cgroups()
            .iter()
            .map(|c| format!("cgroup {}", c.display())),
    );
    if Path::new("/sys/class/net").join(BRIDGE).exists() {
        found.push(format!("bridge {BRIDGE}"));
    }
    for iptables in IPTABLES {
        for table in TABLES {
            found.extend(
                bed_chains(iptables, table)
                    .into_iter()
                    .map(|c| format!("{iptables} -t {table} chain {c}")),
            );
        }
    }
    found.extend(
        container_log_links()
            .iter()
            .map(|l| format!("link {}", l.display())),
    );
    found.extend(
        cni_cache_files()
            .iter()
            .map(|f| format!("file {}", f.display())),
    );
    if Path::new(NODE_DIR).exists() {
        found.push(format!("directory {NODE_DIR}"));
    }
    found
}

/// With `HAPTIC_TESTBED_KEEP=1`, the node's component logs are copied to
/// `/tmp/haptic-testbed-node-logs-<pid>` before the sweep removes them.
fn keep_logs_if_asked() {
    if std::env::var_os("HAPTIC_TESTBED_KEEP").is_none_or(|v| v != "1") {
        return;
    }
    let logs = node_path("logs");
    let kept = PathBuf::from(format!(
        "/tmp/haptic-testbed-node-logs-{}",
        std::process::id()
    ));
    let _ = std::fs::create_dir_all(&kept);
    for log in list_dir(&logs) {
        if let Some(name) = log.file_name() {
            let _ = std::fs::copy(&log, kept.join(name));
        }
    }
    if !list_dir(&logs).is_empty() {
        tracing::info!(dir = %kept.display(), "kept the node's logs");
    }
}

fn kill_until_gone(what: &str, pids: fn() -> Vec<i32>) {
    let began = Instant::now();
    loop {
        let found = pids();
        if found.is_empty() {
            return;
        }
        if began.elapsed() > Duration::from_secs(10) {
            tracing::warn!(what, ?found, "still running after SIGKILL");
            return;
        }
        for pid in found {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn proc_pids() -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

fn container_pids() -> Vec<i32> {
    proc_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|text| {
                text.lines().any(|l| {
                    l.split(':')
                        .nth(2)
                        .is_some_and(|p| p.starts_with("/kubepods"))
                })
            })
        })
        .collect()
}

fn node_pids() -> Vec<i32> {
    let me = std::process::id() as i32;
    proc_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(NODE_DIR))
        })
        .collect()
}

/// Mount points under [`NODE_DIR`] or the CRI's netns dir, deepest first.
fn mounts() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<String> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| p.starts_with(NODE_DIR) || p.starts_with(&format!("{NETNS_DIR}/cni-")))
        .map(str::to_owned)
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    points
}

fn cri_netns() -> Vec<PathBuf> {
    list_dir(Path::new(NETNS_DIR))
        .into_iter()
        .filter(|p| file_name_starts_with(p, "cni-"))
        .collect()
}

/// `/sys/fs/cgroup/<hierarchy>/kubepods`, for every hierarchy that has one.
fn kubepods_cgroups() -> Vec<PathBuf> {
    list_dir(Path::new("/sys/fs/cgroup"))
        .into_iter()
        .map(|h| h.join("kubepods"))
        .filter(|p| p.is_dir())
        .collect()
}

fn remove_kubepods_cgroups() {
    fn remove(dir: &Path) {
        for child in list_dir(dir).into_iter().filter(|p| p.is_dir()) {
            remove(&child);
        }
        let _ = std::fs::remove_dir(dir);
    }
    for root in kubepods_cgroups() {
        remove(&root);
    }
}

fn is_bed_chain(name: &str) -> bool {
    name.starts_with("KUBE-")
        || [GUARD_CHAIN, LOAD_BALANCER_GUARD_CHAIN, PARTITION_CHAIN].contains(&name)
}

fn bed_chains(iptables: &str, table: &str) -> Vec<String> {
    let Ok(rules) = host::run(iptables, &["-w", "-t", table, "-S"]) else {
        return Vec::new();
    };
    rules
        .lines()
        .filter_map(|l| l.strip_prefix("-N "))
        .filter(|c| is_bed_chain(c))
        .map(str::to_owned)
        .collect()
}

/// Deletes the jumps into the bed's chains from the built-in ones (by rule
/// number: `-S` prints comments quoted, which a plain split would break),
/// then flushes and deletes the bed's chains.
fn remove_chains(iptables: &str, table: &str) {
    let chains = bed_chains(iptables, table);
    if chains.is_empty() {
        return;
    }
    let rules = host::run(iptables, &["-w", "-t", table, "-S"]).unwrap_or_default();
    let builtin: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.strip_prefix("-P ")?.split_whitespace().next())
        .collect();
    for chain in builtin {
        let listed = host::run(iptables, &["-w", "-t", table, "-S", chain]).unwrap_or_default();
        let jumps: Vec<usize> = listed
            .lines()
            .filter(|l| l.starts_with("-A "))
            .enumerate()
            .filter(|(_, rule)| {
                rule.split_whitespace()
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| (w[0] == "-j" || w[0] == "-g") && is_bed_chain(w[1]))
            })
            .map(|(index, _)| index + 1)
            .collect();
        // Highest number first, so the numbers of those still to go stay put.
        for number in jumps.into_iter().rev() {
            let number = number.to_string();
            let _ = host::run(iptables, &["-w", "-t", table, "-D", chain, &number]);
        }
    }
    for chain in &chains {
        let _ = host::run(iptables, &["-w", "-t", table, "-F", chain]);
    }
    for chain in &chains {
        if let Err(error) = host::run(iptables, &["-w", "-t", table, "-X", chain]) {
            tracing::warn!(%error, "sweeping the node");
        }
    }
}

/// `/var/log/containers/*.log`: the kubelet's links to each container's log,
/// for this node those that point into [`NODE_DIR`] (or nowhere any more).
fn container_log_links() -> Vec<PathBuf> {
    list_dir(Path::new(CONTAINER_LOGS))
        .into_iter()
        .filter(|l| std::fs::read_link(l).is_ok_and(|t| t.starts_with(node_path(""))))
        .collect()
}

fn cni_cache_files() -> Vec<PathBuf> {
    list_dir(Path::new(CNI_CACHE))
        .into_iter()
        .filter(|p| file_name_starts_with(p, &format!("{CNI_NETWORK}-")))
        .collect()
}

fn list_dir(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default()
}

fn file_name_starts_with(path: &Path, prefix: &str) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(prefix))
}

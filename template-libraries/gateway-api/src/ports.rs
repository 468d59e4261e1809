//! The ports HAProxy binds for Gateway listeners, and the Service that
//! maps each Gateway's listener ports to them.
//!
//! Every (Gateway, listener port) gets its own HAProxy port, so two
//! Gateways may both listen on 80 and still be told apart: each Service
//! sends its port 80 to its own HAProxy port. A port is a hash of
//! `<namespace>/<name>/<port>` in the range, so it stays put when other
//! Gateways come and go; on a collision the older Gateway keeps the slot
//! and the newer one takes the next free port.
//!
//! Ports are shared by every namespace. Allocated oldest Gateway first, an
//! older Gateway keeps its ports whatever newer ones ask; a namespace may
//! be capped (`ports.maxPerNamespace`) so that one namespace's Gateways
//! cannot take the whole range. A listener left without a port is never
//! reported programmed: it gets `Accepted: False` (`PortUnavailable`) and
//! its Gateway `Programmed: False` (`NoResources`), see [`mark_unassigned`].

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::conditions::Condition;
use crate::listeners::CheckedListener;

/// `ports`: the range HAProxy ports are taken from.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PortRange {
    pub from: u16,
    pub to: u16,
    /// HAProxy binds the listener's own port when no older Gateway took
    /// it (the range otherwise): for `haptic run`, where no Service maps
    /// ports and a client connects to HAProxy itself.
    pub same_as_listener: bool,
    /// The most HAProxy ports the Gateways of one namespace get (one per
    /// Gateway and listener port); 0: no cap. Older Gateways are served
    /// first.
    pub max_per_namespace: u32,
}

impl Default for PortRange {
    fn default() -> Self {
        Self {
            from: 20000,
            to: 29999,
            same_as_listener: false,
            max_per_namespace: 0,
        }
    }
}

/// A port range with no port (`from` 0, or `to` below `from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmptyRange {
    pub from: u16,
    pub to: u16,
}

impl std::fmt::Display for EmptyRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "templateLibraries.gatewayApi.ports is {}-{}; give 1 <= from <= to, e.g. from: 20000, to: 29999",
            self.from, self.to
        )
    }
}

impl std::error::Error for EmptyRange {}

impl PortRange {
    /// A usable range.
    pub fn check(&self) -> Result<(), EmptyRange> {
        if self.from == 0 || self.to < self.from {
            return Err(EmptyRange {
                from: self.from,
                to: self.to,
            });
        }
        Ok(())
    }

    fn size(&self) -> u32 {
        u32::from(self.to) - u32::from(self.from) + 1
    }
}

/// FNV-1a: a stable hash (std's is seeded per process).
fn fnv1a(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// HAProxy port per (`namespace/name`, listener port). `gateways` comes
/// oldest first. Pairs beyond the range's size get no port.
pub fn allocate(
    range: &PortRange,
    gateways: impl IntoIterator<Item = (String, BTreeSet<i32>)>,
) -> BTreeMap<(String, i32), u16> {
    let size = range.size();
    let mut taken = BTreeSet::new();
    let mut own_ports = BTreeSet::new();
    let mut out = BTreeMap::new();
    let mut per_namespace: BTreeMap<String, u32> = BTreeMap::new();
    for (gateway, ports) in gateways {
        let namespace = gateway.split_once('/').map_or("", |(ns, _)| ns).to_owned();
        for port in ports {
            let count = per_namespace.entry(namespace.clone()).or_default();
            if range.max_per_namespace > 0 && *count >= range.max_per_namespace {
                continue;
            }
            *count += 1;
            if range.same_as_listener
                && let Ok(own) = u16::try_from(port)
                && own > 0
                && own_ports.insert(own)
            {
                out.insert((gateway.clone(), port), own);
                continue;
            }
            let start = fnv1a(&format!("{gateway}/{port}")) % size;
            let free = (0..size)
                .map(|step| (start + step) % size)
                .find(|slot| !taken.contains(slot));
            if let Some(slot) = free {
                taken.insert(slot);
                if let Ok(offset) = u16::try_from(slot) {
                    out.insert((gateway.clone(), port), range.from + offset);
                }
            }
        }
    }
    out
}

/// Marks each served listener of Gateway `id` (`namespace/name`) that got
/// no HAProxy port as not accepted and not programmed, naming the cause;
/// returns whether any did (its Gateway is then not programmed either:
/// reporting it programmed would promise a frontend that does not exist).
pub fn mark_unassigned(
    id: &str,
    listeners: &mut [CheckedListener],
    allocation: &BTreeMap<(String, i32), u16>,
    range: &PortRange,
) -> bool {
    let mut any = false;
    for l in listeners.iter_mut().filter(|l| l.valid) {
        if allocation.contains_key(&(id.to_owned(), l.port)) {
            continue;
        }
        any = true;
        l.valid = false;
        l.accepted = false;
        let why = if range.max_per_namespace > 0 {
            format!(
                "no HAProxy port is left for port {}: the range templateLibraries.gatewayApi.ports \
                 ({}-{}) is taken, or this namespace has its {} ports (ports.maxPerNamespace); \
                 older Gateways keep theirs. Remove a listener or Gateway, or ask an admin to widen them",
                l.port, range.from, range.to, range.max_per_namespace
            )
        } else {
            format!(
                "no HAProxy port is left for port {}: the range templateLibraries.gatewayApi.ports \
                 ({}-{}) is taken by older Gateways. Remove a listener or Gateway, or ask an admin \
                 to widen it",
                l.port, range.from, range.to
            )
        };
        l.conditions
            .retain(|c| c.type_ != "Accepted" && c.type_ != "Programmed");
        l.conditions
            .insert(0, Condition::new("Accepted", false, "PortUnavailable", why));
        l.conditions.insert(
            1,
            Condition::new(
                "Programmed",
                false,
                "Invalid",
                "the listener has no HAProxy port (see Accepted)",
            ),
        );
    }
    any
}

/// The name of a Gateway's Service: `<gateway>-haptic`, cut to 63
/// characters with a hash suffix when the Gateway's name is long.
pub fn service_name(gateway: &str) -> String {
    let name = format!("{gateway}-haptic");
    if name.len() <= 63 {
        return name;
    }
    let cut: String = gateway.chars().take(46).collect();
    format!("{}-{:08x}", cut.trim_end_matches('-'), fnv1a(gateway)) + "-hp"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_stay_put_when_other_gateways_come_and_go() {
        let range = PortRange::default();
        let one = allocate(&range, [("ns/a".to_owned(), BTreeSet::from([80, 443]))]);
        let two = allocate(
            &range,
            [
                ("ns/a".to_owned(), BTreeSet::from([80, 443])),
                ("ns/b".to_owned(), BTreeSet::from([80])),
            ],
        );
        assert_eq!(one[&("ns/a".to_owned(), 80)], two[&("ns/a".to_owned(), 80)]);
        assert_ne!(two[&("ns/a".to_owned(), 80)], two[&("ns/b".to_owned(), 80)]);
    }

    #[test]
    fn listener_ports_are_kept_when_asked_and_free() {
        let range = PortRange {
            same_as_listener: true,
            ..PortRange::default()
        };
        let out = allocate(
            &range,
            [
                ("ns/a".to_owned(), BTreeSet::from([18080])),
                ("ns/b".to_owned(), BTreeSet::from([18080])),
            ],
        );
        assert_eq!(out[&("ns/a".to_owned(), 18080)], 18080);
        assert!(
            (20000..=29999).contains(&out[&("ns/b".to_owned(), 18080)]),
            "{out:?}"
        );
    }

    #[test]
    fn a_full_range_gives_no_port_rather_than_a_shared_one() {
        let range = PortRange {
            from: 30000,
            to: 30001,
            ..PortRange::default()
        };
        let out = allocate(&range, [("a".to_owned(), BTreeSet::from([1, 2, 3]))]);
        assert_eq!(out.len(), 2);
    }

    /// Tenant isolation (issue 40): one namespace's Gateways cannot take
    /// the range from the others once capped, and older Gateways keep
    /// their ports whatever a newer one asks.
    #[test]
    fn a_namespace_cap_leaves_ports_for_the_others_and_older_gateways_keep_theirs() {
        let range = PortRange {
            from: 30000,
            to: 30009,
            max_per_namespace: 3,
            ..PortRange::default()
        };
        let victim = ("victim/gw".to_owned(), BTreeSet::from([80, 443]));
        let alone = allocate(&range, [victim.clone()]);
        let hostile = (
            "attacker/gw".to_owned(),
            (1..=20).collect::<BTreeSet<i32>>(),
        );
        let out = allocate(&range, [victim.clone(), hostile]);
        assert_eq!(out.keys().filter(|(g, _)| g == "attacker/gw").count(), 3);
        for port in [80, 443] {
            let key = ("victim/gw".to_owned(), port);
            assert_eq!(out.get(&key), alone.get(&key));
        }
    }

    #[test]
    fn service_names_fit_in_a_dns_label() {
        assert_eq!(service_name("gw"), "gw-haptic");
        let long = service_name(&"x".repeat(80));
        assert!(long.len() <= 63, "{long}");
    }
}

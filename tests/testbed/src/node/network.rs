//! The node's network: one Linux bridge that the CNI `bridge` plugin plugs
//! every pod into, and a guard that keeps pod traffic on it.
//!
//! The bridge carries [`GATEWAY`], the host's address on the pod network; the
//! apiserver and the kubelet listen there, so pods reach them without any
//! route off the machine. Forwarding is switched on (pods reach ClusterIPs
//! through the host's NAT) but the `HAPTIC-TESTBED` chain in `FORWARD` drops
//! everything that would enter or leave through another interface: nothing
//! of the bed's reaches the machine's real network, and nothing from there
//! reaches a pod. The Service range is routed onto the bridge as well, so the
//! host's own requests to a ClusterIP never take the default route.

use std::net::Ipv4Addr;

use super::Error;
use super::host::{self, node_path};

/// The bridge's name (at most 15 bytes, the kernel's limit).
pub const BRIDGE: &str = "haptic-tb0";

/// The pod network, `10.89.0.0/24`: pods, the host's [`GATEWAY`] and the
/// LoadBalancer pool share it.
pub const POD_SUBNET: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 89, 0, 0), 24);

/// The host's address on the bridge: the apiserver, the kubelet and the node's
/// InternalIP.
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 89, 0, 1);

/// Pod addresses come from `.10`–`.199` (host-local IPAM).
const POD_RANGE: (Ipv4Addr, Ipv4Addr) =
    (Ipv4Addr::new(10, 89, 0, 10), Ipv4Addr::new(10, 89, 0, 199));

/// LoadBalancer addresses: `.200`–`.250`, outside the pods' range, routed by
/// kube-proxy (no interface holds them).
pub const LOAD_BALANCER_POOL: (Ipv4Addr, Ipv4Addr) =
    (Ipv4Addr::new(10, 89, 0, 200), Ipv4Addr::new(10, 89, 0, 250));

/// Service ClusterIPs: `10.90.0.0/24`, routed by kube-proxy only.
pub const SERVICE_CIDR: &str = "10.90.0.0/24";

/// The filter chain that keeps forwarded traffic on the bridge.
pub(crate) const GUARD_CHAIN: &str = "HAPTIC-TESTBED";

/// The filter chain that refuses what reaches a LoadBalancer address
/// untranslated (see [`create`]).
pub(crate) const LOAD_BALANCER_GUARD_CHAIN: &str = "HAPTIC-TESTBED-LB";

/// The filter chain, jumped to first from `INPUT` and `OUTPUT`, that holds a
/// scenario's [`Partition`]s.
pub(crate) const PARTITION_CHAIN: &str = "HAPTIC-TESTBED-CUT";

/// The CNI network's name (libcni names its cache files after it).
pub(crate) const CNI_NETWORK: &str = "haptic-testbed";

/// Where `net.ipv4.ip_forward`'s value before the bed is kept, to restore it.
pub(crate) const IP_FORWARD_SAVED: &str = "ip_forward.before";

const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// Creates the bridge with [`GATEWAY`], the forward guard, and switches
/// forwarding on (saving the old value under [`super::host::NODE_DIR`]).
pub(crate) fn create() -> Result<(), Error> {
    let cidr = format!("{GATEWAY}/{}", POD_SUBNET.1);
    host::run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    host::run("ip", &["addr", "add", &cidr, "dev", BRIDGE])?;
    host::run("ip", &["link", "set", BRIDGE, "up"])?;
    // ClusterIPs lead onto the bridge too: a request kube-proxy has not (yet)
    // translated dies there instead of following the default route off the
    // machine (seen: without kube-proxy, 10.90.0.x:80 answered from the VM's
    // network). The route goes with the bridge.
    host::run("ip", &["route", "add", SERVICE_CIDR, "dev", BRIDGE])?;

    host::run("iptables", &["-w", "-N", GUARD_CHAIN])?;
    for rule in [
        &["-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"][..],
        &["-i", BRIDGE, "-j", "DROP"],
        &["-o", BRIDGE, "-j", "DROP"],
    ] {
        let mut args = vec!["-w", "-A", GUARD_CHAIN];
        args.extend_from_slice(rule);
        host::run("iptables", &args)?;
    }
    host::run("iptables", &["-w", "-I", "FORWARD", "1", "-j", GUARD_CHAIN])?;

    // A LoadBalancer address answers as a load balancer does: through
    // kube-proxy's translation, or with a refusal. Without this, a
    // connection opened before kube-proxy has programmed the address (a
    // client that read `status.loadBalancer` a moment early), or while its
    // Service has no ready endpoint, goes out untranslated, finds no one on
    // the bridge and fails with "No route to host" after ARP gives up; worse,
    // its conntrack entry (SYN_SENT, 120 s) stays untranslated, and a later
    // connection the kernel gives the same source port matches it and fails
    // the same way, long after kube-proxy routes the address (seen: a gated
    // rollout's one failed request of 8,238, its source port the one of a
    // refused set-up request 31 s before). Refused in the filter table, the
    // packet never confirms a conntrack entry, and the client learns at once.
    // Translated packets carry a pod's address by then (nat OUTPUT and
    // PREROUTING come first), so they pass.
    let pool = format!("{}-{}", LOAD_BALANCER_POOL.0, LOAD_BALANCER_POOL.1);
    host::run("iptables", &["-w", "-N", LOAD_BALANCER_GUARD_CHAIN])?;
    for rule in [
        &[
            "-p",
            "tcp",
            "-m",
            "iprange",
            "--dst-range",
            &pool,
            "-j",
            "REJECT",
            "--reject-with",
            "tcp-reset",
        ][..],
        &["-m", "iprange", "--dst-range", &pool, "-j", "REJECT"],
    ] {
        let mut args = vec!["-w", "-A", LOAD_BALANCER_GUARD_CHAIN];
        args.extend_from_slice(rule);
        host::run("iptables", &args)?;
    }
    for hook in ["OUTPUT", "FORWARD"] {
        host::run(
            "iptables",
            &["-w", "-I", hook, "1", "-j", LOAD_BALANCER_GUARD_CHAIN],
        )?;
    }

    // Empty until a scenario cuts a path ([`Partition`]); a bed chain, so the
    // sweep removes whatever a failed scenario left in it.
    host::run("iptables", &["-w", "-N", PARTITION_CHAIN])?;
    for hook in ["INPUT", "OUTPUT"] {
        host::run("iptables", &["-w", "-I", hook, "1", "-j", PARTITION_CHAIN])?;
    }

    let before = std::fs::read_to_string(IP_FORWARD).map_err(|source| Error::Io {
        what: format!("read {IP_FORWARD}"),
        source,
    })?;
    host::write(&node_path(IP_FORWARD_SAVED), before.trim())?;
    set_ip_forward("1")
}

/// Restores `net.ipv4.ip_forward` to what it was before the bed.
pub(crate) fn restore_ip_forward() -> Result<(), Error> {
    match std::fs::read_to_string(node_path(IP_FORWARD_SAVED)) {
        Ok(before) => set_ip_forward(before.trim()),
        Err(_) => Ok(()),
    }
}

fn set_ip_forward(value: &str) -> Result<(), Error> {
    std::fs::write(IP_FORWARD, value).map_err(|source| Error::Io {
        what: format!("write {value} to {IP_FORWARD}"),
        source,
    })
}

/// The CNI configuration list containerd reads: the `bridge` plugin on
/// [`BRIDGE`] with host-local IPAM (its state in the node's directory), no
/// masquerading (pods have no way out), hairpin on (a pod reaches itself
/// through its Service). containerd adds `loopback` itself.
pub(crate) fn cni_config() -> String {
    let ipam_dir = node_path("cni/ipam");
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": CNI_NETWORK,
        "plugins": [{
            "type": "bridge",
            "bridge": BRIDGE,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "dataDir": ipam_dir,
                "ranges": [[{
                    "subnet": format!("{}/{}", POD_SUBNET.0, POD_SUBNET.1),
                    "rangeStart": POD_RANGE.0.to_string(),
                    "rangeEnd": POD_RANGE.1.to_string(),
                    "gateway": GATEWAY.to_string(),
                }]],
                "routes": [{"dst": "0.0.0.0/0"}],
            },
        }],
    })
    .to_string()
}

/// The path between the test process and one TCP endpoint (a pod's port
/// on the bridge, or a port of the host's own [`GATEWAY`]) cut until
/// [`Partition::heal`] or drop: every packet to it (`OUTPUT`, the
/// test process's requests) and from it (`INPUT`, the answers) dropped. A
/// drop, not a reset: the peer sees a silent path, as in a real partition,
/// and connections already open hang until their timeouts. Only the test
/// process's own traffic to that endpoint is cut; pods reach each other
/// over the bridge (`FORWARD`) as before.
#[derive(Debug)]
pub struct Partition {
    rules: [Vec<String>; 2],
    healed: bool,
}

impl Partition {
    /// Cuts the path to `endpoint`.
    pub fn cut(endpoint: std::net::SocketAddr) -> Result<Self, Error> {
        let (ip, port) = (endpoint.ip().to_string(), endpoint.port().to_string());
        let rule = |direction: &str, port_match: &str| -> Vec<String> {
            ["-p", "tcp", direction, &ip, port_match, &port, "-j", "DROP"]
                .map(str::to_owned)
                .to_vec()
        };
        let partition = Self {
            rules: [rule("-d", "--dport"), rule("-s", "--sport")],
            healed: false,
        };
        for rule in &partition.rules {
            let mut args = vec!["-w", "-A", PARTITION_CHAIN];
            args.extend(rule.iter().map(String::as_str));
            host::run("iptables", &args)?;
        }
        Ok(partition)
    }

    /// Removes the rules: the path carries packets again.
    pub fn heal(mut self) -> Result<(), Error> {
        self.remove()
    }

    fn remove(&mut self) -> Result<(), Error> {
        if self.healed {
            return Ok(());
        }
        self.healed = true;
        for rule in &self.rules {
            let mut args = vec!["-w", "-D", PARTITION_CHAIN];
            args.extend(rule.iter().map(String::as_str));
            host::run("iptables", &args)?;
        }
        Ok(())
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        // A scenario that fails while its path is cut; the bed's sweep
        // removes the chain in any case.
        if let Err(error) = self.remove() {
            tracing::warn!(%error, "healing a partition");
        }
    }
}

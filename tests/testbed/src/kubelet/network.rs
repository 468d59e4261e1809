//! The pod network: a private network namespace in which every address of
//! [`POD_CIDR`] is local.
//!
//! Why a namespace and not loopback addresses: kube-apiserver validates
//! EndpointSlice addresses with `ValidateEndpointIP`, which rejects
//! 127.0.0.0/8, so pods on loopback IPs could never appear in a Service's
//! slices. Instead the whole bed — control plane, kubelet, pod processes and
//! test clients — runs in a namespace made with `unshare(CLONE_NEWNET)`. It has
//! only `lo`, no default route, and `local 10.244.0.0/16 dev lo` (the kernel's
//! "AnyIP" route), so a process can bind any 10.244.x.y and every other process
//! in the namespace reaches it, while nothing can leave the machine: those
//! addresses exist nowhere else.
//!
//! A namespace is a per-thread attribute that threads and child processes
//! inherit. [`PodNetwork::runtime`] therefore builds a tokio runtime whose
//! threads all join the namespace, and [`PodNetwork::enter`] moves the calling
//! thread (e.g. a test's main thread, which `block_on` runs on).

use std::collections::HashSet;
use std::fs::File;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::{Arc, Mutex};

use nix::sched::{CloneFlags, setns, unshare};

/// Pod addresses: 10.244.0.0/16, the conventional pod CIDR.
pub const POD_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 244, 0, 0), 16);

/// The first node's own address (`status.hostIP`, the Node's InternalIP);
/// see [`node_ip`] for the others.
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 1);

/// Errors creating or entering the pod network.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `unshare(CLONE_NEWNET)` or `setns` failed; both need root (CAP_SYS_ADMIN).
    #[error("cannot {what} a network namespace (the test bed needs root): {source}")]
    Namespace {
        /// `create` or `enter`.
        what: &'static str,
        /// The errno.
        #[source]
        source: nix::Error,
    },
    /// Running `ip` inside the new namespace failed.
    #[error(
        "configuring the pod network with `ip {args}` failed: {detail}; is iproute2 installed?"
    )]
    Ip {
        /// The `ip` arguments.
        args: String,
        /// Its stderr or the spawn error.
        detail: String,
    },
    /// The helper thread that creates the namespace panicked or could not start.
    #[error("the thread creating the pod network failed: {0}")]
    Thread(String),
    /// Building the tokio runtime failed.
    #[error("building a tokio runtime inside the pod network failed: {0}")]
    Runtime(#[source] std::io::Error),
}

/// A private network namespace with the pod CIDR local; dropped when the last
/// handle, thread and process in it are gone.
#[derive(Clone, Debug)]
pub struct PodNetwork {
    ns: Arc<File>,
}

impl PodNetwork {
    /// Creates the namespace (on a short-lived helper thread, so the caller's
    /// thread is not moved) and configures `lo` and the AnyIP route.
    pub fn create() -> Result<Self, Error> {
        let handle = std::thread::Builder::new()
            .name("pod-network".into())
            .spawn(|| -> Result<File, Error> {
                unshare(CloneFlags::CLONE_NEWNET).map_err(|source| Error::Namespace {
                    what: "create",
                    source,
                })?;
                let (net, bits) = POD_CIDR;
                ip(&["link", "set", "lo", "up"])?;
                ip(&[
                    "route",
                    "add",
                    "local",
                    &format!("{net}/{bits}"),
                    "dev",
                    "lo",
                ])?;
                File::open("/proc/thread-self/ns/net").map_err(|e| Error::Thread(e.to_string()))
            })
            .map_err(|e| Error::Thread(e.to_string()))?;
        let ns = handle
            .join()
            .map_err(|_| Error::Thread("panicked".into()))??;
        Ok(Self { ns: Arc::new(ns) })
    }

    /// Moves the calling thread into the namespace. Threads and processes it
    /// starts afterwards are in it too.
    pub fn enter(&self) -> Result<(), Error> {
        setns(&*self.ns, CloneFlags::CLONE_NEWNET).map_err(|source| Error::Namespace {
            what: "enter",
            source,
        })
    }

    /// A multi-threaded tokio runtime whose worker and blocking threads all
    /// live in the namespace. Moves the calling thread into it as well, since
    /// `Runtime::block_on` runs its future there.
    pub fn runtime(&self) -> Result<tokio::runtime::Runtime, Error> {
        // Prove entering works before handing it to threads that cannot report errors.
        self.enter()?;
        let ns = self.ns.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .on_thread_start(move || {
                if let Err(e) = setns(&*ns, CloneFlags::CLONE_NEWNET) {
                    // A thread outside the namespace would leak pod traffic to the host's
                    // network, which must never happen; there is no caller to tell.
                    eprintln!("haptic-testbed: a runtime thread cannot join the pod network: {e}");
                    std::process::abort();
                }
            })
            .build()
            .map_err(Error::Runtime)
    }

    /// Enters the namespace on this thread and runs `fut` to completion on a
    /// runtime inside it: the way tests run the whole bed.
    pub fn block_on<F: std::future::Future>(&self, fut: F) -> Result<F::Output, Error> {
        let rt = self.runtime()?;
        Ok(rt.block_on(fut))
    }
}

fn ip(args: &[&str]) -> Result<(), Error> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| Error::Ip {
            args: args.join(" "),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(Error::Ip {
            args: args.join(" "),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// Node `index` (0..=15) owns 10.244.(16*index).0/20: its own address is
/// the `.1` of that range and its pods get the rest, so several kubelets can
/// share one pod network the way nodes share a cluster's pod CIDR.
pub fn node_ip(index: u8) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(POD_CIDR.0) + (u32::from(index % 16) << 12) + 1)
}

/// Hands out a node's pod IPs round-robin, skipping the node's own address,
/// the range's last address, and every address still in use, so a stale
/// endpoint never points at a newer pod while there is room.
#[derive(Debug)]
pub(crate) struct IpAllocator {
    base: u32,
    state: Mutex<(u32, HashSet<u32>)>,
}

/// Addresses per node (a /20).
const NODE_RANGE: u32 = 1 << 12;

impl IpAllocator {
    pub(crate) fn new(node_index: u8) -> Self {
        Self {
            base: u32::from(node_ip(node_index)) - 1,
            state: Mutex::new((0, HashSet::new())),
        }
    }

    /// The next free address; `None` when all 4093 are in use.
    pub(crate) fn allocate(&self) -> Option<Ipv4Addr> {
        let mut state = self.state.lock().ok()?;
        let usable = NODE_RANGE - 3;
        for _ in 0..usable {
            let offset = 2 + state.0 % usable;
            state.0 = state.0.wrapping_add(1);
            if state.1.insert(offset) {
                return Some(Ipv4Addr::from(self.base + offset));
            }
        }
        None
    }

    /// Returns an address to the pool.
    pub(crate) fn release(&self, ip: Ipv4Addr) {
        if let Ok(mut state) = self.state.lock() {
            state.1.remove(&u32::from(ip).wrapping_sub(self.base));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_get_disjoint_ranges() {
        assert_eq!(node_ip(0), NODE_IP);
        assert_eq!(node_ip(1), Ipv4Addr::new(10, 244, 16, 1));
        assert_eq!(node_ip(15), Ipv4Addr::new(10, 244, 240, 1));
    }

    #[test]
    fn allocates_distinct_addresses_after_the_node_ip() {
        let a = IpAllocator::new(1);
        assert_eq!(a.allocate(), Some(Ipv4Addr::new(10, 244, 16, 2)));
        assert_eq!(a.allocate(), Some(Ipv4Addr::new(10, 244, 16, 3)));
    }

    #[test]
    fn never_hands_out_an_address_in_use_and_reuses_released_ones_after_wrapping() {
        let a = IpAllocator::new(0);
        let all: Vec<Ipv4Addr> = (0..NODE_RANGE - 3).filter_map(|_| a.allocate()).collect();
        assert_eq!(all.len() as u32, NODE_RANGE - 3);
        assert_eq!(all.last(), Some(&Ipv4Addr::new(10, 244, 15, 254)));
        assert_eq!(a.allocate(), None, "full");
        a.release(Ipv4Addr::new(10, 244, 0, 9));
        assert_eq!(a.allocate(), Some(Ipv4Addr::new(10, 244, 0, 9)));
    }
}

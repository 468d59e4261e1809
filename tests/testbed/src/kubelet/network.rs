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

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use nix::sched::{CloneFlags, setns, unshare};

/// Pod addresses: 10.244.0.0/16, the conventional pod CIDR.
pub const POD_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 244, 0, 0), 16);

/// The node's own address (`status.hostIP`, the Node's InternalIP).
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

/// Hands out pod IPs from [`POD_CIDR`], skipping the network, node and
/// broadcast addresses. Addresses are not reused until the range wraps, so a
/// stale endpoint never points at a newer pod.
#[derive(Debug)]
pub(crate) struct IpAllocator {
    next: AtomicU32,
}

impl IpAllocator {
    pub(crate) fn new() -> Self {
        Self {
            next: AtomicU32::new(0),
        }
    }

    pub(crate) fn allocate(&self) -> Ipv4Addr {
        let (net, bits) = POD_CIDR;
        // Usable offsets: 2 ..= size-2 (0 network, 1 node, size-1 broadcast).
        let usable = (1u32 << (32 - bits)) - 3;
        let n = self.next.fetch_add(1, Ordering::Relaxed) % usable;
        Ipv4Addr::from(u32::from(net) + 2 + n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_distinct_addresses_inside_the_cidr_and_never_the_node_ip() {
        let a = IpAllocator::new();
        let first = a.allocate();
        let second = a.allocate();
        assert_eq!(first, Ipv4Addr::new(10, 244, 0, 2));
        assert_eq!(second, Ipv4Addr::new(10, 244, 0, 3));
        assert_ne!(first, NODE_IP);
    }

    #[test]
    fn wraps_before_the_broadcast_address() {
        let a = IpAllocator::new();
        a.next.store((1 << 16) - 4, Ordering::Relaxed);
        assert_eq!(a.allocate(), Ipv4Addr::new(10, 244, 255, 254));
        assert_eq!(a.allocate(), Ipv4Addr::new(10, 244, 0, 2));
    }
}

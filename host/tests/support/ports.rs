//! The one port picker of the tests: the host's integration tests and
//! benches include it through `support`, the test bed's crate by path.

use std::net::TcpListener;

/// A port free on 127.0.0.1 now, for a process the test starts to bind.
pub fn free_port() -> u16 {
    free_ports(&[0])
}

/// A port `p` such that `p + offset` is free on 127.0.0.1 now for every
/// offset (`haptic run`'s HTTPS port is its HTTP port + 363).
///
/// The ports come from below the kernel's ephemeral range (32768 and up):
/// a port the kernel handed out for `:0` and the test released could be
/// taken by any outgoing connection before the test's process binds it,
/// and a neighbour of it was never checked at all (seen: `haptic run`'s
/// HTTPS port "Address already in use"). Below the range only another test
/// can take it; the start is spread by the process id and a counter, and
/// every candidate is bound before it is returned.
pub fn free_ports(offsets: &[u16]) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 20_000;
    // Below 30000 too: the bed's NodePort range starts there, and kube-proxy
    // rewrites connections to a node port on a local address.
    const SPAN: u32 = 10_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let spread = std::process::id().wrapping_mul(7_919);
    let widest = offsets.iter().copied().max().unwrap_or(0);
    for _ in 0..SPAN {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(port) = u16::try_from(FIRST + spread.wrapping_add(step.wrapping_mul(97)) % SPAN)
        else {
            continue;
        };
        if u32::from(port) + u32::from(widest) >= FIRST + SPAN {
            continue;
        }
        let all_free = offsets
            .iter()
            .map(|offset| TcpListener::bind(("127.0.0.1", port + offset)))
            .collect::<Result<Vec<_>, _>>()
            .is_ok();
        if all_free {
            return port;
        }
    }
    panic!(
        "no free port set {offsets:?} on 127.0.0.1 between {FIRST} and {}",
        FIRST + SPAN - 1
    )
}

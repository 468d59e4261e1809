//! HAProxy as the oracle for these scenarios: [`haptic_testbed::oracle`]
//! asked about this installation's HAProxy pods (whether a worker routes a
//! pod is asked by the gate-order checker, `haptic_testbed::node::gate`).

use super::harness::Proxy;

/// How many reloads `proxy`'s master performed.
pub async fn reloads(proxy: &Proxy) -> Result<u64, String> {
    haptic_testbed::oracle::reloads(&proxy.master_socket())
        .await
        .map_err(|error| format!("{}: {error}", proxy.name))
}

/// How many reloads each of `proxies`' masters performed, in their order.
pub async fn reloads_per_proxy(proxies: &[Proxy]) -> Vec<u64> {
    let mut counts = Vec::with_capacity(proxies.len());
    for proxy in proxies {
        counts.push(
            reloads(proxy)
                .await
                .unwrap_or_else(|error| panic!("show proc: {error}")),
        );
    }
    counts
}

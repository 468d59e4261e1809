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

//! HAProxy as the oracle for these scenarios: [`haptic_testbed::oracle`]
//! asked about this installation's pods and host.

use super::harness::{HOST, Proxy};

/// Whether every live worker of `proxy` routes [`HOST`] to a server at
/// `ip:8080` (the web pod's port) that is up and enabled.
pub async fn routes(proxy: &Proxy, ip: &str) -> Result<(), String> {
    haptic_testbed::oracle::every_worker_routes(&proxy.master_socket(), HOST, ip, 8080)
        .await
        .map_err(|error| format!("{}: {error}", proxy.name))
}

/// How many reloads `proxy`'s master performed.
pub async fn reloads(proxy: &Proxy) -> Result<u64, String> {
    haptic_testbed::oracle::reloads(&proxy.master_socket())
        .await
        .map_err(|error| format!("{}: {error}", proxy.name))
}

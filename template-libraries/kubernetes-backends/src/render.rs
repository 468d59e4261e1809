//! The text of one Service's backends.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::IpAddr;

use haptic_sdk::names::{backend_name, sanitize};
use haptic_sdk::readiness::{self, GatePod};
use haptic_sdk::slim::{H2C_APP_PROTOCOL, ServicePorts, Slice, SliceEndpoint};

use crate::{BackendValues, Key};

/// What rendering one Service produced.
#[derive(Debug, Default)]
pub(crate) struct Rendered {
    /// Ordered by Service port order.
    pub backends: Vec<Backend>,
    /// Pods whose gate state decides a server's state: those of not-ready,
    /// not-terminating endpoints, tracked only with the gate enabled. A
    /// ready or terminating endpoint does not depend on its pod.
    pub pods: BTreeSet<Key>,
    /// Endpoint addresses that are not IP addresses of the slice's type,
    /// skipped: written raw, one would become words of the server line.
    pub invalid_addresses: BTreeSet<String>,
}

/// One backend: its section body (`balance`) and its `server` lines, which
/// go in a snippet of their own after every other library's `Slot::Other`
/// lines, so a `default-server` line another library adds
/// ([`haptic_sdk::extending::server_options`]) applies to them.
#[derive(Debug)]
pub(crate) struct Backend {
    pub name: String,
    pub body: String,
    pub servers: String,
}

/// One server line before naming conflicts are settled.
struct Server {
    name: String,
    address: String,
    routed: bool,
}

/// Renders the backends of `service` from its EndpointSlices. `pod` looks
/// up an endpoint's pod for the readiness gate (always `None` when the gate
/// is disabled).
pub(crate) fn service_backends<'a>(
    namespace: &str,
    name: &str,
    service: &ServicePorts,
    slices: &[&Slice],
    values: &BackendValues,
    pod: impl Fn(&str, &str) -> Option<&'a GatePod>,
) -> Rendered {
    let mut rendered = Rendered::default();
    let spec = &service.spec;
    let gate = values.pod_readiness_gate.enabled;
    let mut seen_ports = BTreeSet::new();
    for port in &spec.ports {
        if port.protocol.as_deref().is_some_and(|p| p != "TCP") || !seen_ports.insert(port.port) {
            continue;
        }
        let mut servers = Vec::new();
        for slice in slices {
            let Some(target_port) = readiness::slice_port(port, slice) else {
                continue;
            };
            let ipv6 = slice.address_type == "IPv6";
            for endpoint in &slice.endpoints {
                let Some(address) = endpoint.addresses.first() else {
                    continue;
                };
                let parsed = address.parse::<IpAddr>();
                if !parsed.is_ok_and(|ip| ip.is_ipv6() == ipv6) {
                    rendered.invalid_addresses.insert(address.clone());
                    continue;
                }
                let target = readiness::endpoint_pod(namespace, endpoint);
                if gate && let Some((pod_ns, pod_name)) = target {
                    rendered
                        .pods
                        .insert((pod_ns.to_owned(), pod_name.to_owned()));
                }
                let gated_pod = if gate && !readiness::is_ready(endpoint) {
                    target.and_then(|(ns, n)| pod(ns, n))
                } else {
                    None
                };
                servers.push(Server {
                    name: server_name(endpoint, address),
                    address: if ipv6 {
                        format!("[{address}]:{target_port}")
                    } else {
                        format!("{address}:{target_port}")
                    },
                    routed: readiness::is_routed(endpoint, gated_pod),
                });
            }
        }
        let mut body = String::new();
        if !values.balance.is_empty() {
            let _ = writeln!(body, "    balance {}", values.balance);
        }
        rendered.backends.push(Backend {
            name: backend_name(namespace, name, port.port),
            body,
            servers: server_lines(
                servers,
                values,
                port.app_protocol.as_deref() == Some(H2C_APP_PROTOCOL),
            ),
        });
    }
    rendered
}

/// The pod's name, or `ep-<address>` for an endpoint without a pod.
fn server_name(endpoint: &SliceEndpoint, address: &str) -> String {
    match endpoint.target_ref.as_ref().and_then(|t| t.name.as_deref()) {
        Some(name) if !name.is_empty() => sanitize(name),
        _ => sanitize(&format!("ep-{address}")),
    }
}

/// `h2c`: the Service port's appProtocol is `kubernetes.io/h2c`, so its
/// servers speak HTTP/2 without TLS (`proto h2`), as gRPC backends need.
fn server_lines(mut servers: Vec<Server>, values: &BackendValues, h2c: bool) -> String {
    // Sorted by name then address so the text, and each server's name, is
    // the same whatever order the slices list them in. A name seen twice
    // (one pod in an IPv4 and an IPv6 slice) gets a numbered suffix.
    servers.sort_by(|a, b| (&a.name, &a.address).cmp(&(&b.name, &b.address)));
    let mut body = String::with_capacity(servers.len() * 64);
    // Sorted, so repeats of a name are adjacent.
    let mut repeat = 1;
    for (i, server) in servers.iter().enumerate() {
        let previous = i
            .checked_sub(1)
            .and_then(|p| servers.get(p))
            .map(|s| s.name.as_str());
        repeat = if previous == Some(server.name.as_str()) {
            repeat + 1
        } else {
            1
        };
        if repeat == 1 {
            let _ = write!(body, "    server {} {}", server.name, server.address);
        } else {
            let _ = write!(
                body,
                "    server {}-{repeat} {}",
                server.name, server.address
            );
        }
        if !server.routed {
            body.push_str(" disabled");
        }
        if h2c {
            body.push_str(" proto h2");
        }
        if !values.server_options.is_empty() {
            body.push(' ');
            body.push_str(&values.server_options);
        }
        body.push('\n');
    }
    body
}

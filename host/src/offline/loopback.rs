//! A configuration that would listen on its own backends: a frontend bound
//! to every address (`bind :8080`, base's default) or to a loopback address
//! takes that port on loopback too, so a server on `127.x.y.z:8080` (what a
//! cluster of local demo endpoints has) either cannot start, or its requests
//! come back into HAProxy. `haproxy -c` cannot see it: nothing is wrong with
//! the configuration itself, only with running it on a machine that also
//! runs those backends. In a pod, endpoints are pod IPs and never loopback,
//! so only the offline job checks.
//!
//! A hop HAProxy makes to itself on purpose is no loop: a server that sends
//! the PROXY protocol (`send-proxy`, `send-proxy-v2`) to a bind that reads
//! it (`accept-proxy`), as ingress-nginx's TLS passthrough frontend does to
//! the HTTPS bind.

use std::net::IpAddr;

/// A listening address of a frontend (or listen section).
struct Bind<'a> {
    section: &'a str,
    text: &'a str,
    /// `None`: every address.
    ip: Option<IpAddr>,
    port: u16,
    /// `accept-proxy`: fed by a PROXY-protocol hop.
    accepts_proxy: bool,
}

/// A server line pointing at loopback.
struct Server<'a> {
    backend: &'a str,
    name: &'a str,
    ip: IpAddr,
    port: u16,
    /// `send-proxy` or `send-proxy-v2`.
    sends_proxy: bool,
}

/// One warning per bind that covers a loopback server's address and port.
pub fn self_loops(config: &str) -> Vec<String> {
    let mut binds = Vec::new();
    let mut servers = Vec::new();
    let mut section: Option<(&str, &str)> = None;
    for line in config.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            continue;
        };
        if !line.starts_with(char::is_whitespace) {
            section = Some((first, line.trim()));
            continue;
        }
        let Some((kind, header)) = section else {
            continue;
        };
        match (kind, first, words.next()) {
            ("frontend" | "listen", "bind", Some(address)) => {
                if let Some((ip, port)) = bind_address(address) {
                    binds.push(Bind {
                        section: header,
                        text: address,
                        ip,
                        port,
                        accepts_proxy: words.any(|w| w == "accept-proxy"),
                    });
                }
            }
            ("backend" | "listen", "server", Some(name)) => {
                let target = words.next().and_then(server_address);
                if let Some((ip, port)) = target.filter(|(ip, _)| ip.is_loopback()) {
                    servers.push(Server {
                        backend: header,
                        name,
                        ip,
                        port,
                        sends_proxy: words.any(|w| w == "send-proxy" || w == "send-proxy-v2"),
                    });
                }
            }
            _ => {}
        }
    }
    let mut warnings = Vec::new();
    for bind in &binds {
        let hit: Vec<&Server> = servers
            .iter()
            .filter(|s| s.port == bind.port && bind.ip.is_none_or(|ip| ip == s.ip))
            .filter(|s| !(bind.accepts_proxy && s.sends_proxy))
            .collect();
        let Some(first) = hit.first() else {
            continue;
        };
        let others = match hit.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        warnings.push(format!(
            "`{}` binds `{}`, which includes {}:{}, the address of server `{}` in `{}`{others}: \
             on a machine that runs those backends, HAProxy would take their port or loop their \
             requests back into itself. Bind it to one address (for base's frontend http: \
             --set templateLibraries.base.frontends.http.bind=127.0.0.1:8080) or use other ports",
            bind.section, bind.text, first.ip, first.port, first.name, first.backend
        ));
    }
    warnings
}

/// `:8080`, `*:8080`, `0.0.0.0:8080`, `[::]:8080`, `127.0.0.1:8080`; `None`
/// for what cannot be known before HAProxy runs (`"${POD_IP}:8080"`, unix
/// sockets, port ranges).
fn bind_address(text: &str) -> Option<(Option<IpAddr>, u16)> {
    let text = text.trim_matches('"');
    if text.contains('$') || text.contains('@') {
        return None;
    }
    let (host, port) = text.rsplit_once(':')?;
    let port = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host {
        "" | "*" | "0.0.0.0" | "::" => Some((None, port)),
        host => Some((Some(host.parse().ok()?), port)),
    }
}

fn server_address(text: &str) -> Option<(IpAddr, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host.parse().ok()?, port.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "frontend http\n    bind :8080\n    default_backend web\n\n\
                          frontend healthz\n    bind 127.0.0.1:8081\n\n\
                          frontend pod\n    bind \"${POD_IP}:8080\"\n\n\
                          backend web\n    server web-1 127.0.10.1:8080\n    server web-2 127.0.10.2:8080 disabled\n    server far 10.0.0.1:8080\n\n\
                          backend health\n    server h 127.0.0.2:8081\n";

    #[test]
    fn a_wildcard_bind_on_a_loopback_servers_port_is_reported() {
        let warnings = self_loops(CONFIG);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with(
                "`frontend http` binds `:8080`, which includes 127.0.10.1:8080, the address of server `web-1` in `backend web` and 1 more"
            ),
            "{warnings:?}"
        );
    }

    #[test]
    fn one_address_or_another_port_is_fine() {
        let config = CONFIG.replace("bind :8080", "bind 127.0.0.1:8080");
        assert!(self_loops(&config).is_empty(), "{:?}", self_loops(&config));
        let config = CONFIG.replace("bind :8080", "bind *:80");
        assert!(self_loops(&config).is_empty());
        let config = CONFIG.replace("bind :8080", "bind 127.0.10.1:8080");
        assert_eq!(self_loops(&config).len(), 1, "the very address");
    }

    #[test]
    fn a_proxy_protocol_hop_to_haproxy_itself_is_no_loop() {
        let hop = "frontend https\n    bind 127.0.0.1:10443 accept-proxy ssl crt x.pem\n\n\
                   backend hop\n    server https 127.0.0.1:10443 send-proxy-v2\n";
        assert!(self_loops(hop).is_empty(), "{:?}", self_loops(hop));
        let without = hop.replace(" send-proxy-v2", "");
        assert_eq!(
            self_loops(&without).len(),
            1,
            "a hop without the PROXY header"
        );
    }
}

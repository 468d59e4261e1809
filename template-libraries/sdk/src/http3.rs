//! HTTP/3 beside an HTTPS bind: a QUIC listener on the same port (UDP), with
//! the same certificates and SNI, advertised to clients with `alt-svc`.
//!
//! One setting for every library, `templateLibraries.base.http3`
//! (`enabled`, on by default; `advertisedPort`, the UDP port clients reach,
//! when a Service maps it: 443 in front of a pod's 8443; `maxAge`, how long a
//! client may remember the advertisement). Whether the HAProxy in use can
//! serve QUIC at all is not a value but a fact the host adds to the values
//! tree ([`crate::values::HaproxyFacts`]): where it cannot, HTTP/3 stays off
//! and the library writing the HTTPS bind says so in a warning, so no
//! configuration HAProxy cannot load is ever written.
//!
//! HAProxy 3.0 as Debian builds it reaches QUIC through OpenSSL's
//! compatibility layer, which needs `limited-quic` in `global` (`base`
//! writes it, [`Http3::global_lines`]) and offers no 0-RTT.

use serde::Deserialize;

use crate::Values;

/// The warning reason when HTTP/3 is wanted but cannot be served.
pub const UNAVAILABLE_REASON: &str = "HTTP3Unavailable";

/// What the values and the host's HAProxy decide for HTTP/3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Http3 {
    /// `templateLibraries.base.http3.enabled: false`.
    Off,
    /// Wanted, but this HAProxy cannot serve it; the sentence says why.
    Unavailable(String),
    /// Served beside every HTTPS bind that allows it.
    On(Quic),
}

/// HTTP/3's settings once it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quic {
    advertised_port: Option<u16>,
    max_age: u32,
    /// The HAProxy needs `limited-quic` (OpenSSL's compatibility layer).
    limited: bool,
}

/// `templateLibraries.base.http3` as written (`base` parses it, so a
/// wrong type is refused in its `configure`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Settings {
    pub enabled: bool,
    pub advertised_port: Option<u16>,
    pub max_age: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            enabled: true,
            advertised_port: None,
            max_age: 86_400,
        }
    }
}

/// `base`'s defaults for `http3`, for its `defaults()`.
pub fn defaults() -> serde_json::Value {
    let settings = Settings::default();
    serde_json::json!({
        "enabled": settings.enabled,
        "advertisedPort": null,
        "maxAge": settings.max_age,
    })
}

impl Http3 {
    /// Reads `base.http3` and the host's HAProxy facts from `values`. A
    /// setting that does not parse counts as the default (`base` refuses it
    /// with the path in its own `configure`).
    pub fn from_values(values: &Values) -> Self {
        let settings: Settings = values
            .library("base")
            .and_then(|base| base.get("http3"))
            .and_then(|http3| serde_json::from_value(http3.clone()).ok())
            .unwrap_or_default();
        if !settings.enabled {
            return Self::Off;
        }
        let haproxy = values.haproxy();
        // A host that says nothing of its HAProxy (unit tests, an older
        // host) gets no QUIC bind it might not load, and no warning.
        if haproxy.version.is_empty() {
            return Self::Off;
        }
        if !haproxy.quic {
            return Self::Unavailable(format!(
                "HTTP/3 is not served: HAProxy {} was built without QUIC; HTTPS stays on TCP. Use \
                 an HAProxy built with QUIC (the image's, Debian trixie's 3.0) or set \
                 templateLibraries.base.http3.enabled=false to silence this",
                haproxy.version
            ));
        }
        Self::On(Quic {
            advertised_port: settings.advertised_port,
            max_age: settings.max_age,
            limited: haproxy.quic_openssl_compat,
        })
    }

    /// What `global` needs for QUIC listeners to open (none when off).
    pub fn global_lines(&self) -> &'static str {
        match self {
            Self::On(Quic { limited: true, .. }) => "    limited-quic\n",
            _ => "",
        }
    }
}

impl Quic {
    /// The QUIC bind address for an HTTPS bind on `tcp` (`:8443`,
    /// `"${POD_IP}:8443"`, `[::]:8443`, `ipv6@:::8443`): the same address
    /// and port over UDP. `None` for what QUIC cannot listen on (several
    /// addresses in one bind, a socket path).
    pub fn bind_address(&self, tcp: &str) -> Option<String> {
        let (quoted, address) = match tcp.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
            Some(inner) => (true, inner),
            None => (false, tcp),
        };
        if address.contains(',') || address.starts_with('/') {
            return None;
        }
        let quic = if let Some(rest) = address.strip_prefix("ipv4@") {
            format!("quic4@{rest}")
        } else if let Some(rest) = address.strip_prefix("ipv6@") {
            format!("quic6@{rest}")
        } else if address.contains('@') {
            return None;
        } else if address.starts_with('[') || address.matches(':').count() > 1 {
            format!("quic6@{address}")
        } else {
            format!("quic4@{address}")
        };
        Some(if quoted { format!("\"{quic}\"") } else { quic })
    }

    /// The `http-response` rule advertising HTTP/3 on responses to HTTPS
    /// requests: the port is `advertisedPort` when set (a Service mapping
    /// 443 to the pod's 8443), else the one the client connected to
    /// (`dst_port`, right wherever no port is mapped).
    pub fn alt_svc_rule(&self) -> String {
        let port = self
            .advertised_port
            .map_or_else(|| "%[dst_port]".to_owned(), |port| port.to_string());
        self.alt_svc_rule_for(&port)
    }

    /// [`Self::alt_svc_rule`] for a port the library knows clients reach
    /// (a Gateway listener's port, which its Service maps).
    pub fn alt_svc_rule_on(&self, port: u16) -> String {
        self.alt_svc_rule_for(&port.to_string())
    }

    fn alt_svc_rule_for(&self, port: &str) -> String {
        format!(
            "    http-response set-header alt-svc \"h3=\\\":{port}\\\"; ma={}\" if {{ ssl_fc }}\n",
            self.max_age
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decided(tree: serde_json::Value) -> Http3 {
        Http3::from_values(&Values::new(tree, "base", &json!({})).expect("values"))
    }

    fn quic() -> Quic {
        match decided(
            json!({"_haproxy": {"version": "3.0.11", "quic": true, "quicOpensslCompat": true}}),
        ) {
            Http3::On(quic) => quic,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn on_only_where_the_haproxy_serves_quic() {
        let with_quic = json!({"_haproxy": {"version": "3.0.11", "quic": true}});
        assert!(matches!(decided(with_quic.clone()), Http3::On(_)));
        let off = json!({"base": {"http3": {"enabled": false}}, "_haproxy": {"version": "3.0.11", "quic": true}});
        assert_eq!(decided(off), Http3::Off);
        let Http3::Unavailable(why) =
            decided(json!({"_haproxy": {"version": "2.6.12", "quic": false}}))
        else {
            panic!("2.6 without QUIC")
        };
        assert!(
            why.contains("HAProxy 2.6.12 was built without QUIC"),
            "{why}"
        );
        assert_eq!(decided(json!({})), Http3::Off, "a host that says nothing");
        assert_eq!(Http3::Off.global_lines(), "");
        assert_eq!(Http3::On(quic()).global_lines(), "    limited-quic\n");
    }

    #[test]
    fn quic_listens_where_the_https_bind_does() {
        let quic = quic();
        let cases = [
            (":8443", Some("quic4@:8443")),
            ("127.0.0.1:8443", Some("quic4@127.0.0.1:8443")),
            ("\"${POD_IP}:8443\"", Some("\"quic4@${POD_IP}:8443\"")),
            ("[::]:8443", Some("quic6@[::]:8443")),
            (":::8443", Some("quic6@:::8443")),
            ("ipv6@:::8443", Some("quic6@:::8443")),
            ("ipv4@10.0.0.1:443", Some("quic4@10.0.0.1:443")),
            ("127.0.0.1:8443,127.0.0.2:8443", None),
            ("unix@/run/https.sock", None),
        ];
        for (tcp, expected) in cases {
            assert_eq!(quic.bind_address(tcp).as_deref(), expected, "{tcp}");
        }
    }

    #[test]
    fn alt_svc_names_the_port_clients_reach() {
        assert_eq!(
            quic().alt_svc_rule(),
            "    http-response set-header alt-svc \"h3=\\\":%[dst_port]\\\"; ma=86400\" if { ssl_fc }\n"
        );
        let behind_a_service = match decided(json!({
            "base": {"http3": {"advertisedPort": 443, "maxAge": 60}},
            "_haproxy": {"version": "3.0.11", "quic": true}
        })) {
            Http3::On(quic) => quic,
            other => panic!("{other:?}"),
        };
        assert!(
            behind_a_service
                .alt_svc_rule()
                .contains("alt-svc \"h3=\\\":443\\\"; ma=60\"")
        );
    }
}

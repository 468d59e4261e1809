//! Readiness and liveness probes with kubelet's semantics: `httpGet` (2xx/3xx is success),
//! `tcpSocket` and `exec`, each attempt bounded by `timeoutSeconds`, the first
//! after `initialDelaySeconds`, then every `periodSeconds`. The result flips
//! only after `successThreshold` consecutive successes or `failureThreshold`
//! consecutive failures; readiness starts failing, liveness passing.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::net::TcpStream;

use crate::http;

/// How to probe.
#[derive(Clone, Debug)]
pub(crate) enum Action {
    Http {
        host: Option<IpAddr>,
        port: u16,
        path: String,
        headers: Vec<(String, String)>,
    },
    Tcp {
        host: Option<IpAddr>,
        port: u16,
    },
    Exec {
        argv: Vec<String>,
    },
}

/// A readiness probe, resolved against its container.
#[derive(Clone, Debug)]
pub(crate) struct Spec {
    pub action: Action,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// The probe's own `terminationGracePeriodSeconds` (liveness kills).
    pub termination_grace: Option<Duration>,
}

fn port(container: &Container, port: &IntOrString) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("port {n} out of range")),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| format!("no container port named {name:?}")),
    }
}

fn secs(v: Option<i32>, default: i32) -> Duration {
    Duration::from_secs(u64::try_from(v.unwrap_or(default)).unwrap_or(0))
}

fn count(v: Option<i32>, default: u32) -> u32 {
    v.and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// Resolves the container's readiness probe, if any.
pub(crate) fn readiness(container: &Container) -> Result<Option<Spec>, String> {
    let Some(p) = &container.readiness_probe else {
        return Ok(None);
    };
    from_probe(container, p).map(Some)
}

/// Resolves the container's liveness probe, if any.
pub(crate) fn liveness(container: &Container) -> Result<Option<Spec>, String> {
    let Some(p) = &container.liveness_probe else {
        return Ok(None);
    };
    from_probe(container, p).map(Some)
}

fn from_probe(container: &Container, p: &Probe) -> Result<Spec, String> {
    let host = |h: &Option<String>| -> Result<Option<IpAddr>, String> {
        match h.as_deref() {
            None | Some("") => Ok(None),
            Some(h) => h
                .parse()
                .map(Some)
                .map_err(|_| format!("probe host {h:?} is not an IP address")),
        }
    };
    let action = if let Some(h) = &p.http_get {
        if h.scheme.as_deref().is_some_and(|s| s != "HTTP") {
            return Err("only HTTP probes are supported, not HTTPS".into());
        }
        Action::Http {
            host: host(&h.host)?,
            port: port(container, &h.port)?,
            path: h.path.clone().unwrap_or_else(|| "/".into()),
            headers: h
                .http_headers
                .iter()
                .flatten()
                .map(|hh| (hh.name.clone(), hh.value.clone()))
                .collect(),
        }
    } else if let Some(t) = &p.tcp_socket {
        Action::Tcp {
            host: host(&t.host)?,
            port: port(container, &t.port)?,
        }
    } else if let Some(e) = &p.exec {
        Action::Exec {
            argv: e.command.clone().unwrap_or_default(),
        }
    } else {
        return Err(
            "probe has no httpGet, tcpSocket or exec (gRPC probes are not supported)".into(),
        );
    };
    Ok(Spec {
        action,
        initial_delay: secs(p.initial_delay_seconds, 0),
        period: secs(p.period_seconds, 10),
        timeout: secs(p.timeout_seconds, 1),
        success_threshold: count(p.success_threshold, 1),
        failure_threshold: count(p.failure_threshold, 3),
        termination_grace: p
            .termination_grace_period_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs),
    })
}

/// One attempt. `env` is the container's environment (for exec probes).
pub(crate) async fn attempt(spec: &Spec, pod_ip: Ipv4Addr, env: &[(String, String)]) -> bool {
    let target =
        |host: Option<IpAddr>, port| SocketAddr::new(host.unwrap_or(IpAddr::V4(pod_ip)), port);
    match &spec.action {
        Action::Http {
            host,
            port,
            path,
            headers,
        } => {
            let addr = target(*host, *port);
            match http::get(addr, None, path, headers, spec.timeout).await {
                Ok(r) => (200..400).contains(&r.status),
                Err(_) => false,
            }
        }
        Action::Tcp { host, port } => matches!(
            tokio::time::timeout(spec.timeout, TcpStream::connect(target(*host, *port))).await,
            Ok(Ok(_))
        ),
        Action::Exec { argv } => {
            if argv.is_empty() {
                return false;
            }
            let child = super::container::exec_command(argv, env)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
            matches!(tokio::time::timeout(spec.timeout, child).await, Ok(Ok(s)) if s.success())
        }
    }
}

/// Consecutive-result bookkeeping: the probe's verdict.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tracker {
    successes: u32,
    failures: u32,
    ready: bool,
}

impl Tracker {
    /// A liveness tracker: the container counts as alive until proven otherwise.
    pub(crate) fn passing() -> Self {
        Self {
            ready: true,
            ..Self::default()
        }
    }

    /// Records one attempt; returns the (possibly unchanged) verdict.
    pub(crate) fn record(&mut self, spec: &Spec, ok: bool) -> bool {
        if ok {
            self.successes += 1;
            self.failures = 0;
            if self.successes >= spec.success_threshold {
                self.ready = true;
            }
        } else {
            self.failures += 1;
            self.successes = 0;
            if self.failures >= spec.failure_threshold {
                self.ready = false;
            }
        }
        self.ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(success: u32, failure: u32) -> Spec {
        Spec {
            action: Action::Tcp {
                host: None,
                port: 1,
            },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
            termination_grace: None,
        }
    }

    #[test]
    fn starts_unready_and_flips_only_at_the_thresholds() {
        let s = spec(2, 3);
        let mut t = Tracker::default();
        assert!(!t.record(&s, true));
        assert!(t.record(&s, true));
        assert!(t.record(&s, false));
        assert!(t.record(&s, false));
        assert!(!t.record(&s, false));
        assert!(!t.record(&s, true));
    }

    #[test]
    fn resolves_named_ports_and_kubelet_defaults() {
        let c: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"port": "http", "path": "/healthz"}},
        }))
        .unwrap();
        let s = readiness(&c).unwrap().unwrap();
        assert!(matches!(s.action, Action::Http { port: 8080, .. }));
        assert_eq!(
            (s.period, s.failure_threshold),
            (Duration::from_secs(10), 3)
        );
        let bad: Container = serde_json::from_value(serde_json::json!({
            "name": "c",
            "readinessProbe": {"tcpSocket": {"port": "nope"}},
        }))
        .unwrap();
        assert!(readiness(&bad).is_err());
    }
}

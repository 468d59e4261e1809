//! The app every scenario routes and rolls: Deployment `web` of the bed's
//! echo image behind Service `web`, optionally behind haptic's readiness
//! gate, and an Ingress of class `haptic` for it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use crate::cluster::create;
use crate::node::ECHO_IMAGE;

/// haptic's readiness gate condition.
pub const GATE: &str = "haproxy-haptic.org/load-balancer-ready";

/// The port the echo server listens on (named `http`); Service `web`
/// serves it on port 80.
pub const WEB_PORT: u16 = 8080;

/// The pods' labels, as a selector.
pub const WEB_PODS: &str = "app=web";

/// How the app's Deployment runs.
#[derive(Debug, Clone, Copy)]
pub struct WebApp {
    /// Replicas; a rollout brings each new pod up before an old one goes
    /// (surge 1, none unavailable).
    pub replicas: i32,
    /// Whether its pods carry haptic's readiness gate.
    pub gated: bool,
}

/// Creates Deployment `web` and Service `web` in `namespace` (which must
/// exist). Each pod serves on for 5 s after SIGTERM while HAProxy takes it
/// out: a real pod's address vanishes silently when it exits (no RST), so a
/// request HAProxy still sends there waits out its connect timeout (seen
/// with 2 s: 12 of 15,195 requests).
pub async fn create_web_app(
    client: &kube::Client,
    namespace: &str,
    app: WebApp,
) -> anyhow::Result<()> {
    let gates = if app.gated {
        json!([{"conditionType": GATE}])
    } else {
        json!([])
    };
    create::<Deployment>(
        client,
        namespace,
        json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": app.replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "terminationGracePeriodSeconds": 10,
                        "readinessGates": gates,
                        "containers": [{
                            "name": "app", "image": ECHO_IMAGE,
                            "ports": [{"containerPort": WEB_PORT, "name": "http"}],
                            "env": [{"name": "SHUTDOWN_DELAY_SECONDS", "value": "5"}],
                            "readinessProbe": {"httpGet": {"path": "/healthz", "port": WEB_PORT}, "periodSeconds": 1},
                        }],
                    },
                },
            }
        }),
    )
    .await?;
    create::<Service>(
        client,
        namespace,
        json!({
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": WEB_PORT}]}
        }),
    )
    .await?;
    Ok(())
}

/// An Ingress of class `haptic` routing `host` to Service `service`, port
/// `http`.
pub fn ingress(name: &str, host: &str, service: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "ingressClassName": "haptic",
            "rules": [{"host": host, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": service, "port": {"name": "http"}}}
            }]}}]
        }
    })
}

//! `haptic status`: the controller's `/debug/fleet` and `/debug/gates`,
//! for the person on call asking why a pod is not Ready.

use std::fmt::Write as _;
use std::time::Duration;

use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::controller::debug::{FleetReport, GatesReport, short_id};

/// Why the controller's reports could not be read.
#[derive(Debug, Error)]
pub enum StatusError {
    #[error(
        "cannot reach the controller at {url}: {detail}. Forward its metrics port first, e.g. \
         `kubectl -n <namespace> port-forward svc/<release>-controller-metrics 8451`, or pass --controller"
    )]
    Unreachable { url: String, detail: String },
    #[error("{url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error(
        "{url} did not answer a haptic report (is it a haptic controller of this version?): {detail}"
    )]
    Decode { url: String, detail: String },
}

/// Both reports from the controller at `base` (`http://host:port`).
pub async fn fetch(
    base: &str,
    timeout: Duration,
) -> Result<(FleetReport, GatesReport), StatusError> {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let base = base.trim_end_matches('/');
    let fleet = get_json(&client, &format!("{base}/debug/fleet"), timeout).await?;
    let gates = get_json(&client, &format!("{base}/debug/gates"), timeout).await?;
    Ok((fleet, gates))
}

async fn get_json<T: DeserializeOwned>(
    client: &Client<HttpConnector, Empty<Bytes>>,
    url: &str,
    timeout: Duration,
) -> Result<T, StatusError> {
    let unreachable = |detail: String| StatusError::Unreachable {
        url: url.to_owned(),
        detail,
    };
    let uri: hyper::Uri = url
        .parse()
        .map_err(|error| unreachable(format!("not a URL ({error})")))?;
    let exchange = async {
        let response = client
            .get(uri)
            .await
            .map_err(|error| unreachable(error.to_string()))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|error| unreachable(error.to_string()))?
            .to_bytes();
        Ok::<_, StatusError>((status, body))
    };
    let (status, body) = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| unreachable(format!("no answer within {timeout:?}")))??;
    if !status.is_success() {
        return Err(StatusError::Status {
            url: url.to_owned(),
            status: status.as_u16(),
            body: String::from_utf8_lossy(&body).chars().take(300).collect(),
        });
    }
    serde_json::from_slice(&body).map_err(|error| StatusError::Decode {
        url: url.to_owned(),
        detail: error.to_string(),
    })
}

/// What `haptic status` prints, and whether something has waited longer
/// than `warn_after` (the exit code says so). With `pod`
/// (`namespace/name`), only that pod's gate.
pub fn describe(
    fleet: &FleetReport,
    gates: &GatesReport,
    pod: Option<&str>,
    warn_after: Duration,
) -> (String, bool) {
    let mut text = String::new();
    let too_long = |seconds: f64| seconds > warn_after.as_secs_f64();
    if let Some(pod) = pod {
        let Some(gate) = gates.gates.iter().find(|gate| gate.pod == pod) else {
            let _ = writeln!(
                text,
                "{pod}: no readiness gate waits for the HAProxy fleet (the pod has no gate, is not \
                 ContainersReady yet, already has its condition, or is not among the {} oldest of \
                 {} waiting)",
                gates.gates.len(),
                gates.waiting
            );
            return (text, false);
        };
        let _ = writeln!(
            text,
            "{pod}: its readiness gate has waited {} for every HAProxy worker to route to it; it waits for:",
            human(gate.waiting_seconds)
        );
        write_blockers(&mut text, gates);
        return (text, too_long(gate.waiting_seconds));
    }

    let _ = writeln!(
        text,
        "controller {}: {}; newest render {}",
        if fleet.identity.is_empty() {
            "?"
        } else {
            &fleet.identity
        },
        if fleet.leading {
            "leading"
        } else {
            "following (only the leader deploys)"
        },
        fleet.newest_render.as_deref().map_or("none yet", short_id)
    );
    if let Some(failure) = &fleet.render_failure {
        let _ = writeln!(
            text,
            "renders failing ({}): {}",
            failure.reason, failure.message
        );
    }
    let converged = fleet
        .pods
        .iter()
        .filter(|p| p.converged.is_some() && p.converged == fleet.newest_render)
        .count();
    let _ = writeln!(
        text,
        "fleet: {} HAProxy pod(s), {converged} on the newest render",
        fleet.pods.len()
    );
    for proxy in &fleet.pods {
        let state = match &proxy.converged {
            Some(id) if Some(id) == fleet.newest_render.as_ref() => "converged".to_owned(),
            Some(id) => format!("all workers on older render {}", short_id(id)),
            None => "workers disagree or unknown".to_owned(),
        };
        let _ = writeln!(text, "  {} ({}): {state}", proxy.pod, proxy.endpoint);
        for worker in &proxy.workers {
            let _ = writeln!(
                text,
                "    worker {} ({}) runs {}",
                worker.pid,
                worker.role,
                short_id(&worker.runs)
            );
        }
        if let Some(error) = &proxy.last_error {
            let _ = writeln!(text, "    last error: {error}");
        }
    }
    let oldest = gates.gates.first().map_or(0.0, |gate| gate.waiting_seconds);
    if gates.waiting == 0 {
        let _ = writeln!(text, "gates: none waiting");
        return (text, false);
    }
    let _ = writeln!(
        text,
        "gates: {} pod(s) waiting, the oldest for {}",
        gates.waiting,
        human(oldest)
    );
    for gate in gates.gates.iter().take(10) {
        let _ = writeln!(
            text,
            "  {} waiting {}",
            gate.pod,
            human(gate.waiting_seconds)
        );
    }
    if gates.waiting > 10 {
        let _ = writeln!(text, "  ... and {} more", gates.waiting - 10);
    }
    let _ = writeln!(text, "they wait for:");
    write_blockers(&mut text, gates);
    (text, too_long(oldest))
}

fn write_blockers(text: &mut String, gates: &GatesReport) {
    if gates.waits_for.is_empty() {
        let _ = writeln!(text, "  nothing the controller can see");
    }
    for blocker in &gates.waits_for {
        let _ = writeln!(text, "  - {}", blocker.text);
    }
}

/// `2m05s`, `41.2s`.
fn human(seconds: f64) -> String {
    if seconds < 60.0 {
        return format!("{seconds:.1}s");
    }
    // Whole seconds from here: f64 -> u64 saturates.
    let whole = seconds as u64;
    let (hours, minutes, seconds) = (whole / 3600, whole % 3600 / 60, whole % 60);
    if hours > 0 {
        format!("{hours}h{minutes:02}m{seconds:02}s")
    } else {
        format!("{minutes}m{seconds:02}s")
    }
}

#[cfg(test)]
mod tests;

//! The `haptic-mirror` message: a copy of the request to each of the
//! route's mirror targets, fire and forget. The ACK goes back at once with
//! no variable, so the client's request never waits on a mirror; the copies
//! run in their own tasks, each bounded by its target's timeout, all by
//! [`IN_FLIGHT`] (a copy past it is dropped and counted, never queued: a
//! slow or dead mirror costs the client nothing and the agent a bounded
//! amount). Mirroring fails open everywhere: HAProxy goes on without the
//! agent, and a copy that fails is only counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, Uri};
use tokio::sync::Semaphore;

use super::outbound::{Outbound, is_hop_by_hop};
use super::profiles::{MirrorProfile, MirrorTarget};
use super::request::OriginalRequest;
use super::{MirrorLabels, SpoaMetrics};

/// Most copies in flight at once, across every target.
pub const IN_FLIGHT: usize = 1_024;
/// A failing target is logged at most this often (it is counted always).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What became of one copy (`haptic_spoa_mirror_requests_total{result}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The target answered (any status: a mirror's answer is discarded).
    Sent,
    /// No answer: refused, unreachable, timed out, or not a valid request.
    Failed,
    /// [`IN_FLIGHT`] copies were already running.
    Dropped,
    /// Left out by the target's percentage.
    Sampled,
}

impl Outcome {
    pub const NAMES: &[&str] = &["sent", "failed", "dropped", "sampled-out"];

    pub fn name(self) -> &'static str {
        match self {
            Self::Sent => "sent",
            Self::Failed => "failed",
            Self::Dropped => "dropped",
            Self::Sampled => "sampled-out",
        }
    }
}

/// Sends the copies through the agent's one client.
#[derive(Debug)]
pub struct Mirrorer {
    outbound: Outbound,
    in_flight: Arc<Semaphore>,
    /// Milliseconds since `started` of the last warning.
    last_warning: Arc<AtomicU64>,
    started: Instant,
}

impl Mirrorer {
    pub fn new(outbound: Outbound) -> Self {
        Self {
            outbound,
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
            last_warning: Arc::new(AtomicU64::new(0)),
            started: Instant::now(),
        }
    }

    /// Starts a copy of `request` to every target of `profile` and returns
    /// at once.
    pub fn copy(&self, profile: &MirrorProfile, request: &OriginalRequest, metrics: &SpoaMetrics) {
        for target in &profile.targets {
            let count = |outcome: Outcome| {
                metrics
                    .mirror_requests
                    .get_or_create(&MirrorLabels {
                        result: outcome.name(),
                    })
                    .inc();
            };
            if !target.fraction.draw() {
                count(Outcome::Sampled);
                continue;
            }
            let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                count(Outcome::Dropped);
                continue;
            };
            let copy = match self.build(target, request) {
                Ok(copy) => copy,
                Err(error) => {
                    count(Outcome::Failed);
                    self.warn(&request.profile, &error);
                    continue;
                }
            };
            let (outbound, metrics) = (self.outbound.clone(), metrics.clone());
            let timeout = target.timeout();
            let (warned, started) = (self.last_warning.clone(), self.started);
            let profile_name = request.profile.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let sent = tokio::time::timeout(timeout, async {
                    let response = outbound.send(copy).await.map_err(|e| e.to_string())?;
                    // Read the answer so the connection goes back to the pool.
                    let _ = response.into_body().collect().await;
                    Ok::<_, String>(())
                })
                .await;
                let outcome = match sent {
                    Ok(Ok(())) => Outcome::Sent,
                    Ok(Err(error)) => {
                        warn_at_most_every(&warned, started, &profile_name, &error);
                        Outcome::Failed
                    }
                    Err(_) => {
                        let error = format!("no answer within {} ms", timeout.as_millis());
                        warn_at_most_every(&warned, started, &profile_name, &error);
                        Outcome::Failed
                    }
                };
                metrics
                    .mirror_requests
                    .get_or_create(&MirrorLabels {
                        result: outcome.name(),
                    })
                    .inc();
            });
        }
    }

    /// The copy of `request` for `target`: the same method, headers (but
    /// hop-by-hop ones) and body when the target copies bodies, the Host the
    /// target names.
    fn build(
        &self,
        target: &MirrorTarget,
        request: &OriginalRequest,
    ) -> Result<Request<Full<Bytes>>, String> {
        let url = target_url(target, request)?;
        self.outbound.check_literal(&url, "a mirror target")?;
        let method = Method::from_bytes(request.method.as_bytes())
            .map_err(|_| format!("{:?} is not an HTTP method", request.method))?;
        let mut copy = Request::builder().method(method).uri(url.clone());
        for (name, value) in &request.headers {
            if !is_hop_by_hop(name) {
                copy = copy.header(name.as_str(), value.as_slice());
            }
        }
        let host = match &target.host {
            Some(host) => request.expand(host),
            None => url.authority().map(ToString::to_string).unwrap_or_default(),
        };
        copy = copy.header("Host", host);
        let body = match (&request.body, target.body) {
            (Some(body), true) => body.clone(),
            _ => Bytes::new(),
        };
        copy.body(Full::new(body))
            .map_err(|error| format!("the copy cannot be built: {error}"))
    }

    fn warn(&self, profile: &str, error: &str) {
        warn_at_most_every(&self.last_warning, self.started, profile, error);
    }
}

/// The target's URL for `request`: its variables expanded, and the
/// original path and query added when it names none (`http://mirror:8080`
/// mirrors `/a?b` to `http://mirror:8080/a?b`).
fn target_url(target: &MirrorTarget, request: &OriginalRequest) -> Result<Uri, String> {
    let mut text = request.expand(&target.url);
    let after_scheme = text.split_once("://").map_or("", |(_, rest)| rest);
    if !after_scheme.contains('/') {
        text.push_str(&request.path_and_query);
    }
    text.parse::<Uri>()
        .map_err(|error| format!("{text:?} is not a URL: {error}"))
}

fn warn_at_most_every(last: &AtomicU64, started: Instant, profile: &str, error: &str) {
    let now = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let previous = last.load(Ordering::Relaxed);
    let every = u64::try_from(WARN_EVERY.as_millis()).unwrap_or(u64::MAX);
    if (previous == 0 || now.saturating_sub(previous) >= every)
        && last
            .compare_exchange(previous, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(%profile, %error, "a mirror copy failed (the client's request is not affected; haptic_spoa_mirror_requests_total{{result=\"failed\"}} counts every one, this is logged at most every 10 s)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> OriginalRequest {
        OriginalRequest {
            profile: "p".into(),
            method: "POST".into(),
            tls: false,
            host: "app.test".into(),
            path_and_query: "/a?b=c".into(),
            client: None,
            headers: vec![
                ("content-length".into(), b"2".to_vec()),
                ("x-trace".into(), b"1".to_vec()),
            ],
            body: Some(Bytes::from_static(b"hi")),
        }
    }

    fn target(url: &str) -> MirrorTarget {
        serde_json::from_str(&format!(r#"{{"url": {url:?}}}"#)).expect("target")
    }

    #[test]
    fn a_url_without_a_path_gets_the_original_one() {
        assert_eq!(
            target_url(&target("http://mirror.test:8080"), &request())
                .expect("url")
                .to_string(),
            "http://mirror.test:8080/a?b=c"
        );
        assert_eq!(
            target_url(&target("https://m.test$request_uri"), &request())
                .expect("url")
                .to_string(),
            "https://m.test/a?b=c"
        );
        assert_eq!(
            target_url(&target("http://m.test/fixed"), &request())
                .expect("url")
                .to_string(),
            "http://m.test/fixed"
        );
    }

    #[tokio::test]
    async fn a_copy_keeps_method_headers_and_body_and_names_its_host() {
        let mirrorer = Mirrorer::new(
            Outbound::new(super::super::Reach {
                allow_loopback: false,
            })
            .expect("client"),
        );
        let mut with_host = target("http://10.0.0.1:8080");
        with_host.host = Some("shadow.$host".into());
        let copy = mirrorer.build(&with_host, &request()).expect("copy");
        assert_eq!(copy.method(), Method::POST);
        assert_eq!(copy.headers()["host"], "shadow.app.test");
        assert_eq!(copy.headers()["x-trace"], "1");
        assert!(copy.headers().get("content-length").is_none());
        let body = copy.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(body, Bytes::from_static(b"hi"));
        let mut no_body = target("http://10.0.0.1:8080");
        no_body.body = false;
        let copy = mirrorer.build(&no_body, &request()).expect("copy");
        let body = copy.into_body().collect().await.expect("body").to_bytes();
        assert!(body.is_empty());
        assert!(
            mirrorer
                .build(&target("http://127.0.0.1/"), &request())
                .is_err()
        );
        let every = super::super::profiles::Fraction::default();
        let none = super::super::profiles::Fraction {
            numerator: 0,
            denominator: 100,
        };
        assert!(every.draw() && !none.draw());
    }
}

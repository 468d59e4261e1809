//! The agent as HAProxy's SPOA (Stream Processing Offload Agent): HAProxy's
//! SPOE filter sends it a message per request over SPOP and reads back
//! variables that later rules act on. No Lua, no exception to the directive
//! policy: the configuration only names a message and tests variables.
//!
//! - [`connection`]: one SPOP connection from one HAProxy worker: the HELLO
//!   negotiation, NOTIFY frames answered concurrently (pipelining), ACKs
//!   carrying `set-var` actions, DISCONNECT.
//! - [`request`]: the original request as the message's arguments carry it.
//! - [`profiles`]: what each route asks for (the auth URL, the sign-in page,
//!   the headers to copy), read from the applied bundle's `spoa/*.json`
//!   files, so no user text is ever part of `haproxy.cfg`.
//! - [`reach`]: where an auth service may be (never the pod's loopback or a
//!   link-local address: the URL is a tenant's).
//! - [`outbound`]: the one pooled keep-alive HTTP client every message that
//!   calls out uses, under the [`reach`] rule.
//! - [`auth`]: the `haptic-auth` message: an HTTP sub-request to the auth
//!   service, a bounded cache, and the verdict as variables. Fails closed.
//! - [`mirror`]: the `haptic-mirror` message: copies of the request to the
//!   route's mirror targets, answered at once, sent in the background,
//!   bounded. Fails open.
//!
//! Every worker opens its own connections; an old worker keeps its own
//! until it leaves, and its messages are answered from the profiles of the
//! bundle it runs when that bundle is still the previous one (see
//! [`profiles::Profiles`]). docs/spoa.md is the contract libraries write
//! against.

pub mod auth;
pub mod connection;
pub mod mirror;
pub mod outbound;
pub mod profiles;
pub mod reach;
pub mod request;

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use thiserror::Error;
use tokio::net::TcpListener;

pub use auth::Authenticator;
pub use mirror::Mirrorer;
pub use outbound::Outbound;
pub use profiles::Profiles;
pub use reach::Reach;

/// The message HAProxy sends for external authentication (docs/spoa.md).
pub const AUTH_MESSAGE: &str = "haptic-auth";
/// The message HAProxy sends for request mirroring (docs/spoa.md).
pub const MIRROR_MESSAGE: &str = "haptic-mirror";

/// What the SPOA needs to answer messages, shared by every connection.
#[derive(Debug)]
pub struct Spoa {
    pub profiles: Profiles,
    pub auth: Authenticator,
    pub mirror: Mirrorer,
    pub metrics: SpoaMetrics,
}

impl Spoa {
    /// The SPOA answering from `profiles`, calling out under `reach`.
    /// Fails only when the TLS library offers no protocol version.
    pub fn new(
        profiles: Profiles,
        reach: Reach,
        metrics: SpoaMetrics,
    ) -> Result<Self, rustls::Error> {
        let outbound = Outbound::new(reach)?;
        Ok(Self {
            profiles,
            auth: Authenticator::new(outbound.clone()),
            mirror: Mirrorer::new(outbound),
            metrics,
        })
    }
}

/// The SPOA could not start.
#[derive(Debug, Error)]
pub enum SpoaError {
    #[error(
        "cannot listen for HAProxy's SPOE connections on {address}: {source}; choose a free \
         loopback address with --spoa-listen (the libraries' `agent.spoa-address` must match)"
    )]
    Listen {
        address: String,
        #[source]
        source: std::io::Error,
    },
}

/// How long the SPOA waits before trying a listener it could not bind again.
const BIND_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves SPOP on `address` until the process ends. An address it cannot
/// bind is logged and tried again every 5 s: the agent's main job (applying
/// bundles) goes on, and authenticated routes fail closed meanwhile.
pub async fn serve(spoa: Arc<Spoa>, address: String) {
    let listener = loop {
        match TcpListener::bind(&address).await {
            Ok(listener) => break listener,
            Err(source) => {
                let error = SpoaError::Listen {
                    address: address.clone(),
                    source,
                };
                tracing::error!(%error, "the SPOA is not serving; routes with external authentication answer 500 and mirrors get no copy until it does");
                tokio::time::sleep(BIND_RETRY).await;
            }
        }
    };
    tracing::info!(%address, "serving SPOP for HAProxy's SPOE filters");
    serve_on(spoa, listener).await;
}

/// Serves SPOP on `listener` until the process ends (`haptic test` binds
/// its own inside a case's network namespace).
pub async fn serve_on(spoa: Arc<Spoa>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection::serve(spoa.clone(), stream));
            }
            // Out of file descriptors and the like: wait, do not spin.
            Err(error) => {
                tracing::warn!(%error, "cannot accept an SPOE connection");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MessageLabels {
    pub message: String,
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MirrorLabels {
    pub result: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    pub result: &'static str,
}

/// The SPOA's metrics, `haptic_spoa_*` (docs/spoa.md).
#[derive(Debug, Clone)]
pub struct SpoaMetrics {
    pub messages: Family<MessageLabels, Counter>,
    pub auth_seconds: Histogram,
    pub auth_cache: Family<CacheLabels, Counter>,
    pub mirror_requests: Family<MirrorLabels, Counter>,
    pub connections: Gauge,
}

impl SpoaMetrics {
    /// Registers every metric in `registry` (a `haptic_spoa` sub-registry).
    pub fn register(registry: &mut Registry) -> Self {
        let messages = Family::<MessageLabels, Counter>::default();
        registry.register(
            "messages",
            "SPOE messages answered, by message and result (the verdict, or `error`)",
            messages.clone(),
        );
        // 0.25 ms .. ~8 s
        let auth_seconds = Histogram::new(exponential_buckets(0.00025, 2.0, 16));
        registry.register(
            "auth_request_duration_seconds",
            "Time of a sub-request to an auth service, cache hits excluded",
            auth_seconds.clone(),
        );
        let auth_cache = Family::<CacheLabels, Counter>::default();
        registry.register(
            "auth_cache_lookups",
            "Lookups in the external authentication cache, by hit or miss",
            auth_cache.clone(),
        );
        let mirror_requests = Family::<MirrorLabels, Counter>::default();
        registry.register(
            "mirror_requests",
            "Copies of requests for mirror targets, by what became of them",
            mirror_requests.clone(),
        );
        for result in mirror::Outcome::NAMES {
            mirror_requests.get_or_create_owned(&MirrorLabels { result });
        }
        let connections = Gauge::default();
        registry.register(
            "connections",
            "Open SPOP connections from HAProxy workers",
            connections.clone(),
        );
        for result in ["hit", "miss"] {
            auth_cache.get_or_create_owned(&CacheLabels { result });
        }
        for result in auth::Verdict::NAMES.iter().chain(&["error"]) {
            messages.get_or_create_owned(&MessageLabels {
                message: AUTH_MESSAGE.to_owned(),
                result,
            });
        }
        for result in ["copied", "error"] {
            messages.get_or_create_owned(&MessageLabels {
                message: MIRROR_MESSAGE.to_owned(),
                result,
            });
        }
        Self {
            messages,
            auth_seconds,
            auth_cache,
            mirror_requests,
            connections,
        }
    }
}

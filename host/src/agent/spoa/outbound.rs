//! The agent's one HTTP client to the services routes name (auth services,
//! mirror targets): pooled keep-alive connections over HTTP/1.1, TLS with
//! the system's CA certificates, and the [`Reach`] rule on every address,
//! resolved or literal. Every SPOA message that calls out goes through it,
//! so the pool and the rule are one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, Uri};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::reach::{CheckedResolver, Reach};

/// Headers of the original request never passed on: they describe the
/// client's connection or framing, not the request (hyper frames what it
/// sends itself).
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "content-length",
    "expect",
    "host",
];

/// Whether header `name` (any case) is one of [`HOP_BY_HOP`].
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|hop| hop.eq_ignore_ascii_case(name))
}

type HttpClient = Client<HttpsConnector<HttpConnector<CheckedResolver>>, Full<Bytes>>;

/// The pooled client and the rule on where it may connect.
#[derive(Clone)]
pub struct Outbound {
    client: HttpClient,
    reach: Reach,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("reach", &self.reach)
            .finish_non_exhaustive()
    }
}

impl Outbound {
    /// Fails only when the TLS library offers no protocol version.
    pub fn new(reach: Reach) -> Result<Self, rustls::Error> {
        let mut http = HttpConnector::new_with_resolver(CheckedResolver::new(reach));
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(5)));
        // The system's CA certificates (the image's ca-certificates), as
        // nginx verifies an https auth-url against its own bundle. Without
        // any, https services cannot be verified and their calls fail.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = match HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(provider.clone())
        {
            Ok(builder) => builder,
            Err(error) => {
                tracing::warn!(%error, "no system CA certificates: calls to https services (auth, mirrors) will fail");
                HttpsConnectorBuilder::new().with_tls_config(
                    rustls::ClientConfig::builder_with_provider(provider)
                        .with_safe_default_protocol_versions()?
                        .with_root_certificates(rustls::RootCertStore::empty())
                        .with_no_client_auth(),
                )
            }
        };
        let connector = builder.https_or_http().enable_http1().wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .build(connector);
        Ok(Self { client, reach })
    }

    /// Refuses a URL whose host is a literal address [`Reach`] refuses:
    /// such a host is connected to without the resolver, which judges names.
    /// `what` names the service in the error ("an auth service").
    pub fn check_literal(&self, url: &Uri, what: &str) -> Result<(), String> {
        let Some(ip) = url
            .host()
            .map(|host| host.trim_start_matches('[').trim_end_matches(']'))
            .and_then(|host| host.parse::<std::net::IpAddr>().ok())
        else {
            return Ok(());
        };
        match self.reach.refuses(ip) {
            Some(why) => Err(format!("{url}: {ip} is {why}, which {what} may not be at")),
            None => Ok(()),
        }
    }

    /// Sends `request`; the answer's head, its body still to read (read or
    /// drop it: a read body returns the connection to the pool).
    pub async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        self.client.request(request).await
    }
}

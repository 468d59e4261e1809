//! The controller's side of the agent API: one client per HAProxy pod.
//!
//! The bearer token is sent on every request and never appears in an error
//! or a log line.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::{Method, Request, StatusCode, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use thiserror::Error;

use super::api_tls::{self, ClientTls, TlsError};
use super::wire::{ApplyRequest, ApplyResponse, ErrorBody, PodState};

/// A failed call to an agent.
#[derive(Debug, Error)]
pub enum ClientError {
    #[error("agent {endpoint}: {detail}")]
    Transport { endpoint: String, detail: String },
    #[error("agent {endpoint} did not answer within {timeout:?}")]
    Timeout { endpoint: String, timeout: Duration },
    /// The agent answered with an error.
    #[error("agent {endpoint} answered {status} ({}): {}", body.code, body.message)]
    Status {
        endpoint: String,
        status: StatusCode,
        body: ErrorBody,
    },
    #[error("agent {endpoint} sent an answer this controller cannot read: {detail}")]
    Decode { endpoint: String, detail: String },
    #[error(transparent)]
    Tls(#[from] TlsError),
}

impl ClientError {
    /// The agent's error code, when it answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Status { body, .. } => Some(&body.code),
            _ => None,
        }
    }
}

type Connector = hyper_rustls::HttpsConnector<HttpConnector>;

/// A client for one agent.
#[derive(Clone)]
pub struct AgentClient {
    endpoint: String,
    token: Option<String>,
    timeout: Duration,
    client: Client<Connector, Full<Bytes>>,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl AgentClient {
    /// `endpoint` is `http://host:port` or `https://host:port`.
    pub fn new(
        endpoint: impl Into<String>,
        token: Option<String>,
        tls: Option<&ClientTls>,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let connector = match tls {
            Some(files) => builder.with_tls_config(api_tls::client_config(files)?),
            // Plain HTTP only; an https endpoint then fails with a clear error.
            None => builder.with_tls_config(
                rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::Config(e.to_string()))?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
            ),
        }
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
        Ok(Self {
            endpoint: endpoint.into().trim_end_matches('/').to_owned(),
            token,
            timeout,
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `GET /v1/state`.
    pub async fn state(&self) -> Result<PodState, ClientError> {
        self.call(Method::GET, "/v1/state", None, self.timeout)
            .await
    }

    /// `GET /v1/state?wait_for=<id>`: returns once every worker runs `id`
    /// or `wait` passes (read `converged`).
    pub async fn wait_converged(&self, id: &str, wait: Duration) -> Result<PodState, ClientError> {
        let path = format!(
            "/v1/state?wait_for={}&timeout_ms={}",
            percent_encode(id),
            wait.as_millis()
        );
        self.call(Method::GET, &path, None, wait + self.timeout)
            .await
    }

    /// `POST /v1/apply`.
    pub async fn apply(&self, request: &ApplyRequest) -> Result<ApplyResponse, ClientError> {
        let body = serde_json::to_vec(request).map_err(|e| ClientError::Decode {
            endpoint: self.endpoint.clone(),
            detail: e.to_string(),
        })?;
        self.call(Method::POST, "/v1/apply", Some(body), self.timeout)
            .await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let transport = |detail: String| ClientError::Transport {
            endpoint: self.endpoint.clone(),
            detail,
        };
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.endpoint))
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| transport(format!("building the request: {e}")))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| transport(describe(&e)))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| transport(e.to_string()))?
                .to_bytes();
            Ok::<_, ClientError>((status, bytes))
        };
        let (status, bytes) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| ClientError::Timeout {
                endpoint: self.endpoint.clone(),
                timeout,
            })??;
        if !status.is_success() {
            let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| ErrorBody {
                code: "unknown".to_owned(),
                message: String::from_utf8_lossy(&bytes).chars().take(500).collect(),
            });
            return Err(ClientError::Status {
                endpoint: self.endpoint.clone(),
                status,
                body,
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode {
            endpoint: self.endpoint.clone(),
            detail: e.to_string(),
        })
    }
}

/// The error and its causes in one line (hyper's own message is terse).
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn percent_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

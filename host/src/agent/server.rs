//! The agent's HTTP API (axum), over plain HTTP or TLS (rustls).
//!
//! `/v1/*` needs credentials: the bearer token from `--token-file`
//! (compared in constant time, re-read when the file changes so a rotated
//! Secret takes effect), and with `--tls-client-ca` a client certificate
//! signed by that CA. Both, when both are configured. Without them the
//! answer is 401 and nothing else. `/healthz`, `/readyz` and `/metrics` stay
//! open (probes carry no credentials) and reveal no configuration.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde::Deserialize;
use subtle::ConstantTimeEq as _;
use thiserror::Error;
use tokio::net::TcpListener;

use super::applier::{Applier, ApplyError};
use crate::protocol::api_tls::{self, TlsError};
use crate::protocol::wire::{ApplyRequest, ErrorBody, holds_private_key};

/// How the API listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub token_file: Option<PathBuf>,
    pub tls: Option<api_tls::ServerTls>,
}

/// Why the API could not start.
#[derive(Debug, Error)]
pub enum ServerError {
    #[error(
        "the agent needs credentials for its API: give --token-file, or --tls-client-ca with --tls-cert and --tls-key"
    )]
    NoCredentials,
    #[error("cannot read the token file {}: {source}", path.display())]
    TokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {} is empty; put the controller's bearer token in it", .0.display())]
    EmptyToken(PathBuf),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Whether the connection presented a client certificate the CA signed
/// (rustls has verified it by the time a request arrives).
#[derive(Debug, Clone, Copy)]
struct ClientCertificate(bool);

#[derive(Debug)]
struct Auth {
    token: Option<TokenFile>,
    require_client_certificate: bool,
}

/// The bearer token, re-read when the file's modification time changes.
#[derive(Debug)]
struct TokenFile {
    path: PathBuf,
    cached: Mutex<(Option<SystemTime>, Vec<u8>)>,
}

impl TokenFile {
    fn open(path: PathBuf) -> Result<Self, ServerError> {
        let file = Self {
            path,
            cached: Mutex::new((None, Vec::new())),
        };
        file.current()?;
        Ok(file)
    }

    fn current(&self) -> Result<Vec<u8>, ServerError> {
        let read_error = |source| ServerError::TokenFile {
            path: self.path.clone(),
            source,
        };
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .map_err(read_error)?;
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if cached.0 != Some(modified) {
            let token = std::fs::read(&self.path).map_err(read_error)?;
            let token = token.trim_ascii().to_vec();
            if token.is_empty() {
                return Err(ServerError::EmptyToken(self.path.clone()));
            }
            *cached = (Some(modified), token);
        }
        Ok(cached.1.clone())
    }
}

#[derive(Clone)]
struct AppState {
    applier: Arc<Applier>,
    auth: Arc<Auth>,
}

/// Serves the API until the process ends.
pub async fn serve(applier: Arc<Applier>, config: ServerConfig) -> Result<(), ServerError> {
    let token = config.token_file.clone().map(TokenFile::open).transpose()?;
    let require_client_certificate = config.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
    if token.is_none() && !require_client_certificate {
        return Err(ServerError::NoCredentials);
    }
    let state = AppState {
        applier,
        auth: Arc::new(Auth {
            token,
            require_client_certificate,
        }),
    };
    let app = router(state);
    let listener =
        TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Listen {
                address: config.listen,
                source,
            })?;
    tracing::info!(address = %config.listen, tls = config.tls.is_some(), "agent API listening");
    match config.tls {
        None => {
            let app = app.layer(Extension(ClientCertificate(false)));
            axum::serve(listener, app)
                .await
                .map_err(|source| ServerError::Listen {
                    address: config.listen,
                    source,
                })
        }
        Some(files) => {
            let acceptor = api_tls::acceptor(&files)?;
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let app = app.clone();
                tokio::spawn(async move {
                    let stream = match acceptor.accept(tcp).await {
                        Ok(stream) => stream,
                        Err(error) => {
                            tracing::info!(%peer, %error, "TLS handshake refused");
                            return;
                        }
                    };
                    let presented = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .is_some_and(|certs| !certs.is_empty());
                    let service = hyper_util::service::TowerToHyperService::new(
                        app.layer(Extension(ClientCertificate(presented))),
                    );
                    let connection = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    if let Err(error) = connection
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await
                    {
                        tracing::debug!(%peer, %error, "connection ended");
                    }
                });
            }
        }
    }
}

fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/v1/state", get(get_state))
        .route("/v1/apply", post(apply))
        // Bodies are checked against the agent's own limits; this only
        // stops a body so large that reading it is the attack.
        .layer(DefaultBodyLimit::max(256 * 1024 * 1024))
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .merge(api)
        .with_state(state)
}

async fn authenticate(
    State(state): State<AppState>,
    Extension(certificate): Extension<ClientCertificate>,
    headers: HeaderMap,
    request: Request,
    next: Next,
) -> Response {
    let auth = &state.auth;
    if auth.require_client_certificate && !certificate.0 {
        return unauthorized();
    }
    if let Some(token) = &auth.token {
        let expected = match token.current() {
            Ok(expected) => expected,
            Err(error) => {
                tracing::error!(%error, "cannot read the token file; refusing every request");
                return unauthorized();
            }
        };
        let offered = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or_default();
        if !bool::from(offered.ct_eq(&expected)) {
            return unauthorized();
        }
    }
    next.run(request).await
}

fn unauthorized() -> Response {
    error_response(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong credentials",
    )
}

fn error_response(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(ErrorBody {
            code: code.to_owned(),
            message: message.to_owned(),
        }),
    )
        .into_response()
}

impl IntoResponse for ApplyError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApplyError::BadId { .. } | ApplyError::BadPath(_) | ApplyError::Reserved(_) => {
                StatusCode::BAD_REQUEST
            }
            ApplyError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApplyError::StaleToken { .. } | ApplyError::TokenReused { .. } => StatusCode::CONFLICT,
            ApplyError::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApplyError::ReloadFailed(_) => StatusCode::BAD_GATEWAY,
            ApplyError::Haproxy(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApplyError::Validator(_) | ApplyError::Disk { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        };
        error_response(status, self.code(), &self.to_string())
    }
}

#[derive(Debug, Deserialize)]
struct StateQuery {
    /// Wait until every worker runs this id ...
    wait_for: Option<String>,
    /// ... for at most this long (capped at 60 s).
    timeout_ms: Option<u64>,
}

async fn get_state(
    State(state): State<AppState>,
    Query(query): Query<StateQuery>,
) -> Result<Response, ApplyError> {
    let pod = match query.wait_for {
        Some(id) => {
            let timeout = Duration::from_millis(query.timeout_ms.unwrap_or(10_000).min(60_000));
            state.applier.wait_converged(&id, timeout).await?
        }
        None => state.applier.state().await?,
    };
    Ok(Json(pod).into_response())
}

async fn apply(
    State(state): State<AppState>,
    body: axum::body::Bytes,
) -> Result<Response, ApplyError> {
    let request: ApplyRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            // serde quotes a mistyped value, which may be a key.
            let detail = error.to_string();
            let detail = if holds_private_key(&detail) {
                format!(
                    "a value at line {} column {} has the wrong type (not shown: it holds key material)",
                    error.line(),
                    error.column()
                )
            } else {
                detail
            };
            return Ok(error_response(
                StatusCode::BAD_REQUEST,
                "bad-request",
                &format!("the body is not an apply request: {detail}"),
            ));
        }
    };
    // The parsed request holds every byte the body did: the body goes now,
    // not when the apply (a reload may take seconds) has answered.
    drop(body);
    // The apply runs in a task of its own, which this handler only awaits.
    // hyper drops the handler's future when the requester goes away (the
    // controller's timeout during a slow reload, a dropped connection); an
    // apply dropped at one of its await points, say after the reload and
    // before `last-good` and the worker records are written, would leave the
    // pod half-applied, with the apply lock released for the next request.
    // A spawned task runs to its end whoever still waits for the answer.
    let id = request.bundle.id.clone();
    let applier = state.applier.clone();
    match tokio::spawn(async move { applier.apply(request).await }).await {
        Ok(response) => Ok(Json(response?).into_response()),
        // Only a panic ends the task early (the runtime is not shutting
        // down while it serves). The panic message is in the log, from the
        // panic hook; it is not repeated here, where it could quote input.
        Err(ended) => {
            tracing::error!(
                bundle = %id,
                panicked = ended.is_panic(),
                "the apply task ended without a result"
            );
            Ok(error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                &format!(
                    "the apply of bundle {id} stopped before it finished (the agent's log says why); \
                     GET /v1/state says what HAProxy runs, and pushing the bundle again applies it"
                ),
            ))
        }
    }
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.applier.ready().await {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.applier.metrics.encode(),
    )
        .into_response()
}

//! `haptic validator`: `haproxy -c` in a process that holds no credentials.
//!
//! HAProxy runs what it parses (`lua-load`), so the process that runs
//! `haproxy -c` on a cluster's configuration must not be able to read the
//! controller's service-account token. The chart runs `haptic validator` in
//! a container of its own, without the token, and the controller sends it
//! each render over a Unix socket in a shared emptyDir: the configuration
//! and its files go in, HAProxy's verdict and output come back, and the
//! controller parses them exactly as it parses a local `haproxy -c`.
//!
//! The wire is HTTP/1.1 with JSON bodies (axum and hyper, which the agent's
//! API already uses), `POST /v1/check`:
//! - request `{"config": "...", "files": [["maps/a.map", "..."], ...]}`;
//! - `200 {"accepted": bool, "output": "..."}`: HAProxy ran, and said so;
//! - `500 {"error": "..."}`: HAProxy could not be run (not found, timeout).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};

use super::{Validation, ValidationError, Validator, output};

/// How long the controller waits for one check (HAProxy's own timeout is
/// 30 s; the socket adds little).
const CHECK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(40);
/// How long a check waits for the validator to start listening.
const STARTUP_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

#[derive(Debug, Serialize, Deserialize)]
struct CheckRequest {
    config: String,
    files: Vec<(String, String)>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(untagged)]
enum CheckResponse {
    Ran { accepted: bool, output: String },
    Failed { error: String },
}

/// Why the validator could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on the validator socket {}: {source}; is its directory writable (an emptyDir shared with the controller)?", path.display())]
    Listen {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the validator stopped serving {}: {source}", path.display())]
    Serve {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Serves `haproxy -c` on the Unix socket `path` until the process ends.
/// The socket is made fresh (a stale one from an earlier run is removed)
/// and only its owner may connect (mode 0600): the controller runs as the
/// same user.
pub async fn serve(path: &Path, validator: Validator) -> Result<(), ServeError> {
    use std::os::unix::fs::PermissionsExt as _;
    let listen_error = |source| ServeError::Listen {
        path: path.to_owned(),
        source,
    };
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(listen_error(error)),
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(listen_error)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(listen_error)?;
    let validator = Arc::new(validator);
    let app = axum::Router::new()
        .route("/v1/check", axum::routing::post(check_handler))
        // A cluster's configuration with its certificates can be large; the
        // socket is the controller's alone.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(validator);
    tracing::info!(socket = %path.display(), "validator serving haproxy -c");
    axum::serve(listener, app)
        .await
        .map_err(|source| ServeError::Serve {
            path: path.to_owned(),
            source,
        })
}

async fn check_handler(
    axum::extract::State(validator): axum::extract::State<Arc<Validator>>,
    axum::Json(request): axum::Json<CheckRequest>,
) -> (axum::http::StatusCode, axum::Json<CheckResponse>) {
    let ran = tokio::task::spawn_blocking(move || {
        validator.validate_raw(&request.config, &request.files)
    })
    .await;
    match ran {
        Ok(Ok((accepted, output))) => (
            axum::http::StatusCode::OK,
            axum::Json(CheckResponse::Ran { accepted, output }),
        ),
        Ok(Err(error)) => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(CheckResponse::Failed {
                error: error.to_string(),
            }),
        ),
        Err(join) => (
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(CheckResponse::Failed {
                error: format!("the check panicked: {join}"),
            }),
        ),
    }
}

/// Validates through the validator on `socket`: the same [`Validation`] or
/// [`ValidationError::Refused`] a local `haproxy -c` gives. Blocking: the
/// controller calls it from `block_in_place`, as it runs a local check.
pub fn check(
    socket: &Path,
    config: &str,
    files: &[(String, String)],
) -> Result<Validation, ValidationError> {
    check_waiting(socket, config, files, STARTUP_WAIT)
}

/// [`check`], waiting at most `startup` for the validator to listen.
fn check_waiting(
    socket: &Path,
    config: &str,
    files: &[(String, String)],
    startup: std::time::Duration,
) -> Result<Validation, ValidationError> {
    let request = CheckRequest {
        config: config.to_owned(),
        files: files.to_vec(),
    };
    let unreachable = |detail: String| ValidationError::Validator {
        socket: socket.to_owned(),
        detail,
    };
    let body = serde_json::to_vec(&request).map_err(|e| unreachable(e.to_string()))?;
    let exchange = exchange(socket, body, startup);
    let answer = match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.block_on(exchange),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| unreachable(e.to_string()))?
            .block_on(exchange),
    }
    .map_err(unreachable)?;
    match serde_json::from_slice::<CheckResponse>(&answer)
        .map_err(|e| unreachable(format!("an answer that is not a check result: {e}")))?
    {
        CheckResponse::Ran {
            accepted: true,
            output,
        } => Ok(Validation {
            warnings: output::parse(&output),
            output,
        }),
        CheckResponse::Ran {
            accepted: false,
            output,
        } => Err(ValidationError::Refused {
            messages: output::parse(&output),
            output,
        }),
        CheckResponse::Failed { error } => Err(unreachable(error)),
    }
}

/// Connects, waiting while the socket is not there yet or nobody listens:
/// the validator container starts beside the controller's, not before it.
async fn connect(
    socket: &Path,
    startup: std::time::Duration,
) -> Result<tokio::net::UnixStream, String> {
    let deadline = tokio::time::Instant::now() + startup;
    loop {
        match tokio::net::UnixStream::connect(socket).await {
            Ok(stream) => return Ok(stream),
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(error) => return Err(format!("cannot connect: {error}")),
        }
    }
}

async fn exchange(
    socket: &Path,
    body: Vec<u8>,
    startup: std::time::Duration,
) -> Result<Bytes, String> {
    let work = async {
        let stream = connect(socket, startup).await?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        let driver = tokio::spawn(connection);
        let request = hyper::Request::post("/v1/check")
            .header("host", "validator")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        driver.abort();
        Ok(bytes)
    };
    tokio::time::timeout(CHECK_TIMEOUT, work)
        .await
        .map_err(|_| format!("no answer within {} s", CHECK_TIMEOUT.as_secs()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real validator on a socket and the real haproxy: an accepted
    /// configuration, a refused one parsed as a local check parses it, and
    /// a missing validator named with what to do.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_check_over_the_socket_is_the_check_run_locally() {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("validate.sock");
        let validator = Validator::from_env().expect("haproxy is installed");
        let server = tokio::spawn({
            let socket = socket.clone();
            async move { serve(&socket, validator).await }
        });
        while !socket.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let good = "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:18081\n  http-request set-var(txn.x) req.hdr(host),map_str(maps/m.map)\n";
        let files = vec![("maps/m.map".to_owned(), "a b\n".to_owned())];
        let accepted = tokio::task::block_in_place(|| check(&socket, good, &files));
        assert!(accepted.is_ok(), "{accepted:?}");
        let bad = good.replace("map_str(", "map_nope(");
        let local = Validator::from_env()
            .expect("haproxy")
            .validate(&bad, &files)
            .expect_err("refused locally");
        let remote = tokio::task::block_in_place(|| check(&socket, &bad, &files))
            .expect_err("refused remotely");
        assert!(
            matches!(remote, ValidationError::Refused { .. }),
            "{remote}"
        );
        // Pids differ between the two runs; the parsed messages do not.
        let texts = |error: &ValidationError| match error {
            ValidationError::Refused { messages, .. } => messages
                .iter()
                .map(|m| format!("{:?} {:?} {:?}", m.level, m.line, m.file))
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        assert_eq!(texts(&remote), texts(&local));
        server.abort();
        let gone = tokio::task::block_in_place(|| {
            let brief = std::time::Duration::from_millis(300);
            check_waiting(&dir.path().join("missing.sock"), good, &files, brief)
        })
        .expect_err("no validator");
        let text = gone.to_string();
        assert!(text.contains("missing.sock"), "{text}");
        assert!(text.contains("haptic validator"), "{text}");
    }
}

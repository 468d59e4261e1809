//! The controller's HTTP surface: `/metrics` (OpenMetrics), `/healthz`,
//! `/readyz` (every watch listed and the first render done), `/status`
//! where the controller keeps status itself, and the read-only
//! `/debug/fleet` and `/debug/gates` that `haptic status` reads.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;

use super::State;

/// Status the controller keeps itself rather than on objects in a cluster
/// (`haptic run`'s in-memory objects), as `GET /status` shows it.
pub trait StatusView: Send + Sync {
    /// Every object's status, as JSON.
    fn snapshot(&self) -> Value;
}

/// Serves until the listener fails.
pub(super) async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    status_view: Option<Arc<dyn StatusView>>,
) {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get({
                let state = state.clone();
                move || async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        state.metrics.encode(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/debug/fleet",
            get({
                let state = state.clone();
                move || async move {
                    axum::Json(state.debug.fleet_report(state.metrics.leader.get() == 1))
                }
            }),
        )
        .route(
            "/debug/gates",
            get({
                let state = state.clone();
                move || async move {
                    axum::Json(state.debug.gates_report(state.metrics.leader.get() == 1))
                }
            }),
        )
        .route(
            "/status",
            get(move || async move {
                match status_view {
                    Some(view) => axum::Json(view.snapshot()).into_response(),
                    None => (
                        StatusCode::NOT_FOUND,
                        "status is on the objects in the cluster (kubectl get -o yaml)",
                    )
                        .into_response(),
                }
            }),
        )
        .route(
            "/readyz",
            get(move || async move {
                if state.ready.load(Ordering::Relaxed) {
                    (StatusCode::OK, "ready")
                } else {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "waiting for the first list of every watch and the first render",
                    )
                }
            }),
        );
    if let Err(error) = axum::serve(listener, app).await {
        tracing::error!(%error, "serving /metrics and probes");
    }
}

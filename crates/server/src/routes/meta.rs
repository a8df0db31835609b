//! Meta endpoints: health and the OpenAPI document (unauthenticated), and Prometheus metrics
//! (behind a token unless the server runs with `--public-metrics`).

use crate::AppState;
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/healthz",
            get_with(healthz, |op| {
                op.id("healthz").summary("Liveness: 200 ok when serving").tag("meta").response::<200, String>()
            }),
        )
        .api_route(
            "/api/openapi.json",
            get_with(openapi, |op| {
                op.id("openapi")
                    .summary("This OpenAPI 3.1 document")
                    .tag("meta")
                    .response::<200, axum::Json<serde_json::Value>>()
            }),
        )
}

/// `/metrics`, which the router places behind authentication unless `--public-metrics`.
pub fn metrics_routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route(
        "/metrics",
        get_with(metrics, |op| {
            op.id("metrics").summary("Prometheus text metrics").tag("meta").response::<200, String>()
        }),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut ops = BTreeMap::new();
    if let Ok(counts) = state.store.count_operations() {
        for (status, n) in counts {
            ops.insert(status.as_str().to_string(), n);
        }
    }
    let calls = state.sim.as_ref().map(|s| s.stats()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render(&ops, &calls)).into_response()
}

async fn openapi(State(state): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], state.openapi_json().to_string()).into_response()
}

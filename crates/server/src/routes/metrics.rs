//! GPU utilization, GPU memory and training throughput over time for a node or a training job
//! (`instantstart_core::api::metrics`): the series the UI plots, the CLI prints and the MCP tool
//! `metrics_get` returns. A read; no operation.

use super::{ApiPath, ApiQuery, errors};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::{Extension, State};
use instantstart_core::api::metrics::{self, MetricsError, MetricsQuery, MetricsView};
use instantstart_core::validate::ValidationError;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MetricsPath {
    /// InstantStart cluster name.
    pub cluster: String,
}

impl From<MetricsError> for ApiError {
    fn from(e: MetricsError) -> Self {
        match e {
            MetricsError::Engine(e) => e.into(),
            MetricsError::Read(e) => e.into(),
        }
    }
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route(
        "/api/clusters/{cluster}/metrics",
        get_with(get, |op| {
            errors(
                op.id("metrics_get")
                    .summary(
                        "GPU utilization and GPU memory per GPU of a node (DCGM), or of a training job (the mean \
                         over its GPUs) with its throughput and loss, over a window (?node= or ?job=, since, step)",
                    )
                    .tag("hyperpod"),
            )
            .response::<200, Json<MetricsView>>()
            .response::<404, ProblemJson>()
            .response::<409, ProblemJson>()
            .response_with::<422, ProblemJson, _>(|r| r.description("This server's provider has no metrics source"))
            .response_with::<502, ProblemJson, _>(|r| r.description("The cluster's metrics could not be read"))
        }),
    )
}

async fn get(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<MetricsPath>,
    ApiQuery(q): ApiQuery<MetricsQuery>,
) -> Result<Json<MetricsView>, ApiError> {
    q.check()?;
    let Some(source) = state.metrics_source.as_deref() else {
        return Err(ApiError::Validation(ValidationError::unprocessable(
            "provider",
            "metrics are read from the simulated cloud's telemetry; reading a real cluster's (its DCGM exporter, or \
             Amazon Managed Service for Prometheus) is not built yet",
        )));
    };
    let access = principal.kube_access(&p.cluster, &state.namespace_policy);
    Ok(Json(metrics::get(state.store.as_ref(), state.kube.as_ref(), source, &p.cluster, &access, &q).await?))
}

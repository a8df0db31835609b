//! GPU utilization, GPU memory and training throughput over time for a node or a training job
//! (`instantstart_core::api::metrics`): the series the UI plots, the CLI prints and the MCP tool
//! `metrics_get` returns. A read; no operation. The source is the simulated telemetry on
//! `--provider sim`; on `--provider aws` the cluster's Amazon Managed Service for Prometheus
//! workspace when its observability add-on is on, else its DCGM exporters
//! (`instantstart_core::metrics_choice`).

use super::{ApiPath, ApiQuery, errors};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::{Extension, State};
use instantstart_core::api::metrics::{self, MetricsQuery, MetricsView};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MetricsPath {
    /// InstantStart cluster name.
    pub cluster: String,
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
            .response_with::<409, ProblemJson, _>(|r| {
                r.description(
                    "The job name is in several namespaces, or a node runs no DCGM exporter (the detail names what \
                     to install)",
                )
            })
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
    let source = state.metrics_source.as_ref();
    let access = principal.kube_access(&p.cluster, &state.namespace_policy);
    Ok(Json(metrics::get(state.store.as_ref(), state.kube.as_ref(), source, &p.cluster, &access, &q).await?))
}

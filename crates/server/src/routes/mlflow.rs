//! Training history: SageMaker managed MLflow tracking servers, their runs and metric histories.
//!
//! The handlers translate: reads and rules are `instantstart_core::api::tracking_servers`
//! (readiness, `run_id` and query validation, default region); creating a server
//! is the durable `create_tracking_server` operation and deleting one `delete_tracking_server`
//! (the server, then the IAM role InstantStart created for it; an unknown server is `404`, one
//! InstantStart did not create `422`). Servers are regional: `?region=` (default: the server's
//! default region) picks the region, and a create request without `cluster` or `region` gets the
//! default region.

use super::page::{PageParams, Paged};
use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, errors, mutation, submit};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{delete_with, get_with};
use axum::Json;
use axum::extract::{Extension, State};
use axum::response::Response;
use instantstart_core::api::tracking_servers::{self as servers, CreateTrackingServerRequest, TrackingServer};
use instantstart_core::operation::OperationKind;
use instantstart_core::page::Order;
use instantstart_core::provider::{MlflowRun, RunMetrics};
use schemars::JsonSchema;
use serde::Deserialize;

// Not `deny_unknown_fields`: the tracking-server list reads its page's `limit` and `cursor` from
// the same query string.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct RegionQuery {
    /// AWS region of the tracking servers (default: the server's default region).
    #[serde(default)]
    pub region: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ServerPath {
    /// Tracking server name.
    pub name: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunPath {
    /// Tracking server name.
    pub name: String,
    /// MLflow run id.
    pub run_id: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteServerQuery {
    /// Return the plan without changing anything.
    #[serde(default)]
    pub dry_run: bool,
    /// AWS region of the tracking server (default: the server's default region).
    #[serde(default)]
    pub region: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunsQuery {
    /// Experiment name (default: every experiment).
    #[serde(default)]
    pub experiment: Option<String>,
    /// Most runs, newest first (1-1000, default 100).
    #[serde(default)]
    pub max: Option<u32>,
    #[serde(default)]
    pub region: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsQuery {
    /// Metric keys separated by commas (default: `loss,throughput`).
    #[serde(default)]
    pub keys: Option<String>,
    #[serde(default)]
    pub region: Option<String>,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/mlflow/servers",
            get_with(list, |op| {
                errors(
                    op.id("mlflow_servers")
                        .summary("SageMaker managed MLflow tracking servers of a region, with status and URL")
                        .tag("mlflow"),
                )
                .response::<200, Paged<TrackingServer>>()
            })
            .post_with(create, |op| {
                mutation(
                    op.id("mlflow_create_server")
                        .summary("Create a tracking server: IAM role for the artifact bucket → CreateMlflowTrackingServer (about 20 minutes)")
                        .tag("mlflow"),
                )
                // The cluster whose bucket holds the artifacts is not registered.
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/mlflow/servers/{name}",
            delete_with(delete, |op| {
                mutation(
                    op.id("mlflow_delete_server")
                        .summary("Delete a tracking server (it bills while it exists), then the IAM role InstantStart created for it; only servers InstantStart created")
                        .tag("mlflow"),
                )
                // No tracking server of that name in the region (a 422 when it is not InstantStart's).
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/mlflow/servers/{name}/runs",
            get_with(runs, |op| {
                errors(
                    op.id("mlflow_runs")
                        .summary("Runs of a tracking server, newest first, with their latest metrics and parameters")
                        .tag("mlflow"),
                )
                .response::<200, Json<Vec<MlflowRun>>>()
                .response::<404, ProblemJson>()
                .response::<409, ProblemJson>()
            }),
        )
        .api_route(
            "/api/mlflow/servers/{name}/runs/{run_id}/metrics",
            get_with(metrics, |op| {
                errors(
                    op.id("mlflow_metrics")
                        .summary("Metric histories of a run (default loss and throughput), ordered by step")
                        .tag("mlflow"),
                )
                .response::<200, Json<RunMetrics>>()
                .response::<404, ProblemJson>()
                .response::<409, ProblemJson>()
            }),
        )
}

fn region(state: &AppState, region: Option<String>) -> Result<String, ApiError> {
    Ok(servers::region(region, &state.default_region)?)
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
    paging: PageParams,
) -> Result<Paged<TrackingServer>, ApiError> {
    let request = paging.request("tracking_servers", 1)?;
    let region = region(&state, q.region)?;
    let servers = servers::list(state.aws.as_ref(), &region).await?;
    paging.in_memory(servers, "tracking_servers", Order::Ascending, |s| vec![s.name.clone()], &request)
}

async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(body, raw): ApiBody<CreateTrackingServerRequest>,
) -> Result<Response, ApiError> {
    let request = servers::create_request(&body, raw, &state.default_region);
    submit(&state, OperationKind::CreateTrackingServer, request, &principal, q.dry_run, key).await
}

async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ServerPath>,
    ApiQuery(q): ApiQuery<DeleteServerQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    let request = servers::delete_request(p.name, q.region, &state.default_region)?;
    submit(&state, OperationKind::DeleteTrackingServer, request, &principal, q.dry_run, key).await
}

async fn runs(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<ServerPath>,
    ApiQuery(q): ApiQuery<RunsQuery>,
) -> Result<Json<Vec<MlflowRun>>, ApiError> {
    let region = region(&state, q.region)?;
    Ok(Json(servers::runs(state.aws.as_ref(), &region, &p.name, q.experiment, q.max).await?))
}

async fn metrics(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<RunPath>,
    ApiQuery(q): ApiQuery<MetricsQuery>,
) -> Result<Json<RunMetrics>, ApiError> {
    let region = region(&state, q.region)?;
    let (aws, keys) = (state.aws.as_ref(), q.keys.as_deref());
    Ok(Json(servers::metrics(aws, &region, &p.name, &p.run_id, keys).await?))
}

//! Cluster lifecycle: create (the full pipeline), import, list, get, select active, delete.

use super::page::{PageParams, Paged};
use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, errors, mutation, submit_to};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with};
use axum::Json;
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use instantstart_core::api;
use instantstart_core::spec::ClusterCreateRequest;
use instantstart_core::store::CLUSTERS_LIST;
use schemars::JsonSchema;
use serde::Deserialize;

use instantstart_core::api::clusters::{ActiveCluster, ClusterDetail, ClusterView, ImportClusterRequest};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClusterPath {
    /// InstantStart cluster name.
    pub cluster: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct DeleteQuery {
    /// Return the plan without changing anything.
    #[serde(default)]
    pub dry_run: bool,
    /// Also delete the shared bucket if InstantStart created it (only when empty: objects are
    /// never deleted), after the cluster's tracking servers.
    #[serde(default)]
    pub delete_bucket: bool,
    /// Keep the SageMaker managed MLflow tracking servers created for the cluster (default:
    /// they are deleted with it, with the IAM role InstantStart created for each). Their
    /// artifacts stay in the shared bucket.
    #[serde(default)]
    pub keep_tracking_servers: bool,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/clusters",
            get_with(list, |op| {
                errors(
                    op.id("cluster_list")
                        .summary("List clusters by name (paged: `limit`, `cursor`, `Link: rel=\"next\"`)")
                        .tag("clusters")
                        .response::<200, Paged<ClusterView>>(),
                )
            })
            .post_with(create, |op| {
                mutation(
                    op.id("cluster_create")
                        .summary("Create a cluster: network → EKS → active → add-ons → HyperPod → storage")
                        .tag("clusters"),
                )
            }),
        )
        .api_route(
            "/api/clusters/import",
            post_with(import, |op| {
                mutation(
                    op.id("cluster_import").summary("Import an existing EKS (and HyperPod) cluster").tag("clusters"),
                )
            }),
        )
        .api_route(
            "/api/clusters/{cluster}",
            get_with(get, |op| {
                errors(op.id("cluster_get").summary("A cluster with live EKS/HyperPod state and nodes").tag("clusters"))
                    .response::<200, Json<ClusterDetail>>()
                    .response::<404, ProblemJson>()
            })
            .delete_with(delete, |op| {
                mutation(
                    op.id("cluster_delete")
                        .summary("Delete a cluster and its MLflow tracking servers (reverse pipeline; imported clusters are only forgotten)")
                        .tag("clusters"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/active-cluster",
            get_with(get_active, |op| {
                errors(
                    op.id("active_cluster_get")
                        .summary("The active cluster")
                        .tag("clusters")
                        .response::<200, Json<ActiveCluster>>(),
                )
            })
            .put_with(set_active, |op| {
                errors(op.id("active_cluster_set").summary("Select the active cluster (audited)").tag("clusters"))
                    .response::<200, Json<ActiveCluster>>()
                    .response::<404, ProblemJson>()
            }),
        )
}

async fn list(State(state): State<AppState>, paging: PageParams) -> Result<Paged<ClusterView>, ApiError> {
    let request = paging.request(CLUSTERS_LIST, 1)?;
    Ok(paging.respond(api::clusters::page(state.store.as_ref(), &request)?))
}

async fn get(State(state): State<AppState>, ApiPath(p): ApiPath<ClusterPath>) -> Result<Json<ClusterDetail>, ApiError> {
    Ok(Json(api::clusters::get(state.store.as_ref(), state.aws.as_ref(), &state.live_clusters, &p.cluster).await?))
}

async fn create(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(_, raw): ApiBody<ClusterCreateRequest>,
) -> Result<Response, ApiError> {
    let submission = api::clusters::create(raw, &state.default_region, &state.eks_public_access_cidrs);
    submit_to(&state, submission, &principal, q.dry_run, key).await
}

async fn import(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(_, raw): ApiBody<ImportClusterRequest>,
) -> Result<Response, ApiError> {
    submit_to(&state, api::clusters::import(raw, &state.default_region), &principal, q.dry_run, key).await
}

async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DeleteQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    let submission = api::clusters::delete(p.cluster, q.delete_bucket, q.keep_tracking_servers);
    submit_to(&state, submission, &principal, q.dry_run, key).await
}

async fn get_active(State(state): State<AppState>) -> Result<Json<ActiveCluster>, ApiError> {
    Ok(Json(api::clusters::active(state.store.as_ref())?))
}

async fn set_active(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiBody(selection, _): ApiBody<ActiveCluster>,
) -> Result<Response, ApiError> {
    Ok(Json(api::clusters::set_active(state.store.as_ref(), principal.actor(), selection)?).into_response())
}

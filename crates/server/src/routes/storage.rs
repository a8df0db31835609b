//! Shared storage and model downloads: the cluster's bucket (how pods mount it, its listing),
//! its FSx for Lustre volumes (`create_file_system` and `delete_file_system`: the file system
//! with its static volume and claim `fsx-<name>`; `storage` lists both kinds) and Hugging Face →
//! bucket download Jobs, which can be deleted (`delete_download`: the Job and its pods go, the
//! files it downloaded stay in the bucket).

use super::jobs::{ClusterPath, WorkloadBody, caller, respond, workload_mutation};
use super::page::{PageParams, Paged};
use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, errors, mutation, submit_to};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{delete_with, get_with, post_with};
use axum::Json;
use axum::extract::{Extension, State};
use axum::response::Response;
use instantstart_core::api::downloads::DownloadSummary;
use instantstart_core::api::storage::FileSystemBody;
use instantstart_core::api::storage::{StorageListing, StorageSummary};
use instantstart_core::api::{self, downloads};
use instantstart_core::page::Order;
use instantstart_recipes::download::ModelDownloadParams;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DownloadPath {
    /// InstantStart cluster name.
    pub cluster: String,
    /// Download name: the download Job's name (as listed).
    pub download: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FileSystemPath {
    /// InstantStart cluster name.
    pub cluster: String,
    /// The FSx volume's name on the cluster (its claim is `fsx-<name>`).
    pub name: String,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrefixQuery {
    /// Key prefix ending with `/` (default: the bucket's top level).
    #[serde(default)]
    pub prefix: String,
    /// Where to continue: the previous page's `next_cursor` (opaque; for the same prefix).
    /// Absent: the first page.
    #[serde(default)]
    pub cursor: Option<String>,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/clusters/{cluster}/storage",
            get_with(storage, |op| {
                errors(
                    op.id("storage_list")
                        .summary(
                            "The cluster's storage: the shared bucket (claim, mount path, status, top-level entries) \
                             and its FSx for Lustre volumes",
                        )
                        .tag("storage"),
                )
                .response::<200, Json<Vec<StorageSummary>>>()
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/storage/fsx",
            post_with(create_file_system, |op| {
                mutation(
                    op.id("storage_fsx_create")
                        .summary(
                            "Create an FSx for Lustre file system in the HyperPod nodes' subnet, the FSx CSI driver \
                             add-on, and the static volume and claim fsx-<name> pods mount",
                        )
                        .tag("storage"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/storage/fsx/{name}",
            delete_with(delete_file_system, |op| {
                mutation(
                    op.id("storage_fsx_delete")
                        .summary(
                            "Delete an FSx volume: its claim and volume, then the file system (its data goes with it)",
                        )
                        .tag("storage"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/storage/objects",
            get_with(objects, |op| {
                errors(op.id("storage_objects").summary("One level of the shared bucket under a prefix").tag("storage"))
                    .response::<200, Json<StorageListing>>()
                    .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/downloads",
            get_with(list_downloads, |op| {
                errors(op.id("download_list").summary("Model downloads with their phase").tag("storage"))
                    .response::<200, Paged<DownloadSummary>>()
                    .response::<404, ProblemJson>()
            })
            .post_with(download, |op| {
                workload_mutation(
                    op.id("model_download")
                        .summary("Download a Hugging Face repository into the shared bucket (a cluster Job)")
                        .tag("storage"),
                )
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/downloads/{download}",
            delete_with(delete_download, |op| {
                workload_mutation(
                    op.id("download_delete")
                        .summary(
                            "Delete a model download: its Job and pods (a running download stops); the files it \
                             downloaded stay in the shared bucket",
                        )
                        .tag("storage"),
                )
            }),
        )
}

async fn storage(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<ClusterPath>,
) -> Result<Json<Vec<StorageSummary>>, ApiError> {
    Ok(Json(api::storage::list(state.store.as_ref(), state.aws.as_ref(), state.kube.as_ref(), &p.cluster).await?))
}

async fn create_file_system(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(body, _): ApiBody<FileSystemBody>,
) -> Result<Response, ApiError> {
    submit_to(&state, api::storage::create_file_system(p.cluster, body), &principal, q.dry_run, key).await
}

async fn delete_file_system(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<FileSystemPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    submit_to(&state, api::storage::delete_file_system(p.cluster, p.name), &principal, q.dry_run, key).await
}

async fn objects(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<PrefixQuery>,
) -> Result<Json<StorageListing>, ApiError> {
    let cluster = api::clusters::resolve(state.store.as_ref(), &p.cluster)?;
    Ok(Json(api::storage::objects(state.aws.as_ref(), &cluster, &q.prefix, q.cursor.as_deref()).await?))
}

async fn list_downloads(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    paging: PageParams,
) -> Result<Paged<DownloadSummary>, ApiError> {
    let request = paging.request("downloads", 2)?;
    let target = api::clusters::resolve(state.store.as_ref(), &p.cluster)?.kube;
    let access = principal.kube_access(&p.cluster, &state.namespace_policy);
    let downloads = downloads::list_downloads_as(state.kube.as_ref(), &target, &access).await?;
    paging.in_memory(downloads, "downloads", Order::Ascending, |d| vec![d.namespace.clone(), d.name.clone()], &request)
}

async fn download(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    WorkloadBody(body, _): WorkloadBody<ModelDownloadParams>,
) -> Result<Response, ApiError> {
    let caller = caller(&state, &principal, &p.cluster);
    Ok(respond(downloads::submit(&state.engine, &p.cluster, body, &caller, q.dry_run, key).await?))
}

async fn delete_download(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<DownloadPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    let target = api::clusters::resolve(state.store.as_ref(), &p.cluster)?.kube;
    let caller = caller(&state, &principal, &p.cluster);
    let (engine, store, kube) = (&state.engine, state.store.as_ref(), state.kube.as_ref());
    let submitted =
        downloads::delete(engine, store, kube, &target, &p.cluster, &p.download, &caller, q.dry_run, key).await?;
    Ok(respond(submitted))
}

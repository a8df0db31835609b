//! Operations: list, get, retry a failed step, cancel; and the audit log.

use super::page::{PageParams, Paged};
use super::{ApiPath, ApiQuery, errors};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use instantstart_core::operation::{AuditEntry, Operation, OperationId, OperationStatus};
use instantstart_core::store::{AUDIT_LIST, OPERATIONS_LIST, OperationFilter};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListQuery {
    /// Only operations on this target, e.g. `cluster/demo`.
    pub target: Option<String>,
    /// Only operations with this status.
    pub status: Option<OperationStatus>,
    /// `true`: the archived operations instead (finished before the retention window,
    /// `--operation-retention-days`; docs/store.md "Archive"). Default `false`.
    #[serde(default)]
    pub archived: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct OperationPath {
    pub id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StepPath {
    pub id: String,
    /// Step key, e.g. `eks_cluster` or `addon:cert-manager`.
    pub step: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AuditQuery {
    /// Only entries about this target, e.g. `cluster/demo`.
    pub target: Option<String>,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/operations",
            get_with(list, |op| {
                errors(
                    op.id("operation_list")
                        .summary("List operations, newest first (paged: `limit`, `cursor`, `Link: rel=\"next\"`)")
                        .tag("operations")
                        .response::<200, Paged<Operation>>(),
                )
            }),
        )
        .api_route(
            "/api/operations/{id}",
            get_with(get, |op| {
                errors(
                    op.id("operation_get")
                        .summary("An operation with every step: phase, attempts, timings, error")
                        .tag("operations"),
                )
                .response::<200, Json<Operation>>()
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/operations/{id}/steps/{step}/retry",
            post_with(retry, |op| {
                errors(
                    op.id("operation_retry_step")
                        .summary("Retry one failed step (observes before it submits again)")
                        .tag("operations"),
                )
                .response::<202, Json<Operation>>()
                .response::<404, ProblemJson>()
                .response::<409, ProblemJson>()
            }),
        )
        .api_route(
            "/api/operations/{id}/cancel",
            post_with(cancel, |op| {
                errors(
                    op.id("operation_cancel")
                        .summary("Cancel a running operation (stops between provider calls; no rollback)")
                        .tag("operations"),
                )
                .response::<202, Json<Operation>>()
                .response::<404, ProblemJson>()
                .response::<409, ProblemJson>()
            }),
        )
        .api_route(
            "/api/audit",
            get_with(audit, |op| {
                errors(
                    op.id("audit_list")
                        .summary("Audit log: who did what, when, with which diff")
                        .tag("operations")
                        .response::<200, Paged<AuditEntry>>(),
                )
            }),
        )
}

async fn list(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<ListQuery>,
    paging: PageParams,
) -> Result<Paged<Operation>, ApiError> {
    let request = paging.request(OPERATIONS_LIST, 2)?;
    let filter = OperationFilter { target: q.target, status: q.status, limit: None, archived: Some(q.archived) };
    Ok(paging.respond(state.store.page_operations(&filter, &request)?))
}

async fn get(State(state): State<AppState>, ApiPath(p): ApiPath<OperationPath>) -> Result<Json<Operation>, ApiError> {
    Ok(Json(state.engine.get(&OperationId(p.id))?))
}

async fn retry(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<StepPath>,
) -> Result<(StatusCode, Json<Operation>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(state.engine.retry_step(&OperationId(p.id), &p.step, principal.actor())?)))
}

async fn cancel(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<OperationPath>,
) -> Result<(StatusCode, Json<Operation>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(state.engine.cancel(&OperationId(p.id), principal.actor())?)))
}

async fn audit(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<AuditQuery>,
    paging: PageParams,
) -> Result<Paged<AuditEntry>, ApiError> {
    let request = paging.request(AUDIT_LIST, 2)?;
    Ok(paging.respond(state.store.page_audit(q.target.as_deref(), &request)?))
}

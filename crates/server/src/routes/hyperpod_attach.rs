//! HyperPod on an existing EKS-only cluster: `POST /api/clusters/{cluster}/hyperpod` adds a
//! HyperPod cluster (the `hyperpod` part of a create request), `DELETE` removes it and what
//! InstantStart made for it, leaving EKS and its add-ons (`instantstart_core::api::hyperpod`).

use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, mutation, submit_to};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::post_with;
use axum::extract::{Extension, State};
use axum::response::Response;
use instantstart_core::api;
use instantstart_core::api::hyperpod::AddHyperPodBody;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HyperPodPath {
    /// InstantStart cluster name.
    pub cluster: String,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route(
        "/api/clusters/{cluster}/hyperpod",
        post_with(add, |op| {
            mutation(
                op.id("hyperpod_add")
                    .summary(
                        "Add a HyperPod cluster to an EKS-only cluster: missing dependencies → execution role, \
                         lifecycle script, compute subnets → HyperPod → storage (409 when it has one)",
                    )
                    .tag("hyperpod"),
            )
            .response::<404, ProblemJson>()
        })
        .delete_with(remove, |op| {
            mutation(
                op.id("hyperpod_remove")
                    .summary(
                        "Remove the cluster's HyperPod cluster and what InstantStart made for it; EKS and its add-ons \
                         stay (409 when it has none)",
                    )
                    .tag("hyperpod"),
            )
            .response::<404, ProblemJson>()
        }),
    )
}

async fn add(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<HyperPodPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(body, _): ApiBody<AddHyperPodBody>,
) -> Result<Response, ApiError> {
    submit_to(&state, api::hyperpod::add(p.cluster, body), &principal, q.dry_run, key).await
}

async fn remove(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<HyperPodPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    submit_to(&state, api::hyperpod::remove(p.cluster), &principal, q.dry_run, key).await
}

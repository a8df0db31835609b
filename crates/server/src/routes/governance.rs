//! Task governance of a cluster (`/api/clusters/{cluster}/governance`): GET reads what SageMaker
//! and EKS really hold (the add-on, the scheduler config, the teams' quotas) as the same spec
//! PUT takes, with the Kueue names jobs use; PUT sets the whole desired state and answers the
//! operation (or, with `dry_run`, the steps and the explicit diff; an equal state records
//! nothing). Translation only: the read is `instantstart_core::api::governance`, rules and diff
//! live in `instantstart_core::governance`.

use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, PlanOrNoChange, errors, mutation, submit_to};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::{Extension, State};
use axum::response::Response;
use instantstart_core::api;
use instantstart_core::governance::{GovernanceSpec, GovernanceView};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GovernancePath {
    /// Cluster name.
    pub cluster: String,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route(
        "/api/clusters/{cluster}/governance",
        get_with(get_governance, |op| {
            errors(
                op.id("governance_get")
                    .summary("Task governance as it really is: priority classes, fair share, teams and their quotas")
                    .tag("governance"),
            )
            .response::<200, Json<GovernanceView>>()
            .response::<404, ProblemJson>()
            .response_with::<422, ProblemJson, _>(|r| r.description("The cluster has no HyperPod cluster"))
        })
        .put_with(set_governance, |op| {
            mutation(
                op.id("governance_set")
                    .summary(
                        "Set the whole task governance of a cluster (teams absent from the body lose their quota; \
                         enabled: false removes it all)",
                    )
                    .tag("governance"),
            )
            .response_with::<200, Json<PlanOrNoChange>, _>(|r| {
                r.description("Dry run: the plan, nothing changed; or already in this state: nothing was done")
            })
            .response::<404, ProblemJson>()
        }),
    )
}

async fn get_governance(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<GovernancePath>,
) -> Result<Json<GovernanceView>, ApiError> {
    Ok(Json(api::governance::get(state.store.as_ref(), state.aws.as_ref(), &p.cluster).await?))
}

async fn set_governance(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<GovernancePath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(governance, _): ApiBody<GovernanceSpec>,
) -> Result<Response, ApiError> {
    submit_to(&state, api::governance::set(p.cluster, governance), &principal, q.dry_run, key).await
}

//! Task governance of a cluster (`/api/clusters/{cluster}/governance`): GET reads what SageMaker
//! and EKS really hold (the add-on, the scheduler config, the teams' quotas) as the same spec
//! PUT takes, with the Kueue names jobs use; PUT sets the whole desired state and answers the
//! operation (or, with `dry_run`, the steps and the explicit diff; an equal state records
//! nothing). Translation only: rules and diff live in `instantstart_core::governance`.

use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, PlanOrNoChange, errors, mutation, submit};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::{Extension, State};
use axum::response::Response;
use instantstart_core::governance::{
    GovernanceSpec, GovernanceView, TeamPlacement, priority_class_name, team_namespace, team_queue,
};
use instantstart_core::operation::OperationKind;
use instantstart_core::provider::{TASK_GOVERNANCE_ADDON, is_owned};
use instantstart_core::workflow::day2::{hyperpod_record, live_cluster};
use instantstart_core::workflow::governance::{SetGovernanceRequest, read_governance};
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
    let (rec, hp) = hyperpod_record(state.store.as_ref(), &p.cluster)?;
    let live = live_cluster(state.aws.as_ref(), &rec, &hp).await?;
    let actual = read_governance(state.aws.as_ref(), &rec, &live.arn).await?;
    let spec = actual.spec();
    let managed = actual.scheduler_config.iter().all(|s| is_owned(&s.tags, &rec.name))
        && actual.quotas.iter().all(|q| is_owned(&q.tags, &rec.name));
    Ok(Json(GovernanceView {
        cluster: rec.name.clone(),
        addon: TASK_GOVERNANCE_ADDON.into(),
        addon_installed: actual.addon,
        scheduler_config_status: actual.scheduler_config.as_ref().map(|s| s.status.clone()),
        managed,
        teams: spec
            .teams
            .iter()
            .map(|t| TeamPlacement {
                team: t.name.clone(),
                namespace: team_namespace(&t.name),
                queue: team_queue(&t.name),
                status: actual.quota_of(&t.name).map(|q| q.status.clone()).unwrap_or_default(),
            })
            .collect(),
        priority_class_labels: spec.priority_classes.iter().map(|c| priority_class_name(&c.name)).collect(),
        governance: spec,
    }))
}

async fn set_governance(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<GovernancePath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(governance, _): ApiBody<GovernanceSpec>,
) -> Result<Response, ApiError> {
    let request = serde_json::to_value(SetGovernanceRequest { cluster: p.cluster, governance, changes: None })
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    submit(&state, OperationKind::SetGovernance, request, &principal, q.dry_run, key).await
}

//! Context: who the control plane runs as, which provider, valid zones and instance types, the
//! EKS clusters import can offer, and a region's HyperPod capacity: quotas with their use,
//! training plans and training plan offerings (reads; no plan is bought).
//!
//! The offering search is a `GET` with query parameters: its inputs are a handful of scalars
//! (type, count, hours, two times), it changes nothing and its answer may be cached or linked.
//! The rules are [`OfferingQuery::check`]'s (a `400` naming the field).

use super::{ApiQuery, errors};
use crate::AppState;
use crate::error::ApiError;
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::State;
use instantstart_core::api::context::{self, ContextView, EksClusterCandidate, InstanceTypeView};
use instantstart_core::provider::{
    AvailabilityZone, OfferingQuery, QuotaUsage, TrainingPlanOffering, TrainingPlanSummary,
};
use instantstart_core::store::ACTIVE_CLUSTER;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RegionQuery {
    /// AWS region; the server's default region when absent.
    pub region: Option<String>,
}

/// What to search training plan offerings for: `instance_type`, `instance_count` and
/// `duration_hours` are required; the window is optional.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct OfferingsQuery {
    /// AWS region; the server's default region when absent.
    pub region: Option<String>,
    /// A type a training plan can reserve (e.g. `ml.p5.48xlarge`).
    pub instance_type: String,
    /// Instances, 1..=256.
    pub instance_count: u32,
    /// Duration in hours, 1..=87600.
    pub duration_hours: u32,
    /// Earliest start (RFC 3339).
    pub start_after: Option<chrono::DateTime<chrono::Utc>>,
    /// Latest end (RFC 3339).
    pub end_before: Option<chrono::DateTime<chrono::Utc>>,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/context",
            get_with(context, |op| {
                errors(
                    op.id("context_get")
                        .summary("Provider, identity, default region, active cluster")
                        .tag("context")
                        .response::<200, Json<ContextView>>(),
                )
            }),
        )
        .api_route(
            "/api/context/zones",
            get_with(zones, |op| {
                errors(
                    op.id("context_zones")
                        .summary("Availability Zones of a region")
                        .tag("context")
                        .response::<200, Json<Vec<AvailabilityZone>>>(),
                )
            }),
        )
        .api_route(
            "/api/context/eks-clusters",
            get_with(eks_clusters, |op| {
                errors(
                    op.id("context_eks_clusters")
                        .summary(
                            "EKS clusters of a region with their HyperPod clusters, which InstantStart manages, and \
                             whether the control plane has access: what import can offer",
                        )
                        .tag("context")
                        .response::<200, Json<Vec<EksClusterCandidate>>>(),
                )
            }),
        )
        .api_route(
            "/api/context/quotas",
            get_with(quotas, |op| {
                errors(
                    op.id("context_quotas")
                        .summary(
                            "HyperPod instance quotas of a region (\"<type> for cluster usage\") with the instances \
                             its HyperPod clusters use and what is still available",
                        )
                        .tag("context")
                        .response::<200, Json<Vec<QuotaUsage>>>(),
                )
            }),
        )
        .api_route(
            "/api/context/training-plans",
            get_with(training_plans, |op| {
                errors(
                    op.id("context_training_plans")
                        .summary("Training plans of the account in a region: status, AZ, type, counts, window")
                        .tag("context")
                        .response::<200, Json<Vec<TrainingPlanSummary>>>(),
                )
            }),
        )
        .api_route(
            "/api/context/training-plan-offerings",
            get_with(training_plan_offerings, |op| {
                errors(
                    op.id("context_training_plan_offerings")
                        .summary(
                            "Training plan offerings for HyperPod clusters that could be reserved (a search; no plan \
                             is bought)",
                        )
                        .tag("context")
                        .response::<200, Json<Vec<TrainingPlanOffering>>>(),
                )
            }),
        )
        .api_route(
            "/api/context/instance-types",
            get_with(instance_types, |op| {
                errors(
                    op.id("context_instance_types")
                        .summary("Every HyperPod instance type, with its specs and the AZs of a region that offer it")
                        .tag("context")
                        .response::<200, Json<Vec<InstanceTypeView>>>(),
                )
            }),
        )
}

async fn context(State(state): State<AppState>) -> Result<Json<ContextView>, ApiError> {
    let (identity, identity_error) = context::identity(state.aws.as_ref()).await;
    Ok(Json(ContextView {
        provider: state.provider,
        sim_speed: state.sim_speed,
        identity,
        identity_error,
        default_region: state.default_region.clone(),
        active_cluster: state.store.get_setting(ACTIVE_CLUSTER)?,
        version: env!("CARGO_PKG_VERSION").into(),
    }))
}

fn region(state: &AppState, q: &RegionQuery) -> Result<String, ApiError> {
    Ok(context::region(q.region.clone(), &state.default_region)?)
}

async fn zones(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<AvailabilityZone>>, ApiError> {
    let region = region(&state, &q)?;
    Ok(Json(context::zones(state.aws.as_ref(), &region).await?))
}

async fn eks_clusters(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<EksClusterCandidate>>, ApiError> {
    let region = region(&state, &q)?;
    Ok(Json(context::eks_clusters(state.aws.as_ref(), state.store.as_ref(), &region).await?))
}

async fn quotas(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<QuotaUsage>>, ApiError> {
    let region = region(&state, &q)?;
    Ok(Json(context::quotas(state.aws.as_ref(), &region).await?))
}

async fn training_plans(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<TrainingPlanSummary>>, ApiError> {
    let region = region(&state, &q)?;
    Ok(Json(context::training_plans(state.aws.as_ref(), &region).await?))
}

async fn training_plan_offerings(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<OfferingsQuery>,
) -> Result<Json<Vec<TrainingPlanOffering>>, ApiError> {
    let region = region(&state, &RegionQuery { region: q.region })?;
    let query = OfferingQuery {
        instance_type: q.instance_type,
        instance_count: q.instance_count,
        duration_hours: q.duration_hours,
        start_after: q.start_after,
        end_before: q.end_before,
    };
    Ok(Json(context::training_plan_offerings(state.aws.as_ref(), &region, &query).await?))
}

async fn instance_types(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<InstanceTypeView>>, ApiError> {
    let region = region(&state, &q)?;
    Ok(Json(context::instance_types(state.aws.as_ref(), &region).await?))
}

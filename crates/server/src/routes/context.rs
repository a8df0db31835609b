//! Context: who the control plane runs as, which provider, valid zones and instance types, and
//! the EKS clusters import can offer.

use super::{ApiQuery, errors};
use crate::error::ApiError;
use crate::{AppState, ProviderKind};
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::State;
use instantstart_core::instance_types::{CLUSTER_INSTANCE_TYPES, InstanceSpecs, InstanceTypeInfo};
use instantstart_core::names;
use instantstart_core::provider::{AvailabilityZone, CallerIdentity};
use instantstart_core::store::ACTIVE_CLUSTER;
use instantstart_core::validate::ValidationError;
use instantstart_core::workflow::import_cluster::{self, EksClusterCandidate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Serialize, JsonSchema)]
pub struct ContextView {
    pub provider: ProviderKind,
    /// Speed factor of the simulated cloud, when it is the provider.
    pub sim_speed: Option<f64>,
    pub identity: Option<CallerIdentity>,
    /// Why the identity could not be read (credentials, network).
    pub identity_error: Option<String>,
    pub default_region: String,
    pub active_cluster: Option<String>,
    pub version: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RegionQuery {
    /// AWS region; the server's default region when absent.
    pub region: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct InstanceTypeView {
    /// One of SageMaker's `ClusterInstanceType` values.
    pub instance_type: String,
    /// AZs of the region that offer it (empty: not offered in this region).
    pub availability_zones: Vec<String>,
    /// Its specs as EC2 describes them in the region (`DescribeInstanceTypes`): vCPUs,
    /// memory, accelerators, EFA. `null` when EC2 does not describe it: the type is still
    /// accepted, and the checks that need its specs say they could not run.
    pub info: Option<InstanceTypeInfo>,
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
    let (identity, identity_error) = match state.aws.caller_identity().await {
        Ok(id) => (Some(id), None),
        Err(e) => (None, Some(e.to_string())),
    };
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
    let region = q.region.clone().unwrap_or_else(|| state.default_region.clone());
    names::region(&region).map_err(|rule| ValidationError::invalid("region", rule))?;
    Ok(region)
}

async fn zones(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<AvailabilityZone>>, ApiError> {
    let region = region(&state, &q)?;
    Ok(Json(state.aws.availability_zones(&region).await?))
}

async fn eks_clusters(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<EksClusterCandidate>>, ApiError> {
    let region = region(&state, &q)?;
    Ok(Json(import_cluster::eks_clusters(state.aws.as_ref(), state.store.as_ref(), &region).await?))
}

async fn instance_types(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<RegionQuery>,
) -> Result<Json<Vec<InstanceTypeView>>, ApiError> {
    let region = region(&state, &q)?;
    let mut by_type: BTreeMap<String, Vec<String>> =
        CLUSTER_INSTANCE_TYPES.iter().map(|t| (t.to_string(), Vec::new())).collect();
    for o in state.aws.instance_type_offerings(&region).await? {
        if let Some(zones) = by_type.get_mut(&o.instance_type) {
            zones.push(o.availability_zone);
        }
    }
    let specs = InstanceSpecs::new(state.aws.instance_type_specs(&region).await?);
    Ok(Json(
        by_type
            .into_iter()
            .map(|(t, mut azs)| {
                azs.sort();
                azs.dedup();
                InstanceTypeView { info: specs.get(&t).cloned(), instance_type: t, availability_zones: azs }
            })
            .collect(),
    ))
}

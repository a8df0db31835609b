//! GPU capacity and node health of a cluster at a glance (`instantstart_core::api::capacity`):
//! accelerators total, allocated, free and unavailable per cluster and instance group, and
//! every node with its health and the workloads on it. A read; no operation.

use super::{ApiPath, errors};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use axum::Json;
use axum::extract::{Extension, State};
use instantstart_core::api;
use instantstart_core::api::capacity::ClusterCapacity;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CapacityPath {
    /// InstantStart cluster name.
    pub cluster: String,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route(
        "/api/clusters/{cluster}/capacity",
        get_with(get, |op| {
            errors(
                op.id("capacity_get")
                    .summary(
                        "GPU and Neuron capacity (total, allocated, free, unavailable) per cluster and instance \
                         group, and every node with its health (HyperPod status, health-agent labels, taints) \
                         and the jobs and endpoints on it",
                    )
                    .tag("hyperpod"),
            )
            .response::<200, Json<ClusterCapacity>>()
            .response::<404, ProblemJson>()
            .response_with::<502, ProblemJson, _>(|r| r.description("The cluster's Kubernetes API could not be read"))
        }),
    )
}

async fn get(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<CapacityPath>,
) -> Result<Json<ClusterCapacity>, ApiError> {
    let access = principal.kube_access(&p.cluster, &state.namespace_policy);
    Ok(Json(
        api::capacity::get(state.store.as_ref(), state.aws.as_ref(), state.kube.as_ref(), &p.cluster, &access).await?,
    ))
}

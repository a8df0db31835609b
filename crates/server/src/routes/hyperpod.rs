//! Day-2 operations of a cluster's HyperPod cluster: instance groups (add, scale, delete),
//! nodes (list, one in detail, reboot, replace, delete), deep health checks on demand (start,
//! followed to the per-node result), platform software updates (start, followed until every
//! group runs the new software), its events (one page, newest first) and managed features
//! (read, change). Changes follow
//! the explicit-diff contract: PATCH bodies carry only the changed fields, and a request that
//! matches the real state answers 200 "already in this state" without creating an operation.

use super::page::{PageParams, Paged};
use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, PlanOrNoChange, errors, mutation, submit_to};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with};
use axum::Json;
use axum::extract::{Extension, State};
use axum::response::Response;
use instantstart_core::api;
use instantstart_core::api::features::FeaturesView;
use instantstart_core::api::hyperpod::HealthCheckGroup;
use instantstart_core::api::instance_groups::InstanceGroupPatch;
use instantstart_core::api::nodes::NodeActionName;
use instantstart_core::diff::FeaturesPatch;
use instantstart_core::page::Order;
use instantstart_core::provider::{
    ClusterEventPage, ClusterEventQuery, ClusterNode, ClusterNodeDetail, HyperPodInstanceGroupStatus,
    SoftwareUpdateDeployment, SoftwareUpdateGroup,
};
use instantstart_core::spec::InstanceGroupSpec;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClusterPath {
    pub cluster: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GroupPath {
    pub cluster: String,
    /// Instance group name.
    pub group: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NodeActionPath {
    pub cluster: String,
    /// `reboot`, `replace` or `delete`.
    pub action: NodeActionName,
}

/// Path of one node. The segment after `/nodes/` is shared with the node actions (POST
/// `/nodes/reboot|replace|delete`), so it keeps their parameter name.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct NodePath {
    pub cluster: String,
    /// The node's instance id (`i-…`, as `node_list` shows it).
    #[serde(rename = "action")]
    pub node: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EventsPath {
    /// Cluster name.
    pub cluster: String,
}

/// Body of a node action.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeActionBody {
    /// Instance ids (`i-…`).
    pub node_ids: Vec<String>,
    /// Replace and delete lose the nodes' local volumes: set true to acknowledge.
    #[serde(default)]
    pub acknowledge_local_data_loss: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct HealthCheckPath {
    /// Cluster name.
    pub cluster: String,
}

/// Body of a deep-health-check start: the instance groups (whole, or named nodes of them) and
/// the checks to run on each.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckBody {
    /// 1-99 instance groups.
    pub instance_groups: Vec<HealthCheckGroup>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SoftwareUpdatePath {
    /// Cluster name.
    pub cluster: String,
}

/// Body of a software update: the groups (all when none is named), the rolling policy, an AMI.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoftwareUpdateBody {
    /// The groups to update, each optionally to a named HyperPod AMI release; empty or absent:
    /// every group, to the latest release.
    #[serde(default)]
    pub instance_groups: Vec<SoftwareUpdateGroup>,
    /// Rolling policy: batch size (instances or a percentage of the group), wait between
    /// batches, rollback alarms. Absent: SageMaker's default.
    #[serde(default)]
    pub deployment: Option<SoftwareUpdateDeployment>,
    /// An AMI (`ami-…`) or `default` (the latest HyperPod AMI) instead of a release.
    #[serde(default)]
    pub image_id: Option<String>,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/clusters/{cluster}/instance-groups",
            get_with(list_groups, |op| {
                errors(
                    op.id("instance_group_list")
                        .summary("Instance groups of the HyperPod cluster (live counts)")
                        .tag("hyperpod"),
                )
                .response::<200, Paged<HyperPodInstanceGroupStatus>>()
                .response::<404, ProblemJson>()
                .response_with::<422, ProblemJson, _>(|r| r.description("The cluster has no HyperPod cluster (or none InstantStart can read)"))
            })
            .post_with(add_group, |op| {
                mutation(
                    op.id("instance_group_add")
                        .summary("Add an instance group: capacity type, interface mode and placement in one operation")
                        .tag("hyperpod"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/instance-groups/{group}",
            aide::axum::routing::patch_with(update_group, |op| {
                mutation(
                    op.id("instance_group_update")
                        .summary(
                            "Scale an instance group (explicit diff; capacity type and EFA-only are immutable: 422)",
                        )
                        .tag("hyperpod"),
                )
                .response_with::<200, Json<PlanOrNoChange>, _>(|r| {
                    r.description("Dry run: the plan, nothing changed; or already in this state: nothing was done")
                })
                .response::<404, ProblemJson>()
            })
            .delete_with(delete_group, |op| {
                mutation(op.id("instance_group_delete").summary("Delete an instance group").tag("hyperpod"))
                    .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/nodes",
            get_with(list_nodes, |op| {
                errors(op.id("node_list").summary("Nodes with instance group and status").tag("hyperpod"))
                    .response::<200, Paged<ClusterNode>>()
                    .response::<404, ProblemJson>()
                    .response_with::<422, ProblemJson, _>(|r| r.description("The cluster has no HyperPod cluster (or none InstantStart can read)"))
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/events",
            get_with(list_events, |op| {
                errors(
                    op.id("cluster_events")
                        .summary(
                            "One page of the HyperPod cluster's events, newest first (status changes of the \
                             cluster, its groups and nodes; failures, replacements, health checks)",
                        )
                        .tag("hyperpod"),
                )
                .response::<200, Json<ClusterEventPage>>()
                .response::<404, ProblemJson>()
                .response::<422, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/nodes/{action}",
            get_with(get_node, |op| {
                errors(
                    op.id("node_get")
                        .summary(
                            "One node in detail: status and message, launch time, placement, private address, \
                             capacity and interface type, lifecycle script, AMI",
                        )
                        .tag("hyperpod"),
                )
                .response::<200, Json<ClusterNodeDetail>>()
                .response::<404, ProblemJson>()
                .response::<422, ProblemJson>()
            })
            .post_with(node_action, |op| {
                mutation(
                    op.id("node_action")
                        .summary("Reboot, replace or delete nodes (replace/delete lose local volumes)")
                        .tag("hyperpod"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/health-checks",
            post_with(start_health_check, |op| {
                mutation(
                    op.id("health_check_start")
                        .summary(
                            "Start deep health checks (InstanceStress, InstanceConnectivity) on instance groups or \
                             named nodes; the operation ends with each node's result",
                        )
                        .tag("hyperpod"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/software-update",
            post_with(update_software, |op| {
                mutation(
                    op.id("software_update_start")
                        .summary(
                            "Update the HyperPod platform software (AMI release or AMI) of instance groups, rolling \
                             in batches; nodes get a new root volume. The operation ends when every group runs the \
                             new software",
                        )
                        .tag("hyperpod"),
                )
                .response_with::<200, Json<PlanOrNoChange>, _>(|r| {
                    r.description("Dry run: the plan, nothing changed; or every group already runs this software: nothing was done")
                })
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/features",
            get_with(get_features, |op| {
                errors(op.id("feature_get").summary("Managed features as they really are").tag("features"))
                    .response::<200, Json<FeaturesView>>()
                    .response::<404, ProblemJson>()
                    .response_with::<422, ProblemJson, _>(|r| r.description("The cluster has no HyperPod cluster (or none InstantStart can read)"))
            })
            .patch_with(set_features, |op| {
                mutation(
                    op.id("feature_set")
                        .summary("Change managed features: send only the changed fields")
                        .tag("features"),
                )
                .response_with::<200, Json<PlanOrNoChange>, _>(|r| {
                    r.description("Dry run: the plan, nothing changed; or already in this state: nothing was done")
                })
                .response::<404, ProblemJson>()
            }),
        )
}

async fn list_groups(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<ClusterPath>,
    paging: PageParams,
) -> Result<Paged<HyperPodInstanceGroupStatus>, ApiError> {
    let request = paging.request("instance_groups", 1)?;
    let groups = api::instance_groups::list(state.store.as_ref(), state.aws.as_ref(), &p.cluster).await?;
    paging.in_memory(groups, "instance_groups", Order::Ascending, |g| vec![g.name.clone()], &request)
}

async fn add_group(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(_, group): ApiBody<InstanceGroupSpec>,
) -> Result<Response, ApiError> {
    submit_to(&state, api::instance_groups::add(p.cluster, &group)?, &principal, q.dry_run, key).await
}

async fn update_group(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<GroupPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(patch, _): ApiBody<InstanceGroupPatch>,
) -> Result<Response, ApiError> {
    submit_to(&state, api::instance_groups::update(p.cluster, p.group, patch), &principal, q.dry_run, key).await
}

async fn delete_group(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<GroupPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    submit_to(&state, api::instance_groups::delete(p.cluster, p.group), &principal, q.dry_run, key).await
}

async fn list_nodes(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<ClusterPath>,
    paging: PageParams,
) -> Result<Paged<ClusterNode>, ApiError> {
    let request = paging.request("nodes", 2)?;
    let nodes = api::nodes::list(state.store.as_ref(), state.aws.as_ref(), &p.cluster).await?;
    paging.in_memory(
        nodes,
        "nodes",
        Order::Ascending,
        |n| vec![n.instance_group.clone(), n.instance_id.clone()],
        &request,
    )
}

async fn list_events(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<EventsPath>,
    ApiQuery(q): ApiQuery<ClusterEventQuery>,
) -> Result<Json<ClusterEventPage>, ApiError> {
    Ok(Json(api::hyperpod::events(state.store.as_ref(), state.aws.as_ref(), &p.cluster, &q).await?))
}

async fn get_node(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<NodePath>,
) -> Result<Json<ClusterNodeDetail>, ApiError> {
    Ok(Json(api::nodes::get(state.store.as_ref(), state.aws.as_ref(), &p.cluster, &p.node).await?))
}

async fn node_action(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<NodeActionPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(body, _): ApiBody<NodeActionBody>,
) -> Result<Response, ApiError> {
    let submission = api::nodes::action(p.cluster, p.action, body.node_ids, body.acknowledge_local_data_loss);
    submit_to(&state, submission, &principal, q.dry_run, key).await
}

async fn start_health_check(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<HealthCheckPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(body, _): ApiBody<HealthCheckBody>,
) -> Result<Response, ApiError> {
    let submission = api::hyperpod::start_health_check(p.cluster, body.instance_groups);
    submit_to(&state, submission, &principal, q.dry_run, key).await
}

async fn update_software(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<SoftwareUpdatePath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(body, _): ApiBody<SoftwareUpdateBody>,
) -> Result<Response, ApiError> {
    let submission = api::hyperpod::update_software(p.cluster, body.instance_groups, body.deployment, body.image_id);
    submit_to(&state, submission, &principal, q.dry_run, key).await
}

async fn get_features(
    State(state): State<AppState>,
    ApiPath(p): ApiPath<ClusterPath>,
) -> Result<Json<FeaturesView>, ApiError> {
    Ok(Json(api::features::get(state.store.as_ref(), state.aws.as_ref(), state.kube.as_ref(), &p.cluster).await?))
}

async fn set_features(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(patch, _): ApiBody<FeaturesPatch>,
) -> Result<Response, ApiError> {
    submit_to(&state, api::features::set(p.cluster, patch), &principal, q.dry_run, key).await
}

//! Inference endpoints and model pools of a cluster (issue #10). The routes translate; the
//! rules live in `instantstart_core::workflow::endpoints` (views, explicit diff, preflight,
//! pool assignment) and in the endpoint renderer of `instantstart-recipes`.
//!
//! Chat requests go through the Kubernetes API server's service proxy
//! (`KubeApi::service_proxy`), never directly to a pod: the control plane stays out of the
//! data path except for this explicit, bounded call (timeout 60 s → `504`, request ≤ 1 MiB →
//! `413`, answer ≤ 4 MiB → `502`).

use super::page::{PageParams, Paged};
use super::{
    ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, NoChange, PlanOrNoChange, accepted_with_plan, dry_run,
    errors, mutation, submit,
};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with, put_with};
use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use instantstart_core::engine::Outcome;
use instantstart_core::operation::OperationKind;
use instantstart_core::page::Order;
use instantstart_core::provider::KubeTarget;
use instantstart_core::validate::ValidationError;
use instantstart_core::workflow::endpoints::{
    self as ep, AssignPoolWorkerRequest, CHAT_MAX_REQUEST_BYTES, CHAT_MAX_RESPONSE_BYTES, CHAT_TIMEOUT, EndpointDetail,
    EndpointPatch, EndpointSummary, PoolSummary,
};
use instantstart_core::workflow::workloads::DeleteWorkloadRequest;
use instantstart_core::workload::{WorkloadKind, WorkloadRef, WorkloadRequest};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClusterPath {
    /// Cluster name.
    pub cluster: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EndpointPath {
    /// Cluster name.
    pub cluster: String,
    /// Endpoint name.
    pub endpoint: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct WorkerPath {
    /// Cluster name.
    pub cluster: String,
    pub pool: String,
    /// Pod name of the worker.
    pub pod: String,
}

/// Body of a pool assignment.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AssignBody {
    /// The endpoint the worker should serve; `null` makes it idle.
    pub serving: Option<String>,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/clusters/{cluster}/endpoints",
            get_with(list, |op| {
                errors(
                    op.id("endpoint_list")
                        .summary("Inference endpoints: readiness, replicas, URL, exposure, pool, router, autoscaling")
                        .tag("inference"),
                )
                .response::<200, Paged<EndpointSummary>>()
                .response::<404, ProblemJson>()
            })
            .post_with(deploy, |op| {
                mutation(
                    op.id("endpoint_deploy")
                        .summary(
                            "Deploy an endpoint: {\"route\":\"self_managed\",…} (vLLM/SGLang/custom Deployment, \
                             Service, SGLang router, KEDA) or {\"route\":\"managed\",…} (HyperPod inference operator). \
                             A load_balancer exposure needs the AWS Load Balancer Controller (checked).",
                        )
                        .tag("inference"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/endpoints/{endpoint}",
            get_with(detail, |op| {
                errors(op.id("endpoint_get").summary("One endpoint with pods, conditions and objects").tag("inference"))
                    .response::<200, Json<EndpointDetail>>()
                    .response::<404, ProblemJson>()
            })
            .patch_with(update, |op| {
                mutation(
                    op.id("endpoint_update")
                        .summary(
                            "Scale an endpoint: send only replicas and/or the changed autoscaling fields; \
                             \"autoscaling\": null removes autoscaling (the ScaledObject is deleted, the Deployment \
                             keeps replicas, or the count it has now — the plan shows it)",
                        )
                        .tag("inference"),
                )
                .response_with::<200, Json<PlanOrNoChange>, _>(|r| {
                    r.description("Dry run: the plan, nothing changed; or already in this state: nothing was done")
                })
                .response::<404, ProblemJson>()
            })
            .delete_with(delete, |op| {
                mutation(
                    op.id("endpoint_delete").summary("Delete an endpoint and everything it created").tag("inference"),
                )
                .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/endpoints/{endpoint}/chat",
            post_with(chat, |op| {
                errors(
                    op.id("endpoint_chat")
                        .summary(
                            "Call the model: an OpenAI chat-completions request, answered by the model through the \
                             Kubernetes service proxy (60 s, request ≤ 1 MiB, answer ≤ 4 MiB)",
                        )
                        .tag("inference"),
                )
                .input::<Json<Value>>()
                .response::<200, Json<Value>>()
                .response::<404, ProblemJson>()
                .response_with::<409, ProblemJson, _>(|r| r.description("The endpoint is not ready"))
                .response_with::<413, ProblemJson, _>(|r| r.description("Request larger than 1 MiB"))
                .response_with::<502, ProblemJson, _>(|r| r.description("The model failed or answered more than 4 MiB"))
                .response_with::<504, ProblemJson, _>(|r| r.description("No answer within 60 s"))
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/pools",
            get_with(pools, |op| {
                errors(op.id("pool_list").summary("Model pools: warm workers and what they serve").tag("inference"))
                    .response::<200, Paged<PoolSummary>>()
                    .response::<404, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/pools/{pool}/workers/{pod}",
            put_with(assign, |op| {
                mutation(
                    op.id("pool_assign")
                        .summary("Move a warm worker to another endpoint (or idle) by its label, without a restart")
                        .tag("inference"),
                )
                .response_with::<200, Json<PlanOrNoChange>, _>(|r| {
                    r.description("Dry run: the plan, nothing changed; or already in this state: nothing was done")
                })
                .response::<404, ProblemJson>()
            }),
        )
}

/// The cluster's Kubernetes as the caller reaches it (its token's bound identity, if any), and
/// the access that confines what its reads show.
fn target_as(
    state: &AppState,
    principal: &Principal,
    cluster: &str,
) -> Result<(KubeTarget, instantstart_core::kube_access::KubeAccess), ApiError> {
    let access = principal.kube_access(cluster, &state.namespace_policy);
    Ok((ep::kube_target_of(state.store.as_ref(), cluster)?.acting_as(access.identity.clone()), access))
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::Internal(e.to_string()))
}

async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    paging: PageParams,
) -> Result<Paged<EndpointSummary>, ApiError> {
    let request = paging.request("endpoints", 2)?;
    let (target, access) = target_as(&state, &principal, &p.cluster)?;
    let endpoints = ep::list_endpoints_as(state.kube.as_ref(), &target, &access).await?;
    paging.in_memory(endpoints, "endpoints", Order::Ascending, |e| vec![e.namespace.clone(), e.name.clone()], &request)
}

async fn detail(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<EndpointPath>,
) -> Result<Json<EndpointDetail>, ApiError> {
    let (target, access) = target_as(&state, &principal, &p.cluster)?;
    Ok(Json(ep::endpoint_detail_as(state.kube.as_ref(), &target, &p.endpoint, &access).await?))
}

/// Adds `"workload": {name, namespace}` to a 202 answer.
async fn with_workload(response: Response, workload: Option<WorkloadRef>) -> Result<Response, ApiError> {
    let Some(w) = workload.filter(|_| response.status() == StatusCode::ACCEPTED) else { return Ok(response) };
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut v: Value = serde_json::from_slice(&bytes).map_err(|e| ApiError::Internal(e.to_string()))?;
    v["workload"] = to_json(&w)?;
    parts.headers.remove(header::CONTENT_LENGTH);
    Ok(Response::from_parts(parts, Body::from(serde_json::to_vec(&v).unwrap_or_default())))
}

async fn deploy(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(params, _): ApiBody<Value>,
) -> Result<Response, ApiError> {
    let (target, _) = target_as(&state, &principal, &p.cluster)?;
    let request = to_json(&WorkloadRequest::new(&p.cluster, WorkloadKind::Endpoint, params.clone()))?;
    let request = super::jobs::with_access(&state, request, &principal)?;
    let checks = ep::deploy_preflight(state.kube.as_ref(), &target, &params).await?;
    if q.dry_run {
        let mut d = state.engine.dry_run_checked(OperationKind::DeployEndpoint, &request).await?;
        d.checks.extend(checks);
        return Ok(dry_run(d));
    }
    if let Some(refusal) = ep::preflight_refusal(&checks) {
        // A malformed request is reported as such (400, every finding) before the preflight.
        state.engine.dry_run_checked(OperationKind::DeployEndpoint, &request).await?;
        return Err(ApiError::Validation(refusal));
    }
    let workload = match (params.get("name").and_then(Value::as_str), params.get("namespace").and_then(Value::as_str)) {
        (Some(n), Some(ns)) => Some(WorkloadRef { name: n.into(), namespace: ns.into() }),
        _ => None,
    };
    let response = submit(&state, OperationKind::DeployEndpoint, request, &principal, false, key).await?;
    with_workload(response, workload).await
}

async fn update(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<EndpointPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(patch, _): ApiBody<EndpointPatch>,
) -> Result<Response, ApiError> {
    let (target, _) = target_as(&state, &principal, &p.cluster)?;
    let mut up = ep::plan_update(state.kube.as_ref(), &target, &p.cluster, &p.endpoint, &patch).await?;
    up.request = super::jobs::with_access(&state, up.request, &principal)?;
    if up.plan.is_noop() {
        let message = up.plan.render();
        return Ok(Json(NoChange { no_change: true, plan: up.plan, message }).into_response());
    }
    if q.dry_run {
        let mut d = state.engine.dry_run_checked(OperationKind::UpdateEndpoint, &up.request).await?;
        d.plan = Some(up.plan);
        return Ok(dry_run(d));
    }
    match state.engine.submit_checked(OperationKind::UpdateEndpoint, &up.request, principal.actor(), key).await? {
        Outcome::Submitted(s) => Ok(accepted_with_plan(s.operation, !s.created, Some(up.plan))),
        Outcome::NoChange(plan) => {
            let message = plan.render();
            Ok(Json(NoChange { no_change: true, plan, message }).into_response())
        }
    }
}

async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<EndpointPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    let (target, _) = target_as(&state, &principal, &p.cluster)?;
    let found = ep::chat_target(state.kube.as_ref(), &target, &p.endpoint).await?;
    let request = to_json(&DeleteWorkloadRequest {
        cluster: p.cluster,
        kind: WorkloadKind::Endpoint,
        name: p.endpoint.clone(),
        namespace: found.namespace.clone(),
        acting_as: None,
    })?;
    let request = super::jobs::with_access(&state, request, &principal)?;
    let response = submit(&state, OperationKind::DeleteEndpoint, request, &principal, q.dry_run, key).await?;
    with_workload(response, Some(WorkloadRef { name: p.endpoint, namespace: found.namespace })).await
}

/// A problem+json answer for the statuses [`ApiError`] has no variant for (413, 504, the
/// model's own 4xx).
fn problem(status: StatusCode, kind: &str, title: &str, detail: String) -> Response {
    let body = crate::error::Problem {
        kind: format!("urn:instantstart:problem:{kind}"),
        title: title.into(),
        status: status.as_u16(),
        detail,
        findings: vec![],
        operation_id: None,
    };
    (status, [(header::CONTENT_TYPE, "application/problem+json")], serde_json::to_vec(&body).unwrap_or_default())
        .into_response()
}

async fn chat(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<EndpointPath>,
    request: Request,
) -> Result<Response, ApiError> {
    let is_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"));
    if !is_json {
        return Err(ApiError::BadRequest("expected Content-Type: application/json".into()));
    }
    let Ok(body) = axum::body::to_bytes(request.into_body(), CHAT_MAX_REQUEST_BYTES).await else {
        return Ok(problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload-too-large",
            "Request too large",
            format!("a chat request may have at most {CHAT_MAX_REQUEST_BYTES} bytes"),
        ));
    };
    let parsed: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("body is not valid JSON: {e}")))?;
    if !parsed.get("messages").is_some_and(Value::is_array) {
        return Err(ApiError::Validation(ValidationError::invalid("messages", "required: a list of chat messages")));
    }
    let (target, _) = target_as(&state, &principal, &p.cluster)?;
    let to = ep::chat_target(state.kube.as_ref(), &target, &p.endpoint).await?;
    principal
        .kube_access(&p.cluster, &state.namespace_policy)
        .check_namespace(&to.namespace)
        .map_err(ApiError::Forbidden)?;
    if !to.ready {
        return Err(ApiError::Conflict {
            detail: format!("endpoint {} is not ready yet; follow its deploy operation or GET it", p.endpoint),
            operation: None,
        });
    }
    let call =
        state.kube.service_proxy(&target, &to.namespace, &to.service, to.port, &to.path, Some(&body), CHAT_TIMEOUT);
    let answer = match tokio::time::timeout(CHAT_TIMEOUT + std::time::Duration::from_secs(1), call).await {
        Err(_) => None,
        Ok(Err(e)) if e.is_proxy_timeout() => None,
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok(a)) => Some(a),
    };
    let Some(answer) = answer else {
        return Ok(problem(
            StatusCode::GATEWAY_TIMEOUT,
            "gateway-timeout",
            "The model did not answer in time",
            format!("no answer from endpoint {} within {} s", p.endpoint, CHAT_TIMEOUT.as_secs()),
        ));
    };
    if answer.body.len() > CHAT_MAX_RESPONSE_BYTES {
        return Ok(problem(
            StatusCode::BAD_GATEWAY,
            "bad-gateway",
            "The model's answer is too large",
            format!("the answer exceeds {CHAT_MAX_RESPONSE_BYTES} bytes"),
        ));
    }
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let Ok(json) = serde_json::from_slice::<Value>(&answer.body) else {
        return Ok(problem(
            StatusCode::BAD_GATEWAY,
            "bad-gateway",
            "The model's answer is not JSON",
            format!(
                "HTTP {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body).chars().take(500).collect::<String>()
            ),
        ));
    };
    if status.is_success() {
        return Ok(Json(json).into_response());
    }
    let detail = json
        .pointer("/error/message")
        .or_else(|| json.get("message"))
        .or_else(|| json.get("detail"))
        .and_then(Value::as_str)
        .unwrap_or("the model returned an error")
        .to_string();
    // The model's own 4xx (bad request, unknown model) is the caller's problem; anything else a gateway one.
    Ok(if status.is_client_error() {
        problem(status, "model-rejected", "The model rejected the request", detail)
    } else {
        problem(StatusCode::BAD_GATEWAY, "bad-gateway", "The model failed", format!("HTTP {}: {detail}", answer.status))
    })
}

async fn pools(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    paging: PageParams,
) -> Result<Paged<PoolSummary>, ApiError> {
    let request = paging.request("pools", 1)?;
    let (target, access) = target_as(&state, &principal, &p.cluster)?;
    let pools = ep::list_pools_as(state.kube.as_ref(), &target, &access).await?;
    paging.in_memory(pools, "pools", Order::Ascending, |p| vec![p.pool.clone()], &request)
}

async fn assign(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<WorkerPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(body, _): ApiBody<AssignBody>,
) -> Result<Response, ApiError> {
    let request = to_json(&AssignPoolWorkerRequest {
        cluster: p.cluster,
        pool: p.pool,
        pod: p.pod,
        serving: body.serving,
        resolved: None,
    })?;
    submit(&state, OperationKind::AssignPoolWorker, request, &principal, q.dry_run, key).await
}

//! Inference endpoints and model pools of a cluster (issue #10). The routes translate; the
//! rules live in `instantstart_core::api::endpoints` and `instantstart_core::api::pools` (views,
//! explicit diff, preflight, delete by name, the chat call, pool assignment) and in the
//! endpoint renderer of `instantstart-recipes`.
//!
//! Chat requests go through the Kubernetes API server's service proxy
//! (`KubeApi::service_proxy`), never directly to a pod: the control plane stays out of the
//! data path except for this explicit, bounded call (timeout 60 s → `504`, request ≤ 1 MiB →
//! `413`, answer ≤ 4 MiB → `502`).

use super::jobs::{caller, respond};
use super::page::{PageParams, Paged};
use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, PlanOrNoChange, errors, mutation};
use crate::AppState;
use crate::auth::Principal;
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with, put_with};
use axum::Json;
use axum::extract::{Extension, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use instantstart_core::api::endpoints::{
    self as ep, CHAT_MAX_REQUEST_BYTES, CHAT_MAX_RESPONSE_BYTES, CHAT_TIMEOUT, ChatReply, EndpointDetail,
    EndpointPatch, EndpointSummary,
};
use instantstart_core::api::pools::{self, Assignment, PoolSummary};
use instantstart_core::kube_access::KubeAccess;
use instantstart_core::page::Order;
use instantstart_core::provider::KubeTarget;
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
fn target_as(state: &AppState, principal: &Principal, cluster: &str) -> Result<(KubeTarget, KubeAccess), ApiError> {
    let access = principal.kube_access(cluster, &state.namespace_policy);
    Ok((ep::target_as(state.store.as_ref(), cluster, &access)?, access))
}

async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    paging: PageParams,
) -> Result<Paged<EndpointSummary>, ApiError> {
    let request = paging.request("endpoints", 2)?;
    let (target, access) = target_as(&state, &principal, &p.cluster)?;
    let endpoints = ep::list(state.kube.as_ref(), &target, &access).await?;
    paging.in_memory(endpoints, "endpoints", Order::Ascending, |e| vec![e.namespace.clone(), e.name.clone()], &request)
}

async fn detail(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<EndpointPath>,
) -> Result<Json<EndpointDetail>, ApiError> {
    let (target, access) = target_as(&state, &principal, &p.cluster)?;
    Ok(Json(ep::get(state.kube.as_ref(), &target, &p.endpoint, &access).await?))
}

async fn deploy(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    ApiBody(params, _): ApiBody<Value>,
) -> Result<Response, ApiError> {
    // An unknown cluster is a 404 before the body is looked at.
    target_as(&state, &principal, &p.cluster)?;
    let caller = caller(&state, &principal, &p.cluster);
    Ok(respond(ep::deploy(&state.engine, &p.cluster, params, &caller, q.dry_run, key).await?))
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
    let caller = caller(&state, &principal, &p.cluster);
    let (engine, kube) = (&state.engine, state.kube.as_ref());
    Ok(respond(ep::update(engine, kube, &target, &p.cluster, &p.endpoint, &patch, &caller, q.dry_run, key).await?))
}

async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<EndpointPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    let (target, _) = target_as(&state, &principal, &p.cluster)?;
    let caller = caller(&state, &principal, &p.cluster);
    let (engine, store, kube) = (&state.engine, state.store.as_ref(), state.kube.as_ref());
    Ok(respond(ep::delete(engine, store, kube, &target, &p.cluster, &p.endpoint, &caller, q.dry_run, key).await?))
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
    ep::check_chat(&parsed)?;
    let (target, access) = target_as(&state, &principal, &p.cluster)?;
    let (status, json) = match ep::chat(state.kube.as_ref(), &target, &p.endpoint, &access, &body).await? {
        ChatReply::Answer { status, body } => (status, body),
        ChatReply::TimedOut => {
            return Ok(problem(
                StatusCode::GATEWAY_TIMEOUT,
                "gateway-timeout",
                "The model did not answer in time",
                format!("no answer from endpoint {} within {} s", p.endpoint, CHAT_TIMEOUT.as_secs()),
            ));
        }
        ChatReply::TooLarge => {
            return Ok(problem(
                StatusCode::BAD_GATEWAY,
                "bad-gateway",
                "The model's answer is too large",
                format!("the answer exceeds {CHAT_MAX_RESPONSE_BYTES} bytes"),
            ));
        }
        ChatReply::NotJson { status, text } => {
            return Ok(problem(
                StatusCode::BAD_GATEWAY,
                "bad-gateway",
                "The model's answer is not JSON",
                format!("HTTP {status}: {text}"),
            ));
        }
    };
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    if code.is_success() {
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
    Ok(if code.is_client_error() {
        problem(code, "model-rejected", "The model rejected the request", detail)
    } else {
        problem(StatusCode::BAD_GATEWAY, "bad-gateway", "The model failed", format!("HTTP {status}: {detail}"))
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
    let pools = pools::list(state.kube.as_ref(), &target, &access).await?;
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
    let caller = caller(&state, &principal, &p.cluster);
    let a = Assignment { cluster: p.cluster, pool: p.pool, pod: p.pod, serving: body.serving };
    Ok(respond(pools::assign(&state.engine, a, &caller, q.dry_run, key).await?))
}

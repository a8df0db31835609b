//! Training jobs: submit (HyperPod or Ray), list, get, delete, logs, and the live log stream.
//!
//! The handlers translate: reads and rules are `instantstart_core::api::jobs` (the workload
//! workflows `submit_job` and `delete_job` do the mutations), shared workload rules
//! `instantstart_core::api::workloads`. Jobs
//! InstantStart did not create are listed and read with `foreign: true`; deleting one is a
//! 422 from the workflow's assessment. A job name is unique per namespace; routes take an optional
//! `?namespace=` and otherwise find the one namespace that has the job (`409` when several do).

use super::page::{PageParams, Paged};
use super::{ApiBody, ApiPath, ApiQuery, DryRunQuery, IdempotencyKey, errors, mutation};
use crate::AppState;
use crate::auth::{Principal, check_origin};
use crate::error::{ApiError, ProblemJson};
use crate::log_hub::{Frame, LogHub};
use aide::OperationInput;
use aide::axum::ApiRouter;
use aide::axum::routing::get_with;
use aide::generate::GenContext;
use aide::openapi::Operation;
use axum::Json;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, FromRequest, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use instantstart_core::api::jobs::{self, JobDetail, JobSummary, PodLogs};
use instantstart_core::api::workloads::{self, Caller, Submitted, WorkloadRef};
use instantstart_core::page::Order;
use instantstart_core::provider::{KubeApi, KubeTarget};
use instantstart_recipes::TrainingJobRequest;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::marker::PhantomData;
use std::sync::Arc;
use tokio::sync::broadcast;

/// A JSON body passed on as JSON (the workflow validates it, naming every field relative to
/// the body), documented in OpenAPI as `T`.
pub struct WorkloadBody<T>(pub Value, pub PhantomData<T>);

impl<S: Send + Sync, T> FromRequest<S> for WorkloadBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let ApiBody(_, value) = ApiBody::<Value>::from_request(req, state).await?;
        Ok(WorkloadBody(value, PhantomData))
    }
}

impl<T: JsonSchema> OperationInput for WorkloadBody<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        <Json<T> as OperationInput>::operation_input(ctx, operation);
    }
}

/// A WebSocket upgrade, or why the request is not one (answered as a 400 problem).
pub struct WsUpgrade(pub Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for WsUpgrade {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        Ok(WsUpgrade(WebSocketUpgrade::from_request_parts(parts, state).await.map(crate::limits::capped_ws)))
    }
}

impl OperationInput for WsUpgrade {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        <WebSocketUpgrade as OperationInput>::operation_input(ctx, operation);
    }
}

/// The 202 answer of a workload mutation: the operation and the workload it acts on.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WorkloadAccepted {
    #[serde(flatten)]
    pub accepted: super::OperationAccepted,
    /// The real Kubernetes name and namespace (e.g. the deterministic download Job name).
    pub workload: WorkloadRef,
}

/// Who calls: the principal's access to `cluster` and its audit actor.
pub(crate) fn caller(state: &AppState, principal: &Principal, cluster: &str) -> Caller {
    Caller { access: principal.kube_access(cluster, &state.namespace_policy), actor: principal.actor() }
}

/// The answer to a mutation through `core::api`: the dry run (`200`), no change (`200`), or the
/// operation (`202`) with the workload it acts on when it acts on one (`WorkloadAccepted`).
pub(crate) fn respond(submitted: Submitted) -> Response {
    match submitted {
        Submitted::DryRun(d) => super::dry_run(d),
        Submitted::NoChange(plan) => {
            let message = plan.render();
            Json(super::NoChange { no_change: true, plan, message }).into_response()
        }
        Submitted::Accepted { submission: s, workload } => {
            let accepted = super::operation_accepted(s.operation, !s.created, s.plan);
            match workload {
                Some(workload) => (StatusCode::ACCEPTED, Json(WorkloadAccepted { accepted, workload })).into_response(),
                None => (StatusCode::ACCEPTED, Json(accepted)).into_response(),
            }
        }
    }
}

/// Documents a workload mutation's responses.
pub(crate) fn workload_mutation(
    op: aide::transform::TransformOperation<'_>,
) -> aide::transform::TransformOperation<'_> {
    mutation(op)
        .response_with::<202, Json<WorkloadAccepted>, _>(|r| r.description("Operation recorded and started"))
        .response::<404, ProblemJson>()
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ClusterPath {
    /// InstantStart cluster name.
    pub cluster: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct JobPath {
    pub cluster: String,
    /// Training job name.
    pub job: String,
}

// Not `deny_unknown_fields`: the job list reads its page's `limit` and `cursor` from the same
// query string.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct NamespaceQuery {
    /// Only this namespace (default: all; a job name must then be unique across namespaces).
    pub namespace: Option<String>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteJobQuery {
    #[serde(default)]
    pub dry_run: bool,
    pub namespace: Option<String>,
}

fn default_tail() -> u32 {
    200
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// Pod of the job (default: the Ray head, or rank 0).
    pub pod: Option<String>,
    /// Number of last lines (at most 5000).
    #[serde(default = "default_tail")]
    pub tail: u32,
    pub namespace: Option<String>,
}

fn default_stream_tail() -> u32 {
    100
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogStreamQuery {
    pub pod: Option<String>,
    /// Number of last lines sent before following (at most 5000).
    #[serde(default = "default_stream_tail")]
    pub tail: u32,
    pub namespace: Option<String>,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/clusters/{cluster}/jobs",
            get_with(list, |op| {
                errors(op.id("job_list").summary("Training jobs with phase, pods and recovery budget").tag("jobs"))
                    .response::<200, Paged<JobSummary>>()
                    .response::<404, ProblemJson>()
            })
            .post_with(submit, |op| {
                workload_mutation(
                    op.id("job_submit")
                        .summary("Submit a training job (runtime hyperpod or ray); the dry run shows the manifests")
                        .tag("jobs"),
                )
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/jobs/{job}",
            get_with(get, |op| {
                errors(op.id("job_get").summary("A training job: pods, conditions, events, manifest").tag("jobs"))
                    .response::<200, Json<JobDetail>>()
                    .response::<404, ProblemJson>()
                    .response::<409, ProblemJson>()
            })
            .delete_with(delete, |op| {
                workload_mutation(op.id("job_delete").summary("Delete a training job and its pods").tag("jobs"))
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/jobs/{job}/logs",
            get_with(logs, |op| {
                errors(op.id("job_logs").summary("The last log lines of one pod of a job").tag("jobs"))
                    .response::<200, Json<PodLogs>>()
                    .response::<404, ProblemJson>()
                    .response::<409, ProblemJson>()
            }),
        )
        .api_route(
            "/api/clusters/{cluster}/jobs/{job}/logs/stream",
            get_with(logs_stream, |op| {
                errors(
                    op.id("job_logs_stream")
                        .summary(
                            "WebSocket of a job pod's log: text frames of newline-delimited {\"pod\",\"line\"} documents (the lines ready when the frame was sent), then {\"end\":true,\"reason\"}",
                        )
                        .tag("jobs"),
                )
                .response::<404, ProblemJson>()
                .response::<429, ProblemJson>()
            }),
        )
}

/// The cluster's Kubernetes as the caller reaches it, and the namespace a read is confined to
/// (`instantstart_core::api::workloads::cluster_as`).
pub(crate) fn kube_as(
    state: &AppState,
    principal: &Principal,
    cluster: &str,
    namespace: Option<&str>,
) -> Result<(KubeTarget, Option<String>), ApiError> {
    let access = principal.kube_access(cluster, &state.namespace_policy);
    Ok(workloads::cluster_as(state.store.as_ref(), cluster, &access, namespace)?)
}

async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<NamespaceQuery>,
    paging: PageParams,
) -> Result<Paged<JobSummary>, ApiError> {
    let request = paging.request("jobs", 2)?;
    let (target, namespace) = kube_as(&state, &principal, &p.cluster, q.namespace.as_deref())?;
    let jobs = jobs::list_jobs(state.kube.as_ref(), &target, namespace.as_deref()).await?;
    paging.in_memory(jobs, "jobs", Order::Ascending, |j| vec![j.namespace.clone(), j.name.clone()], &request)
}

async fn submit(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<ClusterPath>,
    ApiQuery(q): ApiQuery<DryRunQuery>,
    IdempotencyKey(key): IdempotencyKey,
    WorkloadBody(body, _): WorkloadBody<TrainingJobRequest>,
) -> Result<Response, ApiError> {
    let caller = caller(&state, &principal, &p.cluster);
    Ok(respond(jobs::submit(&state.engine, &p.cluster, body, &caller, q.dry_run, key).await?))
}

async fn get(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<JobPath>,
    ApiQuery(q): ApiQuery<NamespaceQuery>,
) -> Result<Json<JobDetail>, ApiError> {
    let (target, namespace) = kube_as(&state, &principal, &p.cluster, q.namespace.as_deref())?;
    Ok(Json(jobs::job_detail(state.kube.as_ref(), &target, &p.job, namespace.as_deref()).await?))
}

async fn delete(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<JobPath>,
    ApiQuery(q): ApiQuery<DeleteJobQuery>,
    IdempotencyKey(key): IdempotencyKey,
) -> Result<Response, ApiError> {
    let (target, namespace) = kube_as(&state, &principal, &p.cluster, q.namespace.as_deref())?;
    let caller = caller(&state, &principal, &p.cluster);
    let (engine, store, kube) = (&state.engine, state.store.as_ref(), state.kube.as_ref());
    let namespace = namespace.as_deref();
    let submitted =
        jobs::delete(engine, store, kube, &target, &p.cluster, &p.job, namespace, &caller, q.dry_run, key).await?;
    Ok(respond(submitted))
}

async fn logs(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiPath(p): ApiPath<JobPath>,
    ApiQuery(q): ApiQuery<LogQuery>,
) -> Result<Json<PodLogs>, ApiError> {
    let (target, namespace) = kube_as(&state, &principal, &p.cluster, q.namespace.as_deref())?;
    let logs =
        jobs::job_logs(state.kube.as_ref(), &target, &p.job, namespace.as_deref(), q.pod.as_deref(), q.tail).await?;
    Ok(Json(logs))
}

async fn logs_stream(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    ApiPath(p): ApiPath<JobPath>,
    ApiQuery(q): ApiQuery<LogStreamQuery>,
    WsUpgrade(ws): WsUpgrade,
) -> Result<Response, ApiError> {
    check_origin(&headers)?;
    let (target, namespace) = kube_as(&state, &principal, &p.cluster, q.namespace.as_deref())?;
    let (namespace, pod) =
        jobs::log_pod(state.kube.as_ref(), &target, &p.job, namespace.as_deref(), q.pod.as_deref()).await?;
    let ws = ws.map_err(|_| {
        ApiError::BadRequest("this endpoint is a WebSocket: send an HTTP/1.1 Upgrade: websocket request".into())
    })?;
    let slot = super::stream::ws_slot(&state, &principal)?;
    let kube = state.kube.clone();
    let hub = state.log_hub.clone();
    let tail = q.tail.min(jobs::MAX_TAIL);
    Ok(ws.on_upgrade(move |socket| async move {
        follow_logs(socket, hub, kube, target, namespace, pod, tail).await;
        drop(slot);
    }))
}

async fn send_json(socket: &mut WebSocket, v: &Value) -> bool {
    socket.send(Message::Text(v.to_string().into())).await.is_ok()
}

/// Streams one pod's log: the last `tail` lines, then new lines until the container ends. Every
/// follower of a pod shares one upstream follow ([`crate::log_hub`]); frames are
/// newline-delimited `{"pod","line"}` documents, the last one `{"end": true, "reason"}`.
///
/// # Guarantees
/// The tail is one frame, sent before any live line: a client that reconnects matches that
/// first frame against what it already showed (the UI's `LogStream`, the client's `resume`).
async fn follow_logs(
    mut socket: WebSocket,
    hub: Arc<LogHub>,
    kube: Arc<dyn KubeApi>,
    target: KubeTarget,
    namespace: String,
    pod: String,
    tail: u32,
) {
    // Waiting for the upstream (the container may not have started): the client may hang up.
    let subscribe = hub.subscribe(kube, target, namespace, pod, tail);
    tokio::pin!(subscribe);
    let mut sub = loop {
        tokio::select! {
            sub = &mut subscribe => break sub,
            incoming = socket.recv() => if matches!(incoming, Some(Ok(Message::Close(_))) | None | Some(Err(_))) {
                return;
            },
        }
    };
    if let Some(text) = sub.tail.take()
        && socket.send(Message::Text(text.into())).await.is_err()
    {
        return;
    }
    if let Some(end) = sub.ended.take() {
        let _ = socket.send(Message::Text(end.to_string().into())).await;
        let _ = socket.send(Message::Close(None)).await;
        return;
    }
    loop {
        tokio::select! {
            frame = sub.frames.recv() => match frame {
                Ok(frame) => match frame.as_ref() {
                    Frame::Text(text) => {
                        if socket.send(Message::Text(text.clone())).await.is_err() {
                            return;
                        }
                    }
                    Frame::End(end) => {
                        let _ = socket.send(Message::Text(end.to_string().into())).await;
                        break;
                    }
                },
                // Fell too far behind: say so instead of losing lines silently.
                Err(broadcast::error::RecvError::Lagged(frames)) => {
                    if !send_json(&mut socket, &json!({ "skipped": frames, "unit": "frames" })).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => {
                    let _ = send_json(&mut socket, &json!({ "end": true, "reason": "the log stream stopped" })).await;
                    break;
                }
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
        }
    }
    let _ = socket.send(Message::Close(None)).await;
}

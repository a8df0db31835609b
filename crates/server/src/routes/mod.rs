//! The route table: every endpoint, its auth rule and its OpenAPI description, in one place.
//!
//! Conventions (also in the OpenAPI document and docs/rest-api.md):
//! - JSON in and out; errors are `application/problem+json` with every finding.
//! - Mutations return `202` with the operation and accept `Idempotency-Key`; `?dry_run=true`
//!   returns the plan (`200`) and changes nothing.
//! - `400` invalid, `401` unauthenticated, `403` wrong scope/CSRF, `404`, `409` conflict (another
//!   mutation on the target is running, or an idempotency key reused with another body),
//!   `422` valid but impossible (e.g. an immutable field).
//! - Successful JSON reads carry a strong `ETag`; `If-None-Match` with it answers `304`
//!   (`crate::conditional`).

mod capacity;
mod clusters;
mod context;
mod endpoints;
mod governance;
mod hyperpod;
mod hyperpod_attach;
mod jobs;
mod meta;
mod metrics;
mod mlflow;
mod operations;
pub(crate) mod page;
mod session;
mod sim;
mod storage;
mod stream;
mod tokens;

use crate::AppState;
use crate::error::{ApiError, ProblemJson};
use aide::OperationInput;
use aide::axum::ApiRouter;
use aide::generate::GenContext;
use aide::openapi::{OpenApi, Operation};
use aide::transform::{TransformOpenApi, TransformOperation};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use instantstart_core::operation::Operation as CoreOperation;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Instant;

pub use crate::limits::MAX_BODY_BYTES;

/// Builds the application router and records its OpenAPI document in `state`.
pub fn router(state: AppState) -> axum::Router {
    aide::generate::extract_schemas(true);
    aide::generate::infer_responses(false);
    let mut protected = ApiRouter::new()
        .merge(context::routes())
        .merge(clusters::routes())
        .merge(capacity::routes())
        .merge(metrics::routes())
        .merge(hyperpod::routes())
        .merge(governance::routes())
        .merge(hyperpod_attach::routes())
        .merge(jobs::routes())
        .merge(storage::routes())
        .merge(mlflow::routes())
        .merge(endpoints::routes())
        .merge(operations::routes())
        .merge(session::protected_routes())
        .merge(tokens::routes())
        .merge(stream::routes());
    if state.sim.is_some() {
        protected = protected.merge(sim::routes());
    }
    let mut public = ApiRouter::new().merge(session::public_routes()).merge(meta::routes());
    if state.public_metrics {
        public = public.merge(meta::metrics_routes());
    } else {
        protected = protected.merge(meta::metrics_routes());
    }
    let protected = protected
        .route_layer(middleware::from_fn_with_state(state.conditional, crate::conditional::conditional_get))
        .route_layer(middleware::from_fn_with_state(state.clone(), crate::read_cache::read_cache))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_auth));
    let mut api = OpenApi::default();
    let documented = ApiRouter::new().merge(protected).merge(public).finish_api_with(&mut api, describe_api);
    state.set_openapi(&api);
    documented
        .fallback(fallback)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(limit_request))
        .layer(middleware::from_fn_with_state(state.allowed_hosts.clone(), crate::host::check_host))
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .with_state(state)
}

fn describe_api(api: TransformOpenApi<'_>) -> TransformOpenApi<'_> {
    api.title("InstantStart API")
        .version(env!("CARGO_PKG_VERSION"))
        .description(
            "Control plane for Amazon SageMaker HyperPod on Amazon EKS. Every mutation returns 202 with an \
             operation whose steps record their phase; follow it with GET /api/operations/{id} or the \
             WebSocket /api/operations/stream. Mutations accept an Idempotency-Key header and ?dry_run=true. \
             Errors are RFC 9457 problem+json with every validation finding (field path and rule).",
        )
        .security_scheme(
            "bearer",
            aide::openapi::SecurityScheme::Http {
                scheme: "bearer".into(),
                bearer_format: Some("InstantStart API token".into()),
                description: Some("Token from <data-dir>/token or `instantstart-server token create`.".into()),
                extensions: Default::default(),
            },
        )
        .security_scheme(
            "session",
            aide::openapi::SecurityScheme::ApiKey {
                location: aide::openapi::ApiKeyLocation::Cookie,
                name: crate::auth::SESSION_COOKIE.into(),
                description: Some("Browser session from POST /api/login; changes also need X-CSRF-Token.".into()),
                extensions: Default::default(),
            },
        )
}

/// Authenticates every protected request and stores the [`crate::auth::Principal`].
/// A token's scope must allow the route it asks for ([`instantstart_core::credentials::Scope::allows`]).
async fn require_auth(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    match state.auth.authorize(req.method(), req.headers()) {
        Ok(principal) => {
            let route = req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_default();
            if let Err(why) = principal.scope.allows(req.method().as_str(), &route) {
                return ApiError::Forbidden(format!("token {:?}: {why}", principal.name)).into_response();
            }
            req.extensions_mut().insert(principal);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}

/// Refuses a declared body over [`MAX_BODY_BYTES`] before reading it (`413`), and answers `503`
/// when a handler takes longer than [`crate::limits::REQUEST_TIMEOUT`] (WebSocket upgrades
/// stream on and are exempt). See [`crate::limits`].
async fn limit_request(req: Request, next: Next) -> Response {
    limit_request_within(crate::limits::REQUEST_TIMEOUT, req, next).await
}

pub(crate) async fn limit_request_within(timeout: std::time::Duration, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return ApiError::TooLarge(format!("request body larger than {MAX_BODY_BYTES} bytes")).into_response();
    }
    let upgrade = req.headers().get(axum::http::header::UPGRADE).is_some();
    if upgrade {
        return next.run(req).await;
    }
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => ApiError::Unavailable(format!("no answer within {} s", timeout.as_secs())).into_response(),
    }
}

/// Request metrics and a trace line per request; adds baseline security headers.
async fn observe(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().as_str().to_string();
    let route =
        req.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| "unmatched".into());
    let mut response = next.run(req).await;
    let status = response.status().as_u16();
    state.metrics.record(&method, &route, status, started.elapsed());
    tracing::debug!(%method, %route, status, elapsed_ms = started.elapsed().as_millis() as u64, "request");
    let h = response.headers_mut();
    h.insert("x-content-type-options", "nosniff".parse().expect("static"));
    h.insert("x-frame-options", "DENY".parse().expect("static"));
    h.insert("referrer-policy", "no-referrer".parse().expect("static"));
    response
}

async fn fallback(uri: axum::http::Uri) -> Response {
    if uri.path().starts_with("/api/") || uri.path() == "/api" {
        return ApiError::NotFound(format!("no API route {}", uri.path())).into_response();
    }
    crate::ui::serve(uri).await
}

/// A JSON request body decoded into `T`; shape errors name the field (`400` problem+json).
pub struct ApiBody<T>(pub T, pub serde_json::Value);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let is_json = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("application/json") || ct.contains("+json"));
        if !is_json {
            return Err(ApiError::BadRequest("expected Content-Type: application/json".into()));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::BadRequest(format!("request body larger than {MAX_BODY_BYTES} bytes"))
            } else {
                ApiError::BadRequest(e.body_text())
            }
        })?;
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::BadRequest(format!("body is not valid JSON: {e}")))?;
        let typed = instantstart_core::api::decode(&value)?;
        Ok(ApiBody(typed, value))
    }
}

impl<T: JsonSchema> OperationInput for ApiBody<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        <Json<T> as OperationInput>::operation_input(ctx, operation);
    }
}

/// Query parameters; a malformed query is a `400` problem+json.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e| ApiError::BadRequest(e.body_text()))
    }
}

impl<T: JsonSchema> OperationInput for ApiQuery<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        <axum::extract::Query<T> as OperationInput>::operation_input(ctx, operation);
    }
}

/// Path parameters; a malformed path is a `400` problem+json.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> axum::extract::FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e| ApiError::BadRequest(e.body_text()))
    }
}

impl<T: JsonSchema> OperationInput for ApiPath<T> {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        <axum::extract::Path<T> as OperationInput>::operation_input(ctx, operation);
    }
}

/// `?dry_run=true` on mutations.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
pub struct DryRunQuery {
    /// Return the plan without changing anything.
    #[serde(default)]
    pub dry_run: bool,
}

/// Links of an operation.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OperationLinks {
    #[serde(rename = "self")]
    pub this: String,
    pub stream: String,
}

/// Response of every mutation: the operation and how to follow it to completion.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OperationAccepted {
    pub operation: CoreOperation,
    /// True when an earlier identical request with the same Idempotency-Key is returned.
    pub replayed: bool,
    pub links: OperationLinks,
    /// How a client decides completion.
    pub completion: String,
    /// The explicit diff being applied (changes of existing resources).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<instantstart_core::diff::Plan>,
}

/// Response of `?dry_run=true`: what would be done, nothing was changed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DryRun {
    pub dry_run: bool,
    pub target: String,
    /// The request as it would be recorded (defaults filled in).
    pub request: serde_json::Value,
    pub steps: Vec<instantstart_core::operation::StepSpec>,
    /// The explicit diff against the real state, for changes of existing resources.
    pub plan: Option<instantstart_core::diff::Plan>,
    /// Preflight checks (quotas, offerings, training plans, address space); a `fail` blocks.
    pub checks: Vec<instantstart_core::preflight::PreflightCheck>,
}

/// The `200` of a mutation that may find nothing to do: a dry run's plan (`DryRun`, with
/// `?dry_run=true`) or `NoChange` (the real state already matches). Documentation only:
/// handlers answer one of the two.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum PlanOrNoChange {
    DryRun(DryRun),
    NoChange(NoChange),
}

/// Response when the real state already matches the request: no operation was created.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NoChange {
    /// Always true: marks the "already in this state" answer.
    pub no_change: bool,
    /// The empty plan.
    pub plan: instantstart_core::diff::Plan,
    pub message: String,
}

/// Validates, reads the real state, and starts the operation (or answers the dry run / no-op).
pub(crate) async fn submit(
    state: &crate::AppState,
    kind: instantstart_core::operation::OperationKind,
    request: serde_json::Value,
    principal: &crate::auth::Principal,
    dry: bool,
    key: Option<String>,
) -> Result<Response, ApiError> {
    use instantstart_core::engine::Outcome;
    if dry {
        return Ok(dry_run(state.engine.dry_run_checked(kind, &request).await?));
    }
    Ok(match state.engine.submit_checked(kind, &request, principal.actor(), key).await? {
        Outcome::Submitted(s) => {
            let s = *s;
            accepted_with_plan(s.operation, !s.created, s.plan)
        }
        Outcome::NoChange(plan) => {
            let message = plan.render();
            Json(NoChange { no_change: true, plan, message }).into_response()
        }
    })
}

/// [`submit`] of a change a `core::api` noun module built (`api::<noun>::<verb>`).
pub(crate) async fn submit_to(
    state: &crate::AppState,
    submission: instantstart_core::api::submission::Submission,
    principal: &crate::auth::Principal,
    dry: bool,
    key: Option<String>,
) -> Result<Response, ApiError> {
    submit(state, submission.kind, submission.request, principal, dry, key).await
}

pub(crate) fn accepted_with_plan(
    operation: CoreOperation,
    replayed: bool,
    plan: Option<instantstart_core::diff::Plan>,
) -> Response {
    (StatusCode::ACCEPTED, Json(operation_accepted(operation, replayed, plan))).into_response()
}

/// The body of a `202`: the operation, its links and how to decide completion.
pub(crate) fn operation_accepted(
    operation: CoreOperation,
    replayed: bool,
    plan: Option<instantstart_core::diff::Plan>,
) -> OperationAccepted {
    let id = operation.id.0.clone();
    OperationAccepted {
        operation,
        replayed,
        links: OperationLinks {
            this: format!("/api/operations/{id}"),
            stream: format!("/api/operations/stream?operation_id={id}"),
        },
        completion: format!(
            "poll GET /api/operations/{id} (or follow the stream) until status is succeeded, failed, needs_attention or cancelled"
        ),
        plan,
    }
}

pub(crate) fn dry_run(d: instantstart_core::engine::DryRun) -> Response {
    Json(DryRun {
        dry_run: true,
        target: d.prepared.target,
        request: d.prepared.request,
        steps: d.prepared.steps,
        plan: d.plan,
        checks: d.checks,
    })
    .into_response()
}

/// The optional `Idempotency-Key` header of a mutation: the same key with the same body
/// returns the existing operation; with another body it is a `409`.
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _state: &S) -> Result<Self, ApiError> {
        idempotency_key(&parts.headers).map(IdempotencyKey)
    }
}

impl OperationInput for IdempotencyKey {
    fn operation_input(ctx: &mut GenContext, operation: &mut Operation) {
        use aide::openapi::{
            HeaderStyle, Parameter, ParameterData, ParameterSchemaOrContent, ReferenceOr, SchemaObject,
        };
        let schema = ctx.schema.subschema_for::<String>();
        operation.parameters.push(ReferenceOr::Item(Parameter::Header {
            parameter_data: ParameterData {
                name: "Idempotency-Key".into(),
                description: Some("Same key + same body returns the existing operation; another body is a 409.".into()),
                required: false,
                deprecated: None,
                format: ParameterSchemaOrContent::Schema(SchemaObject {
                    json_schema: schema,
                    example: None,
                    external_docs: None,
                }),
                example: None,
                examples: Default::default(),
                explode: None,
                extensions: Default::default(),
            },
            style: HeaderStyle::Simple,
        }));
    }
}

/// The `Idempotency-Key` header, validated.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else { return Ok(None) };
    let s = v.to_str().map_err(|_| ApiError::BadRequest("Idempotency-Key must be visible ASCII".into()))?;
    if s.is_empty() || s.len() > 255 || !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ApiError::BadRequest("Idempotency-Key must be 1-255 visible ASCII characters".into()));
    }
    Ok(Some(s.to_string()))
}

/// Documents the error responses every protected route can return.
pub(crate) fn errors(op: TransformOperation<'_>) -> TransformOperation<'_> {
    op.response_with::<400, ProblemJson, _>(|r| r.description("Invalid request (every finding listed)"))
        .response_with::<401, ProblemJson, _>(|r| r.description("Not authenticated"))
        .response_with::<403, ProblemJson, _>(|r| r.description("Scope or CSRF check failed"))
        .security_requirement("bearer")
        .security_requirement("session")
}

/// Documents a mutation's responses.
pub(crate) fn mutation(op: TransformOperation<'_>) -> TransformOperation<'_> {
    errors(op)
        .response_with::<202, Json<OperationAccepted>, _>(|r| r.description("Operation recorded and started"))
        .response_with::<200, Json<DryRun>, _>(|r| r.description("Dry run: the plan, nothing changed"))
        .response_with::<409, ProblemJson, _>(|r| {
            r.description(
                "Another mutation of the target is running, or the Idempotency-Key was used with another body",
            )
        })
        .response_with::<422, ProblemJson, _>(|r| r.description("Valid but impossible in the current state"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use std::time::Duration;
    use tower::ServiceExt;

    /// Review #10: a handler that has not answered within the request timeout is answered
    /// `503`; one that answers before it is served; an upgrade (a WebSocket) streams on. The
    /// router's timeout is [`crate::limits::REQUEST_TIMEOUT`] (180 s, [`limit_request`]); the
    /// same middleware runs here with a short one so the test takes a second.
    #[tokio::test]
    async fn a_request_that_outlasts_the_request_timeout_is_answered_503() {
        assert_eq!(crate::limits::REQUEST_TIMEOUT, Duration::from_secs(180));
        let limit = Duration::from_millis(400);
        let slow = |after: Duration| async move {
            tokio::time::sleep(after).await;
            "late answer"
        };
        let app = axum::Router::new()
            .route("/in-time", axum::routing::get(move || slow(limit / 4)))
            .route("/too-slow", axum::routing::get(move || slow(limit * 3)))
            .route("/ws", axum::routing::get(move || slow(limit + limit / 2)))
            .layer(middleware::from_fn(move |req, next| limit_request_within(limit, req, next)));
        let call = |uri: &'static str, upgrade: bool| {
            let app = app.clone();
            async move {
                let mut req = axum::http::Request::get(uri);
                if upgrade {
                    req = req.header(axum::http::header::UPGRADE, "websocket");
                }
                let started = Instant::now();
                let r = app.oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
                (r.status(), started.elapsed())
            }
        };
        let (status, took) = call("/in-time", false).await;
        assert_eq!(status, StatusCode::OK);
        assert!(took < limit, "{took:?}");
        let (status, took) = call("/too-slow", false).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            took >= limit && took < limit * 3,
            "answered when the limit passed, not when the handler did: {took:?}"
        );
        let (status, took) = call("/ws", true).await;
        assert_eq!(status, StatusCode::OK);
        assert!(took > limit, "{took:?}");
    }
}

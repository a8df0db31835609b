//! API errors as RFC 9457 `application/problem+json`, carrying every validation finding.

use aide::OperationOutput;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use instantstart_core::Finding;
use instantstart_core::engine::EngineError;
use instantstart_core::operation::OperationId;
use instantstart_core::store::StoreError;
use instantstart_core::validate::{ValidationError, ValidationKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// RFC 9457 problem details, extended with validation findings.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// A URI reference naming the problem type, e.g. `urn:instantstart:problem:validation`.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Every broken rule, each with its field path (validation problems only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The operation involved (e.g. the one holding a conflicting target).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_id: Option<String>,
}

/// Every way an API call can fail.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Validation(ValidationError),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{detail}")]
    Conflict { detail: String, operation: Option<OperationId> },
    #[error("{0}")]
    Provider(String),
    /// The request body is larger than the server accepts (413).
    #[error("{0}")]
    TooLarge(String),
    /// The server could not answer in time (503).
    #[error("{0}")]
    Unavailable(String),
    /// The caller holds too many of something at once, e.g. open WebSockets (429).
    #[error("{0}")]
    TooMany(String),
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        match self {
            ApiError::Validation(v) if v.kind == ValidationKind::Unprocessable => {
                (StatusCode::UNPROCESSABLE_ENTITY, "unprocessable", "Request cannot be applied")
            }
            ApiError::Validation(_) => (StatusCode::BAD_REQUEST, "validation", "Invalid request"),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad-request", "Bad request"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized", "Authentication required"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden", "Not allowed"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            ApiError::Conflict { .. } => (StatusCode::CONFLICT, "conflict", "Conflict"),
            ApiError::Provider(_) => (StatusCode::BAD_GATEWAY, "provider", "Cloud provider error"),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "too-large", "Request too large"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", "Try again later"),
            ApiError::TooMany(_) => (StatusCode::TOO_MANY_REQUESTS, "too-many", "Too many at once"),
            ApiError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal", "Internal error"),
        }
    }

    pub fn problem(&self) -> Problem {
        let (status, kind, title) = self.parts();
        let (findings, operation_id) = match self {
            ApiError::Validation(v) => (v.findings.clone(), None),
            ApiError::Conflict { operation, .. } => (vec![], operation.as_ref().map(|o| o.0.clone())),
            _ => (vec![], None),
        };
        Problem {
            kind: format!("urn:instantstart:problem:{kind}"),
            title: title.into(),
            status: status.as_u16(),
            detail: self.to_string(),
            findings,
            operation_id,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = self.problem();
        let status = StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        (status, [(header::CONTENT_TYPE, "application/problem+json")], body).into_response()
    }
}

impl OperationOutput for ApiError {
    type Inner = Problem;

    fn operation_response(
        ctx: &mut aide::generate::GenContext,
        _op: &mut aide::openapi::Operation,
    ) -> Option<aide::openapi::Response> {
        Some(problem_response(ctx))
    }
}

/// Documentation-only marker for an `application/problem+json` response.
pub struct ProblemJson;

impl OperationOutput for ProblemJson {
    type Inner = Problem;

    fn operation_response(
        ctx: &mut aide::generate::GenContext,
        _op: &mut aide::openapi::Operation,
    ) -> Option<aide::openapi::Response> {
        Some(problem_response(ctx))
    }
}

fn problem_response(ctx: &mut aide::generate::GenContext) -> aide::openapi::Response {
    use aide::openapi::{MediaType, Response as DocResponse, SchemaObject};
    let json_schema = ctx.schema.subschema_for::<Problem>();
    DocResponse {
        description: "RFC 9457 problem details".into(),
        content: [(
            "application/problem+json".to_string(),
            MediaType {
                schema: Some(SchemaObject { json_schema, example: None, external_docs: None }),
                ..Default::default()
            },
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    }
}

impl From<ValidationError> for ApiError {
    fn from(v: ValidationError) -> Self {
        ApiError::Validation(v)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { ref running, .. } => {
                ApiError::Conflict { detail: e.to_string(), operation: Some(running.clone()) }
            }
            StoreError::IdempotencyMismatch { ref operation, .. } => {
                ApiError::Conflict { detail: e.to_string(), operation: Some(operation.clone()) }
            }
            StoreError::NotFound { .. } => ApiError::NotFound(e.to_string()),
            StoreError::AlreadyExists { .. } => ApiError::Conflict { detail: e.to_string(), operation: None },
            // Only a driver's own writes are fenced; should one surface, another replica drives it.
            StoreError::Fenced { ref operation, .. } => {
                ApiError::Conflict { detail: e.to_string(), operation: Some(operation.clone()) }
            }
            StoreError::BadCursor => ApiError::Validation(ValidationError::invalid(
                "cursor",
                "not a cursor of this list: use the `next` link of a previous page",
            )),
            StoreError::Backend(_) => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Validation(v) => ApiError::Validation(v),
            EngineError::Store(s) => s.into(),
            EngineError::NotFound(_)
            | EngineError::StepNotFound { .. }
            | EngineError::UnknownCluster(_)
            | EngineError::Missing(_) => ApiError::NotFound(e.to_string()),
            EngineError::InvalidState(_) => ApiError::Conflict { detail: e.to_string(), operation: None },
            EngineError::Forbidden(m) => ApiError::Forbidden(m),
            EngineError::UnknownKind(_) => ApiError::Internal(e.to_string()),
            EngineError::Provider(p) => p.into(),
        }
    }
}

impl From<instantstart_core::api::metrics::MetricsError> for ApiError {
    fn from(e: instantstart_core::api::metrics::MetricsError) -> Self {
        use instantstart_core::api::metrics::MetricsError;
        match e {
            MetricsError::Engine(e) => e.into(),
            MetricsError::Read(e) => e.into(),
        }
    }
}

/// The one mapping of a read error of `core::api` to HTTP.
impl From<instantstart_core::api::ReadError> for ApiError {
    fn from(e: instantstart_core::api::ReadError) -> Self {
        use instantstart_core::api::ReadError;
        match e {
            ReadError::Provider(p) => p.into(),
            ReadError::Validation(v) => ApiError::Validation(v),
            ReadError::Missing(_) => ApiError::NotFound(e.to_string()),
            ReadError::Ambiguous(_) | ReadError::NotReady(_) => {
                ApiError::Conflict { detail: e.to_string(), operation: None }
            }
            ReadError::Engine(e) => e.into(),
        }
    }
}

impl From<instantstart_core::provider::ProviderError> for ApiError {
    fn from(e: instantstart_core::provider::ProviderError) -> Self {
        use instantstart_core::provider::ProviderErrorKind as K;
        match e.kind {
            K::NotFound => ApiError::NotFound(e.to_string()),
            K::InvalidRequest => ApiError::BadRequest(e.to_string()),
            K::AccessDenied => ApiError::Forbidden(e.to_string()),
            _ => ApiError::Provider(e.to_string()),
        }
    }
}

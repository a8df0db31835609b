//! Mapping SDK failures to [`ProviderError`]s classified by what the caller should do.
//!
//! | SDK failure | [`ProviderErrorKind`] |
//! | --- | --- |
//! | throttling codes (`Throttling`, `RequestLimitExceeded`, `SlowDown`, HTTP 429 …) | `Throttled` |
//! | 5xx, timeouts, dispatch (network) failures, unparseable 5xx responses | `Transient` |
//! | a new IAM role that is not assumable yet (eventual consistency) | `Transient` |
//! | `*NotFound*`, `NoSuchEntity`, `ResourceNotFound`, `NoSuchBucket`, SageMaker's "Could not find" validation, HTTP 404 | `NotFound` |
//! | `AlreadyExists`, `EntityAlreadyExists`, `ResourceInUse`, `BucketAlreadyOwnedByYou`, `*.Duplicate` | `AlreadyExists` |
//! | `ConflictException`, `DependencyViolation`, `IncorrectState`, HTTP 409 | `Conflict` (busy: wait) |
//! | `BucketNotEmpty`, `DeleteConflict` (waiting does not help) | `Failed` |
//! | `AccessDenied`, `UnauthorizedOperation`, expired or invalid credentials, HTTP 403 | `AccessDenied` |
//! | `LimitExceeded`, `ResourceLimitExceeded`, `ServiceQuotaExceeded`, `*LimitExceeded` | `QuotaExceeded` |
//! | validation (`ValidationException`, `InvalidParameter*`, `Invalid*`, `Malformed*`), HTTP 400 | `InvalidRequest` |
//! | anything else | `Failed` |
//!
//! The SDK's own retry policy (standard mode) has already retried throttling and transient
//! errors a few times when one of these reaches the engine; the engine then backs off and
//! retries `Throttled`/`Transient` again, bounded by its `max_retries`.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use instantstart_core::provider::{ProviderError, ProviderErrorKind};

/// Codes that mean "slow down".
const THROTTLING: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "SlowDown",
    "ProvisionedThroughputExceededException",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
    "BandwidthLimitExceeded",
];

/// Codes of temporary server-side problems.
const TRANSIENT: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "InternalServerException",
    "InternalServiceError",
    "ServerException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Unavailable",
    "RequestTimeout",
    "RequestTimeoutException",
    "IDPCommunicationError",
];

const ACCESS_DENIED: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnauthorizedException",
    "AuthFailure",
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "ExpiredToken",
    "ExpiredTokenException",
    "SignatureDoesNotMatch",
    "MissingAuthenticationToken",
    "InvalidAccessKeyId",
    "NotAuthorized",
    "OptInRequired",
];

const ALREADY_EXISTS: &[&str] = &[
    "AlreadyExists",
    "AlreadyExistsException",
    "EntityAlreadyExists",
    "ResourceInUse",
    "ResourceInUseException",
    "ResourceAlreadyExists",
    "ResourceAlreadyExistsException",
    "BucketAlreadyOwnedByYou",
    "BucketAlreadyExists",
    "RouteAlreadyExists",
    "Resource.AlreadyAssociated",
];

const CONFLICT: &[&str] = &[
    "ConflictException",
    "Conflict",
    "DependencyViolation",
    "IncorrectState",
    "IncorrectInstanceState",
    "OperationAborted",
    "ConcurrentModification",
    "ConcurrentModificationException",
    "InvalidStateException",
];

/// Codes that waiting does not fix (the caller must change something first).
const PERMANENT: &[&str] = &["BucketNotEmpty", "DeleteConflict"];

/// Markers of IAM eventual consistency: a role created seconds ago is not assumable yet.
const NOT_ASSUMABLE_YET: &[&str] = &[
    "could not be assumed",
    "cannot be assumed",
    "unable to assume",
    "could not assume",
    "not authorized to perform: sts:assumerole",
    "role is not valid",
    "role does not exist",
    "invalid execution role",
];

/// Classifies an error by its code, HTTP status and message.
pub fn classify(code: Option<&str>, status: Option<u16>, message: &str) -> ProviderErrorKind {
    let lower = message.to_ascii_lowercase();
    if let Some(code) = code {
        if THROTTLING.contains(&code) {
            return ProviderErrorKind::Throttled;
        }
        if TRANSIENT.contains(&code) {
            return ProviderErrorKind::Transient;
        }
        if ACCESS_DENIED.contains(&code) {
            return ProviderErrorKind::AccessDenied;
        }
        if ALREADY_EXISTS.contains(&code) || code.ends_with(".Duplicate") || code.ends_with("AlreadyExists") {
            return ProviderErrorKind::AlreadyExists;
        }
        if PERMANENT.contains(&code) {
            return ProviderErrorKind::Failed;
        }
        if CONFLICT.contains(&code) {
            return ProviderErrorKind::Conflict;
        }
        if code.contains("NotFound") || code.starts_with("NoSuch") || code == "NotFound" {
            return ProviderErrorKind::NotFound;
        }
        if code.contains("LimitExceeded") || code.contains("QuotaExceeded") || code == "TooManyBuckets" {
            return ProviderErrorKind::QuotaExceeded;
        }
        let validation = code.starts_with("Validation")
            || code.starts_with("Invalid")
            || code.starts_with("Malformed")
            || code.starts_with("MissingParameter")
            || code.starts_with("UnsupportedOperation")
            || code == "BadRequestException"
            || code == "UnknownParameter";
        if validation {
            // IAM is eventually consistent: EKS and SageMaker reject a role created a moment
            // ago as "cannot be assumed". Retryable (the engine's retries bound it).
            if NOT_ASSUMABLE_YET.iter().any(|m| lower.contains(m)) {
                return ProviderErrorKind::Transient;
            }
            // SageMaker answers some lookups of a missing resource with a ValidationException
            // ("Could not find cluster 'x'").
            if code == "ValidationException" && lower.contains("could not find") {
                return ProviderErrorKind::NotFound;
            }
            return ProviderErrorKind::InvalidRequest;
        }
    }
    match status {
        Some(429) => ProviderErrorKind::Throttled,
        Some(s) if s >= 500 => ProviderErrorKind::Transient,
        Some(404) => ProviderErrorKind::NotFound,
        Some(403) => ProviderErrorKind::AccessDenied,
        Some(409) => ProviderErrorKind::Conflict,
        Some(400) => ProviderErrorKind::InvalidRequest,
        _ => ProviderErrorKind::Failed,
    }
}

/// Converts an SDK error of the call `api` (e.g. `ec2:CreateVpc`) into a [`ProviderError`].
pub fn sdk_error<E>(api: &str, err: SdkError<E, HttpResponse>) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let status = err.raw_response().map(|r| r.status().as_u16());
    let (kind, message) = match &err {
        SdkError::TimeoutError(_) => {
            (ProviderErrorKind::Transient, format!("timed out: {}", DisplayErrorContext(&err)))
        }
        SdkError::DispatchFailure(d) => {
            let kind = if d.is_user() { ProviderErrorKind::InvalidRequest } else { ProviderErrorKind::Transient };
            (kind, format!("request not delivered: {}", DisplayErrorContext(&err)))
        }
        SdkError::ConstructionFailure(_) => {
            (ProviderErrorKind::InvalidRequest, format!("request could not be built: {}", DisplayErrorContext(&err)))
        }
        SdkError::ResponseError(_) => {
            let kind = match status {
                Some(s) if s >= 500 => ProviderErrorKind::Transient,
                Some(429) => ProviderErrorKind::Throttled,
                _ => ProviderErrorKind::Failed,
            };
            let s = status.map(|s| format!("HTTP {s}: ")).unwrap_or_default();
            (kind, format!("{s}unreadable response (not an AWS answer?): {}", body_excerpt(&err)))
        }
        SdkError::ServiceError(_) => {
            let code = err.code();
            let text = err.message().unwrap_or_default();
            let message = match (code, text.is_empty()) {
                (Some(c), false) => format!("{c}: {text}"),
                (Some(c), true) => c.to_string(),
                (None, false) => text.to_string(),
                (None, true) => {
                    let s = status.map(|s| s.to_string()).unwrap_or_else(|| "?".into());
                    format!("HTTP {s} without an AWS error code: {}", body_excerpt(&err))
                }
            };
            (classify(code, status, text), message)
        }
        _ => (ProviderErrorKind::Failed, DisplayErrorContext(&err).to_string()),
    };
    ProviderError::new(api, kind, message)
}

/// The first 200 bytes of an error response's body, whitespace collapsed (an HTML error page
/// from a proxy or a fake is summarised, not dumped).
fn body_excerpt<E>(err: &SdkError<E, HttpResponse>) -> String {
    err.raw_response()
        .and_then(|r| r.body().bytes())
        .map(|b| String::from_utf8_lossy(&b[..b.len().min(200)]).split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A [`ProviderError`] for provider data that does not have the expected shape.
pub fn malformed(api: &str, what: &str) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::Failed, format!("unexpected response: {what}"))
}

/// Shorthand for an `InvalidRequest` error raised by the adapter itself.
pub fn invalid(api: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

/// Whether an error means the resource is absent.
pub fn is_not_found(e: &ProviderError) -> bool {
    e.kind == ProviderErrorKind::NotFound
}

/// `Ok(None)` for a not-found error, the error otherwise.
pub fn none_if_not_found<T>(r: Result<T, ProviderError>) -> Result<Option<T>, ProviderError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProviderErrorKind::*;

    /// Data-driven: (code, HTTP status, message, expected kind).
    #[test]
    fn classification_table() {
        let cases: &[(Option<&str>, Option<u16>, &str, ProviderErrorKind)] = &[
            (Some("ThrottlingException"), Some(400), "Rate exceeded", Throttled),
            (Some("Throttling"), Some(400), "Rate exceeded", Throttled),
            (Some("RequestLimitExceeded"), Some(503), "Request limit exceeded.", Throttled),
            (Some("SlowDown"), Some(503), "", Throttled),
            (None, Some(429), "", Throttled),
            (Some("InternalFailure"), Some(500), "", Transient),
            (Some("ServerException"), Some(500), "", Transient),
            (None, Some(503), "", Transient),
            (Some("InvalidVpcID.NotFound"), Some(400), "The vpc ID 'vpc-1' does not exist", NotFound),
            (Some("NoSuchEntity"), Some(404), "The role with name x cannot be found.", NotFound),
            (Some("ResourceNotFoundException"), Some(404), "No cluster found for name: x.", NotFound),
            (Some("ResourceNotFound"), Some(400), "Cluster x not found", NotFound),
            (Some("NoSuchBucket"), Some(404), "", NotFound),
            (Some("NotFound"), Some(404), "", NotFound),
            (None, Some(404), "", NotFound),
            (Some("EntityAlreadyExists"), Some(409), "Role with name x already exists.", AlreadyExists),
            (Some("ResourceInUseException"), Some(409), "Cluster already exists with name: x", AlreadyExists),
            (Some("ResourceInUse"), Some(400), "Cluster x already exists", AlreadyExists),
            (Some("BucketAlreadyOwnedByYou"), Some(409), "", AlreadyExists),
            (Some("InvalidGroup.Duplicate"), Some(400), "", AlreadyExists),
            (Some("InvalidPermission.Duplicate"), Some(400), "", AlreadyExists),
            (Some("ConflictException"), Some(400), "Cluster is updating", Conflict),
            (Some("DependencyViolation"), Some(400), "", Conflict),
            (Some("BucketNotEmpty"), Some(409), "The bucket you tried to delete is not empty", Failed),
            (Some("DeleteConflict"), Some(409), "Cannot delete entity, must detach all policies first.", Failed),
            (Some("AccessDenied"), Some(403), "", AccessDenied),
            (Some("AccessDeniedException"), Some(400), "", AccessDenied),
            (Some("UnauthorizedOperation"), Some(403), "", AccessDenied),
            (Some("ExpiredToken"), Some(403), "", AccessDenied),
            (None, Some(403), "", AccessDenied),
            (Some("LimitExceeded"), Some(409), "Cannot exceed quota for RolesPerAccount", QuotaExceeded),
            (Some("ResourceLimitExceeded"), Some(400), "The account-level service limit", QuotaExceeded),
            (Some("VpcLimitExceeded"), Some(400), "", QuotaExceeded),
            (Some("ServiceQuotaExceededException"), Some(402), "", QuotaExceeded),
            (Some("ValidationException"), Some(400), "1 validation error detected", InvalidRequest),
            (Some("InvalidParameterValue"), Some(400), "", InvalidRequest),
            (Some("InvalidParameterException"), Some(400), "unsupported Kubernetes version", InvalidRequest),
            (Some("MalformedPolicyDocument"), Some(400), "", InvalidRequest),
            (None, Some(400), "", InvalidRequest),
            (
                Some("InvalidParameterException"),
                Some(400),
                "Role with arn: arn:aws:iam::1:role/x could not be assumed because it does not exist or the trusted entity is not correct",
                Transient,
            ),
            (Some("ValidationException"), Some(400), "Unable to assume role arn:aws:iam::1:role/x", Transient),
            (Some("ValidationException"), Some(400), "Could not find cluster 'x'.", NotFound),
            (Some("SomethingElse"), Some(418), "", Failed),
            (None, None, "", Failed),
        ];
        for (code, status, message, expected) in cases {
            assert_eq!(classify(*code, *status, message), *expected, "{code:?} {status:?} {message:?}");
        }
    }
}

//! EKS bearer tokens, made in process (what `aws eks get-token` and aws-iam-authenticator do).
//!
//! A token is `k8s-aws-v1.` followed by the unpadded base64url encoding of a presigned STS
//! `GetCallerIdentity` URL whose signature covers the `x-k8s-aws-id: <cluster name>` header.
//! The EKS authenticator replays the URL to STS to learn the caller's IAM identity. The URL is
//! presigned with `X-Amz-Expires=60` like the AWS CLI (STS ignores the value; the
//! authenticator accepts a token for 15 minutes after `X-Amz-Date`), so a token is treated as
//! valid for [`TOKEN_LIFETIME`] (14 minutes, as the CLI's `expirationTimestamp`) and refreshed
//! [`REFRESH_BEFORE`] earlier than that.
//!
//! No AWS CLI and no kubeconfig exec plugin are involved: credentials come from any
//! [`ProvideCredentials`] (the AWS SDK's default chain in production, fixed keys in tests).

use crate::error::K8sError;
use aws_credential_types::Credentials;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SignatureLocation, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use base64::Engine;
use std::time::{Duration, SystemTime};

/// Prefix of every EKS token.
pub const TOKEN_PREFIX: &str = "k8s-aws-v1.";
/// Header naming the EKS cluster; part of the signature.
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// `X-Amz-Expires` of the presigned URL (the AWS CLI's value).
pub const PRESIGN_EXPIRES: Duration = Duration::from_secs(60);
/// How long a token is used after signing.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(14 * 60);
/// A cached token is replaced this long before it expires.
pub const REFRESH_BEFORE: Duration = Duration::from_secs(4 * 60);

/// A bearer token for an EKS cluster's API server.
#[derive(Clone, PartialEq, Eq)]
pub struct EksToken {
    pub token: String,
    /// When the token stops being accepted (signing time + [`TOKEN_LIFETIME`]).
    pub expires_at: SystemTime,
}

impl std::fmt::Debug for EksToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EksToken").field("token", &"<redacted>").field("expires_at", &self.expires_at).finish()
    }
}

impl EksToken {
    /// Whether the token should be replaced at `now`.
    pub fn needs_refresh(&self, now: SystemTime) -> bool {
        now + REFRESH_BEFORE >= self.expires_at
    }
}

/// The regional STS host of `region` (`sts.<region>.amazonaws.com`, `.com.cn` in China).
pub fn sts_host(region: &str) -> String {
    if region.starts_with("cn-") {
        format!("sts.{region}.amazonaws.com.cn")
    } else {
        format!("sts.{region}.amazonaws.com")
    }
}

/// Signs a token for `cluster` in `region` with `credentials` at `time`. Pure: the same inputs
/// give the same token.
pub fn token_at(
    credentials: &Credentials,
    region: &str,
    cluster: &str,
    time: SystemTime,
) -> Result<EksToken, K8sError> {
    let url = format!("https://{}/?Action=GetCallerIdentity&Version=2011-06-15", sts_host(region));
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(PRESIGN_EXPIRES);
    let identity: Identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| K8sError::Token(e.to_string()))?
        .into();
    let headers = [(CLUSTER_ID_HEADER, cluster)];
    let signable = SignableRequest::new("GET", &url, headers.into_iter(), SignableBody::Bytes(&[]))
        .map_err(|e| K8sError::Token(e.to_string()))?;
    let (instructions, _signature) = sign(signable, &params).map_err(|e| K8sError::Token(e.to_string()))?.into_parts();
    let mut request =
        http::Request::builder().method("GET").uri(&url).body(()).map_err(|e| K8sError::Token(e.to_string()))?;
    instructions.apply_to_request_http1x(&mut request);
    let presigned = request.uri().to_string();
    Ok(EksToken {
        token: format!("{TOKEN_PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(presigned)),
        expires_at: time + TOKEN_LIFETIME,
    })
}

/// Fetches credentials from `provider` and signs a token for now.
pub async fn token(
    provider: &(dyn ProvideCredentials + '_),
    region: &str,
    cluster: &str,
) -> Result<EksToken, K8sError> {
    let credentials = provider.provide_credentials().await.map_err(|e| K8sError::Token(e.to_string()))?;
    token_at(&credentials, region, cluster, SystemTime::now())
}

/// The presigned URL inside a token (for tests and diagnostics).
pub fn decode(token: &str) -> Option<String> {
    let encoded = token.strip_prefix(TOKEN_PREFIX)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(encoded).ok()?;
    String::from_utf8(bytes).ok()
}

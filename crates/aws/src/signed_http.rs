//! SigV4-signed HTTPS calls to AWS data planes the SDK has no client for (the SageMaker
//! managed MLflow REST API, Amazon Managed Service for Prometheus' query API): one shared
//! hyper + rustls client, requests signed with `aws-sigv4` using the credentials of the SDK's
//! chain.
//!
//! # Guarantees
//!
//! - The signature covers the method, URL, the headers given and the payload
//!   (`x-amz-content-sha256` is sent), for the region and signing name given.
//! - A call takes at most [`CALL_TIMEOUT`] to answer and as long again for its body; a timeout
//!   or a connection failure is [`ProviderErrorKind::Transient`], missing credentials
//!   [`ProviderErrorKind::AccessDenied`]. The status and body are returned as they are: each
//!   API decodes its own error shapes.

use crate::AwsProvider;
use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use instantstart_core::provider::{ProviderError, ProviderErrorKind, Result};
use std::time::{Duration, SystemTime};

/// Timeout of one signed call (and again of reading its body).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

type HttpClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// `s` percent-encoded as RFC 3986 asks of a query component or form value: every byte but
/// the unreserved `A–Z a–z 0–9 - _ . ~` as `%XX` (what SigV4's canonical query string expects;
/// a space is `%20`, never `+`).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The shared HTTPS client, built on first use.
#[derive(Debug, Default)]
pub struct SignedHttp {
    client: std::sync::OnceLock<HttpClient>,
}

/// One request to sign and send.
#[derive(Debug, Clone)]
pub struct SignedCall<'a> {
    /// The API name errors carry (e.g. `aps:QueryMetrics`).
    pub api: &'a str,
    /// SigV4 signing name (`aps`, `sagemaker-mlflow`).
    pub service: &'a str,
    pub region: &'a str,
    pub method: &'a str,
    pub url: &'a str,
    /// Headers sent and signed.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: Vec<u8>,
}

/// What a signed call answered.
#[derive(Debug, Clone)]
pub struct SignedAnswer {
    pub status: u16,
    /// AWS's `x-amzn-ErrorType` header of an error (`AccessDeniedException`, …), when sent.
    pub error_type: Option<String>,
    pub body: Bytes,
}

impl SignedHttp {
    fn client(&self, api: &str) -> Result<&HttpClient> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(rustls::crypto::aws_lc_rs::default_provider())
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::Failed, format!("TLS roots: {e}")))?
            .https_or_http()
            .enable_http1()
            .build();
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
        Ok(self.client.get_or_init(|| client))
    }
}

impl AwsProvider {
    /// Signs `call` with the SDK chain's credentials and sends it.
    pub(crate) async fn signed_call(&self, call: SignedCall<'_>) -> Result<SignedAnswer> {
        let SignedCall { api, service, region, method, url, headers, body } = call;
        let conf = self.sdk_config().await?;
        let provider = conf
            .credentials_provider()
            .ok_or_else(|| ProviderError::new(api, ProviderErrorKind::AccessDenied, "no AWS credentials configured"))?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::AccessDenied, format!("AWS credentials: {e}")))?;
        let identity: Identity = credentials.into();
        let mut settings = SigningSettings::default();
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(region)
            .name(service)
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::Failed, format!("signing: {e}")))?
            .into();
        let signable = SignableRequest::new(method, url, headers.iter().copied(), SignableBody::Bytes(&body))
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::InvalidRequest, format!("signing: {e}")))?;
        let (instructions, _) = sign(signable, &params)
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::Failed, format!("signing: {e}")))?
            .into_parts();
        let mut builder = http::Request::builder().method(method).uri(url);
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        let mut request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::InvalidRequest, format!("{url}: {e}")))?;
        instructions.apply_to_request_http1x(&mut request);
        let client = self.http.client(api)?;
        let response = tokio::time::timeout(CALL_TIMEOUT, client.request(request))
            .await
            .map_err(|_| ProviderError::new(api, ProviderErrorKind::Transient, format!("{url}: timed out")))?
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::Transient, format!("{url}: {e}")))?;
        let status = response.status().as_u16();
        // `AccessDeniedException:http://internal.amazon.com/...`: the name before any `:`.
        let error_type = response
            .headers()
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(':').next().unwrap_or(v).to_string());
        let bytes = tokio::time::timeout(CALL_TIMEOUT, response.into_body().collect())
            .await
            .map_err(|_| ProviderError::new(api, ProviderErrorKind::Transient, format!("{url}: body timed out")))?
            .map_err(|e| ProviderError::new(api, ProviderErrorKind::Transient, format!("{url}: {e}")))?
            .to_bytes();
        Ok(SignedAnswer { status, error_type, body: bytes })
    }
}

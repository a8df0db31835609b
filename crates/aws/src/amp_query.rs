//! PromQL range queries of an Amazon Managed Service for Prometheus workspace:
//! [`PrometheusQuery`] for [`AwsProvider`], the transport of `instantstart_core::amp_metrics`.
//!
//! AMP's "QueryMetrics" operation (AMP user guide, "Prometheus-compatible APIs" →
//! <https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-APIReference-QueryMetrics.html>):
//! `POST https://aps-workspaces.<region>.amazonaws.com/workspaces/<workspaceId>/api/v1/query_range`
//! with the form fields `query`, `start`, `end` (Unix seconds) and `step` (seconds), signed with
//! SigV4 for service `aps` ("Query using Prometheus-compatible APIs": requests must be signed;
//! `awscurl --service aps`), IAM action `aps:QueryMetrics` on the workspace. The answer is
//! Prometheus' HTTP API JSON (`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{…},"values":[[t,"v"],…]}]}}`).
//!
//! # Guarantees
//!
//! - Errors name [`AMP_QUERY_API`]: Prometheus' `{"status":"error","errorType":…,"error":…}`
//!   (`bad_data`: the query is invalid → [`ProviderErrorKind::InvalidRequest`]; `timeout`,
//!   `canceled`, `unavailable` → [`ProviderErrorKind::Transient`]) and AWS's JSON errors by their
//!   `x-amzn-ErrorType` and status (`AccessDeniedException`/403 →
//!   [`ProviderErrorKind::AccessDenied`] naming `aps:QueryMetrics`;
//!   `ResourceNotFoundException`/404 → [`ProviderErrorKind::NotFound`]; `ThrottlingException`/429
//!   → [`ProviderErrorKind::Throttled`]; `ConflictException`/409 → [`ProviderErrorKind::Conflict`];
//!   5xx → [`ProviderErrorKind::Transient`]).
//! - A value Prometheus writes as `"NaN"` or `"+Inf"` is dropped, not plotted.
//! - The endpoint can be overridden ([`AwsProvider::with_amp_query_endpoint`]; tests point it at
//!   the simulator's loopback AMP).

use crate::AwsProvider;
use crate::signed_http::{SignedCall, percent_encode};
use async_trait::async_trait;
use instantstart_core::provider::{
    AMP_QUERY_API, PromSeries, PrometheusQuery, ProviderError, ProviderErrorKind, RangeQuery, Result,
};
use serde_json::Value;

/// SigV4 signing name of AMP's Prometheus-compatible APIs.
pub const SIGNING_NAME: &str = "aps";
/// Series kept at most from one answer (a node has 8 GPUs; a job's mean is one series).
pub const MAX_SERIES: usize = 256;

impl AwsProvider {
    /// Sends AMP queries to `url` (e.g. `http://127.0.0.1:9090`) instead of
    /// `https://aps-workspaces.<region>.amazonaws.com`.
    pub fn with_amp_query_endpoint(mut self, url: impl Into<String>) -> Self {
        self.amp_query_endpoint = Some(url.into().trim_end_matches('/').to_string());
        self
    }

    /// The URL of `query_range` of workspace `id`.
    pub fn amp_query_url(&self, region: &str, id: &str) -> String {
        let base = match &self.amp_query_endpoint {
            Some(e) => e.clone(),
            None => format!("https://aps-workspaces.{region}.amazonaws.com"),
        };
        format!("{base}/workspaces/{id}/api/v1/query_range")
    }
}

/// The form body of a range query (`application/x-www-form-urlencoded`).
pub fn form_body(q: &RangeQuery) -> String {
    let num = |x: f64| if x.fract() == 0.0 { format!("{}", x as i64) } else { format!("{x:.3}") };
    format!("query={}&start={}&end={}&step={}", percent_encode(&q.query), num(q.start), num(q.end), q.step_seconds)
}

/// Decodes an answer of `query_range` of workspace `workspace`.
pub fn query_response(workspace: &str, status: u16, error_type: Option<&str>, body: &[u8]) -> Result<Vec<PromSeries>> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = |k: &str| value.get(k).and_then(Value::as_str);
    let fail = |kind, message: String| Err(ProviderError::new(AMP_QUERY_API, kind, message));
    if (200..300).contains(&status) && text("status") == Some("success") {
        let data = value.get("data").cloned().unwrap_or(Value::Null);
        if data.get("resultType").and_then(Value::as_str) != Some("matrix") {
            return fail(ProviderErrorKind::Failed, format!("workspace {workspace}: the answer is not a matrix"));
        }
        let mut out = Vec::new();
        for s in data.get("result").and_then(Value::as_array).into_iter().flatten().take(MAX_SERIES) {
            let labels = s
                .get("metric")
                .and_then(Value::as_object)
                .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
                .unwrap_or_default();
            let points = s
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    let t = p.get(0)?.as_f64()?;
                    let v: f64 = p.get(1)?.as_str()?.parse().ok()?;
                    v.is_finite().then_some([t, v])
                })
                .collect();
            out.push(PromSeries { labels, points });
        }
        return Ok(out);
    }
    // Prometheus' own error shape.
    if text("status") == Some("error") {
        let kind = match text("errorType").unwrap_or_default() {
            "bad_data" => ProviderErrorKind::InvalidRequest,
            "timeout" | "canceled" | "unavailable" => ProviderErrorKind::Transient,
            _ if status >= 500 => ProviderErrorKind::Transient,
            _ => ProviderErrorKind::Failed,
        };
        let detail = text("error").unwrap_or_default();
        return fail(kind, format!("workspace {workspace}: {}: {detail}", text("errorType").unwrap_or("error")));
    }
    // AWS's JSON error: `x-amzn-ErrorType` and `{"message": …}`.
    let message = text("message")
        .or_else(|| text("Message"))
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    let code = error_type.or_else(|| text("__type")).unwrap_or_default();
    let kind = match (code, status) {
        ("AccessDeniedException" | "UnrecognizedClientException" | "InvalidSignatureException", _) | (_, 401 | 403) => {
            ProviderErrorKind::AccessDenied
        }
        ("ResourceNotFoundException", _) | (_, 404) => ProviderErrorKind::NotFound,
        ("ThrottlingException", _) | (_, 429) => ProviderErrorKind::Throttled,
        ("ConflictException", _) | (_, 409) => ProviderErrorKind::Conflict,
        ("ValidationException", _) => ProviderErrorKind::InvalidRequest,
        (_, s) if s >= 500 => ProviderErrorKind::Transient,
        _ => ProviderErrorKind::InvalidRequest,
    };
    let code = if code.is_empty() { format!("HTTP {status}") } else { code.to_string() };
    let hint = if kind == ProviderErrorKind::AccessDenied {
        format!(" (the control plane needs {AMP_QUERY_API} on workspace {workspace})")
    } else {
        String::new()
    };
    fail(kind, format!("workspace {workspace}: {code}: {message}{hint}"))
}

#[async_trait]
impl PrometheusQuery for AwsProvider {
    async fn query_range(&self, region: &str, workspace_id: &str, query: &RangeQuery) -> Result<Vec<PromSeries>> {
        let url = self.amp_query_url(region, workspace_id);
        let headers = [("content-type", "application/x-www-form-urlencoded")];
        let answer = self
            .signed_call(SignedCall {
                api: AMP_QUERY_API,
                service: SIGNING_NAME,
                region,
                method: "POST",
                url: &url,
                headers: &headers,
                body: form_body(query).into_bytes(),
            })
            .await?;
        query_response(workspace_id, answer.status, answer.error_type.as_deref(), &answer.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_carries_the_query_and_the_window() {
        let q = RangeQuery {
            query: "max by (gpu) (DCGM_FI_DEV_GPU_UTIL{Hostname=\"n-1\"})".into(),
            start: 1_700_000_000.0,
            end: 1_700_000_900.0,
            step_seconds: 10,
        };
        assert_eq!(
            form_body(&q),
            "query=max%20by%20%28gpu%29%20%28DCGM_FI_DEV_GPU_UTIL%7BHostname%3D%22n-1%22%7D%29\
             &start=1700000000&end=1700000900&step=10"
        );
    }

    #[test]
    fn a_matrix_becomes_series_and_errors_are_classified() {
        let ok = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"gpu":"0"},"values":[[1700000000,"97"],[1700000010,"NaN"],[1700000020,"95.5"]]}]}}"#;
        let s = query_response("ws-1", 200, None, ok).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].labels["gpu"], "0");
        assert_eq!(s[0].points, vec![[1_700_000_000.0, 97.0], [1_700_000_020.0, 95.5]]);
        let table: &[(u16, Option<&str>, &str, ProviderErrorKind, &str)] = &[
            (
                400,
                None,
                r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#,
                ProviderErrorKind::InvalidRequest,
                "parse error",
            ),
            (
                503,
                None,
                r#"{"status":"error","errorType":"unavailable","error":"x"}"#,
                ProviderErrorKind::Transient,
                "unavailable",
            ),
            (
                403,
                Some("AccessDeniedException"),
                r#"{"message":"User is not authorized"}"#,
                ProviderErrorKind::AccessDenied,
                "aps:QueryMetrics",
            ),
            (
                404,
                Some("ResourceNotFoundException"),
                r#"{"message":"Workspace not found"}"#,
                ProviderErrorKind::NotFound,
                "Workspace not found",
            ),
            (429, None, r#"{"message":"Rate exceeded"}"#, ProviderErrorKind::Throttled, "HTTP 429"),
            (
                409,
                Some("ConflictException"),
                r#"{"message":"not ACTIVE"}"#,
                ProviderErrorKind::Conflict,
                "ConflictException",
            ),
            (502, None, "bad gateway", ProviderErrorKind::Transient, "bad gateway"),
            (
                200,
                None,
                r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
                ProviderErrorKind::Failed,
                "not a matrix",
            ),
        ];
        for (status, error_type, body, kind, says) in table {
            let e = query_response("ws-1", *status, *error_type, body.as_bytes()).unwrap_err();
            assert_eq!((e.api.as_str(), e.kind), (AMP_QUERY_API, *kind), "{status} {body}");
            assert!(e.message.contains(says) && e.message.contains("ws-1"), "{e}");
        }
    }
}

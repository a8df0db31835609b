//! The simulated AMP query API served on loopback: `POST
//! /workspaces/{workspaceId}/api/v1/query_range` with the form fields `query`, `start`, `end`,
//! `step` (AMP user guide, "QueryMetrics":
//! <https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-APIReference-QueryMetrics.html>),
//! answering Prometheus' HTTP API JSON over the simulated DCGM telemetry of the EKS cluster
//! whose observability add-on writes to the workspace ([`super::query`] is the PromQL).
//!
//! Rules (each a documented AWS behaviour unless marked):
//! - **Signed requests only** ("Query using Prometheus-compatible APIs": requests must be signed
//!   with SigV4): no `Authorization` is 403 `MissingAuthenticationTokenException`; one that is
//!   not `AWS4-HMAC-SHA256 Credential=<key>/<yyyymmdd>/<region>/aps/aws4_request,
//!   SignedHeaders=…, Signature=…`, or without an `x-amz-date` of that day, is 403
//!   `IncompleteSignatureException`/`InvalidSignatureException` (a credential scoped to another
//!   service or to another region than the workspace's). The signature itself is not verified.
//! - An unknown workspace (or one of another region) is 404 `ResourceNotFoundException`; a
//!   workspace not `ACTIVE`/`UPDATING` is 409 `ConflictException` (the status code AMP uses for a
//!   workspace in the wrong state is an assumption, not verified).
//! - A query outside the subset, or a window of more than 11,000 points (Prometheus' limit), is
//!   400 with Prometheus' `{"status":"error","errorType":"bad_data","error":…}`.
//! - Every query is the call `aps:QueryMetrics` of the cloud's pipeline (counted, open to fault
//!   injection: a throttle is 429 `ThrottlingException`).

use super::query;
use crate::base::rkey;
use crate::cloud::SimCloud;
use crate::world::World;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use instantstart_core::provider::{AMP_QUERY_API, ProviderError, ProviderErrorKind};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Points per series Prometheus answers at most.
const MAX_POINTS: f64 = 11_000.0;
/// The observability add-on, whose configuration names the workspace it writes to.
const OBSERVABILITY_ADDON: &str = "amazon-sagemaker-hyperpod-observability";

/// The simulated AMP query API on a loopback port. Dropping it stops the server.
#[derive(Debug)]
pub struct AmpQueryServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for AmpQueryServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AmpQueryServer {
    /// `http://127.0.0.1:<port>`: what the AWS adapter's AMP query endpoint override takes.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn aws_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json"), (header::HeaderName::from_static("x-amzn-errortype"), code)],
        json!({ "message": message }).to_string(),
    )
        .into_response()
}

fn bad_data(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        json!({ "status": "error", "errorType": "bad_data", "error": message }).to_string(),
    )
        .into_response()
}

/// The credential scope's region of a well-formed SigV4 `Authorization` for service `aps`; else
/// the 403's error type and message.
fn signed_region(headers: &HeaderMap) -> Result<String, (&'static str, String)> {
    let forbidden = |code: &'static str, m: &str| Err((code, m.to_string()));
    let Some(auth) = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) else {
        return forbidden("MissingAuthenticationTokenException", "Missing Authentication Token");
    };
    let Some(rest) = auth.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return forbidden("IncompleteSignatureException", "Authorization must be AWS4-HMAC-SHA256");
    };
    let part = |name: &str| rest.split(',').map(str::trim).find_map(|p| p.strip_prefix(name));
    let (Some(credential), Some(_), Some(_)) = (part("Credential="), part("SignedHeaders="), part("Signature=")) else {
        return forbidden(
            "IncompleteSignatureException",
            "Authorization needs Credential, SignedHeaders and Signature",
        );
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [_, day, region, service, "aws4_request"] = scope.as_slice() else {
        return forbidden(
            "IncompleteSignatureException",
            "Credential must be <key>/<date>/<region>/<service>/aws4_request",
        );
    };
    if *service != "aps" {
        return forbidden(
            "InvalidSignatureException",
            &format!("Credential should be scoped to correct service: 'aps' (got '{service}')"),
        );
    }
    let date = headers.get("x-amz-date").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if date.len() != 16 || !date.starts_with(day) || !date.ends_with('Z') {
        return forbidden(
            "IncompleteSignatureException",
            "x-amz-date must be the credential scope's day (yyyymmddThhmmssZ)",
        );
    }
    Ok(region.to_string())
}

/// The form fields of the body (`application/x-www-form-urlencoded`).
fn form(body: &[u8]) -> BTreeMap<String, String> {
    form_urlencoded::parse(body).into_owned().collect()
}

/// A parsed range: start, end (Unix seconds), step (seconds).
fn range(f: &BTreeMap<String, String>) -> Result<(f64, f64, f64), String> {
    let num = |k: &str| -> Result<f64, String> {
        let v = f.get(k).ok_or_else(|| format!("invalid parameter \"{k}\": missing"))?;
        let v = v.strip_suffix('s').unwrap_or(v);
        v.parse::<f64>().map_err(|_| format!("invalid parameter \"{k}\": cannot parse {v:?}"))
    };
    let (start, end, step) = (num("start")?, num("end")?, num("step")?);
    if end < start {
        return Err("invalid parameter \"end\": end timestamp must not be before start time".into());
    }
    if step <= 0.0 {
        return Err("zero or negative query resolution step widths are not accepted".into());
    }
    if (end - start) / step > MAX_POINTS {
        return Err("exceeded maximum resolution of 11,000 points per timeseries".into());
    }
    Ok((start, end, step))
}

/// The matrix answer of `q` on workspace `id` over `[start, end]`.
fn evaluate(
    w: &World,
    id: &str,
    region: &str,
    q: &query::Query,
    (start, end, step): (f64, f64, f64),
    now: f64,
) -> Result<Value, ProviderError> {
    let ws = w
        .prometheus_workspaces
        .get(id)
        .filter(|r| r.region == region && r.status(now).is_some())
        .ok_or_else(|| ProviderError::not_found(AMP_QUERY_API, format!("Workspace {id} does not exist")))?;
    match ws.status(now) {
        Some("ACTIVE" | "UPDATING") => {}
        status => {
            return Err(ProviderError::new(
                AMP_QUERY_API,
                ProviderErrorKind::Conflict,
                format!("Workspace {id} is {}", status.unwrap_or("DELETING")),
            ));
        }
    }
    // The EKS cluster whose observability add-on writes to this workspace.
    let writer = w.eks.values().find(|c| {
        c.addons.get(OBSERVABILITY_ADDON).is_some_and(|a| {
            a.life.state(now) == instantstart_core::provider::ResourceState::Active
                && a.configuration_values.as_ref().and_then(|v| v.pointer("/ampWorkspace/arn")).and_then(Value::as_str)
                    == Some(ws.arn.as_str())
        })
    });
    let telemetry = writer
        .and_then(|c| w.kube.get(&rkey(&c.region, &c.name)))
        .map(|kw| crate::metrics::telemetry(w, kw, now))
        .unwrap_or_default();
    let display_end = w.display_time(now).timestamp_millis() as f64 / 1000.0;
    let mut series: BTreeMap<BTreeMap<String, String>, Vec<Value>> = BTreeMap::new();
    let mut t_unix = start;
    while t_unix <= end + 1e-9 {
        let t = now - (display_end - t_unix);
        if t <= now {
            let mut samples = Vec::new();
            for node in &telemetry {
                for row in node.rows(t, t_unix) {
                    for field in [
                        instantstart_core::provider::DCGM_GPU_UTIL,
                        instantstart_core::provider::DCGM_FB_USED,
                        instantstart_core::provider::DCGM_FB_FREE,
                    ] {
                        let mut labels: BTreeMap<String, String> =
                            row.labels.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
                        labels.insert("__name__".into(), field.into());
                        samples.push((labels, row.field(field).unwrap_or_default()));
                    }
                }
            }
            for (labels, v) in query::eval(q, &samples) {
                series.entry(labels).or_default().push(json!([t_unix, v.to_string()]));
            }
        }
        t_unix += step;
    }
    let result: Vec<Value> =
        series.into_iter().map(|(metric, values)| json!({ "metric": metric, "values": values })).collect();
    Ok(json!({ "status": "success", "data": { "resultType": "matrix", "result": result } }))
}

async fn handle(State(sim): State<SimCloud>, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let region = match signed_region(&headers) {
        Ok(r) => r,
        Err((code, message)) => return aws_error(StatusCode::FORBIDDEN, code, &message),
    };
    let f = form(&body);
    let Some(text) = f.get("query") else { return bad_data("invalid parameter \"query\": missing") };
    let q = match query::parse(text) {
        Ok(q) => q,
        Err(e) => return bad_data(&format!("invalid parameter \"query\": {e}")),
    };
    let window = match range(&f) {
        Ok(w) => w,
        Err(e) => return bad_data(&e),
    };
    match sim.read(AMP_QUERY_API, |w, cx| evaluate(w, &id, &region, &q, window, cx.now)) {
        Ok(v) => ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response(),
        Err(e) => {
            let (status, code) = match e.kind {
                ProviderErrorKind::NotFound => (StatusCode::NOT_FOUND, "ResourceNotFoundException"),
                ProviderErrorKind::Conflict => (StatusCode::CONFLICT, "ConflictException"),
                ProviderErrorKind::Throttled => (StatusCode::TOO_MANY_REQUESTS, "ThrottlingException"),
                ProviderErrorKind::AccessDenied => (StatusCode::FORBIDDEN, "AccessDeniedException"),
                ProviderErrorKind::InvalidRequest => return bad_data(&e.message),
                _ => (StatusCode::INTERNAL_SERVER_ERROR, "InternalServerException"),
            };
            aws_error(status, code, &e.message)
        }
    }
}

impl SimCloud {
    /// The simulated AMP query API as a router (see the module docs).
    pub fn amp_query_router(&self) -> Router {
        Router::new()
            .route("/workspaces/{id}/api/v1/query_range", post(handle))
            .fallback(|| async {
                aws_error(StatusCode::NOT_FOUND, "UnknownOperationException", "not a simulated AMP path")
            })
            .with_state(self.clone())
    }

    /// Serves [`SimCloud::amp_query_router`] on `127.0.0.1` at a free port until the returned
    /// server is dropped.
    pub async fn serve_amp_query(&self) -> std::io::Result<AmpQueryServer> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let router = self.amp_query_router();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!(error = %e, "simulator: AMP query API stopped");
            }
        });
        Ok(AmpQueryServer { addr, task })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_request_signed_for_aps_is_let_in() {
        let h = |auth: Option<&str>, date: &str| {
            let mut m = HeaderMap::new();
            if let Some(a) = auth {
                m.insert(header::AUTHORIZATION, a.parse().unwrap());
            }
            m.insert("x-amz-date", date.parse().unwrap());
            m
        };
        let good = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-west-2/aps/aws4_request, \
                    SignedHeaders=content-type;host;x-amz-date, Signature=abc";
        assert_eq!(signed_region(&h(Some(good), "20261206T040000Z")).unwrap(), "us-west-2");
        let code = |auth: Option<&str>, date: &str| signed_region(&h(auth, date)).unwrap_err().0;
        assert_eq!(code(None, "20261206T040000Z"), "MissingAuthenticationTokenException");
        assert_eq!(code(Some(&good.replace("/aps/", "/s3/")), "20261206T040000Z"), "InvalidSignatureException");
        assert_eq!(code(Some(good), "20261205T040000Z"), "IncompleteSignatureException");
        assert_eq!(code(Some("Bearer x"), "20261206T040000Z"), "IncompleteSignatureException");
    }

    #[test]
    fn the_form_and_the_range_are_read() {
        let f = form(b"query=avg%28U%7Bpod%3D~%22a%7Cb%22%7D%29&start=100&end=200&step=10s");
        assert_eq!(f["query"], "avg(U{pod=~\"a|b\"})");
        assert_eq!(range(&f).unwrap(), (100.0, 200.0, 10.0));
        let mut g = f.clone();
        g.insert("end".into(), "1000000".into());
        g.insert("step".into(), "1".into());
        assert!(range(&g).unwrap_err().contains("11,000"));
        g.remove("start");
        assert!(range(&g).unwrap_err().contains("start"));
    }
}

//! SageMaker managed MLflow: tracking servers (SageMaker API) and their runs (MLflow REST API).
//!
//! Tracking servers are created, described, listed and deleted with the SageMaker SDK
//! (CreateMlflowTrackingServer, DescribeMlflowTrackingServer, ListMlflowTrackingServers,
//! DeleteMlflowTrackingServer; tags through ListTags).
//!
//! Runs and metric histories come from the MLflow REST API of the server, reached the way the
//! `sagemaker-mlflow` plugin reaches it: `https://<region>.experiments.sagemaker.aws/api/2.0/mlflow/…`
//! with the header `x-mlflow-sm-tracking-server-arn: <ARN>` selecting the server, SigV4-signed
//! with the control plane's own credentials under the signing name `sagemaker-mlflow` (IAM
//! actions `sagemaker-mlflow:SearchExperiments`, `…:SearchRuns`, `…:GetRun`,
//! `…:GetMetricHistory`). The endpoint can be overridden with
//! [`AwsProvider::with_mlflow_endpoint`] or, like the plugin, `SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT`
//! (tests point it at a local `mlflow server`). Calls used: `experiments/search`, `runs/search`,
//! `runs/get`, `metrics/get-history`, each paginated; signed and sent by [`crate::signed_http`].

use crate::AwsProvider;
use crate::error::{classify, sdk_error};
use crate::signed_http::{SignedCall, percent_encode};
use crate::tags;
use async_trait::async_trait;
use aws_sdk_sagemaker::Client as SageMaker;
use instantstart_core::provider::{
    CreateTrackingServer, MAX_RUNS, MetricPoint, MlflowRun, MlflowTracking, ProviderError, ProviderErrorKind, Result,
    RunMetrics, RunQuery, TrackingServer, TrackingServerSize, region_of_arn,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// SigV4 signing name of the SageMaker managed MLflow data plane.
pub const SIGNING_NAME: &str = "sagemaker-mlflow";
/// Header that routes a request to one tracking server.
pub const ARN_HEADER: &str = "x-mlflow-sm-tracking-server-arn";
/// Environment variable overriding the MLflow endpoint (as in the `sagemaker-mlflow` plugin).
pub const ENDPOINT_ENV: &str = "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT";
/// Pages followed at most for one listing.
const MAX_PAGES: usize = 20;
/// Points per `metrics/get-history` page.
const HISTORY_PAGE: u32 = 25_000;

/// How the provider reaches MLflow: an endpoint override.
#[derive(Debug, Default)]
pub struct MlflowConfig {
    pub(crate) endpoint: Option<String>,
}

impl AwsProvider {
    /// Sends MLflow REST calls to `url` (e.g. `http://127.0.0.1:5000`) instead of
    /// `https://<region>.experiments.sagemaker.aws`.
    pub fn with_mlflow_endpoint(mut self, url: impl Into<String>) -> Self {
        self.mlflow.endpoint = Some(url.into().trim_end_matches('/').to_string());
        self
    }

    fn mlflow_base(&self, region: &str) -> String {
        if let Some(e) = &self.mlflow.endpoint {
            return e.clone();
        }
        match std::env::var(ENDPOINT_ENV) {
            Ok(e) if !e.is_empty() => e.trim_end_matches('/').to_string(),
            _ => format!("https://{region}.experiments.sagemaker.aws"),
        }
    }

    /// One signed MLflow REST call: `GET` with `query` or `POST` with a JSON `body`.
    async fn mlflow_call(
        &self,
        api: &str,
        arn: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Value>,
    ) -> Result<Value> {
        let region = region_of_arn(arn)?;
        let mut url = format!("{}/api/2.0/mlflow/{path}", self.mlflow_base(region));
        if !query.is_empty() {
            let q: Vec<String> =
                query.iter().map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v))).collect();
            url = format!("{url}?{}", q.join("&"));
        }
        let method = if body.is_some() { "POST" } else { "GET" };
        let payload = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let headers = [("content-type", "application/json"), (ARN_HEADER, arn)];
        let answer = self
            .signed_call(SignedCall {
                api,
                service: SIGNING_NAME,
                region,
                method,
                url: &url,
                headers: &headers,
                body: payload,
            })
            .await?;
        mlflow_response(api, answer.status, &answer.body)
    }

    async fn experiments(&self, arn: &str) -> Result<Vec<(String, String)>> {
        const API: &str = "sagemaker-mlflow:SearchExperiments";
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut body = json!({ "max_results": 1000 });
            if let Some(t) = &token {
                body["page_token"] = json!(t);
            }
            let page = self.mlflow_call(API, arn, "experiments/search", &[], Some(body)).await?;
            for e in page.get("experiments").and_then(Value::as_array).into_iter().flatten() {
                if let (Some(id), Some(name)) = (str_of(e, "experiment_id"), str_of(e, "name")) {
                    out.push((id.to_string(), name.to_string()));
                }
            }
            token = str_of(&page, "next_page_token").filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }
}

/// Decodes an MLflow answer: JSON on 2xx, `{error_code, message}` classified otherwise.
pub fn mlflow_response(api: &str, status: u16, body: &[u8]) -> Result<Value> {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if (200..300).contains(&status) {
        return if value.is_object() {
            Ok(value)
        } else {
            Err(ProviderError::new(api, ProviderErrorKind::Transient, "MLflow answered with a body that is not JSON"))
        };
    }
    let code = str_of(&value, "error_code").unwrap_or_default();
    let message = str_of(&value, "message")
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    let kind = match code {
        "RESOURCE_DOES_NOT_EXIST" => ProviderErrorKind::NotFound,
        "INVALID_PARAMETER_VALUE" | "BAD_REQUEST" | "INVALID_STATE" => ProviderErrorKind::InvalidRequest,
        "PERMISSION_DENIED" | "UNAUTHENTICATED" => ProviderErrorKind::AccessDenied,
        "REQUEST_LIMIT_EXCEEDED" => ProviderErrorKind::Throttled,
        "TEMPORARILY_UNAVAILABLE" | "INTERNAL_ERROR" => ProviderErrorKind::Transient,
        _ => classify(None, Some(status), &message),
    };
    let text = if code.is_empty() { format!("HTTP {status}: {message}") } else { format!("{code}: {message}") };
    Err(ProviderError::new(api, kind, text))
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// MLflow sends 64-bit integers as JSON numbers or strings depending on the server.
fn int_of(v: &Value, key: &str) -> Option<i64> {
    match v.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn time_of(v: &Value, key: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    int_of(v, key).filter(|ms| *ms > 0).and_then(chrono::DateTime::from_timestamp_millis)
}

/// A run of `runs/search` or `runs/get`, with the experiment name from `experiments`.
pub fn run_of(run: &Value, experiments: &BTreeMap<String, String>) -> Option<MlflowRun> {
    let info = run.get("info")?;
    let run_id = str_of(info, "run_id").or_else(|| str_of(info, "run_uuid"))?.to_string();
    let experiment_id = str_of(info, "experiment_id").unwrap_or_default().to_string();
    let data = run.get("data");
    let pairs = |key: &str| data.and_then(|d| d.get(key)).and_then(Value::as_array).cloned().unwrap_or_default();
    let metrics = pairs("metrics")
        .iter()
        .filter_map(|m| Some((str_of(m, "key")?.to_string(), m.get("value")?.as_f64()?)))
        .collect();
    let params = pairs("params")
        .iter()
        .filter_map(|p| Some((str_of(p, "key")?.to_string(), str_of(p, "value").unwrap_or_default().to_string())))
        .collect();
    let tag_name = pairs("tags")
        .iter()
        .find(|t| str_of(t, "key") == Some("mlflow.runName"))
        .and_then(|t| str_of(t, "value"))
        .map(str::to_string);
    Some(MlflowRun {
        name: str_of(info, "run_name").map(str::to_string).or(tag_name).unwrap_or_else(|| run_id.clone()),
        run_id,
        experiment: experiments.get(&experiment_id).cloned().unwrap_or_else(|| experiment_id.clone()),
        experiment_id,
        status: str_of(info, "status").unwrap_or("RUNNING").to_string(),
        start_time: time_of(info, "start_time"),
        end_time: time_of(info, "end_time"),
        metrics,
        params,
    })
}

async fn list_tags(sm: &SageMaker, arn: &str) -> Result<instantstart_core::provider::Tags> {
    const API: &str = "sagemaker:ListTags";
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let out = sm
            .list_tags()
            .resource_arn(arn)
            .set_next_token(token.clone())
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        all.extend(out.tags().iter().cloned());
        token = out.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(tags::from_sagemaker(&all))
}

fn smithy_time(t: Option<&aws_smithy_types::DateTime>) -> Option<chrono::DateTime<chrono::Utc>> {
    t.and_then(|t| chrono::DateTime::from_timestamp(t.secs(), t.subsec_nanos()))
}

#[async_trait]
impl MlflowTracking for AwsProvider {
    async fn list_tracking_servers(&self, region: &str) -> Result<Vec<TrackingServer>> {
        const API: &str = "sagemaker:ListMlflowTrackingServers";
        let c = self.region(region).await?;
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let out = c
                .sagemaker
                .list_mlflow_tracking_servers()
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            names.extend(
                out.tracking_server_summaries().iter().filter_map(|s| s.tracking_server_name()).map(str::to_string),
            );
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut servers = Vec::new();
        for name in names {
            // A server deleted between the two calls is simply not listed.
            if let Some(s) = self.describe_tracking_server(region, &name).await? {
                servers.push(s);
            }
        }
        Ok(servers)
    }

    async fn describe_tracking_server(&self, region: &str, name: &str) -> Result<Option<TrackingServer>> {
        const API: &str = "sagemaker:DescribeMlflowTrackingServer";
        let c = self.region(region).await?;
        let out = match c.sagemaker.describe_mlflow_tracking_server().tracking_server_name(name).send().await {
            Ok(o) => o,
            Err(e) => {
                let e = sdk_error(API, e);
                return if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) };
            }
        };
        let arn = out.tracking_server_arn().unwrap_or_default().to_string();
        let tags = if arn.is_empty() { Default::default() } else { list_tags(&c.sagemaker, &arn).await? };
        let region = region_of_arn(&arn).map(str::to_string).unwrap_or_else(|_| region.to_string());
        Ok(Some(TrackingServer {
            name: out.tracking_server_name().unwrap_or(name).to_string(),
            arn,
            region,
            status: out.tracking_server_status().map(|s| s.as_str().to_string()).unwrap_or_default(),
            url: out.tracking_server_url().map(str::to_string),
            artifact_store_uri: out.artifact_store_uri().map(str::to_string),
            role_arn: out.role_arn().map(str::to_string),
            size: out.tracking_server_size().and_then(|s| TrackingServerSize::parse(s.as_str())),
            mlflow_version: out.mlflow_version().map(str::to_string),
            created_at: smithy_time(out.creation_time()),
            failure_reason: None,
            tags,
        }))
    }

    async fn create_tracking_server(&self, req: &CreateTrackingServer) -> Result<TrackingServer> {
        const API: &str = "sagemaker:CreateMlflowTrackingServer";
        let c = self.region(&req.region).await?;
        let out = c
            .sagemaker
            .create_mlflow_tracking_server()
            .tracking_server_name(&req.name)
            .artifact_store_uri(&req.artifact_store_uri)
            .tracking_server_size(aws_sdk_sagemaker::types::TrackingServerSize::from(req.size.as_str()))
            .role_arn(&req.role_arn)
            .set_mlflow_version(req.mlflow_version.clone())
            .set_tags(Some(tags::sagemaker(&req.tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(TrackingServer {
            name: req.name.clone(),
            arn: out.tracking_server_arn().unwrap_or_default().to_string(),
            region: req.region.clone(),
            status: "Creating".into(),
            url: None,
            artifact_store_uri: Some(req.artifact_store_uri.clone()),
            role_arn: Some(req.role_arn.clone()),
            size: Some(req.size),
            mlflow_version: req.mlflow_version.clone(),
            created_at: None,
            failure_reason: None,
            tags: req.tags.clone(),
        })
    }

    async fn delete_tracking_server(&self, region: &str, name: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteMlflowTrackingServer";
        let c = self.region(region).await?;
        c.sagemaker
            .delete_mlflow_tracking_server()
            .tracking_server_name(name)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(())
    }

    async fn search_runs(&self, arn: &str, query: &RunQuery) -> Result<Vec<MlflowRun>> {
        const API: &str = "sagemaker-mlflow:SearchRuns";
        let experiments: BTreeMap<String, String> = self.experiments(arn).await?.into_iter().collect();
        let ids: Vec<&String> = match &query.experiment {
            Some(name) => {
                let ids: Vec<&String> = experiments.iter().filter(|(_, n)| *n == name).map(|(id, _)| id).collect();
                if ids.is_empty() {
                    return Err(ProviderError::not_found(
                        API,
                        format!("RESOURCE_DOES_NOT_EXIST: Could not find experiment with name {name}"),
                    ));
                }
                ids
            }
            None => experiments.keys().collect(),
        };
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let max = query.max_results.clamp(1, MAX_RUNS) as usize;
        let mut runs = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut body = json!({
                "experiment_ids": ids,
                "max_results": max - runs.len(),
                "order_by": ["attributes.start_time DESC"],
            });
            if let Some(t) = &token {
                body["page_token"] = json!(t);
            }
            let page = self.mlflow_call(API, arn, "runs/search", &[], Some(body)).await?;
            runs.extend(
                page.get("runs")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|r| run_of(r, &experiments)),
            );
            token = str_of(&page, "next_page_token").filter(|t| !t.is_empty()).map(str::to_string);
            if token.is_none() || runs.len() >= max {
                break;
            }
        }
        runs.truncate(max);
        Ok(runs)
    }

    async fn metric_history(&self, arn: &str, run_id: &str, keys: &[String]) -> Result<RunMetrics> {
        const API: &str = "sagemaker-mlflow:GetMetricHistory";
        let keys: Vec<String> = if keys.is_empty() {
            let run = self.mlflow_call("sagemaker-mlflow:GetRun", arn, "runs/get", &[("run_id", run_id)], None).await?;
            let run = run.get("run").and_then(|r| run_of(r, &BTreeMap::new())).ok_or_else(|| {
                ProviderError::new(API, ProviderErrorKind::Transient, "runs/get answered without a run")
            })?;
            run.metrics.into_keys().collect()
        } else {
            keys.to_vec()
        };
        let mut series = BTreeMap::new();
        let page_size = HISTORY_PAGE.to_string();
        for key in keys {
            let mut points = Vec::new();
            let mut token: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let mut query =
                    vec![("run_id", run_id), ("metric_key", key.as_str()), ("max_results", page_size.as_str())];
                if let Some(t) = &token {
                    query.push(("page_token", t.as_str()));
                }
                let page = self.mlflow_call(API, arn, "metrics/get-history", &query, None).await?;
                points.extend(page.get("metrics").and_then(Value::as_array).into_iter().flatten().filter_map(|m| {
                    Some(MetricPoint {
                        step: int_of(m, "step").unwrap_or(0),
                        value: m.get("value")?.as_f64()?,
                        timestamp: int_of(m, "timestamp").unwrap_or(0),
                    })
                }));
                token = str_of(&page, "next_page_token").filter(|t| !t.is_empty()).map(str::to_string);
                if token.is_none() {
                    break;
                }
            }
            points.sort_by(|a, b| a.step.cmp(&b.step).then(a.timestamp.cmp(&b.timestamp)));
            series.insert(key, points);
        }
        Ok(RunMetrics { run_id: run_id.to_string(), series })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_components_are_percent_encoded() {
        assert_eq!(percent_encode("a b/c+d"), "a%20b%2Fc%2Bd");
        assert_eq!(percent_encode("run_1-x.y~"), "run_1-x.y~");
    }

    #[test]
    fn mlflow_errors_are_classified() {
        let e = mlflow_response(
            "sagemaker-mlflow:GetRun",
            404,
            br#"{"error_code":"RESOURCE_DOES_NOT_EXIST","message":"Run 'x' not found"}"#,
        )
        .unwrap_err();
        assert_eq!(e.kind, ProviderErrorKind::NotFound);
        assert!(e.message.contains("Run 'x' not found"));
        assert_eq!(mlflow_response("a", 503, b"upstream").unwrap_err().kind, ProviderErrorKind::Transient);
        assert_eq!(
            mlflow_response("a", 403, b"{\"message\":\"denied\"}").unwrap_err().kind,
            ProviderErrorKind::AccessDenied
        );
        assert_eq!(mlflow_response("a", 200, b"not json").unwrap_err().kind, ProviderErrorKind::Transient);
    }

    #[test]
    fn runs_decode_with_string_or_number_times() {
        let exps = BTreeMap::from([("7".to_string(), "llama".to_string())]);
        let r = run_of(
            &json!({
                "info": {"run_id": "abc", "experiment_id": "7", "status": "FINISHED", "start_time": "1700000000000", "end_time": 1700000060000i64},
                "data": {"metrics": [{"key": "loss", "value": 0.5, "step": 3, "timestamp": 1}],
                         "params": [{"key": "lr", "value": "2e-5"}],
                         "tags": [{"key": "mlflow.runName", "value": "job-a"}]}
            }),
            &exps,
        )
        .unwrap();
        assert_eq!((r.name.as_str(), r.experiment.as_str(), r.status.as_str()), ("job-a", "llama", "FINISHED"));
        assert_eq!(r.metrics["loss"], 0.5);
        assert_eq!(r.params["lr"], "2e-5");
        assert_eq!(r.end_time.unwrap().timestamp() - r.start_time.unwrap().timestamp(), 60);
    }
}

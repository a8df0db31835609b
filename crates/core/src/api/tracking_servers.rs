//! Tracking servers: SageMaker managed MLflow tracking servers of a region, their runs and the
//! metric histories of a run, and the requests that create and delete one.
//!
//! Reads go to the provider's MLflow side ([`crate::provider::MlflowTracking`], part of [`AwsCloud`]); creating a
//! server is the durable `create_tracking_server` operation and deleting one
//! `delete_tracking_server` ([`crate::workflow::mlflow`]). Servers are regional: a request
//! without a region uses the control plane's default region.
//!
//! # Guarantees
//!
//! - Every query parameter is checked before a provider is asked: a bad `region`, server
//!   `name`, `run_id`, `experiment`, `max` or metric key is a `400` naming that field.
//! - Runs are read only from a server that serves its MLflow API: one that is not `Active`
//!   (creating, updating, failed, deleting) is [`ReadError::NotReady`] (`409`) saying its
//!   status; an unknown one is [`ReadError::Missing`] (`404`).

use super::error::ReadError;
use crate::names;
use crate::provider::{AwsCloud, MlflowRun, ResourceState, RunMetrics, tracking_server_name};
use crate::validate::ValidationError;
use crate::workflow::mlflow::{DeleteTrackingServerRequest, metric_keys, run_query};
use serde_json::Value;

pub use super::context::region;
pub use crate::provider::TrackingServer;
pub use crate::workflow::mlflow::CreateTrackingServerRequest;

/// The tracking servers of `region`.
pub async fn list(aws: &dyn AwsCloud, region: &str) -> Result<Vec<TrackingServer>, ReadError> {
    Ok(aws.list_tracking_servers(region).await?)
}

/// The tracking server `name` of `region`, once it serves its MLflow API (see the module docs).
pub async fn running(aws: &dyn AwsCloud, region: &str, name: &str) -> Result<TrackingServer, ReadError> {
    tracking_server_name(name).map_err(|rule| ValidationError::invalid("name", rule))?;
    let server = aws
        .describe_tracking_server(region, name)
        .await?
        .ok_or_else(|| ReadError::Missing(format!("tracking server {name} in {region}")))?;
    match server.state() {
        ResourceState::Active => Ok(server),
        other => Err(ReadError::NotReady(format!(
            "tracking server {name} is {} ({other:?}); its runs are readable once it is Created",
            server.status
        ))),
    }
}

/// The runs of tracking server `name`, newest first (`experiment`: only that one; `max`: 1-1000,
/// default 100).
pub async fn runs(
    aws: &dyn AwsCloud,
    region: &str,
    name: &str,
    experiment: Option<String>,
    max: Option<u32>,
) -> Result<Vec<MlflowRun>, ReadError> {
    let query = run_query(experiment, max)?;
    let server = running(aws, region, name).await?;
    Ok(aws.search_runs(&server.arn, &query).await?)
}

/// The metric histories of run `run_id` of tracking server `name` (`keys`: comma-separated,
/// default `loss,throughput`).
pub async fn metrics(
    aws: &dyn AwsCloud,
    region: &str,
    name: &str,
    run_id: &str,
    keys: Option<&str>,
) -> Result<RunMetrics, ReadError> {
    let keys = metric_keys(keys)?;
    names::mlflow_run_id(run_id).map_err(|rule| ValidationError::invalid("run_id", rule))?;
    let server = running(aws, region, name).await?;
    Ok(aws.metric_history(&server.arn, run_id, &keys).await?)
}

/// The `create_tracking_server` request of a create body: one naming neither `cluster` nor
/// `region` gets `default_region` (a cluster's server is in the cluster's region).
pub fn create_request(body: &CreateTrackingServerRequest, mut raw: Value, default_region: &str) -> Value {
    if body.cluster.is_none() && body.region.is_none() {
        raw["region"] = Value::String(default_region.to_string());
    }
    raw
}

/// The `delete_tracking_server` request of server `name` in `region` (default: `default_region`).
pub fn delete_request(name: String, region: Option<String>, default_region: &str) -> Result<Value, ReadError> {
    let region = region.unwrap_or_else(|| default_region.to_string());
    serde_json::to_value(DeleteTrackingServerRequest { name, region, found: None })
        .map_err(|e| ReadError::Engine(crate::engine::EngineError::InvalidState(e.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_without_cluster_or_region_gets_the_default_region() {
        let cases = [
            (serde_json::json!({ "name": "t" }), Some("us-west-2")),
            (serde_json::json!({ "name": "t", "region": "eu-west-1" }), Some("eu-west-1")),
            (serde_json::json!({ "name": "t", "cluster": "demo" }), None),
        ];
        for (raw, want) in cases {
            let body: CreateTrackingServerRequest = serde_json::from_value(raw.clone()).unwrap();
            let out = create_request(&body, raw, "us-west-2");
            assert_eq!(out.get("region").and_then(Value::as_str), want, "{out}");
        }
    }
}

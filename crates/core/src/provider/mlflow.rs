//! Training history: SageMaker managed MLflow tracking servers, their runs and metric histories.
//!
//! [`MlflowTracking`] is part of the [`AwsCloud`](super::AwsCloud) supertrait: a tracking server
//! is a SageMaker resource (CreateMlflowTrackingServer / DescribeMlflowTrackingServer /
//! ListMlflowTrackingServers / DeleteMlflowTrackingServer), and its runs are read through the MLflow REST API the server
//! exposes, authenticated with the same AWS credentials (SigV4, signing name `sagemaker-mlflow`).
//! So every AWS provider — the real adapter and the simulated world — answers both halves, and
//! a workflow or route needs nothing but the `AwsCloud` it already has.
//!
//! The control plane only *reads* runs and metrics: training code writes them (recipes set
//! `MLFLOW_TRACKING_URI` to the server's ARN and `MLFLOW_EXPERIMENT_NAME`). That keeps the
//! control plane out of the data path.

use super::aws::Result;
use super::{ProviderError, ProviderErrorKind, ResourceState, Tags};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Metric keys plotted when a request names none: the training loss and the throughput.
pub const DEFAULT_METRIC_KEYS: &[&str] = &["loss", "throughput"];

/// Most runs one search returns.
pub const MAX_RUNS: u32 = 1000;

/// Size of a tracking server (SageMaker `TrackingServerSize`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TrackingServerSize {
    #[default]
    Small,
    Medium,
    Large,
}

impl TrackingServerSize {
    pub fn as_str(self) -> &'static str {
        match self {
            TrackingServerSize::Small => "Small",
            TrackingServerSize::Medium => "Medium",
            TrackingServerSize::Large => "Large",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [TrackingServerSize::Small, TrackingServerSize::Medium, TrackingServerSize::Large]
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
    }
}

/// A SageMaker managed MLflow tracking server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TrackingServer {
    pub name: String,
    pub arn: String,
    pub region: String,
    /// SageMaker's `TrackingServerStatus`: `Creating`, `Created`, `CreateFailed`, `Updating`,
    /// `Stopped`, `Deleting`, …
    pub status: String,
    /// The MLflow UI URL (`TrackingServerUrl`), once the server is up.
    pub url: Option<String>,
    /// `s3://bucket/prefix` where MLflow stores artifacts.
    pub artifact_store_uri: Option<String>,
    /// The IAM role SageMaker assumes for the artifact store (`RoleArn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    pub size: Option<TrackingServerSize>,
    pub mlflow_version: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    /// Failure reason when `status` is `CreateFailed` or `DeleteFailed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default)]
    pub tags: Tags,
}

impl TrackingServer {
    /// `status` mapped onto the lifecycle every provider resource shares.
    pub fn state(&self) -> ResourceState {
        tracking_server_state(&self.status, self.failure_reason.as_deref())
    }
}

/// Normalises a SageMaker `TrackingServerStatus`.
pub fn tracking_server_state(status: &str, reason: Option<&str>) -> ResourceState {
    match status {
        "Creating" => ResourceState::Creating,
        "Created" | "Updated" | "Started" | "MaintenanceComplete" => ResourceState::Active,
        "Deleting" => ResourceState::Deleting,
        s if s.ends_with("Failed") => {
            ResourceState::Failed { reason: reason.map(str::to_string).unwrap_or_else(|| s.to_string()) }
        }
        _ => ResourceState::Updating,
    }
}

/// CreateMlflowTrackingServer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateTrackingServer {
    pub region: String,
    pub name: String,
    pub artifact_store_uri: String,
    pub size: TrackingServerSize,
    /// Role SageMaker assumes to reach the artifact store.
    pub role_arn: String,
    /// MLflow version; the service default when absent.
    pub mlflow_version: Option<String>,
    pub tags: Tags,
}

/// An MLflow run with its latest metric values and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MlflowRun {
    pub run_id: String,
    /// `run_name` (`mlflow.runName`).
    pub name: String,
    /// Experiment name.
    pub experiment: String,
    pub experiment_id: String,
    /// `RUNNING`, `SCHEDULED`, `FINISHED`, `FAILED` or `KILLED`.
    pub status: String,
    pub start_time: Option<DateTime<Utc>>,
    pub end_time: Option<DateTime<Utc>>,
    /// Latest value of each metric.
    pub metrics: BTreeMap<String, f64>,
    pub params: BTreeMap<String, String>,
}

/// One logged value of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetricPoint {
    pub step: i64,
    pub value: f64,
    /// Milliseconds since the Unix epoch (MLflow's unit).
    pub timestamp: i64,
}

/// Metric histories of one run, by key, each ordered by step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunMetrics {
    pub run_id: String,
    pub series: BTreeMap<String, Vec<MetricPoint>>,
}

/// Which runs to list.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct RunQuery {
    /// Experiment name; every experiment when absent.
    pub experiment: Option<String>,
    /// Most runs to return (1..=[`MAX_RUNS`]), newest first.
    pub max_results: u32,
}

#[async_trait]
pub trait MlflowTracking: Send + Sync {
    /// ListMlflowTrackingServers (described one by one for their URL and tags).
    async fn list_tracking_servers(&self, region: &str) -> Result<Vec<TrackingServer>>;
    async fn describe_tracking_server(&self, region: &str, name: &str) -> Result<Option<TrackingServer>>;
    /// CreateMlflowTrackingServer; the server is `Creating` for a while (about 20 minutes on AWS).
    async fn create_tracking_server(&self, req: &CreateTrackingServer) -> Result<TrackingServer>;
    /// DeleteMlflowTrackingServer; the server is `Deleting` for a while, then gone (or
    /// `DeleteFailed`). An unknown server is a [`ProviderErrorKind::NotFound`] error.
    async fn delete_tracking_server(&self, region: &str, name: &str) -> Result<()>;
    /// MLflow `runs/search` (after `experiments/search` to resolve names) on the server `arn`.
    async fn search_runs(&self, arn: &str, query: &RunQuery) -> Result<Vec<MlflowRun>>;
    /// MLflow `metrics/get-history` of each key (the run's own metric keys when `keys` is empty).
    /// A key the run never logged has an empty series.
    async fn metric_history(&self, arn: &str, run_id: &str, keys: &[String]) -> Result<RunMetrics>;
}

/// The region of a SageMaker ARN (`arn:aws:sagemaker:<region>:<account>:…`).
pub fn region_of_arn(arn: &str) -> Result<&str> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", _, "sagemaker", region, _, rest] if !region.is_empty() && rest.starts_with("mlflow-") => Ok(region),
        _ => Err(ProviderError::new(
            "sagemaker-mlflow",
            ProviderErrorKind::InvalidRequest,
            format!("{arn} is not a SageMaker MLflow tracking server ARN"),
        )),
    }
}

/// Tracking server name rule (SageMaker: `^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}`).
pub fn tracking_server_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 256
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err("must be 1-256 letters, digits and hyphens, starting and ending with a letter or digit".into())
    }
}

/// The MLflow run status of a training job phase.
pub fn run_status_of_phase(phase: &str) -> &'static str {
    match phase {
        "succeeded" | "Succeeded" | "Completed" => "FINISHED",
        "failed" | "Failed" => "FAILED",
        "pending" | "Pending" => "SCHEDULED",
        _ => "RUNNING",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_sagemaker_rule() {
        assert!(tracking_server_name("team-a1").is_ok());
        for bad in ["", "-a", "a-", "a_b", "a.b", &"x".repeat(257)] {
            assert!(tracking_server_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn region_comes_from_the_arn() {
        assert_eq!(
            region_of_arn("arn:aws:sagemaker:us-west-2:123456789012:mlflow-tracking-server/team").unwrap(),
            "us-west-2"
        );
        let e = region_of_arn("arn:aws:iam::123456789012:role/x").unwrap_err();
        assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
    }

    #[test]
    fn status_is_normalised() {
        assert_eq!(tracking_server_state("Creating", None), ResourceState::Creating);
        assert_eq!(tracking_server_state("Created", None), ResourceState::Active);
        assert_eq!(
            tracking_server_state("CreateFailed", Some("role not assumable")),
            ResourceState::Failed { reason: "role not assumable".into() }
        );
        assert_eq!(tracking_server_state("Stopping", None), ResourceState::Updating);
        assert_eq!(tracking_server_state("Deleting", None), ResourceState::Deleting);
        assert_eq!(
            tracking_server_state("DeleteFailed", Some("artifact bucket policy")),
            ResourceState::Failed { reason: "artifact bucket policy".into() }
        );
        assert_eq!(TrackingServerSize::parse("medium"), Some(TrackingServerSize::Medium));
        assert_eq!(TrackingServerSize::parse("huge"), None);
    }
}

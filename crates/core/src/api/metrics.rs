//! GPU utilization, GPU memory and training throughput over time, for one node or one training
//! job of a cluster: the read behind `GET /api/clusters/{cluster}/metrics`, the CLI's
//! `instantstart metrics`, the MCP tool `metrics_get` and the plots of the UI.
//!
//! The series come from a [`MetricsSource`] (the simulated world's telemetry, or what a real
//! cluster exposes): per GPU for a node (DCGM's utilization and frame buffer in use), and for a
//! job the mean over its GPUs plus its throughput and loss.
//!
//! # Guarantees
//!
//! - **Checked before anything is read** ([`MetricsQuery::check`]): exactly one of `node` or
//!   `job`; names that can be Kubernetes names; a window of [`MIN_SINCE_SECONDS`] to
//!   [`MAX_SINCE_SECONDS`]; a step of at least [`MIN_STEP_SECONDS`] giving at most
//!   [`MAX_POINTS`] points per series. A broken rule is a 400 naming its field.
//! - **A job is found as the job routes find it** (`workload::read::find_job`, in the caller's
//!   namespaces: 404 unknown, 409 when several namespaces have it); a node must exist (404).
//!   Node series name no workload, so any caller of the cluster may read them, as the capacity
//!   view.
//! - **A node without the exporter its source needs is a 409** naming what to install
//!   ([`crate::provider::ProviderError::no_metrics_exporter`]), not an empty answer.

use crate::engine::EngineError;
use crate::kube_access::KubeAccess;
use crate::provider::{KubeApi, KubeTarget, MetricSeries, MetricsSource, MetricsWindow, ObjectRef, ProviderErrorKind};
use crate::store::Store;
use crate::validate::ValidationError;
use crate::workload::read::{self, ReadError};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Shortest window (one minute).
pub const MIN_SINCE_SECONDS: u32 = 60;
/// Longest window (one day).
pub const MAX_SINCE_SECONDS: u32 = 86_400;
/// Default window (15 minutes).
pub const DEFAULT_SINCE_SECONDS: u32 = 900;
/// Shortest step between two points.
pub const MIN_STEP_SECONDS: u32 = 5;
/// Most points of one series.
pub const MAX_POINTS: u32 = 720;
/// Points of a series when the step is not given.
pub const DEFAULT_POINTS: u32 = 90;

/// What to read (the query string of the route).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetricsQuery {
    /// A Kubernetes Node name (as the capacity view lists it): per-GPU series of that node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// A training job name: its mean GPU utilization and memory, throughput and loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The job's namespace (needed only when several namespaces have a job of that name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Seconds back from now, 60..=86400 [default: 900].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u32>,
    /// Seconds between points, at least 5 and at most `since / 720` points [default: about 90
    /// points over the window].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
}

/// What a query reads: a node or a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Node(String),
    Job(String),
}

/// A Kubernetes object name (DNS-1123 subdomain: 1–253 lowercase letters, digits, `-` and `.`,
/// starting and ending with a letter or digit).
fn kube_name(name: &str) -> Result<(), String> {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
        && name.starts_with(alnum)
        && name.ends_with(alnum);
    if ok {
        Ok(())
    } else {
        Err("must be a Kubernetes name: 1-253 lowercase letters, digits, '-' and '.', starting and ending with a \
             letter or digit"
            .into())
    }
}

impl MetricsQuery {
    /// Every rule of the query: what it reads and its window, or a 400 naming the field.
    pub fn check(&self) -> Result<(Subject, MetricsWindow), ValidationError> {
        let subject = match (&self.node, &self.job) {
            (Some(n), None) => {
                kube_name(n).map_err(|r| ValidationError::invalid("node", r))?;
                if self.namespace.is_some() {
                    return Err(ValidationError::invalid("namespace", "only with `job`: a node has no namespace"));
                }
                Subject::Node(n.clone())
            }
            (None, Some(j)) => {
                kube_name(j).map_err(|r| ValidationError::invalid("job", r))?;
                read::check_namespace(self.namespace.as_deref()).map_err(|e| match e {
                    ReadError::Validation(v) => v,
                    other => ValidationError::invalid("namespace", other.to_string()),
                })?;
                Subject::Job(j.clone())
            }
            (Some(_), Some(_)) => {
                return Err(ValidationError::invalid("node", "give either `node` or `job`, not both"));
            }
            (None, None) => return Err(ValidationError::invalid("node", "give exactly one of `node` or `job`")),
        };
        let since = self.since.unwrap_or(DEFAULT_SINCE_SECONDS);
        if !(MIN_SINCE_SECONDS..=MAX_SINCE_SECONDS).contains(&since) {
            return Err(ValidationError::invalid(
                "since",
                format!("must be between {MIN_SINCE_SECONDS} and {MAX_SINCE_SECONDS} seconds"),
            ));
        }
        let step = self.step.unwrap_or_else(|| since.div_ceil(DEFAULT_POINTS).max(MIN_STEP_SECONDS));
        if step < MIN_STEP_SECONDS || step > since {
            return Err(ValidationError::invalid(
                "step",
                format!("must be between {MIN_STEP_SECONDS} seconds and `since` ({since})"),
            ));
        }
        if since / step > MAX_POINTS {
            return Err(ValidationError::invalid(
                "step",
                format!(
                    "gives {} points per series; at most {MAX_POINTS}: use a step of at least {} seconds",
                    since / step,
                    since.div_ceil(MAX_POINTS)
                ),
            ));
        }
        Ok((subject, MetricsWindow { since_seconds: since, step_seconds: step }))
    }
}

/// Metric series of a node or a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetricsView {
    pub cluster: String,
    /// The node read, for a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The job read and its namespace, for a job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Where the series come from (`simulated`, …).
    pub origin: String,
    /// The window: its first moment, its last (the source's now) and the step between points.
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub step_seconds: u32,
    /// The memory of one GPU, in MiB, when known (the scale of `gpu_memory_used`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_total_mib: Option<f64>,
    /// For a node: `gpu_utilization` and `gpu_memory_used` per GPU; for a job: the mean of
    /// both over its GPUs, then `throughput` and `loss`.
    pub series: Vec<MetricSeries>,
}

/// Why metrics could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetricsError {
    /// Unknown cluster (404), a namespace outside the caller's (403), the store.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The query's rules (400), an unknown node or job (404), an ambiguous job (409), the
    /// provider.
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl From<ValidationError> for MetricsError {
    fn from(v: ValidationError) -> Self {
        MetricsError::Read(ReadError::Validation(v))
    }
}

/// The metric series `query` asks for on cluster `cluster`, as `access` may see them.
pub async fn get(
    store: &dyn Store,
    kube: &dyn KubeApi,
    source: &dyn MetricsSource,
    cluster: &str,
    access: &KubeAccess,
    query: &MetricsQuery,
) -> Result<MetricsView, MetricsError> {
    let (subject, window) = query.check()?;
    let (_, target, namespace) = read::cluster_kube_as(store, cluster, access, query.namespace.as_deref())?;
    let not_found = |what: String| {
        move |e: crate::provider::ProviderError| match e.kind {
            _ if e.is_no_metrics_exporter() => ReadError::NotReady(e.message),
            // A missing AMP workspace is named as such, not as a missing node or job.
            ProviderErrorKind::NotFound if e.api != crate::provider::AMP_QUERY_API => ReadError::Missing(what),
            _ => ReadError::Provider(e),
        }
    };
    let (node, job, namespace, set) = match subject {
        Subject::Node(node) => {
            // Nodes are read as the control plane, like the capacity view.
            let plain = KubeTarget::new(target.region.clone(), target.eks_cluster.clone());
            let object =
                ObjectRef { api_version: "v1".into(), kind: "Node".into(), namespace: None, name: node.clone() };
            if kube.get(&plain, &object).await.map_err(ReadError::Provider)?.is_none() {
                return Err(ReadError::Missing(format!("node {node}")).into());
            }
            let set = source.node_metrics(&plain, &node, &window).await.map_err(not_found(format!("node {node}")))?;
            (Some(node), None, None, set)
        }
        Subject::Job(job) => {
            let found = read::find_job(kube, &target, &job, namespace.as_deref()).await?;
            let ns = found.0.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
            let set = source.job_metrics(&target, &ns, &job, &window).await.map_err(not_found(format!("job {job}")))?;
            (None, Some(job), Some(ns), set)
        }
    };
    let start = set.end - chrono::Duration::seconds(i64::from(window.since_seconds));
    Ok(MetricsView {
        cluster: cluster.to_string(),
        node,
        job,
        namespace,
        origin: set.origin.clone().unwrap_or_else(|| source.origin().to_string()),
        start,
        end: set.end,
        step_seconds: window.step_seconds,
        gpu_memory_total_mib: set.gpu_memory_total_mib,
        series: set.series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_rules_name_their_field() {
        let node = MetricsQuery { node: Some("hyperpod-i-0abc".into()), ..Default::default() };
        let job = MetricsQuery { job: Some("llama".into()), namespace: Some("team-a".into()), ..Default::default() };
        let cases: Vec<(MetricsQuery, Option<&str>)> = vec![
            (node.clone(), None),
            (job.clone(), None),
            (MetricsQuery::default(), Some("node")),
            (MetricsQuery { job: Some("llama".into()), ..node.clone() }, Some("node")),
            (MetricsQuery { node: Some("Bad_Name".into()), ..Default::default() }, Some("node")),
            (MetricsQuery { job: Some("-x".into()), ..Default::default() }, Some("job")),
            (MetricsQuery { namespace: Some("team-a".into()), ..node.clone() }, Some("namespace")),
            (MetricsQuery { namespace: Some("Team A".into()), ..job.clone() }, Some("namespace")),
            (MetricsQuery { since: Some(59), ..node.clone() }, Some("since")),
            (MetricsQuery { since: Some(86_401), ..node.clone() }, Some("since")),
            (MetricsQuery { since: Some(86_400), ..node.clone() }, None),
            (MetricsQuery { step: Some(4), ..node.clone() }, Some("step")),
            (MetricsQuery { since: Some(600), step: Some(601), ..node.clone() }, Some("step")),
            (MetricsQuery { since: Some(86_400), step: Some(60), ..node.clone() }, Some("step")),
            (MetricsQuery { since: Some(86_400), step: Some(120), ..node.clone() }, None),
        ];
        for (q, field) in cases {
            assert_eq!(q.check().err().map(|e| e.findings[0].field.clone()).as_deref(), field, "{q:?}");
        }
    }

    #[test]
    fn the_default_window_is_fifteen_minutes_of_about_ninety_points() {
        let q = MetricsQuery { node: Some("n".into()), ..Default::default() };
        let (subject, w) = q.check().unwrap();
        assert_eq!(subject, Subject::Node("n".into()));
        assert_eq!((w.since_seconds, w.step_seconds), (900, 10));
        let q = MetricsQuery { job: Some("j".into()), since: Some(60), ..Default::default() };
        assert_eq!(q.check().unwrap().1.step_seconds, MIN_STEP_SECONDS);
    }
}

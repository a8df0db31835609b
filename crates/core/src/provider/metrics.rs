//! The source of GPU and training metrics over time: the shapes of a metric series and the
//! [`MetricsSource`] trait the read `api::metrics` calls.
//!
//! The metrics are the ones a HyperPod cluster's telemetry exposes: NVIDIA's DCGM exporter per
//! GPU (`DCGM_FI_DEV_GPU_UTIL`, percent; `DCGM_FI_DEV_FB_USED`, MiB of frame buffer in use;
//! labels `gpu`, `UUID`, `modelName`, `Hostname` and, on Kubernetes, the `namespace`/`pod` using
//! the GPU: NVIDIA's "DCGM Exporter Metrics" reference), and a training job's own progress
//! (throughput and loss, as the job logs them or reports them to MLflow).
//!
//! # Guarantees
//!
//! - A source answers on a **grid**: one point every `window.step_seconds`, aligned to
//!   multiples of the step in Unix time, from `end - since_seconds` to `end` (its own clock), so
//!   two reads a moment apart share their points. A point is `[unix seconds, value]`; a moment
//!   with nothing to say (the node did not exist, the job did not run) has no point.
//! - A series names where it comes from ([`MetricSeries::source`]): the DCGM field or the log.

use super::{KubeTarget, ProviderError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a series measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// GPU utilization in percent (`DCGM_FI_DEV_GPU_UTIL`).
    GpuUtilization,
    /// GPU frame buffer in use, in MiB (`DCGM_FI_DEV_FB_USED`).
    GpuMemoryUsed,
    /// Training throughput of the whole job, in tokens per second.
    Throughput,
    /// Training loss.
    Loss,
}

impl Metric {
    /// Every metric, in the order views show them.
    pub const ALL: [Metric; 4] = [Metric::GpuUtilization, Metric::GpuMemoryUsed, Metric::Throughput, Metric::Loss];

    /// The snake_case word the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::GpuUtilization => "gpu_utilization",
            Metric::GpuMemoryUsed => "gpu_memory_used",
            Metric::Throughput => "throughput",
            Metric::Loss => "loss",
        }
    }

    /// The unit of its values.
    pub fn unit(self) -> &'static str {
        match self {
            Metric::GpuUtilization => "percent",
            Metric::GpuMemoryUsed => "MiB",
            Metric::Throughput => "tokens/s",
            Metric::Loss => "",
        }
    }
}

/// DCGM exporter field of GPU utilization (percent).
pub const DCGM_GPU_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// DCGM exporter field of the frame buffer in use (MiB).
pub const DCGM_FB_USED: &str = "DCGM_FI_DEV_FB_USED";
/// DCGM exporter field of the free frame buffer (MiB).
pub const DCGM_FB_FREE: &str = "DCGM_FI_DEV_FB_FREE";
/// Source of series read from a training job's log lines.
pub const SOURCE_TRAINING_LOG: &str = "training log";

/// The port NVIDIA's DCGM exporter serves `/metrics` on (its `DCGM_EXPORTER_LISTEN` default
/// `:9400`, and the `metrics` port of its Helm chart and of the GPU operator's DaemonSet).
pub const DCGM_EXPORTER_PORT: u16 = 9400;
/// Labels that mark a DCGM exporter pod, any one of them: NVIDIA's `dcgm-exporter` Helm chart
/// and its `dcgm-exporter.yaml` DaemonSet (`app.kubernetes.io/name: dcgm-exporter`), and the
/// NVIDIA GPU operator's DaemonSet `nvidia-dcgm-exporter` (`app: nvidia-dcgm-exporter`).
pub const DCGM_EXPORTER_SELECTORS: [(&str, &str); 2] =
    [("app.kubernetes.io/name", "dcgm-exporter"), ("app", "nvidia-dcgm-exporter")];
/// API name of a scrape of a DCGM exporter in provider errors.
pub const DCGM_SCRAPE_API: &str = "k8s:DcgmScrape";
/// Message prefix of [`ProviderError::no_metrics_exporter`].
const NO_EXPORTER_PREFIX: &str = "no DCGM exporter";

impl ProviderError {
    /// Node `node` runs no ready DCGM exporter pod, so its GPUs cannot be read: names what to
    /// install.
    pub fn no_metrics_exporter(node: &str) -> Self {
        ProviderError::new(
            DCGM_SCRAPE_API,
            super::ProviderErrorKind::Failed,
            format!(
                "{NO_EXPORTER_PREFIX} runs on node {node}: turn on the observability add-on or install NVIDIA's \
                 dcgm-exporter (a pod labelled app.kubernetes.io/name=dcgm-exporter or app=nvidia-dcgm-exporter, \
                 serving port {DCGM_EXPORTER_PORT})"
            ),
        )
    }

    /// Whether this is [`ProviderError::no_metrics_exporter`].
    pub fn is_no_metrics_exporter(&self) -> bool {
        self.api == DCGM_SCRAPE_API && self.message.starts_with(NO_EXPORTER_PREFIX)
    }
}

/// One metric over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetricSeries {
    pub metric: Metric,
    /// The unit of the values (`percent`, `MiB`, `tokens/s`, empty for a plain number).
    pub unit: String,
    /// Where the values come from: a DCGM field (`DCGM_FI_DEV_GPU_UTIL`) or `training log`.
    pub source: String,
    /// The GPU index on its node (DCGM's `gpu` label); `None` for a value of a whole job (the
    /// mean over its GPUs for GPU metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u32>,
    /// The node the GPU is on, for per-GPU series.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `[unix seconds, value]`, oldest first, on the window's grid.
    pub points: Vec<[f64; 2]>,
}

impl MetricSeries {
    /// An empty series of `metric` from `source`.
    pub fn new(metric: Metric, source: &str, gpu: Option<u32>, node: Option<&str>) -> Self {
        MetricSeries {
            metric,
            unit: metric.unit().to_string(),
            source: source.to_string(),
            gpu,
            node: node.map(str::to_string),
            points: vec![],
        }
    }

    /// The newest value.
    pub fn latest(&self) -> Option<f64> {
        self.points.last().map(|p| p[1])
    }
}

/// Which moments a source answers for (checked by `api::metrics::MetricsQuery::check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MetricsWindow {
    /// How far back from the source's now.
    pub since_seconds: u32,
    /// Seconds between two points.
    pub step_seconds: u32,
}

impl MetricsWindow {
    /// The grid of `[start, end]` ending at `end` (Unix seconds): multiples of the step, oldest
    /// first.
    pub fn grid(&self, end: f64) -> Vec<f64> {
        let step = f64::from(self.step_seconds.max(1));
        let last = (end / step).floor() * step;
        let first = end - f64::from(self.since_seconds);
        let n = ((last - first) / step).floor().max(0.0) as u64;
        (0..=n).rev().map(|i| last - i as f64 * step).collect()
    }
}

/// What a source answered: the series and the moment its window ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SeriesSet {
    /// Which source answered, when a source picks one per cluster (the view's `origin`);
    /// `None`: [`MetricsSource::origin`] of the source read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// The source's now (the simulated clock on the simulator).
    pub end: DateTime<Utc>,
    /// The GPU memory of one GPU, in MiB, when known (`FB_USED + FB_FREE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_total_mib: Option<f64>,
    pub series: Vec<MetricSeries>,
}

/// What [`MetricsSource::origin`] says of series read from Amazon Managed Service for
/// Prometheus (the observability add-on's workspace).
pub const ORIGIN_AMP: &str = "amp";
/// API name of a query of an AMP workspace: the IAM action it needs (AMP's "QueryMetrics"
/// operation, `POST /workspaces/{workspaceId}/api/v1/query_range`).
pub const AMP_QUERY_API: &str = "aps:QueryMetrics";

/// A Prometheus range query (`query_range`): PromQL evaluated at `start`, `start + step`, …
/// up to `end` (Unix seconds).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeQuery {
    pub query: String,
    pub start: f64,
    pub end: f64,
    pub step_seconds: u32,
}

/// One series of a range query's answer (`resultType: matrix`): its labels and its
/// `[unix seconds, value]` points, oldest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromSeries {
    pub labels: std::collections::BTreeMap<String, String>,
    pub points: Vec<[f64; 2]>,
}

/// Runs PromQL range queries against an Amazon Managed Service for Prometheus workspace (the
/// AWS adapter signs them for service `aps`). Errors name [`AMP_QUERY_API`]: an unknown
/// workspace is [`super::ProviderErrorKind::NotFound`], a query AMP refuses
/// [`super::ProviderErrorKind::InvalidRequest`], a caller without `aps:QueryMetrics`
/// [`super::ProviderErrorKind::AccessDenied`].
#[async_trait]
pub trait PrometheusQuery: Send + Sync {
    async fn query_range(
        &self,
        region: &str,
        workspace_id: &str,
        query: &RangeQuery,
    ) -> Result<Vec<PromSeries>, ProviderError>;
}

/// `s` as a PromQL string literal (double quotes; `\` and `"` escaped).
pub fn promql_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A PromQL regular expression (`=~`) matching exactly one of `names`, as a string literal.
pub fn promql_any_of(names: &[&str]) -> String {
    let escaped: Vec<String> = names
        .iter()
        .map(|n| {
            n.chars()
                .flat_map(|c| {
                    let special = ".+*?()|[]{}^$\\".contains(c);
                    special.then_some('\\').into_iter().chain(std::iter::once(c))
                })
                .collect()
        })
        .collect();
    promql_string(&escaped.join("|"))
}

/// Where metric series come from: the simulated world's telemetry, a cluster's exporters, or
/// Amazon Managed Service for Prometheus.
#[async_trait]
pub trait MetricsSource: Send + Sync {
    /// What this source is, for the view (`simulated`, …).
    fn origin(&self) -> &'static str;

    /// Per-GPU utilization and memory of Kubernetes Node `node`. An unknown node is
    /// [`super::ProviderErrorKind::NotFound`]; a node without NVIDIA GPUs has no series; a node
    /// whose metrics need an exporter that is not there is [`ProviderError::no_metrics_exporter`].
    async fn node_metrics(
        &self,
        target: &KubeTarget,
        node: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError>;

    /// The mean GPU utilization and memory over the GPUs of training job `job`'s pods, and its
    /// throughput and loss. A job without pods yet has empty series.
    async fn job_metrics(
        &self,
        target: &KubeTarget,
        namespace: &str,
        job: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_aligned_to_the_step_and_ends_at_or_before_now() {
        // (since, step, end) → (first, last, points)
        let table: &[(u32, u32, f64, f64, f64, usize)] = &[
            (60, 10, 1000.0, 940.0, 1000.0, 7),
            (60, 10, 1005.0, 950.0, 1000.0, 6),
            (900, 30, 1_700_000_015.0, 1_699_999_140.0, 1_700_000_010.0, 30),
            (10, 10, 99.0, 90.0, 90.0, 1),
        ];
        for &(since, step, end, first, last, n) in table {
            let g = MetricsWindow { since_seconds: since, step_seconds: step }.grid(end);
            assert_eq!((g[0], *g.last().unwrap(), g.len()), (first, last, n), "{since} {step} {end}");
            assert!(g.windows(2).all(|w| w[1] - w[0] == f64::from(step)));
        }
    }

    #[test]
    fn promql_literals_are_escaped() {
        assert_eq!(promql_string("hyperpod-i-0abc"), "\"hyperpod-i-0abc\"");
        assert_eq!(promql_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        // A regex of literal names: `.` is escaped for the regex, then `\` for the string.
        assert_eq!(promql_any_of(&["llm-worker-0", "ray.head"]), "\"llm-worker-0|ray\\\\.head\"");
    }

    #[test]
    fn metrics_name_their_unit() {
        let words: Vec<&str> = Metric::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(words, ["gpu_utilization", "gpu_memory_used", "throughput", "loss"]);
        for m in Metric::ALL {
            assert_eq!(serde_json::to_value(m).unwrap(), serde_json::json!(m.as_str()));
        }
        assert_eq!(Metric::GpuMemoryUsed.unit(), "MiB");
    }
}

//! [`AmpMetrics`]: the GPU metrics of a cluster whose HyperPod observability add-on writes to an
//! Amazon Managed Service for Prometheus (AMP) workspace, read back with PromQL range queries
//! (a [`MetricsSource`] over any [`PrometheusQuery`], in production the AWS adapter signing
//! `query_range` for service `aps`).
//!
//! The series are NVIDIA's DCGM exporter's, as the add-on's collector writes them: the fields
//! `DCGM_FI_DEV_GPU_UTIL`, `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE` with the exporter's
//! labels `gpu`, `Hostname` (the Kubernetes node) and `namespace`/`pod` of the workload holding
//! the GPU ("DCGM Exporter Metrics", NVIDIA).
//!
//! - **A node**: `max by (gpu) (FIELD{Hostname="<node>"})` per field (the `by (gpu)` joins the
//!   series a GPU has under successive pods).
//! - **A job**: `avg(FIELD{namespace="<ns>",pod=~"<its pods>"})`, the mean over the GPUs its
//!   pods hold at each moment (rounded as the other sources round it: 0.1 % and whole MiB).
//!   Its throughput and loss are not in AMP: the newest progress line of its logging pod (as
//!   the DCGM source reads it), shown at the window's newest moment.
//!
//! # Guarantees
//!
//! - **On the window's grid** (as [`MetricsSource`] states): the query's `start` is the grid's
//!   first moment and `step` its step, so Prometheus evaluates exactly at the grid's moments; a
//!   moment without a sample (Prometheus' lookback found none) has no point. `end` is this
//!   process's clock (or the one given to [`AmpMetrics::with_clock`]).
//! - `gpu_memory_total_mib` is `FB_USED + FB_FREE` at the newest moment both have.
//! - Errors are the query's ([`AMP_QUERY_API`]): a missing workspace is `NotFound` naming it, a
//!   denied query `AccessDenied` naming `aps:QueryMetrics`, a query AMP refuses (`bad_data`)
//!   `Failed` (this source's fault, not the reader's).

use crate::api::error::ReadError;
use crate::api::jobs::{default_pod, find_job, job_pods};
use crate::log_lines::parse_training_step;
use crate::provider::ProviderErrorKind;
use crate::provider::{
    AMP_QUERY_API, DCGM_FB_FREE, DCGM_FB_USED, DCGM_GPU_UTIL, KubeApi, KubeTarget, Metric, MetricSeries, MetricsSource,
    MetricsWindow, ORIGIN_AMP, PromSeries, PrometheusQuery, ProviderError, RangeQuery, SOURCE_TRAINING_LOG, SeriesSet,
    promql_any_of, promql_string,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Log lines of the logging pod read for a job's newest step.
const LOG_TAIL: u32 = 50;

/// GPU metrics read from one AMP workspace (see the module docs).
pub struct AmpMetrics {
    prom: Arc<dyn PrometheusQuery>,
    kube: Arc<dyn KubeApi>,
    /// The workspace's region and id (`ws-…`).
    pub region: String,
    pub workspace_id: String,
    /// Now, in Unix seconds (the wall clock; a test gives a simulated one).
    clock: Arc<dyn Fn() -> f64 + Send + Sync>,
}

impl std::fmt::Debug for AmpMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmpMetrics").field("region", &self.region).field("workspace_id", &self.workspace_id).finish()
    }
}

/// The node query of `field`.
pub fn node_query(field: &str, node: &str) -> String {
    format!("max by (gpu) ({field}{{Hostname={}}})", promql_string(node))
}

/// The job query of `field` over `pods` of `namespace`.
pub fn job_query(field: &str, namespace: &str, pods: &[&str]) -> String {
    format!("avg({field}{{namespace={},pod=~{}}})", promql_string(namespace), promql_any_of(pods))
}

/// The points of `series` on `grid` (a point whose moment is not a grid moment is dropped).
fn on_grid(series: &PromSeries, grid: &[f64]) -> Vec<[f64; 2]> {
    series
        .points
        .iter()
        .filter(|p| p[1].is_finite())
        .filter_map(|p| grid.iter().find(|g| (**g - p[0]).abs() < 0.5).map(|g| [*g, p[1]]))
        .collect()
}

/// `used + free` at the newest moment both have.
fn total_of(used: &[[f64; 2]], free: &[[f64; 2]]) -> Option<f64> {
    used.iter().rev().find_map(|u| free.iter().find(|f| f[0] == u[0]).map(|f| u[1] + f[1]))
}

fn unix_to_time(t: f64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis((t * 1000.0).round() as i64).unwrap_or_else(Utc::now)
}

impl AmpMetrics {
    pub fn new(
        prom: Arc<dyn PrometheusQuery>,
        kube: Arc<dyn KubeApi>,
        region: impl Into<String>,
        workspace_id: impl Into<String>,
    ) -> Self {
        AmpMetrics { prom, kube, region: region.into(), workspace_id: workspace_id.into(), clock: Arc::new(now_unix) }
    }

    /// The same source reading "now" from `clock` (Unix seconds), e.g. a simulated world's.
    pub fn with_clock(mut self, clock: impl Fn() -> f64 + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    async fn query(&self, query: String, grid: &[f64], step: u32) -> Result<Vec<PromSeries>, ProviderError> {
        let (Some(start), Some(end)) = (grid.first(), grid.last()) else { return Ok(vec![]) };
        let q = RangeQuery { query, start: *start, end: *end, step_seconds: step };
        self.prom.query_range(&self.region, &self.workspace_id, &q).await.map_err(|mut e| {
            // A query AMP refuses is this source's fault, not the reader's request.
            if e.kind == ProviderErrorKind::InvalidRequest {
                e.kind = ProviderErrorKind::Failed;
            }
            e
        })
    }

    /// The newest logged step of the job's logging pod: `(step, loss, throughput)`.
    async fn newest_step(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pods: &[crate::provider::KubeObject],
    ) -> Option<(u64, f64, f64)> {
        use futures::StreamExt;
        let pod = default_pod(pods)?;
        let running = pods.iter().any(|p| {
            p.0.pointer("/metadata/name").and_then(|v| v.as_str()) == Some(pod.as_str())
                && p.0.pointer("/status/phase").and_then(|v| v.as_str()) == Some("Running")
        });
        if !running {
            return None;
        }
        let stream = self.kube.logs(target, namespace, &pod, false, Some(LOG_TAIL)).await.ok()?;
        let lines: Vec<String> = stream.filter_map(|l| async move { l.ok() }).collect().await;
        lines.iter().rev().find_map(|l| parse_training_step(l))
    }
}

fn now_unix() -> f64 {
    Utc::now().timestamp_millis() as f64 / 1000.0
}

#[async_trait]
impl MetricsSource for AmpMetrics {
    fn origin(&self) -> &'static str {
        ORIGIN_AMP
    }

    async fn node_metrics(
        &self,
        _target: &KubeTarget,
        node: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError> {
        let end = (self.clock)();
        let grid = window.grid(end);
        let step = window.step_seconds;
        let by_gpu = |answer: Vec<PromSeries>| -> BTreeMap<u32, Vec<[f64; 2]>> {
            answer.iter().filter_map(|s| Some((s.labels.get("gpu")?.parse::<u32>().ok()?, on_grid(s, &grid)))).collect()
        };
        let util = by_gpu(self.query(node_query(DCGM_GPU_UTIL, node), &grid, step).await?);
        let used = by_gpu(self.query(node_query(DCGM_FB_USED, node), &grid, step).await?);
        let free = by_gpu(self.query(node_query(DCGM_FB_FREE, node), &grid, step).await?);
        let mut series = Vec::new();
        let mut total = None;
        let gpus: std::collections::BTreeSet<u32> = util.keys().chain(used.keys()).copied().collect();
        for gpu in gpus {
            let mut u = MetricSeries::new(Metric::GpuUtilization, DCGM_GPU_UTIL, Some(gpu), Some(node));
            u.points = util.get(&gpu).cloned().unwrap_or_default();
            let mut m = MetricSeries::new(Metric::GpuMemoryUsed, DCGM_FB_USED, Some(gpu), Some(node));
            m.points = used.get(&gpu).cloned().unwrap_or_default();
            if total.is_none() {
                total = free.get(&gpu).and_then(|f| total_of(&m.points, f));
            }
            series.push(u);
            series.push(m);
        }
        series.sort_by_key(|s| (s.metric, s.gpu));
        Ok(SeriesSet { origin: Some(ORIGIN_AMP.into()), end: unix_to_time(end), gpu_memory_total_mib: total, series })
    }

    async fn job_metrics(
        &self,
        target: &KubeTarget,
        namespace: &str,
        job: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError> {
        let found = match find_job(self.kube.as_ref(), target, job, Some(namespace)).await {
            Ok(j) => j,
            Err(ReadError::Provider(e)) => return Err(e),
            Err(e) => return Err(ProviderError::not_found(AMP_QUERY_API, e.to_string())),
        };
        let pods = job_pods(self.kube.as_ref(), target, &found).await?;
        let names: Vec<&str> =
            pods.iter().filter_map(|p| p.0.pointer("/metadata/name").and_then(|v| v.as_str())).collect();
        let end = (self.clock)();
        let grid = window.grid(end);
        let step = window.step_seconds;
        let mut util = MetricSeries::new(Metric::GpuUtilization, DCGM_GPU_UTIL, None, None);
        let mut memory = MetricSeries::new(Metric::GpuMemoryUsed, DCGM_FB_USED, None, None);
        let mut throughput = MetricSeries::new(Metric::Throughput, SOURCE_TRAINING_LOG, None, None);
        let mut loss = MetricSeries::new(Metric::Loss, SOURCE_TRAINING_LOG, None, None);
        let mut total = None;
        if !names.is_empty() {
            let first = |answer: Vec<PromSeries>| answer.first().map(|s| on_grid(s, &grid)).unwrap_or_default();
            let round = |points: Vec<[f64; 2]>, scale: f64| -> Vec<[f64; 2]> {
                points.into_iter().map(|[t, v]| [t, (v * scale).round() / scale]).collect()
            };
            let u = first(self.query(job_query(DCGM_GPU_UTIL, namespace, &names), &grid, step).await?);
            let m = first(self.query(job_query(DCGM_FB_USED, namespace, &names), &grid, step).await?);
            let f = first(self.query(job_query(DCGM_FB_FREE, namespace, &names), &grid, step).await?);
            total = total_of(&m, &f).map(f64::round);
            util.points = round(u, 10.0);
            memory.points = round(m, 1.0);
        }
        if let (Some((_, l, tp)), Some(g)) = (self.newest_step(target, namespace, &pods).await, grid.last()) {
            throughput.points.push([*g, tp]);
            loss.points.push([*g, l]);
        }
        Ok(SeriesSet {
            origin: Some(ORIGIN_AMP.into()),
            end: unix_to_time(end),
            gpu_memory_total_mib: total,
            series: vec![util, memory, throughput, loss],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_select_the_node_or_the_jobs_pods() {
        assert_eq!(
            node_query(DCGM_GPU_UTIL, "hyperpod-i-0abc"),
            "max by (gpu) (DCGM_FI_DEV_GPU_UTIL{Hostname=\"hyperpod-i-0abc\"})"
        );
        assert_eq!(
            job_query(DCGM_FB_USED, "team-a", &["llm-worker-0", "llm-worker-1"]),
            "avg(DCGM_FI_DEV_FB_USED{namespace=\"team-a\",pod=~\"llm-worker-0|llm-worker-1\"})"
        );
    }

    #[test]
    fn answers_are_put_on_the_grid() {
        let s = PromSeries {
            labels: BTreeMap::new(),
            points: vec![[100.0, 1.0], [110.2, 2.0], [115.0, 9.0], [120.0, f64::NAN], [130.0, 4.0]],
        };
        assert_eq!(on_grid(&s, &[100.0, 110.0, 120.0, 130.0]), vec![[100.0, 1.0], [110.0, 2.0], [130.0, 4.0]]);
        assert_eq!(total_of(&[[1.0, 10.0], [2.0, 20.0]], &[[1.0, 5.0]]), Some(15.0));
        assert_eq!(total_of(&[[1.0, 10.0]], &[]), None);
    }
}

//! Simulated GPU telemetry: plausible, deterministic metric series for every node and every
//! training job, on the simulated clock ([`MetricsSource`] for [`SimCloud`]).
//!
//! - **What runs where.** The pods of the cluster (as the scheduler placed them, with their
//!   start and end) occupy their node's GPUs: each pod takes the lowest-numbered GPUs free for
//!   its whole life, in the order the pods started. A GPU nobody uses reads 0 % and 0 MiB.
//! - **Utilization** (`DCGM_FI_DEV_GPU_UTIL`, whole percent): a training pod's GPUs 85–98 %, a
//!   serving pod's 25–60 %, drawn per GPU and per moment from a hash (deterministic: a read
//!   repeated gives the same numbers).
//! - **Memory in use** (`DCGM_FI_DEV_FB_USED`, MiB): by model size when the pod names a model
//!   with its size (`Llama-3.1-8B`, `Qwen3-0.6B` in an argument or an environment value): 16
//!   bytes per parameter for training (weights, gradients, Adam's moments) plus a quarter of the
//!   GPU for activations, 2.2 bytes per parameter for serving, spread over the pod's GPUs and
//!   capped at 95 %; else 55–90 % (training) or 40–80 % (serving) per workload. The memory of
//!   one GPU is NVIDIA's figure for the instance type's GPU ([`gpu_memory_mib`]).
//! - **A job's series** are the mean of its GPUs' values at each moment, and its throughput and
//!   loss from the lines its logging pod prints (rank 0, or the Ray head:
//!   [`training_curve`](crate::training_curve)): the newest step logged by that moment; a job
//!   that logged no step for one and a half step periods (an in-place restart) reads 0 tokens/s
//!   and no loss.
//! - **Restarts idle the GPUs.** While a training pod's processes restart in place
//!   ([`timings::PROCESS_RESTART`](crate::timings::PROCESS_RESTART)), before its training
//!   begins (a Ray job's entrypoint submission) and after its processes were stopped for good,
//!   its GPUs read 0 % and their memory is freed. So the plot, the log and the simulated MLflow run agree.
//!
//! Every read is the call `k8s:Metrics` (counted, and open to fault injection).
//!
//! The same telemetry is what a simulated DCGM exporter pod serves ([`exporter_text`], through
//! the pod proxy of the simulated Kubernetes API), so the real cluster's source
//! (`instantstart_k8s::DcgmSource`) can be tested against these numbers.

mod api;

use crate::base::stable_hash;
use crate::kube::parse_training_log_line;
use crate::kube::pod::{self, NodeInfo, PodView};
use crate::kube::pod::{PodRun, Role};
use crate::kube::training;
use crate::kube::{nodes, workload};
use crate::world::KubeWorld;
use crate::world::World;
use instantstart_core::provider::{
    DCGM_FB_FREE, DCGM_FB_USED, DCGM_GPU_UTIL, KubeTarget, Metric, MetricSeries, MetricsSource, MetricsWindow,
    ProviderError, Result, SOURCE_TRAINING_LOG, SeriesSet,
};
use serde_json::Value;

/// The simulated call of a metrics read.
pub const METRICS_API: &str = "k8s:Metrics";
/// The resource name of NVIDIA GPUs.
const GPU: &str = "nvidia.com/gpu";
/// A job that logged no step for this many step periods is stalled (throughput 0).
const STALL_STEPS: f64 = 1.5;

/// A uniform number in [0, 1) from a hash.
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The memory of one GPU of `instance_type` in MiB (NVIDIA's datasheets: A100 40 GB on p4d and
/// 80 GB on p4de, H100 80 GB, H200 141 GB, B200 180 GB, A10G and L4 24 GB, L40S 48 GB, T4
/// 16 GB, V100 16 GB on p3 and 32 GB on p3dn).
pub fn gpu_memory_mib(instance_type: &str, accelerator: &str) -> f64 {
    let gb: f64 = match (instance_type, accelerator) {
        (t, _) if t.starts_with("ml.p4de.") => 80.0,
        (t, _) if t.starts_with("ml.p3dn.") => 32.0,
        (t, _) if t.starts_with("ml.p5e.") || t.starts_with("ml.p5en.") => 141.0,
        (_, a) if a.contains("a100") => 40.0,
        (_, a) if a.contains("h100") => 80.0,
        (_, a) if a.contains("h200") => 141.0,
        (_, a) if a.contains("b200") || a.contains("b300") => 180.0,
        (_, a) if a.contains("l40s") => 48.0,
        (_, a) if a.contains("a10g") || a.contains("l4") => 24.0,
        (_, a) if a.contains("t4") || a.contains("v100") => 16.0,
        _ => 24.0,
    };
    gb * 1024.0
}

/// A pod on a node's GPUs for a while.
struct Occupant {
    uid: String,
    /// `(namespace, pod, container)`: the labels DCGM's exporter puts on the pod's GPUs.
    pod: (String, String, String),
    training: bool,
    start: f64,
    end: f64,
    /// GPU indexes on the node.
    gpus: Vec<u32>,
    /// Share of each GPU's memory it uses.
    memory: f64,
    /// When its processes do not run (in-place restarts, before training begins, stopped).
    pauses: Vec<(f64, f64)>,
}

impl Occupant {
    fn at(&self, t: f64) -> bool {
        self.start <= t && t < self.end
    }

    fn paused(&self, t: f64) -> bool {
        self.pauses.iter().any(|(a, b)| *a <= t && t < *b)
    }

    fn utilization(&self, k: usize, t: f64, t_unix: f64) -> f64 {
        if self.paused(t) {
            return 0.0;
        }
        let u = unit(stable_hash(&["gpu-util", &self.uid, &k.to_string(), &(t_unix as i64).to_string()]));
        (if self.training { 85.0 + 13.0 * u } else { 25.0 + 35.0 * u }).round()
    }

    fn memory_mib(&self, k: usize, t: f64, t_unix: f64, total: f64) -> f64 {
        if self.paused(t) {
            return 0.0;
        }
        let u = unit(stable_hash(&["gpu-mem", &self.uid, &k.to_string(), &(t_unix as i64).to_string()]));
        (total * (self.memory * (1.0 + 0.01 * (u - 0.5))).min(0.97)).round()
    }
}

/// The GPUs a pod requests.
fn gpu_request(pod: &PodView) -> u32 {
    pod::accelerator_request(&pod.spec).filter(|(r, _)| r == GPU).map_or(0, |(_, n)| n)
}

/// The strings of a pod's first container a model name may be in: arguments, command,
/// environment values.
fn words(pod: &PodView) -> Vec<String> {
    let c = pod.spec.pointer("/containers/0");
    let list = |k: &str| c.and_then(|c| c.get(k)).and_then(Value::as_array).cloned().unwrap_or_default();
    let mut out: Vec<String> =
        list("args").into_iter().chain(list("command")).filter_map(|v| v.as_str().map(str::to_string)).collect();
    out.extend(list("env").iter().filter_map(|e| e.get("value").and_then(Value::as_str).map(str::to_string)));
    out
}

/// Share of each GPU's memory `pod` uses (see the module docs).
fn memory_share(pod: &PodView, training: bool, gpus: u32, gpu_mib: f64) -> f64 {
    let billions = words(pod).iter().flat_map(|w| w.split([' ', '=', ','])).find_map(training::parameter_billions);
    match billions {
        Some(b) => {
            let bytes = if training { 16.0 } else { 2.2 };
            let per_gpu = b * 1e9 * bytes / 1_048_576.0 / f64::from(gpus.max(1));
            (per_gpu / gpu_mib + if training { 0.25 } else { 0.05 }).min(0.95)
        }
        None => {
            let u = unit(stable_hash(&["gpu-mem-share", &pod.namespace, &pod.source]));
            if training { 0.55 + 0.35 * u } else { 0.40 + 0.40 * u }
        }
    }
}

/// Whether `pod` runs training.
fn is_training(pod: &PodView) -> bool {
    matches!(pod.run, Some(PodRun::Training { .. }))
}

/// The node's GPU count and the memory of one of its GPUs.
fn node_gpus(node: &NodeInfo) -> (u32, f64) {
    let count = node.accelerators.filter(|(r, _)| *r == GPU).map_or(0, |(_, n)| n);
    let itype = node.labels.get("node.kubernetes.io/instance-type").and_then(Value::as_str).unwrap_or_default();
    let accel = crate::ec2_specs::instance_type_info(itype).map(|i| i.accelerator.as_str()).unwrap_or_default();
    (count, gpu_memory_mib(itype, accel))
}

/// When a training pod's processes do not run: before training begins (`offset` after the
/// container starts), during each in-place restart, and once stopped for good.
fn pauses(pod: &PodView, start: f64) -> Vec<(f64, f64)> {
    let Some(PodRun::Training { offset, restarts, killed, .. }) = &pod.run else { return vec![] };
    let mut out = vec![(start, start + offset)];
    out.extend(restarts.iter().map(|(at, _)| (*at, at + crate::timings::PROCESS_RESTART)));
    out.extend(killed.iter().map(|(at, _)| (*at, f64::INFINITY)));
    out
}

/// The pods that used `node`'s GPUs, each on the GPUs it took.
fn occupants(pods: &[PodView], nodes: &[NodeInfo], node: &NodeInfo, now: f64) -> Vec<Occupant> {
    let (count, gpu_mib) = node_gpus(node);
    let mut placed: Vec<(f64, f64, u32, &PodView)> = pods
        .iter()
        .filter_map(|p| {
            let st = pod::pod_state(p, nodes, now);
            let start = st.started_at?;
            let n = gpu_request(p);
            (st.node.as_deref() == Some(node.name.as_str()) && n > 0)
                .then(|| (start, st.finished_at.unwrap_or(f64::INFINITY), n, p))
        })
        .collect();
    placed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.3.name.cmp(&b.3.name)));
    let mut out: Vec<Occupant> = Vec::new();
    for (start, end, n, pod) in placed {
        let busy: Vec<u32> =
            out.iter().filter(|o| o.start < end && start < o.end).flat_map(|o| o.gpus.iter().copied()).collect();
        let gpus: Vec<u32> = (0..count).filter(|i| !busy.contains(i)).take(n as usize).collect();
        let training = is_training(pod);
        out.push(Occupant {
            uid: pod.uid.clone(),
            pod: (pod.namespace.clone(), pod.name.clone(), pod.container().to_string()),
            training,
            start,
            end,
            memory: memory_share(pod, training, n, gpu_mib),
            gpus,
            pauses: pauses(pod, start),
        });
    }
    out
}

/// The grid of `window` on the simulated clock: `(unix seconds, simulated seconds)`.
fn grid(w: &World, window: &MetricsWindow, now: f64) -> Vec<(f64, f64)> {
    let end = w.display_time(now).timestamp_millis() as f64 / 1000.0;
    window.grid(end).into_iter().map(|t| (t, now - (end - t))).collect()
}

fn the_cluster<'a>(w: &'a World, target: &KubeTarget, now: f64) -> Result<&'a KubeWorld> {
    let key = crate::kube::objects::check_target(w, METRICS_API, target, now)?;
    w.kube.get(&key).ok_or_else(|| {
        ProviderError::not_found(METRICS_API, format!("no Kubernetes API in EKS cluster {}", target.eks_cluster))
    })
}

fn node_series(w: &World, target: &KubeTarget, name: &str, window: &MetricsWindow, now: f64) -> Result<SeriesSet> {
    let kw = the_cluster(w, target, now)?;
    let nodes = nodes::nodes(w, kw, now);
    let node = nodes
        .iter()
        .find(|n| n.name == name && n.gone_at.is_none_or(|g| g > now))
        .ok_or_else(|| ProviderError::not_found(METRICS_API, format!("node {name} not found")))?;
    let (count, gpu_mib) = node_gpus(node);
    let pods = workload::all_pods(kw, None, now);
    let occupants = occupants(&pods, &nodes, node, now);
    let mut series = Vec::new();
    for gpu in 0..count {
        let mut util = MetricSeries::new(Metric::GpuUtilization, DCGM_GPU_UTIL, Some(gpu), Some(name));
        let mut memory = MetricSeries::new(Metric::GpuMemoryUsed, DCGM_FB_USED, Some(gpu), Some(name));
        for (t_unix, t) in grid(w, window, now) {
            if t < node.ready_at {
                continue;
            }
            let on = occupants.iter().find(|o| o.at(t) && o.gpus.contains(&gpu));
            let (u, m) = match on {
                Some(o) => {
                    let k = o.gpus.iter().position(|g| *g == gpu).unwrap_or(0);
                    (o.utilization(k, t, t_unix), o.memory_mib(k, t, t_unix, gpu_mib))
                }
                None => (0.0, 0.0),
            };
            util.points.push([t_unix, u]);
            memory.points.push([t_unix, m]);
        }
        series.push(util);
        series.push(memory);
    }
    series.sort_by_key(|s| (s.metric, s.gpu));
    Ok(SeriesSet {
        origin: None,
        end: w.display_time(now),
        gpu_memory_total_mib: (count > 0).then_some(gpu_mib),
        series,
    })
}

fn job_series(
    w: &World,
    target: &KubeTarget,
    namespace: &str,
    job: &str,
    window: &MetricsWindow,
    now: f64,
) -> Result<SeriesSet> {
    let kw = the_cluster(w, target, now)?;
    let nodes = nodes::nodes(w, kw, now);
    let all = workload::all_pods(kw, None, now);
    let of_job =
        |p: &PodView| p.namespace == namespace && matches!(&p.run, Some(PodRun::Training { job: j, .. }) if j == job);
    // The job's pods on their nodes' GPUs (the node's other pods decide which GPUs they got).
    let mut mine: Vec<Occupant> = Vec::new();
    let mut gpu_mib = None;
    for node in &nodes {
        if !all.iter().any(|p| of_job(p) && pod::pod_state(p, &nodes, now).node.as_deref() == Some(&node.name)) {
            continue;
        }
        gpu_mib = gpu_mib.or(Some(node_gpus(node).1));
        let on_node = occupants(&all, &nodes, node, now);
        let uids: Vec<&str> = all.iter().filter(|p| of_job(p)).map(|p| p.uid.as_str()).collect();
        mine.extend(on_node.into_iter().filter(|o| uids.contains(&o.uid.as_str())));
    }
    // The lines of the logging pod: (time, step, loss, throughput).
    let mut steps: Vec<(f64, f64, f64)> = Vec::new();
    let mut running: Vec<(f64, f64)> = Vec::new();
    for pod in all.iter().filter(|p| of_job(p)) {
        let Some(run @ PodRun::Training { role, .. }) = &pod.run else { continue };
        let logs = match role {
            Role::Rank => pod.rank == 0,
            Role::RayHead => true,
            Role::RayWorker => false,
        };
        if !logs {
            continue;
        }
        let st = pod::pod_state(pod, &nodes, now);
        let Some(started) = st.started_at else { continue };
        running.push((started, st.finished_at.unwrap_or(f64::INFINITY)));
        steps.extend(
            training::log_lines(pod, run, &st, now).into_iter().filter_map(|(t, line)| {
                parse_training_log_line(&line).map(|(_, loss, throughput)| (t, loss, throughput))
            }),
        );
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));

    let total = gpu_mib.unwrap_or(0.0);
    let mut util = MetricSeries::new(Metric::GpuUtilization, DCGM_GPU_UTIL, None, None);
    let mut memory = MetricSeries::new(Metric::GpuMemoryUsed, DCGM_FB_USED, None, None);
    let mut throughput = MetricSeries::new(Metric::Throughput, SOURCE_TRAINING_LOG, None, None);
    let mut loss = MetricSeries::new(Metric::Loss, SOURCE_TRAINING_LOG, None, None);
    for (t_unix, t) in grid(w, window, now) {
        let gpus: Vec<(f64, f64)> = mine
            .iter()
            .filter(|o| o.at(t))
            .flat_map(|o| {
                (0..o.gpus.len()).map(move |k| (o.utilization(k, t, t_unix), o.memory_mib(k, t, t_unix, total)))
            })
            .collect();
        if !gpus.is_empty() {
            let n = gpus.len() as f64;
            util.points.push([t_unix, (gpus.iter().map(|g| g.0).sum::<f64>() / n * 10.0).round() / 10.0]);
            memory.points.push([t_unix, (gpus.iter().map(|g| g.1).sum::<f64>() / n).round()]);
        }
        if !running.iter().any(|(a, b)| *a <= t && t < *b) {
            continue;
        }
        match steps.iter().rev().find(|s| s.0 <= t) {
            Some(&(at, l, tp)) if t - at <= STALL_STEPS * crate::TRAINING_STEP_SECONDS => {
                throughput.points.push([t_unix, tp]);
                loss.points.push([t_unix, l]);
            }
            _ => throughput.points.push([t_unix, 0.0]),
        }
    }
    Ok(SeriesSet {
        origin: None,
        end: w.display_time(now),
        gpu_memory_total_mib: gpu_mib,
        series: vec![util, memory, throughput, loss],
    })
}

/// How often the simulated DCGM exporter samples its fields, in seconds: it serves the newest
/// sample stamped with its moment (a multiple of this in Unix time), so a reader sees the same
/// numbers as [`node_series`] at that moment. (NVIDIA's exporter collects every 30 s by default,
/// `-c 30000`; the simulated one every 5 s, the finest step a read may ask.)
pub const EXPORTER_SAMPLE_SECONDS: f64 = 5.0;

/// DCGM's `modelName` of a GPU (`nvidia-a10g` → `NVIDIA A10G`).
fn model_name(accelerator: &str) -> String {
    let short = accelerator.strip_prefix("nvidia-").unwrap_or(accelerator);
    format!("NVIDIA {}", short.to_uppercase())
}

/// One GPU at one moment, as NVIDIA's DCGM exporter labels it: `gpu`, `UUID`, `device`,
/// `modelName`, `Hostname` and, for a GPU a pod holds, its `namespace`, `pod` and `container`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GpuRow {
    pub labels: Vec<(&'static str, String)>,
    /// `DCGM_FI_DEV_GPU_UTIL`, `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE`.
    pub util: f64,
    pub used: f64,
    pub free: f64,
}

impl GpuRow {
    /// The value of DCGM field `name`, if it is one of the three.
    pub fn field(&self, name: &str) -> Option<f64> {
        match name {
            DCGM_GPU_UTIL => Some(self.util),
            DCGM_FB_USED => Some(self.used),
            DCGM_FB_FREE => Some(self.free),
            _ => None,
        }
    }
}

/// A GPU node's telemetry: its GPUs' rows at any moment.
pub(crate) struct NodeTelemetry {
    name: String,
    instance_id: String,
    model: String,
    count: u32,
    gpu_mib: f64,
    ready_at: f64,
    gone_at: Option<f64>,
    occupants: Vec<Occupant>,
}

impl NodeTelemetry {
    /// The rows of simulated moment `t` (Unix `t_unix`); none before the node is ready or once
    /// it is gone.
    pub fn rows(&self, t: f64, t_unix: f64) -> Vec<GpuRow> {
        if t < self.ready_at || self.gone_at.is_some_and(|g| g <= t) {
            return vec![];
        }
        (0..self.count)
            .map(|gpu| {
                let uuid = crate::base::uuid_from(stable_hash(&["gpu-uuid", &self.instance_id, &gpu.to_string()]), 0);
                let mut labels = vec![
                    ("gpu", gpu.to_string()),
                    ("UUID", format!("GPU-{uuid}")),
                    ("device", format!("nvidia{gpu}")),
                    ("modelName", self.model.clone()),
                    ("Hostname", self.name.clone()),
                ];
                let (util, used) = match self.occupants.iter().find(|o| o.at(t) && o.gpus.contains(&gpu)) {
                    Some(o) => {
                        let k = o.gpus.iter().position(|g| *g == gpu).unwrap_or(0);
                        let (ns, pod, container) = &o.pod;
                        labels.push(("container", container.clone()));
                        labels.push(("namespace", ns.clone()));
                        labels.push(("pod", pod.clone()));
                        (o.utilization(k, t, t_unix), o.memory_mib(k, t, t_unix, self.gpu_mib))
                    }
                    None => (0.0, 0.0),
                };
                GpuRow { labels, util, used, free: self.gpu_mib - used }
            })
            .collect()
    }
}

/// The telemetry of every GPU node of `kw` (the nodes and pods of simulated moment `now`).
pub(crate) fn telemetry(w: &World, kw: &KubeWorld, now: f64) -> Vec<NodeTelemetry> {
    let nodes = nodes::nodes(w, kw, now);
    let pods = workload::all_pods(kw, None, now);
    nodes
        .iter()
        .filter(|n| node_gpus(n).0 > 0)
        .map(|info| {
            let (count, gpu_mib) = node_gpus(info);
            let itype = info.labels.get("node.kubernetes.io/instance-type").and_then(Value::as_str).unwrap_or_default();
            let accel = crate::ec2_specs::instance_type_info(itype).map(|i| i.accelerator.clone()).unwrap_or_default();
            NodeTelemetry {
                name: info.name.clone(),
                instance_id: info.instance_id.clone(),
                model: model_name(&accel),
                count,
                gpu_mib,
                ready_at: info.ready_at,
                gone_at: info.gone_at,
                occupants: occupants(&pods, &nodes, info, now),
            }
        })
        .collect()
}

/// What NVIDIA's DCGM exporter on Kubernetes node `node` serves at `/metrics` now (Prometheus
/// text; NVIDIA's "DCGM Exporter Metrics" format): `DCGM_FI_DEV_GPU_UTIL`,
/// `DCGM_FI_DEV_FB_USED` and `DCGM_FI_DEV_FB_FREE` per GPU, labelled as [`GpuRow`] says.
/// `None` when the node is gone.
pub(crate) fn exporter_text(w: &World, kw: &KubeWorld, node: &str, now: f64) -> Option<String> {
    use std::fmt::Write;
    let nodes = nodes::nodes(w, kw, now);
    nodes.iter().find(|n| n.name == node && n.gone_at.is_none_or(|g| g > now))?;
    let end = w.display_time(now).timestamp_millis() as f64 / 1000.0;
    let t_unix = (end / EXPORTER_SAMPLE_SECONDS).floor() * EXPORTER_SAMPLE_SECONDS;
    let t = now - (end - t_unix);
    let ms = (t_unix * 1000.0) as i64;
    let rows = telemetry(w, kw, now)
        .into_iter()
        .find(|n| n.name == node)
        .map(|n| {
            // The exporter serves from the moment it runs: readiness does not hide its rows.
            NodeTelemetry { ready_at: f64::NEG_INFINITY, gone_at: None, ..n }.rows(t, t_unix)
        })
        .unwrap_or_default();
    let mut out = String::new();
    let families = [
        (DCGM_GPU_UTIL, "GPU utilization (in %)."),
        (DCGM_FB_FREE, "Framebuffer memory free (in MiB)."),
        (DCGM_FB_USED, "Framebuffer memory used (in MiB)."),
    ];
    for (name, help) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for row in &rows {
            let labels: Vec<String> = row.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            let _ = writeln!(out, "{name}{{{}}} {} {ms}", labels.join(","), row.field(name).unwrap_or_default());
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_memory_follows_the_gpu() {
        let table = [
            ("ml.p5.48xlarge", "nvidia-h100", 81_920.0),
            ("ml.p4d.24xlarge", "nvidia-a100", 40_960.0),
            ("ml.p4de.24xlarge", "nvidia-a100", 81_920.0),
            ("ml.g5.12xlarge", "nvidia-a10g", 24_576.0),
            ("ml.p5en.48xlarge", "nvidia-h200", 144_384.0),
        ];
        for (t, a, want) in table {
            assert_eq!(gpu_memory_mib(t, a), want, "{t}");
        }
    }
}

//! [`DcgmSource`]: GPU metrics of a real cluster, read from NVIDIA's DCGM exporter on its GPU
//! nodes (a [`MetricsSource`] over any [`KubeApi`], in production the kube-rs adapter).
//!
//! - **Finding the exporter.** The pods labelled as NVIDIA ships the exporter
//!   ([`DCGM_EXPORTER_SELECTORS`]: its Helm chart, its DaemonSet manifest, the GPU operator's
//!   DaemonSet), `Running` on the node read.
//! - **Scraping it** through the API server's pod proxy (`GET
//!   /api/v1/namespaces/{ns}/pods/{pod}:9400/proxy/metrics`, [`KubeApi::pod_proxy`]): the control
//!   plane needs only RBAC `get` on `pods/proxy` (and `list` on `pods`), no network path to the
//!   node. The answer is read with [`prometheus_text`]: `DCGM_FI_DEV_GPU_UTIL`,
//!   `DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE` per `gpu`, and the `namespace`/`pod` labels of
//!   the workload using the GPU. A sample carries the exporter's timestamp when it gives one, else
//!   the moment of the scrape.
//! - **History.** An exporter knows only "now", so every scrape is kept in a bounded ring per
//!   (cluster, node, GPU) ([`Rings`]), filled by every read and by a sampler
//!   ([`DcgmSource::spawn_sampler`]) that scrapes what was read in the last [`WATCH_FOR`] again
//!   every `step` of its last read (at least [`MIN_SAMPLE_SECONDS`]).
//! - **A job** reads the rings of the nodes its pods run on: at each moment the mean over the
//!   GPUs whose `namespace`/`pod` labels are the job's pods; its throughput and loss are the
//!   newest progress line ([`parse_training_step`]) of its logging pod (the Ray head, else the
//!   first pod, as the job's log view picks it), sampled with the GPUs.
//!
//! # Guarantees
//!
//! - **On the window's grid** (as [`MetricsSource`] states): a point at grid moment `g` is the
//!   oldest sample of `[g, g + step)` (the nearest to `g`); a moment without a sample has no
//!   point, so history starts when someone first read the node or job. The window ends at the
//!   newest sample of the read (`SeriesSet::end`).
//! - **Bounded memory**, whatever the number of clusters: at most [`MAX_SAMPLES_PER_SERIES`]
//!   samples per GPU and per job (the oldest evicted first), at most [`MAX_GPU_SERIES`] GPU rings
//!   and [`MAX_JOB_SERIES`] job rings (the least recently written ring evicted first), at most
//!   [`MAX_WATCHED`] watched nodes and jobs; a scrape answer is capped by the pod proxy
//!   (`PROXY_MAX_RESPONSE_BYTES`) and the parser (`prometheus_text::MAX_SAMPLES`).
//! - **No exporter, a clear error**: a node without a running exporter pod is
//!   [`ProviderError::no_metrics_exporter`] (the read's 409 names what to install); an exporter
//!   that answers an HTTP error or text that does not parse is a [`DCGM_SCRAPE_API`] error naming
//!   the pod.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use instantstart_core::log_lines::parse_training_step;
use instantstart_core::prometheus_text::{self, Sample};
use instantstart_core::provider::{
    DCGM_EXPORTER_PORT, DCGM_EXPORTER_SELECTORS, DCGM_FB_FREE, DCGM_FB_USED, DCGM_GPU_UTIL, DCGM_SCRAPE_API, KubeApi,
    KubeObject, KubeTarget, ListParams, Metric, MetricSeries, MetricsSource, MetricsWindow, ProviderError,
    ProviderErrorKind, SOURCE_TRAINING_LOG, SeriesSet,
};
use instantstart_core::workload::read;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// What [`MetricsSource::origin`] says.
pub const ORIGIN: &str = "dcgm exporter";
/// Samples kept per GPU and per job (an hour at 5 s, six hours at 30 s).
pub const MAX_SAMPLES_PER_SERIES: usize = 720;
/// GPU rings kept over every cluster (e.g. 256 nodes of 8 GPUs).
pub const MAX_GPU_SERIES: usize = 2048;
/// Job rings kept over every cluster.
pub const MAX_JOB_SERIES: usize = 256;
/// Nodes and jobs the sampler keeps scraping at once.
pub const MAX_WATCHED: usize = 512;
/// How long after its last read a node or job is still sampled.
pub const WATCH_FOR: Duration = Duration::from_secs(15 * 60);
/// Shortest time between two samples of the sampler.
pub const MIN_SAMPLE_SECONDS: u32 = 5;
/// How long one scrape may take.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);
/// Log lines of the logging pod read per job sample.
const LOG_TAIL: u32 = 50;

/// One scrape of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSample {
    /// Unix seconds.
    pub t: f64,
    pub utilization: f64,
    /// MiB in use.
    pub used: f64,
    /// MiB free, when the exporter serves `DCGM_FI_DEV_FB_FREE`.
    pub free: Option<f64>,
    /// `namespace/pod` using the GPU, when the exporter names one.
    pub pod: Option<Arc<str>>,
}

/// A job's newest logged step at one sample.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSample {
    pub t: f64,
    pub step: u64,
    pub loss: f64,
    pub throughput: f64,
}

/// Something with a time.
pub trait Timed {
    fn t(&self) -> f64;
}

impl Timed for GpuSample {
    fn t(&self) -> f64 {
        self.t
    }
}

impl Timed for StepSample {
    fn t(&self) -> f64 {
        self.t
    }
}

/// A bounded ring of samples, oldest first.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    samples: VecDeque<T>,
    /// When the ring was last written (for eviction), from [`Rings`]' counter.
    written: u64,
}

impl<T: Timed> Ring<T> {
    fn new() -> Self {
        Ring { samples: VecDeque::new(), written: 0 }
    }

    /// Adds a sample in time order; a sample of a moment already held replaces it; a sample
    /// older than the oldest held is dropped once the ring is full.
    pub fn push(&mut self, s: T) {
        let t = s.t();
        let at = self.samples.partition_point(|x| x.t() < t);
        if self.samples.get(at).is_some_and(|x| x.t() == t) {
            self.samples[at] = s;
            return;
        }
        if self.samples.len() == MAX_SAMPLES_PER_SERIES {
            if at == 0 {
                return;
            }
            self.samples.pop_front();
            self.samples.insert(at - 1, s);
        } else {
            self.samples.insert(at, s);
        }
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The sample of each grid moment: the oldest of `[g, g + step)`.
    pub fn on_grid(&self, grid: &[f64], step: f64) -> Vec<(f64, Option<&T>)> {
        grid.iter()
            .map(|&g| {
                let at = self.samples.partition_point(|x| x.t() < g);
                (g, self.samples.get(at).filter(|x| x.t() < g + step))
            })
            .collect()
    }

    pub fn newest(&self) -> Option<&T> {
        self.samples.back()
    }
}

/// `(region, EKS cluster, node, gpu)`.
type GpuKey = (String, String, String, u32);
/// `(region, EKS cluster, namespace, job)`.
type JobKey = (String, String, String, String);

/// Every ring of the process, bounded (see the module's guarantees).
#[derive(Debug, Default)]
pub struct Rings {
    gpus: HashMap<GpuKey, Ring<GpuSample>>,
    jobs: HashMap<JobKey, Ring<StepSample>>,
    counter: u64,
}

/// Inserts into `map`, evicting the least recently written ring first when `cap` is reached.
fn ring_of<'a, K: std::hash::Hash + Eq + Clone, T: Timed>(
    map: &'a mut HashMap<K, Ring<T>>,
    key: &K,
    cap: usize,
    counter: u64,
) -> &'a mut Ring<T> {
    if !map.contains_key(key) && map.len() >= cap {
        let oldest = map.iter().min_by_key(|(_, r)| r.written).map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            map.remove(&k);
        }
    }
    let ring = map.entry(key.clone()).or_insert_with(Ring::new);
    ring.written = counter;
    ring
}

impl Rings {
    fn tick(&mut self) -> u64 {
        self.counter += 1;
        self.counter
    }

    /// Records one scrape of node `node`: a sample per GPU.
    pub fn record_node(&mut self, target: &KubeTarget, node: &str, samples: Vec<(u32, GpuSample)>) {
        for (gpu, s) in samples {
            let c = self.tick();
            let key = (target.region.clone(), target.eks_cluster.clone(), node.to_string(), gpu);
            ring_of(&mut self.gpus, &key, MAX_GPU_SERIES, c).push(s);
        }
    }

    /// Records a job's newest logged step.
    pub fn record_job(&mut self, target: &KubeTarget, namespace: &str, job: &str, s: StepSample) {
        let c = self.tick();
        let key = (target.region.clone(), target.eks_cluster.clone(), namespace.to_string(), job.to_string());
        ring_of(&mut self.jobs, &key, MAX_JOB_SERIES, c).push(s);
    }

    /// The GPU rings of `node`, by GPU index.
    pub fn node(&self, target: &KubeTarget, node: &str) -> BTreeMap<u32, &Ring<GpuSample>> {
        self.gpus
            .iter()
            .filter(|((r, e, n, _), _)| *r == target.region && *e == target.eks_cluster && n == node)
            .map(|((.., g), ring)| (*g, ring))
            .collect()
    }

    pub fn job(&self, target: &KubeTarget, namespace: &str, job: &str) -> Option<&Ring<StepSample>> {
        self.jobs.get(&(target.region.clone(), target.eks_cluster.clone(), namespace.to_string(), job.to_string()))
    }

    /// How many GPU and job rings are held.
    pub fn counts(&self) -> (usize, usize) {
        (self.gpus.len(), self.jobs.len())
    }
}

/// What the sampler keeps scraping.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Watched {
    Node(KubeTarget, String),
    /// The target carries the reader's identity: the sampler reads the job as its reader did.
    Job(KubeTarget, String, String),
}

#[derive(Debug, Clone, Copy)]
struct Watch {
    read_at: Instant,
    sampled_at: Instant,
    step: Duration,
}

#[derive(Debug, Default)]
struct State {
    rings: Rings,
    watched: HashMap<Watched, Watch>,
}

/// GPU metrics read from the DCGM exporters of a real cluster (see the module docs).
pub struct DcgmSource {
    kube: Arc<dyn KubeApi>,
    state: Mutex<State>,
}

impl std::fmt::Debug for DcgmSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcgmSource").finish_non_exhaustive()
    }
}

fn now_unix() -> f64 {
    Utc::now().timestamp_millis() as f64 / 1000.0
}

fn unix_to_time(t: f64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis((t * 1000.0).round() as i64).unwrap_or_else(Utc::now)
}

fn str_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

/// The GPU samples of one exporter answer, by GPU index, at `t` unless the answer carries
/// timestamps. Samples without a numeric `gpu` label (MIG instances, links) are skipped.
fn gpu_samples(samples: &[Sample], scraped_at: f64) -> (f64, Vec<(u32, GpuSample)>) {
    let t = samples.iter().filter_map(|s| s.timestamp_ms).max().map_or(scraped_at, |ms| ms as f64 / 1000.0);
    let mut by_gpu: BTreeMap<u32, GpuSample> = BTreeMap::new();
    for s in samples {
        let Some(gpu) = s.label("gpu").and_then(|g| g.parse::<u32>().ok()) else { continue };
        if s.label("GPU_I_ID").is_some_and(|i| !i.is_empty()) {
            continue;
        }
        let e = by_gpu.entry(gpu).or_insert(GpuSample { t, utilization: 0.0, used: 0.0, free: None, pod: None });
        match s.name.as_str() {
            DCGM_GPU_UTIL => e.utilization = s.value,
            DCGM_FB_USED => e.used = s.value,
            DCGM_FB_FREE => e.free = Some(s.value),
            _ => continue,
        }
        if let (Some(ns), Some(pod)) = (s.label("namespace"), s.label("pod"))
            && !ns.is_empty()
            && !pod.is_empty()
        {
            e.pod = Some(Arc::from(format!("{ns}/{pod}")));
        }
    }
    (t, by_gpu.into_iter().collect())
}

impl DcgmSource {
    pub fn new(kube: Arc<dyn KubeApi>) -> Arc<Self> {
        Arc::new(DcgmSource { kube, state: Mutex::new(State::default()) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many GPU and job rings are held (for tests and diagnostics).
    pub fn ring_counts(&self) -> (usize, usize) {
        self.lock().rings.counts()
    }

    /// Scrapes what was read in the last [`WATCH_FOR`], each at the step of its last read, until
    /// the source is dropped. Needs a Tokio runtime.
    pub fn spawn_sampler(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                tick.tick().await;
                let Some(me) = weak.upgrade() else { return };
                for w in me.due(Instant::now()) {
                    let r = match &w {
                        Watched::Node(target, node) => me.scrape_node(target, node).await.map(|_| ()),
                        Watched::Job(target, ns, job) => me.sample_job(target, ns, job).await.map(|_| ()),
                    };
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "dcgm sampler: a scrape failed");
                    }
                }
            }
        })
    }

    /// Drops what nobody read for [`WATCH_FOR`]; the rest whose step has passed, marked sampled.
    fn due(&self, now: Instant) -> Vec<Watched> {
        let mut st = self.lock();
        st.watched.retain(|_, w| now.duration_since(w.read_at) < WATCH_FOR);
        let mut out = Vec::new();
        for (k, w) in st.watched.iter_mut() {
            if now.duration_since(w.sampled_at) >= w.step {
                w.sampled_at = now;
                out.push(k.clone());
            }
        }
        out
    }

    fn watch(&self, what: Watched, window: &MetricsWindow) {
        let now = Instant::now();
        let step = Duration::from_secs(u64::from(window.step_seconds.max(MIN_SAMPLE_SECONDS)));
        let mut st = self.lock();
        if !st.watched.contains_key(&what) && st.watched.len() >= MAX_WATCHED {
            let oldest = st.watched.iter().min_by_key(|(_, w)| w.read_at).map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                st.watched.remove(&k);
            }
        }
        st.watched.insert(what, Watch { read_at: now, sampled_at: now, step });
    }

    /// The running exporter pod on `node`: `(namespace, name)`.
    async fn exporter_on(&self, target: &KubeTarget, node: &str) -> Result<(String, String), ProviderError> {
        for (k, v) in DCGM_EXPORTER_SELECTORS {
            let params = ListParams {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: None,
                labels: vec![(k.to_string(), v.to_string())],
            };
            let pods = self.kube.list(target, &params).await?;
            let found = pods.iter().find(|p| {
                str_at(&p.0, "/spec/nodeName") == Some(node) && str_at(&p.0, "/status/phase") == Some("Running")
            });
            if let Some(p) = found {
                let ns = str_at(&p.0, "/metadata/namespace").unwrap_or("default").to_string();
                let name = str_at(&p.0, "/metadata/name").unwrap_or_default().to_string();
                return Ok((ns, name));
            }
        }
        Err(ProviderError::no_metrics_exporter(node))
    }

    /// Scrapes the exporter of `node` into the rings; the moment of the sample.
    async fn scrape_node(&self, target: &KubeTarget, node: &str) -> Result<f64, ProviderError> {
        let plain = KubeTarget::new(target.region.clone(), target.eks_cluster.clone());
        let (ns, pod) = self.exporter_on(&plain, node).await?;
        let scraped_at = now_unix();
        let answer = self.kube.pod_proxy(&plain, &ns, &pod, DCGM_EXPORTER_PORT, "metrics", SCRAPE_TIMEOUT).await?;
        let fail = |kind, why: String| ProviderError::new(DCGM_SCRAPE_API, kind, format!("exporter {ns}/{pod}: {why}"));
        if answer.status != 200 {
            let kind = if answer.status >= 500 { ProviderErrorKind::Transient } else { ProviderErrorKind::Failed };
            let body = String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)]).into_owned();
            return Err(fail(kind, format!("HTTP {} from /metrics: {body}", answer.status)));
        }
        let text = String::from_utf8_lossy(&answer.body);
        let wanted = [DCGM_GPU_UTIL, DCGM_FB_USED, DCGM_FB_FREE];
        let samples = prometheus_text::parse(&text, |n| wanted.contains(&n))
            .map_err(|e| fail(ProviderErrorKind::Failed, format!("not Prometheus text: {e}")))?;
        let (t, gpus) = gpu_samples(&samples, scraped_at);
        self.lock().rings.record_node(&plain, node, gpus);
        Ok(t)
    }

    /// Samples job `job`: its nodes' exporters and its newest logged step. The moment of the
    /// sample, and the job's pods (`namespace/name`) with their nodes.
    async fn sample_job(
        &self,
        target: &KubeTarget,
        namespace: &str,
        job: &str,
    ) -> Result<(Option<f64>, BTreeSet<String>, BTreeSet<String>), ProviderError> {
        let found = match read::find_job(self.kube.as_ref(), target, job, Some(namespace)).await {
            Ok(j) => j,
            Err(read::ReadError::Provider(e)) => return Err(e),
            Err(e) => return Err(ProviderError::not_found(DCGM_SCRAPE_API, e.to_string())),
        };
        let pods: Vec<KubeObject> = read::job_pods(self.kube.as_ref(), target, &found).await?;
        let names: BTreeSet<String> =
            pods.iter().filter_map(|p| str_at(&p.0, "/metadata/name")).map(|n| format!("{namespace}/{n}")).collect();
        let nodes: BTreeSet<String> =
            pods.iter().filter_map(|p| str_at(&p.0, "/spec/nodeName")).map(str::to_string).collect();
        let mut t: Option<f64> = None;
        let mut first_error = None;
        for node in &nodes {
            match self.scrape_node(target, node).await {
                Ok(x) => t = Some(t.map_or(x, |y: f64| y.max(x))),
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        if let (None, Some(e)) = (t, first_error) {
            return Err(e);
        }
        let logger = read::default_pod(&pods);
        let running = |name: &str| {
            pods.iter().any(|p| {
                str_at(&p.0, "/metadata/name") == Some(name) && str_at(&p.0, "/status/phase") == Some("Running")
            })
        };
        if let Some(pod) = logger.filter(|p| running(p)) {
            use futures::StreamExt;
            let lines: Vec<String> = match self.kube.logs(target, namespace, &pod, false, Some(LOG_TAIL)).await {
                Ok(stream) => stream.filter_map(|l| async move { l.ok() }).collect().await,
                Err(e) => {
                    tracing::debug!(error = %e, "dcgm: the logging pod's log could not be read");
                    vec![]
                }
            };
            if let Some((step, loss, throughput)) = lines.iter().rev().find_map(|l| parse_training_step(l)) {
                let at = t.unwrap_or_else(now_unix);
                self.lock().rings.record_job(target, namespace, job, StepSample { t: at, step, loss, throughput });
            }
        }
        Ok((t, names, nodes))
    }
}

/// Per-GPU series of `node` on `window`'s grid ending at `end`; one GPU's memory.
fn node_series(rings: &Rings, target: &KubeTarget, node: &str, window: &MetricsWindow, end: f64) -> SeriesSet {
    let grid = window.grid(end);
    let step = f64::from(window.step_seconds);
    let mut series = Vec::new();
    let mut total = None;
    for (gpu, ring) in rings.node(target, node) {
        let mut util = MetricSeries::new(Metric::GpuUtilization, DCGM_GPU_UTIL, Some(gpu), Some(node));
        let mut memory = MetricSeries::new(Metric::GpuMemoryUsed, DCGM_FB_USED, Some(gpu), Some(node));
        for (g, s) in ring.on_grid(&grid, step) {
            if let Some(s) = s {
                util.points.push([g, s.utilization]);
                memory.points.push([g, s.used]);
            }
        }
        if let Some(s) = ring.newest()
            && let Some(free) = s.free
        {
            total = Some(s.used + free);
        }
        series.push(util);
        series.push(memory);
    }
    series.sort_by_key(|s| (s.metric, s.gpu));
    SeriesSet { origin: None, end: unix_to_time(end), gpu_memory_total_mib: total, series }
}

/// A job's series: the mean over its GPUs, its throughput and loss.
fn job_series(
    rings: &Rings,
    target: &KubeTarget,
    (namespace, job): (&str, &str),
    pods: &BTreeSet<String>,
    nodes: &BTreeSet<String>,
    window: &MetricsWindow,
    end: f64,
) -> SeriesSet {
    let grid = window.grid(end);
    let step = f64::from(window.step_seconds);
    let mut util = MetricSeries::new(Metric::GpuUtilization, DCGM_GPU_UTIL, None, None);
    let mut memory = MetricSeries::new(Metric::GpuMemoryUsed, DCGM_FB_USED, None, None);
    let mut throughput = MetricSeries::new(Metric::Throughput, SOURCE_TRAINING_LOG, None, None);
    let mut loss = MetricSeries::new(Metric::Loss, SOURCE_TRAINING_LOG, None, None);
    let mut total = None;
    let rings_of: Vec<&Ring<GpuSample>> = nodes.iter().flat_map(|n| rings.node(target, n).into_values()).collect();
    let mine = |s: &GpuSample| s.pod.as_deref().is_some_and(|p| pods.contains(p));
    for ring in &rings_of {
        if let Some(s) = ring.newest().filter(|s| mine(s))
            && let Some(free) = s.free
        {
            total = Some(s.used + free);
        }
    }
    let on_grid: Vec<Vec<(f64, Option<&GpuSample>)>> = rings_of.iter().map(|r| r.on_grid(&grid, step)).collect();
    for (i, g) in grid.iter().enumerate() {
        let at: Vec<&GpuSample> = on_grid.iter().filter_map(|r| r[i].1).filter(|s| mine(s)).collect();
        if !at.is_empty() {
            let n = at.len() as f64;
            util.points.push([*g, (at.iter().map(|s| s.utilization).sum::<f64>() / n * 10.0).round() / 10.0]);
            memory.points.push([*g, (at.iter().map(|s| s.used).sum::<f64>() / n).round()]);
        }
    }
    if let Some(ring) = rings.job(target, namespace, job) {
        for (g, s) in ring.on_grid(&grid, step) {
            if let Some(s) = s {
                throughput.points.push([g, s.throughput]);
                loss.points.push([g, s.loss]);
            }
        }
    }
    SeriesSet {
        origin: None,
        end: unix_to_time(end),
        gpu_memory_total_mib: total,
        series: vec![util, memory, throughput, loss],
    }
}

#[async_trait]
impl MetricsSource for DcgmSource {
    fn origin(&self) -> &'static str {
        ORIGIN
    }

    async fn node_metrics(
        &self,
        target: &KubeTarget,
        node: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError> {
        let plain = KubeTarget::new(target.region.clone(), target.eks_cluster.clone());
        let end = self.scrape_node(&plain, node).await?;
        self.watch(Watched::Node(plain.clone(), node.to_string()), window);
        Ok(node_series(&self.lock().rings, &plain, node, window, end))
    }

    async fn job_metrics(
        &self,
        target: &KubeTarget,
        namespace: &str,
        job: &str,
        window: &MetricsWindow,
    ) -> Result<SeriesSet, ProviderError> {
        let (end, pods, nodes) = self.sample_job(target, namespace, job).await?;
        self.watch(Watched::Job(target.clone(), namespace.to_string(), job.to_string()), window);
        let plain = KubeTarget::new(target.region.clone(), target.eks_cluster.clone());
        let end = end.unwrap_or_else(now_unix);
        Ok(job_series(&self.lock().rings, &plain, (namespace, job), &pods, &nodes, window, end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64) -> StepSample {
        StepSample { t, step: t as u64, loss: 1.0, throughput: t }
    }

    #[test]
    fn a_ring_keeps_the_newest_samples_in_time_order() {
        let mut r = Ring::new();
        for t in (0..(MAX_SAMPLES_PER_SERIES as u64 + 100)).rev() {
            r.push(s(t as f64));
        }
        // Filled newest first: once full, older samples are dropped.
        assert_eq!(r.len(), MAX_SAMPLES_PER_SERIES);
        assert_eq!(r.samples.front().unwrap().t, 100.0);
        r.push(s(10_000.0));
        assert_eq!(
            (r.len(), r.samples.front().unwrap().t, r.newest().unwrap().t),
            (MAX_SAMPLES_PER_SERIES, 101.0, 10_000.0)
        );
        // The same moment replaces its sample.
        r.push(StepSample { throughput: -1.0, ..s(10_000.0) });
        assert_eq!((r.len(), r.newest().unwrap().throughput), (MAX_SAMPLES_PER_SERIES, -1.0));
        assert!(r.samples.iter().zip(r.samples.iter().skip(1)).all(|(a, b)| a.t < b.t));
    }

    #[test]
    fn grid_points_take_the_oldest_sample_of_their_step() {
        let mut r = Ring::new();
        for t in [100.0, 103.0, 112.0, 131.0] {
            r.push(s(t));
        }
        let got: Vec<(f64, Option<f64>)> =
            r.on_grid(&[100.0, 110.0, 120.0, 130.0], 10.0).into_iter().map(|(g, x)| (g, x.map(|x| x.t))).collect();
        assert_eq!(got, [(100.0, Some(100.0)), (110.0, Some(112.0)), (120.0, None), (130.0, Some(131.0))]);
    }

    #[test]
    fn rings_are_bounded_over_clusters_and_evict_the_least_recently_written() {
        let mut rings = Rings::default();
        let gpu = |t: f64| GpuSample { t, utilization: 1.0, used: 1.0, free: None, pod: None };
        for c in 0..(MAX_GPU_SERIES / 8 + 10) {
            let target = KubeTarget::new("us-east-1", format!("c{c}"));
            rings.record_node(&target, "n", (0..8).map(|g| (g, gpu(1.0))).collect());
        }
        assert_eq!(rings.counts().0, MAX_GPU_SERIES);
        // The first clusters' GPUs went first; the newest are all there.
        assert!(rings.node(&KubeTarget::new("us-east-1", "c0"), "n").is_empty());
        let last = KubeTarget::new("us-east-1", format!("c{}", MAX_GPU_SERIES / 8 + 9));
        assert_eq!(rings.node(&last, "n").len(), 8);
        for j in 0..(MAX_JOB_SERIES + 5) {
            rings.record_job(&KubeTarget::new("r", "c"), "ns", &format!("j{j}"), s(1.0));
        }
        assert_eq!(rings.counts().1, MAX_JOB_SERIES);
        assert!(rings.job(&KubeTarget::new("r", "c"), "ns", "j0").is_none());
    }

    #[test]
    fn the_sampler_scrapes_what_was_read_recently_at_its_step() {
        let sim = instantstart_sim::SimCloud::new(instantstart_sim::SimConfig::with_speed(1.0)).unwrap();
        let source = DcgmSource::new(Arc::new(sim));
        let t = KubeTarget::new("us-east-1", "c");
        let node = Watched::Node(t.clone(), "n".into());
        let job = Watched::Job(t.clone(), "ns".into(), "j".into());
        let start = Instant::now();
        source.watch(node.clone(), &MetricsWindow { since_seconds: 600, step_seconds: 10 });
        // A step below the sampler's floor is sampled at the floor.
        source.watch(job.clone(), &MetricsWindow { since_seconds: 600, step_seconds: 1 });
        let at = |s: u64| start + Duration::from_secs(s);
        assert!(source.due(at(0)).is_empty());
        assert_eq!(source.due(at(6)), std::slice::from_ref(&job));
        let mut both = source.due(at(11));
        both.sort_by_key(|w| matches!(w, Watched::Job(..)));
        assert_eq!(both, [node, job]);
        // Nobody read them for WATCH_FOR: no longer sampled.
        assert!(source.due(start + WATCH_FOR + Duration::from_secs(1)).is_empty());
        assert!(source.lock().watched.is_empty());
        // Many nodes read at once: the oldest read is dropped beyond the cap.
        for i in 0..(MAX_WATCHED + 10) {
            source.watch(
                Watched::Node(t.clone(), format!("n{i}")),
                &MetricsWindow { since_seconds: 60, step_seconds: 5 },
            );
        }
        assert_eq!(source.lock().watched.len(), MAX_WATCHED);
    }

    #[test]
    fn exporter_samples_become_one_sample_per_gpu() {
        let text = "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",Hostname=\"n\",namespace=\"team-a\",pod=\"llama-0\"} 97\n\
                    DCGM_FI_DEV_FB_USED{gpu=\"0\",namespace=\"team-a\",pod=\"llama-0\"} 70000\n\
                    DCGM_FI_DEV_FB_FREE{gpu=\"0\",namespace=\"team-a\",pod=\"llama-0\"} 11920\n\
                    DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",Hostname=\"n\",namespace=\"\",pod=\"\"} 0\n\
                    DCGM_FI_DEV_FB_USED{gpu=\"1\"} 0\n\
                    DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",GPU_I_ID=\"1\"} 50\n";
        let samples = prometheus_text::parse(text, |_| true).unwrap();
        let (t, gpus) = gpu_samples(&samples, 42.5);
        assert_eq!(t, 42.5);
        assert_eq!(gpus.len(), 2, "a MIG instance is not a GPU: {gpus:?}");
        assert_eq!(
            gpus[0].1,
            GpuSample {
                t: 42.5,
                utilization: 97.0,
                used: 70000.0,
                free: Some(11920.0),
                pod: Some("team-a/llama-0".into())
            }
        );
        assert_eq!((gpus[1].1.pod.clone(), gpus[1].1.free), (None, None));
        // An exporter's timestamps win over the moment of the scrape.
        let samples = prometheus_text::parse("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 5 1700000000000", |_| true).unwrap();
        assert_eq!(gpu_samples(&samples, 42.5).0, 1_700_000_000.0);
    }
}

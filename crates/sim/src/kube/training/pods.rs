//! The pods of training jobs and model downloads as their controllers shape them: a
//! `HyperPodPyTorchJob`'s current epoch after its restarts ([`hyperpod_plan`]), a `RayJob`'s
//! head and workers, and a download Job's files and run time. `super::super::workload`
//! calls these while it derives pods; the training controller (`super`) builds on them.

use crate::base::stable_hash;
use crate::kube::pod::{DURATION_ANNOTATION, PodRun, PodView, Role};
use crate::timings;
use crate::world::{FaultEvent, KubeRec, Recovery, TrainingRec};
use serde_json::Value;

/// Simulated seconds of training per logged step.
pub const TRAINING_STEP_SECONDS: f64 = 10.0;

/// `apiVersion` and `kind` of HyperPod training jobs.
pub(crate) const HP_API: &str = "sagemaker.amazonaws.com/v1";
pub(crate) const HP_KIND: &str = "HyperPodPyTorchJob";
/// `apiVersion` and `kind` of KubeRay jobs.
pub(crate) const RAY_API: &str = "ray.io/v1";
pub(crate) const RAY_KIND: &str = "RayJob";
/// Annotations of a model download Job (set by `recipes::download`).
pub(crate) const DESTINATION_ANNOTATION: &str = "instantstart.io/destination";
/// Set on a download Job that writes into an FSx volume instead of the bucket.
pub(crate) const DESTINATION_VOLUME_ANNOTATION: &str = "instantstart.io/destination-volume";
const MODEL_ID_ANNOTATION: &str = "instantstart.io/model-id";

pub(crate) fn same_time(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

impl TrainingRec {
    pub(crate) fn current(&self, spec_at: f64) -> impl Iterator<Item = &FaultEvent> {
        self.faults.iter().filter(move |e| same_time(e.spec_at, spec_at))
    }
}

/// Where a HyperPod job is in its restarts, from its fault events.
#[derive(Debug, Clone, Default)]
pub(crate) struct HyperPodPlan {
    /// When the current pods were created (the spec change or the last full restart).
    pub epoch_start: f64,
    pub epoch: u32,
    pub resumed_step: u64,
    pub restarts: Vec<(f64, String)>,
    pub killed: Option<(f64, String)>,
}

pub(crate) fn hyperpod_plan(rec: &KubeRec) -> HyperPodPlan {
    let mut p = HyperPodPlan { epoch_start: rec.spec_changed_at, ..Default::default() };
    for e in rec.training.current(rec.spec_changed_at) {
        match e.recovery {
            Recovery::InPlace => p.restarts.push((e.at, e.reason.clone())),
            Recovery::FullRestart => {
                p.epoch_start = e.at;
                p.epoch += 1;
                p.resumed_step = e.step;
                p.restarts.clear();
            }
            Recovery::Fail => p.killed = Some((e.at, e.reason.clone())),
        }
    }
    p
}

/// Makes `p` (built with the job's full duration as `batch_run`) a pod of the current epoch of
/// HyperPod job `job`.
pub(crate) fn apply_hyperpod_plan(plan: &HyperPodPlan, job: &str, p: &mut PodView) {
    if plan.epoch > 0 && plan.epoch_start > p.start {
        p.start = plan.epoch_start;
        p.uid = crate::base::uuid_from(stable_hash(&[&p.uid, &plan.epoch.to_string()]), stable_hash(&[&p.name, job]));
    }
    let duration = p.batch_run.unwrap_or(timings::PYTORCHJOB_DEFAULT_RUN);
    let total_steps = (duration / TRAINING_STEP_SECONDS).floor() as u64;
    let remaining = (duration - plan.resumed_step as f64 * TRAINING_STEP_SECONDS).max(0.0);
    p.batch_run = Some(remaining + plan.restarts.len() as f64 * timings::PROCESS_RESTART);
    if let Some((_, why)) = &plan.killed {
        p.fails = Some(why.clone());
    }
    p.run = Some(PodRun::Training {
        job: job.to_string(),
        role: Role::Rank,
        resumed_step: plan.resumed_step,
        total_steps,
        offset: 0.0,
        restarts: plan.restarts.clone(),
        killed: plan.killed.clone(),
    });
}

/// Makes `p` a Ray node of RayJob `job`: it runs until the entrypoint (submitted
/// [`timings::RAY_JOB_SUBMIT`] after the start) has run the job's duration.
pub(crate) fn apply_ray(job: &str, role: Role, p: &mut PodView) {
    let duration = p.batch_run.unwrap_or(timings::PYTORCHJOB_DEFAULT_RUN);
    p.batch_run = Some(timings::RAY_JOB_SUBMIT + duration);
    p.run = Some(PodRun::Training {
        job: job.to_string(),
        role,
        resumed_step: 0,
        total_steps: (duration / TRAINING_STEP_SECONDS).floor() as u64,
        offset: timings::RAY_JOB_SUBMIT,
        restarts: Vec::new(),
        killed: None,
    });
}

/// The name of the RayCluster a RayJob creates.
pub(crate) fn ray_cluster_name(job: &str, uid: &str) -> String {
    let id: String = format!("{:x}", stable_hash(&[job, uid])).chars().filter(|c| c.is_ascii_lowercase()).collect();
    let id = format!("{id}bcdfg");
    format!("{}-raycluster-{}", job.chars().take(40).collect::<String>(), &id[..5])
}

// ---------------------------------------------------------------------------------------------
// Model downloads

/// Parameters (in billions) named in a repository name such as `Qwen3-0.6B` or `Llama-3.1-8B`.
pub(crate) fn parameter_billions(repo: &str) -> Option<f64> {
    let name = repo.rsplit('/').next().unwrap_or(repo);
    name.split(['-', '_']).find_map(|part| {
        let lower = part.to_ascii_lowercase();
        let number = lower.strip_suffix('b')?;
        let number = number.rsplit('x').next()?;
        number.parse::<f64>().ok().filter(|b| *b > 0.0 && *b < 5000.0)
    })
}

/// The files of a Hugging Face repository with plausible sizes (bf16 weights from the
/// parameter count in its name, sharded like the hub does above 5 GB).
pub(crate) fn repository_files(repo: &str, dataset: bool) -> Vec<(String, u64)> {
    let jitter = |what: &str, base: u64, spread: u64| base + stable_hash(&[repo, what]) % spread.max(1);
    let mut files = vec![
        (".gitattributes".to_string(), jitter("ga", 1_519, 200)),
        ("README.md".to_string(), jitter("readme", 3_000, 9_000)),
    ];
    if dataset {
        files.push(("data/train-00000-of-00001.parquet".into(), jitter("train", 20_000_000, 400_000_000)));
        files.push(("data/test-00000-of-00001.parquet".into(), jitter("test", 2_000_000, 40_000_000)));
        return files;
    }
    let params = parameter_billions(repo).unwrap_or(1.0) * 1e9;
    let weights = (params * 2.0) as u64 + jitter("weights", 0, 50_000_000);
    files.push(("config.json".into(), jitter("config", 650, 400)));
    files.push(("generation_config.json".into(), jitter("generation", 180, 120)));
    files.push(("tokenizer.json".into(), jitter("tokenizer", 7_000_000, 4_000_000)));
    files.push(("tokenizer_config.json".into(), jitter("tokenizer_config", 5_000, 6_000)));
    const SHARD: u64 = 4_900_000_000;
    if weights <= 5_000_000_000 {
        files.push(("model.safetensors".into(), weights));
    } else {
        let n = weights.div_ceil(SHARD);
        for i in 1..=n {
            let size = if i < n { SHARD } else { weights - SHARD * (n - 1) };
            files.push((format!("model-{i:05}-of-{n:05}.safetensors"), size));
        }
        files.push(("model.safetensors.index.json".into(), jitter("index", 20_000, 60_000)));
    }
    files
}

/// Simulated seconds a download of `bytes` takes (client install, then ~250 MB/s).
fn download_seconds(bytes: u64) -> f64 {
    timings::DOWNLOAD_SETUP + bytes as f64 / timings::DOWNLOAD_BYTES_PER_SECOND
}

/// Makes `p`, a pod of Job `job`, a model download if the Job is one.
pub(crate) fn apply_download(job: &Value, p: &mut PodView) {
    let annotations = job.pointer("/metadata/annotations");
    let (Some(dest), Some(repo)) = (
        annotations.and_then(|a| a.get(DESTINATION_ANNOTATION)).and_then(Value::as_str),
        annotations.and_then(|a| a.get(MODEL_ID_ANNOTATION)).and_then(Value::as_str),
    ) else {
        return;
    };
    let files = repository_files(repo, dest.starts_with("datasets/"));
    let timed = [job.pointer("/metadata/annotations"), job.pointer("/spec/template/metadata/annotations")]
        .into_iter()
        .flatten()
        .any(|a| a.get(DURATION_ANNOTATION).is_some());
    if !timed {
        p.batch_run = Some(download_seconds(files.iter().map(|(_, s)| s).sum()));
    }
    let container_path = p
        .spec
        .pointer("/containers/0/env")
        .and_then(Value::as_array)
        .and_then(|env| env.iter().find(|e| e.get("name").and_then(Value::as_str) == Some("DESTINATION")))
        .and_then(|e| e.get("value").and_then(Value::as_str))
        .unwrap_or(dest)
        .to_string();
    p.run = Some(PodRun::Download { repo: repo.to_string(), container_path, files });
}

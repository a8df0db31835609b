//! `HyperPodPyTorchJob` (`sagemaker.amazonaws.com/v1`): training under the HyperPod
//! training operator.
//!
//! Field names follow AWS's documentation and the pydantic models of
//! `aws/sagemaker-hyperpod-cli` (the CRD itself is not public): `spec.nprocPerNode` (a
//! string), `spec.replicaSpecs[{name, replicas, template}]`, `spec.runPolicy{cleanPodPolicy,
//! jobMaxRetryCount, restartPolicy{numRestartBeforeFullJobRestart, evalPeriodSeconds,
//! maxFullJobRestarts}, logMonitoringConfiguration[…], ttlSecondsAfterFinished}` and, for
//! elastic training, `spec.elasticPolicy` with `replicaSpecs[].maxReplicas`.
//!
//! Fault tolerance, as the mission asks:
//! * **process-level recovery** — every recipe starts under `hyperpodrun`, the HyperPod
//!   elastic agent (a torchrun-compatible launcher that talks to the operator on port
//!   [`AGENT_PORT`]), so the operator can restart training processes in place;
//! * **hang and slowness detection** — [`LogMonitor`] rules become
//!   `logMonitoringConfiguration`;
//! * **a visible recovery budget** — [`Resilience`] bounds in-place restarts per window, full
//!   job restarts and job retries; [`HyperPodJob::recovery_budget`] restates it for the UI.
//!
//! Elastic training is validated against the target instance group with
//! [`instantstart_core::spec::check_elastic_training`] (no Spot, no managed tiered
//! checkpointing).

use super::TrainingJob;
use crate::common::{LABEL_RECIPE, ManifestSet, argv_element, bucket_path, check, object_meta, set, standard_labels};
use instantstart_core::spec::{CapacitySpec, ManagedFeatures, TrainingResilience, check_elastic_training};
use instantstart_core::validate::{Findings, Validate, ValidationError};
use instantstart_core::workflow::features::{CHECKPOINT_NAMESPACE, CHECKPOINT_SERVICE_ACCOUNT};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `apiVersion` of HyperPod training jobs.
pub const API_VERSION: &str = "sagemaker.amazonaws.com/v1";
/// `kind` of HyperPod training jobs.
pub const KIND: &str = "HyperPodPyTorchJob";
/// Port of the HyperPod elastic agent's server in each training container.
pub const AGENT_PORT: u16 = 8080;
/// The launcher: the HyperPod elastic agent's torchrun-compatible CLI.
pub const LAUNCHER: &str = "hyperpodrun";
/// Name of the single replica spec.
pub const REPLICA_SPEC_NAME: &str = "workers";

/// A HyperPod training job: the common job, what it runs, and how it recovers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HyperPodJobParams {
    pub job: TrainingJob,
    pub recipe: HyperPodRecipe,
    #[serde(default)]
    pub resilience: Resilience,
    /// The job checkpoints through HyperPod's managed tiered checkpointing: its pods run as the
    /// feature's service account (`default/hyperpod-checkpointing`, whose IAM role may write
    /// checkpoints to the cluster's bucket and push CloudWatch metrics, as AWS's setup page
    /// asks of the training pod), so the job must run in namespace `default`, set no
    /// `service_account` of its own, and the cluster must have the feature on (a preflight
    /// check). Not with elastic training.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tiered_checkpointing: bool,
}

/// What the job runs. Paths are relative to the shared bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum HyperPodRecipe {
    /// A plain PyTorch script, launched like `torchrun <script> <args>`.
    Torch {
        script: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
    },
    /// LLaMA-Factory (`llamafactory.launcher`) with a YAML config and `key=value` overrides.
    LlamaFactory {
        config: String,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        overrides: BTreeMap<String, String>,
    },
    /// MS-Swift (`swift.cli.<command>`) with an optional `--config` file and extra arguments.
    MsSwift {
        #[serde(default)]
        command: SwiftCommand,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
    },
}

/// MS-Swift entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SwiftCommand {
    /// Supervised fine-tuning.
    #[default]
    Sft,
    /// Pre-training.
    Pt,
    /// Preference / RL training (DPO, GRPO, …).
    Rlhf,
}

impl SwiftCommand {
    fn module(self) -> &'static str {
        match self {
            SwiftCommand::Sft => "swift.cli.sft",
            SwiftCommand::Pt => "swift.cli.pt",
            SwiftCommand::Rlhf => "swift.cli.rlhf",
        }
    }
}

impl HyperPodRecipe {
    fn label(&self) -> &'static str {
        match self {
            HyperPodRecipe::Torch { .. } => "torch",
            HyperPodRecipe::LlamaFactory { .. } => "llama-factory",
            HyperPodRecipe::MsSwift { .. } => "ms-swift",
        }
    }
}

/// Which pods the operator deletes when the job ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum CleanPodPolicy {
    #[default]
    All,
    Running,
    None,
}

fn default_retries() -> u32 {
    5
}

/// Fault tolerance and its budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resilience {
    /// Times the whole job may be retried (`runPolicy.jobMaxRetryCount`).
    #[serde(default = "default_retries")]
    pub job_max_retry_count: u32,
    #[serde(default)]
    pub restart_policy: RestartBudget,
    /// Hang / slowness detection rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_monitors: Vec<LogMonitor>,
    #[serde(default)]
    pub clean_pod_policy: CleanPodPolicy,
    /// Elastic training: scale between replica counts as capacity comes and goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic: Option<ElasticPolicy>,
    /// Delete the finished job after this long (`runPolicy.ttlSecondsAfterFinished`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<u32>,
}

impl Default for Resilience {
    fn default() -> Self {
        Resilience {
            job_max_retry_count: default_retries(),
            restart_policy: RestartBudget::default(),
            log_monitors: Vec::new(),
            clean_pod_policy: CleanPodPolicy::All,
            elastic: None,
            ttl_seconds_after_finished: None,
        }
    }
}

fn default_restarts() -> u32 {
    3
}
fn default_window() -> u32 {
    21_600
}
fn default_full_restarts() -> u32 {
    1
}

/// In-place (process-level) restarts per evaluation window before the operator escalates to
/// a full job restart, and how many full restarts are allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartBudget {
    #[serde(default = "default_restarts")]
    pub restarts_before_full_job_restart: u32,
    #[serde(default = "default_window")]
    pub eval_period_seconds: u32,
    #[serde(default = "default_full_restarts")]
    pub max_full_job_restarts: u32,
}

impl Default for RestartBudget {
    fn default() -> Self {
        RestartBudget {
            restarts_before_full_job_restart: default_restarts(),
            eval_period_seconds: default_window(),
            max_full_job_restarts: default_full_restarts(),
        }
    }
}

/// One log-monitoring rule: a regex over the training log, and when the job counts as
/// hanging (no first match in time, or too long between matches) or slow (a value captured
/// by the pattern compared with a threshold).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogMonitor {
    pub name: String,
    /// Regex selecting the log lines the rule looks at; a capturing group extracts a metric.
    pub log_pattern: String,
    /// HANGING when the first match takes longer than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_start_cutoff_seconds: Option<u32>,
    /// HANGING when two matches are further apart than this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_recurring_frequency_seconds: Option<u32>,
    /// Regex of the line after which the rule stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_pattern: Option<String>,
    /// SLOW detection on the captured value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<LogMetric>,
}

/// Compare the value captured by a log-monitoring pattern (`LogMonitor`) with a threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogMetric {
    pub threshold: i64,
    pub operator: MetricOperator,
    /// Consecutive SLOW evaluations before the job counts as SLOW (operator default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation_data_points: Option<u32>,
}

/// `operator` of a log metric rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MetricOperator {
    Gt,
    Gteq,
    Lt,
    Lteq,
    Eq,
}

impl MetricOperator {
    fn as_str(self) -> &'static str {
        match self {
            MetricOperator::Gt => "gt",
            MetricOperator::Gteq => "gteq",
            MetricOperator::Lt => "lt",
            MetricOperator::Lteq => "lteq",
            MetricOperator::Eq => "eq",
        }
    }
}

/// Elastic scaling bounds (`spec.elasticPolicy`). Replica counts step from `min_replicas` by
/// `replica_increment_step`, or take one of `replica_discrete_values`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ElasticPolicy {
    pub min_replicas: u32,
    pub max_replicas: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_increment_step: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_discrete_values: Vec<u32>,
    /// Time a job gets to checkpoint and exit on a scaling event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graceful_shutdown_timeout_seconds: Option<u32>,
    /// Delay before a scale-up starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_timeout_seconds: Option<u32>,
    /// Wait for recovery before scaling down on faults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faulty_scale_down_timeout_seconds: Option<u32>,
}

/// Where the job will run, as far as the elastic-training exclusions care: the capacity type
/// of the target instance group and the cluster's managed features.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetCapacity {
    pub capacity: CapacitySpec,
    pub features: ManagedFeatures,
}

/// The recovery budget as the UI shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct RecoveryBudget {
    /// In-place process restarts allowed per window before a full job restart.
    pub process_restarts_per_window: u32,
    pub window_seconds: u32,
    /// Full job restarts allowed.
    pub full_job_restarts: u32,
    /// Whole-job retries allowed.
    pub job_retries: u32,
    /// Number of hang/slowness rules watching the logs.
    pub log_monitors: usize,
}

/// The built job.
#[derive(Debug, Clone, PartialEq)]
pub struct HyperPodJob {
    pub name: String,
    pub job: Value,
    pub recovery_budget: RecoveryBudget,
}

impl ManifestSet for HyperPodJob {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.job]
    }
}

/// Most log-monitoring rules per job, and most of any restart/retry count.
const MAX_MONITORS: usize = 20;
const MAX_BUDGET: u32 = 100;

fn config_file(path: &str) -> Result<(), String> {
    bucket_path(path)?;
    if [".yaml", ".yml", ".json"].iter().any(|e| path.ends_with(e)) {
        Ok(())
    } else {
        Err("must be a .yaml, .yml or .json file".into())
    }
}

fn override_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty() && key.len() <= 128 && key.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok { Ok(()) } else { Err("must be a config key: letters, digits, '_', '.', '-'".into()) }
}

/// Whether `pattern` has a capturing group (an unescaped `(` not followed by `?`, or a named
/// group `(?P<…>` / `(?<…>`).
fn has_capturing_group(pattern: &str) -> bool {
    let b = pattern.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 1,
            b'(' => {
                let rest = &pattern[i + 1..];
                let named = rest.starts_with("?P<")
                    || (rest.starts_with("?<") && !rest.starts_with("?<=") && !rest.starts_with("?<!"));
                if !rest.starts_with('?') || named {
                    return true;
                }
            }
            _ => {}
        }
        i += 1;
    }
    false
}

fn regex_text(f: &mut Findings, field: &str, pattern: &str) {
    if pattern.is_empty() || pattern.len() > 1024 || pattern.chars().any(char::is_control) {
        f.push(field, "must be a regular expression of 1-1024 characters without control characters");
    }
}

impl Validate for HyperPodRecipe {
    fn validate(&self, f: &mut Findings) {
        match self {
            HyperPodRecipe::Torch { script, args } => {
                check(f, "script", bucket_path(script));
                for (i, a) in args.iter().enumerate() {
                    check(f, &format!("args[{i}]"), argv_element(a));
                }
            }
            HyperPodRecipe::LlamaFactory { config, overrides } => {
                check(f, "config", config_file(config));
                for (k, v) in overrides {
                    f.at("overrides", |f| {
                        check(f, k, override_key(k));
                        check(f, k, argv_element(v));
                    });
                }
            }
            HyperPodRecipe::MsSwift { config, args, .. } => {
                if let Some(c) = config {
                    check(f, "config", config_file(c));
                }
                for (i, a) in args.iter().enumerate() {
                    check(f, &format!("args[{i}]"), argv_element(a));
                    if a == "--config" && config.is_some() {
                        f.push(&format!("args[{i}]"), "--config is set from the `config` field");
                    }
                }
            }
        }
    }
}

impl Validate for LogMonitor {
    fn validate(&self, f: &mut Findings) {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 63
            && self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !name_ok {
            f.push("name", "must be 1-63 letters, digits, '-' or '_'");
        }
        regex_text(f, "log_pattern", &self.log_pattern);
        if let Some(p) = &self.stop_pattern {
            regex_text(f, "stop_pattern", p);
        }
        if self.expected_start_cutoff_seconds == Some(0) {
            f.push("expected_start_cutoff_seconds", "must be positive");
        }
        if self.expected_recurring_frequency_seconds == Some(0) {
            f.push("expected_recurring_frequency_seconds", "must be positive");
        }
        if self.expected_start_cutoff_seconds.is_none()
            && self.expected_recurring_frequency_seconds.is_none()
            && self.metric.is_none()
        {
            f.push(
                "",
                "detects nothing: set expected_start_cutoff_seconds, expected_recurring_frequency_seconds or metric",
            );
        }
        if let Some(m) = &self.metric {
            if !has_capturing_group(&self.log_pattern) {
                f.push("log_pattern", "needs a capturing group to extract the metric value");
            }
            if m.evaluation_data_points == Some(0) {
                f.push("metric.evaluation_data_points", "must be positive");
            }
        }
    }
}

impl Resilience {
    fn validate_for(&self, f: &mut Findings, nodes: u32, target: &TargetCapacity) {
        if self.job_max_retry_count > MAX_BUDGET {
            f.push("job_max_retry_count", format!("must be at most {MAX_BUDGET}"));
        }
        f.at("restart_policy", |f| {
            let r = &self.restart_policy;
            if r.restarts_before_full_job_restart > MAX_BUDGET {
                f.push("restarts_before_full_job_restart", format!("must be at most {MAX_BUDGET}"));
            }
            if r.max_full_job_restarts > MAX_BUDGET {
                f.push("max_full_job_restarts", format!("must be at most {MAX_BUDGET}"));
            }
            if !(60..=604_800).contains(&r.eval_period_seconds) {
                f.push("eval_period_seconds", "must be between 60 and 604800 (one week)");
            }
        });
        if self.log_monitors.len() > MAX_MONITORS {
            f.push("log_monitors", format!("at most {MAX_MONITORS} rules"));
        }
        for (i, m) in self.log_monitors.iter().enumerate() {
            f.at_index("log_monitors", i, |f| {
                m.validate(f);
                if self.log_monitors[..i].iter().any(|o| o.name == m.name) {
                    f.push("name", "listed twice");
                }
            });
        }
        if let Some(e) = &self.elastic {
            f.at("elastic", |f| e.validate_for(f, nodes));
            let resilience = TrainingResilience { elastic: true, checkpointless: false };
            if let Err(err) = check_elastic_training(resilience, &target.capacity, &target.features) {
                f.extend(err);
            }
        }
    }
}

impl ElasticPolicy {
    fn validate_for(&self, f: &mut Findings, nodes: u32) {
        if self.min_replicas == 0 {
            f.push("min_replicas", "must be at least 1");
        }
        if self.min_replicas > self.max_replicas {
            f.push("max_replicas", "must be at least min_replicas");
        }
        if nodes < self.min_replicas || nodes > self.max_replicas {
            f.push("", format!("job.nodes ({nodes}) must lie between min_replicas and max_replicas"));
        }
        match (self.replica_increment_step, self.replica_discrete_values.is_empty()) {
            (Some(_), false) => {
                f.push("replica_discrete_values", "set either replica_increment_step or replica_discrete_values")
            }
            (Some(0), true) => f.push("replica_increment_step", "must be at least 1"),
            (Some(step), true) => {
                if nodes >= self.min_replicas && !(nodes - self.min_replicas).is_multiple_of(step) {
                    f.push("replica_increment_step", "job.nodes must be min_replicas plus a multiple of the step");
                }
            }
            (None, false) => {
                let v = &self.replica_discrete_values;
                if v.windows(2).any(|w| w[0] >= w[1]) {
                    f.push("replica_discrete_values", "must be strictly increasing");
                }
                if v.iter().any(|x| *x < self.min_replicas || *x > self.max_replicas) {
                    f.push("replica_discrete_values", "must lie between min_replicas and max_replicas");
                }
                if !v.contains(&nodes) {
                    f.push("replica_discrete_values", "must contain job.nodes (the starting size)");
                }
            }
            (None, true) => {}
        }
    }
}

impl HyperPodJobParams {
    /// Every finding, including the elastic-training exclusions for `target`.
    pub fn check_for(&self, target: &TargetCapacity) -> Result<(), ValidationError> {
        let mut f = Findings::new();
        f.at("job", |f| self.job.validate_common(f, &[]));
        if self.tiered_checkpointing {
            if self.job.namespace != CHECKPOINT_NAMESPACE {
                f.push(
                    "job.namespace",
                    format!(
                        "must be {CHECKPOINT_NAMESPACE} with tiered_checkpointing (the feature's service account \
                         {CHECKPOINT_SERVICE_ACCOUNT} lives there)"
                    ),
                );
            }
            if self.job.service_account.is_some() {
                f.push(
                    "job.service_account",
                    format!("must be unset with tiered_checkpointing (the pods run as {CHECKPOINT_SERVICE_ACCOUNT})"),
                );
            }
            if self.resilience.elastic.is_some() {
                f.push("tiered_checkpointing", "elastic training does not support managed tiered checkpointing");
            }
            if self.job.mlflow.is_some() {
                f.push(
                    "job.mlflow",
                    format!(
                        "cannot be combined with tiered_checkpointing yet: the pods run as {CHECKPOINT_SERVICE_ACCOUNT}, \
                         which may not write to MLflow"
                    ),
                );
            }
        }
        f.at("recipe", |f| self.recipe.validate(f));
        f.at("resilience", |f| self.resilience.validate_for(f, self.job.nodes, target));
        f.finish()
    }
}

impl Validate for HyperPodJobParams {
    /// Validation without knowledge of the target instance group (on-demand, no features).
    fn validate(&self, f: &mut Findings) {
        if let Err(e) = self.check_for(&TargetCapacity::default()) {
            f.extend(e);
        }
    }
}

fn launcher_argv(job: &TrainingJob, gpus: u32, elastic: Option<&ElasticPolicy>) -> Vec<String> {
    let nnodes = match elastic {
        Some(e) => format!("--nnodes={}:{}", e.min_replicas, e.max_replicas),
        None => format!("--nnodes={}", job.nodes),
    };
    vec![
        LAUNCHER.to_string(),
        nnodes,
        format!("--nproc-per-node={gpus}"),
        format!("--server-port={AGENT_PORT}"),
        "--tee=3".to_string(),
        "--log-dir=/tmp/hyperpod".to_string(),
    ]
}

fn recipe_argv(job: &TrainingJob, recipe: &HyperPodRecipe) -> Vec<String> {
    let path = |p: &str| job.storage.path_of(p);
    match recipe {
        HyperPodRecipe::Torch { script, args } => {
            let mut v = vec![path(script)];
            v.extend(args.iter().cloned());
            v
        }
        HyperPodRecipe::LlamaFactory { config, overrides } => {
            let mut v = vec!["-m".to_string(), "llamafactory.launcher".to_string(), path(config)];
            let mut o = overrides.clone();
            if job.mlflow.is_some() {
                o.entry("report_to".into()).or_insert_with(|| "mlflow".into());
                o.entry("run_name".into()).or_insert_with(|| job.name.clone());
            }
            v.extend(o.iter().map(|(k, val)| format!("{k}={val}")));
            v
        }
        HyperPodRecipe::MsSwift { command, config, args } => {
            let mut v = vec!["-m".to_string(), command.module().to_string()];
            if let Some(c) = config {
                v.extend(["--config".to_string(), path(c)]);
            }
            v.extend(args.iter().cloned());
            if job.mlflow.is_some() && !args.iter().any(|a| a == "--report_to" || a.starts_with("--report_to=")) {
                v.extend(["--report_to".to_string(), "mlflow".to_string()]);
            }
            v
        }
    }
}

fn log_monitor_json(m: &LogMonitor) -> Value {
    let mut v = json!({ "name": m.name, "logPattern": m.log_pattern });
    if let Some(s) = m.expected_start_cutoff_seconds {
        set(&mut v, "expectedStartCutOffInSeconds", json!(s));
    }
    if let Some(s) = m.expected_recurring_frequency_seconds {
        set(&mut v, "expectedRecurringFrequencyInSeconds", json!(s));
    }
    if let Some(p) = &m.stop_pattern {
        set(&mut v, "stopPattern", json!(p));
    }
    if let Some(metric) = &m.metric {
        set(&mut v, "metricThreshold", json!(metric.threshold));
        set(&mut v, "operator", json!(metric.operator.as_str()));
        if let Some(n) = metric.evaluation_data_points {
            set(&mut v, "metricEvaluationDataPoints", json!(n));
        }
    }
    v
}

fn elastic_json(e: &ElasticPolicy) -> Value {
    let mut v = json!({ "minReplicas": e.min_replicas, "maxReplicas": e.max_replicas });
    if let Some(s) = e.replica_increment_step {
        set(&mut v, "replicaIncrementStep", json!(s));
    }
    if !e.replica_discrete_values.is_empty() {
        set(&mut v, "replicaDiscreteValues", json!(e.replica_discrete_values));
    }
    if let Some(s) = e.graceful_shutdown_timeout_seconds {
        set(&mut v, "gracefulShutdownTimeoutInSeconds", json!(s));
    }
    if let Some(s) = e.scaling_timeout_seconds {
        set(&mut v, "scalingTimeoutInSeconds", json!(s));
    }
    if let Some(s) = e.faulty_scale_down_timeout_seconds {
        set(&mut v, "faultyScaleDownTimeoutInSeconds", json!(s));
    }
    v
}

/// Builds the `HyperPodPyTorchJob` after checking every rule, including the elastic-training
/// exclusions for `target`.
pub fn hyperpod_pytorch_job(p: &HyperPodJobParams, target: &TargetCapacity) -> Result<HyperPodJob, ValidationError> {
    p.check_for(target)?;
    let with_checkpointing;
    let job = if p.tiered_checkpointing {
        with_checkpointing =
            TrainingJob { service_account: Some(CHECKPOINT_SERVICE_ACCOUNT.to_string()), ..p.job.clone() };
        &with_checkpointing
    } else {
        &p.job
    };
    let r = &p.resilience;
    let hw = job.hardware();
    let mut labels = standard_labels(&job.name, "hyperpod-pytorch-job", "training");
    labels.insert(LABEL_RECIPE.into(), p.recipe.label().into());

    let mut command = launcher_argv(job, hw.gpus, r.elastic.as_ref());
    command.extend(recipe_argv(job, &p.recipe));
    let ports = json!([{ "name": "hyperpod-agent", "containerPort": AGENT_PORT }]);
    let template = job.pod_template("pytorch", command, job.base_env(hw), ports, &labels);

    let mut replica_spec = json!({ "name": REPLICA_SPEC_NAME, "replicas": job.nodes, "template": template });
    let mut run_policy = json!({
        "cleanPodPolicy": r.clean_pod_policy,
        "jobMaxRetryCount": r.job_max_retry_count,
        "restartPolicy": {
            "numRestartBeforeFullJobRestart": r.restart_policy.restarts_before_full_job_restart,
            "evalPeriodSeconds": r.restart_policy.eval_period_seconds,
            "maxFullJobRestarts": r.restart_policy.max_full_job_restarts,
        },
    });
    if !r.log_monitors.is_empty() {
        set(&mut run_policy, "logMonitoringConfiguration", r.log_monitors.iter().map(log_monitor_json).collect());
    }
    if let Some(ttl) = r.ttl_seconds_after_finished {
        set(&mut run_policy, "ttlSecondsAfterFinished", json!(ttl));
    }
    let mut spec = json!({ "nprocPerNode": hw.gpus.to_string(), "runPolicy": run_policy });
    if let Some(e) = &r.elastic {
        set(&mut replica_spec, "maxReplicas", json!(e.max_replicas));
        set(&mut spec, "elasticPolicy", elastic_json(e));
    }
    set(&mut spec, "replicaSpecs", json!([replica_spec]));

    let mut manifest = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": object_meta(&job.name, &job.namespace, &labels),
        "spec": spec,
    });
    job.queue_labels(&mut manifest);
    Ok(HyperPodJob {
        name: job.name.clone(),
        job: manifest,
        recovery_budget: RecoveryBudget {
            process_restarts_per_window: r.restart_policy.restarts_before_full_job_restart,
            window_seconds: r.restart_policy.eval_period_seconds,
            full_job_restarts: r.restart_policy.max_full_job_restarts,
            job_retries: r.job_max_retry_count,
            log_monitors: r.log_monitors.len(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capturing_groups() {
        assert!(has_capturing_group(r".*loss: (\d+\.\d+).*"));
        assert!(has_capturing_group(r"(?P<loss>\d+)"));
        assert!(!has_capturing_group(r".*loss:.*"));
        assert!(!has_capturing_group(r"(?:a|b)"));
        assert!(!has_capturing_group(r"\(literal\)"));
    }
}

//! KubeRay `RayJob` (`ray.io/v1`) for Ray-native training; the recipe is VERL RL.
//!
//! The Ray cluster is one head pod plus `nodes - 1` workers, all on the job's instance type
//! with every GPU (VERL uses the head's GPUs too), EFA, `/dev/shm` for the object store and the
//! shared bucket. The job shuts the cluster down when it finishes.
//!
//! **The entrypoint is a shell string.** `spec.entrypoint` is the only field of a RayJob that
//! carries the command, and it is interpreted by a shell twice: KubeRay splices it unquoted
//! into the submitter's `bash -c` command line, and Ray's job supervisor runs the resulting
//! words with `shell=True` on the head. No quoting survives both, so instead of quoting, every
//! word of the entrypoint is built from a fixed vocabulary plus values checked against
//! [`shell_inert`] — characters no shell gives a meaning to. Hydra overrides such as
//! `data.train_files=/s3/data/gsm8k/train.parquet` fit; values that do not (spaces, quotes,
//! `$`, …) belong in the VERL config file on the shared bucket (`config`).

use super::TrainingJob;
use crate::common::{LABEL_RECIPE, ManifestSet, bucket_path, check, object_meta, set, standard_labels};
use instantstart_core::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `apiVersion` of KubeRay jobs.
pub const API_VERSION: &str = "ray.io/v1";
/// `kind` of KubeRay jobs.
pub const KIND: &str = "RayJob";
/// Default VERL entry module (PPO/GRPO trainer).
pub const VERL_MAIN_PPO: &str = "verl.trainer.main_ppo";

fn default_module() -> String {
    VERL_MAIN_PPO.to_string()
}
fn default_ttl() -> u32 {
    3600
}

/// A Ray job: the common job, what it runs and the Ray cluster's lifecycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RayJobParams {
    pub job: TrainingJob,
    pub recipe: RayRecipe,
    /// Ray version of the image, e.g. `2.49.0`.
    pub ray_version: String,
    /// Delete the RayJob (and its cluster) this long after it finished.
    #[serde(default = "default_ttl")]
    pub ttl_seconds_after_finished: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<u32>,
    /// Retries of the whole job with a fresh cluster.
    #[serde(default)]
    pub backoff_limit: u32,
}

/// What the Ray job runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RayRecipe {
    /// VERL (`python3 -m <entry_module>`) with an optional Hydra config file on the bucket and
    /// Hydra `key=value` overrides. `trainer.nnodes` and `trainer.n_gpus_per_node` default to
    /// the job's shape; with MLflow, `trainer.logger`, `trainer.project_name` (the experiment)
    /// and `trainer.experiment_name` (the job name) are added unless overridden.
    Verl {
        #[serde(default = "default_module")]
        entry_module: String,
        /// Hydra config file (`.yaml`), passed as `--config-path`/`--config-name`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<String>,
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        overrides: BTreeMap<String, String>,
    },
}

/// Characters that mean nothing to a POSIX shell or bash in a word: ASCII letters, digits and
/// `_ - . / = : , + @ % [ ]` (`[`/`]` only glob against file names of the working directory).
pub fn shell_inert(word: &str) -> Result<(), String> {
    let ok = !word.is_empty()
        && word.len() <= 1024
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "_-./=:,+@%[]".contains(c));
    if ok {
        Ok(())
    } else {
        Err("must use only letters, digits and _ - . / = : , + @ % [ ] (the RayJob entrypoint passes through a \
             shell twice); put other values in the config file"
            .into())
    }
}

fn python_module(m: &str) -> Result<(), String> {
    let ident = |s: &str| {
        !s.is_empty()
            && !s.starts_with(|c: char| c.is_ascii_digit())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if m.len() <= 200 && m.split('.').all(ident) {
        Ok(())
    } else {
        Err("must be a Python module path such as verl.trainer.main_ppo".into())
    }
}

fn ray_version(v: &str) -> Result<(), String> {
    let parts: Vec<&str> = v.split('.').collect();
    let ok = parts.len() == 3
        && parts.iter().all(|p| !p.is_empty() && p.len() <= 4 && p.chars().all(|c| c.is_ascii_digit()));
    if ok { Ok(()) } else { Err("must be a Ray version such as 2.49.0".into()) }
}

fn hydra_key(k: &str) -> Result<(), String> {
    let body = k.trim_start_matches('+');
    let ok = k.len() - body.len() <= 2
        && !body.is_empty()
        && body.len() <= 200
        && body.chars().all(|c| c.is_ascii_alphanumeric() || "_.-/@".contains(c));
    if ok {
        Ok(())
    } else {
        Err("must be a Hydra key such as data.train_files (optionally prefixed by + or ++)".into())
    }
}

fn split_config(path: &str) -> (&str, &str) {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    (dir, file.strip_suffix(".yaml").or_else(|| file.strip_suffix(".yml")).unwrap_or(file))
}

impl RayJobParams {
    fn validate_recipe(&self, f: &mut Findings) {
        let RayRecipe::Verl { entry_module, config, overrides } = &self.recipe;
        check(f, "entry_module", python_module(entry_module));
        if let Some(c) = config {
            check(f, "config", bucket_path(c));
            if !(c.ends_with(".yaml") || c.ends_with(".yml")) {
                f.push("config", "must be a Hydra .yaml file");
            }
            check(f, "config", shell_inert(&self.job.storage.path_of(c)));
        }
        for (k, v) in overrides {
            f.at("overrides", |f| {
                check(f, k, hydra_key(k));
                check(f, k, shell_inert(v));
            });
        }
    }

    fn entrypoint_words(&self) -> Vec<String> {
        let RayRecipe::Verl { entry_module, config, overrides } = &self.recipe;
        let job = &self.job;
        let hw = job.hardware();
        let mut words = vec!["python3".to_string(), "-m".to_string(), entry_module.clone()];
        if let Some(c) = config {
            let (dir, name) = split_config(c);
            words.push(format!("--config-path={}", job.storage.path_of(dir)));
            words.push(format!("--config-name={name}"));
        }
        let mut o = overrides.clone();
        let mut default = |k: &str, v: String| {
            if !o.contains_key(k) && !o.contains_key(&format!("+{k}")) && !o.contains_key(&format!("++{k}")) {
                o.insert(k.to_string(), v);
            }
        };
        default("trainer.nnodes", job.nodes.to_string());
        default("trainer.n_gpus_per_node", hw.gpus.to_string());
        if let Some(m) = &job.mlflow {
            default("trainer.logger", "[console,mlflow]".into());
            default("trainer.project_name", m.experiment_or(&job.name).to_string());
            default("trainer.experiment_name", job.name.clone());
        }
        words.extend(o.iter().map(|(k, v)| format!("{k}={v}")));
        words
    }
}

impl Validate for RayJobParams {
    fn validate(&self, f: &mut Findings) {
        f.at("job", |f| {
            self.job.validate_common(f, &[]);
            if let Some(m) = &self.job.mlflow {
                check(f, "mlflow.experiment", shell_inert(m.experiment_or(&self.job.name)));
            }
        });
        f.at("recipe", |f| self.validate_recipe(f));
        check(f, "ray_version", ray_version(&self.ray_version));
        if self.ttl_seconds_after_finished < 60 {
            f.push("ttl_seconds_after_finished", "must be at least 60 so the result can be observed");
        }
        if self.active_deadline_seconds == Some(0) {
            f.push("active_deadline_seconds", "must be positive");
        }
        if self.backoff_limit > 10 {
            f.push("backoff_limit", "must be at most 10");
        }
    }
}

/// The built RayJob and its entrypoint as words.
#[derive(Debug, Clone, PartialEq)]
pub struct RayTrainingJob {
    pub name: String,
    /// The words of `spec.entrypoint`, each shell-inert.
    pub entrypoint: Vec<String>,
    pub job: Value,
}

impl ManifestSet for RayTrainingJob {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.job]
    }
}

/// Builds the RayJob.
pub fn ray_job(p: &RayJobParams) -> Result<RayTrainingJob, ValidationError> {
    p.check()?;
    let job = &p.job;
    let hw = job.hardware();
    let words = p.entrypoint_words();
    debug_assert!(words.iter().all(|w| shell_inert(w).is_ok()), "{words:?}");
    let mut labels = standard_labels(&job.name, "ray-job", "training");
    labels.insert(LABEL_RECIPE.into(), "verl".into());

    let head_ports = json!([
        { "name": "gcs-server", "containerPort": 6379 },
        { "name": "dashboard", "containerPort": 8265 },
        { "name": "client", "containerPort": 10001 },
    ]);
    let env = job.base_env(hw);
    let head = job.pod_template("ray-head", Vec::new(), env.clone(), head_ports, &labels);
    let mut cluster = json!({
        "rayVersion": p.ray_version,
        "headGroupSpec": { "rayStartParams": { "dashboard-host": "0.0.0.0" }, "template": head },
    });
    let workers = job.nodes - 1;
    if workers > 0 {
        let worker = job.pod_template("ray-worker", Vec::new(), env, json!([]), &labels);
        set(
            &mut cluster,
            "workerGroupSpecs",
            json!([{
                "groupName": "gpu-workers",
                "replicas": workers,
                "minReplicas": workers,
                "maxReplicas": workers,
                "rayStartParams": {},
                "template": worker,
            }]),
        );
    }
    let mut spec = json!({
        "entrypoint": words.join(" "),
        "submissionMode": "K8sJobMode",
        "shutdownAfterJobFinishes": true,
        "ttlSecondsAfterFinished": p.ttl_seconds_after_finished,
        "backoffLimit": p.backoff_limit,
        "rayClusterSpec": cluster,
    });
    if let Some(d) = p.active_deadline_seconds {
        set(&mut spec, "activeDeadlineSeconds", json!(d));
    }
    let mut manifest = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": object_meta(&job.name, &job.namespace, &labels),
        "spec": spec,
    });
    job.queue_labels(&mut manifest);
    Ok(RayTrainingJob { name: job.name.clone(), entrypoint: words, job: manifest })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every word that passes [`shell_inert`] comes back unchanged from two rounds of shell
    /// word splitting (what KubeRay's submitter and Ray's supervisor do).
    #[test]
    fn shell_inert_words_survive_two_shells() {
        let words = [
            "python3",
            "-m",
            "verl.trainer.main_ppo",
            "data.train_files=/s3/data/train.parquet",
            "trainer.logger=[console,mlflow]",
            "+actor.lr=1e-6",
            "x=a:b,c@d%e",
        ];
        for w in words {
            assert!(shell_inert(w).is_ok(), "{w}");
        }
        let line = words.join(" ");
        // Round one: bash -c '<...> -- <line>' hands the words to `ray job submit`, which joins
        // them with spaces; round two: the supervisor runs that string with a shell.
        let twice = format!("set -- {line}; eval \"printf '%s\\\\n' $*\"");
        let out = std::process::Command::new("sh").arg("-c").arg(&twice).current_dir(std::env::temp_dir()).output();
        if let Ok(out) = out {
            let got: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
            assert_eq!(got, words, "stderr: {}", String::from_utf8_lossy(&out.stderr));
        }
        for bad in
            ["a b", "x=$HOME", "x=`id`", "x;y", "x'y", "x\"y", "~/x", "x|y", "x&y", "x>y", "#x", "x{a,b}", "x*", ""]
        {
            assert!(shell_inert(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_paths_split_for_hydra() {
        assert_eq!(split_config("recipes/verl/grpo.yaml"), ("recipes/verl", "grpo"));
        assert_eq!(split_config("grpo.yml"), ("", "grpo"));
    }
}

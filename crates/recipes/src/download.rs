//! Model (or dataset) download from Hugging Face into the shared bucket, as a `batch/v1` Job.
//!
//! The Job name derives deterministically from what is downloaded (repository, type,
//! revision, destination, claim), so a retried or resumed step finds the Job it created
//! instead of starting a second one. The Hugging Face token is only ever referenced through a
//! Secret (`valueFrom.secretKeyRef`); it never appears in the manifest.
//!
//! The container runs a fixed Python program ([`DOWNLOAD_PROGRAM`]) that takes every input
//! from environment variables: it installs the pinned hub client (unless the image has one),
//! downloads into node-local scratch space, then copies file by file into the bucket mount
//! (Mountpoint writes sequentially and cannot rename, so the hub's in-place download cannot
//! target it directly). Files already present with the same size are kept, so a retry
//! resumes instead of starting over.

use crate::common::{
    ANNOTATION_DESTINATION, ANNOTATION_DESTINATION_VOLUME, ANNOTATION_MODEL_ID, ComputeResources, LABEL_INSTANCE_TYPE,
    ManifestSet, SecretKeyRef, check, container_resources, container_security, derived_name, env_value, image_ref,
    known_instance_type, no_token_without_service_account, quantity, set, standard_labels,
};
use crate::storage::{Access, SharedMount};
use instantstart_core::instance_types::SpecsFact;
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate, ValidationError};
use instantstart_core::workflow::fsx;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The program the download container runs (`python3 -c`). It is a constant: nothing from a
/// request is ever spliced into it; inputs arrive as environment variables.
pub const DOWNLOAD_PROGRAM: &str = r#"import os, shutil, subprocess, sys
req = os.environ.get("HF_HUB_REQUIREMENT", "")
if req:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--no-cache-dir",
                           "--target", "/scratch/pylib", req])
    sys.path.insert(0, "/scratch/pylib")
from huggingface_hub import snapshot_download
stage = "/scratch/download"
snapshot_download(repo_id=os.environ["HF_REPO_ID"], repo_type=os.environ["HF_REPO_TYPE"],
                  revision=os.environ.get("HF_REVISION") or None, local_dir=stage)
dest = os.environ["DESTINATION"]
copied = kept = 0
for root, dirs, files in os.walk(stage):
    dirs[:] = sorted(d for d in dirs if d != ".cache")
    target = os.path.normpath(os.path.join(dest, os.path.relpath(root, stage)))
    os.makedirs(target, exist_ok=True)
    for name in sorted(files):
        src, dst = os.path.join(root, name), os.path.join(target, name)
        if os.path.exists(dst) and os.path.getsize(dst) == os.path.getsize(src):
            kept += 1
            continue
        with open(src, "rb") as i, open(dst, "wb") as o:
            shutil.copyfileobj(i, o, 16 * 1024 * 1024)
        copied += 1
print(f"copied {copied} file(s), kept {kept} already present, into {dest}", flush=True)
"#;

/// Default hub client requirement installed at start (empty = the image already has one).
pub const DEFAULT_HUB_REQUIREMENT: &str = "huggingface_hub>=0.34,<1";
/// Default download image.
pub const DEFAULT_DOWNLOAD_IMAGE: &str = "python:3.12-slim";

/// What kind of Hugging Face repository to download.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HfRepoType {
    #[default]
    Model,
    Dataset,
}

impl HfRepoType {
    pub fn as_str(self) -> &'static str {
        match self {
            HfRepoType::Model => "model",
            HfRepoType::Dataset => "dataset",
        }
    }

    fn folder(self) -> &'static str {
        match self {
            HfRepoType::Model => "models",
            HfRepoType::Dataset => "datasets",
        }
    }
}

fn default_image() -> String {
    DEFAULT_DOWNLOAD_IMAGE.to_string()
}
fn default_requirement() -> String {
    DEFAULT_HUB_REQUIREMENT.to_string()
}
fn default_resources() -> ComputeResources {
    ComputeResources { cpu: Some("2".into()), memory: Some("8Gi".into()) }
}
fn default_scratch() -> String {
    "200Gi".to_string()
}
fn default_backoff() -> u32 {
    3
}
fn default_ttl() -> u32 {
    86_400
}

/// A Hugging Face repository to copy into the shared bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelDownloadParams {
    /// Namespace of the Job (where the shared claim and the token Secret live).
    pub namespace: String,
    /// Repository id, e.g. `Qwen/Qwen3-0.6B`.
    pub repo_id: String,
    #[serde(default)]
    pub repo_type: HfRepoType,
    /// Branch, tag or commit; the default branch when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// Path inside the bucket; `models/<repo_id>` (or `datasets/<repo_id>`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// Secret key holding a Hugging Face token, for gated or private repositories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token: Option<SecretKeyRef>,
    #[serde(default)]
    pub storage: SharedMount,
    /// Download into this FSx for Lustre volume of the cluster (mounted at `/fsx/<volume>`)
    /// instead of the shared bucket; `destination` is then a path inside the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    #[serde(default = "default_image")]
    pub image: String,
    /// pip requirement of the hub client to install at start; empty when the image has it.
    #[serde(default = "default_requirement")]
    pub hub_requirement: String,
    #[serde(default = "default_resources")]
    pub resources: ComputeResources,
    /// Size limit of the node-local staging area (must hold the whole repository).
    #[serde(default = "default_scratch")]
    pub scratch_size: String,
    /// Retries of a failed pod before the Job fails.
    #[serde(default = "default_backoff")]
    pub backoff_limit: u32,
    /// How long the finished Job (and so its status) stays visible.
    #[serde(default = "default_ttl")]
    pub ttl_seconds_after_finished: u32,
    /// Hard time limit; none by default (large checkpoints take long).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<u32>,
    /// Run on nodes of this instance type (e.g. to use their local NVMe and network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
}

/// Hugging Face repository id: `name` or `owner/name`, each part 1-96 letters, digits, `-`,
/// `_` or `.`, not starting or ending with `-` or `.`, without `--` or `..`.
pub fn hf_repo_id(id: &str) -> Result<(), String> {
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 96
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !p.starts_with(['-', '.'])
            && !p.ends_with(['-', '.'])
            && !p.contains("--")
            && !p.contains("..")
    };
    let parts: Vec<&str> = id.split('/').collect();
    if (1..=2).contains(&parts.len()) && parts.iter().all(|p| part_ok(p)) {
        Ok(())
    } else {
        Err("must be a Hugging Face repository id such as Qwen/Qwen3-0.6B".into())
    }
}

/// Git revision (branch, tag or commit): letters, digits, `-`, `_`, `.`, `/`; no `..`.
pub fn git_revision(rev: &str) -> Result<(), String> {
    let ok = !rev.is_empty()
        && rev.len() <= 255
        && rev.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && !rev.contains("..")
        && !rev.starts_with(['/', '-']);
    if ok { Ok(()) } else { Err("must be a branch, tag or commit id".into()) }
}

fn pip_requirement(req: &str) -> Result<(), String> {
    let ok = req.len() <= 200
        && req.chars().all(|c| c.is_ascii_alphanumeric() || "-_.[],<>=!~ ".contains(c))
        && !req.starts_with(['-', ' ']);
    if ok { Ok(()) } else { Err("must be a pip requirement such as huggingface_hub>=0.34,<1 (or empty)".into()) }
}

impl Validate for ModelDownloadParams {
    fn validate(&self, f: &mut Findings) {
        // The form only: a system namespace is refused unless the submitter is allowed it
        // (`instantstart_core::kube_access`), which the workload workflow checks.
        check(f, "namespace", names::dns1123_label(&self.namespace));
        check(f, "repo_id", hf_repo_id(&self.repo_id));
        if let Some(r) = &self.revision {
            check(f, "revision", git_revision(r));
        }
        if let Some(d) = &self.destination {
            check(f, "destination", crate::common::bucket_path(d));
        }
        if let Some(t) = &self.hf_token {
            f.at("hf_token", |f| t.validate(f));
        }
        f.at("storage", |f| self.storage.validate(f));
        if let Some(v) = &self.volume {
            check(f, "volume", crate::volumes::check_name(v));
            if fsx::mount_path(v) == self.storage.mount_path {
                f.push("volume", format!("its mount path {} is the shared bucket's", fsx::mount_path(v)));
            }
        }
        check(f, "image", image_ref(&self.image));
        check(f, "hub_requirement", pip_requirement(&self.hub_requirement));
        f.at("resources", |f| self.resources.validate(f));
        check(f, "scratch_size", quantity(&self.scratch_size));
        if self.backoff_limit > 20 {
            f.push("backoff_limit", "must be at most 20");
        }
        if self.ttl_seconds_after_finished < 60 {
            f.push("ttl_seconds_after_finished", "must be at least 60 so the result can be observed");
        }
        if self.active_deadline_seconds == Some(0) {
            f.push("active_deadline_seconds", "must be positive");
        }
        if let Some(it) = &self.instance_type {
            // Only a node selector: the type's specs do not matter.
            known_instance_type(f, "instance_type", it, &SpecsFact::NotRead);
        }
    }
}

impl ModelDownloadParams {
    /// The FSx volume the download writes into, mounted at its default path.
    pub fn target_volume(&self) -> Option<crate::volumes::VolumeMount> {
        self.volume.as_ref().map(|name| crate::volumes::VolumeMount {
            name: name.clone(),
            mount_path: None,
            read_only: false,
        })
    }

    /// The path (in the bucket, or in [`ModelDownloadParams::volume`]) the repository lands in.
    pub fn destination_path(&self) -> String {
        match &self.destination {
            Some(d) => d.trim_end_matches('/').to_string(),
            None => format!("{}/{}", self.repo_type.folder(), self.repo_id),
        }
    }

    /// The Job name: `download-<repo>-<hash>`, a DNS-1123 label derived from everything that
    /// makes the download distinct.
    pub fn job_name(&self) -> String {
        let dest = self.destination_path();
        derived_name(
            "download",
            &self.repo_id,
            &[
                self.repo_type.as_str(),
                &self.repo_id,
                self.revision.as_deref().unwrap_or(""),
                &dest,
                // The claim written to: the volume's when it downloads into one.
                &self.volume.as_deref().map_or_else(|| self.storage.claim_name.clone(), fsx::claim_name),
            ],
            63,
        )
    }
}

/// A download Job and where its result lands.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelDownload {
    /// Deterministic Job name; poll this Job for completion.
    pub job_name: String,
    /// Path inside the bucket.
    pub destination: String,
    /// The same place as pods see it (under the mount path).
    pub container_path: String,
    pub job: Value,
}

impl ManifestSet for ModelDownload {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.job]
    }
}

/// Builds the download Job.
pub fn model_download_job(p: &ModelDownloadParams) -> Result<ModelDownload, ValidationError> {
    p.check()?;
    let job_name = p.job_name();
    let destination = p.destination_path();
    let container_path = match p.target_volume() {
        Some(v) => crate::volumes::path_in(&v, &destination),
        None => p.storage.path_of(&destination),
    };
    let labels = standard_labels(&job_name, "hf-download", "model-download");

    let mut env = vec![
        env_value("HF_REPO_ID", &p.repo_id),
        env_value("HF_REPO_TYPE", p.repo_type.as_str()),
        env_value("DESTINATION", &container_path),
        env_value("HF_HUB_REQUIREMENT", &p.hub_requirement),
        env_value("HF_HOME", "/scratch/hf-home"),
        env_value("HF_HUB_DISABLE_TELEMETRY", "1"),
        env_value("PYTHONUNBUFFERED", "1"),
    ];
    if let Some(rev) = &p.revision {
        env.push(env_value("HF_REVISION", rev));
    }
    if let Some(token) = &p.hf_token {
        env.push(token.env("HF_TOKEN"));
    }

    let mut pod_spec = json!({
        "restartPolicy": "Never",
        "containers": [{
            "name": "download",
            "image": p.image,
            "command": ["python3", "-c", DOWNLOAD_PROGRAM],
            "env": env,
            "resources": container_resources(None, 0, &p.resources),
            "securityContext": container_security(),
            "volumeMounts": [{ "name": "scratch", "mountPath": "/scratch" }],
        }],
        "volumes": [{ "name": "scratch", "emptyDir": { "sizeLimit": p.scratch_size } }],
    });
    if let Some(it) = &p.instance_type {
        set(&mut pod_spec, "nodeSelector", json!({ LABEL_INSTANCE_TYPE: it }));
    }
    p.storage.mount_into(&mut pod_spec, Access::ReadWrite).expect("a freshly built pod spec has no shared volume yet");
    if let Some(v) = p.target_volume() {
        crate::volumes::mount_volumes(&mut pod_spec, &[v], Access::ReadWrite)
            .expect("the volume's name was validated and its mount path differs from the bucket's");
    }
    no_token_without_service_account(&mut pod_spec);
    let mut annotations = json!({ ANNOTATION_MODEL_ID: p.repo_id, ANNOTATION_DESTINATION: destination });
    if let Some(v) = &p.volume {
        annotations[ANNOTATION_DESTINATION_VOLUME] = json!(v);
    }

    let mut spec = json!({
        "backoffLimit": p.backoff_limit,
        "ttlSecondsAfterFinished": p.ttl_seconds_after_finished,
        "template": { "metadata": { "labels": labels }, "spec": pod_spec },
    });
    if let Some(d) = p.active_deadline_seconds {
        set(&mut spec, "activeDeadlineSeconds", json!(d));
    }
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": p.namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    });
    Ok(ModelDownload { job_name, destination, container_path, job })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ModelDownloadParams {
        serde_json::from_value(json!({ "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B" })).unwrap()
    }

    #[test]
    fn job_names_are_deterministic_and_distinct() {
        let a = params();
        assert_eq!(a.job_name(), params().job_name());
        assert!(a.job_name().starts_with("download-qwen-qwen3-0-6b-"));
        let mut b = params();
        b.revision = Some("main".into());
        assert_ne!(a.job_name(), b.job_name());
        let mut c = params();
        c.repo_type = HfRepoType::Dataset;
        assert_ne!(a.job_name(), c.job_name());
        assert_eq!(c.destination_path(), "datasets/Qwen/Qwen3-0.6B");
        let mut long = params();
        long.repo_id = format!("{}/{}", "o".repeat(96), "m".repeat(96));
        assert!(names::dns1123_label(&long.job_name()).is_ok());
    }

    #[test]
    fn the_token_is_a_secret_reference() {
        let mut p = params();
        p.hf_token = Some(SecretKeyRef { name: "hf".into(), key: "token".into() });
        let job = model_download_job(&p).unwrap().job;
        let env = &job["spec"]["template"]["spec"]["containers"][0]["env"];
        let token = env.as_array().unwrap().iter().find(|e| e["name"] == "HF_TOKEN").unwrap();
        assert_eq!(token["valueFrom"]["secretKeyRef"], json!({ "name": "hf", "key": "token" }));
        assert!(token.get("value").is_none());
    }

    /// Runs [`DOWNLOAD_PROGRAM`] with a stand-in `huggingface_hub` (when `python3` exists):
    /// files land under the destination, the hub's `.cache` stays behind, and a second run
    /// keeps what is already there.
    #[test]
    fn the_program_copies_and_resumes() {
        let Ok(out) = std::process::Command::new("python3").arg("--version").output() else { return };
        if !out.status.success() {
            return;
        }
        let root = std::env::temp_dir().join(format!("instantstart-dl-{}", std::process::id()));
        let fake = root.join("fake/huggingface_hub");
        std::fs::create_dir_all(&fake).unwrap();
        std::fs::write(
            fake.join("__init__.py"),
            "import os\n\
             def snapshot_download(repo_id, repo_type, revision, local_dir):\n\
             \x20   os.makedirs(os.path.join(local_dir, 'sub'), exist_ok=True)\n\
             \x20   os.makedirs(os.path.join(local_dir, '.cache', 'huggingface'), exist_ok=True)\n\
             \x20   open(os.path.join(local_dir, 'config.json'), 'w').write(repo_id)\n\
             \x20   open(os.path.join(local_dir, 'sub', 'w.bin'), 'wb').write(b'x' * 10)\n\
             \x20   open(os.path.join(local_dir, '.cache', 'huggingface', 'meta'), 'w').write('m')\n",
        )
        .unwrap();
        let dest = root.join("bucket/models/Qwen/Qwen3-0.6B");
        let run = || {
            let program = DOWNLOAD_PROGRAM.replace("/scratch", root.join("scratch").to_str().unwrap());
            let out = std::process::Command::new("python3")
                .args(["-c", &program])
                .env("PYTHONPATH", root.join("fake"))
                .env("HF_HUB_REQUIREMENT", "")
                .env("HF_REPO_ID", "Qwen/Qwen3-0.6B")
                .env("HF_REPO_TYPE", "model")
                .env("DESTINATION", &dest)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).to_string()
        };
        assert!(run().starts_with("copied 2 file(s), kept 0"));
        assert_eq!(std::fs::read_to_string(dest.join("config.json")).unwrap(), "Qwen/Qwen3-0.6B");
        assert_eq!(std::fs::read(dest.join("sub/w.bin")).unwrap().len(), 10);
        assert!(!dest.join(".cache").exists());
        assert!(run().starts_with("copied 0 file(s), kept 2"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn repo_ids() {
        for ok in ["gpt2", "Qwen/Qwen3-0.6B", "meta-llama/Llama-3.1-8B-Instruct", "a_b/c.d"] {
            assert!(hf_repo_id(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a/b/c", "-a/b", "a/b.", "a--b/c", "a/../b", "a b/c", "a/"] {
            assert!(hf_repo_id(bad).is_err(), "{bad}");
        }
    }
}

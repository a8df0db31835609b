//! Inference, over the mission's two routes.
//!
//! **Self-managed** — the serving container of the user's choice as a standard Deployment
//! ([`serving_deployment`]): vLLM, SGLang or a custom image and argv, GPUs as requests =
//! limits, required node affinity to the instance type, startup/readiness/liveness probes (so
//! Services never route to a pod still loading weights) and the shared bucket mounted
//! read-only. In front of it, one of three Service shapes ([`service`]): a cluster-internal
//! ClusterIP, an external NLB through the AWS Load Balancer Controller (internal by default;
//! internet-facing only with source ranges), or a **model pool** — warm workers carry
//! `instantstart.io/pool=<pool>`, the pool Service selects that label, and moving a worker is
//! relabelling its pod (the label is never part of the Deployment selector, so the ReplicaSet
//! keeps the pod). Multi-replica SGLang gets the SGLang router with cache-aware routing
//! ([`router`]) and KEDA autoscaling ([`autoscale`]).
//!
//! **Managed** — an `InferenceEndpointConfig` for the HyperPod inference operator
//! ([`managed`]), with the model read from S3 and tiered KV cache and intelligent routing
//! declared next to the endpoint.

pub mod autoscale;
pub mod endpoint;
pub mod managed;
pub mod router;
pub mod service;

use crate::common::{
    Accelerator, ComputeResources, EnvVarSpec, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_INSTANCE_TYPE, LABEL_POOL,
    ManifestSet, SecretKeyRef, accelerator_of, accelerator_tolerations, accelerators_per_node, argv_element,
    bucket_path, check, container_resources, container_security, dns1123_subdomain, env_value, image_ref,
    known_instance_type, no_token_without_service_account, object_meta, port, quantity, require_nvidia, set,
    shm_volume, standard_labels, validate_env,
};
use crate::storage::{Access, SharedMount};
use crate::volumes::{VolumeMount, check_volumes, mount_volumes};
use instantstart_core::instance_types::SpecsFact;
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Longest serving name (ReplicaSet and pod names append suffixes).
pub const SERVING_NAME_MAX: usize = 50;
/// Most replicas one Deployment may ask for.
pub const MAX_REPLICAS: u32 = 1000;

fn default_replicas() -> u32 {
    1
}
fn default_port() -> u16 {
    8000
}
fn default_shm() -> String {
    "16Gi".to_string()
}
fn default_startup() -> u32 {
    1800
}

/// A model server Deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServingParams {
    /// Deployment name, a DNS-1123 label of at most 50 characters.
    pub name: String,
    pub namespace: String,
    pub engine: Engine,
    /// Serving image (pinned tag or digest).
    pub image: String,
    pub instance_type: String,
    /// GPUs per replica; every GPU of the instance type when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// Port the server listens on.
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default)]
    pub storage: SharedMount,
    /// The cluster's FSx for Lustre volumes to mount (read-only) beside the shared bucket.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeMount>,
    /// Load the model from this volume (one of `volumes`) instead of the shared bucket: the
    /// engine's `model` is then a path inside the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_volume: Option<String>,
    /// Start the workers in this model pool (label `instantstart.io/pool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Hugging Face token, for engines that fetch tokenizer or config files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_token: Option<SecretKeyRef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVarSpec>,
    #[serde(default)]
    pub resources: ComputeResources,
    #[serde(default = "default_shm")]
    pub shm_size: String,
    /// How long a replica may take to load its model before it is restarted.
    #[serde(default = "default_startup")]
    pub startup_timeout_seconds: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// EC2's specs of `instance_type`, set by the renderer from the workflow's facts (never
    /// from the request).
    #[serde(skip)]
    #[schemars(skip)]
    pub specs: SpecsFact,
}

/// The serving engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Engine {
    /// vLLM's OpenAI-compatible server (`vllm serve`).
    Vllm(EngineArgs),
    /// SGLang (`python3 -m sglang.launch_server`).
    Sglang(EngineArgs),
    /// Any image: its argv and how to probe it.
    Custom {
        /// Container command (argv); the image entrypoint when empty.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        command: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        args: Vec<String>,
        /// HTTP health path; probes use a TCP connect when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        health_path: Option<String>,
    },
}

/// Arguments of the vLLM and SGLang engines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EngineArgs {
    /// Model directory inside the shared bucket, e.g. `models/Qwen/Qwen3-0.6B`.
    pub model: String,
    /// Model name clients send; the Deployment name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_model_name: Option<String>,
    /// Tensor-parallel degree; every GPU of the replica when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_parallel_size: Option<u32>,
    /// Maximum context length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
    /// Further engine arguments, each one argv element.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<String>,
}

impl Engine {
    fn label(&self) -> &'static str {
        match self {
            Engine::Vllm(_) => "vllm",
            Engine::Sglang(_) => "sglang",
            Engine::Custom { .. } => "custom",
        }
    }

    /// Flags the builder sets itself (refused in `extra_args`).
    fn reserved_flags(&self) -> &'static [&'static str] {
        match self {
            Engine::Vllm(_) => &[
                "--host",
                "--port",
                "--model",
                "--served-model-name",
                "--tensor-parallel-size",
                "-tp",
                "--max-model-len",
            ],
            Engine::Sglang(_) => {
                &["--host", "--port", "--model-path", "--served-model-name", "--tp-size", "--tp", "--context-length"]
            }
            Engine::Custom { .. } => &[],
        }
    }
}

/// A served-model name: 1-128 characters without whitespace or control characters.
fn served_name(n: &str) -> Result<(), String> {
    if n.is_empty() || n.len() > 128 || n.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err("must be 1-128 characters without whitespace".into())
    } else {
        Ok(())
    }
}

/// An HTTP path such as `/health`.
pub(crate) fn http_path(p: &str) -> Result<(), String> {
    if p.starts_with('/') && p.len() <= 256 && !p.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Ok(())
    } else {
        Err("must be an HTTP path starting with '/'".into())
    }
}

/// The accelerator resources of a validated replica.
#[derive(Debug, Clone, Copy)]
struct Replica {
    accel: Option<Accelerator>,
    gpus: u32,
}

impl ServingParams {
    /// Where the engine finds `model` in the pods: in [`ServingParams::model_volume`] when set,
    /// else in the shared bucket.
    pub fn model_path(&self, model: &str) -> String {
        match self.model_volume.as_ref().and_then(|n| self.volumes.iter().find(|v| &v.name == n)) {
            Some(v) => crate::volumes::path_in(v, model),
            None => self.storage.path_of(model),
        }
    }

    fn validate_replica(&self, f: &mut Findings) -> Option<Replica> {
        let specs = known_instance_type(f, "instance_type", &self.instance_type, &self.specs)?;
        let accel = accelerator_of(&specs.info);
        match &self.engine {
            Engine::Vllm(a) | Engine::Sglang(a) => {
                if !require_nvidia(f, "instance_type", &specs, self.engine.label()) {
                    return None;
                }
                let gpus = accelerators_per_node(f, "gpus", &specs, self.gpus, 1);
                if let Some(tp) = a.tensor_parallel_size
                    && (tp == 0 || tp > gpus || !gpus.is_multiple_of(tp))
                {
                    f.push("engine.tensor_parallel_size", format!("must divide the replica's {gpus} GPU(s)"));
                }
                Some(Replica { accel, gpus })
            }
            Engine::Custom { .. } => {
                let gpus = accelerators_per_node(f, "gpus", &specs, self.gpus, 0);
                Some(Replica { accel, gpus })
            }
        }
    }

    fn replica(&self) -> Replica {
        self.validate_replica(&mut Findings::new()).expect("replica of validated serving params")
    }

    /// Labels of the pods that never change (the Deployment selector).
    pub fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_INSTANCE.to_string(), self.name.clone()),
            (LABEL_COMPONENT.to_string(), "inference".to_string()),
        ])
    }
}

impl Validate for ServingParams {
    fn validate(&self, f: &mut Findings) {
        check(f, "name", names::dns1123_label(&self.name));
        if self.name.len() > SERVING_NAME_MAX {
            f.push("name", format!("must be at most {SERVING_NAME_MAX} characters"));
        }
        // The form only: a system namespace is refused unless the submitter is allowed it
        // (`instantstart_core::kube_access`), which the workload workflow checks.
        check(f, "namespace", names::dns1123_label(&self.namespace));
        check(f, "image", image_ref(&self.image));
        self.validate_replica(f);
        if self.replicas == 0 || self.replicas > MAX_REPLICAS {
            f.push("replicas", format!("must be between 1 and {MAX_REPLICAS}"));
        }
        check(f, "port", port(self.port));
        f.at("storage", |f| self.storage.validate(f));
        check_volumes(f, &self.volumes, &[&self.storage.mount_path, "/dev/shm"]);
        if let Some(v) = &self.model_volume {
            crate::volumes::named(f, "model_volume", &self.volumes, v);
        }
        if let Some(pool) = &self.pool {
            check(f, "pool", names::dns1123_label(pool));
        }
        if let Some(t) = &self.hf_token {
            f.at("hf_token", |f| t.validate(f));
        }
        validate_env(f, &self.env, &["HF_TOKEN", "HF_HUB_OFFLINE"]);
        f.at("resources", |f| self.resources.validate(f));
        check(f, "shm_size", quantity(&self.shm_size));
        if !(60..=7200).contains(&self.startup_timeout_seconds) {
            f.push("startup_timeout_seconds", "must be between 60 and 7200");
        }
        if let Some(sa) = &self.service_account {
            check(f, "service_account", dns1123_subdomain(sa));
        }
        f.at("engine", |f| match &self.engine {
            Engine::Vllm(a) | Engine::Sglang(a) => {
                check(f, "model", bucket_path(&a.model));
                if let Some(n) = &a.served_model_name {
                    check(f, "served_model_name", served_name(n));
                }
                if a.max_model_len == Some(0) {
                    f.push("max_model_len", "must be positive");
                }
                let reserved = self.engine.reserved_flags();
                for (i, arg) in a.extra_args.iter().enumerate() {
                    let field = format!("extra_args[{i}]");
                    check(f, &field, argv_element(arg));
                    let flag = arg.split('=').next().unwrap_or_default();
                    if reserved.contains(&flag) {
                        f.push(&field, format!("{flag} is set by InstantStart; use the dedicated field"));
                    }
                }
            }
            Engine::Custom { command, args, health_path } => {
                for (i, a) in command.iter().enumerate() {
                    check(f, &format!("command[{i}]"), argv_element(a));
                }
                for (i, a) in args.iter().enumerate() {
                    check(f, &format!("args[{i}]"), argv_element(a));
                }
                if let Some(p) = health_path {
                    check(f, "health_path", http_path(p));
                }
            }
        });
    }
}

/// The built Deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct ServingDeployment {
    pub name: String,
    /// Stable pod labels (what Services and routers select on besides the pool).
    pub selector: BTreeMap<String, String>,
    pub port: u16,
    pub deployment: Value,
}

impl ManifestSet for ServingDeployment {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.deployment]
    }
}

fn probe(action: &Value, period: u32, failures: u32, timeout: u32) -> Value {
    let mut p = action.clone();
    set(&mut p, "periodSeconds", json!(period));
    set(&mut p, "failureThreshold", json!(failures));
    set(&mut p, "timeoutSeconds", json!(timeout));
    p
}

fn engine_argv(p: &ServingParams, r: Replica) -> (Vec<String>, Vec<String>) {
    let port = p.port.to_string();
    match &p.engine {
        Engine::Vllm(a) => {
            let mut v = vec!["vllm".into(), "serve".into(), p.model_path(&a.model)];
            v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port]);
            v.extend(["--served-model-name".into(), a.served_model_name.clone().unwrap_or_else(|| p.name.clone())]);
            v.extend(["--tensor-parallel-size".into(), a.tensor_parallel_size.unwrap_or(r.gpus).to_string()]);
            if let Some(len) = a.max_model_len {
                v.extend(["--max-model-len".into(), len.to_string()]);
            }
            v.extend(a.extra_args.iter().cloned());
            (v, Vec::new())
        }
        Engine::Sglang(a) => {
            let mut v = vec!["python3".into(), "-m".into(), "sglang.launch_server".into()];
            v.extend(["--model-path".into(), p.model_path(&a.model)]);
            v.extend(["--host".into(), "0.0.0.0".into(), "--port".into(), port]);
            v.extend(["--served-model-name".into(), a.served_model_name.clone().unwrap_or_else(|| p.name.clone())]);
            v.extend(["--tp-size".into(), a.tensor_parallel_size.unwrap_or(r.gpus).to_string()]);
            if let Some(len) = a.max_model_len {
                v.extend(["--context-length".into(), len.to_string()]);
            }
            // SGLang serves `/metrics` (what Prometheus scrapes, see [`scrape_annotations`])
            // only when asked; vLLM always does.
            v.push("--enable-metrics".into());
            v.extend(a.extra_args.iter().cloned());
            (v, Vec::new())
        }
        Engine::Custom { command, args, .. } => (command.clone(), args.clone()),
    }
}

/// Builds the model server Deployment.
pub fn serving_deployment(p: &ServingParams) -> Result<ServingDeployment, ValidationError> {
    p.check()?;
    let r = p.replica();
    let selector = p.selector();
    let labels = standard_labels(&p.name, p.engine.label(), "inference");
    let mut pod_labels = labels.clone();
    if let Some(pool) = &p.pool {
        pod_labels.insert(LABEL_POOL.into(), pool.clone());
    }

    let health = match &p.engine {
        Engine::Custom { health_path: None, .. } => json!({ "tcpSocket": { "port": "http" } }),
        Engine::Custom { health_path: Some(path), .. } => json!({ "httpGet": { "path": path, "port": "http" } }),
        _ => json!({ "httpGet": { "path": "/health", "port": "http" } }),
    };
    let mut env = Vec::new();
    if !matches!(p.engine, Engine::Custom { .. }) {
        // Weights come from the bucket; never reach out to the hub for them.
        env.push(env_value("HF_HUB_OFFLINE", "1"));
    }
    if let Some(t) = &p.hf_token {
        env.push(t.env("HF_TOKEN"));
    }
    env.extend(p.env.iter().map(EnvVarSpec::to_env));

    let (command, args) = engine_argv(p, r);
    let (shm, shm_mount) = shm_volume(&p.shm_size);
    let mut container = json!({
        "name": "server",
        "image": p.image,
        "ports": [{ "name": "http", "containerPort": p.port, "protocol": "TCP" }],
        "env": env,
        "resources": container_resources(r.accel.map(|a| (a, r.gpus)), 0, &p.resources),
        "startupProbe": probe(&health, 10, p.startup_timeout_seconds.div_ceil(10), 5),
        "readinessProbe": probe(&health, 10, 3, 5),
        "livenessProbe": probe(&health, 20, 3, 10),
        "securityContext": container_security(),
        "volumeMounts": [shm_mount],
    });
    if !command.is_empty() {
        set(&mut container, "command", json!(command));
    }
    if !args.is_empty() {
        set(&mut container, "args", json!(args));
    }
    let mut pod_spec = json!({
        "containers": [container],
        "volumes": [shm],
        "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [{
            "matchExpressions": [{ "key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [p.instance_type] }],
        }] } } },
        "tolerations": accelerator_tolerations(r.accel.filter(|_| r.gpus > 0)),
    });
    if let Some(sa) = &p.service_account {
        set(&mut pod_spec, "serviceAccountName", json!(sa));
    }
    p.storage.mount_into(&mut pod_spec, Access::ReadOnly).expect("a freshly built pod spec has no shared volume yet");
    mount_volumes(&mut pod_spec, &p.volumes, Access::ReadOnly)
        .expect("volume names and mount paths were validated distinct");
    no_token_without_service_account(&mut pod_spec);

    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(&p.name, &p.namespace, &labels),
        "spec": {
            "replicas": p.replicas,
            "selector": { "matchLabels": selector },
            // GPU nodes rarely have room for a surge replica: replace one at a time.
            "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxSurge": 0, "maxUnavailable": 1 } },
            "template": { "metadata": { "labels": pod_labels }, "spec": pod_spec },
        },
    });
    let mut deployment = deployment;
    if !matches!(p.engine, Engine::Custom { .. }) {
        // vLLM and SGLang serve their metrics on the HTTP port.
        deployment["spec"]["template"]["metadata"]["annotations"] = scrape_annotations(p.port, "/metrics");
    }
    Ok(ServingDeployment { name: p.name.clone(), selector, port: p.port, deployment })
}

/// Pod annotations that the Prometheus chart's default `kubernetes-pods` scrape job keys on
/// (`prometheus.io/scrape`, `prometheus.io/port`, `prometheus.io/path`): the pods of model
/// servers and SGLang routers are scraped by the cluster's Prometheus (`chart:prometheus`), which
/// the default KEDA trigger of an autoscaled endpoint queries. The job labels the series with
/// the pod's `namespace` and `pod`, so queries select on those.
pub fn scrape_annotations(port: u16, path: &str) -> Value {
    json!({ "prometheus.io/scrape": "true", "prometheus.io/port": port.to_string(), "prometheus.io/path": path })
}

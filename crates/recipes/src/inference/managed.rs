//! The managed route: an `InferenceEndpointConfig`
//! (`inference.sagemaker.aws.amazon.com/v1`) that hands the endpoint's lifecycle to the
//! HyperPod inference operator. The model comes from S3 (the operator mounts it at
//! `/opt/ml/model` in the worker); the managed tiered KV cache (`kvCacheSpec`) and the
//! intelligent routing strategy (`intelligentRoutingSpec`) are declared next to the endpoint.
//!
//! Field names and constraints follow the operator's CRD (`v1`, the storage version).

use crate::common::{
    ComputeResources, EnvVarSpec, LABEL_ROUTE, ManifestSet, accelerator_of, accelerators_per_node, argv_element,
    bucket_path, check, container_resources, image_ref, known_instance_type, object_meta, port, require_nvidia, set,
    standard_labels, validate_env,
};
use instantstart_core::instance_types::SpecsFact;
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `apiVersion` of managed endpoints.
pub const API_VERSION: &str = "inference.sagemaker.aws.amazon.com/v1";
/// `kind` of managed endpoints.
pub const KIND: &str = "InferenceEndpointConfig";
/// Where the operator mounts the model in the worker.
pub const MODEL_MOUNT_PATH: &str = "/opt/ml/model";

fn default_replicas() -> u32 {
    1
}
fn default_invocation() -> String {
    "v1/chat/completions".to_string()
}
fn default_true() -> bool {
    true
}
fn default_worker_port() -> u16 {
    8080
}

/// A managed inference endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManagedEndpointParams {
    /// Object name, a DNS-1123 label.
    pub name: String,
    pub namespace: String,
    /// Model name for the operator; the object name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    pub instance_type: String,
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    pub model_source: S3ModelSource,
    pub worker: ManagedWorker,
    /// Path the operator invokes on the worker.
    #[serde(default = "default_invocation")]
    pub invocation_endpoint: String,
    /// Managed tiered KV cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<KvCache>,
    /// Intelligent routing across replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<RoutingStrategy>,
    /// Publish model metrics.
    #[serde(default = "default_true")]
    pub metrics: bool,
    /// EC2's specs of `instance_type`, set by the renderer from the workflow's facts (never
    /// from the request).
    #[serde(skip)]
    #[schemars(skip)]
    pub specs: SpecsFact,
}

/// The model's location in S3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct S3ModelSource {
    pub bucket: String,
    pub region: String,
    /// Key prefix of the model inside the bucket, e.g. `models/Qwen/Qwen3-0.6B`.
    pub model_location: String,
    /// Let the operator prefetch the weights before starting the worker.
    #[serde(default)]
    pub prefetch: bool,
}

/// The serving container the operator runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManagedWorker {
    pub image: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments; the model is at `/opt/ml/model`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Port the worker serves on.
    #[serde(default = "default_worker_port")]
    pub port: u16,
    /// GPUs per replica; every GPU of the instance type when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u32>,
    #[serde(default)]
    pub resources: ComputeResources,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVarSpec>,
}

/// Managed tiered KV cache: L1 in instance memory, L2 in managed tiered storage or Redis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KvCache {
    #[serde(default = "default_true")]
    pub l1: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2: Option<L2Cache>,
}

/// Second KV cache tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "backend", rename_all = "snake_case", deny_unknown_fields)]
pub enum L2Cache {
    /// HyperPod managed tiered storage.
    TieredStorage,
    /// A Redis endpoint.
    Redis { url: String },
}

/// Intelligent routing strategy of the operator's router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoutingStrategy {
    /// Route by longest shared prompt prefix.
    PrefixAware,
    /// Route by KV cache contents reported by workers (needs `kv_cache`).
    KvAware,
    /// Sticky sessions.
    Session,
    RoundRobin,
}

impl RoutingStrategy {
    fn as_str(self) -> &'static str {
        match self {
            RoutingStrategy::PrefixAware => "prefixaware",
            RoutingStrategy::KvAware => "kvaware",
            RoutingStrategy::Session => "session",
            RoutingStrategy::RoundRobin => "roundrobin",
        }
    }
}

impl Validate for ManagedEndpointParams {
    fn validate(&self, f: &mut Findings) {
        check(f, "name", names::dns1123_label(&self.name));
        // The form only: a system namespace is refused unless the submitter is allowed it
        // (`instantstart_core::kube_access`), which the workload workflow checks.
        check(f, "namespace", names::dns1123_label(&self.namespace));
        if let Some(m) = &self.model_name {
            check(f, "model_name", names::hyperpod_name(m));
        }
        if let Some(specs) = known_instance_type(f, "instance_type", &self.instance_type, &self.specs)
            && require_nvidia(f, "instance_type", &specs, "managed inference")
        {
            accelerators_per_node(f, "worker.gpus", &specs, self.worker.gpus, 1);
        }
        if self.replicas == 0 || self.replicas > super::MAX_REPLICAS {
            f.push("replicas", format!("must be between 1 and {}", super::MAX_REPLICAS));
        }
        f.at("model_source", |f| {
            check(f, "bucket", names::s3_bucket_name(&self.model_source.bucket));
            check(f, "region", names::region(&self.model_source.region));
            check(f, "model_location", bucket_path(&self.model_source.model_location));
        });
        f.at("worker", |f| {
            let w = &self.worker;
            check(f, "image", image_ref(&w.image));
            for (i, a) in w.command.iter().enumerate() {
                check(f, &format!("command[{i}]"), argv_element(a));
            }
            for (i, a) in w.args.iter().enumerate() {
                check(f, &format!("args[{i}]"), argv_element(a));
            }
            check(f, "port", port(w.port));
            f.at("resources", |f| w.resources.validate(f));
            validate_env(f, &w.env, &[]);
        });
        let ep = &self.invocation_endpoint;
        if ep.is_empty()
            || ep.starts_with('/')
            || ep.len() > 256
            || ep.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            f.push("invocation_endpoint", "must be a relative path such as v1/chat/completions");
        }
        if let Some(kv) = &self.kv_cache {
            f.at("kv_cache", |f| {
                if !kv.l1 && kv.l2.is_none() {
                    f.push("", "enable at least one tier (l1 or l2)");
                }
                if let Some(L2Cache::Redis { url }) = &kv.l2 {
                    let ok = (url.starts_with("redis://") || url.starts_with("rediss://"))
                        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
                    if !ok {
                        f.push("l2.url", "must be a redis:// or rediss:// URL");
                    }
                }
            });
        }
        if self.routing == Some(RoutingStrategy::KvAware) && self.kv_cache.is_none() {
            f.push("routing", "kv_aware routing needs the KV cache (kv_cache)");
        }
    }
}

/// The built endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEndpoint {
    pub name: String,
    pub endpoint: Value,
}

impl ManifestSet for ManagedEndpoint {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.endpoint]
    }
}

/// Builds the `InferenceEndpointConfig`.
pub fn managed_endpoint(p: &ManagedEndpointParams) -> Result<ManagedEndpoint, ValidationError> {
    p.check()?;
    let specs = known_instance_type(&mut Findings::new(), "instance_type", &p.instance_type, &p.specs)
        .expect("validated: a HyperPod instance type");
    let accel = accelerator_of(&specs.info).expect("validated: NVIDIA instance type");
    let gpus = accelerators_per_node(&mut Findings::new(), "worker.gpus", &specs, p.worker.gpus, 1);
    let w = &p.worker;
    let mut worker = json!({
        "image": w.image,
        "modelInvocationPort": { "containerPort": w.port, "name": "http" },
        "modelVolumeMount": { "name": "model-weights", "mountPath": MODEL_MOUNT_PATH },
        "resources": container_resources(Some((accel, gpus)), 0, &w.resources),
    });
    if !w.command.is_empty() {
        set(&mut worker, "command", json!(w.command));
    }
    if !w.args.is_empty() {
        set(&mut worker, "args", json!(w.args));
    }
    if !w.env.is_empty() {
        set(&mut worker, "environmentVariables", w.env.iter().map(EnvVarSpec::to_env).collect());
    }
    let mut spec = json!({
        "modelName": p.model_name.clone().unwrap_or_else(|| p.name.clone()),
        "instanceType": p.instance_type,
        "replicas": p.replicas,
        "invocationEndpoint": p.invocation_endpoint,
        "modelSourceConfig": {
            "modelSourceType": "s3",
            "s3Storage": { "bucketName": p.model_source.bucket, "region": p.model_source.region },
            "modelLocation": p.model_source.model_location,
            "prefetchEnabled": p.model_source.prefetch,
        },
        "worker": worker,
        "metrics": { "enabled": p.metrics },
    });
    if let Some(kv) = &p.kv_cache {
        let mut k = json!({ "enableL1Cache": kv.l1, "enableL2Cache": kv.l2.is_some() });
        match &kv.l2 {
            Some(L2Cache::TieredStorage) => set(&mut k, "l2CacheSpec", json!({ "l2CacheBackend": "tieredstorage" })),
            Some(L2Cache::Redis { url }) => {
                set(&mut k, "l2CacheSpec", json!({ "l2CacheBackend": "redis", "l2CacheLocalUrl": url }))
            }
            None => {}
        }
        set(&mut spec, "kvCacheSpec", k);
    }
    if let Some(r) = p.routing {
        set(&mut spec, "intelligentRoutingSpec", json!({ "enabled": true, "routingStrategy": r.as_str() }));
    }
    let mut labels = standard_labels(&p.name, "inference-endpoint-config", "inference");
    labels.insert(LABEL_ROUTE.into(), "managed".into());
    let endpoint = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": object_meta(&p.name, &p.namespace, &labels),
        "spec": spec,
    });
    Ok(ManagedEndpoint { name: p.name.clone(), endpoint })
}

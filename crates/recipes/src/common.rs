//! Building blocks shared by every builder: the labels InstantStart puts on what it owns,
//! object metadata, deterministic names, value rules (images, quantities, paths, argv
//! elements, environment variables) and the accelerator/EFA resources of an instance type.
//!
//! Rules here follow the convention of `instantstart_core::names`: a checker returns
//! `Err(rule)` with the rule as a sentence fragment, ready to become a finding.

use instantstart_core::instance_types::{
    BOTOCORE_VERSION, InstanceTypeInfo, SpecsFact, is_accelerated_family, is_cluster_instance_type,
};
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The labels and annotations InstantStart owns, spelled once in core (see
/// [`instantstart_core::labels`]).
pub use instantstart_core::labels::{
    ANNOTATION_DESTINATION, ANNOTATION_DESTINATION_VOLUME, ANNOTATION_MODEL_ID, LABEL_BUCKET, LABEL_COMPONENT,
    LABEL_INSTANCE, LABEL_MANAGED_BY, LABEL_NAME, LABEL_POOL, LABEL_RECIPE, LABEL_ROUTE, LABEL_SERVICE_SHAPE,
    MANAGED_BY,
};
/// Node label holding the instance type (`ml.p5.48xlarge` on HyperPod nodes).
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Extended resource of NVIDIA GPUs.
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
/// Extended resource of AWS Neuron devices (Trainium).
pub const RESOURCE_NEURON: &str = "aws.amazon.com/neuron";
/// Extended resource of EFA interfaces.
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";

/// A set of Kubernetes objects produced by one builder, in the order they should be applied
/// (dependencies first: service accounts before roles before workloads).
pub trait ManifestSet {
    fn objects(&self) -> Vec<&Value>;
}

/// The standard labels of an object InstantStart owns.
pub(crate) fn standard_labels(instance: &str, name: &str, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (LABEL_NAME.to_string(), name.to_string()),
        (LABEL_INSTANCE.to_string(), instance.to_string()),
        (LABEL_COMPONENT.to_string(), component.to_string()),
    ])
}

/// `metadata` of a namespaced object.
pub(crate) fn object_meta(name: &str, namespace: &str, labels: &BTreeMap<String, String>) -> Value {
    json!({ "name": name, "namespace": namespace, "labels": labels })
}

/// Inserts `key: value` into the JSON object `obj` (which the builders always construct as
/// an object). Used for optional fields, so absent options leave no `null` behind.
pub(crate) fn set(obj: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = obj {
        map.insert(key.to_string(), value);
    }
}

/// First `len` hex digits of SHA-256 over `parts` (separated by NUL, so `("a","bc")` and
/// `("ab","c")` differ).
pub(crate) fn short_hash(parts: &[&str], len: usize) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    hex[..len].to_string()
}

/// A DNS-1123 label `<prefix>-<readable part of raw>-<hash8>` of at most `max` characters,
/// deterministic in `hash_parts`. The readable part keeps lowercase letters and digits of
/// `raw`, turning every other run of characters into one `-`, and is truncated to fit.
pub(crate) fn derived_name(prefix: &str, raw: &str, hash_parts: &[&str], max: usize) -> String {
    let mut slug = String::new();
    for c in raw.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let hash = short_hash(hash_parts, 8);
    let room = max.saturating_sub(prefix.len() + hash.len() + 2);
    let slug: String = slug.chars().take(room).collect();
    let slug = slug.trim_matches('-');
    if slug.is_empty() { format!("{prefix}-{hash}") } else { format!("{prefix}-{slug}-{hash}") }
}

/// Records `rule` at `field` when `check` failed.
pub(crate) fn check(f: &mut Findings, field: &str, check: Result<(), String>) {
    if let Err(rule) = check {
        f.push(field, rule);
    }
}

/// Kubernetes DNS-1123 subdomain (core's rule, [`names::dns1123_subdomain`]).
pub use instantstart_core::names::dns1123_subdomain;

/// A container image reference that names its version: `[registry/]repository:tag` or
/// `…@sha256:<digest>`. Untagged and `:latest` references are refused so that a redeploy
/// runs the same software.
pub fn image_ref(image: &str) -> Result<(), String> {
    if image.is_empty() || image.len() > 512 {
        return Err("must be 1-512 characters long".into());
    }
    if image.chars().any(|c| c.is_whitespace() || c.is_control()) || image.starts_with('-') {
        return Err("must be an image reference without whitespace, e.g. vllm/vllm-openai:v0.10.1".into());
    }
    if let Some((_, digest)) = image.split_once('@') {
        let ok =
            digest.strip_prefix("sha256:").is_some_and(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()));
        return if ok { Ok(()) } else { Err("digest must be sha256:<64 hex digits>".into()) };
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None => Err("must pin a tag or digest (e.g. repo:v1.2.3 or repo@sha256:…); untagged images float".into()),
        Some((_, "latest")) => Err("must pin a version; ':latest' floats between deployments".into()),
        Some((repo, tag)) => {
            let tag_ok = !tag.is_empty()
                && tag.len() <= 128
                && tag.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                && !tag.starts_with(['.', '-']);
            if repo.is_empty() || !tag_ok {
                Err("tag must be 1-128 letters, digits, '_', '.' or '-'".into())
            } else {
                Ok(())
            }
        }
    }
}

/// A Kubernetes resource quantity such as `500m`, `8`, `64Gi` or `1.5`.
pub fn quantity(q: &str) -> Result<(), String> {
    let rule = || "must be a Kubernetes quantity such as 500m, 4, 16Gi".to_string();
    let suffixes = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E", ""];
    let suffix = suffixes.iter().find(|s| q.ends_with(*s)).copied().unwrap_or("");
    let number = &q[..q.len() - suffix.len()];
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if number.is_empty() || (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err(rule());
    }
    Ok(())
}

/// A path inside the shared bucket, relative to its root (and so to the mount path), such as
/// `models/Qwen/Qwen3-0.6B`: no leading `/`, no empty, `.` or `..` segments, no control
/// characters.
pub fn bucket_path(path: &str) -> Result<(), String> {
    if path.is_empty() || path.len() > 1024 {
        return Err("must be 1-1024 characters long".into());
    }
    if path.starts_with('/') {
        return Err("must be relative to the shared bucket (no leading '/')".into());
    }
    if path.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    if path.trim_end_matches('/').split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err("must not contain empty, '.' or '..' segments".into());
    }
    Ok(())
}

/// One element of a container's argv: any text without NUL or other control characters
/// (it is passed to `exec` as is; no shell ever sees it).
pub fn argv_element(arg: &str) -> Result<(), String> {
    if arg.len() > 4096 {
        return Err("must be at most 4096 characters long".into());
    }
    if arg.chars().any(|c| c.is_control() && c != '\t') {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

/// Environment variable name as Kubernetes accepts it: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
pub fn env_var_name(name: &str) -> Result<(), String> {
    let first_ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'));
    let rest_ok = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if name.is_empty() || name.len() > 256 || !first_ok || !rest_ok {
        return Err("must be letters, digits, '_', '-' or '.', not starting with a digit".into());
    }
    Ok(())
}

/// A TCP port a container listens on or a Service exposes.
pub fn port(p: u16) -> Result<(), String> {
    if p == 0 { Err("must be between 1 and 65535".into()) } else { Ok(()) }
}

/// An absolute, normalised path inside a container, such as `/s3`.
pub fn container_path(path: &str) -> Result<(), String> {
    if !path.starts_with('/') || path == "/" || path.len() > 1024 {
        return Err("must be an absolute path other than '/', e.g. /s3".into());
    }
    if path.chars().any(|c| c.is_control() || c == ':') {
        return Err("must not contain ':' or control characters".into());
    }
    if path[1..].split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err("must be normalised (no trailing '/', no empty, '.' or '..' segments)".into());
    }
    Ok(())
}

/// A key of a Secret or ConfigMap: `[-._a-zA-Z0-9]+`, at most 253 characters.
pub fn config_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if ok { Ok(()) } else { Err("must be 1-253 letters, digits, '-', '_' or '.'".into()) }
}

/// A key inside a Kubernetes Secret. The value never appears in a manifest: pods read it
/// through `valueFrom.secretKeyRef`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretKeyRef {
    /// Secret name in the workload's namespace.
    pub name: String,
    /// Key inside the Secret.
    pub key: String,
}

impl Validate for SecretKeyRef {
    fn validate(&self, f: &mut Findings) {
        check(f, "name", dns1123_subdomain(&self.name));
        check(f, "key", config_key(&self.key));
    }
}

impl SecretKeyRef {
    pub(crate) fn env(&self, var: &str) -> Value {
        json!({ "name": var, "valueFrom": { "secretKeyRef": { "name": self.name, "key": self.key } } })
    }
}

/// An extra environment variable for a workload container: a literal `value` or a `secret`
/// reference (exactly one). Secrets belong in `secret`, never in `value`: literal values are
/// stored in the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnvVarSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<SecretKeyRef>,
}

/// Whether an environment variable name looks like it carries a credential: a `_`-separated
/// word TOKEN, SECRET, PASSWORD, PASSWD, APIKEY or CREDENTIALS, or API/ACCESS/PRIVATE followed
/// by KEY (`HF_TOKEN`, `WANDB_API_KEY`; not `TOKENIZERS_PARALLELISM`).
pub(crate) fn credential_like(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper.split(['_', '-', '.']).collect();
    words.iter().any(|w| {
        matches!(
            *w,
            "TOKEN"
                | "SECRET"
                | "PASSWORD"
                | "PASSWD"
                | "PASS"
                | "PWD"
                | "PASSPHRASE"
                | "APIKEY"
                | "CREDENTIAL"
                | "CREDENTIALS"
                | "AUTH"
                | "AUTHORIZATION"
                | "PAT"
                | "COOKIE"
        )
    }) || words.windows(2).any(|p| matches!(p[0], "API" | "ACCESS" | "PRIVATE") && p[1] == "KEY")
        // `OPENAI_KEY`, `WANDB_KEY`: a key named after its service.
        || (words.len() > 1 && words.last() == Some(&"KEY"))
}

/// Whether `value` carries a URL with a password in it (`scheme://user:password@host`, e.g. a
/// `DATABASE_URL`): a credential whatever the variable is called.
pub(crate) fn url_with_password(value: &str) -> bool {
    value.split("://").skip(1).any(|rest| {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| userinfo.split_once(':').is_some_and(|(_, p)| !p.is_empty()))
    })
}

impl Validate for EnvVarSpec {
    fn validate(&self, f: &mut Findings) {
        check(f, "name", env_var_name(&self.name));
        match (&self.value, &self.secret) {
            (Some(_), Some(_)) | (None, None) => f.push("", "set exactly one of value and secret"),
            (Some(_), None) if credential_like(&self.name) => {
                f.push("value", "looks like a credential: reference a Secret with `secret` instead of a literal value")
            }
            (Some(v), None) if url_with_password(v) => f.push(
                "value",
                "is a URL with a password in it: reference a Secret with `secret` instead of a literal value",
            ),
            (Some(v), None) if v.len() > 32 * 1024 => f.push("value", "must be at most 32 KiB"),
            (_, Some(s)) => f.at("secret", |f| s.validate(f)),
            _ => {}
        }
    }
}

impl EnvVarSpec {
    pub(crate) fn to_env(&self) -> Value {
        match (&self.value, &self.secret) {
            (_, Some(s)) => s.env(&self.name),
            (v, None) => json!({ "name": self.name, "value": v.clone().unwrap_or_default() }),
        }
    }
}

/// Validates a list of extra environment variables: each entry, no duplicates, and none of
/// the names the builder sets itself (`reserved`).
pub(crate) fn validate_env(f: &mut Findings, env: &[EnvVarSpec], reserved: &[&str]) {
    for (i, e) in env.iter().enumerate() {
        f.at_index("env", i, |f| {
            e.validate(f);
            if reserved.contains(&e.name.as_str()) {
                f.push("name", "is set by InstantStart for this workload; use the dedicated field");
            }
            if env[..i].iter().any(|o| o.name == e.name) {
                f.push("name", "listed twice");
            }
        });
    }
}

/// Literal `name: value` environment variable.
pub(crate) fn env_value(name: &str, value: impl Into<String>) -> Value {
    json!({ "name": name, "value": value.into() })
}

/// CPU and memory requests of a container; limits are set equal for memory (no overcommit of
/// memory on GPU nodes) and left open for CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComputeResources {
    /// CPU request, e.g. `16` or `500m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory request and limit, e.g. `128Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

impl Validate for ComputeResources {
    fn validate(&self, f: &mut Findings) {
        if let Some(c) = &self.cpu {
            check(f, "cpu", quantity(c));
        }
        if let Some(m) = &self.memory {
            check(f, "memory", quantity(m));
        }
    }
}

/// The accelerator of an instance type as a Kubernetes extended resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accelerator {
    pub resource: &'static str,
    pub per_node: u32,
}

pub(crate) fn accelerator_of(info: &InstanceTypeInfo) -> Option<Accelerator> {
    if info.accelerators == 0 {
        return None;
    }
    let resource = if info.is_nvidia() { RESOURCE_NVIDIA_GPU } else { RESOURCE_NEURON };
    Some(Accelerator { resource, per_node: info.accelerators })
}

/// How a recipe knows an instance type's specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpecsBasis {
    /// EC2 described the type: every check runs.
    Described,
    /// Not read yet (the workflow's first, offline rendering, which it renders again once the
    /// specs are read): nothing is checked and the counts asked for are taken as they are.
    NotRead,
    /// EC2 does not describe the type: what needs a count must be given explicitly.
    Unknown,
}

/// An instance type's specs as a recipe renders with them: EC2's, or (not read, unknown)
/// what its family implies — one accelerator of the family's kind, no EFA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TypeSpecs {
    pub info: InstanceTypeInfo,
    pub basis: SpecsBasis,
}

fn by_family(instance_type: &str) -> InstanceTypeInfo {
    let family = instantstart_core::instance_types::ec2_name(instance_type);
    let accelerator = if !is_accelerated_family(instance_type) {
        "none"
    } else if family.starts_with("trn") {
        "aws-trainium"
    } else if family.starts_with("inf") {
        "aws-inferentia"
    } else {
        "nvidia-gpu"
    };
    InstanceTypeInfo {
        name: instance_type.to_string(),
        vcpus: 0,
        memory_gib: 0,
        accelerators: u32::from(accelerator != "none"),
        accelerator: accelerator.to_string(),
        efa_interfaces: 0,
        efa_only_supported: false,
    }
}

/// Checks that `instance_type` is a HyperPod type (SageMaker's `ClusterInstanceType`) and
/// returns the specs to render with, recording why it cannot be used.
pub(crate) fn known_instance_type(
    f: &mut Findings,
    field: &str,
    instance_type: &str,
    fact: &SpecsFact,
) -> Option<TypeSpecs> {
    if let Err(rule) = names::instance_type(instance_type) {
        f.push(field, rule);
        return None;
    }
    if !is_cluster_instance_type(instance_type) {
        f.push(
            field,
            format!(
                "is not a HyperPod instance type (SageMaker's ClusterInstanceType, botocore {BOTOCORE_VERSION}); \
                 GET /api/context/instance-types lists them"
            ),
        );
        return None;
    }
    Some(match fact {
        SpecsFact::Known(info) => TypeSpecs { info: info.clone(), basis: SpecsBasis::Described },
        SpecsFact::NotRead => TypeSpecs { info: by_family(instance_type), basis: SpecsBasis::NotRead },
        SpecsFact::Unknown => TypeSpecs { info: by_family(instance_type), basis: SpecsBasis::Unknown },
    })
}

/// A context in which EC2 described every type (the simulator's table), for tests.
#[cfg(test)]
pub(crate) fn described() -> instantstart_core::workload::WorkloadContext {
    instantstart_core::workload::WorkloadContext {
        instance_specs: Some(instantstart_sim::ec2_specs::all().cloned().collect()),
        ..Default::default()
    }
}

/// Requires an NVIDIA GPU type (the recipes' images and launchers are CUDA builds).
pub(crate) fn require_nvidia(f: &mut Findings, field: &str, specs: &TypeSpecs, what: &str) -> bool {
    let info = &specs.info;
    if info.is_nvidia() {
        true
    } else {
        f.push(field, format!("{what} needs an NVIDIA GPU instance type ({} has {})", info.name, info.accelerator));
        false
    }
}

/// Checks a requested accelerator count against the instance type and returns the count to
/// use (`requested`, or every accelerator of the type when absent). A type EC2 does not
/// describe needs the count given.
pub(crate) fn accelerators_per_node(
    f: &mut Findings,
    field: &str,
    specs: &TypeSpecs,
    requested: Option<u32>,
    min: u32,
) -> u32 {
    let info = &specs.info;
    match (specs.basis, requested) {
        (SpecsBasis::NotRead, r) => r.unwrap_or(info.accelerators),
        (SpecsBasis::Unknown, None) if info.accelerators > 0 => {
            f.push(
                field,
                format!(
                    "EC2 does not describe {} in this region, so its accelerator count is unknown: give {field} explicitly",
                    info.name
                ),
            );
            info.accelerators
        }
        (SpecsBasis::Unknown, r) => {
            let n = r.unwrap_or(0);
            if n < min {
                f.push(field, format!("must be at least {min}"));
            }
            n
        }
        (SpecsBasis::Described, r) => {
            let n = r.unwrap_or(info.accelerators);
            if n > info.accelerators {
                f.push(field, format!("{} has {} accelerator(s); asked for {n}", info.name, info.accelerators));
            } else if n < min {
                f.push(field, format!("must be at least {min}"));
            }
            n
        }
    }
}

/// The EFA interfaces a pod asks for when it wants EFA: every interface of the type. A type
/// EC2 does not describe cannot have them counted (a finding on `field`).
pub(crate) fn efa_interfaces(f: &mut Findings, field: &str, specs: &TypeSpecs, wanted: bool) -> u32 {
    if !wanted {
        return 0;
    }
    match specs.basis {
        SpecsBasis::Described => specs.info.efa_interfaces,
        SpecsBasis::NotRead => 1,
        SpecsBasis::Unknown => {
            f.push(
                field,
                format!(
                    "EC2 does not describe {} in this region, so its EFA interfaces cannot be counted: turn {field} off",
                    specs.info.name
                ),
            );
            0
        }
    }
}

/// `resources` of a container: accelerators and EFA as requests = limits (extended resources
/// cannot be overcommitted), CPU as a request, memory as request = limit.
pub(crate) fn container_resources(accel: Option<(Accelerator, u32)>, efa: u32, compute: &ComputeResources) -> Value {
    let mut requests = Map::new();
    let mut limits = Map::new();
    if let Some((a, n)) = accel
        && n > 0
    {
        requests.insert(a.resource.into(), Value::String(n.to_string()));
        limits.insert(a.resource.into(), Value::String(n.to_string()));
    }
    if efa > 0 {
        requests.insert(RESOURCE_EFA.into(), Value::String(efa.to_string()));
        limits.insert(RESOURCE_EFA.into(), Value::String(efa.to_string()));
    }
    if let Some(cpu) = &compute.cpu {
        requests.insert("cpu".into(), Value::String(cpu.clone()));
    }
    if let Some(mem) = &compute.memory {
        requests.insert("memory".into(), Value::String(mem.clone()));
        limits.insert("memory".into(), Value::String(mem.clone()));
    }
    let mut r = Map::new();
    if !requests.is_empty() {
        r.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        r.insert("limits".into(), Value::Object(limits));
    }
    Value::Object(r)
}

/// Tolerations for the usual taint of GPU/Neuron node pools (harmless where nodes carry none).
pub(crate) fn accelerator_tolerations(accel: Option<Accelerator>) -> Value {
    match accel {
        Some(a) => json!([{ "key": a.resource, "operator": "Exists", "effect": "NoSchedule" }]),
        None => json!([]),
    }
}

/// A memory-backed `/dev/shm` (NCCL and data loaders need far more than the 64 MiB default).
pub(crate) fn shm_volume(size: &str) -> (Value, Value) {
    (
        json!({ "name": "dshm", "emptyDir": { "medium": "Memory", "sizeLimit": size } }),
        json!({ "name": "dshm", "mountPath": "/dev/shm" }),
    )
}

/// The container security context of every workload: no privilege escalation, the container
/// runtime's default seccomp profile (Kubernetes `pod-security-standards`: what the
/// `restricted` profile requires; GPU and EFA workloads run under it), and no raw sockets
/// (`NET_RAW` dropped: nothing here pings or crafts packets, and raw sockets are the classic
/// way to spoof traffic on the node's network).
pub(crate) fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "seccompProfile": { "type": "RuntimeDefault" },
        "capabilities": { "drop": ["NET_RAW"] }
    })
}

/// `automountServiceAccountToken: false` for a pod that names no service account: a model
/// download or model server never calls the Kubernetes API, so it gets no token of the
/// namespace's default service account. (Training pods keep the default: the training
/// operators' agents in the pod may read their job, and Ray's head needs the API.)
pub(crate) fn no_token_without_service_account(pod_spec: &mut Value) {
    if pod_spec.get("serviceAccountName").is_none() {
        set(pod_spec, "automountServiceAccountToken", json!(false));
    }
}

/// A SageMaker managed MLflow tracking server (or MLflow app) the workload reports to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MlflowTracking {
    /// ARN of the tracking server, set as `MLFLOW_TRACKING_URI` (the `sagemaker-mlflow`
    /// plugin in the image resolves it), e.g.
    /// `arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team`.
    pub tracking_server_arn: String,
    /// `MLFLOW_EXPERIMENT_NAME`; the job name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<String>,
}

/// A SageMaker managed MLflow ARN:
/// `arn:<partition>:sagemaker:<region>:<account>:(mlflow-tracking-server|mlflow-app)/<name>`.
pub fn mlflow_arn(arn: &str) -> Result<(), String> {
    let rule = || {
        "must be a SageMaker MLflow ARN: arn:aws:sagemaker:<region>:<account>:mlflow-tracking-server/<name>".to_string()
    };
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    if parts.len() != 6 || parts[0] != "arn" || !parts[1].starts_with("aws") || parts[2] != "sagemaker" {
        return Err(rule());
    }
    if names::region(parts[3]).is_err() || parts[4].len() != 12 || !parts[4].chars().all(|c| c.is_ascii_digit()) {
        return Err(rule());
    }
    let name = parts[5].strip_prefix("mlflow-tracking-server/").or_else(|| parts[5].strip_prefix("mlflow-app/"));
    match name {
        Some(n) if !n.is_empty() && n.len() <= 256 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') => {
            Ok(())
        }
        _ => Err(rule()),
    }
}

impl Validate for MlflowTracking {
    fn validate(&self, f: &mut Findings) {
        check(f, "tracking_server_arn", mlflow_arn(&self.tracking_server_arn));
        if let Some(e) = &self.experiment {
            let ok = !e.is_empty() && e.len() <= 256 && !e.chars().any(char::is_control);
            if !ok {
                f.push("experiment", "must be 1-256 characters without control characters");
            }
        }
    }
}

impl MlflowTracking {
    pub(crate) fn experiment_or<'a>(&'a self, default: &'a str) -> &'a str {
        self.experiment.as_deref().unwrap_or(default)
    }

    pub(crate) fn env(&self, default_experiment: &str) -> Vec<Value> {
        vec![
            env_value("MLFLOW_TRACKING_URI", &self.tracking_server_arn),
            env_value("MLFLOW_EXPERIMENT_NAME", self.experiment_or(default_experiment)),
        ]
    }
}

/// Environment variable names the MLflow wiring sets.
pub(crate) const MLFLOW_ENV: &[&str] = &["MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_rules() {
        type Check = fn(&str) -> Result<(), String>;
        let cases: &[(&str, Check, &str, bool)] = &[
            ("image", image_ref, "vllm/vllm-openai:v0.10.1", true),
            ("image", image_ref, "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:2025-06-01", true),
            ("image", image_ref, "localhost:5000/img:1", true),
            ("image", image_ref, &format!("repo@sha256:{}", "a".repeat(64)), true),
            ("image", image_ref, "localhost:5000/img", false),
            ("image", image_ref, "python", false),
            ("image", image_ref, "python:latest", false),
            ("image", image_ref, "python:3.12 slim", false),
            ("image", image_ref, "repo@sha256:abc", false),
            ("image", image_ref, "", false),
            ("quantity", quantity, "500m", true),
            ("quantity", quantity, "64Gi", true),
            ("quantity", quantity, "1.5", true),
            ("quantity", quantity, "8", true),
            ("quantity", quantity, "Gi", false),
            ("quantity", quantity, "-1", false),
            ("quantity", quantity, "1GB", false),
            ("bucket_path", bucket_path, "models/Qwen/Qwen3-0.6B", true),
            ("bucket_path", bucket_path, "recipes/run.py", true),
            ("bucket_path", bucket_path, "/abs", false),
            ("bucket_path", bucket_path, "a/../b", false),
            ("bucket_path", bucket_path, "a//b", false),
            ("bucket_path", bucket_path, "", false),
            ("argv", argv_element, "--lr=1e-4", true),
            ("argv", argv_element, "it's $HOME; rm -rf /", true),
            ("argv", argv_element, "a\nb", false),
            ("env", env_var_name, "HF_HOME", true),
            ("env", env_var_name, "1X", false),
            ("env", env_var_name, "A B", false),
            ("path", container_path, "/s3", true),
            ("path", container_path, "/mnt/data", true),
            ("path", container_path, "/", false),
            ("path", container_path, "s3", false),
            ("path", container_path, "/s3/", false),
            ("path", container_path, "/a/../b", false),
            ("subdomain", dns1123_subdomain, "hf-token", true),
            ("subdomain", dns1123_subdomain, "a.b-c", true),
            ("subdomain", dns1123_subdomain, "A", false),
            ("mlflow", mlflow_arn, "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team-a", true),
            ("mlflow", mlflow_arn, "arn:aws:sagemaker:us-east-1:123456789012:mlflow-app/app-1", true),
            ("mlflow", mlflow_arn, "arn:aws:s3:us-east-1:123456789012:mlflow-tracking-server/x", false),
            ("mlflow", mlflow_arn, "http://mlflow:5000", false),
        ];
        for (what, check, input, ok) in cases {
            assert_eq!(check(input).is_ok(), *ok, "{what} {input:?}: {:?}", check(input));
        }
    }

    #[test]
    fn credential_like_names() {
        for yes in [
            "HF_TOKEN",
            "hf_token",
            "WANDB_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "OPENAI_APIKEY",
            "OPENAI_KEY",
            "WANDB_KEY",
            "GITHUB_PAT",
            "HF_AUTH",
            "AUTHORIZATION",
            "GOOGLE_APPLICATION_CREDENTIAL",
            "SMTP_PASS",
            "DB_PWD",
        ] {
            assert!(credential_like(yes), "{yes}");
        }
        for no in
            ["TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "HF_HUB_OFFLINE", "KEYS", "SECRETARY", "KEY", "PATH", "PYTHONPATH"]
        {
            assert!(!credential_like(no), "{no}");
        }
        for (value, yes) in [
            ("postgres://app:s3cret@db.internal:5432/runs", true),
            ("https://user:tok@github.com/org/repo.git", true),
            ("https://user@github.com/org/repo.git", false),
            ("https://example.com/a:b@c", false),
            ("s3://is-bucket/models", false),
            ("plain", false),
        ] {
            assert_eq!(url_with_password(value), yes, "{value}");
        }
    }

    #[test]
    fn derived_names_are_labels_and_deterministic() {
        let a = derived_name("dl", "Qwen/Qwen3-0.6B", &["Qwen/Qwen3-0.6B"], 63);
        assert_eq!(a, derived_name("dl", "Qwen/Qwen3-0.6B", &["Qwen/Qwen3-0.6B"], 63));
        assert!(a.starts_with("dl-qwen-qwen3-0-6b-"), "{a}");
        let long = derived_name("dl", &"x".repeat(200), &["y"], 63);
        assert_eq!(long.len(), 63);
        assert!(names::dns1123_label(&long).is_ok());
        assert!(names::dns1123_label(&derived_name("dl", "___", &["z"], 63)).is_ok());
        assert_ne!(short_hash(&["a", "bc"], 8), short_hash(&["ab", "c"], 8));
    }
}

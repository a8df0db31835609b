//! Every builder, end to end: representative requests (in their JSON wire shape) become
//! manifests that are snapshotted (YAML, `tests/snapshots/`) and validated against the
//! upstream schemas vendored in `<repo>/vendor/schemas` — the Kubernetes 1.35 OpenAPI v3 documents
//! for core, apps and batch objects and the CRDs' `openAPIV3Schema` for RayJob, ScaledObject,
//! InferenceEndpointConfig, Karpenter's NodePool and Kueue's kinds — the Workloads, queues and
//! priority classes the simulated task governance add-on serves (`HyperpodNodeClass` has no public CRD and
//! is checked against a strict schema written from AWS's documentation). Validation is strict: every object schema that lists its
//! properties rejects others (what `kubectl apply --validate=strict` does), so a misspelt
//! field fails here rather than being dropped by the API server.
//!
//! `HyperPodPyTorchJob` has no public CRD. Its outer shape is checked against a strict schema
//! written from the HyperPod CLI's pydantic models and AWS's documentation (below), its pod
//! template against the Kubernetes `PodTemplateSpec`, and its replica spec loosely against the
//! Kubeflow `PyTorchJob` CRD the HyperPod chart installs. RBAC objects (the router's Role and
//! RoleBinding) have no upstream document in `vendor/schemas` and are checked against a
//! minimal strict schema of `rbac.authorization.k8s.io/v1`.
//!
//! Then the validation rules, table-driven: each case edits a valid request and lists exactly
//! the field paths that must be reported.

use instantstart_core::instance_types::SpecsFact;
use instantstart_core::spec::{CapacitySpec, ManagedFeatures, TieredCheckpointing};
use instantstart_core::validate::Validate;
use instantstart_core::workload::WorkloadContext;
use instantstart_recipes::ManifestSet;
use instantstart_recipes::autoscaling::{self, KarpenterSpec};
use instantstart_recipes::download::{ModelDownloadParams, model_download_job};
use instantstart_recipes::inference::autoscale::{AutoscalerParams, keda_autoscaler};
use instantstart_recipes::inference::managed::{ManagedEndpointParams, managed_endpoint};
use instantstart_recipes::inference::router::{SglangRouterParams, sglang_router};
use instantstart_recipes::inference::service::{ServiceParams, serving_service};
use instantstart_recipes::inference::{ServingParams, serving_deployment};
use instantstart_recipes::storage::{S3StorageParams, s3_storage};
use instantstart_recipes::training::hyperpod::{HyperPodJobParams, TargetCapacity, hyperpod_pytorch_job};
use instantstart_recipes::training::ray::{RayJobParams, ray_job};
use jsonschema::{Draft, Validator};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};

// ---------------------------------------------------------------------------------------
// Upstream schemas
// ---------------------------------------------------------------------------------------

/// `<repo>/vendor/schemas`: the upstream files byte for byte, with their provenance in its
/// README (checked by [`vendored_schemas_match_their_provenance`]); `INSTANTSTART_SCHEMAS_DIR`
/// overrides.
fn schemas_dir() -> PathBuf {
    let dir = std::env::var_os("INSTANTSTART_SCHEMAS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../vendor/schemas"));
    assert!(
        dir.join("README.md").exists(),
        "upstream schemas not found at {} (expected <repo>/vendor/schemas)",
        dir.display()
    );
    dir
}

fn read(rel: &str) -> String {
    let path = schemas_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Makes an OpenAPI schema strict: every object schema with `properties` and no
/// `additionalProperties` (and not marked to preserve unknown fields) rejects other fields.
/// Walks only subschema positions, so property *names* are never mistaken for keywords.
/// Also spells out Go's `(?i)` flag (not ECMA-262 regex syntax, which JSON Schema requires) as
/// case-insensitive character classes, keeping the pattern's meaning.
fn strictify(schema: &mut Value) {
    let Value::Object(obj) = schema else { return };
    if let Some(Value::String(p)) = obj.get_mut("pattern")
        && let Some(rest) = p.strip_prefix("(?i)")
    {
        *p = rest
            .chars()
            .map(|c| {
                if c.is_ascii_alphabetic() {
                    format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
                } else {
                    c.to_string()
                }
            })
            .collect();
    }
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if obj.get("properties").is_some_and(Value::is_object) && !obj.contains_key("additionalProperties") && !preserve {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        props.values_mut().for_each(strictify);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(s @ Value::Object(_)) = obj.get_mut(key) {
            strictify(s);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = obj.get_mut(key) {
            list.iter_mut().for_each(strictify);
        }
    }
}

/// `components.schemas` of a Kubernetes OpenAPI v3 document, made strict.
fn k8s_components(file: &str) -> Value {
    let mut doc: Value = serde_json::from_str(&read(&format!("kubernetes/v1.35/{file}"))).unwrap();
    let mut components = doc["components"].take();
    if let Some(Value::Object(schemas)) = components.get_mut("schemas") {
        schemas.values_mut().for_each(strictify);
    }
    components
}

static CORE: LazyLock<Value> = LazyLock::new(|| k8s_components("api__v1_openapi.json"));
static APPS: LazyLock<Value> = LazyLock::new(|| k8s_components("apis__apps__v1_openapi.json"));
static BATCH: LazyLock<Value> = LazyLock::new(|| k8s_components("apis__batch__v1_openapi.json"));

/// The `openAPIV3Schema` of `version` in a CRD file, made strict.
fn crd_schema(file: &str, version: &str) -> Value {
    let crd: Value = serde_norway::from_str(&read(file)).unwrap();
    let v = crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == version).unwrap();
    let mut schema = v["schema"]["openAPIV3Schema"].clone();
    strictify(&mut schema);
    schema
}

/// The same validator for all documents: OpenAPI 3.0 schemas are closest to draft 4
/// (`$ref` replaces its siblings, which is why Kubernetes wraps refs in `allOf`).
fn compile(schema: &Value) -> Validator {
    jsonschema::options().with_draft(Draft::Draft4).should_validate_formats(false).build(schema).unwrap()
}

/// A root schema `{"$ref": "#/components/schemas/<name>", "components": …}`.
fn component_ref(components: &Value, name: &str) -> Value {
    assert!(components["schemas"].get(name).is_some(), "no component {name}");
    json!({ "$ref": format!("#/components/schemas/{name}"), "components": components })
}

/// A CRD schema whose `metadata` is checked as Kubernetes `ObjectMeta`.
fn crd_with_object_meta(file: &str, version: &str) -> Value {
    let mut schema = crd_schema(file, version);
    schema["properties"]["metadata"] =
        json!({ "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" });
    schema["components"] = CORE.clone();
    schema
}

/// The outer shape of `HyperPodPyTorchJob`, from the pydantic models of
/// aws/sagemaker-hyperpod-cli (`hyperpod_pytorch_job_unified_config.py`: `_HyperPodPytorchJob`,
/// `ReplicaSpec`, `RunPolicy`, `RestartPolicy`, `LogMonitoringConfiguration`) and AWS's elastic
/// training documentation (`elasticPolicy`, `replicaSpecs[].maxReplicas`). Strict throughout;
/// the pod template is Kubernetes' `PodTemplateSpec`.
fn hyperpod_schema() -> Value {
    let int = json!({ "type": "integer", "minimum": 0 });
    let replica_spec = json!({
        "type": "object", "additionalProperties": false, "required": ["name"],
        "properties": {
            "name": { "type": "string" }, "replicas": int, "spares": int, "maxReplicas": int,
            "template": { "$ref": "#/components/schemas/io.k8s.api.core.v1.PodTemplateSpec" },
        },
    });
    let log_rule = json!({
        "type": "object", "additionalProperties": false, "required": ["name", "logPattern"],
        "properties": {
            "name": { "type": "string" }, "logPattern": { "type": "string" }, "stopPattern": { "type": "string" },
            "expectedStartCutOffInSeconds": int, "expectedRecurringFrequencyInSeconds": int,
            "metricThreshold": { "type": "integer" }, "metricEvaluationDataPoints": int,
            "operator": { "enum": ["gt", "gteq", "lt", "lteq", "eq"] },
        },
    });
    let restart_policy = json!({
        "type": "object", "additionalProperties": false, "required": ["evalPeriodSeconds"],
        "properties": { "evalPeriodSeconds": int, "maxFullJobRestarts": int, "numRestartBeforeFullJobRestart": int },
    });
    let run_policy = json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "activeDeadlineSeconds": int, "cleanPodPolicy": { "enum": ["All", "Running", "None"] },
            "faultDeadlineSeconds": int, "jobMaxRetryCount": int,
            "logMonitoringConfiguration": { "type": "array", "items": log_rule },
            "restartPolicy": restart_policy, "startupDeadlineSeconds": int, "suspend": { "type": "boolean" },
            "ttlSecondsAfterFinished": { "type": "integer" },
        },
    });
    let elastic_policy = json!({
        "type": "object", "additionalProperties": false, "required": ["minReplicas", "maxReplicas"],
        "properties": {
            "minReplicas": int, "maxReplicas": int, "replicaIncrementStep": int,
            "replicaDiscreteValues": { "type": "array", "items": int },
            "gracefulShutdownTimeoutInSeconds": int, "scalingTimeoutInSeconds": int, "faultyScaleDownTimeoutInSeconds": int,
        },
    });
    let spec = json!({
        "type": "object", "additionalProperties": false, "required": ["replicaSpecs"],
        "properties": {
            "nprocPerNode": { "type": "string" },
            "replicaSpecs": { "type": "array", "minItems": 1, "items": replica_spec },
            "runPolicy": run_policy,
            "elasticPolicy": elastic_policy,
        },
    });
    json!({
        "type": "object", "additionalProperties": false, "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": { "enum": ["sagemaker.amazonaws.com/v1"] },
            "kind": { "enum": ["HyperPodPyTorchJob"] },
            "metadata": { "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" },
            "spec": spec,
        },
        "components": *CORE,
    })
}

/// `HyperpodNodeClass` has no public CRD (vendor/schemas/README.md, "Not found"): a strict
/// schema written from AWS's documentation (`sagemaker-hyperpod-eks-autoscaling-nodeclass`:
/// `spec.instanceGroups`, pre-created instance group names, "MaxItems: 10").
fn node_class_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false, "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": { "enum": ["karpenter.sagemaker.amazonaws.com/v1"] },
            "kind": { "enum": ["HyperpodNodeClass"] },
            "metadata": { "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" },
            "spec": {
                "type": "object", "additionalProperties": false, "required": ["instanceGroups"],
                "properties": {
                    "instanceGroups": {
                        "type": "array", "minItems": 1, "maxItems": 10, "uniqueItems": true,
                        "items": { "type": "string", "pattern": "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$" },
                    },
                },
            },
        },
        "components": *CORE,
    })
}

/// Minimal strict `rbac.authorization.k8s.io/v1` Role / RoleBinding (not in vendor/schemas).
fn rbac_schema(kind: &str) -> Value {
    let strings = json!({ "type": "array", "items": { "type": "string" } });
    let body = if kind == "Role" {
        json!({ "rules": { "type": "array", "items": { "type": "object", "additionalProperties": false, "required": ["verbs"],
            "properties": { "apiGroups": strings, "resources": strings, "resourceNames": strings, "nonResourceURLs": strings, "verbs": strings } } } })
    } else {
        json!({
            "roleRef": { "type": "object", "additionalProperties": false, "required": ["apiGroup", "kind", "name"],
                "properties": { "apiGroup": { "type": "string" }, "kind": { "enum": ["Role", "ClusterRole"] }, "name": { "type": "string" } } },
            "subjects": { "type": "array", "items": { "type": "object", "additionalProperties": false, "required": ["kind", "name"],
                "properties": { "apiGroup": { "type": "string" }, "kind": { "type": "string" }, "name": { "type": "string" }, "namespace": { "type": "string" } } } },
        })
    };
    let mut props = json!({
        "apiVersion": { "enum": ["rbac.authorization.k8s.io/v1"] },
        "kind": { "enum": [kind] },
        "metadata": { "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" },
    });
    props.as_object_mut().unwrap().extend(body.as_object().unwrap().clone());
    json!({ "type": "object", "additionalProperties": false, "required": ["apiVersion", "kind", "metadata"], "properties": props, "components": *CORE })
}

/// The vendored schemas are the upstream files byte for byte: every file the README's table
/// lists has the Git blob id (`git hash-object`) the table names, and every data file is listed.
#[test]
fn vendored_schemas_match_their_provenance() {
    check_vendored(&schemas_dir());
    // The IAM policies vendored beside them (vendor/iam) follow the same rule.
    check_vendored(&schemas_dir().parent().unwrap().join("iam"));
}

fn check_vendored(dir: &std::path::Path) {
    use sha1::{Digest, Sha1};
    let dir = dir.to_path_buf();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut listed = Vec::new();
    for line in readme.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | `path` | what | bytes | `blob` |: the blob id is the last cell.
        let (Some(path), Some(blob)) = (cells.get(1), cells.iter().rev().nth(1)) else { continue };
        let (path, blob) = (path.trim_matches('`'), blob.trim_matches('`'));
        if blob.len() != 40 {
            continue; // the provenance table, not the file table
        }
        let bytes = std::fs::read(dir.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut h = Sha1::new();
        h.update(format!("blob {}\0", bytes.len()).as_bytes());
        h.update(&bytes);
        let got: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, blob, "{path} differs from the upstream blob its README names");
        listed.push(path.to_string());
    }
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, base, out);
            } else if p.file_name().unwrap() != "README.md" {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut present = Vec::new();
    walk(&dir, &dir, &mut present);
    present.sort();
    listed.sort();
    assert_eq!(present, listed, "every vendored file is listed with its blob id, and only those");
}

/// Compiled validators, built once per test process and shared by the tests.
static VALIDATORS: LazyLock<Mutex<HashMap<String, Arc<Validator>>>> = LazyLock::new(Default::default);

fn validator(key: &str, schema: impl FnOnce() -> Value) -> Arc<Validator> {
    if let Some(v) = VALIDATORS.lock().unwrap().get(key) {
        return v.clone();
    }
    let v = Arc::new(compile(&schema()));
    VALIDATORS.lock().unwrap().entry(key.to_string()).or_insert(v).clone()
}

/// The upstream validator for an object, chosen by `apiVersion` and `kind`; for built-in
/// kinds also checks that the component's group-version-kind is the object's.
fn validator_for(obj: &Value) -> Arc<Validator> {
    let api = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let key = format!("{api}/{kind}");
    let builtin = |components: &'static LazyLock<Value>, component: String| {
        let gvk = &components["schemas"][&component]["x-kubernetes-group-version-kind"];
        let (group, version) = api.split_once('/').unwrap_or(("", api));
        assert!(
            gvk.as_array().unwrap().iter().any(|g| g["group"] == group && g["version"] == version && g["kind"] == kind),
            "{component} is not {api} {kind}"
        );
        validator(&key, || component_ref(components, &component))
    };
    match (api, kind) {
        ("v1", _) => builtin(&CORE, format!("io.k8s.api.core.v1.{kind}")),
        ("apps/v1", _) => builtin(&APPS, format!("io.k8s.api.apps.v1.{kind}")),
        ("batch/v1", _) => builtin(&BATCH, format!("io.k8s.api.batch.v1.{kind}")),
        ("rbac.authorization.k8s.io/v1", _) => validator(&key, || rbac_schema(kind)),
        ("ray.io/v1", "RayJob") => validator(&key, || crd_with_object_meta("kuberay/ray.io_rayjobs.yaml", "v1")),
        ("keda.sh/v1alpha1", "ScaledObject") => {
            validator(&key, || crd_with_object_meta("keda/keda.sh_scaledobjects.yaml", "v1alpha1"))
        }
        ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig") => validator(&key, || {
            crd_with_object_meta(
                "hyperpod-inference/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml",
                "v1",
            )
        }),
        ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob") => validator(&key, hyperpod_schema),
        ("karpenter.sh/v1", "NodePool") => {
            validator(&key, || crd_with_object_meta("karpenter/karpenter.sh_nodepools.yaml", "v1"))
        }
        ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass") => validator(&key, node_class_schema),
        ("kueue.x-k8s.io/v1beta1", _) => validator(&key, || kueue_schema(kind)),
        _ => panic!("no schema for {api} {kind}"),
    }
}

/// The vendored Kueue CRD of `kind` (v0.19.2, the release the task governance add-on v1.6
/// packages) at `kueue.x-k8s.io/v1beta1`, the version InstantStart reads.
fn kueue_crd_file(kind: &str) -> String {
    let plural = match kind {
        "WorkloadPriorityClass" => "workloadpriorityclasses".to_string(),
        k => format!("{}s", k.to_lowercase()),
    };
    format!("kueue/kueue.x-k8s.io_{plural}.yaml")
}

fn kueue_schema(kind: &str) -> Value {
    crd_with_object_meta(&kueue_crd_file(kind), "v1beta1")
}

/// Loose check of each HyperPod replica spec against the Kubeflow `PyTorchJob` CRD's
/// replica spec (same `replicas` + `template` shape; the CRD is not strict-checked because it
/// is not the HyperPod CRD).
fn kubeflow_replica_validator() -> Arc<Validator> {
    validator("kubeflow/ReplicaSpec", || {
        let crd: Value =
            serde_norway::from_str(&read("hyperpod-training/pytorchjobs.kubeflow.org-CustomResourceDefinition.yaml"))
                .unwrap();
        let v = crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == "v1").unwrap();
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["pytorchReplicaSpecs"]["additionalProperties"].clone()
    })
}

fn assert_no_nulls(v: &Value, path: &str) {
    match v {
        Value::Null => panic!("null at {path}"),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| assert_no_nulls(x, &format!("{path}[{i}]"))),
        Value::Object(o) => o.iter().for_each(|(k, x)| assert_no_nulls(x, &format!("{path}.{k}"))),
        _ => {}
    }
}

/// Validates every object of a manifest set against its upstream schema.
fn assert_valid(objects: &[Value]) {
    for obj in objects {
        let name = format!("{} {}", obj["kind"], obj["metadata"]["name"]);
        assert_no_nulls(obj, &name);
        assert_eq!(obj["metadata"]["labels"]["app.kubernetes.io/managed-by"], "instantstart", "{name}");
        let v = validator_for(obj);
        let errors: Vec<String> = v.iter_errors(obj).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(errors.is_empty(), "{name} does not match its schema:\n{}", errors.join("\n"));
        if obj["kind"] == "HyperPodPyTorchJob" {
            for spec in obj["spec"]["replicaSpecs"].as_array().unwrap() {
                let loose = json!({ "replicas": spec["replicas"], "template": spec["template"] });
                let errors: Vec<String> =
                    kubeflow_replica_validator().iter_errors(&loose).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{name}: replica spec vs PyTorchJob: {errors:?}");
            }
        }
    }
}

/// Schema-checks and snapshots (maps sorted, so the YAML is stable whatever serde_json's map
/// order) a manifest set.
fn check_and_snapshot(name: &str, set: &dyn ManifestSet) {
    let objects: Vec<Value> = set.objects().into_iter().cloned().collect();
    assert_valid(&objects);
    insta::with_settings!({ sort_maps => true, prepend_module_to_snapshot => false }, {
        insta::assert_yaml_snapshot!(name, objects);
    });
}

fn parse<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("request does not deserialize: {e}"))
}

/// EC2's specs of a type as the simulated EC2 describes them (what the workflow gives the
/// renderer after reading them).
fn ec2_fact(instance_type: &str) -> SpecsFact {
    instantstart_sim::ec2_specs::instance_type_info(instance_type).cloned().map_or(SpecsFact::Unknown, SpecsFact::Known)
}

/// A request with its instance type's specs filled in, as the renderer gets it.
trait Describe {
    fn describe(&mut self) {}
}
impl Describe for HyperPodJobParams {
    fn describe(&mut self) {
        self.job.specs = ec2_fact(&self.job.instance_type);
    }
}
impl Describe for RayJobParams {
    fn describe(&mut self) {
        self.job.specs = ec2_fact(&self.job.instance_type);
    }
}
impl Describe for ServingParams {
    fn describe(&mut self) {
        self.specs = ec2_fact(&self.instance_type);
    }
}
impl Describe for ManagedEndpointParams {
    fn describe(&mut self) {
        self.specs = ec2_fact(&self.instance_type);
    }
}
impl Describe for S3StorageParams {}
impl Describe for ModelDownloadParams {}
impl Describe for ServiceParams {}
impl Describe for SglangRouterParams {}
impl Describe for AutoscalerParams {}

/// [`parse`], then [`Describe::describe`].
fn described<T: DeserializeOwned + Describe>(v: Value) -> T {
    let mut t: T = parse(v);
    t.describe();
    t
}

/// A workflow context in which EC2 described every type it knows.
fn described_context() -> WorkloadContext {
    WorkloadContext {
        instance_specs: Some(instantstart_sim::ec2_specs::all().cloned().collect()),
        ..WorkloadContext::default()
    }
}

// ---------------------------------------------------------------------------------------
// Representative requests
// ---------------------------------------------------------------------------------------

const TRAIN_IMAGE: &str = "123456789012.dkr.ecr.us-east-1.amazonaws.com/hyperpod-train:2025.06";
const MLFLOW_ARN: &str = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/research";

fn storage_base() -> Value {
    json!({ "namespace": "default", "bucket": "is-demo-123456789012-ab12", "region": "us-east-1" })
}
fn download_base() -> Value {
    json!({ "namespace": "default", "repo_id": "Qwen/Qwen3-0.6B" })
}
fn hyperpod_base() -> Value {
    json!({
        "job": { "name": "llama-sft", "namespace": "ml", "image": TRAIN_IMAGE, "instance_type": "ml.p5.48xlarge", "nodes": 2 },
        "recipe": { "kind": "torch", "script": "recipes/fsdp/train.py" },
    })
}
fn ray_base() -> Value {
    json!({
        "job": { "name": "verl-grpo", "namespace": "ml", "image": TRAIN_IMAGE, "instance_type": "ml.p5.48xlarge", "nodes": 2 },
        "recipe": { "kind": "verl" },
        "ray_version": "2.49.0",
    })
}
fn serving_base() -> Value {
    json!({
        "name": "qwen3", "namespace": "serving", "image": "vllm/vllm-openai:v0.10.1", "instance_type": "ml.g5.12xlarge",
        "engine": { "kind": "vllm", "model": "models/Qwen/Qwen3-0.6B" },
    })
}
fn service_base() -> Value {
    json!({ "name": "qwen3", "namespace": "serving", "backends": { "kind": "deployment", "name": "qwen3" } })
}
fn router_base() -> Value {
    json!({ "name": "qwen3-router", "namespace": "serving", "image": "lmsysorg/sglang:v0.5.2-cu126",
            "workers": { "kind": "deployment", "name": "qwen3" } })
}
fn autoscaler_base() -> Value {
    json!({ "namespace": "serving", "deployment": "qwen3", "min_replicas": 1, "max_replicas": 8,
            "prometheus": { "server_address": "http://prometheus.monitoring:9090",
                            "query": "sum(sgl_router_job_queue_depth{job=\"qwen3-router\"})", "threshold": 16 } })
}
fn managed_base() -> Value {
    json!({
        "name": "qwen3-managed", "namespace": "serving", "instance_type": "ml.g5.12xlarge",
        "model_source": { "bucket": "is-demo-123456789012-ab12", "region": "us-east-1", "model_location": "models/Qwen/Qwen3-0.6B" },
        "worker": { "image": "vllm/vllm-openai:v0.10.1", "port": 8000,
                    "args": ["--model", "/opt/ml/model", "--port", "8000", "--max-model-len", "8192"] },
    })
}

/// `base` with the JSON-pointer `edits` applied (creating missing object keys).
fn edit(base: Value, edits: &[(&str, Value)]) -> Value {
    let mut v = base;
    for (pointer, value) in edits {
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let mut cur = &mut v;
        for seg in parent.split('/').skip(1) {
            cur = match cur {
                Value::Array(a) => &mut a[seg.parse::<usize>().unwrap()],
                other => other.as_object_mut().unwrap().entry(seg.to_string()).or_insert_with(|| json!({})),
            };
        }
        match cur {
            Value::Array(a) => a[key.parse::<usize>().unwrap()] = value.clone(),
            other => {
                other.as_object_mut().unwrap().insert(key.to_string(), value.clone());
            }
        }
    }
    v
}

#[test]
fn shared_s3_storage() {
    check_and_snapshot("s3_storage_default", &s3_storage(&parse(storage_base())).unwrap());
    let custom = edit(
        storage_base(),
        &[
            ("/claim_name", json!("team-a-data")),
            ("/mount_path", json!("/data")),
            ("/prefix", json!("team-a/")),
            ("/uid", json!(1000)),
            ("/gid", json!(1000)),
            ("/allow_delete", json!(false)),
        ],
    );
    let s = s3_storage(&parse(custom)).unwrap();
    assert_eq!(s.mount.mount_path, "/data");
    check_and_snapshot("s3_storage_prefix_uid", &s);
}

#[test]
fn model_download() {
    let d = model_download_job(&parse(download_base())).unwrap();
    assert_eq!(d.destination, "models/Qwen/Qwen3-0.6B");
    assert_eq!(d.container_path, "/s3/models/Qwen/Qwen3-0.6B");
    assert_eq!(d.job["metadata"]["name"], d.job_name.as_str());
    check_and_snapshot("download_model", &d);

    let gated = edit(
        download_base(),
        &[
            ("/repo_id", json!("meta-llama/Llama-3.1-8B-Instruct")),
            ("/repo_type", json!("dataset")),
            ("/revision", json!("v1.0")),
            ("/destination", json!("datasets/llama-eval")),
            ("/hf_token", json!({ "name": "hf-token", "key": "token" })),
            ("/instance_type", json!("ml.g5.12xlarge")),
            ("/active_deadline_seconds", json!(14400)),
            ("/image", json!("123456789012.dkr.ecr.us-east-1.amazonaws.com/hf-tools:1.2")),
            ("/hub_requirement", json!("")),
        ],
    );
    check_and_snapshot("download_gated_dataset", &model_download_job(&parse(gated)).unwrap());
}

#[test]
fn hyperpod_training_jobs() {
    let torch = edit(
        hyperpod_base(),
        &[
            ("/recipe/args", json!(["--epochs", "3", "--data", "/s3/datasets/c4"])),
            ("/job/mlflow", json!({ "tracking_server_arn": MLFLOW_ARN })),
            ("/job/service_account", json!("mlflow-writer")),
            (
                "/job/env",
                json!([{ "name": "WANDB_API_KEY", "secret": { "name": "wandb", "key": "api-key" } },
                                { "name": "NCCL_DEBUG", "value": "WARN" }]),
            ),
            ("/job/resources", json!({ "cpu": "96", "memory": "1500Gi" })),
            (
                "/resilience",
                json!({
                    "job_max_retry_count": 10,
                    "restart_policy": { "restarts_before_full_job_restart": 3, "eval_period_seconds": 3600, "max_full_job_restarts": 2 },
                    "log_monitors": [
                        { "name": "JobStart", "log_pattern": ".*Training started.*", "expected_start_cutoff_seconds": 600 },
                        { "name": "JobHang", "log_pattern": ".*step \\d+.*", "expected_recurring_frequency_seconds": 900 },
                        { "name": "SlowSteps", "log_pattern": ".*step_time: (\\d+)s.*",
                          "metric": { "threshold": 30, "operator": "gt", "evaluation_data_points": 5 } },
                    ],
                }),
            ),
        ],
    );
    let job = hyperpod_pytorch_job(&described(torch), &TargetCapacity::default()).unwrap();
    assert_eq!(job.recovery_budget.process_restarts_per_window, 3);
    assert_eq!(job.recovery_budget.log_monitors, 3);
    check_and_snapshot("hyperpod_torch", &job);

    let lmf = edit(
        hyperpod_base(),
        &[
            ("/job/name", json!("qwen3-lora")),
            ("/job/instance_type", json!("ml.g5.12xlarge")),
            ("/job/nodes", json!(1)),
            ("/job/mlflow", json!({ "tracking_server_arn": MLFLOW_ARN, "experiment": "qwen3-sft" })),
            (
                "/recipe",
                json!({ "kind": "llama_factory", "config": "recipes/llama-factory/qwen3_lora_sft.yaml",
                                "overrides": { "dataset_dir": "/s3/datasets", "num_train_epochs": "2" } }),
            ),
        ],
    );
    check_and_snapshot(
        "hyperpod_llama_factory",
        &hyperpod_pytorch_job(&described(lmf), &TargetCapacity::default()).unwrap(),
    );

    let swift = edit(
        hyperpod_base(),
        &[
            ("/job/name", json!("qwen3-grpo")),
            ("/job/instance_type", json!("ml.p4d.24xlarge")),
            ("/job/efa", json!(false)),
            (
                "/recipe",
                json!({ "kind": "ms_swift", "command": "rlhf", "config": "recipes/swift/grpo.yaml",
                                "args": ["--rlhf_type", "grpo"] }),
            ),
            ("/resilience/clean_pod_policy", json!("Running")),
        ],
    );
    check_and_snapshot(
        "hyperpod_ms_swift",
        &hyperpod_pytorch_job(&described(swift), &TargetCapacity::default()).unwrap(),
    );

    let elastic = edit(
        hyperpod_base(),
        &[
            ("/job/name", json!("elastic-fsdp")),
            (
                "/resilience/elastic",
                json!({ "min_replicas": 2, "max_replicas": 8, "replica_increment_step": 2,
                                           "graceful_shutdown_timeout_seconds": 600, "scaling_timeout_seconds": 60,
                                           "faulty_scale_down_timeout_seconds": 30 }),
            ),
            ("/resilience/ttl_seconds_after_finished", json!(3600)),
        ],
    );
    check_and_snapshot(
        "hyperpod_elastic",
        &hyperpod_pytorch_job(&described(elastic), &TargetCapacity::default()).unwrap(),
    );

    // Task governance: the job object (not its pods) names the team's Kueue queue and the
    // priority class, as the task governance add-on expects.
    let queued = edit(
        hyperpod_base(),
        &[
            ("/job/name", json!("research-sft")),
            ("/job/namespace", json!("hyperpod-ns-research")),
            ("/job/team", json!("research")),
            ("/job/priority", json!("training")),
        ],
    );
    let job = hyperpod_pytorch_job(&described(queued), &TargetCapacity::default()).unwrap();
    let labels = &job.job["metadata"]["labels"];
    assert_eq!(labels["kueue.x-k8s.io/queue-name"], "hyperpod-ns-research-localqueue");
    assert_eq!(labels["kueue.x-k8s.io/priority-class"], "training-priority");
    let pod_labels = &job.job["spec"]["replicaSpecs"][0]["template"]["metadata"]["labels"];
    assert!(pod_labels.get("kueue.x-k8s.io/queue-name").is_none(), "{pod_labels}");
    check_and_snapshot("hyperpod_team_queue", &job);
}

#[test]
fn ray_training_jobs() {
    let verl = edit(
        ray_base(),
        &[
            ("/job/mlflow", json!({ "tracking_server_arn": MLFLOW_ARN, "experiment": "gsm8k-grpo" })),
            ("/recipe/config", json!("recipes/verl/qwen3_grpo.yaml")),
            (
                "/recipe/overrides",
                json!({
                    "data.train_files": "/s3/datasets/gsm8k/train.parquet",
                    "actor_rollout_ref.model.path": "/s3/models/Qwen/Qwen3-0.6B",
                    "algorithm.adv_estimator": "grpo",
                }),
            ),
        ],
    );
    let job = ray_job(&described(verl)).unwrap();
    assert!(job.entrypoint.contains(&"trainer.nnodes=2".to_string()));
    check_and_snapshot("ray_verl", &job);

    let single = edit(
        ray_base(),
        &[
            ("/job/name", json!("verl-small")),
            ("/job/instance_type", json!("ml.g6e.12xlarge")),
            ("/job/nodes", json!(1)),
        ],
    );
    let job = ray_job(&described(single)).unwrap();
    assert!(job.job["spec"]["rayClusterSpec"].get("workerGroupSpecs").is_none());
    check_and_snapshot("ray_verl_single_node", &job);

    let queued = edit(ray_base(), &[("/job/namespace", json!("hyperpod-ns-prod")), ("/job/team", json!("prod"))]);
    let job = ray_job(&described(queued)).unwrap();
    assert_eq!(job.job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "hyperpod-ns-prod-localqueue");
    assert!(job.job["metadata"]["labels"].get("kueue.x-k8s.io/priority-class").is_none());
    assert_valid(std::slice::from_ref(&job.job));
}

#[test]
fn serving_deployments() {
    let vllm = edit(
        serving_base(),
        &[
            ("/pool", json!("chat")),
            ("/replicas", json!(2)),
            ("/engine/max_model_len", json!(8192)),
            ("/engine/extra_args", json!(["--max-num-seqs", "64", "--trust-remote-code"])),
            ("/resources", json!({ "cpu": "16", "memory": "64Gi" })),
        ],
    );
    let d = serving_deployment(&described(vllm)).unwrap();
    assert_eq!(d.deployment["spec"]["template"]["metadata"]["labels"]["instantstart.io/pool"], "chat");
    assert!(d.deployment["spec"]["selector"]["matchLabels"].get("instantstart.io/pool").is_none());
    check_and_snapshot("serving_vllm_pool", &d);

    let sglang = edit(
        serving_base(),
        &[
            ("/name", json!("qwen3-sglang")),
            ("/image", json!("lmsysorg/sglang:v0.5.2-cu126")),
            ("/instance_type", json!("ml.g6e.48xlarge")),
            ("/gpus", json!(8)),
            (
                "/engine",
                json!({ "kind": "sglang", "model": "models/Qwen/Qwen3-32B", "served_model_name": "qwen3-32b",
                                "tensor_parallel_size": 8, "extra_args": ["--mem-fraction-static", "0.85"] }),
            ),
            ("/hf_token", json!({ "name": "hf-token", "key": "token" })),
        ],
    );
    check_and_snapshot("serving_sglang", &serving_deployment(&described(sglang)).unwrap());

    let custom = edit(
        serving_base(),
        &[
            ("/name", json!("embedder")),
            ("/image", json!("ghcr.io/example/embedder:1.4.0")),
            ("/instance_type", json!("ml.m5.2xlarge")),
            ("/port", json!(9000)),
            ("/engine", json!({ "kind": "custom", "command": ["/app/serve"], "args": ["--listen", "0.0.0.0:9000"] })),
        ],
    );
    check_and_snapshot("serving_custom_cpu", &serving_deployment(&described(custom)).unwrap());
}

#[test]
fn services_of_three_shapes() {
    check_and_snapshot("service_cluster_ip", &serving_service(&parse(service_base())).unwrap());
    let external = edit(
        service_base(),
        &[
            ("/name", json!("qwen3-public")),
            (
                "/exposure",
                json!({ "type": "load_balancer", "internet_facing": true, "source_ranges": ["203.0.113.0/24"] }),
            ),
        ],
    );
    check_and_snapshot("service_external_nlb", &serving_service(&parse(external)).unwrap());
    let pool = edit(
        service_base(),
        &[("/name", json!("chat-pool")), ("/backends", json!({ "kind": "pool", "pool": "chat" }))],
    );
    let s = serving_service(&parse(pool)).unwrap();
    assert_eq!(s.service["spec"]["selector"], json!({ "instantstart.io/pool": "chat" }));
    check_and_snapshot("service_model_pool", &s);
}

#[test]
fn sglang_routers() {
    let r = sglang_router(&parse(router_base())).unwrap();
    let kinds: Vec<&str> = r.objects().iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"]);
    check_and_snapshot("router_cache_aware", &r);
    let rr = edit(
        router_base(),
        &[
            ("/workers", json!({ "kind": "pool", "pool": "chat" })),
            ("/policy", json!({ "kind": "round_robin" })),
            ("/replicas", json!(2)),
            ("/exposure", json!({ "type": "load_balancer" })),
        ],
    );
    check_and_snapshot("router_round_robin_internal_nlb", &sglang_router(&parse(rr)).unwrap());
}

#[test]
fn keda_autoscalers() {
    let full = edit(
        autoscaler_base(),
        &[
            ("/scale_down_stabilization_seconds", json!(300)),
            (
                "/prometheus/server_address",
                json!("https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1234abcd"),
            ),
            ("/prometheus/aws_region", json!("us-east-1")),
            ("/prometheus/authentication_ref", json!("keda-amp")),
            ("/prometheus/activation_threshold", json!(0.5)),
        ],
    );
    check_and_snapshot("keda_prometheus_amp", &keda_autoscaler(&parse(full)).unwrap());
    let zero = edit(autoscaler_base(), &[("/min_replicas", json!(0)), ("/cooldown_seconds", json!(600))]);
    check_and_snapshot("keda_scale_to_zero", &keda_autoscaler(&parse(zero)).unwrap());
}

#[test]
fn managed_endpoints() {
    let tiered = edit(
        managed_base(),
        &[
            ("/replicas", json!(2)),
            ("/kv_cache", json!({ "l1": true, "l2": { "backend": "tiered_storage" } })),
            ("/routing", json!("prefix_aware")),
            ("/worker/env", json!([{ "name": "HF_HUB_OFFLINE", "value": "1" }])),
            ("/worker/resources", json!({ "cpu": "16", "memory": "64Gi" })),
        ],
    );
    check_and_snapshot("managed_tiered_kv_prefix_routing", &managed_endpoint(&described(tiered)).unwrap());
    let redis = edit(
        managed_base(),
        &[
            ("/model_name", json!("Qwen3-0-6B")),
            ("/worker/gpus", json!(1)),
            ("/model_source/prefetch", json!(true)),
            ("/kv_cache", json!({ "l2": { "backend": "redis", "url": "redis://kv-cache.serving:6379" } })),
            ("/routing", json!("kv_aware")),
            ("/metrics", json!(false)),
        ],
    );
    check_and_snapshot("managed_redis_kv_aware", &managed_endpoint(&described(redis)).unwrap());
}

/// HyperPod managed autoscaling: every group (the default) and two named groups; the NodePool
/// is checked against the upstream `karpenter.sh_nodepools.yaml`.
#[test]
fn karpenter_objects() {
    let all: KarpenterSpec = parse(json!({ "cluster": "demo", "instance_groups": ["cpu", "gpu"], "all_groups": true }));
    check_and_snapshot("karpenter_all_groups", &autoscaling::karpenter_objects(&all));
    let named: KarpenterSpec = parse(json!({ "cluster": "demo", "instance_groups": ["gpu-a"], "all_groups": false }));
    let objects = autoscaling::karpenter_objects(&named);
    check_and_snapshot("karpenter_named_groups", &objects);
    assert_eq!(
        objects.node_pool["spec"]["template"]["spec"]["nodeClassRef"]["name"],
        objects.node_class["metadata"]["name"]
    );
    let broken: Vec<(&str, &Value, &str, Value)> = vec![
        ("NodePool policy enum", &objects.node_pool, "/spec/disruption/consolidationPolicy", s("Always")),
        ("NodePool duration pattern", &objects.node_pool, "/spec/disruption/consolidateAfter", s("5 minutes")),
        ("NodePool unknown field", &objects.node_pool, "/spec/template/spec/nodeClass", json!({})),
        (
            "NodeClass too many groups",
            &objects.node_class,
            "/spec/instanceGroups",
            json!(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]),
        ),
        ("NodeClass unknown field", &objects.node_class, "/spec/subnets", json!([])),
    ];
    for (what, obj, pointer, value) in broken {
        let bad = edit(obj.clone(), &[(pointer, value)]);
        assert!(validator_for(&bad).iter_errors(&bad).next().is_some(), "{what}: {pointer} accepted");
    }
}

// ---------------------------------------------------------------------------------------
// Validation rules
// ---------------------------------------------------------------------------------------

/// The field paths reported for `request`, sorted.
fn fields_of<T: DeserializeOwned + Validate + Describe>(request: Value) -> Vec<String> {
    let params: T = described(request);
    let mut fields: Vec<String> =
        params.check().err().map(|e| e.findings.into_iter().map(|f| f.field).collect()).unwrap_or_default();
    fields.sort();
    fields
}

type Case = (&'static str, Vec<(&'static str, Value)>, &'static [&'static str]);

fn run_table<T: DeserializeOwned + Validate + Describe>(kind: &str, base: fn() -> Value, cases: Vec<Case>) {
    assert_eq!(fields_of::<T>(base()), Vec::<String>::new(), "{kind}: the base request must be valid");
    let mut failures = Vec::new();
    for (name, edits, expected) in cases {
        let got = fields_of::<T>(edit(base(), &edits));
        let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        want.sort();
        if got != want {
            failures.push(format!("{kind} / {name}: expected {want:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

fn s(v: &str) -> Value {
    json!(v)
}

#[test]
fn storage_rules() {
    run_table::<S3StorageParams>(
        "storage",
        storage_base,
        vec![
            ("namespace", vec![("/namespace", s("Bad_NS"))], &["namespace"]),
            ("claim name too long", vec![("/claim_name", json!("c".repeat(64)))], &["claim_name"]),
            ("bucket", vec![("/bucket", s("ab"))], &["bucket"]),
            ("region", vec![("/region", s("useast1"))], &["region"]),
            ("mount path relative", vec![("/mount_path", s("s3"))], &["mount_path"]),
            ("capacity", vec![("/capacity", s("lots"))], &["capacity"]),
            ("prefix without slash", vec![("/prefix", s("team"))], &["prefix"]),
            ("prefix with space", vec![("/prefix", s("a b/"))], &["prefix"]),
            ("every finding at once", vec![("/namespace", s("")), ("/bucket", s("x"))], &["namespace", "bucket"]),
        ],
    );
}

#[test]
fn download_rules() {
    run_table::<ModelDownloadParams>(
        "download",
        download_base,
        vec![
            ("repo id", vec![("/repo_id", s("a/b/c"))], &["repo_id"]),
            ("revision", vec![("/revision", s("../x"))], &["revision"]),
            ("destination absolute", vec![("/destination", s("/abs"))], &["destination"]),
            (
                "token secret",
                vec![("/hf_token", json!({ "name": "Bad", "key": "a b" }))],
                &["hf_token.name", "hf_token.key"],
            ),
            ("storage claim", vec![("/storage", json!({ "claim_name": "" }))], &["storage.claim_name"]),
            ("storage mount path", vec![("/storage", json!({ "mount_path": "/s3/" }))], &["storage.mount_path"]),
            ("image untagged", vec![("/image", s("python"))], &["image"]),
            (
                "requirement is not an option",
                vec![("/hub_requirement", s("--index-url=http://x"))],
                &["hub_requirement"],
            ),
            ("cpu", vec![("/resources/cpu", s("two"))], &["resources.cpu"]),
            ("scratch", vec![("/scratch_size", s("big"))], &["scratch_size"]),
            ("backoff", vec![("/backoff_limit", json!(50))], &["backoff_limit"]),
            ("ttl", vec![("/ttl_seconds_after_finished", json!(10))], &["ttl_seconds_after_finished"]),
            ("deadline", vec![("/active_deadline_seconds", json!(0))], &["active_deadline_seconds"]),
            ("unknown instance type", vec![("/instance_type", s("ml.x9.huge"))], &["instance_type"]),
            ("malformed instance type", vec![("/instance_type", s("p5.48xlarge"))], &["instance_type"]),
        ],
    );
}

fn monitor(extra: Value) -> Value {
    let mut m =
        json!({ "name": "Hang", "log_pattern": ".*step (\\d+).*", "expected_recurring_frequency_seconds": 600 });
    m.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    m
}

#[test]
fn hyperpod_rules() {
    let many: Vec<Value> = (0..21).map(|i| monitor(json!({ "name": format!("m{i}") }))).collect();
    run_table::<HyperPodJobParams>(
        "hyperpod",
        hyperpod_base,
        vec![
            ("name too long", vec![("/job/name", json!("j".repeat(51)))], &["job.name"]),
            ("name not a label", vec![("/job/name", s("Bad"))], &["job.name"]),
            ("namespace", vec![("/job/namespace", s(""))], &["job.namespace"]),
            ("image latest", vec![("/job/image", s("train:latest"))], &["job.image"]),
            ("no GPU", vec![("/job/instance_type", s("ml.m5.xlarge"))], &["job.instance_type"]),
            ("Trainium", vec![("/job/instance_type", s("ml.trn1.32xlarge"))], &["job.instance_type"]),
            ("unknown type", vec![("/job/instance_type", s("ml.p9.96xlarge"))], &["job.instance_type"]),
            ("more GPUs than the type", vec![("/job/gpus_per_node", json!(9))], &["job.gpus_per_node"]),
            ("zero GPUs", vec![("/job/gpus_per_node", json!(0))], &["job.gpus_per_node"]),
            ("zero nodes", vec![("/job/nodes", json!(0))], &["job.nodes"]),
            ("too many nodes", vec![("/job/nodes", json!(5000))], &["job.nodes"]),
            (
                "mlflow arn",
                vec![("/job/mlflow", json!({ "tracking_server_arn": "http://mlflow:5000" }))],
                &["job.mlflow.tracking_server_arn"],
            ),
            (
                "mlflow experiment",
                vec![("/job/mlflow", json!({ "tracking_server_arn": MLFLOW_ARN, "experiment": "" }))],
                &["job.mlflow.experiment"],
            ),
            ("service account", vec![("/job/service_account", s("Bad_SA"))], &["job.service_account"]),
            ("team outside its namespace", vec![("/job/team", s("research"))], &["job.namespace"]),
            ("team name", vec![("/job/team", s("Research"))], &["job.team"]),
            ("priority without a team", vec![("/job/priority", s("training"))], &["job.priority"]),
            ("tiered checkpointing outside default", vec![("/tiered_checkpointing", json!(true))], &["job.namespace"]),
            (
                "tiered checkpointing with a service account of its own",
                vec![
                    ("/tiered_checkpointing", json!(true)),
                    ("/job/namespace", s("default")),
                    ("/job/service_account", s("trainer")),
                ],
                &["job.service_account"],
            ),
            (
                "tiered checkpointing with elastic training",
                vec![
                    ("/tiered_checkpointing", json!(true)),
                    ("/job/namespace", s("default")),
                    ("/resilience/elastic", json!({ "min_replicas": 1, "max_replicas": 4 })),
                ],
                &["tiered_checkpointing"],
            ),
            (
                "reserved env",
                vec![("/job/env", json!([{ "name": "FI_PROVIDER", "value": "tcp" }]))],
                &["job.env[0].name"],
            ),
            (
                "mlflow env is reserved",
                vec![("/job/env", json!([{ "name": "MLFLOW_TRACKING_URI", "value": "x" }]))],
                &["job.env[0].name"],
            ),
            (
                "env value and secret",
                vec![("/job/env", json!([{ "name": "A", "value": "1", "secret": { "name": "s", "key": "k" } }]))],
                &["job.env[0]"],
            ),
            ("env neither", vec![("/job/env", json!([{ "name": "A" }]))], &["job.env[0]"]),
            (
                "env twice",
                vec![("/job/env", json!([{ "name": "A", "value": "1" }, { "name": "A", "value": "2" }]))],
                &["job.env[1].name"],
            ),
            ("env name", vec![("/job/env", json!([{ "name": "1A", "value": "1" }]))], &["job.env[0].name"]),
            (
                "credential as literal",
                vec![("/job/env", json!([{ "name": "WANDB_API_KEY", "value": "k" }]))],
                &["job.env[0].value"],
            ),
            (
                "token as literal",
                vec![("/job/env", json!([{ "name": "hf_token", "value": "hf_x" }]))],
                &["job.env[0].value"],
            ),
            (
                "env secret key",
                vec![("/job/env", json!([{ "name": "A", "secret": { "name": "s", "key": "a/b" } }]))],
                &["job.env[0].secret.key"],
            ),
            ("shm", vec![("/job/shm_size", s("big"))], &["job.shm_size"]),
            ("memory", vec![("/job/resources", json!({ "memory": "1GB" }))], &["job.resources.memory"]),
            ("script escapes the bucket", vec![("/recipe/script", s("../x.py"))], &["recipe.script"]),
            ("script arg", vec![("/recipe/args", json!(["a\nb"]))], &["recipe.args[0]"]),
            (
                "lmf config type",
                vec![("/recipe", json!({ "kind": "llama_factory", "config": "cfg.txt" }))],
                &["recipe.config"],
            ),
            (
                "lmf override key",
                vec![(
                    "/recipe",
                    json!({ "kind": "llama_factory", "config": "c.yaml", "overrides": { "bad key": "v" } }),
                )],
                &["recipe.overrides.bad key"],
            ),
            (
                "swift config twice",
                vec![("/recipe", json!({ "kind": "ms_swift", "config": "c.yaml", "args": ["--config", "x.yaml"] }))],
                &["recipe.args[0]"],
            ),
            (
                "retry budget",
                vec![("/resilience/job_max_retry_count", json!(101))],
                &["resilience.job_max_retry_count"],
            ),
            (
                "window",
                vec![("/resilience/restart_policy", json!({ "eval_period_seconds": 10 }))],
                &["resilience.restart_policy.eval_period_seconds"],
            ),
            (
                "restarts",
                vec![("/resilience/restart_policy", json!({ "restarts_before_full_job_restart": 1000 }))],
                &["resilience.restart_policy.restarts_before_full_job_restart"],
            ),
            (
                "full restarts",
                vec![("/resilience/restart_policy", json!({ "max_full_job_restarts": 1000 }))],
                &["resilience.restart_policy.max_full_job_restarts"],
            ),
            (
                "monitor detects nothing",
                vec![("/resilience/log_monitors", json!([{ "name": "Start", "log_pattern": ".*" }]))],
                &["resilience.log_monitors[0]"],
            ),
            (
                "monitor name",
                vec![("/resilience/log_monitors", json!([monitor(json!({ "name": "bad name" }))]))],
                &["resilience.log_monitors[0].name"],
            ),
            (
                "monitor pattern",
                vec![("/resilience/log_monitors", json!([monitor(json!({ "log_pattern": "" }))]))],
                &["resilience.log_monitors[0].log_pattern"],
            ),
            (
                "monitor stop pattern",
                vec![("/resilience/log_monitors", json!([monitor(json!({ "stop_pattern": "" }))]))],
                &["resilience.log_monitors[0].stop_pattern"],
            ),
            (
                "monitor cutoff",
                vec![("/resilience/log_monitors", json!([monitor(json!({ "expected_start_cutoff_seconds": 0 }))]))],
                &["resilience.log_monitors[0].expected_start_cutoff_seconds"],
            ),
            (
                "monitor frequency",
                vec![(
                    "/resilience/log_monitors",
                    json!([monitor(json!({ "expected_recurring_frequency_seconds": 0 }))]),
                )],
                &["resilience.log_monitors[0].expected_recurring_frequency_seconds"],
            ),
            (
                "metric needs a group",
                vec![(
                    "/resilience/log_monitors",
                    json!([monitor(
                        json!({ "log_pattern": ".*loss.*", "metric": { "threshold": 1, "operator": "gt" } })
                    )]),
                )],
                &["resilience.log_monitors[0].log_pattern"],
            ),
            (
                "metric data points",
                vec![(
                    "/resilience/log_monitors",
                    json!([monitor(
                        json!({ "metric": { "threshold": 1, "operator": "lt", "evaluation_data_points": 0 } })
                    )]),
                )],
                &["resilience.log_monitors[0].metric.evaluation_data_points"],
            ),
            (
                "monitor twice",
                vec![("/resilience/log_monitors", json!([monitor(json!({})), monitor(json!({}))]))],
                &["resilience.log_monitors[1].name"],
            ),
            ("too many monitors", vec![("/resilience/log_monitors", json!(many))], &["resilience.log_monitors"]),
            (
                "elastic min",
                vec![("/resilience/elastic", json!({ "min_replicas": 0, "max_replicas": 4 }))],
                &["resilience.elastic.min_replicas"],
            ),
            (
                "elastic min > max",
                vec![("/resilience/elastic", json!({ "min_replicas": 3, "max_replicas": 2 }))],
                &["resilience.elastic.max_replicas", "resilience.elastic"],
            ),
            (
                "elastic nodes outside",
                vec![("/resilience/elastic", json!({ "min_replicas": 3, "max_replicas": 4 }))],
                &["resilience.elastic"],
            ),
            (
                "elastic step zero",
                vec![(
                    "/resilience/elastic",
                    json!({ "min_replicas": 1, "max_replicas": 4, "replica_increment_step": 0 }),
                )],
                &["resilience.elastic.replica_increment_step"],
            ),
            (
                "elastic step misses nodes",
                vec![(
                    "/resilience/elastic",
                    json!({ "min_replicas": 1, "max_replicas": 5, "replica_increment_step": 2 }),
                )],
                &["resilience.elastic.replica_increment_step"],
            ),
            (
                "elastic step and values",
                vec![(
                    "/resilience/elastic",
                    json!({ "min_replicas": 2, "max_replicas": 4, "replica_increment_step": 2, "replica_discrete_values": [2, 4] }),
                )],
                &["resilience.elastic.replica_discrete_values"],
            ),
            (
                "elastic values order",
                vec![(
                    "/resilience/elastic",
                    json!({ "min_replicas": 2, "max_replicas": 4, "replica_discrete_values": [4, 2] }),
                )],
                &["resilience.elastic.replica_discrete_values"],
            ),
            (
                "elastic values range",
                vec![(
                    "/resilience/elastic",
                    json!({ "min_replicas": 2, "max_replicas": 4, "replica_discrete_values": [2, 8] }),
                )],
                &["resilience.elastic.replica_discrete_values"],
            ),
            (
                "elastic values miss nodes",
                vec![(
                    "/resilience/elastic",
                    json!({ "min_replicas": 1, "max_replicas": 4, "replica_discrete_values": [1, 4] }),
                )],
                &["resilience.elastic.replica_discrete_values"],
            ),
        ],
    );
}

/// A job that asks for managed tiered checkpointing runs as the feature's service account
/// (whose IAM role writes the checkpoints); one that does not keeps the pod's default.
#[test]
fn tiered_checkpointing_runs_as_the_features_service_account() {
    let sa = |p: Value| {
        let job = hyperpod_pytorch_job(&described(p), &TargetCapacity::default()).unwrap().job;
        job.pointer("/spec/replicaSpecs/0/template/spec/serviceAccountName").cloned()
    };
    let on = edit(hyperpod_base(), &[("/tiered_checkpointing", json!(true)), ("/job/namespace", s("default"))]);
    assert_eq!(sa(on), Some(json!("hyperpod-checkpointing")));
    assert_eq!(sa(hyperpod_base()), None);
}

/// Elastic training excludes Spot capacity and managed tiered checkpointing (core rule,
/// applied to the target instance group and cluster features).
#[test]
fn elastic_training_exclusions() {
    let p: HyperPodJobParams =
        described(edit(hyperpod_base(), &[("/resilience/elastic", json!({ "min_replicas": 1, "max_replicas": 4 }))]));
    let fields = |t: TargetCapacity| -> Vec<String> {
        p.check_for(&t).err().map(|e| e.findings.into_iter().map(|f| f.field).collect()).unwrap_or_default()
    };
    assert!(fields(TargetCapacity::default()).is_empty());
    let spot = TargetCapacity { capacity: CapacitySpec::Spot, features: ManagedFeatures::default() };
    assert_eq!(fields(spot.clone()), ["resilience.elastic"]);
    let tiered = ManagedFeatures {
        tiered_checkpointing: Some(TieredCheckpointing { memory_percent: 20 }),
        ..Default::default()
    };
    let both = TargetCapacity { capacity: CapacitySpec::Spot, features: tiered.clone() };
    assert_eq!(fields(both), ["resilience.elastic", "resilience.elastic"]);
    assert!(hyperpod_pytorch_job(&p, &spot).is_err());
    // Not elastic: the same targets are fine.
    let plain: HyperPodJobParams = described(hyperpod_base());
    assert!(plain.check_for(&TargetCapacity { capacity: CapacitySpec::Spot, features: tiered }).is_ok());
}

#[test]
fn ray_rules() {
    run_table::<RayJobParams>(
        "ray",
        ray_base,
        vec![
            ("ray version", vec![("/ray_version", s("latest"))], &["ray_version"]),
            ("entry module", vec![("/recipe/entry_module", s("verl;rm"))], &["recipe.entry_module"]),
            ("config type", vec![("/recipe/config", s("cfg.json"))], &["recipe.config"]),
            ("config path not shell-inert", vec![("/recipe/config", s("my cfg.yaml"))], &["recipe.config"]),
            (
                "override value with space",
                vec![("/recipe/overrides", json!({ "data.train_files": "/s3/a b.parquet" }))],
                &["recipe.overrides.data.train_files"],
            ),
            (
                "override value substitution",
                vec![("/recipe/overrides", json!({ "x": "$(id)" }))],
                &["recipe.overrides.x"],
            ),
            ("override key", vec![("/recipe/overrides", json!({ "bad key!": "1" }))], &["recipe.overrides.bad key!"]),
            (
                "experiment not shell-inert",
                vec![("/job/mlflow", json!({ "tracking_server_arn": MLFLOW_ARN, "experiment": "my exp" }))],
                &["job.mlflow.experiment"],
            ),
            ("ttl", vec![("/ttl_seconds_after_finished", json!(0))], &["ttl_seconds_after_finished"]),
            ("deadline", vec![("/active_deadline_seconds", json!(0))], &["active_deadline_seconds"]),
            ("backoff", vec![("/backoff_limit", json!(11))], &["backoff_limit"]),
            (
                "common rules apply",
                vec![("/job/nodes", json!(0)), ("/job/gpus_per_node", json!(16))],
                &["job.nodes", "job.gpus_per_node"],
            ),
        ],
    );
}

#[test]
fn serving_rules() {
    run_table::<ServingParams>(
        "serving",
        serving_base,
        vec![
            ("name too long", vec![("/name", json!("n".repeat(51)))], &["name"]),
            ("namespace", vec![("/namespace", s("A"))], &["namespace"]),
            ("image untagged", vec![("/image", s("vllm/vllm-openai"))], &["image"]),
            ("vLLM on CPU", vec![("/instance_type", s("ml.m5.xlarge"))], &["instance_type"]),
            ("more GPUs than the type", vec![("/gpus", json!(5))], &["gpus"]),
            ("vLLM without GPU", vec![("/gpus", json!(0))], &["gpus"]),
            ("TP does not divide", vec![("/engine/tensor_parallel_size", json!(3))], &["engine.tensor_parallel_size"]),
            ("TP above GPUs", vec![("/engine/tensor_parallel_size", json!(8))], &["engine.tensor_parallel_size"]),
            ("replicas", vec![("/replicas", json!(0))], &["replicas"]),
            ("port", vec![("/port", json!(0))], &["port"]),
            ("pool", vec![("/pool", s("Pool_A"))], &["pool"]),
            ("reserved env", vec![("/env", json!([{ "name": "HF_HUB_OFFLINE", "value": "0" }]))], &["env[0].name"]),
            (
                "token as literal is reserved and a credential",
                vec![("/env", json!([{ "name": "HF_TOKEN", "value": "hf_x" }]))],
                &["env[0].name", "env[0].value"],
            ),
            ("shm", vec![("/shm_size", s("x"))], &["shm_size"]),
            ("startup timeout", vec![("/startup_timeout_seconds", json!(10))], &["startup_timeout_seconds"]),
            ("service account", vec![("/service_account", s("A"))], &["service_account"]),
            ("token", vec![("/hf_token", json!({ "name": "hf", "key": "" }))], &["hf_token.key"]),
            ("model path", vec![("/engine/model", s("/abs"))], &["engine.model"]),
            ("served name", vec![("/engine/served_model_name", s("a b"))], &["engine.served_model_name"]),
            ("context length", vec![("/engine/max_model_len", json!(0))], &["engine.max_model_len"]),
            ("reserved vLLM flag", vec![("/engine/extra_args", json!(["--port=9000"]))], &["engine.extra_args[0]"]),
            ("reserved vLLM short flag", vec![("/engine/extra_args", json!(["-tp", "2"]))], &["engine.extra_args[0]"]),
            (
                "reserved SGLang flag",
                vec![("/engine", json!({ "kind": "sglang", "model": "m", "extra_args": ["--tp-size", "2"] }))],
                &["engine.extra_args[0]"],
            ),
            (
                "custom health path",
                vec![("/engine", json!({ "kind": "custom", "health_path": "health" }))],
                &["engine.health_path"],
            ),
            (
                "custom argv",
                vec![("/engine", json!({ "kind": "custom", "command": ["a\u{0}"], "args": ["b\u{7}"] }))],
                &["engine.command[0]", "engine.args[0]"],
            ),
            (
                "custom GPUs on CPU type",
                vec![
                    ("/engine", json!({ "kind": "custom" })),
                    ("/instance_type", s("ml.m5.xlarge")),
                    ("/gpus", json!(1)),
                ],
                &["gpus"],
            ),
        ],
    );
}

#[test]
fn service_rules() {
    run_table::<ServiceParams>(
        "service",
        service_base,
        vec![
            ("name", vec![("/name", s("Svc"))], &["name"]),
            ("namespace", vec![("/namespace", s(""))], &["namespace"]),
            ("deployment", vec![("/backends/name", s("A"))], &["backends.name"]),
            ("pool", vec![("/backends", json!({ "kind": "pool", "pool": "" }))], &["backends.pool"]),
            ("port", vec![("/port", json!(0))], &["port"]),
            ("target port", vec![("/target_port", json!(0))], &["target_port"]),
            (
                "internet-facing needs ranges",
                vec![("/exposure", json!({ "type": "load_balancer", "internet_facing": true }))],
                &["exposure.source_ranges"],
            ),
            (
                "CIDR",
                vec![("/exposure", json!({ "type": "load_balancer", "source_ranges": ["10.0.0.0/33", "10.0.0.0/8"] }))],
                &["exposure.source_ranges[0]"],
            ),
            (
                "the whole internet is not a client range",
                vec![(
                    "/exposure",
                    json!({ "type": "load_balancer", "internet_facing": true, "source_ranges": ["0.0.0.0/0", "10.0.0.0/7", "::/0", "2001:db8::/32"] }),
                )],
                &["exposure.source_ranges[0]", "exposure.source_ranges[1]", "exposure.source_ranges[2]"],
            ),
        ],
    );
}

#[test]
fn router_rules() {
    run_table::<SglangRouterParams>(
        "router",
        router_base,
        vec![
            ("name", vec![("/name", json!("r".repeat(51)))], &["name"]),
            ("image", vec![("/image", s("lmsysorg/sglang:latest"))], &["image"]),
            ("namespace", vec![("/namespace", s("Serving"))], &["namespace"]),
            ("workers", vec![("/workers", json!({ "kind": "pool", "pool": "Chat" }))], &["workers.pool"]),
            ("metrics port clashes", vec![("/metrics_port", json!(30000))], &["metrics_port"]),
            ("port", vec![("/port", json!(0))], &["port"]),
            ("worker port", vec![("/worker_port", json!(0))], &["worker_port"]),
            ("replicas", vec![("/replicas", json!(0))], &["replicas"]),
            (
                "cache threshold",
                vec![("/policy", json!({ "kind": "cache_aware", "cache_threshold": 1.5 }))],
                &["policy.cache_threshold"],
            ),
            (
                "balance abs",
                vec![("/policy", json!({ "kind": "cache_aware", "balance_abs_threshold": 0 }))],
                &["policy.balance_abs_threshold"],
            ),
            (
                "balance rel",
                vec![("/policy", json!({ "kind": "cache_aware", "balance_rel_threshold": 0.5 }))],
                &["policy.balance_rel_threshold"],
            ),
            (
                "eviction",
                vec![("/policy", json!({ "kind": "cache_aware", "eviction_interval_secs": 5 }))],
                &["policy.eviction_interval_secs"],
            ),
            (
                "tree",
                vec![("/policy", json!({ "kind": "cache_aware", "max_tree_size": 10 }))],
                &["policy.max_tree_size"],
            ),
            (
                "exposure",
                vec![("/exposure", json!({ "type": "load_balancer", "internet_facing": true }))],
                &["exposure.source_ranges"],
            ),
            ("resources", vec![("/resources", json!({ "cpu": "x" }))], &["resources.cpu"]),
        ],
    );
}

#[test]
fn autoscaler_rules() {
    run_table::<AutoscalerParams>(
        "autoscaler",
        autoscaler_base,
        vec![
            ("min above max", vec![("/min_replicas", json!(9))], &["min_replicas"]),
            ("max zero", vec![("/max_replicas", json!(0)), ("/min_replicas", json!(0))], &["max_replicas"]),
            ("deployment", vec![("/deployment", s("Q"))], &["deployment"]),
            ("polling", vec![("/polling_interval_seconds", json!(0))], &["polling_interval_seconds"]),
            ("cooldown", vec![("/cooldown_seconds", json!(100000))], &["cooldown_seconds"]),
            (
                "stabilization",
                vec![("/scale_down_stabilization_seconds", json!(4000))],
                &["scale_down_stabilization_seconds"],
            ),
            (
                "server address",
                vec![("/prometheus/server_address", s("prometheus:9090"))],
                &["prometheus.server_address"],
            ),
            ("query", vec![("/prometheus/query", s(" "))], &["prometheus.query"]),
            ("threshold", vec![("/prometheus/threshold", json!(0))], &["prometheus.threshold"]),
            ("activation", vec![("/prometheus/activation_threshold", json!(-1))], &["prometheus.activation_threshold"]),
            ("region", vec![("/prometheus/aws_region", s("east"))], &["prometheus.aws_region"]),
            ("auth ref", vec![("/prometheus/authentication_ref", s("A"))], &["prometheus.authentication_ref"]),
        ],
    );
}

#[test]
fn managed_rules() {
    run_table::<ManagedEndpointParams>(
        "managed",
        managed_base,
        vec![
            ("name", vec![("/name", s("Q"))], &["name"]),
            ("namespace", vec![("/namespace", s("-x"))], &["namespace"]),
            ("model name", vec![("/model_name", s("-bad"))], &["model_name"]),
            ("CPU type", vec![("/instance_type", s("ml.c5.4xlarge"))], &["instance_type"]),
            ("GPUs", vec![("/worker/gpus", json!(8))], &["worker.gpus"]),
            ("replicas", vec![("/replicas", json!(0))], &["replicas"]),
            ("bucket", vec![("/model_source/bucket", s("B"))], &["model_source.bucket"]),
            ("region", vec![("/model_source/region", s("x"))], &["model_source.region"]),
            ("location", vec![("/model_source/model_location", s("/m"))], &["model_source.model_location"]),
            ("image", vec![("/worker/image", s("vllm/vllm-openai:latest"))], &["worker.image"]),
            ("port", vec![("/worker/port", json!(0))], &["worker.port"]),
            ("args", vec![("/worker/args", json!(["\u{1b}[0m"]))], &["worker.args[0]"]),
            ("env", vec![("/worker/env", json!([{ "name": "A" }]))], &["worker.env[0]"]),
            ("invocation path", vec![("/invocation_endpoint", s("/v1/chat"))], &["invocation_endpoint"]),
            ("no cache tier", vec![("/kv_cache", json!({ "l1": false }))], &["kv_cache"]),
            (
                "redis url",
                vec![("/kv_cache", json!({ "l2": { "backend": "redis", "url": "http://x" } }))],
                &["kv_cache.l2.url"],
            ),
            ("kv-aware without cache", vec![("/routing", s("kv_aware"))], &["routing"]),
        ],
    );
}

/// Requests are closed: a misspelt field is an error, not a silently ignored option.
#[test]
fn unknown_fields_are_rejected() {
    fn rejects<T: DeserializeOwned>(what: &str, v: Value) {
        assert!(serde_json::from_value::<T>(v).is_err(), "{what} accepted an unknown field");
    }
    rejects::<S3StorageParams>("storage", edit(storage_base(), &[("/buckets", s("x"))]));
    rejects::<ModelDownloadParams>("download", edit(download_base(), &[("/hf_token_value", s("hf_x"))]));
    rejects::<HyperPodJobParams>("hyperpod", edit(hyperpod_base(), &[("/job/gpus", json!(8))]));
    rejects::<HyperPodJobParams>("hyperpod recipe", edit(hyperpod_base(), &[("/recipe/script_args", json!([]))]));
    rejects::<RayJobParams>("ray", edit(ray_base(), &[("/recipe/entrypoint", s("bash x.sh"))]));
    rejects::<ServingParams>("serving", edit(serving_base(), &[("/engine/tp", json!(2))]));
    rejects::<ServiceParams>(
        "service",
        edit(service_base(), &[("/exposure", json!({ "type": "load_balancer", "scheme": "internet-facing" }))]),
    );
    rejects::<SglangRouterParams>(
        "router",
        edit(router_base(), &[("/policy", json!({ "kind": "cache_aware", "threshold": 0.5 }))]),
    );
    rejects::<AutoscalerParams>("autoscaler", edit(autoscaler_base(), &[("/prometheus/metric", s("x"))]));
    rejects::<ManagedEndpointParams>("managed", edit(managed_base(), &[("/kv_cache", json!({ "l3": true }))]));
}

/// Every parameter type has a JSON schema (for the OpenAPI document and MCP tools) that
/// closes its objects.
#[test]
fn parameter_schemas() {
    let schemas = [
        schemars::schema_for!(S3StorageParams),
        schemars::schema_for!(ModelDownloadParams),
        schemars::schema_for!(HyperPodJobParams),
        schemars::schema_for!(RayJobParams),
        schemars::schema_for!(ServingParams),
        schemars::schema_for!(ServiceParams),
        schemars::schema_for!(SglangRouterParams),
        schemars::schema_for!(AutoscalerParams),
        schemars::schema_for!(ManagedEndpointParams),
    ];
    for s in schemas {
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["additionalProperties"], json!(false), "{}", v["title"]);
        compile(&v);
    }
}

/// The schema checks have teeth: a misspelt field, a wrong type or a value outside an enum or
/// pattern, anywhere in a generated object, is reported.
#[test]
fn schemas_reject_broken_manifests() {
    let storage = s3_storage(&parse(storage_base())).unwrap();
    let download = model_download_job(&parse(download_base())).unwrap();
    let hyperpod = hyperpod_pytorch_job(&described(hyperpod_base()), &TargetCapacity::default()).unwrap();
    let ray = ray_job(&described(ray_base())).unwrap();
    let serving = serving_deployment(&described(serving_base())).unwrap();
    let service = serving_service(&parse(service_base())).unwrap();
    let router = sglang_router(&parse(router_base())).unwrap();
    let keda = keda_autoscaler(&parse(autoscaler_base())).unwrap();
    let managed = managed_endpoint(&described(edit(
        managed_base(),
        &[("/kv_cache", json!({ "l2": { "backend": "tiered_storage" } }))],
    )))
    .unwrap();
    let broken: Vec<(&str, &Value, &str, Value)> = vec![
        ("PV unknown field", &storage.persistent_volume, "/spec/csi/volumeHandles", s("x")),
        ("PVC wrong type", &storage.persistent_volume_claim, "/spec/accessModes", s("ReadWriteMany")),
        ("Job container field", &download.job, "/spec/template/spec/containers/0/imagePullPolicyy", s("Always")),
        ("Job metadata field", &download.job, "/metadata/label", json!({})),
        ("HyperPod run policy", &hyperpod.job, "/spec/runPolicy/restartPolicy/maxRestarts", json!(1)),
        ("HyperPod nproc type", &hyperpod.job, "/spec/nprocPerNode", json!(8)),
        (
            "HyperPod pod template",
            &hyperpod.job,
            "/spec/replicaSpecs/0/template/spec/containers/0/resources/limit",
            json!({}),
        ),
        ("RayJob field", &ray.job, "/spec/entrypoints", s("x")),
        (
            "RayJob pod template",
            &ray.job,
            "/spec/rayClusterSpec/headGroupSpec/template/spec/containers/0/envv",
            json!([]),
        ),
        ("RayJob metadata", &ray.job, "/metadata/labelz", json!({})),
        ("Deployment affinity", &serving.deployment, "/spec/template/spec/affinity/nodeAffinity/required", json!({})),
        (
            "Deployment probe type",
            &serving.deployment,
            "/spec/template/spec/containers/0/readinessProbe/periodSeconds",
            s("10"),
        ),
        ("Service port type", &service.service, "/spec/ports/0/port", s("http")),
        ("Role rule field", &router.role, "/rules/0/verb", s("get")),
        ("RoleBinding kind", &router.role_binding, "/roleRef/kind", s("Group")),
        ("ScaledObject metadata value type", &keda.scaled_object, "/spec/triggers/0/metadata/threshold", json!(16)),
        ("ScaledObject field", &keda.scaled_object, "/spec/maxReplicas", json!(3)),
        (
            "IEC enum",
            &managed.endpoint,
            "/spec/intelligentRoutingSpec",
            json!({ "enabled": true, "routingStrategy": "prefix_aware" }),
        ),
        ("IEC pattern", &managed.endpoint, "/spec/kvCacheSpec/l2CacheSpec/l2CacheBackend", s("memcached")),
        ("IEC worker field", &managed.endpoint, "/spec/worker/ports", json!([])),
    ];
    for (what, obj, pointer, value) in broken {
        let bad = edit(obj.clone(), &[(pointer, value)]);
        assert!(validator_for(&bad).iter_errors(&bad).next().is_some(), "{what}: {pointer} accepted");
        assert!(validator_for(obj).iter_errors(obj).next().is_none(), "{what}: original rejected");
    }
}

/// Every object of the endpoint workloads `POST /api/clusters/{cluster}/endpoints` renders,
/// schema-checked and snapshotted.
#[test]
fn endpoint_workloads() {
    use instantstart_recipes::inference::endpoint::render;
    let check = |name: &str, body: Value| {
        let rendered = render(&body, Some(&described_context())).unwrap();
        let objects: Vec<Value> = rendered.objects.iter().map(|o| o.0.clone()).collect();
        assert_valid(&objects);
        for o in &objects {
            assert_eq!(o["metadata"]["labels"]["app.kubernetes.io/instance"], rendered.name, "{}", o["kind"]);
        }
        insta::with_settings!({ sort_maps => true, prepend_module_to_snapshot => false }, {
            insta::assert_yaml_snapshot!(name, (objects, &rendered.ready));
        });
    };
    check(
        "endpoint_sglang_router_keda_nlb",
        json!({
            "route": "self_managed", "name": "chat", "namespace": "serving", "image": "lmsysorg/sglang:v0.5.2",
            "instance_type": "ml.g5.12xlarge", "gpus": 4, "replicas": 2,
            "engine": { "kind": "sglang", "model": "models/Qwen/Qwen3-8B", "tensor_parallel_size": 4 },
            "exposure": { "type": "load_balancer", "internet_facing": true, "source_ranges": ["203.0.113.0/24"] },
            "router": true,
            "router_options": { "policy": { "kind": "cache_aware", "cache_threshold": 0.3 }, "replicas": 2 },
            "autoscaling": { "min_replicas": 1, "max_replicas": 8, "cooldown_seconds": 120 },
        }),
    );
    check(
        "endpoint_vllm_pool",
        json!({
            "route": "self_managed", "name": "warm", "namespace": "default", "image": "vllm/vllm-openai:v0.11.0",
            "instance_type": "ml.g5.2xlarge", "replicas": 3, "pool": "warm",
            "engine": { "kind": "vllm", "model": "models/Qwen/Qwen3-0.6B", "served_model_name": "qwen" },
        }),
    );
    check(
        "endpoint_managed",
        json!({
            "route": "managed", "name": "qwen", "namespace": "default", "instance_type": "ml.g5.2xlarge",
            "model_source": { "bucket": "demo-bucket", "region": "us-east-1", "model_location": "models/qwen" },
            "worker": { "image": "vllm/vllm-openai:v0.11.0", "args": ["--model", "/opt/ml/model"] },
            "kv_cache": { "l1": true }, "routing": "prefix_aware",
        }),
    );
}

// ---------------------------------------------------------------------------------------
// Kueue (task governance): what the admission read reads and what the simulator serves
// ---------------------------------------------------------------------------------------

/// The schema at `path` (`a.b[].c`) of a CRD's `openAPIV3Schema`, if the CRD has it.
fn schema_at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let mut at = schema;
    for seg in path.split('.') {
        let (name, item) = match seg.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (seg, false),
        };
        at = at.get("properties")?.get(name)?;
        if item {
            assert_eq!(at["type"], "array", "{path}: {name} is not a list");
            at = at.get("items")?;
        }
    }
    Some(at)
}

/// Every field path the admission read (`instantstart_core::workload::admission`) reads exists
/// in Kueue's CRD at `v1beta1`.
#[test]
fn the_admission_read_reads_only_fields_kueue_has() {
    use instantstart_core::workload::admission::KUEUE_FIELDS_READ;
    for (kind, path) in KUEUE_FIELDS_READ {
        let crd: Value = serde_norway::from_str(&read(&kueue_crd_file(kind))).unwrap();
        let v = crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == "v1beta1").unwrap();
        assert_eq!(v["served"], true, "{kind} v1beta1 is served by Kueue v0.19.2");
        let schema = &v["schema"]["openAPIV3Schema"];
        assert!(schema_at(schema, path).is_some(), "Kueue's {kind} has no field {path}");
    }
    // The walk is not vacuous: a misspelt field is not found.
    let crd: Value = serde_norway::from_str(&read(&kueue_crd_file("Workload"))).unwrap();
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert!(schema_at(schema, "status.admission.podSetAssignment[].resourceUsage").is_none());
}

/// Kueue's CEL rule the JSON schema cannot say: a resource group's flavors each list as many
/// resources as the group covers.
fn assert_resource_groups_are_consistent(cq: &Value) {
    for g in cq["spec"]["resourceGroups"].as_array().into_iter().flatten() {
        let covered = g["coveredResources"].as_array().unwrap();
        for f in g["flavors"].as_array().unwrap() {
            let names: Vec<&Value> = f["resources"].as_array().unwrap().iter().map(|r| &r["name"]).collect();
            assert_eq!(names, covered.iter().collect::<Vec<_>>(), "{cq:#}");
        }
    }
}

/// The Kueue objects the simulated task governance add-on serves (Workloads queued, admitted,
/// preempted and finished; the teams' ClusterQueues and LocalQueues; the WorkloadPriorityClasses
/// and ResourceFlavors) are accepted by Kueue's CRDs with nothing pruned, and the jobs the
/// recipe renders for a team carry the labels the add-on reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kueue_objects_the_simulator_serves_match_kueues_crds() {
    use instantstart_core::engine::{Engine, EngineConfig, Outcome};
    use instantstart_core::operation::{Actor, Face, OperationKind, OperationStatus};
    use instantstart_core::provider::KubeObject;
    use instantstart_core::provider::{KubeApi, KubeTarget, ListParams};
    use instantstart_core::store::Store;
    use instantstart_core::workload::admission::{AdmissionState, admission_of};

    let dir = tempfile::tempdir().unwrap();
    let sim = instantstart_sim::SimCloud::new(instantstart_sim::SimConfig::with_speed(2000.0).seed(5)).unwrap();
    let store: Arc<dyn Store> = Arc::new(instantstart_store::SqliteStore::open(&dir.path().join("db.sqlite")).unwrap());
    let workflows = instantstart_core::workflow::all(Arc::new(sim.clone()), Arc::new(sim.clone()), store.clone(), None);
    let engine = Engine::new(store, workflows, EngineConfig::scaled(2000.0));
    let run = |kind: OperationKind, req: Value| {
        let engine = &engine;
        async move {
            let actor = Actor { face: Face::Api, principal: "test".into() };
            let Outcome::Submitted(s) = engine.submit_checked(kind, &req, actor, None).await.unwrap() else {
                panic!("{kind:?}: no operation");
            };
            let op = engine.wait(&s.operation.id, std::time::Duration::from_secs(60)).await.unwrap();
            assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
        }
    };
    // 2 × ml.g5.12xlarge (4 GPUs each); research and prod are guaranteed one instance each.
    run(
        OperationKind::CreateCluster,
        json!({ "name": "demo", "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"],
                "hyperpod": { "instance_groups": [
                    { "name": "gpu", "instance_type": "ml.g5.12xlarge", "count": 2, "availability_zone": "us-east-1a" }] } }),
    )
    .await;
    run(
        OperationKind::SetGovernance,
        json!({ "cluster": "demo", "governance": {
            "priority_classes": [{ "name": "inference", "weight": 100 }, { "name": "training", "weight": 50 }],
            "teams": [
                { "name": "research", "quotas": [{ "instance_type": "ml.g5.12xlarge", "count": 1 }], "borrow_limit": 100 },
                { "name": "prod", "quotas": [{ "instance_type": "ml.g5.12xlarge", "accelerators": 4 }], "sharing": "Lend" }] } }),
    )
    .await;

    let target = KubeTarget::new("us-east-1", "demo");
    // One-node jobs rendered by the recipe: 4 GPUs each.
    let submit = |name: &'static str, team: &'static str, seconds: u32| {
        let (sim, target) = (&sim, &target);
        async move {
            let req = edit(
                hyperpod_base(),
                &[
                    ("/job/name", json!(name)),
                    ("/job/namespace", json!(format!("hyperpod-ns-{team}"))),
                    ("/job/instance_type", json!("ml.g5.12xlarge")),
                    ("/job/nodes", json!(1)),
                    ("/job/team", json!(team)),
                    ("/job/priority", json!("training")),
                    ("/job/env", json!([{ "name": "SIM_DURATION_SECONDS", "value": seconds.to_string() }])),
                ],
            );
            let set = hyperpod_pytorch_job(&described(req), &TargetCapacity::default()).unwrap();
            let objects: Vec<Value> = set.objects().into_iter().cloned().collect();
            assert_valid(&objects);
            for o in objects {
                sim.apply(target, &KubeObject(o)).await.unwrap();
            }
        }
    };
    submit("done", "research", 1).await;
    sim.advance(std::time::Duration::from_secs(600));
    submit("r1", "research", 10_000_000).await; // research's own instance
    submit("r2", "research", 10_000_000).await; // borrows prod's idle one
    submit("r3", "research", 10_000_000).await; // waits: nothing left
    submit("p1", "prod", 10_000_000).await; // prod reclaims: r2 is evicted

    let list = |kind: &'static str| {
        let (sim, target) = (&sim, &target);
        async move {
            let p = ListParams {
                api_version: "kueue.x-k8s.io/v1beta1".into(),
                kind: kind.into(),
                namespace: None,
                labels: vec![],
            };
            sim.list(target, &p).await.unwrap()
        }
    };
    let workloads = list("Workload").await;
    let cluster_queues = list("ClusterQueue").await;
    let jobs = {
        let p = ListParams {
            api_version: "sagemaker.amazonaws.com/v1".into(),
            kind: "HyperPodPyTorchJob".into(),
            namespace: None,
            labels: vec![],
        };
        sim.list(&target, &p).await.unwrap()
    };
    let mut states: Vec<(String, AdmissionState)> = jobs
        .iter()
        .map(|j| {
            let a = admission_of(j, &workloads, &cluster_queues).unwrap();
            (j.0["metadata"]["name"].as_str().unwrap().to_string(), a.state)
        })
        .collect();
    states.sort_by(|a, b| a.0.cmp(&b.0));
    let expected = [
        ("done", AdmissionState::Finished),
        ("p1", AdmissionState::Admitted),
        ("r1", AdmissionState::Admitted),
        ("r2", AdmissionState::Preempted),
        ("r3", AdmissionState::Queued),
    ];
    assert_eq!(states, expected.map(|(n, s)| (n.to_string(), s)));

    let mut seen = Vec::new();
    for kind in ["Workload", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "ResourceFlavor"] {
        let objects = list(kind).await;
        assert!(!objects.is_empty(), "no {kind}");
        for o in &objects {
            let name = format!("{kind} {}", o.0["metadata"]["name"]);
            assert_no_nulls(&o.0, &name);
            let errors: Vec<String> =
                validator_for(&o.0).iter_errors(&o.0).map(|e| format!("{}: {e}", e.instance_path())).collect();
            assert!(errors.is_empty(), "{name} does not match Kueue's CRD:\n{}\n{:#}", errors.join("\n"), o.0);
            if kind == "ClusterQueue" {
                assert_resource_groups_are_consistent(&o.0);
            }
            seen.push(o.0["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    // The names the add-on gives them (AWS's task governance CLI page; the HyperPod CLI).
    for name in [
        "hyperpod-ns-research-clusterqueue",
        "hyperpod-ns-prod-clusterqueue",
        "hyperpod-ns-research-localqueue",
        "hyperpod-ns-prod-localqueue",
        "training-priority",
        "inference-priority",
        "ml.g5.12xlarge",
    ] {
        assert!(seen.iter().any(|s| s == name), "no Kueue object {name}: {seen:?}");
    }
}

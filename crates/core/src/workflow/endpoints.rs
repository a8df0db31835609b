//! Inference endpoints and model pools, read from the cluster and changed through operations.
//!
//! Deploying, updating and deleting an endpoint are the generic workload workflows
//! ([`super::workloads`], kinds `deploy_endpoint`, `update_endpoint`, `delete_endpoint`); the
//! renderer puts the request an endpoint was deployed with on its primary object (annotation
//! [`ANNOTATION_ENDPOINT_REQUEST`] on the serving Deployment or the `InferenceEndpointConfig`),
//! so the cluster itself says what each endpoint is (kubectl shows it) and an update starts
//! from it. This module adds:
//!
//! - the views: [`list_endpoints`], [`endpoint_detail`], [`list_pools`], and [`chat_target`]
//!   (the Service and port a chat request goes to through the API server's service proxy);
//! - [`plan_update`]: the explicit diff of `PATCH {replicas?, autoscaling?}` against the live
//!   objects (an empty plan: nothing is recorded, nothing is called) and the full request the
//!   `update_endpoint` operation applies. `autoscaling` has merge-patch semantics: absent is
//!   unchanged, an object adds or changes the KEDA bounds, `null` removes autoscaling — the
//!   request loses its `autoscaling`, so the update deletes the ScaledObject (see
//!   [`super::workloads`]: an update removes what the rendering no longer has) before the
//!   Deployment is applied with a fixed `replicas`: the patch's, else the count the Deployment
//!   has when the diff is made, shown in the plan as `replicas: "set by autoscaling (N now)" ->
//!   N` so the user sees where it stays;
//! - [`AssignPoolWorkerWorkflow`] (`assign_pool_worker`): moves a warm worker of a model pool to
//!   another endpoint (or makes it idle) by changing its `instantstart.io/pool` label — the
//!   label is not part of any Deployment selector, so the pod keeps running (same uid).
//!
//! **Foreign endpoints.** Besides InstantStart's endpoints the views list what serves models
//! in the cluster that InstantStart did not create (`foreign: true`, read-only): every
//! `InferenceEndpointConfig` and `JumpStartModel` (`inference.sagemaker.aws.amazon.com/v1`, the
//! HyperPod inference operator) without `app.kubernetes.io/managed-by=instantstart`, and every
//! top-level Deployment (no owner) without it whose containers run a known model server image
//! ([`MODEL_SERVER_IMAGES`]: vLLM, SGLang, TGI, Triton, …) — other Deployments are not
//! endpoints. Their pods are those of the operator's `app=<name>` label or the Deployment's
//! selector. A change (update, delete) of a foreign endpoint is refused with 422 before anything
//! is recorded ([`crate::workload::foreign_refusal`]).
//!
//! A model pool is the set of workers an endpoint deployed with `pool: <pool>` runs; the
//! endpoint's Service selects `instantstart.io/pool=<pool>`. A worker serves the pool endpoint
//! whose pool its label names; an empty label value means idle (no Service selects it).

use super::decode;
use crate::diff::Plan;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::names;
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::Store;
use crate::validate::{Findings, ValidationError};
use crate::workload::{ObjectCondition, WorkloadKind, WorkloadPod, WorkloadRequest, workload_target};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use crate::labels::{ANNOTATION_ENDPOINT_REQUEST, LABEL_POOL, LABEL_ROUTE};
use crate::labels::{LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY};
/// How long a chat request may take.
pub const CHAT_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest chat request body.
pub const CHAT_MAX_REQUEST_BYTES: usize = 1 << 20;
/// Largest chat answer.
pub const CHAT_MAX_RESPONSE_BYTES: usize = PROXY_MAX_RESPONSE_BYTES;
/// Port of the Service in front of every endpoint.
pub const SERVICE_PORT: u16 = 80;

/// Desired and ready replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointReplicas {
    pub desired: u32,
    pub ready: u32,
}

/// KEDA autoscaling of an endpoint, as applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointAutoscaling {
    pub min: u32,
    pub max: u32,
    pub cooldown_seconds: u32,
    /// The Prometheus query the replicas follow.
    pub metric: String,
}

/// One inference endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointSummary {
    pub name: String,
    pub namespace: String,
    /// `self_managed` or `managed`.
    pub route: String,
    /// `vllm`, `sglang`, `custom`, `managed` (the HyperPod inference operator's
    /// InferenceEndpointConfig) or `jumpstart` (a foreign JumpStartModel).
    pub engine: String,
    /// The model: its directory in the bucket (or S3 location), or the image for custom engines.
    pub model: String,
    /// The model name clients send (`model` of a chat request).
    pub served_model: String,
    pub ready: bool,
    pub replicas: EndpointReplicas,
    /// How clients reach it: the load balancer's address, or the cluster-internal DNS name;
    /// `null` while a load balancer is being provisioned.
    pub url: Option<String>,
    /// `cluster_ip`, `load_balancer`, `model_pool` or `managed`.
    pub exposure: String,
    pub pool: Option<String>,
    pub router: bool,
    pub autoscaling: Option<EndpointAutoscaling>,
    pub created_at: Option<String>,
    /// `true` when InstantStart did not create the endpoint (it lacks the
    /// `app.kubernetes.io/managed-by=instantstart` label): it can be read but every change is
    /// refused with 422; manage it with the tool that created it.
    #[serde(default)]
    pub foreign: bool,
}

/// One endpoint in detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EndpointDetail {
    #[serde(flatten)]
    pub summary: EndpointSummary,
    pub pods: Vec<WorkloadPod>,
    /// Conditions of the primary object (Deployment or InferenceEndpointConfig).
    pub conditions: Vec<ObjectCondition>,
    /// The request the endpoint was deployed with (or last updated to).
    pub request: Option<Value>,
    /// The volumes its pods mount, read from its objects.
    pub volumes: Vec<crate::workload::MountedVolume>,
    /// The endpoint's objects as the cluster has them.
    pub manifest: Vec<KubeObject>,
}

/// A warm worker of a model pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PoolWorker {
    pub pod: String,
    pub namespace: String,
    pub node: Option<String>,
    pub ready: bool,
    /// The endpoint whose Service selects the worker now; `null` when idle.
    pub serving: Option<String>,
    /// The endpoint that runs the worker (its Deployment).
    pub endpoint: String,
    pub uid: Option<String>,
}

/// A model pool and its workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PoolSummary {
    pub pool: String,
    pub workers: Vec<PoolWorker>,
}

/// Where a chat request goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ChatTarget {
    pub namespace: String,
    pub service: String,
    pub port: u16,
    pub path: String,
    pub ready: bool,
}

/// Only the autoscaling fields the user changed.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AutoscalingPatch {
    #[serde(default, alias = "min", skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    #[serde(default, alias = "max", skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_seconds: Option<u32>,
}

/// `PATCH /api/clusters/{cluster}/endpoints/{ep}`: only the fields the user changed, with
/// JSON merge-patch semantics (RFC 7396) for `autoscaling`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointPatch {
    /// A fixed replica count. Refused while the endpoint autoscales, unless the same patch
    /// removes autoscaling (`"autoscaling": null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// KEDA autoscaling. Absent: unchanged. An object: add autoscaling (`min_replicas` and
    /// `max_replicas` required) or change the fields given. `null`: remove it — the
    /// ScaledObject is deleted and the Deployment keeps a fixed replica count, `replicas` if
    /// given, else the count it has at that moment (read from the cluster; the plan shows it).
    /// Removing autoscaling from an endpoint without any is `no_change`.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<AutoscalingPatch>")]
    pub autoscaling: Option<Option<AutoscalingPatch>>,
}

impl EndpointPatch {
    /// Whether the patch removes autoscaling (`"autoscaling": null`).
    pub fn removes_autoscaling(&self) -> bool {
        matches!(self.autoscaling, Some(None))
    }
}

/// Deserializes a field that is present: `null` → `Some(None)`, a value → `Some(Some(v))`.
/// With `#[serde(default)]` an absent field stays `None`, so the three merge-patch cases
/// (absent = unchanged, `null` = remove, a value = set) stay apart.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

fn s_at<'a>(v: &'a Value, p: &str) -> Option<&'a str> {
    v.pointer(p).and_then(Value::as_str)
}

fn u32_at(v: &Value, p: &str) -> Option<u32> {
    v.pointer(p).and_then(|x| x.as_u64().or_else(|| x.as_str().and_then(|s| s.parse().ok()))).map(|x| x as u32)
}

/// The Kubernetes target of a registered cluster ([`crate::api::clusters::resolve`]: 404 when
/// unknown).
pub fn kube_target_of(store: &dyn Store, cluster: &str) -> Result<KubeTarget, EngineError> {
    Ok(crate::api::clusters::resolve(store, cluster)?.kube)
}

async fn list_kind(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    api: &str,
    kind: &str,
) -> Result<Vec<KubeObject>, ProviderError> {
    let params = ListParams {
        api_version: api.into(),
        kind: kind.into(),
        namespace: None,
        labels: vec![(LABEL_MANAGED_BY.into(), "instantstart".into())],
    };
    match kube.list(target, &params).await {
        Ok(v) => Ok(v),
        // A CRD that is not installed lists nothing.
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(e),
    }
}

/// Everything of one endpoint the views need.
struct Endpoint {
    name: String,
    namespace: String,
    request: Option<Value>,
    primary: KubeObject,
    objects: Vec<KubeObject>,
    /// Not created by InstantStart (see the module docs).
    foreign: bool,
}

impl Endpoint {
    fn route(&self) -> &str {
        if self.foreign {
            return if self.managed() { "managed" } else { "self_managed" };
        }
        self.primary.label(LABEL_ROUTE).unwrap_or("self_managed")
    }

    fn kind(&self) -> &str {
        s_at(&self.primary.0, "/kind").unwrap_or_default()
    }

    /// Run by the HyperPod inference operator (an InferenceEndpointConfig or JumpStartModel).
    fn managed(&self) -> bool {
        self.kind() != "Deployment"
    }

    fn find(&self, kind: &str, name: &str) -> Option<&KubeObject> {
        self.objects.iter().find(|o| s_at(&o.0, "/kind") == Some(kind) && s_at(&o.0, "/metadata/name") == Some(name))
    }

    fn req(&self, p: &str) -> Option<&Value> {
        self.request.as_ref().and_then(|r| r.pointer(p))
    }

    fn pool(&self) -> Option<String> {
        self.req("/pool").and_then(Value::as_str).map(str::to_string)
    }

    fn router_name(&self) -> String {
        format!("{}-router", self.name)
    }

    fn has_router(&self) -> bool {
        self.find("Deployment", &self.router_name()).is_some()
    }

    fn scaled_object(&self) -> Option<&KubeObject> {
        self.find("ScaledObject", &self.name)
    }

    fn chat_service(&self) -> String {
        if self.has_router() { self.router_name() } else { self.name.clone() }
    }

    fn ready(&self) -> bool {
        let deployment_ready = |o: &KubeObject| {
            let want = u32_at(&o.0, "/status/replicas").unwrap_or(0).max(1);
            u32_at(&o.0, "/status/availableReplicas").unwrap_or(0) >= want
        };
        if self.managed() {
            return s_at(&self.primary.0, "/status/state") == Some("DeploymentComplete");
        }
        deployment_ready(&self.primary) && self.find("Deployment", &self.router_name()).is_none_or(deployment_ready)
    }

    fn summary(&self) -> EndpointSummary {
        let p = &self.primary.0;
        let (engine, model, served) = if self.kind() == JUMPSTART_MODEL.1 {
            let model = s_at(p, "/spec/model/modelId").unwrap_or_default().to_string();
            ("jumpstart".to_string(), model.clone(), model)
        } else if self.managed() {
            let model = s_at(p, "/spec/modelSourceConfig/modelLocation").unwrap_or_default().to_string();
            ("managed".to_string(), model, s_at(p, "/spec/modelName").unwrap_or(&self.name).to_string())
        } else if self.foreign {
            let image = s_at(p, "/spec/template/spec/containers/0/image").unwrap_or_default();
            let engine = ["vllm", "sglang"].into_iter().find(|e| image.contains(e)).unwrap_or("custom");
            (engine.to_string(), image.to_string(), self.name.clone())
        } else {
            let kind = self.req("/engine/kind").and_then(Value::as_str).unwrap_or("custom").to_string();
            let model = self
                .req("/engine/model")
                .and_then(Value::as_str)
                .or_else(|| s_at(p, "/spec/template/spec/containers/0/image"))
                .unwrap_or_default()
                .to_string();
            let served =
                self.req("/engine/served_model_name").and_then(Value::as_str).unwrap_or(&self.name).to_string();
            (kind, model, served)
        };
        let (desired, ready) = if self.managed() {
            (
                u32_at(p, "/spec/replicas").unwrap_or(1),
                u32_at(p, "/status/deploymentStatus/status/readyReplicas").unwrap_or(0),
            )
        } else {
            let desired = if self.scaled_object().is_some() {
                u32_at(p, "/status/replicas").unwrap_or(0)
            } else {
                u32_at(p, "/spec/replicas").unwrap_or(1)
            };
            (desired, u32_at(p, "/status/readyReplicas").unwrap_or(0))
        };
        let svc = self.find("Service", &self.chat_service());
        let lb = svc.is_some_and(|s| s_at(&s.0, "/spec/type") == Some("LoadBalancer"));
        let url = match svc {
            Some(s) if lb => s_at(&s.0, "/status/loadBalancer/ingress/0/hostname")
                .or_else(|| s_at(&s.0, "/status/loadBalancer/ingress/0/ip"))
                .map(|h| format!("http://{h}")),
            Some(s) => Some(format!(
                "http://{}.{}.svc.cluster.local{}",
                s_at(&s.0, "/metadata/name").unwrap_or_default(),
                self.namespace,
                if SERVICE_PORT == 80 { String::new() } else { format!(":{SERVICE_PORT}") }
            )),
            None => None,
        };
        let exposure = if self.managed() {
            "managed"
        } else if lb {
            "load_balancer"
        } else if self.pool().is_some() {
            "model_pool"
        } else {
            "cluster_ip"
        };
        let autoscaling = self.scaled_object().map(|so| EndpointAutoscaling {
            min: u32_at(&so.0, "/spec/minReplicaCount").unwrap_or(0),
            max: u32_at(&so.0, "/spec/maxReplicaCount").unwrap_or(100),
            cooldown_seconds: u32_at(&so.0, "/spec/cooldownPeriod").unwrap_or(300),
            metric: s_at(&so.0, "/spec/triggers/0/metadata/query").unwrap_or_default().to_string(),
        });
        EndpointSummary {
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            route: self.route().to_string(),
            engine,
            model,
            served_model: served,
            ready: self.ready(),
            replicas: EndpointReplicas { desired, ready },
            url,
            exposure: exposure.into(),
            pool: self.pool(),
            router: self.has_router(),
            autoscaling,
            created_at: s_at(p, "/metadata/creationTimestamp").map(str::to_string),
            foreign: self.foreign,
        }
    }
}

const ENDPOINT_TYPES: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig"),
    ("v1", "Service"),
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
];

/// `apiVersion`/`kind` of the HyperPod inference operator's endpoints.
pub const INFERENCE_ENDPOINT_CONFIG: (&str, &str) =
    ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig");
/// `apiVersion`/`kind` of the HyperPod inference operator's JumpStart deployments.
pub const JUMPSTART_MODEL: (&str, &str) = ("inference.sagemaker.aws.amazon.com/v1", "JumpStartModel");
/// Container image names of model servers: a foreign Deployment running one is an endpoint.
pub const MODEL_SERVER_IMAGES: &[&str] = &[
    "vllm",
    "sglang",
    "text-generation-inference",
    "tritonserver",
    "lmdeploy",
    "tensorrt-llm",
    "djl-inference",
    "ollama",
];

/// Whether a Deployment runs a model server ([`MODEL_SERVER_IMAGES`]).
fn serves_models(deployment: &KubeObject) -> bool {
    deployment.0.pointer("/spec/template/spec/containers").and_then(Value::as_array).is_some_and(|cs| {
        cs.iter().filter_map(|c| c.get("image").and_then(Value::as_str)).any(|image| {
            let repo = image.rsplit('/').next().unwrap_or(image).split([':', '@']).next().unwrap_or_default();
            MODEL_SERVER_IMAGES.iter().any(|m| repo.contains(m))
        })
    })
}

async fn list_all(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    (api, kind): (&str, &str),
) -> Result<Vec<KubeObject>, ProviderError> {
    let params = ListParams { api_version: api.into(), kind: kind.into(), namespace: None, labels: vec![] };
    match kube.list(target, &params).await {
        Ok(v) => Ok(v),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(e),
    }
}

/// The endpoints InstantStart did not create (see the module docs), with the Service of the
/// same name in front of a Deployment when there is one.
async fn read_foreign_endpoints(kube: &dyn KubeApi, target: &KubeTarget) -> Result<Vec<Endpoint>, ProviderError> {
    let foreign = |o: &KubeObject| !crate::workload::is_ours(o) && o.0.pointer("/metadata/ownerReferences").is_none();
    let key = |o: &KubeObject| {
        (
            s_at(&o.0, "/metadata/namespace").unwrap_or("default").to_string(),
            s_at(&o.0, "/metadata/name").unwrap_or_default().to_string(),
        )
    };
    let mut operator_objects = Vec::new();
    for kind in [INFERENCE_ENDPOINT_CONFIG, JUMPSTART_MODEL] {
        operator_objects.extend(list_all(kube, target, kind).await?);
    }
    // The Deployment the inference operator runs for one of its objects is that endpoint, not another.
    let operator_names: Vec<(String, String)> = operator_objects.iter().map(key).collect();
    let mut primaries: Vec<KubeObject> = operator_objects.into_iter().filter(foreign).collect();
    let deployments: Vec<KubeObject> = list_all(kube, target, ("apps/v1", "Deployment"))
        .await?
        .into_iter()
        .filter(|d| foreign(d) && serves_models(d) && !operator_names.contains(&key(d)))
        .collect();
    let services = if deployments.is_empty() { vec![] } else { list_all(kube, target, ("v1", "Service")).await? };
    primaries.extend(deployments);
    Ok(primaries
        .into_iter()
        .filter_map(|primary| {
            let name = s_at(&primary.0, "/metadata/name")?.to_string();
            let namespace = s_at(&primary.0, "/metadata/namespace").unwrap_or("default").to_string();
            let mut objects = vec![primary.clone()];
            if s_at(&primary.0, "/kind") == Some("Deployment") {
                objects.extend(
                    services
                        .iter()
                        .filter(|s| {
                            s_at(&s.0, "/metadata/name") == Some(name.as_str())
                                && s_at(&s.0, "/metadata/namespace").unwrap_or("default") == namespace
                        })
                        .cloned(),
                );
            }
            Some(Endpoint { name, namespace, request: None, primary, objects, foreign: true })
        })
        .collect())
}

/// Whether `namespace/name` is a foreign endpoint (see the module docs).
pub async fn is_foreign_endpoint(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    namespace: &str,
    name: &str,
) -> Result<bool, ProviderError> {
    Ok(read_foreign_endpoints(kube, target).await?.iter().any(|e| e.name == name && e.namespace == namespace))
}

async fn read_endpoints(kube: &dyn KubeApi, target: &KubeTarget) -> Result<Vec<Endpoint>, ProviderError> {
    let mut all = Vec::new();
    for (api, kind) in ENDPOINT_TYPES {
        all.extend(list_kind(kube, target, api, kind).await?.into_iter().filter(|o| o.label(LABEL_ROUTE).is_some()));
    }
    let mut out = Vec::new();
    for primary in all
        .iter()
        .filter(|o| o.0.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_ENDPOINT_REQUEST)).is_some())
    {
        let Some(name) = primary.label(LABEL_INSTANCE).map(str::to_string) else { continue };
        let namespace = s_at(&primary.0, "/metadata/namespace").unwrap_or("default").to_string();
        let request =
            s_at(&primary.0, &format!("/metadata/annotations/{}", ANNOTATION_ENDPOINT_REQUEST.replace('/', "~1")))
                .and_then(|s| serde_json::from_str(s).ok());
        let objects: Vec<KubeObject> = all
            .iter()
            .filter(|o| o.label(LABEL_INSTANCE) == Some(name.as_str()))
            .filter(|o| s_at(&o.0, "/metadata/namespace").unwrap_or("default") == namespace)
            .cloned()
            .collect();
        out.push(Endpoint { name, namespace, request, primary: primary.clone(), objects, foreign: false });
    }
    out.extend(read_foreign_endpoints(kube, target).await?);
    out.sort_by(|a, b| (&a.namespace, &a.name, a.foreign).cmp(&(&b.namespace, &b.name, b.foreign)));
    Ok(out)
}

/// Every endpoint of the cluster: InstantStart's and foreign ones (see the module docs).
pub async fn list_endpoints(kube: &dyn KubeApi, target: &KubeTarget) -> Result<Vec<EndpointSummary>, ProviderError> {
    Ok(read_endpoints(kube, target).await?.iter().map(Endpoint::summary).collect())
}

/// [`list_endpoints`] as `access` may see it: only endpoints in its namespaces
/// ([`crate::kube_access::KubeAccess::sees`]).
pub async fn list_endpoints_as(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    access: &crate::kube_access::KubeAccess,
) -> Result<Vec<EndpointSummary>, ProviderError> {
    let mut all = list_endpoints(kube, target).await?;
    all.retain(|e| access.sees(&e.namespace));
    Ok(all)
}

/// [`endpoint_detail`] as `access` may see it: an endpoint outside its namespaces is missing.
pub async fn endpoint_detail_as(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
    access: &crate::kube_access::KubeAccess,
) -> Result<EndpointDetail, EngineError> {
    let detail = endpoint_detail(kube, target, name).await?;
    if !access.sees(&detail.summary.namespace) {
        return Err(EngineError::Missing(format!("endpoint {name}")));
    }
    Ok(detail)
}

/// [`list_pools`] as `access` may see it: a confined access sees the pools with workers in its
/// namespaces, and only those workers.
pub async fn list_pools_as(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    access: &crate::kube_access::KubeAccess,
) -> Result<Vec<PoolSummary>, ProviderError> {
    let mut pools = list_pools(kube, target).await?;
    if access.namespaces.is_some() {
        for pool in &mut pools {
            pool.workers.retain(|w| access.sees(&w.namespace));
        }
        pools.retain(|p| !p.workers.is_empty());
    }
    Ok(pools)
}

async fn find_endpoint(kube: &dyn KubeApi, target: &KubeTarget, name: &str) -> Result<Endpoint, EngineError> {
    if let Err(rule) = names::dns1123_label(name) {
        return Err(ValidationError::invalid("endpoint", rule).into());
    }
    let mut all = read_endpoints(kube, target).await?;
    // InstantStart's endpoint of that name first, then a foreign one.
    all.sort_by_key(|e| e.foreign);
    all.into_iter().find(|e| e.name == name).ok_or_else(|| EngineError::Missing(format!("endpoint {name}")))
}

async fn endpoint_pods(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    e: &Endpoint,
) -> Result<Vec<KubeObject>, ProviderError> {
    let labels = if e.managed() {
        vec![("app".to_string(), e.name.clone())]
    } else if e.foreign {
        let Some(selector) = e.primary.0.pointer("/spec/selector/matchLabels").and_then(Value::as_object) else {
            return Ok(vec![]);
        };
        selector.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()
    } else {
        vec![(LABEL_INSTANCE.to_string(), e.name.clone()), (LABEL_COMPONENT.to_string(), "inference".to_string())]
    };
    let params =
        ListParams { api_version: "v1".into(), kind: "Pod".into(), namespace: Some(e.namespace.clone()), labels };
    kube.list(target, &params).await
}

/// One endpoint with its pods, conditions and objects.
pub async fn endpoint_detail(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
) -> Result<EndpointDetail, EngineError> {
    let e = find_endpoint(kube, target, name).await?;
    let pods = endpoint_pods(kube, target, &e).await?;
    Ok(EndpointDetail {
        summary: e.summary(),
        pods: pods.iter().map(crate::api::pods::pod_view).collect(),
        conditions: ObjectCondition::of(&e.primary.0),
        request: e.request.clone(),
        volumes: crate::workload::volumes::mounted_volumes(&e.objects),
        manifest: e.objects.clone(),
    })
}

/// The namespace endpoint `name` is in (InstantStart's endpoint of that name first, then a
/// foreign one).
pub async fn endpoint_namespace(kube: &dyn KubeApi, target: &KubeTarget, name: &str) -> Result<String, EngineError> {
    Ok(find_endpoint(kube, target, name).await?.namespace)
}

/// The Service a chat request for endpoint `name` goes to.
pub async fn chat_target(kube: &dyn KubeApi, target: &KubeTarget, name: &str) -> Result<ChatTarget, EngineError> {
    let e = find_endpoint(kube, target, name).await?;
    Ok(ChatTarget {
        namespace: e.namespace.clone(),
        service: e.chat_service(),
        port: SERVICE_PORT,
        path: "v1/chat/completions".into(),
        ready: e.ready(),
    })
}

/// Every model pool with its workers and what they serve.
pub async fn list_pools(kube: &dyn KubeApi, target: &KubeTarget) -> Result<Vec<PoolSummary>, ProviderError> {
    let endpoints = read_endpoints(kube, target).await?;
    let mut pools: BTreeMap<String, Vec<PoolWorker>> = BTreeMap::new();
    for e in endpoints.iter() {
        let Some(pool) = e.pool() else { continue };
        let workers = pools.entry(pool).or_default();
        for p in endpoint_pods(kube, target, e).await? {
            let label = p.label(LABEL_POOL).unwrap_or_default();
            let serving = endpoints
                .iter()
                .find(|o| !label.is_empty() && o.namespace == e.namespace && o.pool().as_deref() == Some(label))
                .map(|o| o.name.clone());
            workers.push(PoolWorker {
                pod: s_at(&p.0, "/metadata/name").unwrap_or_default().to_string(),
                namespace: e.namespace.clone(),
                node: s_at(&p.0, "/spec/nodeName").map(str::to_string),
                ready: crate::api::pods::pod_ready(&p),
                serving,
                endpoint: e.name.clone(),
                uid: s_at(&p.0, "/metadata/uid").map(str::to_string),
            });
        }
    }
    Ok(pools.into_iter().map(|(pool, workers)| PoolSummary { pool, workers }).collect())
}

/// The bounds of a live ScaledObject (KEDA's defaults where a field is unset).
#[derive(Serialize)]
struct LiveBounds {
    min_replicas: u32,
    max_replicas: u32,
    cooldown_seconds: u32,
}

fn live_bounds(so: &KubeObject) -> LiveBounds {
    LiveBounds {
        min_replicas: u32_at(&so.0, "/spec/minReplicaCount").unwrap_or(0),
        max_replicas: u32_at(&so.0, "/spec/maxReplicaCount").unwrap_or(100),
        cooldown_seconds: u32_at(&so.0, "/spec/cooldownPeriod").unwrap_or(300),
    }
}

/// The explicit diff of an endpoint update, and the request the update applies.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointUpdate {
    pub plan: Plan,
    /// The `update_endpoint` request (the endpoint's full request with the changes).
    pub request: Value,
}

/// Compares `patch` with the live endpoint. An empty plan: already in this state.
pub async fn plan_update(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    cluster: &str,
    name: &str,
    patch: &EndpointPatch,
) -> Result<EndpointUpdate, EngineError> {
    let e = find_endpoint(kube, target, name).await?;
    if e.foreign {
        return Err(crate::workload::foreign_refusal(
            "endpoint",
            &format!("endpoint {name} in namespace {}", e.namespace),
        )
        .into());
    }
    diff_update(&e, cluster, patch)
}

/// The explicit diff of `patch` against endpoint `e` as read from the cluster (pure).
fn diff_update(e: &Endpoint, cluster: &str, patch: &EndpointPatch) -> Result<EndpointUpdate, EngineError> {
    let name = e.name.as_str();
    let mut params = e.request.clone().ok_or_else(|| {
        EngineError::InvalidState(format!("endpoint {name} carries no {ANNOTATION_ENDPOINT_REQUEST} annotation"))
    })?;
    let mut plan = Plan::new(workload_target(cluster, WorkloadKind::Endpoint, name));
    let mut f = Findings::new();
    let live_so = e.scaled_object().cloned();
    if patch.removes_autoscaling() {
        if let Some(so) = &live_so {
            // The replicas the autoscaler set are what the Deployment has now (the HPA writes
            // spec.replicas); from here on they are a fixed count, which the plan shows.
            let now = u32_at(&e.primary.0, "/spec/replicas")
                .or_else(|| u32_at(&e.primary.0, "/status/replicas"))
                .unwrap_or(1);
            let fixed = patch.replicas.unwrap_or(now);
            plan.changes.push(crate::diff::Change {
                field: "autoscaling".into(),
                from: json!(live_bounds(so)),
                to: Value::Null,
            });
            plan.changes.push(crate::diff::Change {
                field: "replicas".into(),
                from: json!(format!("set by autoscaling ({now} now)")),
                to: json!(fixed),
            });
            params["replicas"] = json!(fixed);
            if let Some(o) = params.as_object_mut() {
                o.remove("autoscaling");
            }
        } else if let Some(r) = patch.replicas {
            // Nothing to remove: only the replica count can change.
            let live = u32_at(&e.primary.0, "/spec/replicas").unwrap_or(1);
            plan.compare("replicas", &live, &r);
            params["replicas"] = json!(r);
        }
    } else if let Some(r) = patch.replicas {
        if live_so.is_some() && patch.autoscaling.is_none() {
            f.push_unprocessable(
                "replicas",
                "the replicas are set by autoscaling; change autoscaling.min/max instead, or send \"autoscaling\": \
                 null with replicas to fix the count",
            );
        } else {
            let live = u32_at(&e.primary.0, "/spec/replicas").unwrap_or(1);
            plan.compare("replicas", &live, &r);
            params["replicas"] = json!(r);
        }
    }
    if let Some(Some(a)) = &patch.autoscaling {
        if e.managed() {
            f.push_unprocessable("autoscaling", "managed endpoints are scaled by the HyperPod inference operator");
        }
        let live = live_so.as_ref().map(|so| {
            let b = live_bounds(so);
            (b.min_replicas, b.max_replicas, b.cooldown_seconds)
        });
        let (min, max, cooldown) = match live {
            Some((lmin, lmax, lcool)) => {
                (a.min_replicas.unwrap_or(lmin), a.max_replicas.unwrap_or(lmax), a.cooldown_seconds.unwrap_or(lcool))
            }
            None => {
                if a.min_replicas.is_none() {
                    f.push("autoscaling.min_replicas", "required when the endpoint has no autoscaling yet");
                }
                if a.max_replicas.is_none() {
                    f.push("autoscaling.max_replicas", "required when the endpoint has no autoscaling yet");
                }
                (a.min_replicas.unwrap_or(0), a.max_replicas.unwrap_or(0), a.cooldown_seconds.unwrap_or(300))
            }
        };
        if min > max {
            f.push("autoscaling.min_replicas", "must not exceed autoscaling.max_replicas");
        }
        let (lmin, lmax, lcool) = live.map_or((None, None, None), |(a, b, c)| (Some(a), Some(b), Some(c)));
        plan.compare("autoscaling.min_replicas", &lmin, &Some(min));
        plan.compare("autoscaling.max_replicas", &lmax, &Some(max));
        plan.compare("autoscaling.cooldown_seconds", &lcool, &Some(cooldown));
        let mut auto = params.get("autoscaling").cloned().filter(Value::is_object).unwrap_or_else(|| json!({}));
        auto["min_replicas"] = json!(min);
        auto["max_replicas"] = json!(max);
        auto["cooldown_seconds"] = json!(cooldown);
        params["autoscaling"] = auto;
    }
    if patch.replicas.is_none() && patch.autoscaling.is_none() {
        f.push("", "send at least one of replicas, autoscaling");
    }
    f.finish()?;
    let request = WorkloadRequest::new(cluster, WorkloadKind::Endpoint, params);
    let request = serde_json::to_value(&request).map_err(|e| EngineError::InvalidState(e.to_string()))?;
    Ok(EndpointUpdate { plan, request })
}

// ---------------------------------------------------------------------------------------------
// assign_pool_worker

/// `PUT /api/clusters/{cluster}/pools/{pool}/workers/{pod}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AssignPoolWorkerRequest {
    pub cluster: String,
    pub pool: String,
    pub pod: String,
    /// The endpoint the worker should serve; `null` makes it idle.
    pub serving: Option<String>,
    /// Filled in from the real state: the worker's namespace and the label value it gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<ResolvedAssignment>,
}

/// What an assignment changes, read from the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolvedAssignment {
    pub namespace: String,
    pub from: String,
    pub to: String,
}

/// Moves a warm worker between pool endpoints by its label.
pub struct AssignPoolWorkerWorkflow {
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
}

impl AssignPoolWorkerWorkflow {
    pub fn new(kube: Arc<dyn KubeApi>, store: Arc<dyn Store>) -> Self {
        AssignPoolWorkerWorkflow { kube, store }
    }
}

const LABEL_STEP: &str = "label";

#[async_trait]
impl Workflow for AssignPoolWorkerWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::AssignPoolWorker
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: AssignPoolWorkerRequest = decode(request)?;
        let mut f = Findings::new();
        if let Err(rule) = names::cluster_name(&req.cluster) {
            f.push("cluster", rule);
        }
        if let Err(rule) = names::dns1123_label(&req.pool) {
            f.push("pool", rule);
        }
        if let Err(rule) = names::dns1123_label(&req.pod) {
            f.push("pod", rule);
        }
        if let Some(s) = &req.serving
            && let Err(rule) = names::dns1123_label(s)
        {
            f.push("serving", rule);
        }
        f.finish()?;
        self.store.get_cluster(&req.cluster)?.ok_or_else(|| EngineError::UnknownCluster(req.cluster.clone()))?;
        let title = match &req.serving {
            Some(s) => format!("Relabel pod {} to serve endpoint {s}", req.pod),
            None => format!("Relabel pod {} as idle", req.pod),
        };
        Ok(Prepared {
            target: format!("cluster/{}/pool/{}/worker/{}", req.cluster, req.pool, req.pod),
            request: serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?,
            steps: vec![StepSpec { key: LABEL_STEP.into(), title, depends_on: vec![], expected_secs: Some(2) }],
        })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: AssignPoolWorkerRequest = decode(&prepared.request)?;
        let target = kube_target_of(self.store.as_ref(), &req.cluster)?;
        let pools = list_pools(self.kube.as_ref(), &target).await?;
        let pool = pools
            .iter()
            .find(|p| p.pool == req.pool)
            .ok_or_else(|| EngineError::Missing(format!("model pool {}", req.pool)))?;
        let worker = pool
            .workers
            .iter()
            .find(|w| w.pod == req.pod)
            .ok_or_else(|| EngineError::Missing(format!("worker {} in model pool {}", req.pod, req.pool)))?;
        let endpoints = read_endpoints(self.kube.as_ref(), &target).await?;
        let to = match &req.serving {
            None => String::new(),
            Some(s) => {
                let e =
                    endpoints.iter().find(|e| &e.name == s && e.namespace == worker.namespace).ok_or_else(|| {
                        ValidationError::unprocessable(
                            "serving",
                            format!("no endpoint {s} in namespace {}", worker.namespace),
                        )
                    })?;
                e.pool().ok_or_else(|| {
                    ValidationError::unprocessable("serving", format!("endpoint {s} is not a model pool endpoint"))
                })?
            }
        };
        let pod_ref = ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some(worker.namespace.clone()),
            name: req.pod.clone(),
        };
        let live =
            self.kube.get(&target, &pod_ref).await?.ok_or_else(|| EngineError::Missing(format!("pod {}", req.pod)))?;
        let from = live.label(LABEL_POOL).unwrap_or_default().to_string();
        let mut plan = Plan::new(prepared.target.clone());
        plan.compare(&format!("pods/{}.labels.{LABEL_POOL}", req.pod), &from, &to);
        req.resolved = Some(ResolvedAssignment { namespace: worker.namespace.clone(), from, to });
        Ok(Assessment {
            plan: Some(plan),
            checks: vec![],
            reduced_request: Some(serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?),
        })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: AssignPoolWorkerRequest = decode(request).ok()?;
        let resolved = req.resolved?;
        if key != LABEL_STEP {
            return None;
        }
        let target = kube_target_of(self.store.as_ref(), &req.cluster).ok()?;
        Some(Arc::new(RelabelPod {
            kube: self.kube.clone(),
            target,
            namespace: resolved.namespace,
            pod: req.pod,
            to: resolved.to,
        }))
    }
}

/// Sets a pod's pool label (server-side apply of the label only).
struct RelabelPod {
    kube: Arc<dyn KubeApi>,
    target: KubeTarget,
    namespace: String,
    pod: String,
    to: String,
}

impl RelabelPod {
    fn pod_ref(&self) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some(self.namespace.clone()),
            name: self.pod.clone(),
        }
    }

    fn resource(&self) -> ResourceRef {
        ResourceRef { kind: "k8s:Pod".into(), id: format!("{}/{}", self.namespace, self.pod), arn: None }
    }

    async fn live(&self) -> Result<KubeObject, StepError> {
        self.kube
            .get(&self.target, &self.pod_ref())
            .await?
            .ok_or_else(|| StepError::Invalid(format!("pod {}/{} is gone", self.namespace, self.pod)))
    }
}

#[async_trait]
impl StepExecutor for RelabelPod {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let live = self.live().await?;
        if live.label(LABEL_POOL).unwrap_or_default() == self.to {
            Ok(Observation::Exists(self.resource()))
        } else {
            Ok(Observation::Absent)
        }
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let patch = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": { "name": self.pod, "namespace": self.namespace, "labels": { LABEL_POOL: self.to } },
        });
        self.kube.apply(&self.target, &KubeObject(patch)).await?;
        Ok(self.resource())
    }

    async fn poll(&self, _cx: &StepContext<'_>, _resource: &ResourceRef) -> Result<Progress, StepError> {
        let live = self.live().await?;
        let label = live.label(LABEL_POOL).unwrap_or_default();
        if label == self.to {
            Ok(Progress::Done(json!({ "pod": self.pod, "uid": live.0.pointer("/metadata/uid"), LABEL_POOL: label })))
        } else {
            Ok(Progress::Waiting { detail: format!("pod {} still labelled {LABEL_POOL}={label:?}", self.pod) })
        }
    }
}

/// Namespace and name of the AWS Load Balancer Controller's Deployment (the Helm chart's
/// default), which provisions the NLB of a `load_balancer` exposure.
pub const LB_CONTROLLER: (&str, &str) = ("kube-system", "aws-load-balancer-controller");

/// Checks before deploying endpoint `params`: a `load_balancer` exposure needs the AWS Load
/// Balancer Controller running in the cluster (without it the Service never gets an address).
pub async fn deploy_preflight(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    params: &Value,
) -> Result<Vec<crate::preflight::PreflightCheck>, ProviderError> {
    use crate::preflight::{CheckStatus, PreflightCheck};
    let mut checks = Vec::new();
    if s_at(params, "/exposure/type") == Some("load_balancer") {
        let r = ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some(LB_CONTROLLER.0.into()),
            name: LB_CONTROLLER.1.into(),
        };
        let live = kube.get(target, &r).await?;
        let available = live.as_ref().and_then(|d| u32_at(&d.0, "/status/availableReplicas")).unwrap_or(0);
        let (status, detail) = match (&live, available) {
            (Some(_), n) if n > 0 => {
                (CheckStatus::Pass, format!("the AWS Load Balancer Controller is running ({n} available)"))
            }
            (Some(_), _) => {
                (CheckStatus::Fail, "the AWS Load Balancer Controller is installed but not available".to_string())
            }
            (None, _) => (
                CheckStatus::Fail,
                format!(
                    "the AWS Load Balancer Controller is not installed (no Deployment {}/{}); a load_balancer \
                     exposure would never get an address",
                    LB_CONTROLLER.0, LB_CONTROLLER.1
                ),
            ),
        };
        checks.push(PreflightCheck {
            check: "load_balancer_controller".into(),
            field: "exposure".into(),
            status,
            detail,
            remedy: Some(lb_controller_remedy()),
        });
    }
    Ok(checks)
}

/// What to do without a running AWS Load Balancer Controller: created clusters get it from the
/// create pipeline's `chart:aws-load-balancer-controller` step (retry that step if it failed);
/// imported clusters need it installed the same way by their owner.
fn lb_controller_remedy() -> String {
    let c = &AWS_LOAD_BALANCER_CONTROLLER;
    format!(
        "clusters created by InstantStart get it from step {} of create-cluster (Helm chart {} {} from {}, \
         release {} in {}, with the IRSA role {} for its service account): retry that step if it failed; \
         on an imported cluster install that chart with an IAM role carrying the controller's published IAM \
         policy; or use exposure cluster_ip",
        super::charts::chart_step_key(c),
        c.chart,
        c.version,
        c.source.source().describe(),
        c.release,
        c.namespace,
        super::lb_controller::lb_controller_role("<cluster>"),
    )
}

/// The refusal of a deploy whose preflight has a failing check (`422` naming the field), if any.
pub fn preflight_refusal(checks: &[crate::preflight::PreflightCheck]) -> Option<ValidationError> {
    let failed = checks.iter().find(|c| c.status == crate::preflight::CheckStatus::Fail)?;
    let remedy = failed.remedy.as_deref().map(|r| format!("; {r}")).unwrap_or_default();
    Some(ValidationError::unprocessable(failed.field.clone(), format!("{}{remedy}", failed.detail)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(image: &str) -> KubeObject {
        KubeObject(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "srv", "namespace": "team" },
            "spec": { "replicas": 2, "selector": { "matchLabels": { "app": "srv" } },
                      "template": { "spec": { "containers": [{ "name": "c", "image": image }] } } },
            "status": { "replicas": 2, "readyReplicas": 2, "availableReplicas": 2 },
        }))
    }

    #[test]
    fn a_foreign_deployment_is_an_endpoint_only_when_it_runs_a_model_server() {
        for (image, serves) in [
            ("vllm/vllm-openai:v0.11.0", true),
            ("docker.io/lmsysorg/sglang:v0.5.2", true),
            ("ghcr.io/huggingface/text-generation-inference:2.4.0", true),
            ("nvcr.io/nvidia/tritonserver:24.08-py3", true),
            ("ollama/ollama@sha256:abc", true),
            ("nginx:1.27", false),
            ("registry.local/vllm-tools/proxy:1", false),
        ] {
            assert_eq!(serves_models(&deployment(image)), serves, "{image}");
        }
        let e = |primary: KubeObject| Endpoint {
            name: "srv".into(),
            namespace: "team".into(),
            request: None,
            objects: vec![primary.clone()],
            primary,
            foreign: true,
        };
        let s = e(deployment("vllm/vllm-openai:v0.11.0")).summary();
        assert_eq!(
            (s.route.as_str(), s.engine.as_str(), s.ready, s.replicas.desired, s.foreign),
            ("self_managed", "vllm", true, 2, true)
        );
        let js = e(KubeObject(json!({
            "apiVersion": "inference.sagemaker.aws.amazon.com/v1", "kind": "JumpStartModel",
            "metadata": { "name": "srv", "namespace": "team" },
            "spec": { "model": { "modelId": "deepseek-llm-r1-distill-qwen-1-5b", "acceptEula": true }, "replicas": 1 },
            "status": { "state": "DeploymentComplete", "deploymentStatus": { "status": { "readyReplicas": 1 } } },
        })))
        .summary();
        assert_eq!(
            (js.route.as_str(), js.engine.as_str(), js.model.as_str(), js.ready, js.exposure.as_str()),
            ("managed", "jumpstart", "deepseek-llm-r1-distill-qwen-1-5b", true, "managed")
        );
    }

    /// Endpoint `chat` as the cluster shows it: its request annotation, the Deployment (at
    /// `replicas` as the autoscaler set them) and, with `bounds`, its KEDA ScaledObject.
    fn endpoint(replicas: u32, bounds: Option<(u32, u32, u32)>) -> Endpoint {
        let mut request = json!({
            "route": "self_managed", "name": "chat", "namespace": "default", "image": "lmsysorg/sglang:v0.5.2",
            "instance_type": "ml.g5.2xlarge", "replicas": 1,
            "engine": { "kind": "sglang", "model": "models/Qwen/Qwen3-0.6B" },
        });
        let labels = json!({ LABEL_INSTANCE: "chat", LABEL_MANAGED_BY: "instantstart", LABEL_ROUTE: "self_managed" });
        let mut objects = vec![KubeObject(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "chat", "namespace": "default", "labels": labels },
            "spec": { "replicas": replicas },
            "status": { "replicas": replicas, "readyReplicas": replicas },
        }))];
        if let Some((min, max, cooldown)) = bounds {
            request["autoscaling"] = json!({ "min_replicas": min, "max_replicas": max, "cooldown_seconds": cooldown });
            objects.push(KubeObject(json!({
                "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                "metadata": { "name": "chat", "namespace": "default", "labels": labels },
                "spec": { "minReplicaCount": min, "maxReplicaCount": max, "cooldownPeriod": cooldown,
                          "scaleTargetRef": { "name": "chat" } },
            })));
        }
        Endpoint {
            name: "chat".into(),
            namespace: "default".into(),
            request: Some(request),
            primary: objects[0].clone(),
            objects,
            foreign: false,
        }
    }

    fn patch(v: Value) -> EndpointPatch {
        serde_json::from_value(v).unwrap()
    }

    fn params(up: &EndpointUpdate) -> &Value {
        &up.request["params"]
    }

    #[test]
    fn autoscaling_follows_merge_patch_semantics_on_the_wire() {
        assert_eq!(patch(json!({})).autoscaling, None, "absent: unchanged");
        assert_eq!(patch(json!({ "autoscaling": null })).autoscaling, Some(None), "null: remove");
        assert_eq!(
            patch(json!({ "autoscaling": { "max": 4 } })).autoscaling,
            Some(Some(AutoscalingPatch { max_replicas: Some(4), ..Default::default() })),
            "an object: set"
        );
        assert!(patch(json!({ "autoscaling": null })).removes_autoscaling());
        // Serializing keeps the three cases apart: only what was given is sent.
        let remove = EndpointPatch { replicas: Some(2), autoscaling: Some(None) };
        assert_eq!(serde_json::to_value(&remove).unwrap(), json!({ "replicas": 2, "autoscaling": null }));
        let bounds = EndpointPatch {
            replicas: None,
            autoscaling: Some(Some(AutoscalingPatch { min_replicas: Some(0), ..Default::default() })),
        };
        assert_eq!(serde_json::to_value(&bounds).unwrap(), json!({ "autoscaling": { "min_replicas": 0 } }));
        assert_eq!(serde_json::to_value(EndpointPatch::default()).unwrap(), json!({}));
        assert!(serde_json::from_value::<EndpointPatch>(json!({ "autoscaling": false })).is_err());
    }

    #[test]
    fn removing_autoscaling_fixes_the_replicas_the_deployment_has_now_and_shows_them() {
        let e = endpoint(3, Some((1, 4, 600)));
        let up = diff_update(&e, "demo", &patch(json!({ "autoscaling": null }))).unwrap();
        assert_eq!(up.plan.target, "cluster/demo/endpoint/chat");
        assert_eq!(
            up.plan.render(),
            "autoscaling: {\"cooldown_seconds\":600,\"max_replicas\":4,\"min_replicas\":1} -> null\n\
             replicas: \"set by autoscaling (3 now)\" -> 3"
        );
        // The update's request has no autoscaling (so no ScaledObject is rendered) and the
        // Deployment's replicas are the count it had, not the request's original 1.
        assert_eq!(params(&up).get("autoscaling"), None);
        assert_eq!(params(&up)["replicas"], 3);
        assert_eq!(up.request["kind"], "endpoint");
    }

    #[test]
    fn removing_autoscaling_with_replicas_fixes_those() {
        let e = endpoint(3, Some((1, 4, 600)));
        let up = diff_update(&e, "demo", &patch(json!({ "autoscaling": null, "replicas": 2 }))).unwrap();
        let replicas = up.plan.changes.iter().find(|c| c.field == "replicas").unwrap();
        assert_eq!((&replicas.from, &replicas.to), (&json!("set by autoscaling (3 now)"), &json!(2)));
        assert_eq!(params(&up)["replicas"], 2);
        assert_eq!(params(&up).get("autoscaling"), None);
    }

    #[test]
    fn removing_autoscaling_that_is_not_there_is_no_change() {
        let e = endpoint(2, None);
        let up = diff_update(&e, "demo", &patch(json!({ "autoscaling": null }))).unwrap();
        assert!(up.plan.is_noop(), "{}", up.plan.render());
        let same = diff_update(&e, "demo", &patch(json!({ "autoscaling": null, "replicas": 2 }))).unwrap();
        assert!(same.plan.is_noop(), "{}", same.plan.render());
        let other = diff_update(&e, "demo", &patch(json!({ "autoscaling": null, "replicas": 5 }))).unwrap();
        assert_eq!(other.plan.render(), "replicas: 2 -> 5");
    }

    #[test]
    fn fixed_replicas_of_an_autoscaled_endpoint_need_the_removal() {
        let e = endpoint(3, Some((1, 4, 600)));
        let err = diff_update(&e, "demo", &patch(json!({ "replicas": 2 }))).unwrap_err();
        let EngineError::Validation(v) = err else { panic!("{err:?}") };
        assert_eq!(v.findings[0].field, "replicas");
        assert!(v.findings[0].rule.contains("\"autoscaling\": null"), "{v:?}");
        // Changing a bound keeps autoscaling and says what changes.
        let up = diff_update(&e, "demo", &patch(json!({ "autoscaling": { "max": 6 } }))).unwrap();
        assert_eq!(up.plan.render(), "autoscaling.max_replicas: 4 -> 6");
        assert_eq!(params(&up)["autoscaling"]["max_replicas"], 6);
    }
}

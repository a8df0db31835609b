//! Workloads: what InstantStart runs *inside* a cluster (training jobs, model downloads,
//! inference endpoints), as the durable engine sees them, and the read models the REST API
//! returns about them.
//!
//! `instantstart-recipes` builds the Kubernetes objects; core runs them durably. Core must not
//! depend on recipes, so the building is behind [`WorkloadRenderer`], which recipes implements
//! and the server wires into [`crate::workflow::all`]. The workload workflows
//! ([`crate::workflow::workloads`]) render **once**, at prepare time, and store the rendered
//! objects in the operation's request: a resumed or retried operation applies exactly what was
//! recorded, it never renders again.
//!
//! Readiness is data, not code: a [`RenderedWorkload`] lists [`ReadyRule`]s that the `ready`
//! step evaluates against the live objects ([`ReadyRule::evaluate`]).

pub mod admission;
pub mod read;
pub mod volumes;

pub use volumes::MountedVolume;

/// Inference endpoint and model pool views (built in [`crate::workflow::endpoints`]).
pub use crate::workflow::endpoints::{
    ChatTarget, EndpointAutoscaling, EndpointDetail, EndpointReplicas, EndpointSummary, PoolSummary, PoolWorker,
};

use crate::instance_types::{InstanceTypeInfo, SpecsFact};
use crate::kube_access::KubeAccess;
use crate::provider::{KubeObject, ObjectRef};
use crate::spec::{CapacitySpec, ManagedFeatures};
use crate::validate::ValidationError;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::labels::{ANNOTATION_OPERATION, LABEL_INSTANCE, LABEL_MANAGED_BY};

/// Whether InstantStart created a Kubernetes object: it carries
/// `app.kubernetes.io/managed-by=instantstart`. Everything else in a cluster is **foreign**:
/// listed and readable, never changed.
pub fn is_ours(obj: &KubeObject) -> bool {
    obj.label(LABEL_MANAGED_BY) == Some(crate::provider::MANAGED_BY)
}

/// The refusal of a mutation of a foreign workload (HTTP 422, before anything is recorded):
/// `field` names the workload, `what` says which (`job llama in namespace default`).
pub fn foreign_refusal(field: &str, what: &str) -> ValidationError {
    ValidationError::unprocessable(
        field,
        format!(
            "{what} was not created by InstantStart (it has no {LABEL_MANAGED_BY}={} label); it is listed read-only: \
             manage it with the tool that created it",
            crate::provider::MANAGED_BY
        ),
    )
}

/// What kind of workload a request describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    TrainingJob,
    ModelDownload,
    Endpoint,
}

impl WorkloadKind {
    /// The request field that names the namespace (as validation findings name it).
    pub fn namespace_field(self) -> &'static str {
        match self {
            WorkloadKind::TrainingJob => "job.namespace",
            WorkloadKind::ModelDownload | WorkloadKind::Endpoint => "namespace",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::TrainingJob => "training_job",
            WorkloadKind::ModelDownload => "model_download",
            WorkloadKind::Endpoint => "endpoint",
        }
    }

    /// The noun of operation targets: `cluster/<c>/<noun>/<name>`.
    pub fn noun(self) -> &'static str {
        match self {
            WorkloadKind::TrainingJob => "job",
            WorkloadKind::ModelDownload => "download",
            WorkloadKind::Endpoint => "endpoint",
        }
    }
}

/// Operation target of a workload: one running mutation per workload.
pub fn workload_target(cluster: &str, kind: WorkloadKind, name: &str) -> String {
    format!("cluster/{cluster}/{}/{name}", kind.noun())
}

/// One instance group as the renderer sees it (for rules such as "elastic training excludes
/// Spot").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupFacts {
    pub name: String,
    pub instance_type: String,
    pub capacity: CapacitySpec,
}

/// Facts about the target cluster, read from the real state by the workflow (never taken from
/// the client) before the request is rendered for recording.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadContext {
    #[serde(default)]
    pub instance_groups: Vec<GroupFacts>,
    #[serde(default)]
    pub features: ManagedFeatures,
    /// The shared bucket's claim that InstantStart created with the cluster, if any: workloads
    /// that name no storage mount this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<SharedStorageFacts>,
    /// EC2's specs of the instance types the rendering named ([`RenderedWorkload::instance_types`]),
    /// as the provider answered: `None` before they are read, a type missing from the list has
    /// unknown specs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_specs: Option<Vec<InstanceTypeInfo>>,
    /// The cluster's task governance, read when the rendering names a team
    /// ([`RenderedWorkload::team`]): `None` before it is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governance: Option<crate::governance::GovernanceFacts>,
    /// The cluster's FSx for Lustre volumes, read when the rendering names one
    /// ([`RenderedWorkload::volumes`]): `None` before they are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_systems: Option<Vec<FileSystemFacts>>,
}

/// One FSx for Lustre volume of the cluster, as a workload that mounts it needs to know it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSystemFacts {
    /// The volume's name on the cluster (`storage` lists it).
    pub name: String,
    /// FSx's lifecycle of the file system (`AVAILABLE` once it can be mounted).
    pub lifecycle: String,
    /// Namespace of its claim.
    pub namespace: String,
    /// Its PersistentVolumeClaim (`fsx-<name>`), when it exists on the cluster.
    pub claim: Option<String>,
}

impl FileSystemFacts {
    /// Why a workload in `namespace` cannot mount this volume, or `None` when it can.
    pub fn mount_problem(&self, namespace: &str) -> Option<String> {
        if self.lifecycle != "AVAILABLE" {
            return Some(format!(
                "FSx volume {} is {}; it can be mounted once it is AVAILABLE",
                self.name, self.lifecycle
            ));
        }
        let Some(claim) = &self.claim else {
            return Some(format!(
                "FSx volume {} has no claim on the cluster yet (its create operation has not finished)",
                self.name
            ));
        };
        (namespace != self.namespace).then(|| {
            format!(
                "FSx volume {}'s claim {claim} is in namespace {}; run the workload there",
                self.name, self.namespace
            )
        })
    }
}

/// Why a workload in `namespace` cannot mount `volume`, given the cluster's volumes (`None` when
/// it can, or when the volumes were not read yet).
pub fn volume_problem(cx: Option<&WorkloadContext>, namespace: &str, volume: &str) -> Option<String> {
    let facts = cx.and_then(|c| c.file_systems.as_ref())?;
    match facts.iter().find(|f| f.name == volume) {
        None => {
            let known: Vec<&str> = facts.iter().map(|f| f.name.as_str()).collect();
            Some(if known.is_empty() {
                format!("the cluster has no FSx volume (create one with storage fsx create); {volume} is unknown")
            } else {
                format!("the cluster has no FSx volume {volume}; it has: {}", known.join(", "))
            })
        }
        Some(f) => f.mount_problem(namespace),
    }
}

impl WorkloadContext {
    /// What is known about `instance_type`'s specs in this context.
    pub fn specs_fact(&self, instance_type: &str) -> SpecsFact {
        match &self.instance_specs {
            None => SpecsFact::NotRead,
            Some(described) => SpecsFact::of(described, instance_type),
        }
    }
}

/// [`WorkloadContext::specs_fact`] of an optional context (none = not read).
pub fn specs_fact(cx: Option<&WorkloadContext>, instance_type: &str) -> SpecsFact {
    cx.map_or(SpecsFact::NotRead, |c| c.specs_fact(instance_type))
}

/// Where the cluster's shared bucket is mounted from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedStorageFacts {
    pub bucket: Option<String>,
    /// Namespace of the claim.
    pub namespace: String,
    /// PersistentVolumeClaim name.
    pub claim: String,
    /// PersistentVolume name.
    pub volume: String,
    /// Mount path in every pod.
    pub mount_path: String,
}

/// A request to run a workload in a cluster: the kind and its typed parameters as JSON (the
/// renderer decodes them; shape errors name the field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadRequest {
    pub cluster: String,
    pub kind: WorkloadKind,
    pub params: Value,
    /// Filled in by the workflow from the real state; anything a client sends is replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<WorkloadContext>,
    /// Objects of the workload an update deletes before it applies the rendering, because the
    /// rendering no longer has them (e.g. the ScaledObject of autoscaling that was removed).
    /// Filled in by the update workflow from the live objects; anything a client sends is
    /// replaced, and other workflows ignore it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<ObjectRef>,
    /// Who the workload's Kubernetes calls act as ([`crate::kube_access`]), recorded with the
    /// operation so a resumed operation acts as the same identity. Set by the server from the
    /// caller's token; `None` = the control plane's own identity, any namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acting_as: Option<KubeAccess>,
}

impl WorkloadRequest {
    pub fn new(cluster: impl Into<String>, kind: WorkloadKind, params: Value) -> Self {
        WorkloadRequest { cluster: cluster.into(), kind, params, context: None, remove: Vec::new(), acting_as: None }
    }
}

/// What "done" means for one object of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReadyRule {
    /// The object exists (the API server accepted it).
    Exists { object: ObjectRef },
    /// `status.conditions[type=condition].status == "True"`; a `True` condition listed in
    /// `failed_if` fails the operation with its reason and message.
    ConditionTrue {
        object: ObjectRef,
        condition: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed_if: Vec<String>,
    },
    /// The value at a JSON pointer (e.g. `/status/phase`) equals `value`.
    FieldEquals { object: ObjectRef, pointer: String, value: Value },
    /// A Deployment has rolled out: the controller observed the latest generation and at
    /// least `replicas` replicas are updated and available.
    DeploymentAvailable { object: ObjectRef, replicas: u32 },
}

/// Result of evaluating a [`ReadyRule`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    Waiting(String),
    Failed(String),
}

fn describe(r: &ObjectRef) -> String {
    match &r.namespace {
        Some(ns) => format!("{} {ns}/{}", r.kind, r.name),
        None => format!("{} {}", r.kind, r.name),
    }
}

/// `status.conditions[type=condition]` of an object.
pub fn condition<'a>(object: &'a Value, condition: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(condition))
}

fn condition_true(object: &Value, name: &str) -> bool {
    condition(object, name).and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True")
}

fn u64_at(object: &Value, pointer: &str) -> u64 {
    object.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

impl ReadyRule {
    /// The object the rule looks at.
    pub fn object(&self) -> &ObjectRef {
        match self {
            ReadyRule::Exists { object }
            | ReadyRule::ConditionTrue { object, .. }
            | ReadyRule::FieldEquals { object, .. }
            | ReadyRule::DeploymentAvailable { object, .. } => object,
        }
    }

    /// Evaluates the rule against the object's current state (`None`: absent).
    pub fn evaluate(&self, current: Option<&KubeObject>) -> Readiness {
        let what = describe(self.object());
        let Some(obj) = current.map(|o| &o.0) else {
            return Readiness::Waiting(format!("{what}: not found yet"));
        };
        match self {
            ReadyRule::Exists { .. } => Readiness::Ready,
            ReadyRule::ConditionTrue { condition: wanted, failed_if, .. } => {
                for bad in failed_if {
                    if condition_true(obj, bad) {
                        let c = condition(obj, bad).cloned().unwrap_or(Value::Null);
                        let reason = c.get("reason").and_then(Value::as_str).unwrap_or(bad);
                        let message = c.get("message").and_then(Value::as_str).unwrap_or("");
                        let sep = if message.is_empty() { "" } else { ": " };
                        return Readiness::Failed(format!("{what}: {bad} ({reason}){sep}{message}"));
                    }
                }
                if condition_true(obj, wanted) {
                    Readiness::Ready
                } else {
                    Readiness::Waiting(format!("{what}: waiting for condition {wanted}"))
                }
            }
            ReadyRule::FieldEquals { pointer, value, .. } => match obj.pointer(pointer) {
                Some(v) if v == value => Readiness::Ready,
                Some(v) => Readiness::Waiting(format!("{what}: {pointer} is {v}, waiting for {value}")),
                None => Readiness::Waiting(format!("{what}: {pointer} not set yet, waiting for {value}")),
            },
            ReadyRule::DeploymentAvailable { replicas, .. } => {
                let generation = u64_at(obj, "/metadata/generation");
                let observed = u64_at(obj, "/status/observedGeneration");
                let updated = u64_at(obj, "/status/updatedReplicas");
                let available = u64_at(obj, "/status/availableReplicas");
                let want = u64::from(*replicas);
                if let Some(c) = condition(obj, "Progressing")
                    && c.get("reason").and_then(Value::as_str) == Some("ProgressDeadlineExceeded")
                {
                    let message = c.get("message").and_then(Value::as_str).unwrap_or("progress deadline exceeded");
                    return Readiness::Failed(format!("{what}: {message}"));
                }
                if observed >= generation && updated >= want && available >= want {
                    Readiness::Ready
                } else {
                    Readiness::Waiting(format!("{what}: {available}/{want} replicas available ({updated} updated)"))
                }
            }
        }
    }
}

/// A workload rendered into Kubernetes objects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RenderedWorkload {
    /// The workload's name (the `app.kubernetes.io/instance` label of every object).
    pub name: String,
    pub namespace: String,
    /// Applied in order with server-side apply.
    pub objects: Vec<KubeObject>,
    /// What "done" means for the operation; empty = applied.
    #[serde(default)]
    pub ready: Vec<ReadyRule>,
    /// The EKS Pod Identity the workload's pods need before they start (a training job that
    /// reports to MLflow): associated by the operation before the first object is applied, and
    /// removed when the workload is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_identity: Option<WorkloadPodIdentity>,
    /// The instance types whose specs the rendering depends on (GPUs, EFA): the workflow reads
    /// them from the provider and renders again with them ([`WorkloadContext::instance_specs`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_types: Vec<String>,
    /// The task governance team whose Kueue queue the workload names: the workflow reads the
    /// cluster's governance and renders again with it ([`WorkloadContext::governance`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// The cluster's FSx for Lustre volumes the workload mounts by name: the workflow reads
    /// them and renders again with them ([`WorkloadContext::file_systems`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
}

/// A service account of a workload bound to an IAM role through EKS Pod Identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkloadPodIdentity {
    /// In the workload's namespace; rendered among its objects.
    pub service_account: String,
    /// IAM role name (not created by the workload: it must exist, see the preflight).
    pub role: String,
    /// What the identity is for, e.g. `MLflow tracking server team`.
    pub purpose: String,
    /// Step key of the request field that asked for it (preflight findings point there).
    pub field: String,
}

/// The service account a training job reporting to MLflow runs as (when it names none).
pub fn mlflow_service_account(job: &str) -> String {
    format!("{job}-mlflow")
}

/// A `(apiVersion, kind)` pair.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct TypeRef {
    pub api_version: String,
    pub kind: String,
}

impl TypeRef {
    pub fn new(api_version: &str, kind: &str) -> Self {
        TypeRef { api_version: api_version.into(), kind: kind.into() }
    }
}

/// Builds the Kubernetes objects of a workload. Implemented by `instantstart-recipes`.
pub trait WorkloadRenderer: Send + Sync {
    /// Validates the parameters (every finding, with its field path under `params`) and
    /// renders the objects. Pure: no I/O.
    fn render(&self, request: &WorkloadRequest) -> Result<RenderedWorkload, ValidationError>;

    /// Every kind of object a workload of `kind` may consist of, in apply order; the delete
    /// workflow removes them in reverse order (found by the workload's labels). Pods are
    /// always waited for and need not be listed.
    fn owned_types(&self, kind: WorkloadKind) -> Vec<TypeRef>;
}

/// `{name, namespace}` of a workload, as mutation responses carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadRef {
    pub name: String,
    pub namespace: String,
}

// ---------------------------------------------------------------------------------------------
// Read models
// ---------------------------------------------------------------------------------------------

/// Which operator runs a training job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobRuntime {
    /// `HyperPodPyTorchJob` under the HyperPod training operator.
    Hyperpod,
    /// KubeRay `RayJob`.
    Ray,
    /// Kubeflow `PyTorchJob` (the Kubeflow training operator). Listed when someone else
    /// created one (always `foreign`); InstantStart does not submit this kind.
    Pytorch,
}

/// Where a training job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Recovering from a fault (processes or the whole job restarting).
    Restarting,
}

/// Pods of a workload by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PodCounts {
    pub pending: u32,
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
}

/// The recovery budget of a job: how many recoveries it may use, and how many it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RecoveryStatus {
    pub budget: u32,
    pub used: u32,
    pub remaining: u32,
}

/// One training job in a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobSummary {
    pub name: String,
    pub namespace: String,
    pub runtime: JobRuntime,
    /// `torch`, `llama-factory`, `ms-swift`, `verl`, … (the `instantstart.io/recipe` label).
    pub recipe: Option<String>,
    pub phase: JobPhase,
    /// Pods the job asks for (nodes).
    pub replicas: u32,
    pub pods: PodCounts,
    /// HyperPod jobs only.
    pub recovery: Option<RecoveryStatus>,
    pub mlflow_tracking_arn: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    /// The reason of the latest failure or restart, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `true` when InstantStart did not create the job (it lacks the
    /// `app.kubernetes.io/managed-by=instantstart` label): it can be read (details, logs) but
    /// every change is refused with 422; manage it with the tool that created it.
    #[serde(default)]
    pub foreign: bool,
    /// Where the job stands in its team's queue (task governance), when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<admission::JobAdmission>,
}

/// One pod of a workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadPod {
    pub name: String,
    /// `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown`.
    pub phase: String,
    pub node: Option<String>,
    pub restarts: u32,
}

/// A status condition of a Kubernetes object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: Option<String>,
    pub message: Option<String>,
    pub last_transition_time: Option<String>,
}

impl ObjectCondition {
    /// The `status.conditions` of an object.
    pub fn of(object: &Value) -> Vec<ObjectCondition> {
        let s = |c: &Value, k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
        object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| ObjectCondition {
                        type_: s(c, "type").unwrap_or_default(),
                        status: s(c, "status").unwrap_or_default(),
                        reason: s(c, "reason"),
                        message: s(c, "message"),
                        last_transition_time: s(c, "lastTransitionTime"),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A Kubernetes event about a workload or one of its pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadEvent {
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    pub reason: String,
    pub message: String,
    /// `Kind/name` of the object the event is about.
    pub object: String,
    pub count: u32,
    pub last_seen: Option<String>,
}

/// One training job in detail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobDetail {
    #[serde(flatten)]
    pub summary: JobSummary,
    /// Every pod of the job (the summary's `pods` counts them by phase).
    pub pod_list: Vec<WorkloadPod>,
    pub conditions: Vec<ObjectCondition>,
    pub events: Vec<WorkloadEvent>,
    /// The volumes its pods mount, read from the job object.
    pub volumes: Vec<MountedVolume>,
    /// The job object as the cluster has it.
    pub manifest: Vec<KubeObject>,
}

/// Log lines of one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PodLogs {
    pub pod: String,
    pub lines: Vec<String>,
}

/// Where a model download is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DownloadPhase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

/// One model download (a download Job).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DownloadSummary {
    pub name: String,
    pub namespace: String,
    pub repo_id: String,
    /// Path inside the shared bucket.
    pub destination: String,
    pub phase: DownloadPhase,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub message: Option<String>,
}

/// Whether a storage entry is a "directory" (common prefix) or an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StorageEntryKind {
    Prefix,
    Object,
}

/// One entry of a bucket listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StorageEntry {
    /// Full key (or prefix, ending with `/`).
    pub key: String,
    pub kind: StorageEntryKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

/// What backs a storage volume of a cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StorageKind {
    /// The shared S3 bucket through the Mountpoint S3 CSI driver (claim `s3-shared`).
    #[default]
    S3,
    /// An FSx for Lustre file system through the FSx CSI driver (claim `fsx-<name>`).
    FsxLustre,
}

/// A storage volume of a cluster: the shared bucket, or an FSx for Lustre file system, and how
/// pods mount it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StorageSummary {
    /// `s3` (the shared bucket) or `fsx_lustre`.
    #[serde(default)]
    pub kind: StorageKind,
    /// Name of the PersistentVolume for `s3`; the volume's name on the cluster for `fsx_lustre`
    /// (what jobs, downloads and endpoints name).
    pub name: String,
    /// The bucket (`s3`); empty for `fsx_lustre`.
    pub bucket: String,
    pub mount_path: String,
    /// `namespace/claim` of the PersistentVolumeClaim.
    pub claim: String,
    /// The claim's phase (`Bound`, `Pending`, …) or `missing`.
    pub status: String,
    /// Top-level listing of the bucket (empty for `fsx_lustre`).
    pub entries: Vec<StorageEntry>,
    /// The file system (`fsx_lustre`): id, lifecycle, deployment type, capacity, DNS and mount
    /// name; absent when an attached file system no longer exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system: Option<crate::provider::LustreFileSystem>,
    /// `fsx_lustre`: `created` (InstantStart's: deleted with the volume and the cluster) or
    /// `attached` (an existing file system: only released).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<crate::workflow::fsx::FsxOwnership>,
    /// `fsx_lustre`: the file system's data repository associations (its links to S3
    /// prefixes: directory, `s3://` path, automatic import/export events, lifecycle).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_repositories: Vec<crate::provider::DataRepositoryAssociation>,
}

/// One page of a listing of the shared bucket under a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StorageListing {
    pub prefix: String,
    pub entries: Vec<StorageEntry>,
    /// More entries follow: pass this as `cursor` for the next page (opaque). Absent on the
    /// last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(kind: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: kind.into(), namespace: Some("default".into()), name: "x".into() }
    }

    #[test]
    fn ready_rules_evaluate_live_state() {
        let absent = ReadyRule::Exists { object: r("Job") }.evaluate(None);
        assert!(matches!(absent, Readiness::Waiting(ref d) if d.contains("Job default/x")), "{absent:?}");
        let obj = KubeObject(json!({"status": {"conditions": [
            {"type": "Complete", "status": "False"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}
        ]}}));
        let rule = ReadyRule::ConditionTrue {
            object: r("Job"),
            condition: "Complete".into(),
            failed_if: vec!["Failed".into()],
        };
        assert_eq!(
            rule.evaluate(Some(&obj)),
            Readiness::Failed(
                "Job default/x: Failed (BackoffLimitExceeded): Job has reached the specified backoff limit".into()
            )
        );
        let done = KubeObject(json!({"status": {"conditions": [{"type": "Complete", "status": "True"}]}}));
        assert_eq!(rule.evaluate(Some(&done)), Readiness::Ready);
        let field =
            ReadyRule::FieldEquals { object: r("Pod"), pointer: "/status/phase".into(), value: json!("Running") };
        assert!(matches!(
            field.evaluate(Some(&KubeObject(json!({"status": {"phase": "Pending"}})))),
            Readiness::Waiting(_)
        ));
        assert_eq!(field.evaluate(Some(&KubeObject(json!({"status": {"phase": "Running"}})))), Readiness::Ready);
        let dep = ReadyRule::DeploymentAvailable { object: r("Deployment"), replicas: 2 };
        let rolling = KubeObject(
            json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2}}),
        );
        assert!(matches!(dep.evaluate(Some(&rolling)), Readiness::Waiting(_)));
        let rolled = KubeObject(
            json!({"metadata": {"generation": 3}, "status": {"observedGeneration": 3, "updatedReplicas": 2, "availableReplicas": 2}}),
        );
        assert_eq!(dep.evaluate(Some(&rolled)), Readiness::Ready);
    }

    #[test]
    fn rules_and_kinds_have_stable_wire_names() {
        let rule = ReadyRule::ConditionTrue { object: r("Job"), condition: "Complete".into(), failed_if: vec![] };
        assert_eq!(serde_json::to_value(&rule).unwrap()["rule"], "condition_true");
        assert_eq!(serde_json::to_value(WorkloadKind::ModelDownload).unwrap(), "model_download");
        assert_eq!(workload_target("demo", WorkloadKind::TrainingJob, "llama"), "cluster/demo/job/llama");
        let detail = JobDetail {
            summary: JobSummary {
                name: "j".into(),
                namespace: "default".into(),
                runtime: JobRuntime::Hyperpod,
                recipe: Some("torch".into()),
                phase: JobPhase::Restarting,
                replicas: 2,
                pods: PodCounts::default(),
                recovery: Some(RecoveryStatus { budget: 3, used: 1, remaining: 2 }),
                mlflow_tracking_arn: None,
                created_at: None,
                message: None,
                foreign: true,
                admission: None,
            },
            pod_list: vec![],
            conditions: vec![],
            events: vec![],
            volumes: vec![],
            manifest: vec![],
        };
        let v = serde_json::to_value(&detail).unwrap();
        assert_eq!(v["phase"], "restarting");
        assert_eq!(v["runtime"], "hyperpod");
        assert_eq!(v["recovery"]["remaining"], 2);
        assert!(v["pods"].is_object() && v["pod_list"].is_array());
        assert_eq!(v["foreign"], true);
        // A summary written before the field existed reads as InstantStart's.
        let mut old = serde_json::to_value(&detail.summary).unwrap();
        old.as_object_mut().unwrap().remove("foreign");
        assert!(!serde_json::from_value::<JobSummary>(old).unwrap().foreign);
    }

    #[test]
    fn ours_is_the_managed_by_label_and_the_refusal_names_the_field() {
        let with = |labels: serde_json::Value| KubeObject(json!({ "metadata": { "name": "x", "labels": labels } }));
        assert!(is_ours(&with(json!({ "app.kubernetes.io/managed-by": "instantstart" }))));
        assert!(!is_ours(&with(json!({ "app.kubernetes.io/managed-by": "helm" }))));
        assert!(!is_ours(&with(json!({}))));
        assert!(!is_ours(&KubeObject(json!({ "metadata": { "name": "x" } }))));
        let e = foreign_refusal("job", "job legacy in namespace default");
        assert_eq!(e.kind, crate::validate::ValidationKind::Unprocessable);
        assert_eq!(e.findings[0].field, "job");
        assert!(e.findings[0].rule.starts_with("job legacy in namespace default was not created by InstantStart"));
        assert!(e.findings[0].rule.ends_with("manage it with the tool that created it"));
    }
}

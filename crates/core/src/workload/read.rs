//! Reading workloads back from a cluster: training jobs, their pods, events and logs, model
//! downloads and the shared storage, derived from the status fields the operators write.
//!
//! Everything here is read-only and goes through [`KubeApi`] `list`/`get` (the kube adapter
//! answers lists from its watch cache when enabled).
//!
//! **Which objects are training jobs.** Every `HyperPodPyTorchJob` (`sagemaker.amazonaws.com/v1`),
//! KubeRay `RayJob` (`ray.io/v1`) and Kubeflow `PyTorchJob` (`kubeflow.org/v1`) of the cluster,
//! whoever created it ([`JOB_KINDS`]). Those without `app.kubernetes.io/managed-by=instantstart`
//! are **foreign** (`foreign: true`): listed and readable (details, events, logs), never
//! changed — a delete is refused with 422 before anything is recorded
//! ([`crate::workload::foreign_refusal`]). Plain `batch/v1` Jobs are not listed as training
//! jobs (clusters run many for other purposes); InstantStart's model downloads are listed as
//! downloads. Pods belong to one of InstantStart's jobs by its `app.kubernetes.io/instance`
//! label, to a foreign job by an owner reference to it (HyperPod, Kubeflow) or, for a RayJob,
//! by `ray.io/cluster` naming its `status.rayClusterName`.
//!
//! **Training job phase.** `HyperPodPyTorchJob`: the HyperPod training operator's
//! `status.conditions` — `Failed` → failed, `Completed` (or `Succeeded`) → succeeded,
//! `Restarting` → restarting, `Running` → running, otherwise pending. `RayJob`: KubeRay's
//! `status.jobDeploymentStatus` (`Complete` with `jobStatus` `SUCCEEDED`/`FAILED`, `Failed`,
//! `Running`, `Retrying`, `Initializing`/`Suspended`/none).
//!
//! **Recovery budget** (HyperPod jobs). The operator restarts the training processes in place up
//! to `N = runPolicy.restartPolicy.numRestartBeforeFullJobRestart` times per evaluation window,
//! then restarts the whole job, up to `M = maxFullJobRestarts` times, then fails the job. The
//! budget is every fault the job can survive, `N·(M+1) + M`; what remains is
//! `(N − restartStatus.restartCount) + (M − restartStatus.fullJobRestartCount)·(N+1)`
//! (`status.restartCount` stands in when `restartStatus` is absent); used = budget − remaining.

use super::{
    DownloadPhase, DownloadSummary, JobDetail, JobPhase, JobRuntime, JobSummary, ObjectCondition, PodCounts, PodLogs,
    RecoveryStatus, StorageEntry, StorageEntryKind, StorageKind, StorageListing, StorageSummary, WorkloadEvent,
    WorkloadPod, condition,
};
use crate::engine::EngineError;
use crate::kube_access::KubeAccess;
use crate::provider::*;
use crate::store::{ClusterRecord, Store};
use crate::workflow::workloads::{storage_facts, workload_labels};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::Value;

/// `apiVersion`/`kind` of HyperPod training jobs.
pub const HYPERPOD_JOB: (&str, &str) = ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob");
/// `apiVersion`/`kind` of KubeRay jobs.
pub const RAY_JOB: (&str, &str) = ("ray.io/v1", "RayJob");
/// `apiVersion`/`kind` of Kubeflow training-operator jobs (only ever foreign).
pub const PYTORCH_JOB: (&str, &str) = ("kubeflow.org/v1", "PyTorchJob");
/// Every kind listed as a training job (see the module docs).
pub const JOB_KINDS: [(&str, &str); 3] = [HYPERPOD_JOB, RAY_JOB, PYTORCH_JOB];
/// Label naming the recipe of a training job.
pub const LABEL_RECIPE: &str = "instantstart.io/recipe";
/// Label naming the component (`training`, `model-download`, …).
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
/// Annotations of download Jobs.
pub const ANNOTATION_MODEL_ID: &str = "instantstart.io/model-id";
pub const ANNOTATION_DESTINATION: &str = "instantstart.io/destination";
/// Most log lines one request returns.
pub const MAX_TAIL: u32 = 5000;

/// The registered cluster `name` and where its Kubernetes API is
/// ([`crate::api::clusters::resolve`]: 404 when unknown).
pub fn cluster_kube(store: &dyn Store, name: &str) -> Result<(ClusterRecord, KubeTarget), EngineError> {
    let cluster = crate::api::clusters::resolve(store, name)?;
    Ok((cluster.record, cluster.kube))
}

/// [`cluster_kube`] as `access` reaches it: the target impersonates the access's identity, a
/// requested `namespace` outside the access is refused (`403`), and a read without one is
/// confined to the access's namespace when it has exactly one (`None`: every namespace the
/// cluster's RBAC lets the identity list).
pub fn cluster_kube_as(
    store: &dyn Store,
    name: &str,
    access: &KubeAccess,
    namespace: Option<&str>,
) -> Result<(ClusterRecord, KubeTarget, Option<String>), EngineError> {
    let (rec, target) = cluster_kube(store, name)?;
    let namespace = match (namespace, &access.namespaces) {
        (Some(n), _) => {
            access.check_namespace(n).map_err(EngineError::Forbidden)?;
            Some(n.to_string())
        }
        (None, Some(only)) if only.len() == 1 => Some(only[0].clone()),
        (None, _) => None,
    };
    Ok((rec, target.acting_as(access.identity.clone()), namespace))
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn u32_at(v: &Value, pointer: &str) -> Option<u32> {
    v.pointer(pointer).and_then(Value::as_u64).map(|n| n.min(u64::from(u32::MAX)) as u32)
}

fn time_at(v: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    str_at(v, pointer).and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc))
}

fn is_true(obj: &Value, name: &str) -> bool {
    condition(obj, name).and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True")
}

fn condition_text(obj: &Value, name: &str) -> Option<String> {
    let c = condition(obj, name)?;
    let reason = c.get("reason").and_then(Value::as_str).unwrap_or("");
    let message = c.get("message").and_then(Value::as_str).unwrap_or("");
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => None,
        (false, true) => Some(reason.to_string()),
        (true, false) => Some(message.to_string()),
        (false, false) => Some(format!("{reason}: {message}")),
    }
}

/// Which runtime an object is, if it is a training job.
pub fn runtime_of(obj: &KubeObject) -> Option<JobRuntime> {
    let r = obj.object_ref()?;
    match (r.api_version.as_str(), r.kind.as_str()) {
        HYPERPOD_JOB => Some(JobRuntime::Hyperpod),
        RAY_JOB => Some(JobRuntime::Ray),
        PYTORCH_JOB => Some(JobRuntime::Pytorch),
        _ => None,
    }
}

/// Phase (and the reason worth showing) of a training job from its status.
pub fn job_phase(runtime: JobRuntime, obj: &Value) -> (JobPhase, Option<String>) {
    match runtime {
        // The Kubeflow training operator writes the same condition types (`Created`, `Running`,
        // `Restarting`, `Succeeded`, `Failed`).
        JobRuntime::Hyperpod | JobRuntime::Pytorch => {
            if is_true(obj, "Failed") {
                (JobPhase::Failed, condition_text(obj, "Failed"))
            } else if is_true(obj, "Completed") || is_true(obj, "Succeeded") {
                (JobPhase::Succeeded, None)
            } else if is_true(obj, "Restarting") {
                (JobPhase::Restarting, condition_text(obj, "Restarting"))
            } else if is_true(obj, "Running") {
                (JobPhase::Running, None)
            } else {
                (JobPhase::Pending, None)
            }
        }
        JobRuntime::Ray => {
            let deployment = str_at(obj, "/status/jobDeploymentStatus").unwrap_or("");
            let job = str_at(obj, "/status/jobStatus").unwrap_or("");
            let message = str_at(obj, "/status/message").filter(|m| !m.is_empty()).map(str::to_string);
            match (deployment, job) {
                (_, "FAILED") | ("Failed", _) => (JobPhase::Failed, message),
                ("Complete", "SUCCEEDED") | (_, "SUCCEEDED") => (JobPhase::Succeeded, None),
                ("Complete", _) => (JobPhase::Failed, message.or_else(|| Some(format!("job status {job}")))),
                ("Retrying", _) => (JobPhase::Restarting, message),
                ("Running", _) => (JobPhase::Running, None),
                _ => (JobPhase::Pending, None),
            }
        }
    }
}

/// The recovery budget of a HyperPod job (see the module docs).
pub fn recovery(obj: &Value) -> RecoveryStatus {
    let n = u32_at(obj, "/spec/runPolicy/restartPolicy/numRestartBeforeFullJobRestart").unwrap_or(0);
    let m = u32_at(obj, "/spec/runPolicy/restartPolicy/maxFullJobRestarts").unwrap_or(0);
    let budget = n.saturating_mul(m.saturating_add(1)).saturating_add(m);
    let in_window = u32_at(obj, "/status/restartStatus/restartCount")
        .or_else(|| u32_at(obj, "/status/restartCount"))
        .unwrap_or(0)
        .min(n);
    let full = u32_at(obj, "/status/restartStatus/fullJobRestartCount").unwrap_or(0).min(m);
    let exhausted = is_true(obj, "Failed")
        && condition(obj, "Failed").and_then(|c| c.get("reason")).and_then(Value::as_str)
            == Some("RestartBudgetExhausted");
    let remaining =
        if exhausted { 0 } else { (n - in_window).saturating_add((m - full).saturating_mul(n.saturating_add(1))) };
    RecoveryStatus { budget, used: budget.saturating_sub(remaining), remaining }
}

/// Pods the job asks for.
fn replicas(runtime: JobRuntime, obj: &Value) -> u32 {
    let sum = |pointer: &str| -> u32 {
        obj.pointer(pointer)
            .and_then(Value::as_array)
            .map(|specs| specs.iter().filter_map(|s| s.get("replicas").and_then(Value::as_u64)).sum::<u64>() as u32)
            .unwrap_or(0)
    };
    match runtime {
        JobRuntime::Hyperpod => sum("/spec/replicaSpecs"),
        JobRuntime::Ray => 1 + sum("/spec/rayClusterSpec/workerGroupSpecs"),
        JobRuntime::Pytorch => obj
            .pointer("/spec/pytorchReplicaSpecs")
            .and_then(Value::as_object)
            .map(|specs| {
                specs.values().map(|s| s.get("replicas").and_then(Value::as_u64).unwrap_or(1)).sum::<u64>() as u32
            })
            .unwrap_or(0),
    }
}

/// The MLflow tracking server a job reports to (its `MLFLOW_TRACKING_URI`).
fn mlflow_arn(obj: &Value) -> Option<String> {
    fn find(v: &Value) -> Option<String> {
        match v {
            Value::Object(map) => {
                if map.get("name").and_then(Value::as_str) == Some("MLFLOW_TRACKING_URI") {
                    return map.get("value").and_then(Value::as_str).map(str::to_string);
                }
                map.values().find_map(find)
            }
            Value::Array(items) => items.iter().find_map(find),
            _ => None,
        }
    }
    find(obj.get("spec")?)
}

/// A pod as the read models show it.
pub fn pod_view(pod: &KubeObject) -> WorkloadPod {
    let p = &pod.0;
    let restarts = p
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("restartCount").and_then(Value::as_u64)).sum::<u64>() as u32)
        .unwrap_or(0);
    WorkloadPod {
        name: str_at(p, "/metadata/name").unwrap_or_default().to_string(),
        phase: str_at(p, "/status/phase").unwrap_or("Pending").to_string(),
        node: str_at(p, "/spec/nodeName").map(str::to_string),
        restarts,
    }
}

fn count(pods: &[WorkloadPod]) -> PodCounts {
    let mut c = PodCounts::default();
    for p in pods {
        match p.phase.as_str() {
            "Running" => c.running += 1,
            "Succeeded" => c.succeeded += 1,
            "Failed" => c.failed += 1,
            _ => c.pending += 1,
        }
    }
    c
}

/// The summary of a training job object and its pods.
pub fn job_summary(job: &KubeObject, pods: &[WorkloadPod]) -> Option<JobSummary> {
    let runtime = runtime_of(job)?;
    let o = &job.0;
    let (phase, message) = job_phase(runtime, o);
    Some(JobSummary {
        name: str_at(o, "/metadata/name")?.to_string(),
        namespace: str_at(o, "/metadata/namespace").unwrap_or("default").to_string(),
        runtime,
        recipe: job.label(LABEL_RECIPE).map(str::to_string),
        phase,
        replicas: replicas(runtime, o),
        pods: count(pods),
        recovery: (runtime == JobRuntime::Hyperpod).then(|| recovery(o)),
        mlflow_tracking_arn: mlflow_arn(o),
        created_at: time_at(o, "/metadata/creationTimestamp"),
        message,
        foreign: !super::is_ours(job),
        admission: None,
    })
}

/// Kueue's Workloads and ClusterQueues, when some job names a queue (a cluster without Kueue
/// has none; see [`super::admission`]). `None` when the Workloads cannot be read (a token whose
/// RBAC does not cover Kueue's kinds): the jobs are listed without admission rather than not at
/// all, and never as waiting for a Workload they may have.
async fn kueue_objects(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    namespace: Option<&str>,
    jobs: &[KubeObject],
) -> Option<(Vec<KubeObject>, Vec<KubeObject>)> {
    if !jobs.iter().any(|j| j.label(crate::governance::QUEUE_LABEL).is_some()) {
        return None;
    }
    let workloads =
        list_or_empty(kube, target, &ours(namespace, vec![], super::admission::KUEUE_WORKLOAD)).await.ok()?;
    // A token confined to namespaces may not list cluster-scoped queues: no borrowing figure then.
    let queues = list_or_empty(kube, target, &ours(None, vec![], super::admission::KUEUE_CLUSTER_QUEUE)).await;
    Some((workloads, queues.unwrap_or_default()))
}

/// Whether `pod` belongs to training job `job` (see the module docs).
pub fn job_owns(job: &KubeObject, pod: &KubeObject) -> bool {
    let (j, p) = (&job.0, &pod.0);
    if str_at(j, "/metadata/namespace").unwrap_or("default") != str_at(p, "/metadata/namespace").unwrap_or("default") {
        return false;
    }
    if super::is_ours(job) {
        return super::is_ours(pod) && pod.label(super::LABEL_INSTANCE) == str_at(j, "/metadata/name");
    }
    let uid = str_at(j, "/metadata/uid");
    let owned = uid.is_some()
        && p.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| r.get("uid").and_then(Value::as_str) == uid));
    let ray_cluster = str_at(j, "/status/rayClusterName").filter(|c| !c.is_empty());
    owned || (ray_cluster.is_some() && pod.label("ray.io/cluster") == ray_cluster)
}

fn ours(namespace: Option<&str>, labels: Vec<(String, String)>, (api_version, kind): (&str, &str)) -> ListParams {
    ListParams { api_version: api_version.into(), kind: kind.into(), namespace: namespace.map(str::to_string), labels }
}

fn managed() -> Vec<(String, String)> {
    vec![(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string())]
}

/// A `list` where an unknown type (its CRD is not installed) is empty.
async fn list_or_empty(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    p: &ListParams,
) -> Result<Vec<KubeObject>, ProviderError> {
    match kube.list(target, p).await {
        Ok(v) => Ok(v),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(e),
    }
}

/// The training jobs of a cluster, InstantStart's and foreign ones (all namespaces unless one
/// is given), newest first.
pub async fn list_jobs(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    namespace: Option<&str>,
) -> Result<Vec<JobSummary>, ReadError> {
    check_namespace(namespace)?;
    let mut jobs = Vec::new();
    for kind in JOB_KINDS {
        jobs.extend(list_or_empty(kube, target, &ours(namespace, vec![], kind)).await?);
    }
    let pods = list_or_empty(kube, target, &ours(namespace, vec![], ("v1", "Pod"))).await?;
    let kueue = kueue_objects(kube, target, namespace, &jobs).await;
    let mut out: Vec<JobSummary> = jobs
        .iter()
        .filter_map(|j| {
            let mine: Vec<WorkloadPod> = pods.iter().filter(|p| job_owns(j, p)).map(pod_view).collect();
            let mut s = job_summary(j, &mine)?;
            s.admission = kueue.as_ref().and_then(|(w, q)| super::admission::admission_of(j, w, q));
            Some(s)
        })
        .collect();
    out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
}

/// Why a job could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Validation(#[from] crate::validate::ValidationError),
    /// Nothing by that name (HTTP 404).
    #[error("{0} not found")]
    Missing(String),
    /// The name exists in several namespaces; the request must name one (HTTP 409).
    #[error("{0}")]
    Ambiguous(String),
    /// The pod exists but has no log yet (HTTP 409).
    #[error("{0}")]
    NotReady(String),
}

/// A `?namespace=` a read names must be a namespace name (DNS-1123 label): a 400 naming
/// `namespace` otherwise, before anything is asked of the cluster.
pub fn check_namespace(namespace: Option<&str>) -> Result<(), ReadError> {
    match namespace.map(crate::names::dns1123_label) {
        Some(Err(rule)) => Err(crate::validate::ValidationError::invalid("namespace", rule).into()),
        _ => Ok(()),
    }
}

/// Finds training job `name` (in `namespace`, or the only namespace that has one), InstantStart's
/// or foreign.
pub async fn find_job(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
    namespace: Option<&str>,
) -> Result<KubeObject, ReadError> {
    check_namespace(namespace)?;
    let mut found = Vec::new();
    for kind in JOB_KINDS {
        found.extend(list_or_empty(kube, target, &ours(namespace, vec![], kind)).await?);
    }
    found.retain(|j| str_at(&j.0, "/metadata/name") == Some(name));
    match found.len() {
        0 => Err(ReadError::Missing(match namespace {
            Some(ns) => format!("job {name} in namespace {ns}"),
            None => format!("job {name}"),
        })),
        1 => Ok(found.remove(0)),
        _ => {
            let namespaces: Vec<&str> = found.iter().filter_map(|j| str_at(&j.0, "/metadata/namespace")).collect();
            Err(ReadError::Ambiguous(format!(
                "job {name} exists in namespaces {}; name one with ?namespace=",
                namespaces.join(", ")
            )))
        }
    }
}

/// The pods of training job `job` (InstantStart's or foreign), by name.
pub async fn job_pods(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    job: &KubeObject,
) -> Result<Vec<KubeObject>, ProviderError> {
    if super::is_ours(job) {
        let ns = str_at(&job.0, "/metadata/namespace").unwrap_or("default");
        return workload_pods(kube, target, ns, str_at(&job.0, "/metadata/name").unwrap_or_default()).await;
    }
    let ns = str_at(&job.0, "/metadata/namespace").unwrap_or("default");
    let mut pods = list_or_empty(kube, target, &ours(Some(ns), vec![], ("v1", "Pod"))).await?;
    pods.retain(|p| job_owns(job, p));
    pods.sort_by(|a, b| str_at(&a.0, "/metadata/name").cmp(&str_at(&b.0, "/metadata/name")));
    Ok(pods)
}

/// The pods of workload `name` in `namespace` (InstantStart's labels), by name.
pub async fn workload_pods(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    namespace: &str,
    name: &str,
) -> Result<Vec<KubeObject>, ProviderError> {
    let mut pods = list_or_empty(kube, target, &ours(Some(namespace), workload_labels(name), ("v1", "Pod"))).await?;
    pods.sort_by(|a, b| str_at(&a.0, "/metadata/name").cmp(&str_at(&b.0, "/metadata/name")));
    Ok(pods)
}

/// Events about `names` in `namespace` (best effort: a cluster that refuses the list has none).
async fn events(kube: &dyn KubeApi, target: &KubeTarget, namespace: &str, names: &[String]) -> Vec<WorkloadEvent> {
    let Ok(all) = kube.list(target, &ours(Some(namespace), vec![], ("v1", "Event"))).await else { return vec![] };
    let mut out: Vec<WorkloadEvent> = all
        .iter()
        .filter(|e| str_at(&e.0, "/involvedObject/name").is_some_and(|n| names.iter().any(|x| x == n)))
        .map(|e| {
            let o = &e.0;
            WorkloadEvent {
                type_: str_at(o, "/type").unwrap_or("Normal").to_string(),
                reason: str_at(o, "/reason").unwrap_or_default().to_string(),
                message: str_at(o, "/message").unwrap_or_default().to_string(),
                object: format!(
                    "{}/{}",
                    str_at(o, "/involvedObject/kind").unwrap_or_default(),
                    str_at(o, "/involvedObject/name").unwrap_or_default()
                ),
                count: u32_at(o, "/count").unwrap_or(1),
                last_seen: str_at(o, "/lastTimestamp").or_else(|| str_at(o, "/eventTime")).map(str::to_string),
            }
        })
        .collect();
    out.sort_by(|a, b| a.last_seen.cmp(&b.last_seen));
    out
}

/// Strips what only the API server cares about from an object shown as a manifest.
fn manifest(obj: &KubeObject) -> KubeObject {
    let mut o = obj.clone();
    if let Some(meta) = o.0.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    o
}

/// One training job in detail.
pub async fn job_detail(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
    namespace: Option<&str>,
) -> Result<JobDetail, ReadError> {
    let job = find_job(kube, target, name, namespace).await?;
    let ns = str_at(&job.0, "/metadata/namespace").unwrap_or("default").to_string();
    let pods: Vec<WorkloadPod> = job_pods(kube, target, &job).await?.iter().map(pod_view).collect();
    let mut summary = job_summary(&job, &pods).ok_or_else(|| ReadError::Missing(format!("job {name}")))?;
    let kueue = kueue_objects(kube, target, Some(&ns), std::slice::from_ref(&job)).await;
    summary.admission = kueue.as_ref().and_then(|(w, q)| super::admission::admission_of(&job, w, q));
    let mut names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
    names.push(name.to_string());
    Ok(JobDetail {
        summary,
        conditions: ObjectCondition::of(&job.0),
        events: events(kube, target, &ns, &names).await,
        manifest: vec![manifest(&job)],
        pod_list: pods,
    })
}

/// The pod whose log a job shows by default: the Ray head, else the first pod by name (rank 0).
pub fn default_pod(pods: &[KubeObject]) -> Option<String> {
    let head = pods.iter().find(|p| p.label("ray.io/node-type") == Some("head"));
    head.or_else(|| pods.first()).and_then(|p| str_at(&p.0, "/metadata/name")).map(str::to_string)
}

/// Resolves the pod of job `name` whose log to read: `pod` if it is one of the job's, else the
/// default one.
pub async fn log_pod(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
    namespace: Option<&str>,
    pod: Option<&str>,
) -> Result<(String, String), ReadError> {
    let job = find_job(kube, target, name, namespace).await?;
    let ns = str_at(&job.0, "/metadata/namespace").unwrap_or("default").to_string();
    let pods = job_pods(kube, target, &job).await?;
    let chosen = match pod {
        Some(p) => pods
            .iter()
            .find_map(|x| str_at(&x.0, "/metadata/name").filter(|n| *n == p))
            .map(str::to_string)
            .ok_or_else(|| ReadError::Missing(format!("pod {p} of job {name}")))?,
        None => default_pod(&pods).ok_or_else(|| ReadError::NotReady(format!("job {name} has no pods yet")))?,
    };
    Ok((ns, chosen))
}

/// The last `tail` lines of a job's pod.
pub async fn job_logs(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    name: &str,
    namespace: Option<&str>,
    pod: Option<&str>,
    tail: u32,
) -> Result<PodLogs, ReadError> {
    let (ns, pod) = log_pod(kube, target, name, namespace, pod).await?;
    let mut stream = kube.logs(target, &ns, &pod, false, Some(tail.min(MAX_TAIL))).await.map_err(not_ready)?;
    let mut lines = Vec::new();
    while let Some(line) = stream.next().await {
        lines.push(line?);
    }
    Ok(PodLogs { pod, lines })
}

/// A log request for a container that has not started is "not ready", not a bad request.
pub fn not_ready(e: ProviderError) -> ReadError {
    if e.kind == ProviderErrorKind::InvalidRequest { ReadError::NotReady(e.message) } else { ReadError::Provider(e) }
}

/// A download Job as the read model shows it.
pub fn download_summary(job: &KubeObject) -> Option<DownloadSummary> {
    let o = &job.0;
    let annotation =
        |k: &str| str_at(o, &format!("/metadata/annotations/{}", k.replace('/', "~1"))).map(str::to_string);
    let (phase, message) = if is_true(o, "Failed") {
        (DownloadPhase::Failed, condition_text(o, "Failed"))
    } else if is_true(o, "Complete") {
        (DownloadPhase::Succeeded, None)
    } else if u32_at(o, "/status/active").unwrap_or(0) > 0 {
        (DownloadPhase::Running, None)
    } else {
        (DownloadPhase::Pending, None)
    };
    Some(DownloadSummary {
        name: str_at(o, "/metadata/name")?.to_string(),
        namespace: str_at(o, "/metadata/namespace").unwrap_or("default").to_string(),
        repo_id: annotation(ANNOTATION_MODEL_ID).unwrap_or_default(),
        destination: annotation(ANNOTATION_DESTINATION).unwrap_or_default(),
        phase,
        started_at: str_at(o, "/status/startTime").map(str::to_string),
        completed_at: str_at(o, "/status/completionTime").map(str::to_string),
        message,
    })
}

/// The model downloads of a cluster (download Jobs InstantStart created), newest first.
pub async fn list_downloads(kube: &dyn KubeApi, target: &KubeTarget) -> Result<Vec<DownloadSummary>, ProviderError> {
    let mut labels = managed();
    labels.push((LABEL_COMPONENT.to_string(), "model-download".to_string()));
    let jobs = list_or_empty(kube, target, &ours(None, labels, ("batch/v1", "Job"))).await?;
    let mut out: Vec<(Option<DateTime<Utc>>, DownloadSummary)> = jobs
        .iter()
        .filter_map(|j| Some((time_at(&j.0, "/metadata/creationTimestamp"), download_summary(j)?)))
        .collect();
    out.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    Ok(out.into_iter().map(|(_, d)| d).collect())
}

/// [`list_downloads`] as `access` may see it: the list is read with the control plane's
/// identity, so only downloads in the access's namespaces are kept.
pub async fn list_downloads_as(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    access: &KubeAccess,
) -> Result<Vec<DownloadSummary>, ProviderError> {
    let mut all = list_downloads(kube, target).await?;
    all.retain(|d| access.sees(&d.namespace));
    Ok(all)
}

/// Finds model download `name` (its Job, in whichever namespace it runs).
pub async fn find_download(kube: &dyn KubeApi, target: &KubeTarget, name: &str) -> Result<DownloadSummary, ReadError> {
    if let Err(rule) = crate::names::dns1123_label(name) {
        return Err(ReadError::Validation(crate::validate::ValidationError::invalid("name", rule)));
    }
    list_downloads(kube, target)
        .await?
        .into_iter()
        .find(|d| d.name == name)
        .ok_or_else(|| ReadError::Missing(format!("download {name}")))
}

fn entries(listing: ObjectListing) -> Vec<StorageEntry> {
    listing
        .entries
        .into_iter()
        .map(|e| StorageEntry {
            key: e.key,
            kind: match e.kind {
                S3EntryKind::Prefix => StorageEntryKind::Prefix,
                S3EntryKind::Object => StorageEntryKind::Object,
            },
            size_bytes: e.size_bytes,
        })
        .collect()
}

/// The shared storage of a cluster: the claim InstantStart set up and the bucket's top level.
/// Empty for clusters whose storage InstantStart did not set up.
pub async fn storage(
    aws: &dyn AwsCloud,
    kube: &dyn KubeApi,
    rec: &ClusterRecord,
) -> Result<Vec<StorageSummary>, ProviderError> {
    let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
    let mut out = Vec::new();
    if let Some(facts) = storage_facts(rec) {
        out.push(bucket_storage(aws, kube, &target, facts).await?);
    }
    for fs in crate::workflow::fsx::cluster_volumes(aws, &rec.region, &rec.name).await? {
        let name = fs.tags.get(TAG_FSX_VOLUME).cloned().unwrap_or_default();
        let claim = ObjectRef {
            api_version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            namespace: Some(crate::workflow::fsx::FSX_NAMESPACE.into()),
            name: crate::workflow::fsx::claim_name(&name),
        };
        let status = match kube.get(&target, &claim).await {
            Ok(Some(pvc)) => str_at(&pvc.0, "/status/phase").unwrap_or("Pending").to_string(),
            Ok(None) => "missing".to_string(),
            Err(e) if e.kind == ProviderErrorKind::NotFound => "missing".to_string(),
            Err(e) => return Err(e),
        };
        out.push(StorageSummary {
            kind: StorageKind::FsxLustre,
            mount_path: crate::workflow::fsx::mount_path(&name),
            claim: format!("{}/{}", crate::workflow::fsx::FSX_NAMESPACE, claim.name),
            name,
            bucket: String::new(),
            status,
            entries: vec![],
            file_system: Some(fs),
        });
    }
    Ok(out)
}

/// The shared bucket's entry of [`storage`].
async fn bucket_storage(
    aws: &dyn AwsCloud,
    kube: &dyn KubeApi,
    target: &KubeTarget,
    facts: crate::workload::SharedStorageFacts,
) -> Result<StorageSummary, ProviderError> {
    let claim = ObjectRef {
        api_version: "v1".into(),
        kind: "PersistentVolumeClaim".into(),
        namespace: Some(facts.namespace.clone()),
        name: facts.claim.clone(),
    };
    let status = match kube.get(target, &claim).await {
        Ok(Some(pvc)) => str_at(&pvc.0, "/status/phase").unwrap_or("Pending").to_string(),
        Ok(None) => "missing".to_string(),
        Err(e) if e.kind == ProviderErrorKind::NotFound => "missing".to_string(),
        Err(e) => return Err(e),
    };
    let (bucket, entries) = match &facts.bucket {
        Some(b) => (b.clone(), entries(aws.list_objects(b, "", None).await?)),
        None => (String::new(), vec![]),
    };
    Ok(StorageSummary {
        kind: StorageKind::S3,
        name: facts.volume,
        bucket,
        mount_path: facts.mount_path,
        claim: format!("{}/{}", facts.namespace, facts.claim),
        status,
        entries,
        file_system: None,
    })
}

/// A listing prefix: empty (the bucket's top level) or a relative key prefix ending with `/`,
/// without empty, `.` or `..` segments or control characters.
pub fn check_prefix(prefix: &str) -> Result<(), crate::validate::ValidationError> {
    let bad = |rule: &str| Err(crate::validate::ValidationError::invalid("prefix", rule));
    if prefix.is_empty() {
        return Ok(());
    }
    if prefix.len() > 1024 {
        return bad("must be at most 1024 characters long");
    }
    if prefix.starts_with('/') {
        return bad("must be relative to the bucket (no leading '/')");
    }
    if !prefix.ends_with('/') {
        return bad("must end with '/' (one level of the bucket is listed, like a folder)");
    }
    if prefix.chars().any(char::is_control) {
        return bad("must not contain control characters");
    }
    if prefix.strip_suffix('/').unwrap_or(prefix).split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return bad("must not contain empty, '.' or '..' segments");
    }
    Ok(())
}

/// The list a storage listing's cursor belongs to (`crate::page::Cursor`).
const STORAGE_OBJECTS_LIST: &str = "storage_objects";

/// One page of one level of the cluster's shared bucket under `prefix` (`""` or ending with
/// `/`), from the start or from `cursor` (a previous page's `next_cursor`).
///
/// # Guarantees
/// - A page holds at most `LIST_OBJECTS_LIMIT` entries; `next_cursor` is present exactly when
///   more follow, so nothing is silently left out.
/// - A cursor is bound to its prefix: one from another prefix or list, or not a cursor at all,
///   is a `400` naming `cursor`.
pub async fn storage_objects(
    aws: &dyn AwsCloud,
    rec: &ClusterRecord,
    prefix: &str,
    cursor: Option<&str>,
) -> Result<StorageListing, ReadError> {
    check_prefix(prefix)?;
    let token = match cursor {
        None => None,
        Some(text) => {
            let c = crate::page::Cursor::decode(STORAGE_OBJECTS_LIST, 2, text)?;
            if c.key()[0] != prefix {
                let rule = format!("belongs to the listing of prefix {:?}, not {prefix:?}", c.key()[0]);
                return Err(crate::validate::ValidationError::invalid("cursor", rule).into());
            }
            Some(c.key()[1].clone())
        }
    };
    let bucket =
        rec.bucket.as_deref().ok_or_else(|| ReadError::Missing(format!("a shared bucket of cluster {}", rec.name)))?;
    let listing = aws.list_objects(bucket, prefix, token.as_deref()).await?;
    let next_cursor = listing
        .next_token
        .clone()
        .map(|t| crate::page::Cursor::new(STORAGE_OBJECTS_LIST, vec![prefix.to_string(), t]).encode());
    Ok(StorageListing { prefix: prefix.to_string(), entries: entries(listing), next_cursor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hyperpod(status: Value) -> KubeObject {
        KubeObject(json!({
            "apiVersion": "sagemaker.amazonaws.com/v1",
            "kind": "HyperPodPyTorchJob",
            "metadata": { "name": "llama", "namespace": "default", "creationTimestamp": "2026-01-02T03:04:05Z",
                          "labels": { "instantstart.io/recipe": "torch" } },
            "spec": {
                "replicaSpecs": [{ "name": "workers", "replicas": 2, "template": { "spec": { "containers": [{
                    "name": "pytorch", "env": [{ "name": "MLFLOW_TRACKING_URI", "value": "arn:aws:sagemaker:us-east-1:1:mlflow-tracking-server/t" }]
                }] } } }],
                "runPolicy": { "restartPolicy": { "numRestartBeforeFullJobRestart": 3, "maxFullJobRestarts": 1 } }
            },
            "status": status,
        }))
    }

    fn cond(t: &str, reason: &str) -> Value {
        json!({ "type": t, "status": "True", "reason": reason, "message": format!("{t} message") })
    }

    #[test]
    fn hyperpod_phase_and_recovery_budget_follow_the_operator_status() {
        let pods = vec![
            WorkloadPod { name: "llama-workers-0".into(), phase: "Running".into(), node: None, restarts: 0 },
            WorkloadPod { name: "llama-workers-1".into(), phase: "Pending".into(), node: None, restarts: 0 },
        ];
        let fresh = job_summary(
            &hyperpod(json!({ "conditions": [cond("Created", "Created"), cond("Running", "Running")] })),
            &pods,
        )
        .unwrap();
        assert_eq!(fresh.phase, JobPhase::Running);
        assert_eq!(fresh.replicas, 2);
        assert_eq!(fresh.pods, PodCounts { pending: 1, running: 1, succeeded: 0, failed: 0 });
        // N = 3 in-place restarts per window, M = 1 full restart: 3·2 + 1 = 7 faults survivable.
        assert_eq!(fresh.recovery, Some(RecoveryStatus { budget: 7, used: 0, remaining: 7 }));
        assert_eq!(fresh.recipe.as_deref(), Some("torch"));
        assert_eq!(
            fresh.mlflow_tracking_arn.as_deref(),
            Some("arn:aws:sagemaker:us-east-1:1:mlflow-tracking-server/t")
        );
        assert!(fresh.created_at.is_some());

        let restarting = job_summary(
            &hyperpod(json!({
                "conditions": [cond("Running", "Running"), cond("Restarting", "ProcessFault")],
                "restartCount": 2,
                "restartStatus": { "restartCount": 2, "fullJobRestartCount": 0 }
            })),
            &[],
        )
        .unwrap();
        assert_eq!(restarting.phase, JobPhase::Restarting);
        assert_eq!(restarting.message.as_deref(), Some("ProcessFault: Restarting message"));
        assert_eq!(restarting.recovery, Some(RecoveryStatus { budget: 7, used: 2, remaining: 5 }));

        let after_full =
            recovery(&hyperpod(json!({ "restartStatus": { "restartCount": 1, "fullJobRestartCount": 1 } })).0);
        assert_eq!(after_full, RecoveryStatus { budget: 7, used: 5, remaining: 2 });

        let failed = job_summary(
            &hyperpod(json!({ "conditions": [cond("Failed", "RestartBudgetExhausted")], "restartCount": 7 })),
            &[],
        )
        .unwrap();
        assert_eq!(failed.phase, JobPhase::Failed);
        assert_eq!(failed.recovery, Some(RecoveryStatus { budget: 7, used: 7, remaining: 0 }));
        assert!(failed.message.unwrap().starts_with("RestartBudgetExhausted"));

        let done = job_summary(&hyperpod(json!({ "conditions": [cond("Completed", "Completed")] })), &[]).unwrap();
        assert_eq!(done.phase, JobPhase::Succeeded);
        assert_eq!(job_summary(&hyperpod(json!({})), &[]).unwrap().phase, JobPhase::Pending);
    }

    #[test]
    fn ray_phase_follows_kuberay_status() {
        let ray = |status: Value| {
            KubeObject(json!({
                "apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": { "name": "grpo", "namespace": "default" },
                "spec": { "rayClusterSpec": { "workerGroupSpecs": [{ "replicas": 3 }] } },
                "status": status,
            }))
        };
        let phase = |s: Value| job_summary(&ray(s), &[]).unwrap().phase;
        assert_eq!(phase(json!({ "jobDeploymentStatus": "Initializing" })), JobPhase::Pending);
        assert_eq!(phase(json!({ "jobDeploymentStatus": "Running", "jobStatus": "RUNNING" })), JobPhase::Running);
        assert_eq!(phase(json!({ "jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED" })), JobPhase::Succeeded);
        assert_eq!(phase(json!({ "jobDeploymentStatus": "Complete", "jobStatus": "FAILED" })), JobPhase::Failed);
        assert_eq!(phase(json!({ "jobDeploymentStatus": "Retrying" })), JobPhase::Restarting);
        let s = job_summary(&ray(json!({})), &[]).unwrap();
        assert_eq!((s.replicas, s.recovery, s.runtime), (4, None, JobRuntime::Ray));
    }

    #[test]
    fn downloads_read_their_annotations_and_job_status() {
        let job = |status: Value| {
            KubeObject(json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": { "name": "download-x", "namespace": "default",
                              "annotations": { "instantstart.io/model-id": "Qwen/Qwen3-0.6B", "instantstart.io/destination": "models/Qwen/Qwen3-0.6B" } },
                "status": status,
            }))
        };
        let d = download_summary(&job(json!({ "active": 1, "startTime": "2026-01-01T00:00:00Z" }))).unwrap();
        assert_eq!(
            (d.phase, d.repo_id.as_str(), d.destination.as_str()),
            (DownloadPhase::Running, "Qwen/Qwen3-0.6B", "models/Qwen/Qwen3-0.6B")
        );
        assert_eq!(d.started_at.as_deref(), Some("2026-01-01T00:00:00Z"));
        let d = download_summary(&job(json!({ "conditions": [cond("Failed", "BackoffLimitExceeded")] }))).unwrap();
        assert_eq!(d.phase, DownloadPhase::Failed);
        assert_eq!(d.message.as_deref(), Some("BackoffLimitExceeded: Failed message"));
        let d = download_summary(&job(
            json!({ "conditions": [cond("Complete", "")], "completionTime": "2026-01-01T00:10:00Z" }),
        ))
        .unwrap();
        assert_eq!((d.phase, d.completed_at.as_deref()), (DownloadPhase::Succeeded, Some("2026-01-01T00:10:00Z")));
    }

    #[test]
    fn listing_prefixes_are_relative_folders() {
        for ok in ["", "models/", "models/Qwen/Qwen3-0.6B/"] {
            assert!(check_prefix(ok).is_ok(), "{ok}");
        }
        for bad in ["/models/", "models", "a//", "../", "a/./", "a\n/"] {
            let e = check_prefix(bad).unwrap_err();
            assert_eq!(e.findings[0].field, "prefix", "{bad}");
        }
    }

    #[test]
    fn foreign_jobs_are_marked_and_own_their_pods_by_owner_or_ray_cluster() {
        let ours = KubeObject(json!({
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": { "name": "a", "namespace": "default", "uid": "u-a",
                          "labels": { "app.kubernetes.io/managed-by": "instantstart", "app.kubernetes.io/instance": "a" } },
        }));
        let theirs = KubeObject(json!({
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": { "name": "b", "namespace": "default", "uid": "u-b" },
        }));
        let ray = KubeObject(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": { "name": "r", "namespace": "default", "uid": "u-r" },
            "status": { "rayClusterName": "r-raycluster-x" },
        }));
        let kubeflow = KubeObject(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": { "name": "k", "namespace": "ml" },
            "spec": { "pytorchReplicaSpecs": { "Master": { "replicas": 1 }, "Worker": { "replicas": 3 } } },
            "status": { "conditions": [cond("Running", "PyTorchJobRunning")] },
        }));
        let pod = |ns: &str, labels: Value, owner: Option<&str>| {
            let mut p = json!({ "metadata": { "name": "p", "namespace": ns, "labels": labels } });
            if let Some(uid) = owner {
                p["metadata"]["ownerReferences"] = json!([{ "kind": "X", "name": "x", "uid": uid }]);
            }
            KubeObject(p)
        };
        let managed = json!({ "app.kubernetes.io/managed-by": "instantstart", "app.kubernetes.io/instance": "a" });
        // (job, pod, owned)
        let cases = [
            (&ours, pod("default", managed.clone(), None), true),
            (&ours, pod("other", managed, None), false),
            (&ours, pod("default", json!({ "app.kubernetes.io/instance": "a" }), None), false),
            (&theirs, pod("default", json!({}), Some("u-b")), true),
            (&theirs, pod("default", json!({}), Some("u-a")), false),
            (&theirs, pod("default", json!({ "app.kubernetes.io/instance": "b" }), None), false),
            (&ray, pod("default", json!({ "ray.io/cluster": "r-raycluster-x" }), None), true),
            (&ray, pod("default", json!({ "ray.io/cluster": "other" }), None), false),
        ];
        for (i, (job, p, owned)) in cases.iter().enumerate() {
            assert_eq!(job_owns(job, p), *owned, "case {i}");
        }
        assert!(!job_summary(&ours, &[]).unwrap().foreign);
        assert!(job_summary(&theirs, &[]).unwrap().foreign);
        let k = job_summary(&kubeflow, &[]).unwrap();
        assert_eq!((k.runtime, k.replicas, k.phase, k.foreign), (JobRuntime::Pytorch, 4, JobPhase::Running, true));
        assert_eq!(serde_json::to_value(k.runtime).unwrap(), "pytorch");
    }

    #[test]
    fn the_default_log_pod_is_the_ray_head_or_rank_zero() {
        let pod = |name: &str, head: bool| {
            let labels = if head { json!({ "ray.io/node-type": "head" }) } else { json!({}) };
            KubeObject(json!({ "metadata": { "name": name, "labels": labels } }))
        };
        assert_eq!(default_pod(&[pod("a-worker", false), pod("a-head", true)]).as_deref(), Some("a-head"));
        assert_eq!(
            default_pod(&[pod("j-workers-0", false), pod("j-workers-1", false)]).as_deref(),
            Some("j-workers-0")
        );
        assert_eq!(default_pod(&[]), None);
    }
}

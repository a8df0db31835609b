//! Training jobs: their view types (re-exported from [`crate::workload`]), the reads that build
//! them from the cluster, and the submission rules of `job_submit` and `job_delete`.
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
//!
//! # Guarantees
//!
//! - A job is found by name in the namespace asked for, or in the only namespace that has one
//!   ([`find_job`]: `409` when several do, `404` when none does); its pods, log and metrics
//!   are those of the job found that way.
//! - A delete names the namespace the job is in, and a replayed delete of a job that is gone
//!   returns its operation ([`delete`], through [`super::workloads::delete`]).

use super::error::ReadError;
use super::pods::pod_view;
use super::workloads::{Caller, DeleteTarget, Submitted, check_namespace};
use crate::engine::{Engine, EngineError};
use crate::operation::OperationKind;
use crate::provider::*;
use crate::store::Store;
use crate::workflow::workloads::workload_labels;
use crate::workload::read::{condition_text, is_true, list_or_empty, ours, str_at, time_at, u32_at};
use crate::workload::{
    JobPhase, JobRuntime, ObjectCondition, PodCounts, RecoveryStatus, WorkloadEvent, WorkloadKind, WorkloadPod,
    WorkloadRequest, condition,
};
use futures::StreamExt;
use serde_json::Value;

pub use crate::labels::LABEL_RECIPE;
pub use crate::workload::{JobDetail, JobSummary, PodLogs};

/// `apiVersion`/`kind` of HyperPod training jobs.
pub const HYPERPOD_JOB: (&str, &str) = ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob");
/// `apiVersion`/`kind` of KubeRay jobs.
pub const RAY_JOB: (&str, &str) = ("ray.io/v1", "RayJob");
/// `apiVersion`/`kind` of Kubeflow training-operator jobs (only ever foreign).
pub const PYTORCH_JOB: (&str, &str) = ("kubeflow.org/v1", "PyTorchJob");
/// Every kind listed as a training job (see the module docs).
pub const JOB_KINDS: [(&str, &str); 3] = [HYPERPOD_JOB, RAY_JOB, PYTORCH_JOB];
/// Most log lines one request returns.
pub const MAX_TAIL: u32 = 5000;

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
        foreign: !crate::workload::is_ours(job),
        admission: None,
    })
}

/// Kueue's Workloads and ClusterQueues, when some job names a queue (a cluster without Kueue
/// has none; see [`crate::workload::admission`]). `None` when the Workloads cannot be read (a token whose
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
        list_or_empty(kube, target, &ours(namespace, vec![], crate::workload::admission::KUEUE_WORKLOAD)).await.ok()?;
    // A token confined to namespaces may not list cluster-scoped queues: no borrowing figure then.
    let queues =
        list_or_empty(kube, target, &ours(None, vec![], crate::workload::admission::KUEUE_CLUSTER_QUEUE)).await;
    Some((workloads, queues.unwrap_or_default()))
}

/// Whether `pod` belongs to training job `job` (see the module docs).
pub fn job_owns(job: &KubeObject, pod: &KubeObject) -> bool {
    let (j, p) = (&job.0, &pod.0);
    if str_at(j, "/metadata/namespace").unwrap_or("default") != str_at(p, "/metadata/namespace").unwrap_or("default") {
        return false;
    }
    if crate::workload::is_ours(job) {
        return crate::workload::is_ours(pod)
            && pod.label(crate::labels::LABEL_INSTANCE) == str_at(j, "/metadata/name");
    }
    let uid = str_at(j, "/metadata/uid");
    let owned = uid.is_some()
        && p.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| r.get("uid").and_then(Value::as_str) == uid));
    let ray_cluster = str_at(j, "/status/rayClusterName").filter(|c| !c.is_empty());
    owned || (ray_cluster.is_some() && pod.label("ray.io/cluster") == ray_cluster)
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
            s.admission = kueue.as_ref().and_then(|(w, q)| crate::workload::admission::admission_of(j, w, q));
            Some(s)
        })
        .collect();
    out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.name.cmp(&b.name)));
    Ok(out)
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
    if crate::workload::is_ours(job) {
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
    summary.admission = kueue.as_ref().and_then(|(w, q)| crate::workload::admission::admission_of(&job, w, q));
    let mut names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
    names.push(name.to_string());
    Ok(JobDetail {
        summary,
        conditions: ObjectCondition::of(&job.0),
        events: events(kube, target, &ns, &names).await,
        volumes: crate::workload::volumes::mounted_volumes(std::slice::from_ref(&job)),
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

/// Submits training job `params` to `cluster` (or answers its dry run): the `submit_job`
/// workflow validates the body (every finding, relative to it) and runs the preflight.
pub async fn submit(
    engine: &Engine,
    cluster: &str,
    params: Value,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, EngineError> {
    let request = serde_json::to_value(WorkloadRequest::new(cluster, WorkloadKind::TrainingJob, params))
        .map_err(|e| EngineError::InvalidState(e.to_string()))?;
    super::workloads::submit(engine, OperationKind::SubmitJob, request, caller, dry, key).await
}

/// Deletes training job `name` of `cluster` (in `namespace`, or the only namespace that has
/// it); see [`super::workloads::delete`] for a job that is gone.
#[allow(clippy::too_many_arguments)]
pub async fn delete(
    engine: &Engine,
    store: &dyn Store,
    kube: &dyn KubeApi,
    target: &KubeTarget,
    cluster: &str,
    name: &str,
    namespace: Option<&str>,
    caller: &Caller,
    dry: bool,
    key: Option<String>,
) -> Result<Submitted, ReadError> {
    let found = find_job(kube, target, name, namespace)
        .await
        .map(|job| str_at(&job.0, "/metadata/namespace").unwrap_or("default").to_string());
    let what = DeleteTarget { kind: OperationKind::DeleteJob, workload: WorkloadKind::TrainingJob, cluster, name };
    super::workloads::delete(engine, store, what, found, caller, dry, key).await
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

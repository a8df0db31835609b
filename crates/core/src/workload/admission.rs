//! Where a training job stands in its team's Kueue queue (task governance): queued, admitted,
//! preempted or finished, and why — read from Kueue's objects, the same way on a real cluster
//! and on the simulator's API server.
//!
//! A job that names a queue (`kueue.x-k8s.io/queue-name`) gets a Kueue `Workload`
//! (`kueue.x-k8s.io/v1beta1`) owned by it (an owner reference to the job's uid). Its
//! `status.conditions` say where it is ([`admission_of`]):
//!
//! | conditions (status `True`) | state |
//! | --- | --- |
//! | `Finished` | `finished` |
//! | `Admitted` (not `Evicted`) | `admitted` |
//! | `Evicted` or `Preempted`, not admitted again | `preempted` (the reason and message of the eviction) |
//! | none of these (`QuotaReserved` `False`: waiting for quota) | `queued` (the `QuotaReserved` message says which quota is short) |
//!
//! The accelerators the Workload holds come from `status.admission.podSetAssignments[].resourceUsage`;
//! how much its team borrows from idle quota of other teams from the team's `ClusterQueue`
//! (`status.flavorsUsage[].resources[].borrowed`).
//!
//! # Guarantees
//!
//! - A job that names no queue has no admission (`None`); one whose Workload does not exist yet
//!   is `queued` with a message saying so.
//! - Nothing here changes the cluster; a cluster without Kueue's kinds has no Workloads.

use crate::governance::{PRIORITY_LABEL, QUEUE_LABEL, class_of_priority, team_of_queue};
use crate::provider::KubeObject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `apiVersion`/`kind` of Kueue's Workloads.
pub const KUEUE_WORKLOAD: (&str, &str) = ("kueue.x-k8s.io/v1beta1", "Workload");
/// `apiVersion`/`kind` of Kueue's ClusterQueues (one per team, cluster-scoped).
pub const KUEUE_CLUSTER_QUEUE: (&str, &str) = ("kueue.x-k8s.io/v1beta1", "ClusterQueue");
/// Every field of Kueue's objects the read below looks at, as `(kind, path)` (`[]`: each item of
/// a list), outside `metadata`. `crates/recipes/tests/manifests.rs` walks each path through the
/// vendored CRD's `openAPIV3Schema` (Kueue v0.19.2, `vendor/schemas/kueue`), so a field that
/// Kueue does not have at `v1beta1` fails there rather than reading nothing on a real cluster.
pub const KUEUE_FIELDS_READ: &[(&str, &str)] = &[
    ("Workload", "status.conditions[].type"),
    ("Workload", "status.conditions[].status"),
    ("Workload", "status.conditions[].reason"),
    ("Workload", "status.conditions[].message"),
    ("Workload", "status.admission.clusterQueue"),
    ("Workload", "status.admission.podSetAssignments[].resourceUsage"),
    ("ClusterQueue", "status.flavorsUsage[].resources[].name"),
    ("ClusterQueue", "status.flavorsUsage[].resources[].borrowed"),
];
/// Extended resources counted as accelerators.
pub const ACCELERATOR_RESOURCES: &[&str] = &["nvidia.com/gpu", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore"];

/// Where a job is in its team's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdmissionState {
    /// Waiting for quota: its pods do not run.
    Queued,
    /// Quota reserved and admitted: its pods run.
    Admitted,
    /// Evicted by a higher-priority job of its team or a team reclaiming its lent quota; it
    /// waits in the queue again.
    Preempted,
    /// The job ended; its quota is free.
    Finished,
}

impl AdmissionState {
    pub fn as_str(self) -> &'static str {
        match self {
            AdmissionState::Queued => "queued",
            AdmissionState::Admitted => "admitted",
            AdmissionState::Preempted => "preempted",
            AdmissionState::Finished => "finished",
        }
    }
}

/// A job's place in its team's Kueue queue (task governance), read from Kueue's Workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobAdmission {
    pub state: AdmissionState,
    /// The team whose queue the job names (`hyperpod-ns-<team>-localqueue`), when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// The Kueue LocalQueue the job names.
    pub queue: String,
    /// The priority class (`kueue.x-k8s.io/priority-class: <class>-priority`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// The Workload's name, once Kueue created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// The ClusterQueue that admitted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    /// Accelerators the admitted job holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerators: Option<u32>,
    /// Accelerators the job's team borrows from other teams' idle quota right now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_borrowed: Option<u32>,
    /// Kueue's reason (`Pending`, `Preempted`, `InClusterQueue`, `InCohortReclamation`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Kueue's message: which quota is short, who preempted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn condition<'a>(obj: &'a Value, name: &str) -> Option<&'a Value> {
    super::condition(obj, name).filter(|c| str_at(c, "/status") == Some("True"))
}

fn quantity(v: &Value) -> u32 {
    v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())).unwrap_or(0) as u32
}

/// Accelerators of a `resourceUsage` / `resources` map.
fn accelerators(map: Option<&Value>) -> u32 {
    let Some(m) = map.and_then(Value::as_object) else { return 0 };
    ACCELERATOR_RESOURCES.iter().filter_map(|r| m.get(*r)).map(quantity).sum()
}

/// Whether `workload` belongs to `job` (an owner reference to the job's uid, or the same name
/// and kind when the uid is unknown).
pub fn workload_of(job: &KubeObject, workload: &KubeObject) -> bool {
    let (j, w) = (&job.0, &workload.0);
    if str_at(j, "/metadata/namespace") != str_at(w, "/metadata/namespace") {
        return false;
    }
    let uid = str_at(j, "/metadata/uid");
    let refs = w.pointer("/metadata/ownerReferences").and_then(Value::as_array);
    refs.into_iter().flatten().any(|r| match uid {
        Some(uid) => str_at(r, "/uid") == Some(uid),
        None => str_at(r, "/kind") == str_at(j, "/kind") && str_at(r, "/name") == str_at(j, "/metadata/name"),
    })
}

/// Borrowed accelerators of a ClusterQueue (`status.flavorsUsage[].resources[].borrowed`).
fn borrowed(cluster_queue: &Value) -> u32 {
    let flavors = cluster_queue.pointer("/status/flavorsUsage").and_then(Value::as_array);
    flavors
        .into_iter()
        .flatten()
        .flat_map(|f| f.get("resources").and_then(Value::as_array).into_iter().flatten())
        .filter(|r| str_at(r, "/name").is_some_and(|n| ACCELERATOR_RESOURCES.contains(&n)))
        .map(|r| r.get("borrowed").map_or(0, quantity))
        .sum()
}

/// The admission of `job` given the cluster's Workloads and ClusterQueues; `None` when the job
/// names no queue.
pub fn admission_of(job: &KubeObject, workloads: &[KubeObject], cluster_queues: &[KubeObject]) -> Option<JobAdmission> {
    let queue = job.label(QUEUE_LABEL)?.to_string();
    let team = team_of_queue(&queue).map(str::to_string);
    let priority = job.label(PRIORITY_LABEL).map(|p| class_of_priority(p).unwrap_or(p).to_string());
    let mut a = JobAdmission {
        state: AdmissionState::Queued,
        team,
        queue,
        priority,
        workload: None,
        cluster_queue: None,
        accelerators: None,
        team_borrowed: None,
        reason: None,
        message: None,
    };
    if let Some(team) = &a.team {
        let name = crate::governance::team_cluster_queue(team);
        a.team_borrowed = cluster_queues
            .iter()
            .find(|q| str_at(&q.0, "/metadata/name") == Some(name.as_str()))
            .map(|q| borrowed(&q.0));
    }
    let Some(w) = workloads.iter().find(|w| workload_of(job, w)) else {
        a.reason = Some("NoWorkload".into());
        a.message =
            Some("waiting for Kueue to create the job's Workload (is the task governance add-on running?)".into());
        return Some(a);
    };
    let o = &w.0;
    a.workload = str_at(o, "/metadata/name").map(str::to_string);
    let text = |c: &Value| (str_at(c, "/reason").map(str::to_string), str_at(c, "/message").map(str::to_string));
    let evicted = condition(o, "Evicted").or_else(|| condition(o, "Preempted"));
    let admitted = condition(o, "Admitted");
    (a.state, (a.reason, a.message)) = if let Some(c) = condition(o, "Finished") {
        (AdmissionState::Finished, text(c))
    } else if let Some(c) = admitted.filter(|_| evicted.is_none()) {
        // QuotaReserved's message names the ClusterQueue (and, in the simulator, the borrowing).
        let (reason, message) = text(c);
        (AdmissionState::Admitted, (reason, condition(o, "QuotaReserved").and_then(|q| text(q).1).or(message)))
    } else if let Some(c) = evicted {
        // The Preempted condition names who preempted; Evicted only says it was.
        let detail = condition(o, "Preempted").unwrap_or(c);
        (AdmissionState::Preempted, text(detail))
    } else {
        let pending = super::condition(o, "QuotaReserved");
        (AdmissionState::Queued, pending.map(text).unwrap_or((Some("Pending".into()), None)))
    };
    if a.state == AdmissionState::Admitted {
        a.cluster_queue = str_at(o, "/status/admission/clusterQueue").map(str::to_string);
        let sets = o.pointer("/status/admission/podSetAssignments").and_then(Value::as_array);
        a.accelerators = Some(sets.into_iter().flatten().map(|s| accelerators(s.get("resourceUsage"))).sum());
    }
    Some(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(labels: Value) -> KubeObject {
        KubeObject(json!({
            "apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
            "metadata": { "name": "sft", "namespace": "hyperpod-ns-research", "uid": "u-1", "labels": labels },
        }))
    }

    fn workload(conditions: Value, admission: Value) -> KubeObject {
        KubeObject(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": { "name": "hyperpodpytorchjob-sft-1a2b3", "namespace": "hyperpod-ns-research",
                          "ownerReferences": [{ "kind": "HyperPodPyTorchJob", "name": "sft", "uid": "u-1" }] },
            "status": { "conditions": conditions, "admission": admission },
        }))
    }

    fn cond(t: &str, reason: &str, message: &str) -> Value {
        json!({ "type": t, "status": "True", "reason": reason, "message": message })
    }

    #[test]
    fn the_state_follows_the_workloads_conditions() {
        let labels = json!({ "kueue.x-k8s.io/queue-name": "hyperpod-ns-research-localqueue",
                             "kueue.x-k8s.io/priority-class": "training-priority" });
        let cq = KubeObject(json!({
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
            "metadata": { "name": "hyperpod-ns-research-clusterqueue" },
            "status": { "flavorsUsage": [{ "name": "ml.g5.12xlarge", "resources": [
                { "name": "nvidia.com/gpu", "total": "12", "borrowed": "4" }, { "name": "cpu", "total": "10", "borrowed": "9" }] }] },
        }));
        let admission = json!({ "clusterQueue": "hyperpod-ns-research-clusterqueue",
            "podSetAssignments": [{ "name": "workers", "count": 2, "resourceUsage": { "nvidia.com/gpu": "8", "cpu": "4" } }] });
        let pending = json!({ "type": "QuotaReserved", "status": "False", "reason": "Pending",
                              "message": "couldn't assign flavors to pod set workers: insufficient quota for nvidia.com/gpu" });
        let cases: Vec<(Vec<KubeObject>, AdmissionState, Option<&str>)> = vec![
            (vec![], AdmissionState::Queued, Some("NoWorkload")),
            (vec![workload(json!([pending]), Value::Null)], AdmissionState::Queued, Some("Pending")),
            (
                vec![workload(
                    json!([cond("QuotaReserved", "QuotaReserved", ""), cond("Admitted", "Admitted", "")]),
                    admission.clone(),
                )],
                AdmissionState::Admitted,
                Some("Admitted"),
            ),
            (
                vec![workload(
                    json!([
                        cond("Evicted", "Preempted", "Preempted to accommodate a workload"),
                        cond("Preempted", "InClusterQueue", "Preempted to accommodate a higher priority workload")
                    ]),
                    Value::Null,
                )],
                AdmissionState::Preempted,
                Some("InClusterQueue"),
            ),
            (
                vec![workload(json!([cond("Finished", "Succeeded", "")]), Value::Null)],
                AdmissionState::Finished,
                Some("Succeeded"),
            ),
        ];
        for (workloads, state, reason) in cases {
            let a = admission_of(&job(labels.clone()), &workloads, std::slice::from_ref(&cq)).unwrap();
            assert_eq!((a.state, a.reason.as_deref()), (state, reason), "{workloads:?}");
            assert_eq!(a.team.as_deref(), Some("research"));
            assert_eq!(a.priority.as_deref(), Some("training"));
            assert_eq!(a.team_borrowed, Some(4));
            if state == AdmissionState::Admitted {
                assert_eq!(a.accelerators, Some(8));
                assert_eq!(a.cluster_queue.as_deref(), Some("hyperpod-ns-research-clusterqueue"));
            }
        }
        assert!(admission_of(&job(json!({})), &[], &[]).is_none());
    }
}

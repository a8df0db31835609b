//! Pods as every read shows them: one [`pod_view`] for the pods of jobs, downloads and
//! endpoints, and one readiness rule ([`pod_ready`]).
//!
//! # Guarantees
//!
//! - One pod gives one [`WorkloadPod`] whichever noun lists it. Before this module the job and
//!   the endpoint reads disagreed (review of issue #20): a pod without `status.phase` was
//!   `Pending` for one and `Unknown` for the other, and restarts were summed over the containers
//!   by one and read from the first container by the other. The rule now: a pod without a
//!   phase is `Pending` (the API server writes `Pending` until the pod is scheduled and its
//!   containers start), and `restarts` counts every container's restarts.

use crate::provider::KubeObject;
use crate::workload::{WorkloadPod, condition};
use serde_json::Value;

/// A pod as the read models show it.
pub fn pod_view(pod: &KubeObject) -> WorkloadPod {
    let restarts = pod
        .0
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c.get("restartCount").and_then(Value::as_u64)).sum::<u64>())
        .unwrap_or(0)
        .min(u64::from(u32::MAX)) as u32;
    WorkloadPod {
        name: pod.str_at("/metadata/name").unwrap_or_default().to_string(),
        phase: pod.str_at("/status/phase").unwrap_or("Pending").to_string(),
        node: pod.str_at("/spec/nodeName").map(str::to_string),
        restarts,
    }
}

/// Whether the pod's `Ready` condition is `True`.
pub fn pod_ready(pod: &KubeObject) -> bool {
    condition(&pod.0, "Ready").and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The cases where the job and the endpoint reads used to disagree, and the plain ones.
    #[test]
    fn one_pod_one_view() {
        // (case, pod status, phase, restarts)
        let cases = [
            ("no status yet (was Unknown for endpoints)", json!(null), "Pending", 0),
            ("no phase (was Unknown for endpoints)", json!({ "containerStatuses": [] }), "Pending", 0),
            ("running", json!({ "phase": "Running" }), "Running", 0),
            (
                "two containers (endpoints counted the first only)",
                json!({ "phase": "Running", "containerStatuses": [{ "restartCount": 2 }, { "restartCount": 3 }] }),
                "Running",
                5,
            ),
            (
                "a sidecar restarting (endpoints showed 0)",
                json!({ "phase": "Running", "containerStatuses": [{ "restartCount": 0 }, { "restartCount": 4 }] }),
                "Running",
                4,
            ),
            ("failed", json!({ "phase": "Failed", "containerStatuses": [{ "restartCount": 1 }] }), "Failed", 1),
        ];
        for (case, status, phase, restarts) in cases {
            let mut p = json!({ "metadata": { "name": "p-0" }, "spec": { "nodeName": "n-1" } });
            if !status.is_null() {
                p["status"] = status;
            }
            let v = pod_view(&KubeObject(p));
            assert_eq!((v.name.as_str(), v.node.as_deref()), ("p-0", Some("n-1")), "{case}");
            assert_eq!((v.phase.as_str(), v.restarts), (phase, restarts), "{case}");
        }
    }

    #[test]
    fn ready_is_the_ready_condition() {
        let pod = |s: &str| KubeObject(json!({ "status": { "conditions": [{ "type": "Ready", "status": s }] } }));
        assert!(pod_ready(&pod("True")));
        assert!(!pod_ready(&pod("False")));
        assert!(!pod_ready(&KubeObject(json!({}))));
    }
}

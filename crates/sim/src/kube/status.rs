//! The statuses the controllers would write for workload objects (Deployments, Jobs,
//! `PyTorchJob`s, and per kind `super::training` and `super::serving`), from the pods
//! `super::workload` derives and the scheduler's states.

use super::pod::{NodeInfo, PodView, pod_state};
use super::workload::pods_of;
use crate::world::{KubeRec, World};
use serde_json::{Map, Value, json};

/// Counts of a workload's pods.
#[derive(Default)]
struct Tally {
    total: u32,
    ready: u32,
    active: u32,
    succeeded: u32,
    failed: u32,
    first_start: Option<f64>,
    last_end: Option<f64>,
}

fn tally(pods: &[PodView], nodes: &[NodeInfo], now: f64, filter: impl Fn(&PodView) -> bool) -> Tally {
    let mut t = Tally::default();
    for p in pods.iter().filter(|p| filter(p)) {
        let st = pod_state(p, nodes, now);
        t.total += 1;
        t.ready += u32::from(st.ready);
        match st.phase {
            "Succeeded" => t.succeeded += 1,
            "Failed" => t.failed += 1,
            _ => t.active += 1,
        }
        if let Some(s) = st.scheduled_at {
            t.first_start = Some(t.first_start.map_or(s, |x: f64| x.min(s)));
        }
        if let Some(e) = st.finished_at {
            t.last_end = Some(t.last_end.map_or(e, |x: f64| x.max(e)));
        }
    }
    t
}

fn put_nonzero(status: &mut Map<String, Value>, key: &str, n: u32) {
    if n > 0 {
        status.insert(key.into(), json!(n));
    }
}

/// The status a controller would write for a workload object, if it is one.
pub(crate) fn workload_status(w: &World, key: &str, rec: &KubeRec, nodes: &[NodeInfo], now: f64) -> Option<Value> {
    let o = &rec.object;
    let kind = o.get("kind").and_then(Value::as_str)?;
    let api = o.get("apiVersion").and_then(Value::as_str)?;
    let pods = pods_of(key, rec, now);
    let t = |x: f64| w.k8s_time(x);
    match (api, kind) {
        ("apps/v1", "Deployment") => {
            let c = tally(&pods, nodes, now, |_| true);
            let mut s = Map::new();
            s.insert("observedGeneration".into(), o.pointer("/metadata/generation").cloned().unwrap_or(json!(1)));
            put_nonzero(&mut s, "replicas", c.total);
            put_nonzero(&mut s, "updatedReplicas", c.total);
            put_nonzero(&mut s, "readyReplicas", c.ready);
            put_nonzero(&mut s, "availableReplicas", c.ready);
            put_nonzero(&mut s, "unavailableReplicas", c.total - c.ready);
            let available = c.ready == c.total;
            s.insert(
                "conditions".into(),
                json!([
                    { "type": "Available", "status": if available { "True" } else { "False" },
                      "reason": if available { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                      "message": if available { "Deployment has minimum availability." } else { "Deployment does not have minimum availability." } },
                    { "type": "Progressing", "status": "True",
                      "reason": if available { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" },
                      "lastUpdateTime": t(rec.spec_changed_at) },
                ]),
            );
            // A rollout that makes no progress for progressDeadlineSeconds (default 600) is
            // reported as ProgressDeadlineExceeded, as the Deployment controller does.
            let deadline = o.pointer("/spec/progressDeadlineSeconds").and_then(Value::as_f64).unwrap_or(600.0);
            if !available && now >= rec.spec_changed_at + deadline {
                s.insert(
                    "conditions".into(),
                    json!([
                        { "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                          "message": "Deployment does not have minimum availability." },
                        { "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                          "message": format!("ReplicaSet has timed out progressing: {}", rec.fails.clone().unwrap_or_else(|| format!("{}/{} replicas available", c.ready, c.total))),
                          "lastUpdateTime": t(rec.spec_changed_at + deadline) },
                    ]),
                );
            }
            Some(Value::Object(s))
        }
        ("batch/v1", "Job") => {
            let c = tally(&pods, nodes, now, |_| true);
            let mut s = Map::new();
            if let Some(start) = c.first_start {
                s.insert("startTime".into(), json!(t(start)));
            }
            put_nonzero(&mut s, "active", c.active);
            s.insert("ready".into(), json!(c.ready));
            put_nonzero(&mut s, "succeeded", c.succeeded);
            put_nonzero(&mut s, "failed", c.failed);
            if c.total > 0 && c.failed > 0 && c.active == 0 {
                s.insert(
                    "conditions".into(),
                    json!([{ "type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": c.last_end.map(t) }]),
                );
            } else if c.total > 0 && c.succeeded == c.total {
                if let Some(end) = c.last_end {
                    s.insert("completionTime".into(), json!(t(end)));
                }
                s.insert(
                    "conditions".into(),
                    json!([{ "type": "Complete", "status": "True", "lastTransitionTime": c.last_end.map(t) }]),
                );
            }
            Some(Value::Object(s))
        }
        ("kubeflow.org/v1", "PyTorchJob") => {
            let all = tally(&pods, nodes, now, |_| true);
            let mut replica_statuses = Map::new();
            let mut types: Vec<String> = pods
                .iter()
                .filter_map(|p| p.labels.get("training.kubeflow.org/replica-type")?.as_str().map(str::to_string))
                .collect();
            types.dedup();
            for ty in types {
                let c = tally(&pods, nodes, now, |p| {
                    p.labels.get("training.kubeflow.org/replica-type").and_then(Value::as_str) == Some(ty.as_str())
                });
                let mut r = Map::new();
                put_nonzero(&mut r, "active", c.active);
                put_nonzero(&mut r, "succeeded", c.succeeded);
                put_nonzero(&mut r, "failed", c.failed);
                let mut chars = ty.chars();
                let title: String = chars.next().map(|f| f.to_uppercase().chain(chars).collect()).unwrap_or_default();
                replica_statuses.insert(title, Value::Object(r));
            }
            let created = t(rec.spec_changed_at);
            let mut conditions = vec![
                json!({ "type": "Created", "status": "True", "reason": "PyTorchJobCreated", "lastTransitionTime": created }),
            ];
            let running = all.first_start.is_some() && all.ready > 0 && all.active > 0;
            if all.total > 0 && all.failed > 0 && all.active == 0 {
                conditions.push(json!({ "type": "Failed", "status": "True", "reason": "PyTorchJobFailed", "message": rec.fails.clone().unwrap_or_default(), "lastTransitionTime": all.last_end.map(t) }));
            } else if all.total > 0 && all.succeeded == all.total {
                conditions.push(json!({ "type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "lastTransitionTime": all.last_end.map(t) }));
            } else if running {
                conditions.push(json!({ "type": "Running", "status": "True", "reason": "PyTorchJobRunning" }));
            }
            let mut s = json!({ "conditions": conditions, "replicaStatuses": replica_statuses });
            if let Some(start) = all.first_start {
                s["startTime"] = json!(t(start));
            }
            if all.total > 0 && all.succeeded == all.total {
                s["completionTime"] = json!(all.last_end.map(t));
            }
            Some(s)
        }
        (super::serving::IEC_API, super::serving::IEC_KIND) => {
            let c = tally(&pods, nodes, now, |_| true);
            Some(super::serving::operator_status(w, rec, c.total, c.ready))
        }
        (super::training::HP_API, super::training::HP_KIND) => {
            Some(super::training::hyperpod_status(w, rec, &pods, nodes, now))
        }
        (super::training::RAY_API, super::training::RAY_KIND) => {
            Some(super::training::ray_status(w, rec, &pods, nodes, now))
        }
        _ => None,
    }
}

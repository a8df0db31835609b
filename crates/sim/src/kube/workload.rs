//! The pods a stored workload object runs (Deployments, Jobs, `PyTorchJob`s, HyperPod and
//! Ray jobs, the inference operator's Deployments, bare Pods): derived from the object and
//! time, never stored ([`pods_of`]), each kind shaped by its controller's `pods` module
//! (`super::training::pods`, `super::serving::pods`); DaemonSet pods on the Nodes; the Pod
//! objects the API server serves. The pod model and the scheduler are `super::pod`, the Nodes
//! `super::nodes`, the statuses `super::status`.

pub(crate) use super::pod::{DURATION_ANNOTATION, DURATION_ENV};
use super::pod::{NodeInfo, PodState, PodView, str_map, suffix};
use crate::base::{stable_hash, uuid_from};
use crate::timings;
use crate::world::World;
use crate::world::{KubeRec, KubeWorld, Restart};
use serde_json::{Map, Value, json};

fn duration(annotations: &[&Map<String, Value>], default: f64) -> f64 {
    duration_or_env(annotations, None, default)
}

/// [`DURATION_ANNOTATION`] from the first map that has it, else [`DURATION_ENV`] of the first
/// container of `spec`, else `default`.
fn duration_or_env(annotations: &[&Map<String, Value>], spec: Option<&Value>, default: f64) -> f64 {
    let number = |v: &Value| v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()));
    let env = || {
        spec?
            .pointer("/containers/0/env")
            .and_then(Value::as_array)?
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(DURATION_ENV))
            .and_then(|e| e.get("value"))
            .and_then(number)
    };
    annotations
        .iter()
        .find_map(|a| a.get(DURATION_ANNOTATION).and_then(number))
        .or_else(env)
        .filter(|d| d.is_finite() && *d >= 0.0)
        .unwrap_or(default)
}

fn slot_start(rec: &KubeRec, slot: &str) -> (u32, f64) {
    match rec.restarts.get(slot) {
        Some(Restart { epoch, since }) => (*epoch, since.max(rec.spec_changed_at)),
        None => (0, rec.spec_changed_at),
    }
}

/// The pods a stored object runs at `now` (a Pod object is its own pod).
pub(crate) fn pods_of(key: &str, rec: &KubeRec, now: f64) -> Vec<PodView> {
    if let Some((deployment, operator_rec)) = super::serving::operator_deployment(rec) {
        // The HyperPod inference operator runs the endpoint as a Deployment.
        let mut pods = pods_of(key, &KubeRec { object: deployment, ..operator_rec }, now);
        for p in &mut pods {
            p.source = key.to_string();
        }
        return pods;
    }
    let o = &rec.object;
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
    let api = o.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let namespace = o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
    let uid = o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let own_annotations = str_map(o.pointer("/metadata/annotations"));
    let owner = Some((api.to_string(), kind.to_string(), name.clone(), uid.clone()));
    let change = rec.spec_changed_at.to_bits().to_string();
    let pod = |pod_name: String,
               slot: String,
               template: &Value,
               extra: &[(&str, String)],
               owner: Option<(String, String, String, String)>,
               batch_default: Option<f64>,
               world_size: u32,
               rank: u32| {
        let (epoch, start) = slot_start(rec, &slot);
        let mut labels = str_map(template.pointer("/metadata/labels"));
        for (k, v) in extra {
            labels.insert((*k).into(), Value::String(v.clone()));
        }
        let annotations = str_map(template.pointer("/metadata/annotations"));
        let batch_run =
            batch_default.map(|d| duration_or_env(&[&annotations, &own_annotations], template.get("spec"), d));
        PodView {
            uid: uuid_from(stable_hash(&[&uid, &slot, &epoch.to_string(), &change]), stable_hash(&[&pod_name])),
            name: pod_name,
            namespace: namespace.clone(),
            labels,
            annotations,
            owner,
            source: key.to_string(),
            slot: Some(slot),
            spec: template.get("spec").cloned().unwrap_or_else(|| json!({})),
            start,
            batch_run,
            fails: rec.fails.clone(),
            world_size,
            rank,
            run: None,
        }
    };
    match (api, kind) {
        ("apps/v1", "Deployment") => {
            let spec_replicas = o.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
            let replicas = super::serving::replicas_at(rec, spec_replicas, now);
            let template = o.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
            let rs_hash = suffix(stable_hash(&[&uid, &change]), 10);
            let rs_name = format!("{name}-{rs_hash}");
            let rs_owner = Some((
                "apps/v1".to_string(),
                "ReplicaSet".to_string(),
                rs_name.clone(),
                uuid_from(stable_hash(&[&rs_name, &uid]), 0),
            ));
            (0..replicas)
                .map(|i| {
                    let slot = i.to_string();
                    let (epoch, _) = slot_start(rec, &slot);
                    // A slot scaled away and back gets a new pod (name and uid).
                    let born = super::serving::slot_born(rec, spec_replicas, i, now);
                    let incarnation =
                        if born > rec.spec_changed_at { born.to_bits().to_string() } else { String::new() };
                    let pod_name = format!(
                        "{rs_name}-{}",
                        suffix(stable_hash(&[&rs_hash, &slot, &epoch.to_string(), &incarnation]), 5)
                    );
                    let mut p = pod(
                        pod_name,
                        slot,
                        &template,
                        &[("pod-template-hash", rs_hash.clone())],
                        rs_owner.clone(),
                        None,
                        replicas,
                        i,
                    );
                    if born > p.start {
                        p.start = born;
                        p.uid = uuid_from(stable_hash(&[&p.uid, &incarnation]), stable_hash(&[&p.name]));
                    }
                    super::serving::relabel(rec, &mut p);
                    p
                })
                .collect()
        }
        ("batch/v1", "Job") => {
            if o.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
                return Vec::new();
            }
            let parallelism = o.pointer("/spec/parallelism").and_then(Value::as_u64).unwrap_or(1) as u32;
            let completions = o.pointer("/spec/completions").and_then(Value::as_u64).unwrap_or(1) as u32;
            let n = parallelism.min(completions.max(1)).max(1);
            let template = o.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
            let extra = [
                ("batch.kubernetes.io/job-name", name.clone()),
                ("job-name", name.clone()),
                ("batch.kubernetes.io/controller-uid", uid.clone()),
                ("controller-uid", uid.clone()),
            ];
            (0..n)
                .map(|i| {
                    let slot = i.to_string();
                    let (epoch, _) = slot_start(rec, &slot);
                    let pod_name =
                        format!("{name}-{}", suffix(stable_hash(&[&uid, &slot, &epoch.to_string(), &change]), 5));
                    let mut p =
                        pod(pod_name, slot, &template, &extra, owner.clone(), Some(timings::JOB_DEFAULT_RUN), n, i);
                    super::training::apply_download(o, &mut p);
                    p
                })
                .collect()
        }
        ("kubeflow.org/v1", "PyTorchJob") => {
            let specs = str_map(o.pointer("/spec/pytorchReplicaSpecs"));
            let mut types: Vec<(&String, &Value)> = specs.iter().collect();
            // Master first, then the others by name.
            types.sort_by_key(|(t, _)| (t.as_str() != "Master", t.to_string()));
            let world_size: u32 =
                types.iter().map(|(_, s)| s.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32).sum();
            let mut out = Vec::new();
            let mut rank = 0;
            for (rtype, rspec) in types {
                let replicas = rspec.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
                let template = rspec.get("template").cloned().unwrap_or_else(|| json!({}));
                let lower = rtype.to_lowercase();
                for i in 0..replicas {
                    let extra = [
                        ("training.kubeflow.org/job-name", name.clone()),
                        ("training.kubeflow.org/operator-name", "pytorchjob-controller".to_string()),
                        ("training.kubeflow.org/replica-type", lower.clone()),
                        ("training.kubeflow.org/replica-index", i.to_string()),
                    ];
                    out.push(pod(
                        format!("{name}-{lower}-{i}"),
                        format!("{lower}-{i}"),
                        &template,
                        &extra,
                        owner.clone(),
                        Some(timings::PYTORCHJOB_DEFAULT_RUN),
                        world_size,
                        rank,
                    ));
                    rank += 1;
                }
            }
            out
        }
        (super::training::HP_API, super::training::HP_KIND) => {
            let plan = super::training::hyperpod_plan(rec);
            let specs = o.pointer("/spec/replicaSpecs").and_then(Value::as_array).cloned().unwrap_or_default();
            let replicas_of = |s: &Value| s.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
            let world_size: u32 = specs.iter().map(replicas_of).sum();
            let mut out = Vec::new();
            let mut rank = 0;
            for s in &specs {
                let spec_name = s.get("name").and_then(Value::as_str).unwrap_or("worker").to_string();
                let template = s.get("template").cloned().unwrap_or_else(|| json!({}));
                for i in 0..replicas_of(s) {
                    let extra = [
                        ("sagemaker.amazonaws.com/job-name", name.clone()),
                        ("sagemaker.amazonaws.com/replica-spec", spec_name.clone()),
                        ("sagemaker.amazonaws.com/replica-index", i.to_string()),
                        ("sagemaker.amazonaws.com/rank", rank.to_string()),
                    ];
                    let mut p = pod(
                        format!("{name}-{spec_name}-{i}"),
                        format!("{spec_name}-{i}"),
                        &template,
                        &extra,
                        owner.clone(),
                        Some(timings::PYTORCHJOB_DEFAULT_RUN),
                        world_size,
                        rank,
                    );
                    super::training::apply_hyperpod_plan(&plan, &name, &mut p);
                    out.push(p);
                    rank += 1;
                }
            }
            out
        }
        (super::training::RAY_API, super::training::RAY_KIND) => {
            use super::pod::Role;
            let cluster = super::training::ray_cluster_name(&name, &uid);
            let cluster_owner = Some((
                "ray.io/v1".to_string(),
                "RayCluster".to_string(),
                cluster.clone(),
                uuid_from(stable_hash(&[&cluster, &uid]), 1),
            ));
            let spec = o.pointer("/spec/rayClusterSpec").cloned().unwrap_or_else(|| json!({}));
            let groups = spec.get("workerGroupSpecs").and_then(Value::as_array).cloned().unwrap_or_default();
            let replicas_of = |g: &Value| g.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
            let world_size = 1 + groups.iter().map(replicas_of).sum::<u32>();
            let labels = |node_type: &str, group: &str| {
                [
                    ("ray.io/cluster", cluster.clone()),
                    ("ray.io/node-type", node_type.to_string()),
                    ("ray.io/group", group.to_string()),
                    ("ray.io/is-ray-node", "yes".to_string()),
                ]
            };
            let head_template = spec.pointer("/headGroupSpec/template").cloned().unwrap_or_else(|| json!({}));
            let head_name = format!("{cluster}-head-{}", suffix(stable_hash(&[&cluster, "head"]), 5));
            let mut head = pod(
                head_name,
                "head".to_string(),
                &head_template,
                &labels("head", "headgroup"),
                cluster_owner.clone(),
                Some(timings::PYTORCHJOB_DEFAULT_RUN),
                world_size,
                0,
            );
            super::training::apply_ray(&name, Role::RayHead, &mut head);
            let mut out = vec![head];
            let mut rank = 1;
            for g in &groups {
                let group = g.get("groupName").and_then(Value::as_str).unwrap_or("workers").to_string();
                let template = g.get("template").cloned().unwrap_or_else(|| json!({}));
                for i in 0..replicas_of(g) {
                    let slot = format!("{group}-{i}");
                    let pod_name = format!("{cluster}-{group}-worker-{}", suffix(stable_hash(&[&cluster, &slot]), 5));
                    let mut p = pod(
                        pod_name,
                        slot,
                        &template,
                        &labels("worker", &group),
                        cluster_owner.clone(),
                        Some(timings::PYTORCHJOB_DEFAULT_RUN),
                        world_size,
                        rank,
                    );
                    super::training::apply_ray(&name, Role::RayWorker, &mut p);
                    out.push(p);
                    rank += 1;
                }
            }
            out
        }
        ("v1", "Pod") => {
            let restart = o.pointer("/spec/restartPolicy").and_then(Value::as_str).unwrap_or("Always");
            let batch_run = (restart != "Always").then(|| duration(&[&own_annotations], timings::JOB_DEFAULT_RUN));
            vec![PodView {
                name,
                namespace,
                uid,
                labels: str_map(o.pointer("/metadata/labels")),
                annotations: own_annotations.clone(),
                owner: None,
                source: key.to_string(),
                slot: None,
                spec: o.get("spec").cloned().unwrap_or_else(|| json!({})),
                start: rec.spec_changed_at,
                batch_run,
                fails: rec.fails.clone(),
                world_size: 1,
                rank: 0,
                run: None,
            }]
        }
        _ => Vec::new(),
    }
}

/// Every pod of the cluster, optionally of one namespace.
pub(crate) fn all_pods(kw: &KubeWorld, namespace: Option<&str>, now: f64) -> Vec<PodView> {
    kw.objects
        .iter()
        .filter(|(_, r)| {
            namespace.is_none_or(|ns| r.object.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns))
        })
        .flat_map(|(k, r)| pods_of(k, r, now))
        .collect()
}

/// The pods DaemonSets run (optionally of one namespace): one on every Node present now that
/// the pod template's `nodeSelector` matches (the DaemonSet controller's placement; tolerations
/// are not modelled), named `{daemonset}-{5 chars}` and pinned to its node through
/// `kubernetes.io/hostname`, as the controller pins it with node affinity.
pub(crate) fn daemon_pods(kw: &KubeWorld, nodes: &[NodeInfo], namespace: Option<&str>) -> Vec<PodView> {
    let mut out = Vec::new();
    for (key, rec) in &kw.objects {
        let o = &rec.object;
        if o.get("apiVersion").and_then(Value::as_str) != Some("apps/v1")
            || o.get("kind").and_then(Value::as_str) != Some("DaemonSet")
        {
            continue;
        }
        let ns = o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
        if namespace.is_some_and(|want| want != ns) {
            continue;
        }
        let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let uid = o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        let template = o.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
        let selector = str_map(template.pointer("/spec/nodeSelector"));
        let change = rec.spec_changed_at.to_bits().to_string();
        for node in nodes.iter().filter(|n| n.gone_at.is_none()) {
            if !selector.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
                continue;
            }
            let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
            if let Some(obj) = spec.as_object_mut() {
                let mut pin = selector.clone();
                pin.insert("kubernetes.io/hostname".into(), json!(node.name));
                obj.insert("nodeSelector".into(), Value::Object(pin));
            }
            let mut labels = str_map(template.pointer("/metadata/labels"));
            labels.insert("controller-revision-hash".into(), json!(suffix(stable_hash(&[uid, &change]), 10)));
            out.push(PodView {
                name: format!("{name}-{}", suffix(stable_hash(&[uid, &node.name]), 5)),
                namespace: ns.to_string(),
                uid: uuid_from(stable_hash(&[uid, &node.name, &change]), stable_hash(&[name, &node.name])),
                labels,
                annotations: str_map(template.pointer("/metadata/annotations")),
                owner: Some(("apps/v1".into(), "DaemonSet".into(), name.to_string(), uid.to_string())),
                source: key.clone(),
                slot: Some(node.name.clone()),
                spec,
                start: rec.spec_changed_at.max(node.registered_at),
                batch_run: None,
                fails: rec.fails.clone(),
                world_size: 1,
                rank: 0,
                run: None,
            });
        }
    }
    out
}

pub(crate) fn pod_object(w: &World, pod: &PodView, st: &PodState) -> Value {
    let mut spec = pod.spec.clone();
    if let (Some(node), Some(obj)) = (&st.node, spec.as_object_mut()) {
        obj.insert("nodeName".into(), json!(node));
    }
    let mut metadata = json!({
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "creationTimestamp": w.k8s_time(pod.start),
        "labels": pod.labels,
    });
    if !pod.annotations.is_empty() {
        metadata["annotations"] = json!(pod.annotations);
    }
    if let Some((api, kind, name, uid)) = &pod.owner {
        metadata["ownerReferences"] = json!([{ "apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true }]);
    }
    let t = |x: f64| w.k8s_time(x);
    let cond = |ty: &str, ok: bool| json!({ "type": ty, "status": if ok { "True" } else { "False" } });
    let mut conditions = vec![];
    match (&st.unschedulable, &st.gated) {
        (Some(why), _) => conditions
            .push(json!({ "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why })),
        (None, Some(gate)) => conditions.push(
            json!({ "type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": gate.message }),
        ),
        (None, None) => {
            conditions.push(cond("PodScheduled", st.scheduled_at.is_some()));
            conditions.push(cond("Initialized", st.scheduled_at.is_some()));
            conditions.push(cond("ContainersReady", st.ready));
            conditions.push(cond("Ready", st.ready));
        }
    }
    let state = if let Some(end) = st.finished_at {
        let failed = st.phase == "Failed";
        json!({ "terminated": {
            "exitCode": if failed { 1 } else { 0 },
            "reason": if failed { "Error" } else { "Completed" },
            "startedAt": st.started_at.map(t),
            "finishedAt": t(end),
        }})
    } else if let Some(reason) = st.waiting {
        let mut waiting = json!({ "reason": reason });
        if let (Some(why), "CrashLoopBackOff") = (&pod.fails, reason) {
            waiting["message"] = json!(format!("back-off restarting failed container {}: {why}", pod.container()));
        }
        if let Some(why) = &st.waiting_message {
            waiting["message"] = json!(why);
        }
        json!({ "waiting": waiting })
    } else if let Some(s) = st.started_at {
        json!({ "running": { "startedAt": t(s) } })
    } else {
        json!({ "waiting": { "reason": "Pending" } })
    };
    let mut status = json!({
        "phase": st.phase,
        "conditions": conditions,
        "containerStatuses": [{
            "name": pod.container(),
            "image": pod.image(),
            "ready": st.ready,
            "started": st.started_at.is_some() && st.finished_at.is_none(),
            "restartCount": st.restarts,
            "state": state,
        }],
    });
    if let Some(at) = st.scheduled_at {
        status["startTime"] = json!(t(at));
    }
    if let Some(ip) = &st.host_ip {
        status["hostIP"] = json!(ip);
    }
    if let Some(ip) = &st.pod_ip {
        status["podIP"] = json!(ip);
    }
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status })
}

/// Restarts the pod in `slot` of the workload stored at `key` (what a controller does when one
/// of its pods is deleted): a new pod (new name where the controller names pods randomly)
/// starts from now.
pub(crate) fn restart_slot(kw: &mut KubeWorld, key: &str, slot: &str, now: f64) {
    if let Some(rec) = kw.objects.get_mut(key) {
        let epoch = rec.restarts.get(slot).map_or(0, |r| r.epoch) + 1;
        rec.restarts.insert(slot.to_string(), Restart { epoch, since: now });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_from_annotation_then_container_env_then_default() {
        let annotated: Map<String, Value> = [(DURATION_ANNOTATION.to_string(), json!("42"))].into_iter().collect();
        let none = Map::new();
        let spec = json!({ "containers": [{ "name": "c", "env": [{ "name": DURATION_ENV, "value": "900" }] }] });
        assert_eq!(duration_or_env(&[&none, &annotated], Some(&spec), 1.0), 42.0);
        assert_eq!(duration_or_env(&[&none], Some(&spec), 1.0), 900.0);
        assert_eq!(duration_or_env(&[&none], None, 1.0), 1.0);
        let bad = json!({ "containers": [{ "env": [{ "name": DURATION_ENV, "value": "-5" }] }] });
        assert_eq!(duration_or_env(&[&none], Some(&bad), 7.0), 7.0);
    }
}

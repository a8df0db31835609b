//! The pods of served models as their controllers shape them: a Deployment's replicas over
//! time (scale history and KEDA), when each slot came into being, labels set on running pods,
//! and the Deployment the HyperPod inference operator runs for an `InferenceEndpointConfig`.

use crate::kube::pod::PodView;
use crate::world::{Keda, KubeRec};
use serde_json::{Value, json};

/// `apiVersion` of the HyperPod inference operator's endpoints.
pub(crate) const IEC_API: &str = "inference.sagemaker.aws.amazon.com/v1";
/// `kind` of the HyperPod inference operator's endpoints.
pub(crate) const IEC_KIND: &str = "InferenceEndpointConfig";
/// Annotation of operator pods naming the model they serve.
pub(crate) const MODEL_ANNOTATION: &str = "sim.instantstart.io/served-model";
impl Keda {
    fn desired(&self, value: f64) -> u32 {
        if value <= self.activation && self.min == 0 {
            return 0;
        }
        let lo = self.min.max(1);
        let n = (value / self.threshold).ceil();
        let n = if n.is_finite() && n > 0.0 { n.min(f64::from(u32::MAX)) as u32 } else { 0 };
        n.clamp(lo, self.max.max(lo))
    }

    fn replicas_at(&self, base: u32, t: f64) -> u32 {
        let samples: Vec<&(f64, f64)> = self.samples.iter().filter(|s| s.0 <= t).collect();
        if samples.is_empty() || t < self.since {
            return base.clamp(self.min, self.max.max(self.min));
        }
        let mut best = 0;
        for (i, s) in samples.iter().enumerate() {
            let next = samples.get(i + 1).map(|n| n.0);
            if next.is_none_or(|n| n > t - self.window) {
                best = best.max(self.desired(s.1));
            }
        }
        best
    }
}

/// Replicas of a Deployment at `t`.
pub(crate) fn replicas_at(rec: &KubeRec, spec_replicas: u32, t: f64) -> u32 {
    let base = rec.serving.scale.iter().rev().find(|(at, _)| *at <= t).map_or(spec_replicas, |s| s.1);
    match &rec.serving.keda {
        Some(k) => k.replicas_at(base, t),
        None => base,
    }
}

/// When slot `i` of a Deployment last came into being (at or before `now`).
pub(crate) fn slot_born(rec: &KubeRec, spec_replicas: u32, i: u32, now: f64) -> f64 {
    let start = rec.spec_changed_at;
    let mut points: Vec<f64> = rec.serving.scale.iter().map(|s| s.0).collect();
    if let Some(k) = &rec.serving.keda {
        points.push(k.since);
        for s in &k.samples {
            points.push(s.0);
            points.push(s.0 + k.window);
        }
    }
    points.retain(|p| *p > start && *p <= now);
    points.sort_by(f64::total_cmp);
    points.dedup();
    let mut born = start;
    let mut prev = replicas_at(rec, spec_replicas, start);
    for p in points {
        let r = replicas_at(rec, spec_replicas, p);
        if r > i && prev <= i {
            born = p;
        }
        prev = r;
    }
    born
}

/// Applies the labels set on a pod after it started.
pub(crate) fn relabel(rec: &KubeRec, pod: &mut PodView) {
    if let Some(labels) = rec.serving.pod_labels.get(&pod.name) {
        for (k, v) in labels {
            pod.labels.insert(k.clone(), v.clone());
        }
    }
}

pub(crate) fn namespace_of(v: &Value) -> String {
    v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string()
}

/// The Deployment the inference operator runs for an `InferenceEndpointConfig` record.
pub(crate) fn operator_deployment(rec: &KubeRec) -> Option<(Value, KubeRec)> {
    let o = &rec.object;
    if o.get("apiVersion").and_then(Value::as_str) != Some(IEC_API)
        || o.get("kind").and_then(Value::as_str) != Some(IEC_KIND)
    {
        return None;
    }
    let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let spec = o.get("spec").cloned().unwrap_or_else(|| json!({}));
    let worker = spec.get("worker").cloned().unwrap_or_else(|| json!({}));
    let port = worker.pointer("/modelInvocationPort/containerPort").and_then(Value::as_u64).unwrap_or(8080);
    let mut container = json!({
        "name": "worker",
        "image": worker.get("image").cloned().unwrap_or(json!("unknown")),
        "ports": [{ "name": "http", "containerPort": port, "protocol": "TCP" }],
        "resources": worker.get("resources").cloned().unwrap_or_else(|| json!({})),
    });
    for f in ["command", "args"] {
        if let Some(v) = worker.get(f) {
            container[f] = v.clone();
        }
    }
    let model = spec.get("modelName").and_then(Value::as_str).unwrap_or(name);
    let mut node_selector = json!({});
    if let Some(t) = spec.get("instanceType").and_then(Value::as_str) {
        node_selector["node.kubernetes.io/instance-type"] = json!(t);
    }
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "namespace": namespace_of(o), "uid": o.pointer("/metadata/uid").cloned().unwrap_or(Value::Null) },
        "spec": {
            "replicas": spec.get("replicas").cloned().unwrap_or(json!(1)),
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name }, "annotations": { MODEL_ANNOTATION: model } },
                "spec": { "containers": [container], "nodeSelector": node_selector },
            },
        },
    });
    Some((deployment.clone(), KubeRec { object: deployment, ..rec.clone() }))
}

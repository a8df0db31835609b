//! Inference in the simulated clusters.
//!
//! - **HyperPod inference operator**: an `InferenceEndpointConfig`
//!   (`inference.sagemaker.aws.amazon.com/v1`) runs as a Deployment of its own name whose pods
//!   carry `app=<name>` and run `spec.worker` on `spec.instanceType` nodes; its status follows
//!   (`state` `DeploymentInProgress` → `DeploymentComplete`, `deploymentStatus`, `replicas`).
//! - **Scaling**: changing only `spec.replicas` of a Deployment keeps its pods (new slots start
//!   when they are added, removed slots stop); the history is kept per object.
//! - **KEDA**: a `ScaledObject` (`keda.sh/v1alpha1`) scales its target Deployment from a metric
//!   value tests set with [`SimCloud::set_scaling_metric`]: `ceil(value / threshold)` clamped to
//!   `[minReplicaCount, maxReplicaCount]` (0 when the value is at most the activation
//!   threshold and the minimum is 0). Scaling up is immediate; scaling down waits until the
//!   higher values have been out of the window (the HPA scale-down stabilisation window when
//!   set, else `cooldownPeriod`) — a sample counts while it was current at some moment of the
//!   last window. While it scales a Deployment, reads show `spec.replicas` as KEDA's HPA set it
//!   (the scale subresource); deleting the ScaledObject leaves the replicas where they are.
//!   A `prometheus` trigger whose in-cluster `serverAddress` no Prometheus serves (no Service of
//!   that name, no deployed `prometheus` chart release providing it) leaves the ScaledObject
//!   `Ready=False` (`TriggerError`, with the scaler's lookup error) and the metric unread: it
//!   does not scale until a Prometheus is there ([`prometheus_error`]).
//! - **Relabelling pods**: applying a Pod object over a controller's pod changes only its labels
//!   (what a model pool move does); the pod is not restarted (same name, same uid).
//! - **Service proxy** ([`SimCloud`]'s `service_proxy`, also served by the API server): the
//!   Service's selector picks its ready pods (`503` without any); an SGLang router pod forwards to
//!   the ready workers its `--selector` names; a model server answers like an OpenAI-compatible
//!   server (`/v1/models`, `/v1/chat/completions` with token usage, `/health`),
//!   deterministically from the request and the pod.

mod api;
pub(crate) mod pods;

use super::nodes;
use super::pod::{self, PodView};
use super::workload;
use crate::base::{rkey, stable_hash};
use crate::world::World;
use crate::world::{Keda, KubeRec, KubeWorld, obj_key};
use instantstart_core::provider::{KubeTarget, ProxyResponse};
pub(crate) use pods::{IEC_API, IEC_KIND, operator_deployment, relabel, replicas_at, slot_born};
use pods::{MODEL_ANNOTATION, namespace_of};
use serde_json::{Map, Value, json};

fn is_scalable(rec: &KubeRec) -> bool {
    let api = rec.object.get("apiVersion").and_then(Value::as_str);
    let kind = rec.object.get("kind").and_then(Value::as_str);
    matches!((api, kind), (Some("apps/v1"), Some("Deployment")) | (Some(IEC_API), Some(IEC_KIND)))
}

/// Records labels applied to a controller's pod.
pub(crate) fn relabel_pod(kw: &mut KubeWorld, pod: &PodView, labels: Option<&Value>) {
    let Some(labels) = labels.and_then(Value::as_object) else { return };
    if let Some(rec) = kw.objects.get_mut(&pod.source) {
        let entry = rec.serving.pod_labels.entry(pod.name.clone()).or_default();
        for (k, v) in labels {
            if v.is_string() {
                entry.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Whether a spec change replaces the pods (anything but `replicas` of a scalable kind).
pub(crate) fn template_changed(kind: &str, old: Option<&Value>, new: Option<&Value>) -> bool {
    if !matches!(kind, "Deployment" | IEC_KIND) {
        return old != new;
    }
    let strip = |v: Option<&Value>| {
        let mut v = v.cloned().unwrap_or(Value::Null);
        if let Some(o) = v.as_object_mut() {
            o.remove("replicas");
        }
        v
    };
    strip(old) != strip(new)
}

fn keda_of(so: &Value, since: f64, samples: Vec<(f64, f64)>) -> Option<(String, Keda)> {
    let spec = so.get("spec")?;
    let target = spec.pointer("/scaleTargetRef/name")?.as_str()?.to_string();
    let num = |v: Option<&Value>| v.and_then(|v| v.as_f64().or_else(|| v.as_str().and_then(|s| s.parse().ok())));
    let trigger = spec.pointer("/triggers/0/metadata");
    let threshold = num(trigger.and_then(|m| m.get("threshold"))).filter(|t| *t > 0.0).unwrap_or(1.0);
    let window =
        num(spec.pointer("/advanced/horizontalPodAutoscalerConfig/behavior/scaleDown/stabilizationWindowSeconds"))
            .or_else(|| num(spec.get("cooldownPeriod")))
            .unwrap_or(300.0);
    Some((
        target,
        Keda {
            scaled_object: so.pointer("/metadata/name")?.as_str()?.to_string(),
            since,
            min: num(spec.get("minReplicaCount")).unwrap_or(0.0) as u32,
            max: num(spec.get("maxReplicaCount")).unwrap_or(100.0) as u32,
            threshold,
            activation: num(trigger.and_then(|m| m.get("activationThreshold"))).unwrap_or(0.0),
            window,
            samples,
        },
    ))
}

/// Why KEDA cannot query the Prometheus of a ScaledObject's `prometheus` trigger, if it cannot:
/// an in-cluster `serverAddress` (`<service>.<namespace>.svc…`, or a bare `<service>` of the
/// ScaledObject's namespace) resolves only while a Service
/// of that name was applied there or a deployed Helm release of the `prometheus` chart provides
/// it (the chart names its server Service `<release>-server`). Addresses outside the cluster
/// (Amazon Managed Prometheus) are not simulated and count as reachable.
pub(crate) fn prometheus_error(kw: &KubeWorld, so: &Value, now: f64) -> Option<String> {
    let trigger = so.pointer("/spec/triggers/0")?;
    if trigger.get("type").and_then(Value::as_str) != Some("prometheus") {
        return None;
    }
    let address = trigger.pointer("/metadata/serverAddress")?.as_str()?;
    let host = address.split_once("://").map_or(address, |(_, rest)| rest);
    let host = host.split(['/', ':', '?']).next().unwrap_or_default();
    let parts: Vec<&str> = host.split('.').collect();
    let own_namespace = namespace_of(so);
    let (service, namespace) = match parts.as_slice() {
        // A bare name resolves in the ScaledObject's namespace (the pod's DNS search path).
        [service] => (*service, own_namespace.as_str()),
        [service, namespace, "svc", ..] => (*service, *namespace),
        _ => return None,
    };
    let applied = kw.objects.contains_key(&obj_key("v1", "Service", Some(namespace), service));
    let from_chart = super::helm::deployed_releases(kw, now)
        .any(|r| r.chart == "prometheus" && r.namespace == namespace && format!("{}-server", r.name) == service);
    if applied || from_chart {
        return None;
    }
    Some(format!(
        "error inspecting prometheus metrics: Get \"{address}/api/v1/query\": dial tcp: lookup {host}: no such host"
    ))
}

/// The status KEDA gives a ScaledObject: `Ready` while its trigger can be queried; otherwise
/// `Ready=False` with reason `TriggerError` (KEDA sets that when all triggers fail,
/// kedacore/keda#2603) and the scaler's error, and `Active=False` — it does not scale.
pub(crate) fn scaled_object_status(kw: &KubeWorld, so: &Value, now: f64) -> Value {
    match prometheus_error(kw, so, now) {
        None => json!({ "conditions": [
            { "type": "Ready", "status": "True", "reason": "ScaledObjectReady",
              "message": "ScaledObject is defined correctly and is ready for scaling" }
        ] }),
        Some(error) => json!({ "conditions": [
            { "type": "Ready", "status": "False", "reason": "TriggerError",
              "message": format!("Triggers defined in ScaledObject are not working correctly: {error}") },
            { "type": "Active", "status": "False", "reason": "ScalerNotActive",
              "message": "Scaling is not performed because triggers are not active" }
        ] }),
    }
}

fn is_scaled_object(v: &Value) -> bool {
    v.get("apiVersion").and_then(Value::as_str) == Some("keda.sh/v1alpha1")
        && v.get("kind").and_then(Value::as_str) == Some("ScaledObject")
}

/// Hooks after an object was applied: scaling history, KEDA targets.
pub(crate) fn after_apply(kw: &mut KubeWorld, key: &str, template_changed: bool, now: f64) {
    let Some(rec) = kw.objects.get_mut(key) else { return };
    if is_scalable(rec) {
        let replicas = rec.object.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
        if template_changed {
            rec.serving.scale = vec![(now, replicas)];
            rec.serving.pod_labels.clear();
        } else if rec.serving.scale.last().is_none_or(|s| s.1 != replicas) {
            rec.serving.scale.push((now, replicas));
        }
    }
    let object = rec.object.clone();
    if is_scaled_object(&object) {
        attach_keda(kw, &object, now);
    } else if object.get("kind").and_then(Value::as_str) == Some("Deployment") {
        let ns = namespace_of(&object);
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let so: Vec<Value> = kw
            .objects
            .values()
            .map(|r| &r.object)
            .filter(|o| is_scaled_object(o) && namespace_of(o) == ns)
            .filter(|o| o.pointer("/spec/scaleTargetRef/name").and_then(Value::as_str) == Some(name))
            .cloned()
            .collect();
        for o in so {
            attach_keda(kw, &o, now);
        }
    }
}

fn attach_keda(kw: &mut KubeWorld, so: &Value, now: f64) {
    let ns = namespace_of(so);
    let so_name = so.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let Some(target) = so.pointer("/spec/scaleTargetRef/name").and_then(Value::as_str) else { return };
    let dkey = obj_key("apps/v1", "Deployment", Some(&ns), target);
    let Some(d) = kw.objects.get_mut(&dkey) else { return };
    let (since, samples) = match &d.serving.keda {
        Some(k) if k.scaled_object == so_name => (k.since, k.samples.clone()),
        _ => (now, Vec::new()),
    };
    if let Some((_, keda)) = keda_of(so, since, samples) {
        d.serving.keda = Some(keda);
    }
}

/// Hooks after an object was deleted: a deleted ScaledObject leaves its Deployment's replicas.
pub(crate) fn after_delete(kw: &mut KubeWorld, removed: &KubeRec, now: f64) {
    if !is_scaled_object(&removed.object) {
        return;
    }
    let ns = namespace_of(&removed.object);
    let Some(target) = removed.object.pointer("/spec/scaleTargetRef/name").and_then(Value::as_str) else { return };
    if let Some(d) = kw.objects.get_mut(&obj_key("apps/v1", "Deployment", Some(&ns), target)) {
        let spec = d.object.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
        let current = replicas_at(d, spec, now);
        d.serving.keda = None;
        d.serving.scale.push((now, current));
    }
}
/// The status the inference operator writes.
pub(crate) fn operator_status(w: &World, rec: &KubeRec, total: u32, ready: u32) -> Value {
    let o = &rec.object;
    let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let state = if rec.fails.is_some() {
        "DeploymentFailed"
    } else if total > 0 && ready == total {
        "DeploymentComplete"
    } else {
        "DeploymentInProgress"
    };
    let message = match (&rec.fails, state) {
        (Some(why), _) => why.clone(),
        (None, "DeploymentComplete") => "Deployment is complete".to_string(),
        _ => format!("{ready}/{total} replicas ready"),
    };
    json!({
        "state": state,
        "replicas": total,
        "selector": format!("app={name}"),
        "observedGeneration": o.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
        "deploymentStatus": {
            "name": name,
            "deploymentObjectOverallState": state,
            "message": message,
            "lastUpdated": w.k8s_time(rec.spec_changed_at),
            "status": { "replicas": total, "readyReplicas": ready, "availableReplicas": ready, "updatedReplicas": total },
        },
        "conditions": [{
            "type": "DeploymentComplete",
            "status": if state == "DeploymentComplete" { "True" } else { "False" },
            "reason": state,
            "message": message,
            "lastTransitionTime": w.k8s_time(rec.spec_changed_at),
        }],
        "metricsStatus": { "enabled": o.pointer("/spec/metrics/enabled").and_then(Value::as_bool).unwrap_or(false) },
    })
}

// ---------------------------------------------------------------------------------------------
// The service proxy and the simulated model

fn answer(status: u16, body: &Value) -> ProxyResponse {
    ProxyResponse { status, body: serde_json::to_vec(body).unwrap_or_default() }
}

fn k8s_status(code: u16, reason: &str, message: &str) -> ProxyResponse {
    answer(
        code,
        &json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code }),
    )
}

fn labels_match(pod: &PodView, selector: &Map<String, Value>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v))
}

fn argv(pod: &PodView) -> Vec<String> {
    let c = pod.spec.pointer("/containers/0");
    ["command", "args"]
        .iter()
        .flat_map(|f| c.and_then(|c| c.get(*f)).and_then(Value::as_array).cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn served_model(pod: &PodView) -> String {
    if let Some(m) = pod.annotations.get(MODEL_ANNOTATION).and_then(Value::as_str) {
        return m.to_string();
    }
    flag(&argv(pod), "--served-model-name")
        .or_else(|| pod.labels.get("app.kubernetes.io/instance").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| pod.name.clone())
}

/// The workers an SGLang router pod discovers, if the pod is a router.
fn router_selector(pod: &PodView) -> Option<Map<String, Value>> {
    let args = argv(pod);
    if !args.iter().any(|a| a.contains("sglang_router")) || !args.iter().any(|a| a == "--service-discovery") {
        return None;
    }
    let i = args.iter().position(|a| a == "--selector")?;
    let mut m = Map::new();
    for kv in args[i + 1..].iter().take_while(|a| !a.starts_with("--")) {
        if let Some((k, v)) = kv.split_once('=') {
            m.insert(k.into(), Value::String(v.into()));
        }
    }
    Some(m)
}

fn words(s: &str) -> u32 {
    s.split_whitespace().count() as u32
}

fn openai_error(status: u16, kind: &str, message: &str) -> ProxyResponse {
    answer(status, &json!({ "error": { "message": message, "type": kind, "code": status } }))
}

/// What a model server pod answers.
fn model_answer(w: &World, pod: &PodView, path: &str, body: Option<&[u8]>, now: f64) -> ProxyResponse {
    let model = served_model(pod);
    match path.trim_start_matches('/') {
        "health" | "health_generate" | "ping" => ProxyResponse { status: 200, body: Vec::new() },
        "v1/models" => answer(
            200,
            &json!({ "object": "list", "data": [{ "id": model, "object": "model", "created": w.display_time(pod.start).timestamp(), "owned_by": "instantstart-sim" }] }),
        ),
        "v1/chat/completions" => {
            let Some(body) = body else {
                return openai_error(405, "BadRequestError", "POST a chat completion request");
            };
            let req: Value = match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => return openai_error(400, "BadRequestError", &format!("invalid JSON body: {e}")),
            };
            let Some(messages) = req.get("messages").and_then(Value::as_array).filter(|m| !m.is_empty()) else {
                return openai_error(400, "BadRequestError", "messages: must be a non-empty list");
            };
            let mut prompt_tokens = 0;
            let mut last_user = String::new();
            for (i, m) in messages.iter().enumerate() {
                let (Some(role), Some(content)) =
                    (m.get("role").and_then(Value::as_str), m.get("content").and_then(Value::as_str))
                else {
                    return openai_error(
                        400,
                        "BadRequestError",
                        &format!("messages[{i}]: needs a role and a string content"),
                    );
                };
                prompt_tokens += words(content) + 3;
                if role == "user" {
                    last_user = content.to_string();
                }
            }
            if let Some(asked) = req.get("model").and_then(Value::as_str)
                && asked != model
            {
                return openai_error(404, "NotFoundError", &format!("The model `{asked}` does not exist."));
            }
            let max_tokens = req
                .get("max_tokens")
                .or_else(|| req.get("max_completion_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(256)
                .clamp(1, 1 << 20) as usize;
            let full = format!("Simulated answer from {model} on {}: you said \"{}\".", pod.name, last_user.trim());
            let all: Vec<&str> = full.split_whitespace().collect();
            let truncated = all.len() > max_tokens;
            let content = all[..all.len().min(max_tokens)].join(" ");
            let completion_tokens = words(&content);
            let h = stable_hash(&[&pod.name, &String::from_utf8_lossy(body)]);
            answer(
                200,
                &json!({
                    "id": format!("chatcmpl-{h:016x}"),
                    "object": "chat.completion",
                    "created": w.display_time(now).timestamp(),
                    "model": model,
                    "system_fingerprint": pod.name,
                    "choices": [{
                        "index": 0,
                        "message": { "role": "assistant", "content": content },
                        "finish_reason": if truncated { "length" } else { "stop" },
                    }],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                }),
            )
        }
        other => answer(404, &json!({ "detail": format!("Not Found: /{other}") })),
    }
}

/// Calls `path` of Service `ns/service` on `port` the way the API server's service proxy does.
#[allow(clippy::too_many_arguments)]
pub(crate) fn proxy(
    w: &World,
    kw: &KubeWorld,
    ns: &str,
    service: &str,
    port: u16,
    path: &str,
    body: Option<&[u8]>,
    now: f64,
) -> ProxyResponse {
    let Some(svc) = kw.objects.get(&obj_key("v1", "Service", Some(ns), service)).map(|r| &r.object) else {
        return k8s_status(404, "NotFound", &format!("services \"{service}\" not found"));
    };
    let has_port = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .is_some_and(|ps| ps.iter().any(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port))));
    if !has_port {
        return k8s_status(
            503,
            "ServiceUnavailable",
            &format!("no service port {port} found for service \"{service}\""),
        );
    }
    let selector = svc.pointer("/spec/selector").and_then(Value::as_object).cloned().unwrap_or_default();
    let nodes = nodes::nodes(w, kw, now);
    let pods = workload::all_pods(kw, Some(ns), now);
    let ready = |sel: &Map<String, Value>| -> Vec<&PodView> {
        pods.iter().filter(|p| labels_match(p, sel) && pod::pod_state(p, &nodes, now).ready).collect()
    };
    let backends = ready(&selector);
    if backends.is_empty() {
        return k8s_status(503, "ServiceUnavailable", &format!("no endpoints available for service \"{service}\""));
    }
    let seed = String::from_utf8_lossy(body.unwrap_or_default()).into_owned();
    let pick = |v: &[&PodView], salt: &str| v[(stable_hash(&[&seed, salt]) % v.len() as u64) as usize].clone();
    let pod = pick(&backends, service);
    match router_selector(&pod) {
        Some(workers_selector) => {
            if matches!(path.trim_start_matches('/'), "health" | "readiness" | "liveness") {
                return ProxyResponse { status: 200, body: Vec::new() };
            }
            let workers = ready(&workers_selector);
            if workers.is_empty() {
                return answer(503, &json!({ "error": "no available workers" }));
            }
            model_answer(w, &pick(&workers, &pod.name), path, body, now)
        }
        None => model_answer(w, &pod, path, body, now),
    }
}

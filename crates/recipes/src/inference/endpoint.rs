//! An inference endpoint as one workload: what `POST /api/clusters/{cluster}/endpoints`
//! deploys, rendered for the workload workflows of `instantstart-core`.
//!
//! The body is `{"route": "self_managed", …}` or `{"route": "managed", …}`:
//!
//! * **self_managed** — the fields of [`ServingParams`] side by side with `exposure`
//!   ([`Exposure`]), `router` (SGLang only: the SGLang router with cache-aware routing in
//!   front of the replicas) and `autoscaling` ([`Autoscaling`], a KEDA ScaledObject). Objects:
//!   the serving Deployment, its Service named after the endpoint (selecting the Deployment's
//!   pods, or the model pool `instantstart.io/pool=<pool>` when `pool` is set), the router's
//!   ServiceAccount/Role/RoleBinding/Deployment/Service (`<name>-router`), the ScaledObject.
//!   Ready when the Deployments are available.
//! * **managed** — [`ManagedEndpointParams`]: the `InferenceEndpointConfig` plus a
//!   cluster-internal Service `<name>` selecting the operator's worker pods (`app=<name>`), so
//!   the endpoint is called the same way as a self-managed one. Ready when the operator
//!   reports `DeploymentComplete`.
//!
//! Every top-level object carries `app.kubernetes.io/instance=<endpoint name>`, which is how
//! the delete workflow finds all of them.

use super::autoscale::{self, AutoscalerParams, PrometheusTrigger, keda_autoscaler};
use super::managed::{self, ManagedEndpointParams, managed_endpoint};
use super::router::{RoutingPolicy, SglangRouterParams, sglang_router};
use super::service::{Backends, Exposure, ServiceParams, serving_service};
use super::{Engine, ServingParams, serving_deployment};
use crate::common::{LABEL_INSTANCE, ManifestSet};
pub use instantstart_core::labels::{ANNOTATION_ENDPOINT_REQUEST, LABEL_ROUTE};
use instantstart_core::provider::{KubeObject, ObjectRef};
use instantstart_core::validate::{Findings, ValidationError};
use instantstart_core::workflow::decode;
pub use instantstart_core::workflow::endpoints::SERVICE_PORT;
use instantstart_core::workload::{ReadyRule, RenderedWorkload, TypeRef, WorkloadContext, specs_fact};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Default Prometheus server the KEDA trigger queries.
pub const DEFAULT_PROMETHEUS: &str = "http://prometheus-server.monitoring.svc.cluster.local:80";

fn default_cooldown() -> u32 {
    300
}

/// KEDA autoscaling of a self-managed endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Autoscaling {
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// Seconds the load must stay low before scaling down.
    #[serde(default = "default_cooldown")]
    pub cooldown_seconds: u32,
    /// The metric; by default the waiting requests of the engine (or the router's queue depth),
    /// 5 per replica, from [`DEFAULT_PROMETHEUS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusTrigger>,
}

/// Router options besides `router: true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterOptions {
    #[serde(default)]
    pub policy: RoutingPolicy,
    #[serde(default = "default_router_replicas")]
    pub replicas: u32,
}

fn default_router_replicas() -> u32 {
    1
}

/// A self-managed endpoint: serving Deployment, Service, optional router and autoscaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SelfManagedEndpoint {
    #[serde(flatten)]
    pub serving: ServingParams,
    #[serde(default)]
    pub exposure: Exposure,
    /// Put the SGLang router (cache-aware routing) in front of the replicas.
    #[serde(default)]
    pub router: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_options: Option<RouterOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<Autoscaling>,
}

/// The body of an endpoint deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "route", rename_all = "snake_case")]
pub enum EndpointRequest {
    SelfManaged(Box<SelfManagedEndpoint>),
    Managed(Box<ManagedEndpointParams>),
}

const SELF_MANAGED_EXTRA: &[&str] = &["route", "exposure", "router", "router_options", "autoscaling"];

/// Decodes an endpoint body; unknown fields are refused with their path.
pub fn decode_request(params: &Value) -> Result<EndpointRequest, ValidationError> {
    match params.get("route").and_then(Value::as_str) {
        Some("managed") => {
            let mut p = params.clone();
            if let Some(o) = p.as_object_mut() {
                o.remove("route");
            }
            Ok(EndpointRequest::Managed(Box::new(decode(&p)?)))
        }
        Some("self_managed") => {
            let Some(o) = params.as_object() else { return Err(ValidationError::invalid("", "must be an object")) };
            let mut serving = o.clone();
            let mut extra = serde_json::Map::new();
            for k in SELF_MANAGED_EXTRA {
                if let Some(v) = serving.remove(*k) {
                    extra.insert((*k).to_string(), v);
                }
            }
            let serving: ServingParams = decode(&Value::Object(serving))?;
            let exposure: Exposure = match extra.remove("exposure") {
                Some(v) => decode(&v).map_err(|e| prefixed(e, "exposure"))?,
                None => Exposure::default(),
            };
            let router = match extra.remove("router") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => b,
                Some(_) => return Err(ValidationError::invalid("router", "must be true or false")),
            };
            let router_options = match extra.remove("router_options") {
                None | Some(Value::Null) => None,
                Some(v) => Some(decode(&v).map_err(|e| prefixed(e, "router_options"))?),
            };
            let autoscaling = match extra.remove("autoscaling") {
                None | Some(Value::Null) => None,
                Some(v) => Some(decode(&v).map_err(|e| prefixed(e, "autoscaling"))?),
            };
            Ok(EndpointRequest::SelfManaged(Box::new(SelfManagedEndpoint {
                serving,
                exposure,
                router,
                router_options,
                autoscaling,
            })))
        }
        Some(other) => {
            Err(ValidationError::invalid("route", format!("unknown route {other:?}: self_managed or managed")))
        }
        None => Err(ValidationError::invalid("route", "required: self_managed or managed")),
    }
}

/// `e` with its field paths under `prefix`.
fn prefixed(mut e: ValidationError, prefix: &str) -> ValidationError {
    for f in &mut e.findings {
        if f.field.starts_with("exposure") {
            continue;
        }
        f.field = if f.field.is_empty() { prefix.to_string() } else { format!("{prefix}.{}", f.field) };
    }
    e
}

fn oref(v: &Value) -> ObjectRef {
    KubeObject(v.clone()).object_ref().expect("built objects have apiVersion, kind and name")
}

/// Marks a top-level object as part of endpoint `name` (its pods keep their own labels).
fn own(mut v: Value, name: &str, route: &str) -> KubeObject {
    if let Some(labels) = v.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.insert(LABEL_INSTANCE.into(), json!(name));
        labels.insert(LABEL_ROUTE.into(), json!(route));
    }
    KubeObject(v)
}

/// The router's name for endpoint `name`.
pub fn router_name(name: &str) -> String {
    format!("{name}-router")
}

/// `(service, port)` a chat request goes to.
pub fn chat_target(request: &EndpointRequest) -> (String, u16) {
    match request {
        EndpointRequest::SelfManaged(s) if s.router => (router_name(&s.serving.name), SERVICE_PORT),
        EndpointRequest::SelfManaged(s) => (s.serving.name.clone(), SERVICE_PORT),
        EndpointRequest::Managed(m) => (m.name.clone(), SERVICE_PORT),
    }
}

fn render_self_managed(s: &SelfManagedEndpoint) -> Result<RenderedWorkload, ValidationError> {
    let p = &s.serving;
    let mut f = Findings::new();
    if s.router && !matches!(p.engine, Engine::Sglang(_)) {
        f.push_unprocessable("router", "the SGLang router fronts SGLang workers only (engine.kind sglang)");
    }
    if s.router_options.is_some() && !s.router {
        f.push("router_options", "only with router: true");
    }
    if let Some(a) = &s.autoscaling
        && (a.min_replicas > a.max_replicas)
    {
        f.push("autoscaling.min_replicas", "must not exceed autoscaling.max_replicas");
    }
    f.finish()?;
    let deployment = serving_deployment(p)?;
    let backends = match &p.pool {
        Some(pool) => Backends::Pool { pool: pool.clone() },
        None => Backends::Deployment { name: p.name.clone() },
    };
    let mut primary = deployment.deployment.clone();
    if s.autoscaling.is_some()
        && let Some(spec) = primary.get_mut("spec").and_then(Value::as_object_mut)
    {
        // KEDA's HPA owns the replicas; applying them would fight it.
        spec.remove("replicas");
    }
    let mut objects = vec![own(primary, &p.name, "self_managed")];
    let mut ready = Vec::new();
    let router_image = p.image.clone();
    let (svc_exposure, router) = if s.router { (Exposure::ClusterIp, true) } else { (s.exposure.clone(), false) };
    let service = serving_service(&ServiceParams {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        backends: backends.clone(),
        port: SERVICE_PORT,
        target_port: p.port,
        exposure: svc_exposure,
    })?;
    objects.push(own(service.service, &p.name, "self_managed"));
    let mut router_built = None;
    if router {
        let opts = s.router_options.clone().unwrap_or(RouterOptions { policy: RoutingPolicy::default(), replicas: 1 });
        let r = sglang_router(&SglangRouterParams {
            name: router_name(&p.name),
            namespace: p.namespace.clone(),
            image: router_image,
            workers: backends,
            worker_port: p.port,
            port: SERVICE_PORT,
            metrics_port: 29000,
            replicas: opts.replicas,
            policy: opts.policy,
            exposure: s.exposure.clone(),
            resources: crate::common::ComputeResources { cpu: Some("2".into()), memory: Some("4Gi".into()) },
        })
        .map_err(|e| prefixed(e, "router_options"))?;
        for o in r.objects() {
            objects.push(own(o.clone(), &p.name, "self_managed"));
        }
        ready.push(ReadyRule::DeploymentAvailable { object: oref(&r.deployment), replicas: opts.replicas });
        router_built = Some(r);
    }
    let mut want = p.replicas;
    if let Some(a) = &s.autoscaling {
        let prometheus = a.prometheus.clone().unwrap_or_else(|| PrometheusTrigger {
            server_address: DEFAULT_PROMETHEUS.into(),
            query: match &router_built {
                Some(r) => autoscale::sglang_router_queue_query(&p.namespace, &r.name),
                None => format!(
                    "sum({}{{namespace=\"{}\",pod=~\"{}-.*\"}}) or vector(0)",
                    match p.engine {
                        Engine::Sglang(_) => "sglang:num_queue_reqs",
                        _ => "vllm:num_requests_waiting",
                    },
                    p.namespace,
                    p.name
                ),
            },
            threshold: 5.0,
            activation_threshold: None,
            aws_region: None,
            authentication_ref: None,
        });
        let scaler = keda_autoscaler(&AutoscalerParams {
            namespace: p.namespace.clone(),
            deployment: p.name.clone(),
            min_replicas: a.min_replicas,
            max_replicas: a.max_replicas,
            cooldown_seconds: a.cooldown_seconds,
            polling_interval_seconds: 30,
            scale_down_stabilization_seconds: Some(a.cooldown_seconds.min(3600)),
            prometheus,
        })
        .map_err(|e| prefixed(e, "autoscaling"))?;
        objects.push(own(scaler.scaled_object, &p.name, "self_managed"));
        // The autoscaler decides the replicas; ready means its minimum is available.
        want = a.min_replicas;
    }
    ready.insert(0, ReadyRule::DeploymentAvailable { object: oref(&deployment.deployment), replicas: want });
    Ok(RenderedWorkload {
        name: p.name.clone(),
        namespace: p.namespace.clone(),
        objects,
        ready,
        pod_identity: None,
        instance_types: vec![p.instance_type.clone()],
        team: None,
        volumes: Vec::new(),
    })
}

fn render_managed(m: &ManagedEndpointParams) -> Result<RenderedWorkload, ValidationError> {
    let built = managed_endpoint(m)?;
    let mut labels = crate::common::standard_labels(&m.name, "inference-service", "inference");
    labels.insert(LABEL_ROUTE.into(), "managed".into());
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": crate::common::object_meta(&m.name, &m.namespace, &labels),
        "spec": {
            "type": "ClusterIP",
            "selector": { "app": m.name },
            "ports": [{ "name": "http", "port": SERVICE_PORT, "targetPort": m.worker.port, "protocol": "TCP" }],
        },
    });
    let endpoint = oref(&built.endpoint);
    Ok(RenderedWorkload {
        name: m.name.clone(),
        namespace: m.namespace.clone(),
        objects: vec![own(built.endpoint, &m.name, "managed"), KubeObject(service)],
        ready: vec![ReadyRule::FieldEquals {
            object: endpoint,
            pointer: "/status/state".into(),
            value: json!("DeploymentComplete"),
        }],
        pod_identity: None,
        instance_types: vec![m.instance_type.clone()],
        team: None,
        volumes: Vec::new(),
    })
}

/// Renders an endpoint body. The primary object (serving Deployment or
/// `InferenceEndpointConfig`) carries the body as [`ANNOTATION_ENDPOINT_REQUEST`], which is how
/// the endpoint views and updates read it back from the cluster.
///
/// EC2's specs of the instance type come from `cx` (the workflow's facts; none = not read yet).
pub fn render(params: &Value, cx: Option<&WorkloadContext>) -> Result<RenderedWorkload, ValidationError> {
    let mut rendered = match decode_request(params)? {
        EndpointRequest::SelfManaged(mut s) => {
            s.serving.specs = specs_fact(cx, &s.serving.instance_type);
            let mut f = Findings::new();
            crate::volumes::check_volume_facts(&mut f, &s.serving.namespace, &s.serving.volumes, cx);
            f.finish()?;
            let mut rendered = render_self_managed(&s)?;
            rendered.volumes = crate::volumes::names(&s.serving.volumes);
            rendered
        }
        EndpointRequest::Managed(mut m) => {
            m.specs = specs_fact(cx, &m.instance_type);
            render_managed(&m)?
        }
    };
    let primary = &mut rendered.objects[0].0;
    let body = serde_json::to_string(params).map_err(|e| ValidationError::invalid("", e.to_string()))?;
    match primary.pointer_mut("/metadata").and_then(Value::as_object_mut) {
        Some(meta) => {
            let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
            annotations[ANNOTATION_ENDPOINT_REQUEST] = json!(body);
        }
        None => return Err(ValidationError::invalid("", "the primary object has no metadata")),
    }
    Ok(rendered)
}

/// Every kind of object an endpoint may consist of, in apply order.
pub fn owned_types() -> Vec<TypeRef> {
    vec![
        TypeRef::new("v1", "ServiceAccount"),
        TypeRef::new("rbac.authorization.k8s.io/v1", "Role"),
        TypeRef::new("rbac.authorization.k8s.io/v1", "RoleBinding"),
        TypeRef::new(managed::API_VERSION, managed::KIND),
        TypeRef::new("apps/v1", "Deployment"),
        TypeRef::new("v1", "Service"),
        TypeRef::new(autoscale::API_VERSION, "ScaledObject"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sglang(extra: Value) -> Value {
        let mut v = json!({
            "route": "self_managed", "name": "chat", "namespace": "default", "image": "lmsysorg/sglang:v0.5.2",
            "instance_type": "ml.g5.2xlarge", "replicas": 2,
            "engine": { "kind": "sglang", "model": "models/Qwen/Qwen3-0.6B" },
        });
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    fn kinds(r: &RenderedWorkload) -> Vec<String> {
        r.objects
            .iter()
            .map(|o| format!("{}/{}", o.0["kind"].as_str().unwrap(), o.0["metadata"]["name"].as_str().unwrap()))
            .collect()
    }

    #[test]
    fn self_managed_with_router_and_autoscaling_renders_every_object_under_the_endpoint_label() {
        let r = render(
            &sglang(json!({ "router": true, "autoscaling": { "min_replicas": 1, "max_replicas": 4 } })),
            Some(&crate::common::described()),
        )
        .unwrap();
        assert_eq!(
            kinds(&r),
            [
                "Deployment/chat",
                "Service/chat",
                "ServiceAccount/chat-router",
                "Role/chat-router",
                "RoleBinding/chat-router",
                "Deployment/chat-router",
                "Service/chat-router",
                "ScaledObject/chat"
            ]
        );
        for o in &r.objects {
            assert_eq!(o.label(LABEL_INSTANCE), Some("chat"), "{}", o.0["kind"]);
            assert_eq!(o.label("app.kubernetes.io/managed-by"), Some("instantstart"));
        }
        assert_eq!(r.ready.len(), 2);
        assert!(r.objects[0].0["spec"].get("replicas").is_none(), "the HPA owns the replicas");
        let stored = r.objects[0].0["metadata"]["annotations"][ANNOTATION_ENDPOINT_REQUEST].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(stored).unwrap()["router"], true);
        let so = &r.objects[7].0;
        assert_eq!(so["spec"]["minReplicaCount"], 1);
        assert!(so["spec"]["triggers"][0]["metadata"]["query"].as_str().unwrap().contains("chat-router"));
        // The router pods keep their own selector labels.
        assert_eq!(r.objects[5].0["spec"]["template"]["metadata"]["labels"][LABEL_INSTANCE], "chat-router");
    }

    #[test]
    fn a_pool_endpoint_selects_the_pool_label() {
        let r = render(&sglang(json!({ "pool": "warm" })), Some(&crate::common::described())).unwrap();
        assert_eq!(r.objects[1].0["spec"]["selector"], json!({ "instantstart.io/pool": "warm" }));
        assert_eq!(r.objects[0].0["spec"]["template"]["metadata"]["labels"]["instantstart.io/pool"], "warm");
    }

    #[test]
    fn managed_renders_the_operator_object_and_a_service() {
        let r = render(
            &json!({
                "route": "managed", "name": "qwen", "namespace": "default", "instance_type": "ml.g5.2xlarge",
                "model_source": { "bucket": "demo-bucket", "region": "us-east-1", "model_location": "models/qwen" },
                "worker": { "image": "vllm/vllm-openai:v0.11.0" },
            }),
            Some(&crate::common::described()),
        )
        .unwrap();
        assert_eq!(kinds(&r), ["InferenceEndpointConfig/qwen", "Service/qwen"]);
        assert_eq!(r.objects[1].0["spec"]["selector"], json!({ "app": "qwen" }));
        assert_eq!(chat_target(&decode_request(&json!({"route": "managed", "name": "qwen", "namespace": "default", "instance_type": "ml.g5.2xlarge", "model_source": { "bucket": "demo-bucket", "region": "us-east-1", "model_location": "m" }, "worker": { "image": "i:1" }})).unwrap()), ("qwen".to_string(), 80));
    }

    #[test]
    fn bad_bodies_name_their_fields() {
        let field = |v: Value| {
            render(&v, Some(&crate::common::described()))
                .unwrap_err()
                .findings
                .iter()
                .map(|f| f.field.clone())
                .collect::<Vec<_>>()
        };
        assert!(field(json!({ "name": "x" })).contains(&"route".to_string()));
        let vllm = sglang(json!({ "router": true, "engine": { "kind": "vllm", "model": "models/m" } }));
        assert!(field(vllm).contains(&"router".to_string()));
        assert!(field(sglang(json!({ "gpus": 9 }))).contains(&"gpus".to_string()), "GPU count vs instance type");
        assert!(field(sglang(json!({ "port": 0 }))).contains(&"port".to_string()));
        assert!(field(sglang(json!({ "name": "Bad_Name" }))).contains(&"name".to_string()));
        assert!(field(sglang(json!({ "bogus": 1 }))).iter().any(|f| f.contains("bogus")));
        let thresholds = sglang(
            json!({ "router": true, "router_options": { "policy": { "kind": "cache_aware", "cache_threshold": 2.0 } } }),
        );
        assert!(field(thresholds).contains(&"router_options.policy.cache_threshold".to_string()));
        let auto = sglang(json!({ "autoscaling": { "min_replicas": 5, "max_replicas": 2 } }));
        assert!(field(auto).contains(&"autoscaling.min_replicas".to_string()));
        let lb = sglang(json!({ "exposure": { "type": "load_balancer", "internet_facing": true } }));
        assert!(field(lb).contains(&"exposure.source_ranges".to_string()));
    }
}

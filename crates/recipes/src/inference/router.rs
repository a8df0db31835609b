//! The SGLang router in front of multi-replica SGLang: a Deployment running
//! `sglang_router.launch_router` with Kubernetes service discovery (it watches the worker pods
//! by label in its own namespace), cache-aware routing by default, Prometheus metrics on their
//! own port, and a Service of either exposure.
//!
//! Service discovery needs to list and watch pods, so the router gets its own ServiceAccount
//! with a namespaced Role (`get`/`list`/`watch` on pods) — nothing cluster-wide.

use super::service::{Backends, Exposure};
use crate::common::{ComputeResources, ManifestSet, check, container_security, image_ref, port, set, standard_labels};
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn default_worker_port() -> u16 {
    8000
}
fn default_port() -> u16 {
    30000
}
fn default_metrics_port() -> u16 {
    29000
}
fn default_replicas() -> u32 {
    1
}
fn default_resources() -> ComputeResources {
    ComputeResources { cpu: Some("2".into()), memory: Some("4Gi".into()) }
}

/// An SGLang router.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SglangRouterParams {
    /// Router name (Deployment, Service, ServiceAccount, Role).
    pub name: String,
    pub namespace: String,
    /// Router image (an SGLang image with `sglang_router`, pinned).
    pub image: String,
    /// The SGLang workers to route to.
    pub workers: Backends,
    /// Port of the SGLang servers.
    #[serde(default = "default_worker_port")]
    pub worker_port: u16,
    /// Port clients connect to.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Prometheus metrics port.
    #[serde(default = "default_metrics_port")]
    pub metrics_port: u16,
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    #[serde(default)]
    pub policy: RoutingPolicy,
    #[serde(default)]
    pub exposure: Exposure,
    #[serde(default = "default_resources")]
    pub resources: ComputeResources,
}

/// How the router picks a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RoutingPolicy {
    /// Prefer the worker holding the longest matching prefix in its KV cache, unless load is
    /// too unbalanced.
    CacheAware(CacheAware),
    RoundRobin,
    Random,
    PowerOfTwo,
}

impl Default for RoutingPolicy {
    fn default() -> Self {
        RoutingPolicy::CacheAware(CacheAware::default())
    }
}

fn d_cache_threshold() -> f64 {
    0.5
}
fn d_abs() -> u32 {
    32
}
fn d_rel() -> f64 {
    1.5
}
fn d_eviction() -> u32 {
    120
}
fn d_tree() -> u64 {
    1 << 26
}

/// Cache-aware routing thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheAware {
    /// Minimum prefix match ratio (0-1) for a cache-based choice.
    #[serde(default = "d_cache_threshold")]
    pub cache_threshold: f64,
    /// Load imbalance (in requests) beyond which the shortest queue wins.
    #[serde(default = "d_abs")]
    pub balance_abs_threshold: u32,
    /// Load imbalance ratio (≥ 1) beyond which the shortest queue wins.
    #[serde(default = "d_rel")]
    pub balance_rel_threshold: f64,
    /// Seconds between evictions of the approximate prefix tree.
    #[serde(default = "d_eviction")]
    pub eviction_interval_secs: u32,
    /// Maximum nodes of the prefix tree.
    #[serde(default = "d_tree")]
    pub max_tree_size: u64,
}

impl Default for CacheAware {
    fn default() -> Self {
        CacheAware {
            cache_threshold: d_cache_threshold(),
            balance_abs_threshold: d_abs(),
            balance_rel_threshold: d_rel(),
            eviction_interval_secs: d_eviction(),
            max_tree_size: d_tree(),
        }
    }
}

impl RoutingPolicy {
    fn name(&self) -> &'static str {
        match self {
            RoutingPolicy::CacheAware(_) => "cache_aware",
            RoutingPolicy::RoundRobin => "round_robin",
            RoutingPolicy::Random => "random",
            RoutingPolicy::PowerOfTwo => "power_of_two",
        }
    }
}

impl Validate for CacheAware {
    fn validate(&self, f: &mut Findings) {
        if !(0.0..=1.0).contains(&self.cache_threshold) {
            f.push("cache_threshold", "must be between 0 and 1");
        }
        if self.balance_abs_threshold == 0 {
            f.push("balance_abs_threshold", "must be at least 1");
        }
        if !self.balance_rel_threshold.is_finite() || self.balance_rel_threshold < 1.0 {
            f.push("balance_rel_threshold", "must be at least 1.0");
        }
        if self.eviction_interval_secs < 10 {
            f.push("eviction_interval_secs", "must be at least 10 seconds");
        }
        if !(1000..=(1 << 32)).contains(&self.max_tree_size) {
            f.push("max_tree_size", "must be between 1000 and 4294967296");
        }
    }
}

impl Validate for SglangRouterParams {
    fn validate(&self, f: &mut Findings) {
        check(f, "name", names::dns1123_label(&self.name));
        if self.name.len() > 50 {
            f.push("name", "must be at most 50 characters");
        }
        // The form only: a system namespace is refused unless the submitter is allowed it
        // (`instantstart_core::kube_access`), which the workload workflow checks.
        check(f, "namespace", names::dns1123_label(&self.namespace));
        check(f, "image", image_ref(&self.image));
        f.at("workers", |f| self.workers.validate(f));
        check(f, "worker_port", port(self.worker_port));
        check(f, "port", port(self.port));
        check(f, "metrics_port", port(self.metrics_port));
        if self.metrics_port == self.port {
            f.push("metrics_port", "must differ from port");
        }
        if self.replicas == 0 || self.replicas > 20 {
            f.push("replicas", "must be between 1 and 20");
        }
        if let RoutingPolicy::CacheAware(c) = &self.policy {
            f.at("policy", |f| c.validate(f));
        }
        f.at("exposure", |f| self.exposure.validate(f));
        f.at("resources", |f| self.resources.validate(f));
    }
}

/// The router's objects, in apply order.
#[derive(Debug, Clone, PartialEq)]
pub struct SglangRouter {
    pub name: String,
    pub service_account: Value,
    pub role: Value,
    pub role_binding: Value,
    pub deployment: Value,
    pub service: Value,
}

impl ManifestSet for SglangRouter {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.service_account, &self.role, &self.role_binding, &self.deployment, &self.service]
    }
}

fn router_args(p: &SglangRouterParams) -> Vec<String> {
    let mut v: Vec<String> = vec!["--host".into(), "0.0.0.0".into(), "--port".into(), p.port.to_string()];
    v.push("--service-discovery".into());
    v.push("--selector".into());
    v.extend(p.workers.selector().iter().map(|(k, val)| format!("{k}={val}")));
    v.extend(["--service-discovery-namespace".into(), p.namespace.clone()]);
    v.extend(["--service-discovery-port".into(), p.worker_port.to_string()]);
    v.extend(["--policy".into(), p.policy.name().into()]);
    if let RoutingPolicy::CacheAware(c) = &p.policy {
        v.extend(["--cache-threshold".into(), c.cache_threshold.to_string()]);
        v.extend(["--balance-abs-threshold".into(), c.balance_abs_threshold.to_string()]);
        v.extend(["--balance-rel-threshold".into(), c.balance_rel_threshold.to_string()]);
        v.extend(["--eviction-interval-secs".into(), c.eviction_interval_secs.to_string()]);
        v.extend(["--max-tree-size".into(), c.max_tree_size.to_string()]);
    }
    v.extend(["--prometheus-host".into(), "0.0.0.0".into(), "--prometheus-port".into(), p.metrics_port.to_string()]);
    v
}

/// Builds the router: ServiceAccount, Role, RoleBinding, Deployment and Service.
pub fn sglang_router(p: &SglangRouterParams) -> Result<SglangRouter, ValidationError> {
    p.check()?;
    let labels = standard_labels(&p.name, "sglang-router", "router");
    let meta = json!({ "name": p.name, "namespace": p.namespace, "labels": labels });
    let service_account = json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta });
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"] }],
    });
    let role_binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": p.name },
        "subjects": [{ "kind": "ServiceAccount", "name": p.name, "namespace": p.namespace }],
    });
    let selector = json!({ crate::common::LABEL_INSTANCE: p.name, crate::common::LABEL_COMPONENT: "router" });
    let health = json!({ "httpGet": { "path": "/health", "port": "http" } });
    let mut readiness = health.clone();
    set(&mut readiness, "periodSeconds", json!(10));
    let container = json!({
        "name": "router",
        "image": p.image,
        "command": ["python3", "-m", "sglang_router.launch_router"],
        "args": router_args(p),
        "ports": [
            { "name": "http", "containerPort": p.port, "protocol": "TCP" },
            { "name": "metrics", "containerPort": p.metrics_port, "protocol": "TCP" },
        ],
        "resources": crate::common::container_resources(None, 0, &p.resources),
        "readinessProbe": readiness,
        "livenessProbe": { "tcpSocket": { "port": "http" }, "periodSeconds": 20, "failureThreshold": 3 },
        "securityContext": container_security(),
    });
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": p.replicas,
            "selector": { "matchLabels": selector },
            "template": {
                "metadata": { "labels": labels, "annotations": super::scrape_annotations(p.metrics_port, "/metrics") },
                "spec": { "serviceAccountName": p.name, "containers": [container] },
            },
        },
    });
    let mut service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": selector,
            "ports": [
                { "name": "http", "port": p.port, "targetPort": "http", "protocol": "TCP" },
                { "name": "metrics", "port": p.metrics_port, "targetPort": "metrics", "protocol": "TCP" },
            ],
        },
    });
    p.exposure.apply(&mut service);
    Ok(SglangRouter { name: p.name.clone(), service_account, role, role_binding, deployment, service })
}

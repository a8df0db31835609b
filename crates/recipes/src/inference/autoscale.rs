//! KEDA autoscaling of a serving Deployment: one `ScaledObject` (`keda.sh/v1alpha1`) per
//! Deployment, named after it, with a Prometheus trigger. Nothing shared is touched (no
//! Prometheus configuration is rewritten), so autoscalers of different deployments never
//! clobber each other.
//!
//! For Amazon Managed Service for Prometheus, give `aws_region` (KEDA signs queries with
//! SigV4) and an `authentication_ref` to a `TriggerAuthentication` carrying the identity.

use crate::common::{ManifestSet, check, set, standard_labels};
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `apiVersion` of KEDA scaled objects.
pub const API_VERSION: &str = "keda.sh/v1alpha1";

fn default_cooldown() -> u32 {
    300
}
fn default_polling() -> u32 {
    30
}

/// Autoscaling of one Deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AutoscalerParams {
    pub namespace: String,
    /// The Deployment to scale; the ScaledObject is named after it.
    pub deployment: String,
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// Seconds after the last active trigger before scaling to `min_replicas` (when it is 0).
    #[serde(default = "default_cooldown")]
    pub cooldown_seconds: u32,
    #[serde(default = "default_polling")]
    pub polling_interval_seconds: u32,
    /// HPA scale-down stabilisation window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down_stabilization_seconds: Option<u32>,
    pub prometheus: PrometheusTrigger,
}

/// A Prometheus query and the per-replica target it is held to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrometheusTrigger {
    /// Prometheus base URL (`http://…` or `https://…`).
    pub server_address: String,
    /// PromQL returning a single value.
    pub query: String,
    /// Target value per replica.
    pub threshold: f64,
    /// Value above which scaling from zero activates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_threshold: Option<f64>,
    /// AWS region of an Amazon Managed Prometheus workspace (SigV4-signed queries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_region: Option<String>,
    /// `TriggerAuthentication` in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_ref: Option<String>,
}

/// Convenience: the queue depth of an SGLang router's pods, a good scaling signal for SGLang
/// workers behind a router. The series are selected by the `namespace` and `pod` labels the
/// Prometheus chart's `kubernetes-pods` job gives them (the router's pods are named
/// `<router>-…`); `or vector(0)` makes "no series yet" read as an empty queue.
pub fn sglang_router_queue_query(namespace: &str, router: &str) -> String {
    let clean = |s: &str| s.replace(['\\', '"'], "");
    format!(
        "sum(sgl_router_job_queue_depth{{namespace=\"{}\",pod=~\"{}-.*\"}}) or vector(0)",
        clean(namespace),
        clean(router)
    )
}

impl Validate for PrometheusTrigger {
    fn validate(&self, f: &mut Findings) {
        let url_ok = (self.server_address.starts_with("http://") || self.server_address.starts_with("https://"))
            && self.server_address.len() <= 2048
            && !self.server_address.chars().any(|c| c.is_whitespace() || c.is_control());
        if !url_ok {
            f.push("server_address", "must be an http:// or https:// URL");
        }
        if self.query.trim().is_empty()
            || self.query.len() > 4096
            || self.query.chars().any(|c| c.is_control() && c != '\n')
        {
            f.push("query", "must be a PromQL expression of 1-4096 characters");
        }
        if !self.threshold.is_finite() || self.threshold <= 0.0 {
            f.push("threshold", "must be a positive number");
        }
        if let Some(a) = self.activation_threshold
            && (!a.is_finite() || a < 0.0)
        {
            f.push("activation_threshold", "must be zero or positive");
        }
        if let Some(r) = &self.aws_region {
            check(f, "aws_region", names::region(r));
        }
        if let Some(a) = &self.authentication_ref {
            check(f, "authentication_ref", names::dns1123_label(a));
        }
    }
}

impl Validate for AutoscalerParams {
    fn validate(&self, f: &mut Findings) {
        // The form only: a system namespace is refused unless the submitter is allowed it
        // (`instantstart_core::kube_access`), which the workload workflow checks.
        check(f, "namespace", names::dns1123_label(&self.namespace));
        check(f, "deployment", names::dns1123_label(&self.deployment));
        if self.max_replicas == 0 || self.max_replicas > super::MAX_REPLICAS {
            f.push("max_replicas", format!("must be between 1 and {}", super::MAX_REPLICAS));
        }
        if self.min_replicas > self.max_replicas {
            f.push("min_replicas", "must not exceed max_replicas");
        }
        if self.polling_interval_seconds == 0 || self.polling_interval_seconds > 3600 {
            f.push("polling_interval_seconds", "must be between 1 and 3600");
        }
        if self.cooldown_seconds > 86_400 {
            f.push("cooldown_seconds", "must be at most 86400");
        }
        if self.scale_down_stabilization_seconds.is_some_and(|s| s > 3600) {
            f.push("scale_down_stabilization_seconds", "must be at most 3600");
        }
        f.at("prometheus", |f| self.prometheus.validate(f));
    }
}

/// The built ScaledObject.
#[derive(Debug, Clone, PartialEq)]
pub struct Autoscaler {
    pub name: String,
    pub scaled_object: Value,
}

impl ManifestSet for Autoscaler {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.scaled_object]
    }
}

fn number(x: f64) -> String {
    // Integral values without a fractional part; others in shortest round-trip form.
    if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{x}") }
}

/// Builds the ScaledObject.
pub fn keda_autoscaler(p: &AutoscalerParams) -> Result<Autoscaler, ValidationError> {
    p.check()?;
    let name = p.deployment.clone();
    let t = &p.prometheus;
    let mut metadata = json!({ "serverAddress": t.server_address, "query": t.query, "threshold": number(t.threshold) });
    if let Some(a) = t.activation_threshold {
        set(&mut metadata, "activationThreshold", json!(number(a)));
    }
    if let Some(r) = &t.aws_region {
        set(&mut metadata, "awsRegion", json!(r));
    }
    let mut trigger = json!({ "type": "prometheus", "metadata": metadata });
    if let Some(a) = &t.authentication_ref {
        set(&mut trigger, "authenticationRef", json!({ "name": a }));
    }
    let mut spec = json!({
        "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": p.deployment },
        "minReplicaCount": p.min_replicas,
        "maxReplicaCount": p.max_replicas,
        "cooldownPeriod": p.cooldown_seconds,
        "pollingInterval": p.polling_interval_seconds,
        "triggers": [trigger],
    });
    if let Some(s) = p.scale_down_stabilization_seconds {
        set(
            &mut spec,
            "advanced",
            json!({ "horizontalPodAutoscalerConfig": { "behavior": { "scaleDown": { "stabilizationWindowSeconds": s } } } }),
        );
    }
    let scaled_object = json!({
        "apiVersion": API_VERSION,
        "kind": "ScaledObject",
        "metadata": {
            "name": name,
            "namespace": p.namespace,
            "labels": standard_labels(&name, "keda-scaled-object", "autoscaler"),
        },
        "spec": spec,
    });
    Ok(Autoscaler { name, scaled_object })
}

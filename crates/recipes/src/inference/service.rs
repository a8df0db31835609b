//! Services in front of model servers, in the three shapes of the mission:
//!
//! * **cluster-internal** — `ClusterIP` selecting one Deployment's pods;
//! * **external** — `LoadBalancer` provisioned as an NLB by the AWS Load Balancer Controller
//!   (`aws-load-balancer-type: external`, IP targets, cross-zone). It is `internal` unless the
//!   request opts into `internet-facing`, which then must list the source CIDRs allowed in:
//!   model endpoints have no authentication of their own;
//! * **model pool** — selecting `instantstart.io/pool=<pool>` only, so the Service follows
//!   whichever warm workers carry the label; moving a worker is changing its label.

use crate::common::{LABEL_POOL, LABEL_SERVICE_SHAPE, ManifestSet, check, object_meta, port, set, standard_labels};
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate, ValidationError};
use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Annotation prefix of the AWS Load Balancer Controller.
pub const LBC_ANNOTATION_PREFIX: &str = "service.beta.kubernetes.io/aws-load-balancer-";

/// Which pods a Service (or router) sends traffic to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Backends {
    /// The pods of one serving Deployment.
    Deployment { name: String },
    /// The warm workers currently labelled into a model pool.
    Pool { pool: String },
}

impl Backends {
    /// The label selector.
    pub fn selector(&self) -> BTreeMap<String, String> {
        match self {
            Backends::Deployment { name } => BTreeMap::from([
                (crate::common::LABEL_INSTANCE.to_string(), name.clone()),
                (crate::common::LABEL_COMPONENT.to_string(), "inference".to_string()),
            ]),
            Backends::Pool { pool } => BTreeMap::from([(LABEL_POOL.to_string(), pool.clone())]),
        }
    }
}

impl Validate for Backends {
    fn validate(&self, f: &mut Findings) {
        match self {
            Backends::Deployment { name } => check(f, "name", names::dns1123_label(name)),
            Backends::Pool { pool } => check(f, "pool", names::dns1123_label(pool)),
        }
    }
}

/// How a Service is reached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Exposure {
    /// Inside the cluster only.
    #[default]
    ClusterIp,
    /// An NLB through the AWS Load Balancer Controller.
    LoadBalancer {
        /// Reachable from the internet (otherwise from the VPC only).
        #[serde(default)]
        internet_facing: bool,
        /// Client CIDRs allowed in; required when internet-facing.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        source_ranges: Vec<String>,
    },
}

/// The shortest prefix a load balancer's client range may have (IPv4, IPv6).
pub const MIN_SOURCE_PREFIX: (u8, u8) = (8, 16);

impl Validate for Exposure {
    fn validate(&self, f: &mut Findings) {
        if let Exposure::LoadBalancer { internet_facing, source_ranges } = self {
            for (i, r) in source_ranges.iter().enumerate() {
                match r.parse::<IpNet>() {
                    Err(_) => f.push(&format!("source_ranges[{i}]"), "must be a CIDR such as 203.0.113.0/24"),
                    // A /0 (or nearly) would admit the whole internet to an endpoint that has no
                    // authentication of its own, defeating the rule below.
                    Ok(net) if net.prefix_len() < MIN_SOURCE_PREFIX.0 && net.addr().is_ipv4()
                        || net.prefix_len() < MIN_SOURCE_PREFIX.1 && net.addr().is_ipv6() =>
                    {
                        f.push(
                            &format!("source_ranges[{i}]"),
                            format!(
                                "is wider than /{} (IPv4) or /{} (IPv6): name the client networks (model endpoints have no \
                                 authentication of their own)",
                                MIN_SOURCE_PREFIX.0, MIN_SOURCE_PREFIX.1
                            ),
                        )
                    }
                    Ok(_) => {}
                }
            }
            if *internet_facing && source_ranges.is_empty() {
                f.push(
                    "source_ranges",
                    "an internet-facing load balancer must list the client CIDRs allowed in (model endpoints have \
                     no authentication of their own)",
                );
            }
        }
    }
}

impl Exposure {
    /// Applies the exposure to a Service object under construction.
    pub(crate) fn apply(&self, service: &mut Value) {
        match self {
            Exposure::ClusterIp => set(&mut service["spec"], "type", json!("ClusterIP")),
            Exposure::LoadBalancer { internet_facing, source_ranges } => {
                let a = |k: &str| format!("{LBC_ANNOTATION_PREFIX}{k}");
                let annotations = json!({
                    a("type"): "external",
                    a("nlb-target-type"): "ip",
                    a("scheme"): if *internet_facing { "internet-facing" } else { "internal" },
                    a("attributes"): "load_balancing.cross_zone.enabled=true",
                });
                set(&mut service["metadata"], "annotations", annotations);
                set(&mut service["spec"], "type", json!("LoadBalancer"));
                if !source_ranges.is_empty() {
                    set(&mut service["spec"], "loadBalancerSourceRanges", json!(source_ranges));
                }
            }
        }
    }
}

fn default_port() -> u16 {
    80
}
fn default_target_port() -> u16 {
    8000
}

/// A Service in front of model servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServiceParams {
    pub name: String,
    pub namespace: String,
    pub backends: Backends,
    /// Port clients connect to.
    #[serde(default = "default_port")]
    pub port: u16,
    /// Port the model servers listen on.
    #[serde(default = "default_target_port")]
    pub target_port: u16,
    #[serde(default)]
    pub exposure: Exposure,
}

impl Validate for ServiceParams {
    fn validate(&self, f: &mut Findings) {
        check(f, "name", names::dns1123_label(&self.name));
        // The form only: a system namespace is refused unless the submitter is allowed it
        // (`instantstart_core::kube_access`), which the workload workflow checks.
        check(f, "namespace", names::dns1123_label(&self.namespace));
        f.at("backends", |f| self.backends.validate(f));
        check(f, "port", port(self.port));
        check(f, "target_port", port(self.target_port));
        f.at("exposure", |f| self.exposure.validate(f));
    }
}

/// The built Service.
#[derive(Debug, Clone, PartialEq)]
pub struct ServingService {
    pub name: String,
    pub service: Value,
}

impl ManifestSet for ServingService {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.service]
    }
}

/// Builds a Service of any of the three shapes.
pub fn serving_service(p: &ServiceParams) -> Result<ServingService, ValidationError> {
    p.check()?;
    let shape = match (&p.backends, &p.exposure) {
        (Backends::Pool { .. }, _) => "model-pool",
        (_, Exposure::LoadBalancer { .. }) => "external",
        (_, Exposure::ClusterIp) => "cluster-internal",
    };
    let mut labels = standard_labels(&p.name, "inference-service", "inference");
    labels.insert(LABEL_SERVICE_SHAPE.into(), shape.into());
    if let Backends::Pool { pool } = &p.backends {
        labels.insert(LABEL_POOL.into(), pool.clone());
    }
    let mut service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(&p.name, &p.namespace, &labels),
        "spec": {
            "selector": p.backends.selector(),
            "ports": [{ "name": "http", "port": p.port, "targetPort": p.target_port, "protocol": "TCP" }],
        },
    });
    p.exposure.apply(&mut service);
    Ok(ServingService { name: p.name.clone(), service })
}

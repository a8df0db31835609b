//! Deep health checks on demand (`StartClusterHealthCheck`): the accelerator stress test and
//! the EFA connectivity test on whole instance groups or on named nodes of them, as one
//! operation that waits until every checked node has left `DeepHealthCheckInProgress` and
//! reports each node's result.
//!
//! # Guarantees
//!
//! - Validation (every face): 1–99 instance groups, each named once with a valid name; 1–500
//!   node ids per group, each `i-` + 8 or 17 hex digits, listed once; 1–2 checks, each once
//!   (the limits of botocore's `StartClusterHealthCheckRequest`).
//! - Assessment (before anything is recorded), 422 naming the field: the HyperPod cluster is
//!   `InService`; each group exists and has nodes; its instance type is accelerated (EC2's
//!   described specs, else the family) and has EFA for `InstanceConnectivity`; each named node
//!   belongs to the group and is `Running` or already in a deep health check.
//! - Observe-before-submit: when every node to check is already `DeepHealthCheckInProgress`
//!   (a check in flight, e.g. a retry after a lost response), the step follows it instead of
//!   starting a second one.
//! - The result: per node `passed` (Running again), `failed` (in `Failure`, left for a reboot
//!   or replace when node recovery is `None`) or `replaced` (gone: HyperPod's automatic node
//!   recovery replaced it). The step succeeds when the checks ran; failed nodes are reported,
//!   not an error of the operation.

use super::day2::{hyperpod_record, live_cluster};
use super::{cluster_target, decode};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::instance_types::{InstanceSpecs, SpecsFact, is_accelerated_family};
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::Store;
use crate::validate::{Findings, ValidationError};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Most instance groups one request names (`DeepHealthCheckConfigurations`, max 99).
pub const MAX_GROUPS: usize = 99;
/// Most node ids per group (`InstanceIds`, max 500).
pub const MAX_NODES_PER_GROUP: usize = 500;
/// The node status of a check in flight.
pub const IN_PROGRESS: &str = "DeepHealthCheckInProgress";
const STEP: &str = "health_check";

/// Deep health checks on one instance group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckGroup {
    /// Instance group name.
    pub name: String,
    /// Instance ids (`i-…`) of the group's nodes to check; empty or absent: every node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_ids: Vec<String>,
    /// `InstanceStress` (accelerator stress) and/or `InstanceConnectivity` (EFA; needs a type
    /// with EFA).
    pub checks: Vec<DeepHealthCheck>,
}

/// Start deep health checks on instance groups of a cluster's HyperPod cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckRequest {
    pub cluster: String,
    pub instance_groups: Vec<HealthCheckGroup>,
    /// The nodes the checks cover, resolved by the assessment (absent in a client's request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checked_nodes: Vec<String>,
}

fn valid_node_id(id: &str) -> bool {
    id.strip_prefix("i-").is_some_and(|hex| {
        (hex.len() == 8 || hex.len() == 17) && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

impl HealthCheckRequest {
    /// The shape rules (no provider needed).
    pub fn validate(&self, f: &mut Findings) {
        if self.instance_groups.is_empty() || self.instance_groups.len() > MAX_GROUPS {
            f.push("instance_groups", format!("must name 1-{MAX_GROUPS} instance groups"));
        }
        for (i, g) in self.instance_groups.iter().enumerate() {
            let at = format!("instance_groups[{i}]");
            if let Err(rule) = crate::names::hyperpod_name(&g.name) {
                f.push(&format!("{at}.name"), rule);
            } else if self.instance_groups[..i].iter().any(|x| x.name == g.name) {
                f.push(&format!("{at}.name"), format!("instance group {} is named twice", g.name));
            }
            if g.node_ids.len() > MAX_NODES_PER_GROUP {
                f.push(&format!("{at}.node_ids"), format!("must list at most {MAX_NODES_PER_GROUP} nodes"));
            }
            for (j, id) in g.node_ids.iter().enumerate() {
                let field = format!("{at}.node_ids[{j}]");
                if !valid_node_id(id) {
                    f.push(&field, "must be an instance id: i- and 8 or 17 lowercase hex digits");
                } else if g.node_ids[..j].contains(id) {
                    f.push(&field, "listed twice");
                }
            }
            if g.checks.is_empty() {
                f.push(&format!("{at}.checks"), "must name at least one check (InstanceStress, InstanceConnectivity)");
            }
            for (j, c) in g.checks.iter().enumerate() {
                if g.checks[..j].contains(c) {
                    f.push(&format!("{at}.checks[{j}]"), format!("{} is named twice", c.as_str()));
                }
            }
        }
    }

    /// The provider's view of the request.
    pub fn targets(&self) -> Vec<HealthCheckTarget> {
        self.instance_groups
            .iter()
            .map(|g| HealthCheckTarget {
                instance_group: g.name.clone(),
                node_ids: g.node_ids.clone(),
                checks: g.checks.clone(),
            })
            .collect()
    }
}

/// Why a group cannot run a check, from the type's described specs (else its family).
pub fn check_refusal(instance_type: &str, check: DeepHealthCheck, fact: &SpecsFact) -> Option<String> {
    let (accelerated, efa) = match fact.known() {
        Some(info) => (info.accelerators > 0, Some(info.efa_interfaces)),
        None => (is_accelerated_family(instance_type), None),
    };
    if !accelerated {
        return Some(format!(
            "{instance_type} has no accelerators; deep health checks run on accelerated (GPU or Trainium) instance types only"
        ));
    }
    if check == DeepHealthCheck::InstanceConnectivity && efa == Some(0) {
        return Some(format!("{instance_type} has no EFA interface; InstanceConnectivity tests EFA connectivity"));
    }
    None
}

/// The deep-health-check workflow.
pub struct HealthCheckWorkflow {
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl HealthCheckWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        HealthCheckWorkflow { aws, store }
    }
}

#[async_trait]
impl Workflow for HealthCheckWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::StartHealthCheck
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: HealthCheckRequest = decode(request)?;
        let mut f = Findings::new();
        req.validate(&mut f);
        f.finish()?;
        let (_, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let what: Vec<String> = req
            .instance_groups
            .iter()
            .map(|g| {
                let checks: Vec<&str> = g.checks.iter().map(|c| c.as_str()).collect();
                let nodes = if g.node_ids.is_empty() {
                    "every node".to_string()
                } else {
                    format!("{} node(s)", g.node_ids.len())
                };
                format!("{} ({nodes}: {})", g.name, checks.join(", "))
            })
            .collect();
        let steps = vec![StepSpec {
            key: STEP.into(),
            title: format!("Run deep health checks on {hp}: {}", what.join("; ")),
            depends_on: vec![],
            expected_secs: Some(1800),
        }];
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.cluster), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: HealthCheckRequest = decode(&prepared.request)?;
        let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let live = live_cluster(self.aws.as_ref(), &rec, &hp).await?;
        if live.state != ResourceState::Active {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!(
                    "HyperPod cluster {hp} is {}; deep health checks start only while it is InService",
                    super::steps::state_word(&live.state)
                ),
            )
            .into());
        }
        let nodes = read(|| self.aws.list_cluster_nodes(&rec.region, &hp)).await?;
        let specs = InstanceSpecs::new(read(|| self.aws.instance_type_specs(&rec.region)).await?);
        let mut f = Findings::new();
        let mut checked = Vec::new();
        for (i, g) in req.instance_groups.iter().enumerate() {
            let at = format!("instance_groups[{i}]");
            let Some(group) = live.instance_groups.iter().find(|x| x.name == g.name) else {
                f.push_unprocessable(
                    &format!("{at}.name"),
                    format!("instance group {} does not exist in {hp}", g.name),
                );
                continue;
            };
            let fact = specs.fact(&group.instance_type);
            for (j, c) in g.checks.iter().enumerate() {
                if let Some(why) = check_refusal(&group.instance_type, *c, &fact) {
                    f.push_unprocessable(&format!("{at}.checks[{j}]"), why);
                }
            }
            let of_group: Vec<&ClusterNode> = nodes.iter().filter(|n| n.instance_group == g.name).collect();
            if g.node_ids.is_empty() {
                let ready: Vec<String> = of_group
                    .iter()
                    .filter(|n| n.status == "Running" || n.status == IN_PROGRESS)
                    .map(|n| n.instance_id.clone())
                    .collect();
                if ready.is_empty() {
                    f.push_unprocessable(
                        &format!("{at}.name"),
                        format!("instance group {} has no Running nodes to check", g.name),
                    );
                }
                checked.extend(ready);
            }
            for (j, id) in g.node_ids.iter().enumerate() {
                let field = format!("{at}.node_ids[{j}]");
                match of_group.iter().find(|n| &n.instance_id == id) {
                    None => f.push_unprocessable(&field, format!("{id} is not a node of instance group {}", g.name)),
                    Some(n) if n.status != "Running" && n.status != IN_PROGRESS => f.push_unprocessable(
                        &field,
                        format!(
                            "{id} is {}; wait until it is Running (another operation may be in progress)",
                            n.status
                        ),
                    ),
                    Some(_) => checked.push(id.clone()),
                }
            }
        }
        f.finish()?;
        checked.sort();
        checked.dedup();
        req.checked_nodes = checked;
        let reduced = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: None, checks: vec![], reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        if key != STEP {
            return None;
        }
        let req: HealthCheckRequest = decode(request).ok()?;
        Some(Arc::new(HealthCheckStep { req, aws: self.aws.clone(), store: self.store.clone() }))
    }
}

struct HealthCheckStep {
    req: HealthCheckRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

/// One checked node's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeHealthResult {
    pub node_id: String,
    /// `passed`, `failed` or `replaced`.
    pub result: String,
    /// The node's status now (`Running`, `Failure`, …), absent when it was replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// The outcome of the checked nodes once none is in a check; `None` while one still is (or is
/// being recovered: `Pending`).
pub fn results(checked: &[String], nodes: &[ClusterNode]) -> Option<Vec<NodeHealthResult>> {
    let mut out = Vec::new();
    for id in checked {
        let r = match nodes.iter().find(|n| &n.instance_id == id) {
            None => NodeHealthResult { node_id: id.clone(), result: "replaced".into(), status: None },
            Some(n) if n.status == IN_PROGRESS || n.status == "Pending" => return None,
            Some(n) => NodeHealthResult {
                node_id: id.clone(),
                result: if n.status == "Running" { "passed" } else { "failed" }.into(),
                status: Some(n.status.clone()),
            },
        };
        out.push(r);
    }
    Some(out)
}

impl HealthCheckStep {
    async fn nodes(&self) -> Result<(String, String, Vec<ClusterNode>), StepError> {
        super::nodes::listed_nodes(self.store.as_ref(), self.aws.as_ref(), &self.req.cluster).await
    }
}

#[async_trait]
impl StepExecutor for HealthCheckStep {
    /// A check already in flight on every node to check is followed, not started again.
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let (_, hp, nodes) = self.nodes().await?;
        let in_flight = !self.req.checked_nodes.is_empty()
            && self
                .req
                .checked_nodes
                .iter()
                .all(|id| nodes.iter().any(|n| &n.instance_id == id && n.status == IN_PROGRESS));
        Ok(if in_flight {
            Observation::Exists(ResourceRef { kind: "health-check".into(), id: hp, arn: None })
        } else {
            Observation::Absent
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (region, hp, _) = self.nodes().await?;
        self.aws.start_cluster_health_check(&region, &hp, &self.req.targets()).await?;
        Ok(ResourceRef { kind: "health-check".into(), id: hp, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let (_, _, nodes) = self.nodes().await?;
        Ok(match results(&self.req.checked_nodes, &nodes) {
            Some(r) => {
                let healthy = r.iter().all(|n| n.result == "passed");
                Progress::Done(json!({ "healthy": healthy, "nodes": r }))
            }
            None => {
                let busy = self
                    .req
                    .checked_nodes
                    .iter()
                    .filter(|id| nodes.iter().any(|n| &n.instance_id == *id && n.status == IN_PROGRESS))
                    .count();
                Progress::Waiting {
                    detail: format!("{busy} of {} node(s) in deep health checks", self.req.checked_nodes.len()),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, nodes: &[&str], checks: &[DeepHealthCheck]) -> HealthCheckGroup {
        HealthCheckGroup {
            name: name.into(),
            node_ids: nodes.iter().map(|s| s.to_string()).collect(),
            checks: checks.to_vec(),
        }
    }

    #[test]
    fn request_rules() {
        use DeepHealthCheck::*;
        let ok_id = "i-0123456789abcdef0";
        #[allow(clippy::type_complexity)] // a table test: one row per case
        let cases: Vec<(Vec<HealthCheckGroup>, &[&str])> = vec![
            (vec![group("workers", &[], &[InstanceStress])], &[]),
            (vec![group("workers", &[ok_id, "i-0abcdef1"], &[InstanceStress, InstanceConnectivity])], &[]),
            (vec![], &["instance_groups"]),
            (vec![group("Bad_Name", &[], &[InstanceStress])], &["instance_groups[0].name"]),
            (
                vec![group("w", &[], &[InstanceStress]), group("w", &[], &[InstanceStress])],
                &["instance_groups[1].name"],
            ),
            (
                vec![group("w", &["i-XYZ", ok_id, ok_id], &[InstanceStress])],
                &["instance_groups[0].node_ids[0]", "instance_groups[0].node_ids[2]"],
            ),
            (vec![group("w", &[], &[])], &["instance_groups[0].checks"]),
            (vec![group("w", &[], &[InstanceStress, InstanceStress])], &["instance_groups[0].checks[1]"]),
        ];
        for (i, (groups, want)) in cases.into_iter().enumerate() {
            let req = HealthCheckRequest { cluster: "demo".into(), instance_groups: groups, checked_nodes: vec![] };
            let mut f = Findings::new();
            req.validate(&mut f);
            let got: Vec<String> =
                f.finish().err().map(|e| e.findings.into_iter().map(|x| x.field).collect()).unwrap_or_default();
            assert_eq!(got, want, "case {i}");
        }
        let many: Vec<String> = (0..501).map(|i| format!("i-{i:08x}")).collect();
        let req = HealthCheckRequest {
            cluster: "demo".into(),
            instance_groups: vec![HealthCheckGroup { name: "w".into(), node_ids: many, checks: vec![InstanceStress] }],
            checked_nodes: vec![],
        };
        let mut f = Findings::new();
        req.validate(&mut f);
        assert_eq!(f.finish().unwrap_err().findings[0].field, "instance_groups[0].node_ids");
    }

    #[test]
    fn accelerated_types_only_and_connectivity_needs_efa() {
        use crate::instance_types::InstanceTypeInfo;
        let info = |accelerators, efa| {
            SpecsFact::Known(InstanceTypeInfo {
                name: "t".into(),
                vcpus: 8,
                memory_gib: 32,
                accelerators,
                accelerator: "nvidia-a10g".into(),
                efa_interfaces: efa,
                efa_only_supported: false,
            })
        };
        use DeepHealthCheck::*;
        assert!(check_refusal("ml.g5.2xlarge", InstanceStress, &info(1, 0)).is_none());
        assert!(check_refusal("ml.g5.2xlarge", InstanceConnectivity, &info(1, 0)).unwrap().contains("no EFA"));
        assert!(check_refusal("ml.p5.48xlarge", InstanceConnectivity, &info(8, 32)).is_none());
        assert!(check_refusal("ml.m5.xlarge", InstanceStress, &info(0, 0)).unwrap().contains("no accelerators"));
        // Unknown specs: the family decides; EFA cannot be judged and is left to SageMaker.
        assert!(check_refusal("ml.c5.xlarge", InstanceStress, &SpecsFact::Unknown).is_some());
        assert!(check_refusal("ml.g5.2xlarge", InstanceConnectivity, &SpecsFact::Unknown).is_none());
    }

    #[test]
    fn results_wait_for_every_node_and_name_each_outcome() {
        let node = |id: &str, status: &str| ClusterNode {
            instance_id: id.into(),
            instance_group: "w".into(),
            instance_type: "ml.g5.2xlarge".into(),
            status: status.into(),
            availability_zone: "us-east-1a".into(),
        };
        let checked = vec!["i-1".to_string(), "i-2".to_string(), "i-3".to_string()];
        assert!(results(&checked, &[node("i-1", "Running"), node("i-2", IN_PROGRESS)]).is_none());
        assert!(results(&checked, &[node("i-1", "Running"), node("i-2", "Pending")]).is_none());
        let r = results(&checked, &[node("i-1", "Running"), node("i-2", "Failure"), node("i-9", "Running")]).unwrap();
        let got: Vec<(&str, &str)> = r.iter().map(|n| (n.node_id.as_str(), n.result.as_str())).collect();
        assert_eq!(got, [("i-1", "passed"), ("i-2", "failed"), ("i-3", "replaced")]);
    }
}

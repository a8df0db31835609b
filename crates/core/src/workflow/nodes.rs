//! Node operations on a HyperPod cluster: reboot, replace, delete — each a batch operation
//! followed to a terminal state. Replace and delete lose the node's local volumes, so the
//! request must acknowledge it. The ladder for unhealthy nodes is investigate → reboot →
//! replace; deleting shrinks the group.

use super::day2::hyperpod_record;
use super::{cluster_target, decode};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::Store;
use crate::validate::{Findings, ValidationError};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Most nodes one batch call accepts.
pub const MAX_BATCH_NODES: usize = 25;

/// Reboot, replace or delete nodes of a cluster's HyperPod cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeActionRequest {
    pub cluster: String,
    /// Instance ids (`i-…`) as listed by the cluster's nodes.
    pub node_ids: Vec<String>,
    /// Replace and delete lose the node's local volumes (instance store, /opt/dlami/nvme):
    /// set true to acknowledge. Not needed for reboot.
    #[serde(default)]
    pub acknowledge_local_data_loss: bool,
}

/// The node-action workflows (one per [`NodeAction`]).
pub struct NodeActionWorkflow {
    action: NodeAction,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl NodeActionWorkflow {
    pub fn new(action: NodeAction, aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        NodeActionWorkflow { action, aws, store }
    }
}

/// Whether a node in `status` can take a reboot or replace: `Running`, or `Failure` (it failed
/// a deep health check and node recovery is `None`).
fn acts_on(status: &str) -> bool {
    status == "Running" || status == "Failure"
}

/// The operation kind of a node action.
pub fn kind_of(action: NodeAction) -> OperationKind {
    match action {
        NodeAction::Reboot => OperationKind::RebootNodes,
        NodeAction::Replace => OperationKind::ReplaceNodes,
        NodeAction::Delete => OperationKind::DeleteNodes,
    }
}

fn verb(action: NodeAction) -> &'static str {
    match action {
        NodeAction::Reboot => "Reboot",
        NodeAction::Replace => "Replace",
        NodeAction::Delete => "Delete",
    }
}

#[async_trait]
impl Workflow for NodeActionWorkflow {
    fn kind(&self) -> OperationKind {
        kind_of(self.action)
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: NodeActionRequest = decode(request)?;
        let mut f = Findings::new();
        if req.node_ids.is_empty() || req.node_ids.len() > MAX_BATCH_NODES {
            f.push("node_ids", format!("must list 1-{MAX_BATCH_NODES} nodes"));
        }
        for (i, id) in req.node_ids.iter().enumerate() {
            if !id.starts_with("i-") {
                f.push(&format!("node_ids[{i}]"), "must be an instance id such as i-0abc…");
            }
            if req.node_ids[..i].contains(id) {
                f.push(&format!("node_ids[{i}]"), "listed twice");
            }
        }
        if self.action != NodeAction::Reboot && !req.acknowledge_local_data_loss {
            f.push_unprocessable(
                "acknowledge_local_data_loss",
                format!(
                    "{} loses the nodes' local volumes (instance store, /opt/dlami/nvme); set it to true to proceed, \
                     or try a reboot first (investigate → reboot → replace)",
                    verb(self.action).to_lowercase()
                ),
            );
        }
        f.finish()?;
        let (_, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let steps = vec![StepSpec {
            key: "nodes".into(),
            title: format!("{} {} node(s) of {hp}: {}", verb(self.action), req.node_ids.len(), req.node_ids.join(", ")),
            depends_on: vec![],
            expected_secs: Some(match self.action {
                NodeAction::Reboot => 180,
                NodeAction::Replace => 420,
                NodeAction::Delete => 60,
            }),
        }];
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.cluster), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let req: NodeActionRequest = decode(&prepared.request)?;
        let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let nodes = read(|| self.aws.list_cluster_nodes(&rec.region, &hp)).await?;
        let mut f = Findings::new();
        for (i, id) in req.node_ids.iter().enumerate() {
            match nodes.iter().find(|n| &n.instance_id == id) {
                None => f.push_unprocessable(&format!("node_ids[{i}]"), format!("{id} is not a node of {hp}")),
                // A node that failed a deep health check (`Failure`) is what reboot and
                // replace are for.
                Some(n) if !acts_on(&n.status) && self.action != NodeAction::Delete => f.push_unprocessable(
                    &format!("node_ids[{i}]"),
                    format!("{id} is {}; wait until it is Running (another operation may be in progress)", n.status),
                ),
                Some(_) => {}
            }
        }
        f.finish()?;
        Ok(Assessment::default())
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        if key != "nodes" {
            return None;
        }
        let req: NodeActionRequest = decode(request).ok()?;
        Some(Arc::new(BatchStep { action: self.action, req, aws: self.aws.clone(), store: self.store.clone() }))
    }
}

struct BatchStep {
    action: NodeAction,
    req: NodeActionRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl BatchStep {
    async fn nodes(&self) -> Result<(String, String, Vec<ClusterNode>), StepError> {
        listed_nodes(self.store.as_ref(), self.aws.as_ref(), &self.req.cluster).await
    }
}

/// The region, HyperPod cluster name and listed nodes of `cluster` (a step's view of its nodes;
/// a cluster without HyperPod is `Invalid`).
pub(crate) async fn listed_nodes(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    cluster: &str,
) -> Result<(String, String, Vec<ClusterNode>), StepError> {
    let (rec, hp) = hyperpod_record(store, cluster).map_err(|e| StepError::Invalid(e.to_string()))?;
    let nodes = read(|| aws.list_cluster_nodes(&rec.region, &hp)).await?;
    Ok((rec.region, hp, nodes))
}

#[async_trait]
impl StepExecutor for BatchStep {
    /// The action took effect when the listed nodes left `Running` (rebooting/replacing) or
    /// are gone (deleted); a retry after a lost response then does not act twice.
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let (_, hp, nodes) = self.nodes().await?;
        let done = self.req.node_ids.iter().all(|id| match nodes.iter().find(|n| &n.instance_id == id) {
            None => self.action != NodeAction::Reboot,
            Some(n) => !acts_on(&n.status),
        });
        Ok(if done {
            Observation::Exists(ResourceRef { kind: "nodes".into(), id: hp, arn: None })
        } else {
            Observation::Absent
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (region, hp, _) = self.nodes().await?;
        let result = self.aws.batch_node_action(&region, &hp, self.action, &self.req.node_ids).await?;
        if !result.failed.is_empty() {
            let reasons: Vec<String> = result.failed.iter().map(|(id, why)| format!("{id}: {why}")).collect();
            return Err(StepError::Invalid(format!("{} refused for {}", verb(self.action), reasons.join("; "))));
        }
        Ok(ResourceRef { kind: "nodes".into(), id: hp, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let (_, _, nodes) = self.nodes().await?;
        match self.action {
            NodeAction::Delete => {
                let left: Vec<&String> =
                    self.req.node_ids.iter().filter(|id| nodes.iter().any(|n| &n.instance_id == *id)).collect();
                Ok(if left.is_empty() {
                    Progress::Done(json!({ "deleted": self.req.node_ids }))
                } else {
                    Progress::Waiting { detail: format!("{} node(s) shutting down", left.len()) }
                })
            }
            NodeAction::Reboot => {
                let not_running: Vec<&String> = self
                    .req
                    .node_ids
                    .iter()
                    .filter(|id| nodes.iter().find(|n| &n.instance_id == *id).is_none_or(|n| n.status != "Running"))
                    .collect();
                Ok(if not_running.is_empty() {
                    Progress::Done(json!({ "rebooted": self.req.node_ids }))
                } else {
                    Progress::Waiting { detail: format!("{} node(s) rebooting", not_running.len()) }
                })
            }
            NodeAction::Replace => {
                // Replaced nodes come back with new instance ids: done when none of the old ids
                // is listed and every node of the affected groups runs.
                let old_present = self.req.node_ids.iter().any(|id| nodes.iter().any(|n| &n.instance_id == id));
                let pending = nodes.iter().filter(|n| n.status != "Running").count();
                Ok(if !old_present && pending == 0 {
                    Progress::Done(json!({ "replaced": self.req.node_ids }))
                } else {
                    Progress::Waiting { detail: format!("replacing: {pending} node(s) not running yet") }
                })
            }
        }
    }
}

/// Rejects a request whose kind does not match the action (used by the server's routing).
pub fn check_action(kind: OperationKind) -> Result<NodeAction, ValidationError> {
    match kind {
        OperationKind::RebootNodes => Ok(NodeAction::Reboot),
        OperationKind::ReplaceNodes => Ok(NodeAction::Replace),
        OperationKind::DeleteNodes => Ok(NodeAction::Delete),
        other => Err(ValidationError::invalid("action", format!("{} is not a node action", other.as_str()))),
    }
}

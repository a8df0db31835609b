//! Nodes of a cluster's HyperPod cluster: the list (instance group and status), one node in
//! detail, and the submissions that reboot, replace or delete nodes.
//!
//! # Guarantees
//!
//! - An unknown cluster is a `404` ([`super::clusters::resolve`]), a cluster without HyperPod a
//!   `422` on `cluster`, an unknown node a `404` naming it, a malformed node id a `400` on
//!   `node` before any provider call.

use super::clusters::resolve;
use super::submission::Submission;
use crate::engine::EngineError;
use crate::operation::OperationKind;
use crate::provider::{AwsCloud, ClusterNode, ClusterNodeDetail};
use crate::store::Store;
use crate::workflow::hyperpod_reads;
use crate::workflow::nodes::NodeActionRequest;
use schemars::JsonSchema;
use serde::Deserialize;

// What a node action does (no doc comment: it would change the OpenAPI document).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeActionName {
    Reboot,
    Replace,
    Delete,
}

impl NodeActionName {
    /// The operation that carries the action out.
    pub fn kind(self) -> OperationKind {
        match self {
            NodeActionName::Reboot => OperationKind::RebootNodes,
            NodeActionName::Replace => OperationKind::ReplaceNodes,
            NodeActionName::Delete => OperationKind::DeleteNodes,
        }
    }
}

/// The nodes of `cluster`'s HyperPod cluster.
pub async fn list(store: &dyn Store, aws: &dyn AwsCloud, cluster: &str) -> Result<Vec<ClusterNode>, EngineError> {
    let c = resolve(store, cluster)?;
    Ok(aws.list_cluster_nodes(&c.record.region, c.hyperpod()?).await?)
}

/// Node `node` (an instance id) of `cluster`'s HyperPod cluster, in detail.
pub async fn get(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    cluster: &str,
    node: &str,
) -> Result<ClusterNodeDetail, EngineError> {
    hyperpod_reads::node_detail(aws, store, cluster, node).await
}

/// `action` on the nodes `node_ids` of `cluster`; replace and delete lose the nodes' local
/// volumes and need `acknowledge_local_data_loss` (the workflow checks it).
pub fn action(
    cluster: String,
    action: NodeActionName,
    node_ids: Vec<String>,
    acknowledge_local_data_loss: bool,
) -> Submission {
    Submission::new(action.kind(), &NodeActionRequest { cluster, node_ids, acknowledge_local_data_loss })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_is_its_own_operation() {
        for (action, kind) in [
            (NodeActionName::Reboot, OperationKind::RebootNodes),
            (NodeActionName::Replace, OperationKind::ReplaceNodes),
            (NodeActionName::Delete, OperationKind::DeleteNodes),
        ] {
            let s = super::action("demo".into(), action, vec!["i-0123456789abcdef0".into()], true);
            assert_eq!(s.kind, kind);
            assert_eq!(s.request["cluster"], "demo");
            assert_eq!(s.request["node_ids"][0], "i-0123456789abcdef0");
            assert_eq!(s.request["acknowledge_local_data_loss"], true);
        }
    }
}

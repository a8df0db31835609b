//! Instance groups of a cluster's HyperPod cluster: the live groups (counts as SageMaker reports
//! them) and the submissions that add, scale and delete one.
//!
//! # Guarantees
//!
//! - An unknown cluster is a `404` ([`super::clusters::resolve`]); a cluster without HyperPod,
//!   or whose HyperPod cluster does not exist, a `422` on `cluster`.
//! - A new group's body is decoded here, so a malformed one is a `400` naming every field
//!   relative to the body before anything is recorded.

use super::clusters::resolve;
use super::submission::Submission;
use crate::engine::EngineError;
use crate::operation::OperationKind;
use crate::provider::{AwsCloud, HyperPodInstanceGroupStatus};
use crate::spec::InstanceGroupSpec;
use crate::store::Store;
use crate::workflow::day2::live_cluster;
use crate::workflow::instance_groups::{
    AddInstanceGroupRequest, DeleteInstanceGroupRequest, UpdateInstanceGroupRequest,
};
use serde_json::Value;

pub use crate::workflow::instance_groups::InstanceGroupPatch;

/// The instance groups of `cluster`'s HyperPod cluster, as it really is.
pub async fn list(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    cluster: &str,
) -> Result<Vec<HyperPodInstanceGroupStatus>, EngineError> {
    let c = resolve(store, cluster)?;
    Ok(live_cluster(aws, &c.record, c.hyperpod()?).await?.instance_groups)
}

/// Add the group `body` (an [`InstanceGroupSpec`]) to `cluster`.
pub fn add(cluster: String, body: &Value) -> Result<Submission, EngineError> {
    let group: InstanceGroupSpec = crate::workflow::decode(body)?;
    Ok(Submission::new(OperationKind::AddInstanceGroup, &AddInstanceGroupRequest { cluster, group, karpenter: false }))
}

/// Change `group` of `cluster` by `patch` (the explicit diff: only the changed fields).
pub fn update(cluster: String, group: String, patch: InstanceGroupPatch) -> Submission {
    Submission::new(OperationKind::UpdateInstanceGroup, &UpdateInstanceGroupRequest { cluster, group, patch })
}

/// Delete `group` of `cluster`.
pub fn delete(cluster: String, group: String) -> Submission {
    Submission::new(
        OperationKind::DeleteInstanceGroup,
        &DeleteInstanceGroupRequest { cluster, group, karpenter: false },
    )
}

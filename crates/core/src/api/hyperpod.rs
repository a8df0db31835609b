//! The HyperPod cluster of a cluster as a whole: its events, adding one to an EKS-only cluster
//! or removing it, deep health checks on demand and platform software updates. Instance groups,
//! nodes and managed features have their own modules.
//!
//! # Guarantees
//!
//! - An unknown cluster is a `404` ([`super::clusters::resolve`]), a cluster without HyperPod a
//!   `422` on `cluster`; event filters are checked (a `400` naming the field) before any
//!   provider call.

use super::submission::Submission;
use crate::engine::EngineError;
use crate::operation::OperationKind;
use crate::provider::{AwsCloud, ClusterEventPage, ClusterEventQuery, SoftwareUpdateDeployment, SoftwareUpdateGroup};
use crate::store::Store;
use crate::workflow::health_checks::HealthCheckRequest;
use crate::workflow::hyperpod_attach::RemoveHyperPodRequest;
use crate::workflow::hyperpod_reads;
use crate::workflow::software_update::SoftwareUpdateRequest;

pub use crate::workflow::health_checks::HealthCheckGroup;
pub use crate::workflow::hyperpod_attach::AddHyperPodBody;

/// One page of the events of `cluster`'s HyperPod cluster, newest first.
pub async fn events(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    cluster: &str,
    query: &ClusterEventQuery,
) -> Result<ClusterEventPage, EngineError> {
    hyperpod_reads::cluster_events(aws, store, cluster, query).await
}

/// Add the HyperPod cluster `body` to the EKS-only `cluster`.
pub fn add(cluster: String, body: AddHyperPodBody) -> Submission {
    Submission::new(OperationKind::AddHyperPod, &body.into_request(cluster))
}

/// Remove `cluster`'s HyperPod cluster and what InstantStart made for it (EKS stays).
pub fn remove(cluster: String) -> Submission {
    Submission::new(OperationKind::RemoveHyperPod, &RemoveHyperPodRequest { cluster })
}

/// Start deep health checks on `instance_groups` (whole, or named nodes of them) of `cluster`.
pub fn start_health_check(cluster: String, instance_groups: Vec<HealthCheckGroup>) -> Submission {
    Submission::new(
        OperationKind::StartHealthCheck,
        &HealthCheckRequest { cluster, instance_groups, checked_nodes: vec![] },
    )
}

/// Update the platform software of `instance_groups` of `cluster` (all when empty) by the
/// rolling `deployment`, to their named releases or to `image_id`.
pub fn update_software(
    cluster: String,
    instance_groups: Vec<SoftwareUpdateGroup>,
    deployment: Option<SoftwareUpdateDeployment>,
    image_id: Option<String>,
) -> Submission {
    Submission::new(
        OperationKind::UpdateSoftware,
        &SoftwareUpdateRequest { cluster, instance_groups, deployment, image_id },
    )
}

//! Managed features of a cluster (the HyperPod training and inference operators, observability,
//! managed autoscaling): what they really are, and the submission that changes them.
//!
//! # Guarantees
//!
//! - The read is of the real state (the EKS add-ons, the HyperPod cluster's autoscaling), never
//!   of what InstantStart last asked for.
//! - With managed autoscaling on, the groups Karpenter may scale are read from the cluster's
//!   `HyperpodNodeClass`; a read that fails leaves them out rather than failing the request.

use super::clusters::resolve;
use super::submission::Submission;
use crate::diff::FeaturesPatch;
use crate::engine::EngineError;
use crate::operation::OperationKind;
use crate::provider::{AwsCloud, KubeApi};
use crate::spec::ManagedFeatures;
use crate::store::Store;
use crate::workflow::day2::live_cluster;
use crate::workflow::features::{SetFeaturesRequest, read_features};
use crate::workflow::karpenter;
use schemars::JsonSchema;
use serde::Serialize;

/// What managed autoscaling covers, as the faces show it.
pub const AUTOSCALING_SCOPE: &str = "HyperPod instance groups only (scale from zero); not general EC2 capacity";

/// Managed features with the scope of managed autoscaling spelled out.
#[derive(Debug, Serialize, JsonSchema)]
pub struct FeaturesView {
    #[serde(flatten)]
    pub features: ManagedFeatures,
    /// Managed autoscaling (Karpenter operated by AWS) scales HyperPod instance groups only,
    /// from zero; it does not manage general EC2 capacity.
    pub autoscaling_scope: String,
    /// With managed autoscaling on: the instance groups Karpenter may scale (the
    /// `HyperpodNodeClass`'s list; absent when it cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_instance_groups: Option<Vec<String>>,
}

/// The managed features of `cluster` as they really are.
pub async fn get(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    kube: &dyn KubeApi,
    cluster: &str,
) -> Result<FeaturesView, EngineError> {
    let c = resolve(store, cluster)?;
    let live = live_cluster(aws, &c.record, c.hyperpod()?).await?;
    let features = read_features(aws, &c.record, &live).await?;
    let autoscaling_instance_groups = if features.managed_autoscaling {
        karpenter::current_groups(kube, &c.kube).await.ok().flatten().map(|(groups, ..)| groups)
    } else {
        None
    };
    Ok(FeaturesView { features, autoscaling_scope: AUTOSCALING_SCOPE.into(), autoscaling_instance_groups })
}

/// Change the managed features of `cluster` by `patch` (only the changed fields).
pub fn set(cluster: String, patch: FeaturesPatch) -> Submission {
    Submission::new(OperationKind::SetFeatures, &SetFeaturesRequest { cluster, patch, karpenter: None })
}

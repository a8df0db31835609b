//! HyperPod managed (Karpenter) autoscaling: the `karpenter.sagemaker.amazonaws.com/v1`
//! `HyperpodNodeClass` naming the instance groups Karpenter may scale and the `karpenter.sh/v1`
//! `NodePool` that draws on it.
//!
//! The builders live in `instantstart_core::workflow::karpenter`, because the managed-features
//! and instance-group workflows (in the core, which cannot depend on this crate) apply and
//! update these objects; they are re-exported here with a [`ManifestSet`] so the recipe tests
//! snapshot them and check the NodePool against the upstream Karpenter CRD vendored in
//! `vendor/schemas/karpenter`.

use crate::ManifestSet;
pub use instantstart_core::workflow::karpenter::{
    KARPENTER_NAME, KarpenterSpec, MAX_NODE_CLASS_GROUPS, NODE_CLASS_API, NODE_CLASS_KIND, NODE_POOL_API,
    NODE_POOL_KIND, node_class, node_pool,
};
use serde_json::Value;

/// The two Karpenter objects of a spec, NodeClass first (the NodePool references it).
#[derive(Debug, Clone, PartialEq)]
pub struct KarpenterObjects {
    pub node_class: Value,
    pub node_pool: Value,
}

/// Builds both objects.
pub fn karpenter_objects(spec: &KarpenterSpec) -> KarpenterObjects {
    KarpenterObjects { node_class: node_class(spec), node_pool: node_pool(spec) }
}

impl ManifestSet for KarpenterObjects {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.node_class, &self.node_pool]
    }
}

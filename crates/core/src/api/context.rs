//! Context: who the control plane runs as, and what a region offers the forms of the faces
//! (Availability Zones, HyperPod instance types with their specs, EKS clusters import can
//! offer, HyperPod quotas with their use, training plans and offerings). Reads only: no plan
//! is bought, nothing is created.
//!
//! # Guarantees
//!
//! - A region is checked before any provider call: a bad one is a `400` naming `region`
//!   ([`region`]); so is an offering search ([`crate::provider::OfferingQuery::check`]).
//! - The identity read never fails the context: a failure is reported beside it ([`identity`]).
//! - [`instance_types`] lists every HyperPod instance type, offered in the region or not (an
//!   empty zone list says it is not), each with its EC2 specs when EC2 describes it.

use crate::engine::EngineError;
use crate::instance_types::{CLUSTER_INSTANCE_TYPES, InstanceSpecs, InstanceTypeInfo};
use crate::names;
use crate::provider::{
    AvailabilityZone, AwsCloud, CallerIdentity, OfferingQuery, ProviderError, QuotaUsage, TrainingPlanOffering,
    TrainingPlanSummary,
};
use crate::store::Store;
use crate::validate::ValidationError;
use crate::workflow::hyperpod_reads;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::workflow::import_cluster::EksClusterCandidate;

/// Which cloud the server drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// The embedded simulated AWS + Kubernetes world (no AWS account needed).
    Sim,
    /// Real AWS through the standard credential chain.
    Aws,
}

// `GET /api/context`: the provider, the simulated cloud's speed, who the control plane runs
// as, the default region, the active cluster and the server's version. (No doc comment: it
// would become the schema's description in the OpenAPI document.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContextView {
    pub provider: ProviderKind,
    /// Speed factor of the simulated cloud, when it is the provider.
    pub sim_speed: Option<f64>,
    pub identity: Option<CallerIdentity>,
    /// Why the identity could not be read (credentials, network).
    pub identity_error: Option<String>,
    pub default_region: String,
    pub active_cluster: Option<String>,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceTypeView {
    /// One of SageMaker's `ClusterInstanceType` values.
    pub instance_type: String,
    /// AZs of the region that offer it (empty: not offered in this region).
    pub availability_zones: Vec<String>,
    /// Its specs as EC2 describes them in the region (`DescribeInstanceTypes`): vCPUs,
    /// memory, accelerators, EFA. `null` when EC2 does not describe it: the type is still
    /// accepted, and the checks that need its specs say they could not run.
    pub info: Option<InstanceTypeInfo>,
}

/// The region a request names, else `default`; a `400` naming `region` when it is not one.
pub fn region(requested: Option<String>, default: &str) -> Result<String, ValidationError> {
    let region = requested.unwrap_or_else(|| default.to_string());
    names::region(&region).map_err(|rule| ValidationError::invalid("region", rule))?;
    Ok(region)
}

/// Who the control plane runs as, or why that could not be read (credentials, network).
pub async fn identity(aws: &dyn AwsCloud) -> (Option<CallerIdentity>, Option<String>) {
    match aws.caller_identity().await {
        Ok(id) => (Some(id), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The Availability Zones of `region`.
pub async fn zones(aws: &dyn AwsCloud, region: &str) -> Result<Vec<AvailabilityZone>, ProviderError> {
    aws.availability_zones(region).await
}

/// The EKS clusters of `region` with their HyperPod clusters, which InstantStart manages, and
/// whether the control plane has access: what import can offer.
pub async fn eks_clusters(
    aws: &dyn AwsCloud,
    store: &dyn Store,
    region: &str,
) -> Result<Vec<EksClusterCandidate>, EngineError> {
    crate::workflow::import_cluster::eks_clusters(aws, store, region).await
}

/// The HyperPod instance quotas of `region` with what its clusters use.
pub async fn quotas(aws: &dyn AwsCloud, region: &str) -> Result<Vec<QuotaUsage>, EngineError> {
    hyperpod_reads::quotas(aws, region).await
}

/// The training plans of the account in `region`.
pub async fn training_plans(aws: &dyn AwsCloud, region: &str) -> Result<Vec<TrainingPlanSummary>, EngineError> {
    hyperpod_reads::training_plans(aws, region).await
}

/// The training plan offerings `query` finds in `region` (a search; nothing is bought).
pub async fn training_plan_offerings(
    aws: &dyn AwsCloud,
    region: &str,
    query: &OfferingQuery,
) -> Result<Vec<TrainingPlanOffering>, EngineError> {
    hyperpod_reads::training_plan_offerings(aws, region, query).await
}

/// Every HyperPod instance type, with its specs and the AZs of `region` that offer it.
pub async fn instance_types(aws: &dyn AwsCloud, region: &str) -> Result<Vec<InstanceTypeView>, ProviderError> {
    let offerings = aws.instance_type_offerings(region).await?;
    let specs = InstanceSpecs::new(aws.instance_type_specs(region).await?);
    Ok(instance_type_views(offerings.into_iter().map(|o| (o.instance_type, o.availability_zone)), &specs))
}

/// The views of every HyperPod instance type from `(type, zone)` offerings (pure).
fn instance_type_views(
    offerings: impl Iterator<Item = (String, String)>,
    specs: &InstanceSpecs,
) -> Vec<InstanceTypeView> {
    let mut by_type: BTreeMap<String, Vec<String>> =
        CLUSTER_INSTANCE_TYPES.iter().map(|t| (t.to_string(), Vec::new())).collect();
    for (instance_type, zone) in offerings {
        if let Some(zones) = by_type.get_mut(&instance_type) {
            zones.push(zone);
        }
    }
    by_type
        .into_iter()
        .map(|(t, mut azs)| {
            azs.sort();
            azs.dedup();
            InstanceTypeView { info: specs.get(&t).cloned(), instance_type: t, availability_zones: azs }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hyperpod_type_is_listed_with_its_zones_sorted_once() {
        let t = CLUSTER_INSTANCE_TYPES[0].to_string();
        let offerings = [
            (t.clone(), "us-east-1b".to_string()),
            (t.clone(), "us-east-1a".to_string()),
            (t.clone(), "us-east-1b".to_string()),
            ("m5.large".to_string(), "us-east-1a".to_string()),
        ];
        let views = instance_type_views(offerings.into_iter(), &InstanceSpecs::new(vec![]));
        assert_eq!(views.len(), CLUSTER_INSTANCE_TYPES.len(), "every type, offered or not; no other");
        let first = views.iter().find(|v| v.instance_type == t).unwrap();
        assert_eq!(first.availability_zones, ["us-east-1a", "us-east-1b"]);
        assert!(views.iter().filter(|v| v.instance_type != t).all(|v| v.availability_zones.is_empty()));
        assert!(first.info.is_none());
    }

    #[test]
    fn a_region_is_the_requested_one_or_the_default() {
        assert_eq!(region(None, "us-east-1").unwrap(), "us-east-1");
        assert_eq!(region(Some("x".into()), "us-east-1").unwrap_err().findings[0].field, "region");
    }
}

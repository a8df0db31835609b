//! What every day-2 workflow (instance groups, nodes, managed features) needs: the cluster's
//! record, its HyperPod cluster, and the network/role context for new instance groups.

use crate::engine::reads::read;
use crate::engine::{EngineError, StepError};
use crate::names::DerivedNames;
use crate::provider::*;
use crate::spec::{InstanceGroupSpec, LifecycleScript};
use crate::store::{ClusterRecord, Store};
use crate::validate::ValidationError;

/// The registered cluster `name` ([`crate::api::clusters::resolve`]), which must have a
/// HyperPod cluster ([`crate::api::clusters::Cluster::hyperpod`]).
pub fn hyperpod_record(store: &dyn Store, name: &str) -> Result<(ClusterRecord, String), EngineError> {
    let cluster = crate::api::clusters::resolve(store, name)?;
    let hp = cluster.hyperpod()?.to_string();
    Ok((cluster.record, hp))
}

/// The live HyperPod cluster; a missing one is a clear error.
pub async fn live_cluster(aws: &dyn AwsCloud, rec: &ClusterRecord, hp: &str) -> Result<HyperPodCluster, EngineError> {
    read(|| aws.describe_hyperpod_cluster(&rec.region, hp)).await?.ok_or_else(|| {
        ValidationError::unprocessable(
            "cluster",
            format!("HyperPod cluster {hp} of {} does not exist in {}", rec.name, rec.region),
        )
        .into()
    })
}

/// An existing group as a spec: the provider's real state (count = target count) — EBS size,
/// lifecycle configuration, deep health checks, capacity and interface mode as DescribeCluster
/// reports them, so an UpdateCluster that resizes the group sends back what the group has
/// (an EKS group must carry its `LifeCycleConfig` on every update). The spec default (500 GB)
/// stands in only when the provider does not report a volume.
pub fn group_spec(g: &HyperPodInstanceGroupStatus, availability_zone: &str) -> InstanceGroupSpec {
    InstanceGroupSpec {
        name: g.name.clone(),
        instance_type: g.instance_type.clone(),
        count: g.target_count,
        availability_zone: availability_zone.to_string(),
        subnet_id: None,
        capacity: g.capacity.clone(),
        interface_mode: g.interface_mode,
        ebs_volume_gb: g.ebs_volume_gb.unwrap_or(DEFAULT_EBS_GB),
        deep_health_checks: g.deep_health_checks,
        lifecycle_script: g.lifecycle_script.clone(),
    }
}

/// The EBS size assumed when a described group reports none (the spec's default).
const DEFAULT_EBS_GB: u32 = 500;

/// The lifecycle script a new group of `live` reuses when its request names none: the
/// cluster's own script (InstantStart's, in the cluster bucket), else the one its existing
/// groups run. `None` when the cluster has no group with a lifecycle configuration.
pub fn cluster_script(live: &HyperPodCluster, cluster_bucket: Option<&str>) -> Option<LifecycleScript> {
    let scripts: Vec<&LifecycleScript> =
        live.instance_groups.iter().filter_map(|g| g.lifecycle_script.as_ref()).collect();
    if let Some(bucket) = cluster_bucket {
        let ours = crate::lifecycle::default_lifecycle(bucket);
        let prefix = format!("s3://{bucket}/{}/", crate::lifecycle::LIFECYCLE_PREFIX);
        if let Some(s) = scripts.iter().find(|s| **s == &ours) {
            return Some((*s).clone());
        }
        if let Some(s) = scripts.iter().find(|s| s.source_s3_uri.starts_with(&prefix)) {
            return Some((*s).clone());
        }
    }
    scripts.first().map(|s| (*s).clone())
}

/// What UpdateCluster needs to describe a group: its subnet, the security group and the
/// execution role, read from the provider (deterministic names, nothing guessed).
pub struct GroupContext {
    pub vpc_id: String,
    pub security_group_ids: Vec<String>,
    pub execution_role_arn: String,
}

/// The VPC, security groups and execution role a new group of `rec` gets. A cluster InstantStart
/// created has its own (the network's security group, `<name>-hyperpod-exec-role`); an imported
/// one gets what its HyperPod cluster's groups already use (their security groups, else the
/// EKS cluster security group; the execution role of an existing group). `Invalid` names what
/// is missing and how to supply it.
pub async fn group_context(aws: &dyn AwsCloud, rec: &ClusterRecord) -> Result<GroupContext, StepError> {
    let eks = aws
        .describe_eks_cluster(&rec.region, &rec.eks_cluster)
        .await?
        .ok_or_else(|| StepError::Invalid(format!("EKS cluster {} not found", rec.eks_cluster)))?;
    let vpc_id = rec.vpc_id.clone().unwrap_or_else(|| eks.vpc_id.clone());
    let live = match &rec.hyperpod_cluster {
        Some(hp) => aws.describe_hyperpod_cluster(&rec.region, hp).await?,
        None => None,
    };
    let existing = live.as_ref().map(|l| l.instance_groups.as_slice()).unwrap_or_default();
    let network = aws.describe_network(&rec.region, &vpc_id).await?;
    let security_group_ids = match network.security_group_id {
        Some(ours) => vec![ours],
        None => existing
            .iter()
            .map(|g| g.security_group_ids.clone())
            .find(|sgs| !sgs.is_empty())
            .or_else(|| eks.security_group_id.clone().map(|sg| vec![sg]))
            .ok_or_else(|| {
                StepError::Invalid(format!(
                    "no security group for the new group: VPC {vpc_id} has none of InstantStart's, the HyperPod \
                     cluster's groups name none, and EKS cluster {} reports no cluster security group",
                    rec.eks_cluster
                ))
            })?,
    };
    let role_name = DerivedNames::for_cluster(&rec.name).hyperpod_execution_role;
    let execution_role_arn = match aws.get_role(&role_name).await? {
        Some(role) => role.arn,
        None => existing.iter().find_map(|g| g.execution_role_arn.clone()).ok_or_else(|| {
            StepError::Invalid(format!(
                "no execution role for the new group: IAM role {role_name} does not exist and no instance group of the \
                 HyperPod cluster names one (create {role_name} with the HyperPod execution role's policies, or \
                 add a group to the cluster with an execution role first)"
            ))
        })?,
    };
    Ok(GroupContext { vpc_id, security_group_ids, execution_role_arn })
}

/// The AZ of a subnet, from the VPC's subnets.
pub async fn subnet_az(aws: &dyn AwsCloud, region: &str, vpc_id: &str, subnet_id: &str) -> Result<String, StepError> {
    let n = read(|| aws.describe_network(region, vpc_id)).await?;
    n.subnets
        .iter()
        .find(|s| s.id == subnet_id)
        .map(|s| s.availability_zone.clone())
        .ok_or_else(|| StepError::Invalid(format!("subnet {subnet_id} not found in {vpc_id}")))
}

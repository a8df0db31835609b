//! Reads of HyperPod that every face shares: one page of a registered cluster's events, one of
//! its nodes in detail, and a region's capacity (quotas with their use, training plans,
//! training plan offerings). Frontends call these and translate; the rules (filters the
//! service model refuses, unknown cluster, unknown node) live here.
//!
//! # Guarantees
//! - The filters are checked before any provider call ([`ClusterEventQuery::check`]): a bad
//!   one is a `400` naming its field.
//! - An unknown cluster is [`EngineError::UnknownCluster`] (`404`), a cluster without HyperPod
//!   a `422` on `cluster`, an unknown node [`EngineError::Missing`] naming `node` (`404`).
//! - The offering search is checked before any provider call ([`OfferingQuery::check`]).
//! - Capacity reads change nothing: no training plan is bought (`CreateTrainingPlan` is not
//!   called anywhere).
//! - A quota's `in_use` counts what SageMaker counts against it: the target counts of the
//!   on-demand and Spot groups of the region's HyperPod clusters that have not failed (groups
//!   on a training plan draw on the plan instead), including clusters InstantStart does not
//!   manage.
//! - Provider reads are retried like every read ([`crate::engine::reads::read`]).

use crate::engine::EngineError;
use crate::engine::reads::read;
use crate::provider::{
    AwsCloud, ClusterEventPage, ClusterEventQuery, ClusterNodeDetail, OfferingQuery, QUOTA_SUFFIX, QuotaUsage,
    ResourceState, TrainingPlanOffering, TrainingPlanSummary, check_node_id,
};
use crate::spec::CapacitySpec;
use crate::store::Store;
use crate::workflow::day2::hyperpod_record;
use std::collections::BTreeMap;

/// One page of the events of cluster `name`'s HyperPod cluster, newest first.
pub async fn cluster_events(
    aws: &dyn AwsCloud,
    store: &dyn Store,
    name: &str,
    query: &ClusterEventQuery,
) -> Result<ClusterEventPage, EngineError> {
    query.check()?;
    let (rec, hp) = hyperpod_record(store, name)?;
    Ok(read(|| aws.list_cluster_events(&rec.region, &hp, query)).await?)
}

/// Node `node` of cluster `name`'s HyperPod cluster, in detail.
pub async fn node_detail(
    aws: &dyn AwsCloud,
    store: &dyn Store,
    name: &str,
    node: &str,
) -> Result<ClusterNodeDetail, EngineError> {
    check_node_id("node", node)?;
    let (rec, hp) = hyperpod_record(store, name)?;
    read(|| aws.describe_cluster_node(&rec.region, &hp, node))
        .await?
        .ok_or_else(|| EngineError::Missing(format!("node {node} of cluster {name}")))
}

/// The region's HyperPod instance quotas, each with the instances its HyperPod clusters ask
/// for now.
pub async fn quotas(aws: &dyn AwsCloud, region: &str) -> Result<Vec<QuotaUsage>, EngineError> {
    let quotas = read(|| aws.hyperpod_instance_quotas(region)).await?;
    let mut in_use: BTreeMap<String, u32> = BTreeMap::new();
    for name in read(|| aws.list_hyperpod_clusters(region)).await? {
        let Some(c) = read(|| aws.describe_hyperpod_cluster(region, &name)).await? else { continue };
        if matches!(c.state, ResourceState::Failed { .. }) {
            continue;
        }
        for g in c.instance_groups.iter().filter(|g| !matches!(g.capacity, CapacitySpec::TrainingPlan { .. })) {
            *in_use.entry(g.instance_type.clone()).or_insert(0) += g.target_count;
        }
    }
    Ok(quotas
        .into_iter()
        .map(|q| {
            let instance_type = q.name.strip_suffix(QUOTA_SUFFIX).unwrap_or(&q.name).to_string();
            let used = in_use.get(&instance_type).copied().unwrap_or(0);
            QuotaUsage {
                instance_type,
                name: q.name,
                code: q.code,
                value: q.value,
                in_use: used,
                available: q.value.saturating_sub(used),
            }
        })
        .collect())
}

/// The account's training plans in the region.
pub async fn training_plans(aws: &dyn AwsCloud, region: &str) -> Result<Vec<TrainingPlanSummary>, EngineError> {
    Ok(read(|| aws.list_training_plans(region)).await?)
}

/// The training plan offerings for HyperPod clusters that match `query` (checked first).
pub async fn training_plan_offerings(
    aws: &dyn AwsCloud,
    region: &str,
    query: &OfferingQuery,
) -> Result<Vec<TrainingPlanOffering>, EngineError> {
    query.check()?;
    Ok(read(|| aws.search_training_plan_offerings(region, query)).await?)
}

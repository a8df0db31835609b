//! Reads of a registered cluster's HyperPod cluster that every face shares: one page of its
//! events and one node in detail. Frontends call these and translate; the rules (filters the
//! service model refuses, unknown cluster, unknown node) live here.
//!
//! # Guarantees
//! - The filters are checked before any provider call ([`ClusterEventQuery::check`]): a bad
//!   one is a `400` naming its field.
//! - An unknown cluster is [`EngineError::UnknownCluster`] (`404`), a cluster without HyperPod
//!   a `422` on `cluster`, an unknown node [`EngineError::Missing`] naming `node` (`404`).
//! - Provider reads are retried like every read ([`crate::engine::reads::read`]).

use crate::engine::EngineError;
use crate::engine::reads::read;
use crate::provider::{AwsCloud, ClusterEventPage, ClusterEventQuery, ClusterNodeDetail, check_node_id};
use crate::store::Store;
use crate::workflow::day2::hyperpod_record;

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

//! Clusters: what the faces show of one (its record, its status derived from its operations,
//! and its live EKS and HyperPod state) and the reads that build it.
//!
//! # Guarantees
//!
//! - A list costs two store queries whatever the number of clusters (the latest lifecycle
//!   operation and the latest operation of every cluster at once).
//! - The live part of one cluster (EKS `DescribeCluster`, SageMaker `DescribeCluster` and
//!   `ListClusterNodes`) is read through [`LiveReads`]: concurrent readers share one read, and
//!   a read is reused for at most [`LIVE_READ_TTL`](super::live::LIVE_READ_TTL), and never
//!   across a change of the cluster's latest operation (one starting or finishing: its result
//!   is read fresh). The record and the status come from the store on every call.
//! - A live read that fails does not fail the request: the detail says why in `live_error`.

use super::live::LiveReads;
use crate::engine::EngineError;
use crate::operation::{OperationKind, OperationStatus};
use crate::provider::{AwsCloud, ClusterNode, EksCluster, HyperPodCluster, ProviderError};
use crate::store::{ACTIVE_CLUSTER, ClusterRecord, OperationHead, Store};
use crate::workflow::cluster_target;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Lifecycle state of a cluster, derived from its latest operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClusterStatus {
    Creating,
    Ready,
    Failed,
    Deleting,
    DeleteFailed,
    Importing,
    /// A change (instance groups, nodes, features) is running.
    Updating,
}

/// Summary of an operation on a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OperationSummary {
    pub id: String,
    pub kind: OperationKind,
    pub status: OperationStatus,
}

/// A cluster as lists show it: its record, whether it is the active cluster, its lifecycle
/// status and its latest operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterView {
    #[serde(flatten)]
    pub record: ClusterRecord,
    pub active: bool,
    pub status: ClusterStatus,
    pub last_operation: Option<OperationSummary>,
}

/// A cluster with live state read from the provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterDetail {
    #[serde(flatten)]
    pub view: ClusterView,
    pub eks: Option<EksCluster>,
    pub hyperpod: Option<HyperPodCluster>,
    pub nodes: Vec<ClusterNode>,
    /// Why live state could not be read, if it could not.
    pub live_error: Option<String>,
}

/// The live part of a cluster, as one provider read.
#[derive(Debug, Clone, Default)]
pub struct LiveCluster {
    pub eks: Option<EksCluster>,
    pub hyperpod: Option<HyperPodCluster>,
    pub nodes: Vec<ClusterNode>,
}

/// What a live read of a cluster is shared under: its region, EKS and HyperPod names, and its
/// latest operation with that operation's status, so that a read after an operation on the
/// cluster changed state (started, finished) never reuses one from before.
pub type LiveKey = (String, String, Option<String>, Option<(String, OperationStatus)>);

/// Shared live reads of clusters.
pub type LiveClusters = LiveReads<LiveKey, LiveCluster>;

/// Kinds whose latest operation decides a cluster's lifecycle status.
const LIFECYCLE: [OperationKind; 3] =
    [OperationKind::CreateCluster, OperationKind::ImportCluster, OperationKind::DeleteCluster];

/// The status of a cluster from its latest lifecycle operation (create/import/delete) and its
/// latest operation of any kind (a running change makes a ready cluster `updating`).
pub fn status_of(lifecycle: Option<&OperationHead>, latest: Option<&OperationHead>) -> ClusterStatus {
    let status = match lifecycle {
        None => ClusterStatus::Ready,
        Some(op) => match (op.kind, op.status) {
            (OperationKind::CreateCluster, OperationStatus::Running) => ClusterStatus::Creating,
            (OperationKind::ImportCluster, OperationStatus::Running) => ClusterStatus::Importing,
            (OperationKind::DeleteCluster, OperationStatus::Running) => ClusterStatus::Deleting,
            (OperationKind::DeleteCluster, _) => ClusterStatus::DeleteFailed,
            (_, OperationStatus::Succeeded) => ClusterStatus::Ready,
            _ => ClusterStatus::Failed,
        },
    };
    if status == ClusterStatus::Ready && latest.is_some_and(|op| op.status == OperationStatus::Running) {
        ClusterStatus::Updating
    } else {
        status
    }
}

/// Views of `records`: two store queries whatever the number of clusters.
fn views(store: &dyn Store, records: Vec<ClusterRecord>) -> Result<Vec<ClusterView>, EngineError> {
    let active = store.get_setting(ACTIVE_CLUSTER)?;
    let targets: Vec<String> = records.iter().map(|r| cluster_target(&r.name)).collect();
    let lifecycle = store.latest_operations(&targets, &LIFECYCLE)?;
    let latest = store.latest_operations(&targets, &[])?;
    Ok(records
        .into_iter()
        .zip(&targets)
        .map(|(record, target)| {
            let last = latest.get(target);
            ClusterView {
                active: active.as_deref() == Some(record.name.as_str()),
                record,
                status: status_of(lifecycle.get(target), last),
                last_operation: last.map(|op| OperationSummary {
                    id: op.id.0.clone(),
                    kind: op.kind,
                    status: op.status,
                }),
            }
        })
        .collect())
}

/// Every cluster InstantStart manages, with its status.
pub fn list(store: &dyn Store) -> Result<Vec<ClusterView>, EngineError> {
    views(store, store.list_clusters()?)
}

/// One page of the clusters, by name (the rule of [`crate::page`]), each with its status; the
/// statuses of a page cost one query whatever its size.
pub fn page(
    store: &dyn Store,
    request: &crate::page::PageRequest,
) -> Result<crate::page::Page<ClusterView>, EngineError> {
    let records = store.page_clusters(request)?;
    Ok(crate::page::Page { items: views(store, records.items)?, next: records.next })
}

/// One cluster with its status (no live read); unknown → [`EngineError::UnknownCluster`].
pub fn view(store: &dyn Store, name: &str) -> Result<ClusterView, EngineError> {
    let record = store.get_cluster(name)?.ok_or_else(|| EngineError::UnknownCluster(name.to_string()))?;
    Ok(views(store, vec![record])?.pop().expect("one view per record"))
}

/// One cluster with its live EKS and HyperPod state and nodes.
pub async fn get(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    live: &LiveClusters,
    name: &str,
) -> Result<ClusterDetail, EngineError> {
    let view = view(store, name)?;
    let r = &view.record;
    let latest = view.last_operation.as_ref().map(|op| (op.id.clone(), op.status));
    let key = (r.region.clone(), r.eks_cluster.clone(), r.hyperpod_cluster.clone(), latest);
    let read = live
        .get(&key, || async {
            let (region, eks_name, hp_name, _) = &key;
            let mut l = LiveCluster { eks: aws.describe_eks_cluster(region, eks_name).await?, ..Default::default() };
            if let Some(hp) = hp_name {
                l.hyperpod = aws.describe_hyperpod_cluster(region, hp).await?;
                if l.hyperpod.is_some() {
                    l.nodes = aws.list_cluster_nodes(region, hp).await?;
                }
            }
            Ok::<_, ProviderError>(l)
        })
        .await;
    Ok(match read {
        Ok(l) => ClusterDetail { view, eks: l.eks, hyperpod: l.hyperpod, nodes: l.nodes, live_error: None },
        Err(e) => ClusterDetail { view, eks: None, hyperpod: None, nodes: vec![], live_error: Some(e.to_string()) },
    })
}

//! Clusters: what the faces show of one (its record, its status derived from its operations,
//! and its live EKS and HyperPod state), the reads that build it, the active cluster, and the
//! resolver every other noun finds "the cluster named X" with.
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
//! - **One resolver, one error rule:** every read and submission that names a cluster finds it
//!   with [`resolve`]; a name that is not registered (whatever it looks like) is
//!   [`EngineError::UnknownCluster`], a `404` whose detail is `no cluster named <name>`, the
//!   same for every noun under `/api/clusters/{cluster}`.
//! - Selecting the active cluster ([`set_active`]) checks the name first (an unknown one changes
//!   nothing) and records an audit entry (`active_cluster.set`, from → to) with the change.

use super::live::LiveReads;
use super::submission::Submission;
use crate::engine::{EngineError, audit};
use crate::operation::Actor;
use crate::operation::{OperationKind, OperationStatus};
use crate::provider::{AwsCloud, ClusterNode, EksCluster, HyperPodCluster, KubeTarget, ProviderError};
use crate::spec::{fill_default_region, fill_server_public_access_cidrs};
use crate::store::{ACTIVE_CLUSTER, ClusterRecord, OperationHead, Store};
use crate::validate::ValidationError;
use crate::workflow::cluster_target;
use crate::workflow::delete_cluster::DeleteClusterRequest;
use ipnet::Ipv4Net;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use crate::workflow::import_cluster::ImportClusterRequest;

/// A registered cluster, found by its name: its record and where its Kubernetes API is (reached
/// as the control plane; [`KubeTarget::acting_as`] narrows it to a caller's identity).
#[derive(Debug, Clone)]
pub struct Cluster {
    pub record: ClusterRecord,
    pub kube: KubeTarget,
}

impl Cluster {
    /// The name of its HyperPod cluster; an EKS-only cluster is a `422` on `cluster`.
    pub fn hyperpod(&self) -> Result<&str, EngineError> {
        self.record.hyperpod_cluster.as_deref().ok_or_else(|| {
            ValidationError::unprocessable("cluster", format!("cluster {} has no HyperPod cluster", self.record.name))
                .into()
        })
    }
}

impl From<&ClusterRecord> for KubeTarget {
    fn from(record: &ClusterRecord) -> Self {
        KubeTarget::new(record.region.clone(), record.eks_cluster.clone())
    }
}

/// The cluster resolver: the registered cluster `name`, or [`unknown`] (`404`).
pub fn resolve(store: &dyn Store, name: &str) -> Result<Cluster, EngineError> {
    let record = store.get_cluster(name)?.ok_or_else(|| unknown(name))?;
    Ok(Cluster { kube: KubeTarget::from(&record), record })
}

/// The one error of a cluster name that is not registered.
pub fn unknown(name: &str) -> EngineError {
    EngineError::UnknownCluster(name.to_string())
}

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
    let record = resolve(store, name)?.record;
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

// The active cluster: the one the faces use when a request names none (no doc comment: it
// would change the OpenAPI schema).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActiveCluster {
    /// Name of the active cluster (null when none).
    pub name: Option<String>,
}

/// The active cluster, if one is selected.
pub fn active(store: &dyn Store) -> Result<ActiveCluster, EngineError> {
    Ok(ActiveCluster { name: store.get_setting(ACTIVE_CLUSTER)? })
}

/// Selects `selection` (a registered cluster, or none) as the active cluster and records who
/// changed it from what to what. An unknown name is [`unknown`] and changes nothing.
pub fn set_active(store: &dyn Store, actor: Actor, selection: ActiveCluster) -> Result<ActiveCluster, EngineError> {
    if let Some(name) = &selection.name {
        resolve(store, name)?;
    }
    let previous = store.get_setting(ACTIVE_CLUSTER)?;
    store.set_setting(ACTIVE_CLUSTER, selection.name.as_deref())?;
    let target = selection.name.as_deref().map(cluster_target).unwrap_or_else(|| "active-cluster".into());
    audit(store, actor, "active_cluster.set", &target, json!({ "from": previous, "to": selection.name }))?;
    Ok(selection)
}

/// Create a cluster from the request `body` (decoded and validated by the workflow), with the
/// server's `default_region` when the body names none and the server's own addresses added to
/// the EKS endpoint's public access list (`public_access_cidrs`) when it restricts it.
pub fn create(mut body: Value, default_region: &str, public_access_cidrs: &[Ipv4Net]) -> Submission {
    fill_default_region(&mut body, default_region);
    fill_server_public_access_cidrs(&mut body, public_access_cidrs);
    Submission { kind: OperationKind::CreateCluster, request: body }
}

/// Import an existing EKS (and HyperPod) cluster from the request `body`, in `default_region`
/// when the body names none.
pub fn import(mut body: Value, default_region: &str) -> Submission {
    fill_default_region(&mut body, default_region);
    Submission { kind: OperationKind::ImportCluster, request: body }
}

/// Delete `cluster` (the reverse pipeline; an imported cluster is only forgotten), with its
/// shared bucket when asked (only if InstantStart created it and it is empty), and its tracking
/// servers unless asked to keep them. The assessment fills in what it finds.
pub fn delete(cluster: String, delete_bucket: bool, keep_tracking_servers: bool) -> Submission {
    let request = DeleteClusterRequest {
        name: cluster,
        delete_bucket,
        keep_tracking_servers,
        tracking_servers: vec![],
        governance: None,
        file_systems: vec![],
    };
    Submission::new(OperationKind::DeleteCluster, &request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::OperationId;
    use OperationKind::*;
    use OperationStatus::*;

    /// The kind and status of a latest operation, if there is one.
    type Head = Option<(OperationKind, OperationStatus)>;

    fn head(kind: OperationKind, status: OperationStatus) -> OperationHead {
        let at = chrono::Utc::now();
        OperationHead {
            id: OperationId("op".into()),
            kind,
            target: cluster_target("demo"),
            status,
            error: None,
            created_at: at,
            updated_at: at,
            finished_at: None,
        }
    }

    #[test]
    fn status_follows_the_latest_lifecycle_operation_and_a_running_change() {
        let cases: &[(Head, Head, ClusterStatus)] = &[
            (None, None, ClusterStatus::Ready),
            (Some((CreateCluster, Running)), None, ClusterStatus::Creating),
            (Some((ImportCluster, Running)), None, ClusterStatus::Importing),
            (Some((DeleteCluster, Running)), None, ClusterStatus::Deleting),
            (Some((DeleteCluster, Failed)), None, ClusterStatus::DeleteFailed),
            (Some((DeleteCluster, Succeeded)), None, ClusterStatus::DeleteFailed),
            (Some((CreateCluster, Succeeded)), None, ClusterStatus::Ready),
            (Some((ImportCluster, Succeeded)), None, ClusterStatus::Ready),
            (Some((CreateCluster, Failed)), None, ClusterStatus::Failed),
            (Some((CreateCluster, Succeeded)), Some((AddInstanceGroup, Running)), ClusterStatus::Updating),
            (None, Some((SetFeatures, Running)), ClusterStatus::Updating),
            (Some((CreateCluster, Succeeded)), Some((AddInstanceGroup, Failed)), ClusterStatus::Ready),
            // Only a ready cluster shows a running change as `updating`.
            (Some((CreateCluster, Failed)), Some((AddInstanceGroup, Running)), ClusterStatus::Failed),
            (Some((DeleteCluster, Running)), Some((DeleteCluster, Running)), ClusterStatus::Deleting),
        ];
        for (lifecycle, latest, want) in cases {
            let lifecycle = lifecycle.map(|(k, s)| head(k, s));
            let latest = latest.map(|(k, s)| head(k, s));
            assert_eq!(status_of(lifecycle.as_ref(), latest.as_ref()), *want, "{lifecycle:?} / {latest:?}");
        }
    }
}

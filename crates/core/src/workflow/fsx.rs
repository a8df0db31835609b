//! `create_file_system` and `delete_file_system`: an FSx for Lustre file system of a cluster,
//! mounted by pods through a static PersistentVolume and claim `fsx-<name>` beside the shared
//! bucket's `s3-shared` (docs/storage-fsx.md).
//!
//! Create steps: `addon:aws-fsx-csi-driver` (the FSx CSI driver's EKS add-on; static
//! provisioning needs no AWS permission — the node's Lustre client mounts the file system — so
//! the add-on gets no IAM identity) and `file_system` (CreateFileSystem in the HyperPod
//! cluster's subnet with its security group, then polled until `AVAILABLE`), then `claim` (the
//! PersistentVolume `fsx-<cluster>-<name>` on `fsx.csi.aws.com` with the file system's id, DNS
//! name and mount name, and the claim `default/fsx-<name>` bound to it).
//!
//! The assessment reads the HyperPod cluster and records the placement in the request: the
//! first instance group's subnet (so the file system is in the nodes' AZ) and its security
//! groups. Its preflight ([`crate::preflight::check_lustre_quotas`]) adds the requested GiB
//! and one file system to what the region's Lustre file systems already use and compares them
//! with the deployment type's FSx quotas (a 422 on `storage_capacity_gib` or
//! `deployment_type` naming the quota code to raise). InstantStart's cluster security group allows all traffic between its members, which
//! covers Lustre's TCP 988 and 1018-1023 (FSx for Lustre user guide, "File system access
//! control with Amazon VPC"); the simulator refuses a group without them.
//!
//! Link (`data_repository`, created file systems only): a `data_repository` step after
//! `file_system` creates one FSx data repository association from a directory of the file
//! system to `s3://<shared bucket>/<prefix>` with the chosen automatic import/export events
//! (`FileSystemTypeVersion` 2.15 is sent on create: DRAs need Lustre 2.12 or later and no
//! `SCRATCH_1`), polled until `AVAILABLE` (`FAILED`: the step fails with FSx's message); the
//! claim waits for it. The association is tagged as the volume's; the delete removes it
//! (`DeleteDataInFileSystem=false`) before the file system. An association InstantStart did
//! not tag is never touched.
//!
//! Attach (`file_system_id` instead of a deployment type and capacity): an existing file system
//! becomes a volume without being created. The assessment describes it and refuses (422, by
//! field) one FSx does not know as Lustre, one not `AVAILABLE`, one outside the cluster's VPC,
//! one that is already a volume of the cluster (created or attached), InstantStart's for
//! another cluster, or attached to another cluster of the region (a file system is a volume of
//! one cluster only; docs/storage-fsx.md says why). Steps: the add-on, then `claim`; the volume is labelled
//! `instantstart.io/fsx-ownership=attached` — the record of ownership the storage list, the
//! workloads and the delete read (no tag is added to the file system). Its security groups are
//! not ours and not checked: they must allow Lustre (TCP 988, 1018-1023) from the nodes.
//!
//! Delete steps: `claim` (the claim and the volume), then `file_system` (DeleteFileSystem, then
//! polled until gone). The assessment finds the file system by its tags (ours, for this
//! cluster, `instantstart:fsx=<name>`), else the attached volume of that name (then only
//! `claim`: the file system is released, never deleted); an unknown name is a not-found error.
//!
//! # Guarantees
//! - Observe before submit: `file_system` looks for a file system of the region tagged for this
//!   cluster and name before CreateFileSystem, and sends the step's persisted token as
//!   `ClientRequestToken`, so a kill -9 between the call and the persisted reference never
//!   creates a second one. A same-named claim without our label stops in `needs_attention`.
//! - A cluster whose delete is running takes no new file system (409).
//! - The rules of [`lustre_rules`] and of a link ([`file_system_path_rule`],
//!   [`bucket_prefix_rule`], [`dra_support_rule`]) are checked before anything is recorded
//!   (400, by field); a cluster without a shared bucket is a 422 on `data_repository`.
//! - `data_repository` observes before it submits: an association of the file system on the
//!   same directory is adopted when it is ours (tags) and stops the step as foreign otherwise;
//!   the step's token is the `ClientRequestToken`, so a kill -9 never creates two.

use super::dependencies::addon_step_key;
use super::steps::{AddonTarget, EnsureAddon};
use super::{cluster_target, decode};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::labels::{LABEL_CLUSTER, LABEL_FSX, LABEL_FSX_OWNERSHIP};
use crate::names;
use crate::operation::{OperationKind, OperationStatus, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::Store;
use crate::validate::{Findings, ValidationError};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// The EKS add-on of the FSx for Lustre CSI driver.
pub const FSX_CSI_ADDON: &str = "aws-fsx-csi-driver";
/// The CSI driver name of FSx for Lustre volumes.
pub const FSX_CSI_DRIVER: &str = "fsx.csi.aws.com";
/// The namespace of the claims.
pub const FSX_NAMESPACE: &str = "default";
/// Expected duration of CreateFileSystem → AVAILABLE at real speed (AWS: 5-10 minutes).
pub const CREATE_SECS: u64 = 600;
/// Expected duration of DeleteFileSystem → gone at real speed.
pub const DELETE_SECS: u64 = 300;

/// `POST /api/clusters/{cluster}/storage/fsx`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFileSystemRequest {
    /// The InstantStart cluster (from the path).
    pub cluster: String,
    /// The volume's name on the cluster (a DNS label of 1-40 characters); pods mount claim
    /// `fsx-<name>`.
    pub name: String,
    /// `SCRATCH_2` (default) or `PERSISTENT_2`.
    #[serde(default)]
    pub deployment_type: LustreDeploymentType,
    /// Storage capacity in GiB: 1200, 2400 or a multiple of 2400 (default 1200).
    #[serde(default = "default_capacity")]
    pub storage_capacity_gib: u32,
    /// MB/s per TiB, `PERSISTENT_2` only: 125, 250, 500 or 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_unit_storage_throughput: Option<u32>,
    /// Attach this existing FSx for Lustre file system (`fs-…`, `AVAILABLE`, in the cluster's
    /// VPC) instead of creating one; the deployment type, capacity and throughput are then the
    /// file system's (omit them). It is released, never deleted, with the volume or the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system_id: Option<String>,
    /// Link a directory of the new file system to a prefix of the cluster's shared bucket (an
    /// FSx data repository association with automatic import and export); not with
    /// `file_system_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_repository: Option<DataRepositoryLink>,
    /// Filled by the assessment: where the file system goes (not accepted from callers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<FsxPlacement>,
    /// Filled by the assessment: the `s3://<shared bucket>/<prefix>` the data repository
    /// association links (not accepted from callers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_repository_path: Option<String>,
}

/// The body of `POST /api/clusters/{cluster}/storage/fsx`: the create request
/// without the cluster (from the path) and the placement (the assessment's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileSystemBody {
    /// The volume's name on the cluster (a DNS label of 1-40 characters); pods mount claim
    /// `fsx-<name>`.
    pub name: String,
    /// `SCRATCH_2` (default) or `PERSISTENT_2`.
    #[serde(default)]
    pub deployment_type: LustreDeploymentType,
    /// Storage capacity in GiB: 1200, 2400 or a multiple of 2400 (default 1200).
    #[serde(default = "default_capacity")]
    pub storage_capacity_gib: u32,
    /// MB/s per TiB, `PERSISTENT_2` only: 125, 250, 500 or 1000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_unit_storage_throughput: Option<u32>,
    /// Attach this existing FSx for Lustre file system (`fs-…`, `AVAILABLE`, in the cluster's
    /// VPC) instead of creating one; the deployment type, capacity and throughput are then the
    /// file system's (omit them). It is released, never deleted, with the volume or the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system_id: Option<String>,
    /// Link a directory of the new file system to a prefix of the cluster's shared bucket (an
    /// FSx data repository association with automatic import and export); not with
    /// `file_system_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_repository: Option<DataRepositoryLink>,
}

impl FileSystemBody {
    /// The create request of this body for `cluster`.
    pub fn request(self, cluster: String) -> CreateFileSystemRequest {
        CreateFileSystemRequest {
            cluster,
            name: self.name,
            deployment_type: self.deployment_type,
            storage_capacity_gib: self.storage_capacity_gib,
            per_unit_storage_throughput: self.per_unit_storage_throughput,
            file_system_id: self.file_system_id,
            data_repository: self.data_repository,
            placement: None,
            data_repository_path: None,
        }
    }
}

fn default_capacity() -> u32 {
    1200
}

/// The link of a created file system to the cluster's shared bucket: one FSx data repository
/// association (CreateDataRepositoryAssociation) from `file_system_path` to
/// `s3://<shared bucket>/<bucket_prefix>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataRepositoryLink {
    /// The prefix in the cluster's shared bucket, such as `datasets/` (no leading `/`, ending
    /// with `/`); empty (the default): the whole bucket.
    #[serde(default)]
    pub bucket_prefix: String,
    /// The file system's directory linked to it, starting with `/` (default `/`); pods see it at
    /// `/fsx/<name><file_system_path>`. FSx allows no two links with overlapping directories.
    #[serde(default = "default_fs_path")]
    pub file_system_path: String,
    /// Changes in the bucket imported automatically (FSx `AutoImportPolicy`): any of `NEW`,
    /// `CHANGED`, `DELETED`; default all three, `[]` for none.
    #[serde(default = "all_events")]
    pub import: Vec<S3Event>,
    /// Changes on the file system exported to the bucket automatically (FSx
    /// `AutoExportPolicy`): any of `NEW`, `CHANGED`, `DELETED`; default all three, `[]` for none.
    #[serde(default = "all_events")]
    pub export: Vec<S3Event>,
    /// Import the metadata of the prefix's objects once the link exists
    /// (`BatchImportMetaDataOnCreate`, default true).
    #[serde(default = "yes")]
    pub batch_import: bool,
}

fn default_fs_path() -> String {
    "/".into()
}

fn all_events() -> Vec<S3Event> {
    S3Event::ALL.to_vec()
}

fn yes() -> bool {
    true
}

/// Expected duration of CreateDataRepositoryAssociation → AVAILABLE at real speed.
pub const DRA_CREATE_SECS: u64 = 300;
/// Expected duration of DeleteDataRepositoryAssociation → gone at real speed.
pub const DRA_DELETE_SECS: u64 = 120;

/// The tags of a data repository association of volume `name` of `cluster`.
pub fn association_tags(cluster: &str, name: &str, operation: &str) -> Tags {
    let mut tags = ownership_tags(cluster, operation);
    tags.insert(TAG_FSX_VOLUME.into(), name.into());
    tags
}

/// Whether `d` is InstantStart's association of volume `name` of `cluster` (by tags).
pub fn is_our_association(d: &DataRepositoryAssociation, cluster: &str, name: &str) -> bool {
    is_owned(&d.tags, cluster) && d.tags.get(TAG_FSX_VOLUME).map(String::as_str) == Some(name)
}

fn check_link(link: &DataRepositoryLink, f: &mut Findings) {
    if let Err(e) = file_system_path_rule(&link.file_system_path) {
        f.push("data_repository.file_system_path", e);
    }
    if let Err(e) = bucket_prefix_rule(&link.bucket_prefix) {
        f.push("data_repository.bucket_prefix", e);
    }
    for (field, events) in [("data_repository.import", &link.import), ("data_repository.export", &link.export)] {
        let unique: std::collections::BTreeSet<_> = events.iter().collect();
        if unique.len() != events.len() {
            f.push(field, "names an event twice");
        }
    }
}

/// The subnet and security groups of a new file system: the HyperPod nodes'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FsxPlacement {
    pub subnet_id: String,
    pub security_group_ids: Vec<String>,
}

/// Who owns a volume's file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FsxOwnership {
    /// InstantStart created it (tagged as the cluster's volume): deleted with the volume and
    /// with the cluster.
    Created,
    /// An existing file system attached as a volume: the volume and claim are removed, the file
    /// system stays.
    Attached,
}

impl FsxOwnership {
    pub fn as_str(self) -> &'static str {
        match self {
            FsxOwnership::Created => "created",
            FsxOwnership::Attached => "attached",
        }
    }
}

/// `DELETE /api/clusters/{cluster}/storage/fsx/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFileSystemRequest {
    pub cluster: String,
    pub name: String,
    /// Filled by the assessment: the file system found for the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system_id: Option<String>,
    /// Filled by the assessment: whether the file system is deleted (`created`) or only
    /// released (`attached`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<FsxOwnership>,
    /// Filled by the assessment: InstantStart's data repository associations of the file
    /// system (tagged as this volume's), deleted before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_repositories: Vec<String>,
}

/// Validation of a file system id (`fs-` and 8 to 17 hex digits, FSx's `FileSystemId`).
pub fn file_system_id_rule(id: &str) -> Result<(), String> {
    let hex = id.strip_prefix("fs-").unwrap_or_default();
    if (8..=17).contains(&hex.len()) && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err("must be an FSx file system id such as fs-0123456789abcdef0".into())
    }
}

/// Target string of a cluster's FSx volume (one running mutation per volume).
pub fn file_system_target(cluster: &str, name: &str) -> String {
    format!("cluster/{cluster}/fsx/{name}")
}

/// The claim pods mount (`fsx-<name>`).
pub fn claim_name(name: &str) -> String {
    format!("fsx-{name}")
}

/// Where pods mount volume `name` (`/fsx/<name>`), beside the bucket's `/s3`.
pub fn mount_path(name: &str) -> String {
    format!("/fsx/{name}")
}

/// The PersistentVolume (cluster-scoped, so named after the cluster too).
pub fn volume_name(cluster: &str, name: &str) -> String {
    format!("fsx-{cluster}-{name}")
}

/// Validation of a volume name: a DNS label of at most 40 characters (the claim adds `fsx-`).
pub fn volume_name_rule(name: &str) -> Result<(), String> {
    names::dns1123_label(name)?;
    if name.len() > 40 {
        return Err("must be at most 40 characters".into());
    }
    Ok(())
}

/// The tags of a file system created for volume `name` of `cluster`.
pub fn file_system_tags(cluster: &str, name: &str, operation: &str) -> Tags {
    let mut tags = ownership_tags(cluster, operation);
    tags.insert(TAG_FSX_VOLUME.into(), name.into());
    tags.insert("Name".into(), format!("{cluster}-{name}"));
    tags
}

/// Whether `fs` is the file system of volume `name` of `cluster` (ours, by tags).
pub fn is_volume(fs: &LustreFileSystem, cluster: &str, name: &str) -> bool {
    is_owned(&fs.tags, cluster) && fs.tags.get(TAG_FSX_VOLUME).map(String::as_str) == Some(name)
}

/// The file system of volume `name` of `cluster` in `region`, if one exists (not deleting).
pub async fn find_volume(
    aws: &dyn AwsCloud,
    region: &str,
    cluster: &str,
    name: &str,
) -> Result<Option<LustreFileSystem>, ProviderError> {
    Ok(aws
        .list_lustre_file_systems(region)
        .await?
        .into_iter()
        .find(|fs| is_volume(fs, cluster, name) && fs.state() != ResourceState::Deleting))
}

/// The file systems of `cluster` in `region` (ours, any volume), for the storage list.
pub async fn cluster_volumes(
    aws: &dyn AwsCloud,
    region: &str,
    cluster: &str,
) -> Result<Vec<LustreFileSystem>, ProviderError> {
    let mut all: Vec<LustreFileSystem> = aws
        .list_lustre_file_systems(region)
        .await?
        .into_iter()
        .filter(|fs| is_owned(&fs.tags, cluster) && fs.tags.contains_key(TAG_FSX_VOLUME))
        .collect();
    all.sort_by(|a, b| a.tags.get(TAG_FSX_VOLUME).cmp(&b.tags.get(TAG_FSX_VOLUME)));
    Ok(all)
}

/// The ids of InstantStart's data repository associations of volume `name`'s file system
/// `file_system_id` (not `DELETING`), sorted.
pub async fn our_associations(
    aws: &dyn AwsCloud,
    region: &str,
    file_system_id: &str,
    cluster: &str,
    name: &str,
) -> Result<Vec<String>, ProviderError> {
    let mut ids: Vec<String> = aws
        .list_data_repository_associations(region, file_system_id)
        .await?
        .into_iter()
        .filter(|d| is_our_association(d, cluster, name) && d.lifecycle != "DELETING")
        .map(|d| d.association_id)
        .collect();
    ids.sort();
    Ok(ids)
}

/// A volume whose file system was attached (not created): found by its PersistentVolume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedVolume {
    pub name: String,
    pub file_system_id: String,
}

/// The attached volumes of `cluster` (our PersistentVolumes labelled `attached`), by name.
pub async fn attached_volumes(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    cluster: &str,
) -> Result<Vec<AttachedVolume>, ProviderError> {
    let params = ListParams {
        api_version: "v1".into(),
        kind: "PersistentVolume".into(),
        namespace: None,
        labels: vec![
            (LABEL_MANAGED_BY.into(), MANAGED_BY.into()),
            (LABEL_CLUSTER.into(), cluster.into()),
            (LABEL_FSX_OWNERSHIP.into(), FsxOwnership::Attached.as_str().into()),
        ],
    };
    let pvs = match kube.list(target, &params).await {
        Err(e) if e.kind == ProviderErrorKind::NotFound => vec![],
        other => other?,
    };
    let mut out: Vec<AttachedVolume> = pvs
        .iter()
        .filter_map(|pv| {
            Some(AttachedVolume {
                name: pv.label(LABEL_FSX)?.to_string(),
                file_system_id: pv.0.pointer("/spec/csi/volumeHandle")?.as_str()?.to_string(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The static PersistentVolume and claim of a file system.
pub fn volume_objects(
    cluster: &str,
    name: &str,
    fs: &LustreFileSystem,
    ownership: FsxOwnership,
) -> (KubeObject, KubeObject) {
    let labels = json!({
        LABEL_MANAGED_BY: MANAGED_BY, LABEL_CLUSTER: cluster, LABEL_FSX: name, LABEL_FSX_OWNERSHIP: ownership.as_str()
    });
    let capacity = format!("{}Gi", fs.storage_capacity_gib);
    let pv = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": { "name": volume_name(cluster, name), "labels": labels },
        "spec": {
            "capacity": { "storage": capacity },
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": { "namespace": FSX_NAMESPACE, "name": claim_name(name) },
            "mountOptions": ["flock"],
            "csi": {
                "driver": FSX_CSI_DRIVER,
                "volumeHandle": fs.id,
                "volumeAttributes": {
                    "dnsname": fs.dns_name.clone().unwrap_or_default(),
                    "mountname": fs.mount_name.clone().unwrap_or_default()
                }
            }
        }
    });
    let pvc = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": { "name": claim_name(name), "namespace": FSX_NAMESPACE, "labels": labels },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume_name(cluster, name),
            "resources": { "requests": { "storage": capacity } }
        }
    });
    (KubeObject(pv), KubeObject(pvc))
}

fn claim_ref(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "PersistentVolumeClaim".into(),
        namespace: Some(FSX_NAMESPACE.into()),
        name: claim_name(name),
    }
}

fn pv_ref(cluster: &str, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "PersistentVolume".into(),
        namespace: None,
        name: volume_name(cluster, name),
    }
}

fn refuse_during_delete(store: &dyn Store, cluster: &str) -> Result<(), EngineError> {
    let deletes = store.latest_operations(&[cluster_target(cluster)], &[OperationKind::DeleteCluster])?;
    if deletes.values().any(|op| op.status == OperationStatus::Running) {
        return Err(EngineError::InvalidState(format!(
            "cluster {cluster} is being deleted; a new file system would outlive it"
        )));
    }
    Ok(())
}

fn events_text(events: &[S3Event]) -> String {
    if events.is_empty() { "none".into() } else { events.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(",") }
}

/// The create-file-system workflow.
pub struct CreateFileSystemWorkflow {
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
}

impl CreateFileSystemWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, kube: Arc<dyn KubeApi>, store: Arc<dyn Store>) -> Self {
        CreateFileSystemWorkflow { aws, kube, store }
    }
}

/// Every rule of a create request, by field.
pub fn check_create(req: &CreateFileSystemRequest) -> Result<(), ValidationError> {
    let mut f = Findings::new();
    if let Err(e) = names::cluster_name(&req.cluster) {
        f.push("cluster", e);
    }
    if let Err(e) = volume_name_rule(&req.name) {
        f.push("name", e);
    }
    match &req.file_system_id {
        Some(id) => {
            if let Err(e) = file_system_id_rule(id) {
                f.push("file_system_id", e);
            }
            let own = "is the attached file system's; omit it with file_system_id";
            if req.deployment_type != LustreDeploymentType::default() {
                f.push("deployment_type", own);
            }
            if req.storage_capacity_gib != default_capacity() {
                f.push("storage_capacity_gib", own);
            }
            if req.per_unit_storage_throughput.is_some() {
                f.push("per_unit_storage_throughput", own);
            }
            if req.data_repository.is_some() {
                f.push(
                    "data_repository",
                    "links only a file system InstantStart creates; an attached file system's associations are its owner's",
                );
            }
        }
        None => {
            for (field, rule) in
                lustre_rules(req.deployment_type, req.storage_capacity_gib, req.per_unit_storage_throughput)
            {
                f.push(field, rule);
            }
            if let Some(link) = &req.data_repository {
                if let Err(e) = dra_support_rule(req.deployment_type.as_str(), Some(LUSTRE_VERSION)) {
                    f.push("deployment_type", e);
                }
                check_link(link, &mut f);
            }
        }
    }
    f.finish()
}

#[async_trait]
impl Workflow for CreateFileSystemWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::CreateFileSystem
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: CreateFileSystemRequest = decode(request)?;
        check_create(&req)?;
        let rec = crate::api::clusters::resolve(self.store.as_ref(), &req.cluster)?.record;
        refuse_during_delete(self.store.as_ref(), &req.cluster)?;
        let addon = addon_step_key(FSX_CSI_ADDON);
        let mut steps = vec![StepSpec {
            key: addon.clone(),
            title: format!("EKS add-on {FSX_CSI_ADDON} (mounts FSx for Lustre volumes)"),
            depends_on: vec![],
            expected_secs: Some(60),
        }];
        // An attached file system exists already: only the add-on and the claim.
        let (claim_title, claim_after) = match &req.file_system_id {
            Some(id) => (format!(" for the attached file system {id}"), vec![addon]),
            None => {
                let throughput = req.per_unit_storage_throughput.map(|t| format!(", {t} MB/s/TiB")).unwrap_or_default();
                steps.push(StepSpec {
                    key: "file_system".into(),
                    title: format!(
                        "FSx for Lustre file system for {} ({}, {} GiB{throughput}, {})",
                        req.name,
                        req.deployment_type.as_str(),
                        req.storage_capacity_gib,
                        rec.region
                    ),
                    depends_on: vec![],
                    expected_secs: Some(CREATE_SECS),
                });
                match &req.data_repository {
                    Some(link) => {
                        steps.push(StepSpec {
                            key: "data_repository".into(),
                            title: format!(
                                "Link {} of the file system to {} (import {}, export {})",
                                link.file_system_path,
                                req.data_repository_path
                                    .clone()
                                    .unwrap_or_else(|| format!("s3://<shared bucket>/{}", link.bucket_prefix)),
                                events_text(&link.import),
                                events_text(&link.export)
                            ),
                            depends_on: vec!["file_system".into()],
                            expected_secs: Some(DRA_CREATE_SECS),
                        });
                        (String::new(), vec![addon, "data_repository".into()])
                    }
                    None => (String::new(), vec![addon, "file_system".into()]),
                }
            }
        };
        steps.push(StepSpec {
            key: "claim".into(),
            title: format!(
                "Static volume {} and claim {FSX_NAMESPACE}/{}{claim_title}",
                volume_name(&req.cluster, &req.name),
                claim_name(&req.name)
            ),
            depends_on: claim_after,
            expected_secs: Some(10),
        });
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: file_system_target(&req.cluster, &req.name), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: CreateFileSystemRequest = decode(&prepared.request)?;
        let rec = crate::api::clusters::resolve(self.store.as_ref(), &req.cluster)?.record;
        let Some(hp) = rec.hyperpod_cluster.clone() else {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!(
                    "cluster {} has no HyperPod cluster; an FSx file system is placed in its nodes' subnet",
                    rec.name
                ),
            )
            .into());
        };
        let described = read(|| self.aws.describe_hyperpod_cluster(&rec.region, &hp)).await?;
        let placement = described.as_ref().and_then(|c| {
            c.instance_groups.iter().find(|g| !g.subnet_ids.is_empty() && !g.security_group_ids.is_empty()).map(|g| {
                FsxPlacement { subnet_id: g.subnet_ids[0].clone(), security_group_ids: g.security_group_ids.clone() }
            })
        });
        let Some(placement) = placement else {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!("HyperPod cluster {hp} has no instance group with a subnet and security group to place the file system in"),
            )
            .into());
        };
        if let Some(p) = &req.placement
            && p != &placement
        {
            return Err(ValidationError::invalid(
                "placement",
                "is chosen by InstantStart (the HyperPod nodes' subnet); omit it",
            )
            .into());
        }
        if let Some(id) = req.file_system_id.clone() {
            self.check_attach(&rec, &req, &id, &placement).await?;
            let reduced = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
            return Ok(Assessment { plan: None, checks: vec![], reduced_request: Some(reduced) });
        }
        let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
        if read(|| attached_volumes(self.kube.as_ref(), &target, &req.cluster))
            .await?
            .iter()
            .any(|v| v.name == req.name)
        {
            return Err(ValidationError::unprocessable(
                "name",
                format!("the cluster already has a volume named {} (an attached file system)", req.name),
            )
            .into());
        }
        if req.data_repository.is_none() && req.data_repository_path.is_some() {
            return Err(ValidationError::invalid(
                "data_repository_path",
                "is chosen by InstantStart (the cluster's shared bucket); omit it",
            )
            .into());
        }
        if let Some(link) = &req.data_repository {
            let Some(bucket) = rec.bucket.clone() else {
                return Err(ValidationError::unprocessable(
                    "data_repository",
                    format!("cluster {} has no shared bucket to link the file system to", rec.name),
                )
                .into());
            };
            let path = data_repository_path(&bucket, &link.bucket_prefix);
            if req.data_repository_path.as_ref().is_some_and(|p| p != &path) {
                return Err(ValidationError::invalid(
                    "data_repository_path",
                    "is chosen by InstantStart (the cluster's shared bucket); omit it",
                )
                .into());
            }
            req.data_repository_path = Some(path);
        }
        req.placement = Some(placement);
        let checks = crate::preflight::check_lustre_quotas(
            self.aws.as_ref(),
            &rec.region,
            req.deployment_type,
            req.storage_capacity_gib,
        )
        .await?;
        let reduced = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: None, checks, reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: CreateFileSystemRequest = decode(request).ok()?;
        let rec = self.store.get_cluster(&req.cluster).ok()??;
        match key {
            k if k == addon_step_key(FSX_CSI_ADDON) => Some(Arc::new(EnsureAddon {
                target: AddonTarget {
                    aws: self.aws.clone(),
                    region: rec.region.clone(),
                    eks_cluster: rec.eks_cluster.clone(),
                    cluster: req.cluster.clone(),
                },
                addon: FSX_CSI_ADDON.into(),
            })),
            "file_system" => Some(Arc::new(CreateFileSystemStep { aws: self.aws.clone(), region: rec.region, req })),
            "data_repository" => Some(Arc::new(CreateDataRepositoryStep {
                aws: self.aws.clone(),
                region: rec.region,
                link: req.data_repository.clone()?,
                data_repository_path: req.data_repository_path.clone()?,
                cluster: req.cluster,
                name: req.name,
            })),
            "claim" => Some(Arc::new(ClaimStep {
                aws: self.aws.clone(),
                kube: self.kube.clone(),
                target: KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone()),
                region: rec.region,
                cluster: req.cluster,
                name: req.name,
                attached: req.file_system_id,
            })),
            _ => None,
        }
    }
}

impl CreateFileSystemWorkflow {
    /// The rules of attaching file system `id` as volume `req.name` (422 by field).
    async fn check_attach(
        &self,
        rec: &crate::store::ClusterRecord,
        req: &CreateFileSystemRequest,
        id: &str,
        placement: &FsxPlacement,
    ) -> Result<(), EngineError> {
        let refuse = |field: &str, rule: String| -> EngineError { ValidationError::unprocessable(field, rule).into() };
        let Some(fs) = read(|| self.aws.describe_lustre_file_system(&rec.region, id)).await? else {
            return Err(refuse("file_system_id", format!("FSx knows no Lustre file system {id} in {}", rec.region)));
        };
        if fs.lifecycle != "AVAILABLE" {
            return Err(refuse(
                "file_system_id",
                format!("file system {id} is {}; only an AVAILABLE file system can be attached", fs.lifecycle),
            ));
        }
        // Every other cluster of the region: a file system is a volume of one cluster only.
        for other in self.store.list_clusters()? {
            if other.name == rec.name || other.region != rec.region {
                continue;
            }
            let t = KubeTarget::new(other.region.clone(), other.eks_cluster.clone());
            match read(|| attached_volumes(self.kube.as_ref(), &t, &other.name)).await {
                Ok(vs) => {
                    if let Some(v) = vs.iter().find(|v| v.file_system_id == id) {
                        return Err(refuse(
                            "file_system_id",
                            format!(
                                "file system {id} is already attached to cluster {} as volume {}; a file system is a volume of one cluster only (release it there first)",
                                other.name, v.name
                            ),
                        ));
                    }
                }
                // A cluster that cannot be read is skipped: sharing an attached file system
                // never deletes it, so a missed share costs no data.
                Err(e) => tracing::warn!(cluster = %other.name, error = %e, "cannot read the attached volumes"),
            }
        }
        let vpc = match &rec.vpc_id {
            Some(v) => Some(v.clone()),
            None => read(|| self.aws.describe_eks_cluster(&rec.region, &rec.eks_cluster)).await?.map(|c| c.vpc_id),
        };
        if let (Some(vpc), Some(fs_vpc)) = (&vpc, &fs.vpc_id)
            && vpc != fs_vpc
        {
            return Err(refuse(
                "file_system_id",
                format!(
                    "file system {id} is in {fs_vpc}, not in the cluster's VPC {vpc} (subnet {}): the nodes could not reach it",
                    placement.subnet_id
                ),
            ));
        }
        if is_owned(&fs.tags, &req.cluster) && fs.tags.contains_key(TAG_FSX_VOLUME) {
            return Err(refuse(
                "file_system_id",
                format!("file system {id} is already volume {} of this cluster", fs.tags[TAG_FSX_VOLUME]),
            ));
        }
        if fs.tags.get(TAG_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY) && fs.tags.contains_key(TAG_FSX_VOLUME) {
            return Err(refuse(
                "file_system_id",
                format!(
                    "file system {id} is InstantStart's volume of cluster {}; it is deleted with that cluster",
                    fs.tags.get(TAG_CLUSTER).cloned().unwrap_or_default()
                ),
            ));
        }
        let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
        let attached = read(|| attached_volumes(self.kube.as_ref(), &target, &req.cluster)).await?;
        if let Some(v) = attached.iter().find(|v| v.file_system_id == id) {
            return Err(refuse("file_system_id", format!("file system {id} is already attached as volume {}", v.name)));
        }
        let created = read(|| find_volume(self.aws.as_ref(), &rec.region, &req.cluster, &req.name)).await?;
        if created.is_some() || attached.iter().any(|v| v.name == req.name) {
            return Err(refuse("name", format!("the cluster already has a volume named {}", req.name)));
        }
        Ok(())
    }
}

/// CreateFileSystem, then waits for `AVAILABLE`.
struct CreateFileSystemStep {
    aws: Arc<dyn AwsCloud>,
    region: String,
    req: CreateFileSystemRequest,
}

fn fs_ref(fs: &LustreFileSystem) -> ResourceRef {
    ResourceRef { kind: "fsx-file-system".into(), id: fs.id.clone(), arn: None }
}

#[async_trait]
impl StepExecutor for CreateFileSystemStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match find_volume(self.aws.as_ref(), &self.region, &self.req.cluster, &self.req.name).await? {
            Some(fs) => Observation::Exists(fs_ref(&fs)),
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let placement = self
            .req
            .placement
            .clone()
            .ok_or_else(|| StepError::Invalid("the request has no placement (it was not assessed)".into()))?;
        let fs = self
            .aws
            .create_lustre_file_system(&CreateLustreFileSystem {
                region: self.region.clone(),
                client_request_token: fsx_client_token(cx.idempotency_token),
                subnet_id: placement.subnet_id,
                security_group_ids: placement.security_group_ids,
                deployment_type: self.req.deployment_type,
                storage_capacity_gib: self.req.storage_capacity_gib,
                per_unit_storage_throughput: self.req.per_unit_storage_throughput,
                file_system_type_version: LUSTRE_VERSION.into(),
                tags: file_system_tags(&self.req.cluster, &self.req.name, &cx.operation_id.0),
            })
            .await?;
        Ok(fs_ref(&fs))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(fs) = self.aws.describe_lustre_file_system(&self.region, &r.id).await? else {
            return Ok(Progress::Failed { reason: format!("file system {} disappeared", r.id) });
        };
        Ok(match fs.state() {
            ResourceState::Active => Progress::Done(json!({
                "file_system_id": fs.id,
                "dns_name": fs.dns_name,
                "mount_name": fs.mount_name,
                "subnet_ids": fs.subnet_ids,
                "file_system_type_version": fs.file_system_type_version,
            })),
            ResourceState::Failed { reason } => {
                Progress::Failed { reason: format!("file system {} {}: {reason}", fs.id, fs.lifecycle) }
            }
            _ => Progress::Waiting { detail: format!("file system {}: {}", fs.id, fs.lifecycle) },
        })
    }
}

fn dra_ref(d: &DataRepositoryAssociation) -> ResourceRef {
    ResourceRef { kind: "fsx-data-repository-association".into(), id: d.association_id.clone(), arn: None }
}

/// The file system of volume `name` for a data repository step: it must exist.
async fn volume_file_system(
    aws: &dyn AwsCloud,
    region: &str,
    cluster: &str,
    name: &str,
) -> Result<LustreFileSystem, StepError> {
    find_volume(aws, region, cluster, name)
        .await?
        .ok_or_else(|| StepError::Invalid(format!("no file system of volume {name} was found")))
}

/// CreateDataRepositoryAssociation of the volume's file system with the shared bucket, then
/// waits for `AVAILABLE`.
struct CreateDataRepositoryStep {
    aws: Arc<dyn AwsCloud>,
    region: String,
    cluster: String,
    name: String,
    link: DataRepositoryLink,
    data_repository_path: String,
}

#[async_trait]
impl StepExecutor for CreateDataRepositoryStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let fs = volume_file_system(self.aws.as_ref(), &self.region, &self.cluster, &self.name).await?;
        let all = self.aws.list_data_repository_associations(&self.region, &fs.id).await?;
        let same = all.iter().find(|d| {
            d.lifecycle != "DELETING" && normalized(&d.file_system_path) == normalized(&self.link.file_system_path)
        });
        Ok(match same {
            Some(d) if is_our_association(d, &self.cluster, &self.name) => Observation::Exists(dra_ref(d)),
            Some(d) => Observation::Foreign {
                reason: format!(
                    "{} of file system {} is already linked to {} by association {}, which is not InstantStart's",
                    d.file_system_path, fs.id, d.data_repository_path, d.association_id
                ),
            },
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let fs = volume_file_system(self.aws.as_ref(), &self.region, &self.cluster, &self.name).await?;
        let existing = self.aws.list_data_repository_associations(&self.region, &fs.id).await?;
        if let Some((field, rule)) =
            dra_rules(&existing, &self.link.file_system_path, &self.data_repository_path).into_iter().next()
        {
            return Err(StepError::Invalid(format!("data_repository.{field}: {rule}")));
        }
        let d = self
            .aws
            .create_data_repository_association(&CreateDataRepositoryAssociation {
                region: self.region.clone(),
                client_request_token: fsx_client_token(cx.idempotency_token),
                file_system_id: fs.id.clone(),
                file_system_path: self.link.file_system_path.clone(),
                data_repository_path: self.data_repository_path.clone(),
                batch_import_metadata: self.link.batch_import,
                import_events: self.link.import.clone(),
                export_events: self.link.export.clone(),
                tags: association_tags(&self.cluster, &self.name, &cx.operation_id.0),
            })
            .await?;
        Ok(dra_ref(&d))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let fs = volume_file_system(self.aws.as_ref(), &self.region, &self.cluster, &self.name).await?;
        let all = self.aws.list_data_repository_associations(&self.region, &fs.id).await?;
        let Some(d) = all.into_iter().find(|d| d.association_id == r.id) else {
            return Ok(Progress::Failed { reason: format!("data repository association {} disappeared", r.id) });
        };
        Ok(match d.lifecycle.as_str() {
            "AVAILABLE" => Progress::Done(json!({
                "association_id": d.association_id,
                "file_system_path": d.file_system_path,
                "data_repository_path": d.data_repository_path,
            })),
            "FAILED" => Progress::Failed {
                reason: format!(
                    "data repository association {} FAILED: {}",
                    d.association_id,
                    d.failure.unwrap_or_else(|| "FSx gave no reason".into())
                ),
            },
            other => Progress::Waiting {
                detail: format!(
                    "data repository association {}: {other}{}",
                    d.association_id,
                    d.failure.map(|m| format!(" ({m})")).unwrap_or_default()
                ),
            },
        })
    }
}

fn normalized(path: &str) -> String {
    format!("{}/", path.trim_end_matches('/'))
}

/// DeleteDataRepositoryAssociation of InstantStart's associations `ids` of a volume's file
/// system (the files stay on the file system), then waits until they are gone. An association
/// not tagged as the volume's is never touched.
pub(crate) struct DeleteDataRepositoriesStep {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub cluster: String,
    pub name: String,
    pub file_system_id: String,
    pub ids: Vec<String>,
}

impl DeleteDataRepositoriesStep {
    fn reference(&self) -> ResourceRef {
        ResourceRef { kind: "fsx-data-repository-associations".into(), id: self.file_system_id.clone(), arn: None }
    }

    async fn ours(&self) -> Result<Vec<DataRepositoryAssociation>, StepError> {
        Ok(self
            .aws
            .list_data_repository_associations(&self.region, &self.file_system_id)
            .await?
            .into_iter()
            .filter(|d| self.ids.contains(&d.association_id) && is_our_association(d, &self.cluster, &self.name))
            .collect())
    }
}

#[async_trait]
impl StepExecutor for DeleteDataRepositoriesStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(if self.ours().await?.iter().all(|d| d.lifecycle == "DELETING") {
            Observation::Exists(self.reference())
        } else {
            Observation::Absent
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let token = fsx_client_token(cx.idempotency_token);
        for d in self.ours().await?.into_iter().filter(|d| d.lifecycle != "DELETING") {
            // One token per association: the step's (at most 40 characters) and its id.
            let t = fsx_client_token(&format!("{}-{}", &token[..token.len().min(40)], d.association_id));
            match self.aws.delete_data_repository_association(&self.region, &d.association_id, &t).await {
                Err(e) if e.kind != ProviderErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(self.reference())
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let left = self.ours().await?;
        if let Some(d) = left.iter().find(|d| d.lifecycle == "FAILED") {
            return Ok(Progress::Failed {
                reason: format!(
                    "data repository association {} failed to delete: {}",
                    d.association_id,
                    d.failure.clone().unwrap_or_else(|| "FSx gave no reason".into())
                ),
            });
        }
        Ok(if left.is_empty() {
            Progress::Done(json!({ "deleted": self.ids }))
        } else {
            Progress::Waiting {
                detail: left
                    .iter()
                    .map(|d| format!("{}: {}", d.association_id, d.lifecycle))
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        })
    }
}

/// Applies the static volume and claim of the file system.
struct ClaimStep {
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    target: KubeTarget,
    region: String,
    cluster: String,
    name: String,
    /// The attached file system's id; `None`: the file system created for the volume.
    attached: Option<String>,
}

fn claim_reference(name: &str) -> ResourceRef {
    ResourceRef { kind: "pvc".into(), id: format!("{FSX_NAMESPACE}/{}", claim_name(name)), arn: None }
}

#[async_trait]
impl StepExecutor for ClaimStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.kube.get(&self.target, &claim_ref(&self.name)).await? {
            Some(o) if o.label(LABEL_MANAGED_BY) == Some(MANAGED_BY) => {
                Observation::Exists(claim_reference(&self.name))
            }
            Some(_) => Observation::Foreign {
                reason: format!(
                    "PersistentVolumeClaim {FSX_NAMESPACE}/{} exists and is not InstantStart's; delete or rename it, then retry this step",
                    claim_name(&self.name)
                ),
            },
            None => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (fs, ownership) = match &self.attached {
            Some(id) => (
                self.aws
                    .describe_lustre_file_system(&self.region, id)
                    .await?
                    .ok_or_else(|| StepError::Invalid(format!("the attached file system {id} no longer exists")))?,
                FsxOwnership::Attached,
            ),
            None => (
                find_volume(self.aws.as_ref(), &self.region, &self.cluster, &self.name)
                    .await?
                    .ok_or_else(|| StepError::Invalid(format!("no file system of volume {} was found", self.name)))?,
                FsxOwnership::Created,
            ),
        };
        let (pv, pvc) = volume_objects(&self.cluster, &self.name, &fs, ownership);
        self.kube.apply(&self.target, &pv).await?;
        self.kube.apply(&self.target, &pvc).await?;
        Ok(claim_reference(&self.name))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(pvc) = self.kube.get(&self.target, &claim_ref(&self.name)).await? else {
            return Ok(Progress::Failed { reason: format!("PersistentVolumeClaim {} disappeared", r.id) });
        };
        let phase = pvc.0.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending");
        Ok(match phase {
            "Bound" => Progress::Done(json!({ "claim": r.id, "volume": volume_name(&self.cluster, &self.name) })),
            other => Progress::Waiting { detail: format!("claim {}: {other}", r.id) },
        })
    }
}

/// The delete-file-system workflow.
pub struct DeleteFileSystemWorkflow {
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
}

impl DeleteFileSystemWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, kube: Arc<dyn KubeApi>, store: Arc<dyn Store>) -> Self {
        DeleteFileSystemWorkflow { aws, kube, store }
    }
}

#[async_trait]
impl Workflow for DeleteFileSystemWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::DeleteFileSystem
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: DeleteFileSystemRequest = decode(request)?;
        let mut f = Findings::new();
        if let Err(e) = volume_name_rule(&req.name) {
            f.push("name", e);
        }
        if let Some(Err(e)) = req.file_system_id.as_deref().map(file_system_id_rule) {
            f.push("file_system_id", e);
        }
        f.finish()?;
        crate::api::clusters::resolve(self.store.as_ref(), &req.cluster)?;
        if req.ownership == Some(FsxOwnership::Attached) {
            let steps = vec![StepSpec {
                key: "claim".into(),
                title: format!(
                    "Release the attached file system {}: delete claim {FSX_NAMESPACE}/{} and volume {} (the file system stays)",
                    req.file_system_id.as_deref().unwrap_or_default(),
                    claim_name(&req.name),
                    volume_name(&req.cluster, &req.name)
                ),
                depends_on: vec![],
                expected_secs: Some(10),
            }];
            let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
            return Ok(Prepared { target: file_system_target(&req.cluster, &req.name), request: canonical, steps });
        }
        let mut steps = vec![StepSpec {
            key: "claim".into(),
            title: format!(
                "Delete claim {FSX_NAMESPACE}/{} and volume {}",
                claim_name(&req.name),
                volume_name(&req.cluster, &req.name)
            ),
            depends_on: vec![],
            expected_secs: Some(10),
        }];
        let mut before_fs = "claim";
        if !req.data_repositories.is_empty() {
            steps.push(StepSpec {
                key: "data_repository".into(),
                title: format!(
                    "Delete data repository association {} (the files stay on the file system)",
                    req.data_repositories.join(", ")
                ),
                depends_on: vec!["claim".into()],
                expected_secs: Some(DRA_DELETE_SECS),
            });
            before_fs = "data_repository";
        }
        steps.push(StepSpec {
            key: "file_system".into(),
            title: format!(
                "Delete FSx for Lustre file system {}{}",
                req.name,
                req.file_system_id.as_ref().map(|id| format!(" ({id})")).unwrap_or_default()
            ),
            depends_on: vec![before_fs.into()],
            expected_secs: Some(DELETE_SECS),
        });
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: file_system_target(&req.cluster, &req.name), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: DeleteFileSystemRequest = decode(&prepared.request)?;
        let rec = crate::api::clusters::resolve(self.store.as_ref(), &req.cluster)?.record;
        let found = read(|| find_volume(self.aws.as_ref(), &rec.region, &req.cluster, &req.name)).await?;
        req.data_repositories.clear();
        if let Some(fs) = found {
            req.data_repositories =
                read(|| our_associations(self.aws.as_ref(), &rec.region, &fs.id, &req.cluster, &req.name)).await?;
            req.file_system_id = Some(fs.id);
            req.ownership = Some(FsxOwnership::Created);
        } else {
            let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
            let attached = read(|| attached_volumes(self.kube.as_ref(), &target, &req.cluster)).await?;
            let Some(v) = attached.into_iter().find(|v| v.name == req.name) else {
                return Err(EngineError::Missing(format!("FSx volume {} of cluster {}", req.name, req.cluster)));
            };
            req.file_system_id = Some(v.file_system_id);
            req.ownership = Some(FsxOwnership::Attached);
        }
        let reduced = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: None, checks: vec![], reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: DeleteFileSystemRequest = decode(request).ok()?;
        let rec = self.store.get_cluster(&req.cluster).ok()??;
        match key {
            "claim" => Some(Arc::new(RemoveClaimStep {
                kube: self.kube.clone(),
                target: KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone()),
                cluster: req.cluster,
                name: req.name,
            })),
            "data_repository" => Some(Arc::new(DeleteDataRepositoriesStep {
                aws: self.aws.clone(),
                region: rec.region,
                cluster: req.cluster,
                name: req.name,
                file_system_id: req.file_system_id.clone()?,
                ids: req.data_repositories,
            })),
            "file_system" => Some(Arc::new(DeleteFileSystemStep {
                aws: self.aws.clone(),
                region: rec.region,
                cluster: req.cluster,
                name: req.name,
                id: req.file_system_id?,
            })),
            _ => None,
        }
    }
}

/// Deletes the claim and the volume (ours only); absent counts as done.
pub(crate) struct RemoveClaimStep {
    pub kube: Arc<dyn KubeApi>,
    pub target: KubeTarget,
    pub cluster: String,
    pub name: String,
}

#[async_trait]
impl StepExecutor for RemoveClaimStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let pvc = self.kube.get(&self.target, &claim_ref(&self.name)).await?;
        let pv = self.kube.get(&self.target, &pv_ref(&self.cluster, &self.name)).await?;
        Ok(match (pvc, pv) {
            (None, None) => Observation::Exists(claim_reference(&self.name)),
            (Some(o), _) if o.label(LABEL_MANAGED_BY) != Some(MANAGED_BY) => Observation::Foreign {
                reason: format!(
                    "PersistentVolumeClaim {FSX_NAMESPACE}/{} is not InstantStart's; it is left alone",
                    claim_name(&self.name)
                ),
            },
            _ => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        for r in [claim_ref(&self.name), pv_ref(&self.cluster, &self.name)] {
            match self.kube.delete(&self.target, &r).await {
                Err(e) if e.kind != ProviderErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(claim_reference(&self.name))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let pvc = self.kube.get(&self.target, &claim_ref(&self.name)).await?;
        let pv = self.kube.get(&self.target, &pv_ref(&self.cluster, &self.name)).await?;
        Ok(match (pvc, pv) {
            (None, None) => Progress::Done(json!({ "deleted": r.id })),
            _ => Progress::Waiting { detail: format!("claim {}: deleting", r.id) },
        })
    }
}

/// DeleteFileSystem of our file system, then waits until it is gone.
pub(crate) struct DeleteFileSystemStep {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub cluster: String,
    pub name: String,
    pub id: String,
}

impl DeleteFileSystemStep {
    fn reference(&self) -> ResourceRef {
        ResourceRef { kind: "fsx-file-system".into(), id: self.id.clone(), arn: None }
    }
}

#[async_trait]
impl StepExecutor for DeleteFileSystemStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.aws.describe_lustre_file_system(&self.region, &self.id).await? {
            None => Observation::Exists(self.reference()),
            Some(fs) if !is_volume(&fs, &self.cluster, &self.name) => Observation::Foreign {
                reason: format!(
                    "file system {} is not tagged as InstantStart's volume {} of cluster {}; it is left alone",
                    self.id, self.name, self.cluster
                ),
            },
            Some(fs) if fs.state() == ResourceState::Deleting => Observation::Exists(self.reference()),
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        match self.aws.delete_lustre_file_system(&self.region, &self.id, &fsx_client_token(cx.idempotency_token)).await
        {
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            other => other?,
        }
        Ok(self.reference())
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.aws.describe_lustre_file_system(&self.region, &r.id).await? {
            None => Progress::Done(json!({ "deleted": r.id })),
            Some(fs) if matches!(fs.state(), ResourceState::Failed { .. }) && fs.lifecycle == "FAILED" => {
                Progress::Failed { reason: format!("file system {} failed to delete: {:?}", fs.id, fs.failure) }
            }
            Some(fs) => Progress::Waiting { detail: format!("file system {}: {}", fs.id, fs.lifecycle) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> Result<(), Vec<String>> {
        let r: CreateFileSystemRequest =
            decode(&v).map_err(|e| e.findings.into_iter().map(|f| f.field).collect::<Vec<_>>())?;
        check_create(&r).map_err(|e| e.findings.into_iter().map(|f| f.field).collect())
    }

    #[test]
    fn create_requests_are_checked_by_field() {
        let table: &[(Value, &[&str])] = &[
            (json!({ "cluster": "demo", "name": "scratch" }), &[]),
            (
                json!({ "cluster": "demo", "name": "ckpt", "deployment_type": "PERSISTENT_2", "storage_capacity_gib": 2400, "per_unit_storage_throughput": 250 }),
                &[],
            ),
            (json!({ "cluster": "demo", "name": "Bad_Name" }), &["name"]),
            (json!({ "cluster": "demo", "name": "x".repeat(41) }), &["name"]),
            (json!({ "cluster": "demo", "name": "a", "storage_capacity_gib": 3600 }), &["storage_capacity_gib"]),
            (
                json!({ "cluster": "demo", "name": "a", "deployment_type": "PERSISTENT_2" }),
                &["per_unit_storage_throughput"],
            ),
            (
                json!({ "cluster": "demo", "name": "a", "per_unit_storage_throughput": 125 }),
                &["per_unit_storage_throughput"],
            ),
            (json!({ "cluster": "demo", "name": "a", "deployment_type": "SCRATCH_1" }), &["deployment_type"]),
            (json!({ "cluster": "demo", "name": "a", "size": 1 }), &["size"]),
            (json!({ "cluster": "demo", "name": "a", "file_system_id": "fs-0123456789abcdef0" }), &[]),
            (json!({ "cluster": "demo", "name": "a", "file_system_id": "fs-01234567" }), &[]),
            (json!({ "cluster": "demo", "name": "a", "file_system_id": "fs-xyz" }), &["file_system_id"]),
            (
                json!({ "cluster": "demo", "name": "a", "file_system_id": "fs-0123456789abcdef0",
                        "deployment_type": "PERSISTENT_2", "storage_capacity_gib": 2400, "per_unit_storage_throughput": 125 }),
                &["deployment_type", "storage_capacity_gib", "per_unit_storage_throughput"],
            ),
            (
                json!({ "cluster": "demo", "name": "a", "file_system_id": "fs-0123456789abcdef0", "storage_capacity_gib": 3600 }),
                &["storage_capacity_gib"],
            ),
            (json!({ "cluster": "demo", "name": "a", "data_repository": {} }), &[]),
            (
                json!({ "cluster": "demo", "name": "a", "data_repository": { "bucket_prefix": "datasets/",
                        "file_system_path": "/datasets", "import": ["NEW"], "export": [] } }),
                &[],
            ),
            (
                json!({ "cluster": "demo", "name": "a", "data_repository": { "bucket_prefix": "/datasets",
                        "file_system_path": "datasets" } }),
                &["data_repository.file_system_path", "data_repository.bucket_prefix"],
            ),
            (
                json!({ "cluster": "demo", "name": "a", "data_repository": { "import": ["NEW", "NEW"] } }),
                &["data_repository.import"],
            ),
            (
                json!({ "cluster": "demo", "name": "a", "data_repository": { "import": ["MOVED"] } }),
                &["data_repository.import[0]"],
            ),
            (json!({ "cluster": "demo", "name": "a", "data_repository": { "path": "/x" } }), &["data_repository.path"]),
            (
                json!({ "cluster": "demo", "name": "a", "file_system_id": "fs-0123456789abcdef0", "data_repository": {} }),
                &["data_repository"],
            ),
        ];
        for (v, want) in table {
            let got = match req(v.clone()) {
                Ok(()) => vec![],
                Err(fields) => fields,
            };
            assert_eq!(&got, want, "{v}");
        }
    }

    #[test]
    fn the_volume_mounts_the_file_system_by_id_dns_and_mount_name() {
        let fs = LustreFileSystem {
            id: "fs-0123456789abcdef0".into(),
            region: "us-east-1".into(),
            lifecycle: "AVAILABLE".into(),
            deployment_type: "SCRATCH_2".into(),
            storage_capacity_gib: 1200,
            per_unit_storage_throughput: None,
            vpc_id: None,
            subnet_ids: vec![],
            dns_name: Some("fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com".into()),
            mount_name: Some("abcdefgh".into()),
            failure: None,
            file_system_type_version: Some(LUSTRE_VERSION.into()),
            tags: Tags::new(),
        };
        let (pv, pvc) = volume_objects("demo", "scratch", &fs, FsxOwnership::Created);
        assert_eq!(pv.0["metadata"]["labels"][LABEL_FSX_OWNERSHIP], "created");
        assert_eq!(pv.0["metadata"]["name"], "fsx-demo-scratch");
        assert_eq!(pv.0["spec"]["csi"]["driver"], "fsx.csi.aws.com");
        assert_eq!(pv.0["spec"]["csi"]["volumeHandle"], "fs-0123456789abcdef0");
        assert_eq!(pv.0["spec"]["csi"]["volumeAttributes"]["mountname"], "abcdefgh");
        assert_eq!(pv.0["spec"]["claimRef"]["name"], "fsx-scratch");
        assert_eq!(pvc.0["spec"]["volumeName"], "fsx-demo-scratch");
        assert_eq!(pvc.0["spec"]["resources"]["requests"]["storage"], "1200Gi");
        assert!(is_volume(
            &LustreFileSystem { tags: file_system_tags("demo", "scratch", "op"), ..fs.clone() },
            "demo",
            "scratch"
        ));
        assert!(!is_volume(
            &LustreFileSystem { tags: file_system_tags("demo", "other", "op"), ..fs },
            "demo",
            "scratch"
        ));
    }
}

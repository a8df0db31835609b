//! Amazon FSx for Lustre: the file systems a cluster's pods mount beside the shared bucket.
//!
//! [`FsxApi`] is part of the [`AwsCloud`](super::AwsCloud) supertrait: CreateFileSystem,
//! DescribeFileSystems and DeleteFileSystem, limited to Lustre. The rules AWS applies to a
//! Lustre create ([`lustre_rules`]) live here, so the workflow's validation and the simulator
//! refuse exactly the same requests (docs/aws-preconditions.md).
//!
//! # Guarantees
//! - [`lustre_rules`] names every broken rule with its field: the deployment type, the storage
//!   capacity steps of that type and the per-unit throughput values of that type, as the FSx API
//!   reference documents them for `CreateFileSystem` (`StorageCapacity`,
//!   `LustreConfiguration.PerUnitStorageThroughput`).
//! - [`LustreQuota`] names the Service Quotas (service code `fsx`) a create counts against, by
//!   their real codes, and which described file systems use them ([`LustreQuota::counts`]).

use super::aws::{Quota, Result};
use super::{ResourceState, Tags};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Tag key naming the InstantStart FSx volume a file system backs (its name on the cluster).
pub const TAG_FSX_VOLUME: &str = "instantstart:fsx";

/// Lustre deployment types InstantStart creates (FSx `LustreDeploymentType`). Both use SSD
/// storage; `SCRATCH_1` and `PERSISTENT_1` are older generations and are not offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum LustreDeploymentType {
    /// Temporary storage, data not replicated; no per-unit throughput setting (200 MB/s/TiB).
    #[default]
    #[serde(rename = "SCRATCH_2")]
    Scratch2,
    /// Longer-term storage, replicated within the AZ; throughput 125, 250, 500 or 1000 MB/s/TiB.
    #[serde(rename = "PERSISTENT_2")]
    Persistent2,
}

impl LustreDeploymentType {
    pub fn as_str(self) -> &'static str {
        match self {
            LustreDeploymentType::Scratch2 => "SCRATCH_2",
            LustreDeploymentType::Persistent2 => "PERSISTENT_2",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [LustreDeploymentType::Scratch2, LustreDeploymentType::Persistent2].into_iter().find(|t| t.as_str() == s)
    }

    /// The `PerUnitStorageThroughput` values (MB/s/TiB) the type accepts; empty: none may be given.
    pub fn throughput_values(self) -> &'static [u32] {
        match self {
            LustreDeploymentType::Scratch2 => &[],
            LustreDeploymentType::Persistent2 => &[125, 250, 500, 1000],
        }
    }
}

/// Largest storage capacity InstantStart asks for, in GiB (the FSx API's bound is 2^31-1; the
/// default quota on Lustre storage per account is far lower).
pub const MAX_LUSTRE_CAPACITY_GIB: u32 = 2_400 * 1_000;

/// Every broken rule of a Lustre create, as `(field, rule)`; empty when AWS accepts it.
///
/// From the FSx API reference, `CreateFileSystem`: "For SCRATCH_2, PERSISTENT_2, and
/// PERSISTENT_1 deployment types using SSD storage type, the valid values are 1200 GiB, 2400
/// GiB, and increments of 2400 GiB"; `PerUnitStorageThroughput` is "Required with PERSISTENT_1
/// and PERSISTENT_2 deployment types"; "Valid values: for PERSISTENT_2 SSD storage: 125, 250,
/// 500, 1000 MB/s/TiB".
pub fn lustre_rules(
    deployment_type: LustreDeploymentType,
    storage_capacity_gib: u32,
    per_unit_storage_throughput: Option<u32>,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let c = storage_capacity_gib;
    if !(c == 1200 || (c >= 2400 && c.is_multiple_of(2400))) || c > MAX_LUSTRE_CAPACITY_GIB {
        out.push((
            "storage_capacity_gib",
            format!(
                "{} takes 1200 GiB, 2400 GiB or a multiple of 2400 GiB (up to {MAX_LUSTRE_CAPACITY_GIB}); {c} is none of them",
                deployment_type.as_str()
            ),
        ));
    }
    let allowed = deployment_type.throughput_values();
    match (per_unit_storage_throughput, allowed.is_empty()) {
        (Some(t), true) => out.push((
            "per_unit_storage_throughput",
            format!("{} has no per-unit throughput setting; omit it (got {t})", deployment_type.as_str()),
        )),
        (None, false) => out.push((
            "per_unit_storage_throughput",
            format!("{} requires one of {allowed:?} MB/s/TiB", deployment_type.as_str()),
        )),
        (Some(t), false) if !allowed.contains(&t) => out.push((
            "per_unit_storage_throughput",
            format!("{} takes one of {allowed:?} MB/s/TiB; {t} is not one of them", deployment_type.as_str()),
        )),
        _ => {}
    }
    out
}

/// The Lustre version InstantStart creates (`FileSystemTypeVersion`): the FSx API reference,
/// `CreateFileSystem`, says "2.15 is supported by all Lustre deployment types and is
/// recommended for all new file systems"; without it FSx picks 2.10 for scratch types, which
/// takes no data repository association.
pub const LUSTRE_VERSION: &str = "2.15";

/// At most this many data repository associations per file system (FSx for Lustre user guide,
/// "Linking your file system to an Amazon S3 bucket").
pub const MAX_DATA_REPOSITORY_ASSOCIATIONS: usize = 8;

/// An S3 event of an automatic import or export policy (FSx `EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub enum S3Event {
    #[serde(rename = "NEW")]
    New,
    #[serde(rename = "CHANGED")]
    Changed,
    #[serde(rename = "DELETED")]
    Deleted,
}

impl S3Event {
    pub const ALL: [S3Event; 3] = [S3Event::New, S3Event::Changed, S3Event::Deleted];

    pub fn as_str(self) -> &'static str {
        match self {
            S3Event::New => "NEW",
            S3Event::Changed => "CHANGED",
            S3Event::Deleted => "DELETED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        S3Event::ALL.into_iter().find(|e| e.as_str() == s)
    }
}

/// Whether a Lustre file system of `deployment_type` and `version` takes data repository
/// associations: "Data repository associations are supported on all FSx for Lustre 2.12 and
/// 2.15 file systems, excluding scratch_1 deployment type" (FSx API reference,
/// `CreateDataRepositoryAssociation`; the user guide's "Linking your file system to an Amazon
/// S3 bucket" adds that 2.10 file systems have none). `PERSISTENT_1` qualifies from 2.12.
pub fn dra_support_rule(deployment_type: &str, version: Option<&str>) -> Result<(), String> {
    if deployment_type == "SCRATCH_1" {
        return Err("SCRATCH_1 file systems take no data repository association".into());
    }
    let v = version.unwrap_or("2.10");
    let parsed: Vec<u32> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
    if parsed < vec![2, 12] {
        return Err(format!("Lustre {v} takes no data repository association (Lustre 2.12 or later is needed)"));
    }
    Ok(())
}

/// Validation of a `FileSystemPath` (the directory linked to the bucket): it starts with `/`,
/// is at most 4096 characters without control line breaks (botocore's `Namespace`), and has
/// no `.`/`..` segments.
pub fn file_system_path_rule(path: &str) -> Result<(), String> {
    if !path.starts_with('/') {
        return Err("must start with / (a directory of the file system, e.g. /datasets)".into());
    }
    if path.len() > 4096 || path.chars().any(|c| matches!(c, '\0' | '\u{85}' | '\u{2028}' | '\u{2029}' | '\r' | '\n')) {
        return Err("must be at most 4096 characters without line breaks".into());
    }
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return Err("must not contain . or .. segments".into());
    }
    Ok(())
}

/// Validation of an S3 prefix in the shared bucket: empty (the whole bucket) or relative
/// (no leading `/`) segments ending in `/`, without `.`/`..` segments or line breaks.
pub fn bucket_prefix_rule(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() {
        return Ok(());
    }
    if prefix.starts_with('/') || !prefix.ends_with('/') {
        return Err(
            "must be empty (the whole bucket) or a prefix such as datasets/ (no leading /, ending with /)".into()
        );
    }
    if prefix.split('/').any(|seg| seg == "." || seg == "..")
        || prefix.chars().any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        return Err("must not contain . or .. segments or control characters".into());
    }
    if prefix.len() > 1024 {
        return Err("must be at most 1024 characters (an S3 key)".into());
    }
    Ok(())
}

/// The `DataRepositoryPath` of `prefix` in `bucket`: `s3://bucket/prefix` (FSx's format
/// `s3://bucket-name/prefix/`).
pub fn data_repository_path(bucket: &str, prefix: &str) -> String {
    format!("s3://{bucket}/{prefix}")
}

fn normalized_dir(p: &str) -> String {
    let t = p.trim_end_matches('/');
    format!("{t}/")
}

/// Whether two linked paths overlap (one is the other or contains it): FSx refuses a second
/// association whose `FileSystemPath`, or whose `DataRepositoryPath`, overlaps one of another
/// association of the file system ("Two data repository associations cannot have overlapping
/// file system paths"; "Each DRA must have a unique FSx for Lustre file system directory and a
/// unique S3 bucket or prefix").
pub fn paths_overlap(a: &str, b: &str) -> bool {
    let (a, b) = (normalized_dir(a), normalized_dir(b));
    a.starts_with(&b) || b.starts_with(&a)
}

/// Every rule a new association of `file_system_path` to `data_repository_path` breaks
/// against the file system's `existing` associations (those not `DELETING`), as
/// `(field, rule)` with the fields of the InstantStart request (`file_system_path`,
/// `bucket_prefix`).
pub fn dra_rules(
    existing: &[DataRepositoryAssociation],
    file_system_path: &str,
    data_repository_path: &str,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let live: Vec<&DataRepositoryAssociation> = existing.iter().filter(|d| d.lifecycle != "DELETING").collect();
    if live.len() >= MAX_DATA_REPOSITORY_ASSOCIATIONS {
        out.push((
            "file_system_path",
            format!(
                "the file system has {} data repository associations already, the most FSx allows ({MAX_DATA_REPOSITORY_ASSOCIATIONS})",
                live.len()
            ),
        ));
    }
    if let Some(d) = live.iter().find(|d| paths_overlap(&d.file_system_path, file_system_path)) {
        out.push((
            "file_system_path",
            format!(
                "{file_system_path} overlaps {} of association {} ({}); each association needs its own directory",
                d.file_system_path, d.association_id, d.data_repository_path
            ),
        ));
    }
    if let Some(d) = live.iter().find(|d| paths_overlap(&d.data_repository_path, data_repository_path)) {
        out.push((
            "bucket_prefix",
            format!(
                "{data_repository_path} overlaps {} of association {}; each association needs its own bucket prefix",
                d.data_repository_path, d.association_id
            ),
        ));
    }
    out
}

/// A data repository association of a Lustre file system (DescribeDataRepositoryAssociations).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DataRepositoryAssociation {
    /// `dra-…`.
    pub association_id: String,
    pub file_system_id: String,
    /// `CREATING`, `AVAILABLE`, `MISCONFIGURED`, `UPDATING`, `DELETING`, `FAILED`.
    pub lifecycle: String,
    pub file_system_path: String,
    /// `s3://bucket/prefix/`.
    pub data_repository_path: String,
    #[serde(default)]
    pub import_events: Vec<S3Event>,
    #[serde(default)]
    pub export_events: Vec<S3Event>,
    /// `FailureDetails.Message` when `lifecycle` is `FAILED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(default)]
    pub tags: Tags,
}

/// CreateDataRepositoryAssociation of a Lustre file system with an S3 prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateDataRepositoryAssociation {
    pub region: String,
    /// `ClientRequestToken`: a retried call returns the same association.
    pub client_request_token: String,
    pub file_system_id: String,
    pub file_system_path: String,
    pub data_repository_path: String,
    /// `BatchImportMetaDataOnCreate`: import the prefix's metadata once the link exists.
    pub batch_import_metadata: bool,
    pub import_events: Vec<S3Event>,
    pub export_events: Vec<S3Event>,
    pub tags: Tags,
}

/// Service Quotas service code of Amazon FSx.
pub const FSX_QUOTA_SERVICE: &str = "fsx";

/// The per-account, per-Region FSx for Lustre quotas a create counts against (Service Quotas,
/// service code `fsx`; "Quotas for Amazon FSx for Lustre" in the FSx for Lustre user guide and
/// "Amazon FSx endpoints and quotas" in the AWS General Reference). The scratch quotas cover
/// every scratch deployment type (`SCRATCH_1` and `SCRATCH_2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LustreQuota {
    /// `Lustre Scratch storage capacity` (GiB of all scratch file systems), default 100800.
    ScratchStorage,
    /// `Lustre Persistent_2 storage capacity` (GiB of all `PERSISTENT_2` file systems), default 100800.
    Persistent2Storage,
    /// `Lustre Scratch file systems` (how many), default 100.
    ScratchFileSystems,
    /// `Lustre Persistent_2 file systems` (how many), default 100.
    Persistent2FileSystems,
}

impl LustreQuota {
    /// Every quota, for listings and tests.
    pub const ALL: [LustreQuota; 4] = [
        LustreQuota::ScratchStorage,
        LustreQuota::Persistent2Storage,
        LustreQuota::ScratchFileSystems,
        LustreQuota::Persistent2FileSystems,
    ];

    /// The storage-capacity quota of `t`.
    pub fn storage(t: LustreDeploymentType) -> Self {
        match t {
            LustreDeploymentType::Scratch2 => LustreQuota::ScratchStorage,
            LustreDeploymentType::Persistent2 => LustreQuota::Persistent2Storage,
        }
    }

    /// The file-system-count quota of `t`.
    pub fn file_systems(t: LustreDeploymentType) -> Self {
        match t {
            LustreDeploymentType::Scratch2 => LustreQuota::ScratchFileSystems,
            LustreDeploymentType::Persistent2 => LustreQuota::Persistent2FileSystems,
        }
    }

    /// The quota's code in Service Quotas.
    pub fn code(self) -> &'static str {
        match self {
            LustreQuota::ScratchStorage => "L-AD2FC696",
            LustreQuota::Persistent2Storage => "L-8F1B9C74",
            LustreQuota::ScratchFileSystems => "L-C48231E5",
            LustreQuota::Persistent2FileSystems => "L-FD6F2F22",
        }
    }

    /// The quota's name in Service Quotas.
    pub fn name(self) -> &'static str {
        match self {
            LustreQuota::ScratchStorage => "Lustre Scratch storage capacity",
            LustreQuota::Persistent2Storage => "Lustre Persistent_2 storage capacity",
            LustreQuota::ScratchFileSystems => "Lustre Scratch file systems",
            LustreQuota::Persistent2FileSystems => "Lustre Persistent_2 file systems",
        }
    }

    /// AWS's default value.
    pub fn default_value(self) -> u32 {
        match self {
            LustreQuota::ScratchStorage | LustreQuota::Persistent2Storage => 100_800,
            LustreQuota::ScratchFileSystems | LustreQuota::Persistent2FileSystems => 100,
        }
    }

    /// Whether the quota counts GiB (else file systems).
    pub fn is_storage(self) -> bool {
        matches!(self, LustreQuota::ScratchStorage | LustreQuota::Persistent2Storage)
    }

    /// Whether a file system of FSx deployment type `deployment_type` counts against the quota.
    pub fn counts(self, deployment_type: &str) -> bool {
        match self {
            LustreQuota::ScratchStorage | LustreQuota::ScratchFileSystems => deployment_type.starts_with("SCRATCH_"),
            LustreQuota::Persistent2Storage | LustreQuota::Persistent2FileSystems => deployment_type == "PERSISTENT_2",
        }
    }

    /// What `fs` uses of the quota (its GiB, or 1 file system; 0 when it does not count).
    pub fn usage_of(self, fs: &LustreFileSystem) -> u64 {
        match (self.counts(&fs.deployment_type), self.is_storage()) {
            (false, _) => 0,
            (true, true) => u64::from(fs.storage_capacity_gib),
            (true, false) => 1,
        }
    }
}

/// An FSx for Lustre file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LustreFileSystem {
    /// `fs-…`.
    pub id: String,
    pub region: String,
    /// FSx's `Lifecycle`: `CREATING`, `AVAILABLE`, `UPDATING`, `DELETING`, `FAILED`,
    /// `MISCONFIGURED`, `MISCONFIGURED_UNAVAILABLE`.
    pub lifecycle: String,
    /// `SCRATCH_2`, `PERSISTENT_2`, … as FSx reports it.
    pub deployment_type: String,
    pub storage_capacity_gib: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_unit_storage_throughput: Option<u32>,
    pub vpc_id: Option<String>,
    pub subnet_ids: Vec<String>,
    /// The DNS name clients mount (`fs-….fsx.<region>.amazonaws.com`).
    pub dns_name: Option<String>,
    /// The Lustre mount name (`MountName`), once the file system is available.
    pub mount_name: Option<String>,
    /// `FailureDetails.Message` when `lifecycle` is `FAILED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The Lustre version (`FileSystemTypeVersion`: `2.10`, `2.12`, `2.15`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_system_type_version: Option<String>,
    #[serde(default)]
    pub tags: Tags,
}

impl LustreFileSystem {
    /// `lifecycle` mapped onto the lifecycle every provider resource shares.
    pub fn state(&self) -> ResourceState {
        match self.lifecycle.as_str() {
            "CREATING" => ResourceState::Creating,
            "AVAILABLE" => ResourceState::Active,
            "DELETING" => ResourceState::Deleting,
            "FAILED" | "MISCONFIGURED_UNAVAILABLE" => {
                ResourceState::Failed { reason: self.failure.clone().unwrap_or_else(|| self.lifecycle.clone()) }
            }
            _ => ResourceState::Updating,
        }
    }
}

/// CreateFileSystem of a Lustre file system in one subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateLustreFileSystem {
    pub region: String,
    /// `ClientRequestToken` (1-63 of `[A-Za-z0-9_.-]`): a retried call returns the same file system.
    pub client_request_token: String,
    pub subnet_id: String,
    pub security_group_ids: Vec<String>,
    pub deployment_type: LustreDeploymentType,
    pub storage_capacity_gib: u32,
    pub per_unit_storage_throughput: Option<u32>,
    /// `FileSystemTypeVersion` ([`LUSTRE_VERSION`]).
    pub file_system_type_version: String,
    pub tags: Tags,
}

#[async_trait]
pub trait FsxApi: Send + Sync {
    /// Every Lustre file system of the region (DescribeFileSystems, all pages; other file
    /// system types are left out).
    async fn list_lustre_file_systems(&self, region: &str) -> Result<Vec<LustreFileSystem>>;
    /// One file system by id; `None` when FSx does not know it (or it is not Lustre).
    async fn describe_lustre_file_system(&self, region: &str, id: &str) -> Result<Option<LustreFileSystem>>;
    async fn create_lustre_file_system(&self, req: &CreateLustreFileSystem) -> Result<LustreFileSystem>;
    /// DeleteFileSystem (without a final backup); a file system already `DELETING` is accepted.
    async fn delete_lustre_file_system(&self, region: &str, id: &str, client_request_token: &str) -> Result<()>;
    /// The value of an FSx for Lustre quota in the region (the applied value, else AWS's
    /// default); `None` when Service Quotas cannot be read (the preflight then warns).
    async fn lustre_quota(&self, region: &str, quota: LustreQuota) -> Result<Option<Quota>>;
    /// The data repository associations of file system `file_system_id`
    /// (DescribeDataRepositoryAssociations filtered by `file-system-id`, all pages); an
    /// unknown file system has none.
    async fn list_data_repository_associations(
        &self,
        region: &str,
        file_system_id: &str,
    ) -> Result<Vec<DataRepositoryAssociation>>;
    async fn create_data_repository_association(
        &self,
        req: &CreateDataRepositoryAssociation,
    ) -> Result<DataRepositoryAssociation>;
    /// DeleteDataRepositoryAssociation, keeping the files on the file system
    /// (`DeleteDataInFileSystem=false`); one already `DELETING` is accepted.
    async fn delete_data_repository_association(
        &self,
        region: &str,
        association_id: &str,
        client_request_token: &str,
    ) -> Result<()>;
}

/// A `ClientRequestToken` FSx accepts (1-63 of `[A-Za-z0-9_.-]`) derived from an engine token.
pub fn fsx_client_token(token: &str) -> String {
    let t: String = token.chars().filter(|c| c.is_ascii_alphanumeric() || "_.-".contains(*c)).take(63).collect();
    if t.is_empty() { "instantstart".into() } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LustreDeploymentType::*;

    #[test]
    fn lustre_rules_follow_the_fsx_api_reference() {
        // (type, capacity, throughput, fields broken)
        let table: &[(LustreDeploymentType, u32, Option<u32>, &[&str])] = &[
            (Scratch2, 1200, None, &[]),
            (Scratch2, 2400, None, &[]),
            (Scratch2, 4800, None, &[]),
            (Scratch2, 3600, None, &["storage_capacity_gib"]),
            (Scratch2, 1000, None, &["storage_capacity_gib"]),
            (Scratch2, 0, None, &["storage_capacity_gib"]),
            (Scratch2, 1200, Some(125), &["per_unit_storage_throughput"]),
            (Persistent2, 1200, Some(125), &[]),
            (Persistent2, 7200, Some(1000), &[]),
            (Persistent2, 1200, None, &["per_unit_storage_throughput"]),
            (Persistent2, 1200, Some(200), &["per_unit_storage_throughput"]),
            (Persistent2, 1300, Some(50), &["storage_capacity_gib", "per_unit_storage_throughput"]),
            (Persistent2, MAX_LUSTRE_CAPACITY_GIB + 2400, Some(250), &["storage_capacity_gib"]),
        ];
        for (t, c, p, want) in table {
            let got: Vec<&str> = lustre_rules(*t, *c, *p).into_iter().map(|(f, _)| f).collect();
            assert_eq!(&got, want, "{t:?} {c} {p:?}");
        }
        let rule = &lustre_rules(Persistent2, 1200, Some(200))[0].1;
        assert!(rule.contains("125") && rule.contains("200"), "{rule}");
    }

    #[test]
    fn lustre_quotas_count_the_file_systems_of_their_deployment_types() {
        let fs = |t: &str, gib: u32| LustreFileSystem {
            id: "fs-0".into(),
            region: "us-east-1".into(),
            lifecycle: "AVAILABLE".into(),
            deployment_type: t.into(),
            storage_capacity_gib: gib,
            per_unit_storage_throughput: None,
            vpc_id: None,
            subnet_ids: vec![],
            dns_name: None,
            mount_name: None,
            failure: None,
            file_system_type_version: None,
            tags: Tags::new(),
        };
        // (quota, deployment type, usage)
        let table: &[(LustreQuota, &str, u64)] = &[
            (LustreQuota::ScratchStorage, "SCRATCH_2", 2400),
            (LustreQuota::ScratchStorage, "SCRATCH_1", 2400),
            (LustreQuota::ScratchStorage, "PERSISTENT_2", 0),
            (LustreQuota::Persistent2Storage, "PERSISTENT_2", 2400),
            (LustreQuota::Persistent2Storage, "PERSISTENT_1", 0),
            (LustreQuota::ScratchFileSystems, "SCRATCH_2", 1),
            (LustreQuota::Persistent2FileSystems, "SCRATCH_2", 0),
            (LustreQuota::Persistent2FileSystems, "PERSISTENT_2", 1),
        ];
        for (q, t, want) in table {
            assert_eq!(q.usage_of(&fs(t, 2400)), *want, "{q:?} {t}");
        }
        assert_eq!(LustreQuota::storage(Persistent2).code(), "L-8F1B9C74");
        assert_eq!(LustreQuota::file_systems(Scratch2).name(), "Lustre Scratch file systems");
        let codes: std::collections::BTreeSet<_> = LustreQuota::ALL.iter().map(|q| q.code()).collect();
        assert_eq!(codes.len(), 4);
    }

    fn dra(id: &str, fs_path: &str, repo: &str, lifecycle: &str) -> DataRepositoryAssociation {
        DataRepositoryAssociation {
            association_id: id.into(),
            file_system_id: "fs-0123456789abcdef0".into(),
            lifecycle: lifecycle.into(),
            file_system_path: fs_path.into(),
            data_repository_path: repo.into(),
            import_events: vec![],
            export_events: vec![],
            failure: None,
            tags: Tags::new(),
        }
    }

    #[test]
    fn data_repository_rules_follow_the_fsx_user_guide() {
        // (deployment type, version, supported)
        let support: &[(&str, Option<&str>, bool)] = &[
            ("SCRATCH_2", Some("2.15"), true),
            ("PERSISTENT_2", Some("2.12"), true),
            ("PERSISTENT_1", Some("2.12"), true),
            ("SCRATCH_2", Some("2.10"), false),
            ("SCRATCH_2", None, false),
            ("SCRATCH_1", Some("2.15"), false),
        ];
        for (t, v, ok) in support {
            assert_eq!(dra_support_rule(t, *v).is_ok(), *ok, "{t} {v:?}");
        }
        // (path, ok)
        for (p, ok) in
            [("/", true), ("/datasets", true), ("/a/b/", true), ("datasets", false), ("/a/../b", false), ("", false)]
        {
            assert_eq!(file_system_path_rule(p).is_ok(), ok, "{p}");
        }
        for (p, ok) in [
            ("", true),
            ("datasets/", true),
            ("a/b/", true),
            ("/datasets/", false),
            ("datasets", false),
            ("a/../", false),
        ] {
            assert_eq!(bucket_prefix_rule(p).is_ok(), ok, "{p}");
        }
        let one = [dra("dra-0123456789abcdef0", "/ns1/", "s3://b/ns1/", "AVAILABLE")];
        // (fs path, repo path, fields broken)
        let table: &[(&str, &str, &[&str])] = &[
            ("/ns2", "s3://b/ns2/", &[]),
            ("/ns1/ns2", "s3://b/other/", &["file_system_path"]),
            ("/", "s3://b/other/", &["file_system_path"]),
            ("/ns10", "s3://b/ns1/deeper/", &["bucket_prefix"]),
            ("/ns1", "s3://b/", &["file_system_path", "bucket_prefix"]),
        ];
        for (fs_path, repo, want) in table {
            let got: Vec<&str> = dra_rules(&one, fs_path, repo).into_iter().map(|(f, _)| f).collect();
            assert_eq!(&got, want, "{fs_path} {repo}");
        }
        let deleting = [dra("dra-0123456789abcdef0", "/ns1/", "s3://b/ns1/", "DELETING")];
        assert!(dra_rules(&deleting, "/ns1", "s3://b/ns1/").is_empty());
        let full: Vec<_> = (0..8)
            .map(|i| dra(&format!("dra-0000000{i}"), &format!("/d{i}"), &format!("s3://b/d{i}/"), "AVAILABLE"))
            .collect();
        let got = dra_rules(&full, "/new", "s3://b/new/");
        assert_eq!(got.len(), 1);
        assert!(got[0].1.contains("(8)"), "{}", got[0].1);
        assert_eq!(data_repository_path("b", "datasets/"), "s3://b/datasets/");
    }

    #[test]
    fn client_tokens_fit_fsx() {
        assert_eq!(fsx_client_token("op-1:file_system"), "op-1file_system");
        assert_eq!(fsx_client_token(&"a".repeat(100)).len(), 63);
        assert_eq!(fsx_client_token("::"), "instantstart");
        assert_eq!(LustreDeploymentType::parse("PERSISTENT_2"), Some(Persistent2));
        assert_eq!(serde_json::to_value(Scratch2).unwrap(), "SCRATCH_2");
    }
}

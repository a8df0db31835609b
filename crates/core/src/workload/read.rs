//! Reading workloads back from a cluster: the caller's reach into a cluster's Kubernetes
//! ([`cluster_kube_as`]), the shared storage, and the JSON helpers the reads share.
//!
//! Training jobs and model downloads are read by [`crate::api::jobs`] and
//! [`crate::api::downloads`] (re-exported here for the callers of this module); everything here
//! is read-only and goes through [`KubeApi`] `list`/`get` (the kube adapter answers lists from
//! its watch cache when enabled).

use super::{StorageEntry, StorageEntryKind, StorageKind, StorageListing, StorageSummary, condition};
use crate::engine::EngineError;
use crate::kube_access::KubeAccess;
use crate::provider::*;
use crate::store::{ClusterRecord, Store};
use crate::workflow::workloads::storage_facts;
use chrono::{DateTime, Utc};
use serde_json::Value;

pub use crate::api::downloads::{download_summary, find_download, list_downloads, list_downloads_as};
pub use crate::api::error::ReadError;
pub use crate::api::jobs::{
    HYPERPOD_JOB, JOB_KINDS, MAX_TAIL, PYTORCH_JOB, RAY_JOB, default_pod, find_job, job_detail, job_logs, job_owns,
    job_phase, job_pods, job_summary, list_jobs, log_pod, not_ready, recovery, runtime_of, workload_pods,
};
pub use crate::api::pods::pod_view;
pub use crate::api::workloads::check_namespace;
pub use crate::labels::{ANNOTATION_DESTINATION, ANNOTATION_MODEL_ID, LABEL_COMPONENT, LABEL_RECIPE};

/// The registered cluster `name` and where its Kubernetes API is
/// ([`crate::api::clusters::resolve`]: 404 when unknown).
pub fn cluster_kube(store: &dyn Store, name: &str) -> Result<(ClusterRecord, KubeTarget), EngineError> {
    let cluster = crate::api::clusters::resolve(store, name)?;
    Ok((cluster.record, cluster.kube))
}

/// [`cluster_kube`] as `access` reaches it: the target impersonates the access's identity, a
/// requested `namespace` outside the access is refused (`403`), and a read without one is
/// confined to the access's namespace when it has exactly one (`None`: every namespace the
/// cluster's RBAC lets the identity list).
pub fn cluster_kube_as(
    store: &dyn Store,
    name: &str,
    access: &KubeAccess,
    namespace: Option<&str>,
) -> Result<(ClusterRecord, KubeTarget, Option<String>), EngineError> {
    let (rec, target) = cluster_kube(store, name)?;
    let namespace = match (namespace, &access.namespaces) {
        (Some(n), _) => {
            access.check_namespace(n).map_err(EngineError::Forbidden)?;
            Some(n.to_string())
        }
        (None, Some(only)) if only.len() == 1 => Some(only[0].clone()),
        (None, _) => None,
    };
    Ok((rec, target.acting_as(access.identity.clone()), namespace))
}

pub(crate) fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

pub(crate) fn u32_at(v: &Value, pointer: &str) -> Option<u32> {
    v.pointer(pointer).and_then(Value::as_u64).map(|n| n.min(u64::from(u32::MAX)) as u32)
}

pub(crate) fn time_at(v: &Value, pointer: &str) -> Option<DateTime<Utc>> {
    str_at(v, pointer).and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc))
}

pub(crate) fn is_true(obj: &Value, name: &str) -> bool {
    condition(obj, name).and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True")
}

pub(crate) fn condition_text(obj: &Value, name: &str) -> Option<String> {
    let c = condition(obj, name)?;
    let reason = c.get("reason").and_then(Value::as_str).unwrap_or("");
    let message = c.get("message").and_then(Value::as_str).unwrap_or("");
    match (reason.is_empty(), message.is_empty()) {
        (true, true) => None,
        (false, true) => Some(reason.to_string()),
        (true, false) => Some(message.to_string()),
        (false, false) => Some(format!("{reason}: {message}")),
    }
}

pub(crate) fn ours(
    namespace: Option<&str>,
    labels: Vec<(String, String)>,
    (api_version, kind): (&str, &str),
) -> ListParams {
    ListParams { api_version: api_version.into(), kind: kind.into(), namespace: namespace.map(str::to_string), labels }
}

/// A `list` where an unknown type (its CRD is not installed) is empty.
pub(crate) async fn list_or_empty(
    kube: &dyn KubeApi,
    target: &KubeTarget,
    p: &ListParams,
) -> Result<Vec<KubeObject>, ProviderError> {
    match kube.list(target, p).await {
        Ok(v) => Ok(v),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(vec![]),
        Err(e) => Err(e),
    }
}

fn entries(listing: ObjectListing) -> Vec<StorageEntry> {
    listing
        .entries
        .into_iter()
        .map(|e| StorageEntry {
            key: e.key,
            kind: match e.kind {
                S3EntryKind::Prefix => StorageEntryKind::Prefix,
                S3EntryKind::Object => StorageEntryKind::Object,
            },
            size_bytes: e.size_bytes,
        })
        .collect()
}

/// The shared storage of a cluster: the claim InstantStart set up and the bucket's top level.
/// Empty for clusters whose storage InstantStart did not set up.
pub async fn storage(
    aws: &dyn AwsCloud,
    kube: &dyn KubeApi,
    rec: &ClusterRecord,
) -> Result<Vec<StorageSummary>, ProviderError> {
    let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
    let mut out = Vec::new();
    if let Some(facts) = storage_facts(rec) {
        out.push(bucket_storage(aws, kube, &target, facts).await?);
    }
    use crate::workflow::fsx::{FsxOwnership, attached_volumes, cluster_volumes};
    let mut volumes: Vec<(String, FsxOwnership, Option<LustreFileSystem>)> =
        cluster_volumes(aws, &rec.region, &rec.name)
            .await?
            .into_iter()
            .map(|fs| (fs.tags.get(TAG_FSX_VOLUME).cloned().unwrap_or_default(), FsxOwnership::Created, Some(fs)))
            .collect();
    for v in attached_volumes(kube, &target, &rec.name).await? {
        let fs = aws.describe_lustre_file_system(&rec.region, &v.file_system_id).await?;
        volumes.push((v.name, FsxOwnership::Attached, fs));
    }
    volumes.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, ownership, fs) in volumes {
        let claim = ObjectRef {
            api_version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            namespace: Some(crate::workflow::fsx::FSX_NAMESPACE.into()),
            name: crate::workflow::fsx::claim_name(&name),
        };
        let status = match kube.get(&target, &claim).await {
            Ok(Some(pvc)) => str_at(&pvc.0, "/status/phase").unwrap_or("Pending").to_string(),
            Ok(None) => "missing".to_string(),
            Err(e) if e.kind == ProviderErrorKind::NotFound => "missing".to_string(),
            Err(e) => return Err(e),
        };
        let data_repositories = match &fs {
            Some(fs) => aws.list_data_repository_associations(&rec.region, &fs.id).await?,
            None => vec![],
        };
        out.push(StorageSummary {
            kind: StorageKind::FsxLustre,
            mount_path: crate::workflow::fsx::mount_path(&name),
            claim: format!("{}/{}", crate::workflow::fsx::FSX_NAMESPACE, claim.name),
            name,
            bucket: String::new(),
            status,
            entries: vec![],
            file_system: fs,
            ownership: Some(ownership),
            data_repositories,
        });
    }
    Ok(out)
}

/// The shared bucket's entry of [`storage`].
async fn bucket_storage(
    aws: &dyn AwsCloud,
    kube: &dyn KubeApi,
    target: &KubeTarget,
    facts: crate::workload::SharedStorageFacts,
) -> Result<StorageSummary, ProviderError> {
    let claim = ObjectRef {
        api_version: "v1".into(),
        kind: "PersistentVolumeClaim".into(),
        namespace: Some(facts.namespace.clone()),
        name: facts.claim.clone(),
    };
    let status = match kube.get(target, &claim).await {
        Ok(Some(pvc)) => str_at(&pvc.0, "/status/phase").unwrap_or("Pending").to_string(),
        Ok(None) => "missing".to_string(),
        Err(e) if e.kind == ProviderErrorKind::NotFound => "missing".to_string(),
        Err(e) => return Err(e),
    };
    let (bucket, entries) = match &facts.bucket {
        Some(b) => (b.clone(), entries(aws.list_objects(b, "", None).await?)),
        None => (String::new(), vec![]),
    };
    Ok(StorageSummary {
        kind: StorageKind::S3,
        name: facts.volume,
        bucket,
        mount_path: facts.mount_path,
        claim: format!("{}/{}", facts.namespace, facts.claim),
        status,
        entries,
        file_system: None,
        ownership: None,
        data_repositories: vec![],
    })
}

/// A listing prefix: empty (the bucket's top level) or a relative key prefix ending with `/`,
/// without empty, `.` or `..` segments or control characters.
pub fn check_prefix(prefix: &str) -> Result<(), crate::validate::ValidationError> {
    let bad = |rule: &str| Err(crate::validate::ValidationError::invalid("prefix", rule));
    if prefix.is_empty() {
        return Ok(());
    }
    if prefix.len() > 1024 {
        return bad("must be at most 1024 characters long");
    }
    if prefix.starts_with('/') {
        return bad("must be relative to the bucket (no leading '/')");
    }
    if !prefix.ends_with('/') {
        return bad("must end with '/' (one level of the bucket is listed, like a folder)");
    }
    if prefix.chars().any(char::is_control) {
        return bad("must not contain control characters");
    }
    if prefix.strip_suffix('/').unwrap_or(prefix).split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return bad("must not contain empty, '.' or '..' segments");
    }
    Ok(())
}

/// The list a storage listing's cursor belongs to (`crate::page::Cursor`).
const STORAGE_OBJECTS_LIST: &str = "storage_objects";

/// One page of one level of the cluster's shared bucket under `prefix` (`""` or ending with
/// `/`), from the start or from `cursor` (a previous page's `next_cursor`).
///
/// # Guarantees
/// - A page holds at most `LIST_OBJECTS_LIMIT` entries; `next_cursor` is present exactly when
///   more follow, so nothing is silently left out.
/// - A cursor is bound to its prefix: one from another prefix or list, or not a cursor at all,
///   is a `400` naming `cursor`.
pub async fn storage_objects(
    aws: &dyn AwsCloud,
    rec: &ClusterRecord,
    prefix: &str,
    cursor: Option<&str>,
) -> Result<StorageListing, ReadError> {
    check_prefix(prefix)?;
    let token = match cursor {
        None => None,
        Some(text) => {
            let c = crate::page::Cursor::decode(STORAGE_OBJECTS_LIST, 2, text)?;
            if c.key()[0] != prefix {
                let rule = format!("belongs to the listing of prefix {:?}, not {prefix:?}", c.key()[0]);
                return Err(crate::validate::ValidationError::invalid("cursor", rule).into());
            }
            Some(c.key()[1].clone())
        }
    };
    let bucket =
        rec.bucket.as_deref().ok_or_else(|| ReadError::Missing(format!("a shared bucket of cluster {}", rec.name)))?;
    let listing = aws.list_objects(bucket, prefix, token.as_deref()).await?;
    let next_cursor = listing
        .next_token
        .clone()
        .map(|t| crate::page::Cursor::new(STORAGE_OBJECTS_LIST, vec![prefix.to_string(), t]).encode());
    Ok(StorageListing { prefix: prefix.to_string(), entries: entries(listing), next_cursor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_prefixes_are_relative_folders() {
        for ok in ["", "models/", "models/Qwen/Qwen3-0.6B/"] {
            assert!(check_prefix(ok).is_ok(), "{ok}");
        }
        for bad in ["/models/", "models", "a//", "../", "a/./", "a\n/"] {
            let e = check_prefix(bad).unwrap_err();
            assert_eq!(e.findings[0].field, "prefix", "{bad}");
        }
    }
}

//! The shared S3 data contract: one bucket, mounted through the Mountpoint for Amazon S3 CSI
//! driver (`s3.csi.aws.com`) at the same path in every pod — download jobs write models
//! there, training jobs read datasets and recipes from it, inference pods load weights from it.
//!
//! [`s3_storage`] builds the statically provisioned PersistentVolume (bound to exactly one
//! claim through `claimRef`) and its PersistentVolumeClaim. Every workload builder then mounts
//! the claim with [`SharedMount::mount_into`], which works on any PodSpec JSON. Paths that
//! users give are relative to the bucket root ([`crate::common::bucket_path`]) and resolved
//! with [`SharedMount::path_of`], so they can never point outside the mount.
//!
//! Mountpoint semantics worth knowing: files are written sequentially and not renamed or
//! modified in place, so writers (the download job) stage locally and copy in.

use crate::common::{
    LABEL_BUCKET, ManifestSet, check, container_path, dns1123_subdomain, object_meta, quantity, standard_labels,
};
use instantstart_core::names;
use instantstart_core::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// CSI driver name of Mountpoint for Amazon S3.
pub const S3_CSI_DRIVER: &str = "s3.csi.aws.com";
/// Claim name used when a request names none.
pub const DEFAULT_CLAIM_NAME: &str = "s3-claim";
/// Mount path used when a request names none.
pub const DEFAULT_MOUNT_PATH: &str = "/s3";
/// Name of the pod volume that carries the shared claim.
pub const SHARED_VOLUME_NAME: &str = "shared-s3";

fn default_claim_name() -> String {
    DEFAULT_CLAIM_NAME.to_string()
}

fn default_mount_path() -> String {
    DEFAULT_MOUNT_PATH.to_string()
}

fn default_true() -> bool {
    true
}

fn default_capacity() -> String {
    "1200Gi".to_string()
}

/// Where workloads find the shared bucket: the claim to mount and the path to mount it at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedMount {
    /// PersistentVolumeClaim of the shared bucket, in the workload's namespace.
    #[serde(default = "default_claim_name")]
    pub claim_name: String,
    /// Mount path in every container.
    #[serde(default = "default_mount_path")]
    pub mount_path: String,
}

impl Default for SharedMount {
    fn default() -> Self {
        SharedMount { claim_name: default_claim_name(), mount_path: default_mount_path() }
    }
}

impl Validate for SharedMount {
    fn validate(&self, f: &mut Findings) {
        check(f, "claim_name", names::dns1123_label(&self.claim_name));
        check(f, "mount_path", container_path(&self.mount_path));
    }
}

/// Whether a pod may write to the shared bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// Why [`SharedMount::mount_into`] could not change a PodSpec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MountError {
    #[error("the pod spec is not a JSON object")]
    NotAnObject,
    #[error("`{0}` of the pod spec is not a list")]
    NotAList(&'static str),
    #[error("the pod spec has no containers")]
    NoContainers,
    #[error("the pod spec already has a volume named `{0}`")]
    VolumeNameTaken(String),
    #[error("container `{container}` already mounts something at `{path}`")]
    MountPathTaken { container: String, path: String },
}

impl SharedMount {
    /// Absolute path, inside every pod, of `bucket_path` (a validated path relative to the
    /// bucket root). `""` is the mount itself.
    pub fn path_of(&self, bucket_path: &str) -> String {
        let rel = bucket_path.trim_matches('/');
        if rel.is_empty() { self.mount_path.clone() } else { format!("{}/{rel}", self.mount_path) }
    }

    /// The pod volume that carries the claim.
    pub fn volume(&self, access: Access) -> Value {
        json!({
            "name": SHARED_VOLUME_NAME,
            "persistentVolumeClaim": { "claimName": self.claim_name, "readOnly": access == Access::ReadOnly },
        })
    }

    /// The container volume mount at [`SharedMount::mount_path`].
    pub fn volume_mount(&self, access: Access) -> Value {
        json!({ "name": SHARED_VOLUME_NAME, "mountPath": self.mount_path, "readOnly": access == Access::ReadOnly })
    }

    /// Adds the shared volume to `pod_spec` (a Kubernetes `PodSpec` as JSON) and mounts it at
    /// the same path in every container and init container. Refuses, without changing
    /// anything, when the volume name or the mount path is already in use.
    pub fn mount_into(&self, pod_spec: &mut Value, access: Access) -> Result<(), MountError> {
        mount_claim(pod_spec, SHARED_VOLUME_NAME, &self.claim_name, &self.mount_path, access)
    }
}

/// Adds pod volume `volume` carrying claim `claim` to `pod_spec` (a Kubernetes `PodSpec` as
/// JSON) and mounts it at `mount_path` in every container and init container. Refuses, without
/// changing anything, when the volume name or the mount path is already in use.
pub fn mount_claim(
    pod_spec: &mut Value,
    volume: &str,
    claim: &str,
    mount_path: &str,
    access: Access,
) -> Result<(), MountError> {
    let read_only = access == Access::ReadOnly;
    let spec = pod_spec.as_object().ok_or(MountError::NotAnObject)?;
    let list = |key: &'static str| -> Result<Vec<Value>, MountError> {
        match spec.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => Ok(a.clone()),
            Some(_) => Err(MountError::NotAList(key)),
        }
    };
    let volumes = list("volumes")?;
    let containers = list("containers")?;
    let init_containers = list("initContainers")?;
    if containers.is_empty() {
        return Err(MountError::NoContainers);
    }
    if volumes.iter().any(|v| v.get("name").and_then(Value::as_str) == Some(volume)) {
        return Err(MountError::VolumeNameTaken(volume.into()));
    }
    let add_mounts = |mut cs: Vec<Value>, key: &'static str| -> Result<Vec<Value>, MountError> {
        for c in &mut cs {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            let c = c.as_object_mut().ok_or(MountError::NotAList(key))?;
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            let mounts = mounts.as_array_mut().ok_or(MountError::NotAList("volumeMounts"))?;
            if mounts.iter().any(|m| m.get("mountPath").and_then(Value::as_str) == Some(mount_path)) {
                return Err(MountError::MountPathTaken { container: name, path: mount_path.to_string() });
            }
            mounts.push(json!({ "name": volume, "mountPath": mount_path, "readOnly": read_only }));
        }
        Ok(cs)
    };
    let containers = add_mounts(containers, "containers")?;
    let init_containers = add_mounts(init_containers, "initContainers")?;
    let mut volumes = volumes;
    volumes.push(json!({ "name": volume, "persistentVolumeClaim": { "claimName": claim, "readOnly": read_only } }));
    let spec = pod_spec.as_object_mut().ok_or(MountError::NotAnObject)?;
    spec.insert("volumes".into(), Value::Array(volumes));
    spec.insert("containers".into(), Value::Array(containers));
    if !init_containers.is_empty() {
        spec.insert("initContainers".into(), Value::Array(init_containers));
    }
    Ok(())
}

/// The shared bucket as a statically provisioned Mountpoint S3 volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct S3StorageParams {
    /// Namespace of the claim (workloads mount it from there).
    pub namespace: String,
    /// PersistentVolumeClaim name, a DNS-1123 label.
    #[serde(default = "default_claim_name")]
    pub claim_name: String,
    /// S3 bucket name.
    pub bucket: String,
    /// Region of the bucket, e.g. `us-east-1`.
    pub region: String,
    /// Mount only this key prefix of the bucket (must end with `/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Mount path inside pods.
    #[serde(default = "default_mount_path")]
    pub mount_path: String,
    /// Owner uid of the files as pods see them (Mountpoint `uid=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// Owner gid of the files as pods see them (Mountpoint `gid=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    /// Allow deleting objects through the mount (`allow-delete`).
    #[serde(default = "default_true")]
    pub allow_delete: bool,
    /// Allow users other than the mounting one to access the mount (`allow-other`), needed
    /// when containers run as non-root.
    #[serde(default = "default_true")]
    pub allow_other: bool,
    /// Nominal capacity; Kubernetes requires one, the driver ignores it.
    #[serde(default = "default_capacity")]
    pub capacity: String,
}

impl Validate for S3StorageParams {
    fn validate(&self, f: &mut Findings) {
        check(f, "namespace", names::dns1123_label(&self.namespace));
        check(f, "claim_name", names::dns1123_label(&self.claim_name));
        check(f, "bucket", names::s3_bucket_name(&self.bucket));
        check(f, "region", names::region(&self.region));
        check(f, "mount_path", container_path(&self.mount_path));
        check(f, "capacity", quantity(&self.capacity));
        if let Some(p) = &self.prefix {
            let ok = p.ends_with('/')
                && crate::common::bucket_path(p).is_ok()
                && !p.chars().any(|c| c.is_whitespace() || c == ',');
            if !ok {
                f.push("prefix", "must be a key prefix ending with '/', without whitespace, ',' or '..' segments");
            }
        }
    }
}

/// The PersistentVolume/PersistentVolumeClaim pair of the shared bucket, and how workloads
/// mount it.
#[derive(Debug, Clone, PartialEq)]
pub struct S3Storage {
    /// Cluster-scoped PersistentVolume name (also the CSI `volumeHandle`, which must be unique).
    pub volume_name: String,
    pub persistent_volume: Value,
    pub persistent_volume_claim: Value,
    /// What to hand to workload builders.
    pub mount: SharedMount,
}

impl ManifestSet for S3Storage {
    fn objects(&self) -> Vec<&Value> {
        vec![&self.persistent_volume, &self.persistent_volume_claim]
    }
}

/// Builds the static PersistentVolume and PersistentVolumeClaim of the shared bucket.
pub fn s3_storage(p: &S3StorageParams) -> Result<S3Storage, ValidationError> {
    p.check()?;
    let volume_name = format!("s3-{}-{}", p.namespace, p.claim_name);
    debug_assert!(dns1123_subdomain(&volume_name).is_ok());
    let mut mount_options = vec![format!("region {}", p.region)];
    if p.allow_delete {
        mount_options.push("allow-delete".into());
    }
    if p.allow_other {
        mount_options.push("allow-other".into());
    }
    if let Some(uid) = p.uid {
        mount_options.push(format!("uid={uid}"));
    }
    if let Some(gid) = p.gid {
        mount_options.push(format!("gid={gid}"));
    }
    if let Some(prefix) = &p.prefix {
        mount_options.push(format!("prefix {prefix}"));
    }
    let mut labels = standard_labels(&p.claim_name, "s3-mountpoint", "shared-storage");
    labels.insert(LABEL_BUCKET.into(), p.bucket.replace('.', "-"));
    let persistent_volume = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": { "name": volume_name, "labels": labels },
        "spec": {
            "capacity": { "storage": p.capacity },
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": { "namespace": p.namespace, "name": p.claim_name },
            "mountOptions": mount_options,
            "csi": {
                "driver": S3_CSI_DRIVER,
                "volumeHandle": volume_name,
                "volumeAttributes": { "bucketName": p.bucket },
            },
        },
    });
    let persistent_volume_claim = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": object_meta(&p.claim_name, &p.namespace, &labels),
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": volume_name,
            "resources": { "requests": { "storage": p.capacity } },
        },
    });
    Ok(S3Storage {
        volume_name,
        persistent_volume,
        persistent_volume_claim,
        mount: SharedMount { claim_name: p.claim_name.clone(), mount_path: p.mount_path.clone() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        json!({
            "initContainers": [{ "name": "init", "image": "busybox:1.36" }],
            "containers": [{ "name": "a", "image": "x:1" }, { "name": "b", "image": "y:1", "volumeMounts": [] }],
        })
    }

    #[test]
    fn mounts_every_container_at_the_same_path() {
        let m = SharedMount::default();
        let mut spec = pod();
        m.mount_into(&mut spec, Access::ReadOnly).unwrap();
        assert_eq!(spec["volumes"][0]["persistentVolumeClaim"]["claimName"], "s3-claim");
        assert_eq!(spec["volumes"][0]["persistentVolumeClaim"]["readOnly"], true);
        for key in ["containers", "initContainers"] {
            for c in spec[key].as_array().unwrap() {
                assert_eq!(c["volumeMounts"][0]["mountPath"], "/s3", "{key}");
                assert_eq!(c["volumeMounts"][0]["name"], SHARED_VOLUME_NAME);
            }
        }
    }

    #[test]
    fn refuses_conflicts_without_changing_the_spec() {
        let m = SharedMount::default();
        let mut spec = pod();
        m.mount_into(&mut spec, Access::ReadWrite).unwrap();
        let before = spec.clone();
        assert_eq!(
            m.mount_into(&mut spec, Access::ReadWrite),
            Err(MountError::VolumeNameTaken(SHARED_VOLUME_NAME.into()))
        );
        assert_eq!(spec, before);

        let mut taken =
            json!({ "containers": [{ "name": "c", "volumeMounts": [{ "name": "x", "mountPath": "/s3" }] }] });
        let err = m.mount_into(&mut taken, Access::ReadWrite).unwrap_err();
        assert_eq!(err, MountError::MountPathTaken { container: "c".into(), path: "/s3".into() });
        assert!(taken.get("volumes").is_none());

        assert_eq!(m.mount_into(&mut json!([]), Access::ReadOnly), Err(MountError::NotAnObject));
        assert_eq!(m.mount_into(&mut json!({}), Access::ReadOnly), Err(MountError::NoContainers));
        assert_eq!(
            m.mount_into(&mut json!({ "containers": {} }), Access::ReadOnly),
            Err(MountError::NotAList("containers"))
        );
    }

    #[test]
    fn paths_resolve_under_the_mount() {
        let m = SharedMount::default();
        assert_eq!(m.path_of("models/Qwen/Qwen3-0.6B"), "/s3/models/Qwen/Qwen3-0.6B");
        assert_eq!(m.path_of("datasets/x/"), "/s3/datasets/x");
        assert_eq!(m.path_of(""), "/s3");
    }
}

//! The volumes a workload's pods mount, read from its objects as the cluster has them: every
//! pod template (a Deployment's, each replica spec of a `HyperPodPyTorchJob`, a `RayJob`'s head
//! and worker groups, a Job's), each claim with where its containers mount it. The job and
//! endpoint views list them ([`crate::workload::JobDetail::volumes`],
//! [`crate::workload::EndpointDetail::volumes`]).
//!
//! # Guarantees
//! - Read from the objects, not from the request: a workload changed by another tool shows what
//!   its pods really mount.
//! - One entry per claim and mount path, sorted by mount path; a claim no container mounts is
//!   not listed (its pods do not see it).

use crate::provider::KubeObject;
use crate::workflow::dependencies::STORAGE_CLAIM;
use crate::workload::StorageKind;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A volume a workload's containers mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MountedVolume {
    /// Where the containers see it.
    pub mount_path: String,
    /// The volume as jobs, downloads and endpoints name it: the FSx for Lustre volume's name
    /// (claim `fsx-<name>`), or `s3-shared` for the shared bucket; another claim by its name.
    pub volume: String,
    /// `s3` or `fsx_lustre`; absent for a claim InstantStart did not make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<StorageKind>,
    /// The PersistentVolumeClaim.
    pub claim: String,
    /// Mounted read-only (the mount's `readOnly`, or the pod's claim's).
    pub read_only: bool,
}

/// The claims the pod templates in `objects` mount, and where.
pub fn mounted_volumes(objects: &[KubeObject]) -> Vec<MountedVolume> {
    let mut out = Vec::new();
    for o in objects {
        pod_specs(&o.0, &mut |spec| mounts_of(spec, &mut out));
    }
    out.sort_by(|a, b| (&a.mount_path, &a.claim).cmp(&(&b.mount_path, &b.claim)));
    out.dedup();
    out
}

/// Calls `f` on every pod spec inside `v` (a map with `containers` and `volumes`).
fn pod_specs(v: &Value, f: &mut dyn FnMut(&Value)) {
    match v {
        Value::Object(m) => {
            if m.get("containers").is_some_and(Value::is_array) {
                f(v);
            }
            m.values().for_each(|x| pod_specs(x, f));
        }
        Value::Array(a) => a.iter().for_each(|x| pod_specs(x, f)),
        _ => {}
    }
}

fn mounts_of(spec: &Value, out: &mut Vec<MountedVolume>) {
    // (volume name, claim, whether the claim is mounted read-only for every container)
    let claims: Vec<(&str, &str, bool)> = spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let claim = v.get("persistentVolumeClaim")?;
            let read_only = claim.get("readOnly").and_then(Value::as_bool).unwrap_or(false);
            Some((v.get("name")?.as_str()?, claim.get("claimName")?.as_str()?, read_only))
        })
        .collect();
    let containers = ["initContainers", "containers"].into_iter().filter_map(|k| spec.get(k)?.as_array()).flatten();
    for c in containers {
        for m in c.get("volumeMounts").and_then(Value::as_array).into_iter().flatten() {
            let (Some(name), Some(path)) =
                (m.get("name").and_then(Value::as_str), m.get("mountPath").and_then(Value::as_str))
            else {
                continue;
            };
            let Some((_, claim, claim_read_only)) = claims.iter().find(|(v, ..)| *v == name) else { continue };
            let (kind, volume) = match claim.strip_prefix("fsx-") {
                _ if *claim == STORAGE_CLAIM => (Some(StorageKind::S3), claim.to_string()),
                Some(v) => (Some(StorageKind::FsxLustre), v.to_string()),
                None => (None, claim.to_string()),
            };
            out.push(MountedVolume {
                mount_path: path.to_string(),
                volume,
                kind,
                claim: claim.to_string(),
                read_only: *claim_read_only || m.get("readOnly").and_then(Value::as_bool).unwrap_or(false),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(volumes: Value, mounts: Value) -> Value {
        json!({"containers": [{"name": "main", "image": "x", "volumeMounts": mounts}], "volumes": volumes})
    }

    #[test]
    fn claims_are_listed_where_the_containers_mount_them() {
        let fsx = json!({"name": "scratch", "persistentVolumeClaim": {"claimName": "fsx-scratch"}});
        let s3 = json!({"name": "shared", "persistentVolumeClaim": {"claimName": "s3-shared"}});
        let other = json!({"name": "data", "persistentVolumeClaim": {"claimName": "team-data", "readOnly": true}});
        let tmp = json!({"name": "shm", "emptyDir": {"medium": "Memory"}});
        let at = |name: &str, path: &str, ro: bool| json!({"name": name, "mountPath": path, "readOnly": ro});
        let v = |path: &str, volume: &str, kind: Option<StorageKind>, claim: &str, read_only: bool| MountedVolume {
            mount_path: path.into(),
            volume: volume.into(),
            kind,
            claim: claim.into(),
            read_only,
        };
        // (objects, volumes listed)
        let table: Vec<(Vec<Value>, Vec<MountedVolume>)> = vec![
            // A HyperPodPyTorchJob: every replica spec's template, the same mount once.
            (
                vec![json!({"kind": "HyperPodPyTorchJob", "spec": {"replicaSpecs": [
                    {"template": {"spec": pod(json!([fsx, s3, tmp]), json!([at("scratch", "/fsx", false), at("shared", "/data", false), at("shm", "/dev/shm", false)]))}},
                    {"template": {"spec": pod(json!([fsx]), json!([at("scratch", "/fsx", false)]))}}
                ]}})],
                vec![
                    v("/data", "s3-shared", Some(StorageKind::S3), "s3-shared", false),
                    v("/fsx", "scratch", Some(StorageKind::FsxLustre), "fsx-scratch", false),
                ],
            ),
            // An endpoint's Deployment beside its Service: read-only model volume, a foreign claim.
            (
                vec![
                    json!({"kind": "Deployment", "spec": {"template": {"spec": pod(json!([fsx, other]), json!([at("scratch", "/models", true), at("data", "/team", false)]))}}}),
                    json!({"kind": "Service", "spec": {"ports": [{"port": 8000}]}}),
                ],
                vec![
                    v("/models", "scratch", Some(StorageKind::FsxLustre), "fsx-scratch", true),
                    v("/team", "team-data", None, "team-data", true),
                ],
            ),
            // A claim no container mounts, and a mount of a volume the pod does not declare.
            (
                vec![
                    json!({"kind": "Job", "spec": {"template": {"spec": pod(json!([s3]), json!([at("scratch", "/fsx", false)]))}}}),
                ],
                vec![],
            ),
            (vec![json!({"kind": "ConfigMap", "data": {"a": "b"}})], vec![]),
        ];
        for (objects, want) in table {
            let objects: Vec<KubeObject> = objects.into_iter().map(KubeObject).collect();
            assert_eq!(mounted_volumes(&objects), want, "{objects:?}");
        }
    }
}

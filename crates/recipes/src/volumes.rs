//! FSx for Lustre volumes a workload mounts by name, beside the shared bucket: `volumes:
//! [{"name": "scratch"}]` mounts the cluster's volume `scratch` (its claim `fsx-scratch`, made by
//! the `create_file_system` operation) at `/fsx/scratch` in every container of every pod.
//!
//! The shape and the paths are checked here ([`check_volumes`]: 400, by field); whether the
//! cluster has the volume, `AVAILABLE` with its claim in the workload's namespace, is checked
//! once the workflow read the cluster's volumes ([`check_volume_facts`]: 422, naming
//! `volumes[i].name`). The claim and the mount path come from `core::workflow::fsx`, the same
//! names the volume's own operation creates.

use crate::common::{check, container_path};
use crate::storage::{Access, MountError, mount_claim};
use instantstart_core::validate::Findings;
use instantstart_core::workflow::fsx;
use instantstart_core::workload::{WorkloadContext, volume_problem};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;

/// At most this many volumes per workload.
pub const MAX_VOLUMES: usize = 8;

/// One FSx for Lustre volume of the cluster, mounted in every container of the workload's pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VolumeMount {
    /// The volume's name on the cluster, as `storage` lists it.
    pub name: String,
    /// Where it is mounted [default: `/fsx/<name>`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
    /// Mount it read-only [default: false].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

impl VolumeMount {
    /// The path the volume is mounted at.
    pub fn path(&self) -> String {
        self.mount_path.clone().unwrap_or_else(|| fsx::mount_path(&self.name))
    }

    /// The pod volume's name (also the claim's: `fsx-<name>`).
    pub fn claim(&self) -> String {
        fsx::claim_name(&self.name)
    }
}

/// The rule of a volume's name (`core::workflow::fsx::volume_name_rule`).
pub fn check_name(name: &str) -> Result<(), String> {
    fsx::volume_name_rule(name)
}

/// The shape rules of `volumes` (at most [`MAX_VOLUMES`], valid and distinct names, valid
/// mount paths distinct from each other and from `taken`: the shared bucket's mount path and
/// any other path the workload's pods mount).
pub fn check_volumes(f: &mut Findings, volumes: &[VolumeMount], taken: &[&str]) {
    if volumes.len() > MAX_VOLUMES {
        f.push("volumes", format!("at most {MAX_VOLUMES} volumes"));
    }
    let mut names = BTreeSet::new();
    let mut paths: BTreeSet<String> = taken.iter().map(|p| p.to_string()).collect();
    for (i, v) in volumes.iter().enumerate() {
        f.at_index("volumes", i, |f| {
            check(f, "name", fsx::volume_name_rule(&v.name));
            if !names.insert(v.name.clone()) {
                f.push("name", format!("volume {} is named twice", v.name));
            }
            let path = v.path();
            check(f, "mount_path", container_path(&path));
            if !paths.insert(path.clone()) {
                f.push("mount_path", format!("{path} is already a mount path of this workload"));
            }
        });
    }
}

/// Whether each volume can be mounted by a workload in `namespace`, once the workflow read the
/// cluster's volumes (unprocessable findings at `volumes[i].name`).
pub fn check_volume_facts(f: &mut Findings, namespace: &str, volumes: &[VolumeMount], cx: Option<&WorkloadContext>) {
    for (i, v) in volumes.iter().enumerate() {
        if let Some(problem) = volume_problem(cx, namespace, &v.name) {
            f.at_index("volumes", i, |f| f.push_unprocessable("name", problem));
        }
    }
}

/// Mounts every volume in `pod_spec` (read-only when the volume says so or `access` is).
pub fn mount_volumes(pod_spec: &mut Value, volumes: &[VolumeMount], access: Access) -> Result<(), MountError> {
    for v in volumes {
        let access = if v.read_only { Access::ReadOnly } else { access };
        mount_claim(pod_spec, &v.claim(), &v.claim(), &v.path(), access)?;
    }
    Ok(())
}

/// The names of `volumes`, for [`instantstart_core::workload::RenderedWorkload::volumes`].
pub fn names(volumes: &[VolumeMount]) -> Vec<String> {
    volumes.iter().map(|v| v.name.clone()).collect()
}

/// Where a path relative to a volume's root (validated like a bucket path) is in the pods.
pub fn path_in(volume: &VolumeMount, rel: &str) -> String {
    let rel = rel.trim_matches('/');
    if rel.is_empty() { volume.path() } else { format!("{}/{rel}", volume.path()) }
}

/// The volume of `volumes` named `name`, or a finding at `field`.
pub fn named<'a>(f: &mut Findings, field: &str, volumes: &'a [VolumeMount], name: &str) -> Option<&'a VolumeMount> {
    let found = volumes.iter().find(|v| v.name == name);
    if found.is_none() {
        f.push(field, format!("must name one of `volumes` (no volume {name} there)"));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::validate::ValidationError;
    use instantstart_core::workload::FileSystemFacts;
    use serde_json::json;

    fn vol(name: &str, path: Option<&str>) -> VolumeMount {
        VolumeMount { name: name.into(), mount_path: path.map(str::to_string), read_only: false }
    }

    fn findings(volumes: &[VolumeMount]) -> Vec<(String, String)> {
        let mut f = Findings::new();
        check_volumes(&mut f, volumes, &["/s3"]);
        match f.finish() {
            Ok(()) => vec![],
            Err(ValidationError { findings, .. }) => findings.into_iter().map(|x| (x.field, x.rule)).collect(),
        }
    }

    #[test]
    fn volume_shapes_are_checked_by_field() {
        // (volumes, the fields with findings)
        let cases: Vec<(Vec<VolumeMount>, Vec<&str>)> = vec![
            (vec![vol("scratch", None)], vec![]),
            (vec![vol("scratch", None), vol("data", Some("/data"))], vec![]),
            (vec![vol("Scratch", None)], vec!["volumes[0].name"]),
            (vec![vol("scratch", None), vol("scratch", Some("/other"))], vec!["volumes[1].name"]),
            (vec![vol("a", Some("/s3"))], vec!["volumes[0].mount_path"]),
            (vec![vol("a", Some("/x")), vol("b", Some("/x"))], vec!["volumes[1].mount_path"]),
            (vec![vol("a", Some("relative"))], vec!["volumes[0].mount_path"]),
            ((0..9).map(|i| vol(&format!("v{i}"), None)).collect(), vec!["volumes"]),
        ];
        for (volumes, want) in cases {
            let got: Vec<String> = findings(&volumes).into_iter().map(|(field, _)| field).collect();
            assert_eq!(got, want, "{volumes:?}");
        }
    }

    #[test]
    fn the_cluster_must_have_the_volume_available_with_its_claim_in_the_namespace() {
        let fact = |name: &str, lifecycle: &str, claim: bool| FileSystemFacts {
            name: name.into(),
            lifecycle: lifecycle.into(),
            namespace: "default".into(),
            claim: claim.then(|| format!("fsx-{name}")),
        };
        let cx = WorkloadContext {
            file_systems: Some(vec![
                fact("ready", "AVAILABLE", true),
                fact("new", "CREATING", false),
                fact("unclaimed", "AVAILABLE", false),
            ]),
            ..WorkloadContext::default()
        };
        // (volume, namespace, a phrase of the problem; None = mountable)
        for (name, namespace, want) in [
            ("ready", "default", None),
            ("ready", "team-a", Some("is in namespace default")),
            ("new", "default", Some("is CREATING")),
            ("unclaimed", "default", Some("has no claim")),
            ("missing", "default", Some("has no FSx volume missing; it has: ready, new, unclaimed")),
        ] {
            let mut f = Findings::new();
            check_volume_facts(&mut f, namespace, &[vol(name, None)], Some(&cx));
            match (f.finish(), want) {
                (Ok(()), None) => {}
                (Err(e), Some(phrase)) => {
                    assert_eq!(e.findings[0].field, "volumes[0].name");
                    assert!(e.findings[0].rule.contains(phrase), "{name}: {}", e.findings[0].rule);
                    assert_eq!(e.kind, instantstart_core::validate::ValidationKind::Unprocessable);
                }
                (got, want) => panic!("{name} in {namespace}: {got:?}, want {want:?}"),
            }
        }
        // Not read yet: nothing to say.
        let mut f = Findings::new();
        check_volume_facts(&mut f, "default", &[vol("missing", None)], None);
        assert!(f.finish().is_ok());
    }

    #[test]
    fn each_volume_is_mounted_in_every_container_with_its_claim() {
        let mut spec = json!({
            "initContainers": [{ "name": "init" }],
            "containers": [{ "name": "main", "volumeMounts": [{ "name": "shared-s3", "mountPath": "/s3" }] }],
        });
        let volumes = [vol("scratch", None), VolumeMount { read_only: true, ..vol("data", Some("/data")) }];
        mount_volumes(&mut spec, &volumes, Access::ReadWrite).unwrap();
        assert_eq!(
            spec["volumes"],
            json!([
                { "name": "fsx-scratch", "persistentVolumeClaim": { "claimName": "fsx-scratch", "readOnly": false } },
                { "name": "fsx-data", "persistentVolumeClaim": { "claimName": "fsx-data", "readOnly": true } },
            ])
        );
        for c in ["initContainers", "containers"] {
            let mounts = &spec[c][0]["volumeMounts"];
            assert!(
                mounts
                    .as_array()
                    .unwrap()
                    .contains(&json!({ "name": "fsx-scratch", "mountPath": "/fsx/scratch", "readOnly": false })),
                "{c}: {mounts}"
            );
            assert!(
                mounts
                    .as_array()
                    .unwrap()
                    .contains(&json!({ "name": "fsx-data", "mountPath": "/data", "readOnly": true })),
                "{c}: {mounts}"
            );
        }
        // An inference pod reads only: every volume read-only.
        let mut spec = json!({ "containers": [{ "name": "server" }] });
        mount_volumes(&mut spec, &[vol("scratch", None)], Access::ReadOnly).unwrap();
        assert_eq!(spec["volumes"][0]["persistentVolumeClaim"]["readOnly"], true);
        // A path already mounted is refused, not overwritten.
        let mut spec =
            json!({ "containers": [{ "name": "m", "volumeMounts": [{ "name": "x", "mountPath": "/fsx/scratch" }] }] });
        assert!(matches!(
            mount_volumes(&mut spec, &[vol("scratch", None)], Access::ReadWrite),
            Err(MountError::MountPathTaken { .. })
        ));
    }
}

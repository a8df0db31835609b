//! The lifecycle script every HyperPod instance group runs, and where it lives in S3.
//!
//! InstantStart ships its own small `on_create.sh` for EKS-orchestrated nodes
//! (`crates/core/assets/lifecycle/on_create.sh`, embedded with `include_str!`; see
//! `docs/lifecycle-scripts.md`). The create pipeline's `lifecycle_script` step uploads it to the
//! cluster's bucket under a **content-addressed** key, [`script_key`] =
//! `lifecycle/<first 16 hex digits of its SHA-256>/on_create.sh`, and every group created
//! without a user-named script gets [`default_lifecycle`] (`SourceS3Uri` =
//! `s3://<bucket>/lifecycle/<digest>`, `OnCreate` = `on_create.sh`).
//!
//! Why always send one: the SDK model (aws-sdk-sagemaker 1.248) marks `LifeCycleConfig` and
//! `OnCreate` optional (for Slurm's AMI-based configuration), but the developer guide's
//! "Common validation errors" table (`smcluster-getting-started-slurm-cli`) says
//! "LifeCycleConfig is required for instance group…" applies to EKS clusters ("Optional node
//! lifecycle configuration is not supported"), and every EKS guide uploads an `on_create.sh`.
//! A working script is the choice that is right under both readings.
//!
//! # Guarantees
//! - The key is a pure function of the embedded bytes: the same binary always names the same
//!   object, a changed script is a new key, so an object under a key never changes and a
//!   `HeadObject` hit is proof the upload happened.
//! - [`readable_by_execution_role`] is the one rule for "can HyperPod's execution role read
//!   this script": a `sagemaker-*` bucket (the managed `AmazonSageMakerClusterInstanceRolePolicy`)
//!   or the cluster's own bucket (our inline policy).

use crate::spec::LifecycleScript;
use sha2::{Digest, Sha256};

/// The script, byte for byte as uploaded.
pub const ON_CREATE_SH: &str = include_str!("../assets/lifecycle/on_create.sh");

/// File name of the entrypoint (`LifeCycleConfig.OnCreate`).
pub const ON_CREATE: &str = "on_create.sh";

/// Top-level prefix of the scripts in the cluster bucket.
pub const LIFECYCLE_PREFIX: &str = "lifecycle";

/// Content type the script is uploaded with.
pub const CONTENT_TYPE: &str = "text/x-shellscript";

/// Hex SHA-256 of [`ON_CREATE_SH`].
pub fn script_sha256() -> String {
    hex(&Sha256::digest(ON_CREATE_SH.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The prefix holding this version of the script: `lifecycle/<16 hex digits>`.
pub fn script_prefix() -> String {
    format!("{LIFECYCLE_PREFIX}/{}", &script_sha256()[..16])
}

/// The object key of this version of the script.
pub fn script_key() -> String {
    format!("{}/{ON_CREATE}", script_prefix())
}

/// The lifecycle configuration of a group using InstantStart's script in `bucket`.
pub fn default_lifecycle(bucket: &str) -> LifecycleScript {
    LifecycleScript { source_s3_uri: format!("s3://{bucket}/{}", script_prefix()), on_create: ON_CREATE.to_string() }
}

/// `(bucket, key)` of the entrypoint a lifecycle configuration names, if its URI parses.
pub fn script_object(l: &LifecycleScript) -> Option<(String, String)> {
    let rest = l.source_s3_uri.strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return None;
    }
    let prefix = prefix.trim_end_matches('/');
    let file = l.on_create.trim_start_matches('/');
    let key = if prefix.is_empty() { file.to_string() } else { format!("{prefix}/{file}") };
    Some((bucket.to_string(), key))
}

/// Whether HyperPod's execution role, as InstantStart creates it, can read scripts in
/// `bucket`: `sagemaker-*` buckets through the managed policy, the cluster bucket through the
/// role's inline policy. Anything else fails at node boot.
pub fn readable_by_execution_role(bucket: &str, cluster_bucket: Option<&str>) -> bool {
    bucket.starts_with("sagemaker-") || cluster_bucket == Some(bucket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_content_addressed() {
        let key = script_key();
        let digest = script_sha256();
        assert_eq!(digest.len(), 64);
        assert_eq!(key, format!("lifecycle/{}/on_create.sh", &digest[..16]));
        let l = default_lifecycle("is-demo-123456789012-ab12");
        assert_eq!(l.on_create, "on_create.sh");
        assert_eq!(script_object(&l), Some(("is-demo-123456789012-ab12".to_string(), key)));
    }

    /// Data-driven: (source URI, on_create, expected bucket/key).
    #[test]
    fn script_objects() {
        #[allow(clippy::type_complexity)] // a table test: one tuple per row
        let cases: &[(&str, &str, Option<(&str, &str)>)] = &[
            ("s3://b/scripts", "on_create.sh", Some(("b", "scripts/on_create.sh"))),
            ("s3://b/scripts/", "on_create.sh", Some(("b", "scripts/on_create.sh"))),
            ("s3://b", "on_create.sh", Some(("b", "on_create.sh"))),
            ("s3://b/a/b/", "/x.sh", Some(("b", "a/b/x.sh"))),
            ("https://b/x", "on_create.sh", None),
            ("s3:///x", "on_create.sh", None),
        ];
        for (uri, file, want) in cases {
            let l = LifecycleScript { source_s3_uri: uri.to_string(), on_create: file.to_string() };
            let got = script_object(&l);
            assert_eq!(got, want.map(|(b, k)| (b.to_string(), k.to_string())), "{uri} {file}");
        }
    }

    #[test]
    fn who_can_read_a_script() {
        assert!(readable_by_execution_role("sagemaker-scripts", None));
        assert!(readable_by_execution_role("is-demo-1-ab", Some("is-demo-1-ab")));
        assert!(!readable_by_execution_role("my-scripts", Some("is-demo-1-ab")));
        assert!(!readable_by_execution_role("is-other", None));
    }

    #[test]
    fn the_script_is_a_bash_script_that_changes_nothing() {
        assert!(ON_CREATE_SH.starts_with("#!/bin/bash\n"));
        assert!(ON_CREATE_SH.contains("set -euo pipefail"));
        for forbidden in ["curl ", "wget ", "systemctl ", "rm -", "yum ", "dnf ", "apt"] {
            assert!(!ON_CREATE_SH.contains(forbidden), "the script must stay minimal: {forbidden}");
        }
    }

    /// `shellcheck` (when it is on PATH) finds nothing in the script.
    #[test]
    fn shellcheck_is_clean() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/lifecycle/on_create.sh");
        match std::process::Command::new("shellcheck").args(["--shell=bash", "--severity=style", path]).output() {
            Ok(out) => assert!(
                out.status.success(),
                "shellcheck: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("shellcheck is not on PATH; skipped (apt-get install -y shellcheck)");
            }
            Err(e) => panic!("could not run shellcheck: {e}"),
        }
    }
}

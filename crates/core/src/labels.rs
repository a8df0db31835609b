//! Every Kubernetes label and annotation InstantStart owns, in one place: what it marks, who
//! writes it and who reads it. The renderers (`instantstart-recipes`) write them, the workflows
//! and `api` reads select and interpret them; both import them from here (`recipes` re-exports
//! them), so a key is spelled once.
//!
//! AWS resource tags (`instantstart:managed-by`, `instantstart:cluster`, …) are not Kubernetes
//! labels: they live with the provider traits ([`crate::provider::TAG_MANAGED_BY`]).
//!
//! # Guarantees
//!
//! - Every object and pod InstantStart creates carries [`LABEL_MANAGED_BY`]`=`[`MANAGED_BY`];
//!   an object without it is foreign: listed, never changed ([`crate::workload::is_ours`]).
//! - The keys are stable: they are on objects in live clusters, so renaming one orphans them.

/// `app.kubernetes.io/managed-by`: set to [`MANAGED_BY`] on every object and pod we create.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The value of [`LABEL_MANAGED_BY`] on what InstantStart owns.
pub const MANAGED_BY: &str = "instantstart";
/// `app.kubernetes.io/name`: what runs (`vllm`, `sglang`, `hyperpod-pytorch-job`, …).
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/instance`: the workload an object belongs to (its name); the stable part
/// of selectors.
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// `app.kubernetes.io/component`: `model-download`, `training`, `inference`, `router`, …
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
/// `instantstart.io/pool`: the model pool a warm inference worker currently serves. It is never
/// part of a Deployment selector, so relabelling a pod moves it between pool Services without
/// its ReplicaSet replacing it.
pub const LABEL_POOL: &str = "instantstart.io/pool";
/// `instantstart.io/route`: the route of an endpoint's objects (`self_managed` or `managed`).
pub const LABEL_ROUTE: &str = "instantstart.io/route";
/// `instantstart.io/recipe`: the recipe a training job was rendered from.
pub const LABEL_RECIPE: &str = "instantstart.io/recipe";
/// `instantstart.io/cluster`: the InstantStart cluster a cluster-level object belongs to
/// (Karpenter's node pool, feature and storage objects).
pub const LABEL_CLUSTER: &str = "instantstart.io/cluster";
/// `instantstart.io/fsx`: the FSx for Lustre volume a persistent volume (claim) mounts.
pub const LABEL_FSX: &str = "instantstart.io/fsx";
/// `instantstart.io/fsx-ownership`: `created` (InstantStart created the volume's file system
/// and deletes it with the volume) or `attached` (an existing file system: only released).
pub const LABEL_FSX_OWNERSHIP: &str = "instantstart.io/fsx-ownership";
/// `instantstart.io/bucket`: the S3 bucket (dots as dashes) a shared-storage volume mounts.
pub const LABEL_BUCKET: &str = "instantstart.io/bucket";
/// `instantstart.io/service-shape`: how an endpoint's Service is exposed.
pub const LABEL_SERVICE_SHAPE: &str = "instantstart.io/service-shape";

/// `instantstart.io/operation`: the operation that last applied an object
/// (observe-before-submit).
pub const ANNOTATION_OPERATION: &str = "instantstart.io/operation";
/// `instantstart.io/endpoint-request`: on an endpoint's primary object, the request (JSON) it was
/// deployed with or last updated to, so the cluster itself says what the endpoint is.
pub const ANNOTATION_ENDPOINT_REQUEST: &str = "instantstart.io/endpoint-request";
/// `instantstart.io/model-id`: a download Job's Hugging Face model id, verbatim (ids do not fit
/// label values).
pub const ANNOTATION_MODEL_ID: &str = "instantstart.io/model-id";
/// `instantstart.io/destination`: a download Job's destination in the shared bucket (or in the
/// volume of [`ANNOTATION_DESTINATION_VOLUME`]).
pub const ANNOTATION_DESTINATION: &str = "instantstart.io/destination";
/// `instantstart.io/destination-volume`: the FSx volume a download Job writes into instead of
/// the shared bucket.
pub const ANNOTATION_DESTINATION_VOLUME: &str = "instantstart.io/destination-volume";
/// `instantstart.io/autoscaling-groups`: on Karpenter's node class, `all` (every instance group,
/// groups added later included) or `named`.
pub const ANNOTATION_GROUPS: &str = "instantstart.io/autoscaling-groups";

/// The `(label, value)` pairs selecting what InstantStart owns.
pub fn managed() -> Vec<(String, String)> {
    vec![(LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string())]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key is a valid Kubernetes label or annotation key (`prefix/name`, name at most 63
    /// characters) and no two constants share a key.
    #[test]
    fn keys_are_valid_and_distinct() {
        let keys = [
            LABEL_MANAGED_BY,
            LABEL_NAME,
            LABEL_INSTANCE,
            LABEL_COMPONENT,
            LABEL_POOL,
            LABEL_ROUTE,
            LABEL_RECIPE,
            LABEL_CLUSTER,
            LABEL_FSX,
            LABEL_BUCKET,
            LABEL_SERVICE_SHAPE,
            ANNOTATION_OPERATION,
            ANNOTATION_ENDPOINT_REQUEST,
            ANNOTATION_MODEL_ID,
            ANNOTATION_DESTINATION,
            ANNOTATION_DESTINATION_VOLUME,
            ANNOTATION_GROUPS,
        ];
        for k in keys {
            let (prefix, name) = k.split_once('/').unwrap_or_else(|| panic!("{k}: no prefix"));
            assert!(["app.kubernetes.io", "instantstart.io"].contains(&prefix), "{k}");
            assert!(!name.is_empty() && name.len() <= 63, "{k}");
            assert!(crate::names::dns1123_label(name).is_ok(), "{k}");
        }
        let mut sorted = keys.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len());
    }
}

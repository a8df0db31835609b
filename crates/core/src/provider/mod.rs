//! Provider traits: the only way the control plane touches the outside world.
//!
//! The AWS side ([`aws`]) and the Kubernetes side ([`kube`]) are drawn at the domain level
//! (a VPC network, an EKS cluster, a HyperPod cluster), not at SDK shape. `instantstart-aws` and
//! `instantstart-k8s` implement them for real; `instantstart-sim` implements them as a simulated
//! world. [`mlflow`] (tracking servers, runs, metric histories), [`governance`] (task
//! governance: scheduler config, compute quotas), [`fsx`] (FSx for Lustre file systems) and
//! [`amp`] (Amazon Managed Service for Prometheus workspaces) are part of the AWS side; [`metrics`] is the source of GPU and training metrics over time;
//! [`software_update`] holds the shapes of HyperPod's platform software updates.
//! Errors are classified by what the caller should do ([`ProviderErrorKind`]).

pub mod amp;
pub mod aws;
pub mod capacity;
pub mod fsx;
pub mod governance;
pub mod helm;
pub mod hyperpod_reads;
pub mod kube;
pub mod metrics;
pub mod mlflow;
pub mod software_update;

pub use amp::*;
pub use aws::*;
pub use capacity::*;
pub use fsx::*;
pub use governance::*;
pub use helm::*;
pub use hyperpod_reads::*;
pub use kube::*;
pub use metrics::*;
pub use mlflow::*;
pub use software_update::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Tag key marking resources InstantStart created. "Already exists" counts as success only
/// when this tag (and [`TAG_CLUSTER`]) match.
pub const TAG_MANAGED_BY: &str = "instantstart:managed-by";
/// Value of [`TAG_MANAGED_BY`].
pub const MANAGED_BY: &str = "instantstart";
/// Tag key naming the InstantStart cluster a resource belongs to.
pub const TAG_CLUSTER: &str = "instantstart:cluster";
/// Tag key naming the operation that created a resource.
pub const TAG_OPERATION: &str = "instantstart:operation";
/// Tag key an EKS cluster's owner sets (value [`IMPORT_ALLOWED`]) to let InstantStart import
/// it: only then may the control plane give itself an access entry there. The deployment
/// template's `EksImportAccessEntry` statement requires it (`aws:ResourceTag`), and the control
/// plane may not set it (`eks:TagResource` is limited to the ownership tag keys), so IAM, not our
/// code, decides which clusters the control plane can make itself an administrator of.
pub const TAG_IMPORT: &str = "instantstart:import";
/// Value of [`TAG_IMPORT`] that allows the import.
pub const IMPORT_ALLOWED: &str = "allowed";
/// Kubernetes label equivalent of [`TAG_MANAGED_BY`].
pub use crate::labels::LABEL_MANAGED_BY;

/// AWS resource tags.
pub type Tags = BTreeMap<String, String>;

/// The ownership tags of a resource created for `cluster` by `operation`.
pub fn ownership_tags(cluster: &str, operation: &str) -> Tags {
    Tags::from([
        (TAG_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (TAG_CLUSTER.to_string(), cluster.to_string()),
        (TAG_OPERATION.to_string(), operation.to_string()),
    ])
}

/// Whether `tags` say the resource is ours and belongs to `cluster`.
pub fn is_owned(tags: &Tags, cluster: &str) -> bool {
    tags.get(TAG_MANAGED_BY).map(String::as_str) == Some(MANAGED_BY)
        && tags.get(TAG_CLUSTER).map(String::as_str) == Some(cluster)
}

/// What went wrong with a provider call, classified by what the caller should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderErrorKind {
    /// Request rate exceeded; retry with backoff.
    Throttled,
    /// Temporary server-side or network problem (5xx, timeout, eventual consistency); retry.
    Transient,
    /// The resource does not exist.
    NotFound,
    /// A resource with this name already exists.
    AlreadyExists,
    /// The resource is busy with another change (e.g. SageMaker ConflictException); retryable.
    Conflict,
    /// The request was rejected as invalid.
    InvalidRequest,
    /// Credentials lack permission.
    AccessDenied,
    /// A service quota is exhausted.
    QuotaExceeded,
    /// Any other permanent failure.
    Failed,
}

impl ProviderErrorKind {
    /// Whether retrying the same call later may succeed. A busy resource (`Conflict`, e.g. a
    /// HyperPod cluster already being updated) is waited for, not failed on.
    pub fn is_retryable(self) -> bool {
        matches!(self, ProviderErrorKind::Throttled | ProviderErrorKind::Transient | ProviderErrorKind::Conflict)
    }
}

/// A failed provider call: which API, what kind of failure, and the provider's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, JsonSchema)]
#[error("{api}: {message} ({kind:?})")]
pub struct ProviderError {
    /// Service and operation, e.g. `eks:CreateCluster`.
    pub api: String,
    pub kind: ProviderErrorKind,
    pub message: String,
}

impl ProviderError {
    pub fn new(api: impl Into<String>, kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        ProviderError { api: api.into(), kind, message: message.into() }
    }

    pub fn not_found(api: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(api, ProviderErrorKind::NotFound, message)
    }

    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }
}

/// Lifecycle state of a provider resource, normalised across services.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ResourceState {
    Creating,
    Active,
    Updating,
    Deleting,
    /// Terminal failure with the provider's reason (e.g. HyperPod FailureMessage).
    Failed {
        reason: String,
    },
}

impl ResourceState {
    pub fn is_active(&self) -> bool {
        matches!(self, ResourceState::Active)
    }
}

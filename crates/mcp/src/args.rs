//! Tool arguments: one struct per tool, each field documented (the doc comments become the
//! argument descriptions of the JSON schema an agent sees).
//!
//! Request bodies are *not* validated here. Nested specs (`hyperpod`, `network`, `storage`) are
//! carried as raw JSON with the schema of the core type, so the control plane decodes them
//! and reports every broken rule with its field path — the same findings the browser gets.

use instantstart_core::operation::OperationStatus;
use instantstart_core::spec::{HyperPodClusterSpec, NetworkSpec, StorageSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// Longest `operation_wait` may block, in seconds (15 minutes).
pub const MAX_WAIT_SECS: u64 = 900;
/// How long `operation_wait` blocks when `timeout_secs` is absent (10 minutes).
pub const DEFAULT_WAIT_SECS: u64 = 600;

/// The options every operation-creating tool takes.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct MutationArgs {
    /// Optional idempotency key (1-255 visible ASCII characters). Calling again with the same
    /// key and the same arguments returns the operation already started instead of a second
    /// one, so it is safe to retry after a timeout or a lost response. The same key with other
    /// arguments is rejected (409).
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// When true, nothing is changed: the result is the plan (the request with defaults filled
    /// in and every step that would run). Validation runs exactly as for a real call.
    #[serde(default)]
    pub dry_run: bool,
}

/// `context_zones` and `context_instance_types`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct RegionArgs {
    /// AWS region, e.g. `us-east-1`. Defaults to the control plane's region (see context_get).
    #[serde(default)]
    pub region: Option<String>,
}

/// `context_instance_types`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct InstanceTypesArgs {
    /// AWS region, e.g. `us-east-1`. Defaults to the control plane's region (see context_get).
    #[serde(default)]
    pub region: Option<String>,
    /// Only instance types offered in this Availability Zone, e.g. `us-east-1a`.
    #[serde(default)]
    pub availability_zone: Option<String>,
}

/// Tools addressing one cluster by name.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ClusterNameArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub name: String,
}

/// `cluster_create`: the create-cluster pipeline.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ClusterCreateArgs {
    /// New cluster name: lowercase letters, digits and hyphens, starting with a letter. Every
    /// AWS resource name derives from it.
    pub name: String,
    /// AWS region, e.g. `us-east-1`.
    pub region: String,
    /// At least two Availability Zones of the region for the EKS control plane subnets
    /// (query them with context_zones; ask the user which ones).
    #[schemars(with = "Vec<String>")]
    pub availability_zones: Value,
    /// Kubernetes version of the EKS control plane (default: the control plane's default,
    /// e.g. `1.33`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub kubernetes_version: Option<Value>,
    /// Network: omit for a new VPC with a computed CIDR (recommended; subnets, route tables
    /// and security groups are planned by the control plane). `{"mode":"existing_vpc",…}`
    /// reuses a VPC.
    #[serde(default)]
    #[schemars(with = "Option<NetworkSpec>")]
    pub network: Option<Value>,
    /// The HyperPod cluster to create on the EKS cluster: its instance groups (name,
    /// instance_type, count, availability_zone, capacity). Node auto-recovery is on by
    /// default. Omit for an EKS-only cluster.
    #[serde(default)]
    #[schemars(with = "Option<HyperPodClusterSpec>")]
    pub hyperpod: Option<Value>,
    /// The shared S3 data bucket mounted in every pod; omit to derive a bucket name.
    #[serde(default)]
    #[schemars(with = "Option<StorageSpec>")]
    pub storage: Option<Value>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

impl ClusterCreateArgs {
    /// The REST request body: the given fields only, so the server fills in its defaults.
    pub fn body(&self) -> Value {
        let mut body = serde_json::Map::new();
        body.insert("name".into(), Value::String(self.name.clone()));
        body.insert("region".into(), Value::String(self.region.clone()));
        body.insert("availability_zones".into(), self.availability_zones.clone());
        for (key, value) in [
            ("kubernetes_version", &self.kubernetes_version),
            ("network", &self.network),
            ("hyperpod", &self.hyperpod),
            ("storage", &self.storage),
        ] {
            if let Some(v) = value {
                body.insert(key.into(), v.clone());
            }
        }
        Value::Object(body)
    }
}

/// `cluster_import`: register an existing EKS (and HyperPod) cluster.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ClusterImportArgs {
    /// InstantStart name to give the imported cluster.
    pub name: String,
    /// AWS region of the existing cluster, e.g. `us-east-1`.
    pub region: String,
    /// Name of the existing EKS cluster.
    pub eks_cluster: String,
    /// Name of an existing HyperPod cluster orchestrated by that EKS cluster, if any.
    #[serde(default)]
    pub hyperpod_cluster: Option<String>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

impl ClusterImportArgs {
    /// The REST request body.
    pub fn body(&self) -> Value {
        let mut body = serde_json::json!({
            "name": self.name, "region": self.region, "eks_cluster": self.eks_cluster,
        });
        if let Some(hp) = &self.hyperpod_cluster {
            body["hyperpod_cluster"] = Value::String(hp.clone());
        }
        body
    }
}

/// `cluster_delete`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ClusterDeleteArgs {
    /// Name of the cluster to delete. Imported clusters are only forgotten, never deleted in AWS.
    pub name: String,
    /// Also delete the shared S3 bucket and its data, if InstantStart created it (default
    /// false: keep the data). Only set this when the user explicitly asked for it.
    #[serde(default)]
    pub delete_bucket: bool,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `cluster_set_active`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SetActiveArgs {
    /// Cluster to make active (the default target of cluster-scoped work); null clears it.
    pub name: Option<String>,
    /// When true, nothing is changed: the result says which cluster is active now and which
    /// would be.
    #[serde(default)]
    pub dry_run: bool,
}

/// `operation_list`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct OperationListArgs {
    /// Only operations on this target, e.g. `cluster/demo`.
    #[serde(default)]
    pub target: Option<String>,
    /// Only operations with this status.
    #[serde(default)]
    pub status: Option<OperationStatus>,
    /// At most this many (1-500, default 20), newest first.
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Tools addressing one operation.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct OperationIdArgs {
    /// Operation id (`op-…`), as returned by the mutating tool or operation_list.
    pub id: String,
}

/// `operation_wait`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct OperationWaitArgs {
    /// Operation id (`op-…`), as returned by the mutating tool or operation_list.
    pub id: String,
    /// Longest time to block, in seconds (1-900, default 600). The call returns as soon as
    /// the operation reaches a terminal status; when the time runs out it returns the current
    /// state with `terminal: false` — call operation_wait again to keep following.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// `operation_retry_step`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RetryStepArgs {
    /// Operation id (`op-…`).
    pub id: String,
    /// Key of the failed step to retry, e.g. `eks_cluster` or `addon:cert-manager` (see the
    /// steps listed by operation_get).
    pub step: String,
}

/// `audit_list`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct AuditListArgs {
    /// Only entries about this target, e.g. `cluster/demo`.
    #[serde(default)]
    pub target: Option<String>,
    /// At most this many (1-1000, default 50), newest first.
    #[serde(default)]
    pub limit: Option<u32>,
}

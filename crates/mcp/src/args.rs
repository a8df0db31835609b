//! Tool arguments: one struct per tool, each field documented (the doc comments become the
//! argument descriptions of the JSON schema an agent sees).
//!
//! Request bodies are *not* validated here. Nested specs (`hyperpod`, `network`, `storage`) are
//! carried as raw JSON with the schema of the core type, so the control plane decodes them
//! and reports every broken rule with its field path — the same findings the browser gets.

use instantstart_core::diff::TieredCheckpointingPatch;
use instantstart_core::operation::OperationStatus;
use instantstart_core::spec::{
    CapacitySpec, HyperPodClusterSpec, InstanceGroupSpec, InterfaceMode, NetworkSpec, StorageSpec,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest `operation_wait` may block, in seconds (15 minutes).
pub const MAX_WAIT_SECS: u64 = 900;
/// How long `operation_wait` blocks when `timeout_secs` is absent (10 minutes).
pub const DEFAULT_WAIT_SECS: u64 = 600;

/// The options every operation-creating tool takes.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
pub struct MutationArgs {
    /// Optional idempotency key (1-255 visible ASCII characters). Calling again with the same
    /// key and the same arguments returns the operation already started instead of a second
    /// one, so it is safe to retry after a timeout or a lost response. The same key with other
    /// arguments is rejected (409).
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// When true, nothing is changed: the result is the plan (the request with defaults filled
    /// in, every step that would run, the explicit diff against the real state for changes of
    /// existing resources, and the preflight checks with their remedies). Validation runs
    /// exactly as for a real call.
    #[serde(default)]
    pub dry_run: bool,
}

/// The confirmation every destructive tool takes (see [`crate::confirm`]).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
pub struct ConfirmArgs {
    /// Omit on the first call: nothing is changed and the answer is the plan with a confirmation
    /// token. After the user explicitly agreed to that plan, call again with the same arguments
    /// and this token to act. Single-use, valid 5 minutes, bound to this tool, these arguments
    /// and that plan.
    #[serde(default)]
    pub confirmation: Option<String>,
}

/// `operation_cancel`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct OperationCancelArgs {
    /// Operation id (`op-…`) to cancel, as returned by the mutating tool or operation_list.
    pub id: String,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `context_zones`, `context_eks_clusters`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct RegionArgs {
    /// AWS region, e.g. `us-east-1`. Defaults to the control plane's region (see context_get).
    #[serde(default)]
    pub region: Option<String>,
}

/// `context_quotas`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct QuotasArgs {
    /// AWS region, e.g. `us-east-1`. Defaults to the control plane's region (see context_get).
    #[serde(default)]
    pub region: Option<String>,
    /// Only the quota of this instance type, e.g. `ml.p5.48xlarge`.
    #[serde(default)]
    pub instance_type: Option<String>,
}

/// `context_training_plan_offerings`: the region and what to search for (instance_type,
/// instance_count, duration_hours, optional start_after / end_before).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct OfferingsArgs {
    /// AWS region, e.g. `us-east-1`. Defaults to the control plane's region (see context_get).
    #[serde(default)]
    pub region: Option<String>,
    #[serde(flatten)]
    pub query: instantstart_core::provider::OfferingQuery,
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
    /// Internet address blocks (CIDR) that may reach the EKS API's public endpoint, e.g. the
    /// user's office for kubectl; the control plane's own are added by the server. Omit to
    /// keep the server's choice (its own address, or every address when it has none).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub public_access_cidrs: Option<Value>,
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
            ("public_access_cidrs", &self.public_access_cidrs),
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
    /// S3 bucket to mount in pods as the `s3-shared` claim (created if missing). Without it the
    /// cluster has no bucket, and tiered checkpointing and the inference operator are refused.
    #[serde(default)]
    pub bucket: Option<String>,
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
        if let Some(bucket) = &self.bucket {
            body["bucket"] = Value::String(bucket.clone());
        }
        body
    }
}

/// `cluster_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct ClusterDeleteArgs {
    /// Name of the cluster to delete. Imported clusters are only forgotten, never deleted in AWS.
    pub name: String,
    /// Also delete the shared S3 bucket and its data, if InstantStart created it (default
    /// false: keep the data). Only set this when the user explicitly asked for it.
    #[serde(default)]
    pub delete_bucket: bool,
    /// Keep the SageMaker managed MLflow tracking servers created for the cluster (default
    /// false: they are deleted with it, with their runs and the IAM role InstantStart created
    /// for each; their artifacts stay in the bucket). Set it when the user wants to keep the
    /// training history.
    #[serde(default)]
    pub keep_tracking_servers: bool,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `hyperpod_add`: a HyperPod cluster on an EKS-only cluster.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HyperPodAddArgs {
    /// InstantStart cluster name (as listed by cluster_list); it must have no HyperPod cluster.
    pub cluster: String,
    /// The HyperPod cluster, exactly as cluster_create's `hyperpod`: instance_groups (name,
    /// instance_type, count, availability_zone, capacity, interface_mode) and node_recovery. The
    /// control plane plans the /20 compute subnets in the EKS cluster's VPC; never ask for subnets.
    #[schemars(with = "instantstart_core::spec::HyperPodClusterSpec")]
    pub hyperpod: Value,
    /// S3 bucket for the lifecycle script and the `s3-shared` claim, only when the cluster has
    /// none (an imported EKS-only cluster); created if missing.
    #[serde(default)]
    pub bucket: Option<String>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

impl HyperPodAddArgs {
    /// The REST request body.
    pub fn body(&self) -> Value {
        let mut body = serde_json::json!({ "hyperpod": self.hyperpod });
        if let Some(bucket) = &self.bucket {
            body["bucket"] = Value::String(bucket.clone());
        }
        body
    }
}

/// `hyperpod_remove`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct HyperPodRemoveArgs {
    /// InstantStart cluster name (as listed by cluster_list) whose HyperPod cluster goes.
    pub cluster: String,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
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
    /// Page size (1-500, default 20), newest first.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next` of a previous call: read the page after it (same filters).
    #[serde(default)]
    pub cursor: Option<String>,
    /// `true`: the archived operations (finished before the server's retention window) instead
    /// of the current ones. Default `false`.
    #[serde(default)]
    pub archived: bool,
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
    /// Page size (1-500, default 50), newest first.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The `next` of a previous call: read the page after it (same filter).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Tools addressing one cluster's HyperPod day-2 state.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ClusterArgs {
    /// InstantStart cluster name (as listed by cluster_list); it must have a HyperPod cluster.
    pub cluster: String,
}

/// `node_list`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NodeListArgs {
    /// InstantStart cluster name (as listed by cluster_list); it must have a HyperPod cluster.
    pub cluster: String,
    /// Only the nodes of this instance group.
    #[serde(default)]
    pub instance_group: Option<String>,
}

/// `capacity_get`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CapacityArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// Only this instance group's nodes and totals (the cluster totals stay whole).
    #[serde(default)]
    pub instance_group: Option<String>,
}

/// `metrics_get`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct MetricsGetArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// A Kubernetes Node name (capacity_get's node_list[].name): per-GPU series of that node.
    /// Give exactly one of node or job.
    #[serde(default)]
    pub node: Option<String>,
    /// A training job name (job_list): the mean over its GPUs, its throughput and its loss.
    #[serde(default)]
    pub job: Option<String>,
    /// The job's namespace, when several namespaces have a job of that name.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Seconds back from now, 60-86400 (default 900).
    #[serde(default)]
    pub since: Option<u32>,
    /// Seconds between points, at least 5, at most 720 points (default: about 90 points).
    #[serde(default)]
    pub step: Option<u32>,
}

/// `node_get`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NodeGetArgs {
    /// InstantStart cluster name (as listed by cluster_list); it must have a HyperPod cluster.
    pub cluster: String,
    /// The node's instance id (`i-…`, as node_list shows it).
    pub node_id: String,
}

/// `cluster_events`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ClusterEventsArgs {
    /// InstantStart cluster name (as listed by cluster_list); it must have a HyperPod cluster.
    pub cluster: String,
    /// Filters and page: all optional. Pass the previous result's `next_cursor` as `cursor`
    /// for older events.
    #[serde(flatten)]
    pub query: instantstart_core::provider::ClusterEventQuery,
}

/// `instance_group_add`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct InstanceGroupAddArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// The new group: name, instance_type, count, availability_zone (query context_instance_types
    /// for what the zone offers), capacity (on_demand, spot or a training plan; immutable
    /// later), interface_mode (standard or efa_only; immutable later). The control plane plans
    /// the /20 compute subnet in that AZ; never ask the user for subnets.
    #[schemars(with = "InstanceGroupSpec")]
    pub group: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `instance_group_scale`: an explicit diff of one group.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct InstanceGroupScaleArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// Instance group name (as listed by instance_group_list).
    pub group: String,
    /// New number of instances (0 allowed: managed autoscaling scales from zero). Only the
    /// fields given are sent; the same count as now is "already in this state".
    #[serde(default)]
    #[schemars(with = "Option<u32>")]
    pub count: Option<Value>,
    /// Immutable: send only to assert the group's current capacity type. A different value is
    /// refused (422, finding `patch.capacity`): offer adding a new group and deleting this one.
    #[serde(default)]
    #[schemars(with = "Option<CapacitySpec>")]
    pub capacity: Option<Value>,
    /// Immutable: send only to assert the current interface mode (standard or efa_only); a
    /// different value is refused (422, `patch.interface_mode`).
    #[serde(default)]
    #[schemars(with = "Option<InterfaceMode>")]
    pub interface_mode: Option<Value>,
    /// Immutable: send only to assert the current instance type; a different value is refused
    /// (422, `patch.instance_type`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub instance_type: Option<Value>,
    /// Immutable: send only to assert the current Availability Zone; a different value is
    /// refused (422, `patch.availability_zone`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub availability_zone: Option<Value>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

impl InstanceGroupScaleArgs {
    /// The REST patch: only the fields given (explicit diff).
    pub fn patch(&self) -> Value {
        explicit_diff([
            ("count", &self.count),
            ("capacity", &self.capacity),
            ("interface_mode", &self.interface_mode),
            ("instance_type", &self.instance_type),
            ("availability_zone", &self.availability_zone),
        ])
    }
}

/// An explicit-diff patch: the fields given (neither absent nor null), under their keys.
fn explicit_diff<const N: usize>(fields: [(&str, &Option<Value>); N]) -> Value {
    let mut patch = serde_json::Map::new();
    for (key, value) in fields {
        if let Some(v) = value.as_ref().filter(|v| !v.is_null()) {
            patch.insert(key.into(), v.clone());
        }
    }
    Value::Object(patch)
}

/// `instance_group_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct InstanceGroupDeleteArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// Instance group to delete; its nodes are terminated. The last group cannot be deleted.
    pub group: String,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `node_reboot`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct NodeRebootArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// Instance ids (`i-…`) as listed by node_list, 1-25 per call. Each must be Running.
    #[schemars(with = "Vec<String>")]
    pub node_ids: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `health_check_start`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct HealthCheckStartArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// 1-99 instance groups, each `{"name": "workers", "checks": ["InstanceStress"],
    /// "node_ids": ["i-…"]}`: checks `InstanceStress` (accelerator stress) and/or
    /// `InstanceConnectivity` (EFA; the type needs EFA); node_ids (from node_list) limit the
    /// checks to those nodes, omitted = every Running node of the group.
    #[schemars(with = "Vec<instantstart_core::workflow::health_checks::HealthCheckGroup>")]
    pub instance_groups: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `software_update_start`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct SoftwareUpdateStartArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// The instance groups to update, each `{"name": "workers"}` or `{"name": "workers",
    /// "image_release_version": "2025.10.1"}` (a HyperPod AMI release MAJOR.MINOR.PATCH);
    /// omitted or empty: every group, to the latest release.
    #[serde(default)]
    #[schemars(with = "Option<Vec<instantstart_core::provider::SoftwareUpdateGroup>>")]
    pub instance_groups: Option<Value>,
    /// Rolling policy: `{"max_batch": {"type": "instance_count"|"capacity_percentage", "value":
    /// N}, "rollback_max_batch": {...}, "wait_interval_secs": 0-3600, "rollback_alarms":
    /// ["cloudwatch-alarm"]}`; omitted: SageMaker's default.
    #[serde(default)]
    #[schemars(with = "Option<instantstart_core::provider::SoftwareUpdateDeployment>")]
    pub deployment: Option<Value>,
    /// An AMI id (`ami-…`) or `default` (the latest HyperPod AMI) instead of a release.
    #[serde(default)]
    pub image_id: Option<String>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `node_replace` and `node_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct NodeLossyArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// Instance ids (`i-…`) as listed by node_list, 1-25 per call.
    #[schemars(with = "Vec<String>")]
    pub node_ids: Value,
    /// The nodes' local volumes (instance store, /opt/dlami/nvme) are lost. Set true only after
    /// the user explicitly accepted that; without it the call is refused (422 on this field).
    #[serde(default)]
    pub acknowledge_local_data_loss: bool,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `feature_set`: an explicit diff of the managed features.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct FeatureSetArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// HyperPod training operator on (true) or off (false); omit to leave it as it is.
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    pub training_operator: Option<Value>,
    /// HyperPod inference operator on or off; omit to leave it as it is.
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    pub inference_operator: Option<Value>,
    /// Managed tiered checkpointing: `{"enabled": true, "memory_percent": 20}` (share of instance
    /// memory 1-100; omitted keeps the current share, else 20) or `{"enabled": false}`; omit to
    /// leave it as it is.
    #[serde(default)]
    #[schemars(with = "Option<TieredCheckpointingPatch>")]
    pub tiered_checkpointing: Option<Value>,
    /// Managed autoscaling on or off (it scales HyperPod instance groups only, from zero; not
    /// general EC2 capacity); omit to leave it as it is.
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    pub managed_autoscaling: Option<Value>,
    /// Only with managed_autoscaling true: the instance groups Karpenter may scale (1-10 names
    /// from instance_group_list). Omit for every group (and groups added later).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    pub autoscaling_instance_groups: Option<Value>,
    /// HyperPod node recovery: "Automatic" (faulty nodes are rebooted or replaced) or "None"
    /// (left to the user); managed autoscaling needs "Automatic". Omit to leave it as it is.
    #[serde(default)]
    #[schemars(with = "Option<instantstart_core::spec::NodeRecovery>")]
    pub node_recovery: Option<Value>,
    /// HyperPod observability on or off: the observability EKS add-on writing the cluster's
    /// metrics to an Amazon Managed Service for Prometheus workspace (created with its IAM role
    /// and Pod Identity). Off removes the add-on, its association and role and keeps the
    /// workspace with its metric history. Omit to leave it as it is.
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    pub observability: Option<Value>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `governance_set`: the whole desired task governance of a cluster.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct GovernanceSetArgs {
    /// InstantStart cluster name (as listed by cluster_list).
    pub cluster: String,
    /// The desired state, as governance_get returns it under `governance`: `enabled`,
    /// `fair_share`, `priority_classes` ([{name, weight 0-100}], at most 10), `teams` ([{name,
    /// quotas: [{instance_type, count | accelerators}], sharing: LendAndBorrow|Lend|DontLend,
    /// borrow_limit 1-500 (percent of idle compute, LendAndBorrow only), preempt_team_tasks:
    /// LowerPriority|Never, fair_share_weight 0-100}]). Teams left out lose their quota;
    /// `{"enabled": false}` removes governance.
    #[schemars(with = "instantstart_core::governance::GovernanceSpec")]
    pub governance: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

impl FeatureSetArgs {
    /// The REST patch: only the fields given (explicit diff).
    pub fn patch(&self) -> Value {
        explicit_diff([
            ("training_operator", &self.training_operator),
            ("inference_operator", &self.inference_operator),
            ("tiered_checkpointing", &self.tiered_checkpointing),
            ("managed_autoscaling", &self.managed_autoscaling),
            ("autoscaling_instance_groups", &self.autoscaling_instance_groups),
            ("node_recovery", &self.node_recovery),
            ("observability", &self.observability),
        ])
    }
}

// ----- workloads: storage, downloads, training jobs, endpoints, pools -----

/// Tools addressing a cluster's workloads.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct WorkloadClusterArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
}

/// `storage_list`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct StorageListArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Key prefix inside the shared bucket, e.g. `models/` (one level is listed). Omit for the
    /// storages themselves (bucket, mount path, claim) with their top-level entries.
    #[serde(default)]
    pub prefix: Option<String>,
    /// With `prefix`: continue a listing from its `next_cursor` (a page holds at most 1000
    /// entries; `next_cursor` is present exactly when more follow).
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `storage_fsx_create`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct StorageFsxCreateArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The volume: name (claim fsx-<name>, mounted at /fsx/<name>), deployment_type SCRATCH_2
    /// (default) or PERSISTENT_2, storage_capacity_gib (1200, 2400 or a multiple of 2400),
    /// per_unit_storage_throughput (PERSISTENT_2 only: 125, 250, 500 or 1000); or
    /// file_system_id (fs-…) alone to attach an existing file system of the cluster's VPC.
    /// data_repository links a created file system to the cluster's shared bucket:
    /// { bucket_prefix: "datasets/", file_system_path: "/datasets", import: [NEW, CHANGED,
    /// DELETED], export: [NEW, CHANGED, DELETED], batch_import: true } (defaults shown; "" prefix:
    /// the whole bucket).
    #[schemars(with = "instantstart_core::workflow::fsx::FileSystemBody")]
    pub file_system: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `storage_fsx_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct StorageFsxDeleteArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// FSx volume to delete (its name as storage_list shows it, kind fsx_lustre).
    pub name: String,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `model_download`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ModelDownloadArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The download: namespace, repo_id (e.g. `Qwen/Qwen3-0.6B`), optional repo_type, revision,
    /// destination (path in the bucket; `models/<repo_id>` by default), volume (an FSx volume of
    /// the cluster to download into instead of the bucket) and hf_token (a Secret name and key —
    /// never the token itself).
    #[schemars(with = "instantstart_recipes::download::ModelDownloadParams")]
    pub download: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `model_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct ModelDeleteArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Download to delete: the download Job's name (`name` in model_list, `workload.name` of
    /// model_download). Its Job and pods go; the files already downloaded stay in the bucket.
    pub name: String,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `job_submit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct JobSubmitArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The job: `{"runtime": "hyperpod", "job": {name, namespace, image, instance_type, nodes, …},
    /// "recipe": {"kind": "torch", "script": …}, "resilience": {…}}` or `{"runtime": "ray", "job":
    /// {…}, "recipe": {"kind": "verl", …}, "ray_version": …}`. Paths are relative to the shared bucket;
    /// `job.volumes: [{"name": …}]` also mounts FSx volumes of the cluster (see storage_list) at /fsx/<name>.
    #[schemars(with = "instantstart_recipes::TrainingJobRequest")]
    pub job: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// Tools addressing one training job.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct JobNameArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Job name (as listed by job_list).
    pub name: String,
}

/// `job_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct JobDeleteArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Job to delete, with its pods (as listed by job_list).
    pub name: String,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `job_logs`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct JobLogsArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Job name (as listed by job_list).
    pub name: String,
    /// Pod to read (see job_get); rank 0 (the first pod) when omitted.
    #[serde(default)]
    pub pod: Option<String>,
    /// How many lines from the end (default 200).
    #[serde(default)]
    pub tail: Option<u32>,
    /// Only lines containing this text (case-sensitive), applied to the returned tail, e.g.
    /// `NCCL` or `Traceback`.
    #[serde(default)]
    pub grep: Option<String>,
}

/// `endpoint_deploy`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EndpointDeployArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// The endpoint: `{"route": "self_managed", "name", "namespace", "engine": {"kind": "vllm",
    /// "model": "models/…"}, "image", "instance_type", "replicas", …}` or `{"route": "managed", …}`.
    /// The model path is inside the shared bucket (see storage_list).
    #[schemars(with = "instantstart_recipes::inference::endpoint::EndpointRequest")]
    pub endpoint: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// Tools addressing one endpoint.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EndpointNameArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Endpoint name (as listed by endpoint_list).
    pub name: String,
}

/// `endpoint_scale`: an explicit diff of one endpoint.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct EndpointScaleArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Endpoint name (as listed by endpoint_list).
    pub name: String,
    /// New number of replicas; the same as now is "already in this state".
    #[serde(default)]
    #[schemars(with = "Option<u32>")]
    pub replicas: Option<Value>,
    /// New autoscaling bounds (KEDA: min_replicas, max_replicas, cooldown_seconds): only the
    /// fields given are sent. Adding autoscaling to an endpoint without it needs min and max.
    #[serde(default)]
    #[schemars(with = "Option<instantstart_core::workflow::endpoints::AutoscalingPatch>")]
    pub autoscaling: Option<Value>,
    /// true removes the endpoint's autoscaling (sent as `"autoscaling": null`): the KEDA
    /// ScaledObject is deleted and the Deployment keeps a fixed replica count — `replicas` if
    /// given, else the replicas it has at that moment (the diff shows the count; dry_run first).
    /// Not together with `autoscaling`. Without autoscaling it is no_change.
    #[serde(default)]
    pub remove_autoscaling: bool,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

impl EndpointScaleArgs {
    /// The REST patch: only the fields given (explicit diff); `remove_autoscaling` is the
    /// merge-patch removal `"autoscaling": null`. `Err` when it comes with `autoscaling`.
    pub fn patch(&self) -> Result<Value, &'static str> {
        let mut patch = explicit_diff([("replicas", &self.replicas), ("autoscaling", &self.autoscaling)]);
        if self.remove_autoscaling {
            if patch.get("autoscaling").is_some() {
                return Err("give either autoscaling (new bounds) or remove_autoscaling: true, not both");
            }
            patch["autoscaling"] = Value::Null;
        }
        Ok(patch)
    }
}

/// `endpoint_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct EndpointDeleteArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Endpoint to delete with everything deployed for it (as listed by endpoint_list).
    pub name: String,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// One chat message.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[allow(dead_code)]
pub struct ChatMessageSchema {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

/// `endpoint_chat`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EndpointChatArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Endpoint name (as listed by endpoint_list); it must be ready.
    pub name: String,
    /// The conversation, oldest first, e.g. `[{"role": "user", "content": "Hello"}]`.
    #[schemars(with = "Vec<ChatMessageSchema>")]
    pub messages: Value,
    /// Most tokens to generate.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Sampling temperature (0-2).
    #[serde(default)]
    pub temperature: Option<f64>,
}

impl EndpointChatArgs {
    /// The OpenAI chat-completions request.
    pub fn request(&self) -> Value {
        let mut req = serde_json::json!({ "messages": self.messages });
        if let Some(n) = self.max_tokens {
            req["max_tokens"] = n.into();
        }
        if let Some(t) = self.temperature {
            req["temperature"] = t.into();
        }
        req
    }
}

/// `pool_assign`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct PoolAssignArgs {
    /// InstantStart cluster name (as listed by cluster_list); omit for the active cluster.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Pool name (as listed by pool_list).
    pub pool: String,
    /// Worker pod (as listed by pool_list).
    pub pod: String,
    /// Endpoint the worker should serve; null (or omitted) releases it: it stays warm in the pool.
    pub serving: Option<String>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `mlflow_servers`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct TrackingServerListArgs {
    /// AWS region; omit for the control plane's default region.
    #[serde(default)]
    pub region: Option<String>,
}

/// `mlflow_create_server`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct TrackingServerCreateArgs {
    /// The tracking server: name; cluster (its region, and artifacts in its shared bucket under
    /// mlflow/<name>) or region + artifact_store_uri (s3://bucket/prefix); size Small (default),
    /// Medium or Large; role_arn (omit: InstantStart creates <name>-mlflow-role); mlflow_version.
    #[schemars(with = "instantstart_core::workflow::mlflow::CreateTrackingServerRequest")]
    pub server: Value,
    #[serde(flatten)]
    pub mutation: MutationArgs,
}

/// `mlflow_server_delete`.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
pub struct TrackingServerDeleteArgs {
    /// Tracking server to delete (as listed by mlflow_servers). Only servers InstantStart created.
    pub name: String,
    /// AWS region of the server; omit for the default region.
    #[serde(default)]
    pub region: Option<String>,
    #[serde(flatten)]
    pub mutation: MutationArgs,
    #[serde(flatten)]
    pub confirm: ConfirmArgs,
}

/// `mlflow_runs`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RunListArgs {
    /// Tracking server name (as listed by mlflow_servers).
    pub server: String,
    /// Only runs of this experiment (the job name unless the job set one).
    #[serde(default)]
    pub experiment: Option<String>,
    /// Most runs, newest first (1-1000, default 100).
    #[serde(default)]
    pub max: Option<u32>,
    /// AWS region of the server; omit for the default region.
    #[serde(default)]
    pub region: Option<String>,
}

/// `mlflow_metrics`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RunMetricsGetArgs {
    /// Tracking server name.
    pub server: String,
    /// Run id (from mlflow_runs).
    pub run_id: String,
    /// Metric keys; omit for loss and throughput.
    #[serde(default)]
    pub keys: Vec<String>,
    /// AWS region of the server; omit for the default region.
    #[serde(default)]
    pub region: Option<String>,
}

//! Typed specs of what a user asks for: clusters, HyperPod instance groups, managed features,
//! storage, and the identifiers of jobs and endpoints.
//!
//! Every spec implements [`Validate`]; the rules here run for every face (UI, REST, CLI, MCP)
//! because all of them go through the same backend. Serde shapes are the wire shapes of the API.

use crate::instance_types::{BOTOCORE_VERSION, is_cluster_instance_type};
use crate::names;
use crate::validate::{Findings, Validate, ValidationError};
use ipnet::Ipv4Net;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// Which Kubernetes versions, read on 2026-12-01:
// - EKS (Amazon EKS user guide, `kubernetes-versions`, and its release calendar): 14 months of
//   standard support, then 12 of extended support (extra cost per cluster hour); after that EKS
//   creates no new cluster on the version. On 2026-12-01: 1.34 (standard support until
//   2026-12-02) and 1.35 (until 2027-03-27) in standard support; 1.32 (until 2027-03-23) and
//   1.33 (until 2027-07-29) in extended support; 1.30 (extended support ended 2026-07-23) and
//   1.31 (ended 2026-11-26) are gone.
// - SageMaker HyperPod (`sagemaker-hyperpod-eks-prerequisites`, "Kubernetes version support"):
//   1.28, 1.29, 1.30, 1.31, 1.32, 1.33 and 1.34. Not 1.35.
// - The HyperPod training operator (`sagemaker-eks-operator`, "Supported versions"): 1.28 to
//   1.33.
// Each list below is the intersection with the EKS list.

/// Kubernetes versions EKS offers for new clusters (standard or extended support; see above).
pub const SUPPORTED_KUBERNETES_VERSIONS: &[&str] = &["1.32", "1.33", "1.34", "1.35"];
/// Kubernetes versions of an EKS cluster that can orchestrate a SageMaker HyperPod cluster
/// (`sagemaker-hyperpod-eks-prerequisites`), among [`SUPPORTED_KUBERNETES_VERSIONS`].
pub const HYPERPOD_KUBERNETES_VERSIONS: &[&str] = &["1.32", "1.33", "1.34"];
/// Kubernetes versions the HyperPod training operator supports (`sagemaker-eks-operator`,
/// "Supported versions"), among [`SUPPORTED_KUBERNETES_VERSIONS`].
pub const TRAINING_OPERATOR_KUBERNETES_VERSIONS: &[&str] = &["1.32", "1.33"];
/// Version used when a request names none: supported by EKS, HyperPod and the training
/// operator alike.
pub const DEFAULT_KUBERNETES_VERSION: &str = "1.33";
/// Mount path of the shared bucket in pods (and in the management environment) when a request
/// names none.
pub const DEFAULT_MOUNT_PATH: &str = "/s3";

/// Fills in `region` of a request body (create or import a cluster) when it is absent, `null`
/// or empty, with the server's default region. Returns the region the request now names (the
/// given one is kept as it is; validation still checks it). Not an object: left to decoding.
pub fn fill_default_region(body: &mut serde_json::Value, default: &str) -> Option<String> {
    use serde_json::Value;
    let obj = body.as_object_mut()?;
    let absent = match obj.get("region") {
        None | Some(Value::Null) => true,
        Some(Value::String(r)) => r.is_empty(),
        Some(_) => false,
    };
    if absent {
        obj.insert("region".into(), Value::String(default.to_string()));
    }
    obj.get("region").and_then(Value::as_str).map(str::to_string)
}

fn default_k8s_version() -> String {
    DEFAULT_KUBERNETES_VERSION.to_string()
}

/// Everything needed to create a cluster end to end: the EKS control plane, optionally a
/// HyperPod cluster on it, and the shared storage. This is the input of the create-cluster
/// pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterCreateRequest {
    /// InstantStart cluster name; every AWS resource name derives from it.
    pub name: String,
    /// AWS region, e.g. `us-east-1`. Optional over the REST API: when absent the server's
    /// default region (its `--region`) is filled in and recorded in the operation's request.
    #[serde(default)]
    pub region: String,
    /// Kubernetes version of the EKS control plane.
    #[serde(default = "default_k8s_version")]
    pub kubernetes_version: String,
    /// A new VPC (CIDR computed by default) or an existing one.
    #[serde(default)]
    pub network: NetworkSpec,
    /// Availability Zones for the control plane subnets (at least two, as EKS requires).
    pub availability_zones: Vec<String>,
    /// The HyperPod cluster to create on the EKS cluster, if any.
    #[serde(default)]
    pub hyperpod: Option<HyperPodClusterSpec>,
    /// The shared S3 data bucket; a bucket name is derived when absent.
    #[serde(default)]
    pub storage: Option<StorageSpec>,
    /// Internet address blocks that may reach the EKS API's public endpoint (EKS
    /// `publicAccessCidrs`), e.g. your office's `203.0.113.0/24` for `kubectl`. The server adds
    /// the control plane's own (`--eks-public-access-cidrs`; the deployment template sets the
    /// management instance's Elastic IP) when the operation is recorded. None at all: EKS's
    /// default, every address (`0.0.0.0/0`). Nodes reach the API through the private endpoint
    /// either way. At most 40; no private or reserved range.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub public_access_cidrs: Vec<Ipv4Net>,
}

/// Where the cluster's network comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum NetworkSpec {
    /// Create a VPC with public and private subnets in each chosen AZ.
    NewVpc {
        /// VPC CIDR; a /16 leaves room for many /20 compute subnets.
        #[schemars(with = "String")]
        cidr: Ipv4Net,
    },
    /// Use an existing VPC and its private subnets.
    ExistingVpc { vpc_id: String, subnet_ids: Vec<String> },
}

impl Default for NetworkSpec {
    fn default() -> Self {
        NetworkSpec::NewVpc { cidr: "10.0.0.0/16".parse().expect("valid default CIDR") }
    }
}

/// A HyperPod cluster orchestrated by the EKS cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HyperPodClusterSpec {
    /// Node auto-recovery; on by default so faulty nodes are rebooted or replaced.
    #[serde(default)]
    pub node_recovery: NodeRecovery,
    pub instance_groups: Vec<InstanceGroupSpec>,
}

/// HyperPod node auto-recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum NodeRecovery {
    #[default]
    Automatic,
    None,
}

/// One HyperPod instance group. Capacity type and EFA-only interface mode are immutable for
/// the group's lifetime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceGroupSpec {
    pub name: String,
    pub instance_type: String,
    /// Number of instances; zero is allowed (scale from zero with managed autoscaling).
    pub count: u32,
    /// The AZ the group's compute subnet lives in. For a training plan it must be the plan's AZ.
    pub availability_zone: String,
    /// Place the group in this existing subnet instead of a planned /20 compute subnet.
    #[serde(default)]
    pub subnet_id: Option<String>,
    #[serde(default)]
    pub capacity: CapacitySpec,
    #[serde(default)]
    pub interface_mode: InterfaceMode,
    /// Size of the extra EBS volume per instance, in GB.
    #[serde(default = "default_ebs_gb")]
    pub ebs_volume_gb: u32,
    #[serde(default)]
    pub deep_health_checks: DeepHealthChecks,
    #[serde(default)]
    pub lifecycle_script: Option<LifecycleScript>,
}

fn default_ebs_gb() -> u32 {
    500
}

/// How an instance group's capacity is bought.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum CapacitySpec {
    #[default]
    OnDemand,
    /// Reserved capacity of a SageMaker training plan.
    TrainingPlan {
        arn: String,
    },
    Spot,
}

impl CapacitySpec {
    pub fn label(&self) -> &'static str {
        match self {
            CapacitySpec::OnDemand => "on_demand",
            CapacitySpec::TrainingPlan { .. } => "training_plan",
            CapacitySpec::Spot => "spot",
        }
    }
}

/// Network interface mode of the group's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InterfaceMode {
    /// ENA plus EFA where the instance type has it.
    #[default]
    Standard,
    /// EFA-only interfaces (no IP traffic on the EFA devices); high-end accelerators only.
    EfaOnly,
}

/// Deep health checks run before nodes accept work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeepHealthChecks {
    /// GPU/accelerator stress test (InstanceStress).
    #[serde(default)]
    pub stress: bool,
    /// EFA connectivity test (InstanceConnectivity).
    #[serde(default)]
    pub connectivity: bool,
}

/// Lifecycle script run on node creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LifecycleScript {
    pub source_s3_uri: String,
    pub on_create: String,
}

/// The shared S3 bucket mounted at the same path in the dev environment and every pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    /// Bucket name; derived from the cluster name, account and region when absent.
    #[serde(default)]
    pub bucket: Option<String>,
    /// Mount path inside pods.
    #[serde(default = "default_mount_path")]
    pub mount_path: String,
}

fn default_mount_path() -> String {
    DEFAULT_MOUNT_PATH.to_string()
}

/// The managed capabilities of the Advanced features panel, as desired or actual state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManagedFeatures {
    pub training_operator: bool,
    pub inference_operator: bool,
    /// Managed tiered checkpointing; `Some` when enabled.
    pub tiered_checkpointing: Option<TieredCheckpointing>,
    /// Managed Karpenter-based autoscaling of HyperPod instance groups.
    pub managed_autoscaling: bool,
    /// HyperPod node recovery (`NodeRecovery` of the HyperPod cluster): `Automatic` replaces or
    /// reboots faulty nodes, `None` leaves them to the operator. Changeable after creation.
    #[serde(default)]
    pub node_recovery: NodeRecovery,
    /// HyperPod's observability add-on (`amazon-sagemaker-hyperpod-observability`) writing the
    /// cluster's metrics to an Amazon Managed Service for Prometheus workspace of its own.
    #[serde(default)]
    pub observability: bool,
}

/// Managed tiered checkpointing settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TieredCheckpointing {
    /// Share of instance memory given to the checkpoint tier, 1-100.
    pub memory_percent: u8,
}

/// Identifier of a training job: namespace and DNS-1123 name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct JobId {
    pub namespace: String,
    pub name: String,
}

/// Identifier of an inference endpoint: namespace and DNS-1123 name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct EndpointId {
    pub namespace: String,
    pub name: String,
}

fn validate_k8s_id(namespace: &str, name: &str, f: &mut Findings) {
    if let Err(rule) = names::dns1123_label(namespace) {
        f.push("namespace", rule);
    }
    if let Err(rule) = names::dns1123_label(name) {
        f.push("name", rule);
    }
}

impl Validate for JobId {
    fn validate(&self, f: &mut Findings) {
        validate_k8s_id(&self.namespace, &self.name, f);
    }
}

impl Validate for EndpointId {
    fn validate(&self, f: &mut Findings) {
        validate_k8s_id(&self.namespace, &self.name, f);
    }
}

/// Most instances one group may ask for in one request.
pub const MAX_GROUP_COUNT: u32 = 2048;

impl Validate for ClusterCreateRequest {
    fn validate(&self, f: &mut Findings) {
        if let Err(rule) = names::cluster_name(&self.name) {
            f.push("name", rule);
        }
        let region_ok = match names::region(&self.region) {
            Ok(()) => true,
            Err(rule) => {
                f.push("region", rule);
                false
            }
        };
        if !SUPPORTED_KUBERNETES_VERSIONS.contains(&self.kubernetes_version.as_str()) {
            f.push("kubernetes_version", format!("must be one of {}", SUPPORTED_KUBERNETES_VERSIONS.join(", ")));
        } else if self.hyperpod.is_some() && !HYPERPOD_KUBERNETES_VERSIONS.contains(&self.kubernetes_version.as_str()) {
            f.push_unprocessable(
                "kubernetes_version",
                format!(
                    "SageMaker HyperPod supports Kubernetes {} (EKS prerequisites of HyperPod); {} is offered for EKS-only clusters",
                    HYPERPOD_KUBERNETES_VERSIONS.join(", "),
                    self.kubernetes_version
                ),
            );
        }
        f.at("network", |f| self.network.validate(f));
        if self.availability_zones.len() < 2 {
            f.push("availability_zones", "EKS needs at least two Availability Zones");
        }
        for (i, az) in self.availability_zones.iter().enumerate() {
            if region_ok && let Err(rule) = names::availability_zone(az, &self.region) {
                f.push(&format!("availability_zones[{i}]"), rule);
            }
            if self.availability_zones[..i].contains(az) {
                f.push(&format!("availability_zones[{i}]"), "listed twice");
            }
        }
        if let Some(hp) = &self.hyperpod {
            f.at("hyperpod", |f| validate_hyperpod_in_region(hp, &self.region, region_ok, f));
        }
        if let Some(storage) = &self.storage {
            f.at("storage", |f| storage.validate(f));
        }
        validate_public_access_cidrs(&self.public_access_cidrs, f);
    }
}

/// The rules of `public_access_cidrs`: EKS's (no reserved range, at most
/// [`names::MAX_PUBLIC_ACCESS_CIDRS`]) and ours (host bits zero, each block once).
fn validate_public_access_cidrs(cidrs: &[Ipv4Net], f: &mut Findings) {
    if cidrs.len() > names::MAX_PUBLIC_ACCESS_CIDRS {
        f.push(
            "public_access_cidrs",
            format!("at most {} blocks (EKS quota per cluster); {} given", names::MAX_PUBLIC_ACCESS_CIDRS, cidrs.len()),
        );
    }
    for (i, cidr) in cidrs.iter().enumerate() {
        let field = format!("public_access_cidrs[{i}]");
        if cidr.network() != cidr.addr() {
            f.push(&field, format!("host bits must be zero; did you mean {}?", cidr.trunc()));
        } else if let Err(rule) = names::public_access_cidr(cidr) {
            f.push(&field, rule);
        } else if cidrs[..i].contains(cidr) {
            f.push(&field, "listed twice");
        }
    }
}

/// Adds the control plane's own blocks (`server`: the server's `--eks-public-access-cidrs`)
/// to a create request's `public_access_cidrs`, after the ones it names, each once; the
/// control plane must reach every cluster it creates. A request that names `0.0.0.0/0` keeps
/// only that (it admits every address already). Not an object, or a list that is not one of
/// strings: left to decoding.
pub fn fill_server_public_access_cidrs(body: &mut serde_json::Value, server: &[Ipv4Net]) {
    use serde_json::Value;
    if server.is_empty() {
        return;
    }
    let Some(obj) = body.as_object_mut() else { return };
    let mut list: Vec<String> = match obj.get("public_access_cidrs") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => match items.iter().map(|v| v.as_str().map(str::to_string)).collect() {
            Some(list) => list,
            None => return,
        },
        Some(_) => return,
    };
    if list.iter().any(|c| c == "0.0.0.0/0") {
        return;
    }
    for cidr in server {
        let cidr = cidr.to_string();
        if !list.contains(&cidr) {
            list.push(cidr);
        }
    }
    obj.insert("public_access_cidrs".into(), Value::Array(list.into_iter().map(Value::String).collect()));
}

/// The rules of a HyperPod cluster in `region` (its own rules, then each group's Availability
/// Zone and training plan against the region; `region_ok`: the region itself is valid). Create
/// and add-HyperPod (on an existing EKS cluster) share it, so a spec is judged the same way
/// whichever way it comes; findings are relative to the `hyperpod` object.
pub fn validate_hyperpod_in_region(hp: &HyperPodClusterSpec, region: &str, region_ok: bool, f: &mut Findings) {
    hp.validate(f);
    for (i, g) in hp.instance_groups.iter().enumerate() {
        if region_ok && names::availability_zone(&g.availability_zone, region).is_err() {
            f.push(
                &format!("instance_groups[{i}].availability_zone"),
                format!("must be an Availability Zone of region {region}"),
            );
        }
        if let CapacitySpec::TrainingPlan { arn } = &g.capacity
            && let Some(plan_region) = arn.split(':').nth(3)
            && names::training_plan_arn(arn).is_ok()
            && plan_region != region
        {
            f.push(
                &format!("instance_groups[{i}].capacity.arn"),
                format!("training plan is in {plan_region}, cluster is in {region}"),
            );
        }
    }
}

impl Validate for NetworkSpec {
    fn validate(&self, f: &mut Findings) {
        match self {
            NetworkSpec::NewVpc { cidr } => {
                if !(16..=20).contains(&cidr.prefix_len()) {
                    f.push("cidr", "VPC CIDR prefix must be between /16 and /20 (room for /20 compute subnets)");
                }
                if cidr.network() != cidr.addr() {
                    f.push("cidr", format!("host bits must be zero; did you mean {}?", cidr.trunc()));
                }
                if !cidr.addr().is_private() {
                    f.push("cidr", "must be a private (RFC 1918) range");
                }
            }
            NetworkSpec::ExistingVpc { vpc_id, subnet_ids } => {
                if !vpc_id.starts_with("vpc-") {
                    f.push("vpc_id", "must be a VPC id such as vpc-0abc…");
                }
                if subnet_ids.len() < 2 {
                    f.push("subnet_ids", "EKS needs subnets in at least two Availability Zones");
                }
                for (i, s) in subnet_ids.iter().enumerate() {
                    if !s.starts_with("subnet-") {
                        f.push(&format!("subnet_ids[{i}]"), "must be a subnet id such as subnet-0abc…");
                    }
                }
            }
        }
    }
}

impl Validate for HyperPodClusterSpec {
    fn validate(&self, f: &mut Findings) {
        if self.instance_groups.is_empty() {
            f.push("instance_groups", "a HyperPod cluster needs at least one instance group");
        }
        if self.instance_groups.len() > 20 {
            f.push("instance_groups", "at most 20 instance groups per cluster");
        }
        for (i, g) in self.instance_groups.iter().enumerate() {
            f.at_index("instance_groups", i, |f| g.validate(f));
            if self.instance_groups[..i].iter().any(|o| o.name == g.name) {
                f.push(&format!("instance_groups[{i}].name"), "instance group names must be unique");
            }
        }
    }
}

impl Validate for InstanceGroupSpec {
    fn validate(&self, f: &mut Findings) {
        if let Err(rule) = names::hyperpod_name(&self.name) {
            f.push("name", rule);
        }
        match names::instance_type(&self.instance_type) {
            Err(rule) => f.push("instance_type", rule),
            Ok(()) if !is_cluster_instance_type(&self.instance_type) => f.push(
                "instance_type",
                format!(
                    "is not a HyperPod instance type (SageMaker's ClusterInstanceType, botocore {BOTOCORE_VERSION}); \
                     GET /api/context/instance-types lists them"
                ),
            ),
            Ok(()) => {}
        }
        if self.count > MAX_GROUP_COUNT {
            f.push("count", format!("must be at most {MAX_GROUP_COUNT}"));
        }
        if self.availability_zone.is_empty() {
            f.push("availability_zone", "must name the Availability Zone of the group");
        }
        if let Some(subnet) = &self.subnet_id
            && !subnet.starts_with("subnet-")
        {
            f.push("subnet_id", "must be a subnet id such as subnet-0abc…");
        }
        if let CapacitySpec::TrainingPlan { arn } = &self.capacity
            && let Err(rule) = names::training_plan_arn(arn)
        {
            f.push("capacity.arn", rule);
        }
        if !(1..=16384).contains(&self.ebs_volume_gb) {
            f.push("ebs_volume_gb", "must be between 1 and 16384");
        }
        if let Some(script) = &self.lifecycle_script {
            if let Err(rule) = names::s3_uri(&script.source_s3_uri) {
                f.push("lifecycle_script.source_s3_uri", rule);
            }
            if script.on_create.trim().is_empty() {
                f.push("lifecycle_script.on_create", "must name the script to run");
            }
        }
    }
}

impl Validate for StorageSpec {
    fn validate(&self, f: &mut Findings) {
        if let Some(bucket) = &self.bucket
            && let Err(rule) = names::s3_bucket_name(bucket)
        {
            f.push("bucket", rule);
        }
        if !self.mount_path.starts_with('/') || self.mount_path.contains("..") {
            f.push("mount_path", "must be an absolute path without '..'");
        }
    }
}

/// Whether the management environment's IAM policy can reach the bucket `bucket`: the
/// deployment template (`deploy/cloudformation/management.yaml`, statement `S3ClusterBuckets`)
/// grants the bucket actions on `arn:aws:s3:::is-*` and on its own shared bucket, nothing else,
/// so any other bucket fails on real AWS with HeadBucket's 403 after the pipeline started. A
/// create request naming another bucket is refused here instead (HTTP 422, field
/// `storage.bucket`). `shared_bucket` is the server's `--shared-bucket`, if any.
pub fn check_bucket_covered(bucket: &str, shared_bucket: Option<&str>, f: &mut Findings) {
    check_bucket_covered_at("storage.bucket", bucket, shared_bucket, f)
}

/// [`check_bucket_covered`] for a bucket named by request field `field`.
pub fn check_bucket_covered_at(field: &str, bucket: &str, shared_bucket: Option<&str>, f: &mut Findings) {
    if bucket.starts_with(names::CLUSTER_BUCKET_PREFIX) || shared_bucket == Some(bucket) {
        return;
    }
    let shared = match shared_bucket {
        Some(s) => format!(" or be the shared bucket {s}"),
        None => String::new(),
    };
    f.push_unprocessable(
        field,
        format!(
            "must start with '{}'{shared}: those are the buckets the management environment's IAM policy grants (statement S3ClusterBuckets of the deployment template)",
            names::CLUSTER_BUCKET_PREFIX
        ),
    );
}

/// Refuses enabling the HyperPod training operator on a cluster whose Kubernetes version it
/// does not support ([`TRAINING_OPERATOR_KUBERNETES_VERSIONS`]); HTTP 422, field `field`.
pub fn check_training_operator_version(kubernetes_version: &str, field: &str, f: &mut Findings) {
    if !TRAINING_OPERATOR_KUBERNETES_VERSIONS.contains(&kubernetes_version) {
        f.push_unprocessable(
            field,
            format!(
                "the HyperPod training operator supports Kubernetes {}; this cluster runs {kubernetes_version}",
                TRAINING_OPERATOR_KUBERNETES_VERSIONS.join(", ")
            ),
        );
    }
}

impl Validate for ManagedFeatures {
    fn validate(&self, f: &mut Findings) {
        if let Some(tc) = &self.tiered_checkpointing
            && !(1..=100).contains(&tc.memory_percent)
        {
            f.push("tiered_checkpointing.memory_percent", "must be between 1 and 100");
        }
    }
}

/// Rejects changes to the fields of an instance group that are fixed for its lifetime.
/// Findings are [`crate::validate::ValidationKind::Unprocessable`] (HTTP 422).
pub fn check_instance_group_update(
    existing: &InstanceGroupSpec,
    desired: &InstanceGroupSpec,
) -> Result<(), ValidationError> {
    let mut f = Findings::new();
    if existing.capacity.label() != desired.capacity.label() {
        f.push_unprocessable(
            "capacity",
            format!(
                "immutable after creation (is {}, requested {}); create a new instance group instead",
                existing.capacity.label(),
                desired.capacity.label()
            ),
        );
    } else if existing.capacity != desired.capacity {
        f.push_unprocessable("capacity.arn", "immutable after creation; create a new instance group instead");
    }
    if existing.interface_mode != desired.interface_mode {
        f.push_unprocessable(
            "interface_mode",
            "immutable after creation (EFA-only mode is fixed for the group's lifetime)",
        );
    }
    if existing.instance_type != desired.instance_type {
        f.push_unprocessable("instance_type", "immutable after creation");
    }
    if existing.availability_zone != desired.availability_zone || existing.subnet_id != desired.subnet_id {
        f.push_unprocessable("availability_zone", "subnet placement is immutable after creation");
    }
    f.finish()
}

/// A training job's fault-tolerance options, as far as the elastic-training rules need them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct TrainingResilience {
    pub elastic: bool,
    pub checkpointless: bool,
}

/// Elastic training currently excludes Spot instances, managed tiered checkpointing and
/// checkpointless training. Returns every conflict found.
pub fn check_elastic_training(
    job: TrainingResilience,
    capacity: &CapacitySpec,
    features: &ManagedFeatures,
) -> Result<(), ValidationError> {
    let mut f = Findings::new();
    if job.elastic {
        if *capacity == CapacitySpec::Spot {
            f.push("elastic", "elastic training cannot run on Spot instance groups");
        }
        if features.tiered_checkpointing.is_some() {
            f.push("elastic", "elastic training cannot be combined with managed tiered checkpointing");
        }
        if job.checkpointless {
            f.push("checkpointless", "elastic training cannot be combined with checkpointless training");
        }
    }
    f.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::ValidationKind;

    fn group() -> InstanceGroupSpec {
        InstanceGroupSpec {
            name: "workers".into(),
            instance_type: "ml.p5.48xlarge".into(),
            count: 2,
            availability_zone: "us-east-1a".into(),
            subnet_id: None,
            capacity: CapacitySpec::OnDemand,
            interface_mode: InterfaceMode::Standard,
            ebs_volume_gb: 500,
            deep_health_checks: DeepHealthChecks::default(),
            lifecycle_script: None,
        }
    }

    fn request() -> ClusterCreateRequest {
        ClusterCreateRequest {
            name: "demo".into(),
            region: "us-east-1".into(),
            kubernetes_version: DEFAULT_KUBERNETES_VERSION.into(),
            network: NetworkSpec::default(),
            availability_zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            hyperpod: Some(HyperPodClusterSpec {
                node_recovery: NodeRecovery::Automatic,
                instance_groups: vec![group()],
            }),
            storage: None,
            public_access_cidrs: vec![],
        }
    }

    fn fields(r: Result<(), ValidationError>) -> Vec<String> {
        r.err().map(|e| e.findings.into_iter().map(|f| f.field).collect()).unwrap_or_default()
    }

    #[test]
    fn a_good_request_passes() {
        assert_eq!(request().check(), Ok(()));
    }

    /// Data-driven: which Kubernetes versions a create request may name, with and without a
    /// HyperPod cluster, and the kind of the refusal (400 = not an EKS version at all, 422 =
    /// an EKS version HyperPod does not support).
    #[test]
    fn kubernetes_version_rules() {
        let cases: &[(&str, bool, Option<ValidationKind>)] = &[
            ("1.33", true, None),
            ("1.32", true, None),
            ("1.34", true, None),
            ("1.35", true, Some(ValidationKind::Unprocessable)),
            ("1.35", false, None),
            ("1.32", false, None),
            ("1.31", true, Some(ValidationKind::Invalid)),
            ("1.30", false, Some(ValidationKind::Invalid)),
            ("1.36", false, Some(ValidationKind::Invalid)),
            ("latest", true, Some(ValidationKind::Invalid)),
        ];
        for (version, hyperpod, want) in cases {
            let mut r = request();
            r.kubernetes_version = version.to_string();
            if !hyperpod {
                r.hyperpod = None;
            }
            let got = r.check().err();
            match (want, &got) {
                (None, None) => {}
                (Some(kind), Some(e)) => {
                    let fields: Vec<&str> = e.findings.iter().map(|f| f.field.as_str()).collect();
                    assert_eq!(fields, ["kubernetes_version"], "{version} hyperpod={hyperpod}: {e:?}");
                    assert_eq!(e.kind, *kind, "{version} hyperpod={hyperpod}: {e:?}");
                    if *kind == ValidationKind::Unprocessable {
                        let rule = &e.findings[0].rule;
                        assert!(rule.contains(&HYPERPOD_KUBERNETES_VERSIONS.join(", ")), "names the list: {rule}");
                    }
                }
                _ => panic!("{version} hyperpod={hyperpod}: want {want:?}, got {got:?}"),
            }
        }
        // The lists nest, and the default is in all of them.
        for v in HYPERPOD_KUBERNETES_VERSIONS.iter().chain(TRAINING_OPERATOR_KUBERNETES_VERSIONS) {
            assert!(SUPPORTED_KUBERNETES_VERSIONS.contains(v), "{v}");
        }
        assert!(TRAINING_OPERATOR_KUBERNETES_VERSIONS.iter().all(|v| HYPERPOD_KUBERNETES_VERSIONS.contains(v)));
        assert!(TRAINING_OPERATOR_KUBERNETES_VERSIONS.contains(&DEFAULT_KUBERNETES_VERSION));
    }

    /// Data-driven: the buckets a create request may name (the policy covers `is-*` and the
    /// management environment's shared bucket).
    #[test]
    fn bucket_policy_rule() {
        let cases: &[(&str, Option<&str>, bool)] = &[
            ("is-demo-123456789012-ab12", None, true),
            ("is-anything", Some("stack-sharedbucket-1x2y"), true),
            ("stack-sharedbucket-1x2y", Some("stack-sharedbucket-1x2y"), true),
            ("stack-sharedbucket-1x2y", None, false),
            ("my-datasets", None, false),
            ("my-datasets", Some("stack-sharedbucket-1x2y"), false),
            ("sagemaker-data", None, false),
            ("i-s-demo", None, false),
        ];
        for (bucket, shared, ok) in cases {
            let mut f = Findings::new();
            check_bucket_covered(bucket, *shared, &mut f);
            match f.finish() {
                Ok(()) => assert!(ok, "{bucket} with shared {shared:?} should be refused"),
                Err(e) => {
                    assert!(!ok, "{bucket} with shared {shared:?}: {e:?}");
                    assert_eq!(e.kind, ValidationKind::Unprocessable);
                    assert_eq!(e.findings[0].field, "storage.bucket");
                    if let Some(s) = shared {
                        assert!(e.findings[0].rule.contains(s), "names the shared bucket: {e:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn training_operator_version_rule() {
        for (v, ok) in [("1.32", true), ("1.33", true), ("1.34", false), ("1.35", false)] {
            let mut f = Findings::new();
            check_training_operator_version(v, "training_operator", &mut f);
            let r = f.finish();
            assert_eq!(r.is_ok(), ok, "{v}: {r:?}");
            if let Err(e) = r {
                assert_eq!(e.kind, ValidationKind::Unprocessable);
                assert_eq!(e.findings[0].field, "training_operator");
                assert!(e.findings[0].rule.contains("1.32, 1.33"), "{e:?}");
            }
        }
    }

    /// Data-driven: mutate a good request, expect exactly these field paths.
    #[test]
    fn request_rules() {
        type Mutate = fn(&mut ClusterCreateRequest);
        let cases: &[(&str, Mutate, &[&str])] = &[
            ("bad name", |r| r.name = "Bad_Name".into(), &["name"]),
            ("bad region", |r| r.region = "moon-1".into(), &["region"]),
            ("old k8s", |r| r.kubernetes_version = "1.20".into(), &["kubernetes_version"]),
            ("one az", |r| r.availability_zones.truncate(1), &["availability_zones"]),
            ("foreign az", |r| r.availability_zones[1] = "eu-west-1a".into(), &["availability_zones[1]"]),
            ("dup az", |r| r.availability_zones[1] = "us-east-1a".into(), &["availability_zones[1]"]),
            (
                "public cidr",
                |r| r.network = NetworkSpec::NewVpc { cidr: "8.8.0.0/16".parse().unwrap() },
                &["network.cidr"],
            ),
            (
                "tiny vpc",
                |r| r.network = NetworkSpec::NewVpc { cidr: "10.0.0.0/24".parse().unwrap() },
                &["network.cidr"],
            ),
            (
                "host bits",
                |r| r.network = NetworkSpec::NewVpc { cidr: "10.0.1.0/16".parse().unwrap() },
                &["network.cidr"],
            ),
            (
                "existing vpc bad ids",
                |r| r.network = NetworkSpec::ExistingVpc { vpc_id: "x".into(), subnet_ids: vec!["y".into()] },
                &["network.vpc_id", "network.subnet_ids", "network.subnet_ids[0]"],
            ),
            ("no groups", |r| r.hyperpod.as_mut().unwrap().instance_groups.clear(), &["hyperpod.instance_groups"]),
            (
                "dup group",
                |r| {
                    let g = group();
                    r.hyperpod.as_mut().unwrap().instance_groups.push(g)
                },
                &["hyperpod.instance_groups[1].name"],
            ),
            (
                "unknown type",
                |r| r.hyperpod.as_mut().unwrap().instance_groups[0].instance_type = "ml.zz.big".into(),
                &["hyperpod.instance_groups[0].instance_type"],
            ),
            (
                "well-formed, not a ClusterInstanceType",
                |r| r.hyperpod.as_mut().unwrap().instance_groups[0].instance_type = "ml.g5.13xlarge".into(),
                &["hyperpod.instance_groups[0].instance_type"],
            ),
            (
                "bad plan arn",
                |r| {
                    r.hyperpod.as_mut().unwrap().instance_groups[0].capacity =
                        CapacitySpec::TrainingPlan { arn: "plan".into() }
                },
                &["hyperpod.instance_groups[0].capacity.arn"],
            ),
            (
                "plan in other region",
                |r| {
                    r.hyperpod.as_mut().unwrap().instance_groups[0].capacity = CapacitySpec::TrainingPlan {
                        arn: "arn:aws:sagemaker:us-west-2:123456789012:training-plan/p".into(),
                    }
                },
                &["hyperpod.instance_groups[0].capacity.arn"],
            ),
            (
                "group az elsewhere",
                |r| r.hyperpod.as_mut().unwrap().instance_groups[0].availability_zone = "eu-west-1a".into(),
                &["hyperpod.instance_groups[0].availability_zone"],
            ),
            (
                "ebs zero",
                |r| r.hyperpod.as_mut().unwrap().instance_groups[0].ebs_volume_gb = 0,
                &["hyperpod.instance_groups[0].ebs_volume_gb"],
            ),
            (
                "too many",
                |r| r.hyperpod.as_mut().unwrap().instance_groups[0].count = 5000,
                &["hyperpod.instance_groups[0].count"],
            ),
            (
                "bad bucket",
                |r| r.storage = Some(StorageSpec { bucket: Some("Bad".into()), mount_path: "/s3".into() }),
                &["storage.bucket"],
            ),
            (
                "relative mount",
                |r| r.storage = Some(StorageSpec { bucket: None, mount_path: "data".into() }),
                &["storage.mount_path"],
            ),
            (
                "bad lifecycle",
                |r| {
                    r.hyperpod.as_mut().unwrap().instance_groups[0].lifecycle_script =
                        Some(LifecycleScript { source_s3_uri: "http://x".into(), on_create: " ".into() })
                },
                &[
                    "hyperpod.instance_groups[0].lifecycle_script.source_s3_uri",
                    "hyperpod.instance_groups[0].lifecycle_script.on_create",
                ],
            ),
        ];
        for (what, mutate, expected) in cases {
            let mut r = request();
            mutate(&mut r);
            assert_eq!(fields(r.check()), *expected, "{what}");
        }
    }

    /// Data-driven: (blocks, the fields refused).
    #[test]
    fn public_access_cidr_list_rules() {
        let many: Vec<String> = (0..41).map(|i| format!("52.{i}.0.0/16")).collect();
        let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
            (vec![], vec![]),
            (vec!["203.0.113.0/24".into(), "52.1.2.3/32".into()], vec![]),
            (vec!["0.0.0.0/0".into()], vec![]),
            (vec!["10.0.0.0/16".into()], vec!["public_access_cidrs[0]"]),
            (vec!["52.1.2.3/24".into()], vec!["public_access_cidrs[0]"]),
            (vec!["52.1.2.3/32".into(), "52.1.2.3/32".into()], vec!["public_access_cidrs[1]"]),
            (many, vec!["public_access_cidrs"]),
        ];
        for (cidrs, expected) in cases {
            let mut r = request();
            r.public_access_cidrs = cidrs.iter().map(|c| c.parse().unwrap()).collect();
            assert_eq!(fields(r.check()), expected, "{cidrs:?}");
        }
    }

    #[test]
    fn the_servers_own_blocks_are_added_once_after_the_requests() {
        use serde_json::json;
        let server: Vec<Ipv4Net> = vec!["198.51.100.7/32".parse().unwrap()];
        let cases = [
            (json!({ "name": "x" }), json!(["198.51.100.7/32"])),
            (json!({ "public_access_cidrs": null }), json!(["198.51.100.7/32"])),
            (json!({ "public_access_cidrs": ["203.0.113.0/24"] }), json!(["203.0.113.0/24", "198.51.100.7/32"])),
            (json!({ "public_access_cidrs": ["198.51.100.7/32"] }), json!(["198.51.100.7/32"])),
            // Every address already: nothing to add.
            (json!({ "public_access_cidrs": ["0.0.0.0/0"] }), json!(["0.0.0.0/0"])),
            // Not a list of strings: left for decoding to refuse, naming the field.
            (json!({ "public_access_cidrs": [5] }), json!([5])),
        ];
        for (mut body, want) in cases {
            let before = body.clone();
            fill_server_public_access_cidrs(&mut body, &server);
            assert_eq!(body["public_access_cidrs"], want, "{before}");
        }
        let mut body = json!({ "name": "x" });
        fill_server_public_access_cidrs(&mut body, &[]);
        assert_eq!(body, json!({ "name": "x" }), "no server blocks: the request is left alone");
    }

    #[test]
    fn every_finding_is_reported_not_just_the_first() {
        let mut r = request();
        r.name = "X".into();
        r.region = "nowhere".into();
        r.hyperpod.as_mut().unwrap().instance_groups[0].count = 9999;
        assert_eq!(fields(r.check()), ["name", "region", "hyperpod.instance_groups[0].count"]);
    }

    #[test]
    fn capacity_and_efa_only_are_immutable() {
        let old = group();
        let mut new = group();
        new.capacity = CapacitySpec::Spot;
        new.interface_mode = InterfaceMode::EfaOnly;
        new.count = 10;
        let err = check_instance_group_update(&old, &new).unwrap_err();
        assert_eq!(err.kind, ValidationKind::Unprocessable);
        assert_eq!(err.findings[0].field, "capacity");
        assert!(err.findings[0].rule.starts_with("immutable after creation"));
        assert_eq!(err.findings[1].field, "interface_mode");
        let mut scaled = group();
        scaled.count = 0;
        assert_eq!(check_instance_group_update(&old, &scaled), Ok(()));
    }

    #[test]
    fn elastic_training_exclusions() {
        let elastic = TrainingResilience { elastic: true, checkpointless: true };
        let features = ManagedFeatures {
            tiered_checkpointing: Some(TieredCheckpointing { memory_percent: 20 }),
            ..Default::default()
        };
        let err = check_elastic_training(elastic, &CapacitySpec::Spot, &features).unwrap_err();
        assert_eq!(err.findings.len(), 3);
        assert!(
            check_elastic_training(
                TrainingResilience { elastic: true, checkpointless: false },
                &CapacitySpec::OnDemand,
                &ManagedFeatures::default()
            )
            .is_ok()
        );
        assert!(
            check_elastic_training(
                TrainingResilience { elastic: false, checkpointless: true },
                &CapacitySpec::Spot,
                &features
            )
            .is_ok()
        );
    }

    #[test]
    fn an_absent_region_is_the_default_one_and_a_given_one_is_kept() {
        use serde_json::json;
        let cases = [
            (json!({ "name": "x" }), Some("eu-west-1")),
            (json!({ "name": "x", "region": null }), Some("eu-west-1")),
            (json!({ "name": "x", "region": "" }), Some("eu-west-1")),
            (json!({ "name": "x", "region": "us-east-2" }), Some("us-east-2")),
            // Not a string: kept for decoding to refuse with the field's name.
            (json!({ "name": "x", "region": 5 }), None),
            (json!([1]), None),
        ];
        for (mut body, want) in cases {
            let before = body.clone();
            assert_eq!(fill_default_region(&mut body, "eu-west-1").as_deref(), want, "{before}");
        }
        // A bad given region is still found by validation.
        let mut body = json!({ "name": "demo", "region": "moon-1", "availability_zones": ["a", "b"] });
        fill_default_region(&mut body, "eu-west-1");
        let r: ClusterCreateRequest = serde_json::from_value(body).unwrap();
        assert!(r.check().unwrap_err().findings.iter().any(|f| f.field == "region"));
    }

    #[test]
    fn wire_shape_with_defaults() {
        let r: ClusterCreateRequest = serde_json::from_value(serde_json::json!({
            "name": "demo", "region": "us-east-1", "availability_zones": ["us-east-1a", "us-east-1b"],
            "hyperpod": {"instance_groups": [{"name": "g", "instance_type": "ml.g5.2xlarge", "count": 1,
               "availability_zone": "us-east-1a", "capacity": {"type": "training_plan", "arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"}}]}
        })).unwrap();
        assert_eq!(r.kubernetes_version, DEFAULT_KUBERNETES_VERSION);
        assert_eq!(r.hyperpod.as_ref().unwrap().node_recovery, NodeRecovery::Automatic);
        assert_eq!(r.network, NetworkSpec::default());
        assert!(matches!(r.hyperpod.unwrap().instance_groups[0].capacity, CapacitySpec::TrainingPlan { .. }));
        let unknown = serde_json::from_value::<ClusterCreateRequest>(
            serde_json::json!({"name": "x", "region": "us-east-1", "availability_zones": [], "bogus": 1}),
        );
        assert!(unknown.is_err());
    }
}

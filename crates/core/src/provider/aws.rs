//! AWS-side provider traits: network, EKS, IAM/OIDC, HyperPod, S3, quotas and identity.
//!
//! Create calls are plain creates; the operation engine looks for an existing resource (by the
//! deterministic name and our ownership tags) before calling them, and passes its persisted
//! idempotency token where the service accepts one (EKS `clientRequestToken`).

use super::{ProviderError, ResourceState, Tags};
use crate::instance_types::InstanceTypeInfo;
use async_trait::async_trait;
use ipnet::Ipv4Net;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub type Result<T, E = ProviderError> = std::result::Result<T, E>;

/// Who the control plane runs as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CallerIdentity {
    pub account: String,
    pub arn: String,
}

/// An Availability Zone of a region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AvailabilityZone {
    pub name: String,
    pub zone_id: String,
}

/// An instance type offered in an AZ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstanceTypeOffering {
    pub instance_type: String,
    pub availability_zone: String,
}

/// A service quota relevant to HyperPod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Quota {
    /// e.g. `ml.p5.48xlarge for cluster usage`.
    pub name: String,
    pub code: String,
    pub value: u32,
}

#[async_trait]
pub trait IdentityApi: Send + Sync {
    async fn caller_identity(&self) -> Result<CallerIdentity>;
}

#[async_trait]
pub trait QuotaApi: Send + Sync {
    async fn availability_zones(&self, region: &str) -> Result<Vec<AvailabilityZone>>;
    /// HyperPod instance types offered in the region's AZs.
    async fn instance_type_offerings(&self, region: &str) -> Result<Vec<InstanceTypeOffering>>;
    /// The specs of the HyperPod instance types ([`crate::instance_types::CLUSTER_INSTANCE_TYPES`])
    /// the region describes (EC2 `DescribeInstanceTypes`); a type missing from the answer has
    /// unknown specs. Implementations may cache per region (specs do not change).
    async fn instance_type_specs(&self, region: &str) -> Result<Vec<InstanceTypeInfo>>;
    /// The HyperPod "cluster usage" quota of an instance type, if the service reports one.
    async fn hyperpod_instance_quota(&self, region: &str, instance_type: &str) -> Result<Option<Quota>>;
    /// Every HyperPod "<type> for cluster usage" quota the service reports in the region
    /// (types of [`crate::instance_types::CLUSTER_INSTANCE_TYPES`]), sorted by name. Empty
    /// when the quotas cannot be read (as [`Self::hyperpod_instance_quota`] is then `None`).
    async fn hyperpod_instance_quotas(&self, region: &str) -> Result<Vec<Quota>>;
}

/// A VPC with its subnets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Vpc {
    pub id: String,
    pub name: Option<String>,
    #[schemars(with = "Vec<String>")]
    pub cidrs: Vec<Ipv4Net>,
    pub state: ResourceState,
    pub tags: Tags,
}

/// A subnet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Subnet {
    pub id: String,
    pub vpc_id: String,
    pub name: Option<String>,
    #[schemars(with = "String")]
    pub cidr: Ipv4Net,
    pub availability_zone: String,
    /// Whether instances get public IPs (public subnet behind an internet gateway).
    pub public: bool,
    pub tags: Tags,
}

/// A new VPC with a public and a private subnet per AZ, an internet gateway, a NAT gateway and
/// routes. Implementations create each piece idempotently (look up by name tag first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateNetwork {
    pub region: String,
    pub name: String,
    #[schemars(with = "String")]
    pub cidr: Ipv4Net,
    pub subnets: Vec<crate::subnet::PlannedSubnet>,
    pub tags: Tags,
}

/// The network of a VPC as created by [`NetworkApi::create_network`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Network {
    pub vpc: Vpc,
    pub subnets: Vec<Subnet>,
    /// EFA security group (all traffic to and from itself), once created.
    pub security_group_id: Option<String>,
    /// Our S3 gateway VPC endpoint (`com.amazonaws.<region>.s3`, on the private route table),
    /// once created: a new VPC gets one so pods reach the shared bucket without the NAT
    /// gateway. `None` for an existing VPC (InstantStart creates none there).
    #[serde(default)]
    pub s3_endpoint_id: Option<String>,
    /// `Active` once NAT gateways and routes are usable.
    pub state: ResourceState,
}

/// A subnet to create in an existing VPC (compute subnets), routed like the private subnets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateSubnet {
    pub region: String,
    pub vpc_id: String,
    pub name: String,
    #[schemars(with = "String")]
    pub cidr: Ipv4Net,
    pub availability_zone: String,
    pub tags: Tags,
}

#[async_trait]
pub trait NetworkApi: Send + Sync {
    /// Finds a VPC by its `Name` tag.
    async fn find_vpc(&self, region: &str, name: &str) -> Result<Option<Vpc>>;
    /// Describes a VPC, its subnets and state.
    async fn describe_network(&self, region: &str, vpc_id: &str) -> Result<Network>;
    async fn create_network(&self, req: &CreateNetwork) -> Result<Network>;
    async fn create_subnet(&self, req: &CreateSubnet) -> Result<Subnet>;
    async fn delete_subnet(&self, region: &str, subnet_id: &str) -> Result<()>;
    /// Deletes a VPC created by [`NetworkApi::create_network`] with everything in it.
    async fn delete_network(&self, region: &str, vpc_id: &str) -> Result<()>;
}

/// An EKS control plane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EksCluster {
    pub name: String,
    pub arn: String,
    pub region: String,
    pub version: String,
    pub endpoint: Option<String>,
    /// The API server's CA bundle as EKS returns it (base64 of a PEM), once active.
    #[serde(default)]
    pub certificate_authority: Option<String>,
    pub oidc_issuer: Option<String>,
    pub vpc_id: String,
    pub subnet_ids: Vec<String>,
    pub security_group_id: Option<String>,
    pub state: ResourceState,
    pub tags: Tags,
    /// How the cluster's API authenticates IAM principals: `API` (access entries only),
    /// `API_AND_CONFIG_MAP` or `CONFIG_MAP` (the `aws-auth` ConfigMap only: no access entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_mode: Option<String>,
    /// Who may reach the public API endpoint (`resourcesVpcConfig.publicAccessCidrs`; EKS
    /// reports `0.0.0.0/0` when no block was given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub public_access_cidrs: Vec<String>,
}

/// The EKS access policy that makes a principal cluster admin.
pub const CLUSTER_ADMIN_POLICY: &str = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy";

/// `authentication_mode` of a cluster that takes no access entries.
pub const CONFIG_MAP_ONLY: &str = "CONFIG_MAP";

/// The IAM principal behind a caller ARN, as an EKS access entry names it: an assumed role
/// (`arn:aws:sts::<account>:assumed-role/<role>/<session>`) is its role
/// (`arn:aws:iam::<account>:role/<role>`); an IAM user or role ARN is itself.
pub fn access_entry_principal(caller_arn: &str) -> Option<String> {
    let parts: Vec<&str> = caller_arn.splitn(6, ':').collect();
    let [_, partition, service, _, account, resource] = parts.as_slice() else { return None };
    match *service {
        "sts" => {
            let role = resource.strip_prefix("assumed-role/")?.split('/').next().filter(|r| !r.is_empty())?;
            Some(format!("arn:{partition}:iam::{account}:role/{role}"))
        }
        "iam" if resource.starts_with("role/") || resource.starts_with("user/") => Some(caller_arn.to_string()),
        _ => None,
    }
}

/// An EKS access entry and the access policies associated with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AccessEntry {
    pub principal_arn: String,
    /// `STANDARD`, `EC2_LINUX`, `HYPERPOD_LINUX`, …
    pub kind: String,
    pub username: Option<String>,
    pub policies: Vec<AccessPolicy>,
    pub tags: Tags,
}

/// An access policy association: the policy and where it applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AccessPolicy {
    /// e.g. [`CLUSTER_ADMIN_POLICY`].
    pub policy_arn: String,
    /// Empty = the whole cluster; otherwise these namespaces.
    pub namespaces: Vec<String>,
}

/// What [`EksApi::ensure_access_entry`] should make true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EnsureAccessEntry {
    pub region: String,
    pub cluster: String,
    pub principal_arn: String,
    /// `STANDARD` unless the principal is a node role.
    pub kind: String,
    pub policies: Vec<AccessPolicy>,
    pub client_request_token: String,
    pub tags: Tags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateEksCluster {
    pub region: String,
    pub name: String,
    pub version: String,
    pub role_arn: String,
    pub subnet_ids: Vec<String>,
    /// Persisted idempotency token, sent as `clientRequestToken`.
    pub client_request_token: String,
    pub tags: Tags,
    /// Blocks that may reach the public API endpoint (`publicAccessCidrs`); empty = EKS's
    /// default, every address.
    #[serde(default)]
    pub public_access_cidrs: Vec<String>,
}

/// An EKS add-on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EksAddon {
    pub name: String,
    pub version: String,
    pub state: ResourceState,
    pub tags: Tags,
    /// EKS's health issues of the add-on (`health.issues[].message`), e.g. why it is
    /// `DEGRADED`. `DEGRADED` still maps to `Active` (pods may wait for nodes); the issues say why.
    #[serde(default)]
    pub health_issues: Vec<String>,
    /// The add-on's configuration values (DescribeAddon's `configurationValues`, JSON), when
    /// set: e.g. the observability add-on's `ampWorkspace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration_values: Option<serde_json::Value>,
}

/// An EKS Pod Identity association: pods of `namespace/service_account` get `role_arn`'s
/// credentials from the Pod Identity agent (the role must trust `pods.eks.amazonaws.com`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PodIdentityAssociation {
    /// `a-…` id, the handle of describe and delete.
    pub id: String,
    pub arn: String,
    pub namespace: String,
    pub service_account: String,
    pub role_arn: String,
    pub tags: Tags,
}

/// CreatePodIdentityAssociation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreatePodIdentityAssociation {
    pub region: String,
    pub cluster: String,
    pub namespace: String,
    pub service_account: String,
    pub role_arn: String,
    /// Persisted idempotency token, sent as `clientRequestToken`.
    pub client_request_token: String,
    pub tags: Tags,
}

/// Lowest version InstantStart installs of an EKS add-on, where one is required: SageMaker
/// HyperPod requires the Amazon VPC CNI plugin at 1.18.3 or later and supports no other CNI
/// (SageMaker developer guide, `sagemaker-hyperpod-eks-prerequisites`, "Networking").
pub const ADDON_MINIMUM_VERSIONS: &[(&str, &str)] = &[("vpc-cni", "1.18.3")];

/// The minimum version of `addon` ([`ADDON_MINIMUM_VERSIONS`]), if it has one.
pub fn addon_minimum_version(addon: &str) -> Option<&'static str> {
    ADDON_MINIMUM_VERSIONS.iter().find(|(a, _)| *a == addon).map(|(_, v)| *v)
}

/// `major.minor.patch` of an add-on version such as `v1.20.1-eksbuild.1`.
pub fn addon_semver(version: &str) -> Option<(u64, u64, u64)> {
    let core = version.strip_prefix('v').unwrap_or(version);
    let core = core.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let v = (parts.next()??, parts.next()??, parts.next().unwrap_or(Some(0))?);
    parts.next().is_none().then_some(v)
}

/// Whether add-on version `version` is at least `minimum` (both `[v]major.minor.patch[-build]`);
/// an unparseable version is not.
pub fn addon_version_at_least(version: &str, minimum: &str) -> bool {
    match (addon_semver(version), addon_semver(minimum)) {
        (Some(v), Some(m)) => v >= m,
        _ => false,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateEksAddon {
    pub region: String,
    pub cluster: String,
    pub name: String,
    /// Pinned version; `None` = the default version for the cluster's Kubernetes version, or
    /// the newest compatible one when the default is below [`addon_minimum_version`].
    pub version: Option<String>,
    pub client_request_token: String,
    pub tags: Tags,
    /// The add-on's configuration values (a JSON object), sent as `configurationValues`; it
    /// must satisfy the schema `DescribeAddonConfiguration` returns for the version
    /// ([`crate::addon_schema::validate`] checks it before the create). `None` = the add-on's
    /// defaults.
    #[serde(default)]
    pub configuration_values: Option<serde_json::Value>,
}

/// The configuration schema of one add-on version (`DescribeAddonConfiguration`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AddonConfiguration {
    pub addon: String,
    /// The version the schema belongs to (the one a create without a version would pin).
    pub version: String,
    /// The JSON schema of the add-on's configuration values (EKS returns it as a string; parsed).
    pub schema: serde_json::Value,
}

#[async_trait]
pub trait EksApi: Send + Sync {
    async fn describe_eks_cluster(&self, region: &str, name: &str) -> Result<Option<EksCluster>>;
    async fn list_eks_clusters(&self, region: &str) -> Result<Vec<String>>;
    async fn create_eks_cluster(&self, req: &CreateEksCluster) -> Result<EksCluster>;
    async fn delete_eks_cluster(&self, region: &str, name: &str) -> Result<()>;
    async fn describe_addon(&self, region: &str, cluster: &str, addon: &str) -> Result<Option<EksAddon>>;
    async fn create_addon(&self, req: &CreateEksAddon) -> Result<EksAddon>;
    async fn delete_addon(&self, region: &str, cluster: &str, addon: &str) -> Result<()>;
    /// The Pod Identity associations of `namespace/service_account` (ListPodIdentityAssociations
    /// filtered by both, each described for its role and tags). EKS allows one per service
    /// account, so this is empty or one long.
    async fn list_pod_identity_associations(
        &self,
        region: &str,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> Result<Vec<PodIdentityAssociation>>;
    async fn create_pod_identity_association(
        &self,
        req: &CreatePodIdentityAssociation,
    ) -> Result<PodIdentityAssociation>;
    /// DeletePodIdentityAssociation by id; `NotFound` when it does not exist.
    async fn delete_pod_identity_association(&self, region: &str, cluster: &str, association_id: &str) -> Result<()>;
    /// The configuration schema of `addon` at `version`, or — with `None` — at the version a
    /// create on `cluster` would pin (the default one for the cluster's Kubernetes version).
    async fn describe_addon_configuration(
        &self,
        region: &str,
        cluster: &str,
        addon: &str,
        version: Option<&str>,
    ) -> Result<AddonConfiguration>;
    /// The access entry of `principal_arn` with its associated policies, if any.
    async fn describe_access_entry(
        &self,
        region: &str,
        cluster: &str,
        principal_arn: &str,
    ) -> Result<Option<AccessEntry>>;
    /// Creates the access entry (or adopts ours: an existing entry without our tags is
    /// `AlreadyExists`) and associates every requested policy. A cluster in `CONFIG_MAP`
    /// authentication mode refuses it (`InvalidRequest`).
    async fn ensure_access_entry(&self, req: &EnsureAccessEntry) -> Result<AccessEntry>;
    /// Deletes an access entry (its policy associations go with it); `NotFound` when absent.
    async fn delete_access_entry(&self, region: &str, cluster: &str, principal_arn: &str) -> Result<()>;
}

/// An IAM role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct IamRole {
    pub name: String,
    pub arn: String,
    pub tags: Tags,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateIamRole {
    pub name: String,
    pub trust_policy: serde_json::Value,
    /// Managed policy ARNs to attach.
    pub managed_policies: Vec<String>,
    /// Inline policies by name; scoped to the cluster's resources.
    pub inline_policies: Vec<(String, serde_json::Value)>,
    pub tags: Tags,
}

#[async_trait]
pub trait IamApi: Send + Sync {
    async fn get_role(&self, name: &str) -> Result<Option<IamRole>>;
    async fn create_role(&self, req: &CreateIamRole) -> Result<IamRole>;
    /// Brings an existing role to `req`'s permissions: sets its trust policy to
    /// `req.trust_policy`, attaches every managed policy of `req` and puts every inline policy
    /// with `req`'s document (`req.tags` are not used). Idempotent (all three calls are), so a
    /// role adopted after an interrupted create — `CreateRole` done, its policies not yet — is
    /// completed without being created again. Policies the role holds beyond `req`'s are left
    /// alone. `NotFound` when the role does not exist.
    async fn ensure_role_policies(&self, req: &CreateIamRole) -> Result<()>;
    /// Deletes the role and its inline policies / attachments.
    async fn delete_role(&self, name: &str) -> Result<()>;
    /// The IAM OIDC provider of an issuer URL (e.g. an EKS cluster's), if registered.
    async fn get_oidc_provider(&self, issuer_url: &str) -> Result<Option<OidcProvider>>;
    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> Result<OidcProvider>;
}

/// An IAM OpenID Connect provider (the trust anchor of IRSA service-account roles).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OidcProvider {
    pub arn: String,
    pub url: String,
    pub tags: Tags,
}

/// HyperPod cluster status, normalised; `InService` is the `active` state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HyperPodCluster {
    pub name: String,
    pub arn: String,
    pub region: String,
    pub state: ResourceState,
    pub instance_groups: Vec<HyperPodInstanceGroupStatus>,
    pub node_recovery: crate::spec::NodeRecovery,
    /// Managed tiered checkpointing, when enabled.
    #[serde(default)]
    pub tiered_storage: Option<crate::spec::TieredCheckpointing>,
    /// Managed Karpenter-based autoscaling of the instance groups.
    #[serde(default)]
    pub autoscaling: bool,
    pub tags: Tags,
    /// The EKS cluster that orchestrates it (`Orchestrator.Eks.ClusterArn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eks_cluster_arn: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HyperPodInstanceGroupStatus {
    pub name: String,
    pub instance_type: String,
    pub current_count: u32,
    pub target_count: u32,
    pub status: String,
    /// How the group's capacity is bought (immutable).
    #[serde(default)]
    pub capacity: crate::spec::CapacitySpec,
    /// Network interface mode (immutable).
    #[serde(default)]
    pub interface_mode: crate::spec::InterfaceMode,
    /// Subnets of the group (its placement).
    #[serde(default)]
    pub subnet_ids: Vec<String>,
    /// Security groups of the group's network interfaces (its `OverrideVpcConfig`, else the
    /// cluster's `VpcConfig`).
    #[serde(default)]
    pub security_group_ids: Vec<String>,
    /// Size of the group's EBS volume per instance (`InstanceStorageConfigs`), as described.
    #[serde(default)]
    pub ebs_volume_gb: Option<u32>,
    /// The group's `LifeCycleConfig`, as described.
    #[serde(default)]
    pub lifecycle_script: Option<crate::spec::LifecycleScript>,
    /// The group's `ExecutionRole` ARN, as described.
    #[serde(default)]
    pub execution_role_arn: Option<String>,
    /// The group's `OnStartDeepHealthChecks`, as described.
    #[serde(default)]
    pub deep_health_checks: crate::spec::DeepHealthChecks,
    /// The group's `ThreadsPerCore`, as described.
    #[serde(default)]
    pub threads_per_core: Option<u32>,
    /// Why the group is `Failed`, when the provider says.
    #[serde(default)]
    pub failure: Option<String>,
    /// The group's AMI and release, current and desired, and its last software update.
    #[serde(default)]
    pub software: super::GroupSoftware,
}

/// A HyperPod instance group as sent to CreateCluster, placement already decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HyperPodInstanceGroupRequest {
    pub spec: crate::spec::InstanceGroupSpec,
    pub subnet_id: String,
    pub security_group_ids: Vec<String>,
    pub execution_role_arn: String,
    /// `ThreadsPerCore` to send; `None` = 1 for accelerated types, 2 for CPU types. Set when an
    /// existing group is echoed with its described value.
    #[serde(default)]
    pub threads_per_core: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateHyperPodCluster {
    pub region: String,
    pub name: String,
    pub eks_cluster_arn: String,
    pub node_recovery: crate::spec::NodeRecovery,
    pub instance_groups: Vec<HyperPodInstanceGroupRequest>,
    pub tags: Tags,
}

/// One UpdateCluster call: groups to create or update, groups to delete, cluster settings.
/// Absent settings are left as they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpdateHyperPodCluster {
    pub region: String,
    pub name: String,
    /// Groups to create, or existing groups with their new count (full spec, placement decided).
    pub instance_groups: Vec<HyperPodInstanceGroupRequest>,
    pub instance_groups_to_delete: Vec<String>,
    pub node_recovery: Option<crate::spec::NodeRecovery>,
    /// `Some(Some(..))` enables or changes tiered storage, `Some(None)` disables it.
    pub tiered_storage: Option<Option<crate::spec::TieredCheckpointing>>,
    pub autoscaling: Option<AutoscalingUpdate>,
}

impl UpdateHyperPodCluster {
    /// An update of `name` that changes nothing yet; set the fields to change.
    pub fn of(region: &str, name: &str) -> Self {
        UpdateHyperPodCluster {
            region: region.to_string(),
            name: name.to_string(),
            instance_groups: vec![],
            instance_groups_to_delete: vec![],
            node_recovery: None,
            tiered_storage: None,
            autoscaling: None,
        }
    }
}

/// Managed autoscaling switch; enabling needs the IAM role HyperPod's Karpenter assumes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AutoscalingUpdate {
    pub enabled: bool,
    pub role_arn: Option<String>,
}

/// A batch action on nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeAction {
    Reboot,
    /// Replace the instance (local volumes are lost).
    Replace,
    /// Remove the node from its group (local volumes are lost; the group shrinks).
    Delete,
}

/// A deep health check SageMaker runs on demand (`DeepHealthCheckType` of
/// `StartClusterHealthCheck`): both need an accelerated instance type, connectivity needs EFA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DeepHealthCheck {
    /// Accelerator (GPU/Trainium) stress test of each instance.
    InstanceStress,
    /// EFA connectivity test between the instances.
    InstanceConnectivity,
}

impl DeepHealthCheck {
    /// SageMaker's name of the check.
    pub fn as_str(self) -> &'static str {
        match self {
            DeepHealthCheck::InstanceStress => "InstanceStress",
            DeepHealthCheck::InstanceConnectivity => "InstanceConnectivity",
        }
    }
}

/// One `InstanceGroupHealthCheckConfiguration`: the checks to run on an instance group, on the
/// listed nodes or (empty) on every node of the group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheckTarget {
    pub instance_group: String,
    pub node_ids: Vec<String>,
    pub checks: Vec<DeepHealthCheck>,
}

/// Per-node outcome of a batch action.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct BatchNodeResult {
    pub accepted: Vec<String>,
    /// `(node id, reason)` of nodes the service refused.
    pub failed: Vec<(String, String)>,
}

/// One node of a HyperPod cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterNode {
    pub instance_id: String,
    pub instance_group: String,
    pub instance_type: String,
    /// Running, Pending, Failure, ShuttingDown, SystemUpdating, DeepHealthCheckInProgress.
    pub status: String,
    pub availability_zone: String,
}

/// A SageMaker training plan's reservation, as far as placement and preflight need it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TrainingPlan {
    pub arn: String,
    /// Pending, Active, Scheduled, Expired, Failed.
    pub status: String,
    pub availability_zone: String,
    pub instance_type: String,
    pub instance_count: u32,
}

#[async_trait]
pub trait HyperPodApi: Send + Sync {
    async fn describe_training_plan(&self, region: &str, arn: &str) -> Result<Option<TrainingPlan>>;
    async fn describe_hyperpod_cluster(&self, region: &str, name: &str) -> Result<Option<HyperPodCluster>>;
    async fn list_hyperpod_clusters(&self, region: &str) -> Result<Vec<String>>;
    async fn create_hyperpod_cluster(&self, req: &CreateHyperPodCluster) -> Result<HyperPodCluster>;
    async fn delete_hyperpod_cluster(&self, region: &str, name: &str) -> Result<()>;
    async fn list_cluster_nodes(&self, region: &str, cluster: &str) -> Result<Vec<ClusterNode>>;
    /// UpdateCluster: add/scale/delete groups, node recovery, tiered storage, autoscaling.
    async fn update_hyperpod_cluster(&self, req: &UpdateHyperPodCluster) -> Result<HyperPodCluster>;
    /// StartClusterHealthCheck: deep health checks on demand. The checked nodes show
    /// `DeepHealthCheckInProgress` until they finish (then `Running`, or recovered as the
    /// cluster's node recovery says when they fail).
    async fn start_cluster_health_check(
        &self,
        region: &str,
        cluster: &str,
        targets: &[HealthCheckTarget],
    ) -> Result<()>;
    /// UpdateClusterSoftware: moves instance groups (all when none is named) to a HyperPod
    /// AMI release or an AMI, rolling in batches. The cluster shows `SystemUpdating` and each
    /// group's `SoftwareUpdateStatus` follows the update; a cluster not InService (another
    /// update running) is a `Conflict`.
    async fn update_cluster_software(&self, req: &super::UpdateClusterSoftware) -> Result<()>;
    /// BatchRebootClusterNodes / BatchReplaceClusterNodes / BatchDeleteClusterNodes.
    async fn batch_node_action(
        &self,
        region: &str,
        cluster: &str,
        action: NodeAction,
        node_ids: &[String],
    ) -> Result<BatchNodeResult>;
    /// ListClusterEvents: one page of the cluster's events, newest first; `query.cursor` is the
    /// service's `NextToken` (see [`super::hyperpod_reads`]). An unknown cluster is `NotFound`.
    async fn list_cluster_events(
        &self,
        region: &str,
        cluster: &str,
        query: &super::ClusterEventQuery,
    ) -> Result<super::ClusterEventPage>;
    /// DescribeClusterNode: one node in detail; `None` when the cluster has no node `node_id`.
    /// An unknown cluster is `NotFound`.
    async fn describe_cluster_node(
        &self,
        region: &str,
        cluster: &str,
        node_id: &str,
    ) -> Result<Option<super::ClusterNodeDetail>>;
    /// ListTrainingPlans: every training plan of the account in the region (all pages).
    async fn list_training_plans(&self, region: &str) -> Result<Vec<super::TrainingPlanSummary>>;
    /// SearchTrainingPlanOfferings for HyperPod clusters: what could be reserved (a read; no
    /// plan is bought). The query is checked first ([`super::OfferingQuery::check`]).
    async fn search_training_plan_offerings(
        &self,
        region: &str,
        query: &super::OfferingQuery,
    ) -> Result<Vec<super::TrainingPlanOffering>>;
}

/// An S3 bucket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Bucket {
    pub name: String,
    pub region: String,
    pub tags: Tags,
}

/// A bucket encrypted at rest, with public access blocked, tagged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateBucket {
    pub region: String,
    pub name: String,
    pub tags: Tags,
}

/// Most entries (prefixes and objects together) one [`S3Api::list_objects`] call returns.
pub const LIST_OBJECTS_LIMIT: usize = 1000;

/// What an entry of a listing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum S3EntryKind {
    /// A common prefix ("folder"), ending with `/`.
    Prefix,
    /// An object.
    Object,
}

/// One entry of a one-level listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct S3Entry {
    /// Full key (for a prefix, ending with `/`).
    pub key: String,
    pub kind: S3EntryKind,
    /// Object size; absent for prefixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

/// One level of a bucket under `prefix` (delimiter `/`): common prefixes, then objects, each in
/// key order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectListing {
    pub bucket: String,
    pub prefix: String,
    pub entries: Vec<S3Entry>,
    /// More entries follow: give this token back to [`S3Api::list_objects`] for the next
    /// page (S3's `NextContinuationToken`; opaque).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// A small object written in one PutObject (e.g. a lifecycle script).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PutObject {
    pub bucket: String,
    pub key: String,
    pub body: Vec<u8>,
    pub content_type: String,
}

/// What HeadObject tells about an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ObjectHead {
    pub bucket: String,
    pub key: String,
    pub size_bytes: u64,
    /// Hex SHA-256 of the body, when the object was written with a SHA-256 checksum.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// Hex SHA-256 of `body` (what [`S3Api::put_object`] sends as the checksum).
pub fn sha256_hex(body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(body).iter().map(|b| format!("{b:02x}")).collect()
}

#[async_trait]
pub trait S3Api: Send + Sync {
    async fn describe_bucket(&self, name: &str) -> Result<Option<Bucket>>;
    async fn create_bucket(&self, req: &CreateBucket) -> Result<Bucket>;
    async fn delete_bucket(&self, name: &str) -> Result<()>;
    /// ListObjectsV2 with delimiter `/`: one page of the prefixes and objects directly under
    /// `prefix` (`""` = the top level), at most [`LIST_OBJECTS_LIMIT`] entries, from the start
    /// or from `token` (a previous page's [`ObjectListing::next_token`]). A missing bucket is
    /// `NotFound`; a token S3 does not accept is `InvalidRequest`.
    async fn list_objects(&self, bucket: &str, prefix: &str, token: Option<&str>) -> Result<ObjectListing>;
    /// PutObject with a SHA-256 checksum of the body (S3 refuses a body that does not match).
    /// A missing bucket is `NotFound`.
    async fn put_object(&self, req: &PutObject) -> Result<ObjectHead>;
    /// HeadObject (checksum mode on): `None` when the object does not exist — S3 answers a bare
    /// 404 for a missing bucket too, so that is `None` as well.
    async fn head_object(&self, bucket: &str, key: &str) -> Result<Option<ObjectHead>>;
    /// DeleteObject (used only for InstantStart's own lifecycle scripts, before deleting a
    /// bucket it created). Deleting a missing key succeeds, as in S3.
    async fn delete_object(&self, bucket: &str, key: &str) -> Result<()>;
}

/// The whole AWS side. Implemented by any type implementing every AWS trait.
/// Includes [`MlflowTracking`](super::MlflowTracking): tracking servers are SageMaker resources,
/// [`FsxApi`](super::FsxApi): FSx for Lustre file systems, and [`AmpApi`](super::AmpApi):
/// Amazon Managed Service for Prometheus workspaces.
pub trait AwsCloud:
    IdentityApi
    + QuotaApi
    + NetworkApi
    + EksApi
    + IamApi
    + HyperPodApi
    + S3Api
    + super::MlflowTracking
    + super::TaskGovernanceApi
    + super::FsxApi
    + super::AmpApi
{
}

impl<T> AwsCloud for T where
    T: IdentityApi
        + QuotaApi
        + NetworkApi
        + EksApi
        + IamApi
        + HyperPodApi
        + S3Api
        + super::MlflowTracking
        + super::TaskGovernanceApi
        + super::FsxApi
        + super::AmpApi
{
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_entries_name_the_role_behind_a_session() {
        for (caller, principal) in [
            (
                "arn:aws:sts::123456789012:assumed-role/InstantStartRole/i-0abc",
                Some("arn:aws:iam::123456789012:role/InstantStartRole"),
            ),
            ("arn:aws-us-gov:sts::123456789012:assumed-role/R/s", Some("arn:aws-us-gov:iam::123456789012:role/R")),
            ("arn:aws:iam::123456789012:user/alice", Some("arn:aws:iam::123456789012:user/alice")),
            ("arn:aws:iam::123456789012:role/ops/Admin", Some("arn:aws:iam::123456789012:role/ops/Admin")),
            ("arn:aws:sts::123456789012:federated-user/bob", None),
            ("nonsense", None),
        ] {
            assert_eq!(access_entry_principal(caller).as_deref(), principal, "{caller}");
        }
    }

    #[test]
    fn addon_versions_compare_by_major_minor_patch() {
        let cases: &[(&str, &str, bool)] = &[
            ("v1.20.1-eksbuild.1", "1.18.3", true),
            ("v1.18.3-eksbuild.3", "1.18.3", true),
            ("v1.18.2-eksbuild.1", "1.18.3", false),
            ("v1.9.10-eksbuild.1", "1.18.3", false),
            ("v2.0.0", "1.18.3", true),
            ("1.18.10", "v1.18.3", true),
            ("latest", "1.18.3", false),
            ("v1.18", "1.18.3", false),
        ];
        for (version, minimum, want) in cases {
            assert_eq!(addon_version_at_least(version, minimum), *want, "{version} >= {minimum}");
        }
        assert_eq!(addon_minimum_version("vpc-cni"), Some("1.18.3"));
        assert_eq!(addon_minimum_version("cert-manager"), None);
    }
}

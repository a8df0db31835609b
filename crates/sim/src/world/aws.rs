//! The AWS resources of the simulated account as the world persists them: VPCs and subnets,
//! EKS clusters, IAM roles and OIDC providers, S3 buckets, HyperPod clusters (groups, instance
//! slots, events, software updates), FSx for Lustre file systems, Prometheus workspaces and task
//! governance's scheduler configs and compute quotas. Only data and the lifecycle questions the
//! world's garbage collection asks; the services that read and change them are the modules named
//! after them (`crate::network`, `crate::eks`, …).

use crate::base::{Lifecycle, Phase};
use instantstart_core::provider::{
    ClusterEventLevel, ClusterEventResource, LustreDeploymentType, QuotaConfig, SchedulerPolicy, Tags,
};
use instantstart_core::spec::NodeRecovery;
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OidcProviderRec {
    pub arn: String,
    pub url: String,
    pub tags: Tags,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct VpcRec {
    pub id: String,
    pub region: String,
    pub name: Option<String>,
    pub cidrs: Vec<Ipv4Net>,
    pub tags: Tags,
    /// The EFA security group `create_network` made (seeded VPCs have none).
    pub security_group_id: Option<String>,
    pub life: Lifecycle,
    /// VPC endpoints in the VPC: the S3 gateway endpoint `create_network` made, and any
    /// seeded ones (a test's "someone else's endpoint").
    #[serde(default)]
    pub endpoints: Vec<VpcEndpointRec>,
    /// Load balancers left in the VPC by a Kubernetes `LoadBalancer` Service that outlived the
    /// controller that provisioned it ([`crate::kube::orphan_load_balancers`]); their network
    /// interfaces keep the subnets, and so the VPC, from being deleted.
    #[serde(default)]
    pub load_balancers: Vec<OrphanLoadBalancerRec>,
}

/// A load balancer nobody will delete: its Service outlived the controller (or the cluster).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OrphanLoadBalancerRec {
    /// Its DNS name, as the Service's `status.loadBalancer.ingress[0].hostname` had it.
    pub dns_name: String,
    /// The subnets holding its network interfaces.
    pub subnet_ids: Vec<String>,
    /// EKS cluster and `namespace/name` of the Service it was provisioned for.
    pub eks_cluster: String,
    pub service: String,
}

/// A VPC endpoint (only `Gateway` endpoints are modelled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct VpcEndpointRec {
    pub id: String,
    /// e.g. `com.amazonaws.us-east-1.s3`.
    pub service_name: String,
    pub endpoint_type: String,
    pub route_table_ids: Vec<String>,
    pub tags: Tags,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SubnetRec {
    pub id: String,
    pub vpc_id: String,
    pub region: String,
    pub name: Option<String>,
    pub cidr: Ipv4Net,
    pub availability_zone: String,
    pub public: bool,
    pub tags: Tags,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EksRec {
    pub name: String,
    pub region: String,
    pub arn: String,
    pub version: String,
    pub role_arn: String,
    pub vpc_id: String,
    pub subnet_ids: Vec<String>,
    pub client_request_token: String,
    pub tags: Tags,
    /// `publicAccessCidrs` as created (empty: EKS's default, every address).
    #[serde(default)]
    pub public_access_cidrs: Vec<String>,
    /// 32 upper-case hex digits used in the endpoint and OIDC issuer.
    pub uid: String,
    pub security_group_id: String,
    pub life: Lifecycle,
    pub addons: BTreeMap<String, AddonRec>,
    /// EKS Pod Identity associations by id (`a-…`); they go with the cluster.
    #[serde(default)]
    pub pod_identity: BTreeMap<String, PodIdentityRec>,
    /// `API`, `API_AND_CONFIG_MAP` or `CONFIG_MAP`.
    #[serde(default = "default_authentication_mode")]
    pub authentication_mode: String,
    /// Access entries by principal ARN: who the Kubernetes API admits.
    #[serde(default)]
    pub access_entries: BTreeMap<String, AccessEntryRec>,
    /// Whether the Kubernetes API admits only principals with an access entry (every cluster
    /// since access entries are simulated; a world saved before admits everyone).
    #[serde(default)]
    pub access_checked: bool,
}

fn default_authentication_mode() -> String {
    "API_AND_CONFIG_MAP".into()
}

impl EksRec {
    /// Whether the cluster's Kubernetes API admits `principal`.
    pub(crate) fn admits(&self, principal: &str) -> bool {
        !self.access_checked || self.access_entries.contains_key(principal)
    }
}

/// An EKS access entry with its associated access policies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AccessEntryRec {
    pub principal_arn: String,
    pub kind: String,
    pub client_request_token: String,
    /// `(policy ARN, namespaces)`; no namespaces = cluster scope.
    pub policies: Vec<(String, Vec<String>)>,
    pub tags: Tags,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PodIdentityRec {
    pub id: String,
    pub arn: String,
    pub namespace: String,
    pub service_account: String,
    pub role_arn: String,
    pub client_request_token: String,
    pub tags: Tags,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AddonRec {
    pub name: String,
    pub version: String,
    pub client_request_token: String,
    pub tags: Tags,
    pub life: Lifecycle,
    /// The `configurationValues` it was created with.
    #[serde(default)]
    pub configuration_values: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RoleRec {
    pub name: String,
    pub arn: String,
    pub trust_policy: serde_json::Value,
    pub managed_policies: Vec<String>,
    pub inline_policies: Vec<(String, serde_json::Value)>,
    pub tags: Tags,
    /// ARN of the role's permissions boundary.
    #[serde(default)]
    pub permissions_boundary: Option<String>,
}

impl RoleRec {
    /// Whether `service` may assume the role when it calls `sts:AssumeRole` with the condition
    /// context `context` (e.g. `aws:SourceAccount`, `aws:SourceArn`): some `Allow` statement
    /// names the service and every condition of it holds. A condition on a key the service does
    /// not pass, or with an operator this model does not know, fails, as in IAM ("IAM JSON policy
    /// elements: Condition operators"; a missing key makes a `String*`/`Arn*` condition false).
    pub fn assumable_by(&self, service: &str, context: &[(&str, &str)]) -> bool {
        let statements = match &self.trust_policy["Statement"] {
            serde_json::Value::Array(a) => a.clone(),
            s @ serde_json::Value::Object(_) => vec![s.clone()],
            _ => vec![],
        };
        statements.iter().any(|s| {
            let names = |v: &serde_json::Value| match v {
                serde_json::Value::String(x) => vec![x.clone()],
                serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
                _ => vec![],
            };
            s["Effect"] == "Allow"
                && names(&s["Principal"]["Service"]).iter().any(|p| p == service)
                && names(&s["Action"]).iter().any(|a| a == "sts:AssumeRole" || a == "sts:*")
                && s.get("Condition").and_then(serde_json::Value::as_object).is_none_or(|ops| {
                    ops.iter().all(|(op, keys)| {
                        keys.as_object().is_some_and(|keys| {
                            keys.iter().all(|(key, wanted)| {
                                let Some((_, got)) = context.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)) else {
                                    return false;
                                };
                                let wanted = names(wanted);
                                match op.as_str() {
                                    "StringEquals" | "ArnEquals" => wanted.iter().any(|w| w == got),
                                    "StringLike" | "ArnLike" => wanted.iter().any(|w| glob(w, got)),
                                    _ => false,
                                }
                            })
                        })
                    })
                })
        })
    }

    /// Whether the trust policy lets `service` (e.g. `eks.amazonaws.com`) assume the role.
    pub fn trusts(&self, service: &str) -> bool {
        fn find(v: &serde_json::Value, service: &str) -> bool {
            match v {
                serde_json::Value::String(s) => s == service,
                serde_json::Value::Array(a) => a.iter().any(|x| find(x, service)),
                serde_json::Value::Object(o) => o.values().any(|x| find(x, service)),
                _ => false,
            }
        }
        find(&self.trust_policy, service)
    }
}

/// IAM's `*`/`?` wildcard match (`StringLike`, `ArnLike`).
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BucketRec {
    pub name: String,
    pub region: String,
    pub tags: Tags,
    /// Objects by key: what simulated workloads wrote through the bucket mount.
    #[serde(default)]
    pub objects: BTreeMap<String, ObjectRec>,
    /// The owning account when it is not the simulated account's own (a bucket of another
    /// account that shares the global namespace); `None` = ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// An object of a simulated bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ObjectRec {
    pub size: u64,
    /// Simulated time it was written.
    pub written_at: f64,
    /// Hex SHA-256 of the body, for objects written with PutObject (a checksum was sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HyperPodRec {
    pub name: String,
    pub region: String,
    pub arn: String,
    pub eks_arn: String,
    pub node_recovery: NodeRecovery,
    pub groups: Vec<GroupRec>,
    pub tags: Tags,
    /// Seed of the cluster's instance ids.
    pub uid: u64,
    pub life: Lifecycle,
    /// An UpdateCluster in progress ends at this simulated time (the cluster shows Updating).
    #[serde(default)]
    pub updating_until: Option<f64>,
    #[serde(default)]
    pub tiered_storage: Option<instantstart_core::spec::TieredCheckpointing>,
    #[serde(default)]
    pub autoscaling: bool,
    /// What happened to the cluster, its groups and instances (`ListClusterEvents`), some of
    /// it in the future: see [`crate::hyperpod_events`].
    #[serde(default)]
    pub events: Vec<EventRec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GroupRec {
    pub name: String,
    pub instance_type: String,
    pub count: u32,
    pub subnet_id: String,
    /// The security groups the group was created with.
    #[serde(default)]
    pub security_group_ids: Vec<String>,
    pub availability_zone: String,
    pub deep_health_checks: bool,
    pub training_plan: Option<String>,
    #[serde(default)]
    pub spot: bool,
    #[serde(default)]
    pub efa_only: bool,
    /// Explicit instance slots, once the group changed after the cluster was created (added,
    /// scaled, nodes rebooted/replaced/deleted). Empty: `count` slots implied by creation time.
    #[serde(default)]
    pub slots: Vec<SlotRec>,
    /// What the group was created with (DescribeCluster returns it): EBS size, lifecycle
    /// configuration, execution role, deep health checks, threads per core.
    #[serde(default)]
    pub ebs_volume_gb: Option<u32>,
    #[serde(default)]
    pub lifecycle: Option<instantstart_core::spec::LifecycleScript>,
    #[serde(default)]
    pub execution_role: String,
    #[serde(default)]
    pub checks: instantstart_core::spec::DeepHealthChecks,
    #[serde(default)]
    pub threads_per_core: Option<u32>,
    /// Set when the group's instances failed to provision (e.g. their lifecycle script could
    /// not be read): the group is `Failed`, with no instances.
    #[serde(default)]
    pub failure: Option<String>,
    /// Karpenter: since when the group's nodes have been empty (consolidation clock).
    #[serde(default)]
    pub idle_since: Option<f64>,
    /// The HyperPod AMI release the group runs (absent: the launch release), or the custom
    /// AMI it was moved to, as of its last finished software update.
    #[serde(default)]
    pub image_release: Option<String>,
    #[serde(default)]
    pub image_id: Option<String>,
    /// The group's last software update (UpdateClusterSoftware).
    #[serde(default)]
    pub software_update: Option<SoftwareUpdateRec>,
}

/// One instance position of a group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SlotRec {
    /// Simulated time the instance starts to appear (Pending).
    pub appear_at: f64,
    /// Bumped by a replace: a new instance id.
    pub generation: u32,
    pub removed: bool,
    /// A reboot or replace in progress ends at this simulated time (the node shows Pending).
    pub pending_until: Option<f64>,
    /// When Karpenter consolidated the instance away (`removed` is then set too).
    #[serde(default)]
    pub removed_at: Option<f64>,
    /// A deep health check started on demand (StartClusterHealthCheck) ends at this time.
    #[serde(default)]
    pub check_until: Option<f64>,
    /// The on-demand check fails this instance (fault `ResourceFails` on the call): afterwards
    /// it is replaced (node recovery `Automatic`) or shows `Failure` (`None`).
    #[serde(default)]
    pub check_fails: bool,
}

/// One recorded event of a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct EventRec {
    /// Order of recording (ties of `at` are shown in this order).
    pub seq: u64,
    /// Simulated time it happens.
    pub at: f64,
    pub resource: ClusterEventResource,
    pub group: Option<String>,
    pub instance: Option<String>,
    pub level: ClusterEventLevel,
    pub description: String,
}

/// One group's software update (persisted with the group).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SoftwareUpdateRec {
    /// What the group ran before: a release, or a custom AMI.
    pub from_release: Option<String>,
    pub from_image: Option<String>,
    /// What it moves to.
    pub to_release: Option<String>,
    pub to_image: Option<String>,
    pub start: f64,
    pub end: f64,
    /// Instances per batch, instances in the group, seconds per batch and between batches.
    pub batch: u32,
    pub count: u32,
    pub wait: f64,
    /// The update fails after its first batch and rolls back (ends `RollbackComplete`).
    pub fails: bool,
}

/// A simulated file system, by id in the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileSystemRec {
    pub id: String,
    pub region: String,
    pub client_request_token: String,
    pub deployment_type: LustreDeploymentType,
    pub storage_capacity_gib: u32,
    pub per_unit_storage_throughput: Option<u32>,
    pub vpc_id: String,
    pub subnet_id: String,
    pub security_group_ids: Vec<String>,
    pub mount_name: String,
    /// `FileSystemTypeVersion` as created; FSx's default for the type when none was sent.
    #[serde(default = "lustre_2_10")]
    pub file_system_type_version: String,
    pub tags: Tags,
    pub life: Lifecycle,
}

fn lustre_2_10() -> String {
    "2.10".into()
}

/// A simulated data repository association, by id in the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DataRepositoryRec {
    pub id: String,
    pub region: String,
    pub file_system_id: String,
    pub client_request_token: String,
    pub file_system_path: String,
    pub data_repository_path: String,
    pub import_events: Vec<instantstart_core::provider::S3Event>,
    pub export_events: Vec<instantstart_core::provider::S3Event>,
    pub tags: Tags,
    pub life: Lifecycle,
}

impl DataRepositoryRec {
    /// FSx's `Lifecycle` and failure message at `now`; `None` once it is gone.
    pub(crate) fn lifecycle(&self, now: f64) -> Option<(&'static str, Option<String>)> {
        Some(match self.life.phase(now) {
            Phase::Creating => ("CREATING", None),
            Phase::Active => ("AVAILABLE", None),
            Phase::Failed(reason) => ("FAILED", Some(reason)),
            Phase::Deleting => ("DELETING", None),
            Phase::Gone => return None,
        })
    }
}

impl FileSystemRec {
    /// FSx's `Lifecycle` and failure message at `now`; `None` once it is gone.
    pub(crate) fn lifecycle(&self, now: f64) -> Option<(&'static str, Option<String>)> {
        Some(match self.life.phase(now) {
            Phase::Creating => ("CREATING", None),
            Phase::Active => ("AVAILABLE", None),
            Phase::Failed(reason) => ("FAILED", Some(reason)),
            Phase::Deleting => ("DELETING", None),
            Phase::Gone => return None,
        })
    }
}

/// A simulated workspace, by id in the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WorkspaceRec {
    pub id: String,
    pub region: String,
    pub alias: String,
    pub arn: String,
    pub client_token: String,
    pub tags: Tags,
    pub life: Lifecycle,
}

impl WorkspaceRec {
    /// AMP's `statusCode` at `now`; `None` once it is gone.
    pub(crate) fn status(&self, now: f64) -> Option<&'static str> {
        Some(match self.life.phase(now) {
            Phase::Creating => "CREATING",
            Phase::Active => "ACTIVE",
            Phase::Failed(_) => "CREATION_FAILED",
            Phase::Deleting => "DELETING",
            Phase::Gone => return None,
        })
    }
}

/// A simulated cluster scheduler config, by id in the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SchedulerConfigRec {
    pub id: String,
    pub arn: String,
    pub name: String,
    pub region: String,
    pub cluster_arn: String,
    pub version: i32,
    pub policy: SchedulerPolicy,
    pub tags: Tags,
    pub life: Lifecycle,
    /// An update under way ends at this simulated time.
    #[serde(default)]
    pub updating_until: Option<f64>,
}

/// A simulated compute quota, by id in the world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ComputeQuotaRec {
    pub id: String,
    pub arn: String,
    pub name: String,
    pub region: String,
    pub cluster_arn: String,
    pub version: i32,
    pub config: QuotaConfig,
    pub tags: Tags,
    pub life: Lifecycle,
    #[serde(default)]
    pub updating_until: Option<f64>,
}

impl SchedulerConfigRec {
    pub(crate) fn exists(&self, now: f64) -> bool {
        self.life.exists(now)
    }
}

impl ComputeQuotaRec {
    pub(crate) fn exists(&self, now: f64) -> bool {
        self.life.exists(now)
    }
}

//! The persisted state of the simulated account, and the lifecycle of its resources.
//!
//! Everything a restart must keep lives in [`World`]: resources with the simulated time they
//! were created (states are computed from it on read, see [`Lifecycle::phase`]), Kubernetes
//! objects, call counters, the random state and the clock reading at the last save.

use crate::kube::KubeWorld;
use chrono::{DateTime, Utc};
use instantstart_core::provider::{ResourceState, Tags, TrainingPlan};
use instantstart_core::spec::NodeRecovery;
use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the state file format.
pub(crate) const FORMAT_VERSION: u32 = 1;

/// The simulated account.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct World {
    pub format: u32,
    pub account: String,
    /// Wall-clock time at which simulated time was 0; simulated timestamps shown to users
    /// (Kubernetes `creationTimestamp`) are `epoch + simulated seconds`.
    pub epoch: DateTime<Utc>,
    /// Simulated time at the last save.
    pub sim_now: f64,
    /// Wall-clock time of the last save (for a shared world: the store's clock).
    pub saved_at: DateTime<Utc>,
    /// Simulated seconds per wall-clock second of a shared world (every replica runs at it);
    /// `None` in a world of one process, whose speed is its configuration's.
    #[serde(default)]
    pub speed: Option<f64>,
    /// State of the SplitMix64 generator (ids and fault rolls).
    pub rng: u64,
    /// Calls that reached the service, by API name.
    pub counters: BTreeMap<String, u64>,
    /// Injected faults, by API name.
    #[serde(default)]
    pub injected: BTreeMap<String, u64>,
    pub vpcs: BTreeMap<String, VpcRec>,
    pub subnets: BTreeMap<String, SubnetRec>,
    /// By `region/name`.
    pub eks: BTreeMap<String, EksRec>,
    pub roles: BTreeMap<String, RoleRec>,
    pub buckets: BTreeMap<String, BucketRec>,
    /// By `region/name`.
    pub hyperpod: BTreeMap<String, HyperPodRec>,
    /// By ARN.
    pub training_plans: BTreeMap<String, TrainingPlan>,
    /// Raised (or lowered) HyperPod quotas by `region/instance type`.
    pub quotas: BTreeMap<String, u32>,
    /// Kubernetes worlds by `region/eks cluster name`.
    pub kube: BTreeMap<String, KubeWorld>,
    /// IAM OIDC providers by issuer URL.
    #[serde(default)]
    pub oidc_providers: BTreeMap<String, OidcProviderRec>,
    /// SageMaker managed MLflow tracking servers by `region/name`.
    #[serde(default)]
    pub mlflow_servers: BTreeMap<String, crate::mlflow::TrackingServerRec>,
    /// SageMaker cluster scheduler configs (task governance) by id.
    #[serde(default)]
    pub scheduler_configs: BTreeMap<String, crate::governance::SchedulerConfigRec>,
    /// SageMaker compute quotas (task governance) by id.
    #[serde(default)]
    pub compute_quotas: BTreeMap<String, crate::governance::ComputeQuotaRec>,
    /// FSx for Lustre file systems by id.
    #[serde(default)]
    pub file_systems: BTreeMap<String, crate::fsx::FileSystemRec>,
    /// Amazon Managed Service for Prometheus workspaces by id.
    #[serde(default)]
    pub prometheus_workspaces: BTreeMap<String, crate::amp::WorkspaceRec>,
    /// The permissions boundary of the roles the control plane creates (what the adapter
    /// sends with `CreateRole` and `PutRolePermissionsBoundary`), and the one the control
    /// plane's own policy demands (the template's `iam:PermissionsBoundary` condition); see
    /// [`crate::SimCloud::set_role_boundary`].
    #[serde(default)]
    pub role_boundary: RoleBoundary,
}

/// [`World::role_boundary`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RoleBoundary {
    /// Attached to every role created or adopted.
    pub attached: Option<String>,
    /// IAM allows `CreateRole`, `PutRolePermissionsBoundary`, `PutRolePolicy` and
    /// `AttachRolePolicy` only with this boundary on the role.
    pub required: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct OidcProviderRec {
    pub arn: String,
    pub url: String,
    pub tags: Tags,
}

/// Key of a regional resource.
pub(crate) fn rkey(region: &str, name: &str) -> String {
    format!("{region}/{name}")
}

impl World {
    pub fn new(account: String, seed: u64) -> Self {
        let now = Utc::now();
        World {
            format: FORMAT_VERSION,
            account,
            epoch: now,
            sim_now: 0.0,
            saved_at: now,
            speed: None,
            rng: seed,
            counters: BTreeMap::new(),
            injected: BTreeMap::new(),
            vpcs: BTreeMap::new(),
            subnets: BTreeMap::new(),
            eks: BTreeMap::new(),
            roles: BTreeMap::new(),
            buckets: BTreeMap::new(),
            hyperpod: BTreeMap::new(),
            training_plans: BTreeMap::new(),
            quotas: BTreeMap::new(),
            kube: BTreeMap::new(),
            oidc_providers: BTreeMap::new(),
            mlflow_servers: BTreeMap::new(),
            scheduler_configs: BTreeMap::new(),
            compute_quotas: BTreeMap::new(),
            file_systems: BTreeMap::new(),
            prometheus_workspaces: BTreeMap::new(),
            role_boundary: RoleBoundary::default(),
        }
    }

    pub fn count(&mut self, api: &str) {
        self.count_n(api, 1);
    }

    pub fn count_n(&mut self, api: &str, n: u64) {
        if n > 0 {
            *self.counters.entry(api.to_string()).or_insert(0) += n;
        }
    }

    /// Next 64 random bits (SplitMix64; the state is persisted so ids never repeat).
    pub fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.rng)
    }

    /// Uniform in [0, 1).
    pub fn roll(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An AWS-style id: `prefix-0` followed by 16 hex digits.
    pub fn id(&mut self, prefix: &str) -> String {
        format!("{prefix}-0{:016x}", self.next_u64())
    }

    /// `n` random hex digits (upper case when `upper`).
    pub fn hex(&mut self, n: usize, upper: bool) -> String {
        let mut s = String::new();
        while s.len() < n {
            let x = self.next_u64();
            s.push_str(&if upper { format!("{x:016X}") } else { format!("{x:016x}") });
        }
        s.truncate(n);
        s
    }

    /// Wall-clock time shown for simulated time `t`.
    pub fn display_time(&self, t: f64) -> DateTime<Utc> {
        self.epoch + chrono::Duration::milliseconds((t * 1000.0) as i64)
    }

    /// Kubernetes timestamp (RFC 3339, seconds) for simulated time `t`.
    pub fn k8s_time(&self, t: f64) -> String {
        self.display_time(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }

    /// Removes resources whose deletion has completed (and what they took with them).
    pub fn settle(&mut self, now: f64) {
        let gone_vpcs: Vec<String> =
            self.vpcs.iter().filter(|(_, v)| v.life.phase(now) == Phase::Gone).map(|(k, _)| k.clone()).collect();
        for id in gone_vpcs {
            self.vpcs.remove(&id);
            self.subnets.retain(|_, s| s.vpc_id != id);
        }
        let gone_eks: Vec<String> =
            self.eks.iter().filter(|(_, c)| c.life.phase(now) == Phase::Gone).map(|(k, _)| k.clone()).collect();
        for key in gone_eks {
            // The cluster's load balancer Services outlive its controllers.
            crate::kube::orphan_load_balancers(self, &key, now, false);
            self.eks.remove(&key);
            self.kube.remove(&key);
        }
        for c in self.eks.values_mut() {
            c.addons.retain(|_, a| a.life.phase(now) != Phase::Gone);
        }
        self.hyperpod.retain(|_, h| h.life.phase(now) != Phase::Gone);
        self.mlflow_servers.retain(|_, r| r.exists(now));
        self.scheduler_configs.retain(|_, r| r.exists(now));
        self.compute_quotas.retain(|_, r| r.exists(now));
        self.file_systems.retain(|_, r| r.lifecycle(now).is_some());
        self.prometheus_workspaces.retain(|_, r| r.status(now).is_some());
        crate::kube::write_outputs(self, now);
    }

    /// The role named by an IAM role ARN (`arn:aws:iam::<account>:role/<path/>name`).
    pub fn role_by_arn(&self, arn: &str) -> Option<&RoleRec> {
        let name = arn.strip_prefix("arn:aws:iam::")?.split_once(":role/")?.1.rsplit('/').next()?;
        self.roles.get(name).filter(|r| r.arn == arn)
    }

    /// The EKS cluster with this ARN, if it exists (deleting ones included).
    pub fn eks_by_arn(&self, arn: &str) -> Option<&EksRec> {
        self.eks.values().find(|c| c.arn == arn)
    }
}

/// SplitMix64 finaliser: a good 64-bit mixing function.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stable 64-bit hash of some strings (FNV-1a, then mixed); the same on every run.
pub(crate) fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0xff)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    mix(h)
}

/// Where a resource is in its life.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Phase {
    Creating,
    Active,
    Failed(String),
    Deleting,
    /// Deletion finished; the resource no longer exists.
    Gone,
}

/// When a resource was created, how long it takes to become ready, and whether it is failing or
/// being deleted. All times are simulated seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Lifecycle {
    pub created_at: f64,
    pub ready_after: f64,
    #[serde(default)]
    pub failure: Option<Failure>,
    #[serde(default)]
    pub deleting: Option<Deleting>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Failure {
    /// Seconds after creation.
    pub after: f64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Deleting {
    pub since: f64,
    pub takes: f64,
}

impl Lifecycle {
    pub fn new(now: f64, ready_after: f64) -> Self {
        Lifecycle { created_at: now, ready_after, failure: None, deleting: None }
    }

    /// Fails after `after` seconds unless an earlier failure is already planned.
    pub fn fail_after(&mut self, after: f64, reason: impl Into<String>) {
        if self.failure.as_ref().is_none_or(|f| f.after > after) {
            self.failure = Some(Failure { after, reason: reason.into() });
        }
    }

    pub fn age(&self, now: f64) -> f64 {
        now - self.created_at
    }

    pub fn phase(&self, now: f64) -> Phase {
        if let Some(d) = &self.deleting {
            return if now >= d.since + d.takes { Phase::Gone } else { Phase::Deleting };
        }
        let age = self.age(now);
        if let Some(f) = &self.failure
            && age >= f.after
        {
            return Phase::Failed(f.reason.clone());
        }
        if age >= self.ready_after { Phase::Active } else { Phase::Creating }
    }

    pub fn state(&self, now: f64) -> ResourceState {
        match self.phase(now) {
            Phase::Creating => ResourceState::Creating,
            Phase::Active => ResourceState::Active,
            Phase::Failed(reason) => ResourceState::Failed { reason },
            Phase::Deleting | Phase::Gone => ResourceState::Deleting,
        }
    }

    /// Whether the resource still exists (not gone).
    pub fn exists(&self, now: f64) -> bool {
        self.phase(now) != Phase::Gone
    }

    pub fn is_deleting(&self) -> bool {
        self.deleting.is_some()
    }

    pub fn start_deleting(&mut self, now: f64, takes: f64) {
        if self.deleting.is_none() {
            self.deleting = Some(Deleting { since: now, takes });
        }
    }
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
    pub events: Vec<crate::hyperpod_events::EventRec>,
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
    pub software_update: Option<crate::software_update::SoftwareUpdateRec>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_phases() {
        let mut l = Lifecycle::new(100.0, 50.0);
        let cases = [(100.0, Phase::Creating), (149.9, Phase::Creating), (150.0, Phase::Active), (1e9, Phase::Active)];
        for (t, p) in cases {
            assert_eq!(l.phase(t), p, "t={t}");
        }
        l.fail_after(20.0, "boom");
        l.fail_after(30.0, "later");
        assert_eq!(l.phase(119.0), Phase::Creating);
        assert_eq!(l.phase(120.0), Phase::Failed("boom".into()));
        l.start_deleting(200.0, 10.0);
        l.start_deleting(205.0, 99.0);
        assert_eq!(l.phase(209.0), Phase::Deleting);
        assert_eq!(l.state(209.0), ResourceState::Deleting);
        assert_eq!(l.phase(210.0), Phase::Gone);
        assert!(!l.exists(210.0));
    }

    #[test]
    fn ids_are_deterministic_per_seed() {
        let mut a = World::new("1".into(), 7);
        let mut b = World::new("1".into(), 7);
        let ia: Vec<String> = (0..3).map(|_| a.id("vpc")).collect();
        let ib: Vec<String> = (0..3).map(|_| b.id("vpc")).collect();
        assert_eq!(ia, ib);
        assert!(ia[0].starts_with("vpc-0") && ia[0].len() == 21);
        assert_ne!(ia[0], ia[1]);
        assert_eq!(a.hex(32, true).len(), 32);
        let r = a.roll();
        assert!((0.0..1.0).contains(&r));
    }

    #[test]
    fn role_arn_lookup() {
        let mut w = World::new("123456789012".into(), 1);
        let arn = "arn:aws:iam::123456789012:role/r1".to_string();
        w.roles.insert(
            "r1".into(),
            RoleRec {
                name: "r1".into(),
                arn: arn.clone(),
                trust_policy: serde_json::json!({"Statement": [{"Principal": {"Service": "eks.amazonaws.com"}}]}),
                managed_policies: vec![],
                inline_policies: vec![],
                tags: Tags::new(),
                permissions_boundary: None,
            },
        );
        assert!(
            w.role_by_arn(&arn).is_some_and(|r| r.trusts("eks.amazonaws.com") && !r.trusts("sagemaker.amazonaws.com"))
        );
        assert!(w.role_by_arn("arn:aws:iam::999999999999:role/r1").is_none());
        assert!(w.role_by_arn("nonsense").is_none());
    }

    #[test]
    fn a_trust_policy_s_conditions_are_checked_against_what_the_service_passes() {
        let role = |condition: serde_json::Value| RoleRec {
            name: "r".into(),
            arn: "arn:aws:iam::123456789012:role/r".into(),
            trust_policy: serde_json::json!({"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole",
                "Condition": condition}]}),
            managed_policies: vec![],
            inline_policies: vec![],
            tags: Default::default(),
            permissions_boundary: None,
        };
        let ours = "arn:aws:eks:us-east-1:123456789012:cluster/demo-eks";
        let context = [("aws:SourceAccount", "123456789012"), ("aws:SourceArn", ours)];
        let table: &[(serde_json::Value, bool)] = &[
            (serde_json::json!({}), true),
            (serde_json::json!({"StringEquals": {"aws:SourceAccount": "123456789012"}}), true),
            (serde_json::json!({"StringEquals": {"aws:SourceAccount": "999999999999"}}), false),
            (serde_json::json!({"ArnLike": {"aws:SourceArn": ours}}), true),
            (serde_json::json!({"ArnLike": {"aws:SourceArn": "arn:aws:eks:*:123456789012:cluster/*"}}), true),
            (
                serde_json::json!({"ArnLike": {"aws:SourceArn": "arn:aws:eks:us-east-1:123456789012:cluster/other"}}),
                false,
            ),
            (serde_json::json!({"StringEquals": {"aws:SourceAccount": ["1", "123456789012"]}}), true),
            (serde_json::json!({"StringEquals": {"aws:SourceOrgID": "o-1"}}), false),
            (serde_json::json!({"NumericLessThan": {"aws:SourceAccount": "1"}}), false),
        ];
        for (condition, ok) in table {
            assert_eq!(role(condition.clone()).assumable_by("eks.amazonaws.com", &context), *ok, "{condition}");
        }
        assert!(!role(serde_json::json!({})).assumable_by("sagemaker.amazonaws.com", &context));
        // A service that passes no context cannot satisfy a condition on it.
        assert!(
            !role(serde_json::json!({"StringEquals": {"aws:SourceAccount": "123456789012"}}))
                .assumable_by("eks.amazonaws.com", &[])
        );
    }
}

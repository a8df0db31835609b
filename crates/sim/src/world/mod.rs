//! The persisted state of the simulated account, and the lifecycle of its resources.
//!
//! Everything a restart must keep lives in [`World`]: resources with the simulated time they
//! were created (states are computed from it on read, see [`Lifecycle::phase`]), Kubernetes
//! objects, call counters, the random state and the clock reading at the last save.

mod aws;
mod kube;
mod mlflow;

pub(crate) use aws::{
    AccessEntryRec, AddonRec, BucketRec, ComputeQuotaRec, DataRepositoryRec, EksRec, EventRec, FileSystemRec, GroupRec,
    HyperPodRec, ObjectRec, OidcProviderRec, OrphanLoadBalancerRec, PodIdentityRec, RoleRec, SchedulerConfigRec,
    SlotRec, SoftwareUpdateRec, SubnetRec, VpcEndpointRec, VpcRec, WorkspaceRec,
};
pub use kube::KubeAuditEvent;
pub(crate) use kube::{
    FaultEvent, HelmReleaseRec, Keda, KubeRec, KubeWorld, Recovery, Restart, SYSTEM_NAMESPACES, TrainingRec, obj_key,
};
pub(crate) use mlflow::TrackingServerRec;

use crate::base::{Phase, mix, rkey};
use crate::catalog::default_quota;
use chrono::{DateTime, Utc};
use instantstart_core::provider::TrainingPlan;
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
    pub mlflow_servers: BTreeMap<String, TrackingServerRec>,
    /// SageMaker cluster scheduler configs (task governance) by id.
    #[serde(default)]
    pub scheduler_configs: BTreeMap<String, SchedulerConfigRec>,
    /// SageMaker compute quotas (task governance) by id.
    #[serde(default)]
    pub compute_quotas: BTreeMap<String, ComputeQuotaRec>,
    /// FSx for Lustre file systems by id.
    #[serde(default)]
    pub file_systems: BTreeMap<String, FileSystemRec>,
    /// FSx for Lustre data repository associations by id.
    #[serde(default)]
    pub data_repositories: BTreeMap<String, DataRepositoryRec>,
    /// Amazon Managed Service for Prometheus workspaces by id.
    #[serde(default)]
    pub prometheus_workspaces: BTreeMap<String, WorkspaceRec>,
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
            data_repositories: BTreeMap::new(),
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

    /// The EKS clusters (by `region/name`) whose deletion has completed but which are still
    /// recorded: [`World::collect_gone`] removes them with their Kubernetes worlds.
    pub fn gone_eks(&self, now: f64) -> Vec<String> {
        self.eks.iter().filter(|(_, c)| c.life.phase(now) == Phase::Gone).map(|(k, _)| k.clone()).collect()
    }

    /// Removes resources whose deletion has completed (and what they took with them). Only the
    /// records: what the controllers do about them first (a deleted cluster's load balancers)
    /// is the cloud's tick (`crate::cloud`).
    pub fn collect_gone(&mut self, now: f64) {
        let gone_vpcs: Vec<String> =
            self.vpcs.iter().filter(|(_, v)| v.life.phase(now) == Phase::Gone).map(|(k, _)| k.clone()).collect();
        for id in gone_vpcs {
            self.vpcs.remove(&id);
            self.subnets.retain(|_, s| s.vpc_id != id);
        }
        for key in self.gone_eks(now) {
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
    }

    /// The HyperPod quota in force for `instance_type` in `region`: the raised (or lowered)
    /// value, else the account's default.
    pub fn quota(&self, region: &str, instance_type: &str) -> u32 {
        self.quotas.get(&rkey(region, instance_type)).copied().unwrap_or_else(|| default_quota(instance_type))
    }

    /// The FSx for Lustre quota in force in `region`: the raised (or lowered) value (kept in
    /// `quotas` under the quota's code), else AWS's default.
    pub fn lustre_quota(&self, region: &str, quota: instantstart_core::provider::LustreQuota) -> u32 {
        self.quotas.get(&rkey(region, quota.code())).copied().unwrap_or_else(|| quota.default_value())
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

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::provider::Tags;

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

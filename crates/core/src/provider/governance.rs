//! HyperPod task governance on the AWS side: SageMaker's cluster scheduler config (the cluster
//! policy: priority classes and fair share) and compute quotas (a team's guaranteed compute per
//! instance type, how it lends and borrows idle compute, whether it preempts its own tasks).
//!
//! [`TaskGovernanceApi`] is part of the [`AwsCloud`](super::AwsCloud) supertrait: both are
//! SageMaker resources (`CreateClusterSchedulerConfig`, `CreateComputeQuota`, their Describe,
//! List, Update and Delete), addressed by a 12-character id SageMaker assigns, versioned (an
//! update names the version it replaces, `TargetVersion`), and tagged at creation (read back
//! with `ListTags`, so ownership is checked like every other resource).
//!
//! The shapes mirror botocore's `sagemaker` model (2017-07-24): names `EntityName`
//! (`[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`), team and priority class names
//! `[a-z0-9]([-a-z0-9]*[a-z0-9]){0,39}?`, weights 0–100, at most 10 priority classes and
//! 15 resources per quota; `BorrowLimit` is a percentage of idle compute (1–500, the API
//! reference's `ResourceSharingConfig`).

use super::Tags;
use super::aws::Result;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The EKS add-on that installs Kueue and the HyperPod task governance controller.
pub const TASK_GOVERNANCE_ADDON: &str = "amazon-sagemaker-hyperpod-taskgovernance";
/// Most priority classes of a scheduler config (`PriorityClassList` max 10).
pub const MAX_PRIORITY_CLASSES: usize = 10;
/// Most resources of a compute quota (`ComputeQuotaResourceConfigList` max 15).
pub const MAX_QUOTA_RESOURCES: usize = 15;
/// Longest team or priority class name (the pattern's `{0,39}`, and what keeps
/// `hyperpod-ns-<team>-localqueue` within a Kubernetes name's 63 characters).
pub const TEAM_NAME_MAX: usize = 40;
/// The range of `BorrowLimit` (percent of idle compute a team may borrow).
pub const BORROW_LIMIT_RANGE: (u32, u32) = (1, 500);
/// Longest `EntityName` (scheduler config and compute quota names).
pub const ENTITY_NAME_MAX: usize = 63;

/// A priority class of the cluster policy: tasks of a higher weight are admitted first and
/// may preempt lower ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriorityClass {
    pub name: String,
    /// 0 (lowest) to 100.
    pub weight: u8,
}

/// The cluster policy (`SchedulerConfig`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct SchedulerPolicy {
    pub priority_classes: Vec<PriorityClass>,
    /// `FairShare: Enabled` — idle compute is lent by fair-share weight; otherwise first come,
    /// first served.
    pub fair_share: bool,
}

/// How a team shares its quota (`ResourceSharingConfig.Strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum SharingStrategy {
    /// Lends its idle quota, never borrows.
    Lend,
    /// Neither lends nor borrows.
    DontLend,
    /// Lends its idle quota and borrows others' (within `borrow_limit`).
    #[default]
    LendAndBorrow,
}

impl SharingStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            SharingStrategy::Lend => "Lend",
            SharingStrategy::DontLend => "DontLend",
            SharingStrategy::LendAndBorrow => "LendAndBorrow",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [SharingStrategy::Lend, SharingStrategy::DontLend, SharingStrategy::LendAndBorrow]
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s) || v.as_str().eq_ignore_ascii_case(&s.replace(['-', '_'], "")))
    }

    pub fn lends(self) -> bool {
        !matches!(self, SharingStrategy::DontLend)
    }

    pub fn borrows(self) -> bool {
        matches!(self, SharingStrategy::LendAndBorrow)
    }
}

/// Whether a team's higher-priority tasks preempt its own lower-priority ones
/// (`PreemptTeamTasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum PreemptTeamTasks {
    Never,
    #[default]
    LowerPriority,
}

impl PreemptTeamTasks {
    pub fn as_str(self) -> &'static str {
        match self {
            PreemptTeamTasks::Never => "Never",
            PreemptTeamTasks::LowerPriority => "LowerPriority",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [PreemptTeamTasks::Never, PreemptTeamTasks::LowerPriority]
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s) || v.as_str().eq_ignore_ascii_case(&s.replace(['-', '_'], "")))
    }
}

/// Compute of one instance type a team is guaranteed (`ComputeQuotaResourceConfig`): whole
/// instances (`count`) or accelerators (GPUs or Neuron devices).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaResource {
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerators: Option<u32>,
}

/// A team's compute quota as SageMaker holds it (`ComputeQuotaConfig` + `ComputeQuotaTarget`
/// + `ActivationState`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuotaConfig {
    pub team: String,
    pub resources: Vec<QuotaResource>,
    pub strategy: SharingStrategy,
    /// Percent of idle compute the team may borrow; `None` = SageMaker's default (50).
    pub borrow_limit: Option<u32>,
    pub preempt_team_tasks: PreemptTeamTasks,
    /// 0–100; used when the cluster policy has fair share on.
    pub fair_share_weight: u8,
    /// `ActivationState: Enabled`.
    pub enabled: bool,
}

/// A cluster scheduler config as DescribeClusterSchedulerConfig answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SchedulerConfigView {
    pub id: String,
    pub arn: String,
    pub name: String,
    pub cluster_arn: String,
    /// `ClusterSchedulerConfigVersion`; an update names it as `TargetVersion`.
    pub version: i32,
    /// SageMaker's `SchedulerResourceStatus` (`Creating`, `Created`, `Updating`, `Updated`,
    /// `…Failed`, `Deleting`, `Deleted`).
    pub status: String,
    pub policy: SchedulerPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default)]
    pub tags: Tags,
}

/// A compute quota as DescribeComputeQuota answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ComputeQuotaView {
    pub id: String,
    pub arn: String,
    pub name: String,
    pub cluster_arn: String,
    pub version: i32,
    pub status: String,
    pub config: QuotaConfig,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default)]
    pub tags: Tags,
}

/// Whether a `SchedulerResourceStatus` means the resource is settled and usable.
pub fn scheduler_status_settled(status: &str) -> bool {
    matches!(status, "Created" | "Updated")
}

/// Whether a `SchedulerResourceStatus` is a failure.
pub fn scheduler_status_failed(status: &str) -> bool {
    status.ends_with("Failed")
}

/// Whether the resource is gone or going (`Deleting`, `Deleted`).
pub fn scheduler_status_deleted(status: &str) -> bool {
    matches!(status, "Deleting" | "Deleted")
}

#[async_trait]
pub trait TaskGovernanceApi: Send + Sync {
    /// ListClusterSchedulerConfigs of the HyperPod cluster `cluster_arn` (every page), each
    /// described and its tags read; `Deleted` ones are left out.
    async fn list_scheduler_configs(&self, region: &str, cluster_arn: &str) -> Result<Vec<SchedulerConfigView>>;
    /// CreateClusterSchedulerConfig; answers the new config (version 1, `Creating`).
    async fn create_scheduler_config(
        &self,
        region: &str,
        name: &str,
        cluster_arn: &str,
        policy: &SchedulerPolicy,
        tags: &Tags,
    ) -> Result<SchedulerConfigView>;
    /// UpdateClusterSchedulerConfig of version `target_version`; answers the new version.
    async fn update_scheduler_config(
        &self,
        region: &str,
        id: &str,
        target_version: i32,
        policy: &SchedulerPolicy,
    ) -> Result<i32>;
    /// DeleteClusterSchedulerConfig; an unknown id is a `NotFound` error.
    async fn delete_scheduler_config(&self, region: &str, id: &str) -> Result<()>;
    /// ListComputeQuotas of the cluster (every page), each described and its tags read;
    /// `Deleted` ones are left out.
    async fn list_compute_quotas(&self, region: &str, cluster_arn: &str) -> Result<Vec<ComputeQuotaView>>;
    /// CreateComputeQuota; answers the new quota (version 1).
    async fn create_compute_quota(
        &self,
        region: &str,
        name: &str,
        cluster_arn: &str,
        config: &QuotaConfig,
        tags: &Tags,
    ) -> Result<ComputeQuotaView>;
    /// UpdateComputeQuota of version `target_version`; answers the new version. The team
    /// (`ComputeQuotaTarget.TeamName`) is sent unchanged.
    async fn update_compute_quota(
        &self,
        region: &str,
        id: &str,
        target_version: i32,
        config: &QuotaConfig,
    ) -> Result<i32>;
    /// DeleteComputeQuota; an unknown id is a `NotFound` error.
    async fn delete_compute_quota(&self, region: &str, id: &str) -> Result<()>;
}

/// The name rule of teams and priority classes (`ComputeQuotaTargetTeamName`,
/// `ClusterSchedulerPriorityClassName`): 1–40 lowercase letters, digits and hyphens, starting
/// and ending with a letter or digit.
pub fn team_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= TEAM_NAME_MAX
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "must be 1-{TEAM_NAME_MAX} lowercase letters, digits and hyphens, starting and ending with a letter or digit"
        ))
    }
}

/// The `EntityName` rule: 1–63 letters, digits and hyphens, starting and ending with a letter
/// or digit.
pub fn entity_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= ENTITY_NAME_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok { Ok(()) } else { Err("must be 1-63 letters, digits and hyphens, starting and ending with one".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_sagemaker_patterns() {
        for good in ["a", "team-a", "x1", &"a".repeat(40)] {
            assert!(team_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "a-", "Team", "a_b", &"a".repeat(41)] {
            assert!(team_name(bad).is_err(), "{bad:?}");
        }
        assert!(entity_name("Demo-policy").is_ok());
        for bad in ["", "-a", "a.b", &"a".repeat(64)] {
            assert!(entity_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn strategies_parse_as_sagemaker_spells_them() {
        assert_eq!(SharingStrategy::parse("lend-and-borrow"), Some(SharingStrategy::LendAndBorrow));
        assert_eq!(SharingStrategy::parse("DontLend"), Some(SharingStrategy::DontLend));
        assert_eq!(SharingStrategy::parse("share"), None);
        assert_eq!(PreemptTeamTasks::parse("lower_priority"), Some(PreemptTeamTasks::LowerPriority));
        assert!(SharingStrategy::Lend.lends() && !SharingStrategy::Lend.borrows());
        assert!(!SharingStrategy::DontLend.lends());
    }

    #[test]
    fn statuses_are_classified() {
        assert!(scheduler_status_settled("Updated"));
        assert!(!scheduler_status_settled("Updating"));
        assert!(scheduler_status_failed("UpdateRollbackFailed"));
        assert!(scheduler_status_deleted("Deleting"));
    }
}

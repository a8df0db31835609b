//! HyperPod platform software updates as [`super::HyperPodApi`] sees them: the request of
//! `UpdateClusterSoftware` ([`UpdateClusterSoftware`], its rolling policy
//! [`SoftwareUpdateDeployment`]) and what `DescribeCluster` says of each instance group's
//! software ([`GroupSoftware`]).
//!
//! # Guarantees
//! - The shapes follow botocore's `UpdateClusterSoftwareRequest` (sagemaker 2017-07-24): an
//!   empty [`UpdateClusterSoftware::instance_groups`] means every group (the adapter then
//!   omits `InstanceGroups`, whose model minimum is 1); the rules on the values live in
//!   `workflow::software_update` and run before any provider call.
//! - [`GroupSoftware`] carries the service's words unchanged (`SoftwareUpdateStatus`,
//!   `ImageVersionStatus`); [`GroupSoftware::update_running`] and
//!   [`GroupSoftware::update_failed`] are the only readings of them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a rolling software update counts its batches (`NodeUnavailabilityType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BatchSizeKind {
    /// A number of instances (`INSTANCE_COUNT`).
    InstanceCount,
    /// A share of the group's instances, 1-100 (`CAPACITY_PERCENTAGE`).
    CapacityPercentage,
}

/// A batch of a rolling software update (`CapacitySizeConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchSize {
    /// `instance_count` or `capacity_percentage`.
    #[serde(rename = "type")]
    pub kind: BatchSizeKind,
    /// At least 1 (a percentage at most 100).
    pub value: u32,
}

impl BatchSize {
    /// "2 instances", "25% of the group".
    pub fn describe(&self) -> String {
        match self.kind {
            BatchSizeKind::InstanceCount if self.value == 1 => "1 instance".into(),
            BatchSizeKind::InstanceCount => format!("{} instances", self.value),
            BatchSizeKind::CapacityPercentage => format!("{}% of the group", self.value),
        }
    }

    /// Instances per batch in a group of `count` instances (at least 1, at most the group).
    pub fn instances(&self, count: u32) -> u32 {
        let n = match self.kind {
            BatchSizeKind::InstanceCount => self.value,
            BatchSizeKind::CapacityPercentage => (count.saturating_mul(self.value)).div_ceil(100),
        };
        n.clamp(1, count.max(1))
    }
}

/// The rolling policy of a software update (`DeploymentConfiguration`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoftwareUpdateDeployment {
    /// Most instances updated at a time (`RollingUpdatePolicy.MaximumBatchSize`).
    pub max_batch: BatchSize,
    /// Most instances rolled back at a time (`RollbackMaximumBatchSize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_max_batch: Option<BatchSize>,
    /// Seconds to wait between batches, 0-3600 (`WaitIntervalInSeconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_interval_secs: Option<u32>,
    /// CloudWatch alarms that roll the update back (`AutoRollbackConfiguration`, 1-10).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rollback_alarms: Vec<String>,
}

/// One group of a software update (`UpdateClusterSoftwareInstanceGroupSpecification`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoftwareUpdateGroup {
    /// Instance group name.
    pub name: String,
    /// The HyperPod AMI release to move to (`MAJOR.MINOR.PATCH`); absent: the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_release_version: Option<String>,
}

/// `UpdateClusterSoftware`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UpdateClusterSoftware {
    pub region: String,
    /// The HyperPod cluster's name.
    pub cluster: String,
    /// Empty: every group.
    pub instance_groups: Vec<SoftwareUpdateGroup>,
    pub deployment: Option<SoftwareUpdateDeployment>,
    /// An AMI (`ami-…`) or `default` instead of a HyperPod release.
    pub image_id: Option<String>,
}

/// What `DescribeCluster` says of an instance group's software.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GroupSoftware {
    /// The AMI the group runs (`CurrentImageId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_image_id: Option<String>,
    /// The AMI the group is moving to (`DesiredImageId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_image_id: Option<String>,
    /// The HyperPod AMI release the group runs (`CurrentImageReleaseVersion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_release: Option<String>,
    /// The release it is moving to (`DesiredImageReleaseVersion`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_release: Option<String>,
    /// `UpToDate`, `UpdateAvailable`, `SecurityUpdateRequired`, `EndOfLife`
    /// (`ImageVersionStatus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_version_status: Option<String>,
    /// The last software update's status: `Pending`, `InProgress`, `Succeeded`, `Failed`,
    /// `RollbackInProgress`, `RollbackComplete` (`SoftwareUpdateStatus`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_status: Option<String>,
    /// Instances running the desired image (`TargetStateCount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_state_count: Option<u32>,
}

impl GroupSoftware {
    /// An update of the group is still running (or rolling back).
    pub fn update_running(&self) -> bool {
        matches!(self.update_status.as_deref(), Some("Pending" | "InProgress" | "RollbackInProgress"))
    }

    /// The last update ended without the new software (`Failed`, `RollbackComplete`).
    pub fn update_failed(&self) -> bool {
        matches!(self.update_status.as_deref(), Some("Failed" | "RollbackComplete"))
    }

    /// The group runs what it should: no other image or release is desired.
    pub fn settled(&self) -> bool {
        let same = |a: &Option<String>, b: &Option<String>| b.is_none() || a == b;
        same(&self.current_image_id, &self.desired_image_id) && same(&self.current_release, &self.desired_release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_read_as_people_say_them_and_fit_the_group() {
        let b = |kind, value| BatchSize { kind, value };
        use BatchSizeKind::*;
        assert_eq!(b(InstanceCount, 1).describe(), "1 instance");
        assert_eq!(b(InstanceCount, 3).describe(), "3 instances");
        assert_eq!(b(CapacityPercentage, 25).describe(), "25% of the group");
        for (size, count, want) in [
            (b(InstanceCount, 2), 5, 2),
            (b(InstanceCount, 9), 4, 4),
            (b(CapacityPercentage, 25), 5, 2),
            (b(CapacityPercentage, 100), 3, 3),
            (b(CapacityPercentage, 1), 3, 1),
            (b(InstanceCount, 1), 0, 1),
        ] {
            assert_eq!(size.instances(count), want, "{size:?} of {count}");
        }
    }

    #[test]
    fn update_status_readings() {
        let s = |status: &str| GroupSoftware { update_status: Some(status.into()), ..Default::default() };
        for (status, running, failed) in [
            ("Pending", true, false),
            ("InProgress", true, false),
            ("RollbackInProgress", true, false),
            ("Succeeded", false, false),
            ("Failed", false, true),
            ("RollbackComplete", false, true),
        ] {
            assert_eq!((s(status).update_running(), s(status).update_failed()), (running, failed), "{status}");
        }
        let moving = GroupSoftware {
            current_release: Some("2025.8.1".into()),
            desired_release: Some("2025.10.1".into()),
            ..Default::default()
        };
        assert!(!moving.settled());
        assert!(GroupSoftware { current_release: Some("2025.8.1".into()), ..Default::default() }.settled());
    }
}

//! Read models of a region's HyperPod capacity: the "<type> for cluster usage" quotas with what
//! the region's HyperPod clusters already use, the account's training plans
//! (`ListTrainingPlans`) and the training plan offerings that could be reserved
//! (`SearchTrainingPlanOfferings`, target resource `hyperpod-cluster`). Buying a plan is out of
//! scope: these are reads.
//!
//! # Guarantees
//! - [`OfferingQuery::check`] refuses what the service model (botocore 1.44.8,
//!   `SearchTrainingPlanOfferingsRequest`) refuses — a type outside
//!   `ReservedCapacityInstanceType`, a count above 256 (`ReservedCapacityInstanceCount`), a
//!   duration outside 1..=87600 hours (`TrainingPlanDurationHoursInput`) — plus two rules of
//!   ours: a count of 0 (the model allows it, but it reserves nothing) and `start_after` not
//!   earlier than `end_before` (an empty window). Each is a finding naming its field, before
//!   any call.

use crate::validate::ValidationError;
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The instance types a training plan can reserve (botocore 1.44.8, `sagemaker`
/// `ReservedCapacityInstanceType`).
pub const RESERVABLE_INSTANCE_TYPES: &[&str] = &[
    "ml.p4d.24xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.trn1.32xlarge",
    "ml.trn2.48xlarge",
    "ml.p6-b200.48xlarge",
    "ml.p4de.24xlarge",
    "ml.p6e-gb200.36xlarge",
    "ml.p5.4xlarge",
    "ml.p6-b300.48xlarge",
];

/// Suffix of the HyperPod instance quotas' names in Service Quotas
/// (`ml.p5.48xlarge for cluster usage`).
pub const QUOTA_SUFFIX: &str = " for cluster usage";

/// The resource a training plan is searched for here: HyperPod clusters.
pub const TARGET_HYPERPOD_CLUSTER: &str = "hyperpod-cluster";

/// One HyperPod instance quota of a region with its use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuotaUsage {
    pub instance_type: String,
    /// The quota's name in Service Quotas (`<type> for cluster usage`).
    pub name: String,
    pub code: String,
    /// Instances allowed.
    pub value: u32,
    /// Instances the region's HyperPod clusters ask for now (target counts of their on-demand
    /// and spot groups; training-plan groups use their reservation instead).
    pub in_use: u32,
    /// What a new or larger group may still take: `value - in_use` (0 when over).
    pub available: u32,
}

/// One training plan of the account in a region (`ListTrainingPlans`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TrainingPlanSummary {
    pub arn: String,
    pub name: String,
    /// Pending, Active, Scheduled, Expired, Failed.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// The reserved instance type (of its first reserved capacity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    pub total_instance_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_instance_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_use_instance_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_hours: Option<u64>,
    /// What the plan can be used by (`hyperpod-cluster`, `training-job`, …).
    #[serde(default)]
    pub target_resources: Vec<String>,
}

/// What to search training plan offerings for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OfferingQuery {
    /// One of [`RESERVABLE_INSTANCE_TYPES`].
    pub instance_type: String,
    /// Instances to reserve, 1..=256.
    pub instance_count: u32,
    /// How long, in hours (1..=87600).
    pub duration_hours: u32,
    /// Earliest start (RFC 3339).
    #[serde(default)]
    pub start_after: Option<DateTime<Utc>>,
    /// Latest end (RFC 3339).
    #[serde(default)]
    pub end_before: Option<DateTime<Utc>>,
}

impl OfferingQuery {
    /// Every rule the service model (`SearchTrainingPlanOfferingsRequest`) sets, as findings.
    pub fn check(&self) -> Result<(), ValidationError> {
        if !RESERVABLE_INSTANCE_TYPES.contains(&self.instance_type.as_str()) {
            return Err(ValidationError::invalid(
                "instance_type",
                format!("must be a type a training plan can reserve: {}", RESERVABLE_INSTANCE_TYPES.join(", ")),
            ));
        }
        if !(1..=256).contains(&self.instance_count) {
            return Err(ValidationError::invalid("instance_count", "must be between 1 and 256"));
        }
        if !(1..=87_600).contains(&self.duration_hours) {
            return Err(ValidationError::invalid("duration_hours", "must be between 1 and 87600 hours"));
        }
        if let (Some(a), Some(b)) = (self.start_after, self.end_before)
            && a >= b
        {
            return Err(ValidationError::invalid("start_after", "must be earlier than `end_before`"));
        }
        Ok(())
    }
}

/// A training plan that could be reserved (`TrainingPlanOffering` with its reserved capacity).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TrainingPlanOffering {
    /// Pass it to CreateTrainingPlan to buy the plan (outside InstantStart).
    pub offering_id: String,
    pub instance_type: String,
    pub instance_count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_hours: Option<u64>,
    /// The price, as the service writes it, and its currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upfront_fee: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency_code: Option<String>,
    #[serde(default)]
    pub target_resources: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offering_query_rules_name_their_field() {
        let ok = OfferingQuery {
            instance_type: "ml.p5.48xlarge".into(),
            instance_count: 2,
            duration_hours: 24,
            start_after: None,
            end_before: None,
        };
        let t = |s: &str| s.parse::<DateTime<Utc>>().ok();
        let cases: Vec<(OfferingQuery, Option<&str>)> = vec![
            (ok.clone(), None),
            (OfferingQuery { instance_type: "ml.g5.2xlarge".into(), ..ok.clone() }, Some("instance_type")),
            (OfferingQuery { instance_count: 0, ..ok.clone() }, Some("instance_count")),
            (OfferingQuery { instance_count: 257, ..ok.clone() }, Some("instance_count")),
            (OfferingQuery { duration_hours: 0, ..ok.clone() }, Some("duration_hours")),
            (OfferingQuery { duration_hours: 87_601, ..ok.clone() }, Some("duration_hours")),
            (
                OfferingQuery {
                    start_after: t("2026-02-01T00:00:00Z"),
                    end_before: t("2026-01-01T00:00:00Z"),
                    ..ok.clone()
                },
                Some("start_after"),
            ),
        ];
        for (q, field) in cases {
            assert_eq!(q.check().err().map(|e| e.findings[0].field.clone()).as_deref(), field, "{q:?}");
        }
    }
}

//! The simulated account's training plans (`ListTrainingPlans`, seeded with
//! [`SimCloud::add_training_plan`](crate::SimCloud::add_training_plan)) and the training plan
//! offerings its capacity allows (`SearchTrainingPlanOfferings`). The quotas listing is in
//! [`crate::catalog`], with the quota facts the preflight reads.
//!
//! Offerings are computed from the catalog, for the reservations SageMaker sells: counts of
//! 1, 2, 4, 8, 16, 32 or 64 instances, whole days from 1 to 182 (other counts and durations
//! the model allows find nothing). A type can be reserved in the AZs that offer it
//! ([`crate::catalog::offered`]), each AZ holds [`RESERVABLE_PER_ZONE`] instances of a type for
//! reservations, minus what the region's training plans of that type already reserve there.
//! An offering starts at the first midnight (UTC) after `start_after` (or now) — one more day
//! per zone further down the list — and runs `duration_hours`; it is left out when it would
//! end after `end_before`. Its fee is simulated: accelerators × $4.00 per hour × instances ×
//! hours.
//!
//! # Guarantees
//! - No offering has a count or duration SageMaker does not sell, asks for more instances
//!   than its AZ has left for reservations, starts
//!   before `start_after` (or now), ends after `end_before`, or lasts other than
//!   `duration_hours`.
//! - A query the service model refuses is refused the way SageMaker does
//!   (`ValidationException`, [`OfferingQuery::check`]): see `docs/aws-preconditions.md`.
//!
//! A plan's window: it started when the simulated account began and lasts 30 days.

use crate::base::stable_hash;
use crate::catalog::{availability_zones, offered};
use crate::ec2_specs::instance_type_info;
use crate::world::World;
use chrono::{DateTime, Duration, Timelike, Utc};
use instantstart_core::provider::{OfferingQuery, TARGET_HYPERPOD_CLUSTER, TrainingPlanOffering, TrainingPlanSummary};

/// Instances of one type each AZ holds for training plans.
pub(crate) const RESERVABLE_PER_ZONE: u32 = 64;
/// The instance counts a reservation is offered in (SageMaker developer guide,
/// `search-training-plan-offerings-api-cli-sdk`: "1, 2, 4, 8, 16, 32 or 64 instances").
pub(crate) const OFFERED_COUNTS: &[u32] = &[1, 2, 4, 8, 16, 32, 64];
/// The longest reservation offered, in days (same page: "1-day increments from 1 to 182 days").
pub(crate) const MAX_DAYS: u32 = 182;
/// Days a simulated plan runs.
const PLAN_DAYS: i64 = 30;

/// The plans of `region`, with the instances its clusters use from each.
pub(crate) fn list_plans(
    w: &World,
    region: &str,
    in_use: &std::collections::BTreeMap<String, u32>,
) -> Vec<TrainingPlanSummary> {
    let start = w.display_time(0.0);
    w.training_plans
        .values()
        .filter(|p| p.arn.split(':').nth(3) == Some(region))
        .map(|p| {
            let used = in_use.get(&p.arn).copied().unwrap_or(0);
            TrainingPlanSummary {
                arn: p.arn.clone(),
                name: p.arn.rsplit('/').next().unwrap_or_default().to_string(),
                status: p.status.clone(),
                status_message: None,
                instance_type: Some(p.instance_type.clone()),
                availability_zone: Some(p.availability_zone.clone()),
                total_instance_count: p.instance_count,
                available_instance_count: Some(p.instance_count.saturating_sub(used)),
                in_use_instance_count: Some(used),
                start_time: Some(start),
                end_time: Some(start + Duration::days(PLAN_DAYS)),
                duration_hours: Some(PLAN_DAYS as u64 * 24),
                target_resources: vec![TARGET_HYPERPOD_CLUSTER.to_string()],
            }
        })
        .collect()
}

/// The next midnight (UTC) at or after `t`.
fn next_midnight(t: DateTime<Utc>) -> DateTime<Utc> {
    let day = t.date_naive().and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    if t == day && t.nanosecond() == 0 { day } else { day + Duration::days(1) }
}

/// What `q` could reserve in `region` at simulated time `now`.
pub(crate) fn offerings(w: &World, region: &str, q: &OfferingQuery, now: f64) -> Vec<TrainingPlanOffering> {
    let earliest = q.start_after.unwrap_or(w.display_time(now)).max(w.display_time(now));
    let accelerators = instance_type_info(&q.instance_type).map_or(1, |i| i.accelerators.max(1));
    let hours = u64::from(q.duration_hours);
    let mut out = Vec::new();
    // Within the model's limits but not a reservation SageMaker sells: no offering (an empty
    // list, as the service answers when nothing matches), not an error.
    if !OFFERED_COUNTS.contains(&q.instance_count)
        || !q.duration_hours.is_multiple_of(24)
        || q.duration_hours / 24 > MAX_DAYS
    {
        return out;
    }
    for (i, az) in availability_zones(region).iter().filter(|z| offered(region, &z.name, &q.instance_type)).enumerate()
    {
        let reserved: u32 = w
            .training_plans
            .values()
            .filter(|p| p.instance_type == q.instance_type && p.availability_zone == az.name)
            .map(|p| p.instance_count)
            .sum();
        if reserved + q.instance_count > RESERVABLE_PER_ZONE {
            continue;
        }
        let start = next_midnight(earliest) + Duration::days(i as i64);
        let end = start + Duration::hours(hours as i64);
        if q.end_before.is_some_and(|b| end > b) {
            continue;
        }
        let fee = f64::from(accelerators) * 4.0 * f64::from(q.instance_count) * hours as f64;
        let id = stable_hash(&[
            region,
            &az.name,
            &q.instance_type,
            &start.to_rfc3339(),
            &hours.to_string(),
            &q.instance_count.to_string(),
        ]);
        out.push(TrainingPlanOffering {
            offering_id: format!("tpo-{id:016x}"),
            instance_type: q.instance_type.clone(),
            instance_count: q.instance_count,
            availability_zone: Some(az.name.clone()),
            start_time: Some(start),
            end_time: Some(end),
            duration_hours: Some(hours),
            upfront_fee: Some(format!("{fee:.2}")),
            currency_code: Some("USD".to_string()),
            target_resources: vec![TARGET_HYPERPOD_CLUSTER.to_string()],
        });
    }
    out
}

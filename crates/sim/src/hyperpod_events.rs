//! The events of a simulated HyperPod cluster (`ListClusterEvents`), and one node's detail
//! (`DescribeClusterNode`).
//!
//! The HyperPod state machine is computed from times ([`crate::hyperpod`]); its events are too:
//! whenever a call changes the cluster (create, update, node reboot/replace/delete, delete),
//! the events that change sets in motion are recorded with the simulated times they happen at
//! — some in the future (an instance that will be Running, deep health checks that will pass).
//! A listing shows the events whose time has come, and none after the cluster failed or
//! started deleting (what had not happened by then never will).
//!
//! # Guarantees
//! - Event ids are UUID-shaped and deterministic (the cluster's seed and the event's sequence).
//! - Pages are newest first; a page token names the last event shown (time and sequence), so
//!   events recorded meanwhile never shift or repeat a later page.

use crate::base::stable_hash;
use crate::hyperpod::slots::{has_capacity, instance_id, slots};
use crate::timings;
use crate::world::{EventRec, HyperPodRec, World};
use instantstart_core::provider::{
    ClusterEvent, ClusterEventLevel, ClusterEventPage, ClusterEventQuery, ClusterEventResource, ProviderError,
    ProviderErrorKind, Result,
};

/// Records one event of `h` at `at`.
pub(crate) fn record(
    h: &mut HyperPodRec,
    at: f64,
    resource: ClusterEventResource,
    group: Option<&str>,
    instance: Option<&str>,
    level: ClusterEventLevel,
    description: impl Into<String>,
) {
    let seq = h.events.len() as u64;
    h.events.push(EventRec {
        seq,
        at,
        resource,
        group: group.map(str::to_string),
        instance: instance.map(str::to_string),
        level,
        description: description.into(),
    });
}

/// Records a cluster-level event.
pub(crate) fn cluster(h: &mut HyperPodRec, at: f64, level: ClusterEventLevel, description: impl Into<String>) {
    record(h, at, ClusterEventResource::Cluster, None, None, level, description);
}

/// Records an instance-group event.
pub(crate) fn group(
    h: &mut HyperPodRec,
    at: f64,
    group: &str,
    level: ClusterEventLevel,
    description: impl Into<String>,
) {
    record(h, at, ClusterEventResource::InstanceGroup, Some(group), None, level, description);
}

/// Records an instance event.
pub(crate) fn instance(
    h: &mut HyperPodRec,
    at: f64,
    group: &str,
    id: &str,
    level: ClusterEventLevel,
    description: impl Into<String>,
) {
    record(h, at, ClusterEventResource::Instance, Some(group), Some(id), level, description);
}

/// Records the life of a new instance in slot `slot` of group `gi`: launched (Pending), deep
/// health checks started and passed when the group runs them, Running.
pub(crate) fn launch(h: &mut HyperPodRec, gi: usize, slot: usize) {
    let g = &h.groups[gi];
    let s = slots(h, g)[slot].clone();
    let id = instance_id(h, g, slot, s.generation);
    let (name, ty, az, dhc) =
        (g.name.clone(), g.instance_type.clone(), g.availability_zone.clone(), g.deep_health_checks);
    let appear = s.appear_at;
    let booted = appear + timings::HYPERPOD_NODE_BOOT;
    let running = booted + if dhc { timings::HYPERPOD_DEEP_HEALTH_CHECK } else { 0.0 };
    let info = ClusterEventLevel::Info;
    instance(h, appear, &name, &id, info, format!("Instance {id} ({ty}) launched in {az}: Pending"));
    if dhc {
        instance(h, booted, &name, &id, info, format!("Deep health checks started on {id}: DeepHealthCheckInProgress"));
        instance(h, running, &name, &id, info, format!("Deep health checks passed on {id}"));
    }
    instance(h, running, &name, &id, info, format!("Instance {id} is Running"));
}

/// Records what CreateCluster sets in motion for the new cluster `h` (its record complete).
pub(crate) fn created(h: &mut HyperPodRec) {
    let start = h.life.created_at;
    let info = ClusterEventLevel::Info;
    cluster(h, start, info, format!("Cluster {} is being created: Creating", h.name));
    for gi in 0..h.groups.len() {
        let g = &h.groups[gi];
        let text = format!(
            "Instance group {} is being created: {} x {} in {}",
            g.name, g.count, g.instance_type, g.availability_zone
        );
        let name = g.name.clone();
        group(h, start, &name, info, text);
        if let Some(failure) = h.groups[gi].failure.clone() {
            let at = start + timings::HYPERPOD_FIRST_NODE + timings::HYPERPOD_NODE_BOOT;
            group(h, at, &name, ClusterEventLevel::Error, failure);
            continue;
        }
        if !has_capacity(&h.region, &h.groups[gi]) {
            if let Some(f) = h.life.failure.clone() {
                group(h, start + f.after, &name, ClusterEventLevel::Error, f.reason);
            }
            continue;
        }
        for slot in 0..h.groups[gi].count as usize {
            launch(h, gi, slot);
        }
    }
    match h.life.failure.clone() {
        Some(f) => {
            cluster(h, start + f.after, ClusterEventLevel::Error, format!("Cluster {} failed: {}", h.name, f.reason))
        }
        None => cluster(h, start + h.life.ready_after, info, format!("Cluster {} is InService", h.name)),
    }
}

/// Records an UpdateCluster that started at `now` and ends at `until`.
pub(crate) fn update_started(h: &mut HyperPodRec, now: f64, until: f64) {
    cluster(h, now, ClusterEventLevel::Info, format!("Cluster {} is being updated: Updating", h.name));
    cluster(h, until, ClusterEventLevel::Info, format!("Cluster {} update completed: InService", h.name));
}

/// Records the instances a scale-down of group `gi` removes (slot indexes `removed`) at `now`.
pub(crate) fn scaled_down(h: &mut HyperPodRec, gi: usize, removed: &[usize], now: f64) {
    for &j in removed {
        let g = &h.groups[gi];
        let id = instance_id(h, g, j, g.slots[j].generation);
        let name = g.name.clone();
        instance(
            h,
            now,
            &name,
            &id,
            ClusterEventLevel::Info,
            format!("Instance {id} is terminating: scale-down of {name}"),
        );
    }
}

/// The events of `h` shown at `now`, oldest first.
pub(crate) fn visible(h: &HyperPodRec, now: f64) -> Vec<&EventRec> {
    let failed_at = h.life.failure.as_ref().map(|f| h.life.created_at + f.after);
    let deleting_at = h.life.deleting.as_ref().map(|d| d.since);
    let cutoff = [failed_at, deleting_at].into_iter().flatten().fold(f64::INFINITY, f64::min);
    let mut out: Vec<&EventRec> = h.events.iter().filter(|e| e.at <= now && e.at <= cutoff).collect();
    out.sort_by(|a, b| a.at.total_cmp(&b.at).then(a.seq.cmp(&b.seq)));
    out
}

/// A UUID-shaped id of event `seq` of `h`.
fn event_id(h: &HyperPodRec, seq: u64) -> String {
    let a = stable_hash(&[&h.uid.to_string(), "event", &seq.to_string()]);
    let b = stable_hash(&[&h.uid.to_string(), "event-low", &seq.to_string()]);
    let x = format!("{a:016x}{b:016x}");
    format!("{}-{}-{}-{}-{}", &x[0..8], &x[8..12], &x[12..16], &x[16..20], &x[20..32])
}

fn bad_token(api: &str) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, "ValidationException: the NextToken is not valid")
}

/// One page of `h`'s events at `now`, newest first, filtered as the query says.
pub(crate) fn page(w: &World, h: &HyperPodRec, q: &ClusterEventQuery, now: f64) -> Result<ClusterEventPage> {
    const API: &str = "sagemaker:ListClusterEvents";
    let limit = q.page_size() as usize;
    if !(1..=ClusterEventQuery::MAX_LIMIT as usize).contains(&limit) {
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::InvalidRequest,
            "ValidationException: MaxResults must be between 1 and 100",
        ));
    }
    let after: Option<(f64, u64)> = match &q.cursor {
        None => None,
        Some(t) => {
            let (at, seq) = t.split_once('.').ok_or_else(|| bad_token(API))?;
            Some((
                at.parse::<u64>().map_err(|_| bad_token(API))? as f64 / 1000.0,
                seq.parse().map_err(|_| bad_token(API))?,
            ))
        }
    };
    let key = |e: &EventRec| ((e.at * 1000.0).floor() / 1000.0, e.seq);
    let mut matching: Vec<&EventRec> = visible(h, now)
        .into_iter()
        .filter(|e| q.resource_type.is_none_or(|r| r == e.resource))
        .filter(|e| q.instance_group.as_ref().is_none_or(|g| e.group.as_ref() == Some(g)))
        .filter(|e| q.node_id.as_ref().is_none_or(|n| e.instance.as_ref() == Some(n)))
        .filter(|e| q.after.is_none_or(|t| w.display_time(e.at) >= t))
        .filter(|e| q.before.is_none_or(|t| w.display_time(e.at) <= t))
        .collect();
    matching.reverse();
    if let Some((at, seq)) = after {
        matching.retain(|e| {
            let (ea, es) = key(e);
            ea < at || (ea == at && es < seq)
        });
    }
    let more = matching.len() > limit;
    matching.truncate(limit);
    let next_cursor =
        if more { matching.last().map(|e| format!("{}.{}", (key(e).0 * 1000.0).round() as u64, e.seq)) } else { None };
    Ok(ClusterEventPage {
        events: matching
            .into_iter()
            .map(|e| ClusterEvent {
                event_id: event_id(h, e.seq),
                time: w.display_time(e.at),
                resource_type: e.resource,
                instance_group: e.group.clone(),
                instance_id: e.instance.clone(),
                level: Some(e.level),
                description: e.description.clone(),
            })
            .collect(),
        next_cursor,
    })
}

//! The instance slots of a HyperPod group and their instance ids: explicit slots, or `count`
//! slots implied by the cluster's creation time until something changes one of them.

use crate::base::stable_hash;
use crate::catalog::offered;
use crate::timings;
use crate::world::{GroupRec, HyperPodRec, SlotRec};

/// The instance id of slot `i` of group `g` in its `generation` (bumped by each replace).
pub(crate) fn instance_id(h: &HyperPodRec, g: &GroupRec, i: usize, generation: u32) -> String {
    format!("i-0{:016x}", node_hash(h, g, i, generation))
}

/// Whether a group can get its capacity: a reservation, or the type offered in its AZ.
pub(crate) fn has_capacity(region: &str, g: &GroupRec) -> bool {
    g.training_plan.is_some() || offered(region, &g.availability_zone, &g.instance_type)
}

/// The instance slots of a group: explicit ones, or `count` slots implied by the cluster's
/// creation time (instances appear spread over [`timings::HYPERPOD_NODE_SPREAD`]).
pub(crate) fn slots(h: &HyperPodRec, g: &GroupRec) -> Vec<SlotRec> {
    if !g.slots.is_empty() {
        return g.slots.clone();
    }
    implied_slots(h.life.created_at, g.count)
}

pub(crate) fn implied_slots(start: f64, count: u32) -> Vec<SlotRec> {
    let n = f64::from(count.max(1));
    (0..count)
        .map(|i| SlotRec {
            appear_at: start + timings::HYPERPOD_FIRST_NODE + timings::HYPERPOD_NODE_SPREAD * f64::from(i) / n,
            generation: 0,
            removed: false,
            pending_until: None,
            removed_at: None,
            check_until: None,
            check_fails: false,
        })
        .collect()
}

/// The instance id hash of slot `i` of `g` in its `generation`.
pub(crate) fn node_hash(h: &HyperPodRec, g: &GroupRec, i: usize, generation: u32) -> u64 {
    if generation == 0 {
        stable_hash(&[&h.uid.to_string(), &g.name, &i.to_string()])
    } else {
        stable_hash(&[&h.uid.to_string(), &g.name, &i.to_string(), &generation.to_string()])
    }
}

/// Materializes the implied slots of group `gi` so they can change individually.
pub(crate) fn materialize(h: &mut HyperPodRec, gi: usize) {
    if h.groups[gi].slots.is_empty() {
        let implied = implied_slots(h.life.created_at, h.groups[gi].count);
        h.groups[gi].slots = implied;
    }
}

//! The kube-scheduler's accounting of accelerators in one simulated cluster: a pod that asks for
//! GPUs (or Neuron devices) runs on a node only while the pods already placed there leave enough
//! of them free, as the real scheduler's `NodeResourcesFit` filter counts a node's allocatable
//! against the requests of the pods bound to it
//! (https://kubernetes.io/docs/concepts/scheduling-eviction/kube-scheduler/#kube-scheduler-implementation);
//! otherwise it stays `Pending` with `FailedScheduling` "… Insufficient nvidia.com/gpu" until
//! one of them ends.
//!
//! # The model ([`place`], deterministic: a pure function of the objects, the Nodes and the time)
//!
//! The cluster's accelerator pods are replayed in the order they became schedulable (then by
//! namespace and name). Each is placed at the first moment, from then to `now`, when a node it
//! may run on ([`pod::eligible`]) has its request free for the pod's whole run; among such nodes
//! the one [`pod::pick`] chooses. A pod holds its accelerators from its placement until its
//! container ends: a batch pod (training, download) at its run's end, any other (serving,
//! crash-looping, or one whose volume cannot mount) for good.
//!
//! # Caveats
//! - Pods of a deleted object leave the replay, and with them what they held in the past: a pod
//!   that waited for them is placed, on the next read, as if they had never been there (its
//!   start moves earlier). Kueue's model (`super::kueue`) has the same property.
//! - The scheduler does not preempt by pod priority (Kueue does, for the jobs it admits).

use super::pod::{self, NodeInfo, PodView};
use super::workload;
use crate::timings;
use crate::world::KubeWorld;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A pod's accelerators held on one node: from, until (`f64::INFINITY`: for good), how many.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Hold {
    node: usize,
    from: f64,
    until: f64,
    count: u32,
}

/// When `pod`, placed at `at`, gives its accelerators back.
fn release(pod: &PodView, blockers: &pod::Blockers, at: f64) -> f64 {
    if blockers.mount_failure(pod).is_some() {
        return f64::INFINITY;
    }
    match pod.batch_run {
        Some(run) => pod::batch_end(pod, at + timings::POD_START + run).0,
        None => f64::INFINITY,
    }
}

/// Whether `count` accelerators of node `node` (of `capacity`) are free from `from` to `until`
/// beside `holds`.
fn free(holds: &[Hold], node: usize, capacity: u32, count: u32, from: f64, until: f64) -> bool {
    let on: Vec<&Hold> = holds.iter().filter(|h| h.node == node && h.from < until && h.until > from).collect();
    // Occupancy only rises at a hold's start: checking `from` and each start inside is enough.
    std::iter::once(from).chain(on.iter().map(|h| h.from).filter(|t| *t > from)).all(|t| {
        let used: u32 = on.iter().filter(|h| h.from <= t && h.until > t).map(|h| h.count).sum();
        used + count <= capacity
    })
}

/// Places the accelerator pods of `kw` on `nodes` at `now` and records where in every node's
/// [`pod::Blockers::placements`].
pub(crate) fn place(kw: &KubeWorld, nodes: &mut [NodeInfo], now: f64) {
    let Some(first) = nodes.first() else { return };
    let blockers = first.blockers.clone();
    // When each accelerator pod could be placed, its own request alone considered.
    let mut queue: Vec<(f64, PodView, String, u32)> = workload::all_pods(kw, None, now)
        .into_iter()
        .filter_map(|p| {
            let (res, count) = pod::accelerator_request(&p.spec)?;
            let at = pod::pod_state(&p, nodes, now).scheduled_at?;
            Some((at, p, res, count))
        })
        .collect();
    if queue.is_empty() {
        return;
    }
    queue.sort_by(|a, b| {
        a.0.total_cmp(&b.0).then_with(|| (&a.1.namespace, &a.1.name).cmp(&(&b.1.namespace, &b.1.name)))
    });
    let mut holds: Vec<Hold> = Vec::new();
    let mut placements = BTreeMap::new();
    for (earliest, p, res, count) in &queue {
        let Ok((eligible, _)) = pod::eligible(p, nodes, now) else { continue };
        // The moments something changes: the pod's own, a node turning ready, a hold ending.
        let mut moments: Vec<f64> = std::iter::once(*earliest)
            .chain(eligible.iter().map(|i| nodes[*i].ready_at))
            .chain(holds.iter().map(|h| h.until))
            .filter(|t| *t >= *earliest && *t <= now)
            .collect();
        moments.sort_by(f64::total_cmp);
        moments.dedup();
        let placed = moments.into_iter().find_map(|at| {
            let until = release(p, &blockers, at);
            let fits: Vec<usize> = eligible
                .iter()
                .copied()
                .filter(|i| nodes[*i].ready_at <= at)
                .filter(|i| {
                    let capacity = nodes[*i].accelerators.map_or(0, |(_, n)| n);
                    free(&holds, *i, capacity, *count, at, until)
                })
                .collect();
            (!fits.is_empty()).then(|| (pod::pick(p, &fits), at, until))
        });
        let placement = match placed {
            Some((node, at, until)) => {
                holds.push(Hold { node, from: at, until, count: *count });
                Ok((node, at))
            }
            None => {
                // As the scheduler counts them: every ready node, by why it does not fit.
                let ready: Vec<&NodeInfo> = nodes.iter().filter(|n| n.ready_at <= now && n.gone_at.is_none()).collect();
                let tainted: Vec<&&NodeInfo> = ready.iter().filter(|n| !n.taints.is_empty()).collect();
                let mut why = vec![format!("{} Insufficient {res}", eligible.len())];
                if let Some(t) = tainted.first().map(|n| &n.taints[0]) {
                    let (key, value) = (t["key"].as_str().unwrap_or_default(), t["value"].as_str().unwrap_or_default());
                    why.push(format!("{} node(s) had untolerated taint {{{key}: {value}}}", tainted.len()));
                }
                let unmatched = ready.len() - eligible.len() - tainted.len();
                if unmatched > 0 {
                    why.push(format!("{unmatched} node(s) didn't match Pod's node affinity/selector"));
                }
                let why = why.join(", ");
                Err(pod::unschedulable(ready.len(), &why))
            }
        };
        placements.insert(p.uid.clone(), placement);
    }
    let blockers = Arc::new(pod::Blockers { placements, ..(*blockers).clone() });
    for n in nodes.iter_mut() {
        n.blockers = blockers.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_has_room_only_while_its_holds_leave_enough() {
        let hold = |node, from, until, count| Hold { node, from, until, count };
        let holds = [hold(0, 0.0, 100.0, 4), hold(0, 50.0, f64::INFINITY, 2), hold(1, 0.0, 10.0, 8)];
        // (node, capacity, count, from, until, free)
        let table: &[(usize, u32, u32, f64, f64, bool)] = &[
            (0, 8, 4, 0.0, 40.0, true),
            (0, 8, 4, 0.0, 60.0, false),   // the second hold starts at 50: 4 + 2 + 4 > 8
            (0, 8, 2, 0.0, 200.0, true),   // 4 + 2 + 2 = 8
            (0, 8, 6, 100.0, 200.0, true), // the first hold ended
            (0, 8, 7, 100.0, 200.0, false),
            (1, 8, 1, 5.0, 20.0, false),
            (1, 8, 8, 10.0, 20.0, true), // a hold ending at 10 frees at 10
            (2, 8, 8, 0.0, f64::INFINITY, true),
        ];
        for &(node, capacity, count, from, until, want) in table {
            assert_eq!(free(&holds, node, capacity, count, from, until), want, "{node} {count} [{from}, {until})");
        }
    }
}

//! HyperPod's managed Karpenter, simulated: while a HyperPod cluster's managed autoscaling is
//! `InService`, a `karpenter.sh/v1` `NodePool` referencing a
//! `karpenter.sagemaker.amazonaws.com/v1` `HyperpodNodeClass` lets Karpenter scale the
//! instance groups the NodeClass lists (`spec.instanceGroups`) — and only those.
//!
//! What it does, each time the world is brought to `now` (every API call):
//!
//! - **Scale up from zero.** A pod that is Pending because no current Node fits it (its
//!   `nodeSelector` — e.g. `node.kubernetes.io/instance-type` or the instance-group label — or
//!   its accelerator request) and that a node of a managed group *would* fit makes Karpenter add
//!   one instance to the first such group (HyperPod's `BatchAddClusterNodes`): the group's
//!   count goes up and the instance goes through the usual timeline (appears after
//!   [`timings::HYPERPOD_SCALE_FIRST_NODE`], Pending for [`timings::HYPERPOD_NODE_BOOT`], then
//!   Running), after which the pod schedules. No second instance is added while one is on its
//!   way to that group.
//! - **Scale down when idle.** A managed group whose nodes run no pod (every pod on them has
//!   finished or is gone) and that no Pending pod wants is consolidated after the NodePool's
//!   `spec.disruption.consolidateAfter` (default [`timings::KARPENTER_CONSOLIDATE_AFTER`]),
//!   counted from the first time it was seen idle: its instances are removed and its count
//!   goes back to 0. Pods that ran there keep their history.
//!
//! Not simulated: node affinity terms (the simulated scheduler honours `nodeSelector` only),
//! bin-packing (one instance per wanting group at a time), Spot-over-on-demand priority, and
//! Karpenter's NodeClaim objects. Sources: AWS `sagemaker-hyperpod-eks-autoscaling`,
//! `sagemaker-hyperpod-eks-autoscaling-nodeclass`, `sagemaker-hyperpod-eks-autoscaling-nodepool`.

use super::objects::str_at;
use super::pod::{self, NodeInfo, PodView, accelerator_request, str_map};
use super::{nodes, workload};
use crate::hyperpod::nodes::autoscaling_in_service;
use crate::hyperpod::slots::materialize;
use crate::timings;
use crate::world::KubeWorld;
use crate::world::{GroupRec, HyperPodRec, SlotRec, World};
use instantstart_core::provider::ClusterEventLevel;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

const NODE_CLASS: (&str, &str) = ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass");
const NODE_POOL: (&str, &str) = ("karpenter.sh/v1", "NodePool");

/// Parses a Karpenter duration (`30s`, `5m`, `1h30m`); `Never` and malformed values: `None`.
pub(crate) fn duration(s: &str) -> Option<f64> {
    if s == "Never" || s.is_empty() {
        return None;
    }
    let (mut total, mut num) = (0.0, String::new());
    for c in s.chars() {
        match c {
            '0'..='9' => num.push(c),
            's' | 'm' | 'h' => {
                let n: f64 = num.parse().ok()?;
                num.clear();
                total += n * match c {
                    's' => 1.0,
                    'm' => 60.0,
                    _ => 3600.0,
                };
            }
            _ => return None,
        }
    }
    num.is_empty().then_some(total)
}

/// The managed instance groups of `kw`, in NodeClass order, with the consolidation delay of
/// the NodePool that draws on them.
fn managed_groups(kw: &KubeWorld) -> Vec<(String, f64)> {
    fn objects<'a>(kw: &'a KubeWorld, (api, kind): (&'static str, &'static str)) -> impl Iterator<Item = &'a Value> {
        kw.objects
            .values()
            .map(|r| &r.object)
            .filter(move |o| str_at(o, "/apiVersion") == Some(api) && str_at(o, "/kind") == Some(kind))
    }
    let mut out: Vec<(String, f64)> = Vec::new();
    for pool in objects(kw, NODE_POOL) {
        let Some(class) = str_at(pool, "/spec/template/spec/nodeClassRef/name") else { continue };
        if str_at(pool, "/spec/template/spec/nodeClassRef/kind") != Some(NODE_CLASS.1) {
            continue;
        }
        let delay = str_at(pool, "/spec/disruption/consolidateAfter")
            .map_or(Some(timings::KARPENTER_CONSOLIDATE_AFTER), duration)
            .unwrap_or(f64::INFINITY);
        for nc in objects(kw, NODE_CLASS).filter(|o| str_at(o, "/metadata/name") == Some(class)) {
            for g in nc.pointer("/spec/instanceGroups").and_then(Value::as_array).into_iter().flatten() {
                if let Some(g) = g.as_str()
                    && !out.iter().any(|(x, _)| x == g)
                {
                    out.push((g.to_string(), delay));
                }
            }
        }
    }
    out
}

/// Whether a node of `g` would fit `pod`: its node selector matches the labels such a node
/// has, and it has the accelerators the pod asks for.
fn would_fit(h: &HyperPodRec, g: &GroupRec, pod: &PodView) -> bool {
    let labels: Map<String, Value> = [
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("node.kubernetes.io/instance-type", g.instance_type.as_str()),
        ("topology.kubernetes.io/region", h.region.as_str()),
        ("topology.kubernetes.io/zone", g.availability_zone.as_str()),
        ("sagemaker.amazonaws.com/compute-type", "hyperpod"),
        ("sagemaker.amazonaws.com/cluster-name", h.name.as_str()),
        ("sagemaker.amazonaws.com/instance-group-name", g.name.as_str()),
        ("sagemaker.amazonaws.com/node-health-status", "Schedulable"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Value::String(v.into())))
    .collect();
    let selector = str_map(pod.spec.get("nodeSelector"));
    if !selector.iter().all(|(k, v)| k == "kubernetes.io/hostname" || labels.get(k) == Some(v)) {
        return false;
    }
    if selector.contains_key("kubernetes.io/hostname") {
        return false;
    }
    let info = crate::ec2_specs::instance_type_info(&g.instance_type);
    match accelerator_request(&pod.spec) {
        None => true,
        Some((res, count)) => info.is_some_and(|i| {
            let have = if i.accelerator.starts_with("nvidia") {
                "nvidia.com/gpu"
            } else if i.accelerator.starts_with("aws-") {
                "aws.amazon.com/neuron"
            } else {
                ""
            };
            have == res && i.accelerators >= count
        }),
    }
}

/// A slot still on its way (appearing or booting) at `now`.
fn in_flight(slot: &SlotRec, now: f64) -> bool {
    !slot.removed && now < slot.appear_at + timings::HYPERPOD_NODE_BOOT
}

/// Brings Karpenter's decisions to `now` for every cluster whose autoscaling is InService.
pub(crate) fn reconcile(w: &mut World, now: f64) {
    let mut actions: Vec<(String, String, Action)> = Vec::new();
    for (hkey, h) in &w.hyperpod {
        if !autoscaling_in_service(h, now) {
            continue;
        }
        let Some(kw) = w.kube.values().find(|k| k.eks_arn == h.eks_arn) else { continue };
        let managed = managed_groups(kw);
        if managed.is_empty() {
            continue;
        }
        let nodes = nodes::nodes(w, kw, now);
        let pods = workload::all_pods(kw, None, now);
        let states: Vec<_> = pods.iter().map(|p| pod::pod_state(p, &nodes, now)).collect();
        let by_name: BTreeMap<&str, &NodeInfo> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let group_of = |node: &str| {
            by_name
                .get(node)
                .and_then(|n| n.labels.get("sagemaker.amazonaws.com/instance-group-name"))
                .and_then(Value::as_str)
        };
        let pending: Vec<&PodView> = pods
            .iter()
            .zip(&states)
            .filter(|(p, st)| {
                now >= p.start && st.phase == "Pending" && st.node.is_none() && st.unschedulable.is_some()
            })
            .map(|(p, _)| p)
            .collect();
        for (name, delay) in &managed {
            // A group that is gone, or has training-plan capacity, makes the NodeClass not Ready
            // for it: Karpenter never scales it (AWS: "Only on-demand capacity is supported …
            // Instance groups with Training plan or reserved capacity are not supported").
            let Some(g) = h.groups.iter().find(|g| &g.name == name && g.training_plan.is_none()) else { continue };
            let wanted = pending.iter().any(|p| would_fit(h, g, p));
            let coming = g.slots.iter().any(|s| in_flight(s, now))
                || (g.slots.is_empty() && g.count > 0 && now < h.life.created_at + timings::HYPERPOD_CREATE);
            let busy = pods.iter().zip(&states).any(|(_, st)| {
                !matches!(st.phase, "Succeeded" | "Failed")
                    && st.node.as_deref().and_then(group_of) == Some(name.as_str())
                    && st.node.as_deref().and_then(|n| by_name.get(n)).is_some_and(|n| n.gone_at.is_none())
            });
            if wanted && !coming {
                actions.push((hkey.clone(), name.clone(), Action::Add));
            } else if wanted || coming || busy {
                actions.push((hkey.clone(), name.clone(), Action::Busy));
            } else if g.count > 0 {
                actions.push((hkey.clone(), name.clone(), Action::Idle(*delay)));
            }
        }
        // A pod that one group gets a node for is not counted for the next group.
        dedupe_adds(&mut actions, hkey, h, &pending, &managed);
    }
    for (hkey, group, action) in actions {
        let Some(h) = w.hyperpod.get_mut(&hkey) else { continue };
        let Some(gi) = h.groups.iter().position(|g| g.name == group) else { continue };
        match action {
            Action::Add => {
                materialize(h, gi);
                let g = &mut h.groups[gi];
                g.slots.push(SlotRec {
                    appear_at: now + timings::HYPERPOD_SCALE_FIRST_NODE,
                    generation: 0,
                    removed: false,
                    pending_until: None,
                    removed_at: None,
                    check_until: None,
                    check_fails: false,
                });
                g.count += 1;
                g.idle_since = None;
                let slot = g.slots.len() - 1;
                let text = format!("Karpenter added an instance to instance group {group} for pending pods");
                crate::hyperpod_events::group(h, now, &group, ClusterEventLevel::Info, text);
                crate::hyperpod_events::launch(h, gi, slot);
            }
            Action::Busy => h.groups[gi].idle_since = None,
            Action::Idle(delay) => {
                let g = &mut h.groups[gi];
                let since = *g.idle_since.get_or_insert(now);
                if now - since >= delay {
                    materialize(h, gi);
                    let live: Vec<usize> =
                        (0..h.groups[gi].slots.len()).filter(|&j| !h.groups[gi].slots[j].removed).collect();
                    crate::hyperpod_events::scaled_down(h, gi, &live, now);
                    let g = &mut h.groups[gi];
                    for s in g.slots.iter_mut().filter(|s| !s.removed) {
                        s.removed = true;
                        s.removed_at = Some(now);
                    }
                    g.count = 0;
                    g.idle_since = None;
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Action {
    /// Add one instance (a pending pod needs it).
    Add,
    /// Running, wanted or on its way: the consolidation clock stops.
    Busy,
    /// Empty: consolidate after this many seconds.
    Idle(f64),
}

/// Keeps one `Add` per pending pod: the first managed group (NodeClass order) that fits each
/// pod gets it; later groups that only those pods wanted are left alone.
fn dedupe_adds(
    actions: &mut [(String, String, Action)],
    hkey: &str,
    h: &HyperPodRec,
    pending: &[&PodView],
    managed: &[(String, f64)],
) {
    let mut keep: Vec<String> = Vec::new();
    for p in pending {
        let first = managed
            .iter()
            .filter_map(|(n, _)| h.groups.iter().find(|g| &g.name == n && g.training_plan.is_none()))
            .find(|g| would_fit(h, g, p));
        if let Some(g) = first
            && !keep.contains(&g.name)
        {
            keep.push(g.name.clone());
        }
    }
    for a in actions.iter_mut() {
        if a.0 == hkey && a.2 == Action::Add && !keep.contains(&a.1) {
            a.2 = Action::Busy;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn karpenter_durations() {
        let cases = [
            ("30s", Some(30.0)),
            ("5m", Some(300.0)),
            ("1h30m", Some(5400.0)),
            ("Never", None),
            ("5", None),
            ("x", None),
        ];
        for (s, want) in cases {
            assert_eq!(duration(s), want, "{s}");
        }
    }
}

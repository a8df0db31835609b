//! The instances of a HyperPod cluster at some moment ([`NodeView`]): their status (booting,
//! health checks, software updates, replacement, shutting down) from the slots and the
//! simulated time. The Kubernetes world views them as Nodes.

use super::slots::{has_capacity, instance_id, slots};
use crate::base::{Phase, stable_hash};
use crate::software_update;
use crate::timings;
use crate::world::{GroupRec, HyperPodRec, SlotRec, World};
use instantstart_core::instance_types::is_accelerated_family;
use instantstart_core::provider::ClusterNodeDetail;

/// One instance of a HyperPod cluster at some moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeView {
    pub instance_id: String,
    pub group: String,
    pub instance_type: String,
    pub availability_zone: String,
    pub subnet_id: String,
    pub status: &'static str,
    /// Simulated time at which the instance is (or will be) Running.
    pub running_at: f64,
    /// Simulated time the instance was launched (a replacement: when it was replaced).
    pub launched_at: f64,
    /// The instance's Kubernetes Node health, when it has a Node: HyperPod's
    /// `sagemaker.amazonaws.com/node-health-status` label and `…/deep-health-check-status`
    /// (developer guide `sagemaker-hyperpod-eks-resiliency-node-labels`). `Running` →
    /// `Schedulable` (`Passed` after on-start checks); an on-demand deep health check in
    /// progress → `Unschedulable`/`InProgress`; a failed check left for the operator
    /// (`Failure`) → `UnschedulablePendingReplacement`/`Failed`. `None`: no Node (booting,
    /// on-start checks, updating, shutting down).
    pub node_health: Option<(&'static str, Option<&'static str>)>,
}

/// The instances of `h` at `now`.
pub(crate) fn nodes(h: &HyperPodRec, now: f64) -> Vec<NodeView> {
    let deleting_since = match h.life.phase(now) {
        Phase::Gone | Phase::Failed(_) => return Vec::new(),
        Phase::Deleting => h.life.deleting.as_ref().map(|d| d.since),
        Phase::Creating | Phase::Active => None,
    };
    let mut out = Vec::new();
    for g in h.groups.iter().filter(|g| has_capacity(&h.region, g) && g.failure.is_none()) {
        for (i, slot) in slots(h, g).iter().enumerate() {
            if slot.removed {
                continue;
            }
            out.extend(slot_view(h, g, i, slot, deleting_since, now));
        }
    }
    out
}

/// One instance slot at `now` (`None`: not there yet, or not part of a deletion).
pub(crate) fn slot_view(
    h: &HyperPodRec,
    g: &GroupRec,
    i: usize,
    slot: &SlotRec,
    deleting_since: Option<f64>,
    now: f64,
) -> Option<NodeView> {
    let appear = slot.appear_at;
    let booted = appear + timings::HYPERPOD_NODE_BOOT;
    let mut running_at = booted + if g.deep_health_checks { timings::HYPERPOD_DEEP_HEALTH_CHECK } else { 0.0 };
    if let Some(until) = slot.pending_until {
        running_at = running_at.max(until);
    }
    // An on-demand deep health check: in progress until `check_until`; a failing instance is
    // then replaced (automatic node recovery: a new instance id, Pending for a replace) or
    // shows Failure.
    let replaced_at = recovered_at(h, slot, now);
    if let Some(until) = slot.check_until {
        running_at = running_at.max(until);
    }
    if let Some(at) = replaced_at {
        running_at = running_at.max(at + timings::HYPERPOD_NODE_REPLACE);
    }
    let status = match deleting_since {
        Some(since) if appear <= since => "ShuttingDown",
        Some(_) => return None,
        None if now < appear => return None,
        None if now < booted => "Pending",
        None if slot.pending_until.is_some_and(|u| now < u) => "Pending",
        None if replaced_at.is_some_and(|at| now < at + timings::HYPERPOD_NODE_REPLACE) => "Pending",
        None if software_update::slot_updating(g, i, now) => "SystemUpdating",
        None if now < running_at => "DeepHealthCheckInProgress",
        None if slot.check_fails && replaced_at.is_none() && slot.check_until.is_some() => "Failure",
        None => "Running",
    };
    let launched_at = match slot.pending_until {
        Some(until) if slot.generation > 0 => until - timings::HYPERPOD_NODE_REPLACE,
        _ => appear,
    };
    let node_health = match status {
        "Running" => Some(("Schedulable", g.deep_health_checks.then_some("Passed"))),
        "DeepHealthCheckInProgress" if slot.check_until.is_some() => Some(("Unschedulable", Some("InProgress"))),
        "Failure" => Some(("UnschedulablePendingReplacement", Some("Failed"))),
        _ => None,
    };
    Some(NodeView {
        node_health,
        instance_id: instance_id(h, g, i, slot.generation + u32::from(replaced_at.is_some())),
        group: g.name.clone(),
        instance_type: g.instance_type.clone(),
        availability_zone: g.availability_zone.clone(),
        subnet_id: g.subnet_id.clone(),
        status,
        running_at,
        launched_at,
    })
}

/// When HyperPod's automatic node recovery replaced an instance that failed an on-demand
/// deep health check (`None`: it did not, or not yet).
pub(crate) fn recovered_at(h: &HyperPodRec, slot: &SlotRec, now: f64) -> Option<f64> {
    slot.check_until.filter(|u| {
        slot.check_fails && now >= *u && h.node_recovery == instantstart_core::spec::NodeRecovery::Automatic
    })
}

/// Instances Karpenter consolidated away, with the time they went (their Kubernetes Nodes
/// keep the history of the pods that ran on them; they are no longer listed).
pub(crate) fn departed(h: &HyperPodRec, now: f64) -> Vec<(NodeView, f64)> {
    if !matches!(h.life.phase(now), Phase::Creating | Phase::Active) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for g in &h.groups {
        for (i, slot) in g.slots.iter().enumerate() {
            let Some(gone) = slot.removed_at.filter(|_| slot.removed) else { continue };
            let mut view = SlotRec { removed: false, ..slot.clone() };
            view.removed_at = None;
            if let Some(n) = slot_view(h, g, i, &view, None, gone).filter(|n| n.status == "Running") {
                out.push((n, gone));
            }
        }
    }
    out
}

/// Managed (Karpenter) autoscaling is enabled and `InService`: the update that enabled it is
/// over. HyperPod then runs Karpenter and serves its kinds in the EKS cluster.
pub(crate) fn autoscaling_in_service(h: &HyperPodRec, now: f64) -> bool {
    h.autoscaling && !h.updating_until.is_some_and(|u| now < u) && h.life.phase(now) == Phase::Active
}

/// One node of `h` at `now` in detail, if `h` has it.
pub(crate) fn node_detail(w: &World, h: &HyperPodRec, node_id: &str, now: f64) -> Option<ClusterNodeDetail> {
    let n: NodeView = nodes(h, now).into_iter().find(|n| n.instance_id == node_id)?;
    let g: &GroupRec = h.groups.iter().find(|g| g.name == n.group)?;
    let hash = stable_hash(&[&n.instance_id, "address"]);
    let subnet = w.subnets.get(&n.subnet_id);
    let ip = subnet.map(|s| {
        let size = 1u64 << (32 - u32::from(s.cidr.prefix_len()));
        // Skip the network address and AWS's four reserved addresses, and the broadcast.
        let offset = 4 + hash % size.saturating_sub(5).max(1);
        std::net::Ipv4Addr::from(u32::from(s.cidr.network()) + offset as u32)
    });
    let dns_domain =
        if h.region == "us-east-1" { "ec2.internal".to_string() } else { format!("{}.compute.internal", h.region) };
    let zone_id = crate::catalog::zone_index(&h.region, &n.availability_zone)
        .and_then(|i| crate::catalog::availability_zones(&h.region).get(i).map(|z| z.zone_id.clone()));
    let status_message = match n.status {
        "DeepHealthCheckInProgress" => Some("Deep health checks (stress, connectivity) are running".to_string()),
        "Pending" if n.launched_at + timings::HYPERPOD_NODE_BOOT <= now => {
            Some("The instance is rebooting or being replaced".to_string())
        }
        "Pending" => Some("The instance is booting and running its lifecycle script".to_string()),
        "ShuttingDown" => Some("The cluster is being deleted".to_string()),
        "SystemUpdating" => Some("The instance's platform software is being updated (a new root volume)".to_string()),
        _ => None,
    };
    let efa = crate::ec2_specs::instance_type_info(&g.instance_type).is_some_and(|i| i.efa_interfaces > 0);
    let software = crate::software_update::group_software(&h.region, g, now);
    Some(ClusterNodeDetail {
        instance_id: n.instance_id.clone(),
        instance_group: n.group.clone(),
        instance_type: n.instance_type.clone(),
        status: n.status.to_string(),
        status_message,
        launch_time: Some(w.display_time(n.launched_at)),
        last_software_update_time: None,
        availability_zone: Some(n.availability_zone.clone()),
        availability_zone_id: zone_id,
        private_ip: ip.map(|a| a.to_string()),
        private_dns: ip.map(|a| format!("ip-{}.{dns_domain}", a.to_string().replace('.', "-"))),
        capacity_type: Some(if g.spot { "Spot" } else { "OnDemand" }.to_string()),
        interface_type: if g.efa_only {
            Some("efa-only".to_string())
        } else if efa {
            Some("efa".to_string())
        } else {
            None
        },
        threads_per_core: g.threads_per_core.or(Some(if is_accelerated_family(&g.instance_type) { 1 } else { 2 })),
        lifecycle_script: g.lifecycle.clone(),
        current_image_id: software.current_image_id,
        desired_image_id: software.desired_image_id,
        image_version_status: software.image_version_status,
    })
}

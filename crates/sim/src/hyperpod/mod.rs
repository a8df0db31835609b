//! `HyperPodApi`: SageMaker HyperPod clusters orchestrated by EKS. Creation validates what the
//! service validates (EKS cluster Active, roles, subnets in the EKS VPC, quotas, training plan
//! reservations, EFA-only support) and then takes ~15 minutes while instances appear group by
//! group (Pending → [DeepHealthCheckInProgress →] Running). A group whose instance type is not
//! offered in its AZ (and has no reservation) makes the cluster fail, as insufficient capacity
//! does. Training plans are added with [`SimCloud::add_training_plan`].
//!
//! Deep health checks on demand (`StartClusterHealthCheck`, [`start_health_check`]): the
//! checked instances show `DeepHealthCheckInProgress` for
//! [`timings::HYPERPOD_DEEP_HEALTH_CHECK`], then `Running`; one that fails (the `ResourceFails`
//! fault) is replaced under automatic node recovery or shows `Failure` until rebooted or
//! replaced. Refused: a cluster not InService, CPU-only types, `InstanceConnectivity` without
//! EFA, instances not Running or not of the group.
//!
//! Software updates (`UpdateClusterSoftware`) live in `crate::software_update`: groups and
//! instances being updated read `SystemUpdating`, and node actions, health checks and
//! UpdateCluster are refused (`ConflictException`) until the update is over.
//!
//! Lifecycle scripts (what AWS refuses, and how it fails):
//! - every instance group of these EKS-orchestrated clusters, in CreateCluster and in
//!   UpdateCluster, needs a `LifeCycleConfig`; without one the call is a `ValidationException`
//!   (developer guide `smcluster-getting-started-slurm-cli`, "Common validation errors":
//!   "LifeCycleConfig is required for instance group…" — EKS clusters, "Optional node lifecycle
//!   configuration is not supported");
//! - the script is read by the group's execution role when its instances boot: a role without
//!   `s3:ListBucket` on the bucket and `s3:GetObject` on the object (read from the role's real
//!   policies, [`crate::policy`]; `AmazonSageMakerClusterInstanceRolePolicy` covers only
//!   `sagemaker-*` buckets — API reference `ClusterLifeCycleConfig`, "Make sure that the S3
//!   bucket path starts with s3://sagemaker-") fails the instances with the service's "Execution
//!   role provided does not have permissions to access the bucket … (s3:ListBucket,
//!   s3:GetObject)" message, and a missing `OnCreate` object fails them too. At create the
//!   cluster goes `Failed` with that message; a group added by UpdateCluster goes `Failed`
//!   (no instances) and the cluster stays `InService` (UpdateCluster runs the lifecycle scripts
//!   of new groups only — `sagemaker-hyperpod-lifecycle-best-practices-slurm-slurm-update-cluster-lifecycle`).

mod api;
pub(crate) mod nodes;
pub(crate) mod slots;

use nodes::{NodeView, autoscaling_in_service, nodes};
use slots::{has_capacity, instance_id, materialize, node_hash};

use crate::base::{Lifecycle, Phase, rkey};
use crate::catalog::{check_region, quota_name, zone_index};
use crate::ec2_specs::instance_type_info;
use crate::hyperpod_events as events;
use crate::software_update;
use crate::timings;
use crate::world::{GroupRec, HyperPodRec, SlotRec, World};
use instantstart_core::instance_types::{is_accelerated_family, is_cluster_instance_type};
use instantstart_core::lifecycle::script_object;
use instantstart_core::names;
use instantstart_core::provider::{
    BatchNodeResult, ClusterEventLevel, ClusterEventPage, ClusterEventQuery, ClusterNode, ClusterNodeDetail,
    CreateHyperPodCluster, DeepHealthCheck, HealthCheckTarget, HyperPodApi, HyperPodCluster,
    HyperPodInstanceGroupRequest, HyperPodInstanceGroupStatus, NodeAction, OfferingQuery, ProviderError,
    ProviderErrorKind, ResourceState, Result, TrainingPlan, TrainingPlanOffering, TrainingPlanSummary,
    UpdateClusterSoftware, UpdateHyperPodCluster, addon_minimum_version, addon_version_at_least,
};
use instantstart_core::spec::{CapacitySpec, HYPERPOD_KUBERNETES_VERSIONS, InterfaceMode, LifecycleScript};
use std::collections::BTreeMap;

/// SageMaker's answer for a cluster name the region does not hold.
fn cluster_not_found(api: &str, region: &str, cluster: &str) -> ProviderError {
    ProviderError::not_found(api, format!("ResourceNotFound: Cluster {cluster} not found in {region}"))
}

fn invalid(api: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

/// Writes down what finished on-demand checks did (before a write acts on the slots): a
/// replaced instance becomes the slot's next generation, a passed check is cleared; a failed
/// one without automatic recovery stays (`Failure`) until a reboot or replace.
fn settle_checks(h: &mut HyperPodRec, now: f64) {
    let automatic = h.node_recovery == instantstart_core::spec::NodeRecovery::Automatic;
    for g in &mut h.groups {
        for slot in &mut g.slots {
            let Some(until) = slot.check_until.filter(|u| now >= *u) else { continue };
            if !slot.check_fails {
                slot.check_until = None;
            } else if automatic {
                slot.generation += 1;
                slot.pending_until = Some(until + timings::HYPERPOD_NODE_REPLACE);
                slot.check_until = None;
                slot.check_fails = false;
            }
        }
    }
}

/// StartClusterHealthCheck: the named groups' instances (or the listed ones) go
/// `DeepHealthCheckInProgress` for [`timings::HYPERPOD_DEEP_HEALTH_CHECK`]. Refused as SageMaker
/// refuses: a cluster not InService, an unknown group, a type without accelerators (deep
/// health checks are for GPU/Trainium instances), `InstanceConnectivity` on a type without
/// EFA, an instance not of the group or not Running. Under the `ResourceFails` fault the first
/// checked instance fails its check.
fn start_health_check(
    w: &mut World,
    region: &str,
    cluster: &str,
    targets: &[HealthCheckTarget],
    now: f64,
    fails: bool,
) -> Result<()> {
    const API: &str = "sagemaker:StartClusterHealthCheck";
    let h = w.hyperpod.get_mut(&rkey(region, cluster)).ok_or_else(|| cluster_not_found(API, region, cluster))?;
    if h.life.phase(now) != Phase::Active
        || h.updating_until.is_some_and(|u| now < u)
        || software_update::running(h, now)
    {
        return Err(invalid(API, format!("ValidationException: cluster {cluster} is not InService")));
    }
    if targets.is_empty() || targets.len() > 99 {
        return Err(invalid(API, "ValidationException: DeepHealthCheckConfigurations must have 1-99 items"));
    }
    settle_checks(h, now);
    let view = nodes(h, now);
    let mut chosen: Vec<(usize, String)> = Vec::new();
    for t in targets {
        let Some(gi) = h.groups.iter().position(|g| g.name == t.instance_group) else {
            return Err(invalid(
                API,
                format!("ValidationException: instance group {} does not exist in cluster {cluster}", t.instance_group),
            ));
        };
        let g = &h.groups[gi];
        let info = instance_type_info(&g.instance_type);
        if !info.map_or_else(|| is_accelerated_family(&g.instance_type), |i| i.accelerators > 0) {
            return Err(invalid(
                API,
                format!(
                    "ValidationException: deep health checks are supported on accelerated instance types only; instance group {} is {}",
                    g.name, g.instance_type
                ),
            ));
        }
        if t.checks.contains(&DeepHealthCheck::InstanceConnectivity) && info.is_some_and(|i| i.efa_interfaces == 0) {
            return Err(invalid(
                API,
                format!(
                    "ValidationException: InstanceConnectivity needs EFA; instance group {} is {}, which has no EFA interface",
                    g.name, g.instance_type
                ),
            ));
        }
        if t.checks.is_empty() {
            return Err(invalid(API, "ValidationException: DeepHealthChecks must have 1-3 items"));
        }
        let of_group: Vec<&NodeView> = view.iter().filter(|n| n.group == g.name).collect();
        if t.node_ids.is_empty() {
            chosen.extend(of_group.iter().filter(|n| n.status == "Running").map(|n| (gi, n.instance_id.clone())));
        }
        for id in &t.node_ids {
            match of_group.iter().find(|n| &n.instance_id == id) {
                None => {
                    return Err(invalid(
                        API,
                        format!("ValidationException: {id} is not an instance of instance group {}", g.name),
                    ));
                }
                Some(n) if n.status != "Running" => {
                    return Err(invalid(
                        API,
                        format!(
                            "ValidationException: instance {id} is {}; deep health checks need it Running",
                            n.status
                        ),
                    ));
                }
                Some(_) => chosen.push((gi, id.clone())),
            }
        }
    }
    for (k, (gi, id)) in chosen.iter().enumerate() {
        materialize(h, *gi);
        let Some(j) = slot_of(h, *gi, id) else { continue };
        let slot = &mut h.groups[*gi].slots[j];
        slot.check_until = Some(now + timings::HYPERPOD_DEEP_HEALTH_CHECK);
        slot.check_fails = fails && k == 0;
    }
    Ok(())
}

/// The slot of group `gi` whose current instance is `id`.
fn slot_of(h: &HyperPodRec, gi: usize, id: &str) -> Option<usize> {
    let g = &h.groups[gi];
    (0..g.slots.len())
        .find(|&j| !g.slots[j].removed && format!("i-0{:016x}", node_hash(h, g, j, g.slots[j].generation)) == id)
}

pub(crate) fn cluster_view(h: &HyperPodRec, now: f64) -> HyperPodCluster {
    let phase = h.life.phase(now);
    let group_status = match &phase {
        Phase::Creating => "Creating",
        Phase::Active if h.updating_until.is_some_and(|u| now < u) => "Updating",
        Phase::Active if software_update::running(h, now) => "SystemUpdating",
        Phase::Active => "InService",
        Phase::Failed(_) => "Failed",
        Phase::Deleting | Phase::Gone => "Deleting",
    };
    let running = nodes(h, now);
    HyperPodCluster {
        name: h.name.clone(),
        arn: h.arn.clone(),
        region: h.region.clone(),
        state: match h.life.state(now) {
            ResourceState::Active if h.updating_until.is_some_and(|u| now < u) || software_update::running(h, now) => {
                ResourceState::Updating
            }
            other => other,
        },
        instance_groups: h
            .groups
            .iter()
            .map(|g| HyperPodInstanceGroupStatus {
                name: g.name.clone(),
                instance_type: g.instance_type.clone(),
                current_count: running.iter().filter(|n| n.group == g.name && n.status == "Running").count() as u32,
                target_count: g.count,
                status: if g.failure.is_some() {
                    "Failed".to_string()
                } else if software_update::group_running(g, now) {
                    "SystemUpdating".to_string()
                } else if group_status == "SystemUpdating" {
                    "InService".to_string()
                } else {
                    group_status.to_string()
                },
                capacity: match (&g.training_plan, g.spot) {
                    (Some(arn), _) => CapacitySpec::TrainingPlan { arn: arn.clone() },
                    (None, true) => CapacitySpec::Spot,
                    (None, false) => CapacitySpec::OnDemand,
                },
                interface_mode: if g.efa_only { InterfaceMode::EfaOnly } else { InterfaceMode::Standard },
                subnet_ids: vec![g.subnet_id.clone()],
                security_group_ids: g.security_group_ids.clone(),
                ebs_volume_gb: g.ebs_volume_gb,
                lifecycle_script: g.lifecycle.clone(),
                execution_role_arn: Some(g.execution_role.clone()).filter(|r| !r.is_empty()),
                deep_health_checks: g.checks,
                threads_per_core: g.threads_per_core,
                failure: g.failure.clone(),
                software: software_update::group_software(&h.region, g, now),
            })
            .collect(),
        node_recovery: h.node_recovery,
        tiered_storage: h.tiered_storage,
        // AutoScaling.Status is InService once the update completed (Creating before).
        autoscaling: autoscaling_in_service(h, now),
        tags: h.tags.clone(),
        eks_cluster_arn: Some(h.eks_arn.clone()),
    }
}

/// Instances already promised in `region`: (instance type → on-demand/spot count, plan ARN →
/// reserved count), over clusters that exist and have not failed.
pub(crate) fn usage(w: &World, region: &str, now: f64) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
    let mut by_type = BTreeMap::new();
    let mut by_plan = BTreeMap::new();
    for h in w.hyperpod.values().filter(|h| h.region == region) {
        if matches!(h.life.phase(now), Phase::Gone | Phase::Failed(_)) {
            continue;
        }
        for g in &h.groups {
            match &g.training_plan {
                Some(arn) => *by_plan.entry(arn.clone()).or_insert(0) += g.count,
                None => *by_type.entry(g.instance_type.clone()).or_insert(0) += g.count,
            }
        }
    }
    (by_type, by_plan)
}

fn create_cluster(
    w: &mut World,
    req: &CreateHyperPodCluster,
    now: f64,
    fails: Option<&str>,
) -> Result<HyperPodCluster> {
    const API: &str = "sagemaker:CreateCluster";
    check_region(API, &req.region)?;
    if let Err(rule) = names::hyperpod_name(&req.name) {
        return Err(invalid(API, format!("ValidationException: cluster name {:?} {rule}", req.name)));
    }
    if let Some(h) = w.hyperpod.get(&rkey(&req.region, &req.name)) {
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::AlreadyExists,
            format!("ResourceInUse: Cluster {} already exists ({})", req.name, h.arn),
        ));
    }
    let eks = w
        .eks_by_arn(&req.eks_cluster_arn)
        .filter(|c| c.region == req.region)
        .ok_or_else(|| invalid(API, format!("ValidationException: EKS cluster {} not found", req.eks_cluster_arn)))?;
    if eks.life.phase(now) != Phase::Active {
        return Err(invalid(
            API,
            format!("ValidationException: EKS cluster {} must be ACTIVE to orchestrate a HyperPod cluster", eks.name),
        ));
    }
    // SageMaker developer guide, `sagemaker-hyperpod-eks-prerequisites`: "Amazon EKS cluster
    // authentication mode" (HyperPod supports API and API_AND_CONFIG_MAP only).
    if eks.authentication_mode == instantstart_core::provider::CONFIG_MAP_ONLY {
        return Err(invalid(
            API,
            format!(
                "ValidationException: EKS cluster {} uses authentication mode CONFIG_MAP; SageMaker HyperPod supports \
                 API and API_AND_CONFIG_MAP",
                eks.name
            ),
        ));
    }
    // SageMaker developer guide, `sagemaker-hyperpod-eks-prerequisites`: "Kubernetes version
    // support" (HyperPod supports the versions listed there), and "Networking" (the Amazon VPC
    // CNI plugin at 1.18.3 or later is required, and no other CNI is supported).
    if !HYPERPOD_KUBERNETES_VERSIONS.contains(&eks.version.as_str()) {
        return Err(invalid(
            API,
            format!(
                "ValidationException: EKS cluster {} runs Kubernetes {}; SageMaker HyperPod supports {}",
                eks.name,
                eks.version,
                HYPERPOD_KUBERNETES_VERSIONS.join(", ")
            ),
        ));
    }
    let cni = crate::eks::vpc_cni_version(eks);
    if let Some(minimum) = addon_minimum_version("vpc-cni")
        && !addon_version_at_least(&cni, minimum)
    {
        return Err(invalid(
            API,
            format!(
                "ValidationException: EKS cluster {} runs the Amazon VPC CNI {cni}; SageMaker HyperPod requires {minimum} or later",
                eks.name
            ),
        ));
    }
    if req.instance_groups.is_empty() || req.instance_groups.len() > 20 {
        return Err(invalid(API, "ValidationException: a cluster needs between 1 and 20 instance groups"));
    }
    let eks_vpc = eks.vpc_id.clone();
    let (mut used_by_type, mut used_by_plan) = usage(w, &req.region, now);
    let mut groups = Vec::new();
    for (i, g) in req.instance_groups.iter().enumerate() {
        let s = &g.spec;
        if let Err(rule) = names::hyperpod_name(&s.name) {
            return Err(invalid(API, format!("ValidationException: instance group name {:?} {rule}", s.name)));
        }
        if req.instance_groups[..i].iter().any(|o| o.spec.name == s.name) {
            return Err(invalid(API, format!("ValidationException: instance group name {} is used twice", s.name)));
        }
        groups.push(admit_group(w, API, &req.region, &eks_vpc, g, &mut used_by_type, &mut used_by_plan)?);
    }
    let dhc = groups.iter().any(|g| g.deep_health_checks);
    let ready = timings::HYPERPOD_CREATE + if dhc { timings::HYPERPOD_DEEP_HEALTH_CHECK } else { 0.0 };
    let mut life = Lifecycle::new(now, ready);
    if let Some(g) = groups.iter().find(|g| !has_capacity(&req.region, g)) {
        let zone_id = zone_index(&req.region, &g.availability_zone)
            .and_then(|i| crate::catalog::availability_zones(&req.region).get(i).map(|z| z.zone_id.clone()))
            .unwrap_or_default();
        life.fail_after(
            timings::HYPERPOD_CAPACITY_FAILURE,
            format!(
                "InsufficientInstanceCapacity: We currently do not have sufficient {} capacity in the Availability Zone you requested ({} / {zone_id}) for instance group {}. Choose another Availability Zone or use a training plan.",
                g.instance_type, g.availability_zone, g.name
            ),
        );
    }
    // N1 (docs/aws-preconditions.md): nodes in private subnets bootstrap through the VPC's NAT
    // gateway (EKS endpoint, ECR, S3); while it is not `available` they never join.
    if let Some((g, why)) =
        groups.iter().find_map(|g| crate::network::egress_unavailable(w, &g.subnet_id, now).map(|why| (g, why)))
    {
        life.fail_after(
            timings::HYPERPOD_FIRST_NODE + timings::HYPERPOD_NODE_BOOT,
            format!(
                "Instance group {}: the instances in subnet {} could not bootstrap: no route to the internet ({why}). \
                 Nodes in private subnets need a NAT gateway to reach the Amazon EKS endpoint, Amazon ECR and Amazon S3",
                g.name, g.subnet_id
            ),
        );
    }
    if let Some(g) = groups.iter().find(|g| g.failure.is_some()) {
        life.fail_after(
            timings::HYPERPOD_FIRST_NODE + timings::HYPERPOD_NODE_BOOT,
            g.failure.clone().unwrap_or_default(),
        );
    }
    if let Some(reason) = fails {
        life.fail_after(ready * timings::FAILURE_SHARE, reason);
    }
    let uid = w.next_u64();
    let cluster_id = w.hex(12, false);
    let rec = HyperPodRec {
        name: req.name.clone(),
        region: req.region.clone(),
        arn: format!("arn:aws:sagemaker:{}:{}:cluster/{cluster_id}", req.region, w.account),
        eks_arn: req.eks_cluster_arn.clone(),
        node_recovery: req.node_recovery,
        groups,
        tags: req.tags.clone(),
        uid,
        life,
        updating_until: None,
        tiered_storage: None,
        autoscaling: false,
        events: Vec::new(),
    };
    let mut rec = rec;
    crate::hyperpod_events::created(&mut rec);
    let view = cluster_view(&rec, now);
    w.hyperpod.insert(rkey(&req.region, &req.name), rec);
    Ok(view)
}

/// Checks one instance group the way the service does (type, EFA-only, subnet in the EKS VPC,
/// security groups, execution role, training plan or quota) and returns its record.
fn admit_group(
    w: &World,
    api: &str,
    region: &str,
    eks_vpc: &str,
    g: &HyperPodInstanceGroupRequest,
    used_by_type: &mut BTreeMap<String, u32>,
    used_by_plan: &mut BTreeMap<String, u32>,
) -> Result<GroupRec> {
    let s = &g.spec;
    // SageMaker's model refuses a value outside its ClusterInstanceType enum.
    if !is_cluster_instance_type(&s.instance_type) {
        return Err(invalid(
            api,
            format!("ValidationException: instance type {} is not supported by HyperPod", s.instance_type),
        ));
    }
    let lifecycle = require_lifecycle(api, g)?;
    if s.interface_mode == InterfaceMode::EfaOnly
        && instance_type_info(&s.instance_type).is_some_and(|i| !i.efa_only_supported)
    {
        return Err(invalid(
            api,
            format!(
                "ValidationException: instance type {} does not support the EFA-only network interface mode",
                s.instance_type
            ),
        ));
    }
    let subnet = w
        .subnets
        .get(&g.subnet_id)
        .filter(|x| x.region == region)
        .ok_or_else(|| invalid(api, format!("ValidationException: subnet {} does not exist", g.subnet_id)))?;
    if subnet.vpc_id != eks_vpc {
        return Err(invalid(
            api,
            format!(
                "ValidationException: subnet {} is in {}, not in the EKS cluster's VPC {eks_vpc}",
                subnet.id, subnet.vpc_id
            ),
        ));
    }
    if g.security_group_ids.is_empty() || g.security_group_ids.iter().any(|sg| !sg.starts_with("sg-")) {
        return Err(invalid(api, format!("ValidationException: instance group {} needs security group ids", s.name)));
    }
    match w.role_by_arn(&g.execution_role_arn) {
        Some(r) if r.trusts("sagemaker.amazonaws.com") => {}
        _ => {
            return Err(invalid(
                api,
                format!(
                    "ValidationException: execution role {} does not exist or cannot be assumed by sagemaker.amazonaws.com",
                    g.execution_role_arn
                ),
            ));
        }
    }
    let failure = script_failure(w, &g.execution_role_arn, lifecycle, &s.name);
    let training_plan = match &s.capacity {
        CapacitySpec::TrainingPlan { arn } => {
            let plan = w
                .training_plans
                .get(arn)
                .ok_or_else(|| invalid(api, format!("ValidationException: training plan {arn} not found")))?;
            if plan.status != "Active" {
                return Err(invalid(
                    api,
                    format!("ValidationException: training plan {arn} is {}, not Active", plan.status),
                ));
            }
            if plan.instance_type != s.instance_type {
                return Err(invalid(
                    api,
                    format!(
                        "ValidationException: training plan {arn} reserves {}, not {}",
                        plan.instance_type, s.instance_type
                    ),
                ));
            }
            if plan.availability_zone != subnet.availability_zone {
                return Err(invalid(
                    api,
                    format!(
                        "ValidationException: training plan {arn} reserves capacity in {}, but subnet {} is in {}",
                        plan.availability_zone, subnet.id, subnet.availability_zone
                    ),
                ));
            }
            let used = used_by_plan.entry(arn.clone()).or_insert(0);
            if *used + s.count > plan.instance_count {
                return Err(invalid(
                    api,
                    format!(
                        "ValidationException: training plan {arn} reserves {} instances, {} are in use, {} requested",
                        plan.instance_count, used, s.count
                    ),
                ));
            }
            *used += s.count;
            Some(arn.clone())
        }
        CapacitySpec::OnDemand | CapacitySpec::Spot => {
            let quota = w.quota(region, &s.instance_type);
            let used = used_by_type.entry(s.instance_type.clone()).or_insert(0);
            if *used + s.count > quota {
                return Err(ProviderError::new(
                    api,
                    ProviderErrorKind::QuotaExceeded,
                    format!(
                        "ResourceLimitExceeded: The account-level service limit '{}' is {quota} Instances, with current utilization of {used} Instances and a request delta of {} Instances. Please use AWS Service Quotas to request an increase for this quota.",
                        quota_name(&s.instance_type),
                        s.count
                    ),
                ));
            }
            *used += s.count;
            None
        }
    };
    Ok(GroupRec {
        name: s.name.clone(),
        instance_type: s.instance_type.clone(),
        count: s.count,
        subnet_id: subnet.id.clone(),
        security_group_ids: g.security_group_ids.clone(),
        availability_zone: subnet.availability_zone.clone(),
        deep_health_checks: s.deep_health_checks.stress || s.deep_health_checks.connectivity,
        training_plan,
        spot: s.capacity == CapacitySpec::Spot,
        efa_only: s.interface_mode == InterfaceMode::EfaOnly,
        slots: Vec::new(),
        ebs_volume_gb: Some(s.ebs_volume_gb),
        lifecycle: Some(lifecycle.clone()),
        execution_role: g.execution_role_arn.clone(),
        checks: s.deep_health_checks,
        threads_per_core: Some(g.threads_per_core.unwrap_or(if is_accelerated_family(&s.instance_type) {
            1
        } else {
            2
        })),
        failure,
        idle_since: None,
        image_release: None,
        image_id: None,
        software_update: None,
    })
}

/// The group's `LifeCycleConfig`, required for every group of an EKS-orchestrated cluster
/// (module docs).
fn require_lifecycle<'a>(api: &str, g: &'a HyperPodInstanceGroupRequest) -> Result<&'a LifecycleScript> {
    g.spec.lifecycle_script.as_ref().ok_or_else(|| {
        invalid(
            api,
            format!(
                "ValidationException: LifeCycleConfig is required for instance group {}: EKS-orchestrated clusters do not support optional node lifecycle configuration",
                g.spec.name
            ),
        )
    })
}

/// Why the group's instances fail to run their lifecycle script, if they do: the execution
/// role cannot read it (s3:ListBucket on the bucket, s3:GetObject on the object), or the
/// `OnCreate` object does not exist (module docs).
fn script_failure(w: &World, role_arn: &str, l: &LifecycleScript, group: &str) -> Option<String> {
    let (bucket, key) = script_object(l)?;
    let prefix = l.source_s3_uri.trim_end_matches('/');
    // S3 evaluates `s3:ResourceAccount` against the bucket's owner.
    let owner = w.buckets.get(&bucket).and_then(|b| b.owner.clone()).unwrap_or_else(|| w.account.clone());
    let cx = || crate::policy::RequestContext::s3_resource_account(&owner);
    let readable = w.role_by_arn(role_arn).is_some_and(|r| {
        r.allows_in("s3:ListBucket", &format!("arn:aws:s3:::{bucket}"), cx())
            && r.allows_in("s3:GetObject", &format!("arn:aws:s3:::{bucket}/{key}"), cx())
    });
    let error = if !readable {
        format!(
            "Execution role provided does not have permissions to access the bucket {prefix}/. Please ensure that the role has minimum permissions to read the bucket (s3:ListBucket, s3:GetObject)."
        )
    } else if !w.buckets.get(&bucket).is_some_and(|b| b.objects.contains_key(&key)) {
        format!("Lifecycle script {} was not found under {prefix}/: s3://{bucket}/{key} does not exist.", l.on_create)
    } else {
        return None;
    };
    Some(format!(
        "Instances of instance group {group} failed to provision with the following error: \"{error}\" Note that multiple instances may be impacted."
    ))
}

fn update_cluster(w: &mut World, req: &UpdateHyperPodCluster, now: f64) -> Result<HyperPodCluster> {
    const API: &str = "sagemaker:UpdateCluster";
    let key = rkey(&req.region, &req.name);
    let h = w.hyperpod.get(&key).ok_or_else(|| {
        ProviderError::not_found(API, format!("ResourceNotFound: Cluster {} not found in {}", req.name, req.region))
    })?;
    match h.life.phase(now) {
        Phase::Active => {}
        other => {
            return Err(ProviderError::new(
                API,
                ProviderErrorKind::Conflict,
                format!("ConflictException: cluster {} is {other:?}; it can be updated only when InService", req.name),
            ));
        }
    }
    if h.updating_until.is_some_and(|u| now < u) || software_update::running(h, now) {
        return Err(ProviderError::new(
            API,
            ProviderErrorKind::Conflict,
            format!("ConflictException: cluster {} is being updated; retry when the update completes", req.name),
        ));
    }
    // AWS ML blog "Tiered KV cache for large LLMs on Amazon SageMaker HyperPod with Curvine",
    // API note: "Calling update-cluster with --tiered-storage-config alone returns
    // ValidationException. At least one of --node-recovery or --instance-groups must also be
    // supplied."
    if req.tiered_storage.is_some() && req.node_recovery.is_none() && req.instance_groups.is_empty() {
        return Err(invalid(
            API,
            "ValidationException: TieredStorageConfig cannot be updated alone; at least one of NodeRecovery or InstanceGroups must also be supplied",
        ));
    }
    if let Some(a) = &req.autoscaling
        && a.enabled
    {
        // UpdateCluster API reference, ClusterRole: "required when autoscaling is enabled".
        if a.role_arn.is_none() {
            return Err(invalid(API, "ValidationException: ClusterRole is required to enable autoscaling"));
        }
        // sagemaker-hyperpod-eks-autoscaling, Prerequisites: "NodeRecovery set to Automatic".
        if req.node_recovery.unwrap_or(h.node_recovery) != instantstart_core::spec::NodeRecovery::Automatic {
            return Err(invalid(
                API,
                "ValidationException: Karpenter autoscaling requires NodeRecovery to be Automatic",
            ));
        }
    }
    // The same prerequisite, kept: NodeRecovery None on a cluster whose autoscaling stays on.
    if req.node_recovery == Some(instantstart_core::spec::NodeRecovery::None)
        && req.autoscaling.as_ref().map_or(h.autoscaling, |a| a.enabled)
    {
        return Err(invalid(
            API,
            "ValidationException: NodeRecovery must be Automatic while Karpenter autoscaling is enabled",
        ));
    }
    for name in &req.instance_groups_to_delete {
        if !h.groups.iter().any(|g| &g.name == name) {
            return Err(invalid(API, format!("ValidationException: instance group {name} does not exist")));
        }
    }
    let eks_vpc = w.eks_by_arn(&h.eks_arn).map(|e| e.vpc_id.clone()).unwrap_or_default();
    let (mut used_by_type, mut used_by_plan) = usage(w, &req.region, now);
    let mut changes: Vec<(Option<usize>, GroupRec)> = Vec::new();
    for g in &req.instance_groups {
        let s = &g.spec;
        match h.groups.iter().position(|x| x.name == s.name) {
            Some(i) => {
                let lifecycle = require_lifecycle(API, g)?;
                let cur = &h.groups[i];
                let capacity_changed = match &s.capacity {
                    CapacitySpec::TrainingPlan { arn } => cur.training_plan.as_deref() != Some(arn.as_str()),
                    CapacitySpec::Spot => cur.training_plan.is_some() || !cur.spot,
                    CapacitySpec::OnDemand => cur.training_plan.is_some() || cur.spot,
                };
                if cur.instance_type != s.instance_type
                    || capacity_changed
                    || cur.efa_only != (s.interface_mode == InterfaceMode::EfaOnly)
                {
                    return Err(invalid(
                        API,
                        format!(
                            "ValidationException: instance type, capacity type and network interface mode of instance group {} cannot be changed",
                            s.name
                        ),
                    ));
                }
                if s.count > cur.count {
                    let delta = s.count - cur.count;
                    match &cur.training_plan {
                        Some(arn) => {
                            let reserved = w.training_plans.get(arn).map(|p| p.instance_count).unwrap_or(0);
                            let used = used_by_plan.get(arn).copied().unwrap_or(0);
                            if used + delta > reserved {
                                return Err(invalid(
                                    API,
                                    format!(
                                        "ValidationException: training plan {arn} reserves {reserved} instances, {used} are in use, {delta} more requested"
                                    ),
                                ));
                            }
                        }
                        None => {
                            let quota = w.quota(&req.region, &s.instance_type);
                            let used = used_by_type.entry(s.instance_type.clone()).or_insert(0);
                            if *used + delta > quota {
                                return Err(ProviderError::new(
                                    API,
                                    ProviderErrorKind::QuotaExceeded,
                                    format!(
                                        "ResourceLimitExceeded: The account-level service limit '{}' is {quota} Instances, with current utilization of {used} Instances and a request delta of {delta} Instances.",
                                        quota_name(&s.instance_type)
                                    ),
                                ));
                            }
                            *used += delta;
                        }
                    }
                }
                let mut next = cur.clone();
                next.count = s.count;
                // What the update sends becomes the group's configuration (for the instances
                // launched from now on); DescribeCluster returns it.
                next.lifecycle = Some(lifecycle.clone());
                next.ebs_volume_gb = Some(s.ebs_volume_gb);
                next.checks = s.deep_health_checks;
                next.execution_role.clone_from(&g.execution_role_arn);
                next.threads_per_core = g.threads_per_core.or(cur.threads_per_core);
                changes.push((Some(i), next));
            }
            None => {
                if let Err(rule) = names::hyperpod_name(&s.name) {
                    return Err(invalid(API, format!("ValidationException: instance group name {:?} {rule}", s.name)));
                }
                let rec = admit_group(w, API, &req.region, &eks_vpc, g, &mut used_by_type, &mut used_by_plan)?;
                changes.push((None, rec));
            }
        }
    }
    let h = w.hyperpod.get_mut(&key).expect("checked above");
    let until = now + timings::HYPERPOD_UPDATE;
    crate::hyperpod_events::update_started(h, now, until);
    for name in &req.instance_groups_to_delete {
        events::group(h, now, name, ClusterEventLevel::Info, format!("Instance group {name} is being deleted"));
    }
    h.groups.retain(|g| !req.instance_groups_to_delete.contains(&g.name));
    for (index, rec) in changes {
        match index.and_then(|_| h.groups.iter().position(|g| g.name == rec.name)) {
            Some(i) => {
                materialize(h, i);
                let g = &mut h.groups[i];
                let live: Vec<usize> = g.slots.iter().enumerate().filter(|(_, s)| !s.removed).map(|(j, _)| j).collect();
                let target = rec.count as usize;
                let (from, name) = (live.len(), g.name.clone());
                let mut added = Vec::new();
                let mut removed = Vec::new();
                if target > live.len() {
                    for k in 0..(target - live.len()) {
                        added.push(g.slots.len());
                        g.slots.push(SlotRec {
                            appear_at: now + timings::HYPERPOD_SCALE_FIRST_NODE + 10.0 * k as f64,
                            generation: 0,
                            removed: false,
                            pending_until: None,
                            removed_at: None,
                            check_until: None,
                            check_fails: false,
                        });
                    }
                } else {
                    for &j in live.iter().rev().take(live.len() - target) {
                        g.slots[j].removed = true;
                        removed.push(j);
                    }
                }
                if from != target {
                    let text = format!("Instance group {name} is being scaled from {from} to {target} instances");
                    events::group(h, now, &name, ClusterEventLevel::Info, text);
                }
                events::scaled_down(h, i, &removed, now);
                for j in added {
                    events::launch(h, i, j);
                }
                let g = &mut h.groups[i];
                g.count = rec.count;
                g.lifecycle = rec.lifecycle;
                g.ebs_volume_gb = rec.ebs_volume_gb;
                g.checks = rec.checks;
                g.execution_role = rec.execution_role;
                g.threads_per_core = rec.threads_per_core;
            }
            None => {
                let mut g = rec;
                g.slots = (0..g.count)
                    .map(|k| SlotRec {
                        appear_at: now + timings::HYPERPOD_SCALE_FIRST_NODE + 10.0 * f64::from(k),
                        generation: 0,
                        removed: false,
                        pending_until: None,
                        removed_at: None,
                        check_until: None,
                        check_fails: false,
                    })
                    .collect();
                h.groups.push(g);
                let gi = h.groups.len() - 1;
                let g = &h.groups[gi];
                let (name, text) = (
                    g.name.clone(),
                    format!(
                        "Instance group {} is being created: {} x {} in {}",
                        g.name, g.count, g.instance_type, g.availability_zone
                    ),
                );
                events::group(h, now, &name, ClusterEventLevel::Info, text);
                match h.groups[gi].failure.clone() {
                    Some(failure) => {
                        let at = now + timings::HYPERPOD_SCALE_FIRST_NODE + timings::HYPERPOD_NODE_BOOT;
                        events::group(h, at, &name, ClusterEventLevel::Error, failure);
                    }
                    None => {
                        for j in 0..h.groups[gi].slots.len() {
                            events::launch(h, gi, j);
                        }
                    }
                }
            }
        }
    }
    if let Some(r) = req.node_recovery {
        h.node_recovery = r;
    }
    if let Some(t) = req.tiered_storage {
        h.tiered_storage = t;
    }
    if let Some(a) = &req.autoscaling {
        h.autoscaling = a.enabled;
    }
    h.updating_until = Some(until);
    Ok(cluster_view(h, now))
}

fn batch_nodes(
    w: &mut World,
    region: &str,
    cluster: &str,
    action: NodeAction,
    ids: &[String],
    now: f64,
) -> Result<BatchNodeResult> {
    let api = match action {
        NodeAction::Reboot => "sagemaker:BatchRebootClusterNodes",
        NodeAction::Replace => "sagemaker:BatchReplaceClusterNodes",
        NodeAction::Delete => "sagemaker:BatchDeleteClusterNodes",
    };
    let h = w.hyperpod.get_mut(&rkey(region, cluster)).ok_or_else(|| cluster_not_found(api, region, cluster))?;
    if h.life.phase(now) != Phase::Active || software_update::running(h, now) {
        return Err(ProviderError::new(
            api,
            ProviderErrorKind::Conflict,
            format!("ConflictException: cluster {cluster} is not InService"),
        ));
    }
    settle_checks(h, now);
    let view = nodes(h, now);
    let mut result = BatchNodeResult::default();
    for id in ids {
        let Some(node) = view.iter().find(|n| &n.instance_id == id) else {
            result.failed.push((id.clone(), format!("InstanceIdNotFound: {id} is not a node of {cluster}")));
            continue;
        };
        // A node that failed a deep health check (Failure) can be rebooted or replaced.
        if node.status != "Running" && node.status != "Failure" {
            result.failed.push((
                id.clone(),
                format!("InstanceIdInUse: {id} is {}; another operation is in progress", node.status),
            ));
            continue;
        }
        let gi = h.groups.iter().position(|g| g.name == node.group).expect("node of a group");
        materialize(h, gi);
        let j = slot_of(h, gi, id).expect("slot of a node");
        let g = &mut h.groups[gi];
        g.slots[j].check_until = None;
        g.slots[j].check_fails = false;
        let name = g.name.clone();
        let info = ClusterEventLevel::Info;
        match action {
            NodeAction::Reboot => {
                let until = now + timings::HYPERPOD_NODE_REBOOT;
                g.slots[j].pending_until = Some(until);
                events::instance(h, now, &name, id, info, format!("Instance {id} is rebooting: Pending"));
                events::instance(h, until, &name, id, info, format!("Instance {id} rebooted: Running"));
            }
            NodeAction::Replace => {
                let until = now + timings::HYPERPOD_NODE_REPLACE;
                g.slots[j].generation += 1;
                g.slots[j].pending_until = Some(until);
                let new = instance_id(h, &h.groups[gi], j, h.groups[gi].slots[j].generation);
                let warn = ClusterEventLevel::Warn;
                events::instance(h, now, &name, id, warn, format!("Instance {id} is being replaced by {new}"));
                events::instance(
                    h,
                    now,
                    &name,
                    &new,
                    info,
                    format!("Instance {new} launched to replace {id}: Pending"),
                );
                events::instance(h, until, &name, &new, info, format!("Instance {new} is Running"));
            }
            NodeAction::Delete => {
                g.slots[j].removed = true;
                g.count = g.count.saturating_sub(1);
                let text = format!("Instance {id} is being deleted: instance group {name} shrinks to {}", g.count);
                events::instance(h, now, &name, id, info, text);
            }
        }
        result.accepted.push(id.clone());
    }
    Ok(result)
}

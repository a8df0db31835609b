//! `HyperPodApi`: SageMaker HyperPod clusters orchestrated by EKS. Creation validates what the
//! service validates (EKS cluster Active, roles, subnets in the EKS VPC, quotas, training plan
//! reservations, EFA-only support) and then takes ~15 minutes while instances appear group by
//! group (Pending → [DeepHealthCheckInProgress →] Running). A group whose instance type is not
//! offered in its AZ (and has no reservation) makes the cluster fail, as insufficient capacity
//! does. Training plans are added with [`SimCloud::add_training_plan`].

use crate::catalog::{check_region, offered, quota_name, quota_value, zone_index};
use crate::cloud::SimCloud;
use crate::timings;
use crate::world::{GroupRec, HyperPodRec, Lifecycle, Phase, World, rkey, stable_hash};
use async_trait::async_trait;
use instantstart_core::names;
use instantstart_core::provider::{
    ClusterNode, CreateHyperPodCluster, HyperPodApi, HyperPodCluster, HyperPodInstanceGroupStatus, ProviderError,
    ProviderErrorKind, Result, TrainingPlan,
};
use instantstart_core::spec::{CapacitySpec, InterfaceMode, instance_type_info};
use std::collections::BTreeMap;

fn invalid(api: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

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
}

/// Whether a group can get its capacity: a reservation, or the type offered in its AZ.
fn has_capacity(region: &str, g: &GroupRec) -> bool {
    g.training_plan.is_some() || offered(region, &g.availability_zone, &g.instance_type)
}

/// The instances of `h` at `now`.
pub(crate) fn nodes(h: &HyperPodRec, now: f64) -> Vec<NodeView> {
    let deleting_since = match h.life.phase(now) {
        Phase::Gone | Phase::Failed(_) => return Vec::new(),
        Phase::Deleting => h.life.deleting.as_ref().map(|d| d.since),
        Phase::Creating | Phase::Active => None,
    };
    let mut out = Vec::new();
    for g in h.groups.iter().filter(|g| has_capacity(&h.region, g)) {
        let n = f64::from(g.count.max(1));
        for i in 0..g.count {
            let appear =
                h.life.created_at + timings::HYPERPOD_FIRST_NODE + timings::HYPERPOD_NODE_SPREAD * f64::from(i) / n;
            let booted = appear + timings::HYPERPOD_NODE_BOOT;
            let running_at = booted + if g.deep_health_checks { timings::HYPERPOD_DEEP_HEALTH_CHECK } else { 0.0 };
            let status = match deleting_since {
                Some(since) if appear <= since => "ShuttingDown",
                Some(_) => continue,
                None if now < appear => continue,
                None if now < booted => "Pending",
                None if now < running_at => "DeepHealthCheckInProgress",
                None => "Running",
            };
            let id = stable_hash(&[&h.uid.to_string(), &g.name, &i.to_string()]);
            out.push(NodeView {
                instance_id: format!("i-0{id:016x}"),
                group: g.name.clone(),
                instance_type: g.instance_type.clone(),
                availability_zone: g.availability_zone.clone(),
                subnet_id: g.subnet_id.clone(),
                status,
                running_at,
            });
        }
    }
    out
}

pub(crate) fn cluster_view(h: &HyperPodRec, now: f64) -> HyperPodCluster {
    let phase = h.life.phase(now);
    let group_status = match &phase {
        Phase::Creating => "Creating",
        Phase::Active => "InService",
        Phase::Failed(_) => "Failed",
        Phase::Deleting | Phase::Gone => "Deleting",
    };
    let running = nodes(h, now);
    HyperPodCluster {
        name: h.name.clone(),
        arn: h.arn.clone(),
        region: h.region.clone(),
        state: h.life.state(now),
        instance_groups: h
            .groups
            .iter()
            .map(|g| HyperPodInstanceGroupStatus {
                name: g.name.clone(),
                instance_type: g.instance_type.clone(),
                current_count: running.iter().filter(|n| n.group == g.name && n.status == "Running").count() as u32,
                target_count: g.count,
                status: group_status.to_string(),
                capacity: match &g.training_plan {
                    Some(arn) => instantstart_core::spec::CapacitySpec::TrainingPlan { arn: arn.clone() },
                    None => instantstart_core::spec::CapacitySpec::OnDemand,
                },
                interface_mode: instantstart_core::spec::InterfaceMode::Standard,
                subnet_ids: vec![g.subnet_id.clone()],
            })
            .collect(),
        node_recovery: h.node_recovery,
        tiered_storage: None,
        autoscaling: false,
        tags: h.tags.clone(),
    }
}

/// Instances already promised in `region`: (instance type → on-demand/spot count, plan ARN →
/// reserved count), over clusters that exist and have not failed.
fn usage(w: &World, region: &str, now: f64) -> (BTreeMap<String, u32>, BTreeMap<String, u32>) {
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
        let info = instance_type_info(&s.instance_type).ok_or_else(|| {
            invalid(API, format!("ValidationException: instance type {} is not supported by HyperPod", s.instance_type))
        })?;
        if s.interface_mode == InterfaceMode::EfaOnly && !info.efa_only_supported {
            return Err(invalid(
                API,
                format!(
                    "ValidationException: instance type {} does not support the EFA-only network interface mode",
                    s.instance_type
                ),
            ));
        }
        let subnet = w
            .subnets
            .get(&g.subnet_id)
            .filter(|x| x.region == req.region)
            .ok_or_else(|| invalid(API, format!("ValidationException: subnet {} does not exist", g.subnet_id)))?;
        if subnet.vpc_id != eks_vpc {
            return Err(invalid(
                API,
                format!(
                    "ValidationException: subnet {} is in {}, not in the EKS cluster's VPC {eks_vpc}",
                    subnet.id, subnet.vpc_id
                ),
            ));
        }
        if g.security_group_ids.is_empty() || g.security_group_ids.iter().any(|sg| !sg.starts_with("sg-")) {
            return Err(invalid(
                API,
                format!("ValidationException: instance group {} needs security group ids", s.name),
            ));
        }
        match w.role_by_arn(&g.execution_role_arn) {
            Some(r) if r.trusts("sagemaker.amazonaws.com") => {}
            _ => {
                return Err(invalid(
                    API,
                    format!(
                        "ValidationException: execution role {} does not exist or cannot be assumed by sagemaker.amazonaws.com",
                        g.execution_role_arn
                    ),
                ));
            }
        }
        let training_plan = match &s.capacity {
            CapacitySpec::TrainingPlan { arn } => {
                let plan = w
                    .training_plans
                    .get(arn)
                    .ok_or_else(|| invalid(API, format!("ValidationException: training plan {arn} not found")))?;
                if plan.status != "Active" {
                    return Err(invalid(
                        API,
                        format!("ValidationException: training plan {arn} is {}, not Active", plan.status),
                    ));
                }
                if plan.instance_type != s.instance_type {
                    return Err(invalid(
                        API,
                        format!(
                            "ValidationException: training plan {arn} reserves {}, not {}",
                            plan.instance_type, s.instance_type
                        ),
                    ));
                }
                if plan.availability_zone != subnet.availability_zone {
                    return Err(invalid(
                        API,
                        format!(
                            "ValidationException: training plan {arn} reserves capacity in {}, but subnet {} is in {}",
                            plan.availability_zone, subnet.id, subnet.availability_zone
                        ),
                    ));
                }
                let used = used_by_plan.entry(arn.clone()).or_insert(0);
                if *used + s.count > plan.instance_count {
                    return Err(invalid(
                        API,
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
                let quota = quota_value(w, &req.region, info);
                let used = used_by_type.entry(s.instance_type.clone()).or_insert(0);
                if *used + s.count > quota {
                    return Err(ProviderError::new(
                        API,
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
        groups.push(GroupRec {
            name: s.name.clone(),
            instance_type: s.instance_type.clone(),
            count: s.count,
            subnet_id: subnet.id.clone(),
            availability_zone: subnet.availability_zone.clone(),
            deep_health_checks: s.deep_health_checks.stress || s.deep_health_checks.connectivity,
            training_plan,
        });
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
    };
    let view = cluster_view(&rec, now);
    w.hyperpod.insert(rkey(&req.region, &req.name), rec);
    Ok(view)
}

#[async_trait]
impl HyperPodApi for SimCloud {
    async fn describe_training_plan(&self, region: &str, arn: &str) -> Result<Option<TrainingPlan>> {
        self.read("sagemaker:DescribeTrainingPlan", |w, _| {
            Ok(w.training_plans.get(arn).filter(|p| p.arn.split(':').nth(3) == Some(region)).cloned())
        })
    }

    async fn describe_hyperpod_cluster(&self, region: &str, name: &str) -> Result<Option<HyperPodCluster>> {
        self.read("sagemaker:DescribeCluster", |w, cx| {
            Ok(w.hyperpod.get(&rkey(region, name)).map(|h| cluster_view(h, cx.now)))
        })
    }

    async fn list_hyperpod_clusters(&self, region: &str) -> Result<Vec<String>> {
        self.read("sagemaker:ListClusters", |w, _| {
            Ok(w.hyperpod.values().filter(|h| h.region == region).map(|h| h.name.clone()).collect())
        })
    }

    async fn create_hyperpod_cluster(&self, req: &CreateHyperPodCluster) -> Result<HyperPodCluster> {
        self.write("sagemaker:CreateCluster", |w, cx| create_cluster(w, req, cx.now, cx.resource_fails.as_deref()))
    }

    async fn delete_hyperpod_cluster(&self, region: &str, name: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteCluster";
        self.write(API, |w, cx| match w.hyperpod.get_mut(&rkey(region, name)) {
            Some(h) => {
                h.life.start_deleting(cx.now, timings::HYPERPOD_DELETE);
                Ok(())
            }
            None => {
                Err(ProviderError::not_found(API, format!("ResourceNotFound: Cluster {name} not found in {region}")))
            }
        })
    }

    async fn list_cluster_nodes(&self, region: &str, cluster: &str) -> Result<Vec<ClusterNode>> {
        const API: &str = "sagemaker:ListClusterNodes";
        self.read(API, |w, cx| {
            let h = w.hyperpod.get(&rkey(region, cluster)).ok_or_else(|| {
                ProviderError::not_found(API, format!("ResourceNotFound: Cluster {cluster} not found in {region}"))
            })?;
            Ok(nodes(h, cx.now)
                .into_iter()
                .map(|n| ClusterNode {
                    instance_id: n.instance_id,
                    instance_group: n.group,
                    instance_type: n.instance_type,
                    status: n.status.to_string(),
                    availability_zone: n.availability_zone,
                })
                .collect())
        })
    }
}

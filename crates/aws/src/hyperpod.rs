//! `HyperPodApi` on SageMaker: HyperPod clusters orchestrated by EKS, their nodes, and
//! training plans.
//!
//! # CreateCluster
//!
//! `Orchestrator.Eks.ClusterArn`, `NodeRecovery` (the core defaults to `Automatic`), the
//! ownership tags, and per instance group: type, count, execution role, `ThreadsPerCore`
//! (1 for accelerated types, 2 for CPU types), an EBS volume, `OnStartDeepHealthChecks`
//! (`InstanceStress`, `InstanceConnectivity`), the lifecycle script (`LifeCycleConfig`
//! `SourceS3Uri` + `OnCreate`; required — a group without one is refused before the call, as
//! the service refuses it for EKS clusters), and the capacity: on-demand (the default, nothing
//! sent), `TrainingPlanArn`, or `CapacityRequirements.Spot`. EFA-only groups send `NetworkInterface.InterfaceType=efa-only`.
//! The cluster `VpcConfig` lists every group's subnet and security groups; when the groups use
//! more than one subnet, each group also gets an `OverrideVpcConfig` pinning it to its own
//! subnet (one AZ per group).
//!
//! Clusters are created in `Continuous` node-provisioning mode: HyperPod's managed
//! (Karpenter) autoscaling requires it and it cannot be switched on later; it also lets a
//! group with partial capacity come up instead of failing the whole cluster.
//!
//! SageMaker `CreateCluster` takes no client token: the cluster name is the idempotency key.
//! `ResourceInUse` is adopted only when the existing cluster carries our tags.
//!
//! # UpdateCluster and node actions
//!
//! [`HyperPodApi::update_hyperpod_cluster`] sends one `UpdateCluster` with the full spec of
//! every group to create or resize (new groups in another subnet than the cluster's get an
//! `OverrideVpcConfig`, existing groups keep what they have), `InstanceGroupsToDelete`,
//! `NodeRecovery`, `TieredStorageConfig` (`Enable` with the memory share, or `Disable`), and
//! `AutoScaling` (`Karpenter`, with the `ClusterRole` HyperPod assumes). A resized group is sent
//! as described ([`group_view`] reads EBS size, `LifeCycleConfig`, `ExecutionRole`,
//! `OnStartDeepHealthChecks` and `ThreadsPerCore`), never rebuilt from defaults. A settings-only
//! update (tiered storage or autoscaling without groups) always carries `NodeRecovery` — the
//! caller's, else the cluster's current one from the DescribeCluster the update starts with —
//! because UpdateCluster with `TieredStorageConfig` alone is a `ValidationException` (AWS ML blog
//! "Tiered KV cache for large LLMs on Amazon SageMaker HyperPod with Curvine", API note). `ConflictException`
//! (another update in progress) is `Conflict`. Batch reboot/replace/delete report per-node
//! outcomes; the service's refusals come back as `failed` entries, not as an error.
//!
//! [`HyperPodApi::start_cluster_health_check`] sends one `StartClusterHealthCheck` with a
//! `DeepHealthCheckConfigurations` entry per instance group (`InstanceIds` only when nodes are
//! named: absent means the whole group).
//!
//! # Reads: events and one node
//!
//! [`HyperPodApi::list_cluster_events`] sends one `ListClusterEvents` per page (`SortBy`
//! `EventTime`, `SortOrder` `Descending`, `MaxResults` = the page size, `NextToken` = the
//! caller's cursor, and the filters the query sets) and hands the service's `NextToken` back
//! as the next cursor: the REST list pages exactly as the service does.
//! [`HyperPodApi::describe_cluster_node`] reads one node (`DescribeClusterNode`): status and
//! message, launch and software-update times, placement, private address, capacity type,
//! interface type, lifecycle script and AMI; `ResourceNotFound` is `None`.
//!
//! # Reads: training plans and offerings
//!
//! [`HyperPodApi::list_training_plans`] reads every page of `ListTrainingPlans` (instance type
//! and AZ from the first reserved capacity). [`HyperPodApi::search_training_plan_offerings`]
//! checks the query ([`OfferingQuery::check`]), then sends `SearchTrainingPlanOfferings` with
//! `TargetResources` `hyperpod-cluster`, `InstanceType`, `InstanceCount`, `DurationHours` and
//! the optional `StartTimeAfter` / `EndTimeBefore`. Buying a plan (`CreateTrainingPlan`) is not
//! done anywhere.
//!
//! # Software updates
//!
//! [`HyperPodApi::update_cluster_software`] sends one `UpdateClusterSoftware`: `InstanceGroups`
//! only when groups are named (absent means every group; the model's minimum is 1), each with
//! its `ImageReleaseVersion` when one is named; `DeploymentConfig` with the rolling policy
//! (`MaximumBatchSize`, `RollbackMaximumBatchSize` as `INSTANCE_COUNT`/`CAPACITY_PERCENTAGE`),
//! `WaitIntervalInSeconds` and `AutoRollbackConfiguration` (only when alarms are named); and
//! `ImageId`. A cluster not InService (another update running) answers `ConflictException`:
//! `Conflict`. DescribeCluster's per-group `CurrentImageId`/`DesiredImageId`,
//! `CurrentImageReleaseVersion`/`DesiredImageReleaseVersion`, `ImageVersionStatus`,
//! `SoftwareUpdateStatus` and `TargetStateCount` are read into `GroupSoftware`.
//!
//! # Status
//!
//! `Creating` → `Creating`; `InService` → `Active`; `Updating`, `SystemUpdating` and
//! `RollingBack` → `Updating`; `Deleting` → `Deleting`; `Failed` → `Failed` with SageMaker's
//! `FailureMessage`.

use crate::AwsProvider;
use crate::error::{invalid, malformed, sdk_error};
use crate::tags;
use async_trait::async_trait;
use aws_sdk_sagemaker::Client as SageMaker;
use aws_sdk_sagemaker::types::{
    ClusterAutoScalerType, ClusterAutoScalingConfig, ClusterAutoScalingMode, ClusterAutoScalingStatus,
    ClusterCapacityRequirements, ClusterConfigMode, ClusterEbsVolumeConfig, ClusterInstanceGroupDetails,
    ClusterInstanceGroupSpecification, ClusterInstanceStorageConfig, ClusterInstanceType, ClusterInterfaceType,
    ClusterLifeCycleConfig, ClusterNetworkInterface, ClusterNodeProvisioningMode, ClusterNodeRecovery,
    ClusterOrchestrator, ClusterOrchestratorEksConfig, ClusterSpotOptions, ClusterStatus, ClusterTieredStorageConfig,
    DeepHealthCheckType, VpcConfig,
};
use instantstart_core::instance_types::is_accelerated_family;
use instantstart_core::provider::{
    BatchNodeResult, BatchSize, BatchSizeKind, ClusterEvent, ClusterEventLevel, ClusterEventPage, ClusterEventQuery,
    ClusterEventResource, ClusterNode, ClusterNodeDetail, CreateHyperPodCluster, DeepHealthCheck, GroupSoftware,
    HealthCheckTarget, HyperPodApi, HyperPodCluster, HyperPodInstanceGroupRequest, HyperPodInstanceGroupStatus,
    NodeAction, OfferingQuery, ProviderError, ProviderErrorKind, Result, TAG_CLUSTER, TrainingPlan,
    TrainingPlanOffering, TrainingPlanSummary, UpdateClusterSoftware, UpdateHyperPodCluster, is_owned,
};
use instantstart_core::spec::{
    CapacitySpec, DeepHealthChecks, InterfaceMode, LifecycleScript, NodeRecovery, TieredCheckpointing,
};
use std::collections::{BTreeMap, BTreeSet};

/// Maps a SageMaker cluster status (and failure message) to a [`instantstart_core::provider::ResourceState`].
pub fn cluster_state(
    status: Option<&ClusterStatus>,
    failure: Option<&str>,
) -> instantstart_core::provider::ResourceState {
    use instantstart_core::provider::ResourceState as S;
    match status {
        Some(ClusterStatus::Creating) | None => S::Creating,
        Some(ClusterStatus::Inservice) => S::Active,
        Some(ClusterStatus::Updating | ClusterStatus::Systemupdating | ClusterStatus::Rollingback) => S::Updating,
        Some(ClusterStatus::Deleting) => S::Deleting,
        Some(ClusterStatus::Failed) => S::Failed {
            reason: failure
                .filter(|m| !m.is_empty())
                .unwrap_or("HyperPod reported Failed without a message")
                .to_string(),
        },
        Some(other) => S::Failed { reason: format!("unknown HyperPod cluster status {}", other.as_str()) },
    }
}

/// Threads per core: 1 (no SMT) for accelerated instances, 2 for CPU instances (by family:
/// [`is_accelerated_family`]).
fn threads_per_core(instance_type: &str) -> i32 {
    if is_accelerated_family(instance_type) { 1 } else { 2 }
}

/// One instance group of a CreateCluster request. `pin_subnet` adds an `OverrideVpcConfig`.
pub fn instance_group_spec(g: &HyperPodInstanceGroupRequest, pin_subnet: bool) -> ClusterInstanceGroupSpecification {
    let s = &g.spec;
    let mut b = ClusterInstanceGroupSpecification::builder()
        .instance_group_name(&s.name)
        .instance_type(ClusterInstanceType::from(s.instance_type.as_str()))
        .instance_count(i32::try_from(s.count).unwrap_or(i32::MAX))
        .execution_role(&g.execution_role_arn)
        .threads_per_core(
            g.threads_per_core
                .and_then(|t| i32::try_from(t).ok())
                .unwrap_or_else(|| threads_per_core(&s.instance_type)),
        )
        .instance_storage_configs(ClusterInstanceStorageConfig::EbsVolumeConfig(
            ClusterEbsVolumeConfig::builder()
                .volume_size_in_gb(i32::try_from(s.ebs_volume_gb).unwrap_or(i32::MAX))
                .build(),
        ));
    if s.deep_health_checks.stress {
        b = b.on_start_deep_health_checks(DeepHealthCheckType::InstanceStress);
    }
    if s.deep_health_checks.connectivity {
        b = b.on_start_deep_health_checks(DeepHealthCheckType::InstanceConnectivity);
    }
    if let Some(l) = &s.lifecycle_script {
        b = b.life_cycle_config(
            ClusterLifeCycleConfig::builder().source_s3_uri(&l.source_s3_uri).on_create(&l.on_create).build(),
        );
    }
    match &s.capacity {
        CapacitySpec::OnDemand => {}
        CapacitySpec::TrainingPlan { arn } => b = b.training_plan_arn(arn),
        CapacitySpec::Spot => {
            b = b.capacity_requirements(
                ClusterCapacityRequirements::builder().spot(ClusterSpotOptions::builder().build()).build(),
            )
        }
    }
    if s.interface_mode == InterfaceMode::EfaOnly {
        b = b.network_interface(
            ClusterNetworkInterface::builder().interface_type(ClusterInterfaceType::EfaOnly).build(),
        );
    }
    if pin_subnet {
        b = b.override_vpc_config(
            VpcConfig::builder()
                .set_security_group_ids(Some(g.security_group_ids.clone()))
                .subnets(&g.subnet_id)
                .build(),
        );
    }
    b.build()
}

/// The cluster-level VPC config: every group's subnet and security groups.
pub fn cluster_vpc_config(groups: &[HyperPodInstanceGroupRequest]) -> VpcConfig {
    let subnets: BTreeSet<&str> = groups.iter().map(|g| g.subnet_id.as_str()).collect();
    let sgs: BTreeSet<&str> = groups.iter().flat_map(|g| g.security_group_ids.iter().map(String::as_str)).collect();
    VpcConfig::builder()
        .set_security_group_ids(Some(sgs.into_iter().map(str::to_string).collect()))
        .set_subnets(Some(subnets.into_iter().map(str::to_string).collect()))
        .build()
}

fn deep_health_check(c: DeepHealthCheck) -> DeepHealthCheckType {
    match c {
        DeepHealthCheck::InstanceStress => DeepHealthCheckType::InstanceStress,
        DeepHealthCheck::InstanceConnectivity => DeepHealthCheckType::InstanceConnectivity,
    }
}

fn node_recovery(n: NodeRecovery) -> ClusterNodeRecovery {
    match n {
        NodeRecovery::Automatic => ClusterNodeRecovery::Automatic,
        NodeRecovery::None => ClusterNodeRecovery::None,
    }
}

async fn list_tags(sm: &SageMaker, arn: &str) -> Result<instantstart_core::provider::Tags> {
    const API: &str = "sagemaker:ListTags";
    let all = sm
        .list_tags()
        .resource_arn(arn)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error(API, e))?;
    Ok(tags::from_sagemaker(&all))
}

/// One instance group as described: counts, status, capacity, interface mode, subnets.
pub fn group_view(
    g: &ClusterInstanceGroupDetails,
    cluster_status: Option<&ClusterStatus>,
    cluster_subnets: &[String],
    cluster_security_groups: &[String],
) -> HyperPodInstanceGroupStatus {
    let capacity = match (g.training_plan_arn(), g.capacity_requirements().and_then(|c| c.spot())) {
        (Some(arn), _) if !arn.is_empty() => CapacitySpec::TrainingPlan { arn: arn.to_string() },
        (_, Some(_)) => CapacitySpec::Spot,
        _ => CapacitySpec::OnDemand,
    };
    let efa_only = g.network_interface().and_then(|n| n.interface_type()) == Some(&ClusterInterfaceType::EfaOnly);
    let subnets = g.override_vpc_config().map(|v| v.subnets().to_vec()).filter(|s| !s.is_empty());
    let security_groups = g.override_vpc_config().map(|v| v.security_group_ids().to_vec()).filter(|s| !s.is_empty());
    let ebs_volume_gb = g
        .instance_storage_configs()
        .iter()
        .filter_map(|c| c.as_ebs_volume_config().ok())
        .find_map(|e| e.volume_size_in_gb())
        .and_then(|v| u32::try_from(v).ok());
    let lifecycle_script = g.life_cycle_config().and_then(|l| {
        Some(LifecycleScript { source_s3_uri: l.source_s3_uri()?.to_string(), on_create: l.on_create()?.to_string() })
    });
    let checks = g.on_start_deep_health_checks();
    HyperPodInstanceGroupStatus {
        name: g.instance_group_name().unwrap_or_default().to_string(),
        instance_type: g.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        current_count: g.current_count().and_then(|c| u32::try_from(c).ok()).unwrap_or(0),
        target_count: g.target_count().and_then(|c| u32::try_from(c).ok()).unwrap_or(0),
        status: g
            .status()
            .map(|s| s.as_str().to_string())
            .or_else(|| cluster_status.map(|s| s.as_str().to_string()))
            .unwrap_or_else(|| "Unknown".into()),
        capacity,
        interface_mode: if efa_only { InterfaceMode::EfaOnly } else { InterfaceMode::Standard },
        subnet_ids: subnets.unwrap_or_else(|| cluster_subnets.to_vec()),
        security_group_ids: security_groups.unwrap_or_else(|| cluster_security_groups.to_vec()),
        ebs_volume_gb,
        lifecycle_script,
        execution_role_arn: g.execution_role().map(str::to_string),
        deep_health_checks: DeepHealthChecks {
            stress: checks.contains(&DeepHealthCheckType::InstanceStress),
            connectivity: checks.contains(&DeepHealthCheckType::InstanceConnectivity),
        },
        threads_per_core: g.threads_per_core().and_then(|t| u32::try_from(t).ok()),
        failure: None,
        software: GroupSoftware {
            current_image_id: g.current_image_id().map(str::to_string),
            desired_image_id: g.desired_image_id().map(str::to_string),
            current_release: g.current_image_release_version().map(str::to_string),
            desired_release: g.desired_image_release_version().map(str::to_string),
            image_version_status: g.image_version_status().map(|s| s.as_str().to_string()),
            update_status: g.software_update_status().map(|s| s.as_str().to_string()),
            target_state_count: g.target_state_count().and_then(|c| u32::try_from(c).ok()),
        },
    }
}

/// EKS-orchestrated instance groups need a `LifeCycleConfig` (developer guide,
/// `smcluster-getting-started-slurm-cli`, "Common validation errors": "LifeCycleConfig is
/// required for instance group…" — EKS clusters; optional node lifecycle configuration is not
/// supported). Refused before the call, naming the group.
fn require_lifecycle(api: &str, groups: &[HyperPodInstanceGroupRequest]) -> Result<()> {
    match groups.iter().find(|g| g.spec.lifecycle_script.is_none()) {
        Some(g) => Err(invalid(
            api,
            format!(
                "instance group {} has no LifeCycleConfig; EKS-orchestrated HyperPod groups need a lifecycle script (SourceS3Uri + OnCreate)",
                g.spec.name
            ),
        )),
        None => Ok(()),
    }
}

async fn describe(sm: &SageMaker, region: &str, name: &str) -> Result<Option<HyperPodCluster>> {
    const API: &str = "sagemaker:DescribeCluster";
    let out = match sm.describe_cluster().cluster_name(name).send().await.map_err(|e| sdk_error(API, e)) {
        Ok(o) => o,
        Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let arn = out.cluster_arn().ok_or_else(|| malformed(API, "no ClusterArn"))?.to_string();
    let tags = list_tags(sm, &arn).await?;
    let cluster_status = out.cluster_status();
    let cluster_subnets: Vec<String> = out.vpc_config().map(|v| v.subnets().to_vec()).unwrap_or_default();
    let cluster_sgs: Vec<String> = out.vpc_config().map(|v| v.security_group_ids().to_vec()).unwrap_or_default();
    let groups =
        out.instance_groups().iter().map(|g| group_view(g, cluster_status, &cluster_subnets, &cluster_sgs)).collect();
    let tiered_storage =
        out.tiered_storage_config().filter(|t| t.mode() == Some(&ClusterConfigMode::Enable)).map(|t| {
            TieredCheckpointing {
                memory_percent: t
                    .instance_memory_allocation_percentage()
                    .and_then(|p| u8::try_from(p).ok())
                    .unwrap_or(0),
            }
        });
    // On once HyperPod reports it `InService` (Karpenter installed, its CRDs served): the
    // HyperpodNodeClass is not Ready before (AWS `sagemaker-hyperpod-eks-autoscaling-nodeclass`).
    let autoscaling = out.auto_scaling().is_some_and(|a| {
        a.mode() == &ClusterAutoScalingMode::Enable && a.status() == &ClusterAutoScalingStatus::Inservice
    });
    Ok(Some(HyperPodCluster {
        name: out.cluster_name().unwrap_or(name).to_string(),
        arn,
        region: region.to_string(),
        state: cluster_state(cluster_status, out.failure_message()),
        instance_groups: groups,
        node_recovery: match out.node_recovery() {
            Some(ClusterNodeRecovery::Automatic) => NodeRecovery::Automatic,
            _ => NodeRecovery::None,
        },
        tiered_storage,
        autoscaling,
        tags,
        eks_cluster_arn: out.orchestrator().and_then(|o| o.eks()).and_then(|e| e.cluster_arn()).map(str::to_string),
    }))
}

/// The name of a training plan from its ARN (`arn:aws:sagemaker:<region>:<account>:training-plan/<name>`).
pub fn training_plan_name(arn: &str) -> Option<&str> {
    let resource = arn.splitn(6, ':').nth(5)?;
    resource.strip_prefix("training-plan/").filter(|n| !n.is_empty())
}

async fn create(sm: &SageMaker, req: &CreateHyperPodCluster) -> Result<HyperPodCluster> {
    const API: &str = "sagemaker:CreateCluster";
    if req.instance_groups.is_empty() {
        return Err(invalid(API, "a HyperPod cluster needs at least one instance group"));
    }
    require_lifecycle(API, &req.instance_groups)?;
    let subnets: BTreeSet<&str> = req.instance_groups.iter().map(|g| g.subnet_id.as_str()).collect();
    let pin = subnets.len() > 1;
    let result = sm
        .create_cluster()
        .cluster_name(&req.name)
        .orchestrator(
            ClusterOrchestrator::builder()
                .eks(ClusterOrchestratorEksConfig::builder().cluster_arn(&req.eks_cluster_arn).build())
                .build(),
        )
        .node_recovery(node_recovery(req.node_recovery))
        .node_provisioning_mode(ClusterNodeProvisioningMode::Continuous)
        .vpc_config(cluster_vpc_config(&req.instance_groups))
        .set_instance_groups(Some(req.instance_groups.iter().map(|g| instance_group_spec(g, pin)).collect()))
        .set_tags(Some(tags::sagemaker(&req.tags)))
        .send()
        .await
        .map_err(|e| sdk_error(API, e));
    match result {
        Ok(out) => {
            let arn = out.cluster_arn().ok_or_else(|| malformed(API, "no ClusterArn"))?;
            // Describe for the full view; a brand-new cluster may not be visible for a moment.
            match describe(sm, &req.region, &req.name).await? {
                Some(c) => Ok(c),
                None => Ok(HyperPodCluster {
                    name: req.name.clone(),
                    arn: arn.to_string(),
                    region: req.region.clone(),
                    state: instantstart_core::provider::ResourceState::Creating,
                    instance_groups: vec![],
                    node_recovery: req.node_recovery,
                    tiered_storage: None,
                    autoscaling: false,
                    tags: req.tags.clone(),
                    eks_cluster_arn: Some(req.eks_cluster_arn.clone()),
                }),
            }
        }
        Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
            let cluster = req.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
            match describe(sm, &req.region, &req.name).await? {
                Some(c) if is_owned(&c.tags, &cluster) => Ok(c),
                _ => Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!("{}; it is not tagged as InstantStart's for cluster {cluster}", e.message),
                )),
            }
        }
        Err(e) => Err(e),
    }
}

async fn update(sm: &SageMaker, req: &UpdateHyperPodCluster) -> Result<HyperPodCluster> {
    const API: &str = "sagemaker:UpdateCluster";
    require_lifecycle(API, &req.instance_groups)?;
    let current = sm
        .describe_cluster()
        .cluster_name(&req.name)
        .send()
        .await
        .map_err(|e| sdk_error("sagemaker:DescribeCluster", e))?;
    let cluster_subnets: Vec<String> = current.vpc_config().map(|v| v.subnets().to_vec()).unwrap_or_default();
    let existing: BTreeMap<&str, bool> = current
        .instance_groups()
        .iter()
        .filter_map(|g| {
            Some((g.instance_group_name()?, g.override_vpc_config().is_some_and(|v| !v.subnets().is_empty())))
        })
        .collect();
    let groups: Vec<ClusterInstanceGroupSpecification> = req
        .instance_groups
        .iter()
        .map(|g| {
            let pin = match existing.get(g.spec.name.as_str()) {
                Some(had_override) => *had_override,
                None => cluster_subnets != [g.subnet_id.clone()],
            };
            instance_group_spec(g, pin)
        })
        .collect();
    let mut call = sm.update_cluster().cluster_name(&req.name);
    if !groups.is_empty() {
        call = call.set_instance_groups(Some(groups));
    }
    if !req.instance_groups_to_delete.is_empty() {
        call = call.set_instance_groups_to_delete(Some(req.instance_groups_to_delete.clone()));
    }
    match req.node_recovery {
        Some(n) => call = call.node_recovery(node_recovery(n)),
        // A settings-only update (TieredStorageConfig, AutoScaling) is refused unless
        // NodeRecovery or InstanceGroups come with it (AWS ML blog, Curvine post, "API note"):
        // echo the cluster's current NodeRecovery, as described a moment ago.
        None if req.instance_groups.is_empty() && (req.tiered_storage.is_some() || req.autoscaling.is_some()) => {
            if let Some(n) = current.node_recovery() {
                call = call.node_recovery(n.clone());
            }
        }
        None => {}
    }
    if let Some(t) = &req.tiered_storage {
        call = call.tiered_storage_config(match t {
            Some(t) => ClusterTieredStorageConfig::builder()
                .mode(ClusterConfigMode::Enable)
                .instance_memory_allocation_percentage(i32::from(t.memory_percent))
                .build(),
            None => ClusterTieredStorageConfig::builder().mode(ClusterConfigMode::Disable).build(),
        });
    }
    if let Some(a) = &req.autoscaling {
        let mode = if a.enabled { ClusterAutoScalingMode::Enable } else { ClusterAutoScalingMode::Disable };
        let config = ClusterAutoScalingConfig::builder()
            .mode(mode)
            .auto_scaler_type(ClusterAutoScalerType::Karpenter)
            .build()
            .map_err(|e| invalid(API, e.to_string()))?;
        call = call.auto_scaling(config);
        if let Some(role) = &a.role_arn {
            call = call.cluster_role(role);
        } else if a.enabled {
            return Err(invalid(
                API,
                "enabling managed autoscaling needs the IAM role HyperPod assumes (cluster role)",
            ));
        }
    }
    call.send().await.map_err(|e| sdk_error(API, e))?;
    describe(sm, &req.region, &req.name).await?.ok_or_else(|| {
        ProviderError::new(API, ProviderErrorKind::Transient, format!("cluster {} not visible after update", req.name))
    })
}

/// Runs one batch node action and collects per-node outcomes.
async fn batch(sm: &SageMaker, cluster: &str, action: NodeAction, node_ids: &[String]) -> Result<BatchNodeResult> {
    fn failures<T>(items: &[T], f: impl Fn(&T) -> (Option<&str>, Option<&str>, Option<&str>)) -> Vec<(String, String)> {
        items
            .iter()
            .map(|e| {
                let (id, code, message) = f(e);
                let reason = match (code, message) {
                    (Some(c), Some(m)) => format!("{c}: {m}"),
                    (Some(c), None) => c.to_string(),
                    (None, Some(m)) => m.to_string(),
                    (None, None) => "refused".to_string(),
                };
                (id.unwrap_or_default().to_string(), reason)
            })
            .collect()
    }
    let ids = Some(node_ids.to_vec());
    Ok(match action {
        NodeAction::Reboot => {
            const API: &str = "sagemaker:BatchRebootClusterNodes";
            let out = sm
                .batch_reboot_cluster_nodes()
                .cluster_name(cluster)
                .set_node_ids(ids)
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            BatchNodeResult {
                accepted: out.successful().to_vec(),
                failed: failures(out.failed(), |e| (e.node_id(), e.error_code().map(|c| c.as_str()), e.message())),
            }
        }
        NodeAction::Replace => {
            const API: &str = "sagemaker:BatchReplaceClusterNodes";
            let out = sm
                .batch_replace_cluster_nodes()
                .cluster_name(cluster)
                .set_node_ids(ids)
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            BatchNodeResult {
                accepted: out.successful().to_vec(),
                failed: failures(out.failed(), |e| (e.node_id(), e.error_code().map(|c| c.as_str()), e.message())),
            }
        }
        NodeAction::Delete => {
            const API: &str = "sagemaker:BatchDeleteClusterNodes";
            let out = sm
                .batch_delete_cluster_nodes()
                .cluster_name(cluster)
                .set_node_ids(ids)
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            BatchNodeResult {
                accepted: out.successful().to_vec(),
                failed: failures(out.failed(), |e| (e.node_id(), e.code().map(|c| c.as_str()), e.message())),
            }
        }
    })
}

/// Availability Zone of each instance group, from its subnets (override or cluster-level).
async fn group_zones(p: &AwsProvider, region: &str, sm: &SageMaker, cluster: &str) -> Result<BTreeMap<String, String>> {
    let out = match sm.describe_cluster().cluster_name(cluster).send().await {
        Ok(o) => o,
        Err(e) => return Err(sdk_error("sagemaker:DescribeCluster", e)),
    };
    let cluster_subnets: Vec<String> = out.vpc_config().map(|v| v.subnets().to_vec()).unwrap_or_default();
    let mut group_subnets: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for g in out.instance_groups() {
        let subnets = g.override_vpc_config().map(|v| v.subnets().to_vec()).filter(|s| !s.is_empty());
        group_subnets.insert(
            g.instance_group_name().unwrap_or_default().to_string(),
            subnets.unwrap_or_else(|| cluster_subnets.clone()),
        );
    }
    let all: BTreeSet<&String> = group_subnets.values().flatten().collect();
    if all.is_empty() {
        return Ok(BTreeMap::new());
    }
    let ec2 = &p.region(region).await?.ec2;
    let described = ec2
        .describe_subnets()
        .set_subnet_ids(Some(all.into_iter().cloned().collect()))
        .send()
        .await
        .map_err(|e| sdk_error("ec2:DescribeSubnets", e));
    let zone_of: BTreeMap<String, String> = match described {
        Ok(o) => o
            .subnets()
            .iter()
            .filter_map(|s| Some((s.subnet_id()?.to_string(), s.availability_zone()?.to_string())))
            .collect(),
        // Zones are informative; a subnet we cannot see must not hide the nodes.
        Err(e) => {
            tracing::warn!(error = %e, "cannot resolve the Availability Zones of the cluster's subnets");
            BTreeMap::new()
        }
    };
    Ok(group_subnets
        .into_iter()
        .filter_map(|(g, subnets)| {
            let zones: BTreeSet<&String> = subnets.iter().filter_map(|s| zone_of.get(s)).collect();
            (zones.len() == 1).then(|| (g, zones.into_iter().next().cloned().unwrap_or_default()))
        })
        .collect())
}

#[async_trait]
impl HyperPodApi for AwsProvider {
    async fn describe_training_plan(&self, region: &str, arn: &str) -> Result<Option<TrainingPlan>> {
        const API: &str = "sagemaker:DescribeTrainingPlan";
        let name = training_plan_name(arn).ok_or_else(|| invalid(API, format!("{arn} is not a training plan ARN")))?;
        let c = self.region(region).await?;
        let out = match c.sagemaker.describe_training_plan().training_plan_name(name).send().await {
            Ok(o) => o,
            Err(e) => {
                let e = sdk_error(API, e);
                return if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) };
            }
        };
        let summary = out.reserved_capacity_summaries().first();
        Ok(Some(TrainingPlan {
            arn: out.training_plan_arn().unwrap_or(arn).to_string(),
            status: out.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
            availability_zone: summary.and_then(|s| s.availability_zone()).unwrap_or_default().to_string(),
            instance_type: summary.and_then(|s| s.instance_type()).map(|t| t.as_str().to_string()).unwrap_or_default(),
            instance_count: out
                .total_instance_count()
                .or_else(|| summary.and_then(|s| s.total_instance_count()))
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0),
        }))
    }

    async fn describe_hyperpod_cluster(&self, region: &str, name: &str) -> Result<Option<HyperPodCluster>> {
        let c = self.region(region).await?;
        describe(&c.sagemaker, region, name).await
    }

    async fn list_hyperpod_clusters(&self, region: &str) -> Result<Vec<String>> {
        const API: &str = "sagemaker:ListClusters";
        let c = self.region(region).await?;
        let all = c
            .sagemaker
            .list_clusters()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(all.iter().filter_map(|s| s.cluster_name().map(str::to_string)).collect())
    }

    async fn create_hyperpod_cluster(&self, req: &CreateHyperPodCluster) -> Result<HyperPodCluster> {
        let c = self.region(&req.region).await?;
        create(&c.sagemaker, req).await
    }

    async fn delete_hyperpod_cluster(&self, region: &str, name: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteCluster";
        let c = self.region(region).await?;
        match c.sagemaker.delete_cluster().cluster_name(name).send().await.map_err(|e| sdk_error(API, e)) {
            Ok(_) => Ok(()),
            // ResourceInUse on a delete: the cluster is busy (e.g. updating), not "exists".
            Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
                Err(ProviderError::new(API, ProviderErrorKind::Conflict, e.message))
            }
            Err(e) => Err(e),
        }
    }

    async fn list_cluster_nodes(&self, region: &str, cluster: &str) -> Result<Vec<ClusterNode>> {
        const API: &str = "sagemaker:ListClusterNodes";
        let c = self.region(region).await?;
        let nodes = c
            .sagemaker
            .list_cluster_nodes()
            .cluster_name(cluster)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| sdk_error(API, e))?;
        let zones =
            if nodes.is_empty() { BTreeMap::new() } else { group_zones(self, region, &c.sagemaker, cluster).await? };
        Ok(nodes
            .iter()
            .map(|n| {
                let group = n.instance_group_name().unwrap_or_default().to_string();
                ClusterNode {
                    instance_id: n.instance_id().unwrap_or_default().to_string(),
                    instance_type: n.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                    status: n
                        .instance_status()
                        .and_then(|s| s.status())
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|| "Unknown".into()),
                    availability_zone: zones.get(&group).cloned().unwrap_or_default(),
                    instance_group: group,
                }
            })
            .collect())
    }

    async fn update_hyperpod_cluster(&self, req: &UpdateHyperPodCluster) -> Result<HyperPodCluster> {
        let c = self.region(&req.region).await?;
        update(&c.sagemaker, req).await
    }

    async fn start_cluster_health_check(
        &self,
        region: &str,
        cluster: &str,
        targets: &[HealthCheckTarget],
    ) -> Result<()> {
        use aws_sdk_sagemaker::types::InstanceGroupHealthCheckConfiguration as Config;
        const API: &str = "sagemaker:StartClusterHealthCheck";
        let configs = targets
            .iter()
            .map(|t| {
                Config::builder()
                    .instance_group_name(&t.instance_group)
                    .set_instance_ids((!t.node_ids.is_empty()).then(|| t.node_ids.clone()))
                    .set_deep_health_checks(Some(t.checks.iter().map(|c| deep_health_check(*c)).collect()))
                    .build()
                    .map_err(|e| invalid(API, e.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        let c = self.region(region).await?;
        c.sagemaker
            .start_cluster_health_check()
            .cluster_name(cluster)
            .set_deep_health_check_configurations(Some(configs))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(())
    }

    async fn list_cluster_events(
        &self,
        region: &str,
        cluster: &str,
        query: &ClusterEventQuery,
    ) -> Result<ClusterEventPage> {
        use aws_sdk_sagemaker::types::{ClusterEventResourceType, EventSortBy, SortOrder};
        const API: &str = "sagemaker:ListClusterEvents";
        query.check().map_err(|e| invalid(API, e.to_string()))?;
        let c = self.region(region).await?;
        let out = c
            .sagemaker
            .list_cluster_events()
            .cluster_name(cluster)
            .set_instance_group_name(query.instance_group.clone())
            .set_node_id(query.node_id.clone())
            .set_resource_type(query.resource_type.map(|r| ClusterEventResourceType::from(r.as_aws())))
            .set_event_time_after(query.after.map(smithy_time))
            .set_event_time_before(query.before.map(smithy_time))
            .sort_by(EventSortBy::EventTime)
            .sort_order(SortOrder::Descending)
            .max_results(query.page_size() as i32)
            .set_next_token(query.cursor.clone())
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        let events = out
            .events()
            .iter()
            .map(|e| {
                Ok(ClusterEvent {
                    event_id: e.event_id().ok_or_else(|| malformed(API, "an event without EventId"))?.to_string(),
                    time: e
                        .event_time()
                        .and_then(chrono_time)
                        .ok_or_else(|| malformed(API, "an event without EventTime"))?,
                    resource_type: e
                        .resource_type()
                        .and_then(|r| ClusterEventResource::from_aws(r.as_str()))
                        .unwrap_or(ClusterEventResource::Cluster),
                    instance_group: e.instance_group_name().map(str::to_string),
                    instance_id: e.instance_id().map(str::to_string),
                    level: e.event_level().and_then(|l| ClusterEventLevel::from_aws(l.as_str())),
                    description: e.description().unwrap_or_default().to_string(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ClusterEventPage { events, next_cursor: out.next_token().filter(|t| !t.is_empty()).map(str::to_string) })
    }

    async fn list_training_plans(&self, region: &str) -> Result<Vec<TrainingPlanSummary>> {
        const API: &str = "sagemaker:ListTrainingPlans";
        let c = self.region(region).await?;
        let all: Vec<_> = c
            .sagemaker
            .list_training_plans()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .map_err(|e| sdk_error(API, e))?;
        let count = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok());
        Ok(all
            .iter()
            .map(|p| {
                let rc = p.reserved_capacity_summaries().first();
                TrainingPlanSummary {
                    arn: p.training_plan_arn().unwrap_or_default().to_string(),
                    name: p.training_plan_name().unwrap_or_default().to_string(),
                    status: p.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
                    status_message: p.status_message().filter(|m| !m.is_empty()).map(str::to_string),
                    instance_type: rc.and_then(|r| r.instance_type()).map(|t| t.as_str().to_string()),
                    availability_zone: rc.and_then(|r| r.availability_zone()).map(str::to_string),
                    total_instance_count: count(p.total_instance_count())
                        .or_else(|| count(rc.and_then(|r| r.total_instance_count())))
                        .unwrap_or(0),
                    available_instance_count: count(p.available_instance_count()),
                    in_use_instance_count: count(p.in_use_instance_count()),
                    start_time: p.start_time().and_then(chrono_time),
                    end_time: p.end_time().and_then(chrono_time),
                    duration_hours: p.duration_hours().and_then(|h| u64::try_from(h).ok()),
                    target_resources: p.target_resources().iter().map(|r| r.as_str().to_string()).collect(),
                }
            })
            .collect())
    }

    async fn search_training_plan_offerings(
        &self,
        region: &str,
        query: &OfferingQuery,
    ) -> Result<Vec<TrainingPlanOffering>> {
        use aws_sdk_sagemaker::types::{ReservedCapacityInstanceType, SageMakerResourceName};
        const API: &str = "sagemaker:SearchTrainingPlanOfferings";
        query.check().map_err(|e| invalid(API, e.to_string()))?;
        let c = self.region(region).await?;
        let out = c
            .sagemaker
            .search_training_plan_offerings()
            .instance_type(ReservedCapacityInstanceType::from(query.instance_type.as_str()))
            .instance_count(query.instance_count as i32)
            .duration_hours(i64::from(query.duration_hours))
            .set_start_time_after(query.start_after.map(smithy_time))
            .set_end_time_before(query.end_before.map(smithy_time))
            .target_resources(SageMakerResourceName::HyperpodCluster)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        let mut offerings = Vec::new();
        for o in out.training_plan_offerings() {
            let id = o.training_plan_offering_id().ok_or_else(|| malformed(API, "an offering without an id"))?;
            let rc = o.reserved_capacity_offerings().first();
            offerings.push(TrainingPlanOffering {
                offering_id: id.to_string(),
                instance_type: rc
                    .and_then(|r| r.instance_type())
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_else(|| query.instance_type.clone()),
                instance_count: rc
                    .and_then(|r| r.instance_count())
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(query.instance_count),
                availability_zone: rc.and_then(|r| r.availability_zone()).map(str::to_string),
                start_time: rc.and_then(|r| r.start_time()).and_then(chrono_time),
                end_time: rc.and_then(|r| r.end_time()).and_then(chrono_time),
                duration_hours: o.duration_hours().and_then(|h| u64::try_from(h).ok()),
                upfront_fee: o.upfront_fee().map(str::to_string),
                currency_code: o.currency_code().map(str::to_string),
                target_resources: o.target_resources().iter().map(|r| r.as_str().to_string()).collect(),
            });
        }
        Ok(offerings)
    }

    async fn describe_cluster_node(
        &self,
        region: &str,
        cluster: &str,
        node_id: &str,
    ) -> Result<Option<ClusterNodeDetail>> {
        const API: &str = "sagemaker:DescribeClusterNode";
        let c = self.region(region).await?;
        let out = match c.sagemaker.describe_cluster_node().cluster_name(cluster).node_id(node_id).send().await {
            Ok(o) => o,
            Err(e) => {
                let e = sdk_error(API, e);
                return if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) };
            }
        };
        let Some(n) = out.node_details() else { return Ok(None) };
        Ok(Some(node_detail(n, node_id)))
    }

    async fn update_cluster_software(&self, req: &UpdateClusterSoftware) -> Result<()> {
        use aws_sdk_sagemaker::types::{
            AlarmDetails, CapacitySizeConfig, DeploymentConfiguration, NodeUnavailabilityType, RollingDeploymentPolicy,
            UpdateClusterSoftwareInstanceGroupSpecification as Group,
        };
        const API: &str = "sagemaker:UpdateClusterSoftware";
        let size = |b: &BatchSize| {
            CapacitySizeConfig::builder()
                .r#type(match b.kind {
                    BatchSizeKind::InstanceCount => NodeUnavailabilityType::InstanceCount,
                    BatchSizeKind::CapacityPercentage => NodeUnavailabilityType::CapacityPercentage,
                })
                .value(i32::try_from(b.value).unwrap_or(i32::MAX))
                .build()
        };
        let groups: Vec<Group> = req
            .instance_groups
            .iter()
            .map(|g| {
                Group::builder()
                    .instance_group_name(&g.name)
                    .set_image_release_version(g.image_release_version.clone())
                    .build()
            })
            .collect();
        let deployment = req.deployment.as_ref().map(|d| {
            let alarms: Vec<AlarmDetails> =
                d.rollback_alarms.iter().map(|a| AlarmDetails::builder().alarm_name(a).build()).collect();
            DeploymentConfiguration::builder()
                .rolling_update_policy(
                    RollingDeploymentPolicy::builder()
                        .maximum_batch_size(size(&d.max_batch))
                        .set_rollback_maximum_batch_size(d.rollback_max_batch.as_ref().map(size))
                        .build(),
                )
                .set_wait_interval_in_seconds(d.wait_interval_secs.map(|w| i32::try_from(w).unwrap_or(i32::MAX)))
                .set_auto_rollback_configuration((!alarms.is_empty()).then_some(alarms))
                .build()
        });
        let c = self.region(&req.region).await?;
        c.sagemaker
            .update_cluster_software()
            .cluster_name(&req.cluster)
            .set_instance_groups((!groups.is_empty()).then_some(groups))
            .set_deployment_config(deployment)
            .set_image_id(req.image_id.clone())
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(())
    }

    async fn batch_node_action(
        &self,
        region: &str,
        cluster: &str,
        action: NodeAction,
        node_ids: &[String],
    ) -> Result<BatchNodeResult> {
        if node_ids.is_empty() {
            return Ok(BatchNodeResult::default());
        }
        let c = self.region(region).await?;
        batch(&c.sagemaker, cluster, action, node_ids).await
    }
}

/// `DescribeClusterNode`'s `NodeDetails` as a [`ClusterNodeDetail`].
fn node_detail(n: &aws_sdk_sagemaker::types::ClusterNodeDetails, node_id: &str) -> ClusterNodeDetail {
    let status = n.instance_status();
    ClusterNodeDetail {
        instance_id: n.instance_id().unwrap_or(node_id).to_string(),
        instance_group: n.instance_group_name().unwrap_or_default().to_string(),
        instance_type: n.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        status: status.and_then(|s| s.status()).map(|s| s.as_str().to_string()).unwrap_or_else(|| "Unknown".into()),
        status_message: status.and_then(|s| s.message()).filter(|m| !m.is_empty()).map(str::to_string),
        launch_time: n.launch_time().and_then(chrono_time),
        last_software_update_time: n.last_software_update_time().and_then(chrono_time),
        availability_zone: n.placement().and_then(|p| p.availability_zone()).map(str::to_string),
        availability_zone_id: n.placement().and_then(|p| p.availability_zone_id()).map(str::to_string),
        private_ip: n.private_primary_ip().map(str::to_string),
        private_dns: n.private_dns_hostname().map(str::to_string),
        capacity_type: n.capacity_type().map(|t| t.as_str().to_string()),
        interface_type: n.network_interface().and_then(|i| i.interface_type()).map(|t| t.as_str().to_string()),
        threads_per_core: n.threads_per_core().and_then(|t| u32::try_from(t).ok()),
        lifecycle_script: n.life_cycle_config().and_then(|l| {
            Some(LifecycleScript {
                source_s3_uri: l.source_s3_uri()?.to_string(),
                on_create: l.on_create()?.to_string(),
            })
        }),
        current_image_id: n.current_image_id().map(str::to_string),
        desired_image_id: n.desired_image_id().map(str::to_string),
        image_version_status: n.image_version_status().map(|s| s.as_str().to_string()),
    }
}

/// A service timestamp as UTC time.
fn chrono_time(t: &aws_smithy_types::DateTime) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// UTC time as a service timestamp.
fn smithy_time(t: chrono::DateTime<chrono::Utc>) -> aws_smithy_types::DateTime {
    aws_smithy_types::DateTime::from_millis(t.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::provider::ResourceState;

    #[test]
    fn status_mapping() {
        let cases = [
            (Some(ClusterStatus::Creating), ResourceState::Creating),
            (Some(ClusterStatus::Inservice), ResourceState::Active),
            (Some(ClusterStatus::Updating), ResourceState::Updating),
            (Some(ClusterStatus::Systemupdating), ResourceState::Updating),
            (Some(ClusterStatus::Rollingback), ResourceState::Updating),
            (Some(ClusterStatus::Deleting), ResourceState::Deleting),
            (None, ResourceState::Creating),
        ];
        for (status, expected) in cases {
            assert_eq!(cluster_state(status.as_ref(), None), expected, "{status:?}");
        }
        assert_eq!(
            cluster_state(
                Some(&ClusterStatus::Failed),
                Some("InsufficientInstanceCapacity: not enough ml.p5.48xlarge")
            ),
            ResourceState::Failed { reason: "InsufficientInstanceCapacity: not enough ml.p5.48xlarge".into() }
        );
        assert!(matches!(cluster_state(Some(&ClusterStatus::Failed), None), ResourceState::Failed { .. }));
    }

    #[test]
    fn training_plan_names() {
        assert_eq!(
            training_plan_name("arn:aws:sagemaker:us-east-1:123456789012:training-plan/my-plan"),
            Some("my-plan")
        );
        assert_eq!(training_plan_name("arn:aws:sagemaker:us-east-1:123456789012:cluster/x"), None);
        assert_eq!(training_plan_name("my-plan"), None);
    }
}

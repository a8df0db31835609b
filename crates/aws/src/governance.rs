//! HyperPod task governance on SageMaker: cluster scheduler configs and compute quotas
//! (CreateClusterSchedulerConfig, DescribeClusterSchedulerConfig, ListClusterSchedulerConfigs,
//! UpdateClusterSchedulerConfig, DeleteClusterSchedulerConfig and the same five for
//! ComputeQuota; tags through ListTags).
//!
//! Listings filter by `ClusterArn` and follow every page; each entry is then described (the
//! summary carries no failure reason) and its tags read, so ownership is checked like for
//! every other resource. `Deleted` entries are left out. An update sends `TargetVersion` =
//! the version it replaces (SageMaker answers `ConflictException` when another update got
//! there first, which the engine retries after observing again).

use crate::AwsProvider;
use crate::error::sdk_error;
use crate::tags;
use async_trait::async_trait;
use aws_sdk_sagemaker::Client as SageMaker;
use aws_sdk_sagemaker::types as sm;
use instantstart_core::provider::{
    ComputeQuotaView, PreemptTeamTasks, PriorityClass, ProviderErrorKind, QuotaConfig, QuotaResource, Result,
    SchedulerConfigView, SchedulerPolicy, SharingStrategy, Tags, TaskGovernanceApi,
};

/// Pages followed at most for one listing.
const MAX_PAGES: usize = 20;

/// Our policy as SageMaker's `SchedulerConfig`.
pub fn scheduler_config(p: &SchedulerPolicy) -> sm::SchedulerConfig {
    sm::SchedulerConfig::builder()
        .set_priority_classes(Some(
            p.priority_classes
                .iter()
                .map(|c| sm::PriorityClass::builder().name(&c.name).weight(i32::from(c.weight)).build())
                .collect(),
        ))
        .fair_share(if p.fair_share { sm::FairShare::Enabled } else { sm::FairShare::Disabled })
        .build()
}

fn policy_of(c: Option<&sm::SchedulerConfig>) -> SchedulerPolicy {
    let Some(c) = c else { return SchedulerPolicy { priority_classes: vec![], fair_share: true } };
    SchedulerPolicy {
        priority_classes: c
            .priority_classes()
            .iter()
            .map(|p| PriorityClass {
                name: p.name().unwrap_or_default().to_string(),
                weight: p.weight().unwrap_or(0).clamp(0, 100) as u8,
            })
            .collect(),
        // SageMaker's default is Enabled.
        fair_share: c.fair_share() != Some(&sm::FairShare::Disabled),
    }
}

/// A team's quota as SageMaker's `ComputeQuotaConfig`.
pub fn quota_config(q: &QuotaConfig) -> sm::ComputeQuotaConfig {
    sm::ComputeQuotaConfig::builder()
        .set_compute_quota_resources(Some(
            q.resources
                .iter()
                .map(|r| {
                    sm::ComputeQuotaResourceConfig::builder()
                        .instance_type(sm::ClusterInstanceType::from(r.instance_type.as_str()))
                        .set_count(r.count.map(|c| c as i32))
                        .set_accelerators(r.accelerators.map(|a| a as i32))
                        .build()
                })
                .collect(),
        ))
        .resource_sharing_config(
            sm::ResourceSharingConfig::builder()
                .strategy(sm::ResourceSharingStrategy::from(q.strategy.as_str()))
                .set_borrow_limit(q.borrow_limit.map(|l| l as i32))
                .build(),
        )
        .preempt_team_tasks(sm::PreemptTeamTasks::from(q.preempt_team_tasks.as_str()))
        .build()
}

/// A team's `ComputeQuotaTarget`.
pub fn quota_target(q: &QuotaConfig) -> sm::ComputeQuotaTarget {
    sm::ComputeQuotaTarget::builder().team_name(&q.team).fair_share_weight(i32::from(q.fair_share_weight)).build()
}

fn activation(enabled: bool) -> sm::ActivationState {
    if enabled { sm::ActivationState::Enabled } else { sm::ActivationState::Disabled }
}

fn quota_of(
    config: Option<&sm::ComputeQuotaConfig>,
    target: Option<&sm::ComputeQuotaTarget>,
    state: Option<&sm::ActivationState>,
) -> QuotaConfig {
    let sharing = config.and_then(|c| c.resource_sharing_config());
    QuotaConfig {
        team: target.and_then(|t| t.team_name()).unwrap_or_default().to_string(),
        resources: config
            .map(|c| c.compute_quota_resources())
            .unwrap_or_default()
            .iter()
            .map(|r| QuotaResource {
                instance_type: r.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
                count: r.count().map(|c| c.max(0) as u32),
                accelerators: r.accelerators().map(|a| a.max(0) as u32),
            })
            .collect(),
        strategy: sharing
            .and_then(|s| s.strategy())
            .and_then(|s| SharingStrategy::parse(s.as_str()))
            .unwrap_or_default(),
        borrow_limit: sharing.and_then(|s| s.borrow_limit()).map(|l| l.max(0) as u32),
        preempt_team_tasks: config
            .and_then(|c| c.preempt_team_tasks())
            .and_then(|p| PreemptTeamTasks::parse(p.as_str()))
            .unwrap_or_default(),
        fair_share_weight: target.and_then(|t| t.fair_share_weight()).unwrap_or(0).clamp(0, 100) as u8,
        // SageMaker's default is Enabled.
        enabled: state != Some(&sm::ActivationState::Disabled),
    }
}

async fn list_tags(sm: &SageMaker, arn: &str) -> Result<Tags> {
    const API: &str = "sagemaker:ListTags";
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let out = sm
            .list_tags()
            .resource_arn(arn)
            .set_next_token(token.clone())
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        all.extend(out.tags().iter().cloned());
        token = out.next_token().map(str::to_string);
        if token.is_none() {
            break;
        }
    }
    Ok(tags::from_sagemaker(&all))
}

/// Describes one scheduler config; `None` when it is gone.
async fn describe_scheduler_config(sm: &SageMaker, id: &str) -> Result<Option<SchedulerConfigView>> {
    const API: &str = "sagemaker:DescribeClusterSchedulerConfig";
    let out = match sm.describe_cluster_scheduler_config().cluster_scheduler_config_id(id).send().await {
        Ok(o) => o,
        Err(e) => {
            let e = sdk_error(API, e);
            return if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) };
        }
    };
    let arn = out.cluster_scheduler_config_arn().unwrap_or_default().to_string();
    let tags = if arn.is_empty() { Tags::new() } else { list_tags(sm, &arn).await? };
    Ok(Some(SchedulerConfigView {
        id: out.cluster_scheduler_config_id().unwrap_or(id).to_string(),
        arn,
        name: out.name().unwrap_or_default().to_string(),
        cluster_arn: out.cluster_arn().unwrap_or_default().to_string(),
        version: out.cluster_scheduler_config_version().unwrap_or(1),
        status: out.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
        policy: policy_of(out.scheduler_config()),
        failure_reason: out.failure_reason().map(str::to_string),
        tags,
    }))
}

/// Describes one compute quota; `None` when it is gone.
async fn describe_compute_quota(sm: &SageMaker, id: &str) -> Result<Option<ComputeQuotaView>> {
    const API: &str = "sagemaker:DescribeComputeQuota";
    let out = match sm.describe_compute_quota().compute_quota_id(id).send().await {
        Ok(o) => o,
        Err(e) => {
            let e = sdk_error(API, e);
            return if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) };
        }
    };
    let arn = out.compute_quota_arn().unwrap_or_default().to_string();
    let tags = if arn.is_empty() { Tags::new() } else { list_tags(sm, &arn).await? };
    Ok(Some(ComputeQuotaView {
        id: out.compute_quota_id().unwrap_or(id).to_string(),
        arn,
        name: out.name().unwrap_or_default().to_string(),
        cluster_arn: out.cluster_arn().unwrap_or_default().to_string(),
        version: out.compute_quota_version().unwrap_or(1),
        status: out.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
        config: quota_of(out.compute_quota_config(), out.compute_quota_target(), out.activation_state()),
        failure_reason: out.failure_reason().map(str::to_string),
        tags,
    }))
}

#[async_trait]
impl TaskGovernanceApi for AwsProvider {
    async fn list_scheduler_configs(&self, region: &str, cluster_arn: &str) -> Result<Vec<SchedulerConfigView>> {
        const API: &str = "sagemaker:ListClusterSchedulerConfigs";
        let c = self.region(region).await?;
        let mut ids = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let out = c
                .sagemaker
                .list_cluster_scheduler_configs()
                .cluster_arn(cluster_arn)
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            ids.extend(
                out.cluster_scheduler_config_summaries()
                    .iter()
                    .filter(|s| s.status() != Some(&sm::SchedulerResourceStatus::Deleted))
                    .filter_map(|s| s.cluster_scheduler_config_id())
                    .map(str::to_string),
            );
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut all = Vec::new();
        for id in ids {
            if let Some(v) = describe_scheduler_config(&c.sagemaker, &id).await?
                && v.status != "Deleted"
            {
                all.push(v);
            }
        }
        Ok(all)
    }

    async fn create_scheduler_config(
        &self,
        region: &str,
        name: &str,
        cluster_arn: &str,
        policy: &SchedulerPolicy,
        tags: &Tags,
    ) -> Result<SchedulerConfigView> {
        const API: &str = "sagemaker:CreateClusterSchedulerConfig";
        let c = self.region(region).await?;
        let out = c
            .sagemaker
            .create_cluster_scheduler_config()
            .name(name)
            .cluster_arn(cluster_arn)
            .scheduler_config(scheduler_config(policy))
            .set_tags(Some(tags::sagemaker(tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(SchedulerConfigView {
            id: out.cluster_scheduler_config_id().unwrap_or_default().to_string(),
            arn: out.cluster_scheduler_config_arn().unwrap_or_default().to_string(),
            name: name.to_string(),
            cluster_arn: cluster_arn.to_string(),
            version: 1,
            status: "Creating".into(),
            policy: policy.clone(),
            failure_reason: None,
            tags: tags.clone(),
        })
    }

    async fn update_scheduler_config(
        &self,
        region: &str,
        id: &str,
        target_version: i32,
        policy: &SchedulerPolicy,
    ) -> Result<i32> {
        const API: &str = "sagemaker:UpdateClusterSchedulerConfig";
        let c = self.region(region).await?;
        let out = c
            .sagemaker
            .update_cluster_scheduler_config()
            .cluster_scheduler_config_id(id)
            .target_version(target_version)
            .scheduler_config(scheduler_config(policy))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(out.cluster_scheduler_config_version().unwrap_or(target_version + 1))
    }

    async fn delete_scheduler_config(&self, region: &str, id: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteClusterSchedulerConfig";
        let c = self.region(region).await?;
        c.sagemaker
            .delete_cluster_scheduler_config()
            .cluster_scheduler_config_id(id)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(())
    }

    async fn list_compute_quotas(&self, region: &str, cluster_arn: &str) -> Result<Vec<ComputeQuotaView>> {
        const API: &str = "sagemaker:ListComputeQuotas";
        let c = self.region(region).await?;
        let mut ids = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let out = c
                .sagemaker
                .list_compute_quotas()
                .cluster_arn(cluster_arn)
                .set_next_token(token.clone())
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            ids.extend(
                out.compute_quota_summaries()
                    .iter()
                    .filter(|s| s.status() != Some(&sm::SchedulerResourceStatus::Deleted))
                    .filter_map(|s| s.compute_quota_id())
                    .map(str::to_string),
            );
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut all = Vec::new();
        for id in ids {
            if let Some(v) = describe_compute_quota(&c.sagemaker, &id).await?
                && v.status != "Deleted"
            {
                all.push(v);
            }
        }
        Ok(all)
    }

    async fn create_compute_quota(
        &self,
        region: &str,
        name: &str,
        cluster_arn: &str,
        config: &QuotaConfig,
        tags: &Tags,
    ) -> Result<ComputeQuotaView> {
        const API: &str = "sagemaker:CreateComputeQuota";
        let c = self.region(region).await?;
        let out = c
            .sagemaker
            .create_compute_quota()
            .name(name)
            .cluster_arn(cluster_arn)
            .compute_quota_config(quota_config(config))
            .compute_quota_target(quota_target(config))
            .activation_state(activation(config.enabled))
            .set_tags(Some(tags::sagemaker(tags)))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(ComputeQuotaView {
            id: out.compute_quota_id().unwrap_or_default().to_string(),
            arn: out.compute_quota_arn().unwrap_or_default().to_string(),
            name: name.to_string(),
            cluster_arn: cluster_arn.to_string(),
            version: 1,
            status: "Creating".into(),
            config: config.clone(),
            failure_reason: None,
            tags: tags.clone(),
        })
    }

    async fn update_compute_quota(
        &self,
        region: &str,
        id: &str,
        target_version: i32,
        config: &QuotaConfig,
    ) -> Result<i32> {
        const API: &str = "sagemaker:UpdateComputeQuota";
        let c = self.region(region).await?;
        let out = c
            .sagemaker
            .update_compute_quota()
            .compute_quota_id(id)
            .target_version(target_version)
            .compute_quota_config(quota_config(config))
            .compute_quota_target(quota_target(config))
            .activation_state(activation(config.enabled))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(out.compute_quota_version().unwrap_or(target_version + 1))
    }

    async fn delete_compute_quota(&self, region: &str, id: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteComputeQuota";
        let c = self.region(region).await?;
        c.sagemaker.delete_compute_quota().compute_quota_id(id).send().await.map_err(|e| sdk_error(API, e))?;
        Ok(())
    }
}

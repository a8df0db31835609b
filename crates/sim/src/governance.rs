//! Simulated HyperPod task governance on the SageMaker side: cluster scheduler configs and
//! compute quotas, with the refusals SageMaker answers (rows in `docs/aws-preconditions.md`).
//!
//! - Both are addressed by a 12-character id, versioned from 1; `Creating` for
//!   [`timings::SCHEDULER_RESOURCE_CHANGE`] then `Created`; an update makes them `Updating`
//!   for as long, then `Updated` with the next version. A delete makes them `Deleting`, then
//!   they are gone.
//! - Refused like SageMaker: a name, team or priority class breaking the model's patterns or
//!   ranges (`ValidationException`); a cluster ARN naming no HyperPod cluster
//!   (`ResourceNotFound`); a second scheduler config on a cluster, a second quota for a team or
//!   of the same name on a cluster, an update naming a `TargetVersion` that is not the current
//!   one, or an update while one is under way (`ConflictException`); quotas of an instance
//!   type the cluster does not have or more instances of it than its groups hold together
//!   (`ValidationException`).

use crate::base::{Lifecycle, Phase};
use crate::cloud::SimCloud;
use crate::timings;
use crate::world::{ComputeQuotaRec, SchedulerConfigRec, World};
use async_trait::async_trait;
use instantstart_core::provider::{
    BORROW_LIMIT_RANGE, ComputeQuotaView, MAX_PRIORITY_CLASSES, MAX_QUOTA_RESOURCES, ProviderError, ProviderErrorKind,
    QuotaConfig, Result, SchedulerConfigView, SchedulerPolicy, Tags, TaskGovernanceApi, entity_name, team_name,
};
use std::collections::BTreeMap;

/// `SchedulerResourceStatus` of a resource at `now`; `None` once gone.
fn status(
    life: &Lifecycle,
    version: i32,
    updating_until: Option<f64>,
    now: f64,
) -> Option<(&'static str, Option<String>)> {
    Some(match life.phase(now) {
        Phase::Creating => ("Creating", None),
        Phase::Failed(reason) => ("CreateFailed", Some(reason)),
        Phase::Deleting => ("Deleting", None),
        Phase::Gone => return None,
        Phase::Active if updating_until.is_some_and(|t| now < t) => ("Updating", None),
        Phase::Active if version > 1 => ("Updated", None),
        Phase::Active => ("Created", None),
    })
}

impl SchedulerConfigRec {
    fn view(&self, now: f64) -> SchedulerConfigView {
        let (s, failure_reason) =
            status(&self.life, self.version, self.updating_until, now).unwrap_or(("Deleted", None));
        SchedulerConfigView {
            id: self.id.clone(),
            arn: self.arn.clone(),
            name: self.name.clone(),
            cluster_arn: self.cluster_arn.clone(),
            version: self.version,
            status: s.to_string(),
            policy: self.policy.clone(),
            failure_reason,
            tags: self.tags.clone(),
        }
    }
}

impl ComputeQuotaRec {
    fn view(&self, now: f64) -> ComputeQuotaView {
        let (s, failure_reason) =
            status(&self.life, self.version, self.updating_until, now).unwrap_or(("Deleted", None));
        ComputeQuotaView {
            id: self.id.clone(),
            arn: self.arn.clone(),
            name: self.name.clone(),
            cluster_arn: self.cluster_arn.clone(),
            version: self.version,
            status: s.to_string(),
            config: self.config.clone(),
            failure_reason,
            tags: self.tags.clone(),
        }
    }
}

fn validation(api: &str, message: String) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, format!("ValidationException: {message}"))
}

fn conflict(api: &str, message: String) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::Conflict, format!("ConflictException: {message}"))
}

/// A 12-character lowercase id (`[a-z0-9]{12}`).
fn new_id(w: &mut World) -> String {
    w.hex(12, false)
}

/// The instances per type of the HyperPod cluster `arn`, or `ResourceNotFound`.
fn cluster_capacity(w: &World, api: &str, arn: &str, now: f64) -> Result<BTreeMap<String, u32>> {
    let h = w
        .hyperpod
        .values()
        .find(|h| h.arn == arn && h.life.exists(now) && !h.life.is_deleting())
        .ok_or_else(|| ProviderError::not_found(api, format!("ResourceNotFound: Cluster {arn} not found")))?;
    let mut out = BTreeMap::new();
    for g in &h.groups {
        *out.entry(g.instance_type.clone()).or_insert(0) += g.count;
    }
    Ok(out)
}

fn check_policy(api: &str, p: &SchedulerPolicy) -> Result<()> {
    if p.priority_classes.len() > MAX_PRIORITY_CLASSES {
        return Err(validation(api, format!("PriorityClasses has more than {MAX_PRIORITY_CLASSES} members")));
    }
    for c in &p.priority_classes {
        team_name(&c.name).map_err(|e| validation(api, format!("PriorityClass Name {}: {e}", c.name)))?;
        if c.weight > 100 {
            return Err(validation(api, format!("PriorityClass Weight {} is not in 0-100", c.weight)));
        }
    }
    Ok(())
}

fn check_quota(w: &World, api: &str, cluster_arn: &str, id: Option<&str>, q: &QuotaConfig, now: f64) -> Result<()> {
    team_name(&q.team).map_err(|e| validation(api, format!("TeamName {}: {e}", q.team)))?;
    if q.resources.len() > MAX_QUOTA_RESOURCES {
        return Err(validation(api, format!("ComputeQuotaResources has more than {MAX_QUOTA_RESOURCES} members")));
    }
    if let Some(l) = q.borrow_limit
        && !(BORROW_LIMIT_RANGE.0..=BORROW_LIMIT_RANGE.1).contains(&l)
    {
        return Err(validation(api, format!("BorrowLimit {l} is not in 1-500")));
    }
    if q.fair_share_weight > 100 {
        return Err(validation(api, format!("FairShareWeight {} is not in 0-100", q.fair_share_weight)));
    }
    let capacity = cluster_capacity(w, api, cluster_arn, now)?;
    // What the cluster's other quotas already hold, per type.
    let mut held: BTreeMap<&str, u32> = BTreeMap::new();
    for other in
        w.compute_quotas.values().filter(|o| o.cluster_arn == cluster_arn && o.exists(now) && !o.life.is_deleting())
    {
        if Some(other.id.as_str()) == id {
            continue;
        }
        for r in &other.config.resources {
            *held.entry(r.instance_type.as_str()).or_default() += r.count.unwrap_or(0);
        }
    }
    for r in &q.resources {
        let Some(have) = capacity.get(&r.instance_type) else {
            return Err(validation(
                api,
                format!("InstanceType {} is not in the cluster's instance groups", r.instance_type),
            ));
        };
        let total = held.get(r.instance_type.as_str()).copied().unwrap_or(0) + r.count.unwrap_or(0);
        if total > *have {
            return Err(validation(
                api,
                format!(
                    "the compute allocated for {} ({total} instances) exceeds the cluster's {have}",
                    r.instance_type
                ),
            ));
        }
    }
    Ok(())
}

#[async_trait]
impl TaskGovernanceApi for SimCloud {
    async fn list_scheduler_configs(&self, region: &str, cluster_arn: &str) -> Result<Vec<SchedulerConfigView>> {
        self.read("sagemaker:ListClusterSchedulerConfigs", |w, cx| {
            Ok(w.scheduler_configs
                .values()
                .filter(|r| r.region == region && r.cluster_arn == cluster_arn && r.exists(cx.now))
                .map(|r| r.view(cx.now))
                .collect())
        })
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
        self.write(API, |w, cx| {
            entity_name(name).map_err(|e| validation(API, format!("Name {name}: {e}")))?;
            check_policy(API, policy)?;
            cluster_capacity(w, API, cluster_arn, cx.now)?;
            if let Some(other) = w.scheduler_configs.values().find(|r| r.cluster_arn == cluster_arn && r.exists(cx.now))
            {
                return Err(conflict(
                    API,
                    format!("Cluster {cluster_arn} already has scheduler config {} ({})", other.name, other.id),
                ));
            }
            let id = new_id(w);
            let mut life = Lifecycle::new(cx.now, timings::SCHEDULER_RESOURCE_CHANGE);
            if let Some(reason) = &cx.resource_fails {
                life.fail_after(timings::SCHEDULER_RESOURCE_CHANGE * timings::FAILURE_SHARE, reason.clone());
            }
            let rec = SchedulerConfigRec {
                arn: format!("arn:aws:sagemaker:{region}:{}:cluster-scheduler-config/{id}", w.account),
                id: id.clone(),
                name: name.to_string(),
                region: region.to_string(),
                cluster_arn: cluster_arn.to_string(),
                version: 1,
                policy: policy.clone(),
                tags: tags.clone(),
                life,
                updating_until: None,
            };
            w.scheduler_configs.insert(id, rec.clone());
            Ok(rec.view(cx.now))
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
        self.write(API, |w, cx| {
            check_policy(API, policy)?;
            let now = cx.now;
            let rec = w
                .scheduler_configs
                .get_mut(id)
                .filter(|r| r.region == region && r.exists(now) && !r.life.is_deleting())
                .ok_or_else(|| {
                    ProviderError::not_found(API, format!("ResourceNotFound: scheduler config {id} not found"))
                })?;
            let (s, _) = status(&rec.life, rec.version, rec.updating_until, now).unwrap_or(("Deleted", None));
            if matches!(s, "Creating" | "Updating") {
                return Err(conflict(API, format!("scheduler config {id} is {s}")));
            }
            if target_version != rec.version {
                return Err(conflict(
                    API,
                    format!("TargetVersion {target_version} is not the current version {}", rec.version),
                ));
            }
            rec.version += 1;
            rec.policy = policy.clone();
            rec.updating_until = Some(now + timings::SCHEDULER_RESOURCE_CHANGE);
            Ok(rec.version)
        })
    }

    async fn delete_scheduler_config(&self, region: &str, id: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteClusterSchedulerConfig";
        self.write(API, |w, cx| {
            let rec = w.scheduler_configs.get_mut(id).filter(|r| r.region == region && r.exists(cx.now)).ok_or_else(
                || ProviderError::not_found(API, format!("ResourceNotFound: scheduler config {id} not found")),
            )?;
            rec.life.start_deleting(cx.now, timings::SCHEDULER_RESOURCE_DELETE);
            Ok(())
        })
    }

    async fn list_compute_quotas(&self, region: &str, cluster_arn: &str) -> Result<Vec<ComputeQuotaView>> {
        self.read("sagemaker:ListComputeQuotas", |w, cx| {
            Ok(w.compute_quotas
                .values()
                .filter(|r| r.region == region && r.cluster_arn == cluster_arn && r.exists(cx.now))
                .map(|r| r.view(cx.now))
                .collect())
        })
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
        self.write(API, |w, cx| {
            entity_name(name).map_err(|e| validation(API, format!("Name {name}: {e}")))?;
            check_quota(w, API, cluster_arn, None, config, cx.now)?;
            let live = |r: &&ComputeQuotaRec| r.cluster_arn == cluster_arn && r.exists(cx.now) && !r.life.is_deleting();
            if let Some(other) = w.compute_quotas.values().filter(live).find(|r| r.config.team == config.team) {
                return Err(conflict(API, format!("team {} already has compute quota {}", config.team, other.name)));
            }
            if w.compute_quotas.values().filter(live).any(|r| r.name == name) {
                return Err(conflict(API, format!("compute quota {name} already exists on the cluster")));
            }
            let id = new_id(w);
            let mut life = Lifecycle::new(cx.now, timings::SCHEDULER_RESOURCE_CHANGE);
            if let Some(reason) = &cx.resource_fails {
                life.fail_after(timings::SCHEDULER_RESOURCE_CHANGE * timings::FAILURE_SHARE, reason.clone());
            }
            let rec = ComputeQuotaRec {
                arn: format!("arn:aws:sagemaker:{region}:{}:compute-quota/{id}", w.account),
                id: id.clone(),
                name: name.to_string(),
                region: region.to_string(),
                cluster_arn: cluster_arn.to_string(),
                version: 1,
                config: config.clone(),
                tags: tags.clone(),
                life,
                updating_until: None,
            };
            w.compute_quotas.insert(id, rec.clone());
            Ok(rec.view(cx.now))
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
        self.write(API, |w, cx| {
            let now = cx.now;
            let cluster_arn = w
                .compute_quotas
                .get(id)
                .filter(|r| r.region == region && r.exists(now) && !r.life.is_deleting())
                .map(|r| r.cluster_arn.clone())
                .ok_or_else(|| {
                    ProviderError::not_found(API, format!("ResourceNotFound: compute quota {id} not found"))
                })?;
            check_quota(w, API, &cluster_arn, Some(id), config, now)?;
            let rec = w.compute_quotas.get_mut(id).expect("checked above");
            if rec.config.team != config.team {
                return Err(validation(API, "ComputeQuotaTarget TeamName cannot change".into()));
            }
            let (s, _) = status(&rec.life, rec.version, rec.updating_until, now).unwrap_or(("Deleted", None));
            if matches!(s, "Creating" | "Updating") {
                return Err(conflict(API, format!("compute quota {id} is {s}")));
            }
            if target_version != rec.version {
                return Err(conflict(
                    API,
                    format!("TargetVersion {target_version} is not the current version {}", rec.version),
                ));
            }
            rec.version += 1;
            rec.config = config.clone();
            rec.updating_until = Some(now + timings::SCHEDULER_RESOURCE_CHANGE);
            Ok(rec.version)
        })
    }

    async fn delete_compute_quota(&self, region: &str, id: &str) -> Result<()> {
        const API: &str = "sagemaker:DeleteComputeQuota";
        self.write(API, |w, cx| {
            let rec =
                w.compute_quotas.get_mut(id).filter(|r| r.region == region && r.exists(cx.now)).ok_or_else(|| {
                    ProviderError::not_found(API, format!("ResourceNotFound: compute quota {id} not found"))
                })?;
            rec.life.start_deleting(cx.now, timings::SCHEDULER_RESOURCE_DELETE);
            Ok(())
        })
    }
}

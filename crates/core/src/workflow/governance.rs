//! Task governance as an operation (`set_governance`): the desired [`GovernanceSpec`] of a
//! HyperPod cluster reconciled against what SageMaker and EKS hold.
//!
//! Switching on: the task governance add-on (`amazon-sagemaker-hyperpod-taskgovernance`, which
//! installs Kueue) → the cluster's scheduler config (created, or updated from its current
//! version) → one compute quota per team (removed teams' quotas deleted first, so their
//! compute is free for the others). Switching off tears down in the reverse order: every
//! quota → the scheduler config → the add-on.
//!
//! # Guarantees
//!
//! - The assessment reads the real state and reduces the request to what changes
//!   ([`GovernanceChanges`]); an equal state records nothing.
//! - Every step observes before it submits: the scheduler config and quotas are found by their
//!   deterministic names ([`scheduler_config_name`], [`quota_name`]) and ownership tags; one
//!   already holding the desired settings is adopted, a same-named one that is not ours stops
//!   the step (`needs_attention`). An update names the version it replaces (`TargetVersion`),
//!   so a kill -9 after an update was sent finds the new settings and does not send it again.

use super::day2::{hyperpod_record, live_cluster};
use super::steps::{AddonTarget, EnsureAddon, RemoveAddon};
use super::{cluster_target, decode};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::governance::{
    GovernanceSpec, GovernanceState, capacity, check_capacity, plan, quota_name, scheduler_config_name,
};
use crate::instance_types::InstanceSpecs;
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::{ClusterRecord, Store};
use crate::validate::{Findings, Validate};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Lowest Kubernetes minor version the task governance add-on supports (1.30).
pub const MIN_KUBERNETES_MINOR: u32 = 30;

/// Set a cluster's task governance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetGovernanceRequest {
    pub cluster: String,
    pub governance: GovernanceSpec,
    /// What really changes, resolved by the assessment (absent in a client's request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<GovernanceChanges>,
}

/// The changes of a request against the real state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GovernanceChanges {
    pub region: String,
    /// The HyperPod cluster's ARN (what SageMaker's scheduler resources name).
    pub cluster_arn: String,
    /// Install the add-on (`Some(true)`), remove it (`Some(false)`), or leave it.
    pub addon: Option<bool>,
    /// Create or update the scheduler config (`Some(true)`), delete it (`Some(false)`).
    pub scheduler_config: Option<bool>,
    /// Teams whose quota is created or updated.
    pub upsert_teams: Vec<String>,
    /// Teams whose quota is deleted.
    pub remove_teams: Vec<String>,
}

const ADDON_STEP: &str = "addon:amazon-sagemaker-hyperpod-taskgovernance";
/// Step removing the task governance add-on.
pub const REMOVE_ADDON_STEP: &str = "remove:amazon-sagemaker-hyperpod-taskgovernance";
const SCHEDULER_STEP: &str = "scheduler_config";
/// Step deleting the cluster's scheduler config.
pub const REMOVE_SCHEDULER_STEP: &str = "remove_scheduler_config";
/// Step key prefix deleting a team's compute quota: `remove_quota:<team>`.
pub const REMOVE_QUOTA_PREFIX: &str = "remove_quota:";

/// What deleting a cluster removes of its task governance, found by the delete's assessment:
/// InstantStart's quotas, then its scheduler config, then the add-on, before the HyperPod
/// cluster goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GovernanceTeardown {
    pub cluster_arn: String,
    /// Teams whose compute quota is ours.
    #[serde(default)]
    pub teams: Vec<String>,
    /// Our scheduler config exists.
    #[serde(default)]
    pub scheduler_config: bool,
    /// The task governance add-on is installed.
    #[serde(default)]
    pub addon: bool,
}

impl GovernanceTeardown {
    /// What of the cluster's governance is ours to remove; `None` when nothing is.
    pub fn of(cluster: &str, cluster_arn: &str, state: &GovernanceState) -> Option<Self> {
        let t = GovernanceTeardown {
            cluster_arn: cluster_arn.to_string(),
            teams: state.quotas.iter().filter(|q| is_owned(&q.tags, cluster)).map(|q| q.config.team.clone()).collect(),
            scheduler_config: state.scheduler_config.as_ref().is_some_and(|sc| is_owned(&sc.tags, cluster)),
            addon: state.addon,
        };
        (t.addon || t.scheduler_config || !t.teams.is_empty()).then_some(t)
    }

    /// The teardown steps (quotas → scheduler config → add-on); the HyperPod cluster's
    /// deletion depends on every one of them.
    pub fn steps(&self, cluster: &str) -> Vec<StepSpec> {
        let changes = GovernanceChanges {
            region: String::new(),
            cluster_arn: self.cluster_arn.clone(),
            addon: self.addon.then_some(false),
            scheduler_config: self.scheduler_config.then_some(false),
            upsert_teams: vec![],
            remove_teams: self.teams.clone(),
        };
        plan_steps(cluster, &changes)
    }

    /// The executor of one of [`GovernanceTeardown::steps`].
    pub fn executor(&self, aws: Arc<dyn AwsCloud>, rec: &ClusterRecord, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let cx = Cx {
            aws: aws.clone(),
            region: rec.region.clone(),
            cluster: rec.name.clone(),
            cluster_arn: self.cluster_arn.clone(),
        };
        let target = AddonTarget {
            aws,
            region: rec.region.clone(),
            eks_cluster: rec.eks_cluster.clone(),
            cluster: rec.name.clone(),
        };
        Some(match key {
            REMOVE_ADDON_STEP => Arc::new(RemoveAddon { target, addon: TASK_GOVERNANCE_ADDON.into() }),
            REMOVE_SCHEDULER_STEP => Arc::new(RemoveSchedulerConfig { cx }),
            other => Arc::new(RemoveQuota { cx, team: other.strip_prefix(REMOVE_QUOTA_PREFIX)?.to_string() }),
        })
    }
}

fn step(key: String, title: String, deps: Vec<String>, secs: u64) -> StepSpec {
    StepSpec { key, title, depends_on: deps, expected_secs: Some(secs) }
}

/// The steps of a set of changes.
fn plan_steps(cluster: &str, c: &GovernanceChanges) -> Vec<StepSpec> {
    let mut steps = Vec::new();
    let removes: Vec<String> = c.remove_teams.iter().map(|t| format!("remove_quota:{t}")).collect();
    for t in &c.remove_teams {
        steps.push(step(format!("remove_quota:{t}"), format!("Delete the compute quota of team {t}"), vec![], 30));
    }
    if c.addon == Some(true) {
        steps.push(step(
            ADDON_STEP.into(),
            format!("Install the HyperPod task governance add-on ({TASK_GOVERNANCE_ADDON}: Kueue)"),
            vec![],
            120,
        ));
    }
    match c.scheduler_config {
        Some(true) => steps.push(step(
            SCHEDULER_STEP.into(),
            format!(
                "Create or update scheduler config {} (priority classes, fair share)",
                scheduler_config_name(cluster)
            ),
            if c.addon == Some(true) { vec![ADDON_STEP.into()] } else { vec![] },
            30,
        )),
        Some(false) => steps.push(step(
            REMOVE_SCHEDULER_STEP.into(),
            format!("Delete scheduler config {}", scheduler_config_name(cluster)),
            removes.clone(),
            30,
        )),
        None => {}
    }
    for t in &c.upsert_teams {
        let mut deps = removes.clone();
        if c.scheduler_config == Some(true) {
            deps.push(SCHEDULER_STEP.into());
        } else if c.addon == Some(true) {
            deps.push(ADDON_STEP.into());
        }
        steps.push(step(
            format!("quota:{t}"),
            format!("Create or update compute quota {} of team {t}", quota_name(cluster, t)),
            deps,
            30,
        ));
    }
    if c.addon == Some(false) {
        let deps = if c.scheduler_config == Some(false) { vec![REMOVE_SCHEDULER_STEP.into()] } else { removes };
        steps.push(step(REMOVE_ADDON_STEP.into(), "Remove the HyperPod task governance add-on".into(), deps, 60));
    }
    steps
}

/// Task governance as it really is: the add-on, the cluster's scheduler config and quotas.
pub async fn read_governance(
    aws: &dyn AwsCloud,
    rec: &ClusterRecord,
    cluster_arn: &str,
) -> Result<GovernanceState, ProviderError> {
    let addon = read(|| aws.describe_addon(&rec.region, &rec.eks_cluster, TASK_GOVERNANCE_ADDON)).await?;
    let configs = read(|| aws.list_scheduler_configs(&rec.region, cluster_arn)).await?;
    let quotas = read(|| aws.list_compute_quotas(&rec.region, cluster_arn)).await?;
    Ok(GovernanceState {
        addon: addon.is_some_and(|a| !matches!(a.state, ResourceState::Deleting | ResourceState::Failed { .. })),
        scheduler_config: configs.into_iter().find(|c| !scheduler_status_deleted(&c.status)),
        quotas: quotas.into_iter().filter(|q| !scheduler_status_deleted(&q.status)).collect(),
    })
}

/// Refuses a Kubernetes version the add-on does not support.
fn check_kubernetes_version(version: &str, f: &mut Findings) {
    let minor = version.strip_prefix("1.").and_then(|m| m.parse::<u32>().ok());
    if minor.is_some_and(|m| m < MIN_KUBERNETES_MINOR) {
        f.push_unprocessable(
            "governance.enabled",
            format!("the HyperPod task governance add-on needs Kubernetes 1.{MIN_KUBERNETES_MINOR} or later; this cluster runs {version}"),
        );
    }
}

/// The set-governance workflow.
pub struct GovernanceWorkflow {
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl GovernanceWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        GovernanceWorkflow { aws, store }
    }
}

#[async_trait]
impl Workflow for GovernanceWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::SetGovernance
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: SetGovernanceRequest = decode(request)?;
        let mut f = Findings::new();
        f.at("governance", |f| req.governance.validate(f));
        f.finish()?;
        let (rec, _) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        if req.governance.enabled
            && let Some(v) = &rec.kubernetes_version
        {
            let mut f = Findings::new();
            check_kubernetes_version(v, &mut f);
            f.finish()?;
        }
        // A client's request (no changes resolved yet) shows every step switching on would take.
        let changes = req.changes.clone().unwrap_or_else(|| GovernanceChanges {
            region: rec.region.clone(),
            cluster_arn: String::new(),
            addon: Some(req.governance.enabled),
            scheduler_config: Some(req.governance.enabled),
            upsert_teams: req.governance.teams.iter().map(|t| t.name.clone()).collect(),
            remove_teams: vec![],
        });
        let steps = plan_steps(&req.cluster, &changes);
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.cluster), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let req: SetGovernanceRequest = decode(&prepared.request)?;
        let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let live = live_cluster(self.aws.as_ref(), &rec, &hp).await?;
        if req.governance.enabled {
            let specs = InstanceSpecs::new(read(|| self.aws.instance_type_specs(&rec.region)).await?);
            check_capacity(&req.governance, &rec.name, &capacity(&live, &specs)).map_err(|mut e| {
                for f in &mut e.findings {
                    f.field = format!("governance.{}", f.field);
                }
                e
            })?;
        }
        let actual = read_governance(self.aws.as_ref(), &rec, &live.arn).await?;
        let diff = plan(&req.cluster, &req.governance, &actual).map_err(|mut e| {
            for f in &mut e.findings {
                f.field = format!("governance.{}", f.field);
            }
            e
        })?;
        let desired = req.governance.clone().canonical();
        let have = actual.spec();
        let on = desired.enabled;
        let policy_differs = actual
            .scheduler_config
            .as_ref()
            .is_none_or(|sc| sc.policy != desired.policy() || scheduler_status_failed(&sc.status));
        let changes = GovernanceChanges {
            region: rec.region.clone(),
            cluster_arn: live.arn.clone(),
            addon: match (on, actual.addon) {
                (true, false) => Some(true),
                (false, true) => Some(false),
                _ => None,
            },
            scheduler_config: match (on, actual.scheduler_config.is_some()) {
                (true, _) if policy_differs => Some(true),
                (false, true) => Some(false),
                _ => None,
            },
            upsert_teams: desired
                .teams
                .iter()
                .filter(|t| {
                    have.team(&t.name) != Some(*t)
                        || actual.quota_of(&t.name).is_some_and(|q| scheduler_status_failed(&q.status))
                })
                .map(|t| t.name.clone())
                .collect(),
            remove_teams: have
                .teams
                .iter()
                .filter(|t| desired.team(&t.name).is_none())
                .map(|t| t.name.clone())
                .collect(),
        };
        let reduced = SetGovernanceRequest { cluster: req.cluster, governance: desired, changes: Some(changes) };
        let reduced = serde_json::to_value(&reduced).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: Some(diff), checks: vec![], reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: SetGovernanceRequest = decode(request).ok()?;
        let changes = req.changes.clone()?;
        let rec = self.store.get_cluster(&req.cluster).ok()??;
        let cx = Cx {
            aws: self.aws.clone(),
            region: changes.region.clone(),
            cluster: req.cluster.clone(),
            cluster_arn: changes.cluster_arn.clone(),
        };
        let target = AddonTarget {
            aws: self.aws.clone(),
            region: rec.region.clone(),
            eks_cluster: rec.eks_cluster.clone(),
            cluster: rec.name.clone(),
        };
        let exec: Arc<dyn StepExecutor> = match key {
            ADDON_STEP => Arc::new(EnsureAddon { target, addon: TASK_GOVERNANCE_ADDON.into() }),
            REMOVE_ADDON_STEP => Arc::new(RemoveAddon { target, addon: TASK_GOVERNANCE_ADDON.into() }),
            SCHEDULER_STEP => Arc::new(SchedulerConfigStep { cx, policy: req.governance.policy() }),
            REMOVE_SCHEDULER_STEP => Arc::new(RemoveSchedulerConfig { cx }),
            other => {
                if let Some(team) = other.strip_prefix("quota:") {
                    let config = req.governance.team(team)?.quota_config();
                    Arc::new(QuotaStep { cx, config })
                } else {
                    let team = other.strip_prefix("remove_quota:")?;
                    Arc::new(RemoveQuota { cx, team: team.to_string() })
                }
            }
        };
        Some(exec)
    }
}

/// What every governance step needs.
struct Cx {
    aws: Arc<dyn AwsCloud>,
    region: String,
    cluster: String,
    cluster_arn: String,
}

impl Cx {
    /// The cluster's scheduler config named as ours would be (whoever owns it).
    async fn scheduler_config(&self) -> Result<Option<SchedulerConfigView>, StepError> {
        let name = scheduler_config_name(&self.cluster);
        Ok(self
            .aws
            .list_scheduler_configs(&self.region, &self.cluster_arn)
            .await?
            .into_iter()
            .find(|c| c.name == name && c.status != "Deleted"))
    }

    /// The cluster's quota of `team` (whoever owns it).
    async fn quota(&self, team: &str) -> Result<Option<ComputeQuotaView>, StepError> {
        Ok(self
            .aws
            .list_compute_quotas(&self.region, &self.cluster_arn)
            .await?
            .into_iter()
            .find(|q| q.config.team == team && q.status != "Deleted"))
    }

    fn tags(&self, cx: &StepContext<'_>) -> Tags {
        ownership_tags(&self.cluster, &cx.operation_id.to_string())
    }

    fn foreign(&self, what: &str, name: &str) -> Observation {
        Observation::Foreign {
            reason: format!(
                "{what} {name} exists on the HyperPod cluster but is not tagged as InstantStart's for cluster {}; \
                 it is left alone: delete it in SageMaker, or leave governance to whoever manages it",
                self.cluster
            ),
        }
    }
}

fn busy(api: &str, what: &str, status: &str) -> StepError {
    StepError::Provider(ProviderError::new(
        api,
        ProviderErrorKind::Conflict,
        format!("{what} is {status}; it can change once that has finished"),
    ))
}

fn settle(status: &str, failure: Option<&str>, matches: bool, done: Value, what: &str) -> Progress {
    if scheduler_status_failed(status) {
        Progress::Failed { reason: format!("{what}: {status}: {}", failure.unwrap_or("no reason given")) }
    } else if scheduler_status_settled(status) && matches {
        Progress::Done(done)
    } else {
        Progress::Waiting { detail: format!("{what}: {status}") }
    }
}

/// Creates the scheduler config, or updates ours to the desired policy.
struct SchedulerConfigStep {
    cx: Cx,
    policy: SchedulerPolicy,
}

#[async_trait]
impl StepExecutor for SchedulerConfigStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.cx.scheduler_config().await? {
            None => Observation::Absent,
            Some(sc) if !is_owned(&sc.tags, &self.cx.cluster) => self.cx.foreign("scheduler config", &sc.name),
            Some(sc) if sc.policy == self.policy && !scheduler_status_failed(&sc.status) => {
                Observation::Exists(ResourceRef { kind: "scheduler-config".into(), id: sc.id, arn: Some(sc.arn) })
            }
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let c = &self.cx;
        if let Some(sc) = c.scheduler_config().await? {
            if !is_owned(&sc.tags, &c.cluster) {
                return Err(StepError::Invalid(format!("scheduler config {} is not InstantStart's", sc.name)));
            }
            if !scheduler_status_settled(&sc.status) && !scheduler_status_failed(&sc.status) {
                return Err(busy(
                    "sagemaker:UpdateClusterSchedulerConfig",
                    &format!("scheduler config {}", sc.name),
                    &sc.status,
                ));
            }
            c.aws.update_scheduler_config(&c.region, &sc.id, sc.version, &self.policy).await?;
            return Ok(ResourceRef { kind: "scheduler-config".into(), id: sc.id, arn: Some(sc.arn) });
        }
        let name = scheduler_config_name(&c.cluster);
        let sc = c.aws.create_scheduler_config(&c.region, &name, &c.cluster_arn, &self.policy, &c.tags(cx)).await?;
        Ok(ResourceRef { kind: "scheduler-config".into(), id: sc.id, arn: Some(sc.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(sc) = self.cx.scheduler_config().await?.filter(|sc| sc.id == r.id) else {
            return Ok(Progress::Waiting { detail: format!("scheduler config {} not visible yet", r.id) });
        };
        let done = json!({ "id": sc.id, "arn": sc.arn, "version": sc.version });
        Ok(settle(
            &sc.status,
            sc.failure_reason.as_deref(),
            sc.policy == self.policy,
            done,
            &format!("scheduler config {}", sc.name),
        ))
    }
}

/// Deletes our scheduler config.
struct RemoveSchedulerConfig {
    cx: Cx,
}

#[async_trait]
impl StepExecutor for RemoveSchedulerConfig {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.cx.scheduler_config().await? {
            Some(sc) if !is_owned(&sc.tags, &self.cx.cluster) => self.cx.foreign("scheduler config", &sc.name),
            Some(sc) if sc.status != "Deleting" => Observation::Absent,
            other => Observation::Exists(ResourceRef {
                kind: "scheduler-config".into(),
                id: other.map(|sc| sc.id).unwrap_or_default(),
                arn: None,
            }),
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let Some(sc) = self.cx.scheduler_config().await? else {
            return Ok(ResourceRef { kind: "scheduler-config".into(), id: String::new(), arn: None });
        };
        match self.cx.aws.delete_scheduler_config(&self.cx.region, &sc.id).await {
            Ok(()) => {}
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(ResourceRef { kind: "scheduler-config".into(), id: sc.id, arn: Some(sc.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.cx.scheduler_config().await? {
            None => Progress::Done(json!({})),
            Some(sc) if scheduler_status_failed(&sc.status) => Progress::Failed {
                reason: format!(
                    "scheduler config {}: {}: {}",
                    sc.name,
                    sc.status,
                    sc.failure_reason.unwrap_or_default()
                ),
            },
            Some(sc) => Progress::Waiting { detail: format!("scheduler config {}: {}", sc.name, sc.status) },
        })
    }
}

/// Creates a team's compute quota, or updates ours to the desired settings.
struct QuotaStep {
    cx: Cx,
    config: QuotaConfig,
}

#[async_trait]
impl StepExecutor for QuotaStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.cx.quota(&self.config.team).await? {
            None => Observation::Absent,
            Some(q) if !is_owned(&q.tags, &self.cx.cluster) => self.cx.foreign("compute quota", &q.name),
            Some(q) if q.config == self.config && !scheduler_status_failed(&q.status) => {
                Observation::Exists(ResourceRef { kind: "compute-quota".into(), id: q.id, arn: Some(q.arn) })
            }
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let c = &self.cx;
        if let Some(q) = c.quota(&self.config.team).await? {
            if !is_owned(&q.tags, &c.cluster) {
                return Err(StepError::Invalid(format!("compute quota {} is not InstantStart's", q.name)));
            }
            if !scheduler_status_settled(&q.status) && !scheduler_status_failed(&q.status) {
                return Err(busy("sagemaker:UpdateComputeQuota", &format!("compute quota {}", q.name), &q.status));
            }
            c.aws.update_compute_quota(&c.region, &q.id, q.version, &self.config).await?;
            return Ok(ResourceRef { kind: "compute-quota".into(), id: q.id, arn: Some(q.arn) });
        }
        let name = quota_name(&c.cluster, &self.config.team);
        let q = c.aws.create_compute_quota(&c.region, &name, &c.cluster_arn, &self.config, &c.tags(cx)).await?;
        Ok(ResourceRef { kind: "compute-quota".into(), id: q.id, arn: Some(q.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(q) = self.cx.quota(&self.config.team).await?.filter(|q| q.id == r.id) else {
            return Ok(Progress::Waiting { detail: format!("compute quota {} not visible yet", r.id) });
        };
        let done = json!({ "id": q.id, "arn": q.arn, "version": q.version });
        Ok(settle(
            &q.status,
            q.failure_reason.as_deref(),
            q.config == self.config,
            done,
            &format!("compute quota {}", q.name),
        ))
    }
}

/// Deletes a team's compute quota (ours only).
struct RemoveQuota {
    cx: Cx,
    team: String,
}

#[async_trait]
impl StepExecutor for RemoveQuota {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.cx.quota(&self.team).await? {
            Some(q) if !is_owned(&q.tags, &self.cx.cluster) => self.cx.foreign("compute quota", &q.name),
            Some(q) if q.status != "Deleting" => Observation::Absent,
            other => Observation::Exists(ResourceRef {
                kind: "compute-quota".into(),
                id: other.map(|q| q.id).unwrap_or_default(),
                arn: None,
            }),
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let Some(q) = self.cx.quota(&self.team).await? else {
            return Ok(ResourceRef { kind: "compute-quota".into(), id: String::new(), arn: None });
        };
        match self.cx.aws.delete_compute_quota(&self.cx.region, &q.id).await {
            Ok(()) => {}
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(ResourceRef { kind: "compute-quota".into(), id: q.id, arn: Some(q.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.cx.quota(&self.team).await? {
            None => Progress::Done(json!({})),
            Some(q) if scheduler_status_failed(&q.status) => Progress::Failed {
                reason: format!("compute quota {}: {}: {}", q.name, q.status, q.failure_reason.unwrap_or_default()),
            },
            Some(q) => Progress::Waiting { detail: format!("compute quota {}: {}", q.name, q.status) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_follow_the_teardown_order() {
        let on = GovernanceChanges {
            region: "r".into(),
            cluster_arn: "a".into(),
            addon: Some(true),
            scheduler_config: Some(true),
            upsert_teams: vec!["a".into()],
            remove_teams: vec!["b".into()],
        };
        let s = plan_steps("demo", &on);
        let keys: Vec<&str> = s.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["remove_quota:b", ADDON_STEP, SCHEDULER_STEP, "quota:a"]);
        assert_eq!(s[3].depends_on, ["remove_quota:b", SCHEDULER_STEP]);
        let off = GovernanceChanges {
            addon: Some(false),
            scheduler_config: Some(false),
            upsert_teams: vec![],
            remove_teams: vec!["a".into(), "b".into()],
            ..on
        };
        let s = plan_steps("demo", &off);
        let keys: Vec<&str> = s.iter().map(|s| s.key.as_str()).collect();
        assert_eq!(keys, ["remove_quota:a", "remove_quota:b", REMOVE_SCHEDULER_STEP, REMOVE_ADDON_STEP]);
        assert_eq!(s[2].depends_on, ["remove_quota:a", "remove_quota:b"]);
        assert_eq!(s[3].depends_on, [REMOVE_SCHEDULER_STEP]);
    }

    #[test]
    fn old_kubernetes_is_refused() {
        let mut f = Findings::new();
        check_kubernetes_version("1.29", &mut f);
        assert_eq!(f.finish().unwrap_err().findings[0].field, "governance.enabled");
        let mut f = Findings::new();
        check_kubernetes_version("1.31", &mut f);
        assert!(f.finish().is_ok());
    }
}

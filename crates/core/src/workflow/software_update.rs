//! HyperPod platform software updates (`UpdateClusterSoftware`): moves instance groups to a
//! HyperPod AMI release (the latest, or a named `ImageReleaseVersion`) or to an AMI
//! (`ImageId`), rolling through each group's instances in batches, as one operation polled
//! until the cluster is back `InService` and every updated group runs the new software.
//!
//! # Guarantees
//!
//! - Validation (every face, 400 naming the field), within botocore's
//!   `UpdateClusterSoftwareRequest`: at most 100 instance groups, each named once with a valid
//!   name; `image_release_version` is `MAJOR.MINOR.PATCH` (≤ 64 characters); `image_id` is
//!   `ami-` + 8–17 hex digits or `default`; batch sizes are ≥ 1 (a `capacity_percentage`
//!   ≤ 100); the wait between batches is 0–3600 s; at most 10 rollback alarms of 1–255
//!   characters, not blank.
//! - Assessment (before anything is recorded): the HyperPod cluster is `InService` and no group
//!   has an update running (409: SageMaker answers `ConflictException`); each named group exists
//!   (422); a group on a custom AMI is updated only with an `image_id` (422, SageMaker's rule). The plan lists, per group, the software it runs and the software asked for; when
//!   nothing would change (every group already on the named release or AMI, or `UpToDate` for
//!   the latest) the request is "already in this state" and no operation is recorded. Named
//!   groups already on their target are left out of the recorded request.
//! - One durable step, observe-before-submit: an update already running on the covered groups
//!   (`SoftwareUpdateStatus` `Pending`/`InProgress`/`RollbackInProgress`), or one that already
//!   brought them to the target, is followed, not started twice.
//! - Done when the cluster is `InService`, no covered group's update is running, and each runs
//!   its target; `Failed`/`RollbackComplete` fail the step with the group named.

use super::day2::{hyperpod_record, live_cluster};
use super::{cluster_target, decode};
use crate::diff::{Change, Plan};
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::Store;
use crate::validate::Findings;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Most instance groups one update names (`UpdateClusterSoftwareInstanceGroups`, max 100).
pub const MAX_GROUPS: usize = 100;
/// Longest wait between batches (`WaitTimeIntervalInSeconds`, 0–3600).
pub const MAX_WAIT_SECS: u32 = 3600;
/// Most rollback alarms (`AutoRollbackAlarms`, 1–10).
pub const MAX_ALARMS: usize = 10;
const STEP: &str = "software_update";

/// Update the HyperPod platform software of a cluster's instance groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SoftwareUpdateRequest {
    pub cluster: String,
    /// The groups to update, each optionally to a named release; empty: every group, to the
    /// latest release (or to `image_id`).
    #[serde(default)]
    pub instance_groups: Vec<SoftwareUpdateGroup>,
    /// Rolling update policy; absent: SageMaker's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<SoftwareUpdateDeployment>,
    /// An AMI (`ami-…`) or `default` (the latest HyperPod AMI) instead of a release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
}

/// A HyperPod AMI release: `MAJOR.MINOR.PATCH`, at most 64 characters (`ImageReleaseVersion`).
pub fn is_release(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    v.len() <= 64 && parts.len() == 3 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// An AMI id (`ami-` and 8–17 hex digits) or `default` (`ImageId`).
pub fn is_image_id(v: &str) -> bool {
    v == "default"
        || v.strip_prefix("ami-")
            .is_some_and(|hex| (8..=17).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn check_batch(f: &mut Findings, field: &str, b: &BatchSize) {
    if b.value < 1 {
        f.push(&format!("{field}.value"), "must be at least 1");
    }
    if b.kind == BatchSizeKind::CapacityPercentage && b.value > 100 {
        f.push(&format!("{field}.value"), "a capacity_percentage must be at most 100");
    }
}

impl SoftwareUpdateRequest {
    /// The shape rules (no provider needed).
    pub fn validate(&self, f: &mut Findings) {
        if self.instance_groups.len() > MAX_GROUPS {
            f.push("instance_groups", format!("must name at most {MAX_GROUPS} instance groups"));
        }
        for (i, g) in self.instance_groups.iter().enumerate() {
            let at = format!("instance_groups[{i}]");
            if let Err(rule) = crate::names::hyperpod_name(&g.name) {
                f.push(&format!("{at}.name"), rule);
            } else if self.instance_groups[..i].iter().any(|x| x.name == g.name) {
                f.push(&format!("{at}.name"), format!("instance group {} is named twice", g.name));
            }
            if let Some(v) = &g.image_release_version
                && !is_release(v)
            {
                f.push(
                    &format!("{at}.image_release_version"),
                    "must be a HyperPod AMI release MAJOR.MINOR.PATCH, e.g. 2025.10.1",
                );
            }
        }
        if let Some(id) = &self.image_id
            && !is_image_id(id)
        {
            f.push("image_id", "must be an AMI id (ami- and 8-17 hex digits) or default");
        }
        if let Some(d) = &self.deployment {
            check_batch(f, "deployment.max_batch", &d.max_batch);
            if let Some(b) = &d.rollback_max_batch {
                check_batch(f, "deployment.rollback_max_batch", b);
            }
            if d.wait_interval_secs.is_some_and(|w| w > MAX_WAIT_SECS) {
                f.push("deployment.wait_interval_secs", format!("must be 0-{MAX_WAIT_SECS} seconds"));
            }
            if d.rollback_alarms.len() > MAX_ALARMS {
                f.push("deployment.rollback_alarms", format!("must name at most {MAX_ALARMS} alarms"));
            }
            for (i, a) in d.rollback_alarms.iter().enumerate() {
                if a.trim().is_empty() || a.len() > 255 {
                    f.push(
                        &format!("deployment.rollback_alarms[{i}]"),
                        "must be a CloudWatch alarm name (1-255 characters, not blank)",
                    );
                }
            }
        }
    }

    /// What group `name` is asked to run.
    pub fn target(&self, name: &str) -> Target {
        if let Some(id) = self.image_id.as_deref().filter(|id| *id != "default") {
            return Target::Image(id.to_string());
        }
        match self.instance_groups.iter().find(|g| g.name == name).and_then(|g| g.image_release_version.clone()) {
            Some(v) => Target::Release(v),
            None => Target::Latest,
        }
    }

    /// The groups the update covers, as the cluster describes them.
    pub fn covered<'a>(&self, live: &'a HyperPodCluster) -> Vec<&'a HyperPodInstanceGroupStatus> {
        live.instance_groups
            .iter()
            .filter(|g| self.instance_groups.is_empty() || self.instance_groups.iter().any(|x| x.name == g.name))
            .collect()
    }
}

/// The software a group is asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The latest HyperPod AMI release (no release named, or `image_id: default`).
    Latest,
    /// A named HyperPod AMI release.
    Release(String),
    /// A custom AMI.
    Image(String),
}

impl Target {
    /// How the plan and the step title name it.
    pub fn describe(&self) -> String {
        match self {
            Target::Latest => "the latest release".into(),
            Target::Release(v) => format!("release {v}"),
            Target::Image(id) => id.clone(),
        }
    }

    /// Whether the group's description tells if it runs this software (the field it needs is
    /// there).
    pub fn judgeable(&self, s: &GroupSoftware) -> bool {
        match self {
            Target::Latest => s.image_version_status.is_some(),
            Target::Release(_) => s.current_release.is_some(),
            Target::Image(_) => s.current_image_id.is_some(),
        }
    }

    /// Whether a group already runs this software (an unknown current state counts as not).
    pub fn reached(&self, s: &GroupSoftware) -> bool {
        match self {
            Target::Latest => s.image_version_status.as_deref() == Some("UpToDate"),
            Target::Release(v) => s.current_release.as_deref() == Some(v.as_str()),
            Target::Image(id) => s.current_image_id.as_deref() == Some(id.as_str()),
        }
    }
}

/// A group runs a custom AMI: an image, and no HyperPod release.
pub fn runs_custom_ami(s: &GroupSoftware) -> bool {
    s.current_image_id.is_some() && s.current_release.is_none()
}

/// What a group runs now, as the plan shows it.
fn running_now(s: &GroupSoftware) -> String {
    let what = match (&s.current_release, &s.current_image_id) {
        (Some(v), _) => format!("release {v}"),
        (None, Some(id)) => id.clone(),
        (None, None) => "unknown".into(),
    };
    match &s.image_version_status {
        Some(status) => format!("{what} ({status})"),
        None => what,
    }
}

/// The software update workflow.
pub struct SoftwareUpdateWorkflow {
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl SoftwareUpdateWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        SoftwareUpdateWorkflow { aws, store }
    }
}

#[async_trait]
impl Workflow for SoftwareUpdateWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::UpdateSoftware
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: SoftwareUpdateRequest = decode(request)?;
        let mut f = Findings::new();
        req.validate(&mut f);
        f.finish()?;
        let (_, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let groups = if req.instance_groups.is_empty() {
            format!("every instance group to {}", req.target("").describe())
        } else {
            req.instance_groups
                .iter()
                .map(|g| format!("{} to {}", g.name, req.target(&g.name).describe()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rolling =
            req.deployment.as_ref().map(|d| format!(", {} at a time", d.max_batch.describe())).unwrap_or_default();
        let steps = vec![StepSpec {
            key: STEP.into(),
            title: format!("Update the HyperPod software of {hp}: {groups}{rolling}"),
            depends_on: vec![],
            expected_secs: Some(3600),
        }];
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.cluster), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: SoftwareUpdateRequest = decode(&prepared.request)?;
        let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let live = live_cluster(self.aws.as_ref(), &rec, &hp).await?;
        if let Some(g) = live.instance_groups.iter().find(|g| g.software.update_running()) {
            return Err(EngineError::InvalidState(format!(
                "a software update of instance group {} of {hp} is in progress ({}); SageMaker runs one at a time",
                g.name,
                g.software.update_status.as_deref().unwrap_or_default()
            )));
        }
        if live.state != ResourceState::Active {
            return Err(EngineError::InvalidState(format!(
                "HyperPod cluster {hp} is {}; a software update starts only while it is InService",
                super::steps::state_word(&live.state)
            )));
        }
        let mut f = Findings::new();
        for (i, g) in req.instance_groups.iter().enumerate() {
            if !live.instance_groups.iter().any(|x| x.name == g.name) {
                f.push_unprocessable(
                    &format!("instance_groups[{i}].name"),
                    format!("instance group {} does not exist in {hp}", g.name),
                );
            }
        }
        // SageMaker: a group on a custom AMI is updated only with an ImageId (or `default`).
        if req.image_id.is_none()
            && let Some(g) = req.covered(&live).into_iter().find(|g| runs_custom_ami(&g.software))
        {
            f.push_unprocessable(
                "image_id",
                format!(
                    "instance group {} runs a custom AMI ({}); name an image_id (an AMI, or default for the latest HyperPod AMI)",
                    g.name,
                    g.software.current_image_id.as_deref().unwrap_or_default()
                ),
            );
        }
        f.finish()?;
        let mut plan = Plan::new(&req.cluster);
        for g in req.covered(&live) {
            let target = req.target(&g.name);
            if !target.reached(&g.software) {
                plan.changes.push(Change {
                    field: format!("instance_groups.{}.software", g.name),
                    from: json!(running_now(&g.software)),
                    to: json!(target.describe()),
                });
            }
        }
        // Named groups already on their target are left out of what is recorded.
        req.instance_groups
            .retain(|g| plan.changes.iter().any(|c| c.field == format!("instance_groups.{}.software", g.name)));
        let reduced = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: Some(plan), checks: vec![], reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        if key != STEP {
            return None;
        }
        let req: SoftwareUpdateRequest = decode(request).ok()?;
        Some(Arc::new(SoftwareUpdateStep { req, aws: self.aws.clone(), store: self.store.clone() }))
    }
}

struct SoftwareUpdateStep {
    req: SoftwareUpdateRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl SoftwareUpdateStep {
    async fn live(&self) -> Result<(String, String, HyperPodCluster), StepError> {
        let (rec, hp) =
            hyperpod_record(self.store.as_ref(), &self.req.cluster).map_err(|e| StepError::Invalid(e.to_string()))?;
        let live = self
            .aws
            .describe_hyperpod_cluster(&rec.region, &hp)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("HyperPod cluster {hp} not found")))?;
        Ok((rec.region, hp, live))
    }

    fn reference(hp: String, live: &HyperPodCluster) -> ResourceRef {
        ResourceRef { kind: "software-update".into(), id: hp, arn: Some(live.arn.clone()) }
    }
}

/// Where an update of the covered groups stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdateState {
    /// A group's update failed or was rolled back (its name and status).
    Failed { group: String, status: String },
    /// Still running: the groups whose update runs, and the cluster's state.
    Running { groups: Vec<String> },
    /// Every covered group runs its target and the cluster is InService.
    Done,
}

/// Reads the update of `req`'s groups from the described cluster.
pub fn update_state(req: &SoftwareUpdateRequest, live: &HyperPodCluster) -> UpdateState {
    let covered = req.covered(live);
    if let Some(g) = covered.iter().find(|g| g.software.update_failed()) {
        return UpdateState::Failed {
            group: g.name.clone(),
            status: g.software.update_status.clone().unwrap_or_default(),
        };
    }
    let busy: Vec<String> = covered
        .iter()
        .filter(|g| {
            let target = req.target(&g.name);
            // Without the field that tells, a finished (`Succeeded`) and settled update counts.
            let done = if target.judgeable(&g.software) {
                target.reached(&g.software)
            } else {
                g.software.update_status.as_deref() == Some("Succeeded") && g.software.settled()
            };
            g.software.update_running() || !done
        })
        .map(|g| g.name.clone())
        .collect();
    if busy.is_empty() && live.state == ResourceState::Active {
        UpdateState::Done
    } else {
        UpdateState::Running { groups: busy }
    }
}

#[async_trait]
impl StepExecutor for SoftwareUpdateStep {
    /// An update already running on the groups (or one that already brought them to their
    /// target) is followed, not started twice.
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let (_, hp, live) = self.live().await?;
        let covered = self.req.covered(&live);
        let running = covered.iter().any(|g| g.software.update_running());
        let reached = !covered.is_empty() && covered.iter().all(|g| self.req.target(&g.name).reached(&g.software));
        Ok(if running || reached { Observation::Exists(Self::reference(hp, &live)) } else { Observation::Absent })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (region, hp, live) = self.live().await?;
        self.aws
            .update_cluster_software(&UpdateClusterSoftware {
                region,
                cluster: hp.clone(),
                instance_groups: self.req.instance_groups.clone(),
                deployment: self.req.deployment.clone(),
                image_id: self.req.image_id.clone(),
            })
            .await?;
        Ok(Self::reference(hp, &live))
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let (_, _, live) = self.live().await?;
        if let ResourceState::Failed { reason } = &live.state {
            return Ok(Progress::Failed { reason: reason.clone() });
        }
        Ok(match update_state(&self.req, &live) {
            UpdateState::Failed { group, status } => {
                let why = live
                    .instance_groups
                    .iter()
                    .find(|g| g.name == group)
                    .and_then(|g| g.failure.clone())
                    .map(|f| format!(": {f}"))
                    .unwrap_or_default();
                Progress::Failed { reason: format!("software update of instance group {group}: {status}{why}") }
            }
            UpdateState::Done => {
                let groups: Vec<Value> = self
                    .req
                    .covered(&live)
                    .iter()
                    .map(|g| {
                        json!({
                            "name": g.name,
                            "image_release_version": g.software.current_release,
                            "image_id": g.software.current_image_id,
                            "software_update_status": g.software.update_status,
                        })
                    })
                    .collect();
                Progress::Done(json!({ "instance_groups": groups }))
            }
            UpdateState::Running { groups } => {
                let of = |name: &str| {
                    live.instance_groups
                        .iter()
                        .find(|g| g.name == name)
                        .map(|g| match g.software.target_state_count {
                            Some(n) => format!("{name} ({n} of {} on the new software)", g.target_count),
                            None => name.to_string(),
                        })
                        .unwrap_or_else(|| name.to_string())
                };
                Progress::Waiting {
                    detail: if groups.is_empty() {
                        format!("HyperPod cluster: {}", super::steps::state_word(&live.state))
                    } else {
                        format!("updating {}", groups.iter().map(|g| of(g)).collect::<Vec<_>>().join(", "))
                    },
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(kind: BatchSizeKind, value: u32) -> BatchSize {
        BatchSize { kind, value }
    }

    fn g(name: &str, v: Option<&str>) -> SoftwareUpdateGroup {
        SoftwareUpdateGroup { name: name.into(), image_release_version: v.map(str::to_string) }
    }

    fn request(groups: Vec<SoftwareUpdateGroup>, image: Option<&str>) -> SoftwareUpdateRequest {
        SoftwareUpdateRequest {
            cluster: "demo".into(),
            instance_groups: groups,
            deployment: None,
            image_id: image.map(str::to_string),
        }
    }

    #[test]
    fn request_rules() {
        let deployment = |max: BatchSize, wait: Option<u32>, alarms: &[&str]| SoftwareUpdateDeployment {
            max_batch: max,
            rollback_max_batch: None,
            wait_interval_secs: wait,
            rollback_alarms: alarms.iter().map(|s| s.to_string()).collect(),
        };
        use BatchSizeKind::*;
        let many: Vec<SoftwareUpdateGroup> = (0..101).map(|i| g(&format!("g{i}"), None)).collect();
        let eleven: Vec<&str> = vec!["a"; 11];
        #[allow(clippy::type_complexity)] // a table test: one row per case
        let cases: Vec<(Vec<SoftwareUpdateGroup>, Option<SoftwareUpdateDeployment>, Option<&str>, &[&str])> = vec![
            (vec![], None, None, &[]),
            (
                vec![g("workers", Some("2025.10.1"))],
                Some(deployment(batch(InstanceCount, 2), Some(60), &["a"])),
                Some("default"),
                &[],
            ),
            (
                vec![],
                Some(deployment(batch(CapacityPercentage, 100), Some(3600), &[])),
                Some("ami-0123456789abcdef0"),
                &[],
            ),
            (vec![g("w", Some("latest"))], None, None, &["instance_groups[0].image_release_version"]),
            (vec![g("w", Some("2025.10"))], None, None, &["instance_groups[0].image_release_version"]),
            (vec![g("Bad_Name", None)], None, None, &["instance_groups[0].name"]),
            (vec![g("w", None), g("w", None)], None, None, &["instance_groups[1].name"]),
            (many, None, None, &["instance_groups"]),
            (vec![], None, Some("ami-12"), &["image_id"]),
            (vec![], None, Some("ami-0123456789abcdef0123"), &["image_id"]),
            (
                vec![],
                Some(deployment(batch(CapacityPercentage, 101), None, &[])),
                None,
                &["deployment.max_batch.value"],
            ),
            (vec![], Some(deployment(batch(InstanceCount, 0), None, &[])), None, &["deployment.max_batch.value"]),
            (
                vec![],
                Some(deployment(batch(InstanceCount, 1), Some(3601), &[" "])),
                None,
                &["deployment.wait_interval_secs", "deployment.rollback_alarms[0]"],
            ),
            (vec![], Some(deployment(batch(InstanceCount, 1), None, &eleven)), None, &["deployment.rollback_alarms"]),
        ];
        for (i, (groups, d, image, want)) in cases.into_iter().enumerate() {
            let mut req = request(groups, image);
            req.deployment = d;
            let mut f = Findings::new();
            req.validate(&mut f);
            let got: Vec<String> =
                f.finish().err().map(|e| e.findings.into_iter().map(|x| x.field).collect()).unwrap_or_default();
            assert_eq!(got, want, "case {i}");
        }
        let mut req = request(vec![], None);
        req.deployment = Some(SoftwareUpdateDeployment {
            max_batch: batch(InstanceCount, 1),
            rollback_max_batch: Some(batch(CapacityPercentage, 0)),
            wait_interval_secs: None,
            rollback_alarms: vec![],
        });
        let mut f = Findings::new();
        req.validate(&mut f);
        assert_eq!(f.finish().unwrap_err().findings[0].field, "deployment.rollback_max_batch.value");
    }

    #[test]
    fn targets_and_when_a_group_has_reached_one() {
        let req = request(vec![g("a", Some("2025.10.1")), g("b", None)], None);
        assert_eq!(req.target("a"), Target::Release("2025.10.1".into()));
        assert_eq!(req.target("b"), Target::Latest);
        assert_eq!(request(vec![], Some("default")).target("a"), Target::Latest);
        assert_eq!(
            request(vec![g("a", Some("2025.10.1"))], Some("ami-12345678")).target("a"),
            Target::Image("ami-12345678".into())
        );
        let s = |release: &str, image: &str, status: &str| GroupSoftware {
            current_release: Some(release.into()),
            current_image_id: Some(image.into()),
            image_version_status: Some(status.into()),
            ..Default::default()
        };
        let cases = [
            (Target::Latest, s("2025.11.2", "ami-1", "UpToDate"), true),
            (Target::Latest, s("2025.10.1", "ami-1", "UpdateAvailable"), false),
            (Target::Latest, GroupSoftware::default(), false),
            (Target::Release("2025.10.1".into()), s("2025.10.1", "ami-1", "UpdateAvailable"), true),
            (Target::Release("2025.11.2".into()), s("2025.10.1", "ami-1", "UpdateAvailable"), false),
            (Target::Image("ami-1".into()), s("2025.10.1", "ami-1", "UpToDate"), true),
            (Target::Image("ami-2".into()), s("2025.10.1", "ami-1", "UpToDate"), false),
        ];
        for (i, (t, software, want)) in cases.into_iter().enumerate() {
            assert_eq!(t.reached(&software), want, "case {i}");
        }
    }

    #[test]
    fn update_state_names_the_failed_group_and_waits_for_every_group() {
        let group = |name: &str, status: &str, release: &str| HyperPodInstanceGroupStatus {
            name: name.into(),
            instance_type: "ml.g5.2xlarge".into(),
            current_count: 2,
            target_count: 2,
            status: "InService".into(),
            capacity: Default::default(),
            interface_mode: Default::default(),
            subnet_ids: vec![],
            security_group_ids: vec![],
            ebs_volume_gb: None,
            lifecycle_script: None,
            execution_role_arn: None,
            deep_health_checks: Default::default(),
            threads_per_core: None,
            failure: None,
            software: GroupSoftware {
                current_release: Some(release.into()),
                desired_release: Some(release.into()),
                update_status: Some(status.into()),
                image_version_status: Some("UpdateAvailable".into()),
                ..Default::default()
            },
        };
        let cluster = |state: ResourceState, groups: Vec<HyperPodInstanceGroupStatus>| HyperPodCluster {
            name: "demo-hp".into(),
            arn: "arn".into(),
            region: "us-east-1".into(),
            state,
            instance_groups: groups,
            node_recovery: Default::default(),
            tiered_storage: None,
            autoscaling: false,
            tags: Default::default(),
            eks_cluster_arn: None,
        };
        let req = request(vec![g("a", Some("2025.11.2")), g("b", Some("2025.11.2"))], None);
        let live = cluster(
            ResourceState::Updating,
            vec![
                group("a", "Succeeded", "2025.11.2"),
                group("b", "InProgress", "2025.10.1"),
                group("c", "Failed", "x"),
            ],
        );
        assert_eq!(update_state(&req, &live), UpdateState::Running { groups: vec!["b".into()] });
        let live = cluster(
            ResourceState::Active,
            vec![group("a", "Succeeded", "2025.11.2"), group("b", "RollbackComplete", "2025.10.1")],
        );
        assert_eq!(
            update_state(&req, &live),
            UpdateState::Failed { group: "b".into(), status: "RollbackComplete".into() }
        );
        let live = cluster(
            ResourceState::Active,
            vec![group("a", "Succeeded", "2025.11.2"), group("b", "Succeeded", "2025.11.2")],
        );
        assert_eq!(update_state(&req, &live), UpdateState::Done);
        // The cluster still Updating after the groups finished: not done yet.
        let live = cluster(
            ResourceState::Updating,
            vec![group("a", "Succeeded", "2025.11.2"), group("b", "Succeeded", "2025.11.2")],
        );
        assert_eq!(update_state(&req, &live), UpdateState::Running { groups: vec![] });
    }
}

//! Instance groups of a HyperPod cluster: add (capacity type, interface mode and subnet
//! placement decided as ONE operation), update (scale, including to and from zero), delete.
//!
//! Capacity type, EFA-only interface mode, instance type and placement are immutable: a change
//! is rejected with a 422 naming the field before anything is called. Updates follow the
//! explicit-diff contract: only the fields sent are compared with the real group, and a request
//! that matches creates no operation.

use super::day2::{cluster_script, group_context, group_spec, hyperpod_record, live_cluster, subnet_az};
use super::steps::place_groups;
use super::{cluster_target, decode};
use crate::diff::plan_instance_group;
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::preflight::{
    CheckStatus, GroupToCheck, PreflightCheck, check_address_space, check_groups, check_lifecycle_script,
};
use crate::provider::*;
use crate::spec::{CapacitySpec, InstanceGroupSpec, InterfaceMode, LifecycleScript, MAX_GROUP_COUNT};
use crate::store::Store;
use crate::validate::{Findings, Validate, ValidationError};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Add an instance group to a cluster's HyperPod cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddInstanceGroupRequest {
    pub cluster: String,
    pub group: InstanceGroupSpec,
    /// Set by the assessment when managed autoscaling is on and the group qualifies: the
    /// group joins the HyperpodNodeClass (when it lists every group) after it is created.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub karpenter: bool,
}

/// Only the fields of a group the user changed. Immutable fields may be sent (e.g. by a form
/// that sends everything); a value different from the real one is rejected with a 422.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceGroupPatch {
    #[serde(default)]
    pub count: Option<u32>,
    #[serde(default)]
    pub capacity: Option<CapacitySpec>,
    #[serde(default)]
    pub interface_mode: Option<InterfaceMode>,
    #[serde(default)]
    pub instance_type: Option<String>,
    #[serde(default)]
    pub availability_zone: Option<String>,
}

/// Update (scale) an instance group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateInstanceGroupRequest {
    pub cluster: String,
    pub group: String,
    pub patch: InstanceGroupPatch,
}

/// Delete an instance group (its nodes are terminated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteInstanceGroupRequest {
    pub cluster: String,
    pub group: String,
    /// Set by the assessment when managed autoscaling is on: the group leaves the
    /// HyperpodNodeClass before it is deleted (AWS: "we recommend removing it from your
    /// NodeClass before deleting it", `sagemaker-hyperpod-eks-autoscaling-nodeclass`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub karpenter: bool,
}

/// Add, update and delete instance groups.
pub struct InstanceGroupWorkflow {
    kind: OperationKind,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
    /// Keeps the Karpenter NodeClass in step (add/delete); without it no sync step is planned.
    kube: Option<Arc<dyn KubeApi>>,
}

impl InstanceGroupWorkflow {
    /// `kind` is one of the three instance-group kinds.
    pub fn new(kind: OperationKind, aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        assert!(matches!(
            kind,
            OperationKind::AddInstanceGroup | OperationKind::UpdateInstanceGroup | OperationKind::DeleteInstanceGroup
        ));
        InstanceGroupWorkflow { kind, aws, store, kube: None }
    }

    /// The Kubernetes API the Karpenter sync steps use.
    pub fn with_kube(mut self, kube: Arc<dyn KubeApi>) -> Self {
        self.kube = Some(kube);
        self
    }
}

fn karpenter_step(group: &str, present: bool, deps: &[&str]) -> StepSpec {
    let title = if present {
        format!(
            "Add instance group {group} to HyperpodNodeClass {} (managed autoscaling)",
            super::karpenter::KARPENTER_NAME
        )
    } else {
        format!(
            "Remove instance group {group} from HyperpodNodeClass {} before deleting it",
            super::karpenter::KARPENTER_NAME
        )
    };
    spec("karpenter", title, deps, 10)
}

fn spec(key: &str, title: String, deps: &[&str], secs: u64) -> StepSpec {
    StepSpec {
        key: key.into(),
        title,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected_secs: Some(secs),
    }
}

fn canonical<T: Serialize>(v: &T) -> Result<Value, EngineError> {
    serde_json::to_value(v).map_err(|e| EngineError::InvalidState(e.to_string()))
}

/// The patch applied to the real group; immutable fields keep their real values unless the
/// patch changes them (then [`plan_instance_group`] rejects it).
fn desired(actual: &InstanceGroupSpec, patch: &InstanceGroupPatch) -> InstanceGroupSpec {
    let mut d = actual.clone();
    if let Some(c) = patch.count {
        d.count = c;
    }
    if let Some(c) = &patch.capacity {
        d.capacity = c.clone();
    }
    if let Some(m) = patch.interface_mode {
        d.interface_mode = m;
    }
    if let Some(t) = &patch.instance_type {
        d.instance_type = t.clone();
    }
    if let Some(az) = &patch.availability_zone {
        d.availability_zone = az.clone();
    }
    d
}

#[async_trait]
impl Workflow for InstanceGroupWorkflow {
    fn kind(&self) -> OperationKind {
        self.kind
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        match self.kind {
            OperationKind::AddInstanceGroup => {
                let req: AddInstanceGroupRequest = decode(request)?;
                let mut f = Findings::new();
                f.at("group", |f| req.group.validate(f));
                f.finish()?;
                let (_, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
                let g = &req.group;
                let steps = vec![
                    spec(
                        "placement",
                        format!(
                            "Place {} in {} (a /20 compute subnet, planned if missing)",
                            g.name, g.availability_zone
                        ),
                        &[],
                        10,
                    ),
                    spec(
                        "instance_group",
                        format!(
                            "Add instance group {} ({}×{}, {}) to {hp}",
                            g.name,
                            g.count,
                            g.instance_type,
                            g.capacity.label()
                        ),
                        &["placement"],
                        600,
                    ),
                ];
                let mut steps = steps;
                if req.karpenter {
                    steps.push(karpenter_step(&g.name, true, &["instance_group"]));
                }
                Ok(Prepared { target: cluster_target(&req.cluster), request: canonical(&req)?, steps })
            }
            OperationKind::UpdateInstanceGroup => {
                let req: UpdateInstanceGroupRequest = decode(request)?;
                if let Some(c) = req.patch.count
                    && c > MAX_GROUP_COUNT
                {
                    return Err(
                        ValidationError::invalid("patch.count", format!("must be at most {MAX_GROUP_COUNT}")).into()
                    );
                }
                let (_, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
                let title = match req.patch.count {
                    Some(c) => format!("Scale instance group {} of {hp} to {c}", req.group),
                    None => format!("Update instance group {} of {hp}", req.group),
                };
                let steps = vec![spec("instance_group", title, &[], 300)];
                Ok(Prepared { target: cluster_target(&req.cluster), request: canonical(&req)?, steps })
            }
            _ => {
                let req: DeleteInstanceGroupRequest = decode(request)?;
                let (_, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
                let mut steps = Vec::new();
                if req.karpenter {
                    steps.push(karpenter_step(&req.group, false, &[]));
                }
                let deps: &[&str] = if req.karpenter { &["karpenter"] } else { &[] };
                steps.push(spec(
                    "instance_group",
                    format!("Delete instance group {} of {hp} (its nodes are terminated)", req.group),
                    deps,
                    300,
                ));
                Ok(Prepared { target: cluster_target(&req.cluster), request: canonical(&req)?, steps })
            }
        }
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let aws = self.aws.as_ref();
        match self.kind {
            OperationKind::AddInstanceGroup => {
                let req: AddInstanceGroupRequest = decode(&prepared.request)?;
                let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
                let live = live_cluster(aws, &rec, &hp).await?;
                if live.instance_groups.iter().any(|g| g.name == req.group.name) {
                    return Err(ValidationError::unprocessable(
                        "group.name",
                        format!("instance group {} already exists in {hp}", req.group.name),
                    )
                    .into());
                }
                // Security groups and execution role come from the cluster (an imported one has
                // none of InstantStart's): what is missing is a 422 now, not a failed step.
                match group_context(aws, &rec).await {
                    Ok(_) => {}
                    Err(StepError::Invalid(reason)) => {
                        return Err(ValidationError::unprocessable("group", reason).into());
                    }
                    Err(StepError::Provider(e)) => return Err(e.into()),
                    Err(other) => return Err(EngineError::InvalidState(other.to_string())),
                }
                let mut in_use: BTreeMap<String, u32> = BTreeMap::new();
                for g in
                    live.instance_groups.iter().filter(|g| !matches!(g.capacity, CapacitySpec::TrainingPlan { .. }))
                {
                    *in_use.entry(g.instance_type.clone()).or_insert(0) += g.target_count;
                }
                let groups = [GroupToCheck { field: "group".into(), group: &req.group }];
                let mut checks = check_groups(aws, &rec.region, &groups, &in_use).await?;
                // The request as it will run: the cluster's script for a group without one, and
                // whether Karpenter manages the group.
                let mut with = req.clone();
                match &req.group.lifecycle_script {
                    Some(script) => checks.push(
                        check_lifecycle_script(aws, "group.lifecycle_script", script, rec.bucket.as_deref()).await?,
                    ),
                    None => match reused_script(aws, &live, rec.bucket.as_deref()).await? {
                        Some(script) => {
                            checks.push(PreflightCheck {
                                check: "lifecycle_script".into(),
                                field: "group.lifecycle_script".into(),
                                status: CheckStatus::Pass,
                                detail: format!(
                                    "the group runs the cluster's lifecycle script {}/{}",
                                    script.source_s3_uri.trim_end_matches('/'),
                                    script.on_create
                                ),
                                remedy: None,
                            });
                            with.group.lifecycle_script = Some(script);
                        }
                        None => checks.push(PreflightCheck {
                            check: "lifecycle_script".into(),
                            field: "group.lifecycle_script".into(),
                            status: CheckStatus::Fail,
                            detail: format!(
                                "{hp} has no lifecycle script to reuse (no group has a LifeCycleConfig and the cluster bucket holds no InstantStart script); an EKS-orchestrated group needs one"
                            ),
                            remedy: Some(
                                "name one in group.lifecycle_script (source_s3_uri in a sagemaker-* bucket or the cluster's bucket, and on_create)".into(),
                            ),
                        }),
                    },
                }
                if req.group.subnet_id.is_none()
                    && let Some(vpc) = &rec.vpc_id
                {
                    let n = read(|| aws.describe_network(&rec.region, vpc)).await?;
                    let name = crate::names::DerivedNames::compute_subnet(&rec.name, &req.group.availability_zone);
                    if !n.subnets.iter().any(|s| s.name.as_deref() == Some(name.as_str())) {
                        checks.push(check_address_space(
                            "group.availability_zone",
                            n.vpc.cidrs.clone(),
                            n.subnets.iter().map(|s| s.cidr),
                            1,
                        ));
                    }
                }
                let karpenter = self.kube.is_some()
                    && live.autoscaling
                    && !matches!(req.group.capacity, CapacitySpec::TrainingPlan { .. });
                with.karpenter = karpenter;
                let reduced = (with != req).then(|| canonical(&with)).transpose()?;
                Ok(Assessment { checks, reduced_request: reduced, ..Default::default() })
            }
            OperationKind::UpdateInstanceGroup => {
                let req: UpdateInstanceGroupRequest = decode(&prepared.request)?;
                let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
                let live = live_cluster(aws, &rec, &hp).await?;
                let g = live
                    .instance_groups
                    .iter()
                    .find(|g| g.name == req.group)
                    .ok_or_else(|| EngineError::Missing(format!("instance group {} of {hp}", req.group)))?;
                let vpc = rec.vpc_id.clone().unwrap_or_default();
                let az = match g.subnet_ids.first() {
                    Some(s) if !vpc.is_empty() => subnet_az(aws, &rec.region, &vpc, s).await.unwrap_or_default(),
                    _ => String::new(),
                };
                let actual = group_spec(g, &az);
                let mut patch = req.patch.clone();
                if patch.availability_zone.as_deref() == Some(az.as_str()) || az.is_empty() {
                    patch.availability_zone = None;
                }
                let want = desired(&actual, &patch);
                let plan = plan_instance_group(&format!("{}/{}", req.cluster, req.group), &actual, &want).map_err(
                    |mut e| {
                        for f in &mut e.findings {
                            f.field = format!("patch.{}", f.field);
                        }
                        e
                    },
                )?;
                let mut checks = Vec::new();
                if want.count > actual.count && !matches!(actual.capacity, CapacitySpec::TrainingPlan { .. }) {
                    let mut in_use: BTreeMap<String, u32> = BTreeMap::new();
                    for o in
                        live.instance_groups.iter().filter(|o| !matches!(o.capacity, CapacitySpec::TrainingPlan { .. }))
                    {
                        *in_use.entry(o.instance_type.clone()).or_insert(0) += o.target_count;
                    }
                    *in_use.entry(actual.instance_type.clone()).or_insert(0) -= actual.count;
                    let mut check = want.clone();
                    check.availability_zone = az.clone();
                    let groups = [GroupToCheck { field: "patch".into(), group: &check }];
                    checks = check_groups(aws, &rec.region, &groups, &in_use)
                        .await?
                        .into_iter()
                        .filter(|c| c.check == "quota")
                        .collect();
                }
                let reduced = UpdateInstanceGroupRequest {
                    patch: InstanceGroupPatch { count: Some(want.count), ..Default::default() },
                    ..req.clone()
                };
                Ok(Assessment { plan: Some(plan), checks, reduced_request: Some(canonical(&reduced)?) })
            }
            _ => {
                let req: DeleteInstanceGroupRequest = decode(&prepared.request)?;
                let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
                let live = live_cluster(aws, &rec, &hp).await?;
                if !live.instance_groups.iter().any(|g| g.name == req.group) {
                    return Err(EngineError::Missing(format!("instance group {} of {hp}", req.group)));
                }
                if live.instance_groups.len() == 1 {
                    return Err(ValidationError::unprocessable(
                        "group",
                        "the last instance group cannot be deleted; delete the cluster instead",
                    )
                    .into());
                }
                let karpenter = self.kube.is_some() && live.autoscaling;
                let reduced = (karpenter != req.karpenter)
                    .then(|| canonical(&DeleteInstanceGroupRequest { karpenter, ..req.clone() }))
                    .transpose()?;
                Ok(Assessment { reduced_request: reduced, ..Default::default() })
            }
        }
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let (aws, store) = (self.aws.clone(), self.store.clone());
        match (self.kind, key) {
            (OperationKind::AddInstanceGroup, "placement") => {
                Some(Arc::new(PlaceGroup { req: decode(request).ok()?, aws, store }))
            }
            (OperationKind::AddInstanceGroup, "instance_group") => {
                Some(Arc::new(AddGroup { req: decode(request).ok()?, aws, store }))
            }
            (OperationKind::UpdateInstanceGroup, "instance_group") => {
                Some(Arc::new(ScaleGroup { req: decode(request).ok()?, aws, store }))
            }
            (OperationKind::DeleteInstanceGroup, "instance_group") => {
                Some(Arc::new(DeleteGroup { req: decode(request).ok()?, aws, store }))
            }
            (OperationKind::AddInstanceGroup | OperationKind::DeleteInstanceGroup, "karpenter") => {
                let (cluster, group, present) = if self.kind == OperationKind::AddInstanceGroup {
                    let r: AddInstanceGroupRequest = decode(request).ok()?;
                    (r.cluster, r.group.name, true)
                } else {
                    let r: DeleteInstanceGroupRequest = decode(request).ok()?;
                    (r.cluster, r.group, false)
                };
                let rec = store.get_cluster(&cluster).ok()??;
                let at = super::karpenter::KarpenterTarget {
                    kube: self.kube.clone()?,
                    target: KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone()),
                    cluster: rec.name,
                };
                Some(Arc::new(super::karpenter::SyncGroup { at, group, present }))
            }
            _ => None,
        }
    }
}

fn store_err(e: crate::store::StoreError) -> StepError {
    StepError::Invalid(e.to_string())
}

fn cluster_of(store: &dyn Store, name: &str) -> Result<(crate::store::ClusterRecord, String), StepError> {
    hyperpod_record(store, name).map_err(|e| StepError::Invalid(e.to_string()))
}

/// Progress of a group towards `count` running nodes.
fn group_progress(c: &HyperPodCluster, group: &str, count: u32) -> Progress {
    if let ResourceState::Failed { reason } = &c.state {
        return Progress::Failed { reason: format!("HyperPod cluster failed: {reason}") };
    }
    match c.instance_groups.iter().find(|g| g.name == group) {
        None => Progress::Waiting { detail: format!("instance group {group}: not visible yet") },
        Some(g) if g.status == "Failed" => Progress::Failed {
            reason: format!(
                "instance group {group} failed{}",
                g.failure.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
            ),
        },
        Some(g) if g.target_count == count && g.current_count == count && c.state.is_active() => {
            Progress::Done(json!({ "group": group, "count": count }))
        }
        Some(g) => Progress::Waiting {
            detail: format!("instance group {group}: {}/{} nodes running", g.current_count, g.target_count),
        },
    }
}

/// The script a new group without one runs: [`cluster_script`], else InstantStart's script in
/// the cluster bucket when it is there (HeadObject).
async fn reused_script(
    aws: &dyn AwsCloud,
    live: &HyperPodCluster,
    bucket: Option<&str>,
) -> Result<Option<LifecycleScript>, ProviderError> {
    if let Some(s) = cluster_script(live, bucket) {
        return Ok(Some(s));
    }
    let Some(bucket) = bucket else { return Ok(None) };
    let key = crate::lifecycle::script_key();
    match read(|| aws.head_object(bucket, &key)).await {
        Ok(Some(_)) => Ok(Some(crate::lifecycle::default_lifecycle(bucket))),
        Ok(None) => Ok(None),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

struct PlaceGroup {
    req: AddInstanceGroupRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl PlaceGroup {
    async fn place(&self, create: Option<&Tags>) -> Result<Option<String>, StepError> {
        let (rec, _) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let vpc = group_context(self.aws.as_ref(), &rec).await?.vpc_id;
        let placed = place_groups(
            self.aws.as_ref(),
            &rec.region,
            &vpc,
            &rec.name,
            std::slice::from_ref(&self.req.group),
            create,
        )
        .await?;
        Ok(placed.and_then(|p| p.get(&self.req.group.name).cloned()))
    }
}

#[async_trait]
impl StepExecutor for PlaceGroup {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.place(None).await? {
            Some(subnet) => Observation::Exists(ResourceRef { kind: "subnet".into(), id: subnet, arn: None }),
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let tags = ownership_tags(&self.req.cluster, &cx.operation_id.0);
        let subnet =
            self.place(Some(&tags)).await?.ok_or_else(|| StepError::Invalid("placement produced no subnet".into()))?;
        Ok(ResourceRef { kind: "subnet".into(), id: subnet, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(Progress::Done(json!({ "subnet_id": r.id })))
    }
}

struct AddGroup {
    req: AddInstanceGroupRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

#[async_trait]
impl StepExecutor for AddGroup {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let c = self.aws.describe_hyperpod_cluster(&rec.region, &hp).await?;
        Ok(match c {
            Some(c) if c.instance_groups.iter().any(|g| g.name == self.req.group.name) => {
                Observation::Exists(ResourceRef {
                    kind: "instance-group".into(),
                    id: self.req.group.name.clone(),
                    arn: None,
                })
            }
            _ => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let ctx = group_context(self.aws.as_ref(), &rec).await?;
        let subnet_id = cx.input_str("placement", "subnet_id")?;
        let mut spec = self.req.group.clone();
        if spec.lifecycle_script.is_none() {
            // Recorded without the assessment (e.g. `Engine::submit`): resolve the cluster's script now.
            let live = self
                .aws
                .describe_hyperpod_cluster(&rec.region, &hp)
                .await?
                .ok_or_else(|| StepError::Invalid(format!("HyperPod cluster {hp} not found")))?;
            spec.lifecycle_script = reused_script(self.aws.as_ref(), &live, rec.bucket.as_deref()).await?;
            if spec.lifecycle_script.is_none() {
                return Err(StepError::Invalid(format!(
                    "{hp} has no lifecycle script to reuse; name one in group.lifecycle_script"
                )));
            }
        }
        self.aws
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                instance_groups: vec![HyperPodInstanceGroupRequest {
                    spec,
                    subnet_id,
                    security_group_ids: ctx.security_group_ids,
                    execution_role_arn: ctx.execution_role_arn,
                    threads_per_core: None,
                }],
                ..UpdateHyperPodCluster::of(&rec.region, &hp)
            })
            .await?;
        Ok(ResourceRef { kind: "instance-group".into(), id: self.req.group.name.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let Some(c) = self.aws.describe_hyperpod_cluster(&rec.region, &hp).await? else {
            return Ok(Progress::Failed { reason: format!("HyperPod cluster {hp} disappeared") });
        };
        Ok(group_progress(&c, &r.id, self.req.group.count))
    }
}

struct ScaleGroup {
    req: UpdateInstanceGroupRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl ScaleGroup {
    fn count(&self) -> Result<u32, StepError> {
        self.req.patch.count.ok_or_else(|| StepError::Invalid("no count to scale to".into()))
    }
}

#[async_trait]
impl StepExecutor for ScaleGroup {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let count = self.count()?;
        let c = self.aws.describe_hyperpod_cluster(&rec.region, &hp).await?;
        let g = c.as_ref().and_then(|c| c.instance_groups.iter().find(|g| g.name == self.req.group));
        Ok(match g {
            Some(g) if g.target_count == count => {
                Observation::Exists(ResourceRef { kind: "instance-group".into(), id: g.name.clone(), arn: None })
            }
            Some(_) => Observation::Absent,
            None => return Err(StepError::Invalid(format!("instance group {} not found in {hp}", self.req.group))),
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let c = self
            .aws
            .describe_hyperpod_cluster(&rec.region, &hp)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("HyperPod cluster {hp} not found")))?;
        let g = c
            .instance_groups
            .iter()
            .find(|g| g.name == self.req.group)
            .ok_or_else(|| StepError::Invalid(format!("instance group {} not found in {hp}", self.req.group)))?;
        let ctx = group_context(self.aws.as_ref(), &rec).await?;
        let subnet_id =
            g.subnet_ids.first().cloned().ok_or_else(|| StepError::Invalid("group has no subnet".into()))?;
        let az = subnet_az(self.aws.as_ref(), &rec.region, &ctx.vpc_id, &subnet_id).await?;
        // Echo the group as described (EBS, lifecycle config, role, deep health checks, threads
        // per core, capacity, interface mode); only the count changes.
        let mut spec = group_spec(g, &az);
        spec.count = self.count()?;
        self.aws
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                instance_groups: vec![HyperPodInstanceGroupRequest {
                    spec,
                    subnet_id,
                    security_group_ids: ctx.security_group_ids,
                    execution_role_arn: g.execution_role_arn.clone().unwrap_or(ctx.execution_role_arn),
                    threads_per_core: g.threads_per_core,
                }],
                ..UpdateHyperPodCluster::of(&rec.region, &hp)
            })
            .await?;
        Ok(ResourceRef { kind: "instance-group".into(), id: self.req.group.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let Some(c) = self.aws.describe_hyperpod_cluster(&rec.region, &hp).await? else {
            return Ok(Progress::Failed { reason: format!("HyperPod cluster {hp} disappeared") });
        };
        Ok(group_progress(&c, &r.id, self.count()?))
    }
}

struct DeleteGroup {
    req: DeleteInstanceGroupRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

#[async_trait]
impl StepExecutor for DeleteGroup {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let c = self.aws.describe_hyperpod_cluster(&rec.region, &hp).await?;
        let present = c.as_ref().is_some_and(|c| c.instance_groups.iter().any(|g| g.name == self.req.group));
        Ok(if present {
            Observation::Absent
        } else {
            Observation::Exists(ResourceRef { kind: "instance-group".into(), id: self.req.group.clone(), arn: None })
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        self.aws
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                instance_groups_to_delete: vec![self.req.group.clone()],
                ..UpdateHyperPodCluster::of(&rec.region, &hp)
            })
            .await?;
        Ok(ResourceRef { kind: "instance-group".into(), id: self.req.group.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let (rec, hp) = cluster_of(self.store.as_ref(), &self.req.cluster)?;
        let c = self.aws.describe_hyperpod_cluster(&rec.region, &hp).await?;
        Ok(match c {
            Some(c) if c.instance_groups.iter().any(|g| g.name == r.id) => {
                Progress::Waiting { detail: format!("instance group {}: deleting", r.id) }
            }
            Some(c) if !c.state.is_active() => Progress::Waiting { detail: "HyperPod cluster: updating".into() },
            _ => {
                let _ = store_err;
                Progress::Done(json!({ "deleted": r.id }))
            }
        })
    }
}

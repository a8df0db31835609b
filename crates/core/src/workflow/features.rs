//! Managed capabilities (the Advanced features panel) as reconciled state: the HyperPod
//! training operator, the inference operator, managed tiered checkpointing and managed
//! Karpenter-based autoscaling.
//!
//! The client sends only the fields the user changed ([`FeaturesPatch`]); the backend reads the
//! real state ([`read_features`]: add-ons, the HyperPod cluster's configuration), plans, and
//! records nothing when they match. Each change becomes dependency-aware steps (prerequisites
//! first). Tiered checkpointing ON provisions the identity chain — Kubernetes service account →
//! IAM role with a policy scoped to the cluster's bucket → OIDC trust limited to that
//! namespace/service account → the role annotation on the service account; OFF removes exactly
//! that chain (the cluster's IAM OIDC provider stays: it is shared cluster infrastructure).
//! Managed autoscaling manages HyperPod instance groups only, not general EC2 capacity.

use super::day2::{hyperpod_record, live_cluster};
use super::karpenter::{self as kp, ApplyKarpenter, KarpenterSpec, KarpenterTarget, RemoveKarpenter};
use super::steps::{AddonTarget, EnsureAddon, EnsureRole, RemoveAddon, RemoveRole};
use super::{cluster_target, decode};
use crate::diff::{FeaturesPatch, plan_features};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::spec::{ManagedFeatures, TieredCheckpointing};
use crate::store::{ClusterRecord, Store};
use crate::validate::{Findings, Validate};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// EKS add-on of the HyperPod training operator.
pub const TRAINING_OPERATOR_ADDON: &str = "amazon-sagemaker-hyperpod-training-operator";
/// EKS add-on of the HyperPod inference operator.
pub const INFERENCE_OPERATOR_ADDON: &str = "amazon-sagemaker-hyperpod-inference";
/// Namespace and service account whose pods may write tiered checkpoints.
pub const CHECKPOINT_NAMESPACE: &str = "default";
pub const CHECKPOINT_SERVICE_ACCOUNT: &str = "hyperpod-checkpointing";
/// Annotation binding a service account to an IAM role (IRSA).
pub const ROLE_ANNOTATION: &str = "eks.amazonaws.com/role-arn";

/// Change managed features of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetFeaturesRequest {
    pub cluster: String,
    pub patch: FeaturesPatch,
    /// The Karpenter objects to apply, resolved by the assessment from
    /// `patch.autoscaling_instance_groups` and the cluster's live groups (absent in a
    /// client's request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karpenter: Option<KarpenterSpec>,
}

/// Role names of the features.
pub fn checkpoint_role(cluster: &str) -> String {
    format!("{cluster}-tiered-ckpt-role")
}

pub fn autoscaling_role(cluster: &str) -> String {
    format!("{cluster}-hp-autoscaling-role")
}

fn addon_on(a: &Option<EksAddon>) -> bool {
    a.as_ref().is_some_and(|a| !matches!(a.state, ResourceState::Deleting | ResourceState::Failed { .. }))
}

/// The managed features as they really are.
pub async fn read_features(
    aws: &dyn AwsCloud,
    rec: &ClusterRecord,
    hp: &HyperPodCluster,
) -> Result<ManagedFeatures, ProviderError> {
    let training = read(|| aws.describe_addon(&rec.region, &rec.eks_cluster, TRAINING_OPERATOR_ADDON)).await?;
    let inference = read(|| aws.describe_addon(&rec.region, &rec.eks_cluster, INFERENCE_OPERATOR_ADDON)).await?;
    Ok(ManagedFeatures {
        training_operator: addon_on(&training),
        inference_operator: addon_on(&inference),
        tiered_checkpointing: hp.tiered_storage,
        managed_autoscaling: hp.autoscaling,
    })
}

/// The features workflow.
pub struct FeaturesWorkflow {
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
}

impl FeaturesWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, kube: Arc<dyn KubeApi>, store: Arc<dyn Store>) -> Self {
        FeaturesWorkflow { aws, kube, store }
    }
}

fn step(key: &str, title: String, deps: &[&str], secs: u64) -> StepSpec {
    StepSpec {
        key: key.into(),
        title,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected_secs: Some(secs),
    }
}

/// The steps of a patch (already reduced to real changes). `karpenter_only`: autoscaling
/// stays on and only its instance groups change (the NodeClass is re-applied).
fn plan_steps(cluster: &str, patch: &FeaturesPatch, karpenter_only: bool) -> Vec<StepSpec> {
    let mut steps: Vec<StepSpec> = Vec::new();
    let mut add = |s: StepSpec| {
        if !steps.iter().any(|x| x.key == s.key) {
            steps.push(s);
        }
    };
    let cert = "addon:cert-manager";
    let pod_identity = "addon:eks-pod-identity-agent";
    match patch.training_operator {
        Some(true) => {
            add(step(
                pod_identity,
                "Ensure EKS add-on eks-pod-identity-agent (training operator prerequisite)".into(),
                &[],
                60,
            ));
            add(step(cert, "Ensure EKS add-on cert-manager (operator prerequisite)".into(), &[], 60));
            add(step(
                &format!("addon:{TRAINING_OPERATOR_ADDON}"),
                format!("Install the HyperPod training operator ({TRAINING_OPERATOR_ADDON})"),
                &[pod_identity, cert],
                120,
            ));
        }
        Some(false) => add(step(
            &format!("remove:{TRAINING_OPERATOR_ADDON}"),
            "Remove the HyperPod training operator".into(),
            &[],
            60,
        )),
        None => {}
    }
    match patch.inference_operator {
        Some(true) => {
            add(step(cert, "Ensure EKS add-on cert-manager (operator prerequisite)".into(), &[], 60));
            add(step(
                &format!("addon:{INFERENCE_OPERATOR_ADDON}"),
                format!("Install the HyperPod inference operator ({INFERENCE_OPERATOR_ADDON})"),
                &[cert],
                120,
            ));
        }
        Some(false) => add(step(
            &format!("remove:{INFERENCE_OPERATOR_ADDON}"),
            "Remove the HyperPod inference operator".into(),
            &[],
            60,
        )),
        None => {}
    }
    match patch.tiered_checkpointing {
        Some(t) if t.enabled => {
            add(step("oidc_provider", "Ensure the cluster's IAM OIDC provider (trust anchor)".into(), &[], 5));
            add(step(
                "checkpoint_role",
                format!(
                    "Create IAM role {} trusted only by {CHECKPOINT_NAMESPACE}/{CHECKPOINT_SERVICE_ACCOUNT}, scoped to the cluster's bucket",
                    checkpoint_role(cluster)
                ),
                &["oidc_provider"],
                10,
            ));
            add(step(
                "checkpoint_service_account",
                format!(
                    "Create service account {CHECKPOINT_NAMESPACE}/{CHECKPOINT_SERVICE_ACCOUNT} annotated with the role"
                ),
                &["checkpoint_role"],
                5,
            ));
            let pct = t.memory_percent.map(|p| format!(" ({p}% of instance memory)")).unwrap_or_default();
            add(step(
                "tiered_storage",
                format!("Enable managed tiered checkpointing{pct}"),
                &["checkpoint_service_account"],
                120,
            ));
        }
        Some(_) => {
            add(step("tiered_storage_off", "Disable managed tiered checkpointing".into(), &[], 120));
            add(step(
                "remove_checkpoint_service_account",
                format!("Delete service account {CHECKPOINT_NAMESPACE}/{CHECKPOINT_SERVICE_ACCOUNT}"),
                &["tiered_storage_off"],
                5,
            ));
            add(step(
                "remove_checkpoint_role",
                format!("Delete IAM role {}", checkpoint_role(cluster)),
                &["remove_checkpoint_service_account"],
                5,
            ));
        }
        None => {}
    }
    // Both settings change through UpdateCluster, which refuses a second update while one runs:
    // the autoscaling update waits for the tiered-storage one.
    let tiered_update: Vec<&str> = match patch.tiered_checkpointing {
        Some(t) if t.enabled => vec!["tiered_storage"],
        Some(_) => vec!["tiered_storage_off"],
        None => vec![],
    };
    match patch.managed_autoscaling {
        Some(true) => {
            add(step(
                "autoscaling_role",
                format!("Create IAM role {} for HyperPod's managed Karpenter", autoscaling_role(cluster)),
                &[],
                10,
            ));
            add(step(
                "autoscaling",
                "Enable managed Karpenter autoscaling of the HyperPod instance groups".into(),
                &[&["autoscaling_role"][..], &tiered_update[..]].concat(),
                120,
            ));
            add(step(
                "karpenter",
                format!(
                    "Apply HyperpodNodeClass and NodePool {} naming the instance groups Karpenter scales",
                    kp::KARPENTER_NAME
                ),
                &["autoscaling"],
                10,
            ));
        }
        Some(false) => {
            add(step(
                "remove_karpenter",
                format!("Delete NodePool and HyperpodNodeClass {}", kp::KARPENTER_NAME),
                &[],
                10,
            ));
            add(step(
                "autoscaling_off",
                "Disable managed autoscaling".into(),
                &[&["remove_karpenter"][..], &tiered_update[..]].concat(),
                120,
            ));
            add(step(
                "remove_autoscaling_role",
                format!("Delete IAM role {}", autoscaling_role(cluster)),
                &["autoscaling_off"],
                5,
            ));
        }
        None if karpenter_only => add(step(
            "karpenter",
            format!("Update the instance groups of HyperpodNodeClass {}", kp::KARPENTER_NAME),
            &[],
            10,
        )),
        None => {}
    }
    steps
}

impl FeaturesWorkflow {
    /// Resolves the Karpenter objects of the request against the cluster's live groups: every
    /// eligible group by default, else the named ones (each must exist and be eligible).
    /// Enabling needs NodeRecovery `Automatic` (AWS `sagemaker-hyperpod-eks-autoscaling`,
    /// prerequisites). With autoscaling already on, a changed group list is a plan change of
    /// its own (`autoscaling_instance_groups`) that re-applies the NodeClass.
    async fn karpenter_spec(
        &self,
        req: &SetFeaturesRequest,
        rec: &ClusterRecord,
        live: &HyperPodCluster,
        actual: &ManagedFeatures,
        plan: &mut crate::diff::Plan,
    ) -> Result<Option<KarpenterSpec>, EngineError> {
        if req.patch.managed_autoscaling != Some(true) {
            return Ok(None);
        }
        let mut f = Findings::new();
        if !actual.managed_autoscaling && live.node_recovery != crate::spec::NodeRecovery::Automatic {
            f.push(
                "patch.managed_autoscaling",
                "HyperPod autoscaling needs NodeRecovery Automatic; this cluster's node recovery is None",
            );
        }
        let (groups, all) = match &req.patch.autoscaling_instance_groups {
            Some(named) => {
                for (i, name) in named.iter().enumerate() {
                    let field = format!("patch.autoscaling_instance_groups[{i}]");
                    match live.instance_groups.iter().find(|g| &g.name == name) {
                        None => f.push(&field, format!("instance group {name} does not exist in cluster {}", rec.name)),
                        Some(g) => {
                            if let Some(why) = kp::ineligible(g) {
                                f.push(&field, format!("instance group {name} {why}"));
                            }
                        }
                    }
                }
                (named.clone(), false)
            }
            None => {
                let eligible: Vec<String> = live
                    .instance_groups
                    .iter()
                    .filter(|g| kp::ineligible(g).is_none())
                    .map(|g| g.name.clone())
                    .collect();
                if eligible.is_empty() {
                    f.push(
                        "patch.managed_autoscaling",
                        "the cluster has no instance group Karpenter can scale (on-demand or Spot)",
                    );
                }
                if eligible.len() > kp::MAX_NODE_CLASS_GROUPS {
                    f.push(
                        "patch.autoscaling_instance_groups",
                        format!(
                            "the cluster has {} eligible instance groups; name at most {}",
                            eligible.len(),
                            kp::MAX_NODE_CLASS_GROUPS
                        ),
                    );
                }
                (eligible, true)
            }
        };
        f.finish()?;
        let spec = KarpenterSpec { cluster: rec.name.clone(), instance_groups: groups, all_groups: all };
        if actual.managed_autoscaling {
            let target = KubeTarget { region: rec.region.clone(), eks_cluster: rec.eks_cluster.clone() };
            let current = read(|| kp::current_groups(self.kube.as_ref(), &target)).await?;
            let have = current.as_ref().map(|(g, all, _)| (g.clone(), *all));
            if have != Some((spec.instance_groups.clone(), spec.all_groups)) {
                plan.compare("autoscaling_instance_groups", &have.map(|(g, _)| g), &Some(spec.instance_groups.clone()));
            }
        }
        Ok(Some(spec))
    }
}

#[async_trait]
impl Workflow for FeaturesWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::SetFeatures
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: SetFeaturesRequest = decode(request)?;
        let mut f = Findings::new();
        f.at("patch", |f| req.patch.validate(f));
        f.finish()?;
        hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let karpenter_only = req.patch.managed_autoscaling.is_none() && req.karpenter.is_some();
        let steps = plan_steps(&req.cluster, &req.patch, karpenter_only);
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.cluster), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let req: SetFeaturesRequest = decode(&prepared.request)?;
        let (rec, hp) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        let live = live_cluster(self.aws.as_ref(), &rec, &hp).await?;
        let actual = read_features(self.aws.as_ref(), &rec, &live).await?;
        let mut plan = plan_features(&req.cluster, &req.patch, &actual).map_err(|mut e| {
            for f in &mut e.findings {
                f.field = format!("patch.{}", f.field);
            }
            e
        })?;
        let karpenter = self.karpenter_spec(&req, &rec, &live, &actual, &mut plan).await?;
        // Keep only the fields that really change.
        let changed = |field: &str| plan.changes.iter().any(|c| c.field == field);
        let reduced = SetFeaturesRequest {
            cluster: req.cluster.clone(),
            patch: FeaturesPatch {
                training_operator: req.patch.training_operator.filter(|_| changed("training_operator")),
                inference_operator: req.patch.inference_operator.filter(|_| changed("inference_operator")),
                tiered_checkpointing: req.patch.tiered_checkpointing.filter(|_| changed("tiered_checkpointing")).map(
                    |mut t| {
                        if t.enabled && t.memory_percent.is_none() {
                            t.memory_percent =
                                req.patch.apply_to(&actual).tiered_checkpointing.map(|x| x.memory_percent);
                        }
                        t
                    },
                ),
                managed_autoscaling: req.patch.managed_autoscaling.filter(|_| changed("managed_autoscaling")),
                // Kept with the switch; a list change alone travels in `karpenter`.
                autoscaling_instance_groups: req
                    .patch
                    .autoscaling_instance_groups
                    .clone()
                    .filter(|_| changed("managed_autoscaling")),
            },
            karpenter: karpenter.filter(|_| changed("managed_autoscaling") || changed("autoscaling_instance_groups")),
        };
        let reduced = serde_json::to_value(&reduced).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: Some(plan), checks: vec![], reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: SetFeaturesRequest = decode(request).ok()?;
        let rec = self.store.get_cluster(&req.cluster).ok()??;
        let hp = rec.hyperpod_cluster.clone()?;
        let target = AddonTarget {
            aws: self.aws.clone(),
            region: rec.region.clone(),
            eks_cluster: rec.eks_cluster.clone(),
            cluster: rec.name.clone(),
        };
        let cx = Arc::new(FeatureCx { rec, hp, aws: self.aws.clone(), kube: self.kube.clone() });
        let tiered = req.patch.tiered_checkpointing.map(|t| TieredCheckpointing {
            memory_percent: t.memory_percent.unwrap_or(crate::diff::DEFAULT_TIERED_MEMORY_PERCENT),
        });
        let exec: Arc<dyn StepExecutor> = match key {
            "oidc_provider" => Arc::new(OidcProviderStep(cx)),
            "checkpoint_role" => {
                let bucket = cx.rec.bucket.clone()?;
                Arc::new(CheckpointRoleStep { cx: cx.clone(), bucket })
            }
            "checkpoint_service_account" => Arc::new(ServiceAccountStep { cx, present: true }),
            "remove_checkpoint_service_account" => Arc::new(ServiceAccountStep { cx, present: false }),
            "remove_checkpoint_role" => Arc::new(RemoveRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: checkpoint_role(&cx.rec.name),
            }),
            "tiered_storage" => Arc::new(ClusterSetting { cx, setting: Setting::Tiered(tiered) }),
            "tiered_storage_off" => Arc::new(ClusterSetting { cx, setting: Setting::Tiered(None) }),
            "autoscaling_role" => Arc::new(EnsureRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: autoscaling_role(&cx.rec.name),
                trust_policy: super::create_cluster::service_trust_policy("hyperpod.sagemaker.amazonaws.com"),
                managed_policies: vec![],
                inline_policies: vec![("instantstart-autoscaling".into(), autoscaling_policy(&cx.rec, &cx.hp))],
            }),
            "autoscaling" => Arc::new(ClusterSetting { cx, setting: Setting::Autoscaling(true) }),
            "karpenter" => Arc::new(ApplyKarpenter { at: cx.karpenter_target(), spec: req.karpenter.clone()? }),
            "remove_karpenter" => Arc::new(RemoveKarpenter { at: cx.karpenter_target() }),
            "autoscaling_off" => Arc::new(ClusterSetting { cx, setting: Setting::Autoscaling(false) }),
            "remove_autoscaling_role" => Arc::new(RemoveRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: autoscaling_role(&cx.rec.name),
            }),
            other => {
                if let Some(addon) = other.strip_prefix("addon:") {
                    Arc::new(EnsureAddon { target, addon: addon.into() })
                } else {
                    let addon = other.strip_prefix("remove:")?;
                    Arc::new(RemoveAddon { target, addon: addon.into() })
                }
            }
        };
        Some(exec)
    }
}

/// Least-privilege policy of the autoscaling role: add and remove nodes of this cluster only.
pub fn autoscaling_policy(rec: &ClusterRecord, _hp: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Action": ["sagemaker:BatchAddClusterNodes", "sagemaker:BatchDeleteClusterNodes"],
            "Resource": [format!("arn:aws:sagemaker:{}:*:cluster/*", rec.region)],
            // Only clusters tagged as this InstantStart cluster's (the HyperPod cluster `hp`).
            "Condition": { "StringEquals": { "aws:ResourceTag/instantstart:cluster": rec.name } }
        }]
    })
}

/// Trust policy letting exactly `namespace/service_account` of the cluster assume the role.
pub fn service_account_trust_policy(oidc_arn: &str, issuer: &str, namespace: &str, service_account: &str) -> Value {
    let host = issuer.trim_start_matches("https://");
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": { "Federated": oidc_arn },
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": { "StringEquals": {
                format!("{host}:sub"): format!("system:serviceaccount:{namespace}:{service_account}"),
                format!("{host}:aud"): "sts.amazonaws.com"
            } }
        }]
    })
}

struct FeatureCx {
    rec: ClusterRecord,
    hp: String,
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
}

impl FeatureCx {
    async fn issuer(&self) -> Result<String, StepError> {
        let eks = self
            .aws
            .describe_eks_cluster(&self.rec.region, &self.rec.eks_cluster)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("EKS cluster {} not found", self.rec.eks_cluster)))?;
        eks.oidc_issuer.ok_or_else(|| StepError::Invalid(format!("EKS cluster {} has no OIDC issuer yet", eks.name)))
    }

    fn kube_target(&self) -> KubeTarget {
        KubeTarget { region: self.rec.region.clone(), eks_cluster: self.rec.eks_cluster.clone() }
    }

    fn karpenter_target(&self) -> KarpenterTarget {
        KarpenterTarget { kube: self.kube.clone(), target: self.kube_target(), cluster: self.rec.name.clone() }
    }
}

struct OidcProviderStep(Arc<FeatureCx>);

#[async_trait]
impl StepExecutor for OidcProviderStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let issuer = self.0.issuer().await?;
        Ok(match self.0.aws.get_oidc_provider(&issuer).await? {
            Some(p) => Observation::Exists(ResourceRef { kind: "oidc-provider".into(), id: p.url, arn: Some(p.arn) }),
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let issuer = self.0.issuer().await?;
        let p = self.0.aws.create_oidc_provider(&issuer, &ownership_tags(&self.0.rec.name, &cx.operation_id.0)).await?;
        Ok(ResourceRef { kind: "oidc-provider".into(), id: p.url, arn: Some(p.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.0.aws.get_oidc_provider(&r.id).await? {
            Some(p) => Progress::Done(json!({ "arn": p.arn, "issuer": p.url })),
            None => Progress::Waiting { detail: "waiting for the OIDC provider to become visible".into() },
        })
    }
}

struct CheckpointRoleStep {
    cx: Arc<FeatureCx>,
    bucket: String,
}

impl CheckpointRoleStep {
    async fn role(&self, cx: &StepContext<'_>) -> Result<EnsureRole, StepError> {
        let issuer = self.cx.issuer().await?;
        let oidc_arn = cx.input_str("oidc_provider", "arn")?;
        Ok(EnsureRole {
            aws: self.cx.aws.clone(),
            cluster: self.cx.rec.name.clone(),
            name: checkpoint_role(&self.cx.rec.name),
            trust_policy: service_account_trust_policy(
                &oidc_arn,
                &issuer,
                CHECKPOINT_NAMESPACE,
                CHECKPOINT_SERVICE_ACCOUNT,
            ),
            managed_policies: vec![],
            inline_policies: vec![(
                "instantstart-checkpoint-bucket".into(),
                super::create_cluster::hyperpod_bucket_policy(&self.bucket),
            )],
        })
    }
}

#[async_trait]
impl StepExecutor for CheckpointRoleStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.role(cx).await?.observe(cx).await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        self.role(cx).await?.submit(cx).await
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.role(cx).await?.poll(cx, r).await
    }
}

/// Ensures (or removes) the checkpointing service account with its role annotation.
struct ServiceAccountStep {
    cx: Arc<FeatureCx>,
    present: bool,
}

impl ServiceAccountStep {
    fn object_ref() -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some(CHECKPOINT_NAMESPACE.into()),
            name: CHECKPOINT_SERVICE_ACCOUNT.into(),
        }
    }

    async fn role_arn(&self) -> Result<String, StepError> {
        let name = checkpoint_role(&self.cx.rec.name);
        let role = self
            .cx
            .aws
            .get_role(&name)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("IAM role {name} not found")))?;
        Ok(role.arn)
    }

    async fn current(&self) -> Result<Option<KubeObject>, StepError> {
        match self.cx.kube.get(&self.cx.kube_target(), &Self::object_ref()).await {
            Ok(o) => Ok(o),
            Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[async_trait]
impl StepExecutor for ServiceAccountStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let current = self.current().await?;
        let r = ResourceRef {
            kind: "service-account".into(),
            id: format!("{CHECKPOINT_NAMESPACE}/{CHECKPOINT_SERVICE_ACCOUNT}"),
            arn: None,
        };
        if !self.present {
            return Ok(match current {
                None => Observation::Exists(r),
                Some(o) if o.label(LABEL_MANAGED_BY) != Some(MANAGED_BY) => Observation::Foreign {
                    reason: "the service account is not managed by InstantStart; it is left alone".into(),
                },
                Some(_) => Observation::Absent,
            });
        }
        let arn = self.role_arn().await?;
        Ok(match current {
            Some(o)
                if o.0
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(ROLE_ANNOTATION))
                    .and_then(Value::as_str)
                    == Some(arn.as_str()) =>
            {
                Observation::Exists(r)
            }
            Some(o) if o.label(LABEL_MANAGED_BY) != Some(MANAGED_BY) => Observation::Foreign {
                reason: format!("service account {} exists and is not managed by InstantStart", r.id),
            },
            _ => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let target = self.cx.kube_target();
        if self.present {
            let arn = self.role_arn().await?;
            let sa = json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {
                    "name": CHECKPOINT_SERVICE_ACCOUNT,
                    "namespace": CHECKPOINT_NAMESPACE,
                    "labels": { LABEL_MANAGED_BY: MANAGED_BY, "instantstart.io/cluster": self.cx.rec.name },
                    "annotations": { ROLE_ANNOTATION: arn }
                }
            });
            self.cx.kube.apply(&target, &KubeObject(sa)).await?;
        } else {
            self.cx.kube.delete(&target, &Self::object_ref()).await?;
        }
        Ok(ResourceRef {
            kind: "service-account".into(),
            id: format!("{CHECKPOINT_NAMESPACE}/{CHECKPOINT_SERVICE_ACCOUNT}"),
            arn: None,
        })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let present = self.current().await?.is_some();
        Ok(if present == self.present {
            Progress::Done(json!({ "service_account": r.id, "present": present }))
        } else {
            Progress::Waiting { detail: format!("service account {}: converging", r.id) }
        })
    }
}

enum Setting {
    Tiered(Option<TieredCheckpointing>),
    Autoscaling(bool),
}

/// Sets one HyperPod cluster setting through UpdateCluster and waits for it to apply.
struct ClusterSetting {
    cx: Arc<FeatureCx>,
    setting: Setting,
}

impl ClusterSetting {
    fn matches(&self, c: &HyperPodCluster) -> bool {
        match &self.setting {
            Setting::Tiered(t) => c.tiered_storage == *t,
            Setting::Autoscaling(a) => c.autoscaling == *a,
        }
    }
}

#[async_trait]
impl StepExecutor for ClusterSetting {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let c = self.cx.aws.describe_hyperpod_cluster(&self.cx.rec.region, &self.cx.hp).await?;
        Ok(match c {
            Some(c) if self.matches(&c) => {
                Observation::Exists(ResourceRef { kind: "hyperpod-cluster".into(), id: c.name, arn: Some(c.arn) })
            }
            Some(_) => Observation::Absent,
            None => return Err(StepError::Invalid(format!("HyperPod cluster {} not found", self.cx.hp))),
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let (tiered_storage, autoscaling) = match &self.setting {
            Setting::Tiered(t) => (Some(*t), None),
            Setting::Autoscaling(enabled) => {
                let role_arn = if *enabled {
                    let name = autoscaling_role(&self.cx.rec.name);
                    Some(
                        self.cx
                            .aws
                            .get_role(&name)
                            .await?
                            .ok_or_else(|| StepError::Invalid(format!("IAM role {name} not found")))?
                            .arn,
                    )
                } else {
                    None
                };
                (None, Some(AutoscalingUpdate { enabled: *enabled, role_arn }))
            }
        };
        // UpdateCluster refuses a TieredStorageConfig (and, we assume, an AutoScaling change)
        // sent alone: "At least one of --node-recovery or --instance-groups must also be
        // supplied … read the current NodeRecovery … and pass it back unchanged" (AWS ML blog,
        // "Tiered KV cache for large LLMs on Amazon SageMaker HyperPod with Curvine", API note).
        // So every setting update echoes the cluster's CURRENT NodeRecovery, read here.
        let current = self
            .cx
            .aws
            .describe_hyperpod_cluster(&self.cx.rec.region, &self.cx.hp)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("HyperPod cluster {} not found", self.cx.hp)))?;
        let c = self
            .cx
            .aws
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                node_recovery: Some(current.node_recovery),
                tiered_storage,
                autoscaling,
                ..UpdateHyperPodCluster::of(&self.cx.rec.region, &self.cx.hp)
            })
            .await?;
        Ok(ResourceRef { kind: "hyperpod-cluster".into(), id: c.name, arn: Some(c.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(c) = self.cx.aws.describe_hyperpod_cluster(&self.cx.rec.region, &r.id).await? else {
            return Ok(Progress::Failed { reason: format!("HyperPod cluster {} disappeared", r.id) });
        };
        Ok(match &c.state {
            ResourceState::Failed { reason } => Progress::Failed { reason: reason.clone() },
            ResourceState::Active if self.matches(&c) => {
                Progress::Done(json!({ "tiered_storage": c.tiered_storage, "autoscaling": c.autoscaling }))
            }
            other => Progress::Waiting { detail: format!("HyperPod cluster: {}", super::steps::state_word(other)) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::TieredCheckpointingPatch;

    fn keys(patch: FeaturesPatch) -> Vec<String> {
        plan_steps("demo", &patch, false)
            .into_iter()
            .map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", ")))
            .collect()
    }

    #[test]
    fn prerequisites_become_steps_and_are_not_repeated() {
        let both =
            keys(FeaturesPatch { training_operator: Some(true), inference_operator: Some(true), ..Default::default() });
        assert_eq!(
            both,
            [
                "addon:eks-pod-identity-agent <- []",
                "addon:cert-manager <- []",
                "addon:amazon-sagemaker-hyperpod-training-operator <- [addon:eks-pod-identity-agent, addon:cert-manager]",
                "addon:amazon-sagemaker-hyperpod-inference <- [addon:cert-manager]",
            ]
        );
    }

    #[test]
    fn tiered_checkpointing_on_and_off_are_the_same_chain() {
        let on = keys(FeaturesPatch {
            tiered_checkpointing: Some(TieredCheckpointingPatch { enabled: true, memory_percent: Some(30) }),
            ..Default::default()
        });
        assert_eq!(
            on,
            [
                "oidc_provider <- []",
                "checkpoint_role <- [oidc_provider]",
                "checkpoint_service_account <- [checkpoint_role]",
                "tiered_storage <- [checkpoint_service_account]",
            ]
        );
        let off = keys(FeaturesPatch {
            tiered_checkpointing: Some(TieredCheckpointingPatch { enabled: false, memory_percent: None }),
            ..Default::default()
        });
        assert_eq!(
            off,
            [
                "tiered_storage_off <- []",
                "remove_checkpoint_service_account <- [tiered_storage_off]",
                "remove_checkpoint_role <- [remove_checkpoint_service_account]",
            ]
        );
        assert!(keys(FeaturesPatch::default()).is_empty());
        // Two UpdateCluster changes never run at once.
        let both = keys(FeaturesPatch {
            tiered_checkpointing: Some(TieredCheckpointingPatch { enabled: false, memory_percent: None }),
            managed_autoscaling: Some(true),
            ..Default::default()
        });
        assert!(both.contains(&"autoscaling <- [autoscaling_role, tiered_storage_off]".to_string()), "{both:?}");
    }

    #[test]
    fn autoscaling_on_applies_karpenter_after_the_update_and_off_removes_it_first() {
        let on = keys(FeaturesPatch { managed_autoscaling: Some(true), ..Default::default() });
        assert_eq!(on, ["autoscaling_role <- []", "autoscaling <- [autoscaling_role]", "karpenter <- [autoscaling]"]);
        let off = keys(FeaturesPatch { managed_autoscaling: Some(false), ..Default::default() });
        assert_eq!(
            off,
            [
                "remove_karpenter <- []",
                "autoscaling_off <- [remove_karpenter]",
                "remove_autoscaling_role <- [autoscaling_off]",
            ]
        );
        let only: Vec<String> = plan_steps("demo", &FeaturesPatch::default(), true)
            .into_iter()
            .map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", ")))
            .collect();
        assert_eq!(only, ["karpenter <- []"], "a new group list alone re-applies the NodeClass");
    }

    #[test]
    fn the_trust_is_limited_to_one_service_account() {
        let t = service_account_trust_policy(
            "arn:aws:iam::1:oidc-provider/oidc.eks/x",
            "https://oidc.eks/x",
            "default",
            "sa",
        );
        assert_eq!(
            t["Statement"][0]["Condition"]["StringEquals"]["oidc.eks/x:sub"],
            "system:serviceaccount:default:sa"
        );
        assert_eq!(t["Statement"][0]["Action"], "sts:AssumeRoleWithWebIdentity");
    }
}

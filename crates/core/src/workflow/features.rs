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
//! The training operator ON creates, before the add-on, its IAM role (trusted by
//! `pods.eks.amazonaws.com`, managed policy `AmazonSageMakerHyperPodTrainingOperatorAccess`) and
//! the EKS Pod Identity association of `aws-hyperpod/hp-training-operator-controller-manager`
//! to it — what the AWS install guide (`sagemaker-eks-operator-install`) and the reference
//! terraform module `hyperpod_training_operator` do; OFF removes the add-on, the association
//! and the role, in that order.
//! The inference operator ON creates its execution role (`SageMakerHyperPodInference-<cluster>`,
//! IRSA for `hyperpod-inference-system/hyperpod-inference-controller-manager`, the managed
//! `AmazonSageMakerHyperPodInferenceAccess`, the cluster's bucket for TLS certificates) and the
//! add-on with its configuration values, checked against the schema EKS publishes for the
//! version ([`crate::addon_schema`]); OFF removes the add-on, then that role.
//! Managed autoscaling manages HyperPod instance groups only, not general EC2 capacity.
//! Observability ON creates an Amazon Managed Service for Prometheus workspace, the collector's
//! Pod Identity role and association, then HyperPod's observability add-on writing to the
//! workspace; OFF removes the add-on, the association and the role and keeps the workspace
//! (see [`super::observability`] for the sources and the decisions).

use super::day2::{hyperpod_record, live_cluster};
use super::karpenter::{self as kp, ApplyKarpenter, KarpenterSpec, KarpenterTarget, RemoveKarpenter};
use super::observability as obs;
use super::steps::{
    AddonTarget, EnsureAddon, EnsurePodIdentity, EnsureRole, OidcProviderStep, PodIdentityTarget, RemoveAddon,
    RemovePodIdentity, RemoveRole, oidc_issuer, pod_identity_trust_policy,
};
use super::{cluster_target, decode};
use crate::addon_schema;
use crate::diff::{FeaturesPatch, plan_features};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::labels::LABEL_CLUSTER;
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::spec::{ManagedFeatures, TieredCheckpointing};
use crate::store::{ClusterRecord, Store};
use crate::validate::{Findings, Validate, ValidationError};
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
/// Namespace and service account of the training operator's controller (its Pod Identity).
pub const TRAINING_OPERATOR_NAMESPACE: &str = "aws-hyperpod";
pub const TRAINING_OPERATOR_SERVICE_ACCOUNT: &str = "hp-training-operator-controller-manager";
/// AWS managed policy of the training operator's role.
pub const TRAINING_OPERATOR_POLICY: &str = "arn:aws:iam::aws:policy/AmazonSageMakerHyperPodTrainingOperatorAccess";
/// Annotation binding a service account to an IAM role (IRSA).
pub const ROLE_ANNOTATION: &str = "eks.amazonaws.com/role-arn";
/// Namespace and service account of the inference operator's controller (the add-on's), which
/// assumes the execution role through IRSA.
pub const INFERENCE_NAMESPACE: &str = "hyperpod-inference-system";
pub const INFERENCE_SERVICE_ACCOUNT: &str = "hyperpod-inference-controller-manager";
/// Prefix the add-on requires of its execution role's name (the chart's
/// `_validateRequiredValues.tpl` fails the install otherwise when `isAddOn`; the managed policy
/// `AmazonSageMakerHyperPodInferenceAccess` is scoped to roles named so).
pub const INFERENCE_ROLE_PREFIX: &str = "SageMakerHyperPodInference";
/// The managed policy AWS documents for the inference operator's execution role.
pub const INFERENCE_MANAGED_POLICY: &str = "arn:aws:iam::aws:policy/AmazonSageMakerHyperPodInferenceAccess";
const INFERENCE_ROLE_STEP: &str = "inference_role";
/// The UpdateCluster step that sets `NodeRecovery`.
const NODE_RECOVERY_STEP: &str = "node_recovery";
const REMOVE_INFERENCE_ROLE_STEP: &str = "remove_inference_role";

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

/// The training operator's Pod Identity role.
pub fn training_operator_role(cluster: &str) -> String {
    format!("{cluster}-hpto-role")
}

pub fn autoscaling_role(cluster: &str) -> String {
    format!("{cluster}-hp-autoscaling-role")
}

/// Execution role of the inference operator: `SageMakerHyperPodInference-<cluster>`, within
/// IAM's 64 characters (a long cluster name is cut and followed by a digest of the whole name,
/// so two clusters never share a role; ownership tags are checked on adoption anyway).
pub fn inference_role(cluster: &str) -> String {
    let full = format!("{INFERENCE_ROLE_PREFIX}-{cluster}");
    if full.len() <= 64 {
        return full;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(cluster.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let keep = 64 - INFERENCE_ROLE_PREFIX.len() - 2 - hex.len();
    format!("{INFERENCE_ROLE_PREFIX}-{}-{hex}", &cluster[..keep])
}

/// Trust of the inference execution role, as the reference deployment has it: SageMaker, and the
/// operator's service account through the cluster's OIDC provider (IRSA) only.
pub fn inference_trust_policy(oidc_arn: &str, issuer: &str) -> Value {
    let mut t = service_account_trust_policy(oidc_arn, issuer, INFERENCE_NAMESPACE, INFERENCE_SERVICE_ACCOUNT);
    if let Some(statements) = t["Statement"].as_array_mut() {
        statements.insert(
            0,
            json!({ "Effect": "Allow", "Principal": { "Service": "sagemaker.amazonaws.com" }, "Action": "sts:AssumeRole" }),
        );
    }
    t
}

/// The inference add-on's configuration values. `executionRoleArn`, `tlsCertificateS3Bucket`
/// and `hyperpodClusterArn` as AWS documents them (the add-on fills in region and EKS cluster
/// itself); the add-on's bundled KEDA and AWS Load Balancer Controller are switched off because
/// the cluster already runs both (`chart:keda`, `chart:aws-load-balancer-controller`): a second
/// KEDA would fight ours over the cluster-wide ScaledObject CRDs and the single
/// `external.metrics.k8s.io` API service, a second controller over the same Ingresses.
pub fn inference_addon_values(role_arn: &str, bucket: &str, hyperpod_arn: &str) -> Value {
    json!({
        "executionRoleArn": role_arn,
        "tlsCertificateS3Bucket": bucket,
        "hyperpodClusterArn": hyperpod_arn,
        "keda": { "enabled": false },
        "alb": { "enabled": false }
    })
}

/// The role-name rule the add-on applies to `executionRoleArn` (not expressible in its schema).
pub fn check_inference_role_arn(arn: &str) -> Result<(), String> {
    let name = arn.rsplit('/').next().unwrap_or_default();
    if name.starts_with(INFERENCE_ROLE_PREFIX) {
        Ok(())
    } else {
        Err(format!("executionRoleArn {arn}: the role name must start with {INFERENCE_ROLE_PREFIX:?}"))
    }
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
    let observability = read(|| aws.describe_addon(&rec.region, &rec.eks_cluster, obs::OBSERVABILITY_ADDON)).await?;
    Ok(ManagedFeatures {
        training_operator: addon_on(&training),
        inference_operator: addon_on(&inference),
        tiered_checkpointing: hp.tiered_storage,
        managed_autoscaling: hp.autoscaling,
        node_recovery: hp.node_recovery,
        observability: addon_on(&observability),
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
                "training_operator_role",
                format!(
                    "Create IAM role {} for the training operator (trusted by pods.eks.amazonaws.com, AmazonSageMakerHyperPodTrainingOperatorAccess)",
                    training_operator_role(cluster)
                ),
                &[],
                10,
            ));
            add(step(
                "training_operator_identity",
                format!(
                    "Associate {TRAINING_OPERATOR_NAMESPACE}/{TRAINING_OPERATOR_SERVICE_ACCOUNT} with the role (EKS Pod Identity)"
                ),
                &["training_operator_role", pod_identity],
                10,
            ));
            add(step(
                &format!("addon:{TRAINING_OPERATOR_ADDON}"),
                format!("Install the HyperPod training operator ({TRAINING_OPERATOR_ADDON})"),
                &[pod_identity, cert, "training_operator_identity"],
                120,
            ));
        }
        Some(false) => {
            let remove = format!("remove:{TRAINING_OPERATOR_ADDON}");
            add(step(&remove, "Remove the HyperPod training operator".into(), &[], 60));
            add(step(
                "remove_training_operator_identity",
                format!(
                    "Delete the Pod Identity association of {TRAINING_OPERATOR_NAMESPACE}/{TRAINING_OPERATOR_SERVICE_ACCOUNT}"
                ),
                &[&remove],
                10,
            ));
            add(step(
                "remove_training_operator_role",
                format!("Delete IAM role {}", training_operator_role(cluster)),
                &["remove_training_operator_identity"],
                5,
            ));
        }
        None => {}
    }
    match patch.inference_operator {
        Some(true) => {
            add(step(cert, "Ensure EKS add-on cert-manager (operator prerequisite)".into(), &[], 60));
            add(step("oidc_provider", "Ensure the cluster's IAM OIDC provider (trust anchor)".into(), &[], 5));
            add(step(
                INFERENCE_ROLE_STEP,
                format!(
                    "Create IAM role {} (AmazonSageMakerHyperPodInferenceAccess) trusted only by \
                     {INFERENCE_NAMESPACE}/{INFERENCE_SERVICE_ACCOUNT}",
                    inference_role(cluster)
                ),
                &["oidc_provider"],
                10,
            ));
            add(step(
                &format!("addon:{INFERENCE_OPERATOR_ADDON}"),
                format!(
                    "Install the HyperPod inference operator ({INFERENCE_OPERATOR_ADDON}) with its execution role, \
                     the cluster's bucket for TLS certificates, and its bundled KEDA and load balancer controller off \
                     (the cluster runs its own)"
                ),
                &[cert, INFERENCE_ROLE_STEP],
                120,
            ));
        }
        Some(false) => {
            let remove = format!("remove:{INFERENCE_OPERATOR_ADDON}");
            add(step(&remove, "Remove the HyperPod inference operator".into(), &[], 60));
            add(step(
                REMOVE_INFERENCE_ROLE_STEP,
                format!("Delete IAM role {}", inference_role(cluster)),
                &[remove.as_str()],
                5,
            ));
        }
        None => {}
    }
    match patch.observability {
        Some(true) => obs::on_steps(cluster).into_iter().for_each(&mut add),
        Some(false) => obs::off_steps(cluster).into_iter().for_each(&mut add),
        None => {}
    }
    let recovery_dep: Vec<&str> = if patch.node_recovery == Some(crate::spec::NodeRecovery::Automatic) {
        vec![NODE_RECOVERY_STEP]
    } else {
        vec![]
    };
    if !recovery_dep.is_empty() {
        add(step(NODE_RECOVERY_STEP, "Set HyperPod node recovery to Automatic".into(), &[], 60));
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
                &[&["checkpoint_service_account"][..], &recovery_dep[..]].concat(),
                120,
            ));
        }
        Some(_) => {
            add(step("tiered_storage_off", "Disable managed tiered checkpointing".into(), &recovery_dep, 120));
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
    // These settings change through UpdateCluster, which refuses a second update while one
    // runs: they are chained. Node recovery `Automatic` goes first (autoscaling needs it),
    // `None` last (after autoscaling is off).
    let recovery_first = patch.node_recovery == Some(crate::spec::NodeRecovery::Automatic);
    let first: Vec<&str> = if recovery_first { vec![NODE_RECOVERY_STEP] } else { vec![] };
    let tiered_update: Vec<&str> = match patch.tiered_checkpointing {
        Some(t) if t.enabled => vec!["tiered_storage"],
        Some(_) => vec!["tiered_storage_off"],
        None => first.clone(),
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
    if patch.node_recovery == Some(crate::spec::NodeRecovery::None) {
        let mut after: Vec<&str> = tiered_update.clone();
        if patch.managed_autoscaling == Some(false) {
            after.push("autoscaling_off");
        }
        add(step(NODE_RECOVERY_STEP, "Set HyperPod node recovery to None".into(), &after, 60));
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
        if !actual.managed_autoscaling
            && req.patch.node_recovery.unwrap_or(live.node_recovery) != crate::spec::NodeRecovery::Automatic
        {
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
            let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
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
        let (rec, _) = hyperpod_record(self.store.as_ref(), &req.cluster)?;
        // The training operator runs only on the Kubernetes versions it supports
        // (`sagemaker-eks-operator`, "Supported versions"); the add-on lookup would fail later.
        if req.patch.training_operator == Some(true)
            && let Some(version) = &rec.kubernetes_version
        {
            let mut f = Findings::new();
            crate::spec::check_training_operator_version(version, "patch.training_operator", &mut f);
            f.finish()?;
        }
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
        // Both keep data in the cluster's bucket, which a cluster imported without `bucket` has
        // none of: refused here rather than failing at their role step.
        if req.patch.inference_operator == Some(true) && !actual.inference_operator && rec.bucket.is_none() {
            return Err(ValidationError::unprocessable(
                "patch.inference_operator",
                format!(
                    "the inference operator keeps its TLS certificates in the cluster's S3 bucket, and cluster {} has none \
                     recorded (it was imported without a bucket); delete it from InstantStart (which only forgets an imported \
                     cluster) and import it again with `bucket` naming an S3 bucket",
                    rec.name
                ),
            )
            .into());
        }
        if req.patch.tiered_checkpointing.is_some_and(|t| t.enabled)
            && actual.tiered_checkpointing.is_none()
            && rec.bucket.is_none()
        {
            return Err(ValidationError::unprocessable(
                "patch.tiered_checkpointing",
                format!(
                    "managed tiered checkpointing writes checkpoints to the cluster's S3 bucket through an IAM role scoped to \
                     it, and cluster {} has none recorded (it was imported without a bucket); delete it from InstantStart \
                     (which only forgets an imported cluster) and import it again with `bucket` naming an S3 bucket",
                    rec.name
                ),
            )
            .into());
        }
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
                node_recovery: req.patch.node_recovery.filter(|_| changed("node_recovery")),
                observability: req.patch.observability.filter(|_| changed("observability")),
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
            "oidc_provider" => Arc::new(OidcProviderStep {
                aws: self.aws.clone(),
                region: cx.rec.region.clone(),
                eks_cluster: cx.rec.eks_cluster.clone(),
                cluster: cx.rec.name.clone(),
            }),
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
            NODE_RECOVERY_STEP => {
                Arc::new(ClusterSetting { cx, setting: Setting::NodeRecovery(req.patch.node_recovery?) })
            }
            "autoscaling_role" => Arc::new(EnsureRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: autoscaling_role(&cx.rec.name),
                trust_policy: super::create_cluster::service_trust_policy("hyperpod.sagemaker.amazonaws.com"),
                managed_policies: vec![],
                inline_policies: vec![("instantstart-autoscaling".into(), autoscaling_policy(&cx.rec, &cx.hp))],
            }),
            "training_operator_role" => Arc::new(EnsureRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: training_operator_role(&cx.rec.name),
                trust_policy: pod_identity_trust_policy(),
                managed_policies: vec![TRAINING_OPERATOR_POLICY.into()],
                inline_policies: vec![],
            }),
            "training_operator_identity" => Arc::new(EnsurePodIdentity(training_operator_identity(target))),
            "remove_training_operator_identity" => Arc::new(RemovePodIdentity(training_operator_identity(target))),
            "remove_training_operator_role" => Arc::new(RemoveRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: training_operator_role(&cx.rec.name),
            }),
            INFERENCE_ROLE_STEP => {
                let bucket = cx.rec.bucket.clone()?;
                Arc::new(InferenceRoleStep { cx: cx.clone(), bucket })
            }
            REMOVE_INFERENCE_ROLE_STEP => Arc::new(RemoveRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: inference_role(&cx.rec.name),
            }),
            k if k == format!("addon:{INFERENCE_OPERATOR_ADDON}") => {
                let bucket = cx.rec.bucket.clone()?;
                Arc::new(InferenceAddonStep {
                    inner: EnsureAddon { target, addon: INFERENCE_OPERATOR_ADDON.into() },
                    cx,
                    bucket,
                })
            }
            obs::PROMETHEUS_STEP => Arc::new(obs::EnsurePrometheusWorkspace {
                aws: self.aws.clone(),
                region: cx.rec.region.clone(),
                cluster: cx.rec.name.clone(),
            }),
            obs::OBSERVABILITY_ROLE_STEP => Arc::new(obs::ObservabilityRoleStep {
                aws: self.aws.clone(),
                region: cx.rec.region.clone(),
                eks_cluster: cx.rec.eks_cluster.clone(),
                cluster: cx.rec.name.clone(),
            }),
            obs::OBSERVABILITY_IDENTITY_STEP => Arc::new(EnsurePodIdentity(obs::observability_identity(target))),
            obs::REMOVE_OBSERVABILITY_IDENTITY_STEP => Arc::new(RemovePodIdentity(obs::observability_identity(target))),
            obs::REMOVE_OBSERVABILITY_ROLE_STEP => Arc::new(RemoveRole {
                aws: self.aws.clone(),
                cluster: cx.rec.name.clone(),
                name: obs::observability_role(&cx.rec.name),
            }),
            k if k == format!("addon:{}", obs::OBSERVABILITY_ADDON) => {
                Arc::new(obs::ObservabilityAddonStep::new(target))
            }
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

/// The training operator controller's service account bound to its role.
pub fn training_operator_identity(target: AddonTarget) -> PodIdentityTarget {
    let role = training_operator_role(&target.cluster);
    PodIdentityTarget {
        target,
        namespace: TRAINING_OPERATOR_NAMESPACE.into(),
        service_account: TRAINING_OPERATOR_SERVICE_ACCOUNT.into(),
        role,
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

/// CloudWatch permission of the checkpointing pods: `managed-tier-checkpointing-setup` asks for
/// "Amazon CloudWatch and Amazon S3 write permissions for the training pod to read/write
/// checkpoints and push metrics". `PutMetricData` has no resource-level permissions (resource
/// `*`), and the page names no metric namespace, so none is pinned by a condition.
pub fn checkpoint_metrics_policy() -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{ "Effect": "Allow", "Action": ["cloudwatch:PutMetricData"], "Resource": ["*"] }]
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
        oidc_issuer(self.aws.as_ref(), &self.rec.region, &self.rec.eks_cluster).await
    }

    fn kube_target(&self) -> KubeTarget {
        KubeTarget::new(self.rec.region.clone(), self.rec.eks_cluster.clone())
    }

    fn karpenter_target(&self) -> KarpenterTarget {
        KarpenterTarget { kube: self.kube.clone(), target: self.kube_target(), cluster: self.rec.name.clone() }
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
            inline_policies: vec![
                ("instantstart-checkpoint-bucket".into(), super::create_cluster::hyperpod_bucket_policy(&self.bucket)),
                ("instantstart-checkpoint-metrics".into(), checkpoint_metrics_policy()),
            ],
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

/// The inference operator's execution role (IRSA, see [`inference_trust_policy`]) with
/// `AmazonSageMakerHyperPodInferenceAccess` and read/write on the cluster's bucket, where the
/// operator keeps the TLS certificates of its endpoints.
struct InferenceRoleStep {
    cx: Arc<FeatureCx>,
    bucket: String,
}

impl InferenceRoleStep {
    async fn role(&self, cx: &StepContext<'_>) -> Result<EnsureRole, StepError> {
        let issuer = self.cx.issuer().await?;
        let oidc_arn = cx.input_str("oidc_provider", "arn")?;
        Ok(EnsureRole {
            aws: self.cx.aws.clone(),
            cluster: self.cx.rec.name.clone(),
            name: inference_role(&self.cx.rec.name),
            trust_policy: inference_trust_policy(&oidc_arn, &issuer),
            managed_policies: vec![INFERENCE_MANAGED_POLICY.into()],
            inline_policies: vec![(
                "instantstart-inference-tls-bucket".into(),
                super::create_cluster::hyperpod_bucket_policy(&self.bucket),
            )],
        })
    }
}

#[async_trait]
impl StepExecutor for InferenceRoleStep {
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

/// Installs the inference add-on with its configuration values: reads the schema of the version
/// a create would pin (`DescribeAddonConfiguration`), checks the values against it and the
/// role-name rule, then creates that exact version. Observe and poll are [`EnsureAddon`]'s.
struct InferenceAddonStep {
    inner: EnsureAddon,
    cx: Arc<FeatureCx>,
    bucket: String,
}

#[async_trait]
impl StepExecutor for InferenceAddonStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.inner.observe(cx).await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        // A failed add-on of ours is deleted first, then created again (`EnsureAddon`).
        if let Some(r) = self.inner.replace_failed().await? {
            return Ok(r);
        }
        let f = &self.cx;
        let name = inference_role(&f.rec.name);
        let role_arn = match cx.input_str(INFERENCE_ROLE_STEP, "role_arn") {
            Ok(arn) => arn,
            Err(_) => {
                f.aws
                    .get_role(&name)
                    .await?
                    .ok_or_else(|| StepError::Invalid(format!("IAM role {name} not found")))?
                    .arn
            }
        };
        let hp = f
            .aws
            .describe_hyperpod_cluster(&f.rec.region, &f.hp)
            .await?
            .ok_or_else(|| StepError::Invalid(format!("HyperPod cluster {} not found", f.hp)))?;
        let values = inference_addon_values(&role_arn, &self.bucket, &hp.arn);
        check_inference_role_arn(&role_arn).map_err(StepError::Invalid)?;
        let conf = f
            .aws
            .describe_addon_configuration(&f.rec.region, &f.rec.eks_cluster, INFERENCE_OPERATOR_ADDON, None)
            .await?;
        addon_schema::validate(&conf.schema, &values)
            .map_err(|e| StepError::Invalid(format!("{INFERENCE_OPERATOR_ADDON} {}: {e}", conf.version)))?;
        let t = &self.inner.target;
        let a = t
            .aws
            .create_addon(&CreateEksAddon {
                region: t.region.clone(),
                cluster: t.eks_cluster.clone(),
                name: INFERENCE_OPERATOR_ADDON.into(),
                version: Some(conf.version),
                client_request_token: super::steps::addon_create_token(cx),
                tags: ownership_tags(&t.cluster, &cx.operation_id.0),
                configuration_values: Some(values),
            })
            .await?;
        Ok(ResourceRef { kind: "eks-addon".into(), id: a.name, arn: None })
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.inner.poll(cx, r).await
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
                    "labels": { LABEL_MANAGED_BY: MANAGED_BY, LABEL_CLUSTER: self.cx.rec.name },
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
    NodeRecovery(crate::spec::NodeRecovery),
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
            Setting::NodeRecovery(n) => c.node_recovery == *n,
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
        if let Setting::NodeRecovery(n) = self.setting {
            // NodeRecovery alone is a complete UpdateCluster (only ClusterName is required).
            let c = self
                .cx
                .aws
                .update_hyperpod_cluster(&UpdateHyperPodCluster {
                    node_recovery: Some(n),
                    ..UpdateHyperPodCluster::of(&self.cx.rec.region, &self.cx.hp)
                })
                .await?;
            return Ok(ResourceRef { kind: "hyperpod-cluster".into(), id: c.name, arn: Some(c.arn) });
        }
        let (tiered_storage, autoscaling) = match &self.setting {
            Setting::NodeRecovery(_) => unreachable!("handled above"),
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
            ResourceState::Active if self.matches(&c) => Progress::Done(json!({
                "tiered_storage": c.tiered_storage,
                "autoscaling": c.autoscaling,
                "node_recovery": c.node_recovery
            })),
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
                "training_operator_role <- []",
                "training_operator_identity <- [training_operator_role, addon:eks-pod-identity-agent]",
                "addon:amazon-sagemaker-hyperpod-training-operator <- [addon:eks-pod-identity-agent, addon:cert-manager, training_operator_identity]",
                "oidc_provider <- []",
                "inference_role <- [oidc_provider]",
                "addon:amazon-sagemaker-hyperpod-inference <- [addon:cert-manager, inference_role]",
            ]
        );
    }

    #[test]
    fn inference_off_removes_the_addon_then_its_role() {
        let off = keys(FeaturesPatch { inference_operator: Some(false), ..Default::default() });
        assert_eq!(
            off,
            [
                "remove:amazon-sagemaker-hyperpod-inference <- []",
                "remove_inference_role <- [remove:amazon-sagemaker-hyperpod-inference]",
            ]
        );
    }

    #[test]
    fn the_inference_role_is_named_as_the_addon_requires() {
        assert_eq!(inference_role("demo"), "SageMakerHyperPodInference-demo");
        let long = "a".repeat(40);
        let name = inference_role(&long);
        assert!(name.len() <= 64 && name.starts_with("SageMakerHyperPodInference-aaaa"), "{name}");
        assert_ne!(name, inference_role(&format!("{}b", "a".repeat(39))), "a digest keeps long names apart");
        assert!(check_inference_role_arn("arn:aws:iam::1:role/SageMakerHyperPodInference-demo").is_ok());
        let e = check_inference_role_arn("arn:aws:iam::1:role/demo-inference").unwrap_err();
        assert!(e.contains("must start with \"SageMakerHyperPodInference\""), "{e}");
        let t = inference_trust_policy("arn:aws:iam::1:oidc-provider/oidc.eks/x", "https://oidc.eks/x");
        assert_eq!(t["Statement"][0]["Principal"]["Service"], "sagemaker.amazonaws.com");
        assert_eq!(
            t["Statement"][1]["Condition"]["StringEquals"]["oidc.eks/x:sub"],
            "system:serviceaccount:hyperpod-inference-system:hyperpod-inference-controller-manager"
        );
        let v = inference_addon_values("arn:r", "bkt", "arn:hp");
        assert_eq!(v["keda"], json!({ "enabled": false }), "no second KEDA beside chart:keda");
        assert_eq!(v["alb"], json!({ "enabled": false }), "no second load balancer controller");
    }

    #[test]
    fn training_operator_off_removes_what_on_created_in_reverse() {
        let off = keys(FeaturesPatch { training_operator: Some(false), ..Default::default() });
        assert_eq!(
            off,
            [
                "remove:amazon-sagemaker-hyperpod-training-operator <- []",
                "remove_training_operator_identity <- [remove:amazon-sagemaker-hyperpod-training-operator]",
                "remove_training_operator_role <- [remove_training_operator_identity]",
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
    fn node_recovery_runs_before_autoscaling_on_and_after_autoscaling_off() {
        use crate::spec::NodeRecovery;
        let alone = keys(FeaturesPatch { node_recovery: Some(NodeRecovery::None), ..Default::default() });
        assert_eq!(alone, ["node_recovery <- []"]);
        let on = keys(FeaturesPatch {
            node_recovery: Some(NodeRecovery::Automatic),
            managed_autoscaling: Some(true),
            ..Default::default()
        });
        assert_eq!(
            on,
            [
                "node_recovery <- []",
                "autoscaling_role <- []",
                "autoscaling <- [autoscaling_role, node_recovery]",
                "karpenter <- [autoscaling]",
            ]
        );
        let off = keys(FeaturesPatch {
            node_recovery: Some(NodeRecovery::None),
            managed_autoscaling: Some(false),
            tiered_checkpointing: Some(TieredCheckpointingPatch { enabled: false, memory_percent: None }),
            ..Default::default()
        });
        assert!(off.contains(&"node_recovery <- [tiered_storage_off, autoscaling_off]".to_string()), "{off:?}");
        let tiered = keys(FeaturesPatch {
            node_recovery: Some(NodeRecovery::Automatic),
            tiered_checkpointing: Some(TieredCheckpointingPatch { enabled: false, memory_percent: None }),
            ..Default::default()
        });
        assert!(tiered.contains(&"tiered_storage_off <- [node_recovery]".to_string()), "{tiered:?}");
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

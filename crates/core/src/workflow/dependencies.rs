//! The cluster dependencies every InstantStart cluster gets — the EKS add-ons ([`BASE_ADDONS`],
//! with the Mountpoint S3 CSI driver's Pod Identity chain before its add-on), the pinned Helm
//! charts ([`PINNED_CHARTS`], with the AWS Load Balancer Controller's IRSA chain) and the
//! `s3-shared` storage claim — as one planner ([`plan_dependencies`]) and one set of executors
//! ([`DependencyTarget::executor`]) parameterised by the target, used by create-cluster and by
//! import, so the two cannot drift.
//!
//! # Guarantees
//!
//! - The steps and their keys are those of the create pipeline (`addon:<name>`,
//!   `s3_csi_role`, `s3_csi_identity`, `chart:<release>`, `oidc_provider`,
//!   `lb_controller_role`, `storage`); they wait for one `ready` step (create's
//!   `select_active`, import's `access_entry`) and the S3 steps for the `bucket` step, whose
//!   output `bucket` names the bucket.
//! - Dependencies named in [`DependencyPlan::present`] (found installed by someone else when
//!   the operation was assessed) get no step: they are left alone, never changed or deleted.
//!   With [`DependencyTarget::adopt_present`] a chart step adopts a release of any version it
//!   finds (an import never upgrades someone else's release), and an add-on step already adopts
//!   any installed add-on ([`EnsureAddon`]).
//! - Without a bucket the S3 CSI identity, its add-on and the storage claim are not planned
//!   (nothing would be mounted).

use super::charts::{CHART_STEP_PREFIX, EnsureChart, chart_step_key};
use super::lb_controller::{
    LB_CONTROLLER_NAMESPACE, LB_CONTROLLER_ROLE_STEP, LB_CONTROLLER_SERVICE_ACCOUNT, LbControllerChartStep,
    LbControllerRoleStep, lb_controller_role,
};
use super::steps::{
    AddonTarget, EnsureAddon, EnsurePodIdentity, EnsureRole, OidcProviderStep, PodIdentityTarget,
    pod_identity_trust_policy,
};
use crate::engine::{Observation, Progress, StepContext, StepError, StepExecutor};
use crate::labels::LABEL_CLUSTER;
use crate::operation::{ResourceRef, StepSpec};
use crate::preflight::{CheckStatus, PreflightCheck};
use crate::provider::*;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// EKS add-ons installed by the dependencies stage, in order. HyperPod requires the Amazon VPC
/// CNI at 1.18.3 or later and supports no other CNI (`sagemaker-hyperpod-eks-prerequisites`):
/// EKS installs a self-managed CNI of its choosing, so the pipeline takes it over as the
/// `vpc-cni` add-on at a version of at least [`addon_minimum_version`] (the adapter resolves
/// it from DescribeAddonVersions for the cluster's Kubernetes version). HyperPod's training
/// operator needs cert-manager and the pod identity agent; the S3 data contract needs the
/// Mountpoint S3 CSI driver.
pub const BASE_ADDONS: &[&str] = &["vpc-cni", "eks-pod-identity-agent", "cert-manager", "aws-mountpoint-s3-csi-driver"];

/// The add-on of the Mountpoint S3 CSI driver and the service account its driver runs as.
pub const S3_CSI_ADDON: &str = "aws-mountpoint-s3-csi-driver";
pub const S3_CSI_NAMESPACE: &str = "kube-system";
pub const S3_CSI_SERVICE_ACCOUNT: &str = "s3-csi-driver-sa";
/// Name of the static PersistentVolumeClaim that mounts the shared bucket.
pub const STORAGE_CLAIM: &str = "s3-shared";
/// Step key prefix of add-on steps.
pub const ADDON_STEP_PREFIX: &str = "addon:";

/// The step key installing (or removing) add-on `addon`.
pub fn addon_step_key(addon: &str) -> String {
    format!("{ADDON_STEP_PREFIX}{addon}")
}

/// Whether `key` is the key of a dependency step (an add-on or a chart).
pub fn is_dependency_key(key: &str) -> bool {
    key.starts_with(ADDON_STEP_PREFIX) || key.starts_with(CHART_STEP_PREFIX)
}

/// The Mountpoint S3 CSI driver's Pod Identity role.
pub fn s3_csi_role(cluster: &str) -> String {
    format!("{cluster}-s3-csi-role")
}

/// Mountpoint's documented least-privilege policy (awslabs/mountpoint-s3-csi-driver
/// `docs/CONFIGURATION.md`, "AWS credentials"; EKS user guide `s3-csi-create`): list the
/// bucket, read/write/delete its objects and abort multipart uploads — on this bucket only.
pub fn s3_csi_policy(bucket: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [
            { "Sid": "MountpointFullBucketAccess", "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [format!("arn:aws:s3:::{bucket}")],
              "Condition": super::steps::own_account_buckets() },
            { "Sid": "MountpointFullObjectAccess", "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"], "Resource": [format!("arn:aws:s3:::{bucket}/*")],
              "Condition": super::steps::own_account_buckets() }
        ]
    })
}

/// The driver's service account bound to its role.
pub fn s3_csi_identity(target: AddonTarget) -> PodIdentityTarget {
    let role = s3_csi_role(&target.cluster);
    PodIdentityTarget {
        target,
        namespace: S3_CSI_NAMESPACE.into(),
        service_account: S3_CSI_SERVICE_ACCOUNT.into(),
        role,
    }
}

/// Expected duration of a dependency step at real AWS speed (ETAs).
pub fn expected_secs(key: &str) -> Option<u64> {
    if is_dependency_key(key) {
        return Some(60);
    }
    match key {
        "oidc_provider" => Some(5),
        "lb_controller_role" | "s3_csi_role" | "s3_csi_identity" | "storage" => Some(10),
        _ => None,
    }
}

fn step(key: &str, title: String, deps: &[&str]) -> StepSpec {
    StepSpec {
        key: key.into(),
        title,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected_secs: expected_secs(key),
    }
}

/// What to plan the dependencies of.
pub struct DependencyPlan<'a> {
    /// The InstantStart cluster name (derived role names).
    pub cluster: &'a str,
    /// The step every dependency waits for (the cluster is reachable and ours to change).
    pub ready: &'a str,
    /// Whether there is a `bucket` step (S3 CSI identity and its add-on are planned with it).
    pub bucket: bool,
    /// Whether a HyperPod cluster is (or will be) orchestrated by the cluster: charts marked
    /// `before_hyperpod` are planned only then.
    pub hyperpod: bool,
    /// Step keys of dependencies found installed by someone else: not planned (left alone).
    pub present: &'a [String],
}

/// The planned dependency steps.
pub struct DependencySteps {
    pub steps: Vec<StepSpec>,
    /// Keys of the planned add-on steps (a HyperPod cluster waits for them).
    pub addon_keys: Vec<String>,
    /// Keys of the planned chart steps a HyperPod cluster must wait for.
    pub before_hyperpod: Vec<String>,
}

/// Lays out the dependency steps: add-ons (the S3 CSI role and association before the driver's
/// add-on), then a `chart:<release>` step per chart (the load balancer controller after its
/// OIDC provider and IRSA role).
pub fn plan_dependencies(p: &DependencyPlan<'_>, charts: &[PinnedChart]) -> DependencySteps {
    let skipped = |key: &str| p.present.iter().any(|k| k == key);
    let mut steps = Vec::new();
    let mut addon_keys = Vec::new();
    for addon in BASE_ADDONS {
        let key = addon_step_key(addon);
        if *addon == S3_CSI_ADDON && !p.bucket {
            continue; // nothing to mount
        }
        if skipped(&key) {
            continue;
        }
        let mut deps = vec![p.ready];
        if *addon == S3_CSI_ADDON {
            // The driver's identity first (the agent add-on is earlier in BASE_ADDONS).
            steps.push(step(
                "s3_csi_role",
                format!(
                    "Create IAM role {} for the S3 CSI driver (trusted by pods.eks.amazonaws.com, scoped to the shared bucket)",
                    s3_csi_role(p.cluster)
                ),
                &["bucket"],
            ));
            let agent = addon_step_key("eks-pod-identity-agent");
            let mut identity_deps = vec!["s3_csi_role"];
            if !skipped(&agent) {
                identity_deps.push(agent.as_str());
            } else {
                identity_deps.push(p.ready);
            }
            steps.push(step(
                "s3_csi_identity",
                format!("Associate {S3_CSI_NAMESPACE}/{S3_CSI_SERVICE_ACCOUNT} with the role (EKS Pod Identity)"),
                &identity_deps,
            ));
            deps.push("s3_csi_identity");
        }
        steps.push(step(&key, format!("Install EKS add-on {addon}"), &deps));
        addon_keys.push(key);
    }
    let mut before_hyperpod = Vec::new();
    for chart in charts {
        let key = chart_step_key(chart);
        if chart.before_hyperpod && !p.hyperpod {
            continue; // only needed by a HyperPod cluster
        }
        if skipped(&key) {
            continue;
        }
        if chart.before_hyperpod {
            before_hyperpod.push(key.clone());
        }
        let mut deps = vec![p.ready];
        if chart.release == AWS_LOAD_BALANCER_CONTROLLER.release {
            // The controller's service account assumes its IAM role through IRSA.
            steps.push(step(
                "oidc_provider",
                "Ensure the cluster's IAM OIDC provider (trust anchor)".into(),
                &[p.ready],
            ));
            steps.push(step(
                LB_CONTROLLER_ROLE_STEP,
                format!(
                    "Create IAM role {} with the AWS Load Balancer Controller's policy, trusted only by \
                     {LB_CONTROLLER_NAMESPACE}/{LB_CONTROLLER_SERVICE_ACCOUNT}",
                    lb_controller_role(p.cluster)
                ),
                &["oidc_provider"],
            ));
            deps.push(LB_CONTROLLER_ROLE_STEP);
        }
        steps.push(step(
            &key,
            format!(
                "Install Helm chart {} {} in namespace {}: {}",
                chart.chart, chart.version, chart.namespace, chart.provides
            ),
            &deps,
        ));
    }
    DependencySteps { steps, addon_keys, before_hyperpod }
}

/// The `storage` step: mount the bucket through the S3 CSI driver.
pub fn storage_step(mount_path: &str, ready: &str) -> StepSpec {
    step(
        "storage",
        format!("Mount the shared bucket through the S3 CSI driver (claim {STORAGE_CLAIM}, path {mount_path})"),
        &["bucket", ready, &addon_step_key(S3_CSI_ADDON)],
    )
}

/// The providers and settings of a workflow that brings an existing cluster's dependencies to
/// what InstantStart needs (import, add-HyperPod); each builds its [`DependencyTarget`] from them.
#[derive(Clone)]
pub struct DependencyProviders {
    pub aws: Arc<dyn AwsCloud>,
    pub kube: Arc<dyn KubeApi>,
    pub store: Arc<dyn crate::store::Store>,
    /// The Helm runner; without one the pinned charts are not reconciled.
    pub helm: Option<Arc<dyn HelmReleases>>,
    /// The management environment's shared bucket, which a named `bucket` may be.
    pub shared_bucket: Option<String>,
}

impl DependencyProviders {
    pub fn new(aws: Arc<dyn AwsCloud>, kube: Arc<dyn KubeApi>, store: Arc<dyn crate::store::Store>) -> Self {
        DependencyProviders { aws, kube, store, helm: None, shared_bucket: None }
    }

    /// Reconciles the pinned Helm charts too (`chart:<release>` steps).
    pub fn with_helm(mut self, helm: Option<Arc<dyn HelmReleases>>) -> Self {
        self.helm = helm;
        self
    }

    /// The management environment's shared bucket.
    pub fn with_shared_bucket(mut self, bucket: Option<String>) -> Self {
        self.shared_bucket = bucket;
        self
    }

    /// The pinned charts reconciled: all of them with a Helm runner, none without.
    pub fn charts(&self) -> &'static [PinnedChart] {
        if self.helm.is_some() { PINNED_CHARTS } else { &[] }
    }

    /// The target of the dependency steps for EKS cluster `eks_cluster` of InstantStart cluster
    /// `cluster`; present charts are adopted at any version.
    pub fn target(&self, region: &str, eks_cluster: &str, cluster: &str, mount_path: String) -> DependencyTarget {
        DependencyTarget {
            aws: self.aws.clone(),
            kube: self.kube.clone(),
            helm: self.helm.clone(),
            region: region.to_string(),
            eks_cluster: eks_cluster.to_string(),
            cluster: cluster.to_string(),
            mount_path,
            adopt_present: true,
        }
    }
}

/// Where the dependencies go and who owns what the steps create.
#[derive(Clone)]
pub struct DependencyTarget {
    pub aws: Arc<dyn AwsCloud>,
    pub kube: Arc<dyn KubeApi>,
    pub helm: Option<Arc<dyn HelmReleases>>,
    pub region: String,
    pub eks_cluster: String,
    /// The InstantStart cluster name (ownership tags, derived role names).
    pub cluster: String,
    /// The claim's mount path (reported by the `storage` step).
    pub mount_path: String,
    /// A chart step adopts a release of its name at any version instead of upgrading it.
    pub adopt_present: bool,
}

impl DependencyTarget {
    pub fn addon_target(&self) -> AddonTarget {
        AddonTarget {
            aws: self.aws.clone(),
            region: self.region.clone(),
            eks_cluster: self.eks_cluster.clone(),
            cluster: self.cluster.clone(),
        }
    }

    pub fn kube_target(&self) -> KubeTarget {
        KubeTarget::new(self.region.clone(), self.eks_cluster.clone())
    }

    /// The executor of dependency step `key` (`None`: not a dependency step).
    pub fn executor(&self, key: &str) -> Option<Arc<dyn StepExecutor>> {
        Some(match key {
            "s3_csi_role" => Arc::new(S3CsiRoleStep(self.clone())),
            "s3_csi_identity" => Arc::new(EnsurePodIdentity(s3_csi_identity(self.addon_target()))),
            "storage" => Arc::new(StorageStep(self.clone())),
            "oidc_provider" => Arc::new(OidcProviderStep {
                aws: self.aws.clone(),
                region: self.region.clone(),
                eks_cluster: self.eks_cluster.clone(),
                cluster: self.cluster.clone(),
            }),
            LB_CONTROLLER_ROLE_STEP => Arc::new(LbControllerRoleStep {
                aws: self.aws.clone(),
                cluster: self.cluster.clone(),
                region: self.region.clone(),
                eks_cluster: self.eks_cluster.clone(),
            }),
            other if other.starts_with(CHART_STEP_PREFIX) => {
                let chart = pinned_chart(&other[CHART_STEP_PREFIX.len()..])?;
                let inner = EnsureChart { helm: self.helm.clone()?, target: self.kube_target(), chart: *chart };
                let step: Arc<dyn StepExecutor> = if chart.release == AWS_LOAD_BALANCER_CONTROLLER.release {
                    Arc::new(LbControllerChartStep { inner, aws: self.aws.clone(), cluster: self.cluster.clone() })
                } else {
                    Arc::new(inner)
                };
                if self.adopt_present {
                    Arc::new(AdoptPresentChart {
                        helm: self.helm.clone()?,
                        target: self.kube_target(),
                        chart: *chart,
                        step,
                    })
                } else {
                    step
                }
            }
            other => {
                let addon = other.strip_prefix(ADDON_STEP_PREFIX)?;
                Arc::new(EnsureAddon { target: self.addon_target(), addon: addon.to_string() })
            }
        })
    }
}

/// Which dependencies an assessment looks for ([`installed_dependencies`]).
pub struct Wanted {
    /// A bucket is (or will be) mounted: the S3 CSI driver's add-on is wanted.
    pub bucket: bool,
    /// A HyperPod cluster is (or will be) orchestrated: charts marked `before_hyperpod` are wanted.
    pub hyperpod: bool,
}

/// A dependency an assessment looks for.
#[derive(Clone, Copy)]
enum Dependency {
    Addon(&'static str),
    Chart(PinnedChart),
}

/// Reads which of the wanted dependencies are installed on `target`'s cluster: the add-ons
/// always, the charts (of `charts`) when the control plane can already reach the Kubernetes
/// API (`reach`). Returns the step keys of the present ones (to record as
/// [`DependencyPlan::present`]: left alone, no step) and one `dependency` preflight check per
/// dependency ("present, left alone" — a warning for an add-on older than HyperPod accepts — or
/// "will be installed"). Import and add-HyperPod share it.
pub async fn installed_dependencies(
    target: &DependencyTarget,
    charts: &[PinnedChart],
    wanted: &Wanted,
    reach: bool,
) -> Result<(Vec<String>, Vec<PreflightCheck>), crate::engine::EngineError> {
    use crate::engine::reads::read;
    let mut deps: Vec<(String, Dependency)> = BASE_ADDONS
        .iter()
        .filter(|a| **a != S3_CSI_ADDON || wanted.bucket)
        .map(|a| (addon_step_key(a), Dependency::Addon(a)))
        .collect();
    deps.extend(
        charts
            .iter()
            .filter(|c| !c.before_hyperpod || wanted.hyperpod)
            .map(|c| (chart_step_key(c), Dependency::Chart(*c))),
    );
    let (region, eks_cluster) = (&target.region, &target.eks_cluster);
    let kube_target = target.kube_target();
    let mut present = Vec::new();
    let mut checks = Vec::new();
    for (key, dep) in deps {
        let (found, detail) = match dep {
            Dependency::Addon(name) => match read(|| target.aws.describe_addon(region, eks_cluster, name)).await? {
                Some(a) => {
                    let status = match addon_minimum_version(name) {
                        Some(min) if !addon_version_at_least(&a.version, min) => CheckStatus::Warn,
                        _ => CheckStatus::Pass,
                    };
                    let mut detail = format!("EKS add-on {name} {} is installed: present, left alone", a.version);
                    if status == CheckStatus::Warn {
                        detail.push_str(&format!(
                            " (older than {}, the lowest version SageMaker HyperPod accepts; update it with eks:UpdateAddon)",
                            addon_minimum_version(name).unwrap_or_default()
                        ));
                    }
                    (Some(status), detail)
                }
                None => (None, format!("EKS add-on {name} is missing: will be installed")),
            },
            Dependency::Chart(chart) => {
                let release = match (reach, &target.helm) {
                    (true, Some(h)) => h.get_release(&kube_target, chart.namespace, chart.release).await.ok(),
                    _ => None,
                };
                match release {
                    Some(Some(r)) => (
                        Some(CheckStatus::Pass),
                        format!(
                            "Helm release {}/{} ({} {}) is installed: present, left alone",
                            r.namespace, r.name, r.chart, r.version
                        ),
                    ),
                    Some(None) => {
                        (None, format!("Helm chart {} {} is missing: will be installed", chart.chart, chart.version))
                    }
                    None => (
                        None,
                        format!(
                            "Helm chart {} {}: will be installed unless a release {}/{} is found once the control \
                             plane can reach the Kubernetes API (then it is left alone)",
                            chart.chart, chart.version, chart.namespace, chart.release
                        ),
                    ),
                }
            }
        };
        let status = match found {
            Some(status) => {
                present.push(key.clone());
                status
            }
            None => CheckStatus::Pass,
        };
        checks.push(PreflightCheck { check: "dependency".into(), field: key, status, detail, remedy: None });
    }
    Ok((present, checks))
}

/// The S3 CSI driver's role: the bucket comes from the `bucket` step's recorded output, so
/// every attempt asks for the same role.
struct S3CsiRoleStep(DependencyTarget);

impl S3CsiRoleStep {
    fn role(&self, cx: &StepContext<'_>) -> Result<EnsureRole, StepError> {
        let bucket = cx.input_str("bucket", "bucket")?;
        Ok(EnsureRole {
            aws: self.0.aws.clone(),
            cluster: self.0.cluster.clone(),
            name: s3_csi_role(&self.0.cluster),
            trust_policy: pod_identity_trust_policy(),
            managed_policies: vec![],
            inline_policies: vec![("instantstart-s3-csi-bucket".into(), s3_csi_policy(&bucket))],
        })
    }
}

#[async_trait]
impl StepExecutor for S3CsiRoleStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        self.role(cx)?.observe(cx).await
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        self.role(cx)?.submit(cx).await
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        self.role(cx)?.poll(cx, r).await
    }
}

/// A chart step of an adopted cluster: a release of the chart's name found when the step
/// observes (installed by someone else since the assessment) is used as it is, at whatever
/// version — never upgraded; otherwise the chart is installed as create installs it.
struct AdoptPresentChart {
    helm: Arc<dyn HelmReleases>,
    target: KubeTarget,
    chart: PinnedChart,
    step: Arc<dyn StepExecutor>,
}

const PRESENT_RELEASE: &str = "helm-release-present";

#[async_trait]
impl StepExecutor for AdoptPresentChart {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let c = &self.chart;
        match self.helm.get_release(&self.target, c.namespace, c.release).await? {
            Some(r) if r.chart != c.chart || r.version != c.version => Ok(Observation::Exists(ResourceRef {
                kind: PRESENT_RELEASE.into(),
                id: format!("{}/{}", c.namespace, c.release),
                arn: None,
            })),
            _ => self.step.observe(cx).await,
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        self.step.submit(cx).await
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        if r.kind != PRESENT_RELEASE {
            return self.step.poll(cx, r).await;
        }
        let c = &self.chart;
        Ok(match self.helm.get_release(&self.target, c.namespace, c.release).await? {
            Some(rel) => Progress::Done(json!({
                "release": rel.name,
                "namespace": rel.namespace,
                "chart": rel.chart,
                "version": rel.version,
                "left_alone": true,
            })),
            None => Progress::Resubmit { detail: format!("Helm release {} is gone; installing it", c.release) },
        })
    }
}

/// `storage`: the static PersistentVolume of the bucket and its claim [`STORAGE_CLAIM`]
/// (labelled ours; a same-named claim that is not ours is `Foreign`).
struct StorageStep(DependencyTarget);

impl StorageStep {
    fn objects(&self, bucket: &str) -> (KubeObject, KubeObject) {
        let s = &self.0;
        let labels = json!({ LABEL_MANAGED_BY: MANAGED_BY, LABEL_CLUSTER: s.cluster });
        let pv_name = format!("{STORAGE_CLAIM}-pv");
        let pv = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": { "name": pv_name, "labels": labels },
            "spec": {
                "capacity": { "storage": "1200Gi" },
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "claimRef": { "namespace": "default", "name": STORAGE_CLAIM },
                "mountOptions": ["allow-delete", "allow-other", "uid=1000", "gid=1000", format!("region {}", s.region)],
                "csi": { "driver": "s3.csi.aws.com", "volumeHandle": format!("s3-csi-{bucket}"), "volumeAttributes": { "bucketName": bucket } }
            }
        });
        let pvc = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": { "name": STORAGE_CLAIM, "namespace": "default", "labels": labels },
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": "",
                "volumeName": pv_name,
                "resources": { "requests": { "storage": "1200Gi" } }
            }
        });
        (KubeObject(pv), KubeObject(pvc))
    }

    fn claim_ref() -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: "PersistentVolumeClaim".into(),
            namespace: Some("default".into()),
            name: STORAGE_CLAIM.into(),
        }
    }
}

#[async_trait]
impl StepExecutor for StorageStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let s = &self.0;
        match s.kube.get(&s.kube_target(), &Self::claim_ref()).await? {
            Some(o) if o.label(LABEL_MANAGED_BY) == Some(MANAGED_BY) => Ok(Observation::Exists(ResourceRef {
                kind: "pvc".into(),
                id: format!("default/{STORAGE_CLAIM}"),
                arn: None,
            })),
            Some(_) => Ok(Observation::Foreign {
                reason: format!(
                    "PersistentVolumeClaim default/{STORAGE_CLAIM} already exists but is not tagged \
                     {TAG_MANAGED_BY}={MANAGED_BY}, {TAG_CLUSTER}={}; InstantStart will not adopt or change it. \
                     Delete or rename it, or choose another cluster name, then retry this step",
                    s.cluster
                ),
            }),
            None => Ok(Observation::Absent),
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let s = &self.0;
        let bucket = cx.input_str("bucket", "bucket")?;
        let (pv, pvc) = self.objects(&bucket);
        s.kube.apply(&s.kube_target(), &pv).await?;
        s.kube.apply(&s.kube_target(), &pvc).await?;
        Ok(ResourceRef { kind: "pvc".into(), id: format!("default/{STORAGE_CLAIM}"), arn: None })
    }

    async fn poll(&self, cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let s = &self.0;
        let Some(pvc) = s.kube.get(&s.kube_target(), &Self::claim_ref()).await? else {
            return Ok(Progress::Failed {
                reason: format!("PersistentVolumeClaim default/{STORAGE_CLAIM} disappeared"),
            });
        };
        match pvc.0.pointer("/status/phase").and_then(Value::as_str) {
            Some("Bound") => Ok(Progress::Done(json!({
                "claim": STORAGE_CLAIM,
                "namespace": "default",
                "bucket": cx.input_str("bucket", "bucket")?,
                "mount_path": s.mount_path,
            }))),
            phase => Ok(Progress::Waiting { detail: format!("claim {STORAGE_CLAIM}: {}", phase.unwrap_or("Pending")) }),
        }
    }
}

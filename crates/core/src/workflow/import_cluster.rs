//! Importing an existing EKS cluster (and optionally its HyperPod cluster) is adoption, one
//! durable operation: verify they exist and are active, give the control plane's own IAM
//! principal access to the cluster's Kubernetes API (an EKS access entry with
//! `AmazonEKSClusterAdminPolicy`), reconcile the dependencies of the create pipeline (the
//! add-ons and pinned charts that are missing, planned and run by [`super::dependencies`]),
//! with a named `bucket` its S3 CSI identity and the `s3-shared` claim, then register them.
//!
//! # Guarantees
//!
//! - The assessment (and so the dry run) reads the EKS cluster, the control plane's identity
//!   and its access entry: a missing or inactive cluster, a missing HyperPod cluster, a caller
//!   an access entry cannot name, a cluster in `CONFIG_MAP` authentication mode without an
//!   entry for us, or a cluster without an entry for us whose owner did not tag it
//!   `instantstart:import=allowed` ([`TAG_IMPORT`]) is refused with a 422 naming what to change,
//!   before anything is recorded.
//! - An access entry that already maps the principal is used as it is; one InstantStart creates
//!   carries our ownership tags, and deleting the imported cluster removes only that one.
//! - The assessment reads the installed add-ons (and, when the control plane can already reach
//!   the Kubernetes API, the Helm releases) and records the present ones in the request
//!   (`present`): they get no step and the dry run reports each as "present, left alone"; the
//!   others as "will be installed". A chart release someone installs after the assessment is
//!   still left alone when its step observes it ([`DependencyTarget::adopt_present`]). What
//!   import installs carries our ownership tags and is named by the import operation's steps,
//!   which is how deleting the imported cluster knows what to remove.
//! - A named bucket follows create's naming rule (`check_bucket_covered`) and must be in the
//!   cluster's region; an existing one is used as it is, a missing one is created (ours). The
//!   record then has the bucket, so tiered checkpointing and the inference operator work.

use super::dependencies::{
    DependencyPlan, DependencyProviders, DependencyTarget, S3_CSI_ADDON, Wanted, addon_step_key,
    installed_dependencies, plan_dependencies, storage_step,
};
use super::{cluster_target, decode};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::names;
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::preflight::{CheckStatus, PreflightCheck};
use crate::provider::*;
use crate::spec::{DEFAULT_MOUNT_PATH, check_bucket_covered_at};
use crate::store::{ClusterRecord, ClusterSource, Store};
use crate::validate::Findings;
use crate::validate::ValidationError;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Request to import an existing EKS cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportClusterRequest {
    /// InstantStart name for the cluster.
    pub name: String,
    /// AWS region of the EKS cluster. Optional over the REST API: when absent the server's
    /// default region (its `--region`) is filled in and recorded in the operation's request.
    #[serde(default)]
    pub region: String,
    /// Name of the existing EKS cluster.
    pub eks_cluster: String,
    /// Name of an existing HyperPod cluster orchestrated by it, if any.
    #[serde(default)]
    pub hyperpod_cluster: Option<String>,
    /// S3 bucket mounted as the `s3-shared` claim (at `/s3`) through the S3 CSI driver, with
    /// the driver's Pod Identity; same naming rule as a created cluster's `storage.bucket`, in
    /// the cluster's region (created when missing). Without it the cluster has no bucket:
    /// tiered checkpointing and the inference operator need one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// The control plane's IAM principal, as the assessment read it (never the client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub control_plane_principal: Option<String>,
    /// Step keys of the dependencies the assessment found installed (left alone, no step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub present: Vec<String>,
}

/// One EKS cluster of an account and region, as import offers it (`GET /api/context/eks-clusters`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EksClusterCandidate {
    pub name: String,
    pub arn: String,
    pub version: String,
    pub state: ResourceState,
    /// `API`, `API_AND_CONFIG_MAP` or `CONFIG_MAP` (no access entries: import is refused).
    pub authentication_mode: Option<String>,
    /// The HyperPod clusters it orchestrates.
    pub hyperpod_clusters: Vec<String>,
    /// The InstantStart clusters registered for it (none: not managed).
    pub managed_as: Vec<ManagedAs>,
    /// Whether the control plane's IAM principal has an access entry on it (`null`: could not
    /// be read).
    pub control_plane_access: Option<bool>,
}

/// An InstantStart cluster registered for an EKS cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ManagedAs {
    pub name: String,
    /// How it came to InstantStart: `created` or `imported`.
    pub source: ClusterSource,
}

/// The EKS clusters of `region` with their HyperPod clusters and which of them InstantStart
/// manages: what import can offer (inspect before create).
pub async fn eks_clusters(
    aws: &dyn AwsCloud,
    store: &dyn Store,
    region: &str,
) -> Result<Vec<EksClusterCandidate>, EngineError> {
    let registered = store.list_clusters()?;
    let principal = control_plane_principal(aws).await.ok();
    let mut orchestrated: Vec<(String, String)> = Vec::new();
    for hp in read(|| aws.list_hyperpod_clusters(region)).await? {
        if let Some(c) = read(|| aws.describe_hyperpod_cluster(region, &hp)).await?
            && let Some(arn) = c.eks_cluster_arn
        {
            orchestrated.push((arn, c.name));
        }
    }
    let mut out = Vec::new();
    for name in read(|| aws.list_eks_clusters(region)).await? {
        let Some(c) = read(|| aws.describe_eks_cluster(region, &name)).await? else { continue };
        let managed_as = registered
            .iter()
            .filter(|r| r.region == region && r.eks_cluster == c.name)
            .map(|r| ManagedAs { name: r.name.clone(), source: r.source })
            .collect();
        let control_plane_access = match &principal {
            Some(p) => read(|| aws.describe_access_entry(region, &c.name, p)).await.ok().map(|e| e.is_some()),
            None => None,
        };
        out.push(EksClusterCandidate {
            hyperpod_clusters: orchestrated.iter().filter(|(arn, _)| *arn == c.arn).map(|(_, n)| n.clone()).collect(),
            managed_as,
            control_plane_access,
            name: c.name,
            arn: c.arn,
            version: c.version,
            state: c.state,
            authentication_mode: c.authentication_mode,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The step that gives the control plane access to the cluster's Kubernetes API.
pub const ACCESS_ENTRY_STEP: &str = "access_entry";

/// The control plane's IAM principal as an access entry names it.
pub async fn control_plane_principal(aws: &dyn AwsCloud) -> Result<String, ProviderError> {
    let id = aws.caller_identity().await?;
    access_entry_principal(&id.arn).ok_or_else(|| {
        ProviderError::new(
            "sts:GetCallerIdentity",
            ProviderErrorKind::InvalidRequest,
            format!("the control plane runs as {}, which an EKS access entry cannot name (use an IAM role)", id.arn),
        )
    })
}

/// The import workflow.
pub struct ImportClusterWorkflow(DependencyProviders);

impl std::ops::Deref for ImportClusterWorkflow {
    type Target = DependencyProviders;
    fn deref(&self) -> &DependencyProviders {
        &self.0
    }
}

impl ImportClusterWorkflow {
    pub fn new(providers: DependencyProviders) -> Self {
        ImportClusterWorkflow(providers)
    }

    fn dependencies(&self, req: &ImportClusterRequest) -> DependencyTarget {
        self.target(&req.region, &req.eks_cluster, &req.name, DEFAULT_MOUNT_PATH.into())
    }

    /// Reads which of the dependencies import reconciles are installed: the add-ons always,
    /// the charts when the control plane can reach the Kubernetes API already (`reach`).
    async fn dependency_checks(
        &self,
        req: &ImportClusterRequest,
        reach: bool,
    ) -> Result<(Vec<String>, Vec<PreflightCheck>), EngineError> {
        installed_dependencies(
            &self.dependencies(req),
            self.charts(),
            &Wanted { bucket: req.bucket.is_some(), hyperpod: req.hyperpod_cluster.is_some() },
            reach,
        )
        .await
    }
}

#[async_trait]
impl Workflow for ImportClusterWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::ImportCluster
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: ImportClusterRequest = decode(request)?;
        let mut f = Findings::new();
        if let Err(rule) = names::cluster_name(&req.name) {
            f.push("name", rule);
        }
        if let Err(rule) = names::region(&req.region) {
            f.push("region", rule);
        }
        if let Err(rule) = names::eks_cluster_name(&req.eks_cluster) {
            f.push("eks_cluster", rule);
        }
        if let Some(hp) = &req.hyperpod_cluster
            && let Err(rule) = names::hyperpod_name(hp)
        {
            f.push("hyperpod_cluster", rule);
        }
        if let Some(bucket) = &req.bucket {
            match names::s3_bucket_name(bucket) {
                Ok(()) => check_bucket_covered_at("bucket", bucket, self.shared_bucket.as_deref(), &mut f),
                Err(rule) => f.push("bucket", rule),
            }
        }
        if self.store.get_cluster(&req.name)?.is_some() {
            f.push_unprocessable("name", format!("a cluster named {} already exists", req.name));
        }
        f.finish()?;
        let mut steps = vec![StepSpec {
            key: "eks_cluster".into(),
            title: format!("Check EKS cluster {} in {}", req.eks_cluster, req.region),
            depends_on: vec![],
            expected_secs: Some(2),
        }];
        let mut deps = vec!["eks_cluster".to_string()];
        if let Some(hp) = &req.hyperpod_cluster {
            steps.push(StepSpec {
                key: "hyperpod_cluster".into(),
                title: format!("Check HyperPod cluster {hp}"),
                depends_on: vec!["eks_cluster".into()],
                expected_secs: Some(2),
            });
            deps.push("hyperpod_cluster".into());
        }
        steps.push(StepSpec {
            key: ACCESS_ENTRY_STEP.into(),
            title: format!(
                "Give the control plane's IAM role access to the Kubernetes API of {} (EKS access entry, cluster admin)",
                req.eks_cluster
            ),
            depends_on: vec!["eks_cluster".into()],
            expected_secs: Some(3),
        });
        deps.push(ACCESS_ENTRY_STEP.into());
        if let Some(bucket) = &req.bucket {
            steps.push(StepSpec {
                key: "bucket".into(),
                title: format!("Use S3 bucket {bucket} (created, encrypted and private, if it does not exist)"),
                depends_on: vec![],
                expected_secs: Some(5),
            });
            deps.push("bucket".into());
        }
        let planned = plan_dependencies(
            &DependencyPlan {
                cluster: &req.name,
                ready: ACCESS_ENTRY_STEP,
                bucket: req.bucket.is_some(),
                hyperpod: req.hyperpod_cluster.is_some(),
                present: &req.present,
            },
            self.charts(),
        );
        deps.extend(planned.steps.iter().map(|s| s.key.clone()));
        steps.extend(planned.steps);
        if req.bucket.is_some() {
            let mut storage = storage_step(DEFAULT_MOUNT_PATH, ACCESS_ENTRY_STEP);
            // An S3 CSI driver add-on someone else installed is not waited for.
            let driver = addon_step_key(S3_CSI_ADDON);
            storage.depends_on.retain(|d| *d != driver || !req.present.contains(&driver));
            deps.push(storage.key.clone());
            steps.push(storage);
        }
        steps.push(StepSpec {
            key: "register".into(),
            title: format!("Register {} as an imported cluster", req.name),
            depends_on: deps,
            expected_secs: Some(1),
        });
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.name), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: ImportClusterRequest = decode(&prepared.request)?;
        let Some(eks) = read(|| self.aws.describe_eks_cluster(&req.region, &req.eks_cluster)).await? else {
            return Err(ValidationError::unprocessable(
                "eks_cluster",
                format!("EKS cluster {} was not found in {}", req.eks_cluster, req.region),
            )
            .into());
        };
        if eks.state != ResourceState::Active {
            return Err(ValidationError::unprocessable(
                "eks_cluster",
                format!("EKS cluster {} is {:?}; import it once it is ACTIVE", eks.name, eks.state),
            )
            .into());
        }
        if let Some(hp) = &req.hyperpod_cluster
            && read(|| self.aws.describe_hyperpod_cluster(&req.region, hp)).await?.is_none()
        {
            return Err(ValidationError::unprocessable(
                "hyperpod_cluster",
                format!("HyperPod cluster {hp} was not found in {}", req.region),
            )
            .into());
        }
        let principal = match control_plane_principal(self.aws.as_ref()).await {
            Ok(p) => p,
            Err(e) if e.kind == ProviderErrorKind::InvalidRequest => {
                return Err(ValidationError::unprocessable("eks_cluster", e.message).into());
            }
            Err(e) => return Err(e.into()),
        };
        let existing = read(|| self.aws.describe_access_entry(&req.region, &req.eks_cluster, &principal)).await?;
        let mode = eks.authentication_mode.clone().unwrap_or_else(|| "API_AND_CONFIG_MAP".into());
        let consent = eks.tags.get(TAG_IMPORT).is_some_and(|v| v == IMPORT_ALLOWED);
        let mut checks = vec![access_check(&req.eks_cluster, &principal, existing.as_ref(), &mode, consent)];
        if let Some(bucket) = &req.bucket
            && let Some(b) = super::steps::user_named_bucket(self.aws.as_ref(), "bucket", bucket).await?
            && b.region != req.region
        {
            return Err(ValidationError::unprocessable(
                "bucket",
                format!(
                    "S3 bucket {bucket} is in {}, not in the cluster's region {}; name a bucket in {}",
                    b.region, req.region, req.region
                ),
            )
            .into());
        }
        let (present, dependency_checks) = self.dependency_checks(&req, existing.is_some()).await?;
        checks.extend(dependency_checks);
        req.present = present;
        req.control_plane_principal = Some(principal);
        Ok(Assessment {
            plan: None,
            checks,
            reduced_request: Some(serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?),
        })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: ImportClusterRequest = decode(request).ok()?;
        if key == ACCESS_ENTRY_STEP {
            return Some(Arc::new(AccessEntryStep {
                region: req.region.clone(),
                eks_cluster: req.eks_cluster.clone(),
                owner: req.name.clone(),
                principal: req.control_plane_principal.clone(),
                aws: self.aws.clone(),
            }));
        }
        if key == "bucket" {
            let name = req.bucket.clone()?;
            return Some(Arc::new(ImportBucketStep {
                aws: self.aws.clone(),
                region: req.region,
                owner: req.name,
                name,
            }));
        }
        if let Some(step) = self.dependencies(&req).executor(key) {
            return Some(step);
        }
        let which = match key {
            "eks_cluster" => Check::Eks,
            "hyperpod_cluster" => Check::HyperPod,
            "register" => Check::Register,
            _ => return None,
        };
        Some(Arc::new(ImportStep { req, which, aws: self.aws.clone(), store: self.store.clone() }))
    }
}

/// The preflight check of the control plane's access: mapped already, to be mapped, or (a
/// `CONFIG_MAP`-only cluster, which takes no access entries) refused with what to change.
fn access_check(
    cluster: &str,
    principal: &str,
    existing: Option<&AccessEntry>,
    mode: &str,
    consent: bool,
) -> PreflightCheck {
    let (status, detail, remedy) = match existing {
        Some(e) => (
            CheckStatus::Pass,
            format!(
                "{principal} already has an access entry on {cluster} ({}); it is used as it is",
                if e.policies.is_empty() {
                    "no access policies: its Kubernetes RBAC decides".to_string()
                } else {
                    e.policies
                        .iter()
                        .map(|p| p.policy_arn.rsplit('/').next().unwrap_or(&p.policy_arn))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            None,
        ),
        None if mode == CONFIG_MAP_ONLY => (
            CheckStatus::Fail,
            format!(
                "EKS cluster {cluster} authenticates through the aws-auth ConfigMap only (authentication mode \
                 CONFIG_MAP), so InstantStart cannot give {principal} access with an access entry"
            ),
            Some(format!(
                "switch the cluster to API_AND_CONFIG_MAP (aws eks update-cluster-config --name {cluster} \
                 --access-config authenticationMode=API_AND_CONFIG_MAP; existing aws-auth mappings keep working), \
                 or create an access entry for {principal} yourself, then import again"
            )),
        ),
        // The owner's consent, which IAM requires too (deployment template, EksImportAccessEntry).
        None if !consent => (
            CheckStatus::Fail,
            format!(
                "EKS cluster {cluster} does not carry the tag {TAG_IMPORT}={IMPORT_ALLOWED}, and {principal} has no access \
                 entry there: the control plane may give itself access only to clusters whose owner allowed it"
            ),
            Some(format!(
                "as the cluster's owner, tag it (aws eks tag-resource --resource-arn <the cluster's ARN> --tags \
                 {TAG_IMPORT}={IMPORT_ALLOWED}) or create an access entry for {principal} yourself, then import again"
            )),
        ),
        None => (
            CheckStatus::Pass,
            format!(
                "an access entry for {principal} (AmazonEKSClusterAdminPolicy, cluster scope) will be created on {cluster}, \
                 whose owner allowed it ({TAG_IMPORT}={IMPORT_ALLOWED})"
            ),
            None,
        ),
    };
    PreflightCheck { check: "access_entry".into(), field: "eks_cluster".into(), status, detail, remedy }
}

/// `access_entry`: the control plane's principal gets cluster-admin access through an EKS
/// access entry tagged as ours, unless an entry maps it already (adopted as it is).
struct AccessEntryStep {
    region: String,
    eks_cluster: String,
    /// The InstantStart cluster name (the entry's ownership tag).
    owner: String,
    principal: Option<String>,
    aws: Arc<dyn AwsCloud>,
}

impl AccessEntryStep {
    async fn principal(&self) -> Result<String, StepError> {
        match &self.principal {
            Some(p) => Ok(p.clone()),
            None => control_plane_principal(self.aws.as_ref()).await.map_err(StepError::from),
        }
    }
}

#[async_trait]
impl StepExecutor for AccessEntryStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let principal = self.principal().await?;
        Ok(match self.aws.describe_access_entry(&self.region, &self.eks_cluster, &principal).await? {
            Some(e) => Observation::Exists(ResourceRef { kind: "access-entry".into(), id: e.principal_arn, arn: None }),
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let principal = self.principal().await?;
        let e = self
            .aws
            .ensure_access_entry(&EnsureAccessEntry {
                region: self.region.clone(),
                cluster: self.eks_cluster.clone(),
                principal_arn: principal,
                kind: "STANDARD".into(),
                policies: vec![AccessPolicy { policy_arn: CLUSTER_ADMIN_POLICY.into(), namespaces: Vec::new() }],
                client_request_token: cx.idempotency_token.to_string(),
                tags: ownership_tags(&self.owner, &cx.operation_id.0),
            })
            .await?;
        Ok(ResourceRef { kind: "access-entry".into(), id: e.principal_arn, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(e) = self.aws.describe_access_entry(&self.region, &self.eks_cluster, &r.id).await? else {
            return Ok(Progress::Waiting { detail: "the access entry is not visible yet".into() });
        };
        Ok(Progress::Done(json!({
            "principal_arn": e.principal_arn,
            "created": is_owned(&e.tags, &self.owner),
            "policies": e.policies.iter().map(|p| p.policy_arn.clone()).collect::<Vec<_>>(),
        })))
    }
}

/// Delete-cluster's `access_entry` step for an imported cluster: removes the access entry the
/// import created (tagged as ours); an entry someone else made is left as it is.
pub struct RemoveAccessEntry {
    pub aws: Arc<dyn AwsCloud>,
    pub region: String,
    pub eks_cluster: String,
    /// The InstantStart cluster name (the entry's ownership tag).
    pub owner: String,
}

#[async_trait]
impl StepExecutor for RemoveAccessEntry {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let principal = control_plane_principal(self.aws.as_ref()).await?;
        let done = ResourceRef { kind: "access-entry".into(), id: principal.clone(), arn: None };
        match self.aws.describe_access_entry(&self.region, &self.eks_cluster, &principal).await {
            Ok(Some(e)) if is_owned(&e.tags, &self.owner) => Ok(Observation::Absent),
            // Not ours (it mapped us before the import): left as it is.
            Ok(_) => Ok(Observation::Exists(done)),
            // The EKS cluster is gone: so is the entry.
            Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(Observation::Exists(done)),
            Err(e) => Err(e.into()),
        }
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let principal = control_plane_principal(self.aws.as_ref()).await?;
        match self.aws.delete_access_entry(&self.region, &self.eks_cluster, &principal).await {
            Ok(()) => {}
            Err(e) if e.kind == ProviderErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        Ok(ResourceRef { kind: "access-entry".into(), id: principal, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.aws.describe_access_entry(&self.region, &self.eks_cluster, &r.id).await {
            Ok(Some(_)) => Progress::Waiting { detail: format!("access entry of {}: deleting", r.id) },
            Ok(None) => Progress::Done(json!({ "deleted": r.id })),
            Err(e) if e.kind == ProviderErrorKind::NotFound => Progress::Done(json!({ "deleted": r.id })),
            Err(e) => return Err(e.into()),
        })
    }
}

/// `bucket`: the named bucket, used as it is when it exists (it is the user's), created (with
/// our ownership tags, encrypted, public access blocked) when it does not.
pub(super) struct ImportBucketStep {
    pub(super) aws: Arc<dyn AwsCloud>,
    pub(super) region: String,
    /// The InstantStart cluster name (ownership tags of a bucket we create).
    pub(super) owner: String,
    pub(super) name: String,
}

#[async_trait]
impl StepExecutor for ImportBucketStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.aws.describe_bucket(&self.name).await? {
            Some(b) => Observation::Exists(ResourceRef { kind: "s3-bucket".into(), id: b.name, arn: None }),
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let b = self
            .aws
            .create_bucket(&CreateBucket {
                region: self.region.clone(),
                name: self.name.clone(),
                tags: ownership_tags(&self.owner, &cx.operation_id.0),
            })
            .await?;
        Ok(ResourceRef { kind: "s3-bucket".into(), id: b.name, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.aws.describe_bucket(&r.id).await? {
            Some(b) if b.region != self.region => {
                Progress::Failed { reason: format!("S3 bucket {} is in {}, not in {}", b.name, b.region, self.region) }
            }
            Some(b) => Progress::Done(json!({ "bucket": b.name, "owned": is_owned(&b.tags, &self.owner) })),
            None => Progress::Waiting { detail: format!("waiting for S3 bucket {} to become visible", r.id) },
        })
    }
}

enum Check {
    Eks,
    HyperPod,
    Register,
}

struct ImportStep {
    req: ImportClusterRequest,
    which: Check,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

#[async_trait]
impl StepExecutor for ImportStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let r = &self.req;
        match &self.which {
            Check::Eks => match self.aws.describe_eks_cluster(&r.region, &r.eks_cluster).await? {
                Some(c) => {
                    Ok(Observation::Exists(ResourceRef { kind: "eks-cluster".into(), id: c.name, arn: Some(c.arn) }))
                }
                None => Err(StepError::Invalid(format!("EKS cluster {} not found in {}", r.eks_cluster, r.region))),
            },
            Check::HyperPod => {
                let name = r.hyperpod_cluster.clone().unwrap_or_default();
                match self.aws.describe_hyperpod_cluster(&r.region, &name).await? {
                    Some(c) => Ok(Observation::Exists(ResourceRef {
                        kind: "hyperpod-cluster".into(),
                        id: c.name,
                        arn: Some(c.arn),
                    })),
                    None => Err(StepError::Invalid(format!("HyperPod cluster {name} not found in {}", r.region))),
                }
            }
            Check::Register => Ok(Observation::Absent),
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let r = &self.req;
        let now = chrono::Utc::now();
        let vpc_id: Option<String> =
            cx.inputs.get("eks_cluster").and_then(|o| o.get("vpc_id")).and_then(Value::as_str).map(str::to_string);
        let version =
            cx.inputs.get("eks_cluster").and_then(|o| o.get("version")).and_then(Value::as_str).map(str::to_string);
        self.store
            .put_cluster(&ClusterRecord {
                name: r.name.clone(),
                region: r.region.clone(),
                source: ClusterSource::Imported,
                eks_cluster: r.eks_cluster.clone(),
                hyperpod_cluster: r.hyperpod_cluster.clone(),
                vpc_id,
                bucket: r.bucket.clone(),
                kubernetes_version: version,
                request: None,
                created_at: now,
                updated_at: now,
            })
            .map_err(|e| StepError::Invalid(e.to_string()))?;
        Ok(ResourceRef { kind: "registry".into(), id: r.name.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, res: &ResourceRef) -> Result<Progress, StepError> {
        let r = &self.req;
        match &self.which {
            Check::Eks => {
                let Some(c) = self.aws.describe_eks_cluster(&r.region, &res.id).await? else {
                    return Ok(Progress::Failed { reason: format!("EKS cluster {} disappeared", res.id) });
                };
                Ok(match c.state {
                    ResourceState::Active => {
                        Progress::Done(json!({ "arn": c.arn, "vpc_id": c.vpc_id, "version": c.version }))
                    }
                    ResourceState::Failed { reason } => Progress::Failed { reason },
                    other => Progress::Failed {
                        reason: format!("EKS cluster {} is {other:?}; import it once it is active", c.name),
                    },
                })
            }
            Check::HyperPod => {
                let Some(c) = self.aws.describe_hyperpod_cluster(&r.region, &res.id).await? else {
                    return Ok(Progress::Failed { reason: format!("HyperPod cluster {} disappeared", res.id) });
                };
                Ok(Progress::Done(json!({ "arn": c.arn, "state": c.state })))
            }
            Check::Register => Ok(Progress::Done(json!({ "name": r.name }))),
        }
    }
}

//! HyperPod on an existing EKS-only cluster: add a HyperPod cluster to a managed cluster that
//! has none (a cluster created without `hyperpod`, or an imported EKS-only cluster), and remove
//! it again, leaving EKS and its add-ons.
//!
//! ```text
//! eks_cluster (ACTIVE; its VPC, security group) ─┬─> addon:*, chart:hyperpod-dependencies ─┐
//!                                                 └─> compute_subnets ───────────────────────┤
//! bucket ─┬─> hyperpod_execution_role ───────────────────────────────────────────────────────┼─> hyperpod_cluster ─┐
//!         └─> lifecycle_script ─────────────────────────────────────────────────────────────┘                     │
//! bucket, eks_cluster ─> (s3_csi_role ─> s3_csi_identity ─> addon:aws-mountpoint-s3-csi-driver) ─> storage ─────────┤
//!                                                                                                    record <────┘
//! ```
//!
//! Removal: `hyperpod_cluster` → `chart:hyperpod-dependencies` (when InstantStart installed it),
//! `hyperpod_execution_role`, `compute_subnets` → `record`.
//!
//! # Guarantees
//!
//! - The steps and executors are create-cluster's (`hyperpod_execution_role`,
//!   `lifecycle_script`, `compute_subnets`, `hyperpod_cluster`,
//!   [`super::create_cluster::hyperpod_executor`]), the dependency planner and executors are
//!   [`super::dependencies`]' and the removal steps are delete-cluster's
//!   ([`super::delete_cluster::hyperpod_removal_executor`]): the three paths cannot drift. The
//!   HyperPod cluster is named like a created one (`<cluster>-hp`) and tagged as ours.
//! - Before anything is recorded: an unknown cluster is a 404; a cluster that has a HyperPod
//!   cluster already is a 409 (and removal of a cluster without one); the spec is judged by
//!   create's validator ([`crate::spec::validate_hyperpod_in_region`], 400 naming
//!   `hyperpod.…`); a cluster without a bucket must name one (`bucket`, create's naming rule,
//!   in the cluster's region); the EKS cluster must be ACTIVE, on a Kubernetes version HyperPod
//!   supports and in an authentication mode HyperPod accepts (`API` or `API_AND_CONFIG_MAP`;
//!   422 each); the name `<cluster>-hp` must be free (a HyperPod cluster of that name that is
//!   not ours is a 409); quotas, offerings, training plans, lifecycle scripts and free address
//!   space for the compute subnets are create's preflight checks.
//! - Placement uses the EKS cluster's own VPC (read from EKS), its security group the
//!   network's InstantStart security group when there is one, else the EKS cluster security
//!   group — what a later added instance group gets too (`day2::group_context`).
//! - Every step observes before it submits (by deterministic name and our tags): a kill -9 at
//!   any point resumes with no second create. The record says the cluster has HyperPod only in
//!   the last step (`record`), after the HyperPod cluster is InService.
//! - Removal refuses (409) while a managed feature that lives on HyperPod is on (training or
//!   inference operator, tiered checkpointing, managed autoscaling: switch them off first, which
//!   removes their roles), and refuses (422) a HyperPod cluster InstantStart did not create (an
//!   imported one). It deletes only what carries our tags; the EKS cluster, its add-ons, the
//!   bucket and the storage claim stay; the record then says EKS-only.

use super::charts::{CHART_STEP_PREFIX, RemoveChart, chart_step_key};
use super::dependencies::{
    DependencyPlan, DependencyProviders, DependencyTarget, S3_CSI_ADDON, Wanted, addon_step_key,
    installed_dependencies, plan_dependencies, storage_step,
};
use super::import_cluster::ImportBucketStep;
use super::{cluster_target, decode, update_record};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::names::{self, DerivedNames};
use crate::operation::{OperationKind, OperationStatus, ResourceRef, StepSpec};
use crate::preflight::{GroupToCheck, check_address_space, check_groups, check_lifecycle_script};
use crate::provider::*;
use crate::spec::{
    ClusterCreateRequest, DEFAULT_MOUNT_PATH, HYPERPOD_KUBERNETES_VERSIONS, HyperPodClusterSpec, NetworkSpec,
    StorageSpec, check_bucket_covered_at, validate_hyperpod_in_region,
};
use crate::store::{ClusterRecord, OperationFilter, Store};
use crate::validate::{Findings, ValidationError};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The step that records the change in the cluster record (last in both workflows).
pub const RECORD_STEP: &str = "record";

/// The body of `POST /api/clusters/{cluster}/hyperpod`: the HyperPod part of a create request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddHyperPodBody {
    /// The HyperPod cluster, exactly as in a create request's `hyperpod`.
    pub hyperpod: HyperPodClusterSpec,
    /// S3 bucket for the lifecycle script and the `s3-shared` claim, when the cluster has none
    /// yet (an imported EKS-only cluster); create's naming rule, in the cluster's region
    /// (created when missing). A cluster with a bucket uses its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
}

/// Request to add a HyperPod cluster to an EKS-only managed cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddHyperPodRequest {
    /// The InstantStart cluster (over REST: from the path).
    pub cluster: String,
    pub hyperpod: HyperPodClusterSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// Step keys of the dependencies the assessment found installed (left alone, no step).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(skip)]
    pub present: Vec<String>,
}

impl AddHyperPodBody {
    pub fn into_request(self, cluster: String) -> AddHyperPodRequest {
        AddHyperPodRequest { cluster, hyperpod: self.hyperpod, bucket: self.bucket, present: Vec::new() }
    }
}

/// Request to remove a cluster's HyperPod cluster (`DELETE /api/clusters/{cluster}/hyperpod`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoveHyperPodRequest {
    /// The InstantStart cluster.
    pub cluster: String,
}

fn step(key: &str, title: String, deps: &[&str], secs: u64) -> StepSpec {
    StepSpec {
        key: key.into(),
        title,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected_secs: Some(secs),
    }
}

fn cluster_record(store: &dyn Store, name: &str) -> Result<ClusterRecord, EngineError> {
    Ok(crate::api::clusters::resolve(store, name)?.record)
}

/// The mount path of the cluster's claim (a created cluster's request, else the default).
fn mount_path(rec: &ClusterRecord) -> String {
    rec.request
        .as_ref()
        .and_then(|r| r.storage.as_ref())
        .map(|s| s.mount_path.clone())
        .unwrap_or_else(|| DEFAULT_MOUNT_PATH.into())
}

/// The add-HyperPod workflow.
pub struct AddHyperPodWorkflow(DependencyProviders);

impl std::ops::Deref for AddHyperPodWorkflow {
    type Target = DependencyProviders;
    fn deref(&self) -> &DependencyProviders {
        &self.0
    }
}

impl AddHyperPodWorkflow {
    pub fn new(providers: DependencyProviders) -> Self {
        AddHyperPodWorkflow(providers)
    }

    fn dependencies(&self, rec: &ClusterRecord) -> DependencyTarget {
        self.target(&rec.region, &rec.eks_cluster, &rec.name, mount_path(rec))
    }

    /// The checks of `prepare`: the record, its state and the request's findings. Returns the
    /// record and the bucket the HyperPod cluster will use.
    fn check(&self, req: &AddHyperPodRequest) -> Result<(ClusterRecord, String), EngineError> {
        let rec = cluster_record(self.store.as_ref(), &req.cluster)?;
        if let Some(hp) = &rec.hyperpod_cluster {
            return Err(EngineError::InvalidState(format!(
                "cluster {} already has HyperPod cluster {hp}; remove it first (DELETE /api/clusters/{}/hyperpod)",
                rec.name, rec.name
            )));
        }
        let mut f = Findings::new();
        f.at("hyperpod", |f| validate_hyperpod_in_region(&req.hyperpod, &rec.region, true, f));
        let bucket = match (&req.bucket, &rec.bucket) {
            (Some(named), Some(own)) if named != own => {
                f.push_unprocessable(
                    "bucket",
                    format!("cluster {} already has bucket {own}; omit bucket (or name {own})", rec.name),
                );
                None
            }
            (Some(named), _) => {
                match names::s3_bucket_name(named) {
                    Ok(()) => check_bucket_covered_at("bucket", named, self.shared_bucket.as_deref(), &mut f),
                    Err(rule) => f.push("bucket", rule),
                }
                Some(named.clone())
            }
            (None, Some(own)) => Some(own.clone()),
            (None, None) => {
                f.push_unprocessable(
                    "bucket",
                    format!(
                        "cluster {} has no bucket: name one (is-… or the management environment's shared bucket) \
                         for the lifecycle script and the s3-shared claim",
                        rec.name
                    ),
                );
                None
            }
        };
        f.finish()?;
        Ok((rec, bucket.unwrap_or_default()))
    }

    /// The synthetic create request whose HyperPod steps this operation runs.
    fn create_request(rec: &ClusterRecord, req: &AddHyperPodRequest, bucket: &str) -> ClusterCreateRequest {
        ClusterCreateRequest {
            name: rec.name.clone(),
            region: rec.region.clone(),
            kubernetes_version: rec.kubernetes_version.clone().unwrap_or_default(),
            network: NetworkSpec::ExistingVpc { vpc_id: rec.vpc_id.clone().unwrap_or_default(), subnet_ids: vec![] },
            availability_zones: vec![],
            hyperpod: Some(req.hyperpod.clone()),
            storage: Some(StorageSpec { bucket: Some(bucket.to_string()), mount_path: mount_path(rec) }),
            public_access_cidrs: vec![],
        }
    }
}

/// Lays out add-HyperPod's steps for `rec` (bucket `bucket`, dependencies `present` left alone).
pub fn plan_add(rec: &ClusterRecord, req: &AddHyperPodRequest, bucket: &str, charts: &[PinnedChart]) -> Vec<StepSpec> {
    let names = DerivedNames::for_cluster(&rec.name);
    let mut steps = vec![
        step(
            "eks_cluster",
            format!("Check EKS cluster {} is ACTIVE and read its VPC and security group", rec.eks_cluster),
            &[],
            2,
        ),
        step(
            "bucket",
            format!("Use S3 bucket {bucket} (created, encrypted and private, if it does not exist)"),
            &[],
            5,
        ),
    ];
    let deps = plan_dependencies(
        &DependencyPlan {
            cluster: &rec.name,
            ready: "eks_cluster",
            bucket: true,
            hyperpod: true,
            present: &req.present,
        },
        charts,
    );
    steps.extend(deps.steps);
    steps.push(step(
        "hyperpod_execution_role",
        format!("Create IAM role {} for HyperPod nodes", names.hyperpod_execution_role),
        &["bucket"],
        10,
    ));
    steps.push(step(
        "lifecycle_script",
        format!(
            "Upload InstantStart's lifecycle script to the bucket as {} (content-addressed; groups without their own script run it)",
            crate::lifecycle::script_key()
        ),
        &["bucket"],
        2,
    ));
    steps.push(step(
        "compute_subnets",
        "Place instance groups in the EKS cluster's VPC and create /20 compute subnets".into(),
        &["eks_cluster"],
        10,
    ));
    let mut hp_deps: Vec<&str> = vec!["eks_cluster", "compute_subnets", "hyperpod_execution_role", "lifecycle_script"];
    hp_deps.extend(deps.addon_keys.iter().map(String::as_str));
    hp_deps.extend(deps.before_hyperpod.iter().map(String::as_str));
    let groups: Vec<String> =
        req.hyperpod.instance_groups.iter().map(|g| format!("{} {}×{}", g.name, g.instance_type, g.count)).collect();
    steps.push(step(
        "hyperpod_cluster",
        format!(
            "Create HyperPod cluster {} on EKS cluster {} ({}; node recovery {:?})",
            names.hyperpod_cluster,
            rec.eks_cluster,
            groups.join(", "),
            req.hyperpod.node_recovery
        ),
        &hp_deps,
        900,
    ));
    let mut storage = storage_step(&mount_path(rec), "eks_cluster");
    let driver = addon_step_key(S3_CSI_ADDON);
    storage.depends_on.retain(|d| *d != driver || !req.present.contains(&driver));
    steps.push(storage);
    let all: Vec<String> = steps.iter().map(|s| s.key.clone()).collect();
    let mut record = step(
        RECORD_STEP,
        format!("Record that cluster {} has HyperPod cluster {}", rec.name, names.hyperpod_cluster),
        &[],
        1,
    );
    record.depends_on = all;
    steps.push(record);
    steps
}

#[async_trait]
impl Workflow for AddHyperPodWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::AddHyperPod
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: AddHyperPodRequest = decode(request)?;
        let (rec, bucket) = self.check(&req)?;
        let steps = plan_add(&rec, &req, &bucket, self.charts());
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&rec.name), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: AddHyperPodRequest = decode(&prepared.request)?;
        let (rec, bucket) = self.check(&req)?;
        let region = rec.region.as_str();
        let Some(eks) = read(|| self.aws.describe_eks_cluster(region, &rec.eks_cluster)).await? else {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!("EKS cluster {} of cluster {} was not found in {region}", rec.eks_cluster, rec.name),
            )
            .into());
        };
        if eks.state != ResourceState::Active {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!("EKS cluster {} is {:?}; add HyperPod once it is ACTIVE", eks.name, eks.state),
            )
            .into());
        }
        if !HYPERPOD_KUBERNETES_VERSIONS.contains(&eks.version.as_str()) {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!(
                    "EKS cluster {} runs Kubernetes {}; SageMaker HyperPod supports {} (upgrade the cluster first)",
                    eks.name,
                    eks.version,
                    HYPERPOD_KUBERNETES_VERSIONS.join(", ")
                ),
            )
            .into());
        }
        // sagemaker-hyperpod-eks-prerequisites, "Amazon EKS cluster authentication mode".
        if eks.authentication_mode.as_deref() == Some(CONFIG_MAP_ONLY) {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!(
                    "EKS cluster {} authenticates through the aws-auth ConfigMap only (CONFIG_MAP); SageMaker HyperPod \
                     accepts API or API_AND_CONFIG_MAP: aws eks update-cluster-config --name {} --access-config \
                     authenticationMode=API_AND_CONFIG_MAP",
                    eks.name, eks.name
                ),
            )
            .into());
        }
        let hp_name = DerivedNames::for_cluster(&rec.name).hyperpod_cluster;
        if let Some(c) = read(|| self.aws.describe_hyperpod_cluster(region, &hp_name)).await?
            && !is_owned(&c.tags, &rec.name)
        {
            return Err(EngineError::InvalidState(format!(
                "a HyperPod cluster named {hp_name} already exists in {region} and is not InstantStart's for cluster {}",
                rec.name
            )));
        }
        if let Some(b) = super::steps::user_named_bucket(self.aws.as_ref(), "bucket", &bucket).await?
            && b.region != rec.region
        {
            return Err(ValidationError::unprocessable(
                "bucket",
                format!("S3 bucket {bucket} is in {}, not in the cluster's region {region}", b.region),
            )
            .into());
        }
        let groups: Vec<GroupToCheck<'_>> = req
            .hyperpod
            .instance_groups
            .iter()
            .enumerate()
            .map(|(i, g)| GroupToCheck { field: format!("hyperpod.instance_groups[{i}]"), group: g })
            .collect();
        let mut checks = check_groups(self.aws.as_ref(), region, &groups, &BTreeMap::new()).await?;
        for (i, g) in req.hyperpod.instance_groups.iter().enumerate() {
            if let Some(script) = &g.lifecycle_script {
                let field = format!("hyperpod.instance_groups[{i}].lifecycle_script");
                checks.push(check_lifecycle_script(self.aws.as_ref(), &field, script, Some(&bucket)).await?);
            }
        }
        let mut azs: Vec<&str> = req
            .hyperpod
            .instance_groups
            .iter()
            .filter(|g| g.subnet_id.is_none())
            .map(|g| g.availability_zone.as_str())
            .collect();
        azs.sort();
        azs.dedup();
        let network = read(|| self.aws.describe_network(region, &eks.vpc_id)).await?;
        let prefix = format!("{}-compute-", rec.name);
        let have: usize =
            azs.iter()
                .filter(|az| {
                    network.subnets.iter().any(|s| {
                        s.availability_zone == **az && s.name.as_deref().is_some_and(|n| n.starts_with(&prefix))
                    })
                })
                .count();
        checks.push(check_address_space(
            "hyperpod.instance_groups",
            network.vpc.cidrs.clone(),
            network.subnets.iter().map(|s| s.cidr),
            azs.len() - have,
        ));
        let (present, dependency_checks) = installed_dependencies(
            &self.dependencies(&rec),
            self.charts(),
            &Wanted { bucket: true, hyperpod: true },
            true,
        )
        .await?;
        checks.extend(dependency_checks);
        req.present = present;
        Ok(Assessment {
            plan: None,
            checks,
            reduced_request: Some(serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?),
        })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: AddHyperPodRequest = decode(request).ok()?;
        let rec = self.store.get_cluster(&req.cluster).ok()??;
        let bucket = req.bucket.clone().or_else(|| rec.bucket.clone())?;
        match key {
            "eks_cluster" => {
                return Some(Arc::new(ExistingEksStep {
                    aws: self.aws.clone(),
                    region: rec.region.clone(),
                    eks_cluster: rec.eks_cluster.clone(),
                }));
            }
            "bucket" => {
                return Some(Arc::new(ImportBucketStep {
                    aws: self.aws.clone(),
                    region: rec.region.clone(),
                    owner: rec.name.clone(),
                    name: bucket,
                }));
            }
            RECORD_STEP => return Some(Arc::new(RecordHyperPod { store: self.store.clone(), req, bucket })),
            _ => {}
        }
        let create = Self::create_request(&rec, &req, &bucket);
        if let Some(step) = super::create_cluster::hyperpod_executor(self.aws.clone(), self.store.clone(), create, key)
        {
            return Some(step);
        }
        self.dependencies(&rec).executor(key)
    }
}

/// `eks_cluster`: the existing EKS cluster must be ACTIVE; its ARN, VPC and the security group
/// HyperPod's groups get (the network's InstantStart group, else the EKS cluster security
/// group) are the outputs the HyperPod steps read.
struct ExistingEksStep {
    aws: Arc<dyn AwsCloud>,
    region: String,
    eks_cluster: String,
}

#[async_trait]
impl StepExecutor for ExistingEksStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        match self.aws.describe_eks_cluster(&self.region, &self.eks_cluster).await? {
            Some(c) => {
                Ok(Observation::Exists(ResourceRef { kind: "eks-cluster".into(), id: c.name, arn: Some(c.arn) }))
            }
            None => Err(StepError::Invalid(format!("EKS cluster {} not found in {}", self.eks_cluster, self.region))),
        }
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        Err(StepError::Invalid(format!("EKS cluster {} not found in {}", self.eks_cluster, self.region)))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let Some(c) = self.aws.describe_eks_cluster(&self.region, &r.id).await? else {
            return Ok(Progress::Failed { reason: format!("EKS cluster {} disappeared", r.id) });
        };
        if c.state != ResourceState::Active {
            return Ok(Progress::Failed {
                reason: format!("EKS cluster {} is {:?}; add HyperPod once it is ACTIVE", c.name, c.state),
            });
        }
        let network = self.aws.describe_network(&self.region, &c.vpc_id).await?;
        let Some(sg) = network.security_group_id.or(c.security_group_id) else {
            return Ok(Progress::Failed {
                reason: format!(
                    "EKS cluster {} reports no cluster security group and VPC {} has none of InstantStart's",
                    c.name, c.vpc_id
                ),
            });
        };
        Ok(Progress::Done(json!({
            "arn": c.arn,
            "name": c.name,
            "vpc_id": c.vpc_id,
            "security_group_id": sg,
            "version": c.version,
        })))
    }
}

/// `record`: the cluster record says it has the HyperPod cluster (and the bucket, the VPC, and
/// for a created cluster the spec in its request). Idempotent: setting the same values twice
/// is the same record.
struct RecordHyperPod {
    store: Arc<dyn Store>,
    req: AddHyperPodRequest,
    bucket: String,
}

#[async_trait]
impl StepExecutor for RecordHyperPod {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(Observation::Absent)
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let name = cx.input_str("hyperpod_cluster", "name")?;
        let vpc_id = cx.input_str("eks_cluster", "vpc_id")?;
        let (hp, bucket) = (name.clone(), self.bucket.clone());
        let spec = self.req.hyperpod.clone();
        update_record(self.store.as_ref(), &self.req.cluster, move |rec| {
            rec.hyperpod_cluster = Some(hp);
            rec.bucket = Some(bucket.clone());
            rec.vpc_id.get_or_insert(vpc_id);
            if let Some(r) = rec.request.as_mut() {
                r.hyperpod = Some(spec);
                let storage = r
                    .storage
                    .get_or_insert_with(|| StorageSpec { bucket: None, mount_path: DEFAULT_MOUNT_PATH.into() });
                storage.bucket.get_or_insert(bucket);
            }
        })
        .map_err(|e| StepError::Invalid(e.to_string()))?;
        Ok(ResourceRef { kind: "registry".into(), id: name, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(Progress::Done(json!({ "cluster": self.req.cluster, "hyperpod_cluster": r.id })))
    }
}

/// The remove-HyperPod workflow.
pub struct RemoveHyperPodWorkflow {
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
    helm: Option<Arc<dyn HelmReleases>>,
}

impl RemoveHyperPodWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, kube: Arc<dyn KubeApi>, store: Arc<dyn Store>) -> Self {
        RemoveHyperPodWorkflow { aws, kube, store, helm: None }
    }

    /// Uninstalls the HyperPod dependencies chart when InstantStart installed it.
    pub fn with_helm(mut self, helm: Option<Arc<dyn HelmReleases>>) -> Self {
        self.helm = helm;
        self
    }

    fn check(&self, req: &RemoveHyperPodRequest) -> Result<(ClusterRecord, String), EngineError> {
        let rec = cluster_record(self.store.as_ref(), &req.cluster)?;
        let Some(hp) = rec.hyperpod_cluster.clone() else {
            return Err(EngineError::InvalidState(format!(
                "cluster {} has no HyperPod cluster (it is EKS-only); add one with POST /api/clusters/{}/hyperpod",
                rec.name, rec.name
            )));
        };
        Ok((rec, hp))
    }

    /// Whether InstantStart installed the HyperPod dependencies chart: the newest successful
    /// add-HyperPod ran its step without finding a release there; without one, a created
    /// cluster's pipeline installed it.
    fn installed_chart(&self, rec: &ClusterRecord) -> Result<bool, EngineError> {
        if self.helm.is_none() {
            return Ok(false);
        }
        let key = chart_step_key(&HYPERPOD_DEPENDENCIES);
        let ops = self.store.list_operations(&OperationFilter {
            target: Some(cluster_target(&rec.name)),
            status: Some(OperationStatus::Succeeded),
            limit: None,
            archived: None,
        })?;
        if let Some(op) = ops.into_iter().find(|o| o.kind == OperationKind::AddHyperPod) {
            return Ok(op
                .steps
                .iter()
                .any(|s| s.key == key && s.outputs.get("left_alone") != Some(&Value::Bool(true))));
        }
        Ok(rec.source == crate::store::ClusterSource::Created)
    }
}

/// Lays out remove-HyperPod's steps (`chart`: uninstall the HyperPod dependencies chart too).
pub fn plan_remove(rec: &ClusterRecord, hp: &str, chart: bool) -> Vec<StepSpec> {
    let names = DerivedNames::for_cluster(&rec.name);
    let mut steps = vec![step("hyperpod_cluster", format!("Delete HyperPod cluster {hp}"), &[], 600)];
    if chart {
        let c = &HYPERPOD_DEPENDENCIES;
        steps.push(step(
            &chart_step_key(c),
            format!("Uninstall Helm release {}/{} (InstantStart installed it for HyperPod)", c.namespace, c.release),
            &["hyperpod_cluster"],
            30,
        ));
    }
    steps.push(step(
        "hyperpod_execution_role",
        format!("Delete IAM role {}", names.hyperpod_execution_role),
        &["hyperpod_cluster"],
        5,
    ));
    steps.push(step(
        "compute_subnets",
        "Delete the compute subnets InstantStart created".into(),
        &["hyperpod_cluster"],
        10,
    ));
    let all: Vec<String> = steps.iter().map(|s| s.key.clone()).collect();
    let mut record = step(
        RECORD_STEP,
        format!("Record that cluster {} is EKS-only (EKS, its add-ons, the bucket and the claim stay)", rec.name),
        &[],
        1,
    );
    record.depends_on = all;
    steps.push(record);
    steps
}

#[async_trait]
impl Workflow for RemoveHyperPodWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::RemoveHyperPod
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: RemoveHyperPodRequest = decode(request)?;
        let (rec, hp) = self.check(&req)?;
        let steps = plan_remove(&rec, &hp, self.installed_chart(&rec)?);
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&rec.name), request: canonical, steps })
    }

    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let req: RemoveHyperPodRequest = decode(&prepared.request)?;
        let (rec, hp) = self.check(&req)?;
        let Some(live) = read(|| self.aws.describe_hyperpod_cluster(&rec.region, &hp)).await? else {
            return Ok(Assessment::default());
        };
        if !is_owned(&live.tags, &rec.name) {
            return Err(ValidationError::unprocessable(
                "cluster",
                format!(
                    "HyperPod cluster {hp} was not created by InstantStart (it came with the import); it is not \
                     InstantStart's to delete"
                ),
            )
            .into());
        }
        let f = super::features::read_features(self.aws.as_ref(), &rec, &live).await?;
        let mut on = Vec::new();
        if f.training_operator {
            on.push("training_operator");
        }
        if f.inference_operator {
            on.push("inference_operator");
        }
        if f.tiered_checkpointing.is_some() {
            on.push("tiered_checkpointing");
        }
        if f.managed_autoscaling {
            on.push("managed_autoscaling");
        }
        // HyperPod's observability add-on collects HyperPod's metrics, and switching it off is a
        // HyperPod feature change: it goes first.
        if f.observability {
            on.push("observability");
        }
        if !on.is_empty() {
            return Err(EngineError::InvalidState(format!(
                "managed features that live on HyperPod are on ({}); switch them off first (PATCH \
                 /api/clusters/{}/features), which removes their roles, then remove HyperPod",
                on.join(", "),
                rec.name
            )));
        }
        Ok(Assessment::default())
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: RemoveHyperPodRequest = decode(request).ok()?;
        let rec = self.store.get_cluster(&req.cluster).ok()??;
        if key == RECORD_STEP {
            return Some(Arc::new(RecordEksOnly { store: self.store.clone(), cluster: rec.name }));
        }
        if let Some(release) = key.strip_prefix(CHART_STEP_PREFIX) {
            let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
            return Some(Arc::new(RemoveChart { helm: self.helm.clone()?, target, chart: *pinned_chart(release)? }));
        }
        // After `record` ran the record has no HyperPod cluster; the name is deterministic.
        let mut rec = rec;
        rec.hyperpod_cluster.get_or_insert_with(|| DerivedNames::for_cluster(&req.cluster).hyperpod_cluster);
        super::delete_cluster::hyperpod_removal_executor(
            self.aws.clone(),
            self.kube.clone(),
            self.store.clone(),
            rec,
            key,
        )
    }
}

/// `record` of a removal: the cluster is EKS-only again.
struct RecordEksOnly {
    store: Arc<dyn Store>,
    cluster: String,
}

#[async_trait]
impl StepExecutor for RecordEksOnly {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(Observation::Absent)
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        update_record(self.store.as_ref(), &self.cluster, |rec| {
            rec.hyperpod_cluster = None;
            if let Some(r) = rec.request.as_mut() {
                r.hyperpod = None;
            }
        })
        .map_err(|e| StepError::Invalid(e.to_string()))?;
        Ok(ResourceRef { kind: "registry".into(), id: self.cluster.clone(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(Progress::Done(json!({ "cluster": self.cluster, "hyperpod_cluster": null })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::*;
    use crate::store::ClusterSource;

    fn record(source: ClusterSource) -> ClusterRecord {
        ClusterRecord {
            name: "demo".into(),
            region: "us-east-1".into(),
            source,
            eks_cluster: "legacy".into(),
            hyperpod_cluster: None,
            vpc_id: Some("vpc-1".into()),
            bucket: Some("is-demo".into()),
            kubernetes_version: Some("1.33".into()),
            request: None,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    fn request(present: &[&str]) -> AddHyperPodRequest {
        AddHyperPodRequest {
            cluster: "demo".into(),
            hyperpod: HyperPodClusterSpec {
                node_recovery: NodeRecovery::Automatic,
                instance_groups: vec![InstanceGroupSpec {
                    name: "workers".into(),
                    instance_type: "ml.g5.2xlarge".into(),
                    count: 1,
                    availability_zone: "us-east-1a".into(),
                    subnet_id: None,
                    capacity: CapacitySpec::OnDemand,
                    interface_mode: InterfaceMode::Standard,
                    ebs_volume_gb: 500,
                    deep_health_checks: DeepHealthChecks::default(),
                    lifecycle_script: None,
                }],
            },
            bucket: None,
            present: present.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn shape(steps: &[StepSpec]) -> Vec<String> {
        steps.iter().map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", "))).collect()
    }

    #[test]
    fn add_runs_creates_hyperpod_steps_after_what_is_missing() {
        let rec = record(ClusterSource::Imported);
        // Everything but cert-manager and the HyperPod dependencies chart is there already.
        let present = ["addon:vpc-cni", "addon:eks-pod-identity-agent", "addon:aws-mountpoint-s3-csi-driver"];
        let steps = plan_add(&rec, &request(&present), "is-demo", &[HYPERPOD_DEPENDENCIES]);
        assert_eq!(
            shape(&steps),
            [
                "eks_cluster <- []",
                "bucket <- []",
                "addon:cert-manager <- [eks_cluster]",
                "chart:hyperpod-dependencies <- [eks_cluster]",
                "hyperpod_execution_role <- [bucket]",
                "lifecycle_script <- [bucket]",
                "compute_subnets <- [eks_cluster]",
                "hyperpod_cluster <- [eks_cluster, compute_subnets, hyperpod_execution_role, lifecycle_script, addon:cert-manager, chart:hyperpod-dependencies]",
                "storage <- [bucket, eks_cluster]",
                "record <- [eks_cluster, bucket, addon:cert-manager, chart:hyperpod-dependencies, hyperpod_execution_role, lifecycle_script, compute_subnets, hyperpod_cluster, storage]",
            ]
        );
        assert!(steps.iter().any(|s| s.title.contains("demo-hp on EKS cluster legacy")));
        for (i, s) in steps.iter().enumerate() {
            for d in &s.depends_on {
                assert!(steps[..i].iter().any(|p| &p.key == d), "{} depends on later {d}", s.key);
            }
        }
    }

    #[test]
    fn remove_deletes_only_what_hyperpod_needed() {
        let rec = record(ClusterSource::Created);
        assert_eq!(
            shape(&plan_remove(&rec, "demo-hp", true)),
            [
                "hyperpod_cluster <- []",
                "chart:hyperpod-dependencies <- [hyperpod_cluster]",
                "hyperpod_execution_role <- [hyperpod_cluster]",
                "compute_subnets <- [hyperpod_cluster]",
                "record <- [hyperpod_cluster, chart:hyperpod-dependencies, hyperpod_execution_role, compute_subnets]",
            ]
        );
        let keys: Vec<String> = plan_remove(&rec, "demo-hp", false).into_iter().map(|s| s.key).collect();
        assert_eq!(keys, ["hyperpod_cluster", "hyperpod_execution_role", "compute_subnets", "record"]);
    }
}

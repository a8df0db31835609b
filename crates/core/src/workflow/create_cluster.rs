//! The create-cluster pipeline as a DAG.
//!
//! ```text
//! vpc ───────────────────┬─> eks_cluster ─> select_active ─┬─> addon:* ─┬─> hyperpod_cluster
//! eks_cluster_role ──────┘                                  │            └─> storage
//! bucket ─> s3_csi_role ─┬─> s3_csi_identity ─> addon:aws-mountpoint-s3-csi-driver
//! addon:eks-pod-identity-agent ─┘
//!                                                           ├─> chart:hyperpod-dependencies ─> hyperpod_cluster
//!                                                           ├─> chart:kuberay-operator
//!                                                           ├─> chart:keda, chart:prometheus
//!                                                           ├─> oidc_provider ─> lb_controller_role ─> chart:aws-load-balancer-controller
//! bucket ─> hyperpod_execution_role ────────────────────────┼──────────────> hyperpod_cluster
//! bucket ─> lifecycle_script ───────────────────────────────┼──────────────> hyperpod_cluster
//! vpc ─> compute_subnets ───────────────────────────────────┴──────────────> hyperpod_cluster
//! vpc ─> nat_gateway ───────────────────────────────────────────────────────> hyperpod_cluster
//! ```
//!
//! # The network, in two steps
//!
//! `vpc` creates the VPC, its public and private subnets, the internet gateway, the route
//! tables, the EFA security group and the S3 gateway endpoint, and requests the NAT gateway
//! ([`NetworkApi::create_network`]); it is done as soon as those pieces exist. `nat_gateway`
//! then waits, beside the EKS control plane, until the NAT gateway is `available` (about two
//! minutes on AWS). Every edge of the DAG is there for an AWS rule, cited where it is planned
//! ([`plan_steps_with`]); in short: EKS `CreateCluster` needs subnets in two Availability
//! Zones, not a route to the internet, so `eks_cluster` waits for `vpc` only; HyperPod nodes
//! in the private subnets need the NAT gateway to bootstrap, so `hyperpod_cluster` waits for
//! `nat_gateway`. Operations recorded before the split have one `network` step, which keeps
//! its old behaviour (done once the NAT gateway is available); the steps that read the
//! network's outputs read them from `vpc` or, for those operations, from `network`.
//!
//! Roles, the bucket, the lifecycle script and compute subnets run while the EKS control plane
//! is still creating. `lifecycle_script` uploads InstantStart's `on_create.sh`
//! ([`crate::lifecycle`]) to the bucket under its content-addressed key (HeadObject first, so a
//! retry or a resumed step never writes it twice); every group without a `lifecycle_script` of
//! its own is created with it.
//! `chart:<release>` steps install the pinned Helm charts ([`PINNED_CHARTS`]) when the workflow
//! has a Helm provider ([`CreateClusterWorkflow::with_helm`]), in parallel with the add-ons. A
//! chart marked `before_hyperpod` (the HyperPod dependencies chart, which AWS requires before a
//! HyperPod cluster is created) is planned only with a HyperPod cluster, which waits for it.
//! The AWS Load Balancer Controller's chart waits for its IRSA role (`oidc_provider` →
//! `lb_controller_role`; [`super::lb_controller`]).
//! The Mountpoint S3 CSI driver gets its driver-level identity through EKS Pod Identity, the way
//! its v2 documentation recommends for EKS (`docs/CONFIGURATION.md`, "Driver-Level Credentials
//! with EKS Pod Identity": agent installed, an association for `kube-system/s3-csi-driver-sa`):
//! role `<cluster>-s3-csi-role` (trusted by `pods.eks.amazonaws.com`, Mountpoint's documented
//! policy on the cluster's bucket only) associated before the add-on is created, so the driver's
//! pods have credentials from their first start (without it every mount of `s3-shared` fails).
//! The add-ons, the S3 CSI identity, the charts and the storage claim are planned and run by
//! [`super::dependencies`], which import shares.
//! Every resource name derives from the cluster name ([`DerivedNames`]), every resource carries
//! our ownership tags, and "already exists" is adopted only when the tags say it is ours.

use super::dependencies::{self, DependencyPlan, DependencyTarget, plan_dependencies};
use super::steps::{place_groups, poll_role};
use super::{cluster_target, decode, update_record};
use crate::engine::reads::read;
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::names;
use crate::names::DerivedNames;
use crate::operation::{Operation, OperationKind, ResourceRef, StepSpec};
use crate::preflight::{GroupToCheck, check_address_space, check_groups, check_lifecycle_script};
use crate::provider::*;
use crate::spec::{
    ClusterCreateRequest, DEFAULT_MOUNT_PATH, LifecycleScript, NetworkSpec, StorageSpec, check_bucket_covered,
};
use crate::store::{ACTIVE_CLUSTER, ClusterRecord, ClusterSource, Store};
use crate::subnet::{SubnetPlanner, plan_new_vpc};
use crate::validate::ValidationError;
use crate::validate::{Findings, Validate};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use super::dependencies::{
    BASE_ADDONS, S3_CSI_ADDON, S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT, STORAGE_CLAIM, s3_csi_identity, s3_csi_policy,
    s3_csi_role,
};

/// Expected durations at real AWS speed, used for ETAs.
const EXPECTED: &[(&str, u64)] = &[
    ("vpc", 20),
    ("nat_gateway", 130),
    (LEGACY_NETWORK_STEP, 150),
    ("eks_cluster_role", 10),
    ("hyperpod_execution_role", 10),
    ("bucket", 5),
    ("lifecycle_script", 2),
    ("compute_subnets", 10),
    ("eks_cluster", 600),
    ("select_active", 1),
    ("hyperpod_cluster", 900),
];

/// The key of the step that creates the network (VPC, subnets, route tables, security group;
/// the NAT gateway requested, not waited for).
pub const VPC_STEP: &str = "vpc";
/// The key of the step that waits for the new VPC's NAT gateway to become available.
pub const NAT_GATEWAY_STEP: &str = "nat_gateway";
/// The key of the single network step of operations recorded before the network was split in
/// [`VPC_STEP`] and [`NAT_GATEWAY_STEP`]; its executor still creates the network and waits for
/// the NAT gateway, so such operations resume after an upgrade.
pub const LEGACY_NETWORK_STEP: &str = "network";
/// The VPC CNI add-on's step: the one add-on HyperPod requires before CreateCluster.
const VPC_CNI_STEP: &str = "addon:vpc-cni";

fn expected(key: &str) -> Option<u64> {
    if let Some(secs) = dependencies::expected_secs(key) {
        return Some(secs);
    }
    EXPECTED.iter().find(|(k, _)| *k == key).map(|(_, s)| *s)
}

/// The management environment's shared bucket (server option `--shared-bucket`): the bucket
/// the deployment template creates and mounts in the management instance at the pods' mount
/// path. It is the default `storage.bucket` of every cluster created in `region`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedBucket {
    pub name: String,
    pub region: String,
}

/// The create-cluster workflow.
pub struct CreateClusterWorkflow {
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
    helm: Option<Arc<dyn HelmReleases>>,
    shared_bucket: Option<SharedBucket>,
}

impl CreateClusterWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, kube: Arc<dyn KubeApi>, store: Arc<dyn Store>) -> Self {
        CreateClusterWorkflow { aws, kube, store, helm: None, shared_bucket: None }
    }

    /// Makes `bucket` the default `storage.bucket` of clusters created in its region (filled
    /// in before validation, so the plan and the recorded request name it).
    pub fn with_shared_bucket(mut self, bucket: Option<SharedBucket>) -> Self {
        self.shared_bucket = bucket;
        self
    }

    /// Installs the pinned Helm charts ([`PINNED_CHARTS`]) through `helm` (`chart:<release>`
    /// steps). Without it the pipeline has no chart steps.
    pub fn with_helm(mut self, helm: Arc<dyn HelmReleases>) -> Self {
        self.helm = Some(helm);
        self
    }

    /// The executors of the dependency steps (add-ons, charts, S3 CSI identity, storage).
    fn dependencies(&self, req: &ClusterCreateRequest) -> DependencyTarget {
        DependencyTarget {
            aws: self.aws.clone(),
            kube: self.kube.clone(),
            helm: self.helm.clone(),
            region: req.region.clone(),
            eks_cluster: DerivedNames::for_cluster(&req.name).eks_cluster,
            cluster: req.name.clone(),
            mount_path: mount_path(req),
            adopt_present: false,
        }
    }

    fn charts(&self) -> &'static [PinnedChart] {
        if self.helm.is_some() { PINNED_CHARTS } else { &[] }
    }
}

fn step(key: &str, title: String, deps: &[&str]) -> StepSpec {
    StepSpec {
        key: key.into(),
        title,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected_secs: expected(key),
    }
}

/// Lays out the steps of a validated request (without chart steps).
pub fn plan_steps(req: &ClusterCreateRequest) -> Vec<StepSpec> {
    plan_steps_with(req, &[])
}

/// Lays out the steps of a validated request, with a `chart:<release>` step per chart.
pub fn plan_steps_with(req: &ClusterCreateRequest, charts: &[PinnedChart]) -> Vec<StepSpec> {
    let names = DerivedNames::for_cluster(&req.name);
    let mut steps = Vec::new();
    steps.push(match &req.network {
        NetworkSpec::NewVpc { cidr } => step(
            VPC_STEP,
            format!(
                "Create VPC {} ({cidr}) with public and private subnets in {}, route tables and the EFA security group; request the NAT gateway",
                names.vpc,
                req.availability_zones.join(", ")
            ),
            &[],
        ),
        NetworkSpec::ExistingVpc { vpc_id, .. } => step(VPC_STEP, format!("Use existing VPC {vpc_id}"), &[]),
    });
    if matches!(req.network, NetworkSpec::NewVpc { .. }) {
        // A NAT gateway becomes `available` about two minutes after CreateNatGateway (EC2
        // `NatGateway.State`: "pending: not ready to process traffic"); only what needs the
        // private subnets' route to the internet waits for it.
        steps.push(step(
            NAT_GATEWAY_STEP,
            format!("Wait for the NAT gateway of {} (the private subnets' route to the internet)", names.vpc),
            &[VPC_STEP],
        ));
    }
    steps.push(step(
        "eks_cluster_role",
        format!("Create IAM role {} for the EKS control plane", names.eks_cluster_role),
        &[],
    ));
    let bucket_title = match req.storage.as_ref().and_then(|s| s.bucket.as_ref()) {
        Some(b) => format!("Create or adopt S3 bucket {b} (encrypted, public access blocked)"),
        None => {
            format!("Create S3 bucket is-{}-<account>-<region digest> (encrypted, public access blocked)", req.name)
        }
    };
    steps.push(step("bucket", bucket_title, &[]));
    // EKS CreateCluster: "subnetIds" in at least two Availability Zones and the cluster role
    // (API reference CreateCluster, `resourcesVpcConfig`, `roleArn`; user guide
    // `network-reqs`: subnets in two AZs with available IP addresses). The control plane needs
    // no route to the internet from those subnets, so it does not wait for the NAT gateway.
    steps.push(step(
        "eks_cluster",
        format!("Create EKS control plane {} (Kubernetes {})", names.eks_cluster, req.kubernetes_version),
        &[VPC_STEP, "eks_cluster_role"],
    ));
    // Selecting the cluster needs its record only; the add-ons and charts after it need the
    // control plane ACTIVE (EKS CreateAddon: "The cluster must be ACTIVE"), which this step
    // inherits from `eks_cluster`; it takes no time, so keeping it as their gate costs nothing.
    steps.push(step("select_active", format!("Select {} as the active cluster", req.name), &["eks_cluster"]));
    let deps = plan_dependencies(
        &DependencyPlan {
            cluster: &req.name,
            ready: "select_active",
            bucket: true,
            hyperpod: req.hyperpod.is_some(),
            present: &[],
        },
        charts,
    );
    steps.extend(deps.steps);
    let (addon_keys, before_hyperpod) = (deps.addon_keys, deps.before_hyperpod);
    if let Some(hp) = &req.hyperpod {
        // The role's inline policy names the bucket (IAM needs the name, which the `bucket`
        // step settles: the default bucket name derives from the account).
        steps.push(step(
            "hyperpod_execution_role",
            format!("Create IAM role {} for HyperPod nodes", names.hyperpod_execution_role),
            &["bucket"],
        ));
        steps.push(step(
            "lifecycle_script",
            format!(
                "Upload InstantStart's lifecycle script to the bucket as {} (content-addressed; groups without their own script run it)",
                crate::lifecycle::script_key()
            ),
            // PutObject needs the bucket to exist.
            &["bucket"],
        ));
        // EC2 CreateSubnet needs the VPC; the compute subnets join the private route table,
        // which `vpc` creates. Neither needs the NAT gateway to be available.
        steps.push(step(
            "compute_subnets",
            "Place instance groups and create /20 compute subnets".to_string(),
            &[VPC_STEP],
        ));
        // SageMaker CreateCluster: the EKS cluster ACTIVE (`sagemaker-hyperpod-eks-prerequisites`),
        // the groups' subnets, execution role and lifecycle script (`ClusterInstanceGroupSpecification`),
        // the VPC CNI add-on at 1.18.3 or later and the HyperPod dependencies chart (ibid.,
        // "Networking", "Install packages on the Amazon EKS cluster using Helm"); and the
        // nodes, launched in private subnets, reach the EKS endpoint, ECR and S3 through the
        // NAT gateway while they bootstrap (`sagemaker-hyperpod-prerequisites`, "Setting up
        // SageMaker HyperPod with a custom Amazon VPC": private subnets need a NAT gateway).
        let mut deps: Vec<&str> =
            vec!["eks_cluster", "select_active", "compute_subnets", "hyperpod_execution_role", "lifecycle_script"];
        if matches!(req.network, NetworkSpec::NewVpc { .. }) {
            deps.push(NAT_GATEWAY_STEP);
        }
        // Of the add-ons, only the VPC CNI is a HyperPod prerequisite (P4 in
        // docs/aws-preconditions.md); Pod Identity, cert-manager and the S3 CSI driver serve
        // pods, which wait for them on their own (`storage` waits for the driver), so the
        // cluster does not wait for the S3 CSI driver's identity chain.
        deps.extend(addon_keys.iter().map(String::as_str).filter(|k| *k == VPC_CNI_STEP));
        deps.extend(before_hyperpod.iter().map(String::as_str));
        let groups: Vec<String> =
            hp.instance_groups.iter().map(|g| format!("{} {}×{}", g.name, g.instance_type, g.count)).collect();
        steps.push(step(
            "hyperpod_cluster",
            format!(
                "Create HyperPod cluster {} ({}; node recovery {:?})",
                names.hyperpod_cluster,
                groups.join(", "),
                hp.node_recovery
            ),
            &deps,
        ));
    }
    steps.push(dependencies::storage_step(&mount_path(req), "select_active"));
    steps
}

fn mount_path(req: &ClusterCreateRequest) -> String {
    req.storage.as_ref().map(|s| s.mount_path.clone()).unwrap_or_else(|| DEFAULT_MOUNT_PATH.into())
}

#[async_trait]
impl Workflow for CreateClusterWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::CreateCluster
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let mut req: ClusterCreateRequest = decode(request)?;
        if let Some(shared) = self.shared_bucket.as_ref().filter(|b| b.region == req.region) {
            let storage = req
                .storage
                .get_or_insert_with(|| StorageSpec { bucket: None, mount_path: DEFAULT_MOUNT_PATH.to_string() });
            storage.bucket.get_or_insert_with(|| shared.name.clone());
        }
        let mut f = Findings::new();
        req.validate(&mut f);
        if let Some(bucket) = req.storage.as_ref().and_then(|s| s.bucket.as_deref())
            && names::s3_bucket_name(bucket).is_ok()
        {
            check_bucket_covered(bucket, self.shared_bucket.as_ref().map(|b| b.name.as_str()), &mut f);
        }
        if let NetworkSpec::NewVpc { cidr } = &req.network {
            // Plan the layout now so an impossible CIDR is reported before anything is created.
            match plan_new_vpc(*cidr, &req.availability_zones) {
                Ok(layout) => {
                    let mut planner = SubnetPlanner::new(vec![*cidr], layout.iter().map(|s| s.cidr));
                    let mut azs: Vec<String> = req
                        .hyperpod
                        .iter()
                        .flat_map(|h| {
                            h.instance_groups
                                .iter()
                                .filter(|g| g.subnet_id.is_none())
                                .map(|g| g.availability_zone.clone())
                        })
                        .collect();
                    azs.sort();
                    azs.dedup();
                    if let Err(e) = planner.plan_compute_subnets(&azs) {
                        f.push("network.cidr", e.to_string());
                    }
                }
                Err(e) => f.push("network.cidr", e.to_string()),
            }
        }
        if let Some(existing) = self.store.get_cluster(&req.name)? {
            f.push_unprocessable(
                "name",
                format!(
                    "a cluster named {} already exists ({:?}, {}); delete it first or choose another name",
                    existing.name, existing.source, existing.region
                ),
            );
        }
        f.finish()?;
        let steps = plan_steps_with(&req, self.charts());
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.name), request: canonical, steps })
    }

    fn on_recorded(&self, op: &Operation) -> Result<(), EngineError> {
        let req: ClusterCreateRequest = decode(&op.request)?;
        let now = chrono::Utc::now();
        let names = DerivedNames::for_cluster(&req.name);
        self.store.put_cluster(&ClusterRecord {
            name: req.name.clone(),
            region: req.region.clone(),
            source: ClusterSource::Created,
            eks_cluster: names.eks_cluster,
            hyperpod_cluster: req.hyperpod.as_ref().map(|_| names.hyperpod_cluster),
            vpc_id: None,
            bucket: req.storage.as_ref().and_then(|s| s.bucket.clone()),
            kubernetes_version: Some(req.kubernetes_version.clone()),
            request: Some(req),
            created_at: now,
            updated_at: now,
        })?;
        Ok(())
    }

    /// Preflight: quotas, offerings and training plans of every instance group; for an existing
    /// VPC, free space for the /20 compute subnets.
    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let req: ClusterCreateRequest = decode(&prepared.request)?;
        if let Some(bucket) = req.storage.as_ref().and_then(|s| s.bucket.as_deref()) {
            super::steps::user_named_bucket(self.aws.as_ref(), "storage.bucket", bucket).await?;
        }
        let Some(hp) = &req.hyperpod else { return Ok(Assessment::default()) };
        let groups: Vec<GroupToCheck<'_>> = hp
            .instance_groups
            .iter()
            .enumerate()
            .map(|(i, g)| GroupToCheck { field: format!("hyperpod.instance_groups[{i}]"), group: g })
            .collect();
        let mut checks = check_groups(self.aws.as_ref(), &req.region, &groups, &BTreeMap::new()).await?;
        if hp.instance_groups.iter().any(|g| g.lifecycle_script.is_some()) {
            let cluster_bucket = match req.storage.as_ref().and_then(|s| s.bucket.clone()) {
                Some(b) => b,
                None => {
                    let id = read(|| self.aws.caller_identity()).await?;
                    DerivedNames::default_bucket(&req.name, &id.account, &req.region)
                }
            };
            for (i, g) in hp.instance_groups.iter().enumerate() {
                if let Some(script) = &g.lifecycle_script {
                    let field = format!("hyperpod.instance_groups[{i}].lifecycle_script");
                    checks
                        .push(check_lifecycle_script(self.aws.as_ref(), &field, script, Some(&cluster_bucket)).await?);
                }
            }
        }
        if let NetworkSpec::ExistingVpc { vpc_id, .. } = &req.network {
            let mut azs: Vec<&str> = hp
                .instance_groups
                .iter()
                .filter(|g| g.subnet_id.is_none())
                .map(|g| g.availability_zone.as_str())
                .collect();
            azs.sort();
            azs.dedup();
            match read(|| self.aws.describe_network(&req.region, vpc_id)).await {
                Ok(n) => checks.push(check_address_space(
                    "network.vpc_id",
                    n.vpc.cidrs.clone(),
                    n.subnets.iter().map(|s| s.cidr),
                    azs.len(),
                )),
                Err(e) if e.kind == ProviderErrorKind::NotFound => {
                    return Err(ValidationError::invalid(
                        "network.vpc_id",
                        format!("VPC {vpc_id} not found in {}", req.region),
                    )
                    .into());
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Assessment { checks, ..Default::default() })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: ClusterCreateRequest = decode(request).ok()?;
        let cx = Arc::new(Shared { req, aws: self.aws.clone(), store: self.store.clone() });
        let exec: Arc<dyn StepExecutor> = match key {
            VPC_STEP => Arc::new(NetworkStep { cx, wait_for_nat: false }),
            NAT_GATEWAY_STEP => Arc::new(NatGatewayStep(cx)),
            LEGACY_NETWORK_STEP => Arc::new(NetworkStep { cx, wait_for_nat: true }),
            "eks_cluster_role" => Arc::new(RoleStep { cx, which: RoleKind::EksCluster }),
            "hyperpod_execution_role" => Arc::new(RoleStep { cx, which: RoleKind::HyperPodExecution }),
            "bucket" => Arc::new(BucketStep(cx)),
            "lifecycle_script" => Arc::new(LifecycleScriptStep(cx)),
            "compute_subnets" => Arc::new(ComputeSubnetsStep(cx)),
            "eks_cluster" => Arc::new(EksClusterStep(cx)),
            "select_active" => Arc::new(SelectActiveStep(cx)),
            "hyperpod_cluster" => Arc::new(HyperPodClusterStep(cx)),
            other => self.dependencies(&cx.req).executor(other)?,
        };
        Some(exec)
    }
}

/// The executor of one of create's HyperPod steps (`hyperpod_execution_role`,
/// `lifecycle_script`, `compute_subnets`, `hyperpod_cluster`) for `req`, which add-HyperPod
/// ([`super::hyperpod_attach`]) runs on an existing EKS cluster: the same code, so the two
/// cannot drift. The steps read the `bucket` step's `bucket` output and the EKS cluster's
/// `arn`, `vpc_id` and `security_group_id` from the `eks_cluster` step (or `vpc`).
pub(super) fn hyperpod_executor(
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
    req: ClusterCreateRequest,
    key: &str,
) -> Option<Arc<dyn StepExecutor>> {
    let cx = Arc::new(Shared { req, aws, store });
    Some(match key {
        "hyperpod_execution_role" => Arc::new(RoleStep { cx, which: RoleKind::HyperPodExecution }),
        "lifecycle_script" => Arc::new(LifecycleScriptStep(cx)),
        "compute_subnets" => Arc::new(ComputeSubnetsStep(cx)),
        "hyperpod_cluster" => Arc::new(HyperPodClusterStep(cx)),
        _ => return None,
    })
}

/// What every step of one operation shares.
struct Shared {
    req: ClusterCreateRequest,
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl Shared {
    fn names(&self) -> DerivedNames {
        DerivedNames::for_cluster(&self.req.name)
    }

    fn tags(&self, cx: &StepContext<'_>) -> Tags {
        ownership_tags(&self.req.name, &cx.operation_id.0)
    }

    fn ours(&self, tags: &Tags) -> bool {
        is_owned(tags, &self.req.name)
    }

    fn foreign(&self, what: &str) -> Observation {
        Observation::Foreign {
            reason: format!(
                "{what} already exists but is not tagged {TAG_MANAGED_BY}={MANAGED_BY}, {TAG_CLUSTER}={}; \
                 InstantStart will not adopt or change it. Delete or rename it, or choose another cluster name, then retry this step",
                self.req.name
            ),
        }
    }

    async fn bucket_name(&self) -> Result<String, StepError> {
        if let Some(b) = self.req.storage.as_ref().and_then(|s| s.bucket.clone()) {
            return Ok(b);
        }
        let id = self.aws.caller_identity().await?;
        Ok(DerivedNames::default_bucket(&self.req.name, &id.account, &self.req.region))
    }
}

fn waiting(detail: impl Into<String>) -> Progress {
    Progress::Waiting { detail: detail.into() }
}

fn from_state(state: &ResourceState, what: &str, done: impl FnOnce() -> Value) -> Progress {
    match state {
        ResourceState::Active => Progress::Done(done()),
        ResourceState::Failed { reason } => Progress::Failed { reason: format!("{what} failed: {reason}") },
        other => waiting(format!(
            "{what}: {}",
            serde_json::to_value(other).ok().and_then(|v| v["state"].as_str().map(str::to_string)).unwrap_or_default()
        )),
    }
}

/// Creates (or, for an existing VPC, checks) the network. As [`VPC_STEP`] it is done once the
/// pieces exist (the NAT gateway requested); as [`LEGACY_NETWORK_STEP`] (operations recorded
/// before the split) it also waits for the NAT gateway, as it always did.
///
/// # Guarantees
///
/// Observe before submit: a VPC with our name and tags is adopted (the AWS adapter reports
/// ours only once every piece exists, so an interrupted `create_network` is called again and
/// completes the same pieces); `create_network` is called at most once per attempt.
struct NetworkStep {
    cx: Arc<Shared>,
    wait_for_nat: bool,
}

fn network_outputs(n: &Network) -> Value {
    let private: Vec<&str> = n.subnets.iter().filter(|s| !s.public).map(|s| s.id.as_str()).collect();
    let public: Vec<&str> = n.subnets.iter().filter(|s| s.public).map(|s| s.id.as_str()).collect();
    json!({
        "vpc_id": n.vpc.id,
        "vpc_cidrs": n.vpc.cidrs,
        "private_subnet_ids": private,
        "public_subnet_ids": public,
        "security_group_id": n.security_group_id,
    })
}

/// An output of the network: from [`VPC_STEP`], or from [`LEGACY_NETWORK_STEP`] in operations
/// recorded before the network was split.
fn network_input<T: serde::de::DeserializeOwned>(cx: &StepContext<'_>, field: &str) -> Result<T, StepError> {
    if !cx.inputs.contains_key(VPC_STEP) && cx.inputs.contains_key(LEGACY_NETWORK_STEP) {
        return cx.input(LEGACY_NETWORK_STEP, field);
    }
    cx.input(VPC_STEP, field)
}

#[async_trait]
impl StepExecutor for NetworkStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let s = &self.cx;
        match &s.req.network {
            NetworkSpec::NewVpc { .. } => match s.aws.find_vpc(&s.req.region, &s.names().vpc).await? {
                Some(vpc) if s.ours(&vpc.tags) => {
                    Ok(Observation::Exists(ResourceRef { kind: "vpc".into(), id: vpc.id, arn: None }))
                }
                Some(vpc) => Ok(s.foreign(&format!("VPC {} ({})", s.names().vpc, vpc.id))),
                None => Ok(Observation::Absent),
            },
            NetworkSpec::ExistingVpc { vpc_id, .. } => {
                let n = s.aws.describe_network(&s.req.region, vpc_id).await.map_err(|e| match e.kind {
                    ProviderErrorKind::NotFound => {
                        StepError::Invalid(format!("VPC {vpc_id} not found in {}", s.req.region))
                    }
                    _ => StepError::Provider(e),
                })?;
                Ok(Observation::Exists(ResourceRef { kind: "vpc".into(), id: n.vpc.id, arn: None }))
            }
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let s = &self.cx;
        let NetworkSpec::NewVpc { cidr } = &s.req.network else {
            return Err(StepError::Invalid("existing VPC not found".into()));
        };
        let subnets = plan_new_vpc(*cidr, &s.req.availability_zones).map_err(|e| StepError::Invalid(e.to_string()))?;
        let n = s
            .aws
            .create_network(&CreateNetwork {
                region: s.req.region.clone(),
                name: s.names().vpc,
                cidr: *cidr,
                subnets,
                tags: s.tags(cx),
            })
            .await?;
        Ok(ResourceRef { kind: "vpc".into(), id: n.vpc.id, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let s = &self.cx;
        let n = s.aws.describe_network(&s.req.region, &r.id).await?;
        if let NetworkSpec::ExistingVpc { subnet_ids, .. } = &s.req.network {
            let missing: Vec<&String> =
                subnet_ids.iter().filter(|id| !n.subnets.iter().any(|x| &x.id == *id)).collect();
            if !missing.is_empty() {
                return Ok(Progress::Failed { reason: format!("subnets {missing:?} are not in VPC {}", r.id) });
            }
            let mut out = network_outputs(&n);
            out["private_subnet_ids"] = json!(subnet_ids);
            return Ok(Progress::Done(out));
        }
        let p = if self.wait_for_nat {
            from_state(&n.state, "network", || network_outputs(&n))
        } else {
            built(&n, s.req.availability_zones.len())
        };
        if matches!(p, Progress::Done(_)) {
            let vpc_id = n.vpc.id.clone();
            update_record(s.store.as_ref(), &s.req.name, |rec| rec.vpc_id = Some(vpc_id))
                .map_err(|e| StepError::Invalid(e.to_string()))?;
        }
        Ok(p)
    }
}

/// Whether a new network's pieces exist: a private subnet per Availability Zone and the
/// security group (the NAT gateway may still be pending: [`NatGatewayStep`] waits for it).
fn built(n: &Network, zones: usize) -> Progress {
    if matches!(n.state, ResourceState::Deleting) {
        return Progress::Failed { reason: format!("VPC {} is being deleted", n.vpc.id) };
    }
    let private = n.subnets.iter().filter(|s| !s.public).count();
    if private < zones || n.security_group_id.is_none() {
        return waiting(format!("network: {private}/{zones} private subnets, waiting for the security group"));
    }
    Progress::Done(network_outputs(n))
}

/// Waits until the new VPC's NAT gateway is `available`. Nothing to submit: the `vpc` step
/// requested the gateway, so `observe` always finds it and the step only polls (a kill -9
/// anywhere resumes polling; no call creates anything).
struct NatGatewayStep(Arc<Shared>);

#[async_trait]
impl StepExecutor for NatGatewayStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let vpc_id: String = network_input(cx, "vpc_id")?;
        Ok(Observation::Exists(ResourceRef { kind: "nat-gateway".into(), id: vpc_id, arn: None }))
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        Err(StepError::Invalid("the NAT gateway is requested by the vpc step; retry that step".into()))
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let s = &self.0;
        let n = s.aws.describe_network(&s.req.region, &r.id).await?;
        Ok(match &n.state {
            ResourceState::Active => Progress::Done(json!({ "vpc_id": n.vpc.id, "nat_gateway": "available" })),
            ResourceState::Failed { reason } => Progress::Failed { reason: reason.clone() },
            _ => waiting(format!("NAT gateway of {}: pending", r.id)),
        })
    }
}

#[derive(Clone, Copy)]
enum RoleKind {
    EksCluster,
    HyperPodExecution,
}

struct RoleStep {
    cx: Arc<Shared>,
    which: RoleKind,
}

impl RoleStep {
    fn name(&self) -> String {
        let n = self.cx.names();
        match self.which {
            RoleKind::EksCluster => n.eks_cluster_role,
            RoleKind::HyperPodExecution => n.hyperpod_execution_role,
        }
    }

    /// The role this step wants: the same on every attempt (the bucket comes from the `bucket`
    /// step's recorded output, the account from `sts:GetCallerIdentity`).
    async fn request(&self, cx: &StepContext<'_>) -> Result<CreateIamRole, StepError> {
        Ok(match self.which {
            RoleKind::EksCluster => CreateIamRole {
                name: self.name(),
                trust_policy: eks_cluster_trust_policy(
                    &self.cx.aws.caller_identity().await?.account,
                    &self.cx.req.region,
                    &self.cx.names().eks_cluster,
                ),
                managed_policies: vec![EKS_CLUSTER_POLICY.into()],
                inline_policies: vec![],
                tags: self.cx.tags(cx),
            },
            RoleKind::HyperPodExecution => {
                let bucket = cx.input_str("bucket", "bucket")?;
                CreateIamRole {
                    name: self.name(),
                    trust_policy: service_trust_policy("sagemaker.amazonaws.com"),
                    managed_policies: vec![HYPERPOD_INSTANCE_POLICY.into()],
                    inline_policies: vec![
                        ("instantstart-shared-bucket".into(), hyperpod_bucket_policy(&bucket)),
                        (HYPERPOD_EKS_NODE_POLICY.into(), hyperpod_eks_node_policy()),
                    ],
                    tags: self.cx.tags(cx),
                }
            }
        })
    }
}

/// Trust policy of the EKS cluster role: `eks.amazonaws.com` may assume it only for this EKS
/// cluster of this account (`aws:SourceArn`, `aws:SourceAccount`), so no other account's or
/// cluster's EKS can be made to act with it ("Cross-service confused deputy prevention in
/// Amazon EKS", EKS user guide: EKS accepts both keys in a cluster role's trust policy).
///
/// The HyperPod execution role and the other service roles keep [`service_trust_policy`]:
/// SageMaker's confused-deputy page lists the features that pass these keys, and HyperPod and
/// MLflow are not among them, so a condition there could keep the service from assuming its
/// own role.
pub fn eks_cluster_trust_policy(account: &str, region: &str, eks_cluster: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": { "Service": "eks.amazonaws.com" },
            "Action": "sts:AssumeRole",
            "Condition": {
                "StringEquals": { "aws:SourceAccount": account },
                "ArnLike": { "aws:SourceArn": format!("arn:aws:eks:{region}:{account}:cluster/{eks_cluster}") }
            }
        }]
    })
}

/// Trust policy letting `service` assume a role.
pub fn service_trust_policy(service: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [{ "Effect": "Allow", "Principal": { "Service": service }, "Action": "sts:AssumeRole" }]
    })
}

/// The AWS managed policy of the EKS cluster role.
pub const EKS_CLUSTER_POLICY: &str = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy";

/// The managed policy of the HyperPod execution role (logs, metrics, SSM, `sagemaker-*` buckets).
pub const HYPERPOD_INSTANCE_POLICY: &str = "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy";

/// Name of the execution role's inline policy for EKS-orchestrated nodes ([`hyperpod_eks_node_policy`]).
pub const HYPERPOD_EKS_NODE_POLICY: &str = "instantstart-eks-node";

/// The EC2 actions the VPC CNI (`aws-node`, running with the node's role) needs on `*`.
pub const EKS_NODE_EC2_ACTIONS: &[&str] = &[
    "ec2:AssignPrivateIpAddresses",
    "ec2:AttachNetworkInterface",
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeTags",
    "ec2:DescribeVpcs",
    "ec2:DescribeDhcpOptions",
    "ec2:DescribeSubnets",
    "ec2:DescribeSecurityGroups",
    "ec2:DetachNetworkInterface",
    "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:UnassignPrivateIpAddresses",
];

/// The ECR actions kubelet needs to pull the EKS and add-on images.
pub const EKS_NODE_ECR_ACTIONS: &[&str] = &[
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetAuthorizationToken",
    "ecr:GetDownloadUrlForLayer",
];

/// What AWS documents for the execution role of EKS-orchestrated HyperPod nodes next to
/// `AmazonSageMakerClusterInstanceRolePolicy`.
///
/// Source: SageMaker developer guide, `sagemaker-hyperpod-prerequisites-iam`, section "IAM role
/// for SageMaker HyperPod" → Amazon EKS ("In addition to the managed policies, attach the
/// following permission policy"). Without it `aws-node` cannot assign pod IPs, kubelet cannot
/// pull from ECR (the nodes never become Ready) and Pod Identity cannot work on any node.
/// Named actions on `*` (no `<service>:*`), so it passes the adapter's least-privilege check.
pub fn hyperpod_eks_node_policy() -> Value {
    let mut on_any: Vec<&str> = EKS_NODE_EC2_ACTIONS.to_vec();
    on_any.extend_from_slice(EKS_NODE_ECR_ACTIONS);
    // sagemaker-hyperpod-prerequisites-iam → Amazon EKS: EKS Pod Identity on the nodes.
    on_any.push("eks-auth:AssumeRoleForPodIdentity");
    json!({
        "Version": "2012-10-17",
        "Statement": [
            // sagemaker-hyperpod-prerequisites-iam → Amazon EKS: VPC CNI network interfaces,
            // ECR image pulls and EKS Pod Identity, on every resource as documented.
            { "Sid": "EksNodeNetworkingImagesPodIdentity", "Effect": "Allow", "Action": on_any, "Resource": "*" },
            // sagemaker-hyperpod-prerequisites-iam → Amazon EKS: the CNI tags the interfaces it creates.
            { "Sid": "EksNodeTagInterfaces", "Effect": "Allow", "Action": ["ec2:CreateTags"], "Resource": ["arn:aws:ec2:*:*:network-interface/*"] }
        ]
    })
}

/// Inline policy of the HyperPod execution role: read lifecycle scripts (InstantStart's
/// `lifecycle/<digest>/on_create.sh` is an object of this bucket — the managed policy reads only
/// `sagemaker-*` buckets) and read/write the shared data bucket, nothing else (no `s3:*`, no
/// `*` resources).
pub fn hyperpod_bucket_policy(bucket: &str) -> Value {
    json!({
        "Version": "2012-10-17",
        "Statement": [
            { "Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": [format!("arn:aws:s3:::{bucket}")],
              "Condition": super::steps::own_account_buckets() },
            { "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], "Resource": [format!("arn:aws:s3:::{bucket}/*")],
              "Condition": super::steps::own_account_buckets() }
        ]
    })
}

#[async_trait]
impl StepExecutor for RoleStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        match self.cx.aws.get_role(&self.name()).await? {
            Some(role) if self.cx.ours(&role.tags) => {
                Ok(Observation::Exists(ResourceRef { kind: "iam-role".into(), id: role.name, arn: Some(role.arn) }))
            }
            Some(_) => Ok(self.cx.foreign(&format!("IAM role {}", self.name()))),
            None => Ok(Observation::Absent),
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let role = self.cx.aws.create_role(&self.request(cx).await?).await?;
        Ok(ResourceRef { kind: "iam-role".into(), id: role.name, arn: Some(role.arn) })
    }

    /// Completes the role's policies before reporting it done: an adopted role may come from an
    /// attempt that died between `CreateRole` and its policies (see [`poll_role`]).
    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let mut req = self.request(cx).await?;
        req.name.clone_from(&r.id);
        poll_role(self.cx.aws.as_ref(), &req).await
    }
}

struct BucketStep(Arc<Shared>);

#[async_trait]
impl StepExecutor for BucketStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let name = self.0.bucket_name().await?;
        let user_named = self.0.req.storage.as_ref().is_some_and(|s| s.bucket.is_some());
        match self.0.aws.describe_bucket(&name).await? {
            Some(b) if self.0.ours(&b.tags) || user_named => {
                Ok(Observation::Exists(ResourceRef { kind: "s3-bucket".into(), id: b.name, arn: None }))
            }
            Some(_) => Ok(self.0.foreign(&format!("S3 bucket {name}"))),
            None => Ok(Observation::Absent),
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let name = self.0.bucket_name().await?;
        let b = self
            .0
            .aws
            .create_bucket(&CreateBucket { region: self.0.req.region.clone(), name, tags: self.0.tags(cx) })
            .await?;
        Ok(ResourceRef { kind: "s3-bucket".into(), id: b.name, arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        match self.0.aws.describe_bucket(&r.id).await? {
            Some(b) => {
                let owned = self.0.ours(&b.tags);
                let name = b.name.clone();
                update_record(self.0.store.as_ref(), &self.0.req.name, |rec| rec.bucket = Some(name))
                    .map_err(|e| StepError::Invalid(e.to_string()))?;
                Ok(Progress::Done(json!({ "bucket": b.name, "owned": owned })))
            }
            None => Ok(waiting("waiting for the bucket to become visible")),
        }
    }
}

/// Uploads [`crate::lifecycle::ON_CREATE_SH`] to the cluster bucket under its content-addressed
/// key. The key — named in the step's title when the operation is recorded, and a pure function
/// of the script's bytes — is fixed before any call; `observe` is a HeadObject on it, so after a
/// crash between the persisted `submitting` phase and PutObject, or a lost PutObject response,
/// the resumed step finds the object (or writes it once). Its outputs (`source_s3_uri`,
/// `on_create`) are the `LifeCycleConfig` of every group without a script of its own.
struct LifecycleScriptStep(Arc<Shared>);

impl LifecycleScriptStep {
    fn key() -> String {
        crate::lifecycle::script_key()
    }
}

#[async_trait]
impl StepExecutor for LifecycleScriptStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let bucket = cx.input_str("bucket", "bucket")?;
        let key = Self::key();
        match self.0.aws.head_object(&bucket, &key).await? {
            Some(h) if h.sha256.as_deref().is_none_or(|d| d == crate::lifecycle::script_sha256()) => {
                Ok(Observation::Exists(ResourceRef {
                    kind: "s3-object".into(),
                    id: key.clone(),
                    arn: Some(format!("arn:aws:s3:::{bucket}/{key}")),
                }))
            }
            Some(h) => Ok(Observation::Foreign {
                reason: format!(
                    "s3://{bucket}/{key} exists with other content (SHA-256 {}); InstantStart's script has {}. \
                     Delete the object, then retry this step",
                    h.sha256.unwrap_or_default(),
                    crate::lifecycle::script_sha256()
                ),
            }),
            None => Ok(Observation::Absent),
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let bucket = cx.input_str("bucket", "bucket")?;
        let key = Self::key();
        self.0
            .aws
            .put_object(&PutObject {
                bucket: bucket.clone(),
                key: key.clone(),
                body: crate::lifecycle::ON_CREATE_SH.as_bytes().to_vec(),
                content_type: crate::lifecycle::CONTENT_TYPE.into(),
            })
            .await?;
        Ok(ResourceRef { kind: "s3-object".into(), id: key.clone(), arn: Some(format!("arn:aws:s3:::{bucket}/{key}")) })
    }

    async fn poll(&self, cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let bucket = cx.input_str("bucket", "bucket")?;
        match self.0.aws.head_object(&bucket, &r.id).await? {
            Some(h) => {
                let l = crate::lifecycle::default_lifecycle(&bucket);
                Ok(Progress::Done(json!({
                    "bucket": bucket,
                    "key": r.id,
                    "sha256": h.sha256.unwrap_or_else(crate::lifecycle::script_sha256),
                    "source_s3_uri": l.source_s3_uri,
                    "on_create": l.on_create,
                })))
            }
            None => Ok(waiting(format!("waiting for s3://{bucket}/{} to become visible", r.id))),
        }
    }
}

struct ComputeSubnetsStep(Arc<Shared>);

impl ComputeSubnetsStep {
    async fn placements(
        &self,
        cx: &StepContext<'_>,
        create: bool,
    ) -> Result<Option<BTreeMap<String, String>>, StepError> {
        let s = &self.0;
        let Some(hp) = &s.req.hyperpod else { return Ok(Some(BTreeMap::new())) };
        // A created cluster's network, or (add-HyperPod) the VPC of the existing EKS cluster.
        let vpc_id: String = network_input(cx, "vpc_id").or_else(|_| cx.input_str("eks_cluster", "vpc_id"))?;
        let tags = s.tags(cx);
        place_groups(s.aws.as_ref(), &s.req.region, &vpc_id, &s.req.name, &hp.instance_groups, create.then_some(&tags))
            .await
    }
}

#[async_trait]
impl StepExecutor for ComputeSubnetsStep {
    async fn observe(&self, cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.placements(cx, false).await? {
            Some(p) => Observation::Exists(ResourceRef {
                kind: "subnets".into(),
                id: p.values().cloned().collect::<Vec<_>>().join(","),
                arn: None,
            }),
            None => Observation::Absent,
        })
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let p = self.placements(cx, true).await?.unwrap_or_default();
        Ok(ResourceRef { kind: "subnets".into(), id: p.values().cloned().collect::<Vec<_>>().join(","), arn: None })
    }

    async fn poll(&self, cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        match self.placements(cx, false).await? {
            Some(p) => Ok(Progress::Done(json!({ "placements": p }))),
            None => Ok(waiting("waiting for compute subnets to become visible")),
        }
    }
}

struct EksClusterStep(Arc<Shared>);

#[async_trait]
impl StepExecutor for EksClusterStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let s = &self.0;
        match s.aws.describe_eks_cluster(&s.req.region, &s.names().eks_cluster).await? {
            Some(c) if s.ours(&c.tags) => {
                Ok(Observation::Exists(ResourceRef { kind: "eks-cluster".into(), id: c.name, arn: Some(c.arn) }))
            }
            Some(c) => Ok(s.foreign(&format!("EKS cluster {}", c.name))),
            None => Ok(Observation::Absent),
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let s = &self.0;
        let subnet_ids: Vec<String> = network_input(cx, "private_subnet_ids")?;
        let c = s
            .aws
            .create_eks_cluster(&CreateEksCluster {
                region: s.req.region.clone(),
                name: s.names().eks_cluster,
                version: s.req.kubernetes_version.clone(),
                role_arn: cx.input_str("eks_cluster_role", "role_arn")?,
                subnet_ids,
                client_request_token: cx.idempotency_token.to_string(),
                tags: s.tags(cx),
                public_access_cidrs: s.req.public_access_cidrs.iter().map(ToString::to_string).collect(),
            })
            .await?;
        Ok(ResourceRef { kind: "eks-cluster".into(), id: c.name, arn: Some(c.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let s = &self.0;
        let Some(c) = s.aws.describe_eks_cluster(&s.req.region, &r.id).await? else {
            return Ok(Progress::Failed { reason: format!("EKS cluster {} disappeared", r.id) });
        };
        Ok(from_state(
            &c.state,
            "EKS control plane",
            || json!({ "arn": c.arn, "name": c.name, "endpoint": c.endpoint, "oidc_issuer": c.oidc_issuer, "security_group_id": c.security_group_id }),
        ))
    }
}

struct SelectActiveStep(Arc<Shared>);

#[async_trait]
impl StepExecutor for SelectActiveStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(Observation::Absent)
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let s = &self.0;
        s.store.set_setting(ACTIVE_CLUSTER, Some(&s.req.name)).map_err(|e| StepError::Invalid(e.to_string()))?;
        Ok(ResourceRef { kind: "setting".into(), id: ACTIVE_CLUSTER.into(), arn: None })
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(Progress::Done(json!({ "active_cluster": self.0.req.name })))
    }
}

struct HyperPodClusterStep(Arc<Shared>);

#[async_trait]
impl StepExecutor for HyperPodClusterStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let s = &self.0;
        match s.aws.describe_hyperpod_cluster(&s.req.region, &s.names().hyperpod_cluster).await? {
            Some(c) if s.ours(&c.tags) => {
                Ok(Observation::Exists(ResourceRef { kind: "hyperpod-cluster".into(), id: c.name, arn: Some(c.arn) }))
            }
            Some(c) => Ok(s.foreign(&format!("HyperPod cluster {}", c.name))),
            None => Ok(Observation::Absent),
        }
    }

    async fn submit(&self, cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let s = &self.0;
        let hp = s.req.hyperpod.as_ref().ok_or_else(|| StepError::Invalid("no HyperPod cluster requested".into()))?;
        let placements: BTreeMap<String, String> = cx.input("compute_subnets", "placements")?;
        let sg: Option<String> = network_input(cx, "security_group_id").ok().flatten();
        let sg = match sg {
            Some(sg) => sg,
            None => cx.input_str("eks_cluster", "security_group_id")?,
        };
        let role_arn = cx.input_str("hyperpod_execution_role", "role_arn")?;
        let default_script = LifecycleScript {
            source_s3_uri: cx.input_str("lifecycle_script", "source_s3_uri")?,
            on_create: cx.input_str("lifecycle_script", "on_create")?,
        };
        let groups = hp
            .instance_groups
            .iter()
            .map(|g| {
                let mut spec = g.clone();
                if spec.lifecycle_script.is_none() {
                    spec.lifecycle_script = Some(default_script.clone());
                }
                Ok(HyperPodInstanceGroupRequest {
                    spec,
                    subnet_id: placements
                        .get(&g.name)
                        .cloned()
                        .ok_or_else(|| StepError::MissingInput(format!("placement of {}", g.name)))?,
                    security_group_ids: vec![sg.clone()],
                    execution_role_arn: role_arn.clone(),
                    threads_per_core: None,
                })
            })
            .collect::<Result<Vec<_>, StepError>>()?;
        let c = s
            .aws
            .create_hyperpod_cluster(&CreateHyperPodCluster {
                region: s.req.region.clone(),
                name: s.names().hyperpod_cluster,
                eks_cluster_arn: cx.input_str("eks_cluster", "arn")?,
                node_recovery: hp.node_recovery,
                instance_groups: groups,
                tags: hyperpod_tags(s.tags(cx)),
            })
            .await?;
        Ok(ResourceRef { kind: "hyperpod-cluster".into(), id: c.name, arn: Some(c.arn) })
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        let s = &self.0;
        let Some(c) = s.aws.describe_hyperpod_cluster(&s.req.region, &r.id).await? else {
            return Ok(Progress::Failed { reason: format!("HyperPod cluster {} disappeared", r.id) });
        };
        if let ResourceState::Creating | ResourceState::Updating = c.state {
            let (cur, target) =
                c.instance_groups.iter().fold((0, 0), |(a, b), g| (a + g.current_count, b + g.target_count));
            return Ok(waiting(format!("HyperPod cluster: creating, {cur}/{target} nodes running")));
        }
        Ok(from_state(&c.state, "HyperPod cluster", || json!({ "name": c.name, "arn": c.arn })))
    }
}

/// Tag `SageMaker=true` on the HyperPod cluster, besides ours: the reference stacks tag the
/// cluster so because `AmazonSageMakerHyperPodTrainingOperatorAccess` conditions its SageMaker
/// actions on `aws:ResourceTag/SageMaker = true` (not confirmed from the policy JSON itself; the
/// tag is harmless). Clusters created before this change lack it.
pub const SAGEMAKER_TAG: (&str, &str) = ("SageMaker", "true");

fn hyperpod_tags(mut tags: Tags) -> Tags {
    tags.insert(SAGEMAKER_TAG.0.into(), SAGEMAKER_TAG.1.into());
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eks_cluster_role_trusts_eks_only_for_its_own_cluster_and_account() {
        let p = eks_cluster_trust_policy("123456789012", "us-west-2", "demo-eks");
        let st = &p["Statement"][0];
        assert_eq!(st["Principal"]["Service"], "eks.amazonaws.com");
        assert_eq!(st["Condition"]["StringEquals"]["aws:SourceAccount"], "123456789012");
        assert_eq!(st["Condition"]["ArnLike"]["aws:SourceArn"], "arn:aws:eks:us-west-2:123456789012:cluster/demo-eks");
        // The service roles whose service does not document passing the keys get none.
        assert!(service_trust_policy("sagemaker.amazonaws.com")["Statement"][0].get("Condition").is_none());
    }
    use crate::spec::*;

    #[test]
    fn dag_shape_overlaps_the_eks_wait() {
        let req = ClusterCreateRequest {
            name: "demo".into(),
            region: "us-east-1".into(),
            kubernetes_version: "1.33".into(),
            network: NetworkSpec::default(),
            availability_zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            hyperpod: Some(HyperPodClusterSpec {
                node_recovery: NodeRecovery::Automatic,
                instance_groups: vec![InstanceGroupSpec {
                    name: "workers".into(),
                    instance_type: "ml.g5.2xlarge".into(),
                    count: 2,
                    availability_zone: "us-east-1a".into(),
                    subnet_id: None,
                    capacity: CapacitySpec::OnDemand,
                    interface_mode: InterfaceMode::Standard,
                    ebs_volume_gb: 500,
                    deep_health_checks: DeepHealthChecks::default(),
                    lifecycle_script: None,
                }],
            }),
            storage: None,
            public_access_cidrs: vec![],
        };
        let steps = plan_steps(&req);
        let shape: Vec<String> = steps.iter().map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", "))).collect();
        assert_eq!(
            shape,
            [
                "vpc <- []",
                "nat_gateway <- [vpc]",
                "eks_cluster_role <- []",
                "bucket <- []",
                "eks_cluster <- [vpc, eks_cluster_role]",
                "select_active <- [eks_cluster]",
                "addon:vpc-cni <- [select_active]",
                "addon:eks-pod-identity-agent <- [select_active]",
                "addon:cert-manager <- [select_active]",
                "s3_csi_role <- [bucket]",
                "s3_csi_identity <- [s3_csi_role, addon:eks-pod-identity-agent]",
                "addon:aws-mountpoint-s3-csi-driver <- [select_active, s3_csi_identity]",
                "hyperpod_execution_role <- [bucket]",
                "lifecycle_script <- [bucket]",
                "compute_subnets <- [vpc]",
                "hyperpod_cluster <- [eks_cluster, select_active, compute_subnets, hyperpod_execution_role, lifecycle_script, nat_gateway, addon:vpc-cni]",
                "storage <- [bucket, select_active, addon:aws-mountpoint-s3-csi-driver]",
            ]
        );
        // Every dependency names an earlier step: the DAG is acyclic by construction.
        for (i, s) in steps.iter().enumerate() {
            for d in &s.depends_on {
                assert!(steps[..i].iter().any(|p| &p.key == d), "{} depends on later {d}", s.key);
            }
        }
    }

    /// The longest chain of expected durations through the plan, with the charts: the NAT
    /// gateway and the S3 CSI driver's identity chain run beside the EKS control plane and the
    /// VPC CNI add-on; an existing VPC plans no NAT gateway step.
    #[test]
    fn the_critical_path_waits_for_neither_the_nat_gateway_nor_the_s3_csi_chain() {
        let mut req = ClusterCreateRequest {
            name: "demo".into(),
            region: "us-east-1".into(),
            kubernetes_version: "1.33".into(),
            network: NetworkSpec::default(),
            availability_zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            hyperpod: Some(HyperPodClusterSpec {
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
            }),
            storage: None,
            public_access_cidrs: vec![],
        };
        let critical = |steps: &[StepSpec]| -> Vec<String> {
            let mut best: BTreeMap<&str, (u64, Vec<String>)> = BTreeMap::new();
            for s in steps {
                let (t, mut path) =
                    s.depends_on.iter().map(|d| best[d.as_str()].clone()).max_by_key(|(t, _)| *t).unwrap_or_default();
                path.push(s.key.clone());
                best.insert(&s.key, (t + s.expected_secs.unwrap_or(0), path));
            }
            best.into_values().max_by_key(|(t, _)| *t).unwrap().1
        };
        assert_eq!(
            critical(&plan_steps(&req)),
            ["vpc", "eks_cluster", "select_active", "addon:vpc-cni", "hyperpod_cluster"]
        );
        // With the charts, the HyperPod dependencies chart (a prerequisite too) may be longer.
        let path = critical(&plan_steps_with(&req, PINNED_CHARTS));
        assert_eq!(path[..3], ["vpc", "eks_cluster", "select_active"]);
        assert_eq!(path.last().map(String::as_str), Some("hyperpod_cluster"));
        assert_eq!(path.len(), 5, "{path:?}");
        req.network = NetworkSpec::ExistingVpc { vpc_id: "vpc-0abc".into(), subnet_ids: vec![] };
        let steps = plan_steps(&req);
        assert!(steps.iter().all(|s| s.key != NAT_GATEWAY_STEP && s.key != LEGACY_NETWORK_STEP));
        assert_eq!(critical(&steps), ["vpc", "eks_cluster", "select_active", "addon:vpc-cni", "hyperpod_cluster"]);
    }

    #[test]
    fn chart_steps_run_beside_the_addons() {
        let req = ClusterCreateRequest {
            name: "demo".into(),
            region: "us-east-1".into(),
            kubernetes_version: "1.33".into(),
            network: NetworkSpec::default(),
            availability_zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            hyperpod: None,
            storage: None,
            public_access_cidrs: vec![],
        };
        let steps = plan_steps_with(&req, PINNED_CHARTS);
        let chart = steps.iter().find(|s| s.key == "chart:kuberay-operator").expect("chart step");
        assert_eq!(chart.depends_on, ["select_active"]);
        assert!(chart.title.contains("kuberay-operator 1.4.2"), "{}", chart.title);
        assert_eq!(chart.expected_secs, Some(60));
        assert!(steps.iter().all(|s| !s.depends_on.contains(&chart.key)), "nothing waits for the chart");
        let keda = steps.iter().find(|s| s.key == "chart:keda").expect("KEDA chart step");
        assert_eq!(keda.depends_on, ["select_active"]);
        assert_eq!(
            keda.title,
            "Install Helm chart keda 2.21.1 in namespace keda: KEDA for ScaledObject autoscaling of inference endpoints"
        );
        assert!(steps.iter().all(|s| !s.depends_on.contains(&keda.key)), "nothing waits for KEDA");
        let prom = steps.iter().find(|s| s.key == "chart:prometheus").expect("Prometheus chart step");
        assert_eq!(prom.depends_on, ["select_active"]);
        assert!(prom.title.contains("prometheus 29.27.0 in namespace monitoring"), "{}", prom.title);
        // The load balancer controller waits for its IRSA role, which waits for the OIDC provider.
        let lbc = steps.iter().find(|s| s.key == "chart:aws-load-balancer-controller").expect("controller step");
        assert_eq!(lbc.depends_on, ["select_active", "lb_controller_role"]);
        assert!(lbc.title.contains("aws-load-balancer-controller 3.5.0 in namespace kube-system"), "{}", lbc.title);
        let role = steps.iter().find(|s| s.key == "lb_controller_role").unwrap();
        assert_eq!(role.depends_on, ["oidc_provider"]);
        assert!(role.title.contains("demo-lb-controller-role"), "{}", role.title);
        assert_eq!(steps.iter().find(|s| s.key == "oidc_provider").unwrap().depends_on, ["select_active"]);
        for (i, s) in steps.iter().enumerate() {
            for d in &s.depends_on {
                assert!(steps[..i].iter().any(|p| &p.key == d), "{} depends on later {d}", s.key);
            }
        }
        let without: Vec<String> = plan_steps(&req).into_iter().map(|s| s.key).collect();
        let with: Vec<String> = steps
            .into_iter()
            .map(|s| s.key)
            .filter(|k| !k.starts_with("chart:") && k != "oidc_provider" && k != "lb_controller_role")
            .collect();
        assert_eq!(without, with, "the charts (and the controller's identity) only add steps");
    }

    #[test]
    fn the_hyperpod_cluster_waits_for_the_hyperpod_dependencies_chart() {
        let mut req = ClusterCreateRequest {
            name: "demo".into(),
            region: "us-east-1".into(),
            kubernetes_version: "1.33".into(),
            network: NetworkSpec::default(),
            availability_zones: vec!["us-east-1a".into(), "us-east-1b".into()],
            hyperpod: None,
            storage: None,
            public_access_cidrs: vec![],
        };
        let keys = |req: &ClusterCreateRequest| -> Vec<String> {
            plan_steps_with(req, PINNED_CHARTS).into_iter().map(|s| s.key).collect()
        };
        assert!(!keys(&req).contains(&"chart:hyperpod-dependencies".to_string()), "no HyperPod, no dependencies");
        req.hyperpod = Some(HyperPodClusterSpec {
            node_recovery: NodeRecovery::Automatic,
            instance_groups: vec![InstanceGroupSpec {
                name: "workers".into(),
                instance_type: "ml.g5.8xlarge".into(),
                count: 1,
                availability_zone: "us-east-1a".into(),
                subnet_id: None,
                capacity: CapacitySpec::OnDemand,
                interface_mode: InterfaceMode::Standard,
                ebs_volume_gb: 500,
                deep_health_checks: DeepHealthChecks::default(),
                lifecycle_script: None,
            }],
        });
        let steps = plan_steps_with(&req, PINNED_CHARTS);
        let chart = steps.iter().find(|s| s.key == "chart:hyperpod-dependencies").expect("chart step");
        assert_eq!(chart.depends_on, ["select_active"]);
        assert!(chart.title.contains("hyperpod-helm-chart 0.1.0 in namespace kube-system"), "{}", chart.title);
        let hp = steps.iter().find(|s| s.key == "hyperpod_cluster").unwrap();
        assert!(hp.depends_on.contains(&chart.key), "{:?}", hp.depends_on);
        let kuberay = "chart:kuberay-operator".to_string();
        assert!(steps.iter().all(|s| !s.depends_on.contains(&kuberay)), "nothing waits for KubeRay");
        let keda = "chart:keda".to_string();
        assert!(steps.iter().any(|s| s.key == keda), "KEDA is installed with or without HyperPod");
        assert!(steps.iter().all(|s| !s.depends_on.contains(&keda)), "nothing waits for KEDA");
        for (i, s) in steps.iter().enumerate() {
            for d in &s.depends_on {
                assert!(steps[..i].iter().any(|p| &p.key == d), "{} depends on later {d}", s.key);
            }
        }
    }

    #[test]
    fn policies_are_scoped() {
        let p = hyperpod_bucket_policy("my-bucket").to_string();
        assert!(!p.contains("\"s3:*\"") && !p.contains("\"*\""));
        assert!(p.contains("arn:aws:s3:::my-bucket/*"));
        // The lifecycle script is an object of the bucket: the role can read it.
        let policy = hyperpod_bucket_policy("my-bucket");
        let reads: Vec<&str> = policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["Action"].as_array().unwrap().iter().any(|a| a == "s3:GetObject"))
            .flat_map(|s| s["Resource"].as_array().unwrap().iter().filter_map(Value::as_str))
            .collect();
        assert_eq!(reads, ["arn:aws:s3:::my-bucket/*"]);
        assert!(crate::lifecycle::script_key().starts_with("lifecycle/"));
    }

    /// The EKS-node statement lists exactly what `sagemaker-hyperpod-prerequisites-iam` lists.
    #[test]
    fn the_execution_role_carries_the_documented_eks_node_actions() {
        let p = hyperpod_eks_node_policy();
        let stmts = p["Statement"].as_array().unwrap();
        assert_eq!(stmts.len(), 2);
        let on_any: Vec<&str> = stmts[0]["Action"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(stmts[0]["Resource"], "*");
        assert_eq!(on_any.len(), 17 + 4 + 1);
        for a in [
            "ec2:AssignPrivateIpAddresses",
            "ec2:CreateNetworkInterface",
            "ecr:BatchGetImage",
            "ecr:GetAuthorizationToken",
            "eks-auth:AssumeRoleForPodIdentity",
        ] {
            assert!(on_any.contains(&a), "{a}");
        }
        assert!(on_any.iter().all(|a| !a.ends_with(":*")), "named actions only");
        assert_eq!(stmts[1]["Action"], json!(["ec2:CreateTags"]));
        assert_eq!(stmts[1]["Resource"], json!(["arn:aws:ec2:*:*:network-interface/*"]));
    }
}

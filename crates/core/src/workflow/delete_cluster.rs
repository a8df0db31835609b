//! The delete-cluster pipeline: what create-cluster made, removed in reverse order.
//!
//! Only resources carrying our ownership tags are deleted; a same-named resource that is not
//! ours stops the step with `needs_attention`. An imported cluster is forgotten: of what is in
//! AWS only what its import installed goes ([`plan_imported`]: the dependencies, S3 CSI
//! identity and storage claim named by the steps of the import operation, then the access
//! entry); the EKS and HyperPod clusters, the bucket and the tracking servers stay. The shared
//! bucket is kept unless the request asks for `delete_bucket` (it holds the user's data, and
//! only an empty bucket is ever deleted).
//!
//! The FSx for Lustre volumes of a created cluster (`workflow::fsx`) go with it: the
//! assessment finds the file systems tagged as the cluster's volumes and records them in the
//! request, and each gets an `fsx:<volume>` step (DeleteFileSystem, polled until gone) after the
//! HyperPod cluster whose nodes mount it and before `network`, since a file system's network
//! interfaces keep its subnet, so the VPC, from being deleted. Their claims and volumes go with
//! the EKS control plane. A file system that is no longer tagged as ours needs attention.
//!
//! The SageMaker managed MLflow tracking servers created for the cluster
//! (`create_tracking_server` with `cluster`) go with it unless `keep_tracking_servers`: a server
//! bills while it exists. Before anything is recorded the assessment lists the servers of the
//! cluster's region (`MlflowTracking::list_tracking_servers`) and records, in the request, those
//! whose ownership tags name the cluster (read as delete-tracking-server reads them) — a server
//! named like the cluster counts only when the operation that created it (its
//! `instantstart:operation` tag) asked for this cluster, since a server created without a
//! cluster is tagged with its own name. Each gets a `mlflow:<server>` step
//! (DeleteMlflowTrackingServer, polled until the server is gone) and, when it runs with the
//! `<server>-mlflow-role` InstantStart created and that role is tagged for the cluster, a
//! `mlflow_role:<server>` step after it (and `mlflow_writer:<server>` for its writer role of
//! ours) — the executors of `workflow::mlflow`. They depend on
//! nothing of the EKS/HyperPod teardown and run beside it; the bucket and `unregister` wait for
//! them. A request recorded without the assessment (`Engine::submit`) deletes only the servers
//! it lists, each still checked against its tags when its step observes.
//!
//! The EKS Pod Identity identities go too: the S3 CSI driver's association and role
//! (`s3_csi_identity` before the control plane, `s3_csi_role` after the association), and the
//! training operator's (`training_operator_identity`, `training_operator_role`, planned with a
//! HyperPod cluster: the managed feature creates them; absent counts as done). Associations are
//! removed explicitly (EKS would drop them with the cluster) so a role is never deleted while
//! an association still names it.
//!
//! The roles of the other managed features go as well, each after what uses it (planned with a
//! HyperPod cluster; absent counts as done; only a role carrying our ownership tags for the
//! cluster is deleted, a same-named one that is not ours needs attention): `autoscaling_role`
//! (`<cluster>-hp-autoscaling-role`, used by HyperPod's managed Karpenter) after
//! `hyperpod_cluster`, `checkpoint_role` (`<cluster>-tiered-ckpt-role`, named by the
//! checkpointing service account) and `inference_role` (`SageMakerHyperPodInference-<cluster>`,
//! the inference add-on's execution role) after `eks_cluster`, which takes the service account
//! and the add-on with it. `unregister` waits for all of them.
//!
//! Observability (`workflow::observability`) goes the same way: `observability_identity` and
//! `observability_role` (the collector's association and role) before the control plane, and
//! `prometheus_workspace` after it — every Amazon Managed Service for Prometheus workspace with
//! the cluster's alias and our ownership tags for it, with its metric history (turning the
//! feature off keeps the workspace; deleting the cluster does not). Absent counts as done.
//!
//! `load_balancer_services` deletes the `LoadBalancer` Services of the cluster's inference
//! endpoints and waits until they are gone, before `chart:aws-load-balancer-controller` is
//! uninstalled and before the control plane goes: only a running controller deletes a
//! Service's NLB, and an NLB left behind keeps the VPC from being deleted (EKS "Delete a
//! cluster"; see [`super::lb_controller::RemoveLoadBalancerServices`]). A `LoadBalancer`
//! Service that is not ours needs attention.
//!
//! For deletions, an executor's `observe` answers "is the deletion already done or under
//! way?" (`Exists`) or "is the resource still there?" (`Absent`, so `submit` deletes it).

use super::charts::{CHART_STEP_PREFIX, RemoveChart, chart_step_key};
use super::dependencies::{ADDON_STEP_PREFIX, is_dependency_key};
use super::import_cluster::{ACCESS_ENTRY_STEP, RemoveAccessEntry};
use super::lb_controller::{LB_CONTROLLER_ROLE_STEP, LB_SERVICES_STEP, RemoveLoadBalancerServices, lb_controller_role};
use super::mlflow::{self, DeleteTrackingServerStep, FoundTrackingServer};
use super::observability as obs;
use super::steps::{AddonTarget, RemoveOwnedAddon, RemovePodIdentity, RemoveRole};
use super::{cluster_target, decode};
use crate::engine::{
    Assessment, EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow,
};
use crate::names::DerivedNames;
use crate::operation::{OperationId, OperationKind, OperationStatus, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::{ACTIVE_CLUSTER, ClusterRecord, ClusterSource, OperationFilter, Store};
use crate::validate::Findings;
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// Request to delete a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteClusterRequest {
    pub name: String,
    /// Also delete the shared S3 bucket if InstantStart created it (default: keep the data). The
    /// bucket goes only when empty (InstantStart never deletes objects, MLflow artifacts
    /// included) and after the cluster's tracking servers.
    #[serde(default)]
    pub delete_bucket: bool,
    /// Keep the SageMaker managed MLflow tracking servers created for this cluster (default:
    /// false: each is deleted with the cluster — a server bills while it exists — with its runs,
    /// and the `<server>-mlflow-role` InstantStart created for it). Their artifacts live in the
    /// shared bucket, which is kept unless `delete_bucket`. An imported cluster's servers are
    /// always kept (it is only forgotten).
    #[serde(default)]
    pub keep_tracking_servers: bool,
    /// The cluster's tracking servers as the assessment found them in AWS before the operation
    /// was recorded; whatever a caller sends here is replaced by the real state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tracking_servers: Vec<ClusterTrackingServer>,
    /// The cluster's task governance that is ours (quotas, scheduler config, add-on), as the
    /// assessment found it: removed in that order before the HyperPod cluster goes. Whatever a
    /// caller sends here is replaced by the real state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governance: Option<super::governance::GovernanceTeardown>,
    /// The cluster's FSx for Lustre volumes as the assessment found them (file systems tagged
    /// as its volumes): deleted after the HyperPod cluster, before the network. Whatever a
    /// caller sends here is replaced by the real state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub file_systems: Vec<ClusterFileSystem>,
}

/// An FSx for Lustre volume of the cluster, found before the deletion was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterFileSystem {
    /// The volume's name (`instantstart:fsx` tag).
    pub name: String,
    /// The file system's id (`fs-…`).
    pub file_system_id: String,
}

/// Step-key prefix of deleting a volume's file system with the cluster.
pub const FSX_STEP_PREFIX: &str = "fsx:";

/// Adds an `fsx:<file system id>` step per volume: after the HyperPod cluster (its nodes mount the file
/// system) or the control plane, before `network` and `unregister`.
fn with_file_system_teardown(steps: &mut Vec<StepSpec>, volumes: &[ClusterFileSystem]) {
    if volumes.is_empty() {
        return;
    }
    let after = if steps.iter().any(|s| s.key == "hyperpod_cluster") { "hyperpod_cluster" } else { "eks_cluster" };
    let keys: Vec<String> = volumes.iter().map(|v| format!("{FSX_STEP_PREFIX}{}", v.file_system_id)).collect();
    for s in steps.iter_mut().filter(|s| s.key == "network" || s.key == "unregister") {
        s.depends_on.extend(keys.iter().cloned());
    }
    let at = steps.iter().position(|s| s.key == "network").unwrap_or(steps.len());
    let teardown = volumes.iter().zip(&keys).map(|(v, key)| StepSpec {
        key: key.clone(),
        title: format!("Delete FSx for Lustre file system {} of volume {}", v.file_system_id, v.name),
        depends_on: vec![after.to_string()],
        expected_secs: Some(super::fsx::DELETE_SECS),
    });
    steps.splice(at..at, teardown);
}

/// A tracking server created for the cluster, found before the deletion was recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterTrackingServer {
    pub name: String,
    pub arn: String,
    /// `<name>-mlflow-role`, when InstantStart created it for the server (tagged for the
    /// cluster); deleted after the server. `None` for a caller-supplied role, which is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// `<name>-mlflow-writer` (the role training pods report through), when ours; deleted
    /// after the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_role: Option<String>,
}

/// Step key prefix of a tracking server's deletion: `mlflow:<server>`.
pub const MLFLOW_STEP_PREFIX: &str = "mlflow:";
/// Step key prefix of the deletion of the role InstantStart created for a tracking server:
/// `mlflow_role:<server>`.
pub const MLFLOW_ROLE_STEP_PREFIX: &str = "mlflow_role:";
/// Step key prefix of the deletion of a tracking server's writer role: `mlflow_writer:<server>`.
pub const MLFLOW_WRITER_STEP_PREFIX: &str = "mlflow_writer:";

/// Step deleting the role of managed autoscaling (`features::autoscaling_role`).
pub const AUTOSCALING_ROLE_STEP: &str = "autoscaling_role";
/// Step deleting the role of tiered checkpointing (`features::checkpoint_role`).
pub const CHECKPOINT_ROLE_STEP: &str = "checkpoint_role";
/// Step deleting the inference operator's execution role (`features::inference_role`).
pub const INFERENCE_ROLE_STEP: &str = "inference_role";

/// Step deleting the association of the observability collector (`observability::observability_identity`).
pub const OBSERVABILITY_IDENTITY_STEP: &str = "observability_identity";
/// Step deleting the observability collector's role (`observability::observability_role`).
pub const OBSERVABILITY_ROLE_STEP: &str = "observability_role";
/// Step deleting the cluster's Prometheus workspaces of ours (`observability::DeletePrometheusWorkspaces`).
pub const PROMETHEUS_WORKSPACE_STEP: &str = "prometheus_workspace";

/// The delete-cluster workflow.
pub struct DeleteClusterWorkflow {
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
    helm: Option<Arc<dyn HelmReleases>>,
}

impl DeleteClusterWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, kube: Arc<dyn KubeApi>, store: Arc<dyn Store>) -> Self {
        DeleteClusterWorkflow { aws, kube, store, helm: None }
    }

    /// Uninstalls the pinned Helm charts (`chart:<release>` steps, before the EKS control plane
    /// goes) through `helm`.
    pub fn with_helm(mut self, helm: Arc<dyn HelmReleases>) -> Self {
        self.helm = Some(helm);
        self
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

fn plan_steps_with(
    rec: &ClusterRecord,
    delete_bucket: bool,
    charts: &[PinnedChart],
    servers: &[ClusterTrackingServer],
) -> Vec<StepSpec> {
    let names = DerivedNames::for_cluster(&rec.name);
    if rec.source == ClusterSource::Imported {
        return plan_imported(rec, &[]);
    }
    let mut steps = vec![
        step("storage", "Delete the shared-bucket PersistentVolume and claim".into(), &[], 5),
        step(
            LB_SERVICES_STEP,
            "Delete the LoadBalancer Services of the cluster's inference endpoints and wait until their load balancers are gone"
                .into(),
            &[],
            30,
        ),
    ];
    // The tracking servers need nothing of the EKS/HyperPod teardown: they run beside it.
    let mut server_keys = Vec::new();
    let mut mlflow_keys = Vec::new();
    for s in servers {
        let key = format!("{MLFLOW_STEP_PREFIX}{}", s.name);
        steps.push(step(
            &key,
            format!("Delete MLflow tracking server {} (created for the cluster; its runs go with it)", s.name),
            &[],
            mlflow::DELETE_SECS,
        ));
        server_keys.push(key.clone());
        mlflow_keys.push(key.clone());
        if let Some(role) = &s.role {
            let role_key = format!("{MLFLOW_ROLE_STEP_PREFIX}{}", s.name);
            steps.push(step(
                &role_key,
                format!("Delete IAM role {role} (InstantStart created it for tracking server {})", s.name),
                &[key.as_str()],
                5,
            ));
            mlflow_keys.push(role_key);
        }
        if let Some(role) = &s.writer_role {
            let role_key = format!("{MLFLOW_WRITER_STEP_PREFIX}{}", s.name);
            steps.push(step(
                &role_key,
                format!("Delete IAM role {role} (training pods reported to tracking server {} through it)", s.name),
                &[key.as_str()],
                5,
            ));
            mlflow_keys.push(role_key);
        }
    }
    // Charts needed only by a HyperPod cluster exist only with one, and go after it.
    let charts: Vec<&PinnedChart> =
        charts.iter().filter(|c| !c.before_hyperpod || rec.hyperpod_cluster.is_some()).collect();
    let chart_keys: Vec<String> = charts.iter().map(|c| chart_step_key(c)).collect();
    let uninstall = |chart: &PinnedChart, deps: &[&str]| {
        step(&chart_step_key(chart), format!("Uninstall Helm release {}/{}", chart.namespace, chart.release), deps, 30)
    };
    for chart in charts.iter().filter(|c| !c.before_hyperpod) {
        if chart.release == AWS_LOAD_BALANCER_CONTROLLER.release {
            // The controller deletes the Services' load balancers: it goes after them.
            steps.push(uninstall(chart, &[LB_SERVICES_STEP]));
            // Its IRSA role goes once the controller is gone.
            steps.push(step(
                LB_CONTROLLER_ROLE_STEP,
                format!("Delete IAM role {}", lb_controller_role(&rec.name)),
                &[&chart_step_key(chart)],
                5,
            ));
        } else {
            steps.push(uninstall(chart, &[]));
        }
    }
    let with_charts = |deps: &[&str]| -> Vec<String> {
        deps.iter().map(|d| d.to_string()).chain(chart_keys.iter().cloned()).collect()
    };
    let mut unregister_deps = vec!["storage", "eks_cluster", "eks_cluster_role", "network", "s3_csi_role"];
    steps.push(step(
        "s3_csi_identity",
        format!(
            "Delete the Pod Identity association of {}/{}",
            super::create_cluster::S3_CSI_NAMESPACE,
            super::create_cluster::S3_CSI_SERVICE_ACCOUNT
        ),
        &["storage"],
        10,
    ));
    steps.push(step(
        "s3_csi_role",
        format!("Delete IAM role {}", super::create_cluster::s3_csi_role(&rec.name)),
        &["s3_csi_identity"],
        5,
    ));
    let mut eks_deps = vec!["s3_csi_identity", LB_SERVICES_STEP];
    if rec.hyperpod_cluster.is_some() {
        steps.push(step(
            "training_operator_identity",
            format!(
                "Delete the Pod Identity association of {}/{} (if the training operator was on)",
                super::features::TRAINING_OPERATOR_NAMESPACE,
                super::features::TRAINING_OPERATOR_SERVICE_ACCOUNT
            ),
            &["storage"],
            10,
        ));
        steps.push(step(
            "training_operator_role",
            format!(
                "Delete IAM role {} (if the training operator was on)",
                super::features::training_operator_role(&rec.name)
            ),
            &["training_operator_identity"],
            5,
        ));
        eks_deps.push("training_operator_identity");
        unregister_deps.push("training_operator_role");
    }
    // Observability's identity and workspace: planned for every created cluster (the workspace
    // outlives the feature, and HyperPod may have been removed since; absent counts as done).
    steps.push(step(
        OBSERVABILITY_IDENTITY_STEP,
        format!(
            "Delete the Pod Identity association of {}/{} (if observability was on)",
            obs::OBSERVABILITY_NAMESPACE,
            obs::OBSERVABILITY_SERVICE_ACCOUNT
        ),
        &["storage"],
        10,
    ));
    steps.push(step(
        OBSERVABILITY_ROLE_STEP,
        format!("Delete IAM role {} (if observability was on)", obs::observability_role(&rec.name)),
        &[OBSERVABILITY_IDENTITY_STEP],
        5,
    ));
    eks_deps.push(OBSERVABILITY_IDENTITY_STEP);
    unregister_deps.push(OBSERVABILITY_ROLE_STEP);
    if let Some(hp) = &rec.hyperpod_cluster {
        steps.push(step("hyperpod_cluster", format!("Delete HyperPod cluster {hp}"), &["storage"], 600));
        for chart in charts.iter().filter(|c| c.before_hyperpod) {
            steps.push(uninstall(chart, &["hyperpod_cluster"]));
        }
        steps.push(step(
            "hyperpod_execution_role",
            format!("Delete IAM role {}", names.hyperpod_execution_role),
            &["hyperpod_cluster"],
            5,
        ));
        steps.push(step("compute_subnets", "Delete the compute subnets".into(), &["hyperpod_cluster"], 10));
        // HyperPod's managed Karpenter acts with this role until the HyperPod cluster is gone.
        steps.push(step(
            AUTOSCALING_ROLE_STEP,
            format!("Delete IAM role {} (if managed autoscaling was on)", super::features::autoscaling_role(&rec.name)),
            &["hyperpod_cluster"],
            5,
        ));
        let mut eks = step("eks_cluster", format!("Delete EKS control plane {}", names.eks_cluster), &[], 600);
        eks.depends_on = with_charts(&[&["hyperpod_cluster"][..], &eks_deps[..]].concat());
        steps.push(eks);
        unregister_deps.extend(["hyperpod_cluster", "hyperpod_execution_role", "compute_subnets"]);
    } else {
        let mut eks = step("eks_cluster", format!("Delete EKS control plane {}", names.eks_cluster), &[], 600);
        eks.depends_on = with_charts(&[&["storage"][..], &eks_deps[..]].concat());
        steps.push(eks);
    }
    steps.push(step("eks_cluster_role", format!("Delete IAM role {}", names.eks_cluster_role), &["eks_cluster"], 5));
    if rec.hyperpod_cluster.is_some() {
        // The service account of tiered checkpointing and the inference operator's add-on name
        // these roles until the control plane (and with it the add-on) is gone.
        steps.push(step(
            CHECKPOINT_ROLE_STEP,
            format!("Delete IAM role {} (if tiered checkpointing was on)", super::features::checkpoint_role(&rec.name)),
            &["eks_cluster"],
            5,
        ));
        steps.push(step(
            INFERENCE_ROLE_STEP,
            format!(
                "Delete IAM role {} (if the inference operator was on)",
                super::features::inference_role(&rec.name)
            ),
            &["eks_cluster"],
            5,
        ));
        unregister_deps.extend([AUTOSCALING_ROLE_STEP, CHECKPOINT_ROLE_STEP, INFERENCE_ROLE_STEP]);
    }
    // The observability add-on writes to the workspace until the control plane is gone.
    steps.push(step(
        PROMETHEUS_WORKSPACE_STEP,
        format!(
            "Delete Amazon Managed Service for Prometheus workspace {} and its metrics (if observability was ever on)",
            prometheus_alias(&rec.name)
        ),
        &["eks_cluster"],
        30,
    ));
    unregister_deps.push(PROMETHEUS_WORKSPACE_STEP);
    let network_deps: &[&str] =
        if rec.hyperpod_cluster.is_some() { &["eks_cluster", "compute_subnets"] } else { &["eks_cluster"] };
    steps.push(step(
        "network",
        format!("Delete VPC {} and its subnets, gateways and routes", names.vpc),
        network_deps,
        120,
    ));
    if delete_bucket {
        let deps: &[&str] =
            if rec.hyperpod_cluster.is_some() { &["storage", "hyperpod_cluster"] } else { &["storage"] };
        let mut bucket = step(
            "bucket",
            format!("Delete S3 bucket {} (only if InstantStart created it)", rec.bucket.clone().unwrap_or_default()),
            deps,
            10,
        );
        // A tracking server writes its artifacts into the bucket until it is gone.
        bucket.depends_on.extend(server_keys);
        steps.push(bucket);
        unregister_deps.push("bucket");
    }
    if steps.iter().any(|s| s.key == LB_CONTROLLER_ROLE_STEP) {
        unregister_deps.push(LB_CONTROLLER_ROLE_STEP);
    }
    let mut unregister = step("unregister", format!("Forget cluster {}", rec.name), &unregister_deps, 1);
    unregister.depends_on.extend(mlflow_keys);
    steps.push(unregister);
    steps
}

/// Adds the task governance teardown (quotas → scheduler config → add-on) before the HyperPod
/// cluster's deletion: SageMaker's quotas and scheduler config name the cluster.
fn with_governance_teardown(steps: &mut Vec<StepSpec>, cluster: &str, g: &super::governance::GovernanceTeardown) {
    let teardown = g.steps(cluster);
    let keys: Vec<String> = teardown.iter().map(|s| s.key.clone()).collect();
    if let Some(hp) = steps.iter_mut().find(|s| s.key == "hyperpod_cluster") {
        hp.depends_on.extend(keys);
    }
    let at = steps.iter().position(|s| s.key == "hyperpod_cluster").unwrap_or(steps.len());
    steps.splice(at..at, teardown);
}

/// What InstantStart installed on imported cluster `rec`, as the step keys that remove it: the
/// add-on and chart steps (not a chart release found and left alone), the S3 CSI identity and
/// role, the storage claim and the load balancer controller's role of its newest successful
/// import and of every successful add-HyperPod since; and, while the record has a HyperPod
/// cluster an add-HyperPod made, that cluster's removal steps (`hyperpod_cluster`,
/// `hyperpod_execution_role`, `compute_subnets`).
pub fn installed_by_import(store: &dyn Store, rec: &ClusterRecord) -> Result<Vec<String>, EngineError> {
    let ops = store.list_operations(&OperationFilter {
        target: Some(cluster_target(&rec.name)),
        status: Some(OperationStatus::Succeeded),
        limit: None,
        archived: None,
    })?;
    // Newest first: the add-HyperPod operations up to the newest import, then that import.
    let mut ours = Vec::new();
    let mut added_hyperpod = false;
    for op in &ops {
        match op.kind {
            OperationKind::AddHyperPod => {
                added_hyperpod = true;
                ours.push(op);
            }
            OperationKind::ImportCluster => {
                ours.push(op);
                break;
            }
            _ => {}
        }
    }
    if !ours.iter().any(|o| o.kind == OperationKind::ImportCluster) {
        return Ok(Vec::new());
    }
    let mut keys: Vec<String> = Vec::new();
    for op in ours.iter().rev() {
        for s in &op.steps {
            let wanted = is_dependency_key(&s.key)
                || ["storage", "s3_csi_identity", "s3_csi_role", LB_CONTROLLER_ROLE_STEP].contains(&s.key.as_str());
            if wanted && s.outputs.get("left_alone") != Some(&Value::Bool(true)) && !keys.contains(&s.key) {
                keys.push(s.key.clone());
            }
        }
    }
    if added_hyperpod && rec.hyperpod_cluster.is_some() {
        keys.extend(["hyperpod_cluster", "hyperpod_execution_role", "compute_subnets"].map(String::from));
    }
    Ok(keys)
}

/// The steps forgetting imported cluster `rec`, removing what its import `installed` (step
/// keys of [`installed_by_import`]) before the access entry goes (the control plane needs it
/// to reach the Kubernetes API). The `vpc-cni` add-on stays: deleting it would take the
/// cluster's pod networking with it.
pub fn plan_imported(rec: &ClusterRecord, installed: &[String]) -> Vec<StepSpec> {
    let has = |k: &str| installed.iter().any(|i| i == k);
    let mut steps = Vec::new();
    // A HyperPod cluster InstantStart added to the imported cluster goes, with what was made
    // for it (workflow::hyperpod_attach); a HyperPod cluster that came with the import stays.
    if has("hyperpod_cluster") {
        let hp = rec.hyperpod_cluster.clone().unwrap_or_default();
        steps.push(step("hyperpod_cluster", format!("Delete HyperPod cluster {hp} (InstantStart added it)"), &[], 600));
        steps.push(step(
            "hyperpod_execution_role",
            format!("Delete IAM role {}", DerivedNames::for_cluster(&rec.name).hyperpod_execution_role),
            &["hyperpod_cluster"],
            5,
        ));
        steps.push(step("compute_subnets", "Delete the compute subnets".into(), &["hyperpod_cluster"], 10));
    }
    if has("storage") {
        steps.push(step("storage", "Delete the shared-bucket PersistentVolume and claim".into(), &[], 5));
    }
    let after_storage: &[&str] = if has("storage") { &["storage"] } else { &[] };
    let lbc = chart_step_key(&AWS_LOAD_BALANCER_CONTROLLER);
    for key in installed.iter().filter(|k| k.starts_with(CHART_STEP_PREFIX)) {
        let Some(chart) = pinned_chart(&key[CHART_STEP_PREFIX.len()..]) else { continue };
        let title = format!("Uninstall Helm release {}/{} (the import installed it)", chart.namespace, chart.release);
        if *key == lbc {
            steps.push(step(
                LB_SERVICES_STEP,
                "Delete the LoadBalancer Services of the cluster's inference endpoints and wait until their load balancers are gone"
                    .into(),
                &[],
                30,
            ));
            steps.push(step(key, title, &[LB_SERVICES_STEP], 30));
            if has(LB_CONTROLLER_ROLE_STEP) {
                steps.push(step(
                    LB_CONTROLLER_ROLE_STEP,
                    format!("Delete IAM role {}", lb_controller_role(&rec.name)),
                    &[key.as_str()],
                    5,
                ));
            }
        } else if chart.before_hyperpod && has("hyperpod_cluster") {
            steps.push(step(key, title, &["hyperpod_cluster"], 30));
        } else {
            steps.push(step(key, title, &[], 30));
        }
    }
    if has("s3_csi_identity") {
        steps.push(step(
            "s3_csi_identity",
            format!(
                "Delete the Pod Identity association of {}/{}",
                super::create_cluster::S3_CSI_NAMESPACE,
                super::create_cluster::S3_CSI_SERVICE_ACCOUNT
            ),
            after_storage,
            10,
        ));
    }
    if has("s3_csi_role") {
        let deps: &[&str] = if has("s3_csi_identity") { &["s3_csi_identity"] } else { after_storage };
        steps.push(step(
            "s3_csi_role",
            format!("Delete IAM role {}", super::create_cluster::s3_csi_role(&rec.name)),
            deps,
            5,
        ));
    }
    for key in installed.iter().filter(|k| k.starts_with(ADDON_STEP_PREFIX)) {
        let addon = &key[ADDON_STEP_PREFIX.len()..];
        if addon == "vpc-cni" {
            continue;
        }
        let deps = if addon == super::create_cluster::S3_CSI_ADDON { after_storage } else { &[] };
        steps.push(step(key, format!("Remove EKS add-on {addon} (the import installed it)"), deps, 60));
    }
    let before_access: Vec<String> = steps.iter().map(|s| s.key.clone()).collect();
    let mut access = step(
        ACCESS_ENTRY_STEP,
        format!(
            "Remove the EKS access entry the import gave the control plane on {} (one that was there before stays)",
            rec.eks_cluster
        ),
        &[],
        3,
    );
    access.depends_on = before_access;
    steps.push(access);
    steps.push(step(
        "unregister",
        format!(
            "Forget imported cluster {} (the EKS and HyperPod clusters, the bucket and what was there before stay)",
            rec.name
        ),
        &[ACCESS_ENTRY_STEP],
        1,
    ));
    steps
}

/// Whether tracking server `s` was created for cluster `rec`: ours (managed-by) and tagged with
/// the cluster's name. A server created without a cluster is tagged with its own name, so one
/// named like the cluster counts only when the operation that created it asked for the cluster.
fn serves_cluster(store: &dyn Store, rec: &ClusterRecord, s: &TrackingServer) -> Result<bool, EngineError> {
    if mlflow::owner_of(&s.tags) != Some(rec.name.as_str()) {
        return Ok(false);
    }
    if s.name != rec.name {
        return Ok(true);
    }
    let Some(op) = s.tags.get(TAG_OPERATION) else { return Ok(false) };
    Ok(store.get_operation(&OperationId(op.clone()))?.is_some_and(|op| {
        op.kind == OperationKind::CreateTrackingServer
            && op.request.get("cluster").and_then(Value::as_str) == Some(rec.name.as_str())
    }))
}

/// The findings of a request's recorded tracking servers (what the assessment found, or what an
/// unchecked caller sent): valid names, only the role InstantStart creates, none twice, none
/// when they are kept or the cluster is imported.
/// The findings of a request's recorded volumes: valid names and file system ids, each once, none
/// for an imported cluster (only forgotten).
fn check_file_systems(req: &DeleteClusterRequest, rec: &ClusterRecord, f: &mut Findings) {
    if req.file_systems.is_empty() {
        return;
    }
    if rec.source == ClusterSource::Imported {
        f.push_unprocessable("file_systems", "an imported cluster is only forgotten; its file systems stay");
    }
    for (i, v) in req.file_systems.iter().enumerate() {
        f.at_index("file_systems", i, |f| {
            if let Err(e) = super::fsx::volume_name_rule(&v.name) {
                f.push("name", e);
            }
            let id = &v.file_system_id;
            if !(id.starts_with("fs-")
                && id.len() <= 21
                && id.len() > 3
                && id[3..].chars().all(|c| c.is_ascii_hexdigit()))
            {
                f.push("file_system_id", "must be an FSx file system id such as fs-0123456789abcdef0");
            } else if req.file_systems[..i].iter().any(|p| p.file_system_id == *id) {
                f.push("file_system_id", format!("{id} is listed twice"));
            }
        });
    }
}

fn check_servers(req: &DeleteClusterRequest, rec: &ClusterRecord, f: &mut Findings) {
    if req.tracking_servers.is_empty() {
        return;
    }
    if req.keep_tracking_servers {
        f.push("tracking_servers", "must be empty with keep_tracking_servers");
    }
    if rec.source == ClusterSource::Imported {
        f.push_unprocessable("tracking_servers", "an imported cluster is only forgotten; its tracking servers stay");
    }
    for (i, s) in req.tracking_servers.iter().enumerate() {
        f.at_index("tracking_servers", i, |f| {
            if let Err(e) = tracking_server_name(&s.name) {
                f.push("name", e);
            } else if req.tracking_servers[..i].iter().any(|p| p.name == s.name) {
                f.push("name", format!("{} is listed twice", s.name));
            }
            if let Some(role) = &s.role
                && role != &mlflow::role_name(&s.name)
            {
                f.push(
                    "role",
                    format!("only {}, the role InstantStart creates for the server", mlflow::role_name(&s.name)),
                );
            }
            if let Some(role) = &s.writer_role
                && role != &mlflow::writer_role_name(&s.name)
            {
                f.push(
                    "writer_role",
                    format!(
                        "only {}, the role InstantStart creates for the server's writers",
                        mlflow::writer_role_name(&s.name)
                    ),
                );
            }
        });
    }
}

#[async_trait]
impl Workflow for DeleteClusterWorkflow {
    fn kind(&self) -> OperationKind {
        OperationKind::DeleteCluster
    }

    fn prepare(&self, request: &Value) -> Result<Prepared, EngineError> {
        let req: DeleteClusterRequest = decode(request)?;
        let rec = crate::api::clusters::resolve(self.store.as_ref(), &req.name)?.record;
        let mut f = Findings::new();
        if req.delete_bucket && rec.source == ClusterSource::Imported {
            f.push_unprocessable("delete_bucket", "an imported cluster's bucket is not InstantStart's to delete");
        }
        check_servers(&req, &rec, &mut f);
        check_file_systems(&req, &rec, &mut f);
        f.finish()?;
        let charts: &[PinnedChart] = if self.helm.is_some() { PINNED_CHARTS } else { &[] };
        let steps = if rec.source == ClusterSource::Imported {
            let mut installed = installed_by_import(self.store.as_ref(), &rec)?;
            if self.helm.is_none() {
                installed.retain(|k| !k.starts_with(CHART_STEP_PREFIX));
            }
            plan_imported(&rec, &installed)
        } else {
            let mut steps = plan_steps_with(&rec, req.delete_bucket, charts, &req.tracking_servers);
            if let Some(g) = req.governance.as_ref().filter(|_| rec.hyperpod_cluster.is_some()) {
                with_governance_teardown(&mut steps, &rec.name, g);
            }
            with_file_system_teardown(&mut steps, &req.file_systems);
            steps
        };
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.name), request: canonical, steps })
    }

    /// Finds the tracking servers created for the cluster (none when they are kept or the
    /// cluster is imported) and records them in the request.
    async fn assess(&self, prepared: &Prepared) -> Result<Assessment, EngineError> {
        let mut req: DeleteClusterRequest = decode(&prepared.request)?;
        let rec = crate::api::clusters::resolve(self.store.as_ref(), &req.name)?.record;
        req.file_systems.clear();
        if rec.source == ClusterSource::Created {
            // A file system's network interfaces keep its subnet, so the VPC, from being deleted:
            // the cluster's volumes go with it.
            let volumes =
                crate::engine::reads::read(|| super::fsx::cluster_volumes(self.aws.as_ref(), &rec.region, &rec.name))
                    .await?;
            for fs in volumes {
                if let Some(name) = fs.tags.get(TAG_FSX_VOLUME) {
                    req.file_systems.push(ClusterFileSystem { name: name.clone(), file_system_id: fs.id.clone() });
                }
            }
            req.file_systems.sort_by(|a, b| (&a.name, &a.file_system_id).cmp(&(&b.name, &b.file_system_id)));
        }
        let mut servers = Vec::new();
        if !req.keep_tracking_servers && rec.source == ClusterSource::Created {
            for s in self.aws.list_tracking_servers(&rec.region).await? {
                if serves_cluster(self.store.as_ref(), &rec, &s)? {
                    let name = s.name.clone();
                    let found = mlflow::found_for_delete(self.aws.as_ref(), s, rec.name.clone()).await?;
                    servers.push(ClusterTrackingServer {
                        name,
                        arn: found.arn,
                        role: found.role,
                        writer_role: found.writer_role,
                    });
                }
            }
            servers.sort_by(|a, b| a.name.cmp(&b.name));
        }
        req.tracking_servers = servers;
        req.governance = None;
        if rec.source == ClusterSource::Created
            && let Some(hp) = &rec.hyperpod_cluster
            && let Some(live) =
                crate::engine::reads::read(|| self.aws.describe_hyperpod_cluster(&rec.region, hp)).await?
        {
            let state = super::governance::read_governance(self.aws.as_ref(), &rec, &live.arn).await?;
            req.governance = super::governance::GovernanceTeardown::of(&rec.name, &live.arn, &state);
        }
        let reduced = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Assessment { plan: None, checks: vec![], reduced_request: Some(reduced) })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: DeleteClusterRequest = decode(request).ok()?;
        let rec = self.store.get_cluster(&req.name).ok()??;
        if let Some(g) = &req.governance
            && (key.starts_with(super::governance::REMOVE_QUOTA_PREFIX)
                || key == super::governance::REMOVE_SCHEDULER_STEP
                || key == super::governance::REMOVE_ADDON_STEP)
        {
            return g.executor(self.aws.clone(), &rec, key);
        }
        if let Some(release) = key.strip_prefix(CHART_STEP_PREFIX) {
            let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
            return Some(Arc::new(RemoveChart { helm: self.helm.clone()?, target, chart: *pinned_chart(release)? }));
        }
        if key == ACCESS_ENTRY_STEP && rec.source == ClusterSource::Imported {
            return Some(Arc::new(RemoveAccessEntry {
                aws: self.aws.clone(),
                region: rec.region.clone(),
                eks_cluster: rec.eks_cluster.clone(),
                owner: rec.name.clone(),
            }));
        }
        if key == LB_SERVICES_STEP {
            let target = KubeTarget::new(rec.region.clone(), rec.eks_cluster.clone());
            return Some(Arc::new(RemoveLoadBalancerServices { kube: self.kube.clone(), target }));
        }
        if let Some(id) = key.strip_prefix(FSX_STEP_PREFIX) {
            let v = req.file_systems.iter().find(|v| v.file_system_id == id)?;
            return Some(Arc::new(super::fsx::DeleteFileSystemStep {
                aws: self.aws.clone(),
                region: rec.region.clone(),
                cluster: rec.name.clone(),
                name: v.name.clone(),
                id: v.file_system_id.clone(),
            }));
        }
        if let Some(server) = key.strip_prefix(MLFLOW_STEP_PREFIX) {
            let s = req.tracking_servers.into_iter().find(|s| s.name == server)?;
            let found = FoundTrackingServer { owner: rec.name, arn: s.arn, role: s.role, writer_role: s.writer_role };
            return Some(Arc::new(DeleteTrackingServerStep::new(self.aws.clone(), s.name, rec.region, found)));
        }
        if let Some(server) = key.strip_prefix(MLFLOW_ROLE_STEP_PREFIX) {
            let role = req.tracking_servers.into_iter().find(|s| s.name == server)?.role?;
            return Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: rec.name, name: role }));
        }
        if let Some(server) = key.strip_prefix(MLFLOW_WRITER_STEP_PREFIX) {
            let role = req.tracking_servers.into_iter().find(|s| s.name == server)?.writer_role?;
            return Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: rec.name, name: role }));
        }
        let target = AddonTarget {
            aws: self.aws.clone(),
            region: rec.region.clone(),
            eks_cluster: rec.eks_cluster.clone(),
            cluster: rec.name.clone(),
        };
        if let Some(addon) = key.strip_prefix(ADDON_STEP_PREFIX) {
            return Some(Arc::new(RemoveOwnedAddon { target, addon: addon.to_string() }));
        }
        match key {
            "s3_csi_identity" => {
                return Some(Arc::new(RemovePodIdentity(super::create_cluster::s3_csi_identity(target))));
            }
            "training_operator_identity" => {
                return Some(Arc::new(RemovePodIdentity(super::features::training_operator_identity(target))));
            }
            "s3_csi_role" => {
                let name = super::create_cluster::s3_csi_role(&rec.name);
                return Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: rec.name, name }));
            }
            "training_operator_role" => {
                let name = super::features::training_operator_role(&rec.name);
                return Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: rec.name, name }));
            }
            OBSERVABILITY_IDENTITY_STEP => {
                return Some(Arc::new(RemovePodIdentity(obs::observability_identity(target))));
            }
            OBSERVABILITY_ROLE_STEP => {
                let name = obs::observability_role(&rec.name);
                return Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: rec.name, name }));
            }
            PROMETHEUS_WORKSPACE_STEP => {
                return Some(Arc::new(obs::DeletePrometheusWorkspaces {
                    aws: self.aws.clone(),
                    region: rec.region.clone(),
                    cluster: rec.name,
                }));
            }
            AUTOSCALING_ROLE_STEP | CHECKPOINT_ROLE_STEP | INFERENCE_ROLE_STEP => {
                let name = match key {
                    AUTOSCALING_ROLE_STEP => super::features::autoscaling_role(&rec.name),
                    CHECKPOINT_ROLE_STEP => super::features::checkpoint_role(&rec.name),
                    _ => super::features::inference_role(&rec.name),
                };
                return Some(Arc::new(RemoveRole { aws: self.aws.clone(), cluster: rec.name, name }));
            }
            _ => {}
        }
        let which = match key {
            "storage" => Target::Storage,
            "hyperpod_cluster" => Target::HyperPod,
            "hyperpod_execution_role" => Target::Role(DerivedNames::for_cluster(&rec.name).hyperpod_execution_role),
            "compute_subnets" => Target::ComputeSubnets,
            "eks_cluster" => Target::Eks,
            "eks_cluster_role" => Target::Role(DerivedNames::for_cluster(&rec.name).eks_cluster_role),
            LB_CONTROLLER_ROLE_STEP => Target::Role(lb_controller_role(&rec.name)),
            "network" => Target::Network,
            "bucket" => Target::Bucket,
            "unregister" => Target::Unregister,
            _ => return None,
        };
        Some(Arc::new(DeleteStep {
            rec,
            which,
            aws: self.aws.clone(),
            kube: self.kube.clone(),
            store: self.store.clone(),
        }))
    }
}

/// The executor of one of delete-cluster's HyperPod steps (`hyperpod_cluster`,
/// `hyperpod_execution_role`, `compute_subnets`) for record `rec`: remove-HyperPod
/// ([`super::hyperpod_attach`]) runs the same code.
pub(super) fn hyperpod_removal_executor(
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
    rec: ClusterRecord,
    key: &str,
) -> Option<Arc<dyn StepExecutor>> {
    let which = match key {
        "hyperpod_cluster" => Target::HyperPod,
        "hyperpod_execution_role" => Target::Role(DerivedNames::for_cluster(&rec.name).hyperpod_execution_role),
        "compute_subnets" => Target::ComputeSubnets,
        _ => return None,
    };
    Some(Arc::new(DeleteStep { rec, which, aws, kube, store }))
}

enum Target {
    Storage,
    HyperPod,
    Role(String),
    ComputeSubnets,
    Eks,
    Network,
    Bucket,
    Unregister,
}

struct DeleteStep {
    rec: ClusterRecord,
    which: Target,
    aws: Arc<dyn AwsCloud>,
    kube: Arc<dyn KubeApi>,
    store: Arc<dyn Store>,
}

/// Effect of a deletion as observed.
enum Found {
    Gone,
    Deleting,
    Present,
    Foreign(String),
}

impl DeleteStep {
    fn kube_target(&self) -> KubeTarget {
        KubeTarget::new(self.rec.region.clone(), self.rec.eks_cluster.clone())
    }

    fn storage_refs() -> [ObjectRef; 2] {
        let claim = super::create_cluster::STORAGE_CLAIM;
        [
            ObjectRef {
                api_version: "v1".into(),
                kind: "PersistentVolumeClaim".into(),
                namespace: Some("default".into()),
                name: claim.into(),
            },
            ObjectRef {
                api_version: "v1".into(),
                kind: "PersistentVolume".into(),
                namespace: None,
                name: format!("{claim}-pv"),
            },
        ]
    }

    async fn compute_subnets(&self) -> Result<Vec<Subnet>, StepError> {
        let Some(vpc) = &self.rec.vpc_id else {
            return Ok(vec![]);
        };
        let n = match self.aws.describe_network(&self.rec.region, vpc).await {
            Ok(n) => n,
            Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e.into()),
        };
        let prefix = format!("{}-compute-", self.rec.name);
        Ok(n.subnets
            .into_iter()
            .filter(|s| s.name.as_deref().is_some_and(|x| x.starts_with(&prefix)) && is_owned(&s.tags, &self.rec.name))
            .collect())
    }

    async fn find(&self) -> Result<Found, StepError> {
        let r = &self.rec;
        let owned = |tags: &Tags| is_owned(tags, &r.name);
        let state_found = |state: &ResourceState| {
            if matches!(state, ResourceState::Deleting) { Found::Deleting } else { Found::Present }
        };
        Ok(match &self.which {
            Target::Storage => {
                let mut any = false;
                for o in Self::storage_refs() {
                    if let Some(obj) = self.kube.get(&self.kube_target(), &o).await.or_else(not_found_is_none)? {
                        if obj.label(LABEL_MANAGED_BY) != Some(MANAGED_BY) {
                            return Ok(Found::Foreign(format!("{} {} is not managed by InstantStart", o.kind, o.name)));
                        }
                        any = true;
                    }
                }
                if any { Found::Present } else { Found::Gone }
            }
            Target::HyperPod => match &r.hyperpod_cluster {
                None => Found::Gone,
                Some(name) => match self.aws.describe_hyperpod_cluster(&r.region, name).await? {
                    None => Found::Gone,
                    Some(c) if !owned(&c.tags) => {
                        Found::Foreign(format!("HyperPod cluster {name} is not tagged as ours"))
                    }
                    Some(c) => state_found(&c.state),
                },
            },
            Target::Eks => match self.aws.describe_eks_cluster(&r.region, &r.eks_cluster).await? {
                None => Found::Gone,
                Some(c) if !owned(&c.tags) => Found::Foreign(format!("EKS cluster {} is not tagged as ours", c.name)),
                Some(c) => state_found(&c.state),
            },
            Target::Role(name) => match self.aws.get_role(name).await? {
                None => Found::Gone,
                Some(role) if !owned(&role.tags) => Found::Foreign(format!("IAM role {name} is not tagged as ours")),
                Some(_) => Found::Present,
            },
            Target::ComputeSubnets => {
                if self.compute_subnets().await?.is_empty() {
                    Found::Gone
                } else {
                    Found::Present
                }
            }
            Target::Network => match &r.vpc_id {
                None => Found::Gone,
                Some(vpc) => match self.aws.describe_network(&r.region, vpc).await {
                    Err(e) if e.kind == ProviderErrorKind::NotFound => Found::Gone,
                    Err(e) => return Err(e.into()),
                    Ok(n) if !owned(&n.vpc.tags) => Found::Foreign(format!("VPC {vpc} is not tagged as ours")),
                    Ok(n) => state_found(&n.state),
                },
            },
            Target::Bucket => match &r.bucket {
                None => Found::Gone,
                Some(b) => match self.aws.describe_bucket(b).await? {
                    None => Found::Gone,
                    Some(x) if !owned(&x.tags) => {
                        Found::Foreign(format!("bucket {b} was not created by InstantStart; it is kept"))
                    }
                    Some(_) => Found::Present,
                },
            },
            Target::Unregister => {
                if self.store.get_cluster(&r.name).map_err(store_err)?.is_some() {
                    Found::Present
                } else {
                    Found::Gone
                }
            }
        })
    }

    fn resource(&self) -> ResourceRef {
        let (kind, id) = match &self.which {
            Target::Storage => ("pvc", format!("default/{}", super::create_cluster::STORAGE_CLAIM)),
            Target::HyperPod => ("hyperpod-cluster", self.rec.hyperpod_cluster.clone().unwrap_or_default()),
            Target::Role(n) => ("iam-role", n.clone()),
            Target::ComputeSubnets => ("subnets", self.rec.name.clone()),
            Target::Eks => ("eks-cluster", self.rec.eks_cluster.clone()),
            Target::Network => ("vpc", self.rec.vpc_id.clone().unwrap_or_default()),
            Target::Bucket => ("s3-bucket", self.rec.bucket.clone().unwrap_or_default()),
            Target::Unregister => ("registry", self.rec.name.clone()),
        };
        ResourceRef { kind: kind.into(), id, arn: None }
    }
}

fn not_found_is_none(e: ProviderError) -> Result<Option<KubeObject>, ProviderError> {
    if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) }
}

fn store_err(e: crate::store::StoreError) -> StepError {
    StepError::Invalid(e.to_string())
}

#[async_trait]
impl StepExecutor for DeleteStep {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.find().await? {
            Found::Gone | Found::Deleting => Observation::Exists(self.resource()),
            Found::Present => Observation::Absent,
            Found::Foreign(reason) => Observation::Foreign { reason },
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        let r = &self.rec;
        match &self.which {
            Target::Storage => {
                for o in Self::storage_refs() {
                    self.kube.delete(&self.kube_target(), &o).await?;
                }
            }
            Target::HyperPod => {
                if let Some(name) = &r.hyperpod_cluster {
                    self.aws.delete_hyperpod_cluster(&r.region, name).await?;
                }
            }
            Target::Role(name) => self.aws.delete_role(name).await?,
            Target::ComputeSubnets => {
                for s in self.compute_subnets().await? {
                    self.aws.delete_subnet(&r.region, &s.id).await?;
                }
            }
            Target::Eks => self.aws.delete_eks_cluster(&r.region, &r.eks_cluster).await?,
            Target::Network => {
                if let Some(vpc) = &r.vpc_id {
                    self.aws.delete_network(&r.region, vpc).await?;
                }
            }
            Target::Bucket => {
                if let Some(b) = &r.bucket {
                    remove_lifecycle_scripts(self.aws.as_ref(), b).await?;
                    self.aws.delete_bucket(b).await?;
                }
            }
            Target::Unregister => {
                if self.store.get_setting(ACTIVE_CLUSTER).map_err(store_err)?.as_deref() == Some(r.name.as_str()) {
                    self.store.set_setting(ACTIVE_CLUSTER, None).map_err(store_err)?;
                }
                self.store.delete_cluster(&r.name).map_err(store_err)?;
            }
        }
        Ok(self.resource())
    }

    async fn poll(&self, _cx: &StepContext<'_>, r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.find().await? {
            Found::Gone => Progress::Done(json!({ "deleted": r.id })),
            Found::Deleting => Progress::Waiting { detail: format!("{} {}: deleting", r.kind, r.id) },
            Found::Present => {
                Progress::Waiting { detail: format!("{} {}: waiting for deletion to start", r.kind, r.id) }
            }
            Found::Foreign(reason) => Progress::Failed { reason },
        })
    }
}

/// Deletes the lifecycle scripts the create pipeline wrote into `bucket` — and nothing else:
/// an object counts as ours only at `lifecycle/<16 hex>/on_create.sh` with a SHA-256 that
/// starts with those 16 digits (the content-addressed key proves who wrote it). The user's
/// data stays, so a bucket holding anything else is still refused by `DeleteBucket`.
async fn remove_lifecycle_scripts(aws: &dyn AwsCloud, bucket: &str) -> Result<(), StepError> {
    use crate::lifecycle::{LIFECYCLE_PREFIX, ON_CREATE};
    let prefix = format!("{LIFECYCLE_PREFIX}/");
    let mut dirs = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = match aws.list_objects(bucket, &prefix, token.as_deref()).await {
            Ok(l) => l,
            Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        dirs.extend(page.entries.into_iter().filter(|e| e.kind == S3EntryKind::Prefix));
        match page.next_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    for dir in &dirs {
        let digest = dir.key.trim_start_matches(&format!("{LIFECYCLE_PREFIX}/")).trim_end_matches('/');
        if digest.len() != 16 || !digest.bytes().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let key = format!("{}{ON_CREATE}", dir.key);
        // Without a reported checksum, only this binary's own script (same digest, same size).
        let ours = |h: &ObjectHead| match h.sha256.as_deref() {
            Some(d) => d.starts_with(digest),
            None => {
                crate::lifecycle::script_key() == key && h.size_bytes == crate::lifecycle::ON_CREATE_SH.len() as u64
            }
        };
        if let Some(h) = aws.head_object(bucket, &key).await?
            && ours(&h)
        {
            aws.delete_object(bucket, &key).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::ValidationKind;

    fn record(source: ClusterSource, hyperpod: bool) -> ClusterRecord {
        ClusterRecord {
            name: "demo".into(),
            region: "us-east-1".into(),
            source,
            eks_cluster: "demo".into(),
            hyperpod_cluster: hyperpod.then(|| "demo-hp".into()),
            vpc_id: Some("vpc-1".into()),
            bucket: Some("b".into()),
            kubernetes_version: None,
            request: None,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn reverse_order() {
        let shape: Vec<String> = plan_steps_with(&record(ClusterSource::Created, true), true, &[], &[])
            .iter()
            .map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", ")))
            .collect();
        assert_eq!(
            shape,
            [
                "storage <- []",
                "load_balancer_services <- []",
                "s3_csi_identity <- [storage]",
                "s3_csi_role <- [s3_csi_identity]",
                "training_operator_identity <- [storage]",
                "training_operator_role <- [training_operator_identity]",
                "observability_identity <- [storage]",
                "observability_role <- [observability_identity]",
                "hyperpod_cluster <- [storage]",
                "hyperpod_execution_role <- [hyperpod_cluster]",
                "compute_subnets <- [hyperpod_cluster]",
                "autoscaling_role <- [hyperpod_cluster]",
                "eks_cluster <- [hyperpod_cluster, s3_csi_identity, load_balancer_services, training_operator_identity, observability_identity]",
                "eks_cluster_role <- [eks_cluster]",
                "checkpoint_role <- [eks_cluster]",
                "inference_role <- [eks_cluster]",
                "prometheus_workspace <- [eks_cluster]",
                "network <- [eks_cluster, compute_subnets]",
                "bucket <- [storage, hyperpod_cluster]",
                "unregister <- [storage, eks_cluster, eks_cluster_role, network, s3_csi_role, training_operator_role, observability_role, hyperpod_cluster, hyperpod_execution_role, compute_subnets, autoscaling_role, checkpoint_role, inference_role, prometheus_workspace, bucket]",
            ]
        );
        let imported: Vec<String> = plan_steps_with(&record(ClusterSource::Imported, false), false, &[], &[])
            .into_iter()
            .map(|s| s.key)
            .collect();
        assert_eq!(imported, ["access_entry", "unregister"]);
    }

    #[test]
    fn charts_are_uninstalled_before_the_control_plane_goes() {
        let shape: Vec<String> = plan_steps_with(&record(ClusterSource::Created, false), false, PINNED_CHARTS, &[])
            .iter()
            .map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", ")))
            .collect();
        assert_eq!(
            shape,
            [
                "storage <- []",
                "load_balancer_services <- []",
                "chart:kuberay-operator <- []",
                "chart:keda <- []",
                "chart:prometheus <- []",
                "chart:aws-load-balancer-controller <- [load_balancer_services]",
                "lb_controller_role <- [chart:aws-load-balancer-controller]",
                "s3_csi_identity <- [storage]",
                "s3_csi_role <- [s3_csi_identity]",
                "observability_identity <- [storage]",
                "observability_role <- [observability_identity]",
                "eks_cluster <- [storage, s3_csi_identity, load_balancer_services, observability_identity, chart:kuberay-operator, chart:keda, chart:prometheus, chart:aws-load-balancer-controller]",
                "eks_cluster_role <- [eks_cluster]",
                "prometheus_workspace <- [eks_cluster]",
                "network <- [eks_cluster]",
                "unregister <- [storage, eks_cluster, eks_cluster_role, network, s3_csi_role, observability_role, prometheus_workspace, lb_controller_role]",
            ]
        );
        let imported: Vec<String> = plan_steps_with(&record(ClusterSource::Imported, false), false, PINNED_CHARTS, &[])
            .into_iter()
            .map(|s| s.key)
            .collect();
        assert_eq!(imported, ["access_entry", "unregister"], "an imported cluster's releases are not ours");
    }

    #[test]
    fn hyperpod_dependencies_go_after_the_hyperpod_cluster() {
        let steps = plan_steps_with(&record(ClusterSource::Created, true), false, PINNED_CHARTS, &[]);
        let shape: Vec<String> = steps.iter().map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", "))).collect();
        assert_eq!(
            shape,
            [
                "storage <- []",
                "load_balancer_services <- []",
                "chart:kuberay-operator <- []",
                "chart:keda <- []",
                "chart:prometheus <- []",
                "chart:aws-load-balancer-controller <- [load_balancer_services]",
                "lb_controller_role <- [chart:aws-load-balancer-controller]",
                "s3_csi_identity <- [storage]",
                "s3_csi_role <- [s3_csi_identity]",
                "training_operator_identity <- [storage]",
                "training_operator_role <- [training_operator_identity]",
                "observability_identity <- [storage]",
                "observability_role <- [observability_identity]",
                "hyperpod_cluster <- [storage]",
                "chart:hyperpod-dependencies <- [hyperpod_cluster]",
                "hyperpod_execution_role <- [hyperpod_cluster]",
                "compute_subnets <- [hyperpod_cluster]",
                "autoscaling_role <- [hyperpod_cluster]",
                "eks_cluster <- [hyperpod_cluster, s3_csi_identity, load_balancer_services, training_operator_identity, observability_identity, chart:kuberay-operator, chart:keda, chart:prometheus, chart:aws-load-balancer-controller, chart:hyperpod-dependencies]",
                "eks_cluster_role <- [eks_cluster]",
                "checkpoint_role <- [eks_cluster]",
                "inference_role <- [eks_cluster]",
                "prometheus_workspace <- [eks_cluster]",
                "network <- [eks_cluster, compute_subnets]",
                "unregister <- [storage, eks_cluster, eks_cluster_role, network, s3_csi_role, training_operator_role, observability_role, hyperpod_cluster, hyperpod_execution_role, compute_subnets, autoscaling_role, checkpoint_role, inference_role, prometheus_workspace, lb_controller_role]",
            ]
        );
        for (i, s) in steps.iter().enumerate() {
            for d in &s.depends_on {
                assert!(steps[..i].iter().any(|p| &p.key == d), "{} depends on later {d}", s.key);
            }
        }
    }

    #[test]
    fn every_role_a_managed_feature_creates_goes_after_what_uses_it() {
        use super::super::features::{autoscaling_role, checkpoint_role, inference_role, training_operator_role};
        let steps = plan_steps_with(&record(ClusterSource::Created, true), false, PINNED_CHARTS, &[]);
        let unregister = &steps.last().unwrap().depends_on;
        for (key, role, after) in [
            ("training_operator_role", training_operator_role("demo"), "training_operator_identity"),
            (AUTOSCALING_ROLE_STEP, autoscaling_role("demo"), "hyperpod_cluster"),
            (CHECKPOINT_ROLE_STEP, checkpoint_role("demo"), "eks_cluster"),
            (INFERENCE_ROLE_STEP, inference_role("demo"), "eks_cluster"),
            (
                OBSERVABILITY_ROLE_STEP,
                super::super::observability::observability_role("demo"),
                OBSERVABILITY_IDENTITY_STEP,
            ),
            (PROMETHEUS_WORKSPACE_STEP, prometheus_alias("demo"), "eks_cluster"),
        ] {
            let s = steps.iter().find(|s| s.key == key).unwrap_or_else(|| panic!("{key} planned"));
            assert!(s.title.contains(&role), "{key}: {}", s.title);
            assert_eq!(s.depends_on, [after], "{key}");
            assert!(unregister.contains(&key.to_string()), "{key}");
        }
        // Without a HyperPod cluster no feature was possible: none is planned.
        let plain = plan_steps_with(&record(ClusterSource::Created, false), false, &[], &[]);
        assert!(
            !plain
                .iter()
                .any(|s| [AUTOSCALING_ROLE_STEP, CHECKPOINT_ROLE_STEP, INFERENCE_ROLE_STEP].contains(&s.key.as_str()))
        );
    }

    fn server(name: &str, role: bool) -> ClusterTrackingServer {
        ClusterTrackingServer {
            name: name.into(),
            arn: format!("arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/{name}"),
            role: role.then(|| mlflow::role_name(name)),
            writer_role: role.then(|| mlflow::writer_role_name(name)),
        }
    }

    #[test]
    fn tracking_servers_go_beside_the_teardown_before_the_bucket_and_the_unregister() {
        let servers = [server("team", true), server("byo", false)];
        let steps = plan_steps_with(&record(ClusterSource::Created, true), true, &[], &servers);
        let shape: Vec<String> = steps.iter().map(|s| format!("{} <- [{}]", s.key, s.depends_on.join(", "))).collect();
        assert_eq!(
            shape,
            [
                "storage <- []",
                "load_balancer_services <- []",
                "mlflow:team <- []",
                "mlflow_role:team <- [mlflow:team]",
                "mlflow_writer:team <- [mlflow:team]",
                "mlflow:byo <- []",
                "s3_csi_identity <- [storage]",
                "s3_csi_role <- [s3_csi_identity]",
                "training_operator_identity <- [storage]",
                "training_operator_role <- [training_operator_identity]",
                "observability_identity <- [storage]",
                "observability_role <- [observability_identity]",
                "hyperpod_cluster <- [storage]",
                "hyperpod_execution_role <- [hyperpod_cluster]",
                "compute_subnets <- [hyperpod_cluster]",
                "autoscaling_role <- [hyperpod_cluster]",
                "eks_cluster <- [hyperpod_cluster, s3_csi_identity, load_balancer_services, training_operator_identity, observability_identity]",
                "eks_cluster_role <- [eks_cluster]",
                "checkpoint_role <- [eks_cluster]",
                "inference_role <- [eks_cluster]",
                "prometheus_workspace <- [eks_cluster]",
                "network <- [eks_cluster, compute_subnets]",
                "bucket <- [storage, hyperpod_cluster, mlflow:team, mlflow:byo]",
                "unregister <- [storage, eks_cluster, eks_cluster_role, network, s3_csi_role, training_operator_role, observability_role, hyperpod_cluster, hyperpod_execution_role, compute_subnets, autoscaling_role, checkpoint_role, inference_role, prometheus_workspace, bucket, mlflow:team, mlflow_role:team, mlflow_writer:team, mlflow:byo]",
            ]
        );
        assert_eq!(steps[2].expected_secs, Some(mlflow::DELETE_SECS));
        assert!(steps[3].title.contains("team-mlflow-role"), "{}", steps[2].title);
        let imported: Vec<String> = plan_steps_with(&record(ClusterSource::Imported, false), false, &[], &servers)
            .into_iter()
            .map(|s| s.key)
            .collect();
        assert_eq!(imported, ["access_entry", "unregister"], "an imported cluster's servers stay");
    }

    #[test]
    fn governance_goes_quotas_then_scheduler_config_then_addon_before_the_hyperpod_cluster() {
        let g = super::super::governance::GovernanceTeardown {
            cluster_arn: "arn".into(),
            teams: vec!["prod".into(), "research".into()],
            scheduler_config: true,
            addon: true,
        };
        let mut steps = plan_steps_with(&record(ClusterSource::Created, true), false, &[], &[]);
        with_governance_teardown(&mut steps, "demo", &g);
        let deps = |key: &str| steps.iter().find(|s| s.key == key).unwrap().depends_on.clone();
        assert_eq!(deps("remove_scheduler_config"), ["remove_quota:prod", "remove_quota:research"]);
        assert_eq!(deps("remove:amazon-sagemaker-hyperpod-taskgovernance"), ["remove_scheduler_config"]);
        let hp = deps("hyperpod_cluster");
        for key in ["remove_quota:prod", "remove_quota:research", "remove_scheduler_config"] {
            assert!(hp.iter().any(|d| d == key), "{hp:?}");
        }
        assert!(hp.iter().any(|d| d == "remove:amazon-sagemaker-hyperpod-taskgovernance"), "{hp:?}");
        let at = |key: &str| steps.iter().position(|s| s.key == key).unwrap();
        assert!(at("remove:amazon-sagemaker-hyperpod-taskgovernance") < at("hyperpod_cluster"));
    }

    #[test]
    fn recorded_tracking_servers_are_checked_by_field() {
        let findings = |req: &DeleteClusterRequest, source: ClusterSource| {
            let mut f = Findings::new();
            check_servers(req, &record(source, false), &mut f);
            f.finish().err().map(|e| (e.kind, e.findings.into_iter().map(|f| f.field).collect::<Vec<_>>()))
        };
        let mut req = DeleteClusterRequest {
            name: "demo".into(),
            delete_bucket: false,
            keep_tracking_servers: false,
            tracking_servers: vec![server("team", true), server("byo", false)],
            governance: None,
            file_systems: vec![],
        };
        assert_eq!(findings(&req, ClusterSource::Created), None);
        req.tracking_servers.push(server("team", false));
        req.tracking_servers.push(ClusterTrackingServer { role: Some("admin".into()), ..server("-x", false) });
        let (kind, fields) = findings(&req, ClusterSource::Created).unwrap();
        assert_eq!(kind, ValidationKind::Invalid);
        assert_eq!(fields, ["tracking_servers[2].name", "tracking_servers[3].name", "tracking_servers[3].role"]);
        req.tracking_servers.truncate(1);
        req.keep_tracking_servers = true;
        let (kind, fields) = findings(&req, ClusterSource::Imported).unwrap();
        assert_eq!(kind, ValidationKind::Unprocessable);
        assert_eq!(fields, ["tracking_servers", "tracking_servers"]);
        // Absent from the request unless something was found; `keep_tracking_servers` defaults to false.
        let decoded: DeleteClusterRequest = decode(&json!({ "name": "demo" })).unwrap();
        assert!(!decoded.keep_tracking_servers && decoded.tracking_servers.is_empty());
        let canonical = serde_json::to_value(&decoded).unwrap();
        assert_eq!(canonical, json!({ "name": "demo", "delete_bucket": false, "keep_tracking_servers": false }));
    }

    #[test]
    fn recorded_file_systems_are_checked_by_field_and_planned_before_the_network() {
        let v = |name: &str, id: &str| ClusterFileSystem { name: name.into(), file_system_id: id.into() };
        let req = |file_systems: Vec<ClusterFileSystem>| DeleteClusterRequest {
            name: "demo".into(),
            delete_bucket: false,
            keep_tracking_servers: false,
            tracking_servers: vec![],
            governance: None,
            file_systems,
        };
        let findings = |req: &DeleteClusterRequest, source: ClusterSource| {
            let mut f = Findings::new();
            check_file_systems(req, &record(source, true), &mut f);
            f.finish().err().map(|e| e.findings.into_iter().map(|f| f.field).collect::<Vec<_>>())
        };
        let good = req(vec![v("scratch", "fs-0123456789abcdef0"), v("ckpt", "fs-0123456789abcdef1")]);
        assert_eq!(findings(&good, ClusterSource::Created), None);
        assert_eq!(findings(&good, ClusterSource::Imported), Some(vec!["file_systems".to_string()]));
        let bad = req(vec![v("Bad_Name", "fs-0123456789abcdef0"), v("x", "vol-1"), v("y", "fs-0123456789abcdef0")]);
        assert_eq!(
            findings(&bad, ClusterSource::Created).unwrap(),
            ["file_systems[0].name", "file_systems[1].file_system_id", "file_systems[2].file_system_id"]
        );

        let mut steps = plan_steps_with(&record(ClusterSource::Created, true), false, &[], &[]);
        with_file_system_teardown(&mut steps, &good.file_systems);
        let at = |key: &str| steps.iter().position(|s| s.key == key).unwrap();
        let deps = |key: &str| steps[at(key)].depends_on.clone();
        for id in ["fs-0123456789abcdef0", "fs-0123456789abcdef1"] {
            let key = format!("fsx:{id}");
            assert_eq!(deps(&key), ["hyperpod_cluster"]);
            assert!(deps("network").contains(&key) && deps("unregister").contains(&key));
            assert!(at(&key) < at("network"));
        }
    }
}

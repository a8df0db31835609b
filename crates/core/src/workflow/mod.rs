//! Workflows: the kinds of operations, each a DAG of steps with their executors.
//!
//! - [`create_cluster`]: VPC → EKS control plane → select as active → dependencies →
//!   HyperPod cluster → storage, with the NAT gateway wait, IAM roles, the S3 bucket and
//!   compute subnets overlapping the long EKS wait.
//! - [`delete_cluster`]: the same resources removed in reverse order.
//! - [`import_cluster`]: adopt an existing EKS (and HyperPod) cluster: access, missing
//!   dependencies, a named bucket's storage claim, registration.
//! - [`dependencies`]: the add-ons, charts and storage claim create and import share.
//! - [`workloads`]: apply a rendered workload (training job, model download, endpoint) and
//!   delete one, generic over the operation kind.
//! - [`mlflow`]: create and delete a SageMaker managed MLflow tracking server.
//! - [`fsx`]: create and delete an FSx for Lustre file system mounted as a cluster claim.
//! - [`health_checks`]: deep health checks on demand (`StartClusterHealthCheck`).
//! - [`hyperpod_attach`]: add a HyperPod cluster to an EKS-only cluster, and remove it.
//! - [`governance`]: task governance (the add-on, scheduler config, team quotas) as reconciled state.
//! - [`software_update`]: HyperPod platform software updates (`UpdateClusterSoftware`).
//! - [`observability`]: the observability managed feature's steps (AMP workspace, collector
//!   identity, HyperPod's observability add-on), planned by [`features`].

pub mod charts;
pub mod create_cluster;
pub mod day2;
pub mod delete_cluster;
pub mod dependencies;
pub mod endpoints;
pub mod features;
pub mod fsx;
pub mod governance;
pub mod health_checks;
pub mod hyperpod_attach;
pub mod hyperpod_reads;
pub mod import_cluster;
pub mod instance_groups;
pub mod karpenter;
pub mod lb_controller;
pub mod mlflow;
pub mod nodes;
pub mod observability;
pub mod software_update;
pub mod steps;
pub mod workloads;

use crate::Finding;
use crate::engine::EngineError;
use crate::operation::OperationKind;
use crate::store::{ClusterRecord, Store};
use crate::validate::{ValidationError, ValidationKind};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use create_cluster::CreateClusterWorkflow;
pub use delete_cluster::DeleteClusterWorkflow;
pub use import_cluster::ImportClusterWorkflow;

/// Target string of a cluster, used for the one-mutation-per-target rule.
pub fn cluster_target(name: &str) -> String {
    format!("cluster/{name}")
}

/// Decodes a JSON request into its typed spec; a shape error names the field path.
pub fn decode<T: DeserializeOwned>(request: &Value) -> Result<T, ValidationError> {
    serde_path_to_error::deserialize(request).map_err(|e| {
        let path = e.path().to_string();
        let mut field = if path == "." { String::new() } else { path };
        let rule = e.into_inner().to_string();
        // A missing field is reported at its parent; name the field itself.
        if let Some(missing) = rule.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')) {
            field = if field.is_empty() { missing.to_string() } else { format!("{field}.{missing}") };
        }
        // serde's messages carry "at line x column y" only for text input; JSON values have none.
        ValidationError { kind: ValidationKind::Invalid, findings: vec![Finding { field, rule }] }
    })
}

/// Applies `f` to a stored cluster record, if it exists.
///
/// # Guarantees
/// Read, change and write happen under one process-wide lock, so two steps of one pipeline
/// that finish together (the VPC and the bucket, say) never lose each other's field. Only the
/// replica driving an operation writes its cluster's record (one running operation per
/// target), so a lock in the process is enough.
pub fn update_record(store: &dyn Store, name: &str, f: impl FnOnce(&mut ClusterRecord)) -> Result<(), EngineError> {
    static RECORD_WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serialized = RECORD_WRITES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(mut rec) = store.get_cluster(name)? {
        f(&mut rec);
        rec.updated_at = chrono::Utc::now();
        store.put_cluster(&rec)?;
    }
    Ok(())
}

/// Every workflow of the control plane, wired to the given providers and store. Without a
/// `renderer` the workload operations (jobs, downloads, endpoints) are not offered: the engine
/// answers them with [`EngineError::UnknownKind`].
pub fn all(
    aws: std::sync::Arc<dyn crate::provider::AwsCloud>,
    kube: std::sync::Arc<dyn crate::provider::KubeApi>,
    store: std::sync::Arc<dyn Store>,
    renderer: Option<std::sync::Arc<dyn crate::workload::WorkloadRenderer>>,
) -> Vec<std::sync::Arc<dyn crate::engine::Workflow>> {
    all_with_helm(aws, kube, None, store, renderer)
}

/// [`all`] with a Helm provider: create-cluster installs the pinned charts
/// ([`crate::provider::PINNED_CHARTS`], `chart:<release>` steps) and delete-cluster uninstalls them.
pub fn all_with_helm(
    aws: std::sync::Arc<dyn crate::provider::AwsCloud>,
    kube: std::sync::Arc<dyn crate::provider::KubeApi>,
    helm: Option<std::sync::Arc<dyn crate::provider::HelmReleases>>,
    store: std::sync::Arc<dyn Store>,
    renderer: Option<std::sync::Arc<dyn crate::workload::WorkloadRenderer>>,
) -> Vec<std::sync::Arc<dyn crate::engine::Workflow>> {
    all_with_config(aws, kube, helm, store, renderer, &WorkflowConfig::default())
}

/// Deployment settings the workflows share (server options).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkflowConfig {
    /// The management environment's shared bucket (`--shared-bucket`): the default
    /// `storage.bucket` of clusters created in its region.
    pub shared_bucket: Option<create_cluster::SharedBucket>,
}

/// [`all_with_helm`] with deployment settings ([`WorkflowConfig`]).
pub fn all_with_config(
    aws: std::sync::Arc<dyn crate::provider::AwsCloud>,
    kube: std::sync::Arc<dyn crate::provider::KubeApi>,
    helm: Option<std::sync::Arc<dyn crate::provider::HelmReleases>>,
    store: std::sync::Arc<dyn Store>,
    renderer: Option<std::sync::Arc<dyn crate::workload::WorkloadRenderer>>,
    config: &WorkflowConfig,
) -> Vec<std::sync::Arc<dyn crate::engine::Workflow>> {
    let mut all: Vec<std::sync::Arc<dyn crate::engine::Workflow>> = Vec::new();
    if let Some(renderer) = renderer {
        for kind in OperationKind::ALL.iter().copied() {
            if let Some(w) =
                workloads::WorkloadWorkflow::new(kind, renderer.clone(), aws.clone(), kube.clone(), store.clone())
            {
                all.push(std::sync::Arc::new(w));
            }
            if let Some(w) =
                workloads::DeleteWorkloadWorkflow::new(kind, renderer.clone(), aws.clone(), kube.clone(), store.clone())
            {
                all.push(std::sync::Arc::new(w));
            }
        }
        all.push(std::sync::Arc::new(endpoints::AssignPoolWorkerWorkflow::new(kube.clone(), store.clone())));
    }
    let base: Vec<std::sync::Arc<dyn crate::engine::Workflow>> = vec![
        std::sync::Arc::new(
            match &helm {
                Some(h) => CreateClusterWorkflow::new(aws.clone(), kube.clone(), store.clone()).with_helm(h.clone()),
                None => CreateClusterWorkflow::new(aws.clone(), kube.clone(), store.clone()),
            }
            .with_shared_bucket(config.shared_bucket.clone()),
        ),
        std::sync::Arc::new(match &helm {
            Some(h) => DeleteClusterWorkflow::new(aws.clone(), kube.clone(), store.clone()).with_helm(h.clone()),
            None => DeleteClusterWorkflow::new(aws.clone(), kube.clone(), store.clone()),
        }),
        std::sync::Arc::new(features::FeaturesWorkflow::new(aws.clone(), kube.clone(), store.clone())),
        std::sync::Arc::new(governance::GovernanceWorkflow::new(aws.clone(), store.clone())),
        std::sync::Arc::new(ImportClusterWorkflow::new(
            dependencies::DependencyProviders::new(aws.clone(), kube.clone(), store.clone())
                .with_helm(helm.clone())
                .with_shared_bucket(config.shared_bucket.as_ref().map(|b| b.name.clone())),
        )),
        std::sync::Arc::new(hyperpod_attach::AddHyperPodWorkflow::new(
            dependencies::DependencyProviders::new(aws.clone(), kube.clone(), store.clone())
                .with_helm(helm.clone())
                .with_shared_bucket(config.shared_bucket.as_ref().map(|b| b.name.clone())),
        )),
        std::sync::Arc::new(
            hyperpod_attach::RemoveHyperPodWorkflow::new(aws.clone(), kube.clone(), store.clone())
                .with_helm(helm.clone()),
        ),
        std::sync::Arc::new(
            instance_groups::InstanceGroupWorkflow::new(OperationKind::AddInstanceGroup, aws.clone(), store.clone())
                .with_kube(kube.clone()),
        ),
        std::sync::Arc::new(instance_groups::InstanceGroupWorkflow::new(
            OperationKind::UpdateInstanceGroup,
            aws.clone(),
            store.clone(),
        )),
        std::sync::Arc::new(
            instance_groups::InstanceGroupWorkflow::new(OperationKind::DeleteInstanceGroup, aws.clone(), store.clone())
                .with_kube(kube.clone()),
        ),
        std::sync::Arc::new(
            mlflow::CreateTrackingServerWorkflow::new(aws.clone(), store.clone())
                .with_shared_bucket(config.shared_bucket.as_ref().map(|b| b.name.clone())),
        ),
        std::sync::Arc::new(mlflow::DeleteTrackingServerWorkflow::new(aws.clone())),
        std::sync::Arc::new(fsx::CreateFileSystemWorkflow::new(aws.clone(), kube.clone(), store.clone())),
        std::sync::Arc::new(fsx::DeleteFileSystemWorkflow::new(aws.clone(), kube.clone(), store.clone())),
        std::sync::Arc::new(nodes::NodeActionWorkflow::new(
            crate::provider::NodeAction::Reboot,
            aws.clone(),
            store.clone(),
        )),
        std::sync::Arc::new(nodes::NodeActionWorkflow::new(
            crate::provider::NodeAction::Replace,
            aws.clone(),
            store.clone(),
        )),
        std::sync::Arc::new(health_checks::HealthCheckWorkflow::new(aws.clone(), store.clone())),
        std::sync::Arc::new(software_update::SoftwareUpdateWorkflow::new(aws.clone(), store.clone())),
        std::sync::Arc::new(nodes::NodeActionWorkflow::new(crate::provider::NodeAction::Delete, aws, store)),
    ];
    all.extend(base);
    all
}

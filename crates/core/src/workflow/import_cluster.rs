//! Importing an existing EKS cluster (and optionally its HyperPod cluster): verify they exist
//! and are active, then register them. Nothing in AWS is created or changed.

use super::{cluster_target, decode};
use crate::engine::{EngineError, Observation, Prepared, Progress, StepContext, StepError, StepExecutor, Workflow};
use crate::names;
use crate::operation::{OperationKind, ResourceRef, StepSpec};
use crate::provider::*;
use crate::store::{ClusterRecord, ClusterSource, Store};
use crate::validate::Findings;
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
    pub region: String,
    /// Name of the existing EKS cluster.
    pub eks_cluster: String,
    /// Name of an existing HyperPod cluster orchestrated by it, if any.
    #[serde(default)]
    pub hyperpod_cluster: Option<String>,
}

/// The import workflow.
pub struct ImportClusterWorkflow {
    aws: Arc<dyn AwsCloud>,
    store: Arc<dyn Store>,
}

impl ImportClusterWorkflow {
    pub fn new(aws: Arc<dyn AwsCloud>, store: Arc<dyn Store>) -> Self {
        ImportClusterWorkflow { aws, store }
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
            key: "register".into(),
            title: format!("Register {} as an imported cluster", req.name),
            depends_on: deps,
            expected_secs: Some(1),
        });
        let canonical = serde_json::to_value(&req).map_err(|e| EngineError::InvalidState(e.to_string()))?;
        Ok(Prepared { target: cluster_target(&req.name), request: canonical, steps })
    }

    fn executor(&self, request: &Value, key: &str) -> Option<Arc<dyn StepExecutor>> {
        let req: ImportClusterRequest = decode(request).ok()?;
        let which = match key {
            "eks_cluster" => Check::Eks,
            "hyperpod_cluster" => Check::HyperPod,
            "register" => Check::Register,
            _ => return None,
        };
        Some(Arc::new(ImportStep { req, which, aws: self.aws.clone(), store: self.store.clone() }))
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
                bucket: None,
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

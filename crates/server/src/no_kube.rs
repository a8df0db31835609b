//! A stand-in Kubernetes provider for `--provider aws` until the Kubernetes adapter
//! (`crates/k8s`, issue 9) is wired in.
//!
//! **Documented limitation:** with the real AWS provider, every Kubernetes call fails with a
//! clear `Failed` error, so pipeline steps that talk to the cluster's API server (storage
//! mount, operators, jobs, inference) stop there; everything on the AWS side (network, EKS,
//! IAM, HyperPod, S3) works.

use async_trait::async_trait;
use instantstart_core::provider::{
    KubeApi, KubeObject, KubeTarget, ListParams, LogStream, ObjectRef, ProviderError, ProviderErrorKind,
};

/// Answers every Kubernetes call with "not available yet".
#[derive(Debug, Clone, Copy, Default)]
pub struct NoKubernetes;

fn unavailable(api: &str, target: &KubeTarget) -> ProviderError {
    ProviderError::new(
        api,
        ProviderErrorKind::Failed,
        format!(
            "Kubernetes adapter not available yet (issue 9): cannot reach EKS cluster {} in {}",
            target.eks_cluster, target.region
        ),
    )
}

#[async_trait]
impl KubeApi for NoKubernetes {
    async fn apply(&self, target: &KubeTarget, _object: &KubeObject) -> Result<KubeObject, ProviderError> {
        Err(unavailable("k8s:apply", target))
    }

    async fn get(&self, target: &KubeTarget, _object: &ObjectRef) -> Result<Option<KubeObject>, ProviderError> {
        Err(unavailable("k8s:get", target))
    }

    async fn list(&self, target: &KubeTarget, _params: &ListParams) -> Result<Vec<KubeObject>, ProviderError> {
        Err(unavailable("k8s:list", target))
    }

    async fn delete(&self, target: &KubeTarget, _object: &ObjectRef) -> Result<(), ProviderError> {
        Err(unavailable("k8s:delete", target))
    }

    async fn logs(
        &self,
        target: &KubeTarget,
        _namespace: &str,
        _pod: &str,
        _follow: bool,
        _tail_lines: Option<u32>,
    ) -> Result<LogStream, ProviderError> {
        Err(unavailable("k8s:logs", target))
    }
}

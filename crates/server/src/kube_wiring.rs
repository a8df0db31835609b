//! How the server reaches Kubernetes for each provider.
//!
//! - `--provider aws`: the kube-rs adapter (`instantstart-k8s`) on each EKS cluster, with the
//!   endpoint and CA from `eks:DescribeCluster` and an in-process EKS bearer token signed with
//!   the server's AWS credentials (no kubectl, no aws CLI, no exec plugins).
//! - `--provider sim`: by default the same kube-rs adapter, talking to the simulated clusters'
//!   Kubernetes API served on a loopback port, so the demo runs the real adapter code and
//!   `kubectl` can inspect the simulated clusters; `--sim-kube in-process` calls the simulated
//!   world directly instead.

use instantstart_core::provider::{KubeApi, KubeTarget};
use instantstart_k8s::{ConfigConnector, KubeAdapter};
use std::sync::Arc;

#[cfg(feature = "aws")]
pub use eks::{eks_adapter, eks_helm};

/// `--provider aws` (cargo feature `aws`): kube-rs on EKS with in-process tokens.
#[cfg(feature = "aws")]
mod eks {
    use async_trait::async_trait;
    use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};
    use instantstart_core::provider::{EksApi, KubeApi, KubeTarget, ProviderError, ProviderErrorKind};
    use instantstart_k8s::{EksEndpoint, EksEndpointResolver, KubeAdapter};
    use std::sync::Arc;

    /// Resolves an EKS cluster's endpoint and CA through the AWS provider.
    struct DescribeClusterEndpoints(Arc<instantstart_aws::AwsProvider>);

    #[async_trait]
    impl EksEndpointResolver for DescribeClusterEndpoints {
        async fn endpoint(&self, target: &KubeTarget) -> Result<EksEndpoint, ProviderError> {
            let c = self.0.describe_eks_cluster(&target.region, &target.eks_cluster).await?.ok_or_else(|| {
                ProviderError::not_found(
                    "eks:DescribeCluster",
                    format!("EKS cluster {} not found in {}", target.eks_cluster, target.region),
                )
            })?;
            match (c.endpoint, c.certificate_authority) {
                (Some(endpoint), Some(certificate_authority)) => Ok(EksEndpoint { endpoint, certificate_authority }),
                _ => Err(ProviderError::new(
                    "eks:DescribeCluster",
                    ProviderErrorKind::Transient,
                    format!("EKS cluster {} has no endpoint yet (is it active?)", c.name),
                )),
            }
        }
    }

    /// The AWS provider's credentials, loaded on first use (the provider itself loads lazily).
    #[derive(Debug)]
    struct LazyCredentials(Arc<instantstart_aws::AwsProvider>);

    impl ProvideCredentials for LazyCredentials {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            future::ProvideCredentials::new(async move {
                let conf = self.0.sdk_config().await.map_err(|e| {
                    aws_credential_types::provider::error::CredentialsError::provider_error(e.to_string())
                })?;
                let provider = conf.credentials_provider().ok_or_else(|| {
                    aws_credential_types::provider::error::CredentialsError::not_loaded(
                        "no AWS credentials provider configured",
                    )
                })?;
                provider.provide_credentials().await
            })
        }
    }

    /// The Kubernetes side of `--provider aws`.
    pub fn eks_adapter(aws: Arc<instantstart_aws::AwsProvider>) -> Arc<dyn KubeApi> {
        let credentials = SharedCredentialsProvider::new(LazyCredentials(aws.clone()));
        Arc::new(KubeAdapter::eks(credentials, Arc::new(DescribeClusterEndpoints(aws))).with_watch_cache())
    }

    /// The Helm side of `--provider aws`: the pinned `helm` binary
    /// ([`instantstart_k8s::locate_helm`]) with a per-call kubeconfig for the EKS cluster.
    pub fn eks_helm(aws: Arc<instantstart_aws::AwsProvider>) -> Arc<dyn instantstart_core::provider::HelmReleases> {
        let credentials = SharedCredentialsProvider::new(LazyCredentials(aws.clone()));
        Arc::new(instantstart_k8s::HelmCli::eks(
            instantstart_k8s::locate_helm(),
            credentials,
            Arc::new(DescribeClusterEndpoints(aws)),
        ))
    }
}

/// Serves the simulated clusters' Kubernetes API on a loopback port and returns the kube-rs
/// adapter pointed at it, with the base URL. Needs a running Tokio runtime.
pub fn sim_api_adapter(sim: &instantstart_sim::SimCloud) -> std::io::Result<(Arc<dyn KubeApi>, String)> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    listener.set_nonblocking(true)?;
    let base = format!("http://{}", listener.local_addr()?);
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let router = sim.kube_api_router();
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "simulated Kubernetes API server stopped");
        }
    });
    let url_base = base.clone();
    let connector = ConfigConnector::url_per_target(move |t: &KubeTarget| {
        instantstart_sim::kube_apiserver::cluster_url(&url_base, t)
    });
    Ok((Arc::new(KubeAdapter::new(Arc::new(connector)).with_watch_cache()), base))
}

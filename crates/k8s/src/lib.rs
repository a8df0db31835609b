//! The real Kubernetes provider: InstantStart's
//! [`KubeApi`](instantstart_core::provider::KubeApi) on kube-rs.
//!
//! - [`KubeAdapter`] implements `KubeApi` (server-side apply with field manager
//!   `instantstart`, get, list by labels, delete, follow logs) over kube's dynamic API.
//! - [`KubeConnector`] resolves a [`KubeTarget`](instantstart_core::provider::KubeTarget)
//!   (region + EKS cluster) to a `kube::Client`: [`EksConnector`] for EKS (endpoint + CA from
//!   the AWS side, bearer token signed in process by [`eks_token`]), [`ConfigConnector`] for a
//!   kubeconfig, the in-cluster service account or a plain URL (the simulator's API server).
//! - [`resources`] maps `apiVersion`/`kind` to REST resources, including the CRDs InstantStart
//!   drives (HyperPodPyTorchJob, RayJob/RayCluster, InferenceEndpointConfig).
//! - [`cache`]: optional reflector stores (kube-runtime) for the Nodes and Pods of each target.
//! - [`dcgm`]: [`DcgmSource`], the [`MetricsSource`](instantstart_core::provider::MetricsSource)
//!   of real clusters: NVIDIA's DCGM exporters scraped through the pod proxy into bounded rings.
//! - [`error`] classifies failures into provider error kinds.
//! - [`helm`]: [`HelmReleases`](instantstart_core::provider::HelmReleases) on the pinned `helm`
//!   binary (argv, never a shell; a private 0600 kubeconfig per call).
//!
//! # Construction
//! ```no_run
//! # use std::sync::Arc;
//! # use instantstart_k8s::{KubeAdapter, StaticEndpoints};
//! # fn f(credentials: aws_credential_types::provider::SharedCredentialsProvider) {
//! // Production: credentials from the AWS SDK config, endpoints from eks:DescribeCluster.
//! let kube = KubeAdapter::eks(credentials, Arc::new(StaticEndpoints::default()));
//! # }
//! ```
//!
//! # TLS
//! kube is built with rustls and **aws-lc-rs only** (`default-features = false`, features
//! `client`, `rustls-tls`, `aws-lc-rs`), the crypto provider the AWS SDK already brings, so the
//! binary carries one provider. Connectors call [`install_crypto_provider`] anyway: if some
//! other dependency switches on rustls' `ring` feature, rustls can no longer choose by itself.

pub mod adapter;
pub mod cache;
pub mod connector;
pub mod dcgm;
pub mod eks_token;
pub mod error;
pub mod helm;
pub mod resources;

pub use adapter::{FIELD_MANAGER, KubeAdapter};
pub use cache::WatchCache;
pub use connector::{
    ConfigConnector, EksConnector, EksEndpoint, EksEndpointResolver, KubeConnector, StaticEndpoints,
    install_crypto_provider,
};
pub use dcgm::DcgmSource;
pub use error::K8sError;
pub use helm::{ClusterAccess, ClusterAccessResolver, EksAccess, HelmCli, locate_helm};

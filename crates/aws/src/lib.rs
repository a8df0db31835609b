//! `instantstart-aws`: the real AWS provider, on aws-sdk-rust.
//!
//! [`AwsProvider`] implements every AWS-side trait of `instantstart-core`
//! ([`instantstart_core::provider::AwsCloud`]), one module per service:
//!
//! - [`network`] — EC2: VPCs, public/private/compute subnets, internet and NAT gateways, route
//!   tables, the EFA security group.
//! - [`eks`] — EKS control planes and add-ons (versions pinned from `DescribeAddonVersions`).
//! - [`iam`] — IAM roles with trust policies, least-privilege inline policies and tags.
//! - [`hyperpod`] — SageMaker HyperPod clusters orchestrated by EKS, nodes, training plans.
//! - [`s3`] — the shared data bucket (encrypted, public access blocked, tagged).
//! - [`fsx`] — FSx for Lustre file systems a cluster's pods mount.
//! - [`amp`] — Amazon Managed Service for Prometheus workspaces (HyperPod observability).
//! - [`amp_query`] — PromQL range queries of a workspace (`aps:QueryMetrics`), the GPU metrics
//!   of a cluster with the observability add-on on.
//! - [`signed_http`] — SigV4-signed HTTPS calls outside the SDK (MLflow's REST API, AMP queries).
//! - [`quota`] — Availability Zones, instance type offerings, Service Quotas.
//! - [`identity`] — STS caller identity.
//! - [`mlflow`] — SageMaker managed MLflow tracking servers, and their runs and metric
//!   histories over the SigV4-signed MLflow REST API.
//! - [`governance`] — HyperPod task governance: cluster scheduler configs and compute quotas.
//!
//! All clients come from one [`aws_config::SdkConfig`] (standard credential chain, optional
//! profile, optional endpoint override for testing against a local fake such as moto).
//! Regional clients are built per region on first use and cached; IAM and STS are global.
//!
//! # Guarantees
//!
//! - Every resource created carries the ownership tags the core passes
//!   (`instantstart:managed-by`, `instantstart:cluster`, …).
//! - "Already exists" is adopted as success only when the existing resource carries our tags
//!   for the same cluster; otherwise the call fails with [`ProviderErrorKind::AlreadyExists`].
//! - SDK failures are mapped to [`ProviderErrorKind`]s by [`error::classify`]; the SDK's
//!   standard retry mode retries throttling and transient failures first, the engine's backoff
//!   retries them again (bounded).
//! - [`IAM_ACTIONS`] lists every IAM action the adapter needs; a unit test checks it against
//!   the SDK calls in this crate's source.
//! - With [`AwsOptions::role_boundary_arn`] set, every IAM role the adapter creates or adopts
//!   carries that permissions boundary ([`iam`]).

pub mod actions;
pub mod amp;
pub mod amp_query;
pub mod eks;
pub mod error;
pub mod fsx;
pub mod governance;
pub mod hyperpod;
pub mod iam;
pub mod identity;
pub mod mlflow;
pub mod network;
pub mod quota;
pub mod s3;
pub mod signed_http;
mod tags;

#[cfg(test)]
mod deploy_policy;
#[cfg(test)]
mod generated_data;
#[cfg(test)]
mod model_check;
#[cfg(test)]
mod model_suite;
#[cfg(test)]
mod replay;
#[cfg(test)]
mod sdk_tests;

pub use actions::IAM_ACTIONS;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use instantstart_core::provider::{ProviderError, ProviderErrorKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How to reach AWS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsOptions {
    /// Default region; `None` = the standard chain (`AWS_REGION`, profile, IMDS).
    pub region: Option<String>,
    /// Named profile of `~/.aws/config` / `~/.aws/credentials`.
    pub profile: Option<String>,
    /// Endpoint override for every service (e.g. `http://127.0.0.1:5000` for moto). S3 then
    /// uses path-style addressing.
    pub endpoint_url: Option<String>,
    /// ARN of the managed policy every IAM role the adapter creates carries as its permissions
    /// boundary (the deployment template's `RoleBoundary`, passed as
    /// `INSTANTSTART_ROLE_BOUNDARY_ARN`). `None` = roles get no boundary: only for accounts
    /// where the control plane's own policy does not demand one (see `docs/security.md`).
    pub role_boundary_arn: Option<String>,
}

/// Installs the aws-lc-rs rustls crypto provider as the process default.
///
/// Call once at start-up in binaries that link both the AWS SDK (rustls + aws-lc-rs) and a
/// library that asks rustls for the process-level provider (e.g. kube-rs with `ring`);
/// otherwise rustls panics with "Could not automatically determine the process-level
/// CryptoProvider". Returns false if a provider was already installed (harmless).
pub fn install_crypto_provider() -> bool {
    rustls::crypto::aws_lc_rs::default_provider().install_default().is_ok()
}

/// Global clients and the configuration regional clients derive from.
#[derive(Debug)]
struct Base {
    conf: SdkConfig,
    iam: aws_sdk_iam::Client,
    sts: aws_sdk_sts::Client,
    default_region: Option<String>,
}

/// The clients of one region.
#[derive(Debug)]
pub(crate) struct Regional {
    pub amp: aws_sdk_amp::Client,
    pub ec2: aws_sdk_ec2::Client,
    pub eks: aws_sdk_eks::Client,
    pub fsx: aws_sdk_fsx::Client,
    pub sagemaker: aws_sdk_sagemaker::Client,
    pub s3: aws_sdk_s3::Client,
    pub quotas: aws_sdk_servicequotas::Client,
}

/// Service Quotas of one region: quota name → (quota code, value).
pub(crate) type QuotaTable = Arc<HashMap<String, (String, f64)>>;

/// EC2's answer about the HyperPod instance types of one region.
pub(crate) type SpecsTable = Arc<Vec<instantstart_core::instance_types::InstanceTypeInfo>>;

/// The real AWS provider. Cheap to share behind an `Arc`; clients are created lazily.
#[derive(Debug)]
pub struct AwsProvider {
    opts: AwsOptions,
    base: tokio::sync::OnceCell<Base>,
    regional: Mutex<HashMap<String, Arc<Regional>>>,
    /// Cached Service Quotas listings per region (quota name → (code, value)).
    quota_cache: tokio::sync::Mutex<HashMap<String, QuotaTable>>,
    /// EC2's specs of the HyperPod instance types, per region (they do not change).
    specs_cache: tokio::sync::Mutex<HashMap<String, SpecsTable>>,
    /// MLflow REST endpoint override.
    mlflow: mlflow::MlflowConfig,
    /// AMP query endpoint override (`https://aps-workspaces.<region>.amazonaws.com` otherwise).
    amp_query_endpoint: Option<String>,
    /// The HTTPS client of SigV4-signed calls outside the SDK (MLflow, AMP queries).
    http: signed_http::SignedHttp,
    /// The caller's account (STS), read once: S3's `ExpectedBucketOwner`.
    account: tokio::sync::OnceCell<String>,
}

/// Errors constructing the provider.
#[derive(Debug, thiserror::Error)]
pub enum AwsConfigError {
    #[error("no AWS region configured: pass --region, set AWS_REGION, or set a region in the profile")]
    NoRegion,
}

impl AwsProvider {
    /// Loads the configuration from the standard chain (environment, profile, SSO, web
    /// identity, ECS/IMDS) with `opts` applied, and builds the global clients.
    pub async fn from_env(opts: AwsOptions) -> Result<Self, AwsConfigError> {
        let p = Self::lazy(opts);
        let base = p.base().await.map_err(|_| AwsConfigError::NoRegion)?;
        if base.default_region.is_none() {
            return Err(AwsConfigError::NoRegion);
        }
        Ok(p)
    }

    /// Like [`AwsProvider::from_env`], but the configuration is loaded on first use (for
    /// synchronous start-up code). A configuration problem then surfaces as the first call's
    /// [`ProviderError`].
    pub fn lazy(opts: AwsOptions) -> Self {
        AwsProvider {
            opts,
            base: tokio::sync::OnceCell::new(),
            regional: Mutex::new(HashMap::new()),
            quota_cache: tokio::sync::Mutex::new(HashMap::new()),
            specs_cache: tokio::sync::Mutex::new(HashMap::new()),
            mlflow: mlflow::MlflowConfig::default(),
            amp_query_endpoint: None,
            http: signed_http::SignedHttp::default(),
            account: tokio::sync::OnceCell::new(),
        }
    }

    /// The caller's account id (STS `GetCallerIdentity`, read once and kept).
    pub(crate) async fn account(&self) -> instantstart_core::provider::Result<String> {
        use instantstart_core::provider::IdentityApi;
        self.account.get_or_try_init(|| async { Ok(self.caller_identity().await?.account) }).await.cloned()
    }

    /// Uses a ready configuration (tests: static credentials, endpoint, retry policy, HTTP
    /// client). S3 uses path-style addressing when the configuration has an endpoint URL.
    pub fn from_sdk_config(conf: SdkConfig) -> Self {
        let p = Self::lazy(AwsOptions {
            region: conf.region().map(|r| r.to_string()),
            profile: None,
            endpoint_url: conf.endpoint_url().map(str::to_string),
            role_boundary_arn: None,
        });
        let _ = p.base.set(Base::new(conf));
        p
    }

    /// The same provider creating every IAM role with `arn` as its permissions boundary
    /// ([`AwsOptions::role_boundary_arn`]).
    pub fn with_role_boundary(mut self, arn: impl Into<String>) -> Self {
        self.opts.role_boundary_arn = Some(arn.into());
        self
    }

    /// The options this provider was built with.
    pub fn options(&self) -> &AwsOptions {
        &self.opts
    }

    /// The loaded SDK configuration (credentials provider, region, endpoint, retry policy),
    /// e.g. for signing EKS bearer tokens in the Kubernetes adapter.
    pub async fn sdk_config(&self) -> Result<SdkConfig, ProviderError> {
        Ok(self.base().await?.conf.clone())
    }

    /// The default region, once the configuration is loaded.
    pub async fn default_region(&self) -> Option<String> {
        self.base().await.ok().and_then(|b| b.default_region.clone())
    }

    async fn base(&self) -> Result<&Base, ProviderError> {
        self.base
            .get_or_try_init(|| async {
                let mut loader = aws_config::defaults(BehaviorVersion::latest())
                    .retry_config(RetryConfig::standard().with_max_attempts(4))
                    .timeout_config(
                        TimeoutConfig::builder()
                            .connect_timeout(Duration::from_secs(10))
                            .operation_attempt_timeout(Duration::from_secs(60))
                            .build(),
                    );
                if let Some(p) = &self.opts.profile {
                    loader = loader.profile_name(p);
                }
                if let Some(r) = &self.opts.region {
                    loader = loader.region(Region::new(r.clone()));
                }
                if let Some(u) = &self.opts.endpoint_url {
                    loader = loader.endpoint_url(u);
                }
                Ok::<_, ProviderError>(Base::new(loader.load().await))
            })
            .await
    }

    pub(crate) async fn iam(&self) -> Result<&aws_sdk_iam::Client, ProviderError> {
        Ok(&self.base().await?.iam)
    }

    pub(crate) async fn sts(&self) -> Result<&aws_sdk_sts::Client, ProviderError> {
        Ok(&self.base().await?.sts)
    }

    /// The clients of `region` (empty = the default region).
    pub(crate) async fn region(&self, region: &str) -> Result<Arc<Regional>, ProviderError> {
        let base = self.base().await?;
        let region = if region.is_empty() {
            base.default_region.clone().ok_or_else(|| {
                ProviderError::new("config", ProviderErrorKind::InvalidRequest, AwsConfigError::NoRegion.to_string())
            })?
        } else {
            region.to_string()
        };
        let mut map = self.regional.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = map.get(&region) {
            return Ok(r.clone());
        }
        let r = Arc::new(Regional::new(&base.conf, &region));
        map.insert(region, r.clone());
        Ok(r)
    }

    /// S3 client for the default region (bucket-level calls without a region).
    pub(crate) async fn default_s3(&self) -> Result<Arc<Regional>, ProviderError> {
        self.region("").await
    }

    pub(crate) fn quota_cache(&self) -> &tokio::sync::Mutex<HashMap<String, QuotaTable>> {
        &self.quota_cache
    }

    pub(crate) fn specs_cache(&self) -> &tokio::sync::Mutex<HashMap<String, SpecsTable>> {
        &self.specs_cache
    }
}

impl Base {
    fn new(conf: SdkConfig) -> Self {
        Base {
            iam: aws_sdk_iam::Client::new(&conf),
            sts: aws_sdk_sts::Client::new(&conf),
            default_region: conf.region().map(|r| r.to_string()),
            conf,
        }
    }
}

impl Regional {
    fn new(conf: &SdkConfig, region: &str) -> Self {
        let r = Region::new(region.to_string());
        let path_style = conf.endpoint_url().is_some();
        Regional {
            ec2: aws_sdk_ec2::Client::from_conf(aws_sdk_ec2::config::Builder::from(conf).region(r.clone()).build()),
            eks: aws_sdk_eks::Client::from_conf(aws_sdk_eks::config::Builder::from(conf).region(r.clone()).build()),
            amp: aws_sdk_amp::Client::from_conf(aws_sdk_amp::config::Builder::from(conf).region(r.clone()).build()),
            fsx: aws_sdk_fsx::Client::from_conf(aws_sdk_fsx::config::Builder::from(conf).region(r.clone()).build()),
            sagemaker: aws_sdk_sagemaker::Client::from_conf(
                aws_sdk_sagemaker::config::Builder::from(conf).region(r.clone()).build(),
            ),
            s3: aws_sdk_s3::Client::from_conf(
                aws_sdk_s3::config::Builder::from(conf).region(r.clone()).force_path_style(path_style).build(),
            ),
            quotas: aws_sdk_servicequotas::Client::from_conf(
                aws_sdk_servicequotas::config::Builder::from(conf).region(r).build(),
            ),
        }
    }
}

//! From a [`KubeTarget`] (region + EKS cluster name) to a [`kube::Client`].
//!
//! Two connectors:
//! - [`EksConnector`]: the production path. The EKS cluster's API endpoint and certificate
//!   authority come from an [`EksEndpointResolver`] (the AWS side: `eks:DescribeCluster`), the
//!   bearer token is signed in process ([`crate::eks_token`]) from an AWS credentials provider
//!   and refreshed before it expires. No AWS CLI, no kubeconfig exec plugin.
//! - [`ConfigConnector`]: a [`kube::Config`] per target — the local kubeconfig, the in-cluster
//!   service account, or any URL (the simulator's API server in tests and the demo).
//!
//! A target with an identity ([`KubeTarget::identity`]) gets its own client that impersonates
//! it (`Impersonate-User`, `Impersonate-Group`); the caches key on the whole target, so calls
//! of different identities never share a client.
//!
//! Clients are built without kube's hidden retry layer (the engine retries classified errors).
//! Both cache one client per target. [`KubeConnector::invalidate`] drops a cached client (the
//! adapter calls it after connection failures and `401`s, so a re-created cluster's new
//! endpoint or a rotated credential is picked up).

use crate::eks_token::{self, EksToken};
use crate::error::K8sError;
use async_trait::async_trait;
use aws_credential_types::provider::SharedCredentialsProvider;
use base64::Engine;
use instantstart_core::provider::{KubeTarget, ProviderError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Makes (and caches) the client of a target.
#[async_trait]
pub trait KubeConnector: Send + Sync {
    /// A client for `target`, ready to use (cached and refreshed by the connector).
    async fn client(&self, target: &KubeTarget) -> Result<kube::Client, K8sError>;

    /// Forgets the cached client of `target`; the next [`KubeConnector::client`] builds a new one.
    fn invalidate(&self, _target: &KubeTarget) {}
}

/// Installs aws-lc-rs as the process's rustls crypto provider if none is installed yet.
///
/// kube-rs builds its TLS configuration with rustls' process-level default provider. This crate
/// compiles only aws-lc-rs (the provider the AWS SDK uses too); if another dependency enables
/// rustls' `ring` feature as well, rustls can no longer pick one by itself and would panic, so
/// every connector calls this first. Idempotent.
pub fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

/// Timeouts of every client.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds a client without kube's own retry layer: kube retries 429/503/504 up to 15 times
/// with backoff up to 1000 s by default, hidden from the caller. InstantStart's engine owns
/// retries (classified errors, persisted attempts, backoff scaled by the simulator's speed).
/// A target with an identity gets a client that sends `Impersonate-User` and one
/// `Impersonate-Group` per group on every request ([`impersonating`]).
fn build_client(config: kube::Config, target: &KubeTarget) -> Result<kube::Client, K8sError> {
    install_crypto_provider();
    let mut config = impersonating(config, target);
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| K8sError::Config(e.to_string()))
}

/// `config` acting as `target`'s identity, if it has one: the API server authorizes each call
/// as that user and those groups (the caller needs RBAC's `impersonate` verb on them), and its
/// audit log names both the caller and the impersonated user. Without an identity the config
/// is unchanged (the control plane's own identity).
pub fn impersonating(mut config: kube::Config, target: &KubeTarget) -> kube::Config {
    if let Some(id) = &target.identity {
        config.auth_info.impersonate = Some(id.user.clone());
        config.auth_info.impersonate_groups = (!id.groups.is_empty()).then(|| id.groups.clone());
    }
    config
}

// ---------------------------------------------------------------------------------------------
// kubeconfig / in-cluster / explicit URL

type ConfigFn = dyn Fn(&KubeTarget) -> Result<kube::Config, K8sError> + Send + Sync;

/// A connector from [`kube::Config`]s: one for every target, or one per target.
pub struct ConfigConnector {
    config_of: Box<ConfigFn>,
    cache: Mutex<HashMap<KubeTarget, kube::Client>>,
}

impl std::fmt::Debug for ConfigConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigConnector").finish_non_exhaustive()
    }
}

impl ConfigConnector {
    /// Every target is reached with `config` (one cluster behind a kubeconfig context, or the
    /// cluster this process runs in).
    pub fn new(config: kube::Config) -> Self {
        Self::per_target(move |_| Ok(config.clone()))
    }

    /// Each target is reached with the configuration `config_of` returns for it (e.g. a
    /// kubeconfig context per EKS cluster, or a URL per simulated cluster).
    pub fn per_target(
        config_of: impl Fn(&KubeTarget) -> Result<kube::Config, K8sError> + Send + Sync + 'static,
    ) -> Self {
        install_crypto_provider();
        ConfigConnector { config_of: Box::new(config_of), cache: Mutex::new(HashMap::new()) }
    }

    /// The configuration kube-rs infers: `$KUBECONFIG` or `~/.kube/config` (current context),
    /// else the in-cluster service account.
    pub async fn infer() -> Result<Self, K8sError> {
        let config = kube::Config::infer().await.map_err(|e| K8sError::Config(e.to_string()))?;
        Ok(Self::new(config))
    }

    /// The in-cluster service account (the management container running as a pod).
    pub fn in_cluster() -> Result<Self, K8sError> {
        let config = kube::Config::incluster().map_err(|e| K8sError::Config(e.to_string()))?;
        Ok(Self::new(config))
    }

    /// A kubeconfig `context` (the current one when `None`) from the default kubeconfig.
    pub async fn kubeconfig_context(context: Option<&str>) -> Result<Self, K8sError> {
        let options = kube::config::KubeConfigOptions { context: context.map(str::to_string), ..Default::default() };
        let config = kube::Config::from_kubeconfig(&options).await.map_err(|e| K8sError::Config(e.to_string()))?;
        Ok(Self::new(config))
    }

    /// Plain HTTP(S) API servers without authentication: target `t` is served at
    /// `url_of(t)` (the simulator serves each EKS cluster under its own path prefix).
    pub fn url_per_target(url_of: impl Fn(&KubeTarget) -> String + Send + Sync + 'static) -> Self {
        Self::per_target(move |t| {
            let url = url_of(t);
            let uri: http::Uri = url.parse().map_err(|e| K8sError::Config(format!("bad API server URL {url}: {e}")))?;
            let mut config = kube::Config::new(uri);
            config.connect_timeout = Some(CONNECT_TIMEOUT);
            Ok(config)
        })
    }
}

#[async_trait]
impl KubeConnector for ConfigConnector {
    async fn client(&self, target: &KubeTarget) -> Result<kube::Client, K8sError> {
        if let Some(c) = lock(&self.cache).get(target) {
            return Ok(c.clone());
        }
        let client = build_client((self.config_of)(target)?, target)?;
        lock(&self.cache).insert(target.clone(), client.clone());
        Ok(client)
    }

    fn invalidate(&self, target: &KubeTarget) {
        lock(&self.cache).remove(target);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------------------------
// EKS

/// Where an EKS cluster's API server is and which CA signs its certificate — the
/// `endpoint` and `certificateAuthority.data` of `eks:DescribeCluster`.
#[derive(Clone, PartialEq, Eq)]
pub struct EksEndpoint {
    /// `https://<id>.<zone>.<region>.eks.amazonaws.com`.
    pub endpoint: String,
    /// The cluster CA as EKS returns it: base64 of a PEM bundle. A raw PEM is accepted too.
    pub certificate_authority: String,
}

impl std::fmt::Debug for EksEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EksEndpoint").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl EksEndpoint {
    /// The CA certificates as DER, as `kube::Config::root_cert` wants them.
    pub fn ca_der(&self) -> Result<Vec<Vec<u8>>, K8sError> {
        let raw = self.certificate_authority.trim();
        let pem = if raw.starts_with("-----BEGIN") {
            raw.to_string()
        } else {
            let cleaned: String = raw.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(cleaned)
                .map_err(|e| K8sError::Config(format!("certificate authority is not base64: {e}")))?;
            String::from_utf8(bytes).map_err(|_| K8sError::Config("certificate authority is not a PEM text".into()))?
        };
        pem_certificates(&pem)
    }
}

/// The DER bodies of the `CERTIFICATE` blocks of a PEM text.
fn pem_certificates(pem: &str) -> Result<Vec<Vec<u8>>, K8sError> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(BEGIN) {
        let after = &rest[start + BEGIN.len()..];
        let end = after.find(END).ok_or_else(|| K8sError::Config("unterminated PEM certificate".into()))?;
        let body: String = after[..end].chars().filter(|c| !c.is_whitespace()).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| K8sError::Config(format!("bad PEM certificate: {e}")))?;
        out.push(der);
        rest = &after[end + END.len()..];
    }
    if out.is_empty() {
        return Err(K8sError::Config("the certificate authority holds no certificate".into()));
    }
    Ok(out)
}

/// Finds the endpoint and CA of a target's EKS cluster (the AWS side implements it with
/// `eks:DescribeCluster`; a missing cluster is a `NotFound` provider error).
#[async_trait]
pub trait EksEndpointResolver: Send + Sync {
    async fn endpoint(&self, target: &KubeTarget) -> Result<EksEndpoint, ProviderError>;
}

/// A fixed table of endpoints.
#[derive(Debug, Default, Clone)]
pub struct StaticEndpoints(pub HashMap<KubeTarget, EksEndpoint>);

#[async_trait]
impl EksEndpointResolver for StaticEndpoints {
    async fn endpoint(&self, target: &KubeTarget) -> Result<EksEndpoint, ProviderError> {
        self.0.get(target).cloned().ok_or_else(|| {
            ProviderError::not_found(
                "eks:DescribeCluster",
                format!("no endpoint known for EKS cluster {} in {}", target.eks_cluster, target.region),
            )
        })
    }
}

#[derive(Clone)]
struct EksCached {
    client: kube::Client,
    token: EksToken,
}

/// Connects to EKS clusters with an in-process bearer token.
pub struct EksConnector {
    credentials: SharedCredentialsProvider,
    resolver: Arc<dyn EksEndpointResolver>,
    cache: Mutex<HashMap<KubeTarget, EksCached>>,
    /// Held while a client is (re)built, so concurrent calls wait for one refresh instead of
    /// all signing tokens.
    refresh: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for EksConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EksConnector").finish_non_exhaustive()
    }
}

impl EksConnector {
    /// `credentials`: the AWS SDK's credentials provider (`SdkConfig::credentials_provider()`);
    /// `resolver`: the endpoint and CA of each EKS cluster.
    pub fn new(credentials: SharedCredentialsProvider, resolver: Arc<dyn EksEndpointResolver>) -> Self {
        install_crypto_provider();
        EksConnector { credentials, resolver, cache: Mutex::new(HashMap::new()), refresh: tokio::sync::Mutex::new(()) }
    }

    /// The configuration of a client for `endpoint` authenticated with `token`.
    pub fn config(endpoint: &EksEndpoint, token: &EksToken) -> Result<kube::Config, K8sError> {
        let uri: http::Uri = endpoint
            .endpoint
            .parse()
            .map_err(|e| K8sError::Config(format!("bad EKS endpoint {}: {e}", endpoint.endpoint)))?;
        let mut config = kube::Config::new(uri);
        config.root_cert = Some(endpoint.ca_der()?);
        config.auth_info.token = Some(secrecy::SecretString::from(token.token.clone()));
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        Ok(config)
    }
}

#[async_trait]
impl KubeConnector for EksConnector {
    async fn client(&self, target: &KubeTarget) -> Result<kube::Client, K8sError> {
        let fresh = |cache: &HashMap<KubeTarget, EksCached>| {
            cache.get(target).filter(|c| !c.token.needs_refresh(SystemTime::now())).map(|c| c.client.clone())
        };
        if let Some(client) = fresh(&lock(&self.cache)) {
            return Ok(client);
        }
        let _refreshing = self.refresh.lock().await;
        if let Some(client) = fresh(&lock(&self.cache)) {
            return Ok(client);
        }
        let endpoint = self.resolver.endpoint(target).await?;
        let token = eks_token::token(&self.credentials, &target.region, &target.eks_cluster).await?;
        let client = build_client(Self::config(&endpoint, &token)?, target)?;
        tracing::debug!(cluster = %target.eks_cluster, region = %target.region, "k8s: new EKS client (token refreshed)");
        lock(&self.cache).insert(target.clone(), EksCached { client: client.clone(), token });
        Ok(client)
    }

    fn invalidate(&self, target: &KubeTarget) {
        lock(&self.cache).remove(target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_data_as_eks_returns_it() {
        let pem = "-----BEGIN CERTIFICATE-----\nAAEC\nAwQ=\n-----END CERTIFICATE-----\n";
        let b64 = base64::engine::general_purpose::STANDARD.encode(pem);
        let e = EksEndpoint { endpoint: "https://x.eks.amazonaws.com".into(), certificate_authority: b64 };
        assert_eq!(e.ca_der().unwrap(), vec![vec![0, 1, 2, 3, 4]]);
        let raw = EksEndpoint { certificate_authority: pem.into(), ..e.clone() };
        assert_eq!(raw.ca_der().unwrap(), vec![vec![0, 1, 2, 3, 4]]);
        assert!(EksEndpoint { certificate_authority: "bm90IGEgY2VydA==".into(), ..e }.ca_der().is_err());
    }
}

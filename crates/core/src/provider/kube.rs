//! Kubernetes-side provider trait: apply and delete objects, read them, list nodes and pods,
//! stream logs. Objects are untyped JSON ([`KubeObject`]); typed builders live in
//! `instantstart-recipes`.

use super::ProviderError;
use async_trait::async_trait;
use futures::stream::BoxStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which cluster a Kubernetes call goes to: the EKS cluster of an InstantStart cluster, and who
/// the call acts as there.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct KubeTarget {
    pub region: String,
    pub eks_cluster: String,
    /// The Kubernetes identity the call impersonates (`Impersonate-User`, `Impersonate-Group`),
    /// so the cluster's RBAC decides; `None` = the control plane's own identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<KubeIdentity>,
}

impl KubeTarget {
    /// The EKS cluster `eks_cluster` in `region`, reached as the control plane itself.
    pub fn new(region: impl Into<String>, eks_cluster: impl Into<String>) -> Self {
        KubeTarget { region: region.into(), eks_cluster: eks_cluster.into(), identity: None }
    }

    /// The same cluster, reached as `identity` (`None`: the control plane's own identity).
    pub fn acting_as(self, identity: Option<KubeIdentity>) -> Self {
        KubeTarget { identity, ..self }
    }
}

/// A Kubernetes user and its groups, as the API server's authorizer (RBAC) sees them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeIdentity {
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// Identifies an object: apiVersion, kind, namespace (None for cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

/// A Kubernetes object as JSON (`apiVersion`, `kind`, `metadata`, `spec`, `status`, …).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct KubeObject(pub Value);

impl KubeObject {
    /// The string at a JSON pointer (`/metadata/name`), if there is one.
    pub fn str_at(&self, pointer: &str) -> Option<&str> {
        self.0.pointer(pointer).and_then(Value::as_str)
    }

    /// The object's reference, if it has apiVersion, kind and name.
    pub fn object_ref(&self) -> Option<ObjectRef> {
        Some(ObjectRef {
            api_version: self.str_at("/apiVersion")?.to_string(),
            kind: self.str_at("/kind")?.to_string(),
            namespace: self.str_at("/metadata/namespace").map(str::to_string),
            name: self.str_at("/metadata/name")?.to_string(),
        })
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.0.get("metadata")?.get("labels")?.get(key)?.as_str()
    }
}

/// Selects objects of one kind, optionally in one namespace, optionally by labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ListParams {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    /// `key=value` pairs, all of which must match.
    pub labels: Vec<(String, String)>,
}

/// The answer of a Service reached through the Kubernetes API server's service proxy
/// (`/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/{path}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProxyResponse {
    /// HTTP status the service (or the API server on its behalf, e.g. `503` without ready
    /// endpoints) answered with.
    pub status: u16,
    /// The body, at most [`PROXY_MAX_RESPONSE_BYTES`] + 1 bytes (a longer answer is cut there so
    /// callers can tell it was too long).
    pub body: Vec<u8>,
}

/// Longest service-proxy answer callers accept (4 MiB).
pub const PROXY_MAX_RESPONSE_BYTES: usize = 4 << 20;
/// API name of service-proxy calls in provider errors.
pub const PROXY_API: &str = "k8s:ServiceProxy";
/// API name of pod-proxy calls in provider errors.
pub const POD_PROXY_API: &str = "k8s:PodProxy";
/// Message prefix of a service-proxy call that ran out of time.
pub const PROXY_TIMEOUT_PREFIX: &str = "timed out";

impl ProviderError {
    /// The error of a service-proxy call that did not answer within `timeout`.
    pub fn proxy_timeout(timeout: std::time::Duration) -> Self {
        ProviderError::new(
            PROXY_API,
            super::ProviderErrorKind::Transient,
            format!("{PROXY_TIMEOUT_PREFIX} after {} s waiting for the service to answer", timeout.as_secs_f64()),
        )
    }

    /// Whether this is a service-proxy call that ran out of time.
    pub fn is_proxy_timeout(&self) -> bool {
        self.api == PROXY_API && self.message.starts_with(PROXY_TIMEOUT_PREFIX)
    }
}

/// A stream of log lines.
pub type LogStream = BoxStream<'static, Result<String, ProviderError>>;

#[async_trait]
pub trait KubeApi: Send + Sync {
    /// Server-side apply with InstantStart's field manager; creates or updates.
    async fn apply(&self, target: &KubeTarget, object: &KubeObject) -> Result<KubeObject, ProviderError>;
    async fn get(&self, target: &KubeTarget, object: &ObjectRef) -> Result<Option<KubeObject>, ProviderError>;
    async fn list(&self, target: &KubeTarget, params: &ListParams) -> Result<Vec<KubeObject>, ProviderError>;
    /// Deletes the object; deleting an absent object is not an error.
    async fn delete(&self, target: &KubeTarget, object: &ObjectRef) -> Result<(), ProviderError>;
    /// Log lines of a pod's (first) container; `follow` keeps the stream open.
    async fn logs(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        follow: bool,
        tail_lines: Option<u32>,
    ) -> Result<LogStream, ProviderError>;

    /// Calls `path` (relative, e.g. `v1/chat/completions`) of Service `service` on `port`
    /// through the API server's service proxy: `POST` with `body` (JSON) when given, else
    /// `GET`; gives up after `timeout` ([`ProviderError::is_proxy_timeout`]). Any HTTP status
    /// of the service is an `Ok` answer.
    #[allow(clippy::too_many_arguments)]
    async fn service_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        service: &str,
        port: u16,
        path: &str,
        body: Option<&[u8]>,
        timeout: std::time::Duration,
    ) -> Result<ProxyResponse, ProviderError> {
        let _ = (target, namespace, port, path, body, timeout);
        Err(ProviderError::new(
            PROXY_API,
            super::ProviderErrorKind::Failed,
            format!("this Kubernetes provider cannot reach services (service {service})"),
        ))
    }

    /// `GET`s `path` (relative, e.g. `metrics`) of Pod `pod` on `port` through the API
    /// server's pod proxy (`/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/{path}`, RBAC verb
    /// `get` on `pods/proxy`): no network path from the control plane to the node is needed.
    /// Gives up after `timeout` ([`ProviderError::is_proxy_timeout`]); any HTTP status of the
    /// pod (or of the API server on its behalf) is an `Ok` answer, its body capped as
    /// [`ProxyResponse::body`] says.
    async fn pod_proxy(
        &self,
        target: &KubeTarget,
        namespace: &str,
        pod: &str,
        port: u16,
        path: &str,
        timeout: std::time::Duration,
    ) -> Result<ProxyResponse, ProviderError> {
        let _ = (target, namespace, port, path, timeout);
        Err(ProviderError::new(
            POD_PROXY_API,
            super::ProviderErrorKind::Failed,
            format!("this Kubernetes provider cannot reach pods (pod {pod})"),
        ))
    }
}

//! Kubernetes-side provider trait: apply and delete objects, read them, list nodes and pods,
//! stream logs. Objects are untyped JSON ([`KubeObject`]); typed builders live in
//! `instantstart-recipes`.

use super::ProviderError;
use async_trait::async_trait;
use futures::stream::BoxStream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which cluster a Kubernetes call goes to: the EKS cluster of an InstantStart cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct KubeTarget {
    pub region: String,
    pub eks_cluster: String,
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
    fn str_at(&self, pointer: &str) -> Option<&str> {
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
}

//! Amazon Managed Service for Prometheus (AMP): the workspace the HyperPod observability add-on
//! writes a cluster's metrics to.
//!
//! [`AmpApi`] is part of the [`AwsCloud`](super::AwsCloud) supertrait: CreateWorkspace,
//! DescribeWorkspace, ListWorkspaces and DeleteWorkspace (AMP API reference,
//! <https://docs.aws.amazon.com/prometheus/latest/APIReference/API_CreateWorkspace.html> and its
//! siblings). Tags are given at creation (`tags` of CreateWorkspace); nothing is tagged later.
//!
//! # Guarantees
//! - A workspace's alias is *not* unique in AMP (any number of workspaces may share one), so a
//!   workspace is ours only by its ownership tags ([`super::is_owned`]); the alias InstantStart
//!   gives ([`prometheus_alias`]) narrows the listing, the tags decide.
//! - [`PrometheusWorkspace::state`] maps AMP's `WorkspaceStatus` (`CREATING`, `ACTIVE`,
//!   `UPDATING`, `CREATION_FAILED`, `DELETING`) onto [`ResourceState`].

use super::aws::Result;
use super::{ResourceState, Tags};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An AMP workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PrometheusWorkspace {
    /// `ws-…`.
    pub id: String,
    pub arn: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// AMP's `WorkspaceStatus.statusCode`: `CREATING`, `ACTIVE`, `UPDATING`, `CREATION_FAILED`,
    /// `DELETING`.
    pub status: String,
    /// `https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/` (DescribeWorkspace only;
    /// ListWorkspaces does not return it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus_endpoint: Option<String>,
    #[serde(default)]
    pub tags: Tags,
}

impl PrometheusWorkspace {
    /// `status` mapped onto the lifecycle every provider resource shares.
    pub fn state(&self) -> ResourceState {
        match self.status.as_str() {
            "CREATING" => ResourceState::Creating,
            "ACTIVE" => ResourceState::Active,
            "DELETING" => ResourceState::Deleting,
            "CREATION_FAILED" => ResourceState::Failed { reason: format!("workspace {} CREATION_FAILED", self.id) },
            _ => ResourceState::Updating,
        }
    }

    /// The remote-write endpoint's base: the described one, else the one AMP documents for
    /// the workspace's region and id (`https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>/`).
    pub fn endpoint(&self, region: &str) -> String {
        self.prometheus_endpoint
            .clone()
            .unwrap_or_else(|| format!("https://aps-workspaces.{region}.amazonaws.com/workspaces/{}/", self.id))
    }
}

/// CreateWorkspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreatePrometheusWorkspace {
    pub region: String,
    /// 1-100 characters.
    pub alias: String,
    /// `clientToken` (1-64 of `[!-~]`): a retried call returns the same workspace.
    pub client_token: String,
    pub tags: Tags,
}

#[async_trait]
pub trait AmpApi: Send + Sync {
    /// ListWorkspaces (all pages) of the workspaces whose alias starts with `alias` (AMP filters
    /// by prefix), with their tags and status.
    async fn list_prometheus_workspaces(&self, region: &str, alias: &str) -> Result<Vec<PrometheusWorkspace>>;
    /// DescribeWorkspace; `None` when AMP does not know the id.
    async fn describe_prometheus_workspace(&self, region: &str, id: &str) -> Result<Option<PrometheusWorkspace>>;
    async fn create_prometheus_workspace(&self, req: &CreatePrometheusWorkspace) -> Result<PrometheusWorkspace>;
    /// DeleteWorkspace (its metrics go with it). A missing workspace is `NotFound`.
    async fn delete_prometheus_workspace(&self, region: &str, id: &str, client_token: &str) -> Result<()>;
}

/// The alias of the workspace InstantStart creates for `cluster`: `instantstart-<cluster>`.
pub fn prometheus_alias(cluster: &str) -> String {
    format!("instantstart-{cluster}")
}

/// A `clientToken` AMP accepts (1-64 printable ASCII characters) derived from an engine token.
pub fn amp_client_token(token: &str) -> String {
    let t: String = token.chars().filter(|c| c.is_ascii_graphic()).take(64).collect();
    if t.is_empty() { "instantstart".into() } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(status: &str) -> PrometheusWorkspace {
        PrometheusWorkspace {
            id: "ws-1".into(),
            arn: "arn:aws:aps:us-east-1:111122223333:workspace/ws-1".into(),
            alias: None,
            status: status.into(),
            prometheus_endpoint: None,
            tags: Tags::new(),
        }
    }

    #[test]
    fn workspace_statuses_map_onto_the_shared_lifecycle() {
        let table: &[(&str, ResourceState)] = &[
            ("CREATING", ResourceState::Creating),
            ("ACTIVE", ResourceState::Active),
            ("UPDATING", ResourceState::Updating),
            ("DELETING", ResourceState::Deleting),
            ("CREATION_FAILED", ResourceState::Failed { reason: "workspace ws-1 CREATION_FAILED".into() }),
        ];
        for (status, want) in table {
            assert_eq!(&ws(status).state(), want, "{status}");
        }
        assert_eq!(
            ws("ACTIVE").endpoint("eu-west-1"),
            "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1/"
        );
    }

    #[test]
    fn client_tokens_fit_amp() {
        assert_eq!(amp_client_token("op-1:prometheus_workspace"), "op-1:prometheus_workspace");
        assert_eq!(amp_client_token(&"a".repeat(100)).len(), 64);
        assert_eq!(amp_client_token(" \t"), "instantstart");
        assert_eq!(prometheus_alias("demo"), "instantstart-demo");
    }
}

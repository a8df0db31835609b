//! Amazon Managed Service for Prometheus (service `amp`, IAM prefix `aps`): CreateWorkspace,
//! DescribeWorkspace, ListWorkspaces and DeleteWorkspace — the workspace HyperPod's observability
//! add-on writes a cluster's metrics to.
//!
//! # Guarantees
//! - CreateWorkspace sends the step's `clientToken`, so a call retried after a lost response
//!   returns the workspace the first call created; the tags (ownership) are set in the create
//!   call itself, so no workspace of ours exists untagged.
//! - ListWorkspaces follows every page (bounded) with the alias filter AMP applies by prefix;
//!   an unknown id is `None` for DescribeWorkspace (AMP answers `ResourceNotFoundException`).

use crate::AwsProvider;
use crate::error::sdk_error;
use async_trait::async_trait;
use aws_sdk_amp::types::WorkspaceStatus;
use instantstart_core::provider::{
    AmpApi, CreatePrometheusWorkspace, PrometheusWorkspace, ProviderErrorKind, Result, Tags,
};
use std::collections::HashMap;

/// Pages of ListWorkspaces followed at most.
const MAX_PAGES: usize = 50;

fn status(s: Option<&WorkspaceStatus>) -> String {
    s.map(|s| s.status_code().as_str().to_string()).unwrap_or_default()
}

fn tags(t: Option<&HashMap<String, String>>) -> Tags {
    t.map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default()
}

#[async_trait]
impl AmpApi for AwsProvider {
    async fn list_prometheus_workspaces(&self, region: &str, alias: &str) -> Result<Vec<PrometheusWorkspace>> {
        const API: &str = "aps:ListWorkspaces";
        let c = self.region(region).await?;
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = c
                .amp
                .list_workspaces()
                .alias(alias)
                .set_next_token(next.take())
                .send()
                .await
                .map_err(|e| sdk_error(API, e))?;
            out.extend(page.workspaces().iter().map(|w| PrometheusWorkspace {
                id: w.workspace_id().to_string(),
                arn: w.arn().to_string(),
                alias: w.alias().map(str::to_string),
                status: status(w.status()),
                prometheus_endpoint: None,
                tags: tags(w.tags()),
            }));
            match page.next_token() {
                Some(t) if !t.is_empty() => next = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(out)
    }

    async fn describe_prometheus_workspace(&self, region: &str, id: &str) -> Result<Option<PrometheusWorkspace>> {
        const API: &str = "aps:DescribeWorkspace";
        let c = self.region(region).await?;
        match c.amp.describe_workspace().workspace_id(id).send().await {
            Ok(out) => Ok(out.workspace().map(|w| PrometheusWorkspace {
                id: w.workspace_id().to_string(),
                arn: w.arn().to_string(),
                alias: w.alias().map(str::to_string),
                status: status(w.status()),
                prometheus_endpoint: w.prometheus_endpoint().map(str::to_string),
                tags: tags(w.tags()),
            })),
            Err(e) => {
                let e = sdk_error(API, e);
                if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) }
            }
        }
    }

    async fn create_prometheus_workspace(&self, req: &CreatePrometheusWorkspace) -> Result<PrometheusWorkspace> {
        const API: &str = "aps:CreateWorkspace";
        let c = self.region(&req.region).await?;
        let out = c
            .amp
            .create_workspace()
            .alias(&req.alias)
            .client_token(&req.client_token)
            .set_tags(Some(req.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(PrometheusWorkspace {
            id: out.workspace_id().to_string(),
            arn: out.arn().to_string(),
            alias: Some(req.alias.clone()),
            status: status(out.status()),
            prometheus_endpoint: None,
            tags: if out.tags().is_some() { tags(out.tags()) } else { req.tags.clone() },
        })
    }

    async fn delete_prometheus_workspace(&self, region: &str, id: &str, client_token: &str) -> Result<()> {
        const API: &str = "aps:DeleteWorkspace";
        let c = self.region(region).await?;
        c.amp
            .delete_workspace()
            .workspace_id(id)
            .client_token(client_token)
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
        Ok(())
    }
}

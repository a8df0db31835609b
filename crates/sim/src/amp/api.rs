//! `AmpApi` for [`SimCloud`]: each call goes through the cloud's pipeline, then the rules of
//! [`crate::amp`].

use super::*;
use crate::cloud::SimCloud;
use async_trait::async_trait;

#[async_trait]
impl AmpApi for SimCloud {
    async fn list_prometheus_workspaces(&self, region: &str, alias: &str) -> Result<Vec<PrometheusWorkspace>> {
        self.read("aps:ListWorkspaces", |w, cx| {
            Ok(w.prometheus_workspaces
                .values()
                .filter(|r| r.region == region && r.alias.starts_with(alias) && r.status(cx.now).is_some())
                .map(|r| view(r, cx.now, false))
                .collect())
        })
    }

    async fn describe_prometheus_workspace(&self, region: &str, id: &str) -> Result<Option<PrometheusWorkspace>> {
        self.read("aps:DescribeWorkspace", |w, cx| {
            Ok(w.prometheus_workspaces
                .get(id)
                .filter(|r| r.region == region && r.status(cx.now).is_some())
                .map(|r| view(r, cx.now, true)))
        })
    }

    async fn create_prometheus_workspace(&self, req: &CreatePrometheusWorkspace) -> Result<PrometheusWorkspace> {
        self.write("aps:CreateWorkspace", |w, cx| create(w, req, cx.now, cx.resource_fails.as_deref()))
    }

    async fn delete_prometheus_workspace(&self, region: &str, id: &str, _client_token: &str) -> Result<()> {
        self.write("aps:DeleteWorkspace", |w, cx| delete(w, region, id, cx.now))
    }
}

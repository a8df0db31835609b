//! `IdentityApi`: who the control plane runs as (STS `GetCallerIdentity`).

use crate::AwsProvider;
use crate::error::{malformed, sdk_error};
use async_trait::async_trait;
use instantstart_core::provider::{CallerIdentity, IdentityApi, Result};

#[async_trait]
impl IdentityApi for AwsProvider {
    async fn caller_identity(&self) -> Result<CallerIdentity> {
        const API: &str = "sts:GetCallerIdentity";
        let sts = self.sts().await?;
        let out = sts.get_caller_identity().send().await.map_err(|e| sdk_error(API, e))?;
        Ok(CallerIdentity {
            account: out.account().ok_or_else(|| malformed(API, "no Account"))?.to_string(),
            arn: out.arn().ok_or_else(|| malformed(API, "no Arn"))?.to_string(),
        })
    }
}

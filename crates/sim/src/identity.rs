//! `IdentityApi`: who the simulated control plane is (`sts:GetCallerIdentity` answers the
//! account and the role [`CONTROL_PLANE_ROLE`] it runs as).

use crate::catalog::CONTROL_PLANE_ROLE;
use crate::cloud::SimCloud;
use async_trait::async_trait;
use instantstart_core::provider::{CallerIdentity, IdentityApi, Result};

#[async_trait]
impl IdentityApi for SimCloud {
    async fn caller_identity(&self) -> Result<CallerIdentity> {
        self.read("sts:GetCallerIdentity", |w, _| {
            Ok(CallerIdentity {
                account: w.account.clone(),
                arn: format!("arn:aws:sts::{}:assumed-role/{CONTROL_PLANE_ROLE}/instantstart", w.account),
            })
        })
    }
}

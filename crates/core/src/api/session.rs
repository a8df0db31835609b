//! The session: who a request's credentials are (`GET /api/session`, and the answer of a
//! browser login). The token's secret is never part of it.

use crate::credentials::Scope;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionInfo {
    pub name: String,
    pub scope: Scope,
    /// Send this in `X-CSRF-Token` on every state-changing request made with the cookie.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csrf_token: Option<String>,
}

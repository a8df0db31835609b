//! API tokens: list, mint (the secret is answered once), revoke. Admin only: any other token
//! or session gets `403`. There is deliberately no MCP tool for these routes: agents must not
//! mint tokens.

use super::page::{PageParams, Paged};
use super::{ApiBody, ApiPath, errors};
use crate::AppState;
use crate::auth::{CreateTokenRequest, MintedToken, Principal, TokenInfo};
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{delete_with, get_with};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use instantstart_core::page::Order;
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TokenPath {
    /// The token's name.
    pub name: String,
}

pub fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/tokens",
            get_with(list, |op| {
                errors(
                    op.id("token_list")
                        .summary("List API tokens (never their secrets); admin only")
                        .tag("tokens")
                        .response::<200, Paged<TokenInfo>>(),
                )
            })
            .post_with(create, |op| {
                errors(
                    op.id("token_create")
                        .summary("Mint an API token; its secret is in `token`, shown only in this answer; admin only")
                        .tag("tokens")
                        .response::<201, Json<MintedToken>>()
                        .response_with::<409, ProblemJson, _>(|r| r.description("A token with this name exists")),
                )
            }),
        )
        .api_route(
            "/api/tokens/{name}",
            delete_with(revoke, |op| {
                errors(
                    op.id("token_revoke")
                        .summary("Revoke a token: it and every browser session minted from it stop working at once; admin only")
                        .tag("tokens")
                        .response::<204, ()>()
                        .response::<404, ProblemJson>(),
                )
            }),
        )
}

/// Only the admin token manages tokens.
fn require_admin(p: &Principal) -> Result<(), ApiError> {
    if p.is_admin() {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!("only the admin token may manage tokens; this request is from {:?}", p.name)))
    }
}

async fn list(
    State(state): State<AppState>,
    Extension(p): Extension<Principal>,
    paging: PageParams,
) -> Result<Paged<TokenInfo>, ApiError> {
    require_admin(&p)?;
    let request = paging.request("tokens", 1)?;
    let tokens = crate::auth::list_tokens(state.auth.store())?;
    paging.in_memory(tokens, "tokens", Order::Ascending, |t| vec![t.name.clone()], &request)
}

async fn create(
    State(state): State<AppState>,
    Extension(p): Extension<Principal>,
    ApiBody(req, _): ApiBody<CreateTokenRequest>,
) -> Result<Response, ApiError> {
    require_admin(&p)?;
    let minted = crate::auth::mint_token(state.auth.store(), &req, &p.actor())?;
    Ok((StatusCode::CREATED, Json(minted)).into_response())
}

async fn revoke(
    State(state): State<AppState>,
    Extension(p): Extension<Principal>,
    ApiPath(path): ApiPath<TokenPath>,
) -> Result<Response, ApiError> {
    require_admin(&p)?;
    crate::auth::revoke_token(state.auth.store(), &path.name, &p.actor())?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

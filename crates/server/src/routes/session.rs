//! Browser login: exchange an API token for an HttpOnly session cookie and a CSRF token;
//! logout ends the session on the server.

use super::{ApiBody, errors};
use crate::AppState;
use crate::auth::{Principal, SESSION_COOKIE};
use crate::error::{ApiError, ProblemJson};
use aide::axum::ApiRouter;
use aide::axum::routing::{get_with, post_with};
use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginRequest {
    /// An API token.
    pub token: String,
}

pub use instantstart_core::api::session::SessionInfo;

pub fn public_routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/login",
            post_with(login, |op| {
                op.id("login")
                    .summary("Log in with an API token; sets an HttpOnly SameSite=Strict session cookie")
                    .tag("session")
                    .response::<200, Json<SessionInfo>>()
                    .response::<400, ProblemJson>()
                    .response::<401, ProblemJson>()
            }),
        )
        .api_route(
            "/api/logout",
            post_with(logout, |op| {
                op.id("logout")
                    .summary("End the session on the server and clear its cookie")
                    .tag("session")
                    .response::<204, ()>()
                    .response::<403, ProblemJson>()
            }),
        )
}

pub fn protected_routes() -> ApiRouter<AppState> {
    ApiRouter::new().api_route(
        "/api/session",
        get_with(whoami, |op| {
            errors(op.id("session_get").summary("Who am I").tag("session").response::<200, Json<SessionInfo>>())
        }),
    )
}

async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiBody(req, _): ApiBody<LoginRequest>,
) -> Result<Response, ApiError> {
    crate::auth::check_origin(&headers)?;
    let session = state
        .auth
        .login(req.token.trim())?
        .ok_or_else(|| ApiError::Unauthorized("invalid, expired or revoked API token".into()))?;
    let set_cookie = format!(
        "{SESSION_COOKIE}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        session.cookie,
        crate::auth::SESSION_SECS,
        secure_attribute(&headers)
    );
    let info = SessionInfo { name: session.name, scope: session.scope, csrf_token: Some(session.csrf) };
    Ok((StatusCode::OK, [(header::SET_COOKIE, set_cookie)], Json(info)).into_response())
}

/// `; Secure` when the browser reached us over HTTPS through a TLS-terminating proxy
/// (`X-Forwarded-Proto: https`): the cookie then never travels in cleartext. (A client that
/// sends the header on plain HTTP only makes its own cookie stricter.)
fn secure_attribute(headers: &HeaderMap) -> &'static str {
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').next().is_some_and(|p| p.trim().eq_ignore_ascii_case("https")));
    if https { "; Secure" } else { "" }
}

/// Ends the session named by the cookie on the server (a copied cookie stops working) and
/// clears the cookie.
async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(cookie) = crate::auth::cookie_value(&headers, SESSION_COOKIE) {
        crate::auth::check_origin(&headers)?;
        state.auth.logout(&cookie)?;
    }
    let clear =
        format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0{}", secure_attribute(&headers));
    Ok((StatusCode::NO_CONTENT, [(header::SET_COOKIE, clear)]).into_response())
}

async fn whoami(Extension(p): Extension<Principal>) -> Json<SessionInfo> {
    Json(SessionInfo { name: p.name, scope: p.scope, csrf_token: None })
}

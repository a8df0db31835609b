//! Authentication and authorization of every `/api` request, and the token lifecycle.
//!
//! - The admin token: on first start the server writes a random `operate` token to
//!   `<data-dir>/token` (mode 0600); `INSTANTSTART_TOKEN` overrides it. A token shorter than
//!   [`MIN_ADMIN_TOKEN_CHARS`](instantstart_core::credentials::MIN_ADMIN_TOKEN_CHARS) (an empty file included) is refused at start. Only the admin token
//!   may list, mint and revoke tokens.
//! - On a store several replicas share ([`Auth::load_or_init_shared`]: PostgreSQL), the admin
//!   token's SHA-256 is kept in the store (setting [`ADMIN_TOKEN_SETTING`]): the first replica
//!   to start on an empty store records the hash of its token (`INSTANTSTART_TOKEN`, its token
//!   file, or one it generates), later replicas accept that token without holding the secret,
//!   and a replica started with `INSTANTSTART_TOKEN` records that token's hash (rotation: every
//!   replica accepts only the new token from the next request on; sessions of the old one end).
//! - Minted tokens: `POST /api/tokens` or `instantstart-server token create`, with scope `read`
//!   (GET only) or `operate` and an optional expiry. Only their SHA-256 is kept, in the store
//!   (table `tokens`), read on every request: a revoked or expired token fails at once, on every
//!   server sharing the database. Clients send `Authorization: Bearer <token>`.
//! - Browser sessions: `POST /api/login` with a token sets an HttpOnly, SameSite=Strict cookie
//!   holding a random session id; the store keeps its hash, the token it was minted from and a
//!   CSRF token (table `sessions`). Every request re-checks that the session exists and that
//!   its token is still valid, so revoking a token (or changing the admin token) ends its
//!   sessions, and `POST /api/logout` deletes the session on the server. State-changing cookie
//!   requests must echo the CSRF token in `X-CSRF-Token` and, when the browser sends `Origin`,
//!   come from the server's own origin.
//! - The face (`ui`, `cli`, `agent`, `api`) comes from `X-InstantStart-Face`; cookie sessions
//!   are `ui`. Both the token name and the face are recorded in the audit log, as are token
//!   creation and revocation. The face is what the client **claims** (any token holder can send
//!   any face but `system`); the token name is what was authenticated, and the audit view says
//!   so.
//!
//! # Guarantees
//! - No cache: each authentication reads the store, so a revocation takes effect on the next
//!   request.
//! - An empty bearer token or login never authenticates.

use crate::error::ApiError;
use axum::http::{HeaderMap, Method, header};
use chrono::{DateTime, Utc};
pub use instantstart_core::credentials::Scope;
use instantstart_core::credentials::{
    ADMIN_TOKEN_NAME, CredentialStore, SessionRecord, TokenRecord, check_admin_token, validate_new_token,
};
pub use instantstart_core::credentials::{CreateTokenRequest, MintedToken, TokenInfo};
use instantstart_core::kube_access::{KubeAccess, KubeBinding, NamespacePolicy, access_for};
use instantstart_core::operation::{Actor, AuditEntry, Face};
use instantstart_core::store::{Store, StoreError};
use instantstart_core::validate::ValidationError;
use rand::RngCore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Setting key of the admin token's SHA-256 on a shared store (see the module docs).
pub const ADMIN_TOKEN_SETTING: &str = "admin_token_sha256";

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "is_session";
/// Header carrying the CSRF token of a cookie session.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Header naming the face a request comes from.
pub const FACE_HEADER: &str = "x-instantstart-face";
/// Session lifetime (a session also ends when its token expires).
pub const SESSION_SECS: i64 = 12 * 3600;
/// The audit principal of `instantstart-server token …` run on the server's machine (a name
/// no token can have).
pub const LOCAL_PRINCIPAL: &str = "local:instantstart-server";

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Principal {
    /// Name of the token (`admin` for the admin token).
    pub name: String,
    pub scope: Scope,
    pub face: Face,
    /// Whether the request came with a browser session cookie.
    pub via_session: bool,
    /// The token's Kubernetes bindings, read with the token on this request.
    #[serde(default)]
    pub kube_bindings: Vec<KubeBinding>,
}

impl Principal {
    pub fn actor(&self) -> Actor {
        Actor { face: self.face, principal: self.name.clone() }
    }

    /// Whether this is the admin token (or a session minted from it).
    pub fn is_admin(&self) -> bool {
        self.name == ADMIN_TOKEN_NAME
    }

    /// What this caller's workload calls may do in `cluster`, and as whom
    /// ([`instantstart_core::kube_access::access_for`]).
    pub fn kube_access(&self, cluster: &str, policy: &NamespacePolicy) -> KubeAccess {
        access_for(&self.name, self.is_admin(), &self.kube_bindings, cluster, policy)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// The admin token is empty, too short or malformed.
    #[error("{origin}: {reason}; remove the file to have a new token generated, or set a longer INSTANTSTART_TOKEN")]
    WeakAdminToken { origin: String, reason: String },
    #[error("store: {0}")]
    Store(#[from] StoreError),
}

/// Why a token could not be minted.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<TokenError> for ApiError {
    fn from(e: TokenError) -> Self {
        match e {
            TokenError::Invalid(v) => ApiError::Validation(v),
            TokenError::Store(s) => s.into(),
        }
    }
}

/// Mints the token `req` describes and records it (with an audit entry naming `actor`).
pub fn mint_token(
    store: &dyn CredentialStore,
    req: &CreateTokenRequest,
    actor: &Actor,
) -> Result<MintedToken, TokenError> {
    let CreateTokenRequest { name, scope, expires_at, kube_bindings } = req;
    let (name, scope, expires_at) = (name.as_str(), *scope, *expires_at);
    let now = Utc::now();
    validate_new_token(name, expires_at, kube_bindings, now)?;
    let token = format!("ist_{}", random_hex(24));
    let record = TokenRecord {
        name: name.into(),
        scope,
        sha256: sha256_hex(&token),
        created_at: now,
        expires_at,
        created_by: actor.principal.clone(),
        kube_bindings: kube_bindings.clone(),
    };
    let audit = token_audit(actor, "token.create", &record);
    store.insert_token(&record, &audit)?;
    Ok(MintedToken { token, info: TokenInfo::of(&record, now) })
}

/// Revokes the token `name`: it and every session minted from it stop working at once.
pub fn revoke_token(store: &dyn CredentialStore, name: &str, actor: &Actor) -> Result<(), StoreError> {
    let audit = AuditEntry {
        at: Utc::now(),
        actor: actor.clone(),
        action: "token.revoke".into(),
        target: format!("token/{name}"),
        operation_id: None,
        detail: serde_json::json!({ "name": name }),
    };
    store.revoke_token(name, &audit)
}

/// Every token, by name (never their secrets).
pub fn list_tokens(store: &dyn CredentialStore) -> Result<Vec<TokenInfo>, StoreError> {
    let now = Utc::now();
    Ok(store.list_tokens()?.iter().map(|t| TokenInfo::of(t, now)).collect())
}

fn token_audit(actor: &Actor, action: &str, t: &TokenRecord) -> AuditEntry {
    AuditEntry {
        at: Utc::now(),
        actor: actor.clone(),
        action: action.into(),
        target: format!("token/{}", t.name),
        operation_id: None,
        detail: serde_json::json!({ "name": t.name, "scope": t.scope, "expires_at": t.expires_at,
            "kube_bindings": t.kube_bindings }),
    }
}

/// Token verification and sessions.
pub struct Auth {
    admin_sha256: String,
    store: Arc<dyn CredentialStore>,
    /// On a shared store: where the admin token's hash is read on every request (it may be
    /// rotated by another replica); `admin_sha256` is then only this replica's start value.
    shared: Option<Arc<dyn Store>>,
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> AuthError + '_ {
    move |source| AuthError::Io { path: path.to_path_buf(), source }
}

/// Writes a secret file readable only by its owner.
fn write_secret(path: &Path, contents: &[u8]) -> Result<(), AuthError> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(&tmp).map_err(io_err(&tmp))?;
    f.write_all(contents).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))?;
    // The rename is durable only once the directory entry is (review #13).
    #[cfg(unix)]
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io_err(dir))?;
    }
    Ok(())
}

/// Constant-time comparison of two equal-length strings.
fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A valid token: who it is and what a session opened with it may outlive.
struct Checked {
    name: String,
    scope: Scope,
    sha256: String,
    expires_at: Option<DateTime<Utc>>,
    kube_bindings: Vec<KubeBinding>,
}

/// A live session: its token's name, scope, CSRF token and Kubernetes bindings.
type LiveSession = (String, Scope, String, Vec<KubeBinding>);

/// A session just opened: the cookie value and its CSRF token.
pub struct OpenedSession {
    pub cookie: String,
    pub csrf: String,
    pub name: String,
    pub scope: Scope,
}

impl Auth {
    /// Loads (or creates on first start) the admin token and imports tokens minted by older
    /// versions (`<data-dir>/tokens.json`) into `store`. Returns the new admin token when one
    /// was created, so the caller can show it once. Sessions minted from a previous admin
    /// token end.
    pub fn load_or_init(
        data_dir: &Path,
        env_token: Option<String>,
        store: Arc<dyn CredentialStore>,
    ) -> Result<(Auth, Option<String>), AuthError> {
        crate::private_data_dir(data_dir).map_err(io_err(data_dir))?;
        let token_path = data_dir.join("token");
        let mut created = None;
        let admin = match env_token {
            Some(t) => {
                let t = t.trim().to_string();
                check_admin_token(&t)
                    .map_err(|reason| AuthError::WeakAdminToken { origin: "INSTANTSTART_TOKEN".into(), reason })?;
                t
            }
            None if token_path.exists() => {
                let t = std::fs::read_to_string(&token_path).map_err(io_err(&token_path))?.trim().to_string();
                check_admin_token(&t)
                    .map_err(|reason| AuthError::WeakAdminToken { origin: token_path.display().to_string(), reason })?;
                t
            }
            None => {
                let t = format!("ist_{}", random_hex(24));
                write_secret(&token_path, t.as_bytes())?;
                created = Some(t.clone());
                t
            }
        };
        let admin_sha256 = sha256_hex(&admin);
        store.delete_sessions_of(ADMIN_TOKEN_NAME, Some(&admin_sha256))?;
        import_legacy_tokens(data_dir, store.as_ref())?;
        Ok((Auth { admin_sha256, store, shared: None }, created))
    }

    /// [`Auth::load_or_init`] on a store other replicas share: the admin token's hash lives in
    /// the store (see the module docs). With `env_token`, its hash is recorded (replacing any
    /// other: a rotation); without, a recorded hash is accepted as it is (no secret needed),
    /// and only on an empty store is the token file read or a token created and recorded. When
    /// two replicas record a created token at once, the one stored last wins and the other
    /// forgets its own (its token file is removed).
    pub fn load_or_init_shared(
        data_dir: &Path,
        env_token: Option<String>,
        store: Arc<dyn instantstart_store::StoreBackend>,
    ) -> Result<(Auth, Option<String>), AuthError> {
        let settings: Arc<dyn Store> = store.clone();
        let recorded = settings.get_setting(ADMIN_TOKEN_SETTING)?;
        if let (None, Some(hash)) = (&env_token, &recorded) {
            store.delete_sessions_of(ADMIN_TOKEN_NAME, Some(hash))?;
            import_legacy_tokens(data_dir, store.as_ref())?;
            let auth = Auth { admin_sha256: hash.clone(), store, shared: Some(settings) };
            return Ok((auth, None));
        }
        let rotating = env_token.is_some();
        let (mut auth, mut created) = Self::load_or_init(data_dir, env_token, store)?;
        if recorded.as_deref() != Some(auth.admin_sha256.as_str()) {
            settings.set_setting(ADMIN_TOKEN_SETTING, Some(&auth.admin_sha256))?;
            if rotating && recorded.is_some() {
                tracing::warn!(
                    "INSTANTSTART_TOKEN differs from the admin token the store had: it replaces it on every replica"
                );
            }
        }
        // Another replica may have recorded its own token at the same moment: the store decides.
        if let Some(stored) = settings.get_setting(ADMIN_TOKEN_SETTING)?
            && stored != auth.admin_sha256
            && !rotating
        {
            tracing::warn!("another replica recorded the admin token first; this replica uses it");
            if created.take().is_some() {
                let _ = std::fs::remove_file(data_dir.join("token"));
            }
            auth.admin_sha256 = stored;
        }
        auth.shared = Some(settings);
        Ok((auth, created))
    }

    /// The admin token's hash now (read from a shared store, which another replica may have
    /// rotated).
    fn admin_sha256(&self) -> Result<String, StoreError> {
        match &self.shared {
            Some(settings) => {
                Ok(settings.get_setting(ADMIN_TOKEN_SETTING)?.unwrap_or_else(|| self.admin_sha256.clone()))
            }
            None => Ok(self.admin_sha256.clone()),
        }
    }

    /// The store holding tokens and sessions.
    pub fn store(&self) -> &dyn CredentialStore {
        self.store.as_ref()
    }

    /// The token's name, scope, hash and expiry, if it is valid now.
    fn check_token(&self, token: &str) -> Result<Option<Checked>, StoreError> {
        if token.is_empty() {
            return Ok(None);
        }
        let sha256 = sha256_hex(token);
        if ct_eq(&sha256, &self.admin_sha256()?) {
            return Ok(Some(Checked {
                name: ADMIN_TOKEN_NAME.into(),
                scope: Scope::Operate,
                sha256,
                expires_at: None,
                kube_bindings: Vec::new(),
            }));
        }
        Ok(self.store.find_token(&sha256)?.filter(|t| t.is_live(Utc::now())).map(|t| Checked {
            name: t.name,
            scope: t.scope,
            sha256,
            expires_at: t.expires_at,
            kube_bindings: t.kube_bindings,
        }))
    }

    /// The name and scope of a bearer token, if it is valid now.
    pub fn verify_token(&self, token: &str) -> Result<Option<(String, Scope)>, StoreError> {
        Ok(self.check_token(token)?.map(|c| (c.name, c.scope)))
    }

    /// Opens a browser session for `token` (ending when the session lifetime or the token
    /// does), or `None` when the token is not valid.
    pub fn login(&self, token: &str) -> Result<Option<OpenedSession>, StoreError> {
        let Some(Checked { name, scope, sha256: token_sha256, expires_at: token_expires, .. }) =
            self.check_token(token)?
        else {
            return Ok(None);
        };
        let now = Utc::now();
        let mut expires_at = now + chrono::Duration::seconds(SESSION_SECS);
        if let Some(t) = token_expires {
            expires_at = expires_at.min(t);
        }
        let cookie = random_hex(32);
        let csrf = random_hex(16);
        self.store.insert_session(&SessionRecord {
            id_sha256: sha256_hex(&cookie),
            token_name: name.clone(),
            token_sha256,
            scope,
            csrf: csrf.clone(),
            created_at: now,
            expires_at,
        })?;
        Ok(Some(OpenedSession { cookie, csrf, name, scope }))
    }

    /// Ends the session of `cookie` on the server.
    pub fn logout(&self, cookie: &str) -> Result<(), StoreError> {
        self.store.delete_session(&sha256_hex(cookie))
    }

    /// Name, scope and CSRF token of a live session whose token is still valid.
    pub fn verify_session(&self, cookie: &str) -> Result<Option<(String, Scope, String)>, StoreError> {
        Ok(self.check_session(cookie)?.map(|(name, scope, csrf, _)| (name, scope, csrf)))
    }

    /// [`Auth::verify_session`] with the token's Kubernetes bindings.
    fn check_session(&self, cookie: &str) -> Result<Option<LiveSession>, StoreError> {
        if cookie.is_empty() {
            return Ok(None);
        }
        let now = Utc::now();
        let Some(s) = self.store.find_session(&sha256_hex(cookie), now)? else { return Ok(None) };
        let bindings = if s.token_name == ADMIN_TOKEN_NAME {
            ct_eq(&s.token_sha256, &self.admin_sha256()?).then(Vec::new)
        } else {
            self.store
                .find_token(&s.token_sha256)?
                .filter(|t| t.name == s.token_name && t.is_live(now))
                .map(|t| t.kube_bindings)
        };
        Ok(bindings.map(|b| (s.token_name, s.scope, s.csrf, b)))
    }

    /// Authenticates a request and checks that its scope allows `method`.
    pub fn authorize(&self, method: &Method, headers: &HeaderMap) -> Result<Principal, ApiError> {
        let face =
            headers.get(FACE_HEADER).and_then(|v| v.to_str().ok()).and_then(Face::parse).filter(|f| *f != Face::System);
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
        let principal = if let Some(token) = bearer {
            let c = self
                .check_token(token.trim())
                .map_err(store_unavailable)?
                .ok_or_else(|| ApiError::Unauthorized("invalid, expired or revoked API token".into()))?;
            Principal {
                name: c.name,
                scope: c.scope,
                face: face.unwrap_or(Face::Api),
                via_session: false,
                kube_bindings: c.kube_bindings,
            }
        } else if let Some(cookie) = cookie_value(headers, SESSION_COOKIE) {
            let (name, scope, csrf, kube_bindings) = self
                .check_session(&cookie)
                .map_err(store_unavailable)?
                .ok_or_else(|| ApiError::Unauthorized("session expired or invalid; log in again".into()))?;
            if !is_safe(method) {
                let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
                if !ct_eq(sent, &csrf) {
                    return Err(ApiError::Forbidden("missing or wrong X-CSRF-Token for a cookie session".into()));
                }
                check_origin(headers)?;
            }
            Principal { name, scope, face: face.unwrap_or(Face::Ui), via_session: true, kube_bindings }
        } else {
            return Err(ApiError::Unauthorized(
                "send Authorization: Bearer <token> (see <data-dir>/token) or log in at POST /api/session".into(),
            ));
        };
        if principal.scope == Scope::Read && !is_safe(method) {
            return Err(ApiError::Forbidden(format!(
                "token {:?} has scope read; {method} needs scope operate",
                principal.name
            )));
        }
        Ok(principal)
    }
}

/// A store failure while authenticating: the request cannot be judged, so it is refused.
fn store_unavailable(e: StoreError) -> ApiError {
    tracing::error!(error = %e, "authentication: the store failed");
    ApiError::Internal(format!("cannot check credentials: {e}"))
}

/// Imports the tokens of `<data-dir>/tokens.json` (written by versions that kept tokens in a
/// file) into the store, then renames the file to `tokens.json.imported`.
fn import_legacy_tokens(data_dir: &Path, store: &dyn CredentialStore) -> Result<(), AuthError> {
    #[derive(Deserialize)]
    struct Legacy {
        name: String,
        scope: Scope,
        sha256: String,
        created_at: DateTime<Utc>,
    }
    let path = data_dir.join("tokens.json");
    if !path.exists() {
        return Ok(());
    }
    let raw = std::fs::read_to_string(&path).map_err(io_err(&path))?;
    let legacy: Vec<Legacy> =
        serde_json::from_str(&raw).map_err(|e| AuthError::Corrupt { path: path.clone(), message: e.to_string() })?;
    let actor = Actor { face: Face::System, principal: LOCAL_PRINCIPAL.into() };
    for t in legacy {
        let record = TokenRecord {
            name: t.name,
            scope: t.scope,
            sha256: t.sha256,
            created_at: t.created_at,
            expires_at: None,
            created_by: LOCAL_PRINCIPAL.into(),
            kube_bindings: Vec::new(),
        };
        match store.insert_token(&record, &token_audit(&actor, "token.import", &record)) {
            Ok(()) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let done = data_dir.join("tokens.json.imported");
    std::fs::rename(&path, &done).map_err(io_err(&path))
}

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The value of cookie `name`, if sent.
pub fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then(|| v.to_string())
    })
}

/// When the browser sends `Origin`, it must be this server (same host and port).
pub fn check_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return Ok(()) };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let origin_host = origin.split_once("://").map(|(_, h)| h).unwrap_or(origin);
    if origin_host == host {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!("cross-origin request from {origin} refused")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_store::SqliteStore;

    fn store() -> Arc<SqliteStore> {
        Arc::new(SqliteStore::open_in_memory().unwrap())
    }

    fn auth() -> (tempfile::TempDir, Arc<SqliteStore>, Auth, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = store();
        let (auth, created) = Auth::load_or_init(dir.path(), None, store.clone()).unwrap();
        (dir, store, auth, created.unwrap())
    }

    fn admin() -> Actor {
        Actor { face: Face::Api, principal: "admin".into() }
    }

    fn req(name: &str, scope: Scope, expires_at: Option<DateTime<Utc>>) -> CreateTokenRequest {
        CreateTokenRequest { name: name.into(), scope, expires_at, kube_bindings: vec![] }
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        h
    }

    fn cookie(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("{SESSION_COOKIE}={value}").parse().unwrap());
        h
    }

    #[test]
    fn first_start_creates_a_private_token_that_verifies() {
        let (dir, store, auth, token) = auth();
        assert_eq!(auth.verify_token(&token).unwrap(), Some(("admin".into(), Scope::Operate)));
        assert_eq!(auth.verify_token("nope").unwrap(), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("token")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (_again, created) = Auth::load_or_init(dir.path(), None, store).unwrap();
        assert!(created.is_none(), "the token is created once");
    }

    /// Review #13: the data directory (admin token, database, backups) is its owner's only,
    /// when created and when found wider.
    #[cfg(unix)]
    #[test]
    fn the_data_directory_is_private_to_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/data");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        crate::private_data_dir(&data).unwrap();
        assert_eq!(mode(&data), 0o700);
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        Auth::load_or_init(&data, None, store()).unwrap();
        assert_eq!(mode(&data), 0o700, "a wider directory is narrowed");
        assert_eq!(mode(&data.join("token")), 0o600);
    }

    #[test]
    fn empty_short_or_spaced_admin_tokens_are_refused_at_start() {
        for content in ["", "  \n", "short-token", "ist_has a space in the middle"] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("token"), content).unwrap();
            let err = Auth::load_or_init(dir.path(), None, store()).err().expect(content);
            assert!(matches!(err, AuthError::WeakAdminToken { .. }), "{content:?}: {err}");
            let dir = tempfile::tempdir().unwrap();
            let err = Auth::load_or_init(dir.path(), Some(content.into()), store()).err().expect(content);
            assert!(err.to_string().contains("INSTANTSTART_TOKEN"), "{err}");
        }
        // The empty login the review found (`{"token": ""}`) never authenticates.
        let (_dir, _store, auth, _) = auth();
        assert!(auth.login("").unwrap().is_none());
        assert!(matches!(auth.authorize(&Method::GET, &bearer("")), Err(ApiError::Unauthorized(_))));
    }

    #[test]
    fn minted_tokens_carry_their_scope_and_are_seen_without_restart() {
        let (_dir, store, auth, _) = auth();
        let read = mint_token(store.as_ref(), &req("agent", Scope::Read, None), &admin()).unwrap();
        assert_eq!(auth.verify_token(&read.token).unwrap(), Some(("agent".into(), Scope::Read)));
        let dup = mint_token(store.as_ref(), &req("agent", Scope::Read, None), &admin()).unwrap_err();
        assert!(matches!(dup, TokenError::Store(StoreError::AlreadyExists { .. })), "{dup}");
        let bad = mint_token(store.as_ref(), &req("bad name", Scope::Read, None), &admin()).unwrap_err();
        assert!(matches!(bad, TokenError::Invalid(_)), "{bad}");
        assert!(auth.authorize(&Method::GET, &bearer(&read.token)).is_ok());
        assert!(matches!(auth.authorize(&Method::POST, &bearer(&read.token)), Err(ApiError::Forbidden(_))));
        let audit = instantstart_core::store::Store::list_audit(store.as_ref(), Some("token/agent"), 10).unwrap();
        assert_eq!((audit[0].action.as_str(), audit[0].actor.principal.as_str()), ("token.create", "admin"));
    }

    #[test]
    fn revoking_a_token_ends_it_and_its_sessions_at_once() {
        let (_dir, store, auth, _) = auth();
        let minted = mint_token(store.as_ref(), &req("ci", Scope::Operate, None), &admin()).unwrap();
        let session = auth.login(&minted.token).unwrap().unwrap();
        assert!(auth.authorize(&Method::GET, &cookie(&session.cookie)).is_ok());
        revoke_token(store.as_ref(), "ci", &admin()).unwrap();
        assert!(matches!(auth.authorize(&Method::GET, &bearer(&minted.token)), Err(ApiError::Unauthorized(_))));
        assert!(matches!(auth.authorize(&Method::GET, &cookie(&session.cookie)), Err(ApiError::Unauthorized(_))));
        // A new token under the same name does not revive the old session.
        let again = mint_token(store.as_ref(), &req("ci", Scope::Operate, None), &admin()).unwrap();
        assert_ne!(again.token, minted.token);
        assert!(auth.verify_session(&session.cookie).unwrap().is_none());
        let audit = instantstart_core::store::Store::list_audit(store.as_ref(), Some("token/ci"), 10).unwrap();
        let actions: Vec<&str> = audit.iter().map(|a| a.action.as_str()).collect();
        assert_eq!(actions, ["token.create", "token.revoke", "token.create"]);
    }

    #[test]
    fn expired_tokens_and_their_sessions_stop_working() {
        let (_dir, store, auth, _) = auth();
        let minted = mint_token(
            store.as_ref(),
            &req("short-lived", Scope::Read, Some(Utc::now() + chrono::Duration::milliseconds(300))),
            &admin(),
        )
        .unwrap();
        let session = auth.login(&minted.token).unwrap().unwrap();
        assert!(auth.verify_token(&minted.token).unwrap().is_some());
        assert!(auth.verify_session(&session.cookie).unwrap().is_some());
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert!(auth.verify_token(&minted.token).unwrap().is_none());
        assert!(auth.verify_session(&session.cookie).unwrap().is_none());
        assert!(!list_tokens(store.as_ref()).unwrap()[0].active);
    }

    #[test]
    fn sessions_need_csrf_for_changes_and_end_on_logout_or_admin_change() {
        let (dir, store, auth, token) = auth();
        let s = auth.login(&token).unwrap().unwrap();
        let mut h = cookie(&s.cookie);
        let p = auth.authorize(&Method::GET, &h).unwrap();
        assert_eq!((p.face, p.via_session, p.is_admin()), (Face::Ui, true, true));
        assert!(matches!(auth.authorize(&Method::POST, &h), Err(ApiError::Forbidden(_))));
        h.insert(CSRF_HEADER, s.csrf.parse().unwrap());
        h.insert(header::HOST, "127.0.0.1:3099".parse().unwrap());
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(matches!(auth.authorize(&Method::POST, &h), Err(ApiError::Forbidden(_))));
        h.insert(header::ORIGIN, "http://127.0.0.1:3099".parse().unwrap());
        assert!(auth.authorize(&Method::POST, &h).is_ok());
        assert!(auth.verify_session("0".repeat(64).as_str()).unwrap().is_none());
        // Logout ends the session on the server: a copied cookie no longer works.
        auth.logout(&s.cookie).unwrap();
        assert!(matches!(auth.authorize(&Method::GET, &cookie(&s.cookie)), Err(ApiError::Unauthorized(_))));
        // A session of the admin token ends when the admin token changes.
        let s2 = auth.login(&token).unwrap().unwrap();
        let (rotated, _) =
            Auth::load_or_init(dir.path(), Some("ist_a_new_admin_token_0123456789".into()), store).unwrap();
        assert!(rotated.verify_session(&s2.cookie).unwrap().is_none());
    }

    #[test]
    fn tokens_of_older_versions_are_imported_once() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = serde_json::json!([{ "name": "old", "scope": "read", "sha256": sha256_hex("ist_old_token"),
            "created_at": "2026-01-01T00:00:00Z" }]);
        std::fs::write(dir.path().join("tokens.json"), legacy.to_string()).unwrap();
        let store = store();
        let (auth, _) = Auth::load_or_init(dir.path(), None, store.clone()).unwrap();
        assert_eq!(auth.verify_token("ist_old_token").unwrap(), Some(("old".into(), Scope::Read)));
        assert!(!dir.path().join("tokens.json").exists());
        assert!(dir.path().join("tokens.json.imported").exists());
    }

    #[test]
    fn on_a_shared_store_the_first_replica_records_the_admin_token_and_later_ones_accept_it() {
        let store = store();
        let (dir_a, dir_b, dir_c) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, created) = Auth::load_or_init_shared(dir_a.path(), None, store.clone()).unwrap();
        let token = created.expect("the first replica on an empty store creates the admin token");
        assert_eq!(store.get_setting(ADMIN_TOKEN_SETTING).unwrap(), Some(sha256_hex(&token)), "its hash is recorded");
        // A later replica accepts it without the secret (no token file of its own).
        let (b, created) = Auth::load_or_init_shared(dir_b.path(), None, store.clone()).unwrap();
        assert!(created.is_none() && !dir_b.path().join("token").exists());
        assert_eq!(b.verify_token(&token).unwrap(), Some(("admin".into(), Scope::Operate)));
        let session = a.login(&token).unwrap().unwrap();
        assert!(b.verify_session(&session.cookie).unwrap().is_some(), "an admin session minted on A works on B");
        // Rotation: a replica started with INSTANTSTART_TOKEN records the new token's hash; every
        // replica accepts only the new one from the next request on, and old sessions end.
        let new = "ist_rotated_admin_token_0123456789";
        let (c, created) = Auth::load_or_init_shared(dir_c.path(), Some(new.into()), store.clone()).unwrap();
        assert!(created.is_none());
        for (name, auth) in [("a", &a), ("b", &b), ("c", &c)] {
            assert_eq!(auth.verify_token(new).unwrap(), Some(("admin".into(), Scope::Operate)), "{name}");
            assert_eq!(auth.verify_token(&token).unwrap(), None, "{name}: the old token no longer works");
            assert!(auth.verify_session(&session.cookie).unwrap().is_none(), "{name}: the old session ended");
        }
        // A's own token file (the old secret) does not bring the old token back on a restart.
        let (a2, created) = Auth::load_or_init_shared(dir_a.path(), None, store).unwrap();
        assert!(created.is_none());
        assert_eq!(a2.verify_token(&token).unwrap(), None);
        assert!(a2.verify_token(new).unwrap().is_some());
    }
}

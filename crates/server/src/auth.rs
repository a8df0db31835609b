//! Authentication and authorization of every `/api` request.
//!
//! - API tokens: on first start the server writes a random `operate` token to `<data-dir>/token`
//!   (mode 0600); `INSTANTSTART_TOKEN` overrides it. `instantstart-server token create` mints
//!   more, with scope `read` (GET only) or `operate`; only their SHA-256 is kept
//!   (`<data-dir>/tokens.json`). Clients send `Authorization: Bearer <token>`.
//! - Browser sessions: `POST /api/session` with a token sets an HttpOnly, SameSite=Strict cookie
//!   signed with HMAC-SHA256 (key in `<data-dir>/session.key`, so sessions survive restarts)
//!   and returns a CSRF token; state-changing cookie requests must echo it in `X-CSRF-Token`
//!   and, when the browser sends `Origin`, come from the server's own origin.
//! - The face (`ui`, `cli`, `agent`, `api`) comes from `X-InstantStart-Face`; cookie sessions
//!   are `ui`. Both the token name and the face are recorded in the audit log.

use crate::error::ApiError;
use axum::http::{HeaderMap, Method, header};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use instantstart_core::operation::{Actor, Face};
use rand::RngCore;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "is_session";
/// Header carrying the CSRF token of a cookie session.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Header naming the face a request comes from.
pub const FACE_HEADER: &str = "x-instantstart-face";
/// Session lifetime.
const SESSION_SECS: i64 = 12 * 3600;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// GET requests and live streams only.
    Read,
    /// Everything.
    Operate,
}

impl Scope {
    fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Operate => "operate",
        }
    }

    fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "operate" => Some(Scope::Operate),
            _ => None,
        }
    }
}

/// The authenticated caller of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Principal {
    /// Name of the token (`admin` for the first token).
    pub name: String,
    pub scope: Scope,
    pub face: Face,
    /// Whether the request came with a browser session cookie.
    pub via_session: bool,
}

impl Principal {
    pub fn actor(&self) -> Actor {
        Actor { face: self.face, principal: self.name.clone() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("a token named {0:?} already exists")]
    Duplicate(String),
    #[error("token names are 1-64 characters of letters, digits, '-' and '_'")]
    BadName,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct TokenRecord {
    name: String,
    scope: Scope,
    sha256: String,
    created_at: chrono::DateTime<chrono::Utc>,
}

/// Token verification and session signing.
pub struct Auth {
    data_dir: PathBuf,
    admin_sha256: String,
    tokens: RwLock<Vec<TokenRecord>>,
    session_key: [u8; 32],
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
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    opts.mode(0o600);
    let mut f = opts.open(&tmp).map_err(io_err(&tmp))?;
    f.write_all(contents).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// Constant-time comparison of two equal-length strings.
fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Auth {
    /// Loads (or creates on first start) the admin token, minted tokens and the session key.
    /// Returns the new admin token when one was created, so the caller can print it once.
    pub fn load_or_init(data_dir: &Path, env_token: Option<String>) -> Result<(Auth, Option<String>), AuthError> {
        std::fs::create_dir_all(data_dir).map_err(io_err(data_dir))?;
        let token_path = data_dir.join("token");
        let mut created = None;
        let admin = match env_token.filter(|t| !t.is_empty()) {
            Some(t) => t,
            None if token_path.exists() => {
                std::fs::read_to_string(&token_path).map_err(io_err(&token_path))?.trim().to_string()
            }
            None => {
                let t = format!("ist_{}", random_hex(24));
                write_secret(&token_path, t.as_bytes())?;
                created = Some(t.clone());
                t
            }
        };
        let key_path = data_dir.join("session.key");
        let session_key: [u8; 32] = if key_path.exists() {
            let raw = std::fs::read(&key_path).map_err(io_err(&key_path))?;
            raw.try_into()
                .map_err(|_| AuthError::Corrupt { path: key_path.clone(), message: "expected 32 bytes".into() })?
        } else {
            let mut k = [0u8; 32];
            rand::rng().fill_bytes(&mut k);
            write_secret(&key_path, &k)?;
            k
        };
        let auth = Auth {
            data_dir: data_dir.to_path_buf(),
            admin_sha256: sha256_hex(&admin),
            tokens: RwLock::new(Self::read_tokens(data_dir)?),
            session_key,
        };
        Ok((auth, created))
    }

    fn read_tokens(data_dir: &Path) -> Result<Vec<TokenRecord>, AuthError> {
        let path = data_dir.join("tokens.json");
        if !path.exists() {
            return Ok(vec![]);
        }
        let raw = std::fs::read_to_string(&path).map_err(io_err(&path))?;
        serde_json::from_str(&raw).map_err(|e| AuthError::Corrupt { path, message: e.to_string() })
    }

    /// Mints a token and records its hash; returns the token (shown once).
    pub fn create_token(data_dir: &Path, name: &str, scope: Scope) -> Result<String, AuthError> {
        if name.is_empty()
            || name.len() > 64
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(AuthError::BadName);
        }
        std::fs::create_dir_all(data_dir).map_err(io_err(data_dir))?;
        let mut tokens = Self::read_tokens(data_dir)?;
        if name == "admin" || tokens.iter().any(|t| t.name == name) {
            return Err(AuthError::Duplicate(name.into()));
        }
        let token = format!("ist_{}", random_hex(24));
        tokens.push(TokenRecord {
            name: name.into(),
            scope,
            sha256: sha256_hex(&token),
            created_at: chrono::Utc::now(),
        });
        let json = serde_json::to_vec_pretty(&tokens)
            .map_err(|e| AuthError::Corrupt { path: data_dir.join("tokens.json"), message: e.to_string() })?;
        write_secret(&data_dir.join("tokens.json"), &json)?;
        Ok(token)
    }

    /// The name and scope of a bearer token, if valid.
    pub fn verify_token(&self, token: &str) -> Option<(String, Scope)> {
        let h = sha256_hex(token);
        if ct_eq(&h, &self.admin_sha256) {
            return Some(("admin".into(), Scope::Operate));
        }
        let find =
            |tokens: &[TokenRecord]| tokens.iter().find(|t| ct_eq(&t.sha256, &h)).map(|t| (t.name.clone(), t.scope));
        if let Some(found) = find(&self.tokens.read().expect("lock")) {
            return Some(found);
        }
        // Tokens minted while the server runs: reload once.
        if let Ok(fresh) = Self::read_tokens(&self.data_dir) {
            let found = find(&fresh);
            *self.tokens.write().expect("lock") = fresh;
            return found;
        }
        None
    }

    fn sign(&self, payload: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.session_key).expect("any key length");
        mac.update(payload.as_bytes());
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// A signed session cookie value and its CSRF token.
    pub fn issue_session(&self, name: &str, scope: Scope) -> (String, String) {
        let expires = chrono::Utc::now().timestamp() + SESSION_SECS;
        let csrf = random_hex(16);
        let payload = format!("{name}|{}|{expires}|{csrf}", scope.as_str());
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(payload.as_bytes());
        (format!("{encoded}.{}", self.sign(&payload)), csrf)
    }

    /// Name, scope and CSRF token of a valid, unexpired session cookie.
    pub fn verify_session(&self, cookie: &str) -> Option<(String, Scope, String)> {
        let (encoded, sig) = cookie.split_once('.')?;
        let payload = String::from_utf8(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(encoded).ok()?).ok()?;
        if !ct_eq(&self.sign(&payload), sig) {
            return None;
        }
        let mut parts = payload.split('|');
        let (name, scope, expires, csrf) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if expires.parse::<i64>().ok()? < chrono::Utc::now().timestamp() {
            return None;
        }
        Some((name.to_string(), Scope::parse(scope)?, csrf.to_string()))
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
            let (name, scope) =
                self.verify_token(token.trim()).ok_or_else(|| ApiError::Unauthorized("invalid API token".into()))?;
            Principal { name, scope, face: face.unwrap_or(Face::Api), via_session: false }
        } else if let Some(cookie) = cookie_value(headers, SESSION_COOKIE) {
            let (name, scope, csrf) = self
                .verify_session(&cookie)
                .ok_or_else(|| ApiError::Unauthorized("session expired or invalid; log in again".into()))?;
            if !is_safe(method) {
                let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
                if !ct_eq(sent, &csrf) {
                    return Err(ApiError::Forbidden("missing or wrong X-CSRF-Token for a cookie session".into()));
                }
                check_origin(headers)?;
            }
            Principal { name, scope, face: face.unwrap_or(Face::Ui), via_session: true }
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

    fn auth() -> (tempfile::TempDir, Auth, String) {
        let dir = tempfile::tempdir().unwrap();
        let (auth, created) = Auth::load_or_init(dir.path(), None).unwrap();
        (dir, auth, created.unwrap())
    }

    #[test]
    fn first_start_creates_a_private_token_that_verifies() {
        let (dir, auth, token) = auth();
        assert_eq!(auth.verify_token(&token), Some(("admin".into(), Scope::Operate)));
        assert_eq!(auth.verify_token("nope"), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("token")).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (_again, created) = Auth::load_or_init(dir.path(), None).unwrap();
        assert!(created.is_none(), "the token is created once");
    }

    #[test]
    fn minted_tokens_carry_their_scope_and_are_seen_without_restart() {
        let (dir, auth, _) = auth();
        let read = Auth::create_token(dir.path(), "agent", Scope::Read).unwrap();
        assert_eq!(auth.verify_token(&read), Some(("agent".into(), Scope::Read)));
        assert!(matches!(Auth::create_token(dir.path(), "agent", Scope::Read), Err(AuthError::Duplicate(_))));
        assert!(matches!(Auth::create_token(dir.path(), "bad name", Scope::Read), Err(AuthError::BadName)));
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, format!("Bearer {read}").parse().unwrap());
        assert!(auth.authorize(&Method::GET, &h).is_ok());
        assert!(matches!(auth.authorize(&Method::POST, &h), Err(ApiError::Forbidden(_))));
    }

    #[test]
    fn sessions_are_signed_and_need_csrf_for_changes() {
        let (_dir, auth, _) = auth();
        let (cookie, csrf) = auth.issue_session("admin", Scope::Operate);
        let mut h = HeaderMap::new();
        h.insert(header::COOKIE, format!("{SESSION_COOKIE}={cookie}").parse().unwrap());
        let p = auth.authorize(&Method::GET, &h).unwrap();
        assert_eq!((p.face, p.via_session), (Face::Ui, true));
        assert!(matches!(auth.authorize(&Method::POST, &h), Err(ApiError::Forbidden(_))));
        h.insert(CSRF_HEADER, csrf.parse().unwrap());
        h.insert(header::HOST, "127.0.0.1:3099".parse().unwrap());
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(matches!(auth.authorize(&Method::POST, &h), Err(ApiError::Forbidden(_))));
        h.insert(header::ORIGIN, "http://127.0.0.1:3099".parse().unwrap());
        assert!(auth.authorize(&Method::POST, &h).is_ok());
        let tampered = cookie.replacen('.', "x.", 1);
        assert!(auth.verify_session(&tampered).is_none());
    }
}

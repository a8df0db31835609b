//! [`CredentialStore`] over the `tokens` and `sessions` tables of [`SqliteStore`].
//!
//! Its tests (`tests/credentials.rs`) run on every backend.

use crate::codec::{Context, corrupt, opt_ts, parse_opt_ts, parse_ts, ts};
use crate::sqlite::{SqliteStore, insert_audit};
use chrono::{DateTime, Utc};
use instantstart_core::credentials::{CredentialStore, Scope, SessionRecord, TokenRecord};
use instantstart_core::operation::AuditEntry;
use instantstart_core::store::StoreError;
use rusqlite::{OptionalExtension, Row, params};

const TOKEN_COLUMNS: &str = "name, scope, sha256, created_at, expires_at, created_by, kube_bindings";
const SESSION_COLUMNS: &str = "id_sha256, token_name, token_sha256, scope, csrf, created_at, expires_at";

fn scope(column: &str, s: &str) -> Result<Scope, StoreError> {
    Scope::parse(s).ok_or_else(|| corrupt(column, s))
}

type TokenRow = (String, String, String, String, Option<String>, String, String);

fn token_row(r: &Row<'_>) -> rusqlite::Result<TokenRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
}

fn decode_token(
    (name, sc, sha256, created_at, expires_at, created_by, bindings): TokenRow,
) -> Result<TokenRecord, StoreError> {
    Ok(TokenRecord {
        name,
        scope: scope("tokens.scope", &sc)?,
        sha256,
        created_at: parse_ts("tokens.created_at", &created_at)?,
        expires_at: parse_opt_ts("tokens.expires_at", expires_at.as_deref())?,
        created_by,
        kube_bindings: serde_json::from_str(&bindings).map_err(|_| corrupt("tokens.kube_bindings", &bindings))?,
    })
}

type SessionRow = (String, String, String, String, String, String, String);

fn session_row(r: &Row<'_>) -> rusqlite::Result<SessionRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
}

fn decode_session(
    (id_sha256, token_name, token_sha256, sc, csrf, created_at, expires_at): SessionRow,
) -> Result<SessionRecord, StoreError> {
    Ok(SessionRecord {
        id_sha256,
        token_name,
        token_sha256,
        scope: scope("sessions.scope", &sc)?,
        csrf,
        created_at: parse_ts("sessions.created_at", &created_at)?,
        expires_at: parse_ts("sessions.expires_at", &expires_at)?,
    })
}

/// A token's bindings as stored (JSON).
pub(crate) fn bindings_json(b: &[instantstart_core::kube_access::KubeBinding]) -> Result<String, StoreError> {
    serde_json::to_string(b).map_err(|e| StoreError::Backend(format!("encode kube_bindings: {e}")))
}

impl CredentialStore for SqliteStore {
    fn insert_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError> {
        self.write("insert token", |tx| {
            let exists: bool = tx
                .query_row("SELECT EXISTS (SELECT 1 FROM tokens WHERE name = ?1)", [&token.name], |r| r.get(0))
                .ctx("look up token name")?;
            if exists {
                return Err(StoreError::AlreadyExists { what: format!("a token named {:?}", token.name) });
            }
            tx.execute(
                &format!("INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                params![
                    token.name,
                    token.scope.as_str(),
                    token.sha256,
                    ts(&token.created_at),
                    opt_ts(token.expires_at.as_ref()),
                    token.created_by,
                    bindings_json(&token.kube_bindings)?
                ],
            )
            .ctx("insert token")?;
            insert_audit(tx, audit)
        })
    }

    fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        self.read("list tokens", |tx| {
            let mut stmt =
                tx.prepare_cached(&format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY name")).ctx("prepare")?;
            let rows: Vec<TokenRow> =
                stmt.query_map([], token_row).ctx("query")?.collect::<rusqlite::Result<_>>().ctx("read rows")?;
            rows.into_iter().map(decode_token).collect()
        })
    }

    fn find_token(&self, sha256: &str) -> Result<Option<TokenRecord>, StoreError> {
        self.read("find token", |tx| {
            tx.prepare_cached(&format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE sha256 = ?1"))
                .and_then(|mut s| s.query_row([sha256], token_row))
                .optional()
                .ctx("query")?
                .map(decode_token)
                .transpose()
        })
    }

    fn revoke_token(&self, name: &str, audit: &AuditEntry) -> Result<(), StoreError> {
        self.write("revoke token", |tx| {
            let n = tx.execute("DELETE FROM tokens WHERE name = ?1", [name]).ctx("delete token")?;
            if n == 0 {
                return Err(StoreError::NotFound { what: format!("token {name:?}") });
            }
            tx.execute("DELETE FROM sessions WHERE token_name = ?1", [name]).ctx("delete its sessions")?;
            insert_audit(tx, audit)
        })
    }

    fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.write("insert session", |tx| {
            tx.execute("DELETE FROM sessions WHERE expires_at <= ?1", [ts(&Utc::now())]).ctx("forget expired")?;
            tx.execute(
                &format!("INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                params![
                    session.id_sha256,
                    session.token_name,
                    session.token_sha256,
                    session.scope.as_str(),
                    session.csrf,
                    ts(&session.created_at),
                    ts(&session.expires_at)
                ],
            )
            .ctx("insert session")?;
            Ok(())
        })
    }

    fn find_session(&self, id_sha256: &str, now: DateTime<Utc>) -> Result<Option<SessionRecord>, StoreError> {
        self.read("find session", |tx| {
            tx.prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE id_sha256 = ?1 AND expires_at > ?2"
            ))
            .and_then(|mut s| s.query_row(params![id_sha256, ts(&now)], session_row))
            .optional()
            .ctx("query")?
            .map(decode_session)
            .transpose()
        })
    }

    fn delete_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        self.write("delete session", |tx| {
            tx.execute("DELETE FROM sessions WHERE id_sha256 = ?1", [id_sha256]).ctx("delete session")?;
            Ok(())
        })
    }

    fn delete_sessions_of(&self, token_name: &str, except_token_sha256: Option<&str>) -> Result<(), StoreError> {
        self.write("delete sessions of a token", |tx| {
            tx.execute(
                "DELETE FROM sessions WHERE token_name = ?1 AND (?2 IS NULL OR token_sha256 <> ?2)",
                params![token_name, except_token_sha256],
            )
            .ctx("delete sessions")?;
            Ok(())
        })
    }
}

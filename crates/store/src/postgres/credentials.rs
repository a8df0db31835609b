//! [`CredentialStore`] over the `tokens` and `sessions` tables of [`PostgresStore`], with the
//! semantics of the SQLite version (hashes only; revoking a token deletes its sessions in the
//! same transaction).

use super::{PostgresStore, col, insert_audit};
use crate::codec::{Context, corrupt, opt_ts, parse_opt_ts, parse_ts, ts};
use ::postgres::Row;
use chrono::{DateTime, Utc};
use instantstart_core::credentials::{CredentialStore, Scope, SessionRecord, TokenRecord};
use instantstart_core::operation::AuditEntry;
use instantstart_core::store::StoreError;

const TOKEN_COLUMNS: &str = "name, scope, sha256, created_at, expires_at, created_by, kube_bindings";
const SESSION_COLUMNS: &str = "id_sha256, token_name, token_sha256, scope, csrf, created_at, expires_at";

fn scope(column: &str, s: &str) -> Result<Scope, StoreError> {
    Scope::parse(s).ok_or_else(|| corrupt(column, s))
}

fn decode_token(r: &Row) -> Result<TokenRecord, StoreError> {
    let sc: String = col(r, 1)?;
    let created_at: String = col(r, 3)?;
    let expires_at: Option<String> = col(r, 4)?;
    let bindings: String = col(r, 6)?;
    Ok(TokenRecord {
        name: col(r, 0)?,
        scope: scope("tokens.scope", &sc)?,
        sha256: col(r, 2)?,
        created_at: parse_ts("tokens.created_at", &created_at)?,
        expires_at: parse_opt_ts("tokens.expires_at", expires_at.as_deref())?,
        created_by: col(r, 5)?,
        kube_bindings: serde_json::from_str(&bindings).map_err(|_| corrupt("tokens.kube_bindings", &bindings))?,
    })
}

fn decode_session(r: &Row) -> Result<SessionRecord, StoreError> {
    let sc: String = col(r, 3)?;
    let created_at: String = col(r, 5)?;
    let expires_at: String = col(r, 6)?;
    Ok(SessionRecord {
        id_sha256: col(r, 0)?,
        token_name: col(r, 1)?,
        token_sha256: col(r, 2)?,
        scope: scope("sessions.scope", &sc)?,
        csrf: col(r, 4)?,
        created_at: parse_ts("sessions.created_at", &created_at)?,
        expires_at: parse_ts("sessions.expires_at", &expires_at)?,
    })
}

impl CredentialStore for PostgresStore {
    fn insert_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError> {
        let (token, audit) = (token.clone(), audit.clone());
        self.write("insert token", move |tx| {
            if tx.query_opt("SELECT 1 FROM tokens WHERE name = $1", &[&token.name]).ctx("look up token name")?.is_some()
            {
                return Err(StoreError::AlreadyExists { what: format!("a token named {:?}", token.name) });
            }
            let bindings = crate::credentials::bindings_json(&token.kube_bindings)?;
            tx.execute(
                &format!("INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"),
                &[
                    &token.name,
                    &token.scope.as_str(),
                    &token.sha256,
                    &ts(&token.created_at),
                    &opt_ts(token.expires_at.as_ref()),
                    &token.created_by,
                    &bindings,
                ],
            )
            .ctx("insert token")?;
            insert_audit(tx, &audit)
        })
    }

    fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        self.read("list tokens", |tx| {
            let rows = tx.query(&format!("SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY name"), &[]).ctx("query")?;
            rows.iter().map(decode_token).collect()
        })
    }

    fn find_token(&self, sha256: &str) -> Result<Option<TokenRecord>, StoreError> {
        let sha256 = sha256.to_string();
        self.read("find token", move |tx| {
            tx.query_opt(&format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE sha256 = $1"), &[&sha256])
                .ctx("query")?
                .as_ref()
                .map(decode_token)
                .transpose()
        })
    }

    fn revoke_token(&self, name: &str, audit: &AuditEntry) -> Result<(), StoreError> {
        let (name, audit) = (name.to_string(), audit.clone());
        self.write("revoke token", move |tx| {
            let n = tx.execute("DELETE FROM tokens WHERE name = $1", &[&name]).ctx("delete token")?;
            if n == 0 {
                return Err(StoreError::NotFound { what: format!("token {name:?}") });
            }
            tx.execute("DELETE FROM sessions WHERE token_name = $1", &[&name]).ctx("delete its sessions")?;
            insert_audit(tx, &audit)
        })
    }

    fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let session = session.clone();
        self.write("insert session", move |tx| {
            tx.execute("DELETE FROM sessions WHERE expires_at <= $1", &[&ts(&Utc::now())]).ctx("forget expired")?;
            tx.execute(
                &format!("INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"),
                &[
                    &session.id_sha256,
                    &session.token_name,
                    &session.token_sha256,
                    &session.scope.as_str(),
                    &session.csrf,
                    &ts(&session.created_at),
                    &ts(&session.expires_at),
                ],
            )
            .ctx("insert session")?;
            Ok(())
        })
    }

    fn find_session(&self, id_sha256: &str, now: DateTime<Utc>) -> Result<Option<SessionRecord>, StoreError> {
        let id_sha256 = id_sha256.to_string();
        self.read("find session", move |tx| {
            tx.query_opt(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id_sha256 = $1 AND expires_at > $2"),
                &[&id_sha256, &ts(&now)],
            )
            .ctx("query")?
            .as_ref()
            .map(decode_session)
            .transpose()
        })
    }

    fn delete_session(&self, id_sha256: &str) -> Result<(), StoreError> {
        let id_sha256 = id_sha256.to_string();
        self.write("delete session", move |tx| {
            tx.execute("DELETE FROM sessions WHERE id_sha256 = $1", &[&id_sha256]).ctx("delete session")?;
            Ok(())
        })
    }

    fn delete_sessions_of(&self, token_name: &str, except_token_sha256: Option<&str>) -> Result<(), StoreError> {
        let (token_name, except) = (token_name.to_string(), except_token_sha256.map(str::to_string));
        self.write("delete sessions of a token", move |tx| {
            tx.execute(
                "DELETE FROM sessions WHERE token_name = $1 AND ($2::TEXT IS NULL OR token_sha256 <> $2::TEXT)",
                &[&token_name, &except],
            )
            .ctx("delete sessions")?;
            Ok(())
        })
    }
}

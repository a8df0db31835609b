//! [`CredentialStore`] over the `tokens` and `sessions` tables of [`SqliteStore`].

use crate::codec::{Context, corrupt, opt_ts, parse_opt_ts, parse_ts, ts};
use crate::sqlite::{SqliteStore, insert_audit};
use chrono::{DateTime, Utc};
use instantstart_core::credentials::{CredentialStore, Scope, SessionRecord, TokenRecord};
use instantstart_core::operation::AuditEntry;
use instantstart_core::store::StoreError;
use rusqlite::{OptionalExtension, Row, params};

const TOKEN_COLUMNS: &str = "name, scope, sha256, created_at, expires_at, created_by";
const SESSION_COLUMNS: &str = "id_sha256, token_name, token_sha256, scope, csrf, created_at, expires_at";

fn scope(column: &str, s: &str) -> Result<Scope, StoreError> {
    Scope::parse(s).ok_or_else(|| corrupt(column, s))
}

type TokenRow = (String, String, String, String, Option<String>, String);

fn token_row(r: &Row<'_>) -> rusqlite::Result<TokenRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
}

fn decode_token((name, sc, sha256, created_at, expires_at, created_by): TokenRow) -> Result<TokenRecord, StoreError> {
    Ok(TokenRecord {
        name,
        scope: scope("tokens.scope", &sc)?,
        sha256,
        created_at: parse_ts("tokens.created_at", &created_at)?,
        expires_at: parse_opt_ts("tokens.expires_at", expires_at.as_deref())?,
        created_by,
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
                &format!("INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
                params![
                    token.name,
                    token.scope.as_str(),
                    token.sha256,
                    ts(&token.created_at),
                    opt_ts(token.expires_at.as_ref()),
                    token.created_by
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
            tx.query_row(&format!("SELECT {TOKEN_COLUMNS} FROM tokens WHERE sha256 = ?1"), [sha256], token_row)
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
            tx.query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id_sha256 = ?1 AND expires_at > ?2"),
                params![id_sha256, ts(&now)],
                session_row,
            )
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

#[cfg(test)]
mod tests {
    use super::*;
    use instantstart_core::operation::{Actor, Face};
    use instantstart_core::store::Store;

    fn audit(action: &str, target: &str) -> AuditEntry {
        AuditEntry {
            at: Utc::now(),
            actor: Actor { face: Face::Cli, principal: "admin".into() },
            action: action.into(),
            target: target.into(),
            operation_id: None,
            detail: serde_json::json!({}),
        }
    }

    fn token(name: &str, sha: &str) -> TokenRecord {
        TokenRecord {
            name: name.into(),
            scope: Scope::Read,
            sha256: sha.into(),
            created_at: Utc::now(),
            expires_at: Some(Utc::now() + chrono::Duration::hours(1)),
            created_by: "admin".into(),
        }
    }

    fn session(id: &str, token: &str, token_sha: &str, secs: i64) -> SessionRecord {
        SessionRecord {
            id_sha256: id.into(),
            token_name: token.into(),
            token_sha256: token_sha.into(),
            scope: Scope::Read,
            csrf: "c".into(),
            created_at: Utc::now(),
            expires_at: Utc::now() + chrono::Duration::seconds(secs),
        }
    }

    #[test]
    fn tokens_round_trip_and_names_are_unique() {
        let s = SqliteStore::open_in_memory().unwrap();
        let t = token("agent", "h1");
        s.insert_token(&t, &audit("token.create", "token/agent")).unwrap();
        assert_eq!(s.find_token("h1").unwrap(), Some(t.clone()));
        assert_eq!(s.list_tokens().unwrap(), vec![t]);
        let dup = s.insert_token(&token("agent", "h2"), &audit("token.create", "token/agent")).unwrap_err();
        assert!(matches!(dup, StoreError::AlreadyExists { .. }), "{dup}");
        assert_eq!(s.find_token("h2").unwrap(), None);
        // Only the first create was audited: the failed one left nothing behind.
        assert_eq!(Store::list_audit(&s, Some("token/agent"), 10).unwrap().len(), 1);
    }

    #[test]
    fn revoking_a_token_ends_its_sessions_only() {
        let s = SqliteStore::open_in_memory().unwrap();
        s.insert_token(&token("a", "ha"), &audit("token.create", "token/a")).unwrap();
        s.insert_token(&token("b", "hb"), &audit("token.create", "token/b")).unwrap();
        s.insert_session(&session("s1", "a", "ha", 60)).unwrap();
        s.insert_session(&session("s2", "b", "hb", 60)).unwrap();
        s.revoke_token("a", &audit("token.revoke", "token/a")).unwrap();
        let now = Utc::now();
        assert_eq!(s.find_token("ha").unwrap(), None);
        assert_eq!(s.find_session("s1", now).unwrap(), None);
        assert!(s.find_session("s2", now).unwrap().is_some());
        let missing = s.revoke_token("a", &audit("token.revoke", "token/a")).unwrap_err();
        assert!(matches!(missing, StoreError::NotFound { .. }), "{missing}");
    }

    #[test]
    fn sessions_expire_and_end_on_logout() {
        let s = SqliteStore::open_in_memory().unwrap();
        s.insert_session(&session("old", "admin", "h", -1)).unwrap();
        s.insert_session(&session("new", "admin", "h", 60)).unwrap();
        s.insert_session(&session("other", "admin", "h2", 60)).unwrap();
        let now = Utc::now();
        assert_eq!(s.find_session("old", now).unwrap(), None);
        assert!(s.find_session("new", now).unwrap().is_some());
        s.delete_session("new").unwrap();
        assert_eq!(s.find_session("new", now).unwrap(), None);
        s.delete_sessions_of("admin", Some("h")).unwrap();
        assert_eq!(s.find_session("other", now).unwrap(), None);
    }
}

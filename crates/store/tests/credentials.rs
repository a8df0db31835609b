//! The [`CredentialStore`] contract (tokens and sessions), run on every backend (`common`).

mod common;

use chrono::Utc;
use common::backends;
use instantstart_core::credentials::{Scope, SessionRecord, TokenRecord};
use instantstart_core::operation::{Actor, AuditEntry, Face};
use instantstart_core::store::{Store, StoreError};

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
        kube_bindings: vec![],
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
    for (backend, s, _guard) in backends() {
        let s = &*s;
        let t = token("agent", "h1");
        s.insert_token(&t, &audit("token.create", "token/agent")).unwrap();
        assert_eq!(s.find_token("h1").unwrap(), Some(t.clone()), "{backend}");
        assert_eq!(s.list_tokens().unwrap(), vec![t], "{backend}");
        let dup = s.insert_token(&token("agent", "h2"), &audit("token.create", "token/agent")).unwrap_err();
        assert!(matches!(dup, StoreError::AlreadyExists { .. }), "{backend}: {dup}");
        assert_eq!(s.find_token("h2").unwrap(), None, "{backend}");
        // Only the first create was audited: the failed one left nothing behind.
        assert_eq!(Store::list_audit(s, Some("token/agent"), 10).unwrap().len(), 1, "{backend}");
    }
}

#[test]
fn kube_bindings_round_trip() {
    use instantstart_core::kube_access::KubeBinding;
    for (backend, s, _guard) in backends() {
        let s = &*s;
        let bound = TokenRecord {
            kube_bindings: vec![
                KubeBinding {
                    cluster: "demo".into(),
                    user: "alice".into(),
                    groups: vec!["team-a".into(), "ml".into()],
                    namespaces: vec!["team-a".into()],
                    system_namespaces: vec!["monitoring".into()],
                    service_accounts: vec!["trainer".into()],
                },
                KubeBinding {
                    cluster: "*".into(),
                    user: "alice".into(),
                    groups: vec![],
                    namespaces: vec!["default".into()],
                    system_namespaces: vec![],
                    service_accounts: vec![],
                },
            ],
            ..token("bound", "hb")
        };
        s.insert_token(&bound, &audit("token.create", "token/bound")).unwrap();
        s.insert_token(&token("unbound", "hu"), &audit("token.create", "token/unbound")).unwrap();
        assert_eq!(s.find_token("hb").unwrap(), Some(bound.clone()), "{backend}");
        assert_eq!(s.find_token("hu").unwrap().unwrap().kube_bindings, vec![], "{backend}");
        assert_eq!(s.list_tokens().unwrap()[0], bound, "{backend}");
    }
}

#[test]
fn revoking_a_token_ends_its_sessions_only() {
    for (backend, s, _guard) in backends() {
        let s = &*s;
        s.insert_token(&token("a", "ha"), &audit("token.create", "token/a")).unwrap();
        s.insert_token(&token("b", "hb"), &audit("token.create", "token/b")).unwrap();
        s.insert_session(&session("s1", "a", "ha", 60)).unwrap();
        s.insert_session(&session("s2", "b", "hb", 60)).unwrap();
        s.revoke_token("a", &audit("token.revoke", "token/a")).unwrap();
        let now = Utc::now();
        assert_eq!(s.find_token("ha").unwrap(), None, "{backend}");
        assert_eq!(s.find_session("s1", now).unwrap(), None, "{backend}");
        assert!(s.find_session("s2", now).unwrap().is_some(), "{backend}");
        let missing = s.revoke_token("a", &audit("token.revoke", "token/a")).unwrap_err();
        assert!(matches!(missing, StoreError::NotFound { .. }), "{backend}: {missing}");
    }
}

#[test]
fn sessions_expire_and_end_on_logout() {
    for (backend, s, _guard) in backends() {
        let s = &*s;
        s.insert_session(&session("old", "admin", "h", -1)).unwrap();
        s.insert_session(&session("new", "admin", "h", 60)).unwrap();
        s.insert_session(&session("other", "admin", "h2", 60)).unwrap();
        let now = Utc::now();
        assert_eq!(s.find_session("old", now).unwrap(), None, "{backend}: expired");
        assert!(s.find_session("new", now).unwrap().is_some(), "{backend}");
        s.delete_session("new").unwrap();
        assert_eq!(s.find_session("new", now).unwrap(), None, "{backend}: logged out");
        s.delete_sessions_of("admin", Some("h")).unwrap();
        assert_eq!(s.find_session("other", now).unwrap(), None, "{backend}: other hash ended");
    }
}

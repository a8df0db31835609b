//! API tokens and browser sessions: their records, the rules a token must follow, and the
//! store trait that keeps them.
//!
//! Only hashes are stored (SHA-256 of the token, of the session id). Tokens and sessions live
//! in the store, not in memory, so several servers sharing one database see the same tokens
//! and sessions, and a revocation is seen by every server at once.
//!
//! # Guarantees
//! - The admin token (the `token` file or `INSTANTSTART_TOKEN`) has at least
//!   [`MIN_ADMIN_TOKEN_CHARS`] characters and no whitespace ([`check_admin_token`]); a server
//!   refuses to start otherwise.
//! - A minted token's name is 1-64 letters, digits, `-` or `_`, never `admin`, and its
//!   `expires_at`, when given, is in the future ([`validate_new_token`]); each broken rule is a
//!   finding naming its field.
//! - A token's Kubernetes bindings ([`KubeBinding`]) follow
//!   [`crate::kube_access::validate_bindings`]; they are stored with the token and shown by the
//!   token list.
//! - [`CredentialStore::revoke_token`] deletes the token and every session minted from it in
//!   one transaction: after it returns, neither authenticates anywhere.

use crate::kube_access::{KubeBinding, validate_bindings};
use crate::operation::AuditEntry;
use crate::store::StoreError;
use crate::validate::{Findings, ValidationError};
use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Name of the admin token (the `token` file or `INSTANTSTART_TOKEN`); no minted token has it.
pub const ADMIN_TOKEN_NAME: &str = "admin";
/// Fewest characters an admin token may have.
pub const MIN_ADMIN_TOKEN_CHARS: usize = 24;
/// Longest token name.
pub const MAX_TOKEN_NAME_CHARS: usize = 64;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// GET requests and live streams only.
    Read,
    /// What `read` may, and changes to workloads: submit and delete training jobs and model
    /// downloads, deploy, update and delete endpoints, chat with them, replace a pool's worker.
    /// No cluster, instance group, node, feature, storage, governance or MLflow change.
    Workloads,
    /// Everything (tokens are managed by the admin token only).
    Operate,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Workloads => "workloads",
            Scope::Operate => "operate",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "workloads" => Some(Scope::Workloads),
            "operate" => Some(Scope::Operate),
            _ => None,
        }
    }

    /// Whether a token of this scope may send `method` to the route template `route` (as the
    /// router matched it, e.g. `/api/clusters/{cluster}/jobs`); `Err` says why not, naming the
    /// scope it needs.
    ///
    /// # Guarantees
    /// - `GET`, `HEAD` and `OPTIONS` are allowed to every scope.
    /// - `workloads` may change exactly [`WORKLOAD_ROUTES`]; every other change needs `operate`.
    pub fn allows(self, method: &str, route: &str) -> Result<(), String> {
        let safe = matches!(method, "GET" | "HEAD" | "OPTIONS");
        let ok = match self {
            Scope::Operate => true,
            Scope::Workloads => safe || WORKLOAD_ROUTES.iter().any(|(m, r)| *m == method && *r == route),
            Scope::Read => safe,
        };
        if ok {
            return Ok(());
        }
        let needs = if WORKLOAD_ROUTES.iter().any(|(m, r)| *m == method && *r == route) {
            "workloads or operate"
        } else {
            "operate"
        };
        Err(format!("scope {self} may not {method} {route}; that needs scope {needs}"))
    }
}

/// The changes a [`Scope::Workloads`] token may make: `(method, route template)`. A test keeps
/// every entry a route of the served API.
pub const WORKLOAD_ROUTES: &[(&str, &str)] = &[
    ("POST", "/api/clusters/{cluster}/jobs"),
    ("DELETE", "/api/clusters/{cluster}/jobs/{job}"),
    ("POST", "/api/clusters/{cluster}/downloads"),
    ("DELETE", "/api/clusters/{cluster}/downloads/{download}"),
    ("POST", "/api/clusters/{cluster}/endpoints"),
    ("PATCH", "/api/clusters/{cluster}/endpoints/{endpoint}"),
    ("DELETE", "/api/clusters/{cluster}/endpoints/{endpoint}"),
    ("POST", "/api/clusters/{cluster}/endpoints/{endpoint}/chat"),
    ("PUT", "/api/clusters/{cluster}/pools/{pool}/workers/{pod}"),
    ("PUT", "/api/active-cluster"),
];

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Scope::parse(s).ok_or_else(|| format!("scope must be read, workloads or operate, not {s:?}"))
    }
}

/// A minted API token as stored (its secret is never kept, only its SHA-256).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub name: String,
    pub scope: Scope,
    /// Lowercase hex SHA-256 of the token.
    pub sha256: String,
    pub created_at: DateTime<Utc>,
    /// After this instant the token no longer authenticates.
    pub expires_at: Option<DateTime<Utc>>,
    /// Who minted it (`admin`, or `local` for `instantstart-server token create`).
    pub created_by: String,
    /// Who the token acts as inside clusters ([`crate::kube_access`]); empty = unbound.
    pub kube_bindings: Vec<KubeBinding>,
}

impl TokenRecord {
    /// Whether the token still authenticates at `now`.
    pub fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|t| now < t)
    }
}

/// A browser session as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Lowercase hex SHA-256 of the session id carried by the cookie.
    pub id_sha256: String,
    /// The token the session was minted from.
    pub token_name: String,
    /// SHA-256 of that token: a token re-created under the same name does not revive it.
    pub token_sha256: String,
    pub scope: Scope,
    /// The CSRF token state-changing requests must echo.
    pub csrf: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A token as listed (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenInfo {
    pub name: String,
    pub scope: Scope,
    pub created_at: DateTime<Utc>,
    /// After this instant the token no longer authenticates; `null` = never expires.
    pub expires_at: Option<DateTime<Utc>>,
    /// Who minted it.
    pub created_by: String,
    /// False once `expires_at` has passed.
    pub active: bool,
    /// Who the token acts as inside clusters: per cluster (or `*`), the impersonated Kubernetes
    /// user and groups and the namespaces its workloads may use. Empty = unbound (the control
    /// plane's identity, namespace `default` only, unless the server allows more).
    pub kube_bindings: Vec<KubeBinding>,
}

impl TokenInfo {
    pub fn of(t: &TokenRecord, now: DateTime<Utc>) -> Self {
        TokenInfo {
            name: t.name.clone(),
            scope: t.scope,
            created_at: t.created_at,
            expires_at: t.expires_at,
            created_by: t.created_by.clone(),
            active: t.is_live(now),
            kube_bindings: t.kube_bindings.clone(),
        }
    }
}

/// A token just minted: its secret is shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct MintedToken {
    /// The secret; only its hash is kept, so it cannot be shown again.
    pub token: String,
    #[serde(flatten)]
    pub info: TokenInfo,
}

/// Body of `POST /api/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTokenRequest {
    /// 1-64 letters, digits, `-` or `_`; recorded in the audit log of every request it makes.
    pub name: String,
    /// `read` (GET requests and streams only) or `operate`.
    pub scope: Scope,
    /// When the token stops working (RFC 3339, in the future); absent = never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// Who the token acts as inside clusters (per cluster or `*`: Kubernetes user, groups,
    /// allowed namespaces); its workload calls impersonate that identity. Absent = unbound.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kube_bindings: Vec<KubeBinding>,
}

/// Refuses an admin token that is too short or contains whitespace (an empty file included).
pub fn check_admin_token(token: &str) -> Result<(), String> {
    if token.chars().count() < MIN_ADMIN_TOKEN_CHARS {
        return Err(format!(
            "the admin token has {} characters; at least {MIN_ADMIN_TOKEN_CHARS} are required",
            token.chars().count()
        ));
    }
    if token.chars().any(char::is_whitespace) {
        return Err("the admin token must not contain whitespace".into());
    }
    Ok(())
}

/// The rules of a new token's name, expiry and bindings (`name`, `expires_at`,
/// `kube_bindings[i]…` findings).
pub fn validate_new_token(
    name: &str,
    expires_at: Option<DateTime<Utc>>,
    kube_bindings: &[KubeBinding],
    now: DateTime<Utc>,
) -> Result<(), ValidationError> {
    let mut f = Findings::new();
    if name.is_empty()
        || name.chars().count() > MAX_TOKEN_NAME_CHARS
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        f.push("name", format!("1-{MAX_TOKEN_NAME_CHARS} characters of letters, digits, '-' and '_'"));
    } else if name == ADMIN_TOKEN_NAME {
        f.push("name", "\"admin\" is the name of the admin token");
    }
    if let Some(t) = expires_at
        && t <= now
    {
        f.push("expires_at", format!("must be in the future (it is {})", t.to_rfc3339()));
    }
    validate_bindings(kube_bindings, &mut f);
    f.finish()
}

/// Durable tokens and sessions. Implementations make every call one atomic transaction.
pub trait CredentialStore: Send + Sync {
    /// Records a token and its audit entry; a token with the same name is
    /// [`StoreError::AlreadyExists`].
    fn insert_token(&self, token: &TokenRecord, audit: &AuditEntry) -> Result<(), StoreError>;
    /// Every token, by name.
    fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;
    /// The token with this hash, expired or not.
    fn find_token(&self, sha256: &str) -> Result<Option<TokenRecord>, StoreError>;
    /// Deletes the token `name`, every session minted from it, and records `audit`;
    /// [`StoreError::NotFound`] when there is no such token.
    fn revoke_token(&self, name: &str, audit: &AuditEntry) -> Result<(), StoreError>;
    /// Records a session (and forgets sessions that expired).
    fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// The unexpired session with this id hash.
    fn find_session(&self, id_sha256: &str, now: DateTime<Utc>) -> Result<Option<SessionRecord>, StoreError>;
    /// Ends a session (logout); ending an unknown session is not an error.
    fn delete_session(&self, id_sha256: &str) -> Result<(), StoreError>;
    /// Ends every session minted from the token `name` (e.g. the admin token after a change).
    fn delete_sessions_of(&self, token_name: &str, except_token_sha256: Option<&str>) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_allow_by_the_table() {
        // (scope, method, route, allowed)
        let table: &[(Scope, &str, &str, bool)] = &[
            (Scope::Read, "GET", "/api/clusters", true),
            (Scope::Read, "POST", "/api/clusters/{cluster}/jobs", false),
            (Scope::Workloads, "GET", "/api/clusters/{cluster}", true),
            (Scope::Workloads, "POST", "/api/clusters/{cluster}/jobs", true),
            (Scope::Workloads, "DELETE", "/api/clusters/{cluster}/jobs/{job}", true),
            (Scope::Workloads, "POST", "/api/clusters/{cluster}/endpoints/{endpoint}/chat", true),
            (Scope::Workloads, "DELETE", "/api/clusters/{cluster}", false),
            (Scope::Workloads, "POST", "/api/clusters", false),
            (Scope::Workloads, "DELETE", "/api/clusters/{cluster}/instance-groups/{group}", false),
            (Scope::Workloads, "POST", "/api/clusters/{cluster}/nodes/{action}", false),
            (Scope::Workloads, "PATCH", "/api/clusters/{cluster}/features", false),
            (Scope::Workloads, "POST", "/api/tokens", false),
            (Scope::Workloads, "POST", "/api/operations/{id}/cancel", false),
            (Scope::Operate, "DELETE", "/api/clusters/{cluster}", true),
        ];
        for (scope, method, route, ok) in table {
            let got = scope.allows(method, route);
            assert_eq!(got.is_ok(), *ok, "{scope} {method} {route}: {got:?}");
        }
        let e = Scope::Read.allows("POST", "/api/clusters/{cluster}/jobs").unwrap_err();
        assert!(e.contains("workloads or operate"), "{e}");
        let e = Scope::Workloads.allows("DELETE", "/api/clusters/{cluster}").unwrap_err();
        assert!(e.contains("needs scope operate"), "{e}");
        for s in [Scope::Read, Scope::Workloads, Scope::Operate] {
            assert_eq!(Scope::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), serde_json::json!(s.as_str()));
        }
    }

    #[test]
    fn admin_token_rules() {
        let cases: &[(&str, bool)] = &[
            ("", false),
            ("   ", false),
            ("short", false),
            ("ist_0123456789abcdefghij", true),
            ("ist_0123456789 abcdefghij", false),
            ("ist_0123456789abcdefghi", false),
        ];
        for (token, ok) in cases {
            assert_eq!(check_admin_token(token).is_ok(), *ok, "{token:?}");
        }
    }

    #[test]
    fn new_token_rules_name_the_field() {
        let now = Utc::now();
        let past = Some(now - chrono::Duration::seconds(1));
        let future = Some(now + chrono::Duration::hours(1));
        let long = "x".repeat(65);
        type Case<'a> = (&'a str, Option<DateTime<Utc>>, &'a [&'a str]);
        let cases: &[Case] = &[
            ("agent", None, &[]),
            ("ci-bot_2", future, &[]),
            ("", None, &["name"]),
            ("bad name", None, &["name"]),
            (&long, None, &["name"]),
            ("admin", None, &["name"]),
            ("agent", past, &["expires_at"]),
            ("a b", past, &["name", "expires_at"]),
        ];
        for (name, expires, fields) in cases {
            let got: Vec<String> = match validate_new_token(name, *expires, &[], now) {
                Ok(()) => vec![],
                Err(e) => e.findings.iter().map(|f| f.field.clone()).collect(),
            };
            assert_eq!(got, *fields, "{name:?} {expires:?}");
        }
    }
}

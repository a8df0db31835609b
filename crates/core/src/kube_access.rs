//! Who a token acts as inside a cluster: the Kubernetes bindings of API tokens, their rules,
//! and the [`KubeAccess`] a request's workload calls run with.
//!
//! A minted token may carry [`KubeBinding`]s: per cluster (or [`ANY_CLUSTER`]), a Kubernetes
//! user, its groups and the namespaces its workloads may use. Workload mutations (jobs,
//! downloads, endpoints), reads of workloads, pods and logs, and chat made with such a token
//! impersonate that user and those groups (`Impersonate-User`, `Impersonate-Group`), so the
//! cluster's RBAC is the boundary and the cluster's audit log names the person.
//!
//! # Guarantees
//! - [`validate_bindings`] names every broken rule by field (`kube_bindings[i].user`, …): a
//!   user or group is 1-253 printable characters without whitespace and never starts with
//!   `system:` (Kubernetes reserves that prefix for its own identities: impersonating
//!   `system:masters` or a `system:serviceaccount:` would bypass the person's RBAC); a
//!   binding lists 1-[`MAX_BINDING_NAMESPACES`] distinct workload namespaces
//!   ([`names::workload_namespace`]); each cluster (name or `*`) is bound at most once.
//! - [`access_for`] is the one place that decides the access of a request: the admin token
//!   keeps the control plane's own identity and any namespace; a token bound for the cluster
//!   (its exact name first, else `*`) impersonates the binding and may use only its
//!   namespaces; any other token keeps the control plane's identity but may use only
//!   [`UNBOUND_NAMESPACE`], unless the server was started with
//!   `--unbound-tokens-any-namespace`.
//! - [`KubeAccess::check_namespace`] refuses a namespace outside the access before anything
//!   is recorded, with a message that starts with the field (`namespace: …`).
//! - **System namespaces are refused unless the token is explicitly allowed**: a namespace of
//!   the cluster's own machinery ([`names::is_system_namespace`]: every `kube-` name and the
//!   operators' namespaces) passes [`KubeAccess::check_namespace`] only when it is in the
//!   access's `system_namespaces`, which come from the binding's `system_namespaces` (a bound
//!   token) or from the server's `--admin-system-namespaces` (the admin token); an unbound
//!   token never gets one. This holds for every face, since every workload submission and
//!   delete goes through it.
//! - **Service accounts can be confined**: a binding that lists `service_accounts` lets its
//!   workloads name only those ([`KubeAccess::check_service_account`]); the service accounts a
//!   workload's own rendering creates (its MLflow identity, a router's account) are its own
//!   and always allowed.

use crate::names;
pub use crate::provider::KubeIdentity;
use crate::validate::Findings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `cluster` of a binding that applies to every cluster without a binding of its own.
pub const ANY_CLUSTER: &str = "*";
/// The one namespace a token without a binding may run workloads in.
pub const UNBOUND_NAMESPACE: &str = "default";
/// Longest Kubernetes user or group name.
pub const MAX_IDENTITY_CHARS: usize = 253;
/// Most groups a binding may name.
pub const MAX_BINDING_GROUPS: usize = 32;
/// Most namespaces a binding may name.
pub const MAX_BINDING_NAMESPACES: usize = 64;
/// Most service accounts a binding may name.
pub const MAX_BINDING_SERVICE_ACCOUNTS: usize = 64;
/// Most bindings a token may carry.
pub const MAX_BINDINGS: usize = 64;
/// The prefix Kubernetes reserves for its own users and groups.
pub const RESERVED_PREFIX: &str = "system:";

/// A token's Kubernetes identity in one cluster (or every cluster, `*`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeBinding {
    /// InstantStart cluster name, or `*` for every cluster without a binding of its own.
    pub cluster: String,
    /// The Kubernetes user workload calls impersonate (`Impersonate-User`).
    pub user: String,
    /// Its Kubernetes groups (`Impersonate-Group`).
    #[serde(default)]
    pub groups: Vec<String>,
    /// The namespaces the token's workloads may use (at least one).
    pub namespaces: Vec<String>,
    /// System namespaces (`kube-system`, every `kube-` name, the operators' namespaces) the
    /// token's workloads may use as well; none unless listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_namespaces: Vec<String>,
    /// The service accounts the token's workloads may name; empty = any of the namespace's
    /// (the cluster's RBAC decides).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
}

impl KubeBinding {
    /// The identity this binding impersonates.
    pub fn identity(&self) -> KubeIdentity {
        KubeIdentity { user: self.user.clone(), groups: self.groups.clone() }
    }

    /// One line for token lists: `demo: user alice groups ml in team-a; system monitoring;
    /// service accounts trainer`.
    pub fn summary(&self) -> String {
        let mut s = format!("{}: user {}", self.cluster, self.user);
        if !self.groups.is_empty() {
            s += &format!(" groups {}", self.groups.join(","));
        }
        s += &format!(" in {}", self.namespaces.join(","));
        if !self.system_namespaces.is_empty() {
            s += &format!(" + system {}", self.system_namespaces.join(","));
        }
        if !self.service_accounts.is_empty() {
            s += &format!(", service accounts {}", self.service_accounts.join(","));
        }
        s
    }
}

/// What the workload calls of one request may do in one cluster, and as whom.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubeAccess {
    /// The token the request came with (`admin` for the admin token).
    pub token: String,
    /// The identity Kubernetes calls impersonate; `None` = the control plane's own identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<KubeIdentity>,
    /// The namespaces workloads may use; `None` = any (the cluster decides) but the system
    /// namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// The system namespaces workloads may use besides (see the module's guarantees).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system_namespaces: Vec<String>,
    /// The service accounts workloads may name; `None` = any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<Vec<String>>,
}

/// The server's rules for tokens' namespaces (its command-line options).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespacePolicy {
    /// `--unbound-tokens-any-namespace`: tokens without a binding may use any namespace (the
    /// system namespaces still excepted), not only [`UNBOUND_NAMESPACE`].
    pub unbound_any_namespace: bool,
    /// `--admin-system-namespaces`: the system namespaces the admin token's workloads may use.
    pub admin_system_namespaces: Vec<String>,
}

impl KubeAccess {
    /// The admin token's access: the control plane's identity, any namespace.
    pub fn control_plane(token: impl Into<String>) -> Self {
        KubeAccess {
            token: token.into(),
            identity: None,
            namespaces: None,
            system_namespaces: vec![],
            service_accounts: None,
        }
    }

    /// Whether a read may show an object of `namespace`: lists leave out what the access may not
    /// use (an unbound token's reads go through the control plane's identity, so this, not the
    /// cluster's RBAC, confines them to `default`). The admin token sees every namespace.
    pub fn sees(&self, namespace: &str) -> bool {
        self.namespaces.as_ref().is_none_or(|a| a.iter().any(|n| n == namespace))
            || self.system_namespaces.iter().any(|n| n == namespace)
    }

    fn whom(&self) -> String {
        match &self.identity {
            Some(id) => format!("token {:?} (Kubernetes user {:?})", self.token, id.user),
            None if self.namespaces.is_none() => format!("token {:?}", self.token),
            None => format!("token {:?} (no Kubernetes binding for this cluster)", self.token),
        }
    }

    /// Refuses `namespace` for a workload when the access does not include it, or when it is a
    /// system namespace the access is not explicitly allowed (`namespace: …`).
    pub fn check_namespace(&self, namespace: &str) -> Result<(), String> {
        if names::is_system_namespace(namespace) {
            if self.system_namespaces.iter().any(|n| n == namespace) {
                return Ok(());
            }
            return Err(format!(
                "namespace: {namespace} is a system namespace (Kubernetes' own or an operator's), and {} is not \
                 allowed to run workloads there; workloads run in other namespaces, e.g. default (an admin allows \
                 one explicitly: a token binding's system_namespaces, or the server's --admin-system-namespaces)",
                self.whom()
            ));
        }
        let Some(allowed) = &self.namespaces else { return Ok(()) };
        if allowed.iter().any(|n| n == namespace) {
            return Ok(());
        }
        Err(format!("namespace: {} may use namespaces {} only, not {namespace:?}", self.whom(), allowed.join(", ")))
    }

    /// Refuses a service account a workload names when the access confines them and does not
    /// list it (`service_account: …`).
    pub fn check_service_account(&self, service_account: &str) -> Result<(), String> {
        match &self.service_accounts {
            Some(allowed) if !allowed.iter().any(|a| a == service_account) => Err(format!(
                "service_account: {} may name service accounts {} only, not {service_account:?}",
                self.whom(),
                allowed.join(", ")
            )),
            _ => Ok(()),
        }
    }
}

/// The access of a request made with token `token` on cluster `cluster` (see the module's
/// guarantees).
pub fn access_for(
    token: &str,
    is_admin: bool,
    bindings: &[KubeBinding],
    cluster: &str,
    policy: &NamespacePolicy,
) -> KubeAccess {
    if is_admin {
        return KubeAccess {
            system_namespaces: policy.admin_system_namespaces.clone(),
            ..KubeAccess::control_plane(token)
        };
    }
    let binding =
        bindings.iter().find(|b| b.cluster == cluster).or_else(|| bindings.iter().find(|b| b.cluster == ANY_CLUSTER));
    match binding {
        Some(b) => KubeAccess {
            token: token.into(),
            identity: Some(b.identity()),
            namespaces: Some(b.namespaces.clone()),
            system_namespaces: b.system_namespaces.clone(),
            service_accounts: (!b.service_accounts.is_empty()).then(|| b.service_accounts.clone()),
        },
        None => KubeAccess {
            token: token.into(),
            identity: None,
            namespaces: (!policy.unbound_any_namespace).then(|| vec![UNBOUND_NAMESPACE.to_string()]),
            system_namespaces: vec![],
            service_accounts: None,
        },
    }
}

/// The rule of a system namespace a token or the admin may be allowed
/// (`--admin-system-namespaces`, a binding's `system_namespaces`).
pub fn system_namespace(name: &str) -> Result<(), String> {
    names::dns1123_label(name)?;
    if !names::is_system_namespace(name) {
        return Err(format!("{name} is not a system namespace; list it under namespaces"));
    }
    Ok(())
}

/// The rule of a Kubernetes user or group name.
fn identity_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.chars().count() > MAX_IDENTITY_CHARS
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(format!("1-{MAX_IDENTITY_CHARS} printable characters without whitespace"));
    }
    if name.starts_with(RESERVED_PREFIX) {
        return Err(format!(
            "{name:?} starts with {RESERVED_PREFIX:?}, which Kubernetes reserves for its own identities"
        ));
    }
    Ok(())
}

/// The rules of a token's bindings; findings under `kube_bindings[i]`.
pub fn validate_bindings(bindings: &[KubeBinding], f: &mut Findings) {
    if bindings.len() > MAX_BINDINGS {
        f.push("kube_bindings", format!("at most {MAX_BINDINGS} bindings"));
    }
    for (i, b) in bindings.iter().enumerate() {
        let at = |field: &str| format!("kube_bindings[{i}].{field}");
        if b.cluster != ANY_CLUSTER
            && let Err(rule) = names::cluster_name(&b.cluster)
        {
            f.push(&at("cluster"), format!("a cluster name or \"*\": {rule}"));
        }
        if bindings[..i].iter().any(|o| o.cluster == b.cluster) {
            f.push(&at("cluster"), format!("{:?} is bound more than once", b.cluster));
        }
        if let Err(rule) = identity_name(&b.user) {
            f.push(&at("user"), rule);
        }
        if b.groups.len() > MAX_BINDING_GROUPS {
            f.push(&at("groups"), format!("at most {MAX_BINDING_GROUPS} groups"));
        }
        for (j, g) in b.groups.iter().enumerate() {
            if let Err(rule) = identity_name(g) {
                f.push(&format!("kube_bindings[{i}].groups[{j}]"), rule);
            } else if b.groups[..j].contains(g) {
                f.push(&format!("kube_bindings[{i}].groups[{j}]"), format!("{g:?} is listed twice"));
            }
        }
        if b.namespaces.is_empty() || b.namespaces.len() > MAX_BINDING_NAMESPACES {
            f.push(&at("namespaces"), format!("1-{MAX_BINDING_NAMESPACES} namespaces"));
        }
        for (j, n) in b.namespaces.iter().enumerate() {
            if let Err(rule) = names::workload_namespace(n) {
                f.push(
                    &format!("kube_bindings[{i}].namespaces[{j}]"),
                    format!("{rule} (a system namespace is allowed under system_namespaces)"),
                );
            } else if b.namespaces[..j].contains(n) {
                f.push(&format!("kube_bindings[{i}].namespaces[{j}]"), format!("{n:?} is listed twice"));
            }
        }
        if b.system_namespaces.len() > MAX_BINDING_NAMESPACES {
            f.push(&at("system_namespaces"), format!("at most {MAX_BINDING_NAMESPACES} namespaces"));
        }
        for (j, n) in b.system_namespaces.iter().enumerate() {
            if let Err(rule) = system_namespace(n) {
                f.push(&format!("kube_bindings[{i}].system_namespaces[{j}]"), rule);
            } else if b.system_namespaces[..j].contains(n) {
                f.push(&format!("kube_bindings[{i}].system_namespaces[{j}]"), format!("{n:?} is listed twice"));
            }
        }
        if b.service_accounts.len() > MAX_BINDING_SERVICE_ACCOUNTS {
            f.push(&at("service_accounts"), format!("at most {MAX_BINDING_SERVICE_ACCOUNTS} service accounts"));
        }
        for (j, a) in b.service_accounts.iter().enumerate() {
            if let Err(rule) = names::dns1123_subdomain(a) {
                f.push(&format!("kube_bindings[{i}].service_accounts[{j}]"), rule);
            } else if b.service_accounts[..j].contains(a) {
                f.push(&format!("kube_bindings[{i}].service_accounts[{j}]"), format!("{a:?} is listed twice"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(cluster: &str, user: &str, groups: &[&str], namespaces: &[&str]) -> KubeBinding {
        KubeBinding {
            cluster: cluster.into(),
            user: user.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
            system_namespaces: vec![],
            service_accounts: vec![],
        }
    }

    fn policy(unbound_any_namespace: bool) -> NamespacePolicy {
        NamespacePolicy { unbound_any_namespace, admin_system_namespaces: vec![] }
    }

    #[test]
    fn binding_rules_name_the_field() {
        let long = "u".repeat(254);
        type Case<'a> = (Vec<KubeBinding>, &'a [&'a str]);
        let cases: Vec<Case> = vec![
            (vec![binding("demo", "alice", &["team-a"], &["team-a"])], &[]),
            (vec![binding("*", "alice@example.com", &[], &["team-a", "shared"])], &[]),
            (vec![binding("demo", "", &[], &["team-a"])], &["kube_bindings[0].user"]),
            (vec![binding("demo", "al ice", &[], &["team-a"])], &["kube_bindings[0].user"]),
            (vec![binding("demo", &long, &[], &["team-a"])], &["kube_bindings[0].user"]),
            (vec![binding("demo", "system:admin", &[], &["team-a"])], &["kube_bindings[0].user"]),
            (vec![binding("demo", "alice", &["system:masters"], &["team-a"])], &["kube_bindings[0].groups[0]"]),
            (vec![binding("demo", "alice", &["a", "a"], &["team-a"])], &["kube_bindings[0].groups[1]"]),
            (vec![binding("demo", "alice", &[""], &["team-a"])], &["kube_bindings[0].groups[0]"]),
            (vec![binding("demo", "alice", &[], &[])], &["kube_bindings[0].namespaces"]),
            (vec![binding("demo", "alice", &[], &["Team_A"])], &["kube_bindings[0].namespaces[0]"]),
            (vec![binding("demo", "alice", &[], &["kube-system"])], &["kube_bindings[0].namespaces[0]"]),
            (vec![binding("demo", "alice", &[], &["a", "a"])], &["kube_bindings[0].namespaces[1]"]),
            (vec![binding("Not A Cluster", "alice", &[], &["a"])], &["kube_bindings[0].cluster"]),
            (
                vec![binding("demo", "alice", &[], &["a"]), binding("demo", "bob", &[], &["b"])],
                &["kube_bindings[1].cluster"],
            ),
            (
                vec![binding("*", "system:x", &["system:y"], &[])],
                &["kube_bindings[0].user", "kube_bindings[0].groups[0]", "kube_bindings[0].namespaces"],
            ),
        ];
        for (bindings, fields) in cases {
            let mut f = Findings::new();
            validate_bindings(&bindings, &mut f);
            let got: Vec<String> = match f.finish() {
                Ok(()) => vec![],
                Err(e) => e.findings.iter().map(|x| x.field.clone()).collect(),
            };
            assert_eq!(got, fields, "{bindings:?}");
        }
    }

    #[test]
    fn access_follows_admin_binding_wildcard_and_unbound() {
        let bindings =
            vec![binding("*", "carol", &["all"], &["shared"]), binding("demo", "alice", &["team-a"], &["team-a"])];
        let alice = KubeIdentity { user: "alice".into(), groups: vec!["team-a".into()] };
        let carol = KubeIdentity { user: "carol".into(), groups: vec!["all".into()] };
        type Case<'a> = (&'a str, bool, &'a [KubeBinding], &'a str, bool, Option<KubeIdentity>, Option<&'a [&'a str]>);
        let cases: &[Case] = &[
            ("admin", true, &bindings, "demo", false, None, None),
            ("ci", false, &bindings, "demo", false, Some(alice.clone()), Some(&["team-a"])),
            ("ci", false, &bindings, "other", false, Some(carol.clone()), Some(&["shared"])),
            ("ci", false, &[], "demo", false, None, Some(&["default"])),
            ("ci", false, &[], "demo", true, None, None),
            ("ci", false, &bindings[1..], "other", false, None, Some(&["default"])),
        ];
        for (token, admin, bs, cluster, any, identity, namespaces) in cases {
            let a = access_for(token, *admin, bs, cluster, &policy(*any));
            assert_eq!(a.identity, *identity, "{token} {cluster}");
            assert_eq!(
                a.namespaces,
                namespaces.map(|n| n.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
                "{token} {cluster}"
            );
        }
    }

    #[test]
    fn namespace_checks_name_the_field_and_the_token() {
        let bound = access_for("ci", false, &[binding("demo", "alice", &[], &["team-a"])], "demo", &policy(false));
        assert!(bound.check_namespace("team-a").is_ok());
        let e = bound.check_namespace("team-b").unwrap_err();
        assert!(e.starts_with("namespace: ") && e.contains("alice") && e.contains("team-b"), "{e}");
        let unbound = access_for("ci", false, &[], "demo", &policy(false));
        assert!(unbound.check_namespace("default").is_ok());
        assert!(unbound.check_namespace("team-a").unwrap_err().contains("no Kubernetes binding"));
        assert!(KubeAccess::control_plane("admin").check_namespace("anything").is_ok());
    }

    #[test]
    fn system_namespaces_need_an_explicit_allowance_for_every_kind_of_token() {
        let mut allowed = binding("demo", "alice", &[], &["team-a"]);
        allowed.system_namespaces = vec!["monitoring".into()];
        let admin_policy =
            NamespacePolicy { unbound_any_namespace: true, admin_system_namespaces: vec!["keda".into()] };
        // (token, admin, bindings, policy, namespace, allowed)
        type Case<'a> = (&'a str, bool, Vec<KubeBinding>, NamespacePolicy, &'a str, bool);
        let cases: Vec<Case> = vec![
            ("admin", true, vec![], policy(false), "kube-system", false),
            ("admin", true, vec![], policy(false), "aws-hyperpod", false),
            ("admin", true, vec![], admin_policy.clone(), "keda", true),
            ("admin", true, vec![], admin_policy.clone(), "kube-system", false),
            ("admin", true, vec![], policy(false), "team-z", true),
            ("ci", false, vec![], policy(true), "kube-system", false),
            ("ci", false, vec![], admin_policy.clone(), "keda", false),
            ("ci", false, vec![], policy(true), "team-z", true),
            ("ci", false, vec![allowed.clone()], policy(false), "monitoring", true),
            ("ci", false, vec![allowed.clone()], policy(false), "kube-system", false),
            ("ci", false, vec![allowed.clone()], policy(false), "team-a", true),
            ("ci", false, vec![binding("demo", "bob", &[], &["team-a"])], policy(false), "monitoring", false),
        ];
        for (token, admin, bindings, policy, namespace, ok) in cases {
            let access = access_for(token, admin, &bindings, "demo", &policy);
            let got = access.check_namespace(namespace);
            assert_eq!(got.is_ok(), ok, "{token} {namespace} {got:?}");
            if let Err(e) = got {
                assert!(e.starts_with("namespace: ") && e.contains(token), "{e}");
            }
        }
        // Reads: the admin still sees every namespace, a bound token its allowed system ones.
        assert!(access_for("admin", true, &[], "demo", &policy(false)).sees("kube-system"));
        let alice = access_for("ci", false, &[allowed], "demo", &policy(false));
        assert!(alice.sees("monitoring") && alice.sees("team-a") && !alice.sees("kube-system"));
    }

    #[test]
    fn a_binding_may_confine_service_accounts() {
        let mut b = binding("demo", "alice", &[], &["team-a"]);
        let open = access_for("ci", false, std::slice::from_ref(&b), "demo", &policy(false));
        assert!(open.check_service_account("anything").is_ok());
        b.service_accounts = vec!["trainer".into()];
        let confined = access_for("ci", false, &[b], "demo", &policy(false));
        assert!(confined.check_service_account("trainer").is_ok());
        let e = confined.check_service_account("cluster-admin-sa").unwrap_err();
        assert!(e.starts_with("service_account: ") && e.contains("trainer"), "{e}");
    }

    #[test]
    fn system_and_service_account_allowances_name_their_field() {
        let with = |system: &[&str], accounts: &[&str]| {
            let mut b = binding("demo", "alice", &[], &["team-a"]);
            b.system_namespaces = system.iter().map(|s| s.to_string()).collect();
            b.service_accounts = accounts.iter().map(|s| s.to_string()).collect();
            b
        };
        type Case<'a> = (KubeBinding, &'a [&'a str]);
        let cases: Vec<Case> = vec![
            (with(&["kube-system", "monitoring"], &["trainer"]), &[]),
            (with(&["team-b"], &[]), &["kube_bindings[0].system_namespaces[0]"]),
            (with(&["keda", "keda"], &[]), &["kube_bindings[0].system_namespaces[1]"]),
            (with(&[], &["Bad_SA"]), &["kube_bindings[0].service_accounts[0]"]),
            (with(&[], &["a", "a"]), &["kube_bindings[0].service_accounts[1]"]),
        ];
        for (b, fields) in cases {
            let mut f = Findings::new();
            validate_bindings(std::slice::from_ref(&b), &mut f);
            let got: Vec<String> = match f.finish() {
                Ok(()) => vec![],
                Err(e) => e.findings.iter().map(|x| x.field.clone()).collect(),
            };
            assert_eq!(got, fields, "{b:?}");
        }
    }
}

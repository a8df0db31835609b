//! Kubernetes RBAC of the simulated clusters, for impersonated requests.
//!
//! A call whose [`KubeTarget::identity`] is set (the kube-rs adapter sends `Impersonate-User`
//! and `Impersonate-Group`; the simulated API server turns those headers into the identity) is
//! authorized the way the RBAC authorizer of a real API server does it
//! (<https://kubernetes.io/docs/reference/access-authn-authz/rbac/>):
//!
//! - A **RoleBinding** in namespace `ns` grants the rules of its `roleRef` (a Role of `ns`, or
//!   a ClusterRole) inside `ns` only; a **ClusterRoleBinding** grants its ClusterRole's rules
//!   in every namespace and at the cluster scope. Subjects match by `User` name or `Group`
//!   name (the identity's groups plus `system:authenticated`, which every authenticated
//!   identity has); ServiceAccount subjects never match an impersonated user.
//! - A rule allows a request when its `verbs`, `apiGroups` and `resources` each contain the
//!   request's value or `*` (a subresource is `pods/log`, matched by `pods/log`, `*/log` or
//!   `*`), and `resourceNames`, when given, contains the object's name. RBAC only allows:
//!   there are no deny rules, and no binding means no access.
//! - The default ClusterRoles exist even when not stored: `cluster-admin` (everything),
//!   `admin` and `edit` (every verb on every resource outside `rbac.authorization.k8s.io`;
//!   a simplification of the real aggregated roles), `view` (`get`, `list`, `watch`). The
//!   group `system:masters` is allowed everything.
//! - A denied request fails `AccessDenied` with the API server's message, e.g. `jobs.batch is
//!   forbidden: User "alice" cannot create resource "jobs" in API group "batch" in the
//!   namespace "team-b"`, which the API server answers as `403` with reason `Forbidden`.
//!
//! Calls without an identity are the control plane's own (cluster-admin through its EKS
//! access entry, which also grants the `impersonate` verb) and are not checked here. Every
//! impersonated call, allowed or denied, is recorded in the cluster's audit log
//! ([`SimCloud::kube_audit`](crate::SimCloud::kube_audit)), naming the impersonated user.

use super::objects::str_at;
use crate::world::{KubeAuditEvent, KubeWorld, obj_key};
use instantstart_core::provider::{KubeIdentity, KubeTarget, ProviderError, ProviderErrorKind};
use serde_json::Value;

const RBAC_API: &str = "rbac.authorization.k8s.io/v1";
/// Most audit events kept per cluster (the oldest are dropped).
pub const MAX_AUDIT_EVENTS: usize = 2000;

/// What a request does, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Access<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    /// Plural resource, with its subresource (`pods/log`).
    pub resource: &'a str,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// The API group and plural resource of a kind.
pub(crate) fn resource_of(api_version: &str, kind: &str) -> (String, String) {
    let group = api_version.split_once('/').map(|(g, _)| g).unwrap_or("").to_string();
    let known = super::kinds::RESOURCES
        .iter()
        .map(|(a, k, p, _)| (*a, *k, *p))
        .chain(super::kinds::CHART_RESOURCES.iter().map(|(_, a, k, p, _)| (*a, *k, *p)))
        .chain(super::kinds::KARPENTER_RESOURCES.iter().copied())
        .find(|(a, k, _)| *a == api_version && *k == kind)
        .map(|(_, _, p)| p.to_string());
    (group, known.unwrap_or_else(|| format!("{}s", kind.to_lowercase())))
}

fn list_has(rule: &Value, key: &str, value: &str) -> bool {
    rule.get(key).and_then(Value::as_array).is_some_and(|a| a.iter().any(|v| v == "*" || v == value))
}

fn resource_matches(rule: &Value, resource: &str) -> bool {
    let sub = resource.split_once('/').map(|(_, s)| s);
    rule.get("resources").and_then(Value::as_array).is_some_and(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .any(|r| r == "*" || r == resource || sub.is_some_and(|s| r.strip_prefix("*/").is_some_and(|rs| rs == s)))
    })
}

fn rule_allows(rule: &Value, a: &Access<'_>) -> bool {
    let names_ok = match rule.get("resourceNames").and_then(Value::as_array) {
        Some(names) if !names.is_empty() => a.name.is_some_and(|n| names.iter().any(|v| v == n)),
        _ => true,
    };
    list_has(rule, "verbs", a.verb)
        && list_has(rule, "apiGroups", a.group)
        && resource_matches(rule, a.resource)
        && names_ok
}

/// The rules of a default ClusterRole that is not stored.
fn default_cluster_role(name: &str) -> Option<Vec<Value>> {
    let all = serde_json::json!({ "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] });
    Some(match name {
        "cluster-admin" => vec![all],
        "admin" | "edit" => vec![serde_json::json!({ "apiGroups": ["", "apps", "batch", "autoscaling", "policy",
            "networking.k8s.io", "sagemaker.amazonaws.com", "inference.sagemaker.aws.amazon.com", "kubeflow.org",
            "ray.io", "keda.sh"], "resources": ["*"], "verbs": ["*"] })],
        "view" => {
            vec![serde_json::json!({ "apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"] })]
        }
        _ => return None,
    })
}

fn rules_of(kw: &KubeWorld, role_ref: &Value, binding_ns: Option<&str>) -> Vec<Value> {
    let (Some(kind), Some(name)) = (str_at(role_ref, "/kind"), str_at(role_ref, "/name")) else { return vec![] };
    let stored = match kind {
        "Role" => binding_ns.and_then(|ns| kw.objects.get(&obj_key(RBAC_API, "Role", Some(ns), name))),
        "ClusterRole" => kw.objects.get(&obj_key(RBAC_API, "ClusterRole", None, name)),
        _ => None,
    };
    match stored {
        Some(rec) => rec.object.get("rules").and_then(Value::as_array).cloned().unwrap_or_default(),
        None if kind == "ClusterRole" => default_cluster_role(name).unwrap_or_default(),
        None => vec![],
    }
}

fn subject_matches(binding: &Value, id: &KubeIdentity) -> bool {
    binding.get("subjects").and_then(Value::as_array).is_some_and(|subjects| {
        subjects.iter().any(|s| match (str_at(s, "/kind"), str_at(s, "/name")) {
            (Some("User"), Some(n)) => n == id.user,
            (Some("Group"), Some(n)) => n == "system:authenticated" || id.groups.iter().any(|g| g == n),
            _ => false,
        })
    })
}

/// Whether RBAC allows `id` the access `a` in this cluster.
pub(crate) fn allows(kw: &KubeWorld, id: &KubeIdentity, a: &Access<'_>) -> bool {
    if id.groups.iter().any(|g| g == "system:masters") {
        return true;
    }
    kw.objects.values().map(|rec| &rec.object).any(|o| {
        if str_at(o, "/apiVersion") != Some(RBAC_API) || !subject_matches(o, id) {
            return false;
        }
        let role_ref = o.get("roleRef").cloned().unwrap_or(Value::Null);
        match str_at(o, "/kind") {
            Some("ClusterRoleBinding") => rules_of(kw, &role_ref, None).iter().any(|r| rule_allows(r, a)),
            Some("RoleBinding") => {
                let ns = str_at(o, "/metadata/namespace");
                ns.is_some() && ns == a.namespace && rules_of(kw, &role_ref, ns).iter().any(|r| rule_allows(r, a))
            }
            _ => false,
        }
    })
}

/// The API server's refusal message.
pub(crate) fn forbidden_message(id: &KubeIdentity, a: &Access<'_>) -> String {
    let base = a.resource.split('/').next().unwrap_or(a.resource);
    let what = if a.group.is_empty() { base.to_string() } else { format!("{base}.{}", a.group) };
    let object = match a.name {
        Some(n) => format!("{what} \"{n}\""),
        None => what,
    };
    let scope = match a.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    format!(
        "{object} is forbidden: User \"{}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
        id.user, a.verb, a.resource, a.group
    )
}

/// Records an impersonated call in the cluster's audit log.
pub(crate) fn record(kw: &mut KubeWorld, id: &KubeIdentity, a: &Access<'_>, allowed: bool) {
    kw.audit.push_back(KubeAuditEvent {
        user: id.user.clone(),
        groups: id.groups.clone(),
        verb: a.verb.into(),
        group: a.group.into(),
        resource: a.resource.into(),
        namespace: a.namespace.map(str::to_string),
        name: a.name.map(str::to_string),
        allowed,
    });
    while kw.audit.len() > MAX_AUDIT_EVENTS {
        kw.audit.pop_front();
    }
}

/// Authorizes an impersonated call of `target` (calls without an identity pass) and records
/// it in the cluster's audit log.
pub(crate) fn authorize(
    kw: &mut KubeWorld,
    api: &str,
    target: &KubeTarget,
    a: &Access<'_>,
) -> Result<(), ProviderError> {
    let Some(id) = &target.identity else { return Ok(()) };
    let allowed = allows(kw, id, a);
    record(kw, id, a, allowed);
    if allowed {
        Ok(())
    } else {
        Err(ProviderError::new(api, ProviderErrorKind::AccessDenied, forbidden_message(id, a)))
    }
}

/// The simulated API server's check before it dispatches a request: a refusal is recorded
/// (an allowed request is recorded by the call it then makes).
pub(crate) fn check(kw: &mut KubeWorld, id: &KubeIdentity, a: &Access<'_>) -> Result<(), String> {
    if allows(kw, id, a) {
        return Ok(());
    }
    record(kw, id, a, false);
    Err(forbidden_message(id, a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::KubeRec;
    use serde_json::json;

    fn world(objects: &[Value]) -> KubeWorld {
        let mut kw = KubeWorld::new("us-east-1", "demo", "arn", "uid", 0.0);
        for o in objects {
            let kind = o["kind"].as_str().unwrap();
            let ns = o.pointer("/metadata/namespace").and_then(Value::as_str);
            let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap();
            kw.objects.insert(
                obj_key(RBAC_API, kind, ns, name),
                KubeRec {
                    object: o.clone(),
                    created_at: 0.0,
                    spec_changed_at: 0.0,
                    fails: None,
                    restarts: Default::default(),
                    serving: Default::default(),
                    training: Default::default(),
                },
            );
        }
        kw
    }

    #[test]
    fn rbac_allows_only_what_a_binding_grants() {
        let kw = world(&[
            json!({ "apiVersion": RBAC_API, "kind": "Role", "metadata": { "name": "jobs", "namespace": "team-a" },
                "rules": [{ "apiGroups": ["batch", "sagemaker.amazonaws.com"], "resources": ["jobs", "hyperpodpytorchjobs"],
                    "verbs": ["get", "list", "create", "patch", "delete"] },
                    { "apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"] }] }),
            json!({ "apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": { "name": "b", "namespace": "team-a" },
                "subjects": [{ "kind": "Group", "name": "team-a" }], "roleRef": { "kind": "Role", "name": "jobs" } }),
            json!({ "apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": { "name": "v", "namespace": "shared" },
                "subjects": [{ "kind": "User", "name": "bob" }], "roleRef": { "kind": "ClusterRole", "name": "view" } }),
            json!({ "apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": { "name": "ops" },
                "subjects": [{ "kind": "User", "name": "olga" }], "roleRef": { "kind": "ClusterRole", "name": "cluster-admin" } }),
        ]);
        let alice = KubeIdentity { user: "alice".into(), groups: vec!["team-a".into()] };
        let bob = KubeIdentity { user: "bob".into(), groups: vec![] };
        let olga = KubeIdentity { user: "olga".into(), groups: vec![] };
        let master = KubeIdentity { user: "x".into(), groups: vec!["system:masters".into()] };
        let a = |verb, group, resource, ns| Access { verb, group, resource, namespace: ns, name: None };
        type Case<'a> = (&'a KubeIdentity, Access<'a>, bool);
        let cases: Vec<Case> = vec![
            (&alice, a("create", "batch", "jobs", Some("team-a")), true),
            (&alice, a("get", "", "pods/log", Some("team-a")), true),
            (&alice, a("create", "batch", "jobs", Some("team-b")), false),
            (&alice, a("delete", "", "pods", Some("team-a")), false),
            (&alice, a("list", "batch", "jobs", None), false),
            (&alice, a("create", "apps", "deployments", Some("team-a")), false),
            (&bob, a("list", "batch", "jobs", Some("shared")), true),
            (&bob, a("create", "batch", "jobs", Some("shared")), false),
            (&bob, a("get", "batch", "jobs", Some("team-a")), false),
            (&olga, a("delete", "", "nodes", None), true),
            (&master, a("create", "", "pods", Some("y")), true),
        ];
        for (id, access, want) in cases {
            assert_eq!(allows(&kw, id, &access), want, "{} {access:?}", id.user);
        }
        let msg = forbidden_message(&alice, &a("create", "batch", "jobs", Some("team-b")));
        assert_eq!(
            msg,
            "jobs.batch is forbidden: User \"alice\" cannot create resource \"jobs\" in API group \"batch\" in the namespace \"team-b\""
        );
    }
}

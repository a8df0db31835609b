//! `IamApi` on IAM: roles with a trust policy, managed policies, inline policies and tags;
//! deletion in reverse order (detach, delete inline policies, leave instance profiles, delete).
//!
//! # Least privilege
//!
//! [`check_least_privilege`] refuses, before anything is sent: any managed policy other than
//! the AWS managed policies the core attaches ([`ATTACHABLE_MANAGED_POLICIES`]; the deployment
//! template's `iam:PolicyARN` condition lists the same ones, so IAM refuses them too);
//! inline `Allow` statements granting `*`, `*:*`, `iam:*` or any `<service>:*` on resource `*`
//! (so no `s3:*` on `*`); and trust policies letting anyone (`*`) assume the role.
//!
//! # Permissions boundary
//!
//! With [`crate::AwsOptions::role_boundary_arn`] set, `CreateRole` carries it as the role's
//! `PermissionsBoundary`, and adopting or completing an existing role of ours
//! (`EntityAlreadyExists`, `ensure_role_policies`) first sets it with
//! `PutRolePermissionsBoundary` (idempotent): roles created before the boundary existed get it
//! the next time a workflow touches them. The template allows `CreateRole`, `PutRolePolicy`,
//! `AttachRolePolicy` and `PutRolePermissionsBoundary` only with that boundary
//! (`iam:PermissionsBoundary`), so whoever holds the control plane's credentials cannot mint a
//! role above it; the boundary itself grants nothing IAM-administrative.
//!
//! # Policies
//!
//! Managed policies are attached and inline policies put right after `CreateRole`; if that
//! fails, the role just created is deleted again, so a failed create never leaves a role
//! that looks finished but lacks its permissions. Adopting an existing role of ours attaches
//! and puts them again (both idempotent). A process killed between `CreateRole` and those
//! calls still leaves a tagged role without its policies: `ensure_role_policies`
//! (`UpdateAssumeRolePolicy`, then the same attach/put calls; every one idempotent, checked
//! against the same least-privilege rules) completes such a role in place — the engine's role
//! steps call it before they report a role ready — so it is never created a second time.
//!
//! # OIDC providers
//!
//! The IAM OIDC provider of an EKS cluster's issuer (the trust anchor of IRSA roles) has a
//! deterministic ARN (`arn:<partition>:iam::<account>:oidc-provider/<issuer host/path>`), so
//! it is read directly. It is created with the audience `sts.amazonaws.com` and no thumbprint
//! (IAM obtains it). `EntityAlreadyExists` is adopted only when it carries our tags.
//!
//! # Eventual consistency
//!
//! A role is usable only seconds after `CreateRole` returns; EKS and SageMaker then answer
//! "cannot be assumed", which [`crate::error::classify`] maps to `Transient`, so the engine
//! retries it (bounded).

use crate::AwsProvider;
use crate::error::{invalid, malformed, sdk_error};
use crate::tags;
use async_trait::async_trait;
use aws_sdk_iam::Client as Iam;
use instantstart_core::provider::{
    CreateIamRole, IamApi, IamRole, IdentityApi, OidcProvider, ProviderError, ProviderErrorKind, Result, TAG_CLUSTER,
    Tags, is_owned,
};
use serde_json::Value;

/// The only managed policies a role may have attached: the AWS managed policies the core's
/// workflows attach (a test keeps this list in step with the core's source and with the
/// template's `iam:PolicyARN` condition).
pub const ATTACHABLE_MANAGED_POLICIES: &[&str] = &[
    instantstart_core::workflow::create_cluster::EKS_CLUSTER_POLICY,
    instantstart_core::workflow::create_cluster::HYPERPOD_INSTANCE_POLICY,
    instantstart_core::workflow::features::TRAINING_OPERATOR_POLICY,
    instantstart_core::workflow::features::INFERENCE_MANAGED_POLICY,
];

fn strings(v: Option<&Value>) -> Vec<&str> {
    match v {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

fn statements(policy: &Value) -> Vec<&Value> {
    match policy.get("Statement") {
        Some(Value::Array(a)) => a.iter().collect(),
        Some(s @ Value::Object(_)) => vec![s],
        _ => vec![],
    }
}

/// Checks a role request against the least-privilege rules in the module docs.
pub fn check_least_privilege(req: &CreateIamRole) -> std::result::Result<(), String> {
    for p in &req.managed_policies {
        if !ATTACHABLE_MANAGED_POLICIES.contains(&p.as_str()) {
            return Err(format!(
                "managed policy {p} is not one InstantStart attaches ({}); scope an inline policy to the cluster's resources",
                ATTACHABLE_MANAGED_POLICIES.join(", ")
            ));
        }
    }
    for (name, policy) in &req.inline_policies {
        let stmts = statements(policy);
        if stmts.is_empty() {
            return Err(format!("inline policy {name} has no Statement"));
        }
        for s in stmts {
            if s.get("Effect").and_then(Value::as_str) != Some("Allow") {
                continue;
            }
            if s.get("NotAction").is_some() || s.get("NotResource").is_some() {
                return Err(format!("inline policy {name}: Allow with NotAction/NotResource is too broad"));
            }
            let actions = strings(s.get("Action"));
            let resources = strings(s.get("Resource"));
            for a in &actions {
                if *a == "*" || *a == "*:*" || a.eq_ignore_ascii_case("iam:*") {
                    return Err(format!("inline policy {name} grants {a}"));
                }
                if a.ends_with(":*") && resources.contains(&"*") {
                    return Err(format!(
                        "inline policy {name} grants {a} on every resource; scope it to the cluster's resources"
                    ));
                }
            }
        }
    }
    for s in statements(&req.trust_policy) {
        let principal = s.get("Principal");
        let anyone = matches!(principal, Some(Value::String(p)) if p == "*")
            || principal.and_then(|p| p.get("AWS")).is_some_and(|a| strings(Some(a)).contains(&"*"));
        if anyone && s.get("Effect").and_then(Value::as_str) == Some("Allow") {
            return Err("the trust policy lets anyone assume the role".into());
        }
    }
    Ok(())
}

async fn get_role(iam: &Iam, name: &str) -> Result<Option<IamRole>> {
    const API: &str = "iam:GetRole";
    let out = match iam.get_role().role_name(name).send().await.map_err(|e| sdk_error(API, e)) {
        Ok(o) => o,
        Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let role = out.role().ok_or_else(|| malformed(API, "no Role"))?;
    Ok(Some(IamRole {
        name: role.role_name().to_string(),
        arn: role.arn().to_string(),
        tags: tags::from_iam(role.tags()),
    }))
}

/// Attaches the managed policies and puts the inline ones (both idempotent).
async fn ensure_policies(iam: &Iam, req: &CreateIamRole) -> Result<()> {
    for arn in &req.managed_policies {
        iam.attach_role_policy()
            .role_name(&req.name)
            .policy_arn(arn)
            .send()
            .await
            .map_err(|e| sdk_error("iam:AttachRolePolicy", e))?;
    }
    for (name, doc) in &req.inline_policies {
        iam.put_role_policy()
            .role_name(&req.name)
            .policy_name(name)
            .policy_document(doc.to_string())
            .send()
            .await
            .map_err(|e| sdk_error("iam:PutRolePolicy", e))?;
    }
    Ok(())
}

/// Sets the trust policy, attaches the managed policies and puts the inline ones of an
/// existing role (all idempotent): the completion of a role whose create was interrupted.
async fn ensure_role_policies(iam: &Iam, req: &CreateIamRole, boundary: Option<&str>) -> Result<()> {
    const API: &str = "iam:UpdateAssumeRolePolicy";
    check_least_privilege(req).map_err(|m| invalid(API, m))?;
    put_boundary(iam, &req.name, boundary).await?;
    iam.update_assume_role_policy()
        .role_name(&req.name)
        .policy_document(req.trust_policy.to_string())
        .send()
        .await
        .map_err(|e| sdk_error(API, e))?;
    ensure_policies(iam, req).await
}

/// Sets `boundary` as the role's permissions boundary (idempotent); nothing without one.
async fn put_boundary(iam: &Iam, role: &str, boundary: Option<&str>) -> Result<()> {
    let Some(arn) = boundary else { return Ok(()) };
    iam.put_role_permissions_boundary()
        .role_name(role)
        .permissions_boundary(arn)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| sdk_error("iam:PutRolePermissionsBoundary", e))
}

async fn create_role(iam: &Iam, req: &CreateIamRole, boundary: Option<&str>) -> Result<IamRole> {
    const API: &str = "iam:CreateRole";
    check_least_privilege(req).map_err(|m| invalid(API, m))?;
    let result = iam
        .create_role()
        .role_name(&req.name)
        .assume_role_policy_document(req.trust_policy.to_string())
        .set_permissions_boundary(boundary.map(str::to_string))
        .description("Created by InstantStart")
        .set_tags(Some(tags::iam(API, &req.tags)?))
        .send()
        .await
        .map_err(|e| sdk_error(API, e));
    let role = match result {
        Ok(out) => {
            let r = out.role().ok_or_else(|| malformed(API, "no Role"))?;
            let role = IamRole { name: r.role_name().to_string(), arn: r.arn().to_string(), tags: req.tags.clone() };
            // A role without its policies must not stay behind looking finished: undo the
            // create if they cannot be attached (a later retry starts clean).
            if let Err(e) = ensure_policies(iam, req).await {
                if let Err(undo) = delete_role(iam, &req.name).await {
                    tracing::warn!(role = %req.name, error = %undo, "could not remove the role after its policies failed");
                }
                return Err(e);
            }
            return Ok(role);
        }
        Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
            let cluster = req.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
            match get_role(iam, &req.name).await? {
                Some(r) if is_owned(&r.tags, &cluster) => r,
                _ => {
                    return Err(ProviderError::new(
                        API,
                        ProviderErrorKind::AlreadyExists,
                        format!("{}; it is not tagged as InstantStart's for cluster {cluster}", e.message),
                    ));
                }
            }
        }
        Err(e) => return Err(e),
    };
    put_boundary(iam, &req.name, boundary).await?;
    ensure_policies(iam, req).await?;
    Ok(role)
}

async fn delete_role(iam: &Iam, name: &str) -> Result<()> {
    let attached = iam
        .list_attached_role_policies()
        .role_name(name)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("iam:ListAttachedRolePolicies", e))?;
    for p in attached {
        let Some(arn) = p.policy_arn() else { continue };
        match iam
            .detach_role_policy()
            .role_name(name)
            .policy_arn(arn)
            .send()
            .await
            .map_err(|e| sdk_error("iam:DetachRolePolicy", e))
        {
            Err(e) if e.kind != ProviderErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    let inline = iam
        .list_role_policies()
        .role_name(name)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("iam:ListRolePolicies", e))?;
    for p in inline {
        match iam
            .delete_role_policy()
            .role_name(name)
            .policy_name(&p)
            .send()
            .await
            .map_err(|e| sdk_error("iam:DeleteRolePolicy", e))
        {
            Err(e) if e.kind != ProviderErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    let profiles = iam
        .list_instance_profiles_for_role()
        .role_name(name)
        .into_paginator()
        .items()
        .send()
        .try_collect()
        .await
        .map_err(|e| sdk_error("iam:ListInstanceProfilesForRole", e))?;
    for ip in profiles {
        match iam
            .remove_role_from_instance_profile()
            .role_name(name)
            .instance_profile_name(ip.instance_profile_name())
            .send()
            .await
            .map_err(|e| sdk_error("iam:RemoveRoleFromInstanceProfile", e))
        {
            Err(e) if e.kind != ProviderErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    iam.delete_role().role_name(name).send().await.map(|_| ()).map_err(|e| sdk_error("iam:DeleteRole", e))
}

/// ARN of the OIDC provider of `issuer_url` in the caller's account and partition.
async fn oidc_arn(p: &AwsProvider, issuer_url: &str) -> Result<String> {
    let id = p.caller_identity().await?;
    let partition = id.arn.split(':').nth(1).filter(|s| !s.is_empty()).unwrap_or("aws");
    Ok(format!("arn:{partition}:iam::{}:oidc-provider/{}", id.account, oidc_host_path(issuer_url)))
}

/// `https://oidc.eks.us-east-1.amazonaws.com/id/ABC` → `oidc.eks.us-east-1.amazonaws.com/id/ABC`.
pub fn oidc_host_path(issuer_url: &str) -> &str {
    issuer_url.trim_start_matches("https://").trim_end_matches('/')
}

async fn get_oidc(p: &AwsProvider, issuer_url: &str) -> Result<Option<OidcProvider>> {
    const API: &str = "iam:GetOpenIDConnectProvider";
    let arn = oidc_arn(p, issuer_url).await?;
    let iam = p.iam().await?;
    match iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(&arn)
        .send()
        .await
        .map_err(|e| sdk_error(API, e))
    {
        Ok(out) => Ok(Some(OidcProvider {
            arn,
            url: out.url().map(|u| format!("https://{}", oidc_host_path(u))).unwrap_or_else(|| issuer_url.to_string()),
            tags: tags::from_iam(out.tags()),
        })),
        Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

async fn create_oidc(p: &AwsProvider, issuer_url: &str, wanted: &Tags) -> Result<OidcProvider> {
    const API: &str = "iam:CreateOpenIDConnectProvider";
    if !issuer_url.starts_with("https://") {
        return Err(invalid(API, format!("OIDC issuer {issuer_url} must be an https URL")));
    }
    let iam = p.iam().await?;
    let result = iam
        .create_open_id_connect_provider()
        .url(issuer_url)
        .client_id_list("sts.amazonaws.com")
        .set_tags(Some(tags::iam(API, wanted)?))
        .send()
        .await
        .map_err(|e| sdk_error(API, e));
    match result {
        Ok(out) => Ok(OidcProvider {
            arn: out
                .open_id_connect_provider_arn()
                .ok_or_else(|| malformed(API, "no OpenIDConnectProviderArn"))?
                .to_string(),
            url: issuer_url.to_string(),
            tags: wanted.clone(),
        }),
        Err(e) if e.kind == ProviderErrorKind::AlreadyExists => {
            let cluster = wanted.get(TAG_CLUSTER).cloned().unwrap_or_default();
            match get_oidc(p, issuer_url).await? {
                Some(o) if is_owned(&o.tags, &cluster) => Ok(o),
                _ => Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!("{}; it is not tagged as InstantStart's for cluster {cluster}", e.message),
                )),
            }
        }
        Err(e) => Err(e),
    }
}

#[async_trait]
impl IamApi for AwsProvider {
    async fn get_role(&self, name: &str) -> Result<Option<IamRole>> {
        get_role(self.iam().await?, name).await
    }

    async fn create_role(&self, req: &CreateIamRole) -> Result<IamRole> {
        create_role(self.iam().await?, req, self.options().role_boundary_arn.as_deref()).await
    }

    async fn ensure_role_policies(&self, req: &CreateIamRole) -> Result<()> {
        ensure_role_policies(self.iam().await?, req, self.options().role_boundary_arn.as_deref()).await
    }

    async fn delete_role(&self, name: &str) -> Result<()> {
        delete_role(self.iam().await?, name).await
    }

    async fn get_oidc_provider(&self, issuer_url: &str) -> Result<Option<OidcProvider>> {
        get_oidc(self, issuer_url).await
    }

    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> Result<OidcProvider> {
        create_oidc(self, issuer_url, tags).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(managed: &[&str], inline: Value, trust: Value) -> CreateIamRole {
        CreateIamRole {
            name: "r".into(),
            trust_policy: trust,
            managed_policies: managed.iter().map(|s| s.to_string()).collect(),
            inline_policies: vec![("p".into(), inline)],
            tags: Default::default(),
        }
    }

    fn trust() -> Value {
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
    }

    fn allow(action: Value, resource: Value) -> Value {
        json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": resource}]})
    }

    #[test]
    fn least_privilege_rules() {
        let ok = role(
            &["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"],
            allow(json!(["s3:GetObject"]), json!("arn:aws:s3:::b/*")),
            trust(),
        );
        assert_eq!(check_least_privilege(&ok), Ok(()));
        // The core's own HyperPod bucket policy passes.
        let core = role(&[], instantstart_core::workflow::create_cluster::hyperpod_bucket_policy("b"), trust());
        assert_eq!(check_least_privilege(&core), Ok(()));
        // So do the core's service-account (IRSA) trust policy and its autoscaling policy.
        let irsa = instantstart_core::workflow::features::service_account_trust_policy(
            "arn:aws:iam::1:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/X",
            "https://oidc.eks.us-east-1.amazonaws.com/id/X",
            "aws-hyperpod",
            "checkpoints",
        );
        let sa = role(&[], allow(json!(["s3:GetObject"]), json!("arn:aws:s3:::b/*")), irsa);
        assert_eq!(check_least_privilege(&sa), Ok(()));
        for managed in ATTACHABLE_MANAGED_POLICIES {
            let r = role(&[managed], allow(json!(["s3:GetObject"]), json!("arn:aws:s3:::b/*")), trust());
            assert_eq!(check_least_privilege(&r), Ok(()), "{managed}");
        }
        let bad: Vec<CreateIamRole> = vec![
            role(
                &["arn:aws:iam::aws:policy/AmazonEC2FullAccess"],
                allow(json!("s3:GetObject"), json!("arn:aws:s3:::b/*")),
                trust(),
            ),
            role(
                &["arn:aws:iam::aws:policy/AdministratorAccess"],
                allow(json!("s3:GetObject"), json!("arn:aws:s3:::b/*")),
                trust(),
            ),
            role(&[], allow(json!("*"), json!("arn:aws:s3:::b")), trust()),
            role(&[], allow(json!(["s3:GetObject", "*:*"]), json!("arn:aws:s3:::b")), trust()),
            role(&[], allow(json!("s3:*"), json!("*")), trust()),
            role(&[], allow(json!("s3:*"), json!(["arn:aws:s3:::b", "*"])), trust()),
            role(&[], allow(json!("iam:*"), json!("arn:aws:iam::1:role/x")), trust()),
            role(&[], json!({"Statement": []}), trust()),
            role(
                &[],
                allow(json!("s3:GetObject"), json!("arn:aws:s3:::b/*")),
                json!({"Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}),
            ),
            role(
                &[],
                allow(json!("s3:GetObject"), json!("arn:aws:s3:::b/*")),
                json!({"Statement": {"Effect": "Allow", "Principal": "*", "Action": "sts:AssumeRole"}}),
            ),
        ];
        for r in bad {
            assert!(check_least_privilege(&r).is_err(), "accepted {r:?}");
        }
    }
}

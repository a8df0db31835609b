//! `IamApi`: IAM roles (instant, global; each holds its trust policy, managed and inline
//! policies, see [`SimCloud::role_policies`]; [`crate::policy`] evaluates them). S3 buckets are
//! in [`crate::s3`].

use crate::cloud::{SimCloud, SimError};
use crate::world::{RoleRec, World};
use async_trait::async_trait;
use instantstart_core::provider::{
    CreateIamRole, IamApi, IamRole, OidcProvider, ProviderError, ProviderErrorKind, Result, Tags,
};

fn role_view(r: &RoleRec) -> IamRole {
    IamRole { name: r.name.clone(), arn: r.arn.clone(), tags: r.tags.clone() }
}

fn valid_role_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c))
}

fn check_trust_policy(api: &str, trust_policy: &serde_json::Value) -> Result<()> {
    if trust_policy.get("Statement").is_none() {
        return Err(ProviderError::new(
            api,
            ProviderErrorKind::InvalidRequest,
            "MalformedPolicyDocument: the trust policy has no Statement",
        ));
    }
    Ok(())
}

/// IAM's answer when the control plane's policy demands a permissions boundary
/// (`iam:PermissionsBoundary` condition on `action`) and the request or role lacks it: the
/// caller is not authorized (IAM user guide, "Permissions boundaries for IAM entities").
fn check_boundary(w: &World, action: &str, role: &str, boundary: Option<&str>) -> Result<()> {
    match &w.role_boundary.required {
        Some(required) if boundary != Some(required.as_str()) => Err(ProviderError::new(
            action,
            ProviderErrorKind::AccessDenied,
            format!(
                "AccessDenied: User: arn:aws:sts::{acct}:assumed-role/instantstart-control-plane/i-0 is not authorized \
                 to perform: {action} on resource: arn:aws:iam::{acct}:role/{role} because no identity-based policy \
                 allows the {action} action (its iam:PermissionsBoundary condition wants {required}, the role would have {})",
                boundary.unwrap_or("none"),
                acct = w.account,
            ),
        )),
        _ => Ok(()),
    }
}

/// `CreateRole`; with `with_policies`, also what the attach/put calls that follow it do.
fn create_role(api: &str, w: &mut World, req: &CreateIamRole, with_policies: bool) -> Result<IamRole> {
    if !valid_role_name(&req.name) {
        return Err(ProviderError::new(
            api,
            ProviderErrorKind::InvalidRequest,
            format!("ValidationError: role name {:?} must be 1-64 characters of [A-Za-z0-9+=,.@_-]", req.name),
        ));
    }
    check_trust_policy(api, &req.trust_policy)?;
    let boundary = w.role_boundary.attached.clone();
    check_boundary(w, api, &req.name, boundary.as_deref())?;
    if w.roles.contains_key(&req.name) {
        return Err(ProviderError::new(
            api,
            ProviderErrorKind::AlreadyExists,
            format!("EntityAlreadyExists: Role with name {} already exists.", req.name),
        ));
    }
    let rec = RoleRec {
        name: req.name.clone(),
        arn: format!("arn:aws:iam::{}:role/{}", w.account, req.name),
        trust_policy: req.trust_policy.clone(),
        managed_policies: if with_policies { req.managed_policies.clone() } else { vec![] },
        inline_policies: if with_policies { req.inline_policies.clone() } else { vec![] },
        tags: req.tags.clone(),
        permissions_boundary: boundary,
    };
    let view = role_view(&rec);
    w.roles.insert(req.name.clone(), rec);
    Ok(view)
}

/// What a simulated IAM role holds: its trust policy and its managed and inline policies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolePolicies {
    pub trust_policy: serde_json::Value,
    /// Attached managed policy ARNs, in the order they were attached.
    pub managed_policies: Vec<String>,
    /// Inline policies by name, in the order they were first put.
    pub inline_policies: Vec<(String, serde_json::Value)>,
}

impl SimCloud {
    /// Adds a role with `req`'s name, trust policy and tags but none of its managed or inline
    /// policies — what a create leaves behind when the process dies after `CreateRole` and
    /// before the attach/put calls — without counting calls.
    pub fn seed_role(&self, req: &CreateIamRole) -> Result<IamRole, SimError> {
        self.admin(|w, _| Ok(create_role("iam:CreateRole", w, req, false)?))
    }

    /// Names of the IAM roles carrying InstantStart's ownership tags for `cluster`, sorted. Not
    /// an API call: for tests checking that a teardown left nothing of a cluster behind.
    pub fn roles_tagged_for(&self, cluster: &str) -> Vec<String> {
        let inner = self.lock();
        let mut names: Vec<String> = inner
            .world
            .roles
            .values()
            .filter(|r| instantstart_core::provider::is_owned(&r.tags, cluster))
            .map(|r| r.name.clone())
            .collect();
        names.sort();
        names
    }

    /// Sets the permissions boundary the simulated control plane attaches to every role it
    /// creates or adopts (`attached`, as `--role-boundary-arn` does for the AWS adapter) and the
    /// one IAM demands for `CreateRole`, `PutRolePermissionsBoundary`, `PutRolePolicy` and
    /// `AttachRolePolicy` (`required`, the deployment template's `iam:PermissionsBoundary`
    /// condition). With `required` set, a create or adoption without it is `AccessDenied`.
    pub fn set_role_boundary(&self, attached: Option<&str>, required: Option<&str>) -> Result<(), SimError> {
        self.admin(|w, _| {
            w.role_boundary = crate::world::RoleBoundary {
                attached: attached.map(str::to_string),
                required: required.map(str::to_string),
            };
            Ok(())
        })
    }

    /// The permissions boundary role `name` carries (`None`: no boundary or no such role). Not
    /// an API call.
    pub fn role_boundary(&self, name: &str) -> Option<String> {
        self.lock().world.roles.get(name).and_then(|r| r.permissions_boundary.clone())
    }

    /// The policies role `name` holds now, or `None` if it does not exist. Not an API call
    /// (not counted, never faulted): for tests checking what a workflow left in the account.
    pub fn role_policies(&self, name: &str) -> Option<RolePolicies> {
        self.lock().world.roles.get(name).map(|r| RolePolicies {
            trust_policy: r.trust_policy.clone(),
            managed_policies: r.managed_policies.clone(),
            inline_policies: r.inline_policies.clone(),
        })
    }
}

#[async_trait]
impl IamApi for SimCloud {
    async fn get_role(&self, name: &str) -> Result<Option<IamRole>> {
        self.read("iam:GetRole", |w, _| Ok(w.roles.get(name).map(role_view)))
    }

    async fn create_role(&self, req: &CreateIamRole) -> Result<IamRole> {
        self.write("iam:CreateRole", |w, _| {
            let view = create_role("iam:CreateRole", w, req, true)?;
            w.count_n("iam:AttachRolePolicy", req.managed_policies.len() as u64);
            w.count_n("iam:PutRolePolicy", req.inline_policies.len() as u64);
            Ok(view)
        })
    }

    async fn ensure_role_policies(&self, req: &CreateIamRole) -> Result<()> {
        const API: &str = "iam:UpdateAssumeRolePolicy";
        self.write(API, |w, _| {
            check_trust_policy(API, &req.trust_policy)?;
            if !w.roles.contains_key(&req.name) {
                return Err(ProviderError::not_found(
                    API,
                    format!("NoSuchEntity: The role with name {} cannot be found.", req.name),
                ));
            }
            // PutRolePermissionsBoundary first (the adapter's order), then the policies, which
            // IAM allows only on a role with the required boundary.
            let boundary = w.role_boundary.attached.clone();
            if boundary.is_some() {
                check_boundary(w, "iam:PutRolePermissionsBoundary", &req.name, boundary.as_deref())?;
                w.count("iam:PutRolePermissionsBoundary");
            }
            let held = w.roles.get(&req.name).and_then(|r| r.permissions_boundary.clone());
            let held = boundary.or(held);
            if !req.inline_policies.is_empty() {
                check_boundary(w, "iam:PutRolePolicy", &req.name, held.as_deref())?;
            }
            if !req.managed_policies.is_empty() {
                check_boundary(w, "iam:AttachRolePolicy", &req.name, held.as_deref())?;
            }
            let Some(rec) = w.roles.get_mut(&req.name) else { unreachable!("checked above") };
            rec.permissions_boundary = held;
            rec.trust_policy = req.trust_policy.clone();
            for arn in &req.managed_policies {
                if !rec.managed_policies.contains(arn) {
                    rec.managed_policies.push(arn.clone());
                }
            }
            for (name, doc) in &req.inline_policies {
                match rec.inline_policies.iter_mut().find(|(n, _)| n == name) {
                    Some((_, current)) => current.clone_from(doc),
                    None => rec.inline_policies.push((name.clone(), doc.clone())),
                }
            }
            w.count_n("iam:AttachRolePolicy", req.managed_policies.len() as u64);
            w.count_n("iam:PutRolePolicy", req.inline_policies.len() as u64);
            Ok(())
        })
    }

    async fn delete_role(&self, name: &str) -> Result<()> {
        const API: &str = "iam:DeleteRole";
        self.write(API, |w, _| {
            let Some(rec) = w.roles.remove(name) else {
                return Err(ProviderError::not_found(
                    API,
                    format!("NoSuchEntity: The role with name {name} cannot be found."),
                ));
            };
            w.count_n("iam:DetachRolePolicy", rec.managed_policies.len() as u64);
            w.count_n("iam:DeleteRolePolicy", rec.inline_policies.len() as u64);
            Ok(())
        })
    }

    async fn get_oidc_provider(&self, issuer_url: &str) -> Result<Option<OidcProvider>> {
        self.read("iam:GetOpenIDConnectProvider", |w, _| {
            Ok(w.oidc_providers.get(issuer_url).map(|o| OidcProvider {
                arn: o.arn.clone(),
                url: o.url.clone(),
                tags: o.tags.clone(),
            }))
        })
    }

    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> Result<OidcProvider> {
        const API: &str = "iam:CreateOpenIDConnectProvider";
        self.write(API, |w, _| {
            let Some(host_path) = issuer_url.strip_prefix("https://") else {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::InvalidRequest,
                    format!("InvalidInput: {issuer_url} is not an https URL"),
                ));
            };
            if w.oidc_providers.contains_key(issuer_url) {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!("EntityAlreadyExists: Provider with url {issuer_url} already exists."),
                ));
            }
            let rec = crate::world::OidcProviderRec {
                arn: format!("arn:aws:iam::{}:oidc-provider/{host_path}", w.account),
                url: issuer_url.to_string(),
                tags: tags.clone(),
            };
            w.oidc_providers.insert(issuer_url.to_string(), rec.clone());
            Ok(OidcProvider { arn: rec.arn, url: rec.url, tags: rec.tags })
        })
    }
}

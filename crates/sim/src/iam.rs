//! `IamApi` and `S3Api`: IAM roles (instant, global) and S3 buckets (instant, one global
//! namespace).

use crate::cloud::{SimCloud, SimError};
use crate::world::{BucketRec, RoleRec};
use async_trait::async_trait;
use instantstart_core::names;
use instantstart_core::provider::{
    Bucket, CreateBucket, CreateIamRole, IamApi, IamRole, OidcProvider, ProviderError, ProviderErrorKind, Result,
    S3Api, Tags,
};

fn role_view(r: &RoleRec) -> IamRole {
    IamRole { name: r.name.clone(), arn: r.arn.clone(), tags: r.tags.clone() }
}

fn bucket_view(b: &BucketRec) -> Bucket {
    Bucket { name: b.name.clone(), region: b.region.clone(), tags: b.tags.clone() }
}

fn valid_role_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c))
}

#[async_trait]
impl IamApi for SimCloud {
    async fn get_role(&self, name: &str) -> Result<Option<IamRole>> {
        self.read("iam:GetRole", |w, _| Ok(w.roles.get(name).map(role_view)))
    }

    async fn create_role(&self, req: &CreateIamRole) -> Result<IamRole> {
        const API: &str = "iam:CreateRole";
        self.write(API, |w, _| {
            if !valid_role_name(&req.name) {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::InvalidRequest,
                    format!("ValidationError: role name {:?} must be 1-64 characters of [A-Za-z0-9+=,.@_-]", req.name),
                ));
            }
            if req.trust_policy.get("Statement").is_none() {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::InvalidRequest,
                    "MalformedPolicyDocument: the trust policy has no Statement",
                ));
            }
            if w.roles.contains_key(&req.name) {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!("EntityAlreadyExists: Role with name {} already exists.", req.name),
                ));
            }
            let rec = RoleRec {
                name: req.name.clone(),
                arn: format!("arn:aws:iam::{}:role/{}", w.account, req.name),
                trust_policy: req.trust_policy.clone(),
                managed_policies: req.managed_policies.clone(),
                inline_policies: req.inline_policies.clone(),
                tags: req.tags.clone(),
            };
            let view = role_view(&rec);
            w.roles.insert(req.name.clone(), rec);
            w.count_n("iam:AttachRolePolicy", req.managed_policies.len() as u64);
            w.count_n("iam:PutRolePolicy", req.inline_policies.len() as u64);
            Ok(view)
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

#[async_trait]
impl S3Api for SimCloud {
    async fn describe_bucket(&self, name: &str) -> Result<Option<Bucket>> {
        self.read("s3:HeadBucket", |w, _| Ok(w.buckets.get(name).map(bucket_view)))
    }

    async fn create_bucket(&self, req: &CreateBucket) -> Result<Bucket> {
        const API: &str = "s3:CreateBucket";
        self.write(API, |w, _| {
            let b = create_bucket(API, w, req)?;
            w.count("s3:PutBucketEncryption");
            w.count("s3:PutPublicAccessBlock");
            w.count("s3:PutBucketTagging");
            Ok(b)
        })
    }

    async fn delete_bucket(&self, name: &str) -> Result<()> {
        const API: &str = "s3:DeleteBucket";
        self.write(API, |w, _| match w.buckets.remove(name) {
            Some(_) => Ok(()),
            None => {
                Err(ProviderError::not_found(API, format!("NoSuchBucket: The specified bucket {name} does not exist")))
            }
        })
    }
}

fn create_bucket(api: &str, w: &mut crate::world::World, req: &CreateBucket) -> Result<Bucket> {
    crate::catalog::check_region(api, &req.region)?;
    if let Err(rule) = names::s3_bucket_name(&req.name) {
        return Err(ProviderError::new(api, ProviderErrorKind::InvalidRequest, format!("InvalidBucketName: {rule}")));
    }
    if w.buckets.contains_key(&req.name) {
        return Err(ProviderError::new(
            api,
            ProviderErrorKind::AlreadyExists,
            format!(
                "BucketAlreadyExists: The requested bucket name {} is not available. The bucket namespace is shared by all users of the system.",
                req.name
            ),
        ));
    }
    let rec = BucketRec { name: req.name.clone(), region: req.region.clone(), tags: req.tags.clone() };
    let view = bucket_view(&rec);
    w.buckets.insert(req.name.clone(), rec);
    Ok(view)
}

impl SimCloud {
    /// Adds a bucket as if someone created it earlier (e.g. without our tags, to exercise
    /// "already exists but not ours"), without counting calls.
    pub fn seed_bucket(&self, req: &CreateBucket) -> Result<Bucket, SimError> {
        self.admin(|w, _| Ok(create_bucket("s3:CreateBucket", w, req)?))
    }
}

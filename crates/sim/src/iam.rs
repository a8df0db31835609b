//! `IamApi` and `S3Api`: IAM roles (instant, global; each holds its trust policy, managed
//! and inline policies, see [`SimCloud::role_policies`]; [`crate::policy`] evaluates them) and
//! S3 buckets (instant, one global namespace) with their objects (PutObject records the body's
//! size and SHA-256; HeadObject returns them, `None` for a missing object or bucket as S3's bare
//! 404 does; DeleteObject of a missing key succeeds).
//!
//! Bucket owner condition: the AWS adapter sends the caller's account as `ExpectedBucketOwner`
//! on every call that names an existing bucket, and S3 answers `403 AccessDenied` when the
//! bucket belongs to another account
//! (<https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-owner-condition.html>). The
//! simulator models the same: a bucket seeded for another account
//! ([`SimCloud::seed_foreign_bucket`]) answers every such call with `AccessDenied`, and its name
//! stays taken for CreateBucket (`BucketAlreadyExists`).

use crate::cloud::{SimCloud, SimError};
use crate::world::{BucketRec, ObjectRec, RoleRec, World};
use async_trait::async_trait;
use instantstart_core::names;
use instantstart_core::provider::{
    Bucket, CreateBucket, CreateIamRole, IamApi, IamRole, LIST_OBJECTS_LIMIT, ObjectHead, ObjectListing, OidcProvider,
    ProviderError, ProviderErrorKind, PutObject, Result, S3Api, S3Entry, S3EntryKind, Tags, sha256_hex,
};

fn role_view(r: &RoleRec) -> IamRole {
    IamRole { name: r.name.clone(), arn: r.arn.clone(), tags: r.tags.clone() }
}

fn bucket_view(b: &BucketRec) -> Bucket {
    Bucket { name: b.name.clone(), region: b.region.clone(), tags: b.tags.clone() }
}

/// `b` as a call carrying `ExpectedBucketOwner` = `account` sees it: another account's bucket
/// is `403 AccessDenied`.
fn owned<'a>(api: &str, b: &'a BucketRec, account: &str) -> Result<&'a BucketRec> {
    match &b.owner {
        Some(owner) if owner != account => Err(ProviderError::new(
            api,
            ProviderErrorKind::AccessDenied,
            format!(
                "AccessDenied: Access Denied (bucket {} is not owned by the expected bucket owner {account})",
                b.name
            ),
        )),
        _ => Ok(b),
    }
}

/// [`owned`] for a bucket that may be missing.
fn owned_opt<'a>(api: &str, b: Option<&'a BucketRec>, account: &str) -> Result<Option<&'a BucketRec>> {
    b.map(|b| owned(api, b, account)).transpose()
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

#[async_trait]
impl S3Api for SimCloud {
    async fn describe_bucket(&self, name: &str) -> Result<Option<Bucket>> {
        const API: &str = "s3:HeadBucket";
        self.read(API, |w, _| Ok(owned_opt(API, w.buckets.get(name), &w.account)?.map(bucket_view)))
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

    async fn list_objects(&self, bucket: &str, prefix: &str, token: Option<&str>) -> Result<ObjectListing> {
        const API: &str = "s3:ListObjectsV2";
        self.read(API, |w, _| {
            let b = w.buckets.get(bucket).ok_or_else(|| {
                ProviderError::not_found(API, format!("NoSuchBucket: The specified bucket {bucket} does not exist"))
            })?;
            let after = match token {
                None => None,
                Some(t) => match t.strip_prefix(LISTING_TOKEN).filter(|after| after.starts_with(prefix)) {
                    Some(after) => Some(after),
                    None => {
                        return Err(ProviderError::new(
                            API,
                            ProviderErrorKind::InvalidRequest,
                            "InvalidArgument: The continuation token provided is incorrect",
                        ));
                    }
                },
            };
            Ok(list_level(owned(API, b, &w.account)?, prefix, after))
        })
    }

    async fn put_object(&self, req: &PutObject) -> Result<ObjectHead> {
        const API: &str = "s3:PutObject";
        self.write(API, |w, cx| {
            owned_opt(API, w.buckets.get(&req.bucket), &w.account)?;
            let b = w.buckets.get_mut(&req.bucket).ok_or_else(|| {
                ProviderError::not_found(
                    API,
                    format!("NoSuchBucket: The specified bucket {} does not exist", req.bucket),
                )
            })?;
            if req.key.is_empty() || req.key.len() > 1024 {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::InvalidRequest,
                    "KeyTooLongError: object keys are 1 to 1024 bytes",
                ));
            }
            let sha256 = sha256_hex(&req.body);
            b.objects.insert(
                req.key.clone(),
                ObjectRec { size: req.body.len() as u64, written_at: cx.now, sha256: Some(sha256.clone()) },
            );
            Ok(ObjectHead {
                bucket: req.bucket.clone(),
                key: req.key.clone(),
                size_bytes: req.body.len() as u64,
                sha256: Some(sha256),
            })
        })
    }

    async fn head_object(&self, bucket: &str, key: &str) -> Result<Option<ObjectHead>> {
        // S3 answers a missing bucket with a bare 404 as well: `None`.
        const API: &str = "s3:HeadObject";
        self.read(API, |w, _| {
            let b = owned_opt(API, w.buckets.get(bucket), &w.account)?;
            Ok(b.and_then(|b| b.objects.get(key)).map(|o| ObjectHead {
                bucket: bucket.to_string(),
                key: key.to_string(),
                size_bytes: o.size,
                sha256: o.sha256.clone(),
            }))
        })
    }

    async fn delete_object(&self, bucket: &str, key: &str) -> Result<()> {
        const API: &str = "s3:DeleteObject";
        self.write(API, |w, _| {
            owned_opt(API, w.buckets.get(bucket), &w.account)?;
            let b = w.buckets.get_mut(bucket).ok_or_else(|| {
                ProviderError::not_found(API, format!("NoSuchBucket: The specified bucket {bucket} does not exist"))
            })?;
            b.objects.remove(key);
            Ok(())
        })
    }

    async fn delete_bucket(&self, name: &str) -> Result<()> {
        const API: &str = "s3:DeleteBucket";
        self.write(API, |w, _| match owned_opt(API, w.buckets.get(name), &w.account)? {
            Some(b) if !b.objects.is_empty() => Err(ProviderError::new(
                API,
                ProviderErrorKind::Failed,
                format!(
                    "BucketNotEmpty: The bucket you tried to delete is not empty: bucket {name} still holds objects; \
                     empty it first (InstantStart never deletes data)"
                ),
            )),
            Some(_) => {
                w.buckets.remove(name);
                Ok(())
            }
            None => {
                Err(ProviderError::not_found(API, format!("NoSuchBucket: The specified bucket {name} does not exist")))
            }
        })
    }
}

/// What the simulator's continuation tokens start with; the rest is the last entry of the
/// page (a key, or a common prefix ending with `/`).
const LISTING_TOKEN: &str = "sim-after:";

/// One page of one level of `b` under `prefix`, as ListObjectsV2 with delimiter `/` pages it:
/// entries (keys and common prefixes, each prefix counted once) in key order, at most
/// [`LIST_OBJECTS_LIMIT`], starting after `after` (the last entry of the previous page).
fn list_level(b: &BucketRec, prefix: &str, after: Option<&str>) -> ObjectListing {
    let mut prefixes: Vec<String> = Vec::new();
    let mut objects: Vec<S3Entry> = Vec::new();
    let mut count = 0usize;
    let mut last: Option<String> = None;
    let mut next_token = None;
    let start = after.unwrap_or(prefix).to_string();
    for (key, o) in b.objects.range(start..).take_while(|(k, _)| k.starts_with(prefix)) {
        if let Some(a) = after
            && (key.as_str() <= a || (a.ends_with('/') && key.starts_with(a)))
        {
            continue;
        }
        let rest = &key[prefix.len()..];
        let entry = match rest.find('/') {
            Some(i) => {
                let p = format!("{prefix}{}", &rest[..=i]);
                if prefixes.last() == Some(&p) {
                    continue;
                }
                Err(p)
            }
            None => Ok(S3Entry { key: key.clone(), kind: S3EntryKind::Object, size_bytes: Some(o.size) }),
        };
        if count == LIST_OBJECTS_LIMIT {
            next_token = last.take().map(|l| format!("{LISTING_TOKEN}{l}"));
            break;
        }
        count += 1;
        match entry {
            Err(p) => {
                last = Some(p.clone());
                prefixes.push(p);
            }
            Ok(e) => {
                last = Some(e.key.clone());
                objects.push(e);
            }
        }
    }
    let mut entries: Vec<S3Entry> =
        prefixes.into_iter().map(|key| S3Entry { key, kind: S3EntryKind::Prefix, size_bytes: None }).collect();
    entries.extend(objects);
    ObjectListing { bucket: b.name.clone(), prefix: prefix.to_string(), entries, next_token }
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
    let rec = BucketRec {
        name: req.name.clone(),
        region: req.region.clone(),
        tags: req.tags.clone(),
        objects: Default::default(),
        owner: None,
    };
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

    /// Adds a bucket of another account (`owner`): every call naming it is `AccessDenied`, as
    /// S3 answers a request whose `ExpectedBucketOwner` is not the bucket's owner.
    pub fn seed_foreign_bucket(&self, req: &CreateBucket, owner: &str) -> Result<Bucket, SimError> {
        self.admin(|w, _| {
            let b = create_bucket("s3:CreateBucket", w, req)?;
            if let Some(rec) = w.buckets.get_mut(&req.name) {
                rec.owner = Some(owner.to_string());
            }
            Ok(b)
        })
    }

    /// [`SimCloud::seed_bucket`] unless a bucket of that name exists, which is returned as it
    /// is (the server's `--shared-bucket` on every start).
    pub fn seed_bucket_if_missing(&self, req: &CreateBucket) -> Result<Bucket, SimError> {
        self.admin(|w, _| match w.buckets.get(&req.name) {
            Some(b) => Ok(bucket_view(b)),
            None => Ok(create_bucket("s3:CreateBucket", w, req)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call naming another account's bucket is refused as S3 refuses a request whose
    /// ExpectedBucketOwner is not the owner; its name stays taken.
    #[tokio::test]
    async fn another_accounts_bucket_answers_access_denied_to_every_call() {
        let sim = SimCloud::new(crate::SimConfig::default()).unwrap();
        let req = CreateBucket { region: "us-east-1".into(), name: "is-theirs".into(), tags: Tags::new() };
        sim.seed_foreign_bucket(&req, "999999999999").unwrap();
        let put = PutObject { bucket: "is-theirs".into(), key: "k".into(), body: vec![1], content_type: "x".into() };
        let refusals = [
            sim.describe_bucket("is-theirs").await.map(|_| ()),
            sim.list_objects("is-theirs", "", None).await.map(|_| ()),
            sim.put_object(&put).await.map(|_| ()),
            sim.head_object("is-theirs", "k").await.map(|_| ()),
            sim.delete_object("is-theirs", "k").await.map(|_| ()),
            sim.delete_bucket("is-theirs").await,
        ];
        for r in refusals {
            let e = r.unwrap_err();
            assert_eq!(e.kind, ProviderErrorKind::AccessDenied, "{e}");
            assert!(e.message.contains("expected bucket owner"), "{e}");
        }
        assert_eq!(sim.create_bucket(&req).await.unwrap_err().kind, ProviderErrorKind::AlreadyExists);
    }

    fn bucket(keys: &[(&str, u64)]) -> BucketRec {
        BucketRec {
            name: "b".into(),
            region: "us-east-1".into(),
            tags: Tags::new(),
            objects: keys
                .iter()
                .map(|(k, s)| (k.to_string(), ObjectRec { size: *s, written_at: 0.0, sha256: None }))
                .collect(),
            owner: None,
        }
    }

    #[test]
    fn one_level_prefixes_first_then_objects() {
        let b = bucket(&[
            ("README.md", 5),
            ("a.txt", 1),
            ("checkpoints/j/step-10/model.pt", 9),
            ("models/Qwen/Qwen3-0.6B/config.json", 726),
            ("models/Qwen/Qwen3-0.6B/model.safetensors", 1_503_300_328),
            ("models/x", 3),
        ]);
        let top = list_level(&b, "", None);
        let got: Vec<(&str, S3EntryKind, Option<u64>)> =
            top.entries.iter().map(|e| (e.key.as_str(), e.kind, e.size_bytes)).collect();
        assert_eq!(
            got,
            [
                ("checkpoints/", S3EntryKind::Prefix, None),
                ("models/", S3EntryKind::Prefix, None),
                ("README.md", S3EntryKind::Object, Some(5)),
                ("a.txt", S3EntryKind::Object, Some(1)),
            ]
        );
        assert_eq!(top.next_token, None);
        let models = list_level(&b, "models/", None);
        let keys: Vec<&str> = models.entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["models/Qwen/", "models/x"]);
        let model = list_level(&b, "models/Qwen/Qwen3-0.6B/", None);
        assert_eq!(model.entries[1].size_bytes, Some(1_503_300_328));
        assert!(list_level(&b, "nothing/", None).entries.is_empty());
    }

    #[test]
    fn the_listing_is_paged_and_every_entry_is_reached_once() {
        // Objects and common prefixes interleaved in key order, more than two pages' worth.
        let mut keys: Vec<(String, u64)> = Vec::new();
        for i in 0..LIST_OBJECTS_LIMIT + 3 {
            keys.push((format!("k/{i:05}"), 1));
            if i % 2 == 0 {
                keys.push((format!("k/{i:05}d/a"), 1));
                keys.push((format!("k/{i:05}d/b"), 1));
            }
        }
        let refs: Vec<(&str, u64)> = keys.iter().map(|(k, s)| (k.as_str(), *s)).collect();
        let b = bucket(&refs);
        let first = list_level(&b, "k/", None);
        assert_eq!(first.entries.len(), LIST_OBJECTS_LIMIT);
        let mut seen: Vec<String> = first.entries.iter().map(|e| e.key.clone()).collect();
        let mut token = first.next_token.clone();
        let mut pages = 1;
        while let Some(t) = token {
            let after = t.strip_prefix(LISTING_TOKEN).expect("our token");
            let page = list_level(&b, "k/", Some(after));
            seen.extend(page.entries.iter().map(|e| e.key.clone()));
            token = page.next_token;
            pages += 1;
        }
        let want = LIST_OBJECTS_LIMIT + 3 + (LIST_OBJECTS_LIMIT + 3).div_ceil(2);
        assert_eq!(seen.len(), want, "every object and prefix once");
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), want, "no entry twice");
        assert_eq!(pages, want.div_ceil(LIST_OBJECTS_LIMIT));
    }
}

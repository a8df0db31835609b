//! `S3Api` on S3: the shared data bucket of the data contract.
//!
//! Created with the ownership tags applied atomically (`CreateBucketConfiguration.Tags`, and
//! `PutBucketTagging` again for S3 implementations that ignore create-time tags),
//! `BucketOwnerEnforced` object ownership (no ACLs), all four public-access blocks, and
//! default SSE-S3 encryption with a bucket key. An existing bucket (looked up first, and
//! `BucketAlreadyOwnedByYou` in a race) is adopted only when it carries our tags;
//! `BucketAlreadyExists` (another account's bucket) is `AlreadyExists`.
//!
//! Objects: only small ones InstantStart writes itself (the HyperPod lifecycle script):
//! `PutObject` with an explicit `x-amz-checksum-sha256` and content type, `HeadObject` with
//! `ChecksumMode=ENABLED` (its SHA-256 proves the content of a content-addressed key; a 404 is
//! "absent"), `DeleteObject` for those scripts before a bucket InstantStart created is deleted.
//!
//! Bucket owner condition: every call naming an existing bucket sends the caller's account
//! (STS, read once) as `ExpectedBucketOwner`, so S3 answers `403` instead of acting on a
//! same-named bucket of another account — even one whose policy would let us in
//! (<https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-owner-condition.html>;
//! CreateBucket has no such parameter: its `BucketAlreadyExists` says it).
//!
//! Buckets are global but live in a region: `HeadBucket` answers from the default region with
//! the bucket's region (or a redirect naming it), and follow-up calls go to that region.

use crate::AwsProvider;
use crate::error::{invalid, sdk_error};
use crate::tags;
use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, ChecksumAlgorithm, ChecksumMode, CreateBucketConfiguration, ObjectOwnership,
    PublicAccessBlockConfiguration, ServerSideEncryption, ServerSideEncryptionByDefault,
    ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
};
use instantstart_core::provider::{
    Bucket, CreateBucket, LIST_OBJECTS_LIMIT, ObjectHead, ObjectListing, ProviderError, ProviderErrorKind, PutObject,
    Result, S3Api, S3Entry, S3EntryKind, TAG_CLUSTER, Tags, is_owned, sha256_hex,
};

/// Where a bucket is, if it exists and we may see it.
async fn locate(p: &AwsProvider, name: &str) -> Result<Option<String>> {
    const API: &str = "s3:HeadBucket";
    let c = p.default_s3().await?;
    let owner = p.account().await?;
    match c.s3.head_bucket().bucket(name).expected_bucket_owner(owner).send().await {
        Ok(out) => Ok(Some(out.bucket_region().map(str::to_string).unwrap_or_default())),
        Err(e) => {
            let redirect = e
                .raw_response()
                .filter(|r| (300..400).contains(&r.status().as_u16()))
                .and_then(|r| r.headers().get("x-amz-bucket-region"))
                .map(str::to_string);
            if let Some(region) = redirect {
                return Ok(Some(region));
            }
            let e = sdk_error(API, e);
            match e.kind {
                ProviderErrorKind::NotFound => Ok(None),
                ProviderErrorKind::AccessDenied => Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AccessDenied,
                    format!(
                        "bucket {name} exists but is not this account's, or this account cannot access it (S3 \
                         refused it for the expected bucket owner): {}",
                        e.message
                    ),
                )),
                _ => Err(e),
            }
        }
    }
}

async fn bucket_tags(s3: &aws_sdk_s3::Client, name: &str, owner: &str) -> Result<Tags> {
    const API: &str = "s3:GetBucketTagging";
    match s3.get_bucket_tagging().bucket(name).expected_bucket_owner(owner).send().await {
        Ok(out) => Ok(tags::from_s3(out.tag_set())),
        Err(e) => {
            let e = sdk_error(API, e);
            // A bucket without tags answers NoSuchTagSet.
            if e.kind == ProviderErrorKind::NotFound || e.message.starts_with("NoSuchTagSet") {
                Ok(Tags::new())
            } else {
                Err(e)
            }
        }
    }
}

async fn describe(p: &AwsProvider, name: &str) -> Result<Option<Bucket>> {
    let Some(region) = locate(p, name).await? else { return Ok(None) };
    let region = if region.is_empty() { p.default_region().await.unwrap_or_default() } else { region };
    let c = p.region(&region).await?;
    let owner = p.account().await?;
    Ok(Some(Bucket { name: name.to_string(), tags: bucket_tags(&c.s3, name, &owner).await?, region }))
}

/// Public access blocked, SSE-S3 by default, our tags.
async fn harden(s3: &aws_sdk_s3::Client, req: &CreateBucket, owner: &str) -> Result<()> {
    s3.put_public_access_block()
        .bucket(&req.name)
        .expected_bucket_owner(owner)
        .public_access_block_configuration(
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(true)
                .ignore_public_acls(true)
                .block_public_policy(true)
                .restrict_public_buckets(true)
                .build(),
        )
        .send()
        .await
        .map_err(|e| sdk_error("s3:PutPublicAccessBlock", e))?;
    const ENC: &str = "s3:PutBucketEncryption";
    let by_default = ServerSideEncryptionByDefault::builder()
        .sse_algorithm(ServerSideEncryption::Aes256)
        .build()
        .map_err(|e| invalid(ENC, e.to_string()))?;
    let config = ServerSideEncryptionConfiguration::builder()
        .rules(
            ServerSideEncryptionRule::builder()
                .apply_server_side_encryption_by_default(by_default)
                .bucket_key_enabled(true)
                .build(),
        )
        .build()
        .map_err(|e| invalid(ENC, e.to_string()))?;
    s3.put_bucket_encryption()
        .bucket(&req.name)
        .expected_bucket_owner(owner)
        .server_side_encryption_configuration(config)
        .send()
        .await
        .map_err(|e| sdk_error(ENC, e))?;
    const TAG: &str = "s3:PutBucketTagging";
    s3.put_bucket_tagging()
        .bucket(&req.name)
        .expected_bucket_owner(owner)
        .tagging(tags::s3(TAG, &req.tags)?)
        .send()
        .await
        .map_err(|e| sdk_error(TAG, e))?;
    Ok(())
}

async fn create(p: &AwsProvider, req: &CreateBucket) -> Result<Bucket> {
    const API: &str = "s3:CreateBucket";
    let cluster = req.tags.get(TAG_CLUSTER).cloned().unwrap_or_default();
    // Look first: in us-east-1, CreateBucket on a bucket this account already owns succeeds
    // silently, which would let us harden and re-tag someone else's bucket.
    if let Some(existing) = describe(p, &req.name).await? {
        if !is_owned(&existing.tags, &cluster) {
            return Err(ProviderError::new(
                API,
                ProviderErrorKind::AlreadyExists,
                format!("bucket {} already exists but is not tagged as InstantStart's for cluster {cluster}", req.name),
            ));
        }
        let c = p.region(&existing.region).await?;
        harden(&c.s3, req, &p.account().await?).await?;
        return Ok(Bucket { name: req.name.clone(), region: existing.region, tags: req.tags.clone() });
    }
    let c = p.region(&req.region).await?;
    let mut config = CreateBucketConfiguration::builder().set_tags(Some(tags::s3(API, &req.tags)?.tag_set().to_vec()));
    if req.region != "us-east-1" {
        config = config.location_constraint(BucketLocationConstraint::from(req.region.as_str()));
    }
    let result =
        c.s3.create_bucket()
            .bucket(&req.name)
            .create_bucket_configuration(config.build())
            .object_ownership(ObjectOwnership::BucketOwnerEnforced)
            .send()
            .await
            .map_err(|e| sdk_error(API, e));
    match result {
        Ok(_) => {}
        Err(e) if e.kind == ProviderErrorKind::AlreadyExists && e.message.starts_with("BucketAlreadyOwnedByYou") => {
            let existing = bucket_tags(&c.s3, &req.name, &p.account().await?).await?;
            if !is_owned(&existing, &cluster) {
                return Err(ProviderError::new(
                    API,
                    ProviderErrorKind::AlreadyExists,
                    format!(
                        "bucket {} already exists in this account but is not tagged as InstantStart's for cluster {cluster}",
                        req.name
                    ),
                ));
            }
        }
        Err(e) => return Err(e),
    }
    harden(&c.s3, req, &p.account().await?).await?;
    Ok(Bucket { name: req.name.clone(), region: req.region.clone(), tags: req.tags.clone() })
}

/// One page of ListObjectsV2 with delimiter `/` (`MaxKeys` = [`LIST_OBJECTS_LIMIT`]; S3 counts
/// each common prefix as one), from `token` (S3's continuation token) when given; the next
/// token when S3 says the listing is truncated.
async fn list(p: &AwsProvider, bucket: &str, prefix: &str, token: Option<&str>) -> Result<ObjectListing> {
    const API: &str = "s3:ListObjectsV2";
    let region = locate(p, bucket).await?.ok_or_else(|| {
        ProviderError::not_found(API, format!("NoSuchBucket: The specified bucket {bucket} does not exist"))
    })?;
    let region = if region.is_empty() { p.default_region().await.unwrap_or_default() } else { region };
    let c = p.region(&region).await?;
    let owner = p.account().await?;
    let out =
        c.s3.list_objects_v2()
            .bucket(bucket)
            .expected_bucket_owner(&owner)
            .prefix(prefix)
            .delimiter("/")
            .max_keys(LIST_OBJECTS_LIMIT as i32)
            .set_continuation_token(token.map(str::to_string))
            .send()
            .await
            .map_err(|e| sdk_error(API, e))?;
    let mut entries = Vec::new();
    for cp in out.common_prefixes() {
        if let Some(k) = cp.prefix() {
            entries.push(S3Entry { key: k.to_string(), kind: S3EntryKind::Prefix, size_bytes: None });
        }
    }
    for o in out.contents() {
        if let Some(k) = o.key() {
            let size = o.size().and_then(|s| u64::try_from(s).ok());
            entries.push(S3Entry { key: k.to_string(), kind: S3EntryKind::Object, size_bytes: size });
        }
    }
    entries.sort_by(|a, b| (a.kind, &a.key).cmp(&(b.kind, &b.key)));
    let next_token = match out.is_truncated() {
        Some(true) => out.next_continuation_token().map(str::to_string),
        _ => None,
    };
    Ok(ObjectListing { bucket: bucket.to_string(), prefix: prefix.to_string(), entries, next_token })
}

/// The regional client of an existing bucket (`NotFound` when it does not exist).
async fn bucket_client(p: &AwsProvider, api: &str, bucket: &str) -> Result<std::sync::Arc<crate::Regional>> {
    let region = locate(p, bucket).await?.ok_or_else(|| {
        ProviderError::not_found(api, format!("NoSuchBucket: The specified bucket {bucket} does not exist"))
    })?;
    let region = if region.is_empty() { p.default_region().await.unwrap_or_default() } else { region };
    p.region(&region).await
}

/// PutObject with `x-amz-checksum-sha256` (S3 rejects a body that does not match it) and the
/// content type; the bucket's default encryption applies.
async fn put(p: &AwsProvider, req: &PutObject) -> Result<ObjectHead> {
    const API: &str = "s3:PutObject";
    let c = bucket_client(p, API, &req.bucket).await?;
    let digest = sha256_hex(&req.body);
    let raw: Vec<u8> =
        (0..digest.len()).step_by(2).map(|i| u8::from_str_radix(&digest[i..i + 2], 16).unwrap_or_default()).collect();
    c.s3.put_object()
        .bucket(&req.bucket)
        .expected_bucket_owner(p.account().await?)
        .key(&req.key)
        .content_type(&req.content_type)
        .checksum_algorithm(ChecksumAlgorithm::Sha256)
        .checksum_sha256(aws_smithy_types::base64::encode(&raw))
        .body(ByteStream::from(req.body.clone()))
        .send()
        .await
        .map_err(|e| sdk_error(API, e))?;
    Ok(ObjectHead {
        bucket: req.bucket.clone(),
        key: req.key.clone(),
        size_bytes: req.body.len() as u64,
        sha256: Some(digest),
    })
}

/// HeadObject with `ChecksumMode=ENABLED`; a 404 is `None`.
async fn head(p: &AwsProvider, bucket: &str, key: &str) -> Result<Option<ObjectHead>> {
    const API: &str = "s3:HeadObject";
    let c = match bucket_client(p, API, bucket).await {
        Ok(c) => c,
        Err(e) if e.kind == ProviderErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let owner = p.account().await?;
    let call = c.s3.head_object().bucket(bucket).key(key).expected_bucket_owner(owner);
    match call.checksum_mode(ChecksumMode::Enabled).send().await {
        Ok(out) => {
            let sha256 = out
                .checksum_sha256()
                // A multipart object's checksum is `<base64>-<parts>`, not the body's digest.
                .filter(|c| !c.contains('-'))
                .and_then(|b| aws_smithy_types::base64::decode(b).ok())
                .map(|raw| raw.iter().map(|b| format!("{b:02x}")).collect());
            Ok(Some(ObjectHead {
                bucket: bucket.to_string(),
                key: key.to_string(),
                size_bytes: out.content_length().and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
                sha256,
            }))
        }
        Err(e) => {
            let e = sdk_error(API, e);
            if e.kind == ProviderErrorKind::NotFound { Ok(None) } else { Err(e) }
        }
    }
}

#[async_trait]
impl S3Api for AwsProvider {
    async fn put_object(&self, req: &PutObject) -> Result<ObjectHead> {
        put(self, req).await
    }

    async fn head_object(&self, bucket: &str, key: &str) -> Result<Option<ObjectHead>> {
        head(self, bucket, key).await
    }

    async fn delete_object(&self, bucket: &str, key: &str) -> Result<()> {
        const API: &str = "s3:DeleteObject";
        let c = bucket_client(self, API, bucket).await?;
        let owner = self.account().await?;
        let call = c.s3.delete_object().bucket(bucket).key(key).expected_bucket_owner(owner);
        call.send().await.map(|_| ()).map_err(|e| sdk_error(API, e))
    }

    async fn list_objects(&self, bucket: &str, prefix: &str, token: Option<&str>) -> Result<ObjectListing> {
        list(self, bucket, prefix, token).await
    }

    async fn describe_bucket(&self, name: &str) -> Result<Option<Bucket>> {
        describe(self, name).await
    }

    async fn create_bucket(&self, req: &CreateBucket) -> Result<Bucket> {
        create(self, req).await
    }

    async fn delete_bucket(&self, name: &str) -> Result<()> {
        const API: &str = "s3:DeleteBucket";
        let region = locate(self, name).await?.ok_or_else(|| {
            ProviderError::not_found(API, format!("NoSuchBucket: The specified bucket {name} does not exist"))
        })?;
        let c = self.region(&region).await?;
        // A bucket must be empty to be deleted; its objects are the user's data, so they are
        // never deleted here.
        let owner = self.account().await?;
        c.s3.delete_bucket().bucket(name).expected_bucket_owner(owner).send().await.map(|_| ()).map_err(|e| {
            let mut e = sdk_error(API, e);
            if e.message.starts_with("BucketNotEmpty") {
                e.message = format!(
                    "{}: bucket {name} still holds objects; empty it first (InstantStart never deletes data)",
                    e.message
                );
            }
            e
        })
    }
}

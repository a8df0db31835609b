//! `S3Api`: S3 buckets (instant, one global namespace) with their objects (PutObject records
//! the body's size and SHA-256; HeadObject returns them, `None` for a missing object or bucket as
//! S3's bare 404 does; DeleteObject of a missing key succeeds).
//!
//! Bucket owner condition: the AWS adapter sends the caller's account as `ExpectedBucketOwner`
//! on every call that names an existing bucket, and S3 answers `403 AccessDenied` when the
//! bucket belongs to another account
//! (<https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-owner-condition.html>). The
//! simulator models the same: a bucket seeded for another account
//! ([`SimCloud::seed_foreign_bucket`]) answers every such call with `AccessDenied`, and its name
//! stays taken for CreateBucket (`BucketAlreadyExists`).

use crate::cloud::{SimCloud, SimError};
use crate::world::{BucketRec, ObjectRec, World};
use async_trait::async_trait;
use instantstart_core::names;
use instantstart_core::provider::{
    Bucket, CreateBucket, LIST_OBJECTS_LIMIT, ObjectHead, ObjectListing, ProviderError, ProviderErrorKind, PutObject,
    Result, S3Api, S3Entry, S3EntryKind, sha256_hex,
};

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

fn create_bucket(api: &str, w: &mut World, req: &CreateBucket) -> Result<Bucket> {
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
    use instantstart_core::provider::Tags;

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

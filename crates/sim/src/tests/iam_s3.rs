//! IAM roles and policies (permissions boundaries included) and S3 buckets and objects.

use super::*;

#[tokio::test]
async fn iam_roles_and_s3_buckets_are_instant() {
    let s = sim();
    let r = role(&s, "demo-role", "eks.amazonaws.com").await;
    assert_eq!(r.arn, "arn:aws:iam::123456789012:role/demo-role");
    assert_eq!(s.get_role("demo-role").await.unwrap(), Some(r.clone()));
    let dup = s
        .create_role(&CreateIamRole {
            name: "demo-role".into(),
            trust_policy: json!({"Statement": []}),
            managed_policies: vec![],
            inline_policies: vec![],
            tags: Tags::new(),
        })
        .await;
    assert_eq!(kind(dup), ProviderErrorKind::AlreadyExists);
    s.delete_role("demo-role").await.unwrap();
    assert_eq!(s.get_role("demo-role").await.unwrap(), None);
    assert_eq!(kind(s.delete_role("demo-role").await), ProviderErrorKind::NotFound);

    let bucket = |name: &str, region: &str| CreateBucket { region: region.into(), name: name.into(), tags: tags() };
    let b = s.create_bucket(&bucket("is-demo-data", REGION)).await.unwrap();
    assert_eq!(s.describe_bucket("is-demo-data").await.unwrap(), Some(b));
    // One global namespace: the name is taken in every region.
    assert_eq!(kind(s.create_bucket(&bucket("is-demo-data", "eu-west-1")).await), ProviderErrorKind::AlreadyExists);
    assert_eq!(kind(s.create_bucket(&bucket("Bad_Name", REGION)).await), ProviderErrorKind::InvalidRequest);
    s.delete_bucket("is-demo-data").await.unwrap();
    assert_eq!(s.describe_bucket("is-demo-data").await.unwrap(), None);
    assert_eq!(kind(s.delete_bucket("is-demo-data").await), ProviderErrorKind::NotFound);
}

/// With a boundary demanded (the template's `iam:PermissionsBoundary` condition), IAM refuses a
/// role created or completed without it, and a role created before the boundary existed gets it
/// when it is adopted.
#[tokio::test]
async fn roles_need_the_demanded_permissions_boundary() {
    let s = sim();
    let boundary = "arn:aws:iam::123456789012:policy/stack-role-boundary";
    let req = CreateIamRole {
        name: "demo-eks-cluster-role".into(),
        trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
        managed_policies: vec![instantstart_core::workflow::create_cluster::EKS_CLUSTER_POLICY.into()],
        inline_policies: vec![],
        tags: tags(),
    };
    // A role of the past, created before any boundary.
    s.seed_role(&req).unwrap();
    assert_eq!(s.role_boundary(&req.name), None);
    // Demanded but not attached: CreateRole and the completion are refused, nothing changes.
    s.set_role_boundary(None, Some(boundary)).unwrap();
    let mut other = req.clone();
    other.name = "demo-hyperpod-exec-role".into();
    let e = s.create_role(&other).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::AccessDenied, "{e}");
    assert!(e.message.contains("iam:PermissionsBoundary") && e.message.contains(boundary), "{e}");
    assert!(s.get_role(&other.name).await.unwrap().is_none());
    let e = s.ensure_role_policies(&req).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::AccessDenied, "{e}");
    assert!(s.role_policies(&req.name).unwrap().managed_policies.is_empty());
    // A different boundary is no better.
    s.set_role_boundary(Some("arn:aws:iam::123456789012:policy/other"), Some(boundary)).unwrap();
    assert_eq!(kind(s.create_role(&other).await), ProviderErrorKind::AccessDenied);
    // Attached as demanded: created with it; the old role gets it when completed.
    s.set_role_boundary(Some(boundary), Some(boundary)).unwrap();
    s.create_role(&other).await.unwrap();
    assert_eq!(s.role_boundary(&other.name).as_deref(), Some(boundary));
    s.ensure_role_policies(&req).await.unwrap();
    assert_eq!(s.role_boundary(&req.name).as_deref(), Some(boundary));
    assert_eq!(s.role_policies(&req.name).unwrap().managed_policies, req.managed_policies);
    assert_eq!(s.calls("iam:PutRolePermissionsBoundary"), 1);
}

#[tokio::test]
async fn role_policies_are_held_and_completed_in_place() {
    let s = sim();
    let trust = |service: &str| json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]});
    let doc = |bucket: &str| json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": [format!("arn:aws:s3:::{bucket}/*")]}]});
    let eks_policy = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy".to_string();
    let mut req = CreateIamRole {
        name: "demo-hyperpod-exec-role".into(),
        trust_policy: trust("sagemaker.amazonaws.com"),
        managed_policies: vec![eks_policy.clone()],
        inline_policies: vec![("bucket".into(), doc("a"))],
        tags: tags(),
    };
    // CreateRole puts everything in place at once.
    s.create_role(&req).await.unwrap();
    let held = s.role_policies(&req.name).unwrap();
    assert_eq!(
        (held.trust_policy, held.managed_policies, held.inline_policies.clone()),
        (req.trust_policy.clone(), req.managed_policies.clone(), req.inline_policies.clone())
    );
    s.delete_role(&req.name).await.unwrap();
    assert_eq!(s.role_policies(&req.name), None);

    // What a create killed after CreateRole leaves: a tagged role with no policies (seeding
    // is not API traffic).
    s.reset_stats();
    req.trust_policy = trust("eks.amazonaws.com");
    let seeded = s.seed_role(&req).unwrap();
    assert!(s.stats().is_empty());
    assert_eq!(s.get_role(&req.name).await.unwrap(), Some(seeded));
    let bare = s.role_policies(&req.name).unwrap();
    assert!(bare.managed_policies.is_empty() && bare.inline_policies.is_empty());
    // Completed in place: trust policy replaced, policies attached and put, no CreateRole.
    req.trust_policy = trust("sagemaker.amazonaws.com");
    s.ensure_role_policies(&req).await.unwrap();
    let held = s.role_policies(&req.name).unwrap();
    assert_eq!(held.trust_policy, trust("sagemaker.amazonaws.com"));
    assert_eq!(held.managed_policies, std::slice::from_ref(&eks_policy));
    assert_eq!(held.inline_policies, [("bucket".to_string(), doc("a"))]);
    let calls = |api: &str| s.calls(api);
    assert_eq!(
        [
            calls("iam:CreateRole"),
            calls("iam:UpdateAssumeRolePolicy"),
            calls("iam:AttachRolePolicy"),
            calls("iam:PutRolePolicy")
        ],
        [0, 1, 1, 1]
    );
    // Again: idempotent (no duplicate attachment); an inline policy's document is replaced;
    // policies the role has beyond the request stay.
    req.managed_policies.clear();
    req.inline_policies = vec![("bucket".into(), doc("b"))];
    s.ensure_role_policies(&req).await.unwrap();
    let held = s.role_policies(&req.name).unwrap();
    assert_eq!(held.managed_policies, [eks_policy]);
    assert_eq!(held.inline_policies, [("bucket".to_string(), doc("b"))]);
    assert_eq!(calls("iam:UpdateAssumeRolePolicy"), 2);

    // Like IAM: no such role, or a trust policy without a statement, is refused.
    let mut missing = req.clone();
    missing.name = "demo-no-such-role".into();
    assert_eq!(kind(s.ensure_role_policies(&missing).await), ProviderErrorKind::NotFound);
    let mut malformed = req.clone();
    malformed.trust_policy = json!({});
    assert_eq!(kind(s.ensure_role_policies(&malformed).await), ProviderErrorKind::InvalidRequest);
    assert_eq!(s.role_policies(&req.name).unwrap().trust_policy, trust("sagemaker.amazonaws.com"));
    // A fault on the primary name rejects the call before it acts.
    s.set_faults(SimFaults::none().with("iam:UpdateAssumeRolePolicy", FaultMode::fail("AccessDenied")));
    req.inline_policies = vec![("bucket".into(), doc("c"))];
    assert!(s.ensure_role_policies(&req).await.is_err());
    assert_eq!(s.role_policies(&req.name).unwrap().inline_policies, [("bucket".to_string(), doc("b"))]);
}

/// PutObject records size and SHA-256; HeadObject returns them (None for a missing key or
/// bucket); DeleteObject of a missing key succeeds.
#[tokio::test]
async fn objects_put_head_delete() {
    let s = sim();
    s.seed_bucket(&CreateBucket { region: REGION.into(), name: "is-b".into(), tags: Tags::new() }).unwrap();
    let put = PutObject {
        bucket: "is-b".into(),
        key: "lifecycle/x/on_create.sh".into(),
        body: b"echo".to_vec(),
        content_type: "text/x-shellscript".into(),
    };
    let h = s.put_object(&put).await.unwrap();
    assert_eq!(h.sha256.as_deref(), Some(sha256_hex(b"echo").as_str()));
    assert_eq!(s.head_object("is-b", &put.key).await.unwrap(), Some(h));
    assert_eq!(s.head_object("is-b", "nope").await.unwrap(), None);
    assert_eq!(s.head_object("no-such-bucket", "k").await.unwrap(), None);
    let missing = PutObject { bucket: "no-such-bucket".into(), ..put.clone() };
    assert_eq!(kind(s.put_object(&missing).await), ProviderErrorKind::NotFound);
    s.delete_object("is-b", &put.key).await.unwrap();
    s.delete_object("is-b", &put.key).await.unwrap();
    assert_eq!(s.head_object("is-b", &put.key).await.unwrap(), None);
    // The refused PutObject (no such bucket) reached S3 too.
    assert_eq!((s.calls("s3:PutObject"), s.calls("s3:HeadObject"), s.calls("s3:DeleteObject")), (2, 4, 2));
}

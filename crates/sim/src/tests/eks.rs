//! EKS clusters and add-ons: progression, idempotency tokens, validation as EKS does, public access blocks, add-on prerequisites.

use super::*;

#[tokio::test]
async fn eks_progression_and_client_request_token() {
    let s = sim();
    let n = network(&s, "demo-vpc").await;
    let r = role(&s, "demo-eks-cluster-role", "eks.amazonaws.com").await;
    let c = s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "tok-1")).await.unwrap();
    assert_eq!(c.state, ResourceState::Creating);
    assert_eq!((c.endpoint.clone(), c.oidc_issuer.clone()), (None, None));
    assert!(c.security_group_id.is_some());
    assert_eq!(c.arn, "arn:aws:eks:us-east-1:123456789012:cluster/demo");
    // Same token: the existing cluster, like EKS. Another token: a conflict on the name.
    let again = s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "tok-1")).await.unwrap();
    assert_eq!(again.arn, c.arn);
    let other = s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "tok-2")).await;
    assert_eq!(kind(other), ProviderErrorKind::AlreadyExists);
    assert_eq!(s.calls("eks:CreateCluster"), 3);
    adv(&s, timings::EKS_CREATE - 1.0);
    assert_eq!(s.describe_eks_cluster(REGION, "demo").await.unwrap().unwrap().state, ResourceState::Creating);
    assert_eq!(
        kind(s.delete_eks_cluster(REGION, "demo").await),
        ProviderErrorKind::Conflict,
        "cannot delete while creating"
    );
    adv(&s, 1.0);
    let c = s.describe_eks_cluster(REGION, "demo").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Active);
    assert!(
        c.endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("https://") && e.ends_with(".gr7.us-east-1.eks.amazonaws.com"))
    );
    assert!(c.oidc_issuer.as_deref().is_some_and(|e| e.starts_with("https://oidc.eks.us-east-1.amazonaws.com/id/")));
    assert_eq!(s.list_eks_clusters(REGION).await.unwrap(), ["demo"]);
    assert!(s.list_eks_clusters("us-west-2").await.unwrap().is_empty());
    assert_eq!(s.describe_eks_cluster(REGION, "absent").await.unwrap(), None);
}

#[tokio::test]
async fn eks_create_validates_like_eks() {
    let s = sim();
    let n = network(&s, "demo-vpc").await;
    let eks_role = role(&s, "eks-role", "eks.amazonaws.com").await;
    let sm_role = role(&s, "sm-role", "sagemaker.amazonaws.com").await;
    let private = private_subnets(&n);
    let same_az: Vec<String> =
        n.subnets.iter().filter(|x| x.availability_zone == "us-east-1a").map(|x| x.id.clone()).collect();
    let cases: Vec<(&str, CreateEksCluster)> = vec![
        ("one subnet", eks_req("a", &eks_role.arn, private[..1].to_vec(), "t")),
        ("one AZ", eks_req("b", &eks_role.arn, same_az, "t")),
        ("unknown subnet", eks_req("c", &eks_role.arn, vec!["subnet-0x".into(), private[0].clone()], "t")),
        ("missing role", eks_req("d", "arn:aws:iam::123456789012:role/nope", private.clone(), "t")),
        ("role not trusting EKS", eks_req("e", &sm_role.arn, private.clone(), "t")),
        (
            "bad version",
            CreateEksCluster { version: "1.20".into(), ..eks_req("f", &eks_role.arn, private.clone(), "t") },
        ),
        ("bad name", eks_req("-x", &eks_role.arn, private.clone(), "t")),
        (
            "private public-access block (EKS-A1)",
            CreateEksCluster {
                public_access_cidrs: vec!["10.0.0.0/16".into()],
                ..eks_req("g", &eks_role.arn, private.clone(), "t")
            },
        ),
        (
            "41 public-access blocks (EKS-A1)",
            CreateEksCluster {
                public_access_cidrs: (0..41).map(|i| format!("52.{i}.0.0/16")).collect(),
                ..eks_req("h", &eks_role.arn, private.clone(), "t")
            },
        ),
    ];
    for (what, req) in cases {
        assert_eq!(kind(s.create_eks_cluster(&req).await), ProviderErrorKind::InvalidRequest, "{what}");
    }
    assert!(s.list_eks_clusters(REGION).await.unwrap().is_empty());
}

/// EKS-A1: the public endpoint admits the blocks given at create, every address when none.
#[tokio::test]
async fn eks_reports_the_public_access_blocks_it_was_created_with() {
    let s = sim();
    let n = network(&s, "demo-vpc").await;
    let eks_role = role(&s, "eks-role", "eks.amazonaws.com").await;
    let private = private_subnets(&n);
    let narrowed = CreateEksCluster {
        public_access_cidrs: vec!["198.51.100.7/32".into(), "203.0.113.0/24".into()],
        ..eks_req("narrow", &eks_role.arn, private.clone(), "t1")
    };
    assert_eq!(s.create_eks_cluster(&narrowed).await.unwrap().public_access_cidrs, narrowed.public_access_cidrs);
    s.create_eks_cluster(&eks_req("open", &eks_role.arn, private, "t2")).await.unwrap();
    let open = s.describe_eks_cluster(REGION, "open").await.unwrap().unwrap();
    assert_eq!(open.public_access_cidrs, ["0.0.0.0/0"]);
}

#[tokio::test]
async fn addons_need_an_active_cluster() {
    let s = sim();
    let n = network(&s, "demo-vpc").await;
    let r = role(&s, "demo-eks-cluster-role", "eks.amazonaws.com").await;
    s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "tok")).await.unwrap();
    let req = |name: &str, token: &str| CreateEksAddon {
        region: REGION.into(),
        cluster: "demo".into(),
        name: name.into(),
        version: None,
        client_request_token: token.into(),
        tags: tags(),
        configuration_values: None,
    };
    assert_eq!(kind(s.create_addon(&req("cert-manager", "t1")).await), ProviderErrorKind::InvalidRequest);
    adv(&s, timings::EKS_CREATE);
    let a = s.create_addon(&req("cert-manager", "t1")).await.unwrap();
    assert_eq!(a.state, ResourceState::Creating);
    assert!(a.version.ends_with("-eksbuild.1"));
    assert_eq!(s.create_addon(&req("cert-manager", "t1")).await.unwrap().name, "cert-manager");
    assert_eq!(kind(s.create_addon(&req("cert-manager", "t2")).await), ProviderErrorKind::AlreadyExists);
    adv(&s, timings::ADDON_CREATE);
    assert_eq!(s.describe_addon(REGION, "demo", "cert-manager").await.unwrap().unwrap().state, ResourceState::Active);
    assert_eq!(s.describe_addon(REGION, "demo", "coredns").await.unwrap(), None);
    assert_eq!(s.describe_addon(REGION, "nope", "coredns").await.unwrap(), None);
    let missing = CreateEksAddon { cluster: "nope".into(), ..req("coredns", "t") };
    assert_eq!(kind(s.create_addon(&missing).await), ProviderErrorKind::NotFound);
    s.delete_addon(REGION, "demo", "cert-manager").await.unwrap();
    assert_eq!(s.describe_addon(REGION, "demo", "cert-manager").await.unwrap().unwrap().state, ResourceState::Deleting);
    adv(&s, timings::ADDON_DELETE);
    assert_eq!(s.describe_addon(REGION, "demo", "cert-manager").await.unwrap(), None);
    assert_eq!(kind(s.delete_addon(REGION, "demo", "cert-manager").await), ProviderErrorKind::NotFound);
}

/// The inference add-on refuses what EKS and its chart refuse: no values or values outside the
/// schema at the API (InvalidParameterException), a role name without the required prefix at
/// install time (CREATE_FAILED with the chart's error as the health issue).
#[tokio::test]
async fn the_inference_addon_needs_its_configuration() {
    const ADDON: &str = "amazon-sagemaker-hyperpod-inference";
    let s = sim();
    let n = network(&s, "demo-vpc").await;
    let r = role(&s, "demo-eks-cluster-role", "eks.amazonaws.com").await;
    s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "tok")).await.unwrap();
    adv(&s, timings::EKS_CREATE);
    let conf = s.describe_addon_configuration(REGION, "demo", ADDON, None).await.unwrap();
    assert_eq!(conf.version, "v1.0.0-eksbuild.1");
    assert_eq!(conf.schema["required"], serde_json::json!(["executionRoleArn", "tlsCertificateS3Bucket"]));
    assert_eq!(s.calls("eks:DescribeAddonConfiguration"), 1);
    let req = |token: &str, values: Option<serde_json::Value>| CreateEksAddon {
        region: REGION.into(),
        cluster: "demo".into(),
        name: ADDON.into(),
        version: None,
        client_request_token: token.into(),
        tags: tags(),
        configuration_values: values,
    };
    let role_arn = |name: &str| format!("arn:aws:iam::123456789012:role/{name}");
    let values = |role: &str| {
        serde_json::json!({ "executionRoleArn": role_arn(role), "tlsCertificateS3Bucket": "is-demo-bucket",
            "hyperpodClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc",
            "keda": { "enabled": false }, "alb": { "enabled": false } })
    };
    let e = s.create_addon(&req("t0", None)).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
    assert!(
        e.message.contains("InvalidParameterException") && e.message.contains("/executionRoleArn is required"),
        "{e}"
    );
    let mut bad = values("SageMakerHyperPodInference-demo");
    bad["keda"]["enable"] = serde_json::json!(true);
    let e = s.create_addon(&req("t1", Some(bad))).await.unwrap_err();
    assert!(e.message.contains("/keda/enable is not a property"), "{e}");
    assert_eq!(s.describe_addon(REGION, "demo", ADDON).await.unwrap(), None, "refused at the API: nothing created");

    let a = s.create_addon(&req("t2", Some(values("demo-inference-role")))).await.unwrap();
    assert_eq!(a.state, ResourceState::Creating);
    adv(&s, timings::ADDON_CREATE);
    let ResourceState::Failed { reason } = s.describe_addon(REGION, "demo", ADDON).await.unwrap().unwrap().state else {
        panic!("a role without the prefix fails the install")
    };
    assert!(reason.contains("prefix 'SageMakerHyperPodInference'"), "{reason}");
    s.delete_addon(REGION, "demo", ADDON).await.unwrap();
    adv(&s, timings::ADDON_DELETE);

    let mut keda_on = values("SageMakerHyperPodInference-demo");
    keda_on["keda"] = serde_json::json!({ "enabled": true });
    s.create_addon(&req("t3", Some(keda_on))).await.unwrap();
    adv(&s, timings::ADDON_CREATE);
    let state = s.describe_addon(REGION, "demo", ADDON).await.unwrap().unwrap().state;
    assert!(matches!(&state, ResourceState::Failed { reason } if reason.contains("KEDA operator")), "{state:?}");
    s.delete_addon(REGION, "demo", ADDON).await.unwrap();
    adv(&s, timings::ADDON_DELETE);

    let good = values("SageMakerHyperPodInference-demo");
    s.create_addon(&req("t4", Some(good.clone()))).await.unwrap();
    adv(&s, timings::ADDON_CREATE);
    assert_eq!(s.describe_addon(REGION, "demo", ADDON).await.unwrap().unwrap().state, ResourceState::Active);
    assert_eq!(s.addon_configuration_values(REGION, "demo", ADDON), Some(good));
}

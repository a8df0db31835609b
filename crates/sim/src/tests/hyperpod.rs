//! HyperPod clusters: progressive nodes, EKS prerequisites, validation as SageMaker does, capacity, the NAT gateway, the authentication mode.

use super::*;

#[tokio::test]
async fn hyperpod_nodes_appear_progressively_then_cluster_is_in_service() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let sb = compute_subnet(&s, &b, "us-east-1b", "10.0.32.0/20").await;
    let req = hp_req(
        &b,
        "demo-hp",
        vec![
            (group("workers", "ml.g5.2xlarge", 4, "us-east-1a"), sa.id.clone()),
            (group("ctl", "ml.m5.xlarge", 1, "us-east-1b"), sb.id.clone()),
        ],
    );
    let c = s.create_hyperpod_cluster(&req).await.unwrap();
    assert_eq!(c.state, ResourceState::Creating);
    assert!(c.arn.starts_with("arn:aws:sagemaker:us-east-1:123456789012:cluster/"));
    assert_eq!(kind(s.create_hyperpod_cluster(&req).await), ProviderErrorKind::AlreadyExists);
    let mut last_running = 0;
    let mut saw_pending = false;
    let mut t = 0.0;
    while t < timings::HYPERPOD_CREATE {
        let nodes = s.list_cluster_nodes(REGION, "demo-hp").await.unwrap();
        let c = s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
        let running: u32 = c.instance_groups.iter().map(|g| g.current_count).sum();
        assert!(running >= last_running, "current_count never decreases");
        assert!(c.instance_groups.iter().all(|g| g.current_count <= g.target_count));
        assert_eq!(running as usize, nodes.iter().filter(|n| n.status == "Running").count());
        saw_pending |= nodes.iter().any(|n| n.status == "Pending");
        if t < timings::HYPERPOD_FIRST_NODE {
            assert!(nodes.is_empty(), "no instance before {}s", timings::HYPERPOD_FIRST_NODE);
        }
        assert_eq!(c.state, ResourceState::Creating, "t={t}");
        last_running = running;
        adv(&s, 30.0);
        t += 30.0;
    }
    assert!(saw_pending);
    let c = s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Active);
    let counts: Vec<(String, u32, u32, String)> =
        c.instance_groups.iter().map(|g| (g.name.clone(), g.current_count, g.target_count, g.status.clone())).collect();
    assert_eq!(counts, [("workers".into(), 4, 4, "InService".into()), ("ctl".into(), 1, 1, "InService".into())]);
    let nodes = s.list_cluster_nodes(REGION, "demo-hp").await.unwrap();
    assert_eq!(nodes.len(), 5);
    for n in &nodes {
        assert!(n.instance_id.starts_with("i-0") && n.instance_id.len() == 19, "{}", n.instance_id);
        assert_eq!(n.status, "Running");
    }
    assert_eq!(nodes.iter().filter(|n| n.availability_zone == "us-east-1a").count(), 4);
    // Stable ids across reads.
    assert_eq!(s.list_cluster_nodes(REGION, "demo-hp").await.unwrap(), nodes);
    assert_eq!(s.list_hyperpod_clusters(REGION).await.unwrap(), ["demo-hp"]);
}

/// SageMaker HyperPod's EKS prerequisites (`sagemaker-hyperpod-eks-prerequisites`): a
/// supported Kubernetes version, and the Amazon VPC CNI at 1.18.3 or later. The training
/// operator add-on exists only for the versions it supports.
#[tokio::test]
async fn hyperpod_refuses_an_old_vpc_cni_and_unsupported_kubernetes_versions() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let groups = || vec![(group("w", "ml.g5.2xlarge", 1, "us-east-1a"), sa.id.clone())];
    let addon = |name: &str, version: Option<&str>, cluster: &str| CreateEksAddon {
        region: REGION.into(),
        cluster: cluster.into(),
        name: name.into(),
        version: version.map(str::to_string),
        client_request_token: format!("tok-{name}"),
        tags: tags(),
        configuration_values: None,
    };
    // A version the catalog does not offer is refused; an old one it does is installed.
    let err = s.create_addon(&addon("vpc-cni", Some("v9.9.9-eksbuild.1"), "demo")).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest, "{err}");
    s.create_addon(&addon("vpc-cni", Some("v1.18.2-eksbuild.1"), "demo")).await.unwrap();
    adv(&s, timings::ADDON_CREATE);
    let err = s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", groups())).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest, "{err}");
    assert!(err.message.contains("ValidationException") && err.message.contains("1.18.3"), "{err}");
    // With a current CNI it is accepted.
    s.delete_addon(REGION, "demo", "vpc-cni").await.unwrap();
    adv(&s, timings::ADDON_DELETE);
    s.create_addon(&CreateEksAddon { client_request_token: "tok-2".into(), ..addon("vpc-cni", None, "demo") })
        .await
        .unwrap();
    adv(&s, timings::ADDON_CREATE);
    let a = s.describe_addon(REGION, "demo", "vpc-cni").await.unwrap().unwrap();
    assert!(addon_version_at_least(&a.version, "1.18.3"), "{a:?}");
    s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", groups())).await.unwrap();

    // Kubernetes 1.35: EKS creates it, HyperPod refuses it, and so does the training operator.
    let r = role(&s, "new-eks-cluster-role", "eks.amazonaws.com").await;
    let mut req = eks_req("new", &r.arn, private_subnets(&b.network), "tok-new");
    req.version = "1.35".into();
    s.create_eks_cluster(&req).await.unwrap();
    adv(&s, timings::EKS_CREATE);
    let new = s.describe_eks_cluster(REGION, "new").await.unwrap().unwrap();
    let b135 = Base { network: b.network.clone(), eks: new, exec_role: b.exec_role.clone() };
    let sb = compute_subnet(&s, &b, "us-east-1b", "10.0.32.0/20").await;
    let err = s
        .create_hyperpod_cluster(&hp_req(&b135, "new-hp", vec![(group("w", "ml.g5.2xlarge", 1, "us-east-1b"), sb.id)]))
        .await
        .unwrap_err();
    assert!(err.message.contains("ValidationException") && err.message.contains("1.32, 1.33, 1.34"), "{err}");
    let err = s.create_addon(&addon("amazon-sagemaker-hyperpod-training-operator", None, "new")).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest, "{err}");
    s.create_addon(&addon("amazon-sagemaker-hyperpod-training-operator", None, "demo")).await.unwrap();
    // Kubernetes 1.31 is past EKS's extended support: no new cluster.
    let mut old = eks_req("old", &r.arn, private_subnets(&b.network), "tok-old");
    old.version = "1.31".into();
    assert_eq!(kind(s.create_eks_cluster(&old).await), ProviderErrorKind::InvalidRequest);
}

#[tokio::test]
async fn hyperpod_create_validates_like_sagemaker() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let sb = compute_subnet(&s, &b, "us-east-1b", "10.0.32.0/20").await;
    let plan = s.add_training_plan(REGION, "p5-plan", "ml.p5.48xlarge", 2, "us-east-1b").unwrap();
    let on_plan = |count: u32| InstanceGroupSpec {
        capacity: CapacitySpec::TrainingPlan { arn: plan.arn.clone() },
        ..group("gpu", "ml.p5.48xlarge", count, "us-east-1b")
    };
    let efa_only_g5 =
        InstanceGroupSpec { interface_mode: InterfaceMode::EfaOnly, ..group("g", "ml.g5.2xlarge", 1, "us-east-1a") };
    let cases: Vec<(&str, Groups, ProviderErrorKind)> = vec![
        (
            "p5 quota is 0",
            vec![(group("g", "ml.p5.48xlarge", 1, "us-east-1b"), sb.id.clone())],
            ProviderErrorKind::QuotaExceeded,
        ),
        (
            "g5 quota is 10",
            vec![(group("g", "ml.g5.2xlarge", 11, "us-east-1a"), sa.id.clone())],
            ProviderErrorKind::QuotaExceeded,
        ),
        (
            "unknown type",
            vec![(group("g", "ml.x9.huge", 1, "us-east-1a"), sa.id.clone())],
            ProviderErrorKind::InvalidRequest,
        ),
        ("EFA-only on g5", vec![(efa_only_g5, sa.id.clone())], ProviderErrorKind::InvalidRequest),
        (
            "unknown subnet",
            vec![(group("g", "ml.g5.2xlarge", 1, "us-east-1a"), "subnet-0x".into())],
            ProviderErrorKind::InvalidRequest,
        ),
        ("plan in another AZ", vec![(on_plan(1), sa.id.clone())], ProviderErrorKind::InvalidRequest),
        ("more than reserved", vec![(on_plan(3), sb.id.clone())], ProviderErrorKind::InvalidRequest),
        (
            "duplicate group",
            vec![
                (group("g", "ml.m5.xlarge", 1, "us-east-1a"), sa.id.clone()),
                (group("g", "ml.m5.xlarge", 1, "us-east-1a"), sa.id.clone()),
            ],
            ProviderErrorKind::InvalidRequest,
        ),
        ("no groups", vec![], ProviderErrorKind::InvalidRequest),
    ];
    for (what, groups, expected) in cases {
        assert_eq!(kind(s.create_hyperpod_cluster(&hp_req(&b, "hp", groups)).await), expected, "{what}");
    }
    assert!(s.list_hyperpod_clusters(REGION).await.unwrap().is_empty());
    // A training plan reservation does not use the on-demand quota.
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(on_plan(2), sb.id.clone())])).await.unwrap();
    assert_eq!(s.describe_training_plan(REGION, &plan.arn).await.unwrap(), Some(plan.clone()));
    assert_eq!(s.describe_training_plan("us-west-2", &plan.arn).await.unwrap(), None);
    // A quota increase lets on-demand P5 in.
    s.set_quota(REGION, "ml.p5.48xlarge", 1).unwrap();
    s.create_hyperpod_cluster(&hp_req(&b, "hp2", vec![(group("g", "ml.p5.48xlarge", 1, "us-east-1b"), sb.id.clone())]))
        .await
        .unwrap();
    // An EKS cluster that is not Active cannot orchestrate.
    let r = s.get_role("demo-eks-cluster-role").await.unwrap().unwrap();
    let n2 = network(&s, "other-vpc").await;
    let young = s.create_eks_cluster(&eks_req("young", &r.arn, private_subnets(&n2), "t")).await.unwrap();
    let req = CreateHyperPodCluster {
        eks_cluster_arn: young.arn,
        ..hp_req(&b, "hp3", vec![(group("g", "ml.m5.xlarge", 1, "us-east-1a"), sa.id.clone())])
    };
    assert_eq!(kind(s.create_hyperpod_cluster(&req).await), ProviderErrorKind::InvalidRequest);
}

#[tokio::test]
async fn missing_capacity_fails_the_cluster() {
    let s = sim();
    let b = base(&s).await;
    let sc = compute_subnet(&s, &b, "us-east-1c", "10.0.16.0/20").await;
    // P4d is not offered in us-east-1c.
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(group("g", "ml.p4d.24xlarge", 1, "us-east-1c"), sc.id.clone())]))
        .await
        .unwrap();
    adv(&s, timings::HYPERPOD_CAPACITY_FAILURE);
    match s.describe_hyperpod_cluster(REGION, "hp").await.unwrap().unwrap().state {
        ResourceState::Failed { reason } => {
            assert!(reason.starts_with("InsufficientInstanceCapacity"), "{reason}");
            assert!(reason.contains("us-east-1c"));
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert!(s.list_cluster_nodes(REGION, "hp").await.unwrap().is_empty());
    // A failed cluster can be deleted.
    s.delete_hyperpod_cluster(REGION, "hp").await.unwrap();
    adv(&s, timings::HYPERPOD_DELETE);
    assert_eq!(s.describe_hyperpod_cluster(REGION, "hp").await.unwrap(), None);
}

/// N1 (docs/aws-preconditions.md): HyperPod nodes in private subnets bootstrap through the
/// VPC's NAT gateway. A cluster created while it is pending, or after it failed, fails when its
/// first instances boot; once the gateway is available the same request succeeds.
#[tokio::test]
async fn hyperpod_nodes_need_the_nat_gateway_available() {
    async fn pending_base(s: &SimCloud) -> Base {
        let network = network(s, "demo-vpc").await;
        let eks = s.seed_eks_cluster(REGION, "demo", "1.33", private_subnets(&network), tags()).unwrap();
        let exec_role = exec_role(s, "demo-hyperpod-exec-role").await;
        lifecycle_bucket(s).await;
        Base { network, eks, exec_role }
    }
    fn private_in(b: &Base, az: &str) -> String {
        b.network.subnets.iter().find(|x| !x.public && x.availability_zone == az).expect("private subnet").id.clone()
    }
    let failure = |s: &SimCloud, name: &str| {
        let s = s.clone();
        let name = name.to_string();
        async move {
            match s.describe_hyperpod_cluster(REGION, &name).await.unwrap().unwrap().state {
                ResourceState::Failed { reason } => reason,
                other => panic!("{name}: expected Failed, got {other:?}"),
            }
        }
    };
    let boot = timings::HYPERPOD_FIRST_NODE + timings::HYPERPOD_NODE_BOOT;

    // Pending: the cluster is accepted, its nodes never join.
    let s = sim();
    let b = pending_base(&s).await;
    let subnet = private_in(&b, "us-east-1a");
    let groups = || vec![(group("g", "ml.g5.2xlarge", 1, "us-east-1a"), subnet.clone())];
    s.create_hyperpod_cluster(&hp_req(&b, "early", groups())).await.unwrap();
    adv(&s, boot);
    let reason = failure(&s, "early").await;
    assert!(reason.contains("is still pending") && reason.contains(&subnet), "{reason}");
    assert!(reason.contains("NAT gateway"), "{reason}");
    // Available (the network went Active long ago): the same request succeeds.
    assert_eq!(s.describe_network(REGION, &b.network.vpc.id).await.unwrap().state, ResourceState::Active);
    s.create_hyperpod_cluster(&hp_req(&b, "later", groups())).await.unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    assert_eq!(s.describe_hyperpod_cluster(REGION, "later").await.unwrap().unwrap().state, ResourceState::Active);

    // Failed: the gateway's failure is the nodes' failure.
    let s = sim();
    s.set_faults(
        SimFaults::none().with("ec2:CreateVpc", FaultMode::resource_fails("InsufficientFreeAddressesInSubnet")),
    );
    let b = pending_base(&s).await;
    s.set_faults(SimFaults::none());
    adv(&s, timings::NETWORK_CREATE);
    let subnet = private_in(&b, "us-east-1a");
    s.create_hyperpod_cluster(&hp_req(&b, "failed-nat", vec![(group("g", "ml.g5.2xlarge", 1, "us-east-1a"), subnet)]))
        .await
        .unwrap();
    adv(&s, boot);
    let reason = failure(&s, "failed-nat").await;
    assert!(reason.contains("InsufficientFreeAddressesInSubnet"), "{reason}");
}

/// HyperPod orchestrates only EKS clusters in the `API` or `API_AND_CONFIG_MAP` authentication
/// mode (docs/aws-preconditions.md P9): CreateCluster on a `CONFIG_MAP` cluster is refused.
#[tokio::test]
async fn hyperpod_refuses_an_eks_cluster_in_config_map_mode() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let groups = || vec![(group("w", "ml.g5.2xlarge", 1, "us-east-1a"), sa.id.clone())];
    s.set_eks_authentication_mode(REGION, "demo", "CONFIG_MAP").unwrap();
    let err = s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", groups())).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest, "{err}");
    assert!(err.message.contains("ValidationException") && err.message.contains("CONFIG_MAP"), "{err}");
    assert!(s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().is_none(), "nothing created");
    s.set_eks_authentication_mode(REGION, "demo", "API_AND_CONFIG_MAP").unwrap();
    s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", groups())).await.unwrap();
}

//! Fault injection, throttling, API call counters, and the world surviving a restart.

use super::*;

async fn try_role(s: &SimCloud, name: &str) -> Result<IamRole, ProviderError> {
    s.create_role(&CreateIamRole {
        name: name.into(),
        trust_policy: json!({"Statement": []}),
        managed_policies: vec![],
        inline_policies: vec![],
        tags: Tags::new(),
    })
    .await
}

#[tokio::test]
async fn fault_modes() {
    use ProviderErrorKind::*;
    // (mode, outcome of the 1st call, of the 2nd, role exists after the 1st, calls that reached
    // IAM, injected faults)
    let cases: Vec<(FaultMode, Outcome, Outcome, bool, u64, u64)> = vec![
        (FaultMode::fail("AccessDenied: nope"), Some(Failed), Some(Failed), false, 0, 2),
        (
            FaultMode::Fail { kind: AccessDenied, message: "denied".into() },
            Some(AccessDenied),
            Some(AccessDenied),
            false,
            0,
            2,
        ),
        (FaultMode::fail_once(Throttled, "slow down"), Some(Throttled), None, false, 1, 1),
        (FaultMode::LostResponse, Some(Transient), Some(AlreadyExists), true, 2, 1),
        (FaultMode::resource_fails("ignored for IAM"), None, Some(AlreadyExists), true, 2, 2),
    ];
    for (mode, first, second, exists, reached, injected) in cases {
        let s = sim();
        s.set_faults(SimFaults::none().with("iam:CreateRole", mode.clone()));
        let r1 = try_role(&s, "r").await;
        assert_eq!(r1.as_ref().err().map(|e| e.kind), first, "{mode:?} first");
        if let Err(e) = &r1 {
            assert_eq!(e.api, "iam:CreateRole");
        }
        assert_eq!(s.get_role("r").await.unwrap().is_some(), exists, "{mode:?} exists");
        let r2 = try_role(&s, "r").await;
        assert_eq!(r2.as_ref().err().map(|e| e.kind), second, "{mode:?} second");
        assert_eq!(s.calls("iam:CreateRole"), reached, "{mode:?} calls");
        assert_eq!(s.injected_faults().get("iam:CreateRole").copied().unwrap_or(0), injected, "{mode:?} faults");
        let one_shot = matches!(mode, FaultMode::FailOnce { .. } | FaultMode::LostResponse);
        assert_eq!(s.faults().fail_apis.is_empty(), one_shot, "{mode:?} removes itself");
        assert!(s.get_role("other").await.is_ok(), "other APIs are unaffected");
    }
}

#[tokio::test]
async fn resource_fails_fault_ends_resources_in_failed() {
    let s = sim();
    s.set_faults(
        SimFaults::none()
            .with("eks:CreateAddon", FaultMode::resource_fails("image pull failed"))
            .with("sagemaker:CreateCluster", FaultMode::resource_fails("lifecycle script exited with 1")),
    );
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    s.create_addon(&CreateEksAddon {
        region: REGION.into(),
        cluster: "demo".into(),
        name: "cert-manager".into(),
        version: Some("v1.0.0".into()),
        client_request_token: "t".into(),
        tags: tags(),
        configuration_values: None,
    })
    .await
    .unwrap();
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(group("g", "ml.g5.2xlarge", 1, "us-east-1a"), sa.id.clone())]))
        .await
        .unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    let addon = s.describe_addon(REGION, "demo", "cert-manager").await.unwrap().unwrap();
    assert_eq!(addon.state, ResourceState::Failed { reason: "CREATE_FAILED: image pull failed".into() });
    assert_eq!(addon.version, "v1.0.0");
    let hp = s.describe_hyperpod_cluster(REGION, "hp").await.unwrap().unwrap();
    assert_eq!(hp.state, ResourceState::Failed { reason: "lifecycle script exited with 1".into() });
    assert!(hp.instance_groups.iter().all(|g| g.status == "Failed" && g.current_count == 0));
}

#[tokio::test]
async fn throttling_and_transient_errors_are_seeded() {
    let outcomes = |seed: u64| async move {
        let s = SimCloud::new(SimConfig::with_speed(1.0).seed(seed)).unwrap();
        s.set_faults(SimFaults { throttle_rate: 0.3, error_rate: 0.3, ..Default::default() });
        let mut out = Vec::new();
        for _ in 0..40 {
            out.push(s.caller_identity().await.err().map(|e| e.kind));
        }
        out
    };
    let a = outcomes(7).await;
    assert_eq!(a, outcomes(7).await, "same seed, same faults");
    assert_ne!(a, outcomes(8).await);
    for k in [Some(ProviderErrorKind::Throttled), Some(ProviderErrorKind::Transient), None] {
        assert!(a.contains(&k), "{k:?} occurs");
    }
    let s = sim();
    s.set_faults(SimFaults { throttle_rate: 1.0, ..Default::default() });
    assert_eq!(kind(s.caller_identity().await), ProviderErrorKind::Throttled);
    s.set_faults(SimFaults { error_rate: 1.0, ..Default::default() });
    assert_eq!(kind(s.caller_identity().await), ProviderErrorKind::Transient);
    s.set_faults(SimFaults::none());
    assert!(s.caller_identity().await.is_ok());
    assert_eq!(s.calls("sts:GetCallerIdentity"), 1, "rejected calls did not reach the service");
    assert_eq!(s.injected_faults()["sts:GetCallerIdentity"], 2);
}

#[tokio::test]
async fn counters_name_the_real_apis() {
    let s = sim();
    let b = base(&s).await;
    s.describe_eks_cluster(REGION, "demo").await.unwrap();
    let stats = s.stats();
    let expect = [
        ("ec2:CreateVpc", 1),
        ("ec2:CreateSubnet", 4),
        ("iam:CreateRole", 2),
        ("iam:AttachRolePolicy", 2),
        ("eks:CreateCluster", 1),
        ("eks:DescribeCluster", 2),
    ];
    for (api, n) in expect {
        assert_eq!(stats.get(api).copied(), Some(n), "{api}: {stats:?}");
    }
    drop(b);
    s.reset_stats();
    assert!(s.stats().is_empty());
    s.list_eks_clusters(REGION).await.unwrap();
    assert_eq!(s.stats().into_iter().collect::<Vec<_>>(), [("eks:ListClusters".to_string(), 1)]);
}

#[tokio::test]
async fn the_world_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.json");
    let config = SimConfig::with_speed(1.0).state_file(&path).seed(3);
    let (vpc, stats) = {
        let s = SimCloud::new(config.clone()).unwrap();
        assert!(path.exists(), "a new world is written at once");
        let n = network(&s, "demo-vpc").await;
        let r = role(&s, "demo-eks-cluster-role", "eks.amazonaws.com").await;
        s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "tok")).await.unwrap();
        s.set_faults(SimFaults::none().with("eks:DeleteCluster", FaultMode::fail("x")));
        s.describe_network(REGION, &n.vpc.id).await.unwrap();
        (n.vpc.id, s.stats())
    };
    let s = SimCloud::new(config.clone()).unwrap();
    assert_eq!(s.stats(), stats, "counters persist, reads included");
    assert_eq!(s.faults(), SimFaults::none(), "faults are not persisted");
    assert_eq!(s.find_vpc(REGION, "demo-vpc").await.unwrap().map(|v| v.id), Some(vpc.clone()));
    let c = s.describe_eks_cluster(REGION, "demo").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Creating, "the clock continues, it does not restart");
    adv(&s, timings::EKS_CREATE);
    assert_eq!(s.describe_eks_cluster(REGION, "demo").await.unwrap().unwrap().state, ResourceState::Active);
    assert_eq!(s.calls("eks:CreateCluster"), 1);
    let next_id = s.create_bucket(&CreateBucket { region: REGION.into(), name: "is-b".into(), tags: tags() }).await;
    assert!(next_id.is_ok());
    s.flush().unwrap();
    drop(s);
    let s = SimCloud::new(config).unwrap();
    assert!(s.describe_bucket("is-b").await.unwrap().is_some());
    assert!(s.sim_seconds() >= timings::EKS_CREATE, "advanced time is kept");

    // While a world is open in this process, a new instance attaches to it (a dying instance's
    // in-flight calls still land in the account, as in AWS); faults start empty.
    s.set_faults(SimFaults { throttle_rate: 1.0, ..Default::default() });
    let twin = SimCloud::new(SimConfig::with_speed(5.0).state_file(&path)).unwrap();
    assert_eq!(twin.faults(), SimFaults::none());
    s.create_bucket(&CreateBucket { region: REGION.into(), name: "is-c".into(), tags: tags() }).await.unwrap();
    assert!(twin.describe_bucket("is-c").await.unwrap().is_some());
    assert_eq!(twin.speed(), 5.0);
    drop((s, twin));

    std::fs::write(&path, b"{ not json").unwrap();
    assert!(matches!(SimCloud::new(SimConfig::with_speed(1.0).state_file(&path)), Err(SimError::Corrupt { .. })));
    std::fs::write(&path, br#"{"format": 99}"#).unwrap();
    assert!(matches!(
        SimCloud::new(SimConfig::with_speed(1.0).state_file(&path)),
        Err(SimError::UnsupportedFormat { found: 99, .. })
    ));
    assert!(matches!(SimCloud::new(SimConfig::with_speed(0.0)), Err(SimError::InvalidConfig(_))));
    assert!(matches!(SimCloud::new(SimConfig::default().account("12")), Err(SimError::InvalidConfig(_))));
}

#[test]
fn sim_cloud_is_a_shareable_provider() {
    fn provider<T: AwsCloud + KubeApi + Clone + Send + Sync + 'static>() {}
    provider::<SimCloud>();
    let s = sim();
    let _aws: std::sync::Arc<dyn AwsCloud> = std::sync::Arc::new(s.clone());
    let _kube: std::sync::Arc<dyn KubeApi> = std::sync::Arc::new(s);
}

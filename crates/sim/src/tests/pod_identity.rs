//! EKS Pod Identity: associations, the agent, the training operator's identity, S3 mounts.

use super::*;

#[tokio::test]
async fn pod_identity_associations_are_one_per_service_account_and_idempotent_by_token() {
    let s = sim();
    base(&s).await;
    let r = pod_role(&s, "demo-hpto-role", &[], vec![]).await;
    let a = s.create_pod_identity_association(&association("aws-hyperpod", "ctl", &r.arn, "t1")).await.unwrap();
    assert!(a.id.starts_with("a-") && a.arn.ends_with(&format!("podidentityassociation/demo/{}", a.id)), "{a:?}");
    assert_eq!((a.role_arn.as_str(), a.tags.clone()), (r.arn.as_str(), tags()));
    // The same token: the same association; another token for the same service account: in use.
    let again = s.create_pod_identity_association(&association("aws-hyperpod", "ctl", &r.arn, "t1")).await.unwrap();
    assert_eq!(again, a);
    let other = s.create_pod_identity_association(&association("aws-hyperpod", "ctl", &r.arn, "t2")).await;
    assert_eq!(kind(other), ProviderErrorKind::AlreadyExists);
    let bad = s.create_pod_identity_association(&association("aws-hyperpod", "x", "not-an-arn", "t3")).await;
    assert_eq!(kind(bad), ProviderErrorKind::InvalidRequest);
    let nowhere = CreatePodIdentityAssociation { cluster: "nope".into(), ..association("n", "sa", &r.arn, "t4") };
    assert_eq!(kind(s.create_pod_identity_association(&nowhere).await), ProviderErrorKind::NotFound);
    // Listing filters by namespace and service account.
    let cases: [(&str, &str, usize); 3] =
        [("aws-hyperpod", "ctl", 1), ("aws-hyperpod", "other", 0), ("default", "ctl", 0)];
    for (ns, sa, n) in cases {
        assert_eq!(s.list_pod_identity_associations(REGION, "demo", ns, sa).await.unwrap().len(), n, "{ns}/{sa}");
    }
    assert_eq!(kind(s.list_pod_identity_associations(REGION, "nope", "a", "b").await), ProviderErrorKind::NotFound);
    s.delete_pod_identity_association(REGION, "demo", &a.id).await.unwrap();
    assert!(s.list_pod_identity_associations(REGION, "demo", "aws-hyperpod", "ctl").await.unwrap().is_empty());
    assert_eq!(kind(s.delete_pod_identity_association(REGION, "demo", &a.id).await), ProviderErrorKind::NotFound);
    assert_eq!(s.calls("eks:CreatePodIdentityAssociation"), 5, "{:?}", s.stats());
}

#[tokio::test]
async fn the_training_operator_is_degraded_and_its_jobs_never_start_without_its_pod_identity() {
    use instantstart_core::workflow::features::{
        TRAINING_OPERATOR_ADDON, TRAINING_OPERATOR_NAMESPACE, TRAINING_OPERATOR_POLICY,
        TRAINING_OPERATOR_SERVICE_ACCOUNT,
    };
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    addons(&s, &["eks-pod-identity-agent", TRAINING_OPERATOR_ADDON]).await;
    let issues = || async { s.describe_addon(REGION, "demo", TRAINING_OPERATOR_ADDON).await.unwrap().unwrap() };
    let a = issues().await;
    assert_eq!(a.state, ResourceState::Active, "DEGRADED maps to Active, with the health issue");
    assert!(
        a.health_issues[0].contains("DEGRADED") && a.health_issues[0].contains("no EKS Pod Identity association"),
        "{a:?}"
    );

    // A job submitted meanwhile stays Pending; its pods are gated, the job says why.
    apply(&s, hyperpod_job("ft", 2, 600, 0, 0, json!([]))).await;
    adv(&s, timings::POD_START + 1.0);
    let job = hp(&s, "ft").await;
    assert_eq!(hp_summary(&job).0, ["Created"]);
    let why = job["status"]["conditions"].as_array().unwrap().iter().find(|c| c["reason"] == "MissingPodIdentity");
    assert!(why.is_some_and(|c| c["message"].as_str().unwrap().contains(TRAINING_OPERATOR_SERVICE_ACCOUNT)), "{job:#}");
    let p = pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await;
    assert_eq!(p.len(), 2);
    for pod in &p {
        assert_eq!(pod["status"]["phase"], "Pending");
        assert_eq!(pod["status"]["conditions"][0]["reason"], "SchedulingGated", "{pod:#}");
    }

    // Each missing piece is named; with all of them the operator is healthy and the job runs.
    let untrusting = role(&s, "eks-trusting-role", "eks.amazonaws.com").await;
    let no_policy = pod_role(&s, "bare-role", &[], vec![]).await;
    let good = pod_role(&s, "demo-hpto-role", &[TRAINING_OPERATOR_POLICY], vec![]).await;
    let cases: [(&IamRole, Option<&str>); 3] = [
        (&untrusting, Some("does not trust pods.eks.amazonaws.com")),
        (&no_policy, Some("lacks arn:aws:iam::aws:policy/AmazonSageMakerHyperPodTrainingOperatorAccess")),
        (&good, None),
    ];
    for (i, (r, expected)) in cases.into_iter().enumerate() {
        for old in s
            .list_pod_identity_associations(
                REGION,
                "demo",
                TRAINING_OPERATOR_NAMESPACE,
                TRAINING_OPERATOR_SERVICE_ACCOUNT,
            )
            .await
            .unwrap()
        {
            s.delete_pod_identity_association(REGION, "demo", &old.id).await.unwrap();
        }
        let req = association(TRAINING_OPERATOR_NAMESPACE, TRAINING_OPERATOR_SERVICE_ACCOUNT, &r.arn, &format!("t{i}"));
        s.create_pod_identity_association(&req).await.unwrap();
        let a = issues().await;
        match expected {
            Some(e) => assert!(a.health_issues.len() == 1 && a.health_issues[0].contains(e), "{}: {a:?}", r.name),
            None => assert!(a.health_issues.is_empty(), "{a:?}"),
        }
    }
    adv(&s, timings::POD_START + 1.0);
    assert_eq!(hp_summary(&hp(&s, "ft").await).0, ["Created", "Running"]);
}

#[tokio::test]
async fn the_pod_identity_agent_is_required_for_any_association() {
    let s = sim();
    gpu_world(&s, 1).await;
    shared_bucket(&s).await;
    // The S3 CSI driver is installed and associated, but the agent is not.
    addons(&s, &["aws-mountpoint-s3-csi-driver"]).await;
    let policy = instantstart_core::workflow::create_cluster::s3_csi_policy("is-demo-data");
    let r = pod_role(&s, "demo-s3-csi-role", &[], vec![("p".into(), policy)]).await;
    s.create_pod_identity_association(&association("kube-system", "s3-csi-driver-sa", &r.arn, "t")).await.unwrap();
    let mut d = deployment("web", 1, 0);
    shared_mount(&mut d["spec"]["template"]["spec"]);
    apply(&s, d).await;
    adv(&s, timings::POD_START + 1.0);
    let p = pods(&s, &[("app", "web")]).await;
    let waiting = &p[0]["status"]["containerStatuses"][0]["state"]["waiting"];
    assert_eq!(waiting["reason"], "ContainerCreating");
    assert!(waiting["message"].as_str().unwrap().contains("eks-pod-identity-agent"), "{waiting}");
    addons(&s, &["eks-pod-identity-agent"]).await;
    adv(&s, timings::POD_START + 1.0);
    assert_eq!(pods(&s, &[("app", "web")]).await[0]["status"]["phase"], "Running");
}

#[tokio::test]
async fn s3_mounts_fail_until_the_drivers_identity_may_use_the_bucket() {
    let s = sim();
    gpu_world(&s, 1).await;
    shared_bucket(&s).await;
    addons(&s, &["eks-pod-identity-agent", "aws-mountpoint-s3-csi-driver"]).await;
    let mut d = deployment("web", 1, 0);
    shared_mount(&mut d["spec"]["template"]["spec"]);
    apply(&s, d).await;
    // A pod without the shared volume is not affected.
    apply(&s, deployment("plain", 1, 0)).await;
    adv(&s, timings::POD_START + timings::POD_READY + 1.0);
    let message = || async {
        let p = pods(&s, &[("app", "web")]).await;
        p[0]["status"]["containerStatuses"][0]["state"]["waiting"]["message"].as_str().map(str::to_string)
    };
    let m = message().await.expect("waiting with a message");
    assert!(
        m.starts_with("FailedMount: MountVolume.SetUp failed") && m.contains("kube-system/s3-csi-driver-sa"),
        "{m}"
    );
    assert_eq!(pods(&s, &[("app", "plain")]).await[0]["status"]["phase"], "Running");
    // A role scoped to another bucket: access denied on this one.
    let elsewhere = instantstart_core::workflow::create_cluster::s3_csi_policy("someone-elses-bucket");
    let wrong = pod_role(&s, "wrong-role", &[], vec![("p".into(), elsewhere)]).await;
    let a = s
        .create_pod_identity_association(&association("kube-system", "s3-csi-driver-sa", &wrong.arn, "t1"))
        .await
        .unwrap();
    let m = message().await.expect("still waiting");
    assert!(m.contains("AccessDenied") && m.contains("is-demo-data"), "{m}");
    s.delete_pod_identity_association(REGION, "demo", &a.id).await.unwrap();
    let policy = instantstart_core::workflow::create_cluster::s3_csi_policy("is-demo-data");
    let right = pod_role(&s, "demo-s3-csi-role", &[], vec![("p".into(), policy)]).await;
    s.create_pod_identity_association(&association("kube-system", "s3-csi-driver-sa", &right.arn, "t2")).await.unwrap();
    adv(&s, timings::POD_START + 1.0);
    let p = pods(&s, &[("app", "web")]).await;
    assert_eq!(p[0]["status"]["phase"], "Running", "{:#}", p[0]["status"]);
}

//! HyperPod lifecycle scripts and the execution role: required configs, unreadable or missing scripts, the EKS-node statement.

use super::*;

/// EKS-orchestrated groups need a `LifeCycleConfig`, in CreateCluster and in UpdateCluster
/// (developer guide, "Common validation errors").
#[tokio::test]
async fn eks_groups_without_a_lifecycle_config_are_refused() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let bare = InstanceGroupSpec { lifecycle_script: None, ..group("bare", "ml.g5.2xlarge", 1, "us-east-1a") };
    let err = s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(bare.clone(), sa.id.clone())])).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest);
    assert!(err.message.contains("LifeCycleConfig is required for instance group bare"), "{err}");
    assert!(s.list_hyperpod_clusters(REGION).await.unwrap().is_empty());

    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(group("w", "ml.g5.2xlarge", 1, "us-east-1a"), sa.id.clone())]))
        .await
        .unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    // Scaling an existing group without its lifecycle config, or adding a bare group: refused.
    for spec in [InstanceGroupSpec { lifecycle_script: None, ..group("w", "ml.g5.2xlarge", 2, "us-east-1a") }, bare] {
        let req = hp_req(&b, "hp", vec![(spec, sa.id.clone())]);
        let update =
            UpdateHyperPodCluster { instance_groups: req.instance_groups, ..UpdateHyperPodCluster::of(REGION, "hp") };
        let err = s.update_hyperpod_cluster(&update).await.unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::InvalidRequest);
        assert!(err.message.contains("LifeCycleConfig is required"), "{err}");
    }
    let c = s.describe_hyperpod_cluster(REGION, "hp").await.unwrap().unwrap();
    assert_eq!(c.instance_groups.len(), 1);
    assert_eq!(c.instance_groups[0].target_count, 1, "nothing changed");
}

/// A script the execution role cannot read, or that is missing, fails the instances at boot
/// (the cluster goes Failed with the service's message); a script in the cluster's own bucket
/// with an inline grant works. Table: (what, bucket, key uploaded, inline grant on the bucket,
/// expected failure substring or None).
#[tokio::test]
async fn lifecycle_scripts_the_role_cannot_read_or_that_are_missing_fail_the_cluster() {
    let cases: &[(&str, &str, bool, bool, Option<&str>)] = &[
        ("sagemaker-* bucket, present", "sagemaker-scripts", true, false, None),
        ("sagemaker-* bucket, missing", "sagemaker-scripts", false, false, Some("was not found")),
        (
            "other bucket, no grant",
            "is-demo-123456789012-ab12",
            true,
            false,
            Some(
                "Execution role provided does not have permissions to access the bucket s3://is-demo-123456789012-ab12/lifecycle/",
            ),
        ),
        ("other bucket, inline grant", "is-demo-123456789012-ab12", true, true, None),
        ("other bucket, granted but missing", "is-demo-123456789012-ab12", false, true, Some("does not exist")),
    ];
    for (what, bucket, uploaded, grant, failure) in cases {
        let s = sim();
        let b = base(&s).await;
        let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
        s.seed_bucket(&CreateBucket { region: REGION.into(), name: bucket.to_string(), tags: Tags::new() }).ok();
        if *uploaded {
            s.put_object(&PutObject {
                bucket: bucket.to_string(),
                key: "lifecycle/on_create.sh".into(),
                body: b"#!/bin/bash\n".to_vec(),
                content_type: "text/x-shellscript".into(),
            })
            .await
            .unwrap();
        }
        if *grant {
            s.ensure_role_policies(&CreateIamRole {
                name: "demo-hyperpod-exec-role".into(),
                trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
                managed_policies: vec![],
                inline_policies: vec![(
                    "instantstart-shared-bucket".into(),
                    instantstart_core::workflow::create_cluster::hyperpod_bucket_policy(bucket),
                )],
                tags: Tags::new(),
            })
            .await
            .unwrap();
        }
        let l = LifecycleScript { source_s3_uri: format!("s3://{bucket}/lifecycle"), on_create: "on_create.sh".into() };
        let g = InstanceGroupSpec { lifecycle_script: Some(l.clone()), ..group("w", "ml.g5.2xlarge", 1, "us-east-1a") };
        s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(g, sa.id.clone())])).await.unwrap();
        adv(&s, timings::HYPERPOD_CREATE);
        let c = s.describe_hyperpod_cluster(REGION, "hp").await.unwrap().unwrap();
        match (failure, &c.state) {
            (None, ResourceState::Active) => {
                assert_eq!(c.instance_groups[0].lifecycle_script.as_ref(), Some(&l), "{what}: described as created");
            }
            (Some(want), ResourceState::Failed { reason }) => {
                assert!(reason.contains(want), "{what}: {reason}");
                assert!(reason.contains("instance group w"), "{what}: names the group: {reason}");
                assert!(s.list_cluster_nodes(REGION, "hp").await.unwrap().is_empty(), "{what}");
            }
            (want, state) => panic!("{what}: expected failure {want:?}, got {state:?}"),
        }
    }
}

/// UpdateCluster runs the scripts of new groups only: a new group whose script is missing goes
/// Failed without instances, the cluster stays InService.
#[tokio::test]
async fn a_new_group_with_a_missing_script_fails_alone() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(group("w", "ml.g5.2xlarge", 1, "us-east-1a"), sa.id.clone())]))
        .await
        .unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    let missing =
        LifecycleScript { source_s3_uri: format!("s3://{SCRIPT_BUCKET}/nope"), on_create: "on_create.sh".into() };
    let extra =
        InstanceGroupSpec { lifecycle_script: Some(missing), ..group("extra", "ml.g5.2xlarge", 2, "us-east-1a") };
    let req = hp_req(&b, "hp", vec![(extra, sa.id.clone())]);
    s.update_hyperpod_cluster(&UpdateHyperPodCluster {
        instance_groups: req.instance_groups,
        ..UpdateHyperPodCluster::of(REGION, "hp")
    })
    .await
    .unwrap();
    adv(&s, timings::HYPERPOD_UPDATE + 600.0);
    let c = s.describe_hyperpod_cluster(REGION, "hp").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Active);
    let g = c.instance_groups.iter().find(|g| g.name == "extra").unwrap();
    assert_eq!((g.status.as_str(), g.current_count), ("Failed", 0));
    assert!(
        g.failure.as_deref().is_some_and(|f| f.contains("s3://sagemaker-demo-lifecycle/nope/on_create.sh")),
        "{g:?}"
    );
    let nodes = s.list_cluster_nodes(REGION, "hp").await.unwrap();
    assert!(nodes.iter().all(|n| n.instance_group == "w"), "{nodes:?}");
}

/// Without the EKS-node statement (VPC CNI, ECR) on the execution role, HyperPod instances run
/// but their Kubernetes nodes stay NotReady and nothing is scheduled; putting the statement on
/// the role lets them turn Ready (the role is read as it is now).
#[tokio::test]
async fn nodes_stay_not_ready_without_the_eks_node_actions() {
    use instantstart_core::workflow::create_cluster::{HYPERPOD_EKS_NODE_POLICY, hyperpod_eks_node_policy};
    let s = sim();
    let b = base(&s).await;
    // An execution role with the managed policy only (what InstantStart created before).
    let bare = s
        .create_role(&CreateIamRole {
            name: "bare-exec-role".into(),
            trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
            managed_policies: vec![instantstart_core::workflow::create_cluster::HYPERPOD_INSTANCE_POLICY.into()],
            inline_policies: vec![],
            tags: tags(),
        })
        .await
        .unwrap();
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let mut req = hp_req(&b, "demo-hp", vec![(group("gpu", "ml.g5.2xlarge", 1, "us-east-1a"), sa.id)]);
    req.instance_groups[0].execution_role_arn = bare.arn.clone();
    s.create_hyperpod_cluster(&req).await.unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    assert!(s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap().state.is_active());
    let node_list = ListParams { api_version: "v1".into(), kind: "Node".into(), namespace: None, labels: vec![] };
    let nodes = s.list(&target(), &node_list).await.unwrap();
    assert_eq!(nodes.len(), 1);
    let ready = &nodes[0].0["status"]["conditions"][0];
    assert_eq!((ready["type"].as_str(), ready["status"].as_str()), (Some("Ready"), Some("False")));
    let why = ready["message"].as_str().unwrap();
    assert!(why.contains("cni plugin not initialized") && why.contains("ec2:AssignPrivateIpAddresses"), "{why}");
    apply(&s, deployment("llm", 1, 1)).await;
    adv(&s, timings::POD_START + timings::POD_READY);
    let p = pods(&s, &[("app", "llm")]).await;
    assert!(
        p.iter().all(|x| x["spec"].get("nodeName").is_none_or(Value::is_null)),
        "not scheduled on a NotReady node: {p:?}"
    );

    // Only the ECR pulls missing: still NotReady, now for the images.
    let mut no_ecr = hyperpod_eks_node_policy();
    let actions = no_ecr["Statement"][0]["Action"].as_array_mut().unwrap();
    actions.retain(|a| !a.as_str().unwrap().starts_with("ecr:"));
    let put = |doc: Value| CreateIamRole {
        name: "bare-exec-role".into(),
        trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
        managed_policies: vec![],
        inline_policies: vec![(HYPERPOD_EKS_NODE_POLICY.into(), doc)],
        tags: Tags::new(),
    };
    s.ensure_role_policies(&put(no_ecr)).await.unwrap();
    let nodes = s.list(&target(), &node_list).await.unwrap();
    let why = nodes[0].0["status"]["conditions"][0]["message"].as_str().unwrap().to_string();
    assert!(why.contains("ecr:GetAuthorizationToken"), "{why}");
    // The documented statement: Ready, and the pod is scheduled.
    s.ensure_role_policies(&put(hyperpod_eks_node_policy())).await.unwrap();
    let nodes = s.list(&target(), &node_list).await.unwrap();
    assert_eq!(nodes[0].0["status"]["conditions"][0]["status"], "True");
    adv(&s, timings::POD_START + timings::POD_READY);
    let p = pods(&s, &[("app", "llm")]).await;
    assert!(p.iter().all(|x| x["spec"]["nodeName"].is_string()), "{p:?}");
}

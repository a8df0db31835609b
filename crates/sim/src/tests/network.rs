//! VPCs, subnets, NAT gateways and VPC endpoints: activation, EC2's layout and CIDR rules, deletion order, existing VPCs.

use super::*;

#[tokio::test]
async fn network_goes_active_after_the_nat_gateway() {
    let s = sim();
    let n = network(&s, "demo-vpc").await;
    assert_eq!(n.state, ResourceState::Creating);
    assert_eq!(n.vpc.state, ResourceState::Active);
    assert_eq!(n.subnets.len(), 4);
    assert_eq!(n.subnets.iter().filter(|x| x.public).count(), 2);
    assert!(n.security_group_id.as_deref().is_some_and(|x| x.starts_with("sg-0")));
    assert!(n.vpc.id.starts_with("vpc-0"));
    for (secs, state) in [(149.0, ResourceState::Creating), (1.5, ResourceState::Active)] {
        adv(&s, secs);
        assert_eq!(s.describe_network(REGION, &n.vpc.id).await.unwrap().state, state);
    }
    let found = s.find_vpc(REGION, "demo-vpc").await.unwrap().expect("found by name");
    assert_eq!(found.id, n.vpc.id);
    assert!(is_owned(&found.tags, "demo"));
    assert_eq!(s.find_vpc("us-west-2", "demo-vpc").await.unwrap(), None);
    assert_eq!(kind(s.describe_network(REGION, "vpc-0nope").await), ProviderErrorKind::NotFound);
    let again = s
        .create_network(&CreateNetwork {
            region: REGION.into(),
            name: "demo-vpc".into(),
            cidr: net("10.1.0.0/16"),
            subnets: vec![],
            tags: tags(),
        })
        .await;
    assert_eq!(kind(again), ProviderErrorKind::AlreadyExists);
    let stats = s.stats();
    assert_eq!(stats["ec2:CreateVpc"], 2);
    assert_eq!(stats["ec2:CreateSubnet"], 4);
    assert_eq!(stats["ec2:CreateNatGateway"], 1);
}

#[tokio::test]
async fn create_network_validates_its_layout() {
    let s = sim();
    let sub = |cidr: &str, az: &str| PlannedSubnet {
        availability_zone: az.into(),
        cidr: net(cidr),
        role: SubnetRole::Private,
    };
    let cases: Vec<(&str, Vec<PlannedSubnet>, ProviderErrorKind)> = vec![
        ("10.0.0.0/16", vec![sub("10.1.0.0/24", "us-east-1a")], ProviderErrorKind::InvalidRequest),
        (
            "10.0.0.0/16",
            vec![sub("10.0.0.0/24", "us-east-1a"), sub("10.0.0.0/22", "us-east-1b")],
            ProviderErrorKind::InvalidRequest,
        ),
        ("10.0.0.0/16", vec![sub("10.0.0.0/24", "us-east-1z")], ProviderErrorKind::InvalidRequest),
        ("10.0.0.0/8", vec![], ProviderErrorKind::InvalidRequest),
        ("10.0.0.1/16", vec![], ProviderErrorKind::InvalidRequest),
    ];
    for (cidr, subnets, expected) in cases {
        let r = s
            .create_network(&CreateNetwork {
                region: REGION.into(),
                name: "x".into(),
                cidr: net(cidr),
                subnets: subnets.clone(),
                tags: tags(),
            })
            .await;
        assert_eq!(kind(r), expected, "{cidr} {subnets:?}");
    }
    assert_eq!(s.find_vpc(REGION, "x").await.unwrap(), None, "a rejected request creates nothing");
}

#[tokio::test]
async fn compute_subnets_follow_ec2_cidr_rules() {
    let s = sim();
    let b = base(&s).await;
    compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    // (name, cidr, az, vpc, expected)
    let cases: &[(&str, &str, &str, Option<&str>, Outcome)] = &[
        ("c2", "10.0.32.0/20", "us-east-1b", None, None),
        ("c3", "10.0.0.0/20", "us-east-1c", None, Some(ProviderErrorKind::InvalidRequest)), // overlaps public/private
        ("c4", "10.0.16.0/24", "us-east-1c", None, Some(ProviderErrorKind::InvalidRequest)), // inside c1
        ("c5", "10.1.0.0/20", "us-east-1c", None, Some(ProviderErrorKind::InvalidRequest)), // outside the VPC
        ("c6", "10.0.48.7/20", "us-east-1c", None, Some(ProviderErrorKind::InvalidRequest)), // host bits
        ("c7", "10.0.48.0/20", "eu-west-1a", None, Some(ProviderErrorKind::InvalidRequest)), // AZ of another region
        ("demo-compute-us-east-1a", "10.0.64.0/20", "us-east-1a", None, Some(ProviderErrorKind::AlreadyExists)),
        ("c8", "10.0.80.0/20", "us-east-1c", Some("vpc-0missing"), Some(ProviderErrorKind::NotFound)),
    ];
    for (name, cidr, az, vpc, expected) in cases {
        let r = s
            .create_subnet(&CreateSubnet {
                region: REGION.into(),
                vpc_id: vpc.map(str::to_string).unwrap_or_else(|| b.network.vpc.id.clone()),
                name: (*name).into(),
                cidr: net(cidr),
                availability_zone: (*az).into(),
                tags: tags(),
            })
            .await;
        assert_eq!(r.as_ref().err().map(|e| e.kind), *expected, "{name} {cidr} {az}: {r:?}");
    }
    let n = s.describe_network(REGION, &b.network.vpc.id).await.unwrap();
    assert_eq!(n.subnets.len(), 6);
    assert!(
        n.subnets
            .iter()
            .any(|x| x.name.as_deref() == Some("c2") && x.tags.get("Name").map(String::as_str) == Some("c2"))
    );
}

#[tokio::test]
async fn deletes_respect_dependencies_and_take_time() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    s.create_hyperpod_cluster(&hp_req(
        &b,
        "demo-hp",
        vec![(group("w", "ml.g5.2xlarge", 2, "us-east-1a"), sa.id.clone())],
    ))
    .await
    .unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    let vpc = b.network.vpc.id.clone();
    // (what, result kind)
    assert_eq!(kind(s.delete_eks_cluster(REGION, "demo").await), ProviderErrorKind::Conflict);
    assert_eq!(kind(s.delete_subnet(REGION, &sa.id).await), ProviderErrorKind::Conflict);
    assert_eq!(kind(s.delete_network(REGION, &vpc).await), ProviderErrorKind::Conflict);

    s.delete_hyperpod_cluster(REGION, "demo-hp").await.unwrap();
    s.delete_hyperpod_cluster(REGION, "demo-hp").await.unwrap();
    let c = s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Deleting);
    assert!(s.list_cluster_nodes(REGION, "demo-hp").await.unwrap().iter().all(|n| n.status == "ShuttingDown"));
    assert_eq!(
        kind(s.delete_eks_cluster(REGION, "demo").await),
        ProviderErrorKind::Conflict,
        "still referenced while deleting"
    );
    adv(&s, timings::HYPERPOD_DELETE);
    assert_eq!(s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap(), None);
    assert_eq!(kind(s.list_cluster_nodes(REGION, "demo-hp").await), ProviderErrorKind::NotFound);
    assert_eq!(kind(s.delete_hyperpod_cluster(REGION, "demo-hp").await), ProviderErrorKind::NotFound);

    s.delete_subnet(REGION, &sa.id).await.unwrap();
    s.delete_eks_cluster(REGION, "demo").await.unwrap();
    assert_eq!(s.describe_eks_cluster(REGION, "demo").await.unwrap().unwrap().state, ResourceState::Deleting);
    assert_eq!(kind(s.delete_network(REGION, &vpc).await), ProviderErrorKind::Conflict, "EKS still uses the subnets");
    adv(&s, timings::EKS_DELETE);
    assert_eq!(s.describe_eks_cluster(REGION, "demo").await.unwrap(), None);
    assert_eq!(kind(s.delete_eks_cluster(REGION, "demo").await), ProviderErrorKind::NotFound);

    s.delete_network(REGION, &vpc).await.unwrap();
    assert_eq!(s.describe_network(REGION, &vpc).await.unwrap().state, ResourceState::Deleting);
    adv(&s, timings::NETWORK_DELETE);
    assert_eq!(kind(s.describe_network(REGION, &vpc).await), ProviderErrorKind::NotFound);
    assert_eq!(s.find_vpc(REGION, "demo-vpc").await.unwrap(), None);
}

/// A new network has an S3 gateway endpoint on its private route table; it goes with the
/// network. Someone else's endpoint in the VPC blocks the deletion (DependencyViolation), as
/// EC2 refuses to delete a VPC that still has endpoints.
#[tokio::test]
async fn a_new_network_has_an_s3_gateway_endpoint_and_a_foreign_endpoint_blocks_deletion() {
    let s = sim();
    let n = network(&s, "demo-vpc").await;
    let endpoint = n.s3_endpoint_id.clone().expect("S3 gateway endpoint");
    assert!(endpoint.starts_with("vpce-"), "{endpoint}");
    assert_eq!(s.describe_network(REGION, &n.vpc.id).await.unwrap().s3_endpoint_id, Some(endpoint.clone()));
    assert_eq!(s.stats()["ec2:CreateVpcEndpoint"], 1);
    adv(&s, timings::NETWORK_CREATE);

    let foreign = s
        .seed_vpc_endpoint(REGION, &n.vpc.id, "com.amazonaws.us-east-1.dynamodb", Tags::new())
        .expect("seeded endpoint");
    let err = s.delete_network(REGION, &n.vpc.id).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Conflict, "{err}");
    assert!(err.message.contains("DependencyViolation") && err.message.contains(&foreign), "{err}");
    assert_eq!(s.describe_network(REGION, &n.vpc.id).await.unwrap().state, ResourceState::Active, "nothing deleted");

    // Without it the network goes, with our endpoint first.
    let other = network(&s, "other-vpc").await;
    adv(&s, timings::NETWORK_CREATE);
    s.reset_stats();
    s.delete_network(REGION, &other.vpc.id).await.unwrap();
    assert_eq!(s.stats()["ec2:DeleteVpcEndpoints"], 1);
    assert_eq!(s.describe_network(REGION, &other.vpc.id).await.unwrap().s3_endpoint_id, None);
    adv(&s, timings::NETWORK_DELETE);
    assert_eq!(kind(s.describe_network(REGION, &other.vpc.id).await), ProviderErrorKind::NotFound);
}

#[tokio::test]
async fn seeded_resources_for_existing_vpc_and_import() {
    let s = sim();
    let subnets = plan_new_vpc(net("10.20.0.0/16"), &azs("ab")).unwrap();
    let n = s
        .seed_network(&CreateNetwork {
            region: REGION.into(),
            name: "legacy".into(),
            cidr: net("10.20.0.0/16"),
            subnets,
            tags: Tags::new(),
        })
        .unwrap();
    assert_eq!(n.state, ResourceState::Active);
    assert_eq!(n.security_group_id, None);
    assert_eq!(n.s3_endpoint_id, None, "an existing VPC gets no endpoint");
    let c = s.seed_eks_cluster(REGION, "legacy", "1.32", private_subnets(&n), Tags::new()).unwrap();
    assert_eq!(c.state, ResourceState::Active);
    assert!(c.endpoint.is_some());
    s.seed_bucket(&CreateBucket { region: REGION.into(), name: "someone-elses".into(), tags: Tags::new() }).unwrap();
    assert!(s.stats().is_empty(), "seeding is not API traffic");
    assert!(s.describe_bucket("someone-elses").await.unwrap().is_some_and(|b| !is_owned(&b.tags, "demo")));
}

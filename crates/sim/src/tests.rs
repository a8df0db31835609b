//! Behaviour tests of the simulated world through the provider traits. Most run at speed 1 and
//! move time with [`SimCloud::advance`], so every state they assert is reached exactly.

use crate::{FaultMode, SimCloud, SimConfig, SimError, SimFaults, timings};
use futures::StreamExt;
use instantstart_core::provider::*;
use instantstart_core::spec::*;
use instantstart_core::subnet::{PlannedSubnet, SubnetRole, plan_new_vpc};
use serde_json::{Value, json};
use std::time::Duration;

const REGION: &str = "us-east-1";

fn sim() -> SimCloud {
    SimCloud::new(SimConfig::with_speed(1.0).seed(42)).expect("sim")
}

fn adv(s: &SimCloud, secs: f64) {
    s.advance(Duration::from_secs_f64(secs));
}

fn tags() -> Tags {
    ownership_tags("demo", "op-1")
}

fn net(s: &str) -> ipnet::Ipv4Net {
    s.parse().expect("cidr")
}

fn azs(letters: &str) -> Vec<String> {
    letters.chars().map(|c| format!("{REGION}{c}")).collect()
}

async fn network(s: &SimCloud, name: &str) -> Network {
    let subnets = plan_new_vpc(net("10.0.0.0/16"), &azs("ab")).expect("plan");
    s.create_network(&CreateNetwork {
        region: REGION.into(),
        name: name.into(),
        cidr: net("10.0.0.0/16"),
        subnets,
        tags: tags(),
    })
    .await
    .expect("network")
}

async fn role(s: &SimCloud, name: &str, service: &str) -> IamRole {
    s.create_role(&CreateIamRole {
        name: name.into(),
        trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]}),
        managed_policies: vec!["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy".into()],
        inline_policies: vec![],
        tags: tags(),
    })
    .await
    .expect("role")
}

fn private_subnets(n: &Network) -> Vec<String> {
    n.subnets.iter().filter(|x| !x.public).map(|x| x.id.clone()).collect()
}

fn eks_req(name: &str, role_arn: &str, subnets: Vec<String>, token: &str) -> CreateEksCluster {
    CreateEksCluster {
        region: REGION.into(),
        name: name.into(),
        version: "1.33".into(),
        role_arn: role_arn.into(),
        subnet_ids: subnets,
        client_request_token: token.into(),
        tags: tags(),
        public_access_cidrs: vec![],
    }
}

/// A network, an Active EKS cluster and a HyperPod execution role.
struct Base {
    network: Network,
    eks: EksCluster,
    exec_role: IamRole,
}

async fn base(s: &SimCloud) -> Base {
    let network = network(s, "demo-vpc").await;
    let r = role(s, "demo-eks-cluster-role", "eks.amazonaws.com").await;
    s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&network), "tok-1")).await.expect("eks");
    adv(s, timings::EKS_CREATE);
    let eks = s.describe_eks_cluster(REGION, "demo").await.expect("describe").expect("exists");
    let exec_role = exec_role(s, "demo-hyperpod-exec-role").await;
    lifecycle_bucket(s).await;
    Base { network, eks, exec_role }
}

/// A `sagemaker-*` bucket holding a lifecycle script (the managed policy lets execution roles
/// read it), as the groups of [`group`] name it.
const SCRIPT_BUCKET: &str = "sagemaker-demo-lifecycle";

fn script() -> LifecycleScript {
    LifecycleScript { source_s3_uri: format!("s3://{SCRIPT_BUCKET}/scripts"), on_create: "on_create.sh".into() }
}

async fn lifecycle_bucket(s: &SimCloud) {
    if s.describe_bucket(SCRIPT_BUCKET).await.unwrap().is_none() {
        s.seed_bucket(&CreateBucket { region: REGION.into(), name: SCRIPT_BUCKET.into(), tags: Tags::new() }).unwrap();
    }
    s.put_object(&PutObject {
        bucket: SCRIPT_BUCKET.into(),
        key: "scripts/on_create.sh".into(),
        body: instantstart_core::lifecycle::ON_CREATE_SH.as_bytes().to_vec(),
        content_type: "text/x-shellscript".into(),
    })
    .await
    .expect("script");
}

/// A HyperPod execution role as the create pipeline makes it: the managed instance policy and
/// the documented EKS-node statement.
async fn exec_role(s: &SimCloud, name: &str) -> IamRole {
    use instantstart_core::workflow::create_cluster::{
        HYPERPOD_EKS_NODE_POLICY, HYPERPOD_INSTANCE_POLICY, hyperpod_eks_node_policy,
    };
    s.create_role(&CreateIamRole {
        name: name.into(),
        trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
        managed_policies: vec![HYPERPOD_INSTANCE_POLICY.into()],
        inline_policies: vec![(HYPERPOD_EKS_NODE_POLICY.into(), hyperpod_eks_node_policy())],
        tags: tags(),
    })
    .await
    .expect("role")
}

async fn compute_subnet(s: &SimCloud, b: &Base, az: &str, cidr: &str) -> Subnet {
    s.create_subnet(&CreateSubnet {
        region: REGION.into(),
        vpc_id: b.network.vpc.id.clone(),
        name: format!("demo-compute-{az}"),
        cidr: net(cidr),
        availability_zone: az.into(),
        tags: tags(),
    })
    .await
    .expect("subnet")
}

fn group(name: &str, itype: &str, count: u32, az: &str) -> InstanceGroupSpec {
    InstanceGroupSpec {
        name: name.into(),
        instance_type: itype.into(),
        count,
        availability_zone: az.into(),
        subnet_id: None,
        capacity: CapacitySpec::OnDemand,
        interface_mode: InterfaceMode::Standard,
        ebs_volume_gb: 500,
        deep_health_checks: DeepHealthChecks::default(),
        lifecycle_script: Some(script()),
    }
}

fn hp_req(b: &Base, name: &str, groups: Groups) -> CreateHyperPodCluster {
    CreateHyperPodCluster {
        region: REGION.into(),
        name: name.into(),
        eks_cluster_arn: b.eks.arn.clone(),
        node_recovery: NodeRecovery::Automatic,
        instance_groups: groups
            .into_iter()
            .map(|(spec, subnet_id)| HyperPodInstanceGroupRequest {
                spec,
                subnet_id,
                security_group_ids: vec![b.network.security_group_id.clone().expect("sg")],
                execution_role_arn: b.exec_role.arn.clone(),
                threads_per_core: None,
            })
            .collect(),
        tags: tags(),
    }
}

/// A table case's expected outcome: `None` for success.
type Outcome = Option<ProviderErrorKind>;
/// Instance groups with their subnet ids.
type Groups = Vec<(InstanceGroupSpec, String)>;

fn kind<T: std::fmt::Debug>(r: Result<T, ProviderError>) -> ProviderErrorKind {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.kind,
    }
}

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

#[tokio::test]
async fn identity_zones_offerings_and_quotas() {
    let s = SimCloud::new(SimConfig::with_speed(1.0).account("210987654321")).unwrap();
    assert_eq!(s.caller_identity().await.unwrap().account, "210987654321");
    let zones = s.availability_zones("us-west-2").await.unwrap();
    assert_eq!(
        zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>(),
        ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
    );
    assert_eq!(s.availability_zones("xx-north-9").await.unwrap().len(), 3);
    assert_eq!(kind(s.availability_zones("nowhere").await), ProviderErrorKind::InvalidRequest);
    let offers = s.instance_type_offerings(REGION).await.unwrap();
    let has = |t: &str, az: &str| offers.iter().any(|o| o.instance_type == t && o.availability_zone == az);
    assert!(has("ml.g5.2xlarge", "us-east-1a") && has("ml.p5.48xlarge", "us-east-1b"));
    assert!(!has("ml.p5.48xlarge", "us-east-1a"), "high-end types are missing from some AZs");
    let q = |t: &'static str| {
        let s = s.clone();
        async move { s.hyperpod_instance_quota(REGION, t).await.unwrap().map(|q| q.value) }
    };
    assert_eq!(q("ml.g5.2xlarge").await, Some(10));
    assert_eq!(q("ml.p5.48xlarge").await, Some(0));
    assert_eq!(q("ml.x9.huge").await, None);
    s.set_quota(REGION, "ml.p5.48xlarge", 4).unwrap();
    assert_eq!(q("ml.p5.48xlarge").await, Some(4));
    let quota = s.hyperpod_instance_quota(REGION, "ml.p5.48xlarge").await.unwrap().unwrap();
    assert_eq!(quota.name, "ml.p5.48xlarge for cluster usage");
    assert!(quota.code.starts_with("L-"));
}

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

// ---------------------------------------------------------------- Kubernetes

fn target() -> KubeTarget {
    KubeTarget::new(REGION, "demo")
}

fn oref(api: &str, kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef { api_version: api.into(), kind: kind.into(), namespace: ns.map(Into::into), name: name.into() }
}

async fn get(s: &SimCloud, api: &str, kind: &str, ns: Option<&str>, name: &str) -> Option<Value> {
    s.get(&target(), &oref(api, kind, ns, name)).await.unwrap().map(|o| o.0)
}

async fn apply(s: &SimCloud, v: Value) -> Value {
    s.apply(&target(), &KubeObject(v)).await.expect("apply").0
}

async fn pods(s: &SimCloud, labels: &[(&str, &str)]) -> Vec<Value> {
    let params = ListParams {
        api_version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("default".into()),
        labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    s.list(&target(), &params).await.unwrap().into_iter().map(|o| o.0).collect()
}

/// An Active EKS cluster with a HyperPod cluster of `count` × ml.g5.2xlarge, InService.
async fn gpu_world(s: &SimCloud, count: u32) -> Base {
    let b = base(s).await;
    if count > 0 {
        let sa = compute_subnet(s, &b, "us-east-1a", "10.0.16.0/20").await;
        s.create_hyperpod_cluster(&hp_req(
            &b,
            "demo-hp",
            vec![(group("gpu", "ml.g5.2xlarge", count, "us-east-1a"), sa.id)],
        ))
        .await
        .unwrap();
        adv(s, timings::HYPERPOD_CREATE);
    }
    b
}

fn deployment(name: &str, replicas: u32, gpus: u32) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": { "name": name, "namespace": "default", "labels": { "app": name } },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "server", "image": "vllm/vllm-openai:v0.9", "ports": [{ "containerPort": 8000 }],
                          "resources": { "limits": { "nvidia.com/gpu": gpus } } }] }
            }
        }
    })
}

#[tokio::test]
async fn kube_calls_need_an_active_cluster() {
    let s = sim();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}});
    assert_eq!(kind(s.apply(&target(), &KubeObject(ns.clone())).await), ProviderErrorKind::NotFound);
    let n = network(&s, "demo-vpc").await;
    let r = role(&s, "demo-eks-cluster-role", "eks.amazonaws.com").await;
    s.create_eks_cluster(&eks_req("demo", &r.arn, private_subnets(&n), "t")).await.unwrap();
    let e = s.apply(&target(), &KubeObject(ns.clone())).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Transient);
    assert!(e.message.contains("CREATING"), "{e}");
    adv(&s, timings::EKS_CREATE);
    apply(&s, ns).await;
    assert_eq!(s.calls("k8s:Apply"), 3);
    s.delete_eks_cluster(REGION, "demo").await.unwrap();
    let e = s.get(&target(), &oref("v1", "Namespace", None, "x")).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound, "a deleting cluster has no objects left to clean up");
}

#[tokio::test]
async fn objects_are_stored_listed_and_deleted() {
    let s = sim();
    gpu_world(&s, 0).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "team", "labels": {"a": "1"}}, "data": {"k": "v"}});
    assert_eq!(
        kind(s.apply(&target(), &KubeObject(cm.clone())).await),
        ProviderErrorKind::NotFound,
        "namespace must exist"
    );
    apply(&s, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})).await;
    let stored = apply(&s, cm.clone()).await;
    assert_eq!(stored["data"]["k"], "v");
    let uid = stored["metadata"]["uid"].clone();
    assert!(uid.as_str().is_some_and(|u| u.len() == 36));
    // Re-apply: same uid, new data, generation unchanged (no spec).
    let mut cm2 = cm.clone();
    cm2["data"]["k"] = json!("w");
    let again = apply(&s, cm2).await;
    assert_eq!(again["metadata"]["uid"], uid);
    assert_eq!(again["data"]["k"], "w");
    apply(&s, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "team", "labels": {"a": "2"}}})).await;
    apply(&s, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team"}, "stringData": {"t": "x"}})).await;
    apply(&s, json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "team"}}))
        .await;
    let list = |labels: Vec<(String, String)>| {
        let s = s.clone();
        async move {
            let p = ListParams {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("team".into()),
                labels,
            };
            s.list(&target(), &p)
                .await
                .unwrap()
                .iter()
                .map(|o| o.0["metadata"]["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(list(vec![]).await, ["cfg", "other"]);
    assert_eq!(list(vec![("a".into(), "2".into())]).await, ["other"]);
    assert!(get(&s, "v1", "ServiceAccount", Some("team"), "sa").await.is_some());
    assert!(get(&s, "v1", "Secret", Some("team"), "s").await.is_some());
    // Namespaced kinds default to `default`; cluster-scoped ones ignore a namespace.
    apply(&s, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}})).await;
    assert!(get(&s, "v1", "ConfigMap", Some("default"), "d").await.is_some());
    assert!(
        get(&s, "v1", "Namespace", Some("whatever"), "team").await.is_some_and(|n| n["status"]["phase"] == "Active")
    );
    s.delete(&target(), &oref("v1", "ConfigMap", Some("team"), "absent")).await.unwrap();
    s.delete(&target(), &oref("v1", "Namespace", None, "team")).await.unwrap();
    assert!(
        get(&s, "v1", "ConfigMap", Some("team"), "cfg").await.is_none(),
        "deleting a namespace deletes its objects"
    );
    assert_eq!(
        kind(s.delete(&target(), &oref("v1", "Namespace", None, "default")).await),
        ProviderErrorKind::InvalidRequest
    );
    assert_eq!(
        kind(s.apply(&target(), &KubeObject(json!({"apiVersion": "v1", "kind": "ConfigMap"}))).await),
        ProviderErrorKind::InvalidRequest
    );
}

#[tokio::test]
async fn pvc_binds_to_its_static_volume() {
    let s = sim();
    gpu_world(&s, 0).await;
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "s3-shared", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "s3-shared-pv", "resources": {"requests": {"storage": "1200Gi"}}}});
    assert_eq!(apply(&s, pvc).await["status"]["phase"], "Pending");
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "s3-shared-pv"},
        "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"], "claimRef": {"namespace": "default", "name": "s3-shared"},
                 "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "h"}}});
    assert_eq!(apply(&s, pv).await["status"]["phase"], "Bound");
    let claim = get(&s, "v1", "PersistentVolumeClaim", Some("default"), "s3-shared").await.unwrap();
    assert_eq!(claim["status"]["phase"], "Bound");
    assert_eq!(claim["status"]["capacity"]["storage"], "1200Gi");
    // A volume pre-bound to another claim does not bind.
    apply(&s, json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "taken"}, "spec": {"claimRef": {"namespace": "default", "name": "someone"}}})).await;
    let other = apply(&s, json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "mine"}, "spec": {"volumeName": "taken"}})).await;
    assert_eq!(other["status"]["phase"], "Pending");
    s.delete(&target(), &oref("v1", "PersistentVolume", None, "s3-shared-pv")).await.unwrap();
    let claim = get(&s, "v1", "PersistentVolumeClaim", Some("default"), "s3-shared").await.unwrap();
    assert_eq!(claim["status"]["phase"], "Pending");
}

#[tokio::test]
async fn deployments_schedule_on_hyperpod_nodes_and_become_ready() {
    let s = sim();
    gpu_world(&s, 2).await;
    let nodes = s
        .list(&target(), &ListParams { api_version: "v1".into(), kind: "Node".into(), namespace: None, labels: vec![] })
        .await
        .unwrap();
    assert_eq!(nodes.len(), 2);
    let node = &nodes[0].0;
    assert!(node["metadata"]["name"].as_str().unwrap().starts_with("hyperpod-i-0"));
    assert_eq!(node["metadata"]["labels"]["node.kubernetes.io/instance-type"], "ml.g5.2xlarge");
    assert_eq!(node["metadata"]["labels"]["sagemaker.amazonaws.com/instance-group-name"], "gpu");
    assert_eq!(node["status"]["capacity"]["nvidia.com/gpu"], "1");
    assert_eq!(node["status"]["conditions"][0]["status"], "True");

    let d = apply(&s, deployment("llm", 2, 1)).await;
    assert_eq!(d["status"].get("readyReplicas"), None);
    assert_eq!(d["status"]["replicas"], 2);
    let p = pods(&s, &[("app", "llm")]).await;
    assert_eq!(p.len(), 2);
    assert!(p.iter().all(|x| x["status"]["phase"] == "Pending" && x["spec"]["nodeName"].is_string()));
    assert_eq!(p[0]["status"]["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating");
    assert_eq!(p[0]["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
    adv(&s, timings::POD_START + timings::POD_READY);
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(d["status"]["readyReplicas"], 2);
    assert_eq!(d["status"]["conditions"][0]["status"], "True");
    let p = pods(&s, &[("app", "llm")]).await;
    assert!(p.iter().all(|x| x["status"]["phase"] == "Running"
        && x["status"]["podIP"].as_str().is_some_and(|ip| ip.starts_with("10.0."))));

    // Deleting a pod: the ReplicaSet starts a replacement under a new name.
    let victim = p[0]["metadata"]["name"].as_str().unwrap().to_string();
    s.delete(&target(), &oref("v1", "Pod", Some("default"), &victim)).await.unwrap();
    let p = pods(&s, &[("app", "llm")]).await;
    assert_eq!(p.len(), 2);
    assert!(p.iter().all(|x| x["metadata"]["name"] != victim.as_str()));
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(d["status"]["readyReplicas"], 1);

    // More GPUs than any node has: Pending with the scheduler's reason.
    apply(&s, deployment("big", 1, 4)).await;
    adv(&s, 60.0);
    let big = pods(&s, &[("app", "big")]).await;
    assert_eq!(big[0]["status"]["phase"], "Pending");
    let msg = big[0]["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(msg.contains("Insufficient nvidia.com/gpu"), "{msg}");
    assert_eq!(
        get(&s, "apps/v1", "Deployment", Some("default"), "big").await.unwrap()["status"].get("readyReplicas"),
        None
    );
    // Scaling down removes pods.
    apply(&s, deployment("llm", 1, 1)).await;
    assert_eq!(pods(&s, &[("app", "llm")]).await.len(), 1);
    s.delete(&target(), &oref("apps/v1", "Deployment", Some("default"), "llm")).await.unwrap();
    assert!(pods(&s, &[("app", "llm")]).await.is_empty());
}

/// The scheduler counts what placed pods hold: a GPU pod waits (`Insufficient nvidia.com/gpu`)
/// while every GPU is taken, and runs when a batch pod holding one ends.
#[tokio::test]
async fn a_gpu_pod_waits_for_a_free_gpu_and_runs_when_a_batch_pod_gives_its_gpu_back() {
    let s = sim();
    gpu_world(&s, 2).await;
    let gpu_job = |name: &str, secs: u32| {
        let mut j = job(name, secs);
        j["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": 1}});
        j
    };
    apply(&s, gpu_job("short", 100)).await;
    apply(&s, gpu_job("long", 10_000)).await;
    adv(&s, 10.0);
    apply(&s, deployment("serve", 1, 1)).await;
    adv(&s, 30.0);
    let node_of = |p: &Value| p["spec"]["nodeName"].as_str().map(str::to_string);
    let (short, long) = (pods(&s, &[("app", "short")]).await, pods(&s, &[("app", "long")]).await);
    assert!(node_of(&short[0]).is_some() && node_of(&long[0]).is_some());
    assert_ne!(node_of(&short[0]), node_of(&long[0]), "one GPU each: the jobs take both nodes");
    let serve = pods(&s, &[("app", "serve")]).await;
    assert_eq!((serve[0]["status"]["phase"].as_str(), node_of(&serve[0])), (Some("Pending"), None), "{:#}", serve[0]);
    let msg = serve[0]["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(msg.starts_with("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."), "{msg}");
    // The short job ends; the waiting pod takes its node, scheduled when the GPU came back.
    adv(&s, 100.0 + timings::POD_START + timings::POD_READY);
    let short = pods(&s, &[("app", "short")]).await;
    assert_eq!(short[0]["status"]["phase"], "Succeeded");
    let serve = pods(&s, &[("app", "serve")]).await;
    assert_eq!(node_of(&serve[0]), node_of(&short[0]), "{:#}", serve[0]);
    assert_ne!(serve[0]["status"]["phase"], "Pending", "{:#}", serve[0]);
    // Every node holds at most its one GPU, in each pod's lifetime.
    let all = s
        .list(
            &target(),
            &ListParams {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                labels: vec![],
            },
        )
        .await
        .unwrap();
    let holding: Vec<String> = all
        .iter()
        .map(|o| &o.0)
        .filter(|p| p["status"]["phase"] == "Running" || p["status"]["phase"] == "Pending")
        .filter_map(node_of)
        .collect();
    let distinct: std::collections::BTreeSet<&String> = holding.iter().collect();
    assert_eq!(holding.len(), distinct.len(), "two running GPU pods on one node: {holding:?}");
}

#[tokio::test]
async fn a_node_under_a_deep_health_check_keeps_its_node_labelled_and_tainted_and_takes_no_pods() {
    let s = sim();
    gpu_world(&s, 2).await;
    let list = |kind: &str| ListParams { api_version: "v1".into(), kind: kind.into(), namespace: None, labels: vec![] };
    let nodes = s.list(&target(), &list("Node")).await.unwrap();
    assert_eq!(nodes.len(), 2);
    for n in &nodes {
        assert_eq!(n.0["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"], "Schedulable");
        assert!(n.0["spec"].get("taints").is_none(), "{}", n.0);
    }
    let checked = nodes[0].0["spec"]["providerID"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
    let target_group = HealthCheckTarget {
        instance_group: "gpu".into(),
        node_ids: vec![checked.clone()],
        checks: vec![DeepHealthCheck::InstanceStress],
    };
    s.start_cluster_health_check(REGION, "demo-hp", &[target_group]).await.unwrap();
    // The Node stays, labelled as HyperPod labels it while checking, with its NoSchedule taint.
    let nodes = s.list(&target(), &list("Node")).await.unwrap();
    assert_eq!(nodes.len(), 2, "the checked node keeps its Node");
    let under = nodes.iter().find(|n| n.0["spec"]["providerID"].as_str().unwrap().ends_with(&checked)).unwrap();
    let labels = &under.0["metadata"]["labels"];
    assert_eq!(
        (
            &labels["sagemaker.amazonaws.com/node-health-status"],
            &labels["sagemaker.amazonaws.com/deep-health-check-status"]
        ),
        (&json!("Unschedulable"), &json!("InProgress"))
    );
    assert_eq!(
        under.0["spec"]["taints"],
        json!([{ "key": "sagemaker.amazonaws.com/node-health-status", "value": "Unschedulable", "effect": "NoSchedule" }])
    );
    // New pods go to the other node only: one takes its GPU, the other waits, saying why.
    apply(&s, deployment("llm", 2, 1)).await;
    let p = pods(&s, &[("app", "llm")]).await;
    let placed: Vec<&str> = p.iter().filter_map(|x| x["spec"]["nodeName"].as_str()).collect();
    assert_eq!(placed.len(), 1, "{p:?}");
    assert!(placed.iter().all(|n| !n.ends_with(&checked)), "{placed:?}");
    let waiting = p.iter().find(|x| x["spec"].get("nodeName").is_none()).unwrap();
    assert_eq!(
        waiting["status"]["conditions"][0]["message"],
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint \
         {sagemaker.amazonaws.com/node-health-status: Unschedulable}. preemption: 0/2 nodes are available: 2 No \
         preemption victims found for incoming pod."
    );
    // The check passes: Schedulable again, no taint.
    adv(&s, timings::HYPERPOD_DEEP_HEALTH_CHECK + 1.0);
    let nodes = s.list(&target(), &list("Node")).await.unwrap();
    assert!(
        nodes.iter().all(|n| n.0["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
            && n.0["spec"].get("taints").is_none())
    );
    // Trainium-free world: no Neuron cores advertised on GPU nodes.
    assert!(nodes[0].0["status"]["allocatable"].get("aws.amazon.com/neuroncore").is_none());
}

#[tokio::test]
async fn without_nodes_pods_stay_pending() {
    let s = sim();
    gpu_world(&s, 0).await;
    apply(&s, deployment("web", 1, 0)).await;
    adv(&s, 600.0);
    let p = pods(&s, &[("app", "web")]).await;
    assert_eq!(p[0]["status"]["phase"], "Pending");
    assert_eq!(p[0]["status"]["conditions"][0]["message"], "no nodes available to schedule pods");
    let e = s.logs(&target(), "default", p[0]["metadata"]["name"].as_str().unwrap(), false, None).await.err().unwrap();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
    assert!(e.message.contains("waiting to start"), "{e}");
}

#[tokio::test]
async fn load_balancer_services_get_a_hostname() {
    let s = sim();
    gpu_world(&s, 0).await;
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "llm"}, "ports": [{"port": 80, "targetPort": 8000}]}});
    let created = apply(&s, svc.clone()).await;
    let ip = created["spec"]["clusterIP"].clone();
    assert!(ip.as_str().is_some_and(|x| x.starts_with("10.100.")));
    assert_eq!(created["status"]["loadBalancer"], json!({}));
    adv(&s, timings::LOAD_BALANCER);
    let svc_now = get(&s, "v1", "Service", Some("default"), "llm").await.unwrap();
    let host = svc_now["status"]["loadBalancer"]["ingress"][0]["hostname"].as_str().unwrap().to_string();
    assert!(host.starts_with("k8s-default-llm-") && host.ends_with(".elb.us-east-1.amazonaws.com"), "{host}");
    assert_eq!(apply(&s, svc).await["spec"]["clusterIP"], ip, "re-apply keeps the cluster IP");
    let internal = apply(
        &s,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "in"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    adv(&s, 1000.0);
    assert_eq!(internal["status"]["loadBalancer"], json!({}));
}

fn job(name: &str, secs: u32) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default",
            "annotations": {crate::DURATION_ANNOTATION: secs.to_string()}},
           "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"app": name}}, "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "dl", "image": "amazon/aws-cli:2"}]}}}})
}

#[tokio::test]
async fn jobs_run_to_completion_with_logs() {
    let s = sim();
    gpu_world(&s, 1).await;
    apply(&s, job("download", 40)).await;
    let p = pods(&s, &[("job-name", "download")]).await;
    assert_eq!(p.len(), 1);
    let pod = p[0]["metadata"]["name"].as_str().unwrap().to_string();
    assert!(pod.starts_with("download-"));
    adv(&s, timings::POD_START + 20.0);
    let running = get(&s, "batch/v1", "Job", Some("default"), "download").await.unwrap();
    assert_eq!(running["status"]["active"], 1);
    let lines: Vec<String> =
        s.logs(&target(), "default", &pod, false, None).await.unwrap().map(|l| l.unwrap()).collect().await;
    assert_eq!(lines[0], "Starting amazon/aws-cli:2");
    assert!(lines.iter().any(|l| l.starts_with("step 2 |")));
    assert!(!lines.iter().any(|l| l.starts_with("Training complete")));
    adv(&s, 20.0);
    let done = get(&s, "batch/v1", "Job", Some("default"), "download").await.unwrap();
    assert_eq!(done["status"]["succeeded"], 1);
    assert_eq!(done["status"]["conditions"][0]["type"], "Complete");
    assert!(done["status"]["completionTime"].is_string());
    let pod_obj = get(&s, "v1", "Pod", Some("default"), &pod).await.unwrap();
    assert_eq!(pod_obj["status"]["phase"], "Succeeded");
    assert_eq!(pod_obj["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
    let tail: Vec<String> =
        s.logs(&target(), "default", &pod, false, Some(1)).await.unwrap().map(|l| l.unwrap()).collect().await;
    assert_eq!(tail, ["Training complete: 4 steps in 40s; checkpoint saved"]);
    assert_eq!(kind(s.logs(&target(), "default", "nope", false, None).await.map(|_| ())), ProviderErrorKind::NotFound);
}

#[tokio::test]
async fn resource_fails_on_apply_makes_workloads_fail() {
    let s = sim();
    gpu_world(&s, 1).await;
    s.set_faults(SimFaults::none().with("k8s:Apply", FaultMode::resource_fails("CUDA error: out of memory")));
    apply(&s, job("train", 30)).await;
    apply(&s, deployment("web", 1, 0)).await;
    adv(&s, 120.0);
    let j = get(&s, "batch/v1", "Job", Some("default"), "train").await.unwrap();
    assert_eq!(j["status"]["failed"], 1);
    assert_eq!(j["status"]["conditions"][0]["type"], "Failed");
    let web = pods(&s, &[("app", "web")]).await;
    let state = &web[0]["status"]["containerStatuses"][0];
    assert_eq!(state["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert!(state["restartCount"].as_u64().unwrap() >= 1);
    assert_eq!(
        get(&s, "apps/v1", "Deployment", Some("default"), "web").await.unwrap()["status"].get("readyReplicas"),
        None
    );
}

#[tokio::test]
async fn pytorchjobs_run_master_and_workers() {
    let s = sim();
    gpu_world(&s, 2).await;
    let template = json!({"spec": {"containers": [{"name": "pytorch", "image": "pt:2", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    apply(&s, json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ft", "annotations": {crate::DURATION_ANNOTATION: "100"}},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": template}, "Master": {"replicas": 1, "template": template}}}})).await;
    let p = pods(&s, &[("training.kubeflow.org/job-name", "ft")]).await;
    let names: Vec<&str> = p.iter().map(|x| x["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ft-master-0", "ft-worker-0"]);
    adv(&s, timings::POD_START + 1.0);
    let running = get(&s, "kubeflow.org/v1", "PyTorchJob", Some("default"), "ft").await.unwrap();
    assert_eq!(running["status"]["conditions"][1]["type"], "Running");
    assert_eq!(running["status"]["replicaStatuses"]["Master"]["active"], 1);
    let lines: Vec<String> =
        s.logs(&target(), "default", "ft-worker-0", false, None).await.unwrap().map(|l| l.unwrap()).collect().await;
    assert_eq!(lines[1], "Initializing distributed environment: world_size=2 rank=1");
    adv(&s, 100.0);
    let done = get(&s, "kubeflow.org/v1", "PyTorchJob", Some("default"), "ft").await.unwrap();
    assert_eq!(done["status"]["conditions"][1]["type"], "Succeeded");
    assert_eq!(done["status"]["replicaStatuses"]["Worker"]["succeeded"], 1);
}

#[tokio::test]
async fn follow_streams_lines_as_simulated_time_passes() {
    let s = SimCloud::new(SimConfig::with_speed(2000.0).seed(1)).unwrap();
    gpu_world(&s, 1).await;
    apply(&s, job("train", 120)).await;
    adv(&s, timings::POD_START + 1.0);
    let pod = pods(&s, &[("job-name", "train")]).await[0]["metadata"]["name"].as_str().unwrap().to_string();
    let stream = s.logs(&target(), "default", &pod, true, None).await.unwrap();
    let lines: Vec<String> =
        tokio::time::timeout(Duration::from_secs(20), stream.map(|l| l.unwrap()).collect::<Vec<_>>())
            .await
            .expect("the stream ends when the container ends");
    assert_eq!(lines.first().map(String::as_str), Some("Starting amazon/aws-cli:2"));
    let steps: Vec<&String> = lines.iter().filter(|l| l.starts_with("step ")).collect();
    assert_eq!(steps.len(), 12, "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("Training complete: 12 steps in 120s; checkpoint saved"));
    let unique: std::collections::BTreeSet<&String> = lines.iter().collect();
    assert_eq!(unique.len(), lines.len(), "no line twice");
}

#[test]
fn sim_cloud_is_a_shareable_provider() {
    fn provider<T: AwsCloud + KubeApi + Clone + Send + Sync + 'static>() {}
    provider::<SimCloud>();
    let s = sim();
    let _aws: std::sync::Arc<dyn AwsCloud> = std::sync::Arc::new(s.clone());
    let _kube: std::sync::Arc<dyn KubeApi> = std::sync::Arc::new(s);
}

// ---------------------------------------------------------------- Training and downloads

/// The shared bucket mounted through a static PV/PVC (as `recipes::storage` builds it).
async fn shared_bucket(s: &SimCloud) {
    let req = CreateBucket { region: REGION.into(), name: "is-demo-data".into(), tags: tags() };
    s.create_bucket(&req).await.unwrap();
    apply(s, json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "s3-default-s3-claim"},
        "spec": {"capacity": {"storage": "1200Gi"}, "accessModes": ["ReadWriteMany"], "claimRef": {"namespace": "default", "name": "s3-claim"},
                 "mountOptions": ["allow-delete"], "csi": {"driver": "s3.csi.aws.com", "volumeHandle": "s3-csi-driver-volume",
                 "volumeAttributes": {"bucketName": "is-demo-data"}}}})).await;
    apply(s, json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "s3-claim", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": "s3-default-s3-claim", "resources": {"requests": {"storage": "1200Gi"}}}})).await;
}

fn shared_mount(spec: &mut Value) {
    spec["volumes"] = json!([{"name": "shared-s3", "persistentVolumeClaim": {"claimName": "s3-claim"}}]);
    spec["containers"][0]["volumeMounts"] = json!([{"name": "shared-s3", "mountPath": "/s3"}]);
}

/// A HyperPodPyTorchJob like `recipes::training::hyperpod` builds: `nodes` pods of one GPU.
fn hyperpod_job(name: &str, nodes: u32, secs: u32, in_place: u32, full: u32, monitors: Value) -> Value {
    let mut pod = json!({"containers": [{"name": "pytorch", "image": "pt:2.6", "command": ["hyperpodrun", "--nnodes=2"],
        "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}}}]});
    shared_mount(&mut pod);
    let mut run_policy = json!({"cleanPodPolicy": "All", "jobMaxRetryCount": 5,
        "restartPolicy": {"numRestartBeforeFullJobRestart": in_place, "evalPeriodSeconds": 21600, "maxFullJobRestarts": full}});
    if monitors.as_array().is_some_and(|m| !m.is_empty()) {
        run_policy["logMonitoringConfiguration"] = monitors;
    }
    json!({"apiVersion": "sagemaker.amazonaws.com/v1", "kind": "HyperPodPyTorchJob",
        "metadata": {"name": name, "namespace": "default", "labels": {"app.kubernetes.io/instance": name},
                     "annotations": {crate::DURATION_ANNOTATION: secs.to_string()}},
        "spec": {"nprocPerNode": "1", "runPolicy": run_policy,
                 "replicaSpecs": [{"name": "workers", "replicas": nodes, "template": {"metadata": {"labels": {"app.kubernetes.io/instance": name}}, "spec": pod}}]}})
}

async fn hp(s: &SimCloud, name: &str) -> Value {
    get(s, "sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", Some("default"), name).await.expect("job")
}

/// (condition types that are True, restartCount, in-place restarts in the window, full restarts)
type Summary = (Vec<String>, u64, u64, u64);

fn hp_summary(job: &Value) -> Summary {
    let st = &job["status"];
    let conds = st["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "True")
        .map(|c| c["type"].as_str().unwrap().to_string())
        .collect();
    (
        conds,
        st["restartCount"].as_u64().unwrap(),
        st["restartStatus"]["restartCount"].as_u64().unwrap(),
        st["restartStatus"]["fullJobRestartCount"].as_u64().unwrap(),
    )
}

async fn log_of(s: &SimCloud, pod: &str) -> Vec<String> {
    s.logs(&target(), "default", pod, false, None).await.unwrap().map(|l| l.unwrap()).collect().await
}

fn uids(p: &[Value]) -> Vec<String> {
    p.iter().map(|x| x["metadata"]["uid"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn hyperpod_jobs_restart_in_place_then_fully_then_fail_when_the_budget_is_spent() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    // One in-place restart per window, then one full job restart; the fourth fault fails it.
    apply(&s, hyperpod_job("ft", 2, 600, 1, 1, json!([]))).await;
    let c = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    assert_eq!(hp_summary(&hp(&s, "ft").await), (c(&["Created"]), 0, 0, 0));
    let p = pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await;
    let names: Vec<&str> = p.iter().map(|x| x["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ft-workers-0", "ft-workers-1"]);
    assert_eq!(p[0]["metadata"]["ownerReferences"][0]["kind"], "HyperPodPyTorchJob");
    let first_uids = uids(&p);
    adv(&s, timings::POD_START + 1.0);
    assert_eq!(hp_summary(&hp(&s, "ft").await), (c(&["Created", "Running"]), 0, 0, 0));

    // Table: each fault, then what the status shows while restarting and once running again.
    let table: [(&str, Summary, f64, Summary, bool); 3] = [
        (
            "in place",
            (c(&["Created", "Restarting"]), 1, 1, 0),
            timings::PROCESS_RESTART + 1.0,
            (c(&["Created", "Running"]), 1, 1, 0),
            true,
        ),
        (
            "full job restart",
            (c(&["Created", "Restarting"]), 2, 0, 1),
            timings::POD_START + 1.0,
            (c(&["Created", "Running"]), 2, 0, 1),
            false,
        ),
        (
            "in place after the full restart",
            (c(&["Created", "Restarting"]), 3, 1, 1),
            timings::PROCESS_RESTART + 1.0,
            (c(&["Created", "Running"]), 3, 1, 1),
            true,
        ),
    ];
    let mut before = first_uids.clone();
    for (what, restarting, wait, running, same_pods) in table {
        adv(&s, 30.0);
        s.set_faults(SimFaults::none().with_process_fault(crate::ProcessFault::on("ft")));
        assert!(s.faults().process_faults.is_empty(), "{what}: the fault was used");
        assert_eq!(hp_summary(&hp(&s, "ft").await), restarting, "{what}");
        adv(&s, wait);
        assert_eq!(hp_summary(&hp(&s, "ft").await), running, "{what}");
        let now = uids(&pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await);
        assert_eq!(now == before, same_pods, "{what}: pods kept in place, or recreated");
        before = now;
    }
    let log = log_of(&s, "ft-workers-0").await;
    assert!(log.iter().any(|l| l.starts_with("Resuming from checkpoint at step ")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("restarting the training processes in place")), "{log:?}");

    // The fourth fault exhausts the budget.
    adv(&s, 30.0);
    s.set_faults(SimFaults::none().with_process_fault(crate::ProcessFault::on("ft")));
    let failed = hp(&s, "ft").await;
    assert_eq!(hp_summary(&failed).0, c(&["Created", "Failed"]));
    let cond =
        failed["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Failed").unwrap().clone();
    assert_eq!(cond["reason"], "RestartBudgetExhausted");
    assert!(cond["message"].as_str().unwrap().contains("restart budget exhausted after 3 restart(s)"), "{cond}");
    let p = pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await;
    assert!(p.iter().all(|x| x["status"]["phase"] == "Failed"));
    assert!(log_of(&s, "ft-workers-0").await.iter().any(|l| l.contains("restart budget exhausted")));
    // A failed job writes no checkpoint; nothing else is faulted later.
    assert!(s.list_objects("is-demo-data", "checkpoints/", None).await.unwrap().entries.is_empty());
    s.delete(&target(), &oref("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", Some("default"), "ft"))
        .await
        .unwrap();
    assert!(pods(&s, &[("sagemaker.amazonaws.com/job-name", "ft")]).await.is_empty(), "delete leaves no pods");
}

#[tokio::test]
async fn hyperpod_jobs_log_the_curve_and_checkpoint_into_the_bucket() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    apply(&s, hyperpod_job("curve", 2, 100, 3, 1, json!([]))).await;
    adv(&s, timings::POD_START + 35.0);
    // A fault through fail_apis (fail_once) on any running job.
    s.set_faults(SimFaults::none().with(
        crate::PROCESS_FAULT_API,
        FaultMode::fail_once(ProviderErrorKind::Failed, "CUDA error: an illegal memory access"),
    ));
    assert!(s.faults().fail_apis.is_empty(), "fail_once is used up");
    let job = hp(&s, "curve").await;
    assert_eq!(hp_summary(&job).1, 1);
    adv(&s, 100.0 - 35.0 + timings::PROCESS_RESTART - 1.0);
    assert!(hp_summary(&hp(&s, "curve").await).0.contains(&"Running".to_string()), "the restart delayed the end");
    adv(&s, 2.0);
    let done = hp(&s, "curve").await;
    assert_eq!(hp_summary(&done).0, ["Created", "Completed"]);
    assert!(done["status"]["completionTime"].is_string());
    let log = log_of(&s, "curve-workers-1").await;
    let steps: Vec<(u64, f64, f64)> = log.iter().filter_map(|l| crate::parse_training_log_line(l)).collect();
    assert_eq!(steps.len(), 10, "{log:?}");
    for (i, (step, loss, throughput)) in steps.iter().enumerate() {
        assert_eq!(*step, i as u64 + 1);
        assert_eq!((*loss, *throughput), crate::training_curve("curve", *step));
    }
    assert!(log.iter().any(|l| l.contains("worker process failed: CUDA error")), "{log:?}");
    assert_eq!(log.last().unwrap(), "Training complete: 10 steps; checkpoint saved");
    let ckpt = s.list_objects("is-demo-data", "checkpoints/curve/step-10/", None).await.unwrap();
    let keys: Vec<&str> = ckpt.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "checkpoints/curve/step-10/model.safetensors",
            "checkpoints/curve/step-10/optimizer.pt",
            "checkpoints/curve/step-10/trainer_state.json"
        ]
    );
}

#[tokio::test]
async fn log_monitors_detect_hangs_like_the_operator() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let healthy = json!([{"name": "steps", "logPattern": ".*loss (\\d+\\.\\d+).*", "expectedStartCutOffInSeconds": 60, "expectedRecurringFrequencyInSeconds": 30}]);
    let hanging =
        json!([{"name": "never", "logPattern": ".*Experiment configuration.*", "expectedStartCutOffInSeconds": 30}]);
    let slow = json!([{"name": "slow", "logPattern": ".*\\| (\\d+)\\.\\d tokens/s", "metricThreshold": 1000000, "operator": "lt", "metricEvaluationDataPoints": 3}]);
    apply(&s, hyperpod_job("ok", 1, 300, 1, 0, healthy)).await;
    apply(&s, hyperpod_job("hangs", 1, 300, 1, 0, hanging)).await;
    adv(&s, timings::POD_START + 200.0);
    let ok = hp(&s, "ok").await;
    assert_eq!(hp_summary(&ok), (vec!["Created".to_string(), "Running".to_string()], 0, 0, 0));
    // Hang at 30 s → restart in place; hang again 30 s after the restart → budget spent.
    let hangs = hp(&s, "hangs").await;
    assert_eq!(hp_summary(&hangs).0, ["Created", "Failed"]);
    let cond =
        hangs["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Failed").unwrap().clone();
    assert!(cond["message"].as_str().unwrap().contains("log monitor never: HANGING"), "{cond}");
    assert_eq!(hangs["status"]["restartCount"], 1);
    // A metric rule: three throughput values below the threshold in a row → SLOW.
    s.delete(&target(), &oref("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", Some("default"), "ok"))
        .await
        .unwrap();
    apply(&s, hyperpod_job("slow", 1, 300, 0, 0, slow)).await;
    adv(&s, timings::POD_START + 29.0);
    assert_eq!(hp_summary(&hp(&s, "slow").await).0, ["Created", "Running"]);
    adv(&s, 2.0);
    let slow = hp(&s, "slow").await;
    assert_eq!(hp_summary(&slow).0, ["Created", "Failed"]);
    assert!(slow["status"]["conditions"][2]["message"].as_str().unwrap().contains("log monitor slow: SLOW"), "{slow}");
}

/// Installs a pinned chart in `demo` as the create-cluster pipeline does, and lets it settle.
async fn install_chart(s: &SimCloud, chart: &PinnedChart) {
    s.install_or_upgrade(&target(), &chart.spec_for(REGION)).await.expect("helm install");
    adv(s, timings::HELM_RELEASE);
}

/// One HTTP/1.1 request to the loopback API server: the status code and the JSON body.
async fn http(server: &crate::KubeApiServer, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let ct = if method == "PATCH" { "application/apply-patch+yaml" } else { "application/json" };
    let path = if method == "PATCH" { format!("{path}?fieldManager=test") } else { path.to_string() };
    let req = format!(
        "{method} {} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
        cluster_path(&target(), &path),
        body.len()
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let code: u16 = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let json = text.find("\r\n\r\n").and_then(|i| {
        let rest = &text[i + 4..];
        // Chunked bodies: the JSON starts at the first brace.
        rest.find('{').and_then(|j| serde_json::Deserializer::from_str(&rest[j..]).into_iter::<Value>().next())
    });
    (code, json.and_then(Result::ok).unwrap_or(Value::Null))
}

fn cluster_path(t: &KubeTarget, path: &str) -> String {
    format!("/clusters/{}/{}{path}", t.region, t.eks_cluster)
}

/// The chart-provided kinds (RayJob from KubeRay, ScaledObject from KEDA) are served only while
/// their release is deployed, through the `KubeApi` and the loopback API server alike; the
/// add-on-provided kinds are served regardless. Uninstalling removes the CRDs and their objects.
#[tokio::test]
async fn chart_kinds_are_served_only_while_their_release_is_deployed() {
    let s = sim();
    gpu_world(&s, 0).await;
    let server = s.serve_kube_api().await.unwrap();
    let ray_job = json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "r", "namespace": "default"},
                         "spec": {"entrypoint": "python3 x.py"}});
    let so = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "so", "namespace": "default"},
                    "spec": {"scaleTargetRef": {"name": "web"}, "minReplicaCount": 1, "maxReplicaCount": 2,
                             "triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://p:9090", "query": "q", "threshold": "1"}}]}});
    let list = |api: &str, kind: &str| ListParams {
        api_version: api.into(),
        kind: kind.into(),
        namespace: Some("default".into()),
        labels: vec![],
    };
    let kinds = [
        ("ray.io/v1", "RayJob", "/apis/ray.io/v1/namespaces/default/rayjobs", &ray_job, &KUBERAY_OPERATOR),
        ("keda.sh/v1alpha1", "ScaledObject", "/apis/keda.sh/v1alpha1/namespaces/default/scaledobjects", &so, &KEDA),
    ];
    let group_of = |api: &str| api.split('/').next().unwrap().to_string();
    for (api, ty, path, object, _) in kinds {
        // The KubeApi: apply and list are NotFound, get is None, delete is a no-op.
        let e = s.apply(&target(), &KubeObject(object.clone())).await.unwrap_err();
        assert_eq!((e.api.as_str(), e.kind), ("k8s:Apply", ProviderErrorKind::NotFound), "{ty}: {e}");
        assert!(e.message.contains("could not find the requested resource"), "{e}");
        assert_eq!(kind(s.list(&target(), &list(api, ty)).await), ProviderErrorKind::NotFound, "{ty}");
        let name = object["metadata"]["name"].as_str().unwrap();
        assert_eq!(get(&s, api, ty, Some("default"), name).await, None);
        s.delete(&target(), &oref(api, ty, Some("default"), name)).await.unwrap();
        // The API server: 404 NotFound for list, get and apply; discovery does not list the group.
        let (code, status) = http(&server, "GET", path, None).await;
        assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")), "{ty}: {status}");
        assert_eq!(http(&server, "GET", &format!("{path}/{name}"), None).await.0, 404);
        assert_eq!(http(&server, "PATCH", &format!("{path}/{name}"), Some(object)).await.0, 404);
        assert_eq!(http(&server, "GET", &format!("/apis/{api}"), None).await.0, 404, "{api}");
        let (_, groups) = http(&server, "GET", "/apis", None).await;
        assert!(!groups.to_string().contains(&format!("\"{}\"", group_of(api))), "{groups}");
    }
    // Add-on kinds are served without any chart.
    let hp = ListParams { namespace: None, ..list("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob") };
    assert!(s.list(&target(), &hp).await.unwrap().is_empty());
    assert_eq!(http(&server, "GET", "/apis/sagemaker.amazonaws.com/v1/hyperpodpytorchjobs", None).await.0, 200);

    for (api, ty, path, object, chart) in kinds {
        // Installing: still pending (no CRDs yet), then deployed.
        s.install_or_upgrade(&target(), &chart.spec_for(REGION)).await.unwrap();
        assert_eq!(kind(s.list(&target(), &list(api, ty)).await), ProviderErrorKind::NotFound, "pending");
        adv(&s, timings::HELM_RELEASE);
        s.apply(&target(), &KubeObject(object.clone())).await.unwrap_or_else(|e| panic!("{ty}: {e}"));
        assert_eq!(s.list(&target(), &list(api, ty)).await.unwrap().len(), 1, "{ty}");
        let (code, listed) = http(&server, "GET", path, None).await;
        assert_eq!((code, listed["items"].as_array().map(Vec::len)), (200, Some(1)), "{ty}: {listed}");
        let (code, doc) = http(&server, "GET", &format!("/apis/{api}"), None).await;
        assert_eq!(code, 200, "{doc}");
        let (_, groups) = http(&server, "GET", "/apis", None).await;
        assert!(groups.to_string().contains(&format!("\"{}\"", group_of(api))), "{groups}");
        // An upgrade keeps the CRDs in place while it runs.
        s.install_or_upgrade(&target(), &chart.spec_for(REGION)).await.unwrap();
        assert_eq!(s.list(&target(), &list(api, ty)).await.unwrap().len(), 1, "{ty} during an upgrade");
        adv(&s, timings::HELM_RELEASE);
    }
    // Each chart serves only its own kinds: uninstalling KEDA leaves the RayJob.
    s.uninstall(&target(), KEDA.namespace, KEDA.release).await.unwrap();
    assert_eq!(kind(s.list(&target(), &list("keda.sh/v1alpha1", "ScaledObject")).await), ProviderErrorKind::NotFound);
    assert_eq!(s.list(&target(), &list("ray.io/v1", "RayJob")).await.unwrap().len(), 1);
    // Reinstalled, the CRD is back empty: its objects went with it.
    install_chart(&s, &KEDA).await;
    assert!(s.list(&target(), &list("keda.sh/v1alpha1", "ScaledObject")).await.unwrap().is_empty());
}

/// KEDA's prometheus trigger needs a Prometheus at its address: without one the ScaledObject is
/// not Ready (TriggerError, the scaler's lookup error) and the metric scales nothing; once the
/// `prometheus` chart's release is deployed (its `prometheus-server` Service), it scales.
#[tokio::test]
async fn a_scaled_object_scales_only_while_its_prometheus_answers() {
    let s = sim();
    gpu_world(&s, 1).await;
    install_chart(&s, &KEDA).await;
    apply(&s, deployment("llm", 1, 0)).await;
    let address = "http://prometheus-server.monitoring.svc.cluster.local:80";
    let so = |address: &str| {
        json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "llm", "namespace": "default"},
               "spec": {"scaleTargetRef": {"name": "llm"}, "minReplicaCount": 1, "maxReplicaCount": 4,
                        "triggers": [{"type": "prometheus", "metadata": {"serverAddress": address, "query": "q", "threshold": "10"}}]}})
    };
    apply(&s, so(address)).await;
    let replicas = |d: &Value| d["spec"]["replicas"].as_u64();
    let conditions = |v: &Value| v["status"]["conditions"].clone();
    let so_now = get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap();
    let c = conditions(&so_now);
    assert_eq!(
        (c[0]["type"].as_str(), c[0]["status"].as_str(), c[0]["reason"].as_str()),
        (Some("Ready"), Some("False"), Some("TriggerError"))
    );
    let message = c[0]["message"].as_str().unwrap();
    assert!(message.contains("lookup prometheus-server.monitoring.svc.cluster.local: no such host"), "{message}");
    assert_eq!(c[1]["type"], "Active");
    s.set_scaling_metric(&target(), "default", "llm", 35.0).unwrap();
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(replicas(&d), Some(1), "no Prometheus, no metric, no scaling");

    // A bare service name resolves in the ScaledObject's namespace: still nothing there.
    apply(&s, so("http://prom:9090")).await;
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!(c[0]["status"], "False");
    // An address outside the cluster (Amazon Managed Prometheus) is not simulated: reachable.
    apply(&s, so("https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1")).await;
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!(c[0]["status"], "True");

    apply(&s, so(address)).await;
    install_chart(&s, &PROMETHEUS).await;
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!((c[0]["status"].as_str(), c[0]["reason"].as_str()), (Some("True"), Some("ScaledObjectReady")));
    s.set_scaling_metric(&target(), "default", "llm", 35.0).unwrap();
    let d = get(&s, "apps/v1", "Deployment", Some("default"), "llm").await.unwrap();
    assert_eq!(replicas(&d), Some(4), "ceil(35/10) once Prometheus answers");
    // Uninstalled, the address no longer resolves.
    s.uninstall(&target(), PROMETHEUS.namespace, PROMETHEUS.release).await.unwrap();
    adv(&s, timings::HELM_RELEASE);
    let c = conditions(&get(&s, "keda.sh/v1alpha1", "ScaledObject", Some("default"), "llm").await.unwrap());
    assert_eq!(c[0]["status"], "False", "uninstalled: the trigger errors again");
}

#[tokio::test]
async fn ray_jobs_run_head_and_workers_with_kuberay_statuses() {
    let s = sim();
    gpu_world(&s, 2).await;
    install_chart(&s, &KUBERAY_OPERATOR).await;
    let template = json!({"metadata": {"labels": {"app.kubernetes.io/instance": "verl"}}, "spec": {"containers": [{"name": "ray-head", "image": "rayproject/ray:2.49.0",
        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
    apply(&s, json!({"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "verl", "namespace": "default", "annotations": {crate::DURATION_ANNOTATION: "60"}},
        "spec": {"entrypoint": "python3 -m verl.trainer.main_ppo", "submissionMode": "K8sJobMode", "shutdownAfterJobFinishes": true,
                 "rayClusterSpec": {"rayVersion": "2.49.0", "headGroupSpec": {"rayStartParams": {}, "template": template},
                    "workerGroupSpecs": [{"groupName": "gpu-workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "rayStartParams": {}, "template": template}]}}})).await;
    let p = pods(&s, &[("app.kubernetes.io/instance", "verl")]).await;
    let kinds: Vec<&str> = p.iter().map(|x| x["metadata"]["labels"]["ray.io/node-type"].as_str().unwrap()).collect();
    assert_eq!(kinds.len(), 2);
    assert!(kinds.contains(&"head") && kinds.contains(&"worker"));
    let head = p.iter().find(|x| x["metadata"]["labels"]["ray.io/node-type"] == "head").unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let status = |v: &Value| {
        (
            v["status"]["jobDeploymentStatus"].as_str().unwrap().to_string(),
            v["status"]["jobStatus"].as_str().unwrap_or("").to_string(),
        )
    };
    let table = [
        (0.0, ("Initializing", "")),
        (timings::POD_START + 1.0, ("Running", "PENDING")),
        (timings::RAY_JOB_SUBMIT, ("Running", "RUNNING")),
        (58.0, ("Running", "RUNNING")),
        (2.0, ("Complete", "SUCCEEDED")),
    ];
    for (wait, (deployment, job)) in table {
        adv(&s, wait);
        let v = get(&s, "ray.io/v1", "RayJob", Some("default"), "verl").await.unwrap();
        assert_eq!(status(&v), (deployment.to_string(), job.to_string()), "after +{wait}");
        assert!(v["status"]["rayClusterName"].as_str().unwrap().starts_with("verl-raycluster-"));
    }
    let log = log_of(&s, &head).await;
    let steps = log.iter().filter(|l| crate::parse_training_log_line(l).is_some()).count();
    assert_eq!(steps, 6, "{log:?}");
}

#[tokio::test]
async fn model_downloads_fill_the_bucket_when_the_job_completes() {
    let s = sim();
    gpu_world(&s, 1).await;
    shared_bucket(&s).await;
    let mut pod = json!({"restartPolicy": "Never", "containers": [{"name": "download", "image": "python:3.12-slim",
        "env": [{"name": "HF_REPO_ID", "value": "Qwen/Qwen3-0.6B"}, {"name": "DESTINATION", "value": "/s3/models/Qwen/Qwen3-0.6B"}]}]});
    shared_mount(&mut pod);
    apply(&s, json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "download-qwen", "namespace": "default",
        "annotations": {"instantstart.io/model-id": "Qwen/Qwen3-0.6B", "instantstart.io/destination": "models/Qwen/Qwen3-0.6B"}},
        "spec": {"backoffLimit": 3, "template": {"spec": pod}}})).await;
    adv(&s, timings::POD_START + 5.0);
    assert!(s.list_objects("is-demo-data", "", None).await.unwrap().entries.is_empty(), "nothing before the end");
    // ~1.2 GB at 250 MB/s plus the set-up.
    adv(&s, 60.0);
    let done = get(&s, "batch/v1", "Job", Some("default"), "download-qwen").await.unwrap();
    assert_eq!(done["status"]["conditions"][0]["type"], "Complete");
    let top = s.list_objects("is-demo-data", "", None).await.unwrap();
    assert_eq!(top.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["models/"]);
    let model = s.list_objects("is-demo-data", "models/Qwen/Qwen3-0.6B/", None).await.unwrap();
    let get_size = |k: &str| model.entries.iter().find(|e| e.key.ends_with(k)).and_then(|e| e.size_bytes);
    assert!(get_size("/config.json").is_some_and(|n| (500..2000).contains(&n)));
    assert!(get_size("/model.safetensors").is_some_and(|n| (1_200_000_000..1_300_000_000).contains(&n)));
    let pod = pods(&s, &[("job-name", "download-qwen")]).await[0]["metadata"]["name"].as_str().unwrap().to_string();
    let log = log_of(&s, &pod).await;
    assert!(
        log.last().unwrap().starts_with("copied 7 file(s), kept 0 already present, into /s3/models/Qwen/Qwen3-0.6B"),
        "{log:?}"
    );
    // The data outlives the Job, and keeps the bucket from being deleted.
    s.delete(&target(), &oref("batch/v1", "Job", Some("default"), "download-qwen")).await.unwrap();
    assert_eq!(s.list_objects("is-demo-data", "models/", None).await.unwrap().entries.len(), 1);
    assert_eq!(kind(s.delete_bucket("is-demo-data").await), ProviderErrorKind::Failed);
}

#[test]
fn repository_files_are_sized_from_the_parameter_count() {
    let files = crate::kube::training::pods::repository_files("meta-llama/Llama-3.1-70B-Instruct", false);
    let weights: u64 = files.iter().filter(|(f, _)| f.ends_with(".safetensors")).map(|(_, s)| s).sum();
    assert!((140_000_000_000..141_000_000_000).contains(&weights), "{weights}");
    assert!(files.iter().any(|(f, _)| f == "model-00029-of-00029.safetensors"), "{files:?}");
    assert!(files.iter().any(|(f, _)| f == "model.safetensors.index.json"));
    let data = crate::kube::training::pods::repository_files("openai/gsm8k", true);
    assert!(data.iter().any(|(f, _)| f.ends_with(".parquet")));
}

// ---------------------------------------------------------------- MLflow

async fn mlflow_server(s: &SimCloud) -> TrackingServer {
    let role = s
        .create_role(&CreateIamRole {
            name: "team-mlflow-role".into(),
            trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
            managed_policies: vec![],
            inline_policies: vec![],
            tags: tags(),
        })
        .await
        .unwrap();
    s.create_tracking_server(&CreateTrackingServer {
        region: REGION.into(),
        name: "team".into(),
        artifact_store_uri: "s3://is-demo-data/mlflow/team".into(),
        size: TrackingServerSize::Small,
        role_arn: role.arn,
        mlflow_version: None,
        tags: tags(),
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn tracking_servers_take_simulated_time_and_check_their_inputs() {
    let s = sim();
    let mut req = CreateTrackingServer {
        region: REGION.into(),
        name: "team".into(),
        artifact_store_uri: "s3://is-demo-data/mlflow".into(),
        size: TrackingServerSize::Small,
        role_arn: "arn:aws:iam::123456789012:role/missing".into(),
        mlflow_version: None,
        tags: tags(),
    };
    let e = s.create_tracking_server(&req).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest);
    assert!(e.message.contains("RoleArn"), "{e}");
    req.artifact_store_uri = "/local".into();
    assert!(s.create_tracking_server(&req).await.unwrap_err().message.contains("ArtifactStoreUri"));

    let created = mlflow_server(&s).await;
    assert_eq!(created.status, "Creating");
    assert!(created.arn.ends_with(":mlflow-tracking-server/team"), "{}", created.arn);
    req.artifact_store_uri = "s3://is-demo-data/mlflow".into();
    req.role_arn = s.get_role("team-mlflow-role").await.unwrap().unwrap().arn;
    let dup = s.create_tracking_server(&req).await.unwrap_err();
    assert_eq!(dup.kind, ProviderErrorKind::AlreadyExists, "{dup}");
    let arn = created.arn.clone();
    let e = s.search_runs(&arn, &RunQuery { experiment: None, max_results: 10 }).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Transient, "not reachable while Creating: {e}");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE - 1.0);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "Creating");
    adv(&s, 1.0);
    let up = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!((up.status.as_str(), up.state()), ("Created", ResourceState::Active));
    assert!(up.url.as_deref().is_some_and(|u| u.ends_with(".us-east-1.experiments.sagemaker.aws")));
    assert_eq!(s.list_tracking_servers(REGION).await.unwrap(), vec![up]);
    assert!(s.list_tracking_servers("us-west-2").await.unwrap().is_empty());
    assert_eq!(s.describe_tracking_server(REGION, "nope").await.unwrap(), None);
    assert!(s.search_runs(&arn, &RunQuery { experiment: None, max_results: 10 }).await.unwrap().is_empty());
}

#[tokio::test]
async fn runs_and_metrics_come_from_the_training_jobs_that_report_to_the_server() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let server = mlflow_server(&s).await;
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    let env = json!([{"name": "MLFLOW_TRACKING_URI", "value": server.arn}, {"name": "MLFLOW_EXPERIMENT_NAME", "value": "sft"}]);
    mlflow_writer(&s, &server, "tracked-mlflow").await;
    let mut tracked = hyperpod_job("tracked", 2, 100, 3, 1, json!([]));
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = env.clone();
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["serviceAccountName"] = json!("tracked-mlflow");
    apply(&s, tracked).await;
    apply(&s, hyperpod_job("untracked", 1, 100, 3, 1, json!([]))).await;
    // The MLflow env without credentials that may call the server: no run.
    let mut anonymous = hyperpod_job("anonymous", 1, 100, 3, 1, json!([]));
    anonymous["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = env;
    apply(&s, anonymous).await;
    adv(&s, timings::POD_START + 55.0);
    let q = RunQuery { experiment: None, max_results: 10 };
    let runs = s.search_runs(&server.arn, &q).await.unwrap();
    assert_eq!(runs.len(), 1, "one run per job that carries the MLflow env and may report: {runs:?}");
    let run = &runs[0];
    assert_eq!((run.name.as_str(), run.experiment.as_str(), run.status.as_str()), ("tracked", "sft", "RUNNING"));
    assert_eq!(run.params["world_size"], "2");
    let history = s.metric_history(&server.arn, &run.run_id, &["loss".into(), "throughput".into()]).await.unwrap();
    let log = log_of(&s, "tracked-workers-0").await;
    let logged: Vec<(u64, f64, f64)> = log.iter().filter_map(|l| crate::parse_training_log_line(l)).collect();
    assert!(logged.len() >= 4, "{log:?}");
    let plotted: Vec<(u64, f64, f64)> = history.series["loss"]
        .iter()
        .zip(&history.series["throughput"])
        .map(|(l, t)| (l.step as u64, l.value, t.value))
        .collect();
    assert_eq!(plotted, logged, "the plot is the log");
    assert_eq!(run.metrics["loss"], logged.last().unwrap().1);
    assert!(history.series["loss"].windows(2).all(|w| w[0].timestamp < w[1].timestamp));

    adv(&s, 100.0);
    let done = s.search_runs(&server.arn, &q).await.unwrap();
    assert_eq!(done[0].status, "FINISHED");
    assert!(done[0].end_time.is_some());
    let all = s.metric_history(&server.arn, &run.run_id, &[]).await.unwrap();
    assert_eq!(all.series["loss"].len(), 10);
    assert_eq!(all.series.keys().collect::<Vec<_>>(), ["loss", "throughput"]);
    let filtered = s.search_runs(&server.arn, &RunQuery { experiment: Some("sft".into()), max_results: 10 }).await;
    assert_eq!(filtered.unwrap().len(), 1);
    let missing = s.search_runs(&server.arn, &RunQuery { experiment: Some("rl".into()), max_results: 10 }).await;
    assert_eq!(missing.unwrap_err().kind, ProviderErrorKind::NotFound);
    let e = s.metric_history(&server.arn, "0000", &[]).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound);
}

#[tokio::test]
async fn helm_releases_install_settle_upgrade_fail_and_uninstall() {
    use instantstart_core::provider::{HelmReleases, KUBERAY_OPERATOR, ReleaseStatus};
    let s = sim();
    let target = KubeTarget::new(REGION, "demo");
    let (ns, rel) = (KUBERAY_OPERATOR.namespace, KUBERAY_OPERATOR.release);
    assert_eq!(kind(s.get_release(&target, ns, rel).await), ProviderErrorKind::NotFound, "no cluster, no API");
    base(&s).await;
    assert_eq!(s.get_release(&target, ns, rel).await.unwrap(), None);
    let r = s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await.unwrap();
    assert_eq!((r.status, r.revision, r.version.as_str()), (ReleaseStatus::PendingInstall, 1, "1.4.2"));
    assert_eq!(
        kind(s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await),
        ProviderErrorKind::Conflict,
        "Helm refuses a second operation while one is pending"
    );
    adv(&s, timings::HELM_RELEASE);
    let r = s.get_release(&target, ns, rel).await.unwrap().unwrap();
    assert!(r.is_deployed(&KUBERAY_OPERATOR.chart_ref()), "{r:?}");
    let r = s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await.unwrap();
    assert_eq!((r.status, r.revision), (ReleaseStatus::PendingUpgrade, 2));
    adv(&s, timings::HELM_RELEASE);

    let mut bad = KUBERAY_OPERATOR.spec();
    bad.chart.version = "latest".into();
    let e = s.install_or_upgrade(&target, &bad).await.unwrap_err();
    assert!(e.message.starts_with("chart.version:"), "{e}");

    s.set_faults(SimFaults::none().with("helm:upgrade", FaultMode::resource_fails("image pull failed")));
    s.install_or_upgrade(&target, &KUBERAY_OPERATOR.spec()).await.unwrap();
    adv(&s, timings::HELM_RELEASE);
    let r = s.get_release(&target, ns, rel).await.unwrap().unwrap();
    assert_eq!((r.status, r.revision), (ReleaseStatus::Failed, 3));
    assert!(r.description.contains("image pull failed"));

    s.uninstall(&target, ns, rel).await.unwrap();
    assert_eq!(s.get_release(&target, ns, rel).await.unwrap(), None);
    s.uninstall(&target, ns, rel).await.unwrap();

    // A vendored chart (the HyperPod dependencies) is recorded with its pinned source and values.
    s.set_faults(SimFaults::none());
    let hp = instantstart_core::provider::HYPERPOD_DEPENDENCIES;
    s.install_or_upgrade(&target, &hp.spec_for(REGION)).await.unwrap();
    adv(&s, timings::HELM_RELEASE);
    let r = s.get_release(&target, hp.namespace, hp.release).await.unwrap().unwrap();
    assert!(r.is_deployed(&hp.chart_ref()), "{r:?}");
    let recorded = s.read("test", |w, _| {
        Ok(w.kube.values().find_map(|kw| kw.helm_releases.get("kube-system/hyperpod-dependencies").cloned()))
    });
    let recorded = recorded.unwrap().expect("recorded");
    assert!(recorded.repository.contains(instantstart_core::provider::HYPERPOD_CLI_COMMIT), "{recorded:?}");
    assert_eq!(recorded.values["global"]["region"], REGION);
}

#[tokio::test]
async fn a_tracking_server_given_the_resource_fault_fails_half_way_with_its_reason() {
    let s = sim();
    s.set_faults(SimFaults::none().with(
        "sagemaker:CreateMlflowTrackingServer",
        FaultMode::resource_fails("S3 bucket is not accessible by the role"),
    ));
    let created = mlflow_server(&s).await;
    assert_eq!(created.status, "Creating");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE * timings::FAILURE_SHARE);
    let failed = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!(failed.status, "CreateFailed");
    assert_eq!(failed.state(), ResourceState::Failed { reason: "S3 bucket is not accessible by the role".into() });
    let e = s.search_runs(&failed.arn, &RunQuery { experiment: None, max_results: 1 }).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Failed, "a failed server has no MLflow API: {e}");
}

#[tokio::test]
async fn a_deleted_tracking_server_is_deleting_then_gone_and_so_are_its_runs() {
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let server = mlflow_server(&s).await;
    let e = s.delete_tracking_server(REGION, "team").await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Conflict, "not while Creating: {e}");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    mlflow_writer(&s, &server, "tracked-mlflow").await;
    let mut tracked = hyperpod_job("tracked", 2, 100, 3, 1, json!([]));
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "MLFLOW_TRACKING_URI", "value": server.arn}]);
    tracked["spec"]["replicaSpecs"][0]["template"]["spec"]["serviceAccountName"] = json!("tracked-mlflow");
    apply(&s, tracked).await;
    adv(&s, timings::POD_START + 30.0);
    let q = RunQuery { experiment: None, max_results: 10 };
    assert_eq!(s.search_runs(&server.arn, &q).await.unwrap().len(), 1);

    s.delete_tracking_server(REGION, "team").await.unwrap();
    let deleting = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!((deleting.status.as_str(), deleting.state()), ("Deleting", ResourceState::Deleting));
    assert_eq!(deleting.role_arn.as_deref(), Some(s.get_role("team-mlflow-role").await.unwrap().unwrap().arn.as_str()));
    assert_eq!(kind(s.search_runs(&server.arn, &q).await), ProviderErrorKind::Failed, "no MLflow API while Deleting");
    s.delete_tracking_server(REGION, "team").await.unwrap();
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE - 1.0);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "Deleting");
    adv(&s, 1.0);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap(), None);
    assert!(s.list_tracking_servers(REGION).await.unwrap().is_empty());
    assert_eq!(kind(s.search_runs(&server.arn, &q).await), ProviderErrorKind::NotFound);
    assert_eq!(kind(s.delete_tracking_server(REGION, "team").await), ProviderErrorKind::NotFound);
    assert_eq!(kind(s.delete_tracking_server("us-west-2", "team").await), ProviderErrorKind::NotFound);
    assert_eq!(s.calls("sagemaker:DeleteMlflowTrackingServer"), 5, "every call reaches the service");

    // A new server of the same name has the same ARN, but not the old server's runs.
    let role_arn = s.get_role("team-mlflow-role").await.unwrap().unwrap().arn;
    let again = s
        .create_tracking_server(&CreateTrackingServer {
            region: REGION.into(),
            name: "team".into(),
            artifact_store_uri: "s3://is-demo-data/mlflow/team".into(),
            size: TrackingServerSize::Small,
            role_arn,
            mlflow_version: None,
            tags: tags(),
        })
        .await
        .unwrap();
    assert_eq!(again.arn, server.arn);
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    assert!(s.search_runs(&server.arn, &q).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_deletion_given_the_resource_fault_stops_in_delete_failed_until_deleted_again() {
    let s = sim();
    mlflow_server(&s).await;
    adv(&s, timings::MLFLOW_TRACKING_SERVER_CREATE);
    s.set_faults(SimFaults::none().with(
        "sagemaker:DeleteMlflowTrackingServer",
        FaultMode::resource_fails("the artifact store could not be cleaned up"),
    ));
    s.delete_tracking_server(REGION, "team").await.unwrap();
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE * timings::FAILURE_SHARE);
    let failed = s.describe_tracking_server(REGION, "team").await.unwrap().unwrap();
    assert_eq!(failed.status, "DeleteFailed");
    assert_eq!(failed.state(), ResourceState::Failed { reason: "the artifact store could not be cleaned up".into() });
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "DeleteFailed", "it stays");

    s.set_faults(SimFaults::none());
    s.delete_tracking_server(REGION, "team").await.unwrap();
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap().unwrap().status, "Deleting");
    adv(&s, timings::MLFLOW_TRACKING_SERVER_DELETE);
    assert_eq!(s.describe_tracking_server(REGION, "team").await.unwrap(), None);
}

// ---------------------------------------------------------------- lifecycle scripts and the execution role

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

// ---------------------------------------------------------------- EKS Pod Identity

async fn pod_role(s: &SimCloud, name: &str, managed: &[&str], inline: Vec<(String, Value)>) -> IamRole {
    s.create_role(&CreateIamRole {
        name: name.into(),
        trust_policy: instantstart_core::workflow::steps::pod_identity_trust_policy(),
        managed_policies: managed.iter().map(|m| m.to_string()).collect(),
        inline_policies: inline,
        tags: tags(),
    })
    .await
    .expect("role")
}

fn association(namespace: &str, sa: &str, role_arn: &str, token: &str) -> CreatePodIdentityAssociation {
    CreatePodIdentityAssociation {
        region: REGION.into(),
        cluster: "demo".into(),
        namespace: namespace.into(),
        service_account: sa.into(),
        role_arn: role_arn.into(),
        client_request_token: token.into(),
        tags: tags(),
    }
}

/// The identity a training pod needs to report to `server`: the Pod Identity agent, the
/// server's writer role (as `workflow::mlflow` creates it) and the association of
/// `default/<sa>` with it.
async fn mlflow_writer(s: &SimCloud, server: &TrackingServer, sa: &str) {
    use instantstart_core::workflow::mlflow::{writer_role_name, writer_role_policies};
    addons(s, &["eks-pod-identity-agent"]).await;
    let (_, access) = writer_role_policies(REGION, &server.name, "s3://is-demo-data/mlflow");
    let r = match s.get_role(&writer_role_name(&server.name)).await.unwrap() {
        Some(r) => r,
        None => pod_role(s, &writer_role_name(&server.name), &[], vec![("w".into(), access)]).await,
    };
    s.create_pod_identity_association(&association("default", sa, &r.arn, &format!("tok-{sa}"))).await.unwrap();
}

async fn addons(s: &SimCloud, names: &[&str]) {
    for name in names {
        s.create_addon(&CreateEksAddon {
            region: REGION.into(),
            cluster: "demo".into(),
            name: name.to_string(),
            version: None,
            client_request_token: format!("tok-{name}"),
            tags: tags(),
            configuration_values: None,
        })
        .await
        .expect("addon");
    }
    adv(s, timings::ADDON_CREATE);
}

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

/// Every event of `cluster` at this moment, newest first, read page by page with `limit`.
async fn all_events(s: &SimCloud, cluster: &str, q: ClusterEventQuery, limit: u32) -> Vec<ClusterEvent> {
    let mut out = Vec::new();
    let mut q = ClusterEventQuery { limit: Some(limit), ..q };
    loop {
        let page = s.list_cluster_events(REGION, cluster, &q).await.unwrap();
        assert!(page.events.len() <= limit as usize);
        out.extend(page.events);
        match page.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return out,
        }
    }
}

#[tokio::test]
async fn hyperpod_events_follow_the_state_machine_and_page_newest_first() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let mut workers = group("workers", "ml.g5.2xlarge", 2, "us-east-1a");
    workers.deep_health_checks = DeepHealthChecks { stress: true, connectivity: false };
    s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", vec![(workers, sa.id.clone())])).await.unwrap();
    // At once: only the creation; nothing in the future is shown.
    let first = all_events(&s, "demo-hp", ClusterEventQuery::default(), 100).await;
    let texts: Vec<&str> = first.iter().map(|e| e.description.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Instance group workers is being created: 2 x ml.g5.2xlarge in us-east-1a",
            "Cluster demo-hp is being created: Creating"
        ]
    );
    adv(&s, timings::HYPERPOD_CREATE + timings::HYPERPOD_DEEP_HEALTH_CHECK);
    let c = s.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Active);
    let all = all_events(&s, "demo-hp", ClusterEventQuery::default(), 100).await;
    // Newest first; ids are UUIDs, unique.
    assert!(all.windows(2).all(|w| w[0].time >= w[1].time), "{all:#?}");
    assert!(all.iter().all(|e| e.event_id.len() == 36 && e.event_id.chars().filter(|c| *c == '-').count() == 4));
    let ids: std::collections::BTreeSet<&str> = all.iter().map(|e| e.event_id.as_str()).collect();
    assert_eq!(ids.len(), all.len());
    assert_eq!(all[0].description, "Cluster demo-hp is InService");
    let nodes = s.list_cluster_nodes(REGION, "demo-hp").await.unwrap();
    for n in &nodes {
        let mine: Vec<&str> = all
            .iter()
            .filter(|e| e.instance_id.as_deref() == Some(n.instance_id.as_str()))
            .map(|e| e.description.as_str())
            .rev()
            .collect();
        let id = &n.instance_id;
        assert_eq!(
            mine,
            [
                format!("Instance {id} (ml.g5.2xlarge) launched in us-east-1a: Pending"),
                format!("Deep health checks started on {id}: DeepHealthCheckInProgress"),
                format!("Deep health checks passed on {id}"),
                format!("Instance {id} is Running"),
            ]
        );
    }
    // Pages of 2 give the same events, in the same order, without repeats.
    assert_eq!(all_events(&s, "demo-hp", ClusterEventQuery::default(), 2).await, all);
    // Filters: resource type, group, node, time window.
    let q = |f: ClusterEventQuery| all_events(&s, "demo-hp", f, 100);
    let clusters =
        q(ClusterEventQuery { resource_type: Some(ClusterEventResource::Cluster), ..Default::default() }).await;
    assert!(clusters.iter().all(|e| e.resource_type == ClusterEventResource::Cluster) && clusters.len() == 2);
    let one = q(ClusterEventQuery { node_id: Some(nodes[0].instance_id.clone()), ..Default::default() }).await;
    assert_eq!(one.len(), 4);
    assert_eq!(
        q(ClusterEventQuery { instance_group: Some("workers".into()), ..Default::default() }).await.len(),
        all.len() - 2
    );
    let newest = all[0].time;
    assert_eq!(
        q(ClusterEventQuery { after: Some(newest), ..Default::default() }).await.len(),
        all.iter().filter(|e| e.time >= newest).count()
    );
    assert!(
        q(ClusterEventQuery {
            before: Some(all.last().unwrap().time - chrono::Duration::seconds(1)),
            ..Default::default()
        })
        .await
        .is_empty()
    );
    // A replace: a warning on the old instance, the new one's launch, later Running.
    let old = nodes[0].instance_id.clone();
    s.batch_node_action(REGION, "demo-hp", NodeAction::Replace, std::slice::from_ref(&old)).await.unwrap();
    let page = s
        .list_cluster_events(REGION, "demo-hp", &ClusterEventQuery { limit: Some(2), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(page.events[1].level, Some(ClusterEventLevel::Warn));
    assert_eq!(page.events[1].instance_id.as_deref(), Some(old.as_str()));
    assert!(page.events[1].description.starts_with(&format!("Instance {old} is being replaced by i-0")));
    adv(&s, timings::HYPERPOD_NODE_REPLACE);
    let newest = &s.list_cluster_events(REGION, "demo-hp", &ClusterEventQuery::default()).await.unwrap().events[0];
    assert!(newest.description.ends_with("is Running") && newest.instance_id.as_deref() != Some(old.as_str()));
    // Bad tokens and unknown clusters are refused as the service refuses them.
    let bad = ClusterEventQuery { cursor: Some("nonsense".into()), ..Default::default() };
    assert_eq!(kind(s.list_cluster_events(REGION, "demo-hp", &bad).await), ProviderErrorKind::InvalidRequest);
    assert_eq!(
        kind(s.list_cluster_events(REGION, "nope", &ClusterEventQuery::default()).await),
        ProviderErrorKind::NotFound
    );
    // Deletion is the last thing that happens.
    s.delete_hyperpod_cluster(REGION, "demo-hp").await.unwrap();
    adv(&s, 1.0);
    let last = &s.list_cluster_events(REGION, "demo-hp", &ClusterEventQuery::default()).await.unwrap().events[0];
    assert_eq!(last.description, "Cluster demo-hp is being deleted: Deleting");
}

#[tokio::test]
async fn hyperpod_failures_are_error_events_and_nothing_after_them() {
    let s = sim();
    let b = base(&s).await;
    let sc = compute_subnet(&s, &b, "us-east-1c", "10.0.16.0/20").await;
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(group("g", "ml.p4d.24xlarge", 1, "us-east-1c"), sc.id.clone())]))
        .await
        .unwrap();
    adv(&s, timings::HYPERPOD_CREATE * 2.0);
    let events = all_events(&s, "hp", ClusterEventQuery::default(), 100).await;
    assert_eq!(events[0].level, Some(ClusterEventLevel::Error), "{events:#?}");
    assert!(events[0].description.starts_with("Cluster hp failed: InsufficientInstanceCapacity"), "{events:#?}");
    assert!(!events.iter().any(|e| e.description.contains("InService")));
}

#[tokio::test]
async fn a_node_in_detail_and_unknown_nodes() {
    let s = sim();
    let b = base(&s).await;
    let sa = compute_subnet(&s, &b, "us-east-1a", "10.0.16.0/20").await;
    let mut spot = group("spot", "ml.g5.2xlarge", 1, "us-east-1a");
    spot.capacity = CapacitySpec::Spot;
    s.create_hyperpod_cluster(&hp_req(&b, "demo-hp", vec![(spot, sa.id.clone())])).await.unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    let n = &s.list_cluster_nodes(REGION, "demo-hp").await.unwrap()[0];
    let d = s.describe_cluster_node(REGION, "demo-hp", &n.instance_id).await.unwrap().expect("node");
    assert_eq!((d.instance_group.as_str(), d.status.as_str()), ("spot", "Running"));
    assert_eq!(d.capacity_type.as_deref(), Some("Spot"));
    assert_eq!(d.availability_zone.as_deref(), Some("us-east-1a"));
    assert!(d.availability_zone_id.is_some());
    let ip: std::net::Ipv4Addr = d.private_ip.as_deref().unwrap().parse().unwrap();
    assert!(net("10.0.16.0/20").contains(&ip), "{ip}");
    assert_eq!(d.private_dns, Some(format!("ip-{}.ec2.internal", ip.to_string().replace('.', "-"))));
    assert_eq!(d.lifecycle_script, Some(script()));
    assert_eq!(d.threads_per_core, Some(1));
    assert!(d.launch_time.is_some() && d.current_image_id.as_deref().is_some_and(|a| a.starts_with("ami-")));
    // The same read twice is the same node.
    assert_eq!(s.describe_cluster_node(REGION, "demo-hp", &n.instance_id).await.unwrap(), Some(d));
    assert_eq!(s.describe_cluster_node(REGION, "demo-hp", "i-00000000000000000").await.unwrap(), None);
    assert_eq!(kind(s.describe_cluster_node(REGION, "nope", &n.instance_id).await), ProviderErrorKind::NotFound);
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

#[tokio::test]
async fn quotas_training_plans_and_offerings_of_a_region() {
    let s = sim();
    let b = base(&s).await;
    // Every HyperPod type has a quota, the same one the preflight reads.
    let quotas = s.hyperpod_instance_quotas(REGION).await.unwrap();
    assert_eq!(quotas.len(), instantstart_core::instance_types::CLUSTER_INSTANCE_TYPES.len());
    for t in ["ml.g5.2xlarge", "ml.p5.48xlarge", "ml.m5.xlarge"] {
        let listed = quotas.iter().find(|q| q.name == format!("{t} for cluster usage")).cloned();
        assert_eq!(listed, s.hyperpod_instance_quota(REGION, t).await.unwrap(), "{t}");
    }
    s.set_quota(REGION, "ml.p5.48xlarge", 8).unwrap();
    let p5 = s.hyperpod_instance_quotas(REGION).await.unwrap();
    assert_eq!(p5.iter().find(|q| q.name.starts_with("ml.p5.48xlarge ")).map(|q| q.value), Some(8));
    assert_eq!(kind(s.hyperpod_instance_quotas("Not_A_Region").await), ProviderErrorKind::InvalidRequest);

    // A plan, used by a cluster: listed with its use.
    let plan = s.add_training_plan(REGION, "p5-plan", "ml.p5.48xlarge", 4, "us-east-1b").unwrap();
    let sb = compute_subnet(&s, &b, "us-east-1b", "10.0.16.0/20").await;
    let mut g = group("reserved", "ml.p5.48xlarge", 3, "us-east-1b");
    g.capacity = CapacitySpec::TrainingPlan { arn: plan.arn.clone() };
    s.create_hyperpod_cluster(&hp_req(&b, "hp", vec![(g, sb.id.clone())])).await.unwrap();
    let plans = s.list_training_plans(REGION).await.unwrap();
    assert_eq!(plans.len(), 1);
    let p = &plans[0];
    assert_eq!(
        (p.name.as_str(), p.status.as_str(), p.availability_zone.as_deref(), p.instance_type.as_deref()),
        ("p5-plan", "Active", Some("us-east-1b"), Some("ml.p5.48xlarge"))
    );
    assert_eq!((p.total_instance_count, p.in_use_instance_count, p.available_instance_count), (4, Some(3), Some(1)));
    assert!(p.start_time < p.end_time && p.target_resources == ["hyperpod-cluster"]);
    assert!(s.list_training_plans("eu-west-1").await.unwrap().is_empty());

    // Offerings: only AZs that offer the type, from the next midnight, as long as asked.
    let offered = s.instance_type_offerings(REGION).await.unwrap();
    let q = OfferingQuery {
        instance_type: "ml.p5.48xlarge".into(),
        instance_count: 8,
        duration_hours: 48,
        start_after: None,
        end_before: None,
    };
    let offers = s.search_training_plan_offerings(REGION, &q).await.unwrap();
    assert!(offers.len() >= 2, "{offers:?}");
    for o in &offers {
        let az = o.availability_zone.as_deref().unwrap();
        assert!(offered.iter().any(|x| x.availability_zone == az && x.instance_type == "ml.p5.48xlarge"), "{az}");
        assert_eq!((o.instance_count, o.duration_hours), (8, Some(48)));
        let (start, end) = (o.start_time.unwrap(), o.end_time.unwrap());
        assert_eq!(end - start, chrono::Duration::hours(48));
        assert_eq!(start.format("%H:%M:%S").to_string(), "00:00:00");
        assert!(
            o.offering_id.starts_with("tpo-") && o.upfront_fee.is_some() && o.currency_code.as_deref() == Some("USD")
        );
        assert_eq!(o.target_resources, ["hyperpod-cluster"]);
    }
    // The window bounds them: ending by the first offering's end leaves only it; a window
    // shorter than the duration leaves none; a later start moves them.
    let tight = OfferingQuery { end_before: offers[0].end_time, ..q.clone() };
    assert_eq!(s.search_training_plan_offerings(REGION, &tight).await.unwrap(), offers[..1]);
    let start = offers[0].start_time.unwrap();
    let short =
        OfferingQuery { start_after: Some(start), end_before: Some(start + chrono::Duration::hours(47)), ..q.clone() };
    assert!(s.search_training_plan_offerings(REGION, &short).await.unwrap().is_empty());
    let later = OfferingQuery { start_after: Some(start + chrono::Duration::days(10)), ..q.clone() };
    let moved = s.search_training_plan_offerings(REGION, &later).await.unwrap();
    assert!(moved.iter().all(|o| o.start_time.unwrap() >= start + chrono::Duration::days(10)), "{moved:?}");
    // Only what SageMaker sells: 1, 2, 4, … 64 instances, whole days up to 182.
    for (count, hours) in [(3, 48), (128, 48), (8, 36), (8, 183 * 24)] {
        let unsold = OfferingQuery { instance_count: count, duration_hours: hours, ..q.clone() };
        assert!(s.search_training_plan_offerings(REGION, &unsold).await.unwrap().is_empty(), "{count} x {hours}h");
    }
    // Capacity: 64 per AZ, minus what plans already reserve there (4 in us-east-1b).
    let sixty_four = OfferingQuery { instance_count: 64, ..q.clone() };
    let zones: Vec<_> = s
        .search_training_plan_offerings(REGION, &sixty_four)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|o| o.availability_zone)
        .collect();
    assert!(!zones.is_empty() && !zones.iter().any(|z| z == "us-east-1b"), "{zones:?}");
    // What SageMaker refuses: a type no plan reserves.
    let bad = OfferingQuery { instance_type: "ml.g5.2xlarge".into(), ..q };
    assert_eq!(kind(s.search_training_plan_offerings(REGION, &bad).await), ProviderErrorKind::InvalidRequest);
}

#[tokio::test]
async fn metrics_follow_the_gpus_jobs_use_and_an_in_place_restart_idles_them() {
    use instantstart_core::provider::{Metric, MetricsSource, MetricsWindow};
    let s = sim();
    gpu_world(&s, 2).await;
    shared_bucket(&s).await;
    let target = KubeTarget::new(REGION, "demo");
    let w = MetricsWindow { since_seconds: 120, step_seconds: 5 };
    apply(&s, hyperpod_job("watch", 1, 600, 3, 1, json!([]))).await;
    adv(&s, timings::POD_START + 60.0);

    let latest = |set: &instantstart_core::provider::SeriesSet, m: Metric| {
        set.series.iter().find(|x| x.metric == m).and_then(|x| x.latest()).unwrap_or(-1.0)
    };
    let job = s.job_metrics(&target, "default", "watch", &w).await.unwrap();
    assert_eq!(job.series.iter().map(|x| x.metric).collect::<Vec<_>>(), Metric::ALL.to_vec());
    assert!((85.0..=98.0).contains(&latest(&job, Metric::GpuUtilization)), "{job:?}");
    assert!(latest(&job, Metric::Throughput) > 1000.0, "{job:?}");
    assert_eq!(job.gpu_memory_total_mib, Some(24_576.0), "an A10G");
    // The log and the series agree: the loss is that of one of the newest logged steps (the
    // grid's last point may be a moment before the newest line).
    let log = log_of(&s, "watch-workers-0").await;
    let logged: Vec<f64> = log.iter().filter_map(|l| crate::parse_training_log_line(l)).map(|x| x.1).collect();
    assert!(logged.iter().rev().take(2).any(|l| *l == latest(&job, Metric::Loss)), "{logged:?} {job:?}");
    // Deterministic: the same read gives the same numbers.
    assert_eq!(s.job_metrics(&target, "default", "watch", &w).await.unwrap().series, job.series);

    // The job's node is busy, the other idle; a node without the job reads 0 everywhere.
    let p = pods(&s, &[("sagemaker.amazonaws.com/job-name", "watch")]).await;
    let busy = p[0]["spec"]["nodeName"].as_str().unwrap().to_string();
    let nodes = s
        .list(
            &target,
            &instantstart_core::provider::ListParams {
                api_version: "v1".into(),
                kind: "Node".into(),
                namespace: None,
                labels: vec![],
            },
        )
        .await
        .unwrap();
    let idle = nodes.iter().filter_map(|n| n.0["metadata"]["name"].as_str()).find(|n| *n != busy).unwrap().to_string();
    let on_busy = s.node_metrics(&target, &busy, &w).await.unwrap();
    assert_eq!(on_busy.series.len(), 2, "one GPU: utilization and memory");
    assert!(on_busy.series.iter().all(|x| x.gpu == Some(0) && x.node.as_deref() == Some(busy.as_str())));
    assert!(latest(&on_busy, Metric::GpuUtilization) >= 85.0);
    let on_idle = s.node_metrics(&target, &idle, &w).await.unwrap();
    assert!(on_idle.series.iter().all(|x| !x.points.is_empty() && x.points.iter().all(|p| p[1] == 0.0)), "{on_idle:?}");
    assert_eq!(s.node_metrics(&target, "nope", &w).await.unwrap_err().kind, ProviderErrorKind::NotFound);

    // An in-place restart: the GPUs idle and their memory is freed, no step is logged
    // (throughput 0); then it resumes. Seen in the window once it is over.
    s.set_faults(SimFaults::none().with_process_fault(crate::ProcessFault::on("watch")));
    adv(&s, timings::PROCESS_RESTART + 40.0);
    let after = s.job_metrics(&target, "default", "watch", &w).await.unwrap();
    let values = |set: &instantstart_core::provider::SeriesSet, m: Metric| -> Vec<f64> {
        set.series.iter().find(|x| x.metric == m).map(|x| x.points.iter().map(|p| p[1]).collect()).unwrap_or_default()
    };
    // A dip: a zero after a busy point, then busy again.
    let dip = |v: &[f64]| {
        let first = v.iter().position(|x| *x > 0.0);
        let zero = first.and_then(|f| v[f..].iter().position(|x| *x == 0.0).map(|z| f + z));
        zero.is_some_and(|z| v[z..].iter().any(|x| *x > 0.0))
    };
    for m in [Metric::GpuUtilization, Metric::GpuMemoryUsed, Metric::Throughput] {
        assert!(dip(&values(&after, m)), "{m:?}: {:?}", values(&after, m));
    }
    assert!(values(&after, Metric::GpuUtilization).iter().filter(|x| **x == 0.0).count() >= 3, "{after:?}");
    assert!(dip(&values(&s.node_metrics(&target, &busy, &w).await.unwrap(), Metric::GpuMemoryUsed)));
    assert!(latest(&after, Metric::Throughput) > 1000.0 && latest(&after, Metric::GpuUtilization) >= 85.0);
    assert!(s.stats().get("k8s:Metrics").copied().unwrap_or(0) >= 6, "every read is counted");
}

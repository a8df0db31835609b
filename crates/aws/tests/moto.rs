//! The AWS adapter against a local moto server (PyPI `moto[server]`), one server per test on a
//! free 127.0.0.1 port, killed when the test ends.
//!
//! moto covers STS, S3, IAM, the EC2 network calls, EKS clusters, SageMaker HyperPod
//! clusters/nodes and AMP workspaces, with no status progression (everything is ready at once). EKS add-ons,
//! access entries, SageMaker UpdateCluster and the batch node actions are not implemented by
//! moto; the adapter's requests for those are tested at the SDK boundary (`src/sdk_tests.rs`).
//!
//! `cargo xtask test` installs moto into `target/test-venv`; `MOTO_SERVER` overrides the
//! binary's path. A missing moto fails the tests (nothing is skipped).

use async_trait::async_trait;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_sts::config::Credentials;
use aws_smithy_types::retry::RetryConfig;
use instantstart_aws::AwsProvider;
use instantstart_core::engine::{Engine, EngineConfig, Outcome};
use instantstart_core::operation::{Actor, Face, OperationKind, OperationStatus};
use instantstart_core::provider::*;
use instantstart_core::store::Store;
use instantstart_core::subnet::plan_new_vpc;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REGION: &str = "us-east-1";

/// A moto server killed (and reaped) on drop.
struct Moto {
    child: Child,
    url: String,
    _log_dir: tempfile::TempDir,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_binary() -> PathBuf {
    if let Ok(p) = std::env::var("MOTO_SERVER") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|_| root.join("target"));
    target.join("test-venv/bin/moto_server")
}

impl Moto {
    fn start() -> Moto {
        let bin = moto_binary();
        assert!(
            bin.exists(),
            "moto_server not found at {}: run `cargo xtask test` (it installs moto[server] into target/test-venv), \
             or set MOTO_SERVER to a moto_server binary",
            bin.display()
        );
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port");
        let log_dir = tempfile::tempdir().expect("temp dir");
        let log = std::fs::File::create(log_dir.path().join("moto.log")).expect("log file");
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            // AWS managed policies (AmazonEKSClusterPolicy, …) exist only with this.
            .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let moto = Moto { child, url: format!("http://127.0.0.1:{port}"), _log_dir: log_dir };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(30), "moto_server did not listen on {port} within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// The adapter pointed at this server: dummy credentials, no SDK retries (moto answers
    /// unimplemented operations with 500s).
    async fn provider(&self) -> AwsProvider {
        let conf = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .retry_config(RetryConfig::disabled())
            .load()
            .await;
        AwsProvider::from_sdk_config(conf)
    }

    /// The raw SDK config, for setting up state the adapter does not create (foreign resources).
    async fn sdk(&self) -> aws_config::SdkConfig {
        aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(REGION))
            .endpoint_url(&self.url)
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .retry_config(RetryConfig::disabled())
            .load()
            .await
    }
}

fn tags(cluster: &str) -> Tags {
    ownership_tags(cluster, "op-test")
}

fn network_request(cluster: &str) -> CreateNetwork {
    let azs = vec!["us-east-1a".to_string(), "us-east-1b".to_string()];
    CreateNetwork {
        region: REGION.into(),
        name: format!("{cluster}-vpc"),
        cidr: "10.0.0.0/16".parse().expect("cidr"),
        subnets: plan_new_vpc("10.0.0.0/16".parse().expect("cidr"), &azs).expect("plan"),
        tags: tags(cluster),
    }
}

#[tokio::test]
async fn identity_zones_and_offerings() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let id = p.caller_identity().await.unwrap();
    assert_eq!(id.account, "123456789012");
    assert!(id.arn.starts_with("arn:aws:"), "{}", id.arn);
    let zones = p.availability_zones(REGION).await.unwrap();
    assert!(zones.iter().any(|z| z.name == "us-east-1a" && z.zone_id.starts_with("use1-az")), "{zones:?}");
    let offerings = p.instance_type_offerings(REGION).await.unwrap();
    assert!(
        offerings.iter().any(|o| o.instance_type == "ml.p5.48xlarge" && o.availability_zone.starts_with("us-east-1")),
        "{offerings:?}"
    );
    assert!(offerings.iter().all(|o| o.instance_type.starts_with("ml.")));
    assert!(
        offerings.iter().any(|o| o.instance_type == "ml.g5.8xlarge"),
        "every ClusterInstanceType is asked for (in chunks), not only a hand-kept few"
    );
}

/// The rows of the simulator's generated table (crates/sim/src/ec2_specs/generated.rs), read
/// as text: `(name, vcpus, memory, accelerators, accelerator, efa, efa_only)`.
fn sim_rows() -> Vec<instantstart_core::instance_types::InstanceTypeInfo> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sim/src/ec2_specs/generated.rs");
    let text = std::fs::read_to_string(&path).expect("the simulator's generated specs");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("(\"ml.")?.strip_suffix("),").map(|r| format!("ml.{r}")))
        .map(|row| {
            let f: Vec<String> = row.split(", ").map(|x| x.trim_matches('"').to_string()).collect();
            let n = |i: usize| f[i].parse::<u32>().unwrap();
            instantstart_core::instance_types::InstanceTypeInfo {
                name: f[0].clone(),
                vcpus: n(1),
                memory_gib: n(2),
                accelerators: n(3),
                accelerator: f[4].clone(),
                efa_interfaces: n(5),
                efa_only_supported: f[6] == "true",
            }
        })
        .collect()
}

/// EC2's `DescribeInstanceTypes` through the real adapter (moto answers from its record of
/// EC2's data): the specs map as the simulator's generated table says, type for type, so the
/// simulator and AWS give validation the same facts.
#[tokio::test]
async fn instance_type_specs_are_ec2s_and_match_the_simulator() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let specs = p.instance_type_specs(REGION).await.unwrap();
    let g5 = specs.iter().find(|i| i.name == "ml.g5.12xlarge").expect("g5.12xlarge is described");
    assert_eq!((g5.accelerators, g5.accelerator.as_str(), g5.efa_interfaces), (4, "nvidia-a10g", 1));
    assert!(!specs.iter().any(|i| i.name == "ml.p6e-gb200.36xlarge"), "EC2 does not describe it");
    let mut sim = sim_rows();
    sim.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(sim.len() >= 200, "{} rows", sim.len());
    assert_eq!(specs, sim, "the adapter's mapping of EC2's answer and the simulator's table disagree");
    // Cached per region: a second read answers the same without asking again.
    assert_eq!(p.instance_type_specs(REGION).await.unwrap(), specs);
}

#[tokio::test]
async fn network_is_created_idempotently_described_and_deleted() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let req = network_request("net");
    assert_eq!(p.find_vpc(REGION, &req.name).await.unwrap(), None);
    let n = p.create_network(&req).await.unwrap();
    assert_eq!(n.state, ResourceState::Active, "moto's NAT gateway is available at once");
    assert_eq!(n.vpc.name.as_deref(), Some("net-vpc"));
    assert!(is_owned(&n.vpc.tags, "net"));
    assert_eq!(n.vpc.cidrs, vec!["10.0.0.0/16".parse::<ipnet::Ipv4Net>().unwrap()]);
    let public: Vec<&Subnet> = n.subnets.iter().filter(|s| s.public).collect();
    let private: Vec<&Subnet> = n.subnets.iter().filter(|s| !s.public).collect();
    assert_eq!((public.len(), private.len()), (2, 2), "{:#?}", n.subnets);
    assert!(public.iter().all(|s| s.name.as_deref().is_some_and(|x| x.starts_with("net-vpc-public-"))));
    assert!(private.iter().all(|s| s.tags.get("kubernetes.io/role/internal-elb").map(String::as_str) == Some("1")));
    let sg = n.security_group_id.clone().expect("EFA security group");

    // Calling create again adopts every piece: same VPC, same subnets, nothing added.
    let again = p.create_network(&req).await.unwrap();
    assert_eq!(again.vpc.id, n.vpc.id);
    let ids = |n: &Network| {
        let mut v: Vec<String> = n.subnets.iter().map(|s| s.id.clone()).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&again), ids(&n));
    assert_eq!(again.security_group_id.as_deref(), Some(sg.as_str()));
    let ec2 = aws_sdk_ec2::Client::new(&moto.sdk().await);
    let vpc_filter = aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&n.vpc.id).build();
    let nats = ec2.describe_nat_gateways().filter(vpc_filter.clone()).send().await.unwrap();
    assert_eq!(nats.nat_gateways().len(), 1, "one NAT gateway");
    let igws = ec2
        .describe_internet_gateways()
        .filters(aws_sdk_ec2::types::Filter::builder().name("attachment.vpc-id").values(&n.vpc.id).build())
        .send()
        .await
        .unwrap();
    assert_eq!(igws.internet_gateways().len(), 1, "one internet gateway");
    // The EFA group lets all traffic in from and out to itself.
    let groups = ec2.describe_security_groups().group_ids(&sg).send().await.unwrap();
    let g = &groups.security_groups()[0];
    let self_rule = |perms: &[aws_sdk_ec2::types::IpPermission]| {
        perms.iter().any(|x| {
            x.ip_protocol() == Some("-1") && x.user_id_group_pairs().iter().any(|u| u.group_id() == Some(sg.as_str()))
        })
    };
    assert!(self_rule(g.ip_permissions()) && self_rule(g.ip_permissions_egress()), "{g:#?}");
    // Private subnets route through the NAT gateway, public ones through the internet gateway.
    let rts = ec2.describe_route_tables().filters(vpc_filter).send().await.unwrap();
    let default_target = |subnet: &str| {
        rts.route_tables()
            .iter()
            .find(|r| r.associations().iter().any(|a| a.subnet_id() == Some(subnet)))
            .and_then(|r| r.routes().iter().find(|x| x.destination_cidr_block() == Some("0.0.0.0/0")))
            .map(|x| x.nat_gateway_id().or(x.gateway_id()).unwrap_or_default().to_string())
    };
    for s in &private {
        assert!(default_target(&s.id).is_some_and(|t| t.starts_with("nat-")), "private {}", s.id);
    }
    for s in &public {
        assert!(default_target(&s.id).is_some_and(|t| t.starts_with("igw-")), "public {}", s.id);
    }
    // One S3 gateway endpoint, ours, on the private route table, also after the second create.
    let endpoint = n.s3_endpoint_id.clone().expect("S3 gateway endpoint");
    assert_eq!(again.s3_endpoint_id.as_deref(), Some(endpoint.as_str()));
    let endpoints = ec2
        .describe_vpc_endpoints()
        .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&n.vpc.id).build())
        .send()
        .await
        .unwrap();
    assert_eq!(endpoints.vpc_endpoints().len(), 1, "{endpoints:#?}");
    let e = &endpoints.vpc_endpoints()[0];
    assert_eq!(e.vpc_endpoint_id(), Some(endpoint.as_str()));
    assert_eq!(e.service_name(), Some("com.amazonaws.us-east-1.s3"));
    assert_eq!(e.vpc_endpoint_type(), Some(&aws_sdk_ec2::types::VpcEndpointType::Gateway));
    let private_rt = rts
        .route_tables()
        .iter()
        .find(|r| r.associations().iter().any(|a| a.subnet_id() == Some(private[0].id.as_str())))
        .and_then(|r| r.route_table_id())
        .unwrap();
    assert_eq!(e.route_table_ids(), [private_rt.to_string()]);
    let endpoint_tags: Tags = e.tags().iter().map(|t| (t.key().unwrap().into(), t.value().unwrap().into())).collect();
    assert!(is_owned(&endpoint_tags, "net"), "{endpoint_tags:?}");

    // A /20 compute subnet joins the private route table.
    let compute = p
        .create_subnet(&CreateSubnet {
            region: REGION.into(),
            vpc_id: n.vpc.id.clone(),
            name: "net-compute-us-east-1a".into(),
            cidr: "10.0.16.0/20".parse().unwrap(),
            availability_zone: "us-east-1a".into(),
            tags: tags("net"),
        })
        .await
        .unwrap();
    assert_eq!(compute.name.as_deref(), Some("net-compute-us-east-1a"));
    let described = p.describe_network(REGION, &n.vpc.id).await.unwrap();
    let c = described.subnets.iter().find(|s| s.id == compute.id).expect("compute subnet listed");
    assert!(!c.public);
    // Creating it again adopts it.
    let same = p
        .create_subnet(&CreateSubnet {
            region: REGION.into(),
            vpc_id: n.vpc.id.clone(),
            name: "net-compute-us-east-1a".into(),
            cidr: "10.0.16.0/20".parse().unwrap(),
            availability_zone: "us-east-1a".into(),
            tags: tags("net"),
        })
        .await
        .unwrap();
    assert_eq!(same.id, compute.id);
    p.delete_subnet(REGION, &compute.id).await.unwrap();
    assert_eq!(p.delete_subnet(REGION, &compute.id).await.unwrap_err().kind, ProviderErrorKind::NotFound);

    p.delete_network(REGION, &n.vpc.id).await.unwrap();
    assert_eq!(p.describe_network(REGION, &n.vpc.id).await.unwrap_err().kind, ProviderErrorKind::NotFound);
    assert_eq!(p.find_vpc(REGION, &req.name).await.unwrap(), None);
    let left = ec2.describe_vpc_endpoints().vpc_endpoint_ids(&endpoint).send().await;
    let gone = match left {
        Ok(out) => {
            out.vpc_endpoints().iter().all(|e| e.state().is_some_and(|s| s.as_str().eq_ignore_ascii_case("deleted")))
        }
        Err(_) => true,
    };
    assert!(gone, "the endpoint was deleted with the network");
}

#[tokio::test]
async fn an_interrupted_network_is_resumed_and_a_foreign_one_refused() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let ec2 = aws_sdk_ec2::Client::new(&moto.sdk().await);
    let tag_spec = |t: &Tags| {
        aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(aws_sdk_ec2::types::ResourceType::Vpc)
            .set_tags(Some(t.iter().map(|(k, v)| aws_sdk_ec2::types::Tag::builder().key(k).value(v).build()).collect()))
            .build()
    };
    // Our VPC, created before a crash: no completion tag yet.
    let mut ours = tags("half");
    ours.insert("Name".into(), "half-vpc".into());
    let vpc = ec2.create_vpc().cidr_block("10.1.0.0/16").tag_specifications(tag_spec(&ours)).send().await.unwrap();
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).unwrap().to_string();
    assert_eq!(p.find_vpc(REGION, "half-vpc").await.unwrap(), None, "an incomplete network is not reported as found");
    assert_eq!(p.describe_network(REGION, &vpc_id).await.unwrap().state, ResourceState::Creating);
    let mut req = network_request("half");
    req.cidr = "10.1.0.0/16".parse().unwrap();
    req.subnets = plan_new_vpc(req.cidr, &["us-east-1a".into(), "us-east-1b".into()]).unwrap();
    let n = p.create_network(&req).await.unwrap();
    assert_eq!(n.vpc.id, vpc_id, "the existing VPC was adopted");
    assert_eq!(n.state, ResourceState::Active);
    assert!(n.s3_endpoint_id.is_some(), "the resumed network got its S3 endpoint");
    assert_eq!(p.find_vpc(REGION, "half-vpc").await.unwrap().map(|v| v.id), Some(vpc_id));

    // Someone else's VPC with our name.
    let foreign = Tags::from([("Name".to_string(), "other-vpc".to_string())]);
    let vpc = ec2.create_vpc().cidr_block("10.2.0.0/16").tag_specifications(tag_spec(&foreign)).send().await.unwrap();
    let foreign_id = vpc.vpc().and_then(|v| v.vpc_id()).unwrap().to_string();
    let found = p.find_vpc(REGION, "other-vpc").await.unwrap().expect("foreign VPC is reported");
    assert_eq!(found.id, foreign_id);
    assert!(!is_owned(&found.tags, "other"));
    let mut req = network_request("other");
    req.cidr = "10.2.0.0/16".parse().unwrap();
    req.subnets = plan_new_vpc(req.cidr, &["us-east-1a".into(), "us-east-1b".into()]).unwrap();
    let err = p.create_network(&req).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::AlreadyExists, "{err}");
    // And it is never deleted.
    let err = p.delete_network(REGION, &foreign_id).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest, "{err}");
}

fn trust(service: &str) -> Value {
    json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})
}

#[tokio::test]
async fn iam_roles_and_the_oidc_provider() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let req = CreateIamRole {
        name: "iam-hyperpod-exec-role".into(),
        trust_policy: trust("sagemaker.amazonaws.com"),
        managed_policies: vec!["arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy".into()],
        inline_policies: vec![(
            "instantstart-shared-bucket".into(),
            instantstart_core::workflow::create_cluster::hyperpod_bucket_policy("iam-bucket"),
        )],
        tags: tags("iam"),
    };
    assert_eq!(p.get_role(&req.name).await.unwrap(), None);
    let role = p.create_role(&req).await.unwrap();
    assert_eq!(role.arn, "arn:aws:iam::123456789012:role/iam-hyperpod-exec-role");
    let got = p.get_role(&req.name).await.unwrap().expect("role");
    assert!(is_owned(&got.tags, "iam"), "{:?}", got.tags);
    // Creating again adopts our role.
    assert_eq!(p.create_role(&req).await.unwrap().arn, role.arn);
    let iam = aws_sdk_iam::Client::new(&moto.sdk().await);
    let attached = iam.list_attached_role_policies().role_name(&req.name).send().await.unwrap();
    assert_eq!(attached.attached_policies().len(), 1);
    let inline =
        iam.get_role_policy().role_name(&req.name).policy_name("instantstart-shared-bucket").send().await.unwrap();
    assert!(inline.policy_document().contains("iam-bucket"));

    // Another cluster's role with the same name is not adopted.
    let mut theirs = req.clone();
    theirs.tags = tags("someone-else");
    assert_eq!(p.create_role(&theirs).await.unwrap_err().kind, ProviderErrorKind::AlreadyExists);
    // Over-broad policies are refused before anything is sent.
    let mut broad = req.clone();
    broad.name = "iam-broad".into();
    broad.managed_policies = vec!["arn:aws:iam::aws:policy/AdministratorAccess".into()];
    assert_eq!(p.create_role(&broad).await.unwrap_err().kind, ProviderErrorKind::InvalidRequest);
    assert_eq!(p.get_role("iam-broad").await.unwrap(), None);

    // Deletion detaches and deletes the policies first.
    p.delete_role(&req.name).await.unwrap();
    assert_eq!(p.get_role(&req.name).await.unwrap(), None);
    assert_eq!(p.delete_role(&req.name).await.unwrap_err().kind, ProviderErrorKind::NotFound);

    // The cluster's IAM OIDC provider.
    let issuer = "https://oidc.eks.us-east-1.amazonaws.com/id/0123456789ABCDEF";
    assert_eq!(p.get_oidc_provider(issuer).await.unwrap(), None);
    let o = p.create_oidc_provider(issuer, &tags("iam")).await.unwrap();
    assert_eq!(o.arn, "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/0123456789ABCDEF");
    let got = p.get_oidc_provider(issuer).await.unwrap().expect("provider");
    assert_eq!(got.arn, o.arn);
    assert!(is_owned(&got.tags, "iam"), "{:?}", got.tags);
    assert_eq!(p.create_oidc_provider(issuer, &tags("iam")).await.unwrap().arn, o.arn, "ours is adopted");
    assert_eq!(
        p.create_oidc_provider(issuer, &tags("someone-else")).await.unwrap_err().kind,
        ProviderErrorKind::AlreadyExists
    );
}

/// `GetRole`'s policy document: IAM returns it URL-encoded (RFC 3986).
fn policy_document(encoded: &str) -> Value {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    serde_json::from_slice(&out).unwrap_or_else(|e| panic!("policy document {encoded}: {e}"))
}

/// A server killed between `iam:CreateRole` and the attach/put calls after it leaves a role
/// tagged as ours without its policies. The role step (`EnsureRole`, as the engine drives it
/// on resume: observe, then poll) adopts it and completes it through
/// `ensure_role_policies` — trust policy replaced, managed policy attached, inline policy put,
/// read back through the IAM API — without a second `CreateRole`.
#[tokio::test]
async fn a_role_left_without_its_policies_is_completed_not_created_again() {
    use instantstart_core::engine::{Observation, Progress, StepContext, StepExecutor};
    use instantstart_core::operation::OperationId;
    use instantstart_core::workflow::create_cluster::hyperpod_bucket_policy;
    use instantstart_core::workflow::steps::EnsureRole;

    let moto = Moto::start();
    let cloud = Arc::new(MotoCloud::new(Arc::new(moto.provider().await)));
    let iam = aws_sdk_iam::Client::new(&moto.sdk().await);
    let name = "crash-hyperpod-exec-role";
    // The crash window: CreateRole acted (our tags, here an outdated trust policy), nothing else.
    let mut create =
        iam.create_role().role_name(name).assume_role_policy_document(trust("eks.amazonaws.com").to_string());
    for (k, v) in tags("crash") {
        create = create.tags(aws_sdk_iam::types::Tag::builder().key(k).value(v).build().unwrap());
    }
    create.send().await.unwrap();
    let attached = |iam: aws_sdk_iam::Client| async move {
        let out = iam.list_attached_role_policies().role_name(name).send().await.unwrap();
        out.attached_policies().iter().filter_map(|p| p.policy_arn().map(str::to_string)).collect::<Vec<_>>()
    };
    assert!(attached(iam.clone()).await.is_empty());

    let managed = "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy";
    let step = EnsureRole {
        aws: cloud.clone(),
        cluster: "crash".into(),
        name: name.into(),
        trust_policy: trust("sagemaker.amazonaws.com"),
        managed_policies: vec![managed.into()],
        inline_policies: vec![("instantstart-shared-bucket".into(), hyperpod_bucket_policy("crash-bucket"))],
    };
    let operation_id = OperationId("op-resumed".into());
    let inputs = BTreeMap::new();
    let cx = StepContext {
        operation_id: &operation_id,
        step_key: "hyperpod_execution_role",
        idempotency_token: "token",
        attempt: 1,
        request: &Value::Null,
        inputs: &inputs,
    };
    let Observation::Exists(found) = step.observe(&cx).await.unwrap() else { panic!("our role is adopted") };
    for _ in 0..2 {
        // Polling again (a resume after the first poll) changes nothing.
        let Progress::Done(out) = step.poll(&cx, &found).await.unwrap() else { panic!("the role is ready") };
        assert_eq!(out["role_arn"], format!("arn:aws:iam::123456789012:role/{name}"));
        assert_eq!(attached(iam.clone()).await, [managed]);
    }
    assert!(cloud.created_roles.lock().unwrap().is_empty(), "CreateRole is not called again");
    let inline = iam.list_role_policies().role_name(name).send().await.unwrap();
    assert_eq!(inline.policy_names(), ["instantstart-shared-bucket"]);
    let doc = iam.get_role_policy().role_name(name).policy_name("instantstart-shared-bucket").send().await.unwrap();
    assert_eq!(policy_document(doc.policy_document()), hyperpod_bucket_policy("crash-bucket"));
    let role = iam.get_role().role_name(name).send().await.unwrap();
    let trust_doc = role.role().and_then(|r| r.assume_role_policy_document()).expect("trust policy");
    assert_eq!(policy_document(trust_doc), trust("sagemaker.amazonaws.com"));

    // The adapter method itself: over-broad policies are refused before anything is sent, and
    // a role that does not exist is NotFound.
    let mut broad = CreateIamRole {
        name: name.into(),
        trust_policy: trust("sagemaker.amazonaws.com"),
        managed_policies: vec!["arn:aws:iam::aws:policy/AdministratorAccess".into()],
        inline_policies: vec![],
        tags: tags("crash"),
    };
    assert_eq!(cloud.real.ensure_role_policies(&broad).await.unwrap_err().kind, ProviderErrorKind::InvalidRequest);
    assert_eq!(attached(iam.clone()).await, [managed]);
    broad.name = "crash-no-such-role".into();
    broad.managed_policies = vec![managed.into()];
    assert_eq!(cloud.real.ensure_role_policies(&broad).await.unwrap_err().kind, ProviderErrorKind::NotFound);
}

#[tokio::test]
async fn the_shared_bucket() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let req = CreateBucket { region: REGION.into(), name: "is-s3-123456789012-abcd".into(), tags: tags("s3") };
    assert_eq!(p.describe_bucket(&req.name).await.unwrap(), None);
    let b = p.create_bucket(&req).await.unwrap();
    assert_eq!(b.name, req.name);
    let got = p.describe_bucket(&req.name).await.unwrap().expect("bucket");
    assert!(is_owned(&got.tags, "s3"), "{:?}", got.tags);
    assert_eq!(got.region, REGION);
    assert_eq!(p.create_bucket(&req).await.unwrap().name, req.name, "ours is adopted");
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&moto.sdk().await).force_path_style(true).build(),
    );
    let pab = s3.get_public_access_block().bucket(&req.name).send().await.unwrap();
    let c = pab.public_access_block_configuration().expect("public access block");
    assert_eq!(
        (c.block_public_acls(), c.ignore_public_acls(), c.block_public_policy(), c.restrict_public_buckets()),
        (Some(true), Some(true), Some(true), Some(true))
    );
    let enc = s3.get_bucket_encryption().bucket(&req.name).send().await.unwrap();
    let rule = &enc.server_side_encryption_configuration().expect("encryption").rules()[0];
    assert_eq!(rule.apply_server_side_encryption_by_default().map(|d| d.sse_algorithm().as_str()), Some("AES256"));

    // A bucket of ours without our tags is not adopted, nor tagged.
    s3.create_bucket().bucket("is-foreign-bucket").send().await.unwrap();
    let err = p
        .create_bucket(&CreateBucket { region: REGION.into(), name: "is-foreign-bucket".into(), tags: tags("s3") })
        .await
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::AlreadyExists, "{err}");
    assert!(p.describe_bucket("is-foreign-bucket").await.unwrap().expect("exists").tags.is_empty());

    p.delete_bucket(&req.name).await.unwrap();
    assert_eq!(p.describe_bucket(&req.name).await.unwrap(), None);
}

/// ListObjectsV2 with delimiter `/`: one level at a time, prefixes before objects, sizes, pages
/// followed past S3's 1000 keys per page, and the cap reported as `truncated`.
#[tokio::test]
async fn bucket_listing() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let req = CreateBucket { region: REGION.into(), name: "is-list-123456789012-abcd".into(), tags: tags("s3") };
    p.create_bucket(&req).await.unwrap();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&moto.sdk().await).force_path_style(true).build(),
    );
    let put = |key: &str, len: usize| s3.put_object().bucket(&req.name).key(key).body(vec![b'x'; len].into()).send();
    put("models/Qwen/Qwen3-0.6B/config.json", 726).await.unwrap();
    put("models/Qwen/Qwen3-0.6B/model.safetensors", 4096).await.unwrap();
    put("checkpoints/job-a/step-100/model.pt", 10).await.unwrap();
    put("README.md", 12).await.unwrap();

    let top = p.list_objects(&req.name, "", None).await.unwrap();
    assert_eq!((top.bucket.as_str(), top.prefix.as_str(), top.next_token.as_deref()), (req.name.as_str(), "", None));
    let got: Vec<(&str, S3EntryKind, Option<u64>)> =
        top.entries.iter().map(|e| (e.key.as_str(), e.kind, e.size_bytes)).collect();
    assert_eq!(
        got,
        [
            ("checkpoints/", S3EntryKind::Prefix, None),
            ("models/", S3EntryKind::Prefix, None),
            ("README.md", S3EntryKind::Object, Some(12)),
        ]
    );
    let model = p.list_objects(&req.name, "models/Qwen/Qwen3-0.6B/", None).await.unwrap();
    let got: Vec<(&str, Option<u64>)> = model.entries.iter().map(|e| (e.key.as_str(), e.size_bytes)).collect();
    assert_eq!(
        got,
        [("models/Qwen/Qwen3-0.6B/config.json", Some(726)), ("models/Qwen/Qwen3-0.6B/model.safetensors", Some(4096))]
    );
    assert!(p.list_objects(&req.name, "nothing/", None).await.unwrap().entries.is_empty());

    // More than one page (S3 returns at most 1000 keys per page): the next page continues
    // from S3's token, and the last one has none.
    for i in 0..(LIST_OBJECTS_LIMIT + 5) {
        put(&format!("many/f{i:05}"), 1).await.unwrap();
    }
    let many = p.list_objects(&req.name, "many/", None).await.unwrap();
    assert_eq!(many.entries.len(), LIST_OBJECTS_LIMIT);
    assert_eq!(many.entries[0].key, "many/f00000");
    assert_eq!(many.entries[LIST_OBJECTS_LIMIT - 1].key, format!("many/f{:05}", LIST_OBJECTS_LIMIT - 1));
    let token = many.next_token.expect("more entries follow");
    let rest = p.list_objects(&req.name, "many/", Some(&token)).await.unwrap();
    let keys: Vec<String> = rest.entries.iter().map(|e| e.key.clone()).collect();
    let want: Vec<String> = (LIST_OBJECTS_LIMIT..LIST_OBJECTS_LIMIT + 5).map(|i| format!("many/f{i:05}")).collect();
    assert_eq!(keys, want);
    assert_eq!(rest.next_token, None);

    let err = p.list_objects("is-no-such-bucket-0000", "", None).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::NotFound, "{err}");
}

/// Everything moto implements goes to the real adapter; EKS add-ons and Pod Identity
/// associations (which moto lacks, HTTP 404) are answered in memory (add-ons as installed), so the engine can run the pipeline through them. Their
/// requests are tested in `src/sdk_tests.rs`. Role creates are recorded so a test can tell an
/// adopted role from a created one.
struct MotoCloud {
    real: Arc<AwsProvider>,
    addons: Mutex<BTreeMap<(String, String), EksAddon>>,
    created_addons: Mutex<Vec<String>>,
    created_roles: Mutex<Vec<String>>,
    /// Pod Identity associations by EKS cluster.
    associations: Mutex<Vec<(String, PodIdentityAssociation)>>,
    /// Access entries by (EKS cluster, principal); moto has none.
    access_entries: Mutex<BTreeMap<(String, String), AccessEntry>>,
}

impl MotoCloud {
    fn new(real: Arc<AwsProvider>) -> MotoCloud {
        MotoCloud {
            real,
            addons: Mutex::default(),
            created_addons: Mutex::default(),
            created_roles: Mutex::default(),
            associations: Mutex::default(),
            access_entries: Mutex::default(),
        }
    }
}

#[async_trait]
impl IdentityApi for MotoCloud {
    async fn caller_identity(&self) -> Result<CallerIdentity> {
        self.real.caller_identity().await
    }
}

#[async_trait]
impl QuotaApi for MotoCloud {
    async fn availability_zones(&self, region: &str) -> Result<Vec<AvailabilityZone>> {
        self.real.availability_zones(region).await
    }
    async fn instance_type_offerings(&self, region: &str) -> Result<Vec<InstanceTypeOffering>> {
        self.real.instance_type_offerings(region).await
    }
    async fn instance_type_specs(
        &self,
        region: &str,
    ) -> Result<Vec<instantstart_core::instance_types::InstanceTypeInfo>> {
        self.real.instance_type_specs(region).await
    }
    /// moto does not implement Service Quotas' ListServiceQuotas (HTTP 500): the adapter
    /// reports the quota as unknown, so the preflight warns.
    async fn hyperpod_instance_quota(&self, region: &str, instance_type: &str) -> Result<Option<Quota>> {
        self.real.hyperpod_instance_quota(region, instance_type).await
    }
    async fn hyperpod_instance_quotas(&self, region: &str) -> Result<Vec<Quota>> {
        self.real.hyperpod_instance_quotas(region).await
    }
}

#[async_trait]
impl NetworkApi for MotoCloud {
    async fn find_vpc(&self, region: &str, name: &str) -> Result<Option<Vpc>> {
        self.real.find_vpc(region, name).await
    }
    async fn describe_network(&self, region: &str, vpc_id: &str) -> Result<Network> {
        self.real.describe_network(region, vpc_id).await
    }
    async fn create_network(&self, req: &CreateNetwork) -> Result<Network> {
        self.real.create_network(req).await
    }
    async fn create_subnet(&self, req: &CreateSubnet) -> Result<Subnet> {
        self.real.create_subnet(req).await
    }
    async fn delete_subnet(&self, region: &str, subnet_id: &str) -> Result<()> {
        self.real.delete_subnet(region, subnet_id).await
    }
    async fn delete_network(&self, region: &str, vpc_id: &str) -> Result<()> {
        self.real.delete_network(region, vpc_id).await
    }
}

#[async_trait]
impl EksApi for MotoCloud {
    async fn describe_access_entry(
        &self,
        _region: &str,
        cluster: &str,
        principal: &str,
    ) -> Result<Option<AccessEntry>> {
        Ok(self.access_entries.lock().unwrap().get(&(cluster.to_string(), principal.to_string())).cloned())
    }
    async fn ensure_access_entry(&self, req: &EnsureAccessEntry) -> Result<AccessEntry> {
        let entry = AccessEntry {
            principal_arn: req.principal_arn.clone(),
            kind: req.kind.clone(),
            username: None,
            policies: req.policies.clone(),
            tags: req.tags.clone(),
        };
        let mut all = self.access_entries.lock().unwrap();
        Ok(all.entry((req.cluster.clone(), req.principal_arn.clone())).or_insert(entry).clone())
    }
    async fn delete_access_entry(&self, _region: &str, cluster: &str, principal: &str) -> Result<()> {
        match self.access_entries.lock().unwrap().remove(&(cluster.to_string(), principal.to_string())) {
            Some(_) => Ok(()),
            None => Err(ProviderError::not_found("eks:DeleteAccessEntry", "no such access entry")),
        }
    }
    async fn describe_eks_cluster(&self, region: &str, name: &str) -> Result<Option<EksCluster>> {
        self.real.describe_eks_cluster(region, name).await
    }
    async fn list_eks_clusters(&self, region: &str) -> Result<Vec<String>> {
        self.real.list_eks_clusters(region).await
    }
    async fn create_eks_cluster(&self, req: &CreateEksCluster) -> Result<EksCluster> {
        self.real.create_eks_cluster(req).await
    }
    async fn delete_eks_cluster(&self, region: &str, name: &str) -> Result<()> {
        self.real.delete_eks_cluster(region, name).await
    }
    async fn describe_addon(&self, _region: &str, cluster: &str, addon: &str) -> Result<Option<EksAddon>> {
        Ok(self.addons.lock().unwrap().get(&(cluster.to_string(), addon.to_string())).cloned())
    }
    async fn create_addon(&self, req: &CreateEksAddon) -> Result<EksAddon> {
        let a = EksAddon {
            name: req.name.clone(),
            // EKS's default version; the VPC CNI's must be at least 1.18.3 for HyperPod.
            version: req.version.clone().unwrap_or_else(|| {
                if req.name == "vpc-cni" { "v1.19.6-eksbuild.7" } else { "v1.0.0-eksbuild.1" }.into()
            }),
            state: ResourceState::Active,
            tags: req.tags.clone(),
            health_issues: vec![],
            configuration_values: req.configuration_values.clone(),
        };
        self.created_addons.lock().unwrap().push(req.name.clone());
        self.addons.lock().unwrap().insert((req.cluster.clone(), req.name.clone()), a.clone());
        Ok(a)
    }
    async fn delete_addon(&self, _region: &str, cluster: &str, addon: &str) -> Result<()> {
        self.addons.lock().unwrap().remove(&(cluster.to_string(), addon.to_string()));
        Ok(())
    }
    async fn list_pod_identity_associations(
        &self,
        _region: &str,
        cluster: &str,
        namespace: &str,
        service_account: &str,
    ) -> Result<Vec<PodIdentityAssociation>> {
        Ok(self
            .associations
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, a)| c == cluster && a.namespace == namespace && a.service_account == service_account)
            .map(|(_, a)| a.clone())
            .collect())
    }
    async fn create_pod_identity_association(
        &self,
        req: &CreatePodIdentityAssociation,
    ) -> Result<PodIdentityAssociation> {
        let mut all = self.associations.lock().unwrap();
        let id = format!("a-{:017}", all.len());
        let a = PodIdentityAssociation {
            arn: format!("arn:aws:eks:{}:123456789012:podidentityassociation/{}/{id}", req.region, req.cluster),
            id,
            namespace: req.namespace.clone(),
            service_account: req.service_account.clone(),
            role_arn: req.role_arn.clone(),
            tags: req.tags.clone(),
        };
        all.push((req.cluster.clone(), a.clone()));
        Ok(a)
    }
    async fn delete_pod_identity_association(&self, _region: &str, cluster: &str, association_id: &str) -> Result<()> {
        self.associations.lock().unwrap().retain(|(c, a)| !(c == cluster && a.id == association_id));
        Ok(())
    }
    async fn describe_addon_configuration(
        &self,
        _region: &str,
        _cluster: &str,
        addon: &str,
        _version: Option<&str>,
    ) -> Result<AddonConfiguration> {
        // moto has no DescribeAddonConfiguration (covered in src/sdk_tests.rs); the pipelines run
        // here install no add-on with configuration values.
        Err(ProviderError::new(
            "eks:DescribeAddonConfiguration",
            ProviderErrorKind::InvalidRequest,
            format!("moto does not implement DescribeAddonConfiguration ({addon})"),
        ))
    }
}

#[async_trait]
impl IamApi for MotoCloud {
    async fn get_role(&self, name: &str) -> Result<Option<IamRole>> {
        self.real.get_role(name).await
    }
    async fn create_role(&self, req: &CreateIamRole) -> Result<IamRole> {
        self.created_roles.lock().unwrap().push(req.name.clone());
        self.real.create_role(req).await
    }
    async fn ensure_role_policies(&self, req: &CreateIamRole) -> Result<()> {
        self.real.ensure_role_policies(req).await
    }
    async fn delete_role(&self, name: &str) -> Result<()> {
        self.real.delete_role(name).await
    }
    async fn get_oidc_provider(&self, issuer_url: &str) -> Result<Option<OidcProvider>> {
        self.real.get_oidc_provider(issuer_url).await
    }
    async fn create_oidc_provider(&self, issuer_url: &str, tags: &Tags) -> Result<OidcProvider> {
        self.real.create_oidc_provider(issuer_url, tags).await
    }
}

#[async_trait]
impl HyperPodApi for MotoCloud {
    async fn describe_training_plan(&self, region: &str, arn: &str) -> Result<Option<TrainingPlan>> {
        self.real.describe_training_plan(region, arn).await
    }
    async fn describe_hyperpod_cluster(&self, region: &str, name: &str) -> Result<Option<HyperPodCluster>> {
        self.real.describe_hyperpod_cluster(region, name).await
    }
    async fn list_hyperpod_clusters(&self, region: &str) -> Result<Vec<String>> {
        self.real.list_hyperpod_clusters(region).await
    }
    async fn create_hyperpod_cluster(&self, req: &CreateHyperPodCluster) -> Result<HyperPodCluster> {
        self.real.create_hyperpod_cluster(req).await
    }
    async fn delete_hyperpod_cluster(&self, region: &str, name: &str) -> Result<()> {
        self.real.delete_hyperpod_cluster(region, name).await
    }
    async fn list_cluster_nodes(&self, region: &str, cluster: &str) -> Result<Vec<ClusterNode>> {
        self.real.list_cluster_nodes(region, cluster).await
    }
    async fn update_hyperpod_cluster(&self, req: &UpdateHyperPodCluster) -> Result<HyperPodCluster> {
        self.real.update_hyperpod_cluster(req).await
    }
    async fn start_cluster_health_check(
        &self,
        region: &str,
        cluster: &str,
        targets: &[instantstart_core::provider::HealthCheckTarget],
    ) -> Result<()> {
        self.real.start_cluster_health_check(region, cluster, targets).await
    }
    async fn update_cluster_software(&self, req: &instantstart_core::provider::UpdateClusterSoftware) -> Result<()> {
        self.real.update_cluster_software(req).await
    }
    async fn batch_node_action(
        &self,
        region: &str,
        cluster: &str,
        action: NodeAction,
        node_ids: &[String],
    ) -> Result<BatchNodeResult> {
        self.real.batch_node_action(region, cluster, action, node_ids).await
    }
    async fn list_cluster_events(
        &self,
        region: &str,
        cluster: &str,
        query: &ClusterEventQuery,
    ) -> Result<ClusterEventPage> {
        self.real.list_cluster_events(region, cluster, query).await
    }
    async fn describe_cluster_node(
        &self,
        region: &str,
        cluster: &str,
        node_id: &str,
    ) -> Result<Option<ClusterNodeDetail>> {
        self.real.describe_cluster_node(region, cluster, node_id).await
    }
    /// moto lacks training plans: the adapter's requests are tested at the SDK boundary.
    async fn list_training_plans(&self, region: &str) -> Result<Vec<instantstart_core::provider::TrainingPlanSummary>> {
        self.real.list_training_plans(region).await
    }
    async fn search_training_plan_offerings(
        &self,
        region: &str,
        query: &instantstart_core::provider::OfferingQuery,
    ) -> Result<Vec<instantstart_core::provider::TrainingPlanOffering>> {
        self.real.search_training_plan_offerings(region, query).await
    }
}

#[async_trait]
impl S3Api for MotoCloud {
    async fn describe_bucket(&self, name: &str) -> Result<Option<Bucket>> {
        self.real.describe_bucket(name).await
    }
    async fn create_bucket(&self, req: &CreateBucket) -> Result<Bucket> {
        self.real.create_bucket(req).await
    }
    async fn delete_bucket(&self, name: &str) -> Result<()> {
        self.real.delete_bucket(name).await
    }
    async fn list_objects(&self, bucket: &str, prefix: &str, token: Option<&str>) -> Result<ObjectListing> {
        self.real.list_objects(bucket, prefix, token).await
    }
    async fn put_object(&self, req: &PutObject) -> Result<ObjectHead> {
        self.real.put_object(req).await
    }
    async fn head_object(&self, bucket: &str, key: &str) -> Result<Option<ObjectHead>> {
        self.real.head_object(bucket, key).await
    }
    async fn delete_object(&self, bucket: &str, key: &str) -> Result<()> {
        self.real.delete_object(bucket, key).await
    }
}

/// A Kubernetes API that stores what is applied and binds claims at once.
#[derive(Default)]
struct FakeKube {
    objects: Mutex<BTreeMap<ObjectRef, KubeObject>>,
}

#[async_trait]
impl KubeApi for FakeKube {
    async fn apply(&self, _t: &KubeTarget, object: &KubeObject) -> std::result::Result<KubeObject, ProviderError> {
        let r = object
            .object_ref()
            .ok_or_else(|| ProviderError::new("k8s:apply", ProviderErrorKind::InvalidRequest, "no ref"))?;
        let mut o = object.clone();
        if r.kind == "PersistentVolumeClaim" {
            o.0["status"] = json!({ "phase": "Bound" });
        }
        self.objects.lock().unwrap().insert(r, o.clone());
        Ok(o)
    }
    async fn get(&self, _t: &KubeTarget, object: &ObjectRef) -> std::result::Result<Option<KubeObject>, ProviderError> {
        Ok(self.objects.lock().unwrap().get(object).cloned())
    }
    async fn list(&self, _t: &KubeTarget, params: &ListParams) -> std::result::Result<Vec<KubeObject>, ProviderError> {
        Ok(self
            .objects
            .lock()
            .unwrap()
            .iter()
            .filter(|(r, _)| r.kind == params.kind && r.api_version == params.api_version)
            .map(|(_, o)| o.clone())
            .collect())
    }
    async fn delete(&self, _t: &KubeTarget, object: &ObjectRef) -> std::result::Result<(), ProviderError> {
        self.objects.lock().unwrap().remove(object);
        Ok(())
    }
    async fn logs(
        &self,
        _t: &KubeTarget,
        _ns: &str,
        _pod: &str,
        _follow: bool,
        _tail: Option<u32>,
    ) -> std::result::Result<LogStream, ProviderError> {
        Ok(Box::pin(futures::stream::empty()))
    }
}

fn actor() -> Actor {
    Actor { face: Face::Api, principal: "moto-test".into() }
}

async fn run(engine: &Engine, kind: OperationKind, request: &Value) -> instantstart_core::operation::Operation {
    let outcome = engine.submit_checked(kind, request, actor(), None).await.unwrap();
    let Outcome::Submitted(s) = outcome else { panic!("nothing to do? {outcome:?}") };
    let op = engine.wait(&s.operation.id, Duration::from_secs(120)).await.unwrap();
    assert!(op.status.is_terminal(), "operation did not finish: {op:#?}");
    op
}

/// PutObject with its SHA-256 checksum, HeadObject (checksum mode) and DeleteObject on moto's S3.
#[tokio::test]
async fn objects_are_put_headed_and_deleted() {
    use instantstart_core::lifecycle::{CONTENT_TYPE, ON_CREATE_SH, script_key, script_sha256};
    let moto = Moto::start();
    let p = moto.provider().await;
    p.create_bucket(&CreateBucket {
        region: REGION.into(),
        name: "is-objects-test".into(),
        tags: ownership_tags("objects", "op"),
    })
    .await
    .unwrap();
    let key = script_key();
    assert_eq!(p.head_object("is-objects-test", &key).await.unwrap(), None);
    assert_eq!(p.head_object("is-no-such-bucket", &key).await.unwrap(), None);
    let put = p
        .put_object(&PutObject {
            bucket: "is-objects-test".into(),
            key: key.clone(),
            body: ON_CREATE_SH.as_bytes().to_vec(),
            content_type: CONTENT_TYPE.into(),
        })
        .await
        .unwrap();
    assert_eq!(put.sha256.as_deref(), Some(script_sha256().as_str()));
    let head = p.head_object("is-objects-test", &key).await.unwrap().expect("the object");
    assert_eq!(head.size_bytes, ON_CREATE_SH.len() as u64);
    if let Some(d) = &head.sha256 {
        assert_eq!(d, &script_sha256(), "the stored checksum is the body's");
    }
    p.delete_object("is-objects-test", &key).await.unwrap();
    assert_eq!(p.head_object("is-objects-test", &key).await.unwrap(), None);
    p.delete_bucket("is-objects-test").await.unwrap();
}

/// The network → EKS → HyperPod pipeline through the operation engine with the real adapter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_and_delete_pipeline_through_the_engine() {
    let moto = Moto::start();
    let real = Arc::new(moto.provider().await);
    let cloud = Arc::new(MotoCloud::new(real.clone()));
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(instantstart_store::SqliteStore::open(&dir.path().join("db.sqlite")).unwrap());
    let kube = Arc::new(FakeKube::default());
    let workflows = instantstart_core::workflow::all(cloud.clone(), kube.clone(), store.clone(), None);
    let mut config = EngineConfig::scaled(1000.0);
    config.max_retries = 3;
    let engine = Engine::new(store.clone(), workflows, config);

    let request = json!({
        "name": "demo",
        "region": REGION,
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "hyperpod": { "instance_groups": [
            {
                "name": "workers", "instance_type": "ml.p5.48xlarge", "count": 2, "availability_zone": "us-east-1a",
                "deep_health_checks": { "stress": true, "connectivity": true },
                "lifecycle_script": { "source_s3_uri": "s3://sagemaker-lifecycle/scripts", "on_create": "on_create.sh" }
            },
            {
                "name": "spot", "instance_type": "ml.g5.12xlarge", "count": 1, "availability_zone": "us-east-1b",
                "capacity": { "type": "spot" },
                "lifecycle_script": { "source_s3_uri": "s3://sagemaker-lifecycle/scripts", "on_create": "on_create.sh" }
            }
        ]}
    });
    // The groups' own script: the preflight checks that it exists (HeadObject) before anything
    // is recorded.
    real.create_bucket(&CreateBucket {
        region: REGION.into(),
        name: "sagemaker-lifecycle".into(),
        tags: ownership_tags("demo", "seed"),
    })
    .await
    .unwrap();
    real.put_object(&PutObject {
        bucket: "sagemaker-lifecycle".into(),
        key: "scripts/on_create.sh".into(),
        body: instantstart_core::lifecycle::ON_CREATE_SH.as_bytes().to_vec(),
        content_type: "text/x-shellscript".into(),
    })
    .await
    .unwrap();
    let op = run(&engine, OperationKind::CreateCluster, &request).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    // InstantStart's own script went into the cluster bucket, content-addressed.
    let bucket = op.step("bucket").unwrap().outputs["bucket"].as_str().unwrap().to_string();
    let head = real.head_object(&bucket, &instantstart_core::lifecycle::script_key()).await.unwrap().expect("uploaded");
    assert_eq!(head.size_bytes, instantstart_core::lifecycle::ON_CREATE_SH.len() as u64);

    // What the adapter created, read back through the adapter.
    let eks = real.describe_eks_cluster(REGION, "demo").await.unwrap().expect("EKS cluster");
    assert_eq!(eks.state, ResourceState::Active);
    assert!(is_owned(&eks.tags, "demo"), "{:?}", eks.tags);
    let vpc = real.find_vpc(REGION, "demo-vpc").await.unwrap().expect("VPC");
    assert_eq!(eks.vpc_id, vpc.id);
    let hp = real.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap().expect("HyperPod cluster");
    assert_eq!(hp.state, ResourceState::Active);
    assert!(is_owned(&hp.tags, "demo"), "{:?}", hp.tags);
    let groups: BTreeMap<&str, &HyperPodInstanceGroupStatus> =
        hp.instance_groups.iter().map(|g| (g.name.as_str(), g)).collect();
    assert_eq!(groups["workers"].instance_type, "ml.p5.48xlarge");
    assert_eq!(groups["workers"].target_count, 2);
    assert_eq!(groups["workers"].subnet_ids.len(), 1, "one compute subnet per group");
    assert_ne!(groups["workers"].subnet_ids, groups["spot"].subnet_ids, "groups in different AZs");
    let network = real.describe_network(REGION, &vpc.id).await.unwrap();
    for g in groups.values() {
        let s = network.subnets.iter().find(|s| s.id == g.subnet_ids[0]).expect("group subnet in the VPC");
        assert_eq!(s.cidr.prefix_len(), 20, "{s:?}");
        assert!(s.name.as_deref().is_some_and(|n| n.starts_with("demo-compute-")), "{s:?}");
    }
    let nodes = real.list_cluster_nodes(REGION, "demo-hp").await.unwrap();
    assert_eq!(nodes.len(), 3, "{nodes:#?}");
    assert!(
        nodes.iter().filter(|n| n.instance_group == "workers").all(|n| n.availability_zone == "us-east-1a"),
        "{nodes:#?}"
    );
    assert!(
        nodes.iter().filter(|n| n.instance_group == "spot").all(|n| n.availability_zone == "us-east-1b"),
        "{nodes:#?}"
    );
    let one = real.describe_cluster_node(REGION, "demo-hp", &nodes[0].instance_id).await.unwrap().expect("node");
    assert_eq!((one.instance_group.as_str(), one.status.as_str()), (nodes[0].instance_group.as_str(), "Running"));
    assert_eq!(real.describe_cluster_node(REGION, "demo-hp", "i-0000000000000000").await.unwrap(), None);
    assert_eq!(
        cloud.created_addons.lock().unwrap().len(),
        instantstart_core::workflow::create_cluster::BASE_ADDONS.len()
    );
    assert!(real.get_role("demo-eks-cluster-role").await.unwrap().is_some());
    assert!(real.get_role("demo-hyperpod-exec-role").await.unwrap().is_some());
    let csi_role = real.get_role("demo-s3-csi-role").await.unwrap().expect("the S3 CSI driver's role");
    {
        let assoc = cloud.associations.lock().unwrap();
        assert_eq!(assoc.len(), 1, "{assoc:?}");
        assert_eq!(
            (assoc[0].1.namespace.as_str(), assoc[0].1.service_account.as_str(), assoc[0].1.role_arn.as_str()),
            ("kube-system", "s3-csi-driver-sa", csi_role.arn.as_str())
        );
    }

    let vpcs_before = aws_sdk_ec2::Client::new(&moto.sdk().await).describe_vpcs().send().await.unwrap().vpcs().len();

    // Delete everything in reverse order.
    let op = run(&engine, OperationKind::DeleteCluster, &json!({ "name": "demo", "delete_bucket": true })).await;
    assert_eq!(op.status, OperationStatus::Succeeded, "{op:#?}");
    assert_eq!(real.describe_hyperpod_cluster(REGION, "demo-hp").await.unwrap(), None);
    assert_eq!(real.describe_eks_cluster(REGION, "demo").await.unwrap(), None);
    assert_eq!(real.get_role("demo-eks-cluster-role").await.unwrap(), None);
    assert_eq!(real.get_role("demo-hyperpod-exec-role").await.unwrap(), None);
    assert_eq!(real.get_role("demo-s3-csi-role").await.unwrap(), None);
    assert!(cloud.associations.lock().unwrap().is_empty());
    assert_eq!(real.find_vpc(REGION, "demo-vpc").await.unwrap(), None);
    let vpcs_after = aws_sdk_ec2::Client::new(&moto.sdk().await).describe_vpcs().send().await.unwrap().vpcs().len();
    assert_eq!(vpcs_after, vpcs_before - 1);
}

// moto does not implement SageMaker's task governance APIs: they are tested at the SDK boundary
// (`src/sdk_tests.rs`). No scheduler config or quota exists in moto's account.
#[async_trait]
impl TaskGovernanceApi for MotoCloud {
    async fn list_scheduler_configs(&self, _region: &str, _cluster_arn: &str) -> Result<Vec<SchedulerConfigView>> {
        Ok(vec![])
    }
    async fn create_scheduler_config(
        &self,
        region: &str,
        name: &str,
        cluster_arn: &str,
        policy: &SchedulerPolicy,
        tags: &Tags,
    ) -> Result<SchedulerConfigView> {
        self.real.create_scheduler_config(region, name, cluster_arn, policy, tags).await
    }
    async fn update_scheduler_config(
        &self,
        region: &str,
        id: &str,
        version: i32,
        policy: &SchedulerPolicy,
    ) -> Result<i32> {
        self.real.update_scheduler_config(region, id, version, policy).await
    }
    async fn delete_scheduler_config(&self, region: &str, id: &str) -> Result<()> {
        self.real.delete_scheduler_config(region, id).await
    }
    async fn list_compute_quotas(&self, _region: &str, _cluster_arn: &str) -> Result<Vec<ComputeQuotaView>> {
        Ok(vec![])
    }
    async fn create_compute_quota(
        &self,
        region: &str,
        name: &str,
        cluster_arn: &str,
        config: &QuotaConfig,
        tags: &Tags,
    ) -> Result<ComputeQuotaView> {
        self.real.create_compute_quota(region, name, cluster_arn, config, tags).await
    }
    async fn update_compute_quota(&self, region: &str, id: &str, version: i32, config: &QuotaConfig) -> Result<i32> {
        self.real.update_compute_quota(region, id, version, config).await
    }
    async fn delete_compute_quota(&self, region: &str, id: &str) -> Result<()> {
        self.real.delete_compute_quota(region, id).await
    }
}

// moto does not implement the SageMaker MLflow APIs: the SageMaker calls are tested at the SDK
// boundary (`src/sdk_tests.rs`) and the MLflow REST client against a real `mlflow server` below.
#[async_trait]
impl MlflowTracking for MotoCloud {
    /// No tracking server can exist in moto's account (CreateMlflowTrackingServer is one of the
    /// calls it lacks; ListMlflowTrackingServers answers 500): the delete-cluster assessment of
    /// the pipeline test finds none.
    async fn list_tracking_servers(&self, _region: &str) -> Result<Vec<TrackingServer>> {
        Ok(vec![])
    }
    async fn describe_tracking_server(&self, region: &str, name: &str) -> Result<Option<TrackingServer>> {
        self.real.describe_tracking_server(region, name).await
    }
    async fn create_tracking_server(&self, req: &CreateTrackingServer) -> Result<TrackingServer> {
        self.real.create_tracking_server(req).await
    }
    async fn delete_tracking_server(&self, region: &str, name: &str) -> Result<()> {
        self.real.delete_tracking_server(region, name).await
    }
    async fn search_runs(&self, arn: &str, query: &RunQuery) -> Result<Vec<MlflowRun>> {
        self.real.search_runs(arn, query).await
    }
    async fn metric_history(&self, arn: &str, run_id: &str, keys: &[String]) -> Result<RunMetrics> {
        self.real.metric_history(arn, run_id, keys).await
    }
}

// moto implements FSx's CreateFileSystem, DescribeFileSystems and DeleteFileSystem (without
// lifecycles or idempotency tokens; those are tested at the SDK boundary, `src/sdk_tests.rs`).
// It has no data repository associations (moto 5: no Create/Describe/DeleteDataRepositoryAssociation):
// those are tested at the SDK boundary and against botocore's model only.
#[async_trait]
impl FsxApi for MotoCloud {
    async fn list_lustre_file_systems(&self, region: &str) -> Result<Vec<LustreFileSystem>> {
        self.real.list_lustre_file_systems(region).await
    }
    async fn describe_lustre_file_system(&self, region: &str, id: &str) -> Result<Option<LustreFileSystem>> {
        self.real.describe_lustre_file_system(region, id).await
    }
    async fn create_lustre_file_system(&self, req: &CreateLustreFileSystem) -> Result<LustreFileSystem> {
        self.real.create_lustre_file_system(req).await
    }
    async fn delete_lustre_file_system(&self, region: &str, id: &str, token: &str) -> Result<()> {
        self.real.delete_lustre_file_system(region, id, token).await
    }
    async fn lustre_quota(&self, region: &str, quota: LustreQuota) -> Result<Option<Quota>> {
        self.real.lustre_quota(region, quota).await
    }
    async fn list_data_repository_associations(
        &self,
        region: &str,
        fs: &str,
    ) -> Result<Vec<DataRepositoryAssociation>> {
        self.real.list_data_repository_associations(region, fs).await
    }
    async fn create_data_repository_association(
        &self,
        req: &CreateDataRepositoryAssociation,
    ) -> Result<DataRepositoryAssociation> {
        self.real.create_data_repository_association(req).await
    }
    async fn delete_data_repository_association(&self, region: &str, id: &str, token: &str) -> Result<()> {
        self.real.delete_data_repository_association(region, id, token).await
    }
}

#[tokio::test]
async fn lustre_file_systems_are_created_tagged_listed_and_deleted() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let mut t = tags("demo");
    t.insert(TAG_FSX_VOLUME.into(), "scratch".into());
    let created = p
        .create_lustre_file_system(&CreateLustreFileSystem {
            region: REGION.into(),
            client_request_token: "op-1file_system".into(),
            subnet_id: "subnet-0123456789abcdef0".into(),
            security_group_ids: vec!["sg-0123456789abcdef0".into()],
            deployment_type: LustreDeploymentType::Scratch2,
            storage_capacity_gib: 1200,
            per_unit_storage_throughput: None,
            file_system_type_version: LUSTRE_VERSION.into(),
            tags: t,
        })
        .await
        .unwrap();
    assert!(created.id.starts_with("fs-"), "{created:?}");
    assert_eq!(created.storage_capacity_gib, 1200);
    // moto 5.2.5 does not echo `FileSystemTypeVersion`; that we send it is the SDK-boundary
    // test's (`sdk_tests`, `CreateFileSystem` body), and AWS's answer is mapped as any field.
    assert_eq!(created.file_system_type_version, None, "moto started echoing the version: {created:?}");
    let listed = p.list_lustre_file_systems(REGION).await.unwrap();
    assert_eq!(listed.iter().map(|f| f.id.as_str()).collect::<Vec<_>>(), [created.id.as_str()]);
    assert_eq!(listed[0].tags.get(TAG_FSX_VOLUME).map(String::as_str), Some("scratch"), "{listed:?}");
    assert!(is_owned(&listed[0].tags, "demo"));
    let one = p.describe_lustre_file_system(REGION, &created.id).await.unwrap().expect("described");
    assert_eq!(one.dns_name.as_deref(), Some(format!("{}.fsx.{REGION}.amazonaws.com", created.id).as_str()));
    p.delete_lustre_file_system(REGION, &created.id, "op-2file_system").await.unwrap();
    assert_eq!(p.describe_lustre_file_system(REGION, &created.id).await.unwrap(), None);
}

// moto implements AMP's CreateWorkspace, DescribeWorkspace, ListWorkspaces and DeleteWorkspace
// (`mock_amp`; workspaces are ACTIVE at once, and deleted at once).
#[async_trait]
impl AmpApi for MotoCloud {
    async fn list_prometheus_workspaces(&self, region: &str, alias: &str) -> Result<Vec<PrometheusWorkspace>> {
        self.real.list_prometheus_workspaces(region, alias).await
    }
    async fn describe_prometheus_workspace(&self, region: &str, id: &str) -> Result<Option<PrometheusWorkspace>> {
        self.real.describe_prometheus_workspace(region, id).await
    }
    async fn create_prometheus_workspace(&self, req: &CreatePrometheusWorkspace) -> Result<PrometheusWorkspace> {
        self.real.create_prometheus_workspace(req).await
    }
    async fn delete_prometheus_workspace(&self, region: &str, id: &str, token: &str) -> Result<()> {
        self.real.delete_prometheus_workspace(region, id, token).await
    }
}

#[tokio::test]
async fn prometheus_workspaces_are_created_tagged_found_by_alias_and_deleted() {
    let moto = Moto::start();
    let p = moto.provider().await;
    let alias = prometheus_alias("demo");
    let created = p
        .create_prometheus_workspace(&CreatePrometheusWorkspace {
            region: REGION.into(),
            alias: alias.clone(),
            client_token: "op-1:prometheus_workspace".into(),
            tags: tags("demo"),
        })
        .await
        .unwrap();
    assert!(created.id.starts_with("ws-"), "{created:?}");
    assert!(created.arn.ends_with(&format!(":workspace/{}", created.id)), "{created:?}");
    // A workspace of another alias is not listed under ours.
    p.create_prometheus_workspace(&CreatePrometheusWorkspace {
        region: REGION.into(),
        alias: "someone-else".into(),
        client_token: "other".into(),
        tags: Tags::new(),
    })
    .await
    .unwrap();
    let listed = p.list_prometheus_workspaces(REGION, &alias).await.unwrap();
    assert_eq!(listed.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(), [created.id.as_str()], "{listed:?}");
    assert!(is_owned(&listed[0].tags, "demo"), "{listed:?}");
    let one = p.describe_prometheus_workspace(REGION, &created.id).await.unwrap().expect("described");
    assert_eq!(one.alias.as_deref(), Some(alias.as_str()));
    assert!(one.prometheus_endpoint.is_some(), "{one:?}");
    assert!(is_owned(&one.tags, "demo"), "{one:?}");
    p.delete_prometheus_workspace(REGION, &created.id, "op-2:prometheus_workspace").await.unwrap();
    assert_eq!(p.describe_prometheus_workspace(REGION, &created.id).await.unwrap(), None);
    assert!(p.list_prometheus_workspaces(REGION, &alias).await.unwrap().is_empty());
}

/// A local `mlflow server` (PyPI `mlflow-skinny` plus the server's packages, installed into
/// `target/test-venv` by `cargo xtask test`; `MLFLOW_BIN` overrides the path), SQLite backend in
/// a temporary directory, killed on drop.
struct MlflowServer {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for MlflowServer {
    /// `mlflow server` runs uvicorn (and a job runner) as child processes: the whole process
    /// group goes, or they would outlive the test.
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-s", "KILL", "--", &format!("-{}", self.child.id())]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl MlflowServer {
    fn start() -> MlflowServer {
        use std::os::unix::process::CommandExt;
        let bin =
            std::env::var("MLFLOW_BIN").map(PathBuf::from).unwrap_or_else(|_| moto_binary().with_file_name("mlflow"));
        assert!(
            bin.exists(),
            "mlflow not found at {}: run `cargo xtask test` (it installs mlflow-skinny and the server's packages into \
             target/test-venv), or set MLFLOW_BIN",
            bin.display()
        );
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port");
        let dir = tempfile::tempdir().expect("temp dir");
        let log_path = dir.path().join("mlflow.log");
        let log = std::fs::File::create(&log_path).expect("log file");
        let child = Command::new(&bin)
            .process_group(0)
            .args(["server", "--host", "127.0.0.1", "--port", &port.to_string(), "--workers", "1"])
            .arg("--backend-store-uri")
            .arg(format!("sqlite:///{}", dir.path().join("mlflow.db").display()))
            .arg("--default-artifact-root")
            .arg(dir.path().join("artifacts"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let server = MlflowServer { child, url: format!("http://127.0.0.1:{port}"), _dir: dir };
        let started = Instant::now();
        loop {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                use std::io::{Read, Write};
                let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
                let mut buf = String::new();
                let _ = s.read_to_string(&mut buf);
                if buf.starts_with("HTTP/1.1 200") {
                    break;
                }
            }
            // A fresh venv's first `mlflow server` compiles its modules and migrates its database:
            // minutes on a loaded 2-core machine (a cold clone's run missed 90 s). The bound only
            // ends a start that hangs; nothing here is a timing assertion.
            if started.elapsed() > Duration::from_secs(300) {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let tail: String = log.chars().rev().take(2000).collect::<Vec<_>>().into_iter().rev().collect();
                panic!("mlflow server did not become healthy within 300 s; the end of its log:\n{tail}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        server
    }

    /// Writes through MLflow's own REST API (what training code does through the client).
    fn post(&self, path: &str, body: Value) -> Value {
        use std::io::{Read, Write};
        let text = body.to_string();
        let addr = self.url.trim_start_matches("http://");
        let mut s = std::net::TcpStream::connect(addr).expect("connect mlflow");
        write!(
            s,
            "POST /api/2.0/mlflow/{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        )
        .expect("write");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        assert!(out.starts_with("HTTP/1.1 200"), "{path}: {out}");
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
        // Chunked or not: the JSON object is the outermost braces.
        let (start, end) = (body.find('{').unwrap_or(0), body.rfind('}').map(|i| i + 1).unwrap_or(body.len()));
        serde_json::from_str(&body[start..end]).unwrap_or(Value::Null)
    }
}

/// The MLflow REST client (signed exactly as for SageMaker, which the local server ignores)
/// reads back runs and metric histories written through MLflow's REST API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mlflow_runs_and_metric_history_from_a_real_mlflow_server() {
    let server = tokio::task::spawn_blocking(MlflowServer::start).await.expect("start mlflow");
    let arn = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team";
    let conf = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "test"))
        .load()
        .await;
    let aws = AwsProvider::from_sdk_config(conf).with_mlflow_endpoint(&server.url);

    let exp = server.post("experiments/create", json!({ "name": "llama-sft" }));
    let exp_id = exp["experiment_id"].as_str().expect("experiment id").to_string();
    let mut run_ids = Vec::new();
    for (i, name) in ["job-a", "job-b"].iter().enumerate() {
        let run = server.post(
            "runs/create",
            json!({ "experiment_id": exp_id, "run_name": name, "start_time": 1_700_000_000_000i64 + i as i64 * 60_000 }),
        );
        let id = run["run"]["info"]["run_id"].as_str().expect("run id").to_string();
        let metrics: Vec<Value> = (1..=30)
            .flat_map(|step| {
                let t = 1_700_000_000_000i64 + step * 10_000;
                [
                    json!({ "key": "loss", "value": 2.0 / step as f64, "timestamp": t, "step": step }),
                    json!({ "key": "throughput", "value": 1000.0 + step as f64, "timestamp": t, "step": step }),
                ]
            })
            .collect();
        server.post(
            "runs/log-batch",
            json!({ "run_id": id, "metrics": metrics, "params": [{ "key": "lr", "value": "2e-05" }] }),
        );
        run_ids.push(id);
    }
    server.post("runs/update", json!({ "run_id": run_ids[0], "status": "FINISHED", "end_time": 1_700_000_400_000i64 }));
    // Another experiment's run is not listed when filtering by experiment.
    let other = server.post("experiments/create", json!({ "name": "other" }));
    server.post("runs/create", json!({ "experiment_id": other["experiment_id"], "run_name": "elsewhere" }));

    let runs = aws
        .search_runs(arn, &RunQuery { experiment: Some("llama-sft".into()), max_results: 100 })
        .await
        .expect("search runs");
    assert_eq!(runs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["job-b", "job-a"], "newest first");
    let a = &runs[1];
    assert_eq!((a.experiment.as_str(), a.status.as_str()), ("llama-sft", "FINISHED"));
    assert_eq!(a.metrics["loss"], 2.0 / 30.0);
    assert_eq!(a.params["lr"], "2e-05");
    assert!(a.end_time.is_some() && runs[0].end_time.is_none());

    let all = aws.search_runs(arn, &RunQuery { experiment: None, max_results: 100 }).await.expect("all runs");
    assert_eq!(all.len(), 3);
    let one = aws.search_runs(arn, &RunQuery { experiment: None, max_results: 1 }).await.expect("max 1");
    assert_eq!(one.len(), 1);

    let history = aws
        .metric_history(arn, &run_ids[0], &["loss".into(), "throughput".into(), "never-logged".into()])
        .await
        .expect("history");
    let loss = &history.series["loss"];
    assert_eq!(loss.len(), 30);
    assert_eq!((loss[0].step, loss[29].step), (1, 30));
    assert_eq!(loss[9].value, 0.2);
    assert_eq!(loss[0].timestamp, 1_700_000_010_000);
    assert_eq!(history.series["throughput"][4].value, 1005.0);
    assert!(history.series["never-logged"].is_empty());
    // No keys: the run's own metrics.
    let own = aws.metric_history(arn, &run_ids[1], &[]).await.expect("own keys");
    assert_eq!(own.series.keys().collect::<Vec<_>>(), ["loss", "throughput"]);

    let missing = aws.search_runs(arn, &RunQuery { experiment: Some("nope".into()), max_results: 10 }).await;
    assert_eq!(missing.unwrap_err().kind, ProviderErrorKind::NotFound);
    let bad_run = aws.metric_history(arn, "0123456789abcdef0123456789abcdef", &[]).await.unwrap_err();
    assert_eq!(bad_run.kind, ProviderErrorKind::NotFound, "{bad_run}");
    let bad_arn = aws.search_runs("arn:aws:iam::1:role/x", &RunQuery::default()).await.unwrap_err();
    assert_eq!(bad_arn.kind, ProviderErrorKind::InvalidRequest);
}

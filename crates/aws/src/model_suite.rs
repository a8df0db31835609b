//! The model-validation suite: every method of every AWS-side provider trait, driven through
//! the real adapter at the SDK boundary ([`crate::replay`]), every request the SDK sends
//! decoded and validated against botocore's service model ([`crate::model_check`]).
//!
//! - [`CASES`] is the one table: a trait method, a variant, the canned world it runs in, the
//!   call, and the operations (`service:Operation`) it must send — exactly that set. A new AWS
//!   call is one row (and, if the canned world does not answer it yet, one arm in
//!   [`respond`]).
//! - [`METHODS`] is the hand-kept list of trait methods; a test scans
//!   `crates/core/src/provider/{aws,mlflow,governance,fsx,amp}.rs` for the traits' `async fn`s and compares, another
//!   fails when a method has no case (or no reason in [`UNMODELLED`]).
//! - [`VALIDATOR_CASES`] are deliberately wrong requests: each must fail with its path.
//!
//! # Guarantees
//!
//! - A case passes only if the adapter call succeeds, every request decodes, every request
//!   satisfies its input shape (required, unknown, enum, length, pattern, range, bounds), and
//!   the set of operations sent is the row's.

use crate::AwsProvider;

use crate::model_check::{Decoded, Models};
use crate::replay::{Canned, Recorded, Replay};
use futures::future::BoxFuture;
use instantstart_core::provider::*;
use instantstart_core::spec::{InstanceGroupSpec, NodeRecovery, TieredCheckpointing};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const ACCOUNT: &str = "123456789012";
const PLAN: &str = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-plan";
const ROLE: &str = "arn:aws:iam::123456789012:role/demo-hyperpod-exec-role";
/// The permissions boundary every role of the suite is created with.
const ROLE_BOUNDARY: &str = "arn:aws:iam::123456789012:policy/instantstart-RoleBoundary-EXAMPLE";
const EKS_ARN: &str = "arn:aws:eks:us-east-1:123456789012:cluster/demo";
const HP_ARN: &str = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123def456";
const MLFLOW_ARN: &str = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team";
const FSX_ID: &str = "fs-0123456789abcdef0";
const AMP_ID: &str = "ws-0123abcd-4567-89ab-cdef-0123456789ab";
const ISSUER: &str = "https://oidc.eks.us-east-1.amazonaws.com/id/ABCDEF0123456789";

/// The canned account a case runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    /// Nothing exists yet: describes answer empty, creates succeed.
    Fresh,
    /// The cluster `demo` exists with its network, roles, bucket (in `us-east-1`).
    Existing,
    /// As [`World::Existing`], the bucket in `eu-west-1`.
    BucketElsewhere,
}

type Run = fn(AwsProvider) -> BoxFuture<'static, ()>;

/// One row: a trait method, a variant, the world, the call, and the operations it sends.
pub struct Case {
    pub method: &'static str,
    pub variant: &'static str,
    pub world: World,
    pub run: Run,
    pub expect: &'static [&'static str],
}

/// Every method of the AWS-side traits (crates/core/src/provider/aws.rs, mlflow.rs, governance.rs, fsx.rs and amp.rs).
pub const METHODS: &[&str] = &[
    "IdentityApi::caller_identity",
    "QuotaApi::availability_zones",
    "QuotaApi::instance_type_offerings",
    "QuotaApi::instance_type_specs",
    "QuotaApi::hyperpod_instance_quota",
    "QuotaApi::hyperpod_instance_quotas",
    "NetworkApi::find_vpc",
    "NetworkApi::describe_network",
    "NetworkApi::create_network",
    "NetworkApi::create_subnet",
    "NetworkApi::delete_subnet",
    "NetworkApi::delete_network",
    "EksApi::describe_eks_cluster",
    "EksApi::list_eks_clusters",
    "EksApi::create_eks_cluster",
    "EksApi::delete_eks_cluster",
    "EksApi::describe_addon",
    "EksApi::create_addon",
    "EksApi::delete_addon",
    "EksApi::describe_addon_configuration",
    "EksApi::describe_access_entry",
    "EksApi::ensure_access_entry",
    "EksApi::delete_access_entry",
    "EksApi::list_pod_identity_associations",
    "EksApi::create_pod_identity_association",
    "EksApi::delete_pod_identity_association",
    "IamApi::get_role",
    "IamApi::create_role",
    "IamApi::ensure_role_policies",
    "IamApi::delete_role",
    "IamApi::get_oidc_provider",
    "IamApi::create_oidc_provider",
    "HyperPodApi::describe_training_plan",
    "HyperPodApi::describe_hyperpod_cluster",
    "HyperPodApi::list_hyperpod_clusters",
    "HyperPodApi::create_hyperpod_cluster",
    "HyperPodApi::delete_hyperpod_cluster",
    "HyperPodApi::list_cluster_nodes",
    "HyperPodApi::update_hyperpod_cluster",
    "HyperPodApi::batch_node_action",
    "HyperPodApi::start_cluster_health_check",
    "HyperPodApi::update_cluster_software",
    "HyperPodApi::list_cluster_events",
    "HyperPodApi::describe_cluster_node",
    "HyperPodApi::list_training_plans",
    "HyperPodApi::search_training_plan_offerings",
    "S3Api::describe_bucket",
    "S3Api::create_bucket",
    "S3Api::delete_bucket",
    "S3Api::list_objects",
    "S3Api::put_object",
    "S3Api::head_object",
    "S3Api::delete_object",
    "MlflowTracking::list_tracking_servers",
    "MlflowTracking::describe_tracking_server",
    "MlflowTracking::create_tracking_server",
    "MlflowTracking::delete_tracking_server",
    "MlflowTracking::search_runs",
    "MlflowTracking::metric_history",
    "TaskGovernanceApi::list_scheduler_configs",
    "TaskGovernanceApi::create_scheduler_config",
    "TaskGovernanceApi::update_scheduler_config",
    "TaskGovernanceApi::delete_scheduler_config",
    "TaskGovernanceApi::list_compute_quotas",
    "TaskGovernanceApi::create_compute_quota",
    "TaskGovernanceApi::update_compute_quota",
    "TaskGovernanceApi::delete_compute_quota",
    "FsxApi::list_lustre_file_systems",
    "FsxApi::describe_lustre_file_system",
    "FsxApi::create_lustre_file_system",
    "FsxApi::delete_lustre_file_system",
    "FsxApi::lustre_quota",
    "FsxApi::list_data_repository_associations",
    "FsxApi::create_data_repository_association",
    "FsxApi::delete_data_repository_association",
    "AmpApi::list_prometheus_workspaces",
    "AmpApi::describe_prometheus_workspace",
    "AmpApi::create_prometheus_workspace",
    "AmpApi::delete_prometheus_workspace",
];

/// Trait methods whose requests no botocore model describes, and why.
pub const UNMODELLED: &[(&str, &str)] = &[
    (
        "MlflowTracking::search_runs",
        "the MLflow REST API of the tracking server (SigV4 `sagemaker-mlflow`), not a botocore service; tested against a real `mlflow server` in tests/moto.rs",
    ),
    (
        "MlflowTracking::metric_history",
        "the MLflow REST API of the tracking server (SigV4 `sagemaker-mlflow`), not a botocore service; tested against a real `mlflow server` in tests/moto.rs",
    ),
];

fn tags() -> Tags {
    ownership_tags("demo", "op-1")
}

fn group(v: Value) -> InstanceGroupSpec {
    serde_json::from_value(v).expect("instance group spec")
}

fn hp(g: Value, subnet: &str) -> HyperPodInstanceGroupRequest {
    HyperPodInstanceGroupRequest {
        spec: group(g),
        subnet_id: subnet.into(),
        security_group_ids: vec!["sg-0123456789abcdef0".into()],
        execution_role_arn: ROLE.into(),
        threads_per_core: None,
    }
}

fn on_demand_group() -> Value {
    json!({ "name": "workers", "instance_type": "ml.g5.12xlarge", "count": 2, "availability_zone": "us-east-1a",
            "lifecycle_script": { "source_s3_uri": "s3://is-demo-bucket/lifecycle", "on_create": "on_create.sh" } })
}

fn create_hp(groups: Vec<HyperPodInstanceGroupRequest>, recovery: NodeRecovery) -> CreateHyperPodCluster {
    CreateHyperPodCluster {
        region: "us-east-1".into(),
        name: "demo-hp".into(),
        eks_cluster_arn: EKS_ARN.into(),
        node_recovery: recovery,
        instance_groups: groups,
        tags: tags(),
    }
}

fn role_req() -> CreateIamRole {
    CreateIamRole {
        name: "demo-hyperpod-exec-role".into(),
        trust_policy: json!({ "Version": "2012-10-17", "Statement": [{ "Effect": "Allow",
            "Principal": { "Service": "sagemaker.amazonaws.com" }, "Action": "sts:AssumeRole" }] }),
        managed_policies: vec!["arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy".into()],
        inline_policies: vec![(
            "demo-bucket-access".into(),
            json!({ "Version": "2012-10-17", "Statement": [{ "Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"],
                "Resource": ["arn:aws:s3:::is-demo-bucket", "arn:aws:s3:::is-demo-bucket/*"] }] }),
        )],
        tags: tags(),
    }
}

fn tracking_server(version: Option<&str>) -> CreateTrackingServer {
    CreateTrackingServer {
        region: "us-east-1".into(),
        name: "team".into(),
        artifact_store_uri: "s3://is-demo-bucket/mlflow/team".into(),
        size: TrackingServerSize::Small,
        role_arn: "arn:aws:iam::123456789012:role/demo-mlflow-role".into(),
        mlflow_version: version.map(str::to_string),
        tags: tags(),
    }
}

fn lustre(deployment_type: LustreDeploymentType, throughput: Option<u32>) -> CreateLustreFileSystem {
    CreateLustreFileSystem {
        region: "us-east-1".into(),
        client_request_token: fsx_client_token("01JD0EXAMPLE-file_system"),
        subnet_id: "subnet-0123456789abcdef0".into(),
        security_group_ids: vec!["sg-0123456789abcdef0".into()],
        deployment_type,
        storage_capacity_gib: 2400,
        per_unit_storage_throughput: throughput,
        file_system_type_version: LUSTRE_VERSION.into(),
        tags: tags(),
    }
}

fn association() -> CreateDataRepositoryAssociation {
    CreateDataRepositoryAssociation {
        region: "us-east-1".into(),
        client_request_token: fsx_client_token("01JD0EXAMPLE-data_repository"),
        file_system_id: FSX_ID.into(),
        file_system_path: "/datasets".into(),
        data_repository_path: "s3://is-demo-bucket/datasets/".into(),
        batch_import_metadata: true,
        import_events: S3Event::ALL.to_vec(),
        export_events: vec![S3Event::New, S3Event::Changed],
        tags: tags(),
    }
}

fn pod_identity() -> CreatePodIdentityAssociation {
    CreatePodIdentityAssociation {
        region: "us-east-1".into(),
        cluster: "demo".into(),
        namespace: "kube-system".into(),
        service_account: "s3-csi-driver-sa".into(),
        role_arn: "arn:aws:iam::123456789012:role/demo-s3-csi-role".into(),
        client_request_token: "0b9c7c0e-6f7e-4a55-9a7e-7b2a4cde0006".into(),
        tags: tags(),
    }
}

fn network_req() -> CreateNetwork {
    use instantstart_core::subnet::{PlannedSubnet, SubnetRole};
    let s =
        |cidr: &str, az: &str, role| PlannedSubnet { cidr: cidr.parse().unwrap(), availability_zone: az.into(), role };
    CreateNetwork {
        region: "us-east-1".into(),
        name: "demo".into(),
        cidr: "10.0.0.0/16".parse().unwrap(),
        subnets: vec![
            s("10.0.0.0/24", "us-east-1a", SubnetRole::Public),
            s("10.0.1.0/24", "us-east-1b", SubnetRole::Public),
            s("10.0.16.0/20", "us-east-1a", SubnetRole::Private),
            s("10.0.32.0/20", "us-east-1b", SubnetRole::Private),
            s("10.0.64.0/18", "us-east-1a", SubnetRole::Compute),
        ],
        tags: tags(),
    }
}

macro_rules! run {
    (|$p:ident| $body:expr) => {
        |$p: AwsProvider| -> BoxFuture<'static, ()> {
            Box::pin(async move {
                $body;
            })
        }
    };
}

const HP_DESCRIBE: &[&str] = &["sagemaker:DescribeCluster", "sagemaker:ListTags"];

/// The table.
pub const CASES: &[Case] = &[
    // ------------------------------------------------------------ identity, quotas
    Case {
        method: "IdentityApi::caller_identity",
        variant: "",
        world: World::Fresh,
        run: run!(|p| p.caller_identity().await.unwrap()),
        expect: &["sts:GetCallerIdentity"],
    },
    Case {
        method: "QuotaApi::availability_zones",
        variant: "",
        world: World::Fresh,
        run: run!(|p| assert!(!p.availability_zones("us-east-1").await.unwrap().is_empty())),
        expect: &["ec2:DescribeAvailabilityZones"],
    },
    Case {
        method: "QuotaApi::instance_type_offerings",
        variant: "every ClusterInstanceType as a filter, in chunks",
        world: World::Fresh,
        run: run!(|p| assert!(!p.instance_type_offerings("us-east-1").await.unwrap().is_empty())),
        expect: &["ec2:DescribeInstanceTypeOfferings"],
    },
    Case {
        method: "QuotaApi::instance_type_specs",
        variant: "every ClusterInstanceType by name, in chunks; GPUs, Neuron devices, EFA, EFA-only mapped",
        world: World::Fresh,
        run: run!(|p| {
            let specs = p.instance_type_specs("us-east-1").await.unwrap();
            let g5 = specs.iter().find(|i| i.name == "ml.g5.12xlarge").expect("g5.12xlarge");
            assert_eq!(
                (g5.vcpus, g5.memory_gib, g5.accelerators, g5.accelerator.as_str()),
                (48, 192, 4, "nvidia-a10g")
            );
            assert_eq!((g5.efa_interfaces, g5.efa_only_supported), (1, true));
            let trn = specs.iter().find(|i| i.name == "ml.trn2.48xlarge").expect("trn2.48xlarge");
            assert_eq!((trn.accelerators, trn.accelerator.as_str(), trn.efa_interfaces), (16, "aws-trainium2", 16));
            let cpu = specs.iter().find(|i| i.name == "ml.m5.xlarge").expect("m5.xlarge");
            assert_eq!((cpu.accelerators, cpu.accelerator.as_str(), cpu.efa_interfaces), (0, "none", 0));
        }),
        expect: &["ec2:DescribeInstanceTypes"],
    },
    Case {
        method: "QuotaApi::hyperpod_instance_quota",
        variant: "",
        world: World::Fresh,
        run: run!(|p| assert!(p.hyperpod_instance_quota("us-east-1", "ml.p5.48xlarge").await.unwrap().is_some())),
        expect: &["service-quotas:ListAWSDefaultServiceQuotas", "service-quotas:ListServiceQuotas"],
    },
    Case {
        method: "QuotaApi::hyperpod_instance_quotas",
        variant: "only the HyperPod cluster-usage quotas",
        world: World::Fresh,
        run: run!(|p| {
            let q = p.hyperpod_instance_quotas("us-east-1").await.unwrap();
            let got: Vec<_> = q.iter().map(|q| (q.name.as_str(), q.code.as_str(), q.value)).collect();
            assert_eq!(got, [("ml.p5.48xlarge for cluster usage", "L-1194F27D", 2)]);
        }),
        expect: &["service-quotas:ListAWSDefaultServiceQuotas", "service-quotas:ListServiceQuotas"],
    },
    // ------------------------------------------------------------ network
    Case {
        method: "NetworkApi::find_vpc",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.find_vpc("us-east-1", "demo").await.unwrap().is_some())),
        expect: &["ec2:DescribeVpcs"],
    },
    Case {
        method: "NetworkApi::describe_network",
        variant: "existing VPC",
        world: World::Existing,
        run: run!(|p| assert_eq!(
            p.describe_network("us-east-1", "vpc-0123456789abcdef0").await.unwrap().subnets.len(),
            3
        )),
        expect: &[
            "ec2:DescribeVpcs",
            "ec2:DescribeSubnets",
            "ec2:DescribeRouteTables",
            "ec2:DescribeNatGateways",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeVpcEndpoints",
        ],
    },
    Case {
        method: "NetworkApi::create_network",
        variant: "new VPC: public, private and compute subnets, IGW, NAT, EFA security group",
        world: World::Fresh,
        run: run!(|p| p.create_network(&network_req()).await.unwrap()),
        expect: &[
            "ec2:DescribeVpcs",
            "ec2:CreateVpc",
            "ec2:ModifyVpcAttribute",
            "ec2:DescribeInternetGateways",
            "ec2:CreateInternetGateway",
            "ec2:AttachInternetGateway",
            "ec2:DescribeSubnets",
            "ec2:DescribeRouteTables",
            "ec2:DescribeNatGateways",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeVpcEndpoints",
            "ec2:CreateVpcEndpoint",
            "ec2:CreateRouteTable",
            "ec2:CreateSubnet",
            "ec2:ModifySubnetAttribute",
            "ec2:CreateRoute",
            "ec2:AssociateRouteTable",
            "ec2:DescribeAddresses",
            "ec2:AllocateAddress",
            "ec2:CreateNatGateway",
            "ec2:CreateSecurityGroup",
            "ec2:AuthorizeSecurityGroupIngress",
            "ec2:AuthorizeSecurityGroupEgress",
            "ec2:CreateTags",
        ],
    },
    Case {
        method: "NetworkApi::create_subnet",
        variant: "compute subnet in an existing VPC",
        world: World::Existing,
        run: run!(|p| p
            .create_subnet(&CreateSubnet {
                region: "us-east-1".into(),
                vpc_id: "vpc-0123456789abcdef0".into(),
                name: "demo-compute-us-east-1c".into(),
                cidr: "10.0.128.0/18".parse().unwrap(),
                availability_zone: "us-east-1c".into(),
                tags: tags(),
            })
            .await
            .unwrap()),
        expect: &[
            "ec2:DescribeVpcs",
            "ec2:DescribeSubnets",
            "ec2:DescribeRouteTables",
            "ec2:DescribeNatGateways",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeVpcEndpoints",
            "ec2:CreateSubnet",
            "ec2:AssociateRouteTable",
        ],
    },
    Case {
        method: "NetworkApi::delete_subnet",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_subnet("us-east-1", "subnet-0c0c0c0c0c0c0c0c0").await.unwrap()),
        expect: &["ec2:DescribeSubnets", "ec2:DeleteSubnet"],
    },
    Case {
        method: "NetworkApi::delete_network",
        variant: "everything of ours in the VPC",
        world: World::Existing,
        run: run!(|p| p.delete_network("us-east-1", "vpc-0123456789abcdef0").await.unwrap()),
        expect: &[
            "ec2:DescribeVpcs",
            "ec2:DescribeSubnets",
            "ec2:DescribeRouteTables",
            "ec2:DescribeNatGateways",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeVpcEndpoints",
            "ec2:DeleteVpcEndpoints",
            "ec2:DeleteNatGateway",
            "ec2:DescribeAddresses",
            "ec2:ReleaseAddress",
            "ec2:DescribeInternetGateways",
            "ec2:DetachInternetGateway",
            "ec2:DeleteInternetGateway",
            "ec2:DeleteSubnet",
            "ec2:DisassociateRouteTable",
            "ec2:DeleteRouteTable",
            "ec2:DeleteSecurityGroup",
            "ec2:DeleteVpc",
        ],
    },
    // ------------------------------------------------------------ EKS
    Case {
        method: "EksApi::describe_eks_cluster",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert_eq!(
            p.describe_eks_cluster("us-east-1", "demo").await.unwrap().unwrap().authentication_mode.as_deref(),
            Some("API_AND_CONFIG_MAP")
        )),
        expect: &["eks:DescribeCluster"],
    },
    Case {
        method: "EksApi::list_eks_clusters",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert_eq!(p.list_eks_clusters("us-east-1").await.unwrap(), ["demo"])),
        expect: &["eks:ListClusters"],
    },
    Case {
        method: "EksApi::create_eks_cluster",
        variant: "with the EFA security group, access config, logging and public access blocks",
        world: World::Existing,
        run: run!(|p| p
            .create_eks_cluster(&CreateEksCluster {
                region: "us-east-1".into(),
                name: "demo".into(),
                version: "1.33".into(),
                role_arn: "arn:aws:iam::123456789012:role/demo-eks-cluster-role".into(),
                subnet_ids: vec!["subnet-0a0a0a0a0a0a0a0a0".into(), "subnet-0b0b0b0b0b0b0b0b0".into()],
                client_request_token: "0b9c7c0e-6f7e-4a55-9a7e-7b2a4cde0001".into(),
                tags: tags(),
                public_access_cidrs: vec!["198.51.100.7/32".into(), "203.0.113.0/24".into()],
            })
            .await
            .unwrap()),
        expect: &["ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "eks:CreateCluster"],
    },
    Case {
        method: "EksApi::delete_eks_cluster",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_eks_cluster("us-east-1", "demo").await.unwrap()),
        expect: &["eks:DeleteCluster"],
    },
    Case {
        method: "EksApi::describe_addon",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.describe_addon("us-east-1", "demo", "cert-manager").await.unwrap().is_some())),
        expect: &["eks:DescribeAddon"],
    },
    Case {
        method: "EksApi::create_addon",
        variant: "default version for the cluster",
        world: World::Existing,
        run: run!(|p| p
            .create_addon(&CreateEksAddon {
                region: "us-east-1".into(),
                cluster: "demo".into(),
                name: "cert-manager".into(),
                version: None,
                client_request_token: "0b9c7c0e-6f7e-4a55-9a7e-7b2a4cde0002".into(),
                configuration_values: None,
                tags: tags(),
            })
            .await
            .unwrap()),
        expect: &["eks:DescribeCluster", "eks:DescribeAddonVersions", "eks:CreateAddon"],
    },
    Case {
        method: "EksApi::create_addon",
        variant: "pinned version",
        world: World::Existing,
        run: run!(|p| p
            .create_addon(&CreateEksAddon {
                region: "us-east-1".into(),
                cluster: "demo".into(),
                name: "amazon-sagemaker-hyperpod-training-operator".into(),
                version: Some("v1.0.0-eksbuild.1".into()),
                client_request_token: "0b9c7c0e-6f7e-4a55-9a7e-7b2a4cde0003".into(),
                configuration_values: None,
                tags: tags(),
            })
            .await
            .unwrap()),
        expect: &["eks:CreateAddon"],
    },
    Case {
        method: "EksApi::delete_addon",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_addon("us-east-1", "demo", "cert-manager").await.unwrap()),
        expect: &["eks:DeleteAddon"],
    },
    Case {
        method: "EksApi::create_addon",
        variant: "with configuration values (the inference operator's)",
        world: World::Existing,
        run: run!(|p| p
            .create_addon(&CreateEksAddon {
                region: "us-east-1".into(),
                cluster: "demo".into(),
                name: "amazon-sagemaker-hyperpod-inference".into(),
                version: Some("v1.0.0-eksbuild.1".into()),
                client_request_token: "0b9c7c0e-6f7e-4a55-9a7e-7b2a4cde0005".into(),
                configuration_values: Some(json!({
                    "executionRoleArn": "arn:aws:iam::123456789012:role/SageMakerHyperPodInference-demo",
                    "keda": { "enabled": false },
                    "alb": { "enabled": false },
                })),
                tags: tags(),
            })
            .await
            .unwrap()),
        expect: &["eks:CreateAddon"],
    },
    Case {
        method: "EksApi::describe_addon_configuration",
        variant: "pinned version",
        world: World::Existing,
        run: run!(|p| assert!(
            p.describe_addon_configuration(
                "us-east-1",
                "demo",
                "amazon-sagemaker-hyperpod-inference",
                Some("v1.0.0-eksbuild.1")
            )
            .await
            .unwrap()
            .schema
            .is_object()
        )),
        expect: &["eks:DescribeAddonConfiguration"],
    },
    Case {
        method: "EksApi::describe_addon_configuration",
        variant: "the cluster's default version",
        world: World::Existing,
        run: run!(|p| p
            .describe_addon_configuration("us-east-1", "demo", "amazon-sagemaker-hyperpod-inference", None)
            .await
            .unwrap()),
        expect: &["eks:DescribeCluster", "eks:DescribeAddonVersions", "eks:DescribeAddonConfiguration"],
    },
    Case {
        method: "EksApi::list_pod_identity_associations",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert_eq!(
            p.list_pod_identity_associations("us-east-1", "demo", "kube-system", "s3-csi-driver-sa")
                .await
                .unwrap()
                .len(),
            1
        )),
        expect: &["eks:ListPodIdentityAssociations", "eks:DescribePodIdentityAssociation"],
    },
    Case {
        method: "EksApi::create_pod_identity_association",
        variant: "new",
        world: World::Fresh,
        run: run!(|p| p.create_pod_identity_association(&pod_identity()).await.unwrap()),
        expect: &["eks:CreatePodIdentityAssociation"],
    },
    Case {
        method: "EksApi::create_pod_identity_association",
        variant: "already exists: ours adopted",
        world: World::Existing,
        run: run!(|p| p.create_pod_identity_association(&pod_identity()).await.unwrap()),
        expect: &[
            "eks:CreatePodIdentityAssociation",
            "eks:ListPodIdentityAssociations",
            "eks:DescribePodIdentityAssociation",
        ],
    },
    Case {
        method: "EksApi::delete_pod_identity_association",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_pod_identity_association("us-east-1", "demo", "a-0123456789abcdef0").await.unwrap()),
        expect: &["eks:DeletePodIdentityAssociation"],
    },
    Case {
        method: "EksApi::ensure_access_entry",
        variant: "namespace-scoped and cluster-scoped policies",
        world: World::Existing,
        run: run!(|p| p
            .ensure_access_entry(&EnsureAccessEntry {
                region: "us-east-1".into(),
                cluster: "demo".into(),
                principal_arn: "arn:aws:iam::123456789012:role/instantstart-control-plane".into(),
                kind: "STANDARD".into(),
                policies: vec![
                    AccessPolicy {
                        policy_arn: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy".into(),
                        namespaces: vec![],
                    },
                    AccessPolicy {
                        policy_arn: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy".into(),
                        namespaces: vec!["team-a".into()],
                    },
                ],
                client_request_token: "0b9c7c0e-6f7e-4a55-9a7e-7b2a4cde0004".into(),
                tags: tags(),
            })
            .await
            .unwrap()),
        expect: &[
            "eks:CreateAccessEntry",
            "eks:AssociateAccessPolicy",
            "eks:DescribeAccessEntry",
            "eks:ListAssociatedAccessPolicies",
        ],
    },
    Case {
        method: "EksApi::describe_access_entry",
        variant: "with its associated policies",
        world: World::Existing,
        run: run!(|p| assert!(
            p.describe_access_entry("us-east-1", "demo", "arn:aws:iam::123456789012:role/instantstart-control-plane")
                .await
                .unwrap()
                .is_some()
        )),
        expect: &["eks:DescribeAccessEntry", "eks:ListAssociatedAccessPolicies"],
    },
    Case {
        method: "EksApi::delete_access_entry",
        variant: "",
        world: World::Existing,
        run: run!(|p| p
            .delete_access_entry("us-east-1", "demo", "arn:aws:iam::123456789012:role/instantstart-control-plane")
            .await
            .unwrap()),
        expect: &["eks:DeleteAccessEntry"],
    },
    Case {
        method: "AwsProvider::update_addon",
        variant: "default version",
        world: World::Existing,
        run: run!(|p| p
            .update_addon("us-east-1", "demo", "cert-manager", None, "0b9c7c0e-6f7e-4a55-9a7e-7b2a4cde0005")
            .await
            .unwrap()),
        expect: &["eks:DescribeCluster", "eks:DescribeAddonVersions", "eks:UpdateAddon", "eks:DescribeAddon"],
    },
    Case {
        method: "AwsProvider::eks_endpoint",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.eks_endpoint("us-east-1", "demo").await.unwrap().is_some())),
        expect: &["eks:DescribeCluster"],
    },
    // ------------------------------------------------------------ IAM
    Case {
        method: "IamApi::get_role",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.get_role("demo-hyperpod-exec-role").await.unwrap().is_some())),
        expect: &["iam:GetRole"],
    },
    Case {
        method: "IamApi::create_role",
        variant: "trust policy, managed and inline policies, tags",
        world: World::Fresh,
        run: run!(|p| p.create_role(&role_req()).await.unwrap()),
        expect: &["iam:CreateRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
    },
    Case {
        method: "IamApi::ensure_role_policies",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.ensure_role_policies(&role_req()).await.unwrap()),
        expect: &[
            "iam:PutRolePermissionsBoundary",
            "iam:UpdateAssumeRolePolicy",
            "iam:AttachRolePolicy",
            "iam:PutRolePolicy",
        ],
    },
    Case {
        method: "IamApi::delete_role",
        variant: "with attachments, inline policies and an instance profile",
        world: World::Existing,
        run: run!(|p| p.delete_role("demo-hyperpod-exec-role").await.unwrap()),
        expect: &[
            "iam:ListAttachedRolePolicies",
            "iam:DetachRolePolicy",
            "iam:ListRolePolicies",
            "iam:DeleteRolePolicy",
            "iam:ListInstanceProfilesForRole",
            "iam:RemoveRoleFromInstanceProfile",
            "iam:DeleteRole",
        ],
    },
    Case {
        method: "IamApi::get_oidc_provider",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.get_oidc_provider(ISSUER).await.unwrap().is_some())),
        expect: &["sts:GetCallerIdentity", "iam:GetOpenIDConnectProvider"],
    },
    Case {
        method: "IamApi::create_oidc_provider",
        variant: "",
        world: World::Fresh,
        run: run!(|p| p.create_oidc_provider(ISSUER, &tags()).await.unwrap()),
        expect: &["iam:CreateOpenIDConnectProvider"],
    },
    // ------------------------------------------------------------ HyperPod
    Case {
        method: "HyperPodApi::describe_training_plan",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.describe_training_plan("us-east-1", PLAN).await.unwrap().is_some())),
        expect: &["sagemaker:DescribeTrainingPlan"],
    },
    Case {
        method: "HyperPodApi::describe_hyperpod_cluster",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().is_some())),
        expect: HP_DESCRIBE,
    },
    Case {
        method: "HyperPodApi::list_hyperpod_clusters",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert_eq!(p.list_hyperpod_clusters("us-east-1").await.unwrap(), ["demo-hp"])),
        expect: &["sagemaker:ListClusters"],
    },
    Case {
        method: "HyperPodApi::create_hyperpod_cluster",
        variant: "on-demand, lifecycle script, automatic recovery",
        world: World::Existing,
        run: run!(|p| p
            .create_hyperpod_cluster(&create_hp(
                vec![hp(on_demand_group(), "subnet-0a0a0a0a0a0a0a0a0")],
                NodeRecovery::Automatic
            ))
            .await
            .unwrap()),
        expect: &["sagemaker:CreateCluster", "sagemaker:DescribeCluster", "sagemaker:ListTags"],
    },
    Case {
        method: "HyperPodApi::create_hyperpod_cluster",
        variant: "spot, training plan + EFA-only + deep health checks + big EBS, CPU group of 0, no recovery",
        world: World::Existing,
        run: run!(|p| {
            p
            .create_hyperpod_cluster(&create_hp(
                vec![
                    hp(
                        json!({ "name": "workers", "instance_type": "ml.p5.48xlarge", "count": 2, "availability_zone": "us-east-1a",
                            "capacity": { "type": "training_plan", "arn": PLAN }, "interface_mode": "efa_only",
                            "deep_health_checks": { "stress": true, "connectivity": true }, "ebs_volume_gb": 1000,
                            "lifecycle_script": { "source_s3_uri": "s3://is-demo-bucket/lifecycle", "on_create": "on_create.sh" } }),
                        "subnet-0a0a0a0a0a0a0a0a0",
                    ),
                    hp(
                        json!({ "name": "spot", "instance_type": "ml.g5.12xlarge", "count": 1, "availability_zone": "us-east-1b",
                            "capacity": { "type": "spot" },
                            "lifecycle_script": { "source_s3_uri": "s3://is-demo-bucket/lifecycle", "on_create": "on_create.sh" } }),
                        "subnet-0b0b0b0b0b0b0b0b0",
                    ),
                    hp(
                        json!({ "name": "cpu", "instance_type": "ml.m5.xlarge", "count": 0, "availability_zone": "us-east-1a",
                            "deep_health_checks": { "stress": true, "connectivity": false },
                            "lifecycle_script": { "source_s3_uri": "s3://is-demo-bucket/lifecycle", "on_create": "on_create.sh" } }),
                        "subnet-0a0a0a0a0a0a0a0a0",
                    ),
                ],
                NodeRecovery::None,
            ))
            .await
            .unwrap()
        }),
        expect: &["sagemaker:CreateCluster", "sagemaker:DescribeCluster", "sagemaker:ListTags"],
    },
    Case {
        method: "HyperPodApi::delete_hyperpod_cluster",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap()),
        expect: &["sagemaker:DeleteCluster"],
    },
    Case {
        method: "HyperPodApi::list_cluster_nodes",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(!p.list_cluster_nodes("us-east-1", "demo-hp").await.unwrap().is_empty())),
        expect: &["sagemaker:ListClusterNodes", "sagemaker:DescribeCluster", "ec2:DescribeSubnets"],
    },
    Case {
        method: "HyperPodApi::update_hyperpod_cluster",
        variant: "scale an existing group, add a group, delete a group",
        world: World::Existing,
        run: run!(|p| {
            p
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                instance_groups: vec![
                    hp(
                        json!({ "name": "workers", "instance_type": "ml.p5.48xlarge", "count": 4, "availability_zone": "us-east-1a",
                            "capacity": { "type": "training_plan", "arn": PLAN }, "interface_mode": "efa_only",
                            "lifecycle_script": { "source_s3_uri": "s3://is-demo-bucket/lifecycle", "on_create": "on_create.sh" } }),
                        "subnet-0a0a0a0a0a0a0a0a0",
                    ),
                    hp(
                        json!({ "name": "extra", "instance_type": "ml.g5.12xlarge", "count": 2, "availability_zone": "us-east-1b",
                            "capacity": { "type": "spot" },
                            "lifecycle_script": { "source_s3_uri": "s3://is-demo-bucket/lifecycle", "on_create": "on_create.sh" } }),
                        "subnet-0b0b0b0b0b0b0b0b0",
                    ),
                ],
                instance_groups_to_delete: vec!["spot".into()],
                ..UpdateHyperPodCluster::of("us-east-1", "demo-hp")
            })
            .await
            .unwrap()
        }),
        expect: &["sagemaker:DescribeCluster", "sagemaker:UpdateCluster", "sagemaker:ListTags"],
    },
    Case {
        method: "HyperPodApi::update_hyperpod_cluster",
        variant: "node recovery, tiered storage on, autoscaling on",
        world: World::Existing,
        run: run!(|p| p
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                node_recovery: Some(NodeRecovery::Automatic),
                tiered_storage: Some(Some(TieredCheckpointing { memory_percent: 20 })),
                autoscaling: Some(AutoscalingUpdate {
                    enabled: true,
                    role_arn: Some("arn:aws:iam::123456789012:role/demo-hyperpod-autoscaling".into()),
                }),
                ..UpdateHyperPodCluster::of("us-east-1", "demo-hp")
            })
            .await
            .unwrap()),
        expect: &["sagemaker:DescribeCluster", "sagemaker:UpdateCluster", "sagemaker:ListTags"],
    },
    Case {
        method: "HyperPodApi::update_hyperpod_cluster",
        variant: "node recovery alone (features patch)",
        world: World::Existing,
        run: run!(|p| p
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                node_recovery: Some(NodeRecovery::None),
                ..UpdateHyperPodCluster::of("us-east-1", "demo-hp")
            })
            .await
            .unwrap()),
        expect: &["sagemaker:DescribeCluster", "sagemaker:UpdateCluster", "sagemaker:ListTags"],
    },
    Case {
        method: "HyperPodApi::update_hyperpod_cluster",
        variant: "tiered storage off, autoscaling off",
        world: World::Existing,
        run: run!(|p| p
            .update_hyperpod_cluster(&UpdateHyperPodCluster {
                tiered_storage: Some(None),
                autoscaling: Some(AutoscalingUpdate { enabled: false, role_arn: None }),
                ..UpdateHyperPodCluster::of("us-east-1", "demo-hp")
            })
            .await
            .unwrap()),
        expect: &["sagemaker:DescribeCluster", "sagemaker:UpdateCluster", "sagemaker:ListTags"],
    },
    Case {
        method: "HyperPodApi::batch_node_action",
        variant: "reboot",
        world: World::Existing,
        run: run!(|p| p
            .batch_node_action("us-east-1", "demo-hp", NodeAction::Reboot, &["i-0123456789abcdef0".into()])
            .await
            .unwrap()),
        expect: &["sagemaker:BatchRebootClusterNodes"],
    },
    Case {
        method: "HyperPodApi::batch_node_action",
        variant: "replace",
        world: World::Existing,
        run: run!(|p| p
            .batch_node_action("us-east-1", "demo-hp", NodeAction::Replace, &["i-0123456789abcdef0".into()])
            .await
            .unwrap()),
        expect: &["sagemaker:BatchReplaceClusterNodes"],
    },
    Case {
        method: "HyperPodApi::batch_node_action",
        variant: "delete",
        world: World::Existing,
        run: run!(|p| p
            .batch_node_action(
                "us-east-1",
                "demo-hp",
                NodeAction::Delete,
                &["i-0123456789abcdef0".into(), "i-0123456789abcdef1".into()]
            )
            .await
            .unwrap()),
        expect: &["sagemaker:BatchDeleteClusterNodes"],
    },
    Case {
        method: "HyperPodApi::start_cluster_health_check",
        variant: "whole group, both checks",
        world: World::Existing,
        run: run!(|p| p
            .start_cluster_health_check(
                "us-east-1",
                "demo-hp",
                &[HealthCheckTarget {
                    instance_group: "workers".into(),
                    node_ids: vec![],
                    checks: vec![DeepHealthCheck::InstanceStress, DeepHealthCheck::InstanceConnectivity],
                }]
            )
            .await
            .unwrap()),
        expect: &["sagemaker:StartClusterHealthCheck"],
    },
    Case {
        method: "HyperPodApi::start_cluster_health_check",
        variant: "named nodes of two groups",
        world: World::Existing,
        run: run!(|p| p
            .start_cluster_health_check(
                "us-east-1",
                "demo-hp",
                &[
                    HealthCheckTarget {
                        instance_group: "workers".into(),
                        node_ids: vec!["i-0123456789abcdef0".into(), "i-0abcdef1".into()],
                        checks: vec![DeepHealthCheck::InstanceStress],
                    },
                    HealthCheckTarget {
                        instance_group: "extra".into(),
                        node_ids: vec!["i-0123456789abcdef1".into()],
                        checks: vec![DeepHealthCheck::InstanceConnectivity],
                    },
                ]
            )
            .await
            .unwrap()),
        expect: &["sagemaker:StartClusterHealthCheck"],
    },
    Case {
        method: "HyperPodApi::list_cluster_events",
        variant: "first page, no filter",
        world: World::Existing,
        run: run!(|p| {
            let page = p.list_cluster_events("us-east-1", "demo-hp", &ClusterEventQuery::default()).await.unwrap();
            assert_eq!(page.events.len(), 1);
            assert_eq!(page.next_cursor.as_deref(), Some("page-2"));
        }),
        expect: &["sagemaker:ListClusterEvents"],
    },
    Case {
        method: "HyperPodApi::list_cluster_events",
        variant: "every filter and a cursor",
        world: World::Existing,
        run: run!(|p| {
            let q = ClusterEventQuery {
                instance_group: Some("workers".into()),
                node_id: Some("i-0123456789abcdef0".into()),
                resource_type: Some(ClusterEventResource::Instance),
                after: "2026-01-01T00:00:00Z".parse().ok(),
                before: "2026-01-02T00:00:00Z".parse().ok(),
                limit: Some(100),
                cursor: Some("page-2".into()),
            };
            p.list_cluster_events("us-east-1", "demo-hp", &q).await.unwrap();
        }),
        expect: &["sagemaker:ListClusterEvents"],
    },
    Case {
        method: "HyperPodApi::describe_cluster_node",
        variant: "",
        world: World::Existing,
        run: run!(|p| {
            let n = p.describe_cluster_node("us-east-1", "demo-hp", "i-0123456789abcdef0").await.unwrap().unwrap();
            assert_eq!(n.private_ip.as_deref(), Some("10.1.2.3"));
            assert_eq!(n.availability_zone.as_deref(), Some("us-east-1a"));
        }),
        expect: &["sagemaker:DescribeClusterNode"],
    },
    Case {
        method: "HyperPodApi::list_training_plans",
        variant: "two pages",
        world: World::Existing,
        run: run!(|p| {
            let plans = p.list_training_plans("us-east-1").await.unwrap();
            assert_eq!(plans.len(), 2, "{plans:?}");
            let first = &plans[0];
            assert_eq!((first.name.as_str(), first.status.as_str()), ("p5-plan", "Active"));
            assert_eq!(
                (first.instance_type.as_deref(), first.availability_zone.as_deref()),
                (Some("ml.p5.48xlarge"), Some("us-east-1a"))
            );
            assert_eq!(
                (first.total_instance_count, first.available_instance_count, first.in_use_instance_count),
                (4, Some(2), Some(2))
            );
            assert_eq!(first.target_resources, ["hyperpod-cluster"]);
            assert!(first.start_time.is_some() && first.end_time > first.start_time);
        }),
        expect: &["sagemaker:ListTrainingPlans"],
    },
    Case {
        method: "HyperPodApi::search_training_plan_offerings",
        variant: "with a window",
        world: World::Existing,
        run: run!(|p| {
            let q = OfferingQuery {
                instance_type: "ml.p5.48xlarge".into(),
                instance_count: 2,
                duration_hours: 48,
                start_after: "2026-01-01T00:00:00Z".parse().ok(),
                end_before: "2026-02-01T00:00:00Z".parse().ok(),
            };
            let o = p.search_training_plan_offerings("us-east-1", &q).await.unwrap();
            assert_eq!((o[0].offering_id.as_str(), o[0].instance_count), ("tpo-0123456789abcdef", 2));
            assert_eq!((o[0].availability_zone.as_deref(), o[0].duration_hours), (Some("us-east-1a"), Some(48)));
            assert_eq!((o[0].upfront_fee.as_deref(), o[0].currency_code.as_deref()), (Some("1234.56"), Some("USD")));
        }),
        expect: &["sagemaker:SearchTrainingPlanOfferings"],
    },
    Case {
        method: "HyperPodApi::search_training_plan_offerings",
        variant: "no window, the largest count and duration",
        world: World::Existing,
        run: run!(|p| {
            let q = OfferingQuery {
                instance_type: "ml.trn2.48xlarge".into(),
                instance_count: 256,
                duration_hours: 87_600,
                start_after: None,
                end_before: None,
            };
            p.search_training_plan_offerings("us-east-1", &q).await.unwrap();
        }),
        expect: &["sagemaker:SearchTrainingPlanOfferings"],
    },
    Case {
        method: "HyperPodApi::search_training_plan_offerings",
        variant: "a type no plan reserves: refused before any request",
        world: World::Existing,
        run: run!(|p| {
            let q = OfferingQuery {
                instance_type: "ml.g5.2xlarge".into(),
                instance_count: 2,
                duration_hours: 24,
                start_after: None,
                end_before: None,
            };
            let e = p.search_training_plan_offerings("us-east-1", &q).await.unwrap_err();
            assert_eq!(e.kind, ProviderErrorKind::InvalidRequest, "{e}");
        }),
        expect: &[],
    },
    Case {
        method: "HyperPodApi::update_cluster_software",
        variant: "all groups",
        world: World::Existing,
        run: run!(|p| p
            .update_cluster_software(&UpdateClusterSoftware {
                region: "us-east-1".into(),
                cluster: "demo-hp".into(),
                instance_groups: vec![],
                deployment: None,
                image_id: None,
            })
            .await
            .unwrap()),
        expect: &["sagemaker:UpdateClusterSoftware"],
    },
    Case {
        method: "HyperPodApi::update_cluster_software",
        variant: "named groups, one to a named release",
        world: World::Existing,
        run: run!(|p| p
            .update_cluster_software(&UpdateClusterSoftware {
                region: "us-east-1".into(),
                cluster: "demo-hp".into(),
                instance_groups: vec![
                    SoftwareUpdateGroup { name: "workers".into(), image_release_version: None },
                    SoftwareUpdateGroup { name: "extra".into(), image_release_version: Some("2025.10.1".into()) }
                ],
                deployment: None,
                image_id: None,
            })
            .await
            .unwrap()),
        expect: &["sagemaker:UpdateClusterSoftware"],
    },
    Case {
        method: "HyperPodApi::update_cluster_software",
        variant: "rolling policy by instance count",
        world: World::Existing,
        run: run!(|p| p
            .update_cluster_software(&UpdateClusterSoftware {
                region: "us-east-1".into(),
                cluster: "demo-hp".into(),
                instance_groups: vec![SoftwareUpdateGroup { name: "workers".into(), image_release_version: None }],
                deployment: Some(SoftwareUpdateDeployment {
                    max_batch: BatchSize { kind: BatchSizeKind::InstanceCount, value: 2 },
                    rollback_max_batch: Some(BatchSize { kind: BatchSizeKind::InstanceCount, value: 1 }),
                    wait_interval_secs: Some(300),
                    rollback_alarms: vec!["hp-errors".into()],
                }),
                image_id: None,
            })
            .await
            .unwrap()),
        expect: &["sagemaker:UpdateClusterSoftware"],
    },
    Case {
        method: "HyperPodApi::update_cluster_software",
        variant: "rolling policy by percentage",
        world: World::Existing,
        run: run!(|p| p
            .update_cluster_software(&UpdateClusterSoftware {
                region: "us-east-1".into(),
                cluster: "demo-hp".into(),
                instance_groups: vec![],
                deployment: Some(SoftwareUpdateDeployment {
                    max_batch: BatchSize { kind: BatchSizeKind::CapacityPercentage, value: 25 },
                    rollback_max_batch: Some(BatchSize { kind: BatchSizeKind::CapacityPercentage, value: 50 }),
                    wait_interval_secs: Some(0),
                    rollback_alarms: vec![],
                }),
                image_id: None,
            })
            .await
            .unwrap()),
        expect: &["sagemaker:UpdateClusterSoftware"],
    },
    Case {
        method: "HyperPodApi::update_cluster_software",
        variant: "image id",
        world: World::Existing,
        run: run!(|p| p
            .update_cluster_software(&UpdateClusterSoftware {
                region: "us-east-1".into(),
                cluster: "demo-hp".into(),
                instance_groups: vec![],
                deployment: None,
                image_id: Some("ami-0123456789abcdef0".into()),
            })
            .await
            .unwrap()),
        expect: &["sagemaker:UpdateClusterSoftware"],
    },
    Case {
        method: "HyperPodApi::update_cluster_software",
        variant: "default image",
        world: World::Existing,
        run: run!(|p| p
            .update_cluster_software(&UpdateClusterSoftware {
                region: "us-east-1".into(),
                cluster: "demo-hp".into(),
                instance_groups: vec![SoftwareUpdateGroup { name: "workers".into(), image_release_version: None }],
                deployment: None,
                image_id: Some("default".into()),
            })
            .await
            .unwrap()),
        expect: &["sagemaker:UpdateClusterSoftware"],
    },
    // ------------------------------------------------------------ S3
    Case {
        method: "S3Api::describe_bucket",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.describe_bucket("is-demo-bucket").await.unwrap().is_some())),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:GetBucketTagging"],
    },
    Case {
        method: "S3Api::create_bucket",
        variant: "in us-east-1 (no location constraint)",
        world: World::Fresh,
        run: run!(|p| p
            .create_bucket(&CreateBucket { region: "us-east-1".into(), name: "is-demo-bucket".into(), tags: tags() })
            .await
            .unwrap()),
        expect: &[
            "sts:GetCallerIdentity",
            "s3:HeadBucket",
            "s3:CreateBucket",
            "s3:PutPublicAccessBlock",
            "s3:PutBucketEncryption",
            "s3:PutBucketTagging",
        ],
    },
    Case {
        method: "S3Api::create_bucket",
        variant: "in eu-west-1 (location constraint)",
        world: World::Fresh,
        run: run!(|p| p
            .create_bucket(&CreateBucket { region: "eu-west-1".into(), name: "is-demo-bucket".into(), tags: tags() })
            .await
            .unwrap()),
        expect: &[
            "sts:GetCallerIdentity",
            "s3:HeadBucket",
            "s3:CreateBucket",
            "s3:PutPublicAccessBlock",
            "s3:PutBucketEncryption",
            "s3:PutBucketTagging",
        ],
    },
    Case {
        method: "S3Api::create_bucket",
        variant: "ours already: hardened again",
        world: World::Existing,
        run: run!(|p| p
            .create_bucket(&CreateBucket { region: "us-east-1".into(), name: "is-demo-bucket".into(), tags: tags() })
            .await
            .unwrap()),
        expect: &[
            "sts:GetCallerIdentity",
            "s3:HeadBucket",
            "s3:GetBucketTagging",
            "s3:PutPublicAccessBlock",
            "s3:PutBucketEncryption",
            "s3:PutBucketTagging",
        ],
    },
    Case {
        method: "S3Api::delete_bucket",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_bucket("is-demo-bucket").await.unwrap()),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:DeleteBucket"],
    },
    Case {
        method: "S3Api::list_objects",
        variant: "a prefix, in another region",
        world: World::BucketElsewhere,
        run: run!(|p| assert!(!p.list_objects("is-demo-bucket", "models/", None).await.unwrap().entries.is_empty())),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:ListObjectsV2"],
    },
    Case {
        method: "S3Api::list_objects",
        variant: "top level",
        world: World::Existing,
        run: run!(|p| p.list_objects("is-demo-bucket", "", None).await.unwrap()),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:ListObjectsV2"],
    },
    Case {
        method: "S3Api::put_object",
        variant: "the lifecycle script, with its SHA-256 checksum",
        world: World::Existing,
        run: run!(|p| p
            .put_object(&PutObject {
                bucket: "is-demo-bucket".into(),
                key: "lifecycle/0123456789abcdef/on_create.sh".into(),
                body: b"#!/bin/bash\nset -euo pipefail\n".to_vec(),
                content_type: "text/x-shellscript".into(),
            })
            .await
            .unwrap()),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:PutObject"],
    },
    Case {
        method: "S3Api::head_object",
        variant: "present, with its checksum",
        world: World::Existing,
        run: run!(|p| assert!(
            p.head_object("is-demo-bucket", "lifecycle/0123456789abcdef/on_create.sh")
                .await
                .unwrap()
                .is_some_and(|h| h.sha256.is_some())
        )),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:HeadObject"],
    },
    Case {
        method: "S3Api::head_object",
        variant: "absent",
        world: World::Existing,
        run: run!(|p| assert!(
            p.head_object("is-demo-bucket", "lifecycle/missing/on_create.sh").await.unwrap().is_none()
        )),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:HeadObject"],
    },
    Case {
        method: "S3Api::delete_object",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_object("is-demo-bucket", "lifecycle/0123456789abcdef/on_create.sh").await.unwrap()),
        expect: &["sts:GetCallerIdentity", "s3:HeadBucket", "s3:DeleteObject"],
    },
    // ------------------------------------------------------------ MLflow servers
    Case {
        method: "MlflowTracking::list_tracking_servers",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(!p.list_tracking_servers("us-east-1").await.unwrap().is_empty())),
        expect: &[
            "sagemaker:ListMlflowTrackingServers",
            "sagemaker:DescribeMlflowTrackingServer",
            "sagemaker:ListTags",
        ],
    },
    Case {
        method: "MlflowTracking::describe_tracking_server",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert!(p.describe_tracking_server("us-east-1", "team").await.unwrap().is_some())),
        expect: &["sagemaker:DescribeMlflowTrackingServer", "sagemaker:ListTags"],
    },
    Case {
        method: "MlflowTracking::create_tracking_server",
        variant: "service default version",
        world: World::Fresh,
        run: run!(|p| p.create_tracking_server(&tracking_server(None)).await.unwrap()),
        expect: &["sagemaker:CreateMlflowTrackingServer"],
    },
    Case {
        method: "MlflowTracking::create_tracking_server",
        variant: "pinned MLflow version",
        world: World::Fresh,
        run: run!(|p| p.create_tracking_server(&tracking_server(Some("3.0"))).await.unwrap()),
        expect: &["sagemaker:CreateMlflowTrackingServer"],
    },
    Case {
        method: "MlflowTracking::delete_tracking_server",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_tracking_server("us-east-1", "team").await.unwrap()),
        expect: &["sagemaker:DeleteMlflowTrackingServer"],
    },
    // ------------------------------------------------------------ task governance
    Case {
        method: "TaskGovernanceApi::list_scheduler_configs",
        variant: "",
        world: World::Existing,
        run: run!(|p| {
            let all = p.list_scheduler_configs("us-east-1", HP_ARN).await.unwrap();
            assert_eq!(all.len(), 1);
            assert_eq!(all[0].policy, governance_policy());
            assert!(is_owned(&all[0].tags, "demo"));
        }),
        expect: &[
            "sagemaker:ListClusterSchedulerConfigs",
            "sagemaker:DescribeClusterSchedulerConfig",
            "sagemaker:ListTags",
        ],
    },
    Case {
        method: "TaskGovernanceApi::create_scheduler_config",
        variant: "",
        world: World::Fresh,
        run: run!(|p| {
            let sc = p
                .create_scheduler_config("us-east-1", "demo-policy", HP_ARN, &governance_policy(), &tags())
                .await
                .unwrap();
            assert_eq!(sc.id, SCHEDULER_ID);
        }),
        expect: &["sagemaker:CreateClusterSchedulerConfig"],
    },
    Case {
        method: "TaskGovernanceApi::update_scheduler_config",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert_eq!(
            p.update_scheduler_config("us-east-1", SCHEDULER_ID, 1, &governance_policy()).await.unwrap(),
            2
        )),
        expect: &["sagemaker:UpdateClusterSchedulerConfig"],
    },
    Case {
        method: "TaskGovernanceApi::delete_scheduler_config",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_scheduler_config("us-east-1", SCHEDULER_ID).await.unwrap()),
        expect: &["sagemaker:DeleteClusterSchedulerConfig"],
    },
    Case {
        method: "TaskGovernanceApi::list_compute_quotas",
        variant: "",
        world: World::Existing,
        run: run!(|p| {
            let all = p.list_compute_quotas("us-east-1", HP_ARN).await.unwrap();
            assert_eq!(all.len(), 1);
            assert_eq!(all[0].config, governance_quota(Some(2), None));
        }),
        expect: &["sagemaker:ListComputeQuotas", "sagemaker:DescribeComputeQuota", "sagemaker:ListTags"],
    },
    Case {
        method: "TaskGovernanceApi::create_compute_quota",
        variant: "instances",
        world: World::Fresh,
        run: run!(|p| {
            let q = p
                .create_compute_quota("us-east-1", "demo-research", HP_ARN, &governance_quota(Some(2), None), &tags())
                .await
                .unwrap();
            assert_eq!(q.id, QUOTA_ID);
        }),
        expect: &["sagemaker:CreateComputeQuota"],
    },
    Case {
        method: "TaskGovernanceApi::create_compute_quota",
        variant: "accelerators",
        world: World::Fresh,
        run: run!(|p| {
            p.create_compute_quota("us-east-1", "demo-research", HP_ARN, &governance_quota(None, Some(8)), &tags())
                .await
                .unwrap();
        }),
        expect: &["sagemaker:CreateComputeQuota"],
    },
    Case {
        method: "TaskGovernanceApi::update_compute_quota",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert_eq!(
            p.update_compute_quota("us-east-1", QUOTA_ID, 1, &governance_quota(Some(1), None)).await.unwrap(),
            2
        )),
        expect: &["sagemaker:UpdateComputeQuota"],
    },
    Case {
        method: "TaskGovernanceApi::delete_compute_quota",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_compute_quota("us-east-1", QUOTA_ID).await.unwrap()),
        expect: &["sagemaker:DeleteComputeQuota"],
    },
    // ------------------------------------------------------------ FSx for Lustre
    Case {
        method: "FsxApi::list_lustre_file_systems",
        variant: "",
        world: World::Existing,
        run: run!(|p| assert_eq!(p.list_lustre_file_systems("us-east-1").await.unwrap().len(), 1)),
        expect: &["fsx:DescribeFileSystems"],
    },
    Case {
        method: "FsxApi::describe_lustre_file_system",
        variant: "",
        world: World::Existing,
        run: run!(|p| {
            let fs = p.describe_lustre_file_system("us-east-1", FSX_ID).await.unwrap().unwrap();
            assert_eq!((fs.lifecycle.as_str(), fs.mount_name.as_deref()), ("AVAILABLE", Some("abcdefgh")));
        }),
        expect: &["fsx:DescribeFileSystems"],
    },
    Case {
        method: "FsxApi::describe_lustre_file_system",
        variant: "unknown id",
        world: World::Fresh,
        run: run!(|p| assert!(p.describe_lustre_file_system("us-east-1", FSX_ID).await.unwrap().is_none())),
        expect: &["fsx:DescribeFileSystems"],
    },
    Case {
        method: "FsxApi::create_lustre_file_system",
        variant: "SCRATCH_2",
        world: World::Fresh,
        run: run!(|p| p.create_lustre_file_system(&lustre(LustreDeploymentType::Scratch2, None)).await.unwrap()),
        expect: &["fsx:CreateFileSystem"],
    },
    Case {
        method: "FsxApi::create_lustre_file_system",
        variant: "PERSISTENT_2 with throughput",
        world: World::Fresh,
        run: run!(|p| p
            .create_lustre_file_system(&lustre(LustreDeploymentType::Persistent2, Some(250)))
            .await
            .unwrap()),
        expect: &["fsx:CreateFileSystem"],
    },
    Case {
        method: "FsxApi::delete_lustre_file_system",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.delete_lustre_file_system("us-east-1", FSX_ID, "01JD0EXAMPLE-file_system").await.unwrap()),
        expect: &["fsx:DeleteFileSystem"],
    },
    Case {
        method: "FsxApi::lustre_quota",
        variant: "applied value",
        world: World::Existing,
        run: run!(|p| {
            let q = p.lustre_quota("us-east-1", LustreQuota::Persistent2Storage).await.unwrap().unwrap();
            assert_eq!((q.code.as_str(), q.value), ("L-8F1B9C74", 201_600));
        }),
        expect: &["service-quotas:GetServiceQuota"],
    },
    Case {
        method: "FsxApi::lustre_quota",
        variant: "no applied value: AWS's default",
        world: World::Fresh,
        run: run!(|p| {
            let q = p.lustre_quota("us-east-1", LustreQuota::ScratchFileSystems).await.unwrap().unwrap();
            assert_eq!((q.code.as_str(), q.value), ("L-C48231E5", 100));
        }),
        expect: &["service-quotas:GetServiceQuota", "service-quotas:GetAWSDefaultServiceQuota"],
    },
    Case {
        method: "FsxApi::list_data_repository_associations",
        variant: "",
        world: World::Existing,
        run: run!(|p| {
            let all = p.list_data_repository_associations("us-east-1", FSX_ID).await.unwrap();
            assert_eq!(all.len(), 1);
            assert_eq!(all[0].lifecycle, "AVAILABLE");
        }),
        expect: &["fsx:DescribeDataRepositoryAssociations"],
    },
    Case {
        method: "FsxApi::create_data_repository_association",
        variant: "",
        world: World::Existing,
        run: run!(|p| p.create_data_repository_association(&association()).await.unwrap()),
        expect: &["fsx:CreateDataRepositoryAssociation"],
    },
    Case {
        method: "FsxApi::delete_data_repository_association",
        variant: "",
        world: World::Existing,
        run: run!(|p| p
            .delete_data_repository_association("us-east-1", "dra-0123456789abcdef0", "01JD0EXAMPLE-data_repository")
            .await
            .unwrap()),
        expect: &["fsx:DeleteDataRepositoryAssociation"],
    },
    // ------------------------------------------------------------ Amazon Managed Service for Prometheus
    Case {
        method: "AmpApi::list_prometheus_workspaces",
        variant: "",
        world: World::Existing,
        run: run!(|p| {
            let found = p.list_prometheus_workspaces("us-east-1", &prometheus_alias("demo")).await.unwrap();
            assert_eq!(found.len(), 1);
            assert!(is_owned(&found[0].tags, "demo"), "{found:?}");
        }),
        expect: &["amp:ListWorkspaces"],
    },
    Case {
        method: "AmpApi::describe_prometheus_workspace",
        variant: "",
        world: World::Existing,
        run: run!(|p| {
            let w = p.describe_prometheus_workspace("us-east-1", AMP_ID).await.unwrap().unwrap();
            assert_eq!((w.status.as_str(), w.state()), ("ACTIVE", ResourceState::Active));
            assert!(w.prometheus_endpoint.is_some(), "{w:?}");
        }),
        expect: &["amp:DescribeWorkspace"],
    },
    Case {
        method: "AmpApi::describe_prometheus_workspace",
        variant: "unknown id",
        world: World::Fresh,
        run: run!(|p| assert!(p.describe_prometheus_workspace("us-east-1", AMP_ID).await.unwrap().is_none())),
        expect: &["amp:DescribeWorkspace"],
    },
    Case {
        method: "AmpApi::create_prometheus_workspace",
        variant: "",
        world: World::Fresh,
        run: run!(|p| {
            let w = p
                .create_prometheus_workspace(&CreatePrometheusWorkspace {
                    region: "us-east-1".into(),
                    alias: prometheus_alias("demo"),
                    client_token: amp_client_token("01JD0EXAMPLE:prometheus_workspace"),
                    tags: tags(),
                })
                .await
                .unwrap();
            assert_eq!((w.id.as_str(), w.status.as_str()), (AMP_ID, "CREATING"));
        }),
        expect: &["amp:CreateWorkspace"],
    },
    Case {
        method: "AmpApi::delete_prometheus_workspace",
        variant: "",
        world: World::Existing,
        run: run!(|p| p
            .delete_prometheus_workspace("us-east-1", AMP_ID, "01JD0EXAMPLE:prometheus_workspace")
            .await
            .unwrap()),
        expect: &["amp:DeleteWorkspace"],
    },
];

const SCHEDULER_ID: &str = "abc123def456";
const QUOTA_ID: &str = "fed654cba321";

fn governance_policy() -> SchedulerPolicy {
    SchedulerPolicy {
        priority_classes: vec![
            PriorityClass { name: "inference".into(), weight: 100 },
            PriorityClass { name: "training".into(), weight: 50 },
        ],
        fair_share: true,
    }
}

fn governance_quota(count: Option<u32>, accelerators: Option<u32>) -> QuotaConfig {
    QuotaConfig {
        team: "research".into(),
        resources: vec![QuotaResource { instance_type: "ml.p5.48xlarge".into(), count, accelerators }],
        strategy: SharingStrategy::LendAndBorrow,
        borrow_limit: Some(100),
        preempt_team_tasks: PreemptTeamTasks::LowerPriority,
        fair_share_weight: 10,
        enabled: true,
    }
}

// ---------------------------------------------------------------- the canned account

fn param<'a>(d: &'a Decoded, k: &str) -> Option<&'a Value> {
    d.params.get(k)
}

fn ec2_tags(pairs: &[(&str, &str)]) -> String {
    let mut all: Vec<(String, String)> = tags().into_iter().collect();
    all.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let items: String = all.iter().map(|(k, v)| format!("<item><key>{k}</key><value>{v}</value></item>")).collect();
    format!("<tagSet>{items}</tagSet>")
}

fn ec2(op: &str, inner: &str) -> Canned {
    Canned::xml(&format!(
        "<{op}Response xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r-1</requestId>{inner}</{op}Response>"
    ))
}

fn query(op: &str, inner: &str) -> Canned {
    Canned::xml(&format!(
        "<{op}Response><{op}Result>{inner}</{op}Result><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></{op}Response>"
    ))
}

const VPC: &str = "vpc-0123456789abcdef0";

fn vpc_item(existing: bool) -> String {
    let t = if existing { ec2_tags(&[("Name", "demo"), ("instantstart:network", "complete")]) } else { String::new() };
    format!("<item><vpcId>{VPC}</vpcId><cidrBlock>10.0.0.0/16</cidrBlock><state>available</state>{t}</item>")
}

fn subnet_item(id: &str, cidr: &str, az: &str, name: &str, role: &str) -> String {
    let t = ec2_tags(&[("Name", name), ("instantstart:network-role", role)]);
    format!(
        "<item><subnetId>{id}</subnetId><vpcId>{VPC}</vpcId><cidrBlock>{cidr}</cidrBlock><availabilityZone>{az}</availabilityZone>{t}</item>"
    )
}

fn subnets() -> String {
    [
        subnet_item("subnet-0a0a0a0a0a0a0a0a0", "10.0.0.0/24", "us-east-1a", "demo-public-us-east-1a", "public"),
        subnet_item("subnet-0b0b0b0b0b0b0b0b0", "10.0.16.0/20", "us-east-1b", "demo-private-us-east-1b", "private"),
        subnet_item("subnet-0c0c0c0c0c0c0c0c0", "10.0.64.0/18", "us-east-1a", "demo-compute-other", "compute"),
    ]
    .concat()
}

fn route_tables() -> String {
    let rt = |id: &str, name: &str, role: &str, route: &str, subnet: &str, assoc: &str| {
        format!(
            "<item><routeTableId>{id}</routeTableId><vpcId>{VPC}</vpcId><routeSet><item><destinationCidrBlock>0.0.0.0/0</destinationCidrBlock>{route}</item></routeSet>\
             <associationSet><item><routeTableAssociationId>{assoc}</routeTableAssociationId><routeTableId>{id}</routeTableId><subnetId>{subnet}</subnetId><main>false</main></item></associationSet>{}</item>",
            ec2_tags(&[("Name", name), ("instantstart:network-role", role)])
        )
    };
    [
        rt(
            "rtb-0a0a0a0a0a0a0a0a0",
            "demo-public-rt",
            "public-rt",
            "<gatewayId>igw-0a0a0a0a0a0a0a0a0</gatewayId>",
            "subnet-0a0a0a0a0a0a0a0a0",
            "rtbassoc-0a0a0a0a0a0a0a0a0",
        ),
        rt(
            "rtb-0b0b0b0b0b0b0b0b0",
            "demo-private-rt",
            "private-rt",
            "<natGatewayId>nat-0a0a0a0a0a0a0a0a0</natGatewayId>",
            "subnet-0b0b0b0b0b0b0b0b0",
            "rtbassoc-0b0b0b0b0b0b0b0b0",
        ),
    ]
    .concat()
}

fn nat_item(state: &str) -> String {
    format!(
        "<item><natGatewayId>nat-0a0a0a0a0a0a0a0a0</natGatewayId><subnetId>subnet-0a0a0a0a0a0a0a0a0</subnetId><vpcId>{VPC}</vpcId><state>{state}</state>{}</item>",
        ec2_tags(&[("Name", "demo-nat"), ("instantstart:network-role", "nat")])
    )
}

fn sg_item() -> String {
    format!(
        "<item><groupId>sg-0123456789abcdef0</groupId><groupName>demo-efa-sg</groupName><vpcId>{VPC}</vpcId>{}</item>",
        ec2_tags(&[("Name", "demo-efa-sg"), ("instantstart:network-role", "efa-sg")])
    )
}

fn eks_cluster() -> Value {
    json!({ "cluster": {
        "name": "demo", "arn": EKS_ARN, "version": "1.33", "status": "ACTIVE",
        "endpoint": "https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com",
        "certificateAuthority": { "data": "LS0tLS1CRUdJTi0tLS0t" },
        "identity": { "oidc": { "issuer": ISSUER } },
        "resourcesVpcConfig": { "vpcId": VPC, "subnetIds": ["subnet-0a0a0a0a0a0a0a0a0", "subnet-0b0b0b0b0b0b0b0b0"],
            "clusterSecurityGroupId": "sg-0c0c0c0c0c0c0c0c0" },
        "accessConfig": { "authenticationMode": "API_AND_CONFIG_MAP" },
        "tags": tags(),
    }})
}

fn addon(name: &str, status: &str) -> Value {
    json!({ "addon": { "addonName": name, "clusterName": "demo", "status": status, "addonVersion": "v1.17.2-eksbuild.1", "tags": tags() } })
}

fn hp_cluster() -> Value {
    json!({
        "ClusterArn": HP_ARN, "ClusterName": "demo-hp", "ClusterStatus": "InService", "CreationTime": 1_700_000_000.0,
        "VpcConfig": { "SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0a0a0a0a0a0a0a0a0"] },
        "Orchestrator": { "Eks": { "ClusterArn": EKS_ARN } },
        "NodeRecovery": "Automatic",
        "InstanceGroups": [
            { "InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 2, "TargetCount": 2,
              "Status": "InService", "TrainingPlanArn": PLAN, "ExecutionRole": ROLE, "ThreadsPerCore": 1 },
            { "InstanceGroupName": "spot", "InstanceType": "ml.g5.12xlarge", "CurrentCount": 1, "TargetCount": 1,
              "Status": "InService", "CapacityRequirements": { "Spot": {} }, "ExecutionRole": ROLE, "ThreadsPerCore": 1,
              "OverrideVpcConfig": { "SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0b0b0b0b0b0b0b0b0"] } }
        ]
    })
}

fn sm_tags() -> Value {
    json!({ "Tags": tags().into_iter().map(|(k, v)| json!({ "Key": k, "Value": v })).collect::<Vec<_>>() })
}

fn tracking(name: &str) -> Value {
    json!({ "TrackingServerArn": MLFLOW_ARN, "TrackingServerName": name, "ArtifactStoreUri": "s3://is-demo-bucket/mlflow/team",
            "TrackingServerSize": "Small", "MlflowVersion": "3.0", "RoleArn": "arn:aws:iam::123456789012:role/demo-mlflow-role",
            "TrackingServerStatus": "Created", "IsActive": "Active", "TrackingServerUrl": "https://t-abc.us-east-1.experiments.sagemaker.aws",
            "CreationTime": 1_700_000_000.0 })
}

fn file_system(lifecycle: &str) -> Value {
    let t: Vec<Value> = tags().iter().map(|(k, v)| json!({ "Key": k, "Value": v })).collect();
    json!({ "FileSystemId": FSX_ID, "FileSystemType": "LUSTRE", "Lifecycle": lifecycle, "StorageCapacity": 2400,
            "StorageType": "SSD", "VpcId": VPC, "SubnetIds": ["subnet-0123456789abcdef0"],
            "DNSName": format!("{FSX_ID}.fsx.us-east-1.amazonaws.com"), "Tags": t,
            "LustreConfiguration": { "DeploymentType": "SCRATCH_2", "MountName": "abcdefgh" } })
}

fn association_json(lifecycle: &str) -> Value {
    let t: Vec<Value> = tags().iter().map(|(k, v)| json!({ "Key": k, "Value": v })).collect();
    json!({ "AssociationId": "dra-0123456789abcdef0", "FileSystemId": FSX_ID, "Lifecycle": lifecycle,
            "FileSystemPath": "/datasets", "DataRepositoryPath": "s3://is-demo-bucket/datasets/", "Tags": t,
            "S3": { "AutoImportPolicy": { "Events": ["NEW", "CHANGED", "DELETED"] }, "AutoExportPolicy": { "Events": ["NEW"] } } })
}

fn amp_workspace(status: &str, described: bool) -> Value {
    let mut w = json!({ "workspaceId": AMP_ID, "alias": prometheus_alias("demo"),
            "arn": format!("arn:aws:aps:us-east-1:{ACCOUNT}:workspace/{AMP_ID}"),
            "status": { "statusCode": status }, "createdAt": 1_700_000_000.0, "tags": tags() });
    if described {
        w["prometheusEndpoint"] = json!(format!("https://aps-workspaces.us-east-1.amazonaws.com/workspaces/{AMP_ID}/"));
    }
    w
}

fn role_xml() -> String {
    let t: String = tags().iter().map(|(k, v)| format!("<member><Key>{k}</Key><Value>{v}</Value></member>")).collect();
    format!(
        "<Role><Path>/</Path><RoleName>demo-hyperpod-exec-role</RoleName><RoleId>AROAEXAMPLEID0000001</RoleId>\
         <Arn>{ROLE}</Arn><CreateDate>2026-01-01T00:00:00Z</CreateDate><Tags>{t}</Tags></Role>"
    )
}

fn s3_tagging() -> Canned {
    let t: String = tags().iter().map(|(k, v)| format!("<Tag><Key>{k}</Key><Value>{v}</Value></Tag>")).collect();
    Canned::xml(&format!("<Tagging><TagSet>{t}</TagSet></Tagging>"))
}

/// The canned account's answer to one decoded request.
fn respond(w: World, d: &Decoded, r: &Recorded, history: &[String]) -> Canned {
    let existing = w != World::Fresh;
    let after = |op: &str| history.iter().any(|h| h == op);
    let ok = |op: &str| ec2(op, "<return>true</return>");
    match d.id().as_str() {
        // STS
        "sts:GetCallerIdentity" => query(
            "GetCallerIdentity",
            &format!(
                "<Arn>arn:aws:iam::{ACCOUNT}:role/instantstart-control-plane</Arn><UserId>AROAEXAMPLE</UserId><Account>{ACCOUNT}</Account>"
            ),
        ),
        // EC2 reads
        "ec2:DescribeAvailabilityZones" => ec2(
            "DescribeAvailabilityZones",
            "<availabilityZoneInfo><item><zoneName>us-east-1a</zoneName><zoneId>use1-az1</zoneId><zoneState>available</zoneState></item>\
             <item><zoneName>us-east-1b</zoneName><zoneId>use1-az2</zoneId><zoneState>available</zoneState></item></availabilityZoneInfo>",
        ),
        "ec2:DescribeInstanceTypeOfferings" => ec2(
            "DescribeInstanceTypeOfferings",
            "<instanceTypeOfferingSet><item><instanceType>p5.48xlarge</instanceType><locationType>availability-zone</locationType>\
             <location>us-east-1a</location></item></instanceTypeOfferingSet>",
        ),
        "ec2:DescribeInstanceTypes" => ec2(
            "DescribeInstanceTypes",
            "<instanceTypeSet>\
             <item><instanceType>g5.12xlarge</instanceType><vCpuInfo><defaultVCpus>48</defaultVCpus></vCpuInfo>\
             <memoryInfo><sizeInMiB>196608</sizeInMiB></memoryInfo>\
             <gpuInfo><gpus><item><name>A10G</name><manufacturer>NVIDIA</manufacturer><count>4</count></item></gpus></gpuInfo>\
             <networkInfo><efaSupported>true</efaSupported><efaInfo><maximumEfaInterfaces>1</maximumEfaInterfaces></efaInfo>\
             <networkCards><item><networkCardIndex>0</networkCardIndex><interfaceTypeSet><item>interface</item><item>efa</item>\
             <item>efa-only</item></interfaceTypeSet></item></networkCards></networkInfo></item>\
             <item><instanceType>trn2.48xlarge</instanceType><vCpuInfo><defaultVCpus>192</defaultVCpus></vCpuInfo>\
             <memoryInfo><sizeInMiB>2097152</sizeInMiB></memoryInfo>\
             <neuronInfo><neuronDevices><item><name>Trainium2</name><count>16</count></item></neuronDevices></neuronInfo>\
             <networkInfo><efaSupported>true</efaSupported><efaInfo><maximumEfaInterfaces>16</maximumEfaInterfaces></efaInfo></networkInfo></item>\
             <item><instanceType>m5.xlarge</instanceType><vCpuInfo><defaultVCpus>4</defaultVCpus></vCpuInfo>\
             <memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo><networkInfo><efaSupported>false</efaSupported></networkInfo></item>\
             </instanceTypeSet>",
        ),
        "ec2:DescribeVpcs" => {
            let by_id = param(d, "VpcIds").is_some();
            let body = if by_id || existing { vpc_item(existing) } else { String::new() };
            ec2("DescribeVpcs", &format!("<vpcSet>{body}</vpcSet>"))
        }
        "ec2:DescribeSubnets" => {
            let body = match param(d, "SubnetIds").and_then(Value::as_array) {
                Some(ids) => ids
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|id| subnet_item(id, "10.0.64.0/18", "us-east-1a", "demo-compute-other", "compute"))
                    .collect(),
                None if existing => subnets(),
                None => String::new(),
            };
            ec2("DescribeSubnets", &format!("<subnetSet>{body}</subnetSet>"))
        }
        "ec2:DescribeRouteTables" => ec2(
            "DescribeRouteTables",
            &format!("<routeTableSet>{}</routeTableSet>", if existing { route_tables() } else { String::new() }),
        ),
        "ec2:DescribeNatGateways" => {
            let body = if param(d, "NatGatewayIds").is_some() {
                nat_item(if existing { "deleted" } else { "available" })
            } else if existing {
                nat_item("available")
            } else {
                String::new()
            };
            ec2("DescribeNatGateways", &format!("<natGatewaySet>{body}</natGatewaySet>"))
        }
        "ec2:DescribeSecurityGroups" => ec2(
            "DescribeSecurityGroups",
            &format!("<securityGroupInfo>{}</securityGroupInfo>", if existing { sg_item() } else { String::new() }),
        ),
        "ec2:DescribeInternetGateways" => {
            let body = if existing {
                format!(
                    "<item><internetGatewayId>igw-0a0a0a0a0a0a0a0a0</internetGatewayId><attachmentSet><item><vpcId>{VPC}</vpcId><state>available</state></item></attachmentSet>{}</item>",
                    ec2_tags(&[("Name", "demo-igw"), ("instantstart:network-role", "igw")])
                )
            } else {
                String::new()
            };
            ec2("DescribeInternetGateways", &format!("<internetGatewaySet>{body}</internetGatewaySet>"))
        }
        "ec2:DescribeAddresses" => {
            let body = if existing {
                format!(
                    "<item><allocationId>eipalloc-0a0a0a0a0a0a0a0a0</allocationId><publicIp>203.0.113.10</publicIp><domain>vpc</domain>{}</item>",
                    ec2_tags(&[("Name", "demo-nat-eip"), ("instantstart:network-role", "nat-eip")])
                )
            } else {
                String::new()
            };
            ec2("DescribeAddresses", &format!("<addressesSet>{body}</addressesSet>"))
        }
        "ec2:DescribeVpcEndpoints" => {
            let state = if after("ec2:DeleteVpcEndpoints") { "deleted" } else { "available" };
            let body = if existing {
                format!(
                    "<item><vpcEndpointId>vpce-0a0a0a0a0a0a0a0a0</vpcEndpointId><vpcEndpointType>Gateway</vpcEndpointType><vpcId>{VPC}</vpcId>\
                     <serviceName>com.amazonaws.us-east-1.s3</serviceName><state>{state}</state>\
                     <routeTableIdSet><item>rtb-0b0b0b0b0b0b0b0b0</item></routeTableIdSet>{}</item>",
                    ec2_tags(&[("Name", "demo-s3-endpoint"), ("instantstart:network-role", "s3-endpoint")])
                )
            } else {
                String::new()
            };
            ec2("DescribeVpcEndpoints", &format!("<vpcEndpointSet>{body}</vpcEndpointSet>"))
        }
        "ec2:CreateVpcEndpoint" => ec2(
            "CreateVpcEndpoint",
            &format!(
                "<vpcEndpoint><vpcEndpointId>vpce-0a0a0a0a0a0a0a0a0</vpcEndpointId><vpcEndpointType>Gateway</vpcEndpointType>\
                 <vpcId>{VPC}</vpcId><state>available</state></vpcEndpoint>"
            ),
        ),
        "ec2:DeleteVpcEndpoints" => ec2("DeleteVpcEndpoints", "<unsuccessful/>"),
        // EC2 writes
        "ec2:CreateVpc" => ec2(
            "CreateVpc",
            &format!("<vpc><vpcId>{VPC}</vpcId><cidrBlock>10.0.0.0/16</cidrBlock><state>pending</state></vpc>"),
        ),
        "ec2:CreateInternetGateway" => ec2(
            "CreateInternetGateway",
            "<internetGateway><internetGatewayId>igw-0a0a0a0a0a0a0a0a0</internetGatewayId></internetGateway>",
        ),
        "ec2:CreateRouteTable" => ec2(
            "CreateRouteTable",
            &format!("<routeTable><routeTableId>rtb-0c0c0c0c0c0c0c0c0</routeTableId><vpcId>{VPC}</vpcId></routeTable>"),
        ),
        "ec2:CreateSubnet" => ec2(
            "CreateSubnet",
            &format!(
                "<subnet><subnetId>subnet-0c0c0c0c0c0c0c0c0</subnetId><vpcId>{VPC}</vpcId><cidrBlock>10.0.64.0/18</cidrBlock></subnet>"
            ),
        ),
        "ec2:AllocateAddress" => {
            ec2("AllocateAddress", "<allocationId>eipalloc-0a0a0a0a0a0a0a0a0</allocationId><domain>vpc</domain>")
        }
        "ec2:CreateNatGateway" => ec2(
            "CreateNatGateway",
            "<natGateway><natGatewayId>nat-0a0a0a0a0a0a0a0a0</natGatewayId><state>pending</state></natGateway>",
        ),
        "ec2:CreateSecurityGroup" => {
            ec2("CreateSecurityGroup", "<return>true</return><groupId>sg-0123456789abcdef0</groupId>")
        }
        "ec2:AssociateRouteTable" => {
            ec2("AssociateRouteTable", "<associationId>rtbassoc-0c0c0c0c0c0c0c0c0</associationId>")
        }
        "ec2:DeleteNatGateway" => ec2("DeleteNatGateway", "<natGatewayId>nat-0a0a0a0a0a0a0a0a0</natGatewayId>"),
        "ec2:ModifyVpcAttribute"
        | "ec2:ModifySubnetAttribute"
        | "ec2:AttachInternetGateway"
        | "ec2:CreateRoute"
        | "ec2:ReplaceRoute"
        | "ec2:ReplaceRouteTableAssociation"
        | "ec2:AuthorizeSecurityGroupIngress"
        | "ec2:AuthorizeSecurityGroupEgress"
        | "ec2:CreateTags"
        | "ec2:ReleaseAddress"
        | "ec2:DetachInternetGateway"
        | "ec2:DeleteInternetGateway"
        | "ec2:DeleteSubnet"
        | "ec2:DisassociateRouteTable"
        | "ec2:DeleteRouteTable"
        | "ec2:DeleteSecurityGroup"
        | "ec2:DeleteVpc" => ok(&d.operation),
        // EKS
        "eks:DescribeCluster" | "eks:CreateCluster" | "eks:DeleteCluster" => Canned::json(eks_cluster()),
        "eks:ListClusters" => Canned::json(json!({ "clusters": ["demo"] })),
        "eks:DescribeAddonVersions" => Canned::json(
            json!({ "addons": [{ "addonName": param(d, "addonName").and_then(Value::as_str).unwrap_or("cert-manager"), "addonVersions": [
            { "addonVersion": "v1.17.2-eksbuild.1", "compatibilities": [{ "clusterVersion": "1.33", "defaultVersion": true }] }] }] }),
        ),
        "eks:DescribeAddon" => {
            Canned::json(addon(param(d, "addonName").and_then(Value::as_str).unwrap_or("cert-manager"), "ACTIVE"))
        }
        "eks:CreateAddon" => {
            Canned::json(addon(param(d, "addonName").and_then(Value::as_str).unwrap_or_default(), "CREATING"))
        }
        "eks:DeleteAddon" => Canned::json(addon("cert-manager", "DELETING")),
        "eks:UpdateAddon" => {
            Canned::json(json!({ "update": { "id": "u-1", "status": "InProgress", "type": "AddonUpdate" } }))
        }
        "eks:CreateAccessEntry" | "eks:DescribeAccessEntry" => Canned::json(json!({ "accessEntry": {
            "clusterName": "demo", "principalArn": param(d, "principalArn"), "type": "STANDARD", "tags": tags() } })),
        "eks:AssociateAccessPolicy" => {
            Canned::json(json!({ "clusterName": "demo", "principalArn": param(d, "principalArn") }))
        }
        "eks:ListAssociatedAccessPolicies" => {
            Canned::json(json!({ "clusterName": "demo", "principalArn": param(d, "principalArn"),
            "associatedAccessPolicies": [{ "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
                "accessScope": { "type": "namespace", "namespaces": ["team-a"] } }] }))
        }
        "eks:DeleteAccessEntry" => Canned::json(json!({})),
        "eks:DescribeAddonConfiguration" => Canned::json(json!({
            "addonName": param(d, "addonName"), "addonVersion": param(d, "addonVersion"),
            "configurationSchema": json!({ "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                "properties": { "executionRoleArn": { "type": "string" } } }).to_string(),
            "podIdentityConfiguration": [] })),
        "eks:ListPodIdentityAssociations" => Canned::json(json!({ "associations": [{
            "clusterName": "demo", "namespace": "kube-system", "serviceAccount": "s3-csi-driver-sa",
            "associationArn": "arn:aws:eks:us-east-1:123456789012:podidentityassociation/demo/a-0123456789abcdef0",
            "associationId": "a-0123456789abcdef0" }] })),
        "eks:CreatePodIdentityAssociation" if existing => {
            Canned::json_error(409, "ResourceInUseException", "Association already exists: a-0123456789abcdef0")
        }
        "eks:DescribePodIdentityAssociation"
        | "eks:CreatePodIdentityAssociation"
        | "eks:DeletePodIdentityAssociation" => Canned::json(json!({ "association": {
            "clusterName": "demo", "namespace": "kube-system", "serviceAccount": "s3-csi-driver-sa",
            "roleArn": "arn:aws:iam::123456789012:role/demo-s3-csi-role",
            "associationArn": "arn:aws:eks:us-east-1:123456789012:podidentityassociation/demo/a-0123456789abcdef0",
            "associationId": "a-0123456789abcdef0", "tags": tags(),
            "createdAt": 1_700_000_000.0, "modifiedAt": 1_700_000_000.0 } })),
        // IAM
        "iam:GetRole" => query("GetRole", &role_xml()),
        "iam:CreateRole" => query("CreateRole", &role_xml()),
        "iam:UpdateAssumeRolePolicy"
        | "iam:PutRolePermissionsBoundary"
        | "iam:AttachRolePolicy"
        | "iam:PutRolePolicy"
        | "iam:DetachRolePolicy"
        | "iam:DeleteRolePolicy"
        | "iam:RemoveRoleFromInstanceProfile"
        | "iam:DeleteRole" => query(&d.operation, ""),
        "iam:ListAttachedRolePolicies" => query(
            "ListAttachedRolePolicies",
            "<AttachedPolicies><member><PolicyName>AmazonSageMakerClusterInstanceRolePolicy</PolicyName>\
             <PolicyArn>arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy</PolicyArn></member></AttachedPolicies><IsTruncated>false</IsTruncated>",
        ),
        "iam:ListRolePolicies" => query(
            "ListRolePolicies",
            "<PolicyNames><member>demo-bucket-access</member></PolicyNames><IsTruncated>false</IsTruncated>",
        ),
        "iam:ListInstanceProfilesForRole" => query(
            "ListInstanceProfilesForRole",
            "<InstanceProfiles><member><Path>/</Path><InstanceProfileName>demo-profile</InstanceProfileName><InstanceProfileId>AIPAEXAMPLE000001</InstanceProfileId>\
             <Arn>arn:aws:iam::123456789012:instance-profile/demo-profile</Arn><CreateDate>2026-01-01T00:00:00Z</CreateDate><Roles/></member></InstanceProfiles><IsTruncated>false</IsTruncated>",
        ),
        "iam:GetOpenIDConnectProvider" => {
            let t: String =
                tags().iter().map(|(k, v)| format!("<member><Key>{k}</Key><Value>{v}</Value></member>")).collect();
            query(
                "GetOpenIDConnectProvider",
                &format!(
                    "<Url>{}</Url><ClientIDList><member>sts.amazonaws.com</member></ClientIDList><Tags>{t}</Tags>",
                    &ISSUER[8..]
                ),
            )
        }
        "iam:CreateOpenIDConnectProvider" => query(
            "CreateOpenIDConnectProvider",
            &format!(
                "<OpenIDConnectProviderArn>arn:aws:iam::{ACCOUNT}:oidc-provider/{}</OpenIDConnectProviderArn>",
                &ISSUER[8..]
            ),
        ),
        // SageMaker
        "sagemaker:DescribeTrainingPlan" => Canned::json(json!({
            "TrainingPlanArn": PLAN, "TrainingPlanName": "p5-plan", "Status": "Active", "TotalInstanceCount": 4,
            "ReservedCapacitySummaries": [{ "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc",
                "InstanceType": "ml.p5.48xlarge", "TotalInstanceCount": 4, "Status": "Active", "AvailabilityZone": "us-east-1a" }] })),
        "sagemaker:DescribeCluster" => Canned::json(hp_cluster()),
        "sagemaker:ListTags" => Canned::json(sm_tags()),
        "sagemaker:ListClusters" => {
            Canned::json(json!({ "ClusterSummaries": [{ "ClusterName": "demo-hp", "ClusterArn": HP_ARN,
            "ClusterStatus": "InService", "CreationTime": 1_700_000_000.0 }] }))
        }
        "sagemaker:CreateCluster"
        | "sagemaker:DeleteCluster"
        | "sagemaker:UpdateCluster"
        | "sagemaker:UpdateClusterSoftware"
        | "sagemaker:StartClusterHealthCheck" => Canned::json(json!({ "ClusterArn": HP_ARN })),
        "sagemaker:ListClusterNodes" => {
            Canned::json(json!({ "ClusterNodeSummaries": [{ "InstanceGroupName": "workers",
            "InstanceId": "i-0123456789abcdef0", "InstanceType": "ml.p5.48xlarge", "LaunchTime": 1_700_000_000.0,
            "InstanceStatus": { "Status": "Running" } }] }))
        }
        "sagemaker:ListTrainingPlans" if param(d, "NextToken").is_none() => {
            Canned::json(json!({ "NextToken": "page-2", "TrainingPlanSummaries": [{
            "TrainingPlanArn": PLAN, "TrainingPlanName": "p5-plan", "Status": "Active", "DurationHours": 720,
            "StartTime": 1_700_000_000.0, "EndTime": 1_702_592_000.0, "TotalInstanceCount": 4,
            "AvailableInstanceCount": 2, "InUseInstanceCount": 2, "TargetResources": ["hyperpod-cluster"],
            "ReservedCapacitySummaries": [{
                "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc-p5-plan",
                "InstanceType": "ml.p5.48xlarge", "TotalInstanceCount": 4, "Status": "Active",
                "AvailabilityZone": "us-east-1a" }] }] }))
        }
        "sagemaker:ListTrainingPlans" => Canned::json(json!({ "TrainingPlanSummaries": [{
            "TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/trn-plan",
            "TrainingPlanName": "trn-plan", "Status": "Scheduled", "TargetResources": ["training-job"],
            "ReservedCapacitySummaries": [] }] })),
        "sagemaker:SearchTrainingPlanOfferings" => Canned::json(json!({ "TrainingPlanOfferings": [{
            "TrainingPlanOfferingId": "tpo-0123456789abcdef", "TargetResources": ["hyperpod-cluster"],
            "DurationHours": 48, "UpfrontFee": "1234.56", "CurrencyCode": "USD",
            "ReservedCapacityOfferings": [{ "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2,
                "AvailabilityZone": "us-east-1a", "DurationHours": 48,
                "StartTime": 1_767_225_600.0, "EndTime": 1_767_398_400.0 }] }] })),
        "sagemaker:ListClusterEvents" => Canned::json(json!({ "Events": [{
            "EventId": "0f8fad5b-d9cb-469f-a165-70867728950e", "ClusterArn": HP_ARN, "ClusterName": "demo-hp",
            "InstanceGroupName": "workers", "InstanceId": "i-0123456789abcdef0", "ResourceType": "Instance",
            "EventTime": 1_700_000_000.0, "Description": "Instance i-0123456789abcdef0 is Running", "EventLevel": "Info" }],
            "NextToken": if param(d, "NextToken").is_some() { Value::Null } else { json!("page-2") } })),
        "sagemaker:DescribeClusterNode" => Canned::json(json!({ "NodeDetails": {
            "InstanceGroupName": "workers", "InstanceId": param(d, "NodeId"), "InstanceType": "ml.p5.48xlarge",
            "InstanceStatus": { "Status": "Running", "Message": "" }, "LaunchTime": 1_700_000_000.0,
            "LifeCycleConfig": { "SourceS3Uri": "s3://is-demo-bucket/lifecycle", "OnCreate": "on_create.sh" },
            "ThreadsPerCore": 1, "PrivatePrimaryIp": "10.1.2.3", "PrivateDnsHostname": "ip-10-1-2-3.ec2.internal",
            "Placement": { "AvailabilityZone": "us-east-1a", "AvailabilityZoneId": "use1-az1" },
            "CurrentImageId": "ami-0123456789abcdef0", "ImageVersionStatus": "UpToDate",
            "CapacityType": "OnDemand", "NetworkInterface": { "InterfaceType": "efa" } } })),
        "sagemaker:BatchRebootClusterNodes"
        | "sagemaker:BatchReplaceClusterNodes"
        | "sagemaker:BatchDeleteClusterNodes" => {
            Canned::json(json!({ "Successful": param(d, "NodeIds"), "Failed": [] }))
        }
        "sagemaker:ListMlflowTrackingServers" => {
            Canned::json(json!({ "TrackingServerSummaries": [{ "TrackingServerName": "team",
            "TrackingServerArn": MLFLOW_ARN, "TrackingServerStatus": "Created" }] }))
        }
        "sagemaker:DescribeMlflowTrackingServer" => Canned::json(tracking("team")),
        "sagemaker:ListClusterSchedulerConfigs" => Canned::json(json!({ "ClusterSchedulerConfigSummaries": [{
            "ClusterSchedulerConfigArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/{SCHEDULER_ID}"),
            "ClusterSchedulerConfigId": SCHEDULER_ID, "ClusterSchedulerConfigVersion": 1, "Name": "demo-policy",
            "CreationTime": 1_700_000_000.0, "Status": "Created", "ClusterArn": HP_ARN }] })),
        "sagemaker:DescribeClusterSchedulerConfig" => Canned::json(json!({
            "ClusterSchedulerConfigArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/{SCHEDULER_ID}"),
            "ClusterSchedulerConfigId": SCHEDULER_ID, "Name": "demo-policy", "ClusterSchedulerConfigVersion": 1,
            "Status": "Created", "CreationTime": 1_700_000_000.0, "ClusterArn": HP_ARN,
            "SchedulerConfig": { "PriorityClasses": [{ "Name": "inference", "Weight": 100 }, { "Name": "training", "Weight": 50 }],
                "FairShare": "Enabled" } })),
        "sagemaker:CreateClusterSchedulerConfig" => Canned::json(json!({
            "ClusterSchedulerConfigArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/{SCHEDULER_ID}"),
            "ClusterSchedulerConfigId": SCHEDULER_ID })),
        "sagemaker:UpdateClusterSchedulerConfig" => Canned::json(json!({
            "ClusterSchedulerConfigArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster-scheduler-config/{SCHEDULER_ID}"),
            "ClusterSchedulerConfigVersion": 2 })),
        "sagemaker:ListComputeQuotas" => Canned::json(json!({ "ComputeQuotaSummaries": [{
            "ComputeQuotaArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/{QUOTA_ID}"),
            "ComputeQuotaId": QUOTA_ID, "Name": "demo-research", "ComputeQuotaVersion": 1, "Status": "Created",
            "ClusterArn": HP_ARN, "ComputeQuotaTarget": { "TeamName": "research", "FairShareWeight": 10 },
            "CreationTime": 1_700_000_000.0 }] })),
        "sagemaker:DescribeComputeQuota" => Canned::json(json!({
            "ComputeQuotaArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/{QUOTA_ID}"),
            "ComputeQuotaId": QUOTA_ID, "Name": "demo-research", "ComputeQuotaVersion": 1, "Status": "Created",
            "ClusterArn": HP_ARN, "CreationTime": 1_700_000_000.0, "ActivationState": "Enabled",
            "ComputeQuotaConfig": { "ComputeQuotaResources": [{ "InstanceType": "ml.p5.48xlarge", "Count": 2 }],
                "ResourceSharingConfig": { "Strategy": "LendAndBorrow", "BorrowLimit": 100 }, "PreemptTeamTasks": "LowerPriority" },
            "ComputeQuotaTarget": { "TeamName": "research", "FairShareWeight": 10 } })),
        "sagemaker:CreateComputeQuota" => Canned::json(json!({
            "ComputeQuotaArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/{QUOTA_ID}"), "ComputeQuotaId": QUOTA_ID })),
        "sagemaker:UpdateComputeQuota" => Canned::json(json!({
            "ComputeQuotaArn": format!("arn:aws:sagemaker:us-east-1:{ACCOUNT}:compute-quota/{QUOTA_ID}"), "ComputeQuotaVersion": 2 })),
        "sagemaker:DeleteClusterSchedulerConfig" | "sagemaker:DeleteComputeQuota" => Canned::json(json!({})),
        "sagemaker:CreateMlflowTrackingServer" | "sagemaker:DeleteMlflowTrackingServer" => {
            Canned::json(json!({ "TrackingServerArn": MLFLOW_ARN }))
        }
        // FSx for Lustre
        "fsx:DescribeFileSystems" if !existing => Canned {
            status: 400,
            ..Canned::json(
                json!({ "__type": "FileSystemNotFound", "Message": format!("File system '{FSX_ID}' does not exist.") }),
            )
        },
        "fsx:DescribeFileSystems" => Canned::json(json!({ "FileSystems": [file_system("AVAILABLE")] })),
        "fsx:CreateFileSystem" => Canned::json(json!({ "FileSystem": file_system("CREATING") })),
        "fsx:DeleteFileSystem" => Canned::json(json!({ "FileSystemId": FSX_ID, "Lifecycle": "DELETING" })),
        "fsx:DescribeDataRepositoryAssociations" => Canned::json(json!({ "Associations": [association_json("AVAILABLE")] })),
        "fsx:CreateDataRepositoryAssociation" => Canned::json(json!({ "Association": association_json("CREATING") })),
        "fsx:DeleteDataRepositoryAssociation" => Canned::json(json!({
            "AssociationId": "dra-0123456789abcdef0", "Lifecycle": "DELETING", "DeleteDataInFileSystem": false })),
        // Amazon Managed Service for Prometheus
        "amp:DescribeWorkspace" if !existing => Canned {
            status: 404,
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("x-amzn-errortype".into(), "ResourceNotFoundException".into()),
            ],
            body: json!({ "message": format!("Workspace {AMP_ID} not found."), "resourceId": AMP_ID, "resourceType": "Workspace" })
                .to_string(),
        },
        "amp:DescribeWorkspace" => Canned::json(json!({ "workspace": amp_workspace("ACTIVE", true) })),
        "amp:ListWorkspaces" => Canned::json(json!({ "workspaces": [amp_workspace("ACTIVE", false)] })),
        "amp:CreateWorkspace" => Canned {
            status: 202,
            ..Canned::json(json!({ "workspaceId": AMP_ID, "arn": format!("arn:aws:aps:us-east-1:{ACCOUNT}:workspace/{AMP_ID}"),
                "status": { "statusCode": "CREATING" }, "tags": tags() }))
        },
        "amp:DeleteWorkspace" => Canned { status: 202, headers: vec![], body: String::new() },
        // Service Quotas
        "service-quotas:ListAWSDefaultServiceQuotas" | "service-quotas:ListServiceQuotas" => {
            Canned::json(json!({ "Quotas": [{
            "ServiceCode": "sagemaker", "QuotaName": "ml.p5.48xlarge for cluster usage", "QuotaCode": "L-1194F27D", "Value": 2.0 }, {
            "ServiceCode": "sagemaker", "QuotaName": "ml.p5.48xlarge for training job usage", "QuotaCode": "L-00000001", "Value": 4.0 }] }))
        }
        "service-quotas:GetServiceQuota" if !existing => {
            Canned::json_error(400, "NoSuchResourceException", "The request failed because the specified resource does not exist.")
        }
        "service-quotas:GetServiceQuota" | "service-quotas:GetAWSDefaultServiceQuota" => {
            let code = d.params["QuotaCode"].as_str().unwrap_or_default().to_string();
            let value = if existing { 201_600.0 } else { 100.0 };
            Canned::json(json!({ "Quota": { "ServiceCode": "fsx", "QuotaCode": code, "QuotaName": "Lustre", "Value": value } }))
        }
        // S3
        "s3:HeadBucket" => match w {
            World::Fresh => Canned::status(404),
            World::Existing => Canned::status(200).header("x-amz-bucket-region", "us-east-1"),
            World::BucketElsewhere if r.url.contains("eu-west-1") => {
                Canned::status(200).header("x-amz-bucket-region", "eu-west-1")
            }
            World::BucketElsewhere => Canned::status(301).header("x-amz-bucket-region", "eu-west-1"),
        },
        "s3:GetBucketTagging" => s3_tagging(),
        "s3:CreateBucket" | "s3:PutPublicAccessBlock" | "s3:PutBucketEncryption" | "s3:PutBucketTagging" => {
            Canned::status(200)
        }
        "s3:DeleteBucket" => Canned::status(204),
        "s3:PutObject" => Canned::status(200)
            .header("ETag", "\"0123456789abcdef0123456789abcdef\"")
            .header("x-amz-checksum-sha256", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="),
        "s3:HeadObject" if r.url.contains("missing") => Canned::status(404),
        "s3:HeadObject" => Canned::status(200)
            .header("Content-Length", "31")
            .header("Content-Type", "text/x-shellscript")
            .header("ETag", "\"0123456789abcdef0123456789abcdef\"")
            .header("x-amz-checksum-sha256", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="),
        "s3:DeleteObject" => Canned::status(204),
        "s3:ListObjectsV2" => Canned::xml(
            "<ListBucketResult><Name>is-demo-bucket</Name><Prefix>models/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys>\
             <Delimiter>/</Delimiter><IsTruncated>false</IsTruncated><Contents><Key>models/README.md</Key><Size>12</Size></Contents>\
             <CommonPrefixes><Prefix>models/qwen/</Prefix></CommonPrefixes></ListBucketResult>",
        ),
        other => panic!(
            "the canned account does not answer {other} ({} {}); add it to model_suite::respond",
            r.method, r.url
        ),
    }
}

/// Runs one case: the call on a recording client, then every request decoded and validated.
/// Returns the findings (empty = pass).
async fn run_case(c: &'static Case) -> Vec<String> {
    let models = Models::get();
    let w = c.world;
    // The operations answered so far: a describe after a delete sees the deletion.
    let history = std::sync::Mutex::new(Vec::new());
    let replay = Replay::new(move |r| match models.decode(r) {
        Ok(d) => {
            let mut h = history.lock().expect("history");
            let answer = respond(w, &d, r, &h);
            h.push(d.id());
            answer
        }
        Err(e) => Canned::json_error(500, "UndecodableRequest", &e),
    });
    // Every role is created with the deployment's permissions boundary (as the template runs it).
    let provider = replay.provider().with_role_boundary(ROLE_BOUNDARY);
    let label = format!("{} [{}]", c.method, c.variant);
    let mut findings = Vec::new();
    if let Err(e) = tokio::spawn((c.run)(provider)).await {
        let msg = e.try_into_panic().ok().and_then(|p| {
            p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        });
        findings.push(format!("{label}: the call failed: {}", msg.unwrap_or_else(|| "cancelled".into())));
    }
    let mut seen = BTreeSet::new();
    for r in replay.requests() {
        match models.check_request(&r) {
            Err(e) => findings.push(format!("{label}: {} {}: cannot decode: {e}", r.method, r.url)),
            Ok((d, violations)) => {
                for v in violations {
                    findings.push(format!("{label}: {}: {v}", d.id()));
                }
                // IAM allows these only with the boundary (the template's iam:PermissionsBoundary).
                let boundary_param = match d.id().as_str() {
                    "iam:CreateRole" | "iam:PutRolePermissionsBoundary" => Some("PermissionsBoundary"),
                    _ => None,
                };
                if let Some(param) = boundary_param
                    && d.params.get(param).and_then(|v| v.as_str()) != Some(ROLE_BOUNDARY)
                {
                    findings.push(format!("{label}: {} without {param} {ROLE_BOUNDARY}", d.id()));
                }
                seen.insert(d.id());
            }
        }
    }
    let want: BTreeSet<String> = c.expect.iter().map(|s| s.to_string()).collect();
    if seen != want {
        findings.push(format!(
            "{label}: operations sent {:?}, the table says {:?}",
            seen.difference(&want).collect::<Vec<_>>(),
            want.difference(&seen).collect::<Vec<_>>()
        ));
    }
    findings
}

#[tokio::test(start_paused = true)]
async fn every_request_satisfies_the_service_models() {
    let mut findings = Vec::new();
    for c in CASES {
        findings.extend(run_case(c).await);
    }
    let ops: BTreeSet<&str> = CASES.iter().flat_map(|c| c.expect.iter().copied()).collect();
    assert!(findings.is_empty(), "{} finding(s):\n{}", findings.len(), findings.join("\n"));
    assert!(ops.len() >= 80, "operations covered: {}", ops.len());
}

#[test]
fn every_trait_method_has_a_case() {
    let mut missing = Vec::new();
    for m in METHODS {
        let has_case = CASES.iter().any(|c| c.method == *m);
        let unmodelled = UNMODELLED.iter().any(|(u, _)| u == m);
        match (has_case, unmodelled) {
            (false, false) => missing.push(format!("{m}: no case in CASES")),
            (true, true) => missing.push(format!("{m}: has a case and is listed as unmodelled")),
            _ => {}
        }
    }
    for c in CASES {
        if !METHODS.contains(&c.method) && !c.method.starts_with("AwsProvider::") {
            missing.push(format!("case {} [{}]: not a trait method in METHODS", c.method, c.variant));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The `async fn`s of the traits in a provider source file, as `Trait::method`.
fn trait_methods(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in source.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("pub trait ") {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            current = Some(name);
            continue;
        }
        if line.starts_with('}') {
            current = None;
            continue;
        }
        if let (Some(tr), Some(rest)) = (&current, t.strip_prefix("async fn ")) {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            out.push(format!("{tr}::{name}"));
        }
    }
    out
}

#[test]
fn the_method_list_is_the_traits() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/src/provider");
    let mut found = Vec::new();
    for f in ["aws.rs", "mlflow.rs", "governance.rs", "fsx.rs", "amp.rs"] {
        let src = std::fs::read_to_string(root.join(f)).expect("provider source");
        found.extend(trait_methods(&src));
    }
    found.sort();
    let mut listed: Vec<String> = METHODS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(listed, found, "model_suite::METHODS must list exactly the AWS-side trait methods");
}

#[test]
fn the_models_are_the_pinned_botocore() {
    let xtask =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../xtask/src/main.rs"))
            .expect("xtask source");
    let pin = xtask
        .split("\"botocore==")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("xtask's venv() pins botocore==<version>");
    let models = Models::get();
    assert_eq!(
        models.botocore_version.as_deref(),
        Some(pin),
        "the models in {} are not botocore {pin} (the pin in xtask/src/main.rs); {}",
        models.dir.display(),
        crate::model_check::HOW_TO
    );
}

// ---------------------------------------------------------------- the validator itself

/// A deliberately wrong input: `(what, service, operation, params, path, rule fragment)`.
type Wrong = (&'static str, &'static str, &'static str, fn() -> Value, &'static str, &'static str);

fn good_create_cluster() -> Value {
    json!({
        "ClusterName": "demo-hp",
        "InstanceGroups": [{ "InstanceGroupName": "workers", "InstanceType": "ml.g5.12xlarge", "InstanceCount": 2,
            "LifeCycleConfig": { "SourceS3Uri": "s3://is-demo-bucket/lifecycle", "OnCreate": "on_create.sh" },
            "ExecutionRole": ROLE, "ThreadsPerCore": 1 }],
        "Orchestrator": { "Eks": { "ClusterArn": EKS_ARN } },
    })
}

fn with(mut v: Value, pointer: &str, new: Option<Value>) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let target = v.pointer_mut(parent).expect("parent");
    match (new, target) {
        (Some(n), Value::Object(o)) => {
            o.insert(key.to_string(), n);
        }
        (None, Value::Object(o)) => {
            o.remove(key);
        }
        (Some(n), Value::Array(a)) => a[key.parse::<usize>().expect("index")] = n,
        _ => panic!("{pointer}"),
    }
    v
}

pub const VALIDATOR_CASES: &[Wrong] = &[
    (
        "missing required member",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/ClusterName", None),
        "ClusterName",
        "required",
    ),
    (
        "missing required nested member",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/Orchestrator/Eks/ClusterArn", None),
        "Orchestrator.Eks.ClusterArn",
        "required",
    ),
    (
        "unknown member",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/Clustername", Some(json!("x"))),
        "Clustername",
        "unknown member",
    ),
    (
        "bad enum",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/NodeRecovery", Some(json!("Sometimes"))),
        "NodeRecovery",
        "is not one of",
    ),
    (
        "bad instance type enum",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/InstanceGroups/0/InstanceType", Some(json!("ml.g5.99xlarge"))),
        "InstanceGroups[0].InstanceType",
        "is not one of",
    ),
    (
        "too-long string",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/ClusterName", Some(json!("a".repeat(64)))),
        "ClusterName",
        "above the maximum",
    ),
    (
        "pattern mismatch (whole value)",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/ClusterName", Some(json!("demo_hp"))),
        "ClusterName",
        "does not match pattern",
    ),
    (
        "nested pattern mismatch",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/InstanceGroups/0/LifeCycleConfig/SourceS3Uri", Some(json!("ftp://bucket/x"))),
        "InstanceGroups[0].LifeCycleConfig.SourceS3Uri",
        "does not match pattern",
    ),
    (
        "out-of-range number",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/InstanceGroups/0/ThreadsPerCore", Some(json!(3))),
        "InstanceGroups[0].ThreadsPerCore",
        "above the maximum",
    ),
    (
        "wrong type",
        "sagemaker",
        "CreateCluster",
        || with(good_create_cluster(), "/InstanceGroups/0/InstanceCount", Some(json!("2"))),
        "InstanceGroups[0].InstanceCount",
        "expected an integer",
    ),
    (
        "list above its bound",
        "sagemaker",
        "BatchRebootClusterNodes",
        || json!({ "ClusterName": "demo-hp", "NodeIds": (0..30).map(|i| format!("i-0123456789abcd{i:03}")).collect::<Vec<_>>() }),
        "NodeIds",
        "list length",
    ),
    (
        "empty list below its bound",
        "sagemaker",
        "BatchDeleteClusterNodes",
        || json!({ "ClusterName": "demo-hp", "NodeIds": [] }),
        "NodeIds",
        "below the minimum",
    ),
    (
        "IAM role name pattern",
        "iam",
        "CreateRole",
        || json!({ "RoleName": "demo role", "AssumeRolePolicyDocument": "{}" }),
        "RoleName",
        "does not match pattern",
    ),
    (
        "EKS enum in a nested structure",
        "eks",
        "AssociateAccessPolicy",
        || {
            json!({ "clusterName": "demo", "principalArn": "arn:aws:iam::123456789012:role/x",
                   "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", "accessScope": { "type": "everywhere" } })
        },
        "accessScope.type",
        "is not one of",
    ),
];

#[test]
fn the_validator_refuses_deliberately_wrong_requests() {
    let models = Models::get();
    assert_eq!(
        models.validate("sagemaker", "CreateCluster", &good_create_cluster()).unwrap(),
        vec![],
        "the baseline is valid"
    );
    let mut failures = Vec::new();
    for (what, service, op, params, path, rule) in VALIDATOR_CASES {
        let found = models.validate(service, op, &params()).unwrap();
        if !found.iter().any(|v| v.path == *path && v.rule.contains(rule)) {
            failures.push(format!("{what}: expected `{path}: …{rule}…`, got {found:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A recorded request from a form body (what the EC2/IAM SDKs send).
fn form_request(host: &str, body: &str) -> Recorded {
    Recorded {
        method: "POST".into(),
        url: format!("https://{host}/"),
        uri: "/".into(),
        target: None,
        headers: [("content-type".to_string(), "application/x-www-form-urlencoded".to_string())].into(),
        body: body.into(),
    }
}

#[test]
fn decoding_finds_what_does_not_belong_on_the_wire() {
    let models = Models::get();
    // EC2: flattened lists, queryName; an unknown parameter and an out-of-order index.
    let r = form_request(
        "ec2.us-east-1.amazonaws.com",
        "Action=CreateVpc&Version=2016-11-15&CidrBlock=10.0.0.0%2F16&TagSpecification.1.ResourceType=vpc\
         &TagSpecification.1.Tag.1.Key=Name&TagSpecification.1.Tag.1.Value=demo&Bogus=1",
    );
    let (d, v) = models.check_request(&r).unwrap();
    assert_eq!(d.id(), "ec2:CreateVpc");
    assert_eq!(d.params["TagSpecifications"][0]["Tags"][0]["Key"], "Name", "{}", d.params);
    assert_eq!(v.iter().map(|v| v.path.as_str()).collect::<Vec<_>>(), ["Bogus"], "{v:?}");
    // EC2 enum in a flattened list item.
    let r = form_request(
        "ec2.us-east-1.amazonaws.com",
        "Action=CreateVpc&Version=2016-11-15&CidrBlock=10.0.0.0%2F16&TagSpecification.1.ResourceType=spaceship",
    );
    let (_, v) = models.check_request(&r).unwrap();
    assert!(v.iter().any(|v| v.path == "TagSpecifications[0].ResourceType" && v.rule.contains("not one of")), "{v:?}");
    // IAM: member.N lists, numbers typed from strings.
    let r = form_request(
        "iam.amazonaws.com",
        "Action=CreateRole&Version=2010-05-08&RoleName=demo&AssumeRolePolicyDocument=%7B%7D&MaxSessionDuration=60\
         &Tags.member.1.Key=a&Tags.member.1.Value=b",
    );
    let (d, v) = models.check_request(&r).unwrap();
    assert_eq!(d.params["Tags"][0]["Value"], "b");
    assert!(v.iter().any(|v| v.path == "MaxSessionDuration" && v.rule.contains("below the minimum")), "{v:?}");
    // REST-JSON: the URI template picks the operation, labels fill members, an unknown body key.
    let r = Recorded {
        method: "POST".into(),
        url: "https://eks.us-east-1.amazonaws.com/clusters/demo/addons".into(),
        uri: "/clusters/demo/addons".into(),
        target: None,
        headers: Default::default(),
        body: json!({ "addonName": "cert-manager", "resolveConflicts": "SOMETIMES", "colour": "blue" }).to_string(),
    };
    let (d, v) = models.check_request(&r).unwrap();
    assert_eq!((d.id().as_str(), d.params["clusterName"].as_str()), ("eks:CreateAddon", Some("demo")));
    let paths: Vec<&str> = v.iter().map(|v| v.path.as_str()).collect();
    assert!(paths.contains(&"colour") && paths.contains(&"resolveConflicts"), "{v:?}");
    // REST-XML: the virtual-hosted bucket and a flattened list in the payload.
    let r = Recorded {
        method: "PUT".into(),
        url: "https://is-demo-bucket.s3.us-east-1.amazonaws.com/?encryption".into(),
        uri: "/?encryption".into(),
        target: None,
        headers: Default::default(),
        body: "<ServerSideEncryptionConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Rule>\
               <ApplyServerSideEncryptionByDefault><SSEAlgorithm>ROT13</SSEAlgorithm></ApplyServerSideEncryptionByDefault>\
               </Rule></ServerSideEncryptionConfiguration>"
            .into(),
    };
    let (d, v) = models.check_request(&r).unwrap();
    assert_eq!((d.id().as_str(), d.params["Bucket"].as_str()), ("s3:PutBucketEncryption", Some("is-demo-bucket")));
    assert!(
        v.iter().any(|v| v.path
            == "ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm"
            && v.rule.contains("not one of")),
        "{v:?}"
    );
    // An unknown host is an error, not a pass.
    assert!(models.check_request(&form_request("example.com", "Action=X")).is_err());
}

#[test]
fn java_patterns_are_translated_or_reported() {
    let models = Models::get();
    let check = |service: &str, shape: &str, value: &str| {
        let m = models.model(service).unwrap();
        let p = m.shape(shape)["pattern"].as_str().unwrap_or_else(|| panic!("{shape} has a pattern")).to_string();
        models.validate_pattern(&p, value)
    };
    // Whole-value matching: a prefix that matches is not enough.
    assert_eq!(check("sagemaker", "ClusterNameOrArn", "demo-hp"), Ok(true));
    assert_eq!(check("sagemaker", "ClusterNameOrArn", "demo_hp"), Ok(false));
    assert_eq!(check("sagemaker", "ClusterNameOrArn", HP_ARN), Ok(true));
    // A look-behind before the end: names may not end with a dash.
    let behind =
        r"(arn:aws[a-z\-]*:sagemaker:[a-z0-9\-]*:[0-9]{12}:[a-z\-]*/)?([a-zA-Z0-9]([a-zA-Z0-9\-]){0,62})(?<!-)";
    assert_eq!(models.validate_pattern(behind, "team-a"), Ok(true));
    assert_eq!(models.validate_pattern(behind, "team-"), Ok(false));
    // A leading length look-ahead.
    let ahead = r"(?=.{1,32}$)[a-zA-Z0-9](-*[a-zA-Z0-9])*";
    assert_eq!(models.validate_pattern(ahead, "abc"), Ok(true));
    assert_eq!(models.validate_pattern(ahead, &"a".repeat(33)), Ok(false));
    // \p{..} classes, \u escapes and UTF-16 surrogate ranges.
    assert_eq!(check("iam", "roleNameType", "demo-role"), Ok(true));
    assert_eq!(check("iam", "policyDocumentType", "{\"Version\":\"2012-10-17\"}"), Ok(true));
    let surrogates = r"[\u0020-\uD7FF\uE000-\uFFFD\uD800\uDC00-\uDBFF\uDFFF\t]*";
    assert_eq!(models.validate_pattern(surrogates, "emoji 🚀 ok"), Ok(true));
    assert_eq!(models.validate_pattern(r"[\p{L}\p{Z}\p{N}_.:/=+\-@]*", "a b:c"), Ok(true));
    // A look-around we do not translate is reported, not passed.
    assert!(models.validate_pattern("(?<=a)b", "ab").is_err());
}

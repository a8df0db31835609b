//! The IAM actions the adapter needs, kept next to the code that calls them.
//!
//! [`IAM_ACTIONS`] is what a least-privilege policy for the control plane must allow (the
//! CloudFormation template of the management environment is checked against it). The unit
//! test below scans this crate's source for SDK calls and fails if one is missing here, or if
//! an entry here is neither called nor listed as implied ([`IMPLIED_ACTIONS`]).

/// Every IAM action the AWS adapter uses, sorted by service.
pub const IAM_ACTIONS: &[&str] = &[
    // Amazon Managed Service for Prometheus (HyperPod observability's workspace)
    "aps:CreateWorkspace",
    "aps:DeleteWorkspace",
    "aps:DescribeWorkspace",
    "aps:ListWorkspaces",
    "aps:QueryMetrics",
    "aps:TagResource",
    // EC2: network
    "ec2:AllocateAddress",
    "ec2:AssociateRouteTable",
    "ec2:AttachInternetGateway",
    "ec2:AuthorizeSecurityGroupEgress",
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:CreateInternetGateway",
    "ec2:CreateNatGateway",
    "ec2:CreateRoute",
    "ec2:CreateRouteTable",
    "ec2:CreateSecurityGroup",
    "ec2:CreateSubnet",
    "ec2:CreateTags",
    "ec2:CreateVpc",
    "ec2:CreateVpcEndpoint",
    "ec2:DeleteInternetGateway",
    "ec2:DeleteNatGateway",
    "ec2:DeleteRouteTable",
    "ec2:DeleteSecurityGroup",
    "ec2:DeleteSubnet",
    "ec2:DeleteVpc",
    "ec2:DeleteVpcEndpoints",
    "ec2:DescribeAddresses",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInternetGateways",
    "ec2:DescribeNatGateways",
    "ec2:DescribeRouteTables",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcEndpoints",
    "ec2:DescribeVpcs",
    "ec2:DetachInternetGateway",
    "ec2:DisassociateRouteTable",
    "ec2:ModifySubnetAttribute",
    "ec2:ModifyVpcAttribute",
    "ec2:ReleaseAddress",
    "ec2:ReplaceRoute",
    "ec2:ReplaceRouteTableAssociation",
    // EKS
    "eks:AssociateAccessPolicy",
    "eks:CreateAccessEntry",
    "eks:CreateAddon",
    "eks:CreateCluster",
    "eks:CreatePodIdentityAssociation",
    "eks:DeleteAccessEntry",
    "eks:DeleteAddon",
    "eks:DeleteCluster",
    "eks:DeletePodIdentityAssociation",
    "eks:DescribeAccessEntry",
    "eks:DescribeAddon",
    "eks:DescribeAddonConfiguration",
    "eks:DescribeAddonVersions",
    "eks:DescribeCluster",
    "eks:DescribePodIdentityAssociation",
    "eks:ListAssociatedAccessPolicies",
    "eks:ListClusters",
    "eks:ListPodIdentityAssociations",
    "eks:TagResource",
    "eks:UpdateAddon",
    // FSx for Lustre
    "fsx:CreateDataRepositoryAssociation",
    "fsx:CreateFileSystem",
    "fsx:DeleteDataRepositoryAssociation",
    "fsx:DeleteFileSystem",
    "fsx:DescribeDataRepositoryAssociations",
    "fsx:DescribeFileSystems",
    "fsx:TagResource",
    // IAM
    "iam:AttachRolePolicy",
    "iam:CreateOpenIDConnectProvider",
    "iam:CreateRole",
    "iam:CreateServiceLinkedRole",
    "iam:DeleteRole",
    "iam:DeleteRolePolicy",
    "iam:DetachRolePolicy",
    "iam:GetOpenIDConnectProvider",
    "iam:GetRole",
    "iam:ListAttachedRolePolicies",
    "iam:ListInstanceProfilesForRole",
    "iam:ListRolePolicies",
    "iam:PassRole",
    "iam:PutRolePermissionsBoundary",
    "iam:PutRolePolicy",
    "iam:RemoveRoleFromInstanceProfile",
    "iam:TagOpenIDConnectProvider",
    "iam:TagRole",
    "iam:UpdateAssumeRolePolicy",
    // S3
    "s3:CreateBucket",
    "s3:DeleteBucket",
    "s3:DeleteObject",
    "s3:GetBucketTagging",
    "s3:GetObject",
    "s3:ListBucket",
    "s3:PutBucketOwnershipControls",
    "s3:PutBucketPublicAccessBlock",
    "s3:PutBucketTagging",
    "s3:PutEncryptionConfiguration",
    "s3:PutObject",
    "s3:TagResource",
    // SageMaker HyperPod
    "sagemaker:AddTags",
    "sagemaker:BatchDeleteClusterNodes",
    "sagemaker:BatchRebootClusterNodes",
    "sagemaker:BatchReplaceClusterNodes",
    "sagemaker:CreateCluster",
    "sagemaker:CreateClusterSchedulerConfig",
    "sagemaker:CreateComputeQuota",
    "sagemaker:CreateMlflowTrackingServer",
    "sagemaker:DeleteCluster",
    "sagemaker:DeleteClusterSchedulerConfig",
    "sagemaker:DeleteComputeQuota",
    "sagemaker:DeleteMlflowTrackingServer",
    "sagemaker:DescribeCluster",
    "sagemaker:DescribeClusterNode",
    "sagemaker:DescribeClusterSchedulerConfig",
    "sagemaker:DescribeComputeQuota",
    "sagemaker:DescribeMlflowTrackingServer",
    "sagemaker:DescribeTrainingPlan",
    "sagemaker:ListClusterEvents",
    "sagemaker:ListClusterNodes",
    "sagemaker:ListClusterSchedulerConfigs",
    "sagemaker:ListClusters",
    "sagemaker:ListComputeQuotas",
    "sagemaker:ListMlflowTrackingServers",
    "sagemaker:ListTags",
    "sagemaker:ListTrainingPlans",
    "sagemaker:SearchTrainingPlanOfferings",
    "sagemaker:StartClusterHealthCheck",
    "sagemaker:UpdateCluster",
    "sagemaker:UpdateClusterSchedulerConfig",
    "sagemaker:UpdateClusterSoftware",
    "sagemaker:UpdateComputeQuota",
    // SageMaker managed MLflow data plane (SigV4 REST, `mlflow.rs`)
    "sagemaker-mlflow:GetMetricHistory",
    "sagemaker-mlflow:GetRun",
    "sagemaker-mlflow:SearchExperiments",
    "sagemaker-mlflow:SearchRuns",
    // Service Quotas, STS
    "servicequotas:GetAWSDefaultServiceQuota",
    "servicequotas:GetServiceQuota",
    "servicequotas:ListAWSDefaultServiceQuotas",
    "servicequotas:ListServiceQuotas",
    "sts:GetCallerIdentity",
];

/// Actions needed without a same-named SDK call: tagging on create (`aps:TagResource`,
/// `eks:TagResource`, `fsx:TagResource`,
/// `iam:TagRole`, `iam:TagOpenIDConnectProvider`, `sagemaker:AddTags`, `s3:TagResource`), passing roles to EKS and SageMaker
/// (`iam:PassRole`), the service-linked roles EKS (`AWSServiceRoleForAmazonEKS`), SageMaker and
/// SageMaker HyperPod (`AWSServiceRoleForSageMakerHyperPod`, created on the first HyperPod
/// CreateCluster of an account; SageMaker developer guide, `security-iam-awsmanpol-hyperpod`)
/// create on first use (`iam:CreateServiceLinkedRole`; NAT gateways and VPC endpoints use
/// none), and the S3 permission names that differ from the API
/// names (HeadBucket and ListObjectsV2 → `s3:ListBucket`, HeadObject → `s3:GetObject`, object ownership at create →
/// `s3:PutBucketOwnershipControls`), and the MLflow REST calls (`sagemaker-mlflow:*`) and AMP
/// range queries (`aps:QueryMetrics`), signed HTTP, not SDK calls.
pub const IMPLIED_ACTIONS: &[&str] = &[
    "aps:QueryMetrics",
    "aps:TagResource",
    "eks:TagResource",
    "fsx:TagResource",
    "iam:TagRole",
    "iam:TagOpenIDConnectProvider",
    "iam:PassRole",
    "iam:CreateServiceLinkedRole",
    "sagemaker:AddTags",
    "s3:TagResource",
    "s3:PutBucketOwnershipControls",
    "sagemaker-mlflow:GetMetricHistory",
    "sagemaker-mlflow:GetRun",
    "sagemaker-mlflow:SearchExperiments",
    "sagemaker-mlflow:SearchRuns",
];

/// The IAM action of an SDK operation: `<service>:<PascalCaseOperation>`, except where IAM
/// names the permission differently.
pub fn action_of(service: &str, operation_snake: &str) -> String {
    let special = match (service, operation_snake) {
        ("s3", "head_bucket") | ("s3", "list_objects_v2") => Some("s3:ListBucket"),
        ("s3", "head_object") => Some("s3:GetObject"),
        ("s3", "put_public_access_block") => Some("s3:PutBucketPublicAccessBlock"),
        ("s3", "put_bucket_encryption") => Some("s3:PutEncryptionConfiguration"),
        ("servicequotas", "list_aws_default_service_quotas") => Some("servicequotas:ListAWSDefaultServiceQuotas"),
        ("servicequotas", "get_aws_default_service_quota") => Some("servicequotas:GetAWSDefaultServiceQuota"),
        ("iam", "get_open_id_connect_provider") => Some("iam:GetOpenIDConnectProvider"),
        ("iam", "create_open_id_connect_provider") => Some("iam:CreateOpenIDConnectProvider"),
        _ => None,
    };
    if let Some(s) = special {
        return s.to_string();
    }
    let pascal: String = operation_snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect();
    format!("{service}:{pascal}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The source of every module that calls the SDK.
    const SOURCES: &[(&str, &str)] = &[
        ("amp.rs", include_str!("amp.rs")),
        ("eks.rs", include_str!("eks.rs")),
        ("fsx.rs", include_str!("fsx.rs")),
        ("hyperpod.rs", include_str!("hyperpod.rs")),
        ("iam.rs", include_str!("iam.rs")),
        ("mlflow.rs", include_str!("mlflow.rs")),
        ("governance.rs", include_str!("governance.rs")),
        ("identity.rs", include_str!("identity.rs")),
        ("network.rs", include_str!("network.rs")),
        ("quota.rs", include_str!("quota.rs")),
        ("s3.rs", include_str!("s3.rs")),
    ];

    /// Client variable names and fields used in the source, and their IAM service prefix.
    const CLIENTS: &[(&str, &str)] = &[
        ("amp", "aps"),
        ("ec2", "ec2"),
        ("eks", "eks"),
        ("fsx", "fsx"),
        ("iam", "iam"),
        ("sts", "sts"),
        ("sagemaker", "sagemaker"),
        ("sm", "sagemaker"),
        ("s3", "s3"),
        ("quotas", "servicequotas"),
    ];

    /// Every `<client>.<operation>()` call in the source (multi-line builder chains
    /// included), as IAM actions.
    fn called_actions() -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (_, src) in SOURCES {
            // Comments dropped, whitespace runs collapsed, no space around `.`.
            let joined = src.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join(" ");
            let code = joined.split_whitespace().collect::<Vec<_>>().join(" ").replace(" .", ".").replace(". ", ".");
            for (var, service) in CLIENTS {
                let needle = format!("{var}.");
                let mut rest = code.as_str();
                while let Some(i) = rest.find(&needle) {
                    let before = rest[..i].chars().last();
                    rest = &rest[i + needle.len()..];
                    // `c.ec2.x()` or `ec2.x()`, not `aws_sdk_ec2.` or `tags::ec2(`.
                    if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                        continue;
                    }
                    let op: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    if !op.is_empty() && rest[op.len()..].starts_with("()") {
                        out.insert(action_of(service, &op));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_sdk_call_is_listed_and_every_listed_action_is_used() {
        let called = called_actions();
        assert!(called.len() > 50, "the scan found too few calls: {called:?}");
        let listed: BTreeSet<String> = IAM_ACTIONS.iter().map(|s| s.to_string()).collect();
        let missing: Vec<&String> = called.iter().filter(|a| !listed.contains(*a)).collect();
        assert!(missing.is_empty(), "SDK calls missing from IAM_ACTIONS: {missing:?}");
        let unused: Vec<&&str> =
            IAM_ACTIONS.iter().filter(|a| !called.contains(**a) && !IMPLIED_ACTIONS.contains(a)).collect();
        assert!(
            unused.is_empty(),
            "IAM_ACTIONS entries no code calls (remove, or list in IMPLIED_ACTIONS): {unused:?}"
        );
        for a in IMPLIED_ACTIONS {
            assert!(listed.contains(*a), "implied action {a} is not in IAM_ACTIONS");
        }
    }

    #[test]
    fn actions_are_sorted_unique_and_well_formed() {
        let mut seen = BTreeSet::new();
        for a in IAM_ACTIONS {
            let (service, op) = a.split_once(':').expect("service:Action");
            assert!(!service.is_empty() && op.starts_with(|c: char| c.is_ascii_uppercase()), "{a}");
            assert!(!op.contains('*'), "no wildcards: {a}");
            assert!(seen.insert(*a), "duplicate {a}");
        }
    }

    #[test]
    fn action_names() {
        assert_eq!(action_of("ec2", "create_vpc"), "ec2:CreateVpc");
        assert_eq!(action_of("sagemaker", "batch_reboot_cluster_nodes"), "sagemaker:BatchRebootClusterNodes");
        assert_eq!(action_of("s3", "head_bucket"), "s3:ListBucket");
    }
}

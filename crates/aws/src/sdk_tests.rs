//! SDK-boundary tests: the exact requests the adapter sends and how it reads recorded service
//! responses, through the real SDK clients on a recording HTTP client ([`crate::replay`]).
//! They cover what moto does not implement (EKS add-ons, SageMaker UpdateCluster and batch
//! node actions, training plans, Service Quotas), the request shapes moto accepts but drops
//! (HyperPod capacity, EFA-only, deep health checks, provisioning mode; EKS access config and
//! logging), FSx for Lustre (moto has no FSx), and error mapping from real error bodies.

use crate::replay::{Canned, Recorded, Replay};
use instantstart_core::provider::*;
use instantstart_core::spec::{InstanceGroupSpec, NodeRecovery, TieredCheckpointing};
use serde_json::{Value, json};

fn tags(cluster: &str) -> Tags {
    ownership_tags(cluster, "op-1")
}

fn tag_json(cluster: &str) -> Value {
    json!({ "instantstart:managed-by": "instantstart", "instantstart:cluster": cluster, "instantstart:operation": "op-1" })
}

fn unexpected(r: &Recorded) -> Canned {
    panic!("unexpected request {} {} {}", r.operation(), r.uri, r.body)
}

// ---------------------------------------------------------------- EKS

fn eks_cluster_json(name: &str, status: &str, cluster_tags: Value) -> Value {
    json!({ "cluster": {
        "name": name,
        "arn": format!("arn:aws:eks:us-east-1:123456789012:cluster/{name}"),
        "version": "1.33",
        "status": status,
        "endpoint": "https://ABC.gr7.us-east-1.eks.amazonaws.com",
        "identity": { "oidc": { "issuer": "https://oidc.eks.us-east-1.amazonaws.com/id/ABC" } },
        "resourcesVpcConfig": { "vpcId": "vpc-1", "subnetIds": ["subnet-a", "subnet-b"], "clusterSecurityGroupId": "sg-cluster",
            "endpointPublicAccess": true, "endpointPrivateAccess": true },
        "tags": cluster_tags,
    }})
}

#[tokio::test]
async fn create_addon_pins_the_default_version_for_the_cluster() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "GET /clusters/demo" => Canned::json(eks_cluster_json("demo", "ACTIVE", tag_json("demo"))),
        "GET /addons/supported-versions" => {
            Canned::json(json!({ "addons": [{ "addonName": "cert-manager", "addonVersions": [
                { "addonVersion": "v1.18.2-eksbuild.2", "compatibilities": [{ "clusterVersion": "1.33", "defaultVersion": false }],
                  "requiresConfiguration": false, "requiresIamPermissions": false },
                { "addonVersion": "v1.17.2-eksbuild.1", "compatibilities": [
                    { "clusterVersion": "1.33", "defaultVersion": true }, { "clusterVersion": "1.32", "defaultVersion": true }] }
            ]}]}))
        }
        "POST /clusters/demo/addons" => Canned::json(json!({ "addon": {
            "addonName": "cert-manager", "clusterName": "demo", "status": "CREATING", "addonVersion": "v1.17.2-eksbuild.1",
            "tags": tag_json("demo") }})),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let a = p
        .create_addon(&CreateEksAddon {
            region: "us-east-1".into(),
            cluster: "demo".into(),
            name: "cert-manager".into(),
            version: None,
            client_request_token: "is-token".into(),
            tags: tags("demo"),
            configuration_values: None,
        })
        .await
        .unwrap();
    assert_eq!(a.version, "v1.17.2-eksbuild.1");
    assert_eq!(a.state, ResourceState::Creating);
    let versions = &replay.of("GET /addons/supported-versions")[0];
    assert_eq!(versions.query().get("addonName").map(String::as_str), Some("cert-manager"));
    assert_eq!(versions.query().get("kubernetesVersion").map(String::as_str), Some("1.33"));
    let create = replay.of("POST /clusters/demo/addons")[0].json();
    assert_eq!(
        create,
        json!({ "addonName": "cert-manager", "addonVersion": "v1.17.2-eksbuild.1", "resolveConflicts": "OVERWRITE",
                "clientRequestToken": "is-token", "tags": tag_json("demo") })
    );
}

/// HyperPod needs the VPC CNI at 1.18.3 or later: a default below that is skipped for the
/// newest compatible version at or above it; none at all is a clear refusal.
#[tokio::test]
async fn the_vpc_cni_is_pinned_at_or_above_the_version_hyperpod_requires() {
    fn versions(list: Value) -> Canned {
        Canned::json(json!({ "addons": [{ "addonName": "vpc-cni", "addonVersions": list }] }))
    }
    let replay = Replay::new(|r| match r.operation().as_str() {
        "GET /clusters/demo" => Canned::json(eks_cluster_json("demo", "ACTIVE", tag_json("demo"))),
        "GET /addons/supported-versions" => versions(json!([
            { "addonVersion": "v1.19.6-eksbuild.7", "compatibilities": [{ "clusterVersion": "1.33", "defaultVersion": false }] },
            { "addonVersion": "v1.18.3-eksbuild.3", "compatibilities": [{ "clusterVersion": "1.33", "defaultVersion": false }] },
            { "addonVersion": "v1.18.1-eksbuild.1", "compatibilities": [{ "clusterVersion": "1.33", "defaultVersion": true }] }
        ])),
        "POST /clusters/demo/addons" => Canned::json(json!({ "addon": {
            "addonName": "vpc-cni", "clusterName": "demo", "status": "CREATING", "addonVersion": "v1.19.6-eksbuild.7",
            "tags": tag_json("demo") }})),
        _ => unexpected(r),
    });
    let req = CreateEksAddon {
        region: "us-east-1".into(),
        cluster: "demo".into(),
        name: "vpc-cni".into(),
        version: None,
        client_request_token: "is-token".into(),
        tags: tags("demo"),
        configuration_values: None,
    };
    let a = replay.provider().create_addon(&req).await.unwrap();
    assert_eq!(a.version, "v1.19.6-eksbuild.7");
    let create = replay.of("POST /clusters/demo/addons")[0].json();
    assert_eq!(create["addonName"], "vpc-cni");
    assert_eq!(create["addonVersion"], "v1.19.6-eksbuild.7", "the default v1.18.1 is below 1.18.3");
    assert_eq!(create["resolveConflicts"], "OVERWRITE", "takes over the self-managed CNI EKS installed");

    let old_only = Replay::new(|r| match r.operation().as_str() {
        "GET /clusters/demo" => Canned::json(eks_cluster_json("demo", "ACTIVE", tag_json("demo"))),
        "GET /addons/supported-versions" => versions(json!([
            { "addonVersion": "v1.18.2-eksbuild.1", "compatibilities": [{ "clusterVersion": "1.33", "defaultVersion": true }] }
        ])),
        _ => unexpected(r),
    });
    let err = old_only.provider().create_addon(&req).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest, "{err}");
    assert!(err.message.contains("at least 1.18.3"), "{err}");
    assert!(old_only.of("POST /clusters/demo/addons").is_empty());
}

// ---------------------------------------------------------------- EC2: the S3 gateway endpoint

/// The exact CreateVpcEndpoint request of a new network's S3 gateway endpoint, and
/// DeleteVpcEndpoints' per-endpoint failures (an endpoint already gone is not one).
#[tokio::test]
async fn the_s3_gateway_endpoint_request_and_its_deletion() {
    const NS: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateVpcEndpoint" => Canned::xml(&format!(
            r#"<CreateVpcEndpointResponse xmlns="{NS}"><requestId>r-1</requestId><vpcEndpoint>
                <vpcEndpointId>vpce-0abc</vpcEndpointId><vpcEndpointType>Gateway</vpcEndpointType>
                <vpcId>vpc-1</vpcId><serviceName>com.amazonaws.us-east-1.s3</serviceName><state>available</state>
                <routeTableIdSet><item>rtb-private</item></routeTableIdSet></vpcEndpoint></CreateVpcEndpointResponse>"#
        )),
        "DeleteVpcEndpoints" if r.form().get("VpcEndpointId.1").map(String::as_str) == Some("vpce-gone") => {
            Canned::xml(&format!(
                r#"<DeleteVpcEndpointsResponse xmlns="{NS}"><requestId>r-2</requestId><unsuccessful><item>
                    <error><code>InvalidVpcEndpoint.NotFound</code><message>The VpcEndpoint Id 'vpce-gone' does not exist</message></error>
                    <resourceId>vpce-gone</resourceId></item></unsuccessful></DeleteVpcEndpointsResponse>"#
            ))
        }
        "DeleteVpcEndpoints" => Canned::xml(&format!(
            r#"<DeleteVpcEndpointsResponse xmlns="{NS}"><requestId>r-3</requestId><unsuccessful><item>
                <error><code>DependencyViolation</code><message>busy</message></error>
                <resourceId>vpce-busy</resourceId></item></unsuccessful></DeleteVpcEndpointsResponse>"#
        )),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let c = p.region("us-east-1").await.unwrap();
    let mut t = tags("demo");
    t.insert("Name".into(), "demo-vpc-s3-endpoint".into());
    let id = crate::network::create_s3_endpoint_call(&c.ec2, "vpc-1", "us-east-1", "rtb-private", &t).await.unwrap();
    assert_eq!(id, "vpce-0abc");
    let form = replay.of("CreateVpcEndpoint")[0].form();
    let field = |k: &str| form.get(k).map(String::as_str);
    assert_eq!(field("VpcEndpointType"), Some("Gateway"));
    assert_eq!(field("VpcId"), Some("vpc-1"));
    assert_eq!(field("ServiceName"), Some("com.amazonaws.us-east-1.s3"));
    assert_eq!(field("RouteTableId.1"), Some("rtb-private"));
    assert_eq!(field("RouteTableId.2"), None);
    assert_eq!(field("SubnetId.1"), None, "a gateway endpoint has route tables, not subnets");
    assert_eq!(field("TagSpecification.1.ResourceType"), Some("vpc-endpoint"));
    let sent: Tags = (1..=t.len())
        .map(|i| {
            (
                field(&format!("TagSpecification.1.Tag.{i}.Key")).unwrap().to_string(),
                field(&format!("TagSpecification.1.Tag.{i}.Value")).unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(sent, t, "{form:?}");

    crate::network::delete_endpoints(&c.ec2, &["vpce-gone".into()]).await.unwrap();
    let err = crate::network::delete_endpoints(&c.ec2, &["vpce-busy".into()]).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Transient, "{err}");
    assert!(err.message.contains("vpce-busy: busy"), "{err}");
}

#[tokio::test]
async fn create_addon_sends_configuration_values_as_one_json_string() {
    let values = json!({ "executionRoleArn": "arn:aws:iam::123456789012:role/SageMakerHyperPodInference-demo",
        "tlsCertificateS3Bucket": "is-demo-bkt", "keda": { "enabled": false } });
    let replay = Replay::new(|r| match r.operation().as_str() {
        "POST /clusters/demo/addons" => Canned::json(json!({ "addon": {
            "addonName": "amazon-sagemaker-hyperpod-inference", "clusterName": "demo", "status": "CREATING",
            "addonVersion": "v1.2.0-eksbuild.1", "tags": tag_json("demo") }})),
        _ => unexpected(r),
    });
    let p = replay.provider();
    p.create_addon(&CreateEksAddon {
        region: "us-east-1".into(),
        cluster: "demo".into(),
        name: "amazon-sagemaker-hyperpod-inference".into(),
        version: Some("v1.2.0-eksbuild.1".into()),
        client_request_token: "is-token".into(),
        tags: tags("demo"),
        configuration_values: Some(values.clone()),
    })
    .await
    .unwrap();
    let create = replay.of("POST /clusters/demo/addons")[0].json();
    assert_eq!(
        create,
        json!({ "addonName": "amazon-sagemaker-hyperpod-inference", "addonVersion": "v1.2.0-eksbuild.1",
                "resolveConflicts": "OVERWRITE", "clientRequestToken": "is-token", "tags": tag_json("demo"),
                "configurationValues": values.to_string() })
    );
    let sent: Value = serde_json::from_str(create["configurationValues"].as_str().unwrap()).unwrap();
    assert_eq!(sent, values, "the string is exactly the values document");
}

#[tokio::test]
async fn describe_addon_configuration_resolves_the_version_and_parses_the_schema() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "GET /clusters/demo" => Canned::json(eks_cluster_json("demo", "ACTIVE", tag_json("demo"))),
        "GET /addons/supported-versions" => Canned::json(json!({ "addons": [{
        "addonName": "amazon-sagemaker-hyperpod-inference", "addonVersions": [
            { "addonVersion": "v1.2.0-eksbuild.1", "compatibilities": [{ "clusterVersion": "1.33", "defaultVersion": true }] }
        ]}]})),
        "GET /addons/configuration-schemas" => Canned::json(json!({
            "addonName": "amazon-sagemaker-hyperpod-inference", "addonVersion": "v1.2.0-eksbuild.1",
            "configurationSchema": "{\"type\":\"object\",\"required\":[\"executionRoleArn\"]}" })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let c =
        p.describe_addon_configuration("us-east-1", "demo", "amazon-sagemaker-hyperpod-inference", None).await.unwrap();
    assert_eq!(c.version, "v1.2.0-eksbuild.1");
    assert_eq!(c.schema, json!({ "type": "object", "required": ["executionRoleArn"] }));
    let q = replay.of("GET /addons/configuration-schemas")[0].query();
    assert_eq!(q.get("addonName").map(String::as_str), Some("amazon-sagemaker-hyperpod-inference"));
    assert_eq!(q.get("addonVersion").map(String::as_str), Some("v1.2.0-eksbuild.1"));

    // A pinned version is used as given: no cluster or version lookups.
    let replay = Replay::new(|r| match r.operation().as_str() {
        "GET /addons/configuration-schemas" => {
            Canned::json(json!({ "addonName": "cert-manager", "addonVersion": "v1" }))
        }
        _ => unexpected(r),
    });
    let c =
        replay.provider().describe_addon_configuration("us-east-1", "demo", "cert-manager", Some("v1")).await.unwrap();
    assert_eq!(c.schema, json!({ "type": "object", "additionalProperties": false }), "no schema: no values accepted");
}

#[tokio::test]
async fn addon_states_failures_and_absence() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "GET /clusters/demo/addons/cert-manager" => Canned::json(json!({ "addon": {
            "addonName": "cert-manager", "status": "DEGRADED", "addonVersion": "v1.17.2-eksbuild.1",
            "health": { "issues": [{ "code": "InsufficientNumberOfReplicas", "message": "no nodes" }] } }})),
        "GET /clusters/demo/addons/aws-mountpoint-s3-csi-driver" => Canned::json(json!({ "addon": {
            "addonName": "aws-mountpoint-s3-csi-driver", "status": "CREATE_FAILED", "addonVersion": "v1.0.0-eksbuild.1",
            "health": { "issues": [{ "code": "AccessDenied", "message": "the service account role cannot be assumed" }] } }})),
        "GET /clusters/demo/addons/eks-pod-identity-agent" => Canned::json_error(
            404,
            "ResourceNotFoundException",
            "No addon: eks-pod-identity-agent found in cluster: demo",
        ),
        "DELETE /clusters/demo/addons/cert-manager" => {
            Canned::json(json!({ "addon": { "addonName": "cert-manager", "status": "DELETING" }}))
        }
        _ => unexpected(r),
    });
    let p = replay.provider();
    let degraded = p.describe_addon("us-east-1", "demo", "cert-manager").await.unwrap().unwrap();
    assert_eq!(degraded.state, ResourceState::Active, "degraded (no nodes yet) counts as installed");
    assert_eq!(degraded.health_issues, ["InsufficientNumberOfReplicas: no nodes"], "and says why");
    let failed = p.describe_addon("us-east-1", "demo", "aws-mountpoint-s3-csi-driver").await.unwrap().unwrap();
    assert_eq!(
        failed.state,
        ResourceState::Failed { reason: "AccessDenied: the service account role cannot be assumed".into() }
    );
    assert_eq!(p.describe_addon("us-east-1", "demo", "eks-pod-identity-agent").await.unwrap(), None);
    p.delete_addon("us-east-1", "demo", "cert-manager").await.unwrap();
}

#[tokio::test]
async fn create_eks_cluster_request_and_adoption() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let exists = std::sync::Arc::new(AtomicBool::new(false));
    let owner = std::sync::Arc::new(std::sync::Mutex::new("demo".to_string()));
    let (e, o) = (exists.clone(), owner.clone());
    let replay = Replay::new(move |r| match r.operation().as_str() {
        "DescribeSubnets" => Canned::xml(
            "<DescribeSubnetsResponse><requestId>r</requestId><subnetSet><item><subnetId>subnet-a</subnetId><vpcId>vpc-1</vpcId>\
             <cidrBlock>10.0.8.0/22</cidrBlock><availabilityZone>us-east-1a</availabilityZone></item></subnetSet></DescribeSubnetsResponse>",
        ),
        "DescribeSecurityGroups" => Canned::xml(
            "<DescribeSecurityGroupsResponse><requestId>r</requestId><securityGroupInfo>\
             <item><groupId>sg-default</groupId><groupName>default</groupName><vpcId>vpc-1</vpcId></item>\
             <item><groupId>sg-efa</groupId><groupName>demo-efa-sg</groupName><vpcId>vpc-1</vpcId><tagSet>\
             <item><key>instantstart:network-role</key><value>efa-sg</value></item>\
             <item><key>instantstart:managed-by</key><value>instantstart</value></item>\
             <item><key>instantstart:cluster</key><value>demo</value></item></tagSet></item>\
             </securityGroupInfo></DescribeSecurityGroupsResponse>",
        ),
        "POST /clusters" if e.load(Ordering::SeqCst) => {
            Canned::json_error(409, "ResourceInUseException", "Cluster already exists with name: demo")
        }
        "POST /clusters" => Canned::json(eks_cluster_json("demo", "CREATING", tag_json("demo"))),
        "GET /clusters/demo" => {
            let owner = o.lock().unwrap().clone();
            Canned::json(eks_cluster_json("demo", "CREATING", tag_json(&owner)))
        }
        _ => unexpected(r),
    });
    let p = replay.provider();
    let req = CreateEksCluster {
        region: "us-east-1".into(),
        name: "demo".into(),
        version: "1.33".into(),
        role_arn: "arn:aws:iam::123456789012:role/demo-eks-cluster-role".into(),
        subnet_ids: vec!["subnet-a".into(), "subnet-b".into()],
        client_request_token: "is-token".into(),
        tags: tags("demo"),
        public_access_cidrs: vec!["198.51.100.7/32".into()],
    };
    let c = p.create_eks_cluster(&req).await.unwrap();
    assert_eq!(c.state, ResourceState::Creating);
    assert_eq!(c.oidc_issuer.as_deref(), Some("https://oidc.eks.us-east-1.amazonaws.com/id/ABC"));
    assert_eq!(c.security_group_id.as_deref(), Some("sg-cluster"));
    let body = replay.of("POST /clusters")[0].json();
    assert_eq!(
        body,
        json!({
            "name": "demo",
            "version": "1.33",
            "roleArn": "arn:aws:iam::123456789012:role/demo-eks-cluster-role",
            "resourcesVpcConfig": { "subnetIds": ["subnet-a", "subnet-b"], "securityGroupIds": ["sg-efa"],
                "endpointPublicAccess": true, "endpointPrivateAccess": true, "publicAccessCidrs": ["198.51.100.7/32"] },
            "accessConfig": { "authenticationMode": "API_AND_CONFIG_MAP", "bootstrapClusterCreatorAdminPermissions": true },
            "logging": { "clusterLogging": [{ "types": ["api", "audit", "authenticator", "controllerManager", "scheduler"], "enabled": true }] },
            "clientRequestToken": "is-token",
            "tags": tag_json("demo"),
        })
    );
    // A same-named cluster: ours is adopted, another cluster's is refused.
    exists.store(true, Ordering::SeqCst);
    assert_eq!(p.create_eks_cluster(&req).await.unwrap().arn, c.arn);
    *owner.lock().unwrap() = "someone-else".into();
    let err = p.create_eks_cluster(&req).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::AlreadyExists, "{err}");
    assert!(err.message.contains("Cluster already exists"), "{err}");
}

#[tokio::test]
async fn eks_delete_in_use_is_a_conflict() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "DELETE /clusters/demo" => Canned::json_error(409, "ResourceInUseException", "Cluster has nodegroups attached"),
        _ => unexpected(r),
    });
    let err = replay.provider().delete_eks_cluster("us-east-1", "demo").await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Conflict, "{err}");
}

// ---------------------------------------------------------------- HyperPod

fn group(v: Value) -> InstanceGroupSpec {
    serde_json::from_value(v).expect("instance group spec")
}

/// A group request; a group without a lifecycle script gets InstantStart's (as the workflows do).
fn hp_request(mut g: InstanceGroupSpec, subnet: &str) -> HyperPodInstanceGroupRequest {
    if g.lifecycle_script.is_none() {
        g.lifecycle_script = Some(instantstart_core::lifecycle::default_lifecycle("is-demo-123456789012-ab12"));
    }
    HyperPodInstanceGroupRequest {
        spec: g,
        subnet_id: subnet.into(),
        security_group_ids: vec!["sg-efa".into()],
        execution_role_arn: "arn:aws:iam::123456789012:role/demo-hyperpod-exec-role".into(),
        threads_per_core: None,
    }
}

/// The `LifeCycleConfig` JSON of InstantStart's script in the test bucket.
fn our_lifecycle_json() -> Value {
    let l = instantstart_core::lifecycle::default_lifecycle("is-demo-123456789012-ab12");
    json!({ "SourceS3Uri": l.source_s3_uri, "OnCreate": l.on_create })
}

const PLAN: &str = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p5-plan";

fn describe_cluster_json(status: &str) -> Value {
    json!({
        "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123",
        "ClusterName": "demo-hp",
        "ClusterStatus": status,
        "CreationTime": 1_700_000_000.0,
        "FailureMessage": "InsufficientInstanceCapacity: not enough ml.p5.48xlarge capacity in us-east-1a",
        "VpcConfig": { "SecurityGroupIds": ["sg-efa"], "Subnets": ["subnet-a"] },
        "Orchestrator": { "Eks": { "ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/demo" } },
        "NodeRecovery": "Automatic",
        "TieredStorageConfig": { "Mode": "Enable", "InstanceMemoryAllocationPercentage": 20 },
        "AutoScaling": { "Mode": "Enable", "AutoScalerType": "Karpenter", "Status": "InService" },
        "InstanceGroups": [
            { "InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 1, "TargetCount": 2,
              "Status": "InService", "TrainingPlanArn": PLAN, "NetworkInterface": { "InterfaceType": "efa-only" },
              "ExecutionRole": "arn:aws:iam::123456789012:role/demo-hyperpod-exec-role", "ThreadsPerCore": 1 },
            { "InstanceGroupName": "spot", "InstanceType": "ml.g5.12xlarge", "CurrentCount": 1, "TargetCount": 1,
              "Status": "Creating", "CapacityRequirements": { "Spot": {} },
              "OverrideVpcConfig": { "SecurityGroupIds": ["sg-efa"], "Subnets": ["subnet-b"] },
              "ExecutionRole": "arn:aws:iam::123456789012:role/demo-hyperpod-exec-role", "ThreadsPerCore": 1 }
        ]
    })
}

fn hyperpod_replay(update: fn(&Recorded) -> Canned) -> Replay {
    Replay::new(move |r| match r.operation().as_str() {
        "CreateCluster" => {
            Canned::json(json!({ "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123" }))
        }
        "DescribeCluster" => Canned::json(describe_cluster_json("InService")),
        "ListTags" => Canned::json(json!({ "Tags": [
            { "Key": "instantstart:managed-by", "Value": "instantstart" }, { "Key": "instantstart:cluster", "Value": "demo" }] })),
        "UpdateCluster" => update(r),
        _ => unexpected(r),
    })
}

#[tokio::test]
async fn create_hyperpod_cluster_sends_capacity_interface_health_checks_and_placement() {
    let replay = hyperpod_replay(unexpected);
    let p = replay.provider();
    let workers = group(json!({
        "name": "workers", "instance_type": "ml.p5.48xlarge", "count": 2, "availability_zone": "us-east-1a",
        "capacity": { "type": "training_plan", "arn": PLAN }, "interface_mode": "efa_only",
        "deep_health_checks": { "stress": true, "connectivity": true }, "ebs_volume_gb": 1000,
        "lifecycle_script": { "source_s3_uri": "s3://bucket/lifecycle", "on_create": "on_create.sh" }
    }));
    let spot = group(json!({
        "name": "spot", "instance_type": "ml.g5.12xlarge", "count": 1, "availability_zone": "us-east-1b",
        "capacity": { "type": "spot" }
    }));
    let cpu =
        group(json!({ "name": "cpu", "instance_type": "ml.m5.xlarge", "count": 0, "availability_zone": "us-east-1a" }));
    let c = p
        .create_hyperpod_cluster(&CreateHyperPodCluster {
            region: "us-east-1".into(),
            name: "demo-hp".into(),
            eks_cluster_arn: "arn:aws:eks:us-east-1:123456789012:cluster/demo".into(),
            node_recovery: NodeRecovery::Automatic,
            instance_groups: vec![
                hp_request(workers, "subnet-a"),
                hp_request(spot, "subnet-b"),
                hp_request(cpu, "subnet-a"),
            ],
            tags: tags("demo"),
        })
        .await
        .unwrap();
    assert_eq!(c.state, ResourceState::Active);
    let body = replay.of("CreateCluster")[0].json();
    let role = "arn:aws:iam::123456789012:role/demo-hyperpod-exec-role";
    let pin = |subnet: &str| json!({ "SecurityGroupIds": ["sg-efa"], "Subnets": [subnet] });
    assert_eq!(
        body,
        json!({
            "ClusterName": "demo-hp",
            "InstanceGroups": [
                { "InstanceCount": 2, "InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge",
                  "LifeCycleConfig": { "SourceS3Uri": "s3://bucket/lifecycle", "OnCreate": "on_create.sh" },
                  "ExecutionRole": role, "ThreadsPerCore": 1,
                  "InstanceStorageConfigs": [{ "EbsVolumeConfig": { "VolumeSizeInGB": 1000 } }],
                  "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
                  "TrainingPlanArn": PLAN, "OverrideVpcConfig": pin("subnet-a"),
                  "NetworkInterface": { "InterfaceType": "efa-only" } },
                { "InstanceCount": 1, "InstanceGroupName": "spot", "InstanceType": "ml.g5.12xlarge",
                  "LifeCycleConfig": our_lifecycle_json(),
                  "ExecutionRole": role, "ThreadsPerCore": 1,
                  "InstanceStorageConfigs": [{ "EbsVolumeConfig": { "VolumeSizeInGB": 500 } }],
                  "OverrideVpcConfig": pin("subnet-b"), "CapacityRequirements": { "Spot": {} } },
                { "InstanceCount": 0, "InstanceGroupName": "cpu", "InstanceType": "ml.m5.xlarge",
                  "LifeCycleConfig": our_lifecycle_json(),
                  "ExecutionRole": role, "ThreadsPerCore": 2,
                  "InstanceStorageConfigs": [{ "EbsVolumeConfig": { "VolumeSizeInGB": 500 } }],
                  "OverrideVpcConfig": pin("subnet-a") }
            ],
            "VpcConfig": { "SecurityGroupIds": ["sg-efa"], "Subnets": ["subnet-a", "subnet-b"] },
            "Tags": [
                { "Key": "instantstart:cluster", "Value": "demo" },
                { "Key": "instantstart:managed-by", "Value": "instantstart" },
                { "Key": "instantstart:operation", "Value": "op-1" }
            ],
            "Orchestrator": { "Eks": { "ClusterArn": "arn:aws:eks:us-east-1:123456789012:cluster/demo" } },
            "NodeRecovery": "Automatic",
            "NodeProvisioningMode": "Continuous",
        })
    );
}

#[tokio::test]
async fn a_group_without_a_lifecycle_config_is_refused_before_the_call() {
    let replay = hyperpod_replay(unexpected);
    let p = replay.provider();
    let mut g = hp_request(
        group(
            json!({ "name": "bare", "instance_type": "ml.g5.2xlarge", "count": 1, "availability_zone": "us-east-1a" }),
        ),
        "subnet-a",
    );
    g.spec.lifecycle_script = None;
    let create = CreateHyperPodCluster {
        region: "us-east-1".into(),
        name: "demo-hp".into(),
        eks_cluster_arn: "arn:aws:eks:us-east-1:123456789012:cluster/demo".into(),
        node_recovery: NodeRecovery::Automatic,
        instance_groups: vec![g.clone()],
        tags: tags("demo"),
    };
    let err = p.create_hyperpod_cluster(&create).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::InvalidRequest, "{err}");
    assert!(err.message.contains("bare") && err.message.contains("LifeCycleConfig"), "{err}");
    let update =
        UpdateHyperPodCluster { instance_groups: vec![g], ..UpdateHyperPodCluster::of("us-east-1", "demo-hp") };
    assert_eq!(p.update_hyperpod_cluster(&update).await.unwrap_err().kind, ProviderErrorKind::InvalidRequest);
    assert!(replay.of("CreateCluster").is_empty() && replay.of("UpdateCluster").is_empty(), "nothing sent");
}

/// Scaling a group sends the group as DescribeCluster reports it — EBS size, LifeCycleConfig,
/// ExecutionRole, deep health checks, ThreadsPerCore, capacity, interface mode — with only the
/// count changed (what `ScaleGroup` builds from `day2::group_spec`).
#[tokio::test]
async fn scaling_echoes_the_described_group() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "DescribeCluster" => {
            let mut d = describe_cluster_json("InService");
            let w = &mut d["InstanceGroups"][0];
            w["LifeCycleConfig"] = json!({ "SourceS3Uri": "s3://sagemaker-team-scripts/eks", "OnCreate": "setup.sh" });
            w["InstanceStorageConfigs"] = json!([{ "EbsVolumeConfig": { "VolumeSizeInGB": 2000 } }]);
            w["OnStartDeepHealthChecks"] = json!(["InstanceStress"]);
            w["ExecutionRole"] = json!("arn:aws:iam::123456789012:role/team-exec-role");
            w["ThreadsPerCore"] = json!(2);
            Canned::json(d)
        }
        "ListTags" => Canned::json(json!({ "Tags": [] })),
        "UpdateCluster" => {
            Canned::json(json!({ "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123" }))
        }
        _ => unexpected(r),
    });
    let p = replay.provider();
    let c = p.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    let described = &c.instance_groups[0];
    assert_eq!(described.ebs_volume_gb, Some(2000));
    assert_eq!(described.threads_per_core, Some(2));
    assert_eq!(described.execution_role_arn.as_deref(), Some("arn:aws:iam::123456789012:role/team-exec-role"));
    assert_eq!(
        described.deep_health_checks,
        instantstart_core::spec::DeepHealthChecks { stress: true, connectivity: false }
    );
    let mut spec = instantstart_core::workflow::day2::group_spec(described, "us-east-1a");
    spec.count = 3;
    p.update_hyperpod_cluster(&UpdateHyperPodCluster {
        instance_groups: vec![HyperPodInstanceGroupRequest {
            spec,
            subnet_id: "subnet-a".into(),
            security_group_ids: vec!["sg-efa".into()],
            execution_role_arn: described.execution_role_arn.clone().unwrap(),
            threads_per_core: described.threads_per_core,
        }],
        ..UpdateHyperPodCluster::of("us-east-1", "demo-hp")
    })
    .await
    .unwrap();
    let body = replay.of("UpdateCluster")[0].json();
    assert_eq!(
        body,
        json!({
            "ClusterName": "demo-hp",
            "InstanceGroups": [{
                "InstanceCount": 3, "InstanceGroupName": "workers", "InstanceType": "ml.p5.48xlarge",
                "LifeCycleConfig": { "SourceS3Uri": "s3://sagemaker-team-scripts/eks", "OnCreate": "setup.sh" },
                "ExecutionRole": "arn:aws:iam::123456789012:role/team-exec-role", "ThreadsPerCore": 2,
                "InstanceStorageConfigs": [{ "EbsVolumeConfig": { "VolumeSizeInGB": 2000 } }],
                "OnStartDeepHealthChecks": ["InstanceStress"],
                "TrainingPlanArn": PLAN,
                "NetworkInterface": { "InterfaceType": "efa-only" }
            }]
        })
    );
}

#[tokio::test]
async fn describe_reads_groups_capacity_features_and_failures() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "DescribeCluster" => Canned::json(describe_cluster_json("Failed")),
        "ListTags" => Canned::json(json!({ "Tags": [] })),
        _ => unexpected(r),
    });
    let c = replay.provider().describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    assert_eq!(
        c.state,
        ResourceState::Failed {
            reason: "InsufficientInstanceCapacity: not enough ml.p5.48xlarge capacity in us-east-1a".into()
        }
    );
    assert_eq!(c.node_recovery, NodeRecovery::Automatic);
    assert_eq!(c.tiered_storage, Some(TieredCheckpointing { memory_percent: 20 }));
    assert!(c.autoscaling);
    let w = &c.instance_groups[0];
    assert_eq!((w.current_count, w.target_count, w.status.as_str()), (1, 2, "InService"));
    assert_eq!(w.capacity, instantstart_core::spec::CapacitySpec::TrainingPlan { arn: PLAN.into() });
    assert_eq!(w.interface_mode, instantstart_core::spec::InterfaceMode::EfaOnly);
    assert_eq!(w.subnet_ids, ["subnet-a"], "cluster-level subnets");
    let s = &c.instance_groups[1];
    assert_eq!(s.capacity, instantstart_core::spec::CapacitySpec::Spot);
    assert_eq!(s.subnet_ids, ["subnet-b"], "override subnets");
}

#[tokio::test]
async fn update_cluster_adds_scales_deletes_groups_and_switches_features() {
    let replay = hyperpod_replay(|_| {
        Canned::json(json!({ "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123" }))
    });
    let p = replay.provider();
    let workers = group(json!({
        "name": "workers", "instance_type": "ml.p5.48xlarge", "count": 4, "availability_zone": "us-east-1a",
        "capacity": { "type": "training_plan", "arn": PLAN }, "interface_mode": "efa_only"
    }));
    let extra = group(
        json!({ "name": "extra", "instance_type": "ml.g5.12xlarge", "count": 2, "availability_zone": "us-east-1b" }),
    );
    let c = p
        .update_hyperpod_cluster(&UpdateHyperPodCluster {
            region: "us-east-1".into(),
            name: "demo-hp".into(),
            instance_groups: vec![hp_request(workers, "subnet-a"), hp_request(extra, "subnet-b")],
            instance_groups_to_delete: vec!["spot".into()],
            node_recovery: Some(NodeRecovery::Automatic),
            tiered_storage: Some(Some(TieredCheckpointing { memory_percent: 20 })),
            autoscaling: Some(AutoscalingUpdate {
                enabled: true,
                role_arn: Some("arn:aws:iam::123456789012:role/demo-hyperpod-autoscaling".into()),
            }),
        })
        .await
        .unwrap();
    assert!(c.autoscaling);
    let body = replay.of("UpdateCluster")[0].json();
    let groups = body["InstanceGroups"].as_array().unwrap();
    assert_eq!(groups[0]["InstanceGroupName"], "workers");
    assert_eq!(groups[0]["InstanceCount"], 4);
    assert_eq!(groups[0].get("OverrideVpcConfig"), None, "an existing group keeps its placement");
    assert_eq!(groups[0]["TrainingPlanArn"], PLAN);
    assert_eq!(groups[1]["InstanceGroupName"], "extra");
    assert_eq!(groups[1]["OverrideVpcConfig"], json!({ "SecurityGroupIds": ["sg-efa"], "Subnets": ["subnet-b"] }));
    assert_eq!(body["InstanceGroupsToDelete"], json!(["spot"]));
    assert_eq!(body["NodeRecovery"], "Automatic");
    assert_eq!(body["TieredStorageConfig"], json!({ "Mode": "Enable", "InstanceMemoryAllocationPercentage": 20 }));
    assert_eq!(body["AutoScaling"], json!({ "Mode": "Enable", "AutoScalerType": "Karpenter" }));
    assert_eq!(body["ClusterRole"], "arn:aws:iam::123456789012:role/demo-hyperpod-autoscaling");

    // Only what is asked for is sent — plus the cluster's current NodeRecovery, without which
    // UpdateCluster refuses a TieredStorageConfig (AWS ML blog, Curvine post, API note).
    p.update_hyperpod_cluster(&UpdateHyperPodCluster {
        region: "us-east-1".into(),
        name: "demo-hp".into(),
        instance_groups: vec![],
        instance_groups_to_delete: vec![],
        node_recovery: None,
        tiered_storage: Some(None),
        autoscaling: None,
    })
    .await
    .unwrap();
    let body = replay.of("UpdateCluster")[1].json();
    assert_eq!(
        body,
        json!({ "ClusterName": "demo-hp", "NodeRecovery": "Automatic", "TieredStorageConfig": { "Mode": "Disable" } })
    );
}

/// The settings updates of the features workflow, field by field: tiered storage echoes
/// NodeRecovery; autoscaling sends Mode, AutoScalerType, ClusterRole and NodeRecovery; a
/// NodeRecovery given by the caller wins over the described one.
#[tokio::test]
async fn settings_updates_echo_node_recovery() {
    let replay = hyperpod_replay(|_| {
        Canned::json(json!({ "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123" }))
    });
    let p = replay.provider();
    let of = UpdateHyperPodCluster::of("us-east-1", "demo-hp");
    let role = "arn:aws:iam::123456789012:role/demo-hp-autoscaling-role";
    let cases: Vec<(UpdateHyperPodCluster, Value)> = vec![
        (
            UpdateHyperPodCluster {
                tiered_storage: Some(Some(TieredCheckpointing { memory_percent: 30 })),
                ..of.clone()
            },
            json!({ "ClusterName": "demo-hp", "NodeRecovery": "Automatic",
                    "TieredStorageConfig": { "Mode": "Enable", "InstanceMemoryAllocationPercentage": 30 } }),
        ),
        (
            UpdateHyperPodCluster {
                autoscaling: Some(AutoscalingUpdate { enabled: true, role_arn: Some(role.into()) }),
                ..of.clone()
            },
            json!({ "ClusterName": "demo-hp", "NodeRecovery": "Automatic",
                    "AutoScaling": { "Mode": "Enable", "AutoScalerType": "Karpenter" }, "ClusterRole": role }),
        ),
        (
            UpdateHyperPodCluster {
                autoscaling: Some(AutoscalingUpdate { enabled: false, role_arn: None }),
                ..of.clone()
            },
            json!({ "ClusterName": "demo-hp", "NodeRecovery": "Automatic",
                    "AutoScaling": { "Mode": "Disable", "AutoScalerType": "Karpenter" } }),
        ),
        (
            UpdateHyperPodCluster { node_recovery: Some(NodeRecovery::None), tiered_storage: Some(None), ..of.clone() },
            json!({ "ClusterName": "demo-hp", "NodeRecovery": "None", "TieredStorageConfig": { "Mode": "Disable" } }),
        ),
        // The features workflow's node-recovery step: NodeRecovery alone.
        (
            UpdateHyperPodCluster { node_recovery: Some(NodeRecovery::None), ..of.clone() },
            json!({ "ClusterName": "demo-hp", "NodeRecovery": "None" }),
        ),
    ];
    for (i, (req, want)) in cases.iter().enumerate() {
        p.update_hyperpod_cluster(req).await.unwrap();
        assert_eq!(replay.of("UpdateCluster")[i].json(), *want, "case {i}");
    }
}

/// StartClusterHealthCheck: one configuration per group, `InstanceIds` only when nodes are
/// named (absent = the whole group), the checks by SageMaker's names; ResourceNotFound is
/// NotFound. moto has no StartClusterHealthCheck: tested here.
#[tokio::test]
async fn start_cluster_health_check_sends_one_configuration_per_group() {
    use instantstart_core::provider::{DeepHealthCheck, HealthCheckTarget};
    let replay = Replay::new(|r| match r.operation().as_str() {
        "StartClusterHealthCheck" if r.json()["ClusterName"] == "gone-hp" => {
            Canned::json_error(400, "ResourceNotFound", "Cluster gone-hp not found")
        }
        "StartClusterHealthCheck" => {
            Canned::json(json!({ "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123" }))
        }
        _ => unexpected(r),
    });
    let p = replay.provider();
    let targets = [
        HealthCheckTarget {
            instance_group: "workers".into(),
            node_ids: vec![],
            checks: vec![DeepHealthCheck::InstanceStress, DeepHealthCheck::InstanceConnectivity],
        },
        HealthCheckTarget {
            instance_group: "extra".into(),
            node_ids: vec!["i-0123456789abcdef0".into()],
            checks: vec![DeepHealthCheck::InstanceStress],
        },
    ];
    p.start_cluster_health_check("us-east-1", "demo-hp", &targets).await.unwrap();
    assert_eq!(
        replay.of("StartClusterHealthCheck")[0].json(),
        json!({ "ClusterName": "demo-hp", "DeepHealthCheckConfigurations": [
            { "InstanceGroupName": "workers", "DeepHealthChecks": ["InstanceStress", "InstanceConnectivity"] },
            { "InstanceGroupName": "extra", "InstanceIds": ["i-0123456789abcdef0"], "DeepHealthChecks": ["InstanceStress"] }
        ] })
    );
    let e = p.start_cluster_health_check("us-east-1", "gone-hp", &targets).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound, "{e}");
}

#[tokio::test]
async fn update_cluster_refusals() {
    let replay = hyperpod_replay(|_| {
        Canned::json_error(400, "ConflictException", "Cluster demo-hp is Updating; wait for the current update")
    });
    let p = replay.provider();
    let no_role = UpdateHyperPodCluster {
        region: "us-east-1".into(),
        name: "demo-hp".into(),
        instance_groups: vec![],
        instance_groups_to_delete: vec![],
        node_recovery: None,
        tiered_storage: None,
        autoscaling: Some(AutoscalingUpdate { enabled: true, role_arn: None }),
    };
    assert_eq!(p.update_hyperpod_cluster(&no_role).await.unwrap_err().kind, ProviderErrorKind::InvalidRequest);
    assert!(replay.of("UpdateCluster").is_empty(), "nothing sent without the autoscaling role");
    let busy = UpdateHyperPodCluster { autoscaling: None, node_recovery: Some(NodeRecovery::None), ..no_role };
    let err = p.update_hyperpod_cluster(&busy).await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Conflict, "{err}");
    assert_eq!(replay.of("UpdateCluster")[0].json()["NodeRecovery"], "None");
}

#[tokio::test]
async fn batch_node_actions_report_per_node_outcomes() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "BatchRebootClusterNodes" => Canned::json(json!({
            "Successful": ["i-0aaa"],
            "Failed": [{ "NodeId": "i-0bbb", "ErrorCode": "InstanceIdInUse", "Message": "another operation is in progress" }] })),
        "BatchReplaceClusterNodes" => Canned::json(json!({ "Successful": ["i-0aaa", "i-0bbb"], "Failed": [] })),
        "BatchDeleteClusterNodes" => Canned::json(json!({
            "Successful": [], "Failed": [{ "NodeId": "i-0bbb", "Code": "NodeIdNotFound", "Message": "no such node" }] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let ids = vec!["i-0aaa".to_string(), "i-0bbb".to_string()];
    let r = p.batch_node_action("us-east-1", "demo-hp", NodeAction::Reboot, &ids).await.unwrap();
    assert_eq!(r.accepted, ["i-0aaa"]);
    assert_eq!(r.failed, [("i-0bbb".to_string(), "InstanceIdInUse: another operation is in progress".to_string())]);
    let r = p.batch_node_action("us-east-1", "demo-hp", NodeAction::Replace, &ids).await.unwrap();
    assert_eq!(r.accepted.len(), 2);
    let r = p.batch_node_action("us-east-1", "demo-hp", NodeAction::Delete, &ids[1..]).await.unwrap();
    assert_eq!(r.failed, [("i-0bbb".to_string(), "NodeIdNotFound: no such node".to_string())]);
    for op in ["BatchRebootClusterNodes", "BatchReplaceClusterNodes"] {
        assert_eq!(
            replay.of(op)[0].json(),
            json!({ "ClusterName": "demo-hp", "NodeIds": ["i-0aaa", "i-0bbb"] }),
            "{op}"
        );
    }
    assert_eq!(
        replay.of("BatchDeleteClusterNodes")[0].json(),
        json!({ "ClusterName": "demo-hp", "NodeIds": ["i-0bbb"] })
    );
    // Nothing to do: nothing sent.
    assert_eq!(
        p.batch_node_action("us-east-1", "demo-hp", NodeAction::Reboot, &[]).await.unwrap(),
        BatchNodeResult::default()
    );
    assert_eq!(replay.requests().len(), 3);
}

#[tokio::test]
async fn training_plans_by_arn() {
    let replay = Replay::new(|r| match r.json()["TrainingPlanName"].as_str() {
        Some("p5-plan") => Canned::json(json!({
            "TrainingPlanArn": PLAN, "TrainingPlanName": "p5-plan", "Status": "Active", "TotalInstanceCount": 4,
            "ReservedCapacitySummaries": [{ "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc",
                "InstanceType": "ml.p5.48xlarge", "TotalInstanceCount": 4, "Status": "Active", "AvailabilityZone": "us-east-1b" }] })),
        _ => Canned::json_error(400, "ResourceNotFound", "Training plan not found"),
    });
    let p = replay.provider();
    let plan = p.describe_training_plan("us-east-1", PLAN).await.unwrap().unwrap();
    assert_eq!(
        plan,
        TrainingPlan {
            arn: PLAN.into(),
            status: "Active".into(),
            availability_zone: "us-east-1b".into(),
            instance_type: "ml.p5.48xlarge".into(),
            instance_count: 4,
        }
    );
    let missing = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nope";
    assert_eq!(p.describe_training_plan("us-east-1", missing).await.unwrap(), None);
    assert_eq!(
        p.describe_training_plan("us-east-1", "not-an-arn").await.unwrap_err().kind,
        ProviderErrorKind::InvalidRequest
    );
}

#[tokio::test]
async fn training_plans_every_page_and_offerings_for_hyperpod() {
    let replay = Replay::new(|r| match (r.operation().as_str(), r.json()["NextToken"].as_str()) {
        ("ListTrainingPlans", None) => Canned::json(json!({ "NextToken": "t2", "TrainingPlanSummaries": [{
            "TrainingPlanArn": PLAN, "TrainingPlanName": "p5-plan", "Status": "Active", "DurationHours": 720,
            "StartTime": 1_700_000_000.0, "EndTime": 1_702_592_000.0, "TotalInstanceCount": 4,
            "AvailableInstanceCount": 1, "InUseInstanceCount": 3, "TargetResources": ["hyperpod-cluster"],
            "ReservedCapacitySummaries": [{ "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc",
                "InstanceType": "ml.p5.48xlarge", "TotalInstanceCount": 4, "Status": "Active", "AvailabilityZone": "us-east-1b" }] }] })),
        ("ListTrainingPlans", Some("t2")) => Canned::json(json!({ "TrainingPlanSummaries": [{
            "TrainingPlanArn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/later", "TrainingPlanName": "later",
            "Status": "Failed", "StatusMessage": "payment declined", "TargetResources": ["training-job"] }] })),
        ("SearchTrainingPlanOfferings", _) => Canned::json(json!({ "TrainingPlanOfferings": [{
            "TrainingPlanOfferingId": "tpo-abc", "TargetResources": ["hyperpod-cluster"], "DurationHours": 48,
            "UpfrontFee": "7680.00", "CurrencyCode": "USD",
            "ReservedCapacityOfferings": [{ "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2,
                "AvailabilityZone": "us-east-1a", "StartTime": 1_767_225_600.0, "EndTime": 1_767_398_400.0 }] }] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let plans = p.list_training_plans("us-east-1").await.unwrap();
    assert_eq!(replay.of("ListTrainingPlans").len(), 2, "every page is read");
    assert_eq!(plans.len(), 2);
    assert_eq!(
        (plans[0].availability_zone.as_deref(), plans[0].instance_type.as_deref(), plans[0].in_use_instance_count),
        (Some("us-east-1b"), Some("ml.p5.48xlarge"), Some(3))
    );
    assert_eq!(plans[0].start_time.map(|t| t.timestamp()), Some(1_700_000_000));
    let later = &plans[1];
    assert_eq!((later.status.as_str(), later.status_message.as_deref()), ("Failed", Some("payment declined")));
    assert_eq!((later.instance_type.as_deref(), later.total_instance_count), (None, 0));

    let q = OfferingQuery {
        instance_type: "ml.p5.48xlarge".into(),
        instance_count: 2,
        duration_hours: 48,
        start_after: "2026-01-01T00:00:00Z".parse().ok(),
        end_before: None,
    };
    let offers = p.search_training_plan_offerings("us-east-1", &q).await.unwrap();
    let sent = replay.of("SearchTrainingPlanOfferings")[0].json();
    assert_eq!(
        sent,
        json!({ "InstanceType": "ml.p5.48xlarge", "InstanceCount": 2, "DurationHours": 48,
            "StartTimeAfter": 1_767_225_600, "TargetResources": ["hyperpod-cluster"] })
    );
    assert_eq!(offers.len(), 1);
    let o = &offers[0];
    assert_eq!(
        (o.offering_id.as_str(), o.availability_zone.as_deref(), o.duration_hours),
        ("tpo-abc", Some("us-east-1a"), Some(48))
    );
    assert_eq!(o.end_time.map(|t| t.timestamp()), Some(1_767_398_400));
    // A query the model refuses is not sent.
    let bad = OfferingQuery { instance_count: 257, ..q };
    assert_eq!(
        p.search_training_plan_offerings("us-east-1", &bad).await.unwrap_err().kind,
        ProviderErrorKind::InvalidRequest
    );
    assert_eq!(replay.of("SearchTrainingPlanOfferings").len(), 1);
}

#[tokio::test]
async fn quotas_listing_keeps_hyperpod_cluster_usage_only() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "ListAWSDefaultServiceQuotas" => Canned::json(json!({ "Quotas": [
            { "QuotaName": "ml.p5.48xlarge for cluster usage", "QuotaCode": "L-P5", "Value": 0.0 },
            { "QuotaName": "ml.g5.12xlarge for cluster usage", "QuotaCode": "L-G5", "Value": 2.0 },
            { "QuotaName": "ml.g5.12xlarge for training job usage", "QuotaCode": "L-TJ", "Value": 9.0 },
            { "QuotaName": "ml.nope.xlarge for cluster usage", "QuotaCode": "L-NO", "Value": 9.0 } ] })),
        "ListServiceQuotas" => Canned::json(json!({ "Quotas": [
            { "QuotaName": "ml.p5.48xlarge for cluster usage", "QuotaCode": "L-P5", "Value": 8.0 } ] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let q = p.hyperpod_instance_quotas("us-east-1").await.unwrap();
    let got: Vec<_> = q.iter().map(|q| (q.name.as_str(), q.value)).collect();
    assert_eq!(got, [("ml.g5.12xlarge for cluster usage", 2), ("ml.p5.48xlarge for cluster usage", 8)]);
    // The same cached table the preflight reads: no further request.
    p.hyperpod_instance_quota("us-east-1", "ml.p5.48xlarge").await.unwrap();
    assert_eq!(replay.requests().len(), 2);
}

// ---------------------------------------------------------------- quotas, errors

#[tokio::test]
async fn quotas_prefer_applied_values_and_are_cached() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "ListAWSDefaultServiceQuotas" => Canned::json(json!({ "Quotas": [
            { "QuotaName": "ml.p5.48xlarge for cluster usage", "QuotaCode": "L-P5", "Value": 0.0 },
            { "QuotaName": "ml.g5.12xlarge for cluster usage", "QuotaCode": "L-G5", "Value": 2.0 } ] })),
        "ListServiceQuotas" => Canned::json(json!({ "Quotas": [
            { "QuotaName": "ml.p5.48xlarge for cluster usage", "QuotaCode": "L-P5", "Value": 8.0 } ] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let q = p.hyperpod_instance_quota("us-east-1", "ml.p5.48xlarge").await.unwrap().unwrap();
    assert_eq!(q, Quota { name: "ml.p5.48xlarge for cluster usage".into(), code: "L-P5".into(), value: 8 });
    assert_eq!(p.hyperpod_instance_quota("us-east-1", "ml.g5.12xlarge").await.unwrap().map(|q| q.value), Some(2));
    assert_eq!(p.hyperpod_instance_quota("us-east-1", "ml.trn2.48xlarge").await.unwrap(), None);
    assert_eq!(replay.requests().len(), 2, "both listings once, then the cache: {:?}", replay.operations());
    assert_eq!(replay.of("ListServiceQuotas")[0].json()["ServiceCode"], "sagemaker");
}

#[tokio::test]
async fn quotas_unreadable_are_unknown_not_fatal() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "ListAWSDefaultServiceQuotas" => Canned::json_error(400, "AccessDeniedException", "not allowed"),
        "ListServiceQuotas" => Canned::json(json!({ "Quotas": [] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    assert_eq!(p.hyperpod_instance_quota("us-east-1", "ml.p5.48xlarge").await.unwrap(), None);
    assert_eq!(p.hyperpod_instance_quota("us-east-1", "ml.p5.48xlarge").await.unwrap(), None);
    assert_eq!(replay.of("ListAWSDefaultServiceQuotas").len(), 2, "a denial is not cached");
    let replay = Replay::new(|_| Canned::json_error(400, "NoSuchResourceException", "not available in this Region"));
    assert_eq!(replay.provider().hyperpod_instance_quota("us-east-1", "ml.p5.48xlarge").await.unwrap(), None);
}

#[tokio::test]
async fn lustre_quotas_are_applied_values_else_defaults_else_unknown() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "GetServiceQuota" if r.json()["QuotaCode"] == "L-8F1B9C74" => Canned::json(json!({ "Quota": {
            "ServiceCode": "fsx", "QuotaCode": "L-8F1B9C74", "QuotaName": "Lustre Persistent_2 storage capacity", "Value": 201600.0 } })),
        "GetServiceQuota" => Canned::json_error(400, "NoSuchResourceException", "no applied value"),
        "GetAWSDefaultServiceQuota" => Canned::json(json!({ "Quota": {
            "ServiceCode": "fsx", "QuotaCode": "L-AD2FC696", "QuotaName": "Lustre Scratch storage capacity", "Value": 100800.0 } })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let q = p.lustre_quota("us-east-1", LustreQuota::Persistent2Storage).await.unwrap().unwrap();
    assert_eq!(
        q,
        Quota { name: "Lustre Persistent_2 storage capacity".into(), code: "L-8F1B9C74".into(), value: 201_600 }
    );
    assert_eq!(replay.operations(), ["GetServiceQuota"]);
    let sent = replay.of("GetServiceQuota")[0].json();
    assert_eq!((sent["ServiceCode"].as_str(), sent["QuotaCode"].as_str()), (Some("fsx"), Some("L-8F1B9C74")));
    let q = p.lustre_quota("us-east-1", LustreQuota::ScratchStorage).await.unwrap().unwrap();
    assert_eq!((q.code.as_str(), q.value), ("L-AD2FC696", 100_800));
    assert_eq!(replay.of("GetAWSDefaultServiceQuota")[0].json()["QuotaCode"], "L-AD2FC696");
    // Denied: unknown (the preflight warns), not an error.
    let replay = Replay::new(|_| Canned::json_error(400, "AccessDeniedException", "not allowed"));
    assert_eq!(replay.provider().lustre_quota("us-east-1", LustreQuota::ScratchStorage).await.unwrap(), None);
}

#[tokio::test]
async fn errors_from_real_error_bodies() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "ListClusters" => Canned::json_error(400, "ThrottlingException", "Rate exceeded"),
        "ListClusterNodes" => Canned {
            status: 500,
            headers: vec![("content-type".into(), "text/html".into())],
            body: "<!doctype html><title>500 Internal Server Error</title>".into(),
        },
        "DescribeVpcs" => Canned::ec2_error(400, "InvalidVpcID.NotFound", "The vpc ID 'vpc-404' does not exist"),
        "DescribeAvailabilityZones" => Canned::ec2_error(503, "RequestLimitExceeded", "Request limit exceeded."),
        "GetRole" => Canned::query_error(404, "NoSuchEntity", "The role with name x cannot be found."),
        "GetCallerIdentity" => {
            Canned::query_error(403, "ExpiredToken", "The security token included in the request is expired")
        }
        "GET /clusters" => {
            Canned::json_error(403, "AccessDeniedException", "User is not authorized to perform eks:ListClusters")
        }
        _ => unexpected(r),
    });
    let p = replay.provider();
    let e = p.list_hyperpod_clusters("us-east-1").await.unwrap_err();
    assert_eq!((e.api.as_str(), e.kind), ("sagemaker:ListClusters", ProviderErrorKind::Throttled), "{e}");
    assert_eq!(e.message, "ThrottlingException: Rate exceeded");
    let e = p.list_cluster_nodes("us-east-1", "demo-hp").await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
    assert!(e.message.starts_with("HTTP 500") && e.message.len() < 400, "short message: {e}");
    let e = p.describe_network("us-east-1", "vpc-404").await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound, "{e}");
    assert_eq!(p.availability_zones("us-east-1").await.unwrap_err().kind, ProviderErrorKind::Throttled);
    assert_eq!(p.get_role("x").await.unwrap(), None);
    assert_eq!(p.caller_identity().await.unwrap_err().kind, ProviderErrorKind::AccessDenied);
    let e = p.list_eks_clusters("us-east-1").await.unwrap_err();
    assert_eq!((e.api.as_str(), e.kind), ("eks:ListClusters", ProviderErrorKind::AccessDenied), "{e}");
}

// ---------------------------------------------------------------- IAM, S3

const ROLE_XML: &str = "<GetRoleResponse><GetRoleResult><Role><Path>/</Path><RoleName>demo-eks-cluster-role</RoleName>\
    <RoleId>AROAEXAMPLE</RoleId><Arn>arn:aws:iam::123456789012:role/demo-eks-cluster-role</Arn>\
    <CreateDate>2026-01-01T00:00:00Z</CreateDate><Tags>\
    <member><Key>instantstart:managed-by</Key><Value>instantstart</Value></member>\
    <member><Key>instantstart:cluster</Key><Value>demo</Value></member></Tags></Role></GetRoleResult></GetRoleResponse>";

#[tokio::test]
async fn an_existing_role_of_ours_is_adopted_and_its_policies_ensured() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateRole" => {
            Canned::query_error(409, "EntityAlreadyExists", "Role with name demo-eks-cluster-role already exists.")
        }
        "GetRole" => Canned::xml(ROLE_XML),
        "AttachRolePolicy" => Canned::xml(
            "<AttachRolePolicyResponse><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AttachRolePolicyResponse>",
        ),
        "PutRolePolicy" => Canned::xml(
            "<PutRolePolicyResponse><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></PutRolePolicyResponse>",
        ),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let role = p
        .create_role(&CreateIamRole {
            name: "demo-eks-cluster-role".into(),
            trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
            managed_policies: vec!["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy".into()],
            inline_policies: vec![("scoped".into(), json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::b/*"]}]}))],
            tags: tags("demo"),
        })
        .await
        .unwrap();
    assert_eq!(role.arn, "arn:aws:iam::123456789012:role/demo-eks-cluster-role");
    assert_eq!(replay.operations(), ["CreateRole", "GetRole", "AttachRolePolicy", "PutRolePolicy"]);
    let create = replay.of("CreateRole")[0].form();
    assert_eq!(create.get("RoleName").map(String::as_str), Some("demo-eks-cluster-role"));
    assert!(create.get("AssumeRolePolicyDocument").is_some_and(|d| d.contains("eks.amazonaws.com")));
    assert!(create.iter().any(|(k, v)| k.starts_with("Tags.member.") && v == "instantstart:cluster"), "{create:?}");
    let attach = replay.of("AttachRolePolicy")[0].form();
    assert_eq!(attach.get("PolicyArn").map(String::as_str), Some("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"));
    let put = replay.of("PutRolePolicy")[0].form();
    assert_eq!(put.get("PolicyName").map(String::as_str), Some("scoped"));
}

/// With a boundary configured, `CreateRole` carries it, and a role adopted or completed gets it
/// (`PutRolePermissionsBoundary`) before any policy is attached or put: the template allows
/// those only on roles with the boundary.
#[tokio::test]
async fn roles_carry_the_permissions_boundary() {
    const BOUNDARY: &str = "arn:aws:iam::123456789012:policy/instantstart-RoleBoundary-X";
    let ok = |op: &str| {
        Canned::xml(&format!(
            "<{op}Response><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{op}Response>"
        ))
    };
    let created = "<CreateRoleResponse><CreateRoleResult><Role><Path>/</Path><RoleName>demo-eks-cluster-role</RoleName>\
        <RoleId>AROAEXAMPLE</RoleId><Arn>arn:aws:iam::123456789012:role/demo-eks-cluster-role</Arn>\
        <CreateDate>2026-01-01T00:00:00Z</CreateDate></Role></CreateRoleResult></CreateRoleResponse>";
    let req = CreateIamRole {
        name: "demo-eks-cluster-role".into(),
        trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
        managed_policies: vec![instantstart_core::workflow::create_cluster::EKS_CLUSTER_POLICY.into()],
        inline_policies: vec![(
            "scoped".into(),
            json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::b/*"]}]}),
        )],
        tags: tags("demo"),
    };
    // A new role: the boundary in CreateRole itself.
    let replay = Replay::new(move |r| match r.operation().as_str() {
        "CreateRole" => Canned::xml(created),
        op @ ("AttachRolePolicy" | "PutRolePolicy") => ok(op),
        _ => unexpected(r),
    });
    replay.provider().with_role_boundary(BOUNDARY).create_role(&req).await.unwrap();
    let create = replay.of("CreateRole")[0].form();
    assert_eq!(create.get("PermissionsBoundary").map(String::as_str), Some(BOUNDARY), "{create:?}");
    // Without a boundary configured, none is sent.
    let replay = Replay::new(move |r| match r.operation().as_str() {
        "CreateRole" => Canned::xml(created),
        op @ ("AttachRolePolicy" | "PutRolePolicy") => ok(op),
        _ => unexpected(r),
    });
    replay.provider().create_role(&req).await.unwrap();
    assert!(!replay.of("CreateRole")[0].form().contains_key("PermissionsBoundary"));
    // An existing role of ours (made by an older version): the boundary first.
    let replay = Replay::new(move |r| match r.operation().as_str() {
        "CreateRole" => {
            Canned::query_error(409, "EntityAlreadyExists", "Role with name demo-eks-cluster-role already exists.")
        }
        "GetRole" => Canned::xml(ROLE_XML),
        op @ ("PutRolePermissionsBoundary" | "AttachRolePolicy" | "PutRolePolicy") => ok(op),
        _ => unexpected(r),
    });
    replay.provider().with_role_boundary(BOUNDARY).create_role(&req).await.unwrap();
    assert_eq!(
        replay.operations(),
        ["CreateRole", "GetRole", "PutRolePermissionsBoundary", "AttachRolePolicy", "PutRolePolicy"]
    );
    let put = replay.of("PutRolePermissionsBoundary")[0].form();
    assert_eq!(put.get("PermissionsBoundary").map(String::as_str), Some(BOUNDARY), "{put:?}");
    assert_eq!(put.get("RoleName").map(String::as_str), Some("demo-eks-cluster-role"));
    // Completing a half-created role: the boundary first, too.
    let replay = Replay::new(move |r| match r.operation().as_str() {
        op @ ("PutRolePermissionsBoundary" | "UpdateAssumeRolePolicy" | "AttachRolePolicy" | "PutRolePolicy") => ok(op),
        _ => unexpected(r),
    });
    replay.provider().with_role_boundary(BOUNDARY).ensure_role_policies(&req).await.unwrap();
    assert_eq!(
        replay.operations(),
        ["PutRolePermissionsBoundary", "UpdateAssumeRolePolicy", "AttachRolePolicy", "PutRolePolicy"]
    );
    // A managed policy the code never attaches is refused before anything is sent.
    let replay = Replay::new(unexpected);
    let mut broad = req.clone();
    broad.managed_policies = vec!["arn:aws:iam::aws:policy/AmazonEC2FullAccess".into()];
    let e = replay.provider().with_role_boundary(BOUNDARY).create_role(&broad).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::InvalidRequest, "{e}");
    assert!(e.message.contains("AmazonEC2FullAccess"), "{e}");
    assert!(replay.operations().is_empty());
}

#[tokio::test]
async fn a_half_created_role_is_completed_with_idempotent_calls_only() {
    let ok = |op: &str| {
        Canned::xml(&format!(
            "<{op}Response><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{op}Response>"
        ))
    };
    let replay = Replay::new(move |r| match r.operation().as_str() {
        op @ ("UpdateAssumeRolePolicy" | "AttachRolePolicy" | "PutRolePolicy") => ok(op),
        _ => unexpected(r),
    });
    replay
        .provider()
        .ensure_role_policies(&CreateIamRole {
            name: "demo-eks-cluster-role".into(),
            trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]}),
            managed_policies: vec!["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy".into()],
            inline_policies: vec![("scoped".into(), json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::b/*"]}]}))],
            tags: tags("demo"),
        })
        .await
        .unwrap();
    // No CreateRole, no read: the trust policy, then the attachments and inline policies.
    assert_eq!(replay.operations(), ["UpdateAssumeRolePolicy", "AttachRolePolicy", "PutRolePolicy"]);
    let update = replay.of("UpdateAssumeRolePolicy")[0].form();
    assert_eq!(update.get("RoleName").map(String::as_str), Some("demo-eks-cluster-role"));
    assert!(update.get("PolicyDocument").is_some_and(|d| d.contains("eks.amazonaws.com")), "{update:?}");
    let attach = replay.of("AttachRolePolicy")[0].form();
    assert_eq!(attach.get("PolicyArn").map(String::as_str), Some("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"));
    let put = replay.of("PutRolePolicy")[0].form();
    assert_eq!(put.get("PolicyName").map(String::as_str), Some("scoped"));
    assert!(put.get("PolicyDocument").is_some_and(|d| d.contains("arn:aws:s3:::b/*")), "{put:?}");
}

/// STS's answer naming the account that owns the buckets of these tests.
fn caller_identity() -> Canned {
    Canned::xml(
        "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><GetCallerIdentityResult>\
         <Arn>arn:aws:iam::123456789012:role/control-plane</Arn><UserId>AROAEXAMPLE</UserId>\
         <Account>123456789012</Account></GetCallerIdentityResult></GetCallerIdentityResponse>",
    )
}

#[tokio::test]
async fn a_bucket_in_another_region_is_followed() {
    let replay = Replay::new(|r| match (r.method.as_str(), r.url.as_str()) {
        ("POST", url) if url.contains("sts.") => caller_identity(),
        ("HEAD", url) if url.contains("us-east-1") => Canned::status(301).header("x-amz-bucket-region", "eu-west-1"),
        ("GET", url) if url.contains("eu-west-1") && url.contains("tagging") => Canned::xml(
            "<Tagging><TagSet><Tag><Key>instantstart:managed-by</Key><Value>instantstart</Value></Tag>\
             <Tag><Key>instantstart:cluster</Key><Value>demo</Value></Tag></TagSet></Tagging>",
        ),
        _ => unexpected(r),
    });
    let b = replay.provider().describe_bucket("is-demo-bucket").await.unwrap().unwrap();
    assert_eq!(b.region, "eu-west-1");
    assert!(is_owned(&b.tags, "demo"));
    // Every S3 call names this account as the expected bucket owner.
    let s3: Vec<Recorded> = replay.requests().into_iter().filter(|r| !r.url.contains("sts.")).collect();
    assert_eq!(s3.len(), 2);
    for r in s3 {
        assert_eq!(r.headers.get("x-amz-expected-bucket-owner").map(String::as_str), Some("123456789012"), "{}", r.url);
    }
}

/// The lifecycle script's PutObject (key, body, content type, SHA-256 checksum header) and
/// HeadObject (checksum mode on, the checksum read back; a 404 is "absent").
#[tokio::test]
async fn lifecycle_script_put_and_head_object() {
    use instantstart_core::lifecycle::{CONTENT_TYPE, ON_CREATE_SH, script_key, script_sha256};
    let key = script_key();
    let b64 = {
        let hex = script_sha256();
        let raw: Vec<u8> = (0..32).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap()).collect();
        aws_smithy_types::base64::encode(&raw)
    };
    let (k, b) = (key.clone(), b64.clone());
    let replay = Replay::new(move |r| {
        if r.url.contains("sts.") {
            return caller_identity();
        }
        // Virtual-hosted (`/key`) or path-style (`/bucket/key`) addressing: the same path.
        let path = r.uri.split('?').next().unwrap_or_default();
        let path = match path.strip_prefix("/is-demo-123456789012-ab12") {
            Some("") => "/".to_string(),
            Some(rest) => rest.to_string(),
            None => path.to_string(),
        };
        match (r.method.as_str(), path.as_str()) {
            ("HEAD", "/") => Canned::status(200).header("x-amz-bucket-region", "us-east-1"),
            ("PUT", p) if p == format!("/{k}") => Canned::status(200).header("ETag", "\"e\""),
            ("HEAD", p) if p == format!("/{k}") => Canned::status(200)
                .header("Content-Length", &ON_CREATE_SH.len().to_string())
                .header("x-amz-checksum-sha256", &b),
            ("HEAD", _) => Canned::status(404),
            _ => unexpected(r),
        }
    });
    let p = replay.provider();
    let put = p
        .put_object(&PutObject {
            bucket: "is-demo-123456789012-ab12".into(),
            key: key.clone(),
            body: ON_CREATE_SH.as_bytes().to_vec(),
            content_type: CONTENT_TYPE.into(),
        })
        .await
        .unwrap();
    assert_eq!(put.sha256.as_deref(), Some(script_sha256().as_str()));
    let sent: Vec<Recorded> = replay.requests().into_iter().filter(|r| r.method == "PUT").collect();
    assert_eq!(sent.len(), 1);
    let req = &sent[0];
    assert_eq!(req.body, ON_CREATE_SH, "the script is sent byte for byte");
    assert_eq!(req.headers.get("content-type").map(String::as_str), Some("text/x-shellscript"));
    assert_eq!(req.headers.get("x-amz-checksum-sha256"), Some(&b64), "{:?}", req.headers);
    assert_eq!(req.headers.get("x-amz-expected-bucket-owner").map(String::as_str), Some("123456789012"));
    assert!(req.url.contains("is-demo-123456789012-ab12"), "{}", req.url);

    let head = p.head_object("is-demo-123456789012-ab12", &key).await.unwrap().unwrap();
    assert_eq!(head.size_bytes, ON_CREATE_SH.len() as u64);
    assert_eq!(head.sha256.as_deref(), Some(script_sha256().as_str()), "the checksum proves the content");
    let heads: Vec<Recorded> =
        replay.requests().into_iter().filter(|r| r.method == "HEAD" && r.uri.contains("lifecycle")).collect();
    assert_eq!(heads[0].headers.get("x-amz-checksum-mode").map(String::as_str), Some("ENABLED"));
    assert_eq!(
        p.head_object("is-demo-123456789012-ab12", "lifecycle/0000000000000000/on_create.sh").await.unwrap(),
        None
    );
}

// ---------------------------------------------------------------- day-2 (inherent until in the traits)

#[tokio::test]
async fn access_entries_are_created_with_policies_or_adopted() {
    use instantstart_core::provider::{AccessPolicy, EnsureAccessEntry};
    let principal = "arn:aws:iam::123456789012:role/instantstart-control-plane";
    let replay = Replay::new(|r| {
        // Virtual-hosted (`/key`) or path-style (`/bucket/key`) addressing: the same path.
        let path = r.uri.split('?').next().unwrap_or_default();
        let path = match path.strip_prefix("/is-demo-123456789012-ab12") {
            Some("") => "/".to_string(),
            Some(rest) => rest.to_string(),
            None => path.to_string(),
        };
        match (r.method.as_str(), path.as_str()) {
            ("POST", "/clusters/demo/access-entries") => Canned::json_error(
                409,
                "ResourceInUseException",
                "The specified access entry resource is already in use",
            ),
            ("GET", p) if p.ends_with("/access-policies") => Canned::json(json!({
                "clusterName": "demo", "principalArn": "arn:aws:iam::123456789012:role/instantstart-control-plane",
                "associatedAccessPolicies": [{ "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
                    "accessScope": { "type": "namespace", "namespaces": ["team-a"] } }] })),
            ("POST", p) if p.ends_with("/access-policies") => Canned::json(json!({ "clusterName": "demo" })),
            ("GET", p) if p.starts_with("/clusters/demo/access-entries/") => Canned::json(json!({ "accessEntry": {
                "clusterName": "demo", "principalArn": "arn:aws:iam::123456789012:role/instantstart-control-plane",
                "type": "STANDARD", "username": "arn:aws:sts::123456789012:assumed-role/instantstart-control-plane/{{SessionName}}",
                "tags": tag_json("demo") }})),
            _ => unexpected(r),
        }
    });
    let p = replay.provider();
    let entry = p
        .ensure_access_entry(&EnsureAccessEntry {
            region: "us-east-1".into(),
            cluster: "demo".into(),
            principal_arn: principal.into(),
            kind: "STANDARD".into(),
            policies: vec![AccessPolicy {
                policy_arn: "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy".into(),
                namespaces: vec!["team-a".into()],
            }],
            client_request_token: "is-token".into(),
            tags: tags("demo"),
        })
        .await
        .unwrap();
    assert_eq!(entry.kind, "STANDARD");
    assert_eq!(entry.policies[0].namespaces, ["team-a"]);
    let requests = replay.requests();
    let create = requests.iter().find(|r| r.method == "POST" && r.uri.ends_with("/access-entries")).unwrap().json();
    assert_eq!(
        create,
        json!({ "principalArn": principal, "type": "STANDARD", "clientRequestToken": "is-token", "tags": tag_json("demo") })
    );
    let associate = requests.iter().find(|r| r.method == "POST" && r.uri.ends_with("/access-policies")).unwrap();
    assert!(
        associate.uri.contains("arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Finstantstart-control-plane"),
        "{}",
        associate.uri
    );
    assert_eq!(
        associate.json(),
        json!({ "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
                "accessScope": { "type": "namespace", "namespaces": ["team-a"] } })
    );
}

#[tokio::test]
async fn update_addon_keeps_configuration_and_pins_the_version() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "POST /clusters/demo/addons/cert-manager/update" => {
            Canned::json(json!({ "update": { "id": "u-1", "status": "InProgress", "type": "AddonUpdate" } }))
        }
        "GET /clusters/demo/addons/cert-manager" => Canned::json(json!({ "addon": {
            "addonName": "cert-manager", "status": "UPDATING", "addonVersion": "v1.18.2-eksbuild.2" }})),
        _ => unexpected(r),
    });
    let a = replay
        .provider()
        .update_addon("us-east-1", "demo", "cert-manager", Some("v1.18.2-eksbuild.2"), "is-token")
        .await
        .unwrap();
    assert_eq!(a.state, ResourceState::Updating);
    assert_eq!(
        replay.of("POST /clusters/demo/addons/cert-manager/update")[0].json(),
        json!({ "addonVersion": "v1.18.2-eksbuild.2", "resolveConflicts": "PRESERVE", "clientRequestToken": "is-token" })
    );
}

/// UpdateClusterSoftware: `InstanceGroups` only when groups are named (absent = every group),
/// each with its release; the rolling policy by count or percentage, the wait and the rollback
/// alarms; `ImageId`. ConflictException (an update running) is `Conflict`. DescribeCluster's
/// per-group image fields are read into `GroupSoftware`. moto has no UpdateClusterSoftware.
#[tokio::test]
async fn update_cluster_software_sends_groups_policy_and_image() {
    use instantstart_core::provider::{
        BatchSize, BatchSizeKind, SoftwareUpdateDeployment, SoftwareUpdateGroup, UpdateClusterSoftware,
    };
    let replay = Replay::new(|r| match r.operation().as_str() {
        "UpdateClusterSoftware" if r.json()["ClusterName"] == "busy-hp" => {
            Canned::json_error(400, "ConflictException", "Cluster busy-hp is not InService")
        }
        "UpdateClusterSoftware" => {
            Canned::json(json!({ "ClusterArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123" }))
        }
        "DescribeCluster" => {
            let mut c = describe_cluster_json("SystemUpdating");
            let g = &mut c["InstanceGroups"][0];
            g["CurrentImageId"] = json!("ami-0123456789abcdef0");
            g["DesiredImageId"] = json!("ami-0fedcba9876543210");
            g["CurrentImageReleaseVersion"] = json!("2025.10.1");
            g["DesiredImageReleaseVersion"] = json!("2025.11.2");
            g["ImageVersionStatus"] = json!("UpdateAvailable");
            g["SoftwareUpdateStatus"] = json!("InProgress");
            g["TargetStateCount"] = json!(1);
            Canned::json(c)
        }
        "ListTags" => Canned::json(json!({ "Tags": [] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let mut req = UpdateClusterSoftware {
        region: "us-east-1".into(),
        cluster: "demo-hp".into(),
        instance_groups: vec![
            SoftwareUpdateGroup { name: "workers".into(), image_release_version: None },
            SoftwareUpdateGroup { name: "extra".into(), image_release_version: Some("2025.10.1".into()) },
        ],
        deployment: Some(SoftwareUpdateDeployment {
            max_batch: BatchSize { kind: BatchSizeKind::CapacityPercentage, value: 25 },
            rollback_max_batch: Some(BatchSize { kind: BatchSizeKind::InstanceCount, value: 1 }),
            wait_interval_secs: Some(120),
            rollback_alarms: vec!["hp-errors".into()],
        }),
        image_id: None,
    };
    p.update_cluster_software(&req).await.unwrap();
    assert_eq!(
        replay.of("UpdateClusterSoftware")[0].json(),
        json!({ "ClusterName": "demo-hp",
            "InstanceGroups": [{ "InstanceGroupName": "workers" }, { "InstanceGroupName": "extra", "ImageReleaseVersion": "2025.10.1" }],
            "DeploymentConfig": {
                "RollingUpdatePolicy": {
                    "MaximumBatchSize": { "Type": "CAPACITY_PERCENTAGE", "Value": 25 },
                    "RollbackMaximumBatchSize": { "Type": "INSTANCE_COUNT", "Value": 1 }
                },
                "WaitIntervalInSeconds": 120,
                "AutoRollbackConfiguration": [{ "AlarmName": "hp-errors" }]
            } })
    );
    req.instance_groups.clear();
    req.deployment = None;
    req.image_id = Some("ami-0123456789abcdef0".into());
    p.update_cluster_software(&req).await.unwrap();
    assert_eq!(
        replay.of("UpdateClusterSoftware")[1].json(),
        json!({ "ClusterName": "demo-hp", "ImageId": "ami-0123456789abcdef0" })
    );
    req.cluster = "busy-hp".into();
    let e = p.update_cluster_software(&req).await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Conflict, "{e}");
    let c = p.describe_hyperpod_cluster("us-east-1", "demo-hp").await.unwrap().unwrap();
    assert_eq!(c.state, ResourceState::Updating);
    let s = &c.instance_groups[0].software;
    assert_eq!(s.current_image_id.as_deref(), Some("ami-0123456789abcdef0"));
    assert_eq!(s.desired_image_id.as_deref(), Some("ami-0fedcba9876543210"));
    assert_eq!(s.current_release.as_deref(), Some("2025.10.1"));
    assert_eq!(s.desired_release.as_deref(), Some("2025.11.2"));
    assert_eq!(s.image_version_status.as_deref(), Some("UpdateAvailable"));
    assert_eq!(s.update_status.as_deref(), Some("InProgress"));
    assert_eq!(s.target_state_count, Some(1));
    assert!(s.update_running());
}

#[tokio::test]
async fn eks_endpoint_and_ca_for_the_kubernetes_adapter() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "GET /clusters/demo" => {
            let mut c = eks_cluster_json("demo", "ACTIVE", tag_json("demo"));
            c["cluster"]["certificateAuthority"] = json!({ "data": "LS0tLS1CRUdJTi0tLS0t" });
            Canned::json(c)
        }
        "GET /clusters/new" => Canned::json(
            json!({ "cluster": { "name": "new", "arn": "arn:aws:eks:us-east-1:1:cluster/new", "status": "CREATING" } }),
        ),
        "GET /clusters/gone" => {
            Canned::json_error(404, "ResourceNotFoundException", "No cluster found for name: gone.")
        }
        _ => unexpected(r),
    });
    let p = replay.provider();
    let e = p.eks_endpoint("us-east-1", "demo").await.unwrap().unwrap();
    assert_eq!(e.endpoint, "https://ABC.gr7.us-east-1.eks.amazonaws.com");
    assert_eq!(e.certificate_authority, "LS0tLS1CRUdJTi0tLS0t");
    assert!(!format!("{e:?}").contains("LS0t"), "the CA is not logged");
    assert_eq!(p.eks_endpoint("us-east-1", "new").await.unwrap(), None);
    assert_eq!(p.eks_endpoint("us-east-1", "gone").await.unwrap(), None);
    assert!(p.sdk_config().await.unwrap().credentials_provider().is_some());
}

// ---------------------------------------------------------------- SageMaker managed MLflow

const MLFLOW_ARN: &str = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/team";

fn describe_tracking_server_json(name: &str, status: &str) -> Value {
    json!({
        "TrackingServerArn": MLFLOW_ARN.replace("/team", &format!("/{name}")),
        "TrackingServerName": name,
        "ArtifactStoreUri": "s3://demo-bucket/mlflow/team",
        "TrackingServerSize": "Medium",
        "MlflowVersion": "3.0",
        "RoleArn": "arn:aws:iam::123456789012:role/instantstart-mlflow-team",
        "TrackingServerStatus": status,
        "IsActive": "Active",
        "TrackingServerUrl": "https://t-abc.us-east-1.experiments.sagemaker.aws",
        "CreationTime": 1_700_000_000.0,
    })
}

#[tokio::test]
async fn mlflow_tracking_servers_are_created_described_and_listed() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateMlflowTrackingServer" => Canned::json(json!({ "TrackingServerArn": MLFLOW_ARN })),
        "DescribeMlflowTrackingServer" => match r.json()["TrackingServerName"].as_str() {
            Some("gone") => Canned::json_error(400, "ResourceNotFound", "Cannot find TrackingServer with name gone"),
            Some(name) => {
                Canned::json(describe_tracking_server_json(name, if name == "team" { "Created" } else { "Creating" }))
            }
            None => unexpected(r),
        },
        "ListMlflowTrackingServers" => {
            if r.json().get("NextToken").is_none() {
                Canned::json(json!({ "TrackingServerSummaries": [
                    { "TrackingServerName": "team", "TrackingServerArn": MLFLOW_ARN, "TrackingServerStatus": "Created" }],
                    "NextToken": "page-2" }))
            } else {
                Canned::json(json!({ "TrackingServerSummaries": [
                    { "TrackingServerName": "new", "TrackingServerStatus": "Creating" }] }))
            }
        }
        "ListTags" => Canned::json(json!({ "Tags": [
            { "Key": "instantstart:managed-by", "Value": "instantstart" }, { "Key": "instantstart:cluster", "Value": "demo" }] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let created = p
        .create_tracking_server(&CreateTrackingServer {
            region: "us-east-1".into(),
            name: "team".into(),
            artifact_store_uri: "s3://demo-bucket/mlflow/team".into(),
            size: TrackingServerSize::Medium,
            role_arn: "arn:aws:iam::123456789012:role/instantstart-mlflow-team".into(),
            mlflow_version: None,
            tags: tags("demo"),
        })
        .await
        .unwrap();
    assert_eq!((created.arn.as_str(), created.status.as_str()), (MLFLOW_ARN, "Creating"));
    let sent = replay.of("CreateMlflowTrackingServer")[0].json();
    assert_eq!(sent["TrackingServerName"], "team");
    assert_eq!(sent["ArtifactStoreUri"], "s3://demo-bucket/mlflow/team");
    assert_eq!(sent["TrackingServerSize"], "Medium");
    assert_eq!(sent["RoleArn"], "arn:aws:iam::123456789012:role/instantstart-mlflow-team");
    assert!(sent.get("MlflowVersion").is_none(), "service default when absent: {sent}");
    let mut sent_tags: Vec<(String, String)> = sent["Tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["Key"].as_str().unwrap().to_string(), t["Value"].as_str().unwrap().to_string()))
        .collect();
    sent_tags.sort();
    assert_eq!(sent_tags, tags("demo").into_iter().collect::<Vec<_>>());

    let team = p.describe_tracking_server("us-east-1", "team").await.unwrap().unwrap();
    assert_eq!(team.state(), ResourceState::Active);
    assert_eq!(team.url.as_deref(), Some("https://t-abc.us-east-1.experiments.sagemaker.aws"));
    assert_eq!(team.size, Some(TrackingServerSize::Medium));
    assert_eq!(team.created_at.unwrap().timestamp(), 1_700_000_000);
    assert!(is_owned(&team.tags, "demo"));
    assert_eq!(p.describe_tracking_server("us-east-1", "gone").await.unwrap(), None);

    let all = p.list_tracking_servers("us-east-1").await.unwrap();
    assert_eq!(
        all.iter().map(|s| (s.name.as_str(), s.status.as_str())).collect::<Vec<_>>(),
        [("team", "Created"), ("new", "Creating")]
    );
    assert_eq!(replay.of("ListMlflowTrackingServers").len(), 2, "both pages");
}

#[tokio::test]
async fn delete_tracking_server_request_states_and_not_found() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "DeleteMlflowTrackingServer" => match r.json()["TrackingServerName"].as_str() {
            Some("team") => Canned::json(json!({ "TrackingServerArn": MLFLOW_ARN })),
            Some("gone") => Canned::json_error(400, "ResourceNotFound", "Cannot find TrackingServer with name gone"),
            _ => unexpected(r),
        },
        "DescribeMlflowTrackingServer" => match r.json()["TrackingServerName"].as_str() {
            Some("team") => Canned::json(describe_tracking_server_json("team", "Deleting")),
            Some("stuck") => Canned::json(describe_tracking_server_json("stuck", "DeleteFailed")),
            _ => unexpected(r),
        },
        "ListTags" => Canned::json(json!({ "Tags": [
            { "Key": "instantstart:managed-by", "Value": "instantstart" }, { "Key": "instantstart:cluster", "Value": "demo" }] })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    p.delete_tracking_server("us-west-2", "team").await.unwrap();
    let sent = &replay.of("DeleteMlflowTrackingServer")[0];
    assert_eq!(sent.target.as_deref(), Some("SageMaker.DeleteMlflowTrackingServer"));
    assert_eq!(sent.json(), json!({ "TrackingServerName": "team" }), "the name, nothing else");
    assert!(sent.url.contains("us-west-2"), "the server's region: {}", sent.url);
    let e = p.delete_tracking_server("us-east-1", "gone").await.unwrap_err();
    assert_eq!((e.kind, e.api.as_str()), (ProviderErrorKind::NotFound, "sagemaker:DeleteMlflowTrackingServer"), "{e}");

    // What the delete workflow reads: the state, the role the server runs with, the owner.
    let deleting = p.describe_tracking_server("us-east-1", "team").await.unwrap().unwrap();
    assert_eq!(deleting.state(), ResourceState::Deleting);
    assert_eq!(deleting.role_arn.as_deref(), Some("arn:aws:iam::123456789012:role/instantstart-mlflow-team"));
    assert!(is_owned(&deleting.tags, "demo"));
    let stuck = p.describe_tracking_server("us-east-1", "stuck").await.unwrap().unwrap();
    assert_eq!(
        (stuck.status.as_str(), stuck.state()),
        ("DeleteFailed", ResourceState::Failed { reason: "DeleteFailed".into() })
    );
}

#[tokio::test]
async fn a_role_sagemaker_cannot_assume_yet_is_transient() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateMlflowTrackingServer" => Canned::json_error(
            400,
            "ValidationException",
            "Could not assume role arn:aws:iam::123456789012:role/instantstart-mlflow-team",
        ),
        _ => unexpected(r),
    });
    let e = replay
        .provider()
        .create_tracking_server(&CreateTrackingServer {
            region: "us-east-1".into(),
            name: "team".into(),
            artifact_store_uri: "s3://demo-bucket/mlflow".into(),
            size: TrackingServerSize::Small,
            role_arn: "arn:aws:iam::123456789012:role/instantstart-mlflow-team".into(),
            mlflow_version: Some("3.0".into()),
            tags: tags("demo"),
        })
        .await
        .unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::Transient, "{e}");
    assert_eq!(e.api, "sagemaker:CreateMlflowTrackingServer");
}

// ---------------------------------------------------------------- EKS Pod Identity

fn association_json(id: &str, namespace: &str, sa: &str, role: &str, tags: Value) -> Value {
    json!({ "association": {
        "clusterName": "demo", "namespace": namespace, "serviceAccount": sa,
        "roleArn": format!("arn:aws:iam::123456789012:role/{role}"),
        "associationArn": format!("arn:aws:eks:us-east-1:123456789012:podidentityassociation/demo/{id}"),
        "associationId": id, "tags": tags, "createdAt": 1.7e9, "modifiedAt": 1.7e9 }})
}

#[tokio::test]
async fn create_pod_identity_association_sends_the_service_account_role_token_and_tags() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "POST /clusters/demo/pod-identity-associations" => Canned::json(association_json(
            "a-0123456789abcdef0",
            "aws-hyperpod",
            "hp-training-operator-controller-manager",
            "demo-hpto-role",
            tag_json("demo"),
        )),
        _ => unexpected(r),
    });
    let a = replay
        .provider()
        .create_pod_identity_association(&CreatePodIdentityAssociation {
            region: "us-east-1".into(),
            cluster: "demo".into(),
            namespace: "aws-hyperpod".into(),
            service_account: "hp-training-operator-controller-manager".into(),
            role_arn: "arn:aws:iam::123456789012:role/demo-hpto-role".into(),
            client_request_token: "is-token".into(),
            tags: tags("demo"),
        })
        .await
        .unwrap();
    assert_eq!(
        replay.of("POST /clusters/demo/pod-identity-associations")[0].json(),
        json!({ "namespace": "aws-hyperpod", "serviceAccount": "hp-training-operator-controller-manager",
                "roleArn": "arn:aws:iam::123456789012:role/demo-hpto-role", "clientRequestToken": "is-token",
                "tags": tag_json("demo") })
    );
    assert_eq!(a.id, "a-0123456789abcdef0");
    assert_eq!(a.role_arn, "arn:aws:iam::123456789012:role/demo-hpto-role");
    assert!(is_owned(&a.tags, "demo"));
}

#[tokio::test]
async fn pod_identity_associations_are_listed_by_service_account_described_adopted_and_deleted() {
    // The service account already has an association: ours is adopted, a foreign one is not.
    for (owner, adopted) in [("demo", true), ("someone-else", false)] {
        let owner = owner.to_string();
        let replay = Replay::new(move |r| match r.operation().as_str() {
            "POST /clusters/demo/pod-identity-associations" => Canned::json_error(
                409,
                "ResourceInUseException",
                "Association already exists: a-0123456789abcdef0 for namespace kube-system and service account s3-csi-driver-sa",
            ),
            "GET /clusters/demo/pod-identity-associations" => Canned::json(json!({ "associations": [{
                "clusterName": "demo", "namespace": "kube-system", "serviceAccount": "s3-csi-driver-sa",
                "associationId": "a-0123456789abcdef0",
                "associationArn": "arn:aws:eks:us-east-1:123456789012:podidentityassociation/demo/a-0123456789abcdef0" }]})),
            "GET /clusters/demo/pod-identity-associations/a-0123456789abcdef0" => Canned::json(association_json(
                "a-0123456789abcdef0",
                "kube-system",
                "s3-csi-driver-sa",
                "demo-s3-csi-role",
                tag_json(&owner),
            )),
            "DELETE /clusters/demo/pod-identity-associations/a-0123456789abcdef0" => {
                Canned::json(association_json("a-0123456789abcdef0", "kube-system", "s3-csi-driver-sa", "r", json!({})))
            }
            _ => unexpected(r),
        });
        let p = replay.provider();
        let req = CreatePodIdentityAssociation {
            region: "us-east-1".into(),
            cluster: "demo".into(),
            namespace: "kube-system".into(),
            service_account: "s3-csi-driver-sa".into(),
            role_arn: "arn:aws:iam::123456789012:role/demo-s3-csi-role".into(),
            client_request_token: "is-token".into(),
            tags: tags("demo"),
        };
        match p.create_pod_identity_association(&req).await {
            Ok(a) => assert!(adopted && a.id == "a-0123456789abcdef0", "{a:?}"),
            Err(e) => assert!(!adopted && e.kind == ProviderErrorKind::AlreadyExists, "{e}"),
        }
        let list = &replay.of("GET /clusters/demo/pod-identity-associations")[0];
        assert_eq!(list.query().get("namespace").map(String::as_str), Some("kube-system"));
        assert_eq!(list.query().get("serviceAccount").map(String::as_str), Some("s3-csi-driver-sa"));
        let found =
            p.list_pod_identity_associations("us-east-1", "demo", "kube-system", "s3-csi-driver-sa").await.unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].role_arn, "arn:aws:iam::123456789012:role/demo-s3-csi-role");
        assert_eq!(is_owned(&found[0].tags, "demo"), adopted);
        p.delete_pod_identity_association("us-east-1", "demo", "a-0123456789abcdef0").await.unwrap();
    }
    let replay = Replay::new(|r| match r.operation().as_str() {
        "DELETE /clusters/demo/pod-identity-associations/a-gone" => {
            Canned::json_error(404, "ResourceNotFoundException", "No association a-gone found")
        }
        _ => unexpected(r),
    });
    let err = replay.provider().delete_pod_identity_association("us-east-1", "demo", "a-gone").await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::NotFound);
}

#[tokio::test]
async fn pod_identity_roles_are_trusted_by_pods_eks_with_tag_session() {
    let ok = |op: &str| {
        Canned::xml(&format!(
            "<{op}Response><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{op}Response>"
        ))
    };
    let replay = Replay::new(move |r| match r.operation().as_str() {
        op @ ("UpdateAssumeRolePolicy" | "AttachRolePolicy") => ok(op),
        _ => unexpected(r),
    });
    let trust = instantstart_core::workflow::steps::pod_identity_trust_policy();
    replay
        .provider()
        .ensure_role_policies(&CreateIamRole {
            name: "demo-hpto-role".into(),
            trust_policy: trust.clone(),
            managed_policies: vec![instantstart_core::workflow::features::TRAINING_OPERATOR_POLICY.into()],
            inline_policies: vec![],
            tags: tags("demo"),
        })
        .await
        .unwrap();
    let update = replay.of("UpdateAssumeRolePolicy")[0].form();
    let sent: Value = serde_json::from_str(update.get("PolicyDocument").unwrap()).unwrap();
    assert_eq!(sent, trust);
    assert_eq!(sent["Statement"][0]["Principal"]["Service"], "pods.eks.amazonaws.com");
    assert_eq!(sent["Statement"][0]["Action"], json!(["sts:AssumeRole", "sts:TagSession"]));
    let attach = replay.of("AttachRolePolicy")[0].form();
    assert_eq!(
        attach.get("PolicyArn").map(String::as_str),
        Some("arn:aws:iam::aws:policy/AmazonSageMakerHyperPodTrainingOperatorAccess")
    );
}

// ---------------------------------------------------------------- task governance

const HP: &str = "arn:aws:sagemaker:us-east-1:123456789012:cluster/abc123def456";

fn governance_quota(team: &str) -> QuotaConfig {
    QuotaConfig {
        team: team.into(),
        resources: vec![
            QuotaResource { instance_type: "ml.g5.12xlarge".into(), count: Some(2), accelerators: None },
            QuotaResource { instance_type: "ml.p5.48xlarge".into(), count: None, accelerators: Some(8) },
        ],
        strategy: SharingStrategy::LendAndBorrow,
        borrow_limit: Some(150),
        preempt_team_tasks: PreemptTeamTasks::Never,
        fair_share_weight: 30,
        enabled: true,
    }
}

#[tokio::test]
async fn scheduler_configs_are_created_listed_updated_by_version_and_deleted() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateClusterSchedulerConfig" => Canned::json(json!({
            "ClusterSchedulerConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster-scheduler-config/aaaaaaaaaaaa",
            "ClusterSchedulerConfigId": "aaaaaaaaaaaa" })),
        "ListClusterSchedulerConfigs" if r.json().get("NextToken").is_none() => Canned::json(json!({
            "ClusterSchedulerConfigSummaries": [
                { "ClusterSchedulerConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster-scheduler-config/aaaaaaaaaaaa",
                  "ClusterSchedulerConfigId": "aaaaaaaaaaaa", "Name": "demo-policy", "CreationTime": 1_700_000_000.0,
                  "Status": "Updated", "ClusterArn": HP }],
            "NextToken": "page-2" })),
        "ListClusterSchedulerConfigs" => Canned::json(json!({ "ClusterSchedulerConfigSummaries": [
            { "ClusterSchedulerConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster-scheduler-config/bbbbbbbbbbbb",
              "ClusterSchedulerConfigId": "bbbbbbbbbbbb", "Name": "old", "CreationTime": 1_700_000_000.0,
              "Status": "Deleted", "ClusterArn": HP }] })),
        "DescribeClusterSchedulerConfig" => Canned::json(json!({
            "ClusterSchedulerConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster-scheduler-config/aaaaaaaaaaaa",
            "ClusterSchedulerConfigId": "aaaaaaaaaaaa", "Name": "demo-policy", "ClusterSchedulerConfigVersion": 3,
            "Status": "Updated", "CreationTime": 1_700_000_000.0, "ClusterArn": HP,
            "SchedulerConfig": { "PriorityClasses": [{ "Name": "inference", "Weight": 100 }], "FairShare": "Disabled" } })),
        "ListTags" => Canned::json(json!({ "Tags": [
            { "Key": "instantstart:managed-by", "Value": "instantstart" }, { "Key": "instantstart:cluster", "Value": "demo" }] })),
        "UpdateClusterSchedulerConfig" if r.json()["TargetVersion"] == 3 => Canned::json(json!({
            "ClusterSchedulerConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:cluster-scheduler-config/aaaaaaaaaaaa",
            "ClusterSchedulerConfigVersion": 4 })),
        "UpdateClusterSchedulerConfig" => {
            Canned::json_error(400, "ConflictException", "The target version does not match the latest version")
        }
        "DeleteClusterSchedulerConfig" => Canned::json(json!({})),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let policy = SchedulerPolicy {
        priority_classes: vec![
            PriorityClass { name: "inference".into(), weight: 100 },
            PriorityClass { name: "training".into(), weight: 0 },
        ],
        fair_share: true,
    };
    let created = p.create_scheduler_config("us-east-1", "demo-policy", HP, &policy, &tags("demo")).await.unwrap();
    assert_eq!((created.id.as_str(), created.version, created.status.as_str()), ("aaaaaaaaaaaa", 1, "Creating"));
    let sent = replay.of("CreateClusterSchedulerConfig")[0].json();
    assert_eq!(sent["Name"], "demo-policy");
    assert_eq!(sent["ClusterArn"], HP);
    assert_eq!(
        sent["SchedulerConfig"],
        json!({ "PriorityClasses": [{ "Name": "inference", "Weight": 100 }, { "Name": "training", "Weight": 0 }], "FairShare": "Enabled" })
    );
    assert_eq!(sent["Tags"].as_array().unwrap().len(), 3, "ownership tags: {sent}");

    let all = p.list_scheduler_configs("us-east-1", HP).await.unwrap();
    assert_eq!(all.len(), 1, "the Deleted one is left out, both pages read");
    assert_eq!(replay.of("ListClusterSchedulerConfigs").len(), 2);
    assert_eq!(replay.of("ListClusterSchedulerConfigs")[0].json()["ClusterArn"], HP);
    assert_eq!(replay.of("DescribeClusterSchedulerConfig").len(), 1, "only the live one is described");
    let sc = &all[0];
    assert_eq!((sc.version, sc.status.as_str()), (3, "Updated"));
    assert_eq!(
        sc.policy,
        SchedulerPolicy {
            priority_classes: vec![PriorityClass { name: "inference".into(), weight: 100 }],
            fair_share: false
        }
    );
    assert!(is_owned(&sc.tags, "demo"));

    assert_eq!(p.update_scheduler_config("us-east-1", "aaaaaaaaaaaa", 3, &policy).await.unwrap(), 4);
    let sent = replay.of("UpdateClusterSchedulerConfig")[0].json();
    assert_eq!(
        (sent["ClusterSchedulerConfigId"].as_str(), sent["TargetVersion"].as_i64()),
        (Some("aaaaaaaaaaaa"), Some(3))
    );
    let stale = p.update_scheduler_config("us-east-1", "aaaaaaaaaaaa", 2, &policy).await.unwrap_err();
    assert_eq!(stale.kind, ProviderErrorKind::Conflict, "another update got there first: {stale}");

    p.delete_scheduler_config("us-east-1", "aaaaaaaaaaaa").await.unwrap();
    assert_eq!(
        replay.of("DeleteClusterSchedulerConfig")[0].json(),
        json!({ "ClusterSchedulerConfigId": "aaaaaaaaaaaa" })
    );
}

#[tokio::test]
async fn compute_quotas_round_trip_their_configuration() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateComputeQuota" if r.json()["ComputeQuotaTarget"]["TeamName"] == "taken" => {
            Canned::json_error(400, "ConflictException", "A compute quota already exists for team taken")
        }
        "CreateComputeQuota" => Canned::json(json!({
            "ComputeQuotaArn": "arn:aws:sagemaker:us-east-1:123456789012:compute-quota/cccccccccccc",
            "ComputeQuotaId": "cccccccccccc" })),
        "ListComputeQuotas" => Canned::json(json!({ "ComputeQuotaSummaries": [
            { "ComputeQuotaArn": "arn:aws:sagemaker:us-east-1:123456789012:compute-quota/cccccccccccc",
              "ComputeQuotaId": "cccccccccccc", "Name": "demo-research", "Status": "Created", "ClusterArn": HP,
              "ComputeQuotaTarget": { "TeamName": "research" }, "CreationTime": 1_700_000_000.0 }] })),
        "DescribeComputeQuota" => Canned::json(json!({
            "ComputeQuotaArn": "arn:aws:sagemaker:us-east-1:123456789012:compute-quota/cccccccccccc",
            "ComputeQuotaId": "cccccccccccc", "Name": "demo-research", "ComputeQuotaVersion": 2, "Status": "UpdateFailed",
            "FailureReason": "Allocated compute exceeds cluster capacity", "ClusterArn": HP, "CreationTime": 1_700_000_000.0,
            "ComputeQuotaConfig": { "ComputeQuotaResources": [
                { "InstanceType": "ml.g5.12xlarge", "Count": 2 }, { "InstanceType": "ml.p5.48xlarge", "Accelerators": 8 }],
                "ResourceSharingConfig": { "Strategy": "LendAndBorrow", "BorrowLimit": 150 }, "PreemptTeamTasks": "Never" },
            "ComputeQuotaTarget": { "TeamName": "research", "FairShareWeight": 30 }, "ActivationState": "Enabled" })),
        "ListTags" => Canned::json(json!({ "Tags": [] })),
        "UpdateComputeQuota" => Canned::json(json!({
            "ComputeQuotaArn": "arn:aws:sagemaker:us-east-1:123456789012:compute-quota/cccccccccccc", "ComputeQuotaVersion": 3 })),
        "DeleteComputeQuota" if r.json()["ComputeQuotaId"] == "dddddddddddd" => {
            Canned::json_error(400, "ResourceNotFound", "Compute quota dddddddddddd not found")
        }
        "DeleteComputeQuota" => Canned::json(json!({})),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let q = p
        .create_compute_quota("us-east-1", "demo-research", HP, &governance_quota("research"), &tags("demo"))
        .await
        .unwrap();
    assert_eq!(q.id, "cccccccccccc");
    let sent = replay.of("CreateComputeQuota")[0].json();
    assert_eq!(
        sent["ComputeQuotaConfig"],
        json!({ "ComputeQuotaResources": [
                    { "InstanceType": "ml.g5.12xlarge", "Count": 2 }, { "InstanceType": "ml.p5.48xlarge", "Accelerators": 8 }],
                "ResourceSharingConfig": { "Strategy": "LendAndBorrow", "BorrowLimit": 150 }, "PreemptTeamTasks": "Never" })
    );
    assert_eq!(sent["ComputeQuotaTarget"], json!({ "TeamName": "research", "FairShareWeight": 30 }));
    assert_eq!(sent["ActivationState"], "Enabled");
    let taken = p
        .create_compute_quota("us-east-1", "demo-taken", HP, &governance_quota("taken"), &tags("demo"))
        .await
        .unwrap_err();
    assert_eq!(taken.kind, ProviderErrorKind::Conflict);

    let all = p.list_compute_quotas("us-east-1", HP).await.unwrap();
    assert_eq!(all.len(), 1);
    let read = &all[0];
    assert_eq!(read.config, governance_quota("research"), "what is sent is what is read back");
    assert_eq!((read.version, read.status.as_str()), (2, "UpdateFailed"));
    assert_eq!(read.failure_reason.as_deref(), Some("Allocated compute exceeds cluster capacity"));
    assert!(!is_owned(&read.tags, "demo"), "untagged: not ours");

    assert_eq!(p.update_compute_quota("us-east-1", "cccccccccccc", 2, &governance_quota("research")).await.unwrap(), 3);
    let sent = replay.of("UpdateComputeQuota")[0].json();
    assert_eq!(sent["TargetVersion"], 2);
    assert_eq!(sent["ComputeQuotaTarget"]["TeamName"], "research");

    p.delete_compute_quota("us-east-1", "cccccccccccc").await.unwrap();
    let gone = p.delete_compute_quota("us-east-1", "dddddddddddd").await.unwrap_err();
    assert_eq!(gone.kind, ProviderErrorKind::NotFound);
}

// ---------------------------------------------------------------- FSx for Lustre

fn fsx_json(id: &str, kind: &str, lifecycle: &str, extra_tags: &[(&str, &str)]) -> Value {
    let mut t: Vec<Value> = tags("demo").iter().map(|(k, v)| json!({ "Key": k, "Value": v })).collect();
    t.extend(extra_tags.iter().map(|(k, v)| json!({ "Key": k, "Value": v })));
    json!({ "FileSystemId": id, "FileSystemType": kind, "Lifecycle": lifecycle, "StorageCapacity": 1200, "StorageType": "SSD",
            "VpcId": "vpc-1", "SubnetIds": ["subnet-a"], "DNSName": format!("{id}.fsx.us-east-1.amazonaws.com"), "Tags": t,
            "FailureDetails": { "Message": "the subnet ran out of addresses" },
            "LustreConfiguration": { "DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250, "MountName": "abcdefgh" } })
}

fn dra_json(id: &str, lifecycle: &str, tagged: &[(&str, &str)]) -> Value {
    let t: Vec<Value> = tagged.iter().map(|(k, v)| json!({ "Key": k, "Value": v })).collect();
    json!({ "AssociationId": id, "FileSystemId": "fs-0a", "Lifecycle": lifecycle, "FileSystemPath": "/datasets",
            "DataRepositoryPath": "s3://is-demo-bucket/datasets/", "BatchImportMetaDataOnCreate": true,
            "FailureDetails": { "Message": "Amazon FSx cannot access the S3 bucket" },
            "S3": { "AutoImportPolicy": { "Events": ["NEW", "CHANGED", "DELETED"] }, "AutoExportPolicy": { "Events": ["NEW"] } },
            "Tags": t })
}

#[tokio::test]
async fn data_repository_associations_are_created_listed_by_file_system_and_deleted_keeping_the_files() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateDataRepositoryAssociation" => Canned::json(
            json!({ "Association": dra_json("dra-0123456789abcdef0", "CREATING", &[("instantstart:fsx", "data")]) }),
        ),
        "DescribeDataRepositoryAssociations" if r.json()["NextToken"].is_null() => Canned::json(json!({
            "Associations": [dra_json("dra-0123456789abcdef0", "FAILED", &[])], "NextToken": "p2" })),
        "DescribeDataRepositoryAssociations" => {
            Canned::json(json!({ "Associations": [dra_json("dra-0123456789abcdef1", "AVAILABLE", &[])] }))
        }
        "DeleteDataRepositoryAssociation" => Canned::json(json!({
            "AssociationId": "dra-0123456789abcdef0", "Lifecycle": "DELETING", "DeleteDataInFileSystem": false })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let mut t = tags("demo");
    t.insert(TAG_FSX_VOLUME.into(), "data".into());
    let d = p
        .create_data_repository_association(&CreateDataRepositoryAssociation {
            region: "us-east-1".into(),
            client_request_token: "op-1data_repository".into(),
            file_system_id: "fs-0a".into(),
            file_system_path: "/datasets".into(),
            data_repository_path: "s3://is-demo-bucket/datasets/".into(),
            batch_import_metadata: true,
            import_events: S3Event::ALL.to_vec(),
            export_events: vec![S3Event::New],
            tags: t,
        })
        .await
        .unwrap();
    assert_eq!((d.association_id.as_str(), d.lifecycle.as_str()), ("dra-0123456789abcdef0", "CREATING"));
    assert_eq!(d.export_events, vec![S3Event::New]);
    let body = replay.of("CreateDataRepositoryAssociation")[0].json();
    assert_eq!(body["ClientRequestToken"], "op-1data_repository");
    assert_eq!(body["FileSystemId"], "fs-0a");
    assert_eq!(body["FileSystemPath"], "/datasets");
    assert_eq!(body["DataRepositoryPath"], "s3://is-demo-bucket/datasets/");
    assert_eq!(body["BatchImportMetaDataOnCreate"], true);
    assert_eq!(
        body["S3"],
        json!({ "AutoImportPolicy": { "Events": ["NEW", "CHANGED", "DELETED"] }, "AutoExportPolicy": { "Events": ["NEW"] } })
    );
    assert!(body["Tags"].as_array().unwrap().iter().any(|t| t["Key"] == "instantstart:fsx" && t["Value"] == "data"));

    let all = p.list_data_repository_associations("us-east-1", "fs-0a").await.unwrap();
    assert_eq!(all.len(), 2, "both pages: {all:?}");
    assert_eq!(all[0].failure.as_deref(), Some("Amazon FSx cannot access the S3 bucket"));
    let describe = replay.of("DescribeDataRepositoryAssociations");
    assert_eq!(describe[0].json()["Filters"], json!([{ "Name": "file-system-id", "Values": ["fs-0a"] }]));
    assert_eq!(describe[1].json()["NextToken"], "p2");

    p.delete_data_repository_association("us-east-1", "dra-0123456789abcdef0", "op-2data_repository").await.unwrap();
    let body = replay.of("DeleteDataRepositoryAssociation")[0].json();
    assert_eq!(body["AssociationId"], "dra-0123456789abcdef0");
    assert_eq!(body["DeleteDataInFileSystem"], false);
    assert_eq!(body["ClientRequestToken"], "op-2data_repository");
}

#[tokio::test]
async fn create_lustre_file_system_sends_the_token_placement_type_and_tags() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "CreateFileSystem" => Canned::json(json!({ "FileSystem": fsx_json("fs-0a", "LUSTRE", "CREATING", &[]) })),
        _ => unexpected(r),
    });
    let p = replay.provider();
    let mut t = tags("demo");
    t.insert(TAG_FSX_VOLUME.into(), "ckpt".into());
    let fs = p
        .create_lustre_file_system(&CreateLustreFileSystem {
            region: "us-east-1".into(),
            client_request_token: "op-1file_system".into(),
            subnet_id: "subnet-a".into(),
            security_group_ids: vec!["sg-cluster".into()],
            deployment_type: LustreDeploymentType::Persistent2,
            storage_capacity_gib: 1200,
            per_unit_storage_throughput: Some(250),
            file_system_type_version: LUSTRE_VERSION.into(),
            tags: t,
        })
        .await
        .unwrap();
    assert_eq!((fs.id.as_str(), fs.state()), ("fs-0a", ResourceState::Creating));
    assert_eq!(fs.per_unit_storage_throughput, Some(250));
    let body = replay.of("CreateFileSystem")[0].json();
    assert_eq!(body["ClientRequestToken"], "op-1file_system");
    assert_eq!(body["FileSystemType"], "LUSTRE");
    assert_eq!(body["StorageType"], "SSD");
    assert_eq!(body["StorageCapacity"], 1200);
    assert_eq!(body["SubnetIds"], json!(["subnet-a"]));
    assert_eq!(body["SecurityGroupIds"], json!(["sg-cluster"]));
    assert_eq!(body["FileSystemTypeVersion"], "2.15");
    assert_eq!(
        body["LustreConfiguration"],
        json!({ "DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250 })
    );
    let sent: Vec<(String, String)> = body["Tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["Key"].as_str().unwrap().to_string(), t["Value"].as_str().unwrap().to_string()))
        .collect();
    assert!(sent.contains(&("instantstart:fsx".into(), "ckpt".into())), "{sent:?}");
    assert!(sent.contains(&("instantstart:managed-by".into(), "instantstart".into())), "{sent:?}");
}

#[tokio::test]
async fn lustre_file_systems_are_listed_over_pages_and_read_with_their_failure() {
    let replay = Replay::new(|r| match (r.operation().as_str(), r.json()["NextToken"].as_str()) {
        ("DescribeFileSystems", None) if r.json()["FileSystemIds"].is_array() => Canned {
            status: 400,
            ..Canned::json(
                json!({ "__type": "FileSystemNotFound", "Message": "File system 'fs-0gone' does not exist." }),
            )
        },
        ("DescribeFileSystems", None) => Canned::json(json!({
            "FileSystems": [fsx_json("fs-0a", "LUSTRE", "AVAILABLE", &[]), fsx_json("fs-0w", "WINDOWS", "AVAILABLE", &[])],
            "NextToken": "page2" })),
        ("DescribeFileSystems", Some("page2")) => {
            Canned::json(json!({ "FileSystems": [fsx_json("fs-0b", "LUSTRE", "FAILED", &[])] }))
        }
        _ => unexpected(r),
    });
    let p = replay.provider();
    let all = p.list_lustre_file_systems("us-east-1").await.unwrap();
    let ids: Vec<&str> = all.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["fs-0a", "fs-0b"], "other file system types are left out, every page is read");
    assert_eq!(all[0].mount_name.as_deref(), Some("abcdefgh"));
    assert_eq!(all[0].dns_name.as_deref(), Some("fs-0a.fsx.us-east-1.amazonaws.com"));
    assert_eq!(all[1].state(), ResourceState::Failed { reason: "the subnet ran out of addresses".into() });
    assert!(is_owned(&all[0].tags, "demo"));
    assert_eq!(p.describe_lustre_file_system("us-east-1", "fs-0gone").await.unwrap(), None);
    assert_eq!(replay.of("DescribeFileSystems")[2].json()["FileSystemIds"], json!(["fs-0gone"]));
}

#[tokio::test]
async fn delete_lustre_file_system_skips_the_final_backup_and_maps_not_found() {
    let replay = Replay::new(|r| match r.json()["FileSystemId"].as_str() {
        Some("fs-0a") => Canned::json(json!({ "FileSystemId": "fs-0a", "Lifecycle": "DELETING" })),
        Some(_) => Canned {
            status: 400,
            ..Canned::json(json!({ "__type": "FileSystemNotFound", "Message": "File system does not exist." }))
        },
        None => unexpected(r),
    });
    let p = replay.provider();
    p.delete_lustre_file_system("us-east-1", "fs-0a", "op-2file_system").await.unwrap();
    let body = replay.of("DeleteFileSystem")[0].json();
    assert_eq!(
        body,
        json!({ "FileSystemId": "fs-0a", "ClientRequestToken": "op-2file_system",
                "LustreConfiguration": { "SkipFinalBackup": true } })
    );
    let e = p.delete_lustre_file_system("us-east-1", "fs-0gone", "t").await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound);
}

// ---------------------------------------------------------------- Amazon Managed Service for Prometheus

const WS: &str = "ws-0123abcd-4567-89ab-cdef-0123456789ab";

fn amp_summary(id: &str, status: &str, owner: Option<&str>) -> Value {
    json!({ "workspaceId": id, "alias": "instantstart-demo", "arn": format!("arn:aws:aps:us-east-1:123456789012:workspace/{id}"),
            "status": { "statusCode": status }, "createdAt": 1_700_000_000.0,
            "tags": owner.map(|c| json!(tags(c))).unwrap_or(json!({})) })
}

fn amp_not_found() -> Canned {
    Canned {
        status: 404,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("x-amzn-errortype".into(), "ResourceNotFoundException".into()),
        ],
        body: json!({ "message": "Workspace not found.", "resourceId": "ws-gone", "resourceType": "Workspace" })
            .to_string(),
    }
}

#[tokio::test]
async fn create_prometheus_workspace_sends_the_alias_token_and_tags() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        "POST /workspaces" => Canned {
            status: 202,
            ..Canned::json(
                json!({ "workspaceId": WS, "arn": format!("arn:aws:aps:us-east-1:123456789012:workspace/{WS}"),
                "status": { "statusCode": "CREATING" }, "tags": tags("demo") }),
            )
        },
        _ => unexpected(r),
    });
    let p = replay.provider();
    let w = p
        .create_prometheus_workspace(&CreatePrometheusWorkspace {
            region: "us-east-1".into(),
            alias: prometheus_alias("demo"),
            client_token: amp_client_token("op-1:prometheus_workspace"),
            tags: tags("demo"),
        })
        .await
        .unwrap();
    assert_eq!((w.id.as_str(), w.state()), (WS, ResourceState::Creating));
    assert!(is_owned(&w.tags, "demo"), "{w:?}");
    let body = replay.of("POST /workspaces")[0].json();
    assert_eq!(body["alias"], "instantstart-demo");
    assert_eq!(body["clientToken"], "op-1:prometheus_workspace");
    assert_eq!(body["tags"], json!(tags("demo")), "the ownership tags are set by the create itself");
}

#[tokio::test]
async fn prometheus_workspaces_are_listed_by_alias_over_pages_and_read() {
    let replay = Replay::new(|r| {
        let (op, query) = (r.operation(), r.uri.split_once('?').map(|(_, q)| q.to_string()).unwrap_or_default());
        match op.as_str() {
            "GET /workspaces" if !query.contains("nextToken") => Canned::json(json!({
                "workspaces": [amp_summary(WS, "ACTIVE", Some("demo"))], "nextToken": "page2" })),
            "GET /workspaces" => {
                Canned::json(json!({ "workspaces": [amp_summary("ws-other", "CREATION_FAILED", None)] }))
            }
            o if o == format!("GET /workspaces/{WS}") => Canned::json(json!({ "workspace": {
                "workspaceId": WS, "alias": "instantstart-demo", "arn": format!("arn:aws:aps:us-east-1:123456789012:workspace/{WS}"),
                "status": { "statusCode": "ACTIVE" }, "createdAt": 1_700_000_000.0, "tags": tags("demo"),
                "prometheusEndpoint": format!("https://aps-workspaces.us-east-1.amazonaws.com/workspaces/{WS}/") } })),
            "GET /workspaces/ws-gone" => amp_not_found(),
            _ => unexpected(r),
        }
    });
    let p = replay.provider();
    let all = p.list_prometheus_workspaces("us-east-1", "instantstart-demo").await.unwrap();
    let ids: Vec<&str> = all.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(ids, [WS, "ws-other"], "every page is read");
    assert!(is_owned(&all[0].tags, "demo") && !is_owned(&all[1].tags, "demo"));
    assert!(matches!(all[1].state(), ResourceState::Failed { .. }));
    let lists = replay.of("GET /workspaces");
    assert!(lists[0].uri.contains("alias=instantstart-demo"), "{}", lists[0].uri);
    assert!(lists[1].uri.contains("nextToken=page2"), "{}", lists[1].uri);
    let one = p.describe_prometheus_workspace("us-east-1", WS).await.unwrap().expect("described");
    assert_eq!(one.endpoint("us-east-1"), format!("https://aps-workspaces.us-east-1.amazonaws.com/workspaces/{WS}/"));
    assert_eq!(p.describe_prometheus_workspace("us-east-1", "ws-gone").await.unwrap(), None);
}

#[tokio::test]
async fn delete_prometheus_workspace_sends_its_token_and_maps_not_found() {
    let replay = Replay::new(|r| match r.operation().as_str() {
        o if o == format!("DELETE /workspaces/{WS}") => Canned { status: 202, headers: vec![], body: String::new() },
        "DELETE /workspaces/ws-gone" => amp_not_found(),
        _ => unexpected(r),
    });
    let p = replay.provider();
    p.delete_prometheus_workspace("us-east-1", WS, "op-2:prometheus_workspace").await.unwrap();
    let sent = &replay.of(&format!("DELETE /workspaces/{WS}"))[0];
    assert!(sent.uri.contains("clientToken=op-2%3Aprometheus_workspace"), "{}", sent.uri);
    let e = p.delete_prometheus_workspace("us-east-1", "ws-gone", "t").await.unwrap_err();
    assert_eq!(e.kind, ProviderErrorKind::NotFound);
}

//! Simulated worlds built through the provider traits alone (no engine, no store), for the
//! adapter tests that drive a simulated cluster with real clients (`crates/k8s`'s kube-rs
//! adapter, `crates/aws`'s AMP query): what the create pipeline would have left, made directly.

use crate::REGION;
use instantstart_core::provider::*;
use instantstart_core::spec::*;
use instantstart_core::subnet::plan_new_vpc;
use instantstart_sim::{SimCloud, SimConfig, timings};
use serde_json::json;
use std::time::Duration;

fn adv(s: &SimCloud, secs: f64) {
    s.advance(Duration::from_secs_f64(secs));
}

/// A simulated account (speed 1, seed 11) with an Active EKS cluster `demo` in [`REGION`] (the
/// KubeRay, KEDA and Prometheus charts deployed) and, unless `nodes` is 0, HyperPod cluster
/// `demo-hp` with `nodes` × ml.g5.2xlarge (one GPU each) registered to it as Ready Nodes.
pub async fn gpu_cluster(nodes: u32) -> SimCloud {
    let s = SimCloud::new(SimConfig::with_speed(1.0).seed(11)).expect("sim");
    let tags = ownership_tags("demo", "op-1");
    let azs = vec![format!("{REGION}a"), format!("{REGION}b")];
    let network = s
        .create_network(&CreateNetwork {
            region: REGION.into(),
            name: "demo-vpc".into(),
            cidr: "10.0.0.0/16".parse().unwrap(),
            subnets: plan_new_vpc("10.0.0.0/16".parse().unwrap(), &azs).unwrap(),
            tags: tags.clone(),
        })
        .await
        .unwrap();
    let role = |name: &str, service: &str| CreateIamRole {
        name: name.into(),
        trust_policy: json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]}),
        managed_policies: vec![],
        inline_policies: vec![],
        tags: tags.clone(),
    };
    let eks_role = s.create_role(&role("demo-eks-role", "eks.amazonaws.com")).await.unwrap();
    s.create_eks_cluster(&CreateEksCluster {
        region: REGION.into(),
        name: "demo".into(),
        version: "1.33".into(),
        role_arn: eks_role.arn,
        subnet_ids: network.subnets.iter().filter(|x| !x.public).map(|x| x.id.clone()).collect(),
        client_request_token: "t-1".into(),
        tags: tags.clone(),
        public_access_cidrs: vec![],
    })
    .await
    .unwrap();
    adv(&s, timings::EKS_CREATE);
    // The charts create-cluster installs (`chart:kuberay-operator`, `chart:keda`,
    // `chart:prometheus`): the simulator serves RayJob and ScaledObject only while their release
    // is deployed, and a ScaledObject's Prometheus trigger answers only while Prometheus is.
    for chart in [KUBERAY_OPERATOR, KEDA, PROMETHEUS] {
        s.install_or_upgrade(&KubeTarget::new(REGION, "demo"), &chart.spec_for(REGION)).await.unwrap();
    }
    adv(&s, timings::HELM_RELEASE);
    if nodes == 0 {
        return s;
    }
    let eks = s.describe_eks_cluster(REGION, "demo").await.unwrap().unwrap();
    // The execution role as the create pipeline makes it (the managed instance policy and the
    // documented EKS-node statement: without it the simulated nodes stay NotReady), and a
    // lifecycle script it can read (a `sagemaker-*` bucket).
    let exec = s
        .create_role(&CreateIamRole {
            managed_policies: vec![instantstart_core::workflow::create_cluster::HYPERPOD_INSTANCE_POLICY.into()],
            inline_policies: vec![(
                instantstart_core::workflow::create_cluster::HYPERPOD_EKS_NODE_POLICY.into(),
                instantstart_core::workflow::create_cluster::hyperpod_eks_node_policy(),
            )],
            ..role("demo-exec-role", "sagemaker.amazonaws.com")
        })
        .await
        .unwrap();
    s.seed_bucket(&CreateBucket { region: REGION.into(), name: "sagemaker-demo-scripts".into(), tags: Tags::new() })
        .unwrap();
    s.put_object(&PutObject {
        bucket: "sagemaker-demo-scripts".into(),
        key: "lifecycle/on_create.sh".into(),
        body: instantstart_core::lifecycle::ON_CREATE_SH.as_bytes().to_vec(),
        content_type: "text/x-shellscript".into(),
    })
    .await
    .unwrap();
    let subnet = s
        .create_subnet(&CreateSubnet {
            region: REGION.into(),
            vpc_id: network.vpc.id.clone(),
            name: "demo-compute-a".into(),
            cidr: "10.0.16.0/20".parse().unwrap(),
            availability_zone: format!("{REGION}a"),
            tags: tags.clone(),
        })
        .await
        .unwrap();
    s.create_hyperpod_cluster(&CreateHyperPodCluster {
        region: REGION.into(),
        name: "demo-hp".into(),
        eks_cluster_arn: eks.arn,
        node_recovery: NodeRecovery::Automatic,
        instance_groups: vec![HyperPodInstanceGroupRequest {
            spec: InstanceGroupSpec {
                name: "gpu".into(),
                instance_type: "ml.g5.2xlarge".into(),
                count: nodes,
                availability_zone: format!("{REGION}a"),
                subnet_id: None,
                capacity: CapacitySpec::OnDemand,
                interface_mode: InterfaceMode::Standard,
                ebs_volume_gb: 500,
                deep_health_checks: DeepHealthChecks::default(),
                lifecycle_script: Some(LifecycleScript {
                    source_s3_uri: "s3://sagemaker-demo-scripts/lifecycle".into(),
                    on_create: "on_create.sh".into(),
                }),
            },
            subnet_id: subnet.id,
            security_group_ids: vec![network.security_group_id.clone().unwrap()],
            execution_role_arn: exec.arn,
            threads_per_core: None,
        }],
        tags,
    })
    .await
    .unwrap();
    adv(&s, timings::HYPERPOD_CREATE);
    s
}

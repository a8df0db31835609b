//! Behaviour tests of the simulated world through the provider traits. Most run at speed 1 and
//! move time with [`SimCloud::advance`], so every state they assert is reached exactly.
//!
//! By subject, one module each; this module holds the helpers more than one of them uses.

use crate::{FaultMode, SimCloud, SimConfig, SimError, SimFaults, timings};
use futures::StreamExt;
use instantstart_core::provider::*;
use instantstart_core::spec::*;
use instantstart_core::subnet::{PlannedSubnet, SubnetRole, plan_new_vpc};
use serde_json::{Value, json};
use std::time::Duration;

mod capacity;
mod charts;
mod eks;
mod events;
mod faults;
mod hyperpod;
mod iam_s3;
mod kube;
mod lifecycle;
mod mlflow;
mod network;
mod pod_identity;
mod training;

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

fn job(name: &str, secs: u32) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default",
            "annotations": {crate::DURATION_ANNOTATION: secs.to_string()}},
           "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"app": name}}, "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "dl", "image": "amazon/aws-cli:2"}]}}}})
}

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

/// Installs a pinned chart in `demo` as the create-cluster pipeline does, and lets it settle.
async fn install_chart(s: &SimCloud, chart: &PinnedChart) {
    s.install_or_upgrade(&target(), &chart.spec_for(REGION)).await.expect("helm install");
    adv(s, timings::HELM_RELEASE);
}

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

//! Workloads of the simulated Kubernetes clusters: the pods Deployments, Jobs and PyTorchJobs
//! run (derived from the workload object and time, never stored), the Nodes HyperPod instances
//! register, a small scheduler (node selector, accelerator requests), and the statuses the
//! controllers would write.
//!
//! # Missing identities ([`Blockers`])
//!
//! - A pod mounting a claim bound to a Mountpoint S3 volume (`s3.csi.aws.com`) while the
//!   `aws-mountpoint-s3-csi-driver` add-on's service account `kube-system/s3-csi-driver-sa`
//!   has no working EKS Pod Identity (or its role's policies do not name the bucket) stays
//!   `ContainerCreating` with a `FailedMount` message: the v2 driver and its Mountpoint pods are
//!   not `hostNetwork`, so the instance profile is out of reach (`sagemaker-hyperpod-eks-prerequisites`:
//!   "Only Pods with hostNetwork = true have access to the Amazon EC2 Instance Metadata Service
//!   (IMDS) by default. Use the Amazon EKS Pod identity or IRSA"; Mountpoint `docs/CONFIGURATION.md`).
//! - A pod mounting a claim bound to an FSx for Lustre volume (`fsx.csi.aws.com`) stays
//!   `ContainerCreating` with a `FailedMount` message until the `aws-fsx-csi-driver` add-on is
//!   active and the file system of the volume handle is `AVAILABLE` (`crate::fsx`).
//! - A pod of InstantStart's that names a ServiceAccount that does not exist (e.g. tiered
//!   checkpointing's while the feature is off) is never started, the message as the API
//!   server's admission gives it.
//! - While the HyperPod training operator add-on is installed without its Pod Identity, the
//!   pods of a `HyperPodPyTorchJob` are never started (Pending, `PodScheduled=False`, reason
//!   `SchedulingGated`, the message naming the missing identity), and the job's status says why.

use crate::base::{stable_hash, uuid_from};
use crate::ec2_specs::instance_type_info;
use crate::hyperpod::nodes::nodes as hyperpod_nodes;
use crate::timings;
use crate::world::World;
use crate::world::{KubeRec, KubeWorld, Restart};
use ipnet::Ipv4Net;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a missing identity blocks in one cluster, computed with its Nodes ([`nodes`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Blockers {
    /// `namespace/claim` of claims bound to a Mountpoint S3 or FSx for Lustre volume that cannot
    /// be mounted, and why.
    pub mounts: BTreeMap<String, String>,
    /// Why the HyperPod training operator cannot run `HyperPodPyTorchJob`s.
    pub training_operator: Option<String>,
    /// `namespace/name` of the ServiceAccounts that exist.
    pub service_accounts: std::collections::BTreeSet<String>,
    /// Jobs under Kueue by the key of their object: admitted at (`None`: held, with why)
    /// ([`super::kueue`]).
    pub kueue: BTreeMap<String, (Option<f64>, String)>,
}

impl Blockers {
    fn of(w: &World, kw: &KubeWorld, now: f64) -> Blockers {
        use instantstart_core::workflow::create_cluster::{S3_CSI_ADDON, S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT};
        use instantstart_core::workflow::features::{
            TRAINING_OPERATOR_ADDON, TRAINING_OPERATOR_NAMESPACE, TRAINING_OPERATOR_POLICY,
            TRAINING_OPERATOR_SERVICE_ACCOUNT,
        };
        use instantstart_core::workflow::fsx::{FSX_CSI_ADDON, FSX_CSI_DRIVER};
        let service_accounts = kw
            .objects
            .values()
            .map(|r| &r.object)
            .filter(|o| super::objects::str_at(o, "/kind") == Some("ServiceAccount"))
            .map(|o| {
                format!(
                    "{}/{}",
                    super::objects::str_at(o, "/metadata/namespace").unwrap_or("default"),
                    super::objects::str_at(o, "/metadata/name").unwrap_or_default()
                )
            })
            .collect();
        let kueue = super::kueue::admissions(w, kw, now);
        let kueue = kueue.jobs.keys().filter_map(|k| Some((k.clone(), kueue.hold(k)?))).collect();
        let mut b = Blockers { service_accounts, kueue, ..Blockers::default() };
        let Some(c) = w.eks.values().find(|c| c.arn == kw.eks_arn) else { return b };
        let installed = |addon: &str| c.addons.get(addon).is_some_and(|a| a.life.exists(now) && !a.life.is_deleting());
        if installed(TRAINING_OPERATOR_ADDON) {
            b.training_operator = crate::eks::pod_identity_problem(
                w,
                c,
                TRAINING_OPERATOR_NAMESPACE,
                TRAINING_OPERATOR_SERVICE_ACCOUNT,
                Some(TRAINING_OPERATOR_POLICY),
                now,
            )
            .map(|p| {
                format!(
                    "the HyperPod training operator has no AWS credentials (EKS Pod Identity of {TRAINING_OPERATOR_NAMESPACE}/{TRAINING_OPERATOR_SERVICE_ACCOUNT}): {p}"
                )
            });
        }
        if installed(S3_CSI_ADDON) {
            let problem = crate::eks::pod_identity_problem(w, c, S3_CSI_NAMESPACE, S3_CSI_SERVICE_ACCOUNT, None, now);
            let role = c
                .pod_identity
                .values()
                .find(|a| a.namespace == S3_CSI_NAMESPACE && a.service_account == S3_CSI_SERVICE_ACCOUNT)
                .and_then(|a| w.role_by_arn(&a.role_arn));
            for r in kw.objects.values() {
                let o = &r.object;
                if super::objects::str_at(o, "/kind") != Some("PersistentVolumeClaim") {
                    continue;
                }
                let ns = super::objects::str_at(o, "/metadata/namespace").unwrap_or("default");
                let claim = super::objects::str_at(o, "/metadata/name").unwrap_or_default();
                let Some(pv) =
                    super::objects::bound_volume(kw, ns, claim, super::objects::str_at(o, "/spec/volumeName"))
                else {
                    continue;
                };
                if super::objects::str_at(pv, "/spec/csi/driver") != Some("s3.csi.aws.com") {
                    continue;
                }
                let bucket = super::objects::str_at(pv, "/spec/csi/volumeAttributes/bucketName").unwrap_or_default();
                let why = match (&problem, role) {
                    (Some(p), _) => Some(format!(
                        "no AWS credentials for the driver's service account {S3_CSI_NAMESPACE}/{S3_CSI_SERVICE_ACCOUNT}: {p}"
                    )),
                    // The driver lists the bucket with the role's credentials; S3 evaluates
                    // `s3:ResourceAccount` against the bucket's owner.
                    (None, Some(role))
                        if !role.allows_in(
                            "s3:ListBucket",
                            &format!("arn:aws:s3:::{bucket}"),
                            crate::policy::RequestContext::s3_resource_account(
                                w.buckets.get(bucket).and_then(|b| b.owner.as_deref()).unwrap_or(&w.account),
                            ),
                        ) =>
                    {
                        Some(format!("AccessDenied: role {} may not s3:ListBucket on {bucket}", role.name))
                    }
                    _ => None,
                };
                if let Some(why) = why {
                    b.mounts.insert(
                        format!("{ns}/{claim}"),
                        format!(
                            "MountVolume.SetUp failed for volume \"{}\" : rpc error: code = Internal desc = Could not mount \"{bucket}\": {why}",
                            super::objects::str_at(pv, "/metadata/name").unwrap_or_default()
                        ),
                    );
                }
            }
        }
        // FSx for Lustre: the CSI driver's add-on must run and the file system be AVAILABLE.
        let fsx_addon = c.addons.get(FSX_CSI_ADDON).is_some_and(|a| a.life.phase(now) == crate::base::Phase::Active);
        for r in kw.objects.values() {
            let o = &r.object;
            if super::objects::str_at(o, "/kind") != Some("PersistentVolumeClaim") {
                continue;
            }
            let ns = super::objects::str_at(o, "/metadata/namespace").unwrap_or("default");
            let claim = super::objects::str_at(o, "/metadata/name").unwrap_or_default();
            let Some(pv) = super::objects::bound_volume(kw, ns, claim, super::objects::str_at(o, "/spec/volumeName"))
            else {
                continue;
            };
            if super::objects::str_at(pv, "/spec/csi/driver") != Some(FSX_CSI_DRIVER) {
                continue;
            }
            let id = super::objects::str_at(pv, "/spec/csi/volumeHandle").unwrap_or_default();
            if let Some(why) = crate::fsx::mount_problem(w, &c.region, id, fsx_addon, now) {
                b.mounts.insert(
                    format!("{ns}/{claim}"),
                    format!(
                        "MountVolume.SetUp failed for volume \"{}\" : rpc error: code = Internal desc = {why}",
                        super::objects::str_at(pv, "/metadata/name").unwrap_or_default()
                    ),
                );
            }
        }
        b
    }

    /// Why the controller cannot create `pod`: InstantStart's pods that name a ServiceAccount
    /// that does not exist are refused by the API server's ServiceAccount admission
    /// ("error looking up service account …: serviceaccount … not found",
    /// https://kubernetes.io/docs/reference/access-authn-authz/service-accounts-admin/); every
    /// namespace has `default`.
    fn missing_service_account(&self, pod: &PodView) -> Option<String> {
        let sa = pod.spec.get("serviceAccountName").and_then(Value::as_str)?;
        let ours = pod.labels.get("app.kubernetes.io/managed-by").and_then(Value::as_str) == Some("instantstart");
        if !ours || sa == "default" || self.service_accounts.contains(&format!("{}/{sa}", pod.namespace)) {
            return None;
        }
        Some(format!(
            "pods \"{}\" is forbidden: error looking up service account {}/{sa}: serviceaccount \"{sa}\" not found",
            pod.name, pod.namespace
        ))
    }

    /// The FailedMount message of the first S3 or FSx claim `pod` mounts that cannot be mounted.
    fn mount_failure(&self, pod: &PodView) -> Option<&String> {
        pod.spec.get("volumes").and_then(Value::as_array)?.iter().find_map(|v| {
            let claim = v.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str)?;
            self.mounts.get(&format!("{}/{claim}", pod.namespace))
        })
    }
}

/// Annotation (on a Job, PyTorchJob, bare Pod or pod template) setting how many simulated
/// seconds the workload's containers run before they complete.
pub const DURATION_ANNOTATION: &str = "sim.instantstart.io/duration-seconds";
/// The same as an environment variable of the first container of a pod template (for
/// workloads whose manifest only takes environment variables, e.g. a submitted training job).
pub const DURATION_ENV: &str = "SIM_DURATION_SECONDS";

/// Accelerator resource names a pod may request.
const ACCELERATOR_RESOURCES: &[&str] = &["nvidia.com/gpu", "aws.amazon.com/neuron", "aws.amazon.com/neurondevice"];

/// A Node registered by a Running HyperPod instance.
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo {
    pub name: String,
    pub instance_id: String,
    pub availability_zone: String,
    /// When the node turns Ready; `f64::INFINITY` for a node that never does ([`not_ready`](Self::not_ready)).
    pub ready_at: f64,
    /// When the node registered (its creation time).
    pub registered_at: f64,
    /// Why the node stays NotReady (the kubelet's condition message), if it does.
    pub not_ready: Option<String>,
    pub labels: Map<String, Value>,
    pub cpu: u32,
    pub memory_gib: u32,
    /// Accelerator resource name and count.
    pub accelerators: Option<(&'static str, u32)>,
    pub subnet: Option<Ipv4Net>,
    pub kubelet_version: String,
    /// What missing identities block in the node's cluster (the same for every node).
    pub blockers: Arc<Blockers>,
    /// The instance was consolidated away by Karpenter at this time: the Node is no longer
    /// listed, but pods that ran on it keep their history.
    pub gone_at: Option<f64>,
    /// `spec.taints`: HyperPod's `NoSchedule` taint while the node is not `Schedulable`
    /// (deep health check in progress, failed check); the scheduler places no pod on a tainted
    /// node.
    pub taints: Vec<Value>,
}

/// HyperPod's node health label (developer guide `sagemaker-hyperpod-eks-resiliency-node-labels`).
pub(crate) const HEALTH_LABEL: &str = "sagemaker.amazonaws.com/node-health-status";
/// HyperPod's deep health check progress label.
pub(crate) const DEEP_HEALTH_CHECK_LABEL: &str = "sagemaker.amazonaws.com/deep-health-check-status";

pub(crate) fn accelerator_resource(accelerator: &str) -> Option<&'static str> {
    if accelerator.starts_with("nvidia") {
        Some("nvidia.com/gpu")
    } else if accelerator.starts_with("aws-trainium") || accelerator.starts_with("aws-inferentia") {
        Some("aws.amazon.com/neuron")
    } else {
        None
    }
}

/// What the node's role must allow for the VPC CNI (`aws-node`, which runs with the node's
/// role: no IRSA is configured) to give pods addresses, and for kubelet to pull the EKS and
/// add-on images from ECR — the statement AWS documents for the HyperPod execution role of
/// EKS-orchestrated clusters (SageMaker developer guide `sagemaker-hyperpod-prerequisites-iam`,
/// "IAM role for SageMaker HyperPod" → Amazon EKS), each action on its resource.
const EKS_NODE_CNI: &[(&str, &str)] = &[
    ("ec2:AssignPrivateIpAddresses", "*"),
    ("ec2:AttachNetworkInterface", "*"),
    ("ec2:CreateNetworkInterface", "*"),
    ("ec2:CreateNetworkInterfacePermission", "*"),
    ("ec2:DeleteNetworkInterface", "*"),
    ("ec2:DeleteNetworkInterfacePermission", "*"),
    ("ec2:DescribeInstances", "*"),
    ("ec2:DescribeInstanceTypes", "*"),
    ("ec2:DescribeNetworkInterfaces", "*"),
    ("ec2:DescribeTags", "*"),
    ("ec2:DescribeVpcs", "*"),
    ("ec2:DescribeDhcpOptions", "*"),
    ("ec2:DescribeSubnets", "*"),
    ("ec2:DescribeSecurityGroups", "*"),
    ("ec2:DetachNetworkInterface", "*"),
    ("ec2:ModifyNetworkInterfaceAttribute", "*"),
    ("ec2:UnassignPrivateIpAddresses", "*"),
    ("ec2:CreateTags", "arn:aws:ec2:*:*:network-interface/*"),
];
const EKS_NODE_ECR: &[(&str, &str)] = &[
    ("ecr:BatchCheckLayerAvailability", "*"),
    ("ecr:BatchGetImage", "*"),
    ("ecr:GetAuthorizationToken", "*"),
    ("ecr:GetDownloadUrlForLayer", "*"),
];

/// Why a node with `role_arn` stays NotReady: the role (as it is now — fixing the role lets
/// `aws-node` and kubelet recover) lacks the documented EKS-node actions.
fn not_ready_reason(w: &World, role_arn: &str) -> Option<String> {
    let Some(role) = w.role_by_arn(role_arn) else {
        return Some(format!("container runtime network not ready: the node's role {role_arn} does not exist"));
    };
    let cni = role.missing(EKS_NODE_CNI);
    if !cni.is_empty() {
        return Some(format!(
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized (aws-node: UnauthorizedOperation: {} is not authorized to perform: {})",
            role.arn,
            cni.join(", ")
        ));
    }
    let ecr = role.missing(EKS_NODE_ECR);
    if !ecr.is_empty() {
        return Some(format!(
            "failed to pull the pause and aws-node images from ECR: {} is not authorized to perform: {}",
            role.arn,
            ecr.join(", ")
        ));
    }
    // Without eks-auth:AssumeRoleForPodIdentity only pods using Pod Identity fail; the node
    // itself turns Ready.
    None
}

/// The Nodes of the EKS cluster behind `kw`: Running instances of its HyperPod clusters.
pub(crate) fn nodes(w: &World, kw: &KubeWorld, now: f64) -> Vec<NodeInfo> {
    let version = w.eks.values().find(|c| c.arn == kw.eks_arn).map(|c| c.version.clone()).unwrap_or_default();
    let mut out = Vec::new();
    let blockers = Arc::new(Blockers::of(w, kw, now));
    for h in w.hyperpod.values().filter(|h| h.eks_arn == kw.eks_arn) {
        let mut reasons: BTreeMap<&str, Option<String>> = BTreeMap::new();
        for g in &h.groups {
            // Groups recorded before roles were kept (empty role) are not judged.
            let reason = if g.execution_role.is_empty() { None } else { not_ready_reason(w, &g.execution_role) };
            reasons.insert(g.name.as_str(), reason);
        }
        let present = hyperpod_nodes(h, now).into_iter().filter(|n| n.node_health.is_some()).map(|n| (n, None));
        let departed = crate::hyperpod::nodes::departed(h, now).into_iter().map(|(n, gone)| (n, Some(gone)));
        for (n, gone_at) in present.chain(departed) {
            let not_ready = reasons.get(n.group.as_str()).cloned().flatten();
            // A node under an on-demand check (or failed one) registered when it first booted.
            let registered_at = if n.status == "Running" {
                n.running_at
            } else {
                (n.launched_at + timings::HYPERPOD_NODE_BOOT).min(n.running_at)
            };
            let info = instance_type_info(&n.instance_type);
            let name = format!("hyperpod-{}", n.instance_id);
            let mut labels = Map::new();
            for (k, v) in [
                ("kubernetes.io/hostname", name.as_str()),
                ("kubernetes.io/os", "linux"),
                ("kubernetes.io/arch", "amd64"),
                ("node.kubernetes.io/instance-type", n.instance_type.as_str()),
                ("topology.kubernetes.io/region", h.region.as_str()),
                ("topology.kubernetes.io/zone", n.availability_zone.as_str()),
                ("sagemaker.amazonaws.com/compute-type", "hyperpod"),
                ("sagemaker.amazonaws.com/cluster-name", h.name.as_str()),
                ("sagemaker.amazonaws.com/instance-group-name", n.group.as_str()),
            ] {
                labels.insert(k.into(), Value::String(v.into()));
            }
            // A consolidated (departed) node was Schedulable while it served.
            let (health, deep_check) = n.node_health.unwrap_or(("Schedulable", None));
            labels.insert(HEALTH_LABEL.into(), json!(health));
            if let Some(check) = deep_check {
                labels.insert(DEEP_HEALTH_CHECK_LABEL.into(), json!(check));
            }
            // HyperPod keeps pods off a node that is not Schedulable with a taint of the same key.
            let taints = if health == "Schedulable" {
                vec![]
            } else {
                vec![json!({ "key": HEALTH_LABEL, "value": health, "effect": "NoSchedule" })]
            };
            let accelerators = info.and_then(|i| accelerator_resource(&i.accelerator).map(|r| (r, i.accelerators)));
            out.push(NodeInfo {
                name,
                instance_id: n.instance_id.clone(),
                availability_zone: n.availability_zone.clone(),
                ready_at: if not_ready.is_some() { f64::INFINITY } else { registered_at },
                registered_at,
                not_ready,
                labels,
                cpu: info.map_or(2, |i| i.vcpus),
                memory_gib: info.map_or(4, |i| i.memory_gib),
                accelerators,
                subnet: w.subnets.get(&n.subnet_id).map(|s| s.cidr),
                kubelet_version: format!("v{version}.3-eks-{:07x}", stable_hash(&[&version]) as u32 & 0x0fff_ffff),
                blockers: blockers.clone(),
                gone_at,
                taints,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// An address in `subnet` chosen by `seed` (skipping the 4 addresses AWS reserves at the start).
fn address_in(subnet: Option<Ipv4Net>, seed: u64) -> Option<String> {
    let net = subnet?;
    let hosts = 1u64 << (32 - u32::from(net.prefix_len()));
    if hosts <= 8 {
        return None;
    }
    let offset = 4 + seed % (hosts - 5);
    Some(std::net::Ipv4Addr::from(u32::from(net.network()).wrapping_add(offset as u32)).to_string())
}

pub(crate) fn node_object(w: &World, n: &NodeInfo) -> Value {
    let mut capacity = Map::new();
    capacity.insert("cpu".into(), json!(n.cpu.to_string()));
    capacity.insert("memory".into(), json!(format!("{}Gi", n.memory_gib)));
    capacity.insert("pods".into(), json!("110"));
    if let Some((res, count)) = n.accelerators {
        capacity.insert(res.into(), json!(count.to_string()));
        if res == "aws.amazon.com/neuron" {
            // The Neuron device plugin also advertises cores: 8 per Trainium2 device, 2 per
            // Trainium and Inferentia2 device (AWS Neuron docs, "Neuron hardware").
            let per_device = if n
                .labels
                .get("node.kubernetes.io/instance-type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.contains("trn2"))
            {
                8
            } else {
                2
            };
            capacity.insert("aws.amazon.com/neuroncore".into(), json!((count * per_device).to_string()));
        }
    }
    let ip = address_in(n.subnet, stable_hash(&[&n.instance_id])).unwrap_or_else(|| "10.0.0.10".into());
    let ready = match &n.not_ready {
        None => {
            json!({ "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastTransitionTime": w.k8s_time(n.registered_at) })
        }
        Some(why) => {
            json!({ "type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": why, "lastTransitionTime": w.k8s_time(n.registered_at) })
        }
    };
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": n.name,
            "uid": uuid_from(stable_hash(&["node", &n.instance_id]), stable_hash(&["node-b", &n.instance_id])),
            "creationTimestamp": w.k8s_time(n.registered_at),
            "labels": n.labels,
        },
        "spec": if n.taints.is_empty() {
            json!({ "providerID": format!("aws:///{}/{}", n.availability_zone, n.instance_id) })
        } else {
            json!({ "providerID": format!("aws:///{}/{}", n.availability_zone, n.instance_id), "taints": n.taints })
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [ready],
            "addresses": [{ "type": "InternalIP", "address": ip }, { "type": "Hostname", "address": n.name }],
            "nodeInfo": { "kubeletVersion": n.kubelet_version, "osImage": "Amazon Linux 2023", "architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.27" },
        },
    })
}

/// Kubernetes' random-suffix alphabet (no vowels, no confusable digits).
fn suffix(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = seed;
    (0..len)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// A pod: derived from a workload, or a Pod object applied directly.
#[derive(Debug, Clone)]
pub(crate) struct PodView {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub labels: Map<String, Value>,
    pub annotations: Map<String, Value>,
    /// (apiVersion, kind, name, uid) of the controller.
    pub owner: Option<(String, String, String, String)>,
    /// Key of the object the pod comes from, and its slot (for restarts on delete).
    pub source: String,
    pub slot: Option<String>,
    pub spec: Value,
    /// When the pod was created (simulated time).
    pub start: f64,
    /// Run time of a batch container; `None` for long-running servers.
    pub batch_run: Option<f64>,
    pub fails: Option<String>,
    pub world_size: u32,
    pub rank: u32,
    /// What a simulated training or download pod runs ([`super::training`]).
    pub run: Option<super::training::PodRun>,
}

impl PodView {
    pub fn image(&self) -> &str {
        self.spec.pointer("/containers/0/image").and_then(Value::as_str).unwrap_or("unknown")
    }

    pub fn container(&self) -> &str {
        self.spec.pointer("/containers/0/name").and_then(Value::as_str).unwrap_or("main")
    }

    pub fn port(&self) -> u64 {
        self.spec.pointer("/containers/0/ports/0/containerPort").and_then(Value::as_u64).unwrap_or(8080)
    }
}

pub(crate) fn str_map(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

fn duration(annotations: &[&Map<String, Value>], default: f64) -> f64 {
    duration_or_env(annotations, None, default)
}

/// [`DURATION_ANNOTATION`] from the first map that has it, else [`DURATION_ENV`] of the first
/// container of `spec`, else `default`.
fn duration_or_env(annotations: &[&Map<String, Value>], spec: Option<&Value>, default: f64) -> f64 {
    let number = |v: &Value| v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()));
    let env = || {
        spec?
            .pointer("/containers/0/env")
            .and_then(Value::as_array)?
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(DURATION_ENV))
            .and_then(|e| e.get("value"))
            .and_then(number)
    };
    annotations
        .iter()
        .find_map(|a| a.get(DURATION_ANNOTATION).and_then(number))
        .or_else(env)
        .filter(|d| d.is_finite() && *d >= 0.0)
        .unwrap_or(default)
}

fn slot_start(rec: &KubeRec, slot: &str) -> (u32, f64) {
    match rec.restarts.get(slot) {
        Some(Restart { epoch, since }) => (*epoch, since.max(rec.spec_changed_at)),
        None => (0, rec.spec_changed_at),
    }
}

/// The pods a stored object runs at `now` (a Pod object is its own pod).
pub(crate) fn pods_of(key: &str, rec: &KubeRec, now: f64) -> Vec<PodView> {
    if let Some((deployment, operator_rec)) = super::serving::operator_deployment(rec) {
        // The HyperPod inference operator runs the endpoint as a Deployment.
        let mut pods = pods_of(key, &KubeRec { object: deployment, ..operator_rec }, now);
        for p in &mut pods {
            p.source = key.to_string();
        }
        return pods;
    }
    let o = &rec.object;
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or_default();
    let api = o.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    let namespace = o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default").to_string();
    let uid = o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let own_annotations = str_map(o.pointer("/metadata/annotations"));
    let owner = Some((api.to_string(), kind.to_string(), name.clone(), uid.clone()));
    let change = rec.spec_changed_at.to_bits().to_string();
    let pod = |pod_name: String,
               slot: String,
               template: &Value,
               extra: &[(&str, String)],
               owner: Option<(String, String, String, String)>,
               batch_default: Option<f64>,
               world_size: u32,
               rank: u32| {
        let (epoch, start) = slot_start(rec, &slot);
        let mut labels = str_map(template.pointer("/metadata/labels"));
        for (k, v) in extra {
            labels.insert((*k).into(), Value::String(v.clone()));
        }
        let annotations = str_map(template.pointer("/metadata/annotations"));
        let batch_run =
            batch_default.map(|d| duration_or_env(&[&annotations, &own_annotations], template.get("spec"), d));
        PodView {
            uid: uuid_from(stable_hash(&[&uid, &slot, &epoch.to_string(), &change]), stable_hash(&[&pod_name])),
            name: pod_name,
            namespace: namespace.clone(),
            labels,
            annotations,
            owner,
            source: key.to_string(),
            slot: Some(slot),
            spec: template.get("spec").cloned().unwrap_or_else(|| json!({})),
            start,
            batch_run,
            fails: rec.fails.clone(),
            world_size,
            rank,
            run: None,
        }
    };
    match (api, kind) {
        ("apps/v1", "Deployment") => {
            let spec_replicas = o.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
            let replicas = super::serving::replicas_at(rec, spec_replicas, now);
            let template = o.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
            let rs_hash = suffix(stable_hash(&[&uid, &change]), 10);
            let rs_name = format!("{name}-{rs_hash}");
            let rs_owner = Some((
                "apps/v1".to_string(),
                "ReplicaSet".to_string(),
                rs_name.clone(),
                uuid_from(stable_hash(&[&rs_name, &uid]), 0),
            ));
            (0..replicas)
                .map(|i| {
                    let slot = i.to_string();
                    let (epoch, _) = slot_start(rec, &slot);
                    // A slot scaled away and back gets a new pod (name and uid).
                    let born = super::serving::slot_born(rec, spec_replicas, i, now);
                    let incarnation =
                        if born > rec.spec_changed_at { born.to_bits().to_string() } else { String::new() };
                    let pod_name = format!(
                        "{rs_name}-{}",
                        suffix(stable_hash(&[&rs_hash, &slot, &epoch.to_string(), &incarnation]), 5)
                    );
                    let mut p = pod(
                        pod_name,
                        slot,
                        &template,
                        &[("pod-template-hash", rs_hash.clone())],
                        rs_owner.clone(),
                        None,
                        replicas,
                        i,
                    );
                    if born > p.start {
                        p.start = born;
                        p.uid = uuid_from(stable_hash(&[&p.uid, &incarnation]), stable_hash(&[&p.name]));
                    }
                    super::serving::relabel(rec, &mut p);
                    p
                })
                .collect()
        }
        ("batch/v1", "Job") => {
            if o.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true) {
                return Vec::new();
            }
            let parallelism = o.pointer("/spec/parallelism").and_then(Value::as_u64).unwrap_or(1) as u32;
            let completions = o.pointer("/spec/completions").and_then(Value::as_u64).unwrap_or(1) as u32;
            let n = parallelism.min(completions.max(1)).max(1);
            let template = o.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
            let extra = [
                ("batch.kubernetes.io/job-name", name.clone()),
                ("job-name", name.clone()),
                ("batch.kubernetes.io/controller-uid", uid.clone()),
                ("controller-uid", uid.clone()),
            ];
            (0..n)
                .map(|i| {
                    let slot = i.to_string();
                    let (epoch, _) = slot_start(rec, &slot);
                    let pod_name =
                        format!("{name}-{}", suffix(stable_hash(&[&uid, &slot, &epoch.to_string(), &change]), 5));
                    let mut p =
                        pod(pod_name, slot, &template, &extra, owner.clone(), Some(timings::JOB_DEFAULT_RUN), n, i);
                    super::training::apply_download(o, &mut p);
                    p
                })
                .collect()
        }
        ("kubeflow.org/v1", "PyTorchJob") => {
            let specs = str_map(o.pointer("/spec/pytorchReplicaSpecs"));
            let mut types: Vec<(&String, &Value)> = specs.iter().collect();
            // Master first, then the others by name.
            types.sort_by_key(|(t, _)| (t.as_str() != "Master", t.to_string()));
            let world_size: u32 =
                types.iter().map(|(_, s)| s.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32).sum();
            let mut out = Vec::new();
            let mut rank = 0;
            for (rtype, rspec) in types {
                let replicas = rspec.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
                let template = rspec.get("template").cloned().unwrap_or_else(|| json!({}));
                let lower = rtype.to_lowercase();
                for i in 0..replicas {
                    let extra = [
                        ("training.kubeflow.org/job-name", name.clone()),
                        ("training.kubeflow.org/operator-name", "pytorchjob-controller".to_string()),
                        ("training.kubeflow.org/replica-type", lower.clone()),
                        ("training.kubeflow.org/replica-index", i.to_string()),
                    ];
                    out.push(pod(
                        format!("{name}-{lower}-{i}"),
                        format!("{lower}-{i}"),
                        &template,
                        &extra,
                        owner.clone(),
                        Some(timings::PYTORCHJOB_DEFAULT_RUN),
                        world_size,
                        rank,
                    ));
                    rank += 1;
                }
            }
            out
        }
        (super::training::HP_API, super::training::HP_KIND) => {
            let plan = super::training::hyperpod_plan(rec);
            let specs = o.pointer("/spec/replicaSpecs").and_then(Value::as_array).cloned().unwrap_or_default();
            let replicas_of = |s: &Value| s.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
            let world_size: u32 = specs.iter().map(replicas_of).sum();
            let mut out = Vec::new();
            let mut rank = 0;
            for s in &specs {
                let spec_name = s.get("name").and_then(Value::as_str).unwrap_or("worker").to_string();
                let template = s.get("template").cloned().unwrap_or_else(|| json!({}));
                for i in 0..replicas_of(s) {
                    let extra = [
                        ("sagemaker.amazonaws.com/job-name", name.clone()),
                        ("sagemaker.amazonaws.com/replica-spec", spec_name.clone()),
                        ("sagemaker.amazonaws.com/replica-index", i.to_string()),
                        ("sagemaker.amazonaws.com/rank", rank.to_string()),
                    ];
                    let mut p = pod(
                        format!("{name}-{spec_name}-{i}"),
                        format!("{spec_name}-{i}"),
                        &template,
                        &extra,
                        owner.clone(),
                        Some(timings::PYTORCHJOB_DEFAULT_RUN),
                        world_size,
                        rank,
                    );
                    super::training::apply_hyperpod_plan(&plan, &name, &mut p);
                    out.push(p);
                    rank += 1;
                }
            }
            out
        }
        (super::training::RAY_API, super::training::RAY_KIND) => {
            use super::training::Role;
            let cluster = super::training::ray_cluster_name(&name, &uid);
            let cluster_owner = Some((
                "ray.io/v1".to_string(),
                "RayCluster".to_string(),
                cluster.clone(),
                uuid_from(stable_hash(&[&cluster, &uid]), 1),
            ));
            let spec = o.pointer("/spec/rayClusterSpec").cloned().unwrap_or_else(|| json!({}));
            let groups = spec.get("workerGroupSpecs").and_then(Value::as_array).cloned().unwrap_or_default();
            let replicas_of = |g: &Value| g.get("replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
            let world_size = 1 + groups.iter().map(replicas_of).sum::<u32>();
            let labels = |node_type: &str, group: &str| {
                [
                    ("ray.io/cluster", cluster.clone()),
                    ("ray.io/node-type", node_type.to_string()),
                    ("ray.io/group", group.to_string()),
                    ("ray.io/is-ray-node", "yes".to_string()),
                ]
            };
            let head_template = spec.pointer("/headGroupSpec/template").cloned().unwrap_or_else(|| json!({}));
            let head_name = format!("{cluster}-head-{}", suffix(stable_hash(&[&cluster, "head"]), 5));
            let mut head = pod(
                head_name,
                "head".to_string(),
                &head_template,
                &labels("head", "headgroup"),
                cluster_owner.clone(),
                Some(timings::PYTORCHJOB_DEFAULT_RUN),
                world_size,
                0,
            );
            super::training::apply_ray(&name, Role::RayHead, &mut head);
            let mut out = vec![head];
            let mut rank = 1;
            for g in &groups {
                let group = g.get("groupName").and_then(Value::as_str).unwrap_or("workers").to_string();
                let template = g.get("template").cloned().unwrap_or_else(|| json!({}));
                for i in 0..replicas_of(g) {
                    let slot = format!("{group}-{i}");
                    let pod_name = format!("{cluster}-{group}-worker-{}", suffix(stable_hash(&[&cluster, &slot]), 5));
                    let mut p = pod(
                        pod_name,
                        slot,
                        &template,
                        &labels("worker", &group),
                        cluster_owner.clone(),
                        Some(timings::PYTORCHJOB_DEFAULT_RUN),
                        world_size,
                        rank,
                    );
                    super::training::apply_ray(&name, Role::RayWorker, &mut p);
                    out.push(p);
                    rank += 1;
                }
            }
            out
        }
        ("v1", "Pod") => {
            let restart = o.pointer("/spec/restartPolicy").and_then(Value::as_str).unwrap_or("Always");
            let batch_run = (restart != "Always").then(|| duration(&[&own_annotations], timings::JOB_DEFAULT_RUN));
            vec![PodView {
                name,
                namespace,
                uid,
                labels: str_map(o.pointer("/metadata/labels")),
                annotations: own_annotations.clone(),
                owner: None,
                source: key.to_string(),
                slot: None,
                spec: o.get("spec").cloned().unwrap_or_else(|| json!({})),
                start: rec.spec_changed_at,
                batch_run,
                fails: rec.fails.clone(),
                world_size: 1,
                rank: 0,
                run: None,
            }]
        }
        _ => Vec::new(),
    }
}

/// Every pod of the cluster, optionally of one namespace.
pub(crate) fn all_pods(kw: &KubeWorld, namespace: Option<&str>, now: f64) -> Vec<PodView> {
    kw.objects
        .iter()
        .filter(|(_, r)| {
            namespace.is_none_or(|ns| r.object.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns))
        })
        .flat_map(|(k, r)| pods_of(k, r, now))
        .collect()
}

/// The pods DaemonSets run (optionally of one namespace): one on every Node present now that
/// the pod template's `nodeSelector` matches (the DaemonSet controller's placement; tolerations
/// are not modelled), named `{daemonset}-{5 chars}` and pinned to its node through
/// `kubernetes.io/hostname`, as the controller pins it with node affinity.
pub(crate) fn daemon_pods(kw: &KubeWorld, nodes: &[NodeInfo], namespace: Option<&str>) -> Vec<PodView> {
    let mut out = Vec::new();
    for (key, rec) in &kw.objects {
        let o = &rec.object;
        if o.get("apiVersion").and_then(Value::as_str) != Some("apps/v1")
            || o.get("kind").and_then(Value::as_str) != Some("DaemonSet")
        {
            continue;
        }
        let ns = o.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default");
        if namespace.is_some_and(|want| want != ns) {
            continue;
        }
        let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let uid = o.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
        let template = o.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
        let selector = str_map(template.pointer("/spec/nodeSelector"));
        let change = rec.spec_changed_at.to_bits().to_string();
        for node in nodes.iter().filter(|n| n.gone_at.is_none()) {
            if !selector.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
                continue;
            }
            let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
            if let Some(obj) = spec.as_object_mut() {
                let mut pin = selector.clone();
                pin.insert("kubernetes.io/hostname".into(), json!(node.name));
                obj.insert("nodeSelector".into(), Value::Object(pin));
            }
            let mut labels = str_map(template.pointer("/metadata/labels"));
            labels.insert("controller-revision-hash".into(), json!(suffix(stable_hash(&[uid, &change]), 10)));
            out.push(PodView {
                name: format!("{name}-{}", suffix(stable_hash(&[uid, &node.name]), 5)),
                namespace: ns.to_string(),
                uid: uuid_from(stable_hash(&[uid, &node.name, &change]), stable_hash(&[name, &node.name])),
                labels,
                annotations: str_map(template.pointer("/metadata/annotations")),
                owner: Some(("apps/v1".into(), "DaemonSet".into(), name.to_string(), uid.to_string())),
                source: key.clone(),
                slot: Some(node.name.clone()),
                spec,
                start: rec.spec_changed_at.max(node.registered_at),
                batch_run: None,
                fails: rec.fails.clone(),
                world_size: 1,
                rank: 0,
                run: None,
            });
        }
    }
    out
}

/// What happens to a pod at some moment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PodState {
    /// Pending, Running, Succeeded or Failed.
    pub phase: &'static str,
    pub node: Option<String>,
    pub scheduled_at: Option<f64>,
    /// Why the scheduler cannot place the pod.
    pub unschedulable: Option<String>,
    /// When the (first) container started running.
    pub started_at: Option<f64>,
    pub ready: bool,
    pub finished_at: Option<f64>,
    pub restarts: u32,
    /// Reason the container is waiting (ContainerCreating, CrashLoopBackOff).
    pub waiting: Option<&'static str>,
    /// Why it waits, when something blocks it (a `FailedMount` message).
    pub waiting_message: Option<String>,
    /// Why the pod is held back before it can start (`PodScheduled=False`, reason
    /// `SchedulingGated`), and the reason its job reports.
    pub gated: Option<Gate>,
    pub pod_ip: Option<String>,
    pub host_ip: Option<String>,
}

/// Accelerators a pod asks for: (resource, count).
pub(crate) fn accelerator_request(spec: &Value) -> Option<(String, u32)> {
    let mut need: BTreeMap<String, u32> = BTreeMap::new();
    for c in spec.get("containers").and_then(Value::as_array).into_iter().flatten() {
        for res in ACCELERATOR_RESOURCES {
            let get = |section: &str| {
                c.pointer(&format!("/resources/{section}"))
                    .and_then(|m| m.get(*res))
                    .and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|s| s.parse().ok())))
                    .unwrap_or(0) as u32
            };
            let n = get("limits").max(get("requests"));
            if n > 0 {
                // Neuron devices and cores are both served by neuron nodes.
                let key = if res.starts_with("aws.amazon.com/neuron") { "aws.amazon.com/neuron" } else { res };
                *need.entry(key.to_string()).or_insert(0) += n;
            }
        }
    }
    need.into_iter().next()
}

/// Places the pod: on a Node ready by now that matches its node selector and has the
/// accelerators it requests, at the time both the pod and such a node existed.
fn schedule(pod: &PodView, nodes: &[NodeInfo], now: f64) -> Result<(usize, f64), String> {
    // A consolidated node served only the pods placed before it went.
    let usable = |n: &NodeInfo| n.taints.is_empty() && n.gone_at.is_none_or(|gone| gone > pod.start.max(n.ready_at));
    if nodes.iter().all(|n| n.ready_at > now || !usable(n)) {
        return Err("no nodes available to schedule pods".into());
    }
    let ready: Vec<(usize, &NodeInfo)> =
        nodes.iter().enumerate().filter(|(_, n)| n.ready_at <= now && usable(n)).collect();
    let selector = str_map(pod.spec.get("nodeSelector"));
    let need = accelerator_request(&pod.spec);
    let fits = |n: &NodeInfo| {
        selector.iter().all(|(k, v)| n.labels.get(k) == Some(v))
            && need
                .as_ref()
                .is_none_or(|(res, count)| n.accelerators.is_some_and(|(r, have)| r == res.as_str() && have >= *count))
    };
    let eligible: Vec<(usize, &NodeInfo)> = ready.iter().copied().filter(|(_, n)| fits(n)).collect();
    let Some(earliest) = eligible.iter().map(|(_, n)| n.ready_at).reduce(f64::min) else {
        let total = ready.len();
        let why = match &need {
            Some((res, _)) => format!("{total} Insufficient {res}"),
            None => format!("{total} node(s) didn't match Pod's node affinity/selector"),
        };
        return Err(format!(
            "0/{total} nodes are available: {why}. preemption: 0/{total} nodes are available: {total} No preemption victims found for incoming pod."
        ));
    };
    let at = pod.start.max(earliest);
    let candidates: Vec<usize> = eligible.iter().filter(|(_, n)| n.ready_at <= at).map(|(i, _)| *i).collect();
    let pick = candidates[(stable_hash(&[&pod.namespace, &pod.name]) % candidates.len() as u64) as usize];
    Ok((pick, at))
}

/// What holds a pod back: the reason its controller reports on the job, and the message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Gate {
    /// `MissingPodIdentity` (an operator without its credentials) or `FailedCreate` (the API
    /// server's admission refused the pod).
    pub reason: &'static str,
    pub message: String,
}

pub(crate) fn pod_state(pod: &PodView, nodes: &[NodeInfo], now: f64) -> PodState {
    let pending = |unschedulable: Option<String>| PodState {
        phase: "Pending",
        node: None,
        scheduled_at: None,
        unschedulable,
        started_at: None,
        ready: false,
        finished_at: None,
        restarts: 0,
        waiting: None,
        waiting_message: None,
        gated: None,
        pod_ip: None,
        host_ip: None,
    };
    if now < pod.start {
        return pending(None);
    }
    let blockers = nodes.first().map(|n| n.blockers.clone()).unwrap_or_default();
    if let Some(why) = &blockers.training_operator
        && pod.owner.as_ref().is_some_and(|(_, kind, ..)| kind == "HyperPodPyTorchJob")
    {
        let mut st = pending(None);
        st.gated = Some(Gate { reason: "MissingPodIdentity", message: why.clone() });
        return st;
    }
    // Kueue holds the pods of a job it has not admitted; an admitted job's pods start then.
    let shifted;
    let pod = match blockers.kueue.get(&pod.source) {
        Some((None, why)) => {
            let mut st = pending(None);
            st.gated = Some(Gate { reason: "Queued", message: why.clone() });
            return st;
        }
        Some((Some(at), _)) if *at > pod.start => {
            shifted = PodView { start: *at, ..pod.clone() };
            if now < shifted.start {
                return pending(None);
            }
            &shifted
        }
        _ => pod,
    };
    if !nodes.is_empty()
        && let Some(why) = blockers.missing_service_account(pod)
    {
        let mut st = pending(None);
        st.gated = Some(Gate { reason: "FailedCreate", message: why });
        return st;
    }
    let (idx, at) = match schedule(pod, nodes, now) {
        Ok(x) => x,
        Err(why) => return pending(Some(why)),
    };
    let node = &nodes[idx];
    let mut st = pending(None);
    st.node = Some(node.name.clone());
    st.scheduled_at = Some(at);
    st.host_ip = address_in(node.subnet, stable_hash(&[&node.instance_id]));
    st.pod_ip = address_in(node.subnet, stable_hash(&[&pod.uid]));
    let started = at + timings::POD_START;
    if let Some(why) = blockers.mount_failure(pod) {
        // The kubelet retries the mount forever; the container never starts.
        st.waiting = Some("ContainerCreating");
        st.waiting_message = Some(format!("FailedMount: {why}"));
        return st;
    }
    if now < started {
        st.waiting = Some("ContainerCreating");
        return st;
    }
    st.started_at = Some(started);
    st.phase = "Running";
    match pod.batch_run {
        Some(run) => {
            let (end, failed) = super::training::batch_end(pod, started + run);
            if now >= end {
                st.phase = if failed { "Failed" } else { "Succeeded" };
                st.finished_at = Some(end);
            } else {
                st.ready = true;
            }
        }
        None if pod.fails.is_some() => {
            st.waiting = Some("CrashLoopBackOff");
            st.restarts = ((now - started) / 30.0) as u32 + 1;
        }
        None => st.ready = now >= started + timings::POD_READY,
    }
    st
}

pub(crate) fn pod_object(w: &World, pod: &PodView, st: &PodState) -> Value {
    let mut spec = pod.spec.clone();
    if let (Some(node), Some(obj)) = (&st.node, spec.as_object_mut()) {
        obj.insert("nodeName".into(), json!(node));
    }
    let mut metadata = json!({
        "name": pod.name,
        "namespace": pod.namespace,
        "uid": pod.uid,
        "creationTimestamp": w.k8s_time(pod.start),
        "labels": pod.labels,
    });
    if !pod.annotations.is_empty() {
        metadata["annotations"] = json!(pod.annotations);
    }
    if let Some((api, kind, name, uid)) = &pod.owner {
        metadata["ownerReferences"] = json!([{ "apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true }]);
    }
    let t = |x: f64| w.k8s_time(x);
    let cond = |ty: &str, ok: bool| json!({ "type": ty, "status": if ok { "True" } else { "False" } });
    let mut conditions = vec![];
    match (&st.unschedulable, &st.gated) {
        (Some(why), _) => conditions
            .push(json!({ "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": why })),
        (None, Some(gate)) => conditions.push(
            json!({ "type": "PodScheduled", "status": "False", "reason": "SchedulingGated", "message": gate.message }),
        ),
        (None, None) => {
            conditions.push(cond("PodScheduled", st.scheduled_at.is_some()));
            conditions.push(cond("Initialized", st.scheduled_at.is_some()));
            conditions.push(cond("ContainersReady", st.ready));
            conditions.push(cond("Ready", st.ready));
        }
    }
    let state = if let Some(end) = st.finished_at {
        let failed = st.phase == "Failed";
        json!({ "terminated": {
            "exitCode": if failed { 1 } else { 0 },
            "reason": if failed { "Error" } else { "Completed" },
            "startedAt": st.started_at.map(t),
            "finishedAt": t(end),
        }})
    } else if let Some(reason) = st.waiting {
        let mut waiting = json!({ "reason": reason });
        if let (Some(why), "CrashLoopBackOff") = (&pod.fails, reason) {
            waiting["message"] = json!(format!("back-off restarting failed container {}: {why}", pod.container()));
        }
        if let Some(why) = &st.waiting_message {
            waiting["message"] = json!(why);
        }
        json!({ "waiting": waiting })
    } else if let Some(s) = st.started_at {
        json!({ "running": { "startedAt": t(s) } })
    } else {
        json!({ "waiting": { "reason": "Pending" } })
    };
    let mut status = json!({
        "phase": st.phase,
        "conditions": conditions,
        "containerStatuses": [{
            "name": pod.container(),
            "image": pod.image(),
            "ready": st.ready,
            "started": st.started_at.is_some() && st.finished_at.is_none(),
            "restartCount": st.restarts,
            "state": state,
        }],
    });
    if let Some(at) = st.scheduled_at {
        status["startTime"] = json!(t(at));
    }
    if let Some(ip) = &st.host_ip {
        status["hostIP"] = json!(ip);
    }
    if let Some(ip) = &st.pod_ip {
        status["podIP"] = json!(ip);
    }
    json!({ "apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status })
}

/// Counts of a workload's pods.
#[derive(Default)]
struct Tally {
    total: u32,
    ready: u32,
    active: u32,
    succeeded: u32,
    failed: u32,
    first_start: Option<f64>,
    last_end: Option<f64>,
}

fn tally(pods: &[PodView], nodes: &[NodeInfo], now: f64, filter: impl Fn(&PodView) -> bool) -> Tally {
    let mut t = Tally::default();
    for p in pods.iter().filter(|p| filter(p)) {
        let st = pod_state(p, nodes, now);
        t.total += 1;
        t.ready += u32::from(st.ready);
        match st.phase {
            "Succeeded" => t.succeeded += 1,
            "Failed" => t.failed += 1,
            _ => t.active += 1,
        }
        if let Some(s) = st.scheduled_at {
            t.first_start = Some(t.first_start.map_or(s, |x: f64| x.min(s)));
        }
        if let Some(e) = st.finished_at {
            t.last_end = Some(t.last_end.map_or(e, |x: f64| x.max(e)));
        }
    }
    t
}

fn put_nonzero(status: &mut Map<String, Value>, key: &str, n: u32) {
    if n > 0 {
        status.insert(key.into(), json!(n));
    }
}

/// The status a controller would write for a workload object, if it is one.
pub(crate) fn workload_status(w: &World, key: &str, rec: &KubeRec, nodes: &[NodeInfo], now: f64) -> Option<Value> {
    let o = &rec.object;
    let kind = o.get("kind").and_then(Value::as_str)?;
    let api = o.get("apiVersion").and_then(Value::as_str)?;
    let pods = pods_of(key, rec, now);
    let t = |x: f64| w.k8s_time(x);
    match (api, kind) {
        ("apps/v1", "Deployment") => {
            let c = tally(&pods, nodes, now, |_| true);
            let mut s = Map::new();
            s.insert("observedGeneration".into(), o.pointer("/metadata/generation").cloned().unwrap_or(json!(1)));
            put_nonzero(&mut s, "replicas", c.total);
            put_nonzero(&mut s, "updatedReplicas", c.total);
            put_nonzero(&mut s, "readyReplicas", c.ready);
            put_nonzero(&mut s, "availableReplicas", c.ready);
            put_nonzero(&mut s, "unavailableReplicas", c.total - c.ready);
            let available = c.ready == c.total;
            s.insert(
                "conditions".into(),
                json!([
                    { "type": "Available", "status": if available { "True" } else { "False" },
                      "reason": if available { "MinimumReplicasAvailable" } else { "MinimumReplicasUnavailable" },
                      "message": if available { "Deployment has minimum availability." } else { "Deployment does not have minimum availability." } },
                    { "type": "Progressing", "status": "True",
                      "reason": if available { "NewReplicaSetAvailable" } else { "ReplicaSetUpdated" },
                      "lastUpdateTime": t(rec.spec_changed_at) },
                ]),
            );
            // A rollout that makes no progress for progressDeadlineSeconds (default 600) is
            // reported as ProgressDeadlineExceeded, as the Deployment controller does.
            let deadline = o.pointer("/spec/progressDeadlineSeconds").and_then(Value::as_f64).unwrap_or(600.0);
            if !available && now >= rec.spec_changed_at + deadline {
                s.insert(
                    "conditions".into(),
                    json!([
                        { "type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
                          "message": "Deployment does not have minimum availability." },
                        { "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                          "message": format!("ReplicaSet has timed out progressing: {}", rec.fails.clone().unwrap_or_else(|| format!("{}/{} replicas available", c.ready, c.total))),
                          "lastUpdateTime": t(rec.spec_changed_at + deadline) },
                    ]),
                );
            }
            Some(Value::Object(s))
        }
        ("batch/v1", "Job") => {
            let c = tally(&pods, nodes, now, |_| true);
            let mut s = Map::new();
            if let Some(start) = c.first_start {
                s.insert("startTime".into(), json!(t(start)));
            }
            put_nonzero(&mut s, "active", c.active);
            s.insert("ready".into(), json!(c.ready));
            put_nonzero(&mut s, "succeeded", c.succeeded);
            put_nonzero(&mut s, "failed", c.failed);
            if c.total > 0 && c.failed > 0 && c.active == 0 {
                s.insert(
                    "conditions".into(),
                    json!([{ "type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit", "lastTransitionTime": c.last_end.map(t) }]),
                );
            } else if c.total > 0 && c.succeeded == c.total {
                if let Some(end) = c.last_end {
                    s.insert("completionTime".into(), json!(t(end)));
                }
                s.insert(
                    "conditions".into(),
                    json!([{ "type": "Complete", "status": "True", "lastTransitionTime": c.last_end.map(t) }]),
                );
            }
            Some(Value::Object(s))
        }
        ("kubeflow.org/v1", "PyTorchJob") => {
            let all = tally(&pods, nodes, now, |_| true);
            let mut replica_statuses = Map::new();
            let mut types: Vec<String> = pods
                .iter()
                .filter_map(|p| p.labels.get("training.kubeflow.org/replica-type")?.as_str().map(str::to_string))
                .collect();
            types.dedup();
            for ty in types {
                let c = tally(&pods, nodes, now, |p| {
                    p.labels.get("training.kubeflow.org/replica-type").and_then(Value::as_str) == Some(ty.as_str())
                });
                let mut r = Map::new();
                put_nonzero(&mut r, "active", c.active);
                put_nonzero(&mut r, "succeeded", c.succeeded);
                put_nonzero(&mut r, "failed", c.failed);
                let mut chars = ty.chars();
                let title: String = chars.next().map(|f| f.to_uppercase().chain(chars).collect()).unwrap_or_default();
                replica_statuses.insert(title, Value::Object(r));
            }
            let created = t(rec.spec_changed_at);
            let mut conditions = vec![
                json!({ "type": "Created", "status": "True", "reason": "PyTorchJobCreated", "lastTransitionTime": created }),
            ];
            let running = all.first_start.is_some() && all.ready > 0 && all.active > 0;
            if all.total > 0 && all.failed > 0 && all.active == 0 {
                conditions.push(json!({ "type": "Failed", "status": "True", "reason": "PyTorchJobFailed", "message": rec.fails.clone().unwrap_or_default(), "lastTransitionTime": all.last_end.map(t) }));
            } else if all.total > 0 && all.succeeded == all.total {
                conditions.push(json!({ "type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded", "lastTransitionTime": all.last_end.map(t) }));
            } else if running {
                conditions.push(json!({ "type": "Running", "status": "True", "reason": "PyTorchJobRunning" }));
            }
            let mut s = json!({ "conditions": conditions, "replicaStatuses": replica_statuses });
            if let Some(start) = all.first_start {
                s["startTime"] = json!(t(start));
            }
            if all.total > 0 && all.succeeded == all.total {
                s["completionTime"] = json!(all.last_end.map(t));
            }
            Some(s)
        }
        (super::serving::IEC_API, super::serving::IEC_KIND) => {
            let c = tally(&pods, nodes, now, |_| true);
            Some(super::serving::operator_status(w, rec, c.total, c.ready))
        }
        (super::training::HP_API, super::training::HP_KIND) => {
            Some(super::training::hyperpod_status(w, rec, &pods, nodes, now))
        }
        (super::training::RAY_API, super::training::RAY_KIND) => {
            Some(super::training::ray_status(w, rec, &pods, nodes, now))
        }
        _ => None,
    }
}

/// Restarts the pod in `slot` of the workload stored at `key` (what a controller does when one
/// of its pods is deleted): a new pod (new name where the controller names pods randomly)
/// starts from now.
pub(crate) fn restart_slot(kw: &mut KubeWorld, key: &str, slot: &str, now: f64) {
    if let Some(rec) = kw.objects.get_mut(key) {
        let epoch = rec.restarts.get(slot).map_or(0, |r| r.epoch) + 1;
        rec.restarts.insert(slot.to_string(), Restart { epoch, since: now });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_from_annotation_then_container_env_then_default() {
        let annotated: Map<String, Value> = [(DURATION_ANNOTATION.to_string(), json!("42"))].into_iter().collect();
        let none = Map::new();
        let spec = json!({ "containers": [{ "name": "c", "env": [{ "name": DURATION_ENV, "value": "900" }] }] });
        assert_eq!(duration_or_env(&[&none, &annotated], Some(&spec), 1.0), 42.0);
        assert_eq!(duration_or_env(&[&none], Some(&spec), 1.0), 900.0);
        assert_eq!(duration_or_env(&[&none], None, 1.0), 1.0);
        let bad = json!({ "containers": [{ "env": [{ "name": DURATION_ENV, "value": "-5" }] }] });
        assert_eq!(duration_or_env(&[&none], Some(&bad), 7.0), 7.0);
    }
}

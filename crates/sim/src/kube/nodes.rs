//! The Nodes of a simulated EKS cluster: one per Running HyperPod instance, Ready once the
//! node's role allows what the VPC CNI and kubelet need, with what missing identities block
//! in the cluster ([`blockers`]: mounts, the training operator's identity, ServiceAccounts,
//! Kueue's admissions), and the Node objects the API server lists.
//!
//! # Missing identities ([`blockers`])
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

use super::pod::{Blockers, DEEP_HEALTH_CHECK_LABEL, HEALTH_LABEL, NodeInfo, accelerator_resource, address_in};
use crate::base::{stable_hash, uuid_from};
use crate::ec2_specs::instance_type_info;
use crate::hyperpod::nodes::nodes as hyperpod_nodes;
use crate::timings;
use crate::world::{KubeWorld, World};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What missing identities block in the cluster behind `kw` at `now`.
pub(crate) fn blockers(w: &World, kw: &KubeWorld, now: f64) -> Blockers {
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
            let Some(pv) = super::objects::bound_volume(kw, ns, claim, super::objects::str_at(o, "/spec/volumeName"))
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
    let blockers = Arc::new(blockers(w, kw, now));
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
    super::scheduler::place(kw, &mut out, now);
    out
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

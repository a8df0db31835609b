//! GPU capacity and node health of one cluster, at a glance: per cluster and per instance group,
//! the accelerators (NVIDIA GPUs, Neuron devices, Neuron cores) total, allocated, free and
//! unavailable; every node with its health and the workloads that run on it.
//!
//! One read, no operation. It joins three sources:
//!
//! - the Kubernetes Nodes: allocatable `nvidia.com/gpu`, `aws.amazon.com/neuron`,
//!   `aws.amazon.com/neuroncore`; the instance group (`sagemaker.amazonaws.com/instance-group-name`)
//!   and instance type (`node.kubernetes.io/instance-type`) labels; the `Ready` condition,
//!   `spec.unschedulable` (cordon) and taints; and the labels HyperPod's health-monitoring agent
//!   and deep health checks write (`sagemaker.amazonaws.com/node-health-status`,
//!   `…/deep-health-check-status`, `…/fault-type`, `…/fault-reason`: SageMaker developer guide
//!   `sagemaker-hyperpod-eks-resiliency-node-labels`);
//! - the Pods of every namespace: the accelerators each running pod requests, on its node, and
//!   which workload it belongs to (InstantStart's `app.kubernetes.io/instance` and
//!   `app.kubernetes.io/component` labels, or its owner for foreign pods);
//! - HyperPod's `ListClusterNodes`: instances that have no Kubernetes Node yet (Pending, being
//!   updated, shutting down, failed) are shown too, with HyperPod's status.
//!
//! # Guarantees
//!
//! - **The numbers add up.** For every node, cluster and group: `total = allocated + free +
//!   unavailable` unless pods request more than a node has (then `free` and `unavailable` are 0
//!   and `allocated` says what the pods ask). `free` counts only nodes that take new work
//!   ([`NodeHealth::Healthy`]); what is not allocated on the others is `unavailable`.
//! - **Health is one word per node** ([`NodeHealth`]), decided by a fixed precedence from
//!   HyperPod's status, the health labels, the `Ready` condition and the cordon (see
//!   [`node_health`]); the raw label, taints and HyperPod status are in the view too.
//! - **Workload names stay in the caller's namespaces.** Allocation counts every pod, but a
//!   token bound to namespaces sees the workloads of those namespaces only (the others are
//!   counted in `other_pods`).
//! - Pure: [`build`] is a function of the three lists; [`get`] only reads them.

use crate::engine::EngineError;
use crate::kube_access::KubeAccess;
use crate::provider::{AwsCloud, ClusterNode, KubeApi, KubeObject, ListParams, ProviderError};
use crate::store::Store;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Extended resource of NVIDIA GPUs (the NVIDIA device plugin).
pub const RESOURCE_GPU: &str = "nvidia.com/gpu";
/// Extended resource of AWS Neuron devices (the Neuron device plugin).
pub const RESOURCE_NEURON_DEVICE: &str = "aws.amazon.com/neuron";
/// Extended resource of AWS Neuron cores (the Neuron device plugin).
pub const RESOURCE_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
/// Node label HyperPod's health-monitoring agent and deep health checks set.
pub const LABEL_NODE_HEALTH: &str = "sagemaker.amazonaws.com/node-health-status";
/// Node label with the progress of deep health checks (`InProgress`, `Passed`, `Failed`).
pub const LABEL_DEEP_HEALTH_CHECK: &str = "sagemaker.amazonaws.com/deep-health-check-status";
/// Node label with the high-level fault category of a failed check.
pub const LABEL_FAULT_TYPE: &str = "sagemaker.amazonaws.com/fault-type";
/// Node label with the detailed reason of a failed check.
pub const LABEL_FAULT_REASON: &str = "sagemaker.amazonaws.com/fault-reason";
/// Node label naming the HyperPod instance group.
pub const LABEL_INSTANCE_GROUP: &str = "sagemaker.amazonaws.com/instance-group-name";
/// Node label naming the instance type.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Pod labels naming the InstantStart object a pod belongs to and what it is (ours: spelled in
/// [`crate::labels`]).
pub use crate::labels::{LABEL_COMPONENT, LABEL_INSTANCE};

/// The health of one node, one word, for the picture and the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeHealth {
    /// Ready, `Schedulable` (or no health label), not cordoned: takes new work.
    Healthy,
    /// Deep health checks running (`Unschedulable`, `deep-health-check-status=InProgress`, or
    /// HyperPod's `DeepHealthCheckInProgress`).
    Checking,
    /// Cordoned by someone (`spec.unschedulable`) while otherwise healthy.
    Cordoned,
    /// No Kubernetes Node yet, or one going away: HyperPod's `Pending`, `SystemUpdating`,
    /// `ShuttingDown`.
    Provisioning,
    /// The kubelet does not post Ready.
    NotReady,
    /// `UnschedulablePendingReboot`: failed a check, waits for a reboot.
    PendingReboot,
    /// `UnschedulablePendingReplacement`: failed a check, waits for a replacement.
    PendingReplacement,
    /// HyperPod reports the instance `Failure`.
    Failed,
}

impl NodeHealth {
    /// Every value, in the order of [`node_health`]'s precedence (worst first).
    pub const ALL: [NodeHealth; 8] = [
        NodeHealth::Failed,
        NodeHealth::PendingReplacement,
        NodeHealth::PendingReboot,
        NodeHealth::NotReady,
        NodeHealth::Checking,
        NodeHealth::Provisioning,
        NodeHealth::Cordoned,
        NodeHealth::Healthy,
    ];

    /// The snake_case word the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeHealth::Healthy => "healthy",
            NodeHealth::Checking => "checking",
            NodeHealth::Cordoned => "cordoned",
            NodeHealth::Provisioning => "provisioning",
            NodeHealth::NotReady => "not_ready",
            NodeHealth::PendingReboot => "pending_reboot",
            NodeHealth::PendingReplacement => "pending_replacement",
            NodeHealth::Failed => "failed",
        }
    }
}

/// Counts of one accelerator resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AcceleratorCount {
    /// Allocatable on the nodes.
    pub total: u32,
    /// Requested by pods placed on the nodes and not finished.
    pub allocated: u32,
    /// Not allocated, on nodes that take new work.
    pub free: u32,
    /// Not allocated, on nodes that do not take new work (checking, failed, cordoned, …).
    pub unavailable: u32,
}

impl AcceleratorCount {
    fn of_node(total: u32, allocated: u32, takes_work: bool) -> Self {
        let rest = total.saturating_sub(allocated);
        let (free, unavailable) = if takes_work { (rest, 0) } else { (0, rest) };
        AcceleratorCount { total, allocated, free, unavailable }
    }

    fn add(&mut self, o: &AcceleratorCount) {
        self.total += o.total;
        self.allocated += o.allocated;
        self.free += o.free;
        self.unavailable += o.unavailable;
    }
}

/// The accelerators of a node, a group or a cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Accelerators {
    /// `nvidia.com/gpu`.
    pub gpus: AcceleratorCount,
    /// `aws.amazon.com/neuron` (Trainium/Inferentia devices).
    pub neuron_devices: AcceleratorCount,
    /// `aws.amazon.com/neuroncore`.
    pub neuron_cores: AcceleratorCount,
}

impl Accelerators {
    fn add(&mut self, o: &Accelerators) {
        self.gpus.add(&o.gpus);
        self.neuron_devices.add(&o.neuron_devices);
        self.neuron_cores.add(&o.neuron_cores);
    }
}

/// A Kubernetes taint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A workload with pods on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadOnNode {
    pub namespace: String,
    /// The job, endpoint or download name (InstantStart's `app.kubernetes.io/instance`), or
    /// the owner of a foreign pod (the pod itself when it has none).
    pub name: String,
    /// `training`, `inference`, `model-download`, `router`… for InstantStart's pods; the
    /// owner's kind (`HyperPodPyTorchJob`, `ReplicaSet`, …) or `Pod` for others.
    pub kind: String,
    /// Whether InstantStart created it.
    pub ours: bool,
    /// Its pods on this node.
    pub pods: u32,
    /// What those pods request.
    pub gpus: u32,
    pub neuron_devices: u32,
    pub neuron_cores: u32,
}

/// One node: a Kubernetes Node, a HyperPod instance, or both (joined by instance id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeCapacity {
    /// The Kubernetes Node name; `None` for an instance without a Node (yet).
    pub name: Option<String>,
    /// The EC2 instance id, when known.
    pub instance_id: Option<String>,
    pub instance_group: Option<String>,
    pub instance_type: Option<String>,
    pub health: NodeHealth,
    /// HyperPod's status of the instance (`ListClusterNodes`), when it is a HyperPod node.
    pub hyperpod_status: Option<String>,
    /// `sagemaker.amazonaws.com/node-health-status`.
    pub health_label: Option<String>,
    /// `sagemaker.amazonaws.com/deep-health-check-status`.
    pub deep_health_check: Option<String>,
    /// `sagemaker.amazonaws.com/fault-type` and `…/fault-reason`.
    pub fault_type: Option<String>,
    pub fault_reason: Option<String>,
    /// The kubelet's `Ready` condition (`None` without a Node).
    pub ready: Option<bool>,
    /// `spec.unschedulable`.
    pub cordoned: bool,
    pub taints: Vec<Taint>,
    pub accelerators: Accelerators,
    /// Workloads with pods on the node (in the caller's namespaces), by namespace and name.
    pub workloads: Vec<WorkloadOnNode>,
    /// Running pods on the node outside the caller's namespaces (counted, not named).
    pub other_pods: u32,
}

/// One instance group (HyperPod's label; nodes without one are in the cluster totals only).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupCapacity {
    pub name: String,
    /// The instance type of its nodes, when they agree.
    pub instance_type: Option<String>,
    pub nodes: u32,
    /// Nodes per health word (only the words that occur).
    pub health: BTreeMap<NodeHealth, u32>,
    pub accelerators: Accelerators,
}

/// GPU capacity and node health of a cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterCapacity {
    pub cluster: String,
    pub nodes: u32,
    /// Nodes per health word (only the words that occur).
    pub health: BTreeMap<NodeHealth, u32>,
    pub accelerators: Accelerators,
    /// GPUs requested by pods not placed on any node yet (waiting for capacity).
    pub pending_gpus: u32,
    /// Pods waiting for a node (phase `Pending` without a node).
    pub pending_pods: u32,
    pub instance_groups: Vec<GroupCapacity>,
    /// Every node, by instance group then name.
    pub node_list: Vec<NodeCapacity>,
    /// Why HyperPod's node list could not be read, if it could not (the Kubernetes part is
    /// still shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hyperpod_error: Option<String>,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// A whole-number Kubernetes quantity (`"8"`, `8`); extended resources are whole numbers.
fn quantity(v: Option<&Value>) -> u32 {
    match v {
        Some(Value::String(s)) => s.trim().parse::<u32>().unwrap_or(0),
        Some(Value::Number(n)) => n.as_u64().map_or(0, |n| n.min(u64::from(u32::MAX)) as u32),
        _ => 0,
    }
}

/// The EC2 instance id in a Node's name or `spec.providerID` (`hyperpod-i-0abc…`,
/// `aws:///us-west-2a/i-0abc…`, `aws:///usw2-az2/sagemaker/cluster/hyperpod-x-i-0abc…`).
pub fn instance_id_of(node: &Value) -> Option<String> {
    let candidates = [str_at(node, "/spec/providerID"), str_at(node, "/metadata/name")];
    candidates.into_iter().flatten().find_map(|s| {
        let last = s.rsplit('/').next()?;
        let at = last.rfind("i-")?;
        let id = &last[at..];
        (id.len() > 2 && id[2..].chars().all(|c| c.is_ascii_hexdigit())).then(|| id.to_string())
    })
}

/// The health word of a node, worst first: HyperPod `Failure` → failed; health label
/// `UnschedulablePendingReplacement` → pending_replacement, `UnschedulablePendingReboot` →
/// pending_reboot; a Node whose `Ready` is not `True` → not_ready; `Unschedulable`, a deep
/// health check `InProgress` or HyperPod `DeepHealthCheckInProgress` → checking; no Node (or
/// HyperPod `Pending`, `SystemUpdating`, `ShuttingDown`) → provisioning; cordoned → cordoned;
/// otherwise healthy.
pub fn node_health(
    hyperpod_status: Option<&str>,
    health_label: Option<&str>,
    deep_health_check: Option<&str>,
    ready: Option<bool>,
    cordoned: bool,
) -> NodeHealth {
    match (hyperpod_status, health_label) {
        (Some("Failure"), _) => NodeHealth::Failed,
        (_, Some("UnschedulablePendingReplacement")) => NodeHealth::PendingReplacement,
        (_, Some("UnschedulablePendingReboot")) => NodeHealth::PendingReboot,
        _ if ready == Some(false) => NodeHealth::NotReady,
        (Some("DeepHealthCheckInProgress"), _) | (_, Some("Unschedulable")) => NodeHealth::Checking,
        _ if deep_health_check == Some("InProgress") => NodeHealth::Checking,
        (Some("Pending" | "SystemUpdating" | "ShuttingDown"), _) => NodeHealth::Provisioning,
        _ if ready.is_none() => NodeHealth::Provisioning,
        _ if cordoned => NodeHealth::Cordoned,
        _ => NodeHealth::Healthy,
    }
}

/// What a pod requests of `resource`: the sum over its containers of `requests` (or `limits`,
/// which extended resources default their requests to).
fn pod_request(pod: &Value, resource: &str) -> u32 {
    let containers = pod.pointer("/spec/containers").and_then(Value::as_array);
    containers
        .into_iter()
        .flatten()
        .map(|c| {
            let r = c.pointer("/resources/requests").and_then(|r| r.get(resource));
            let l = c.pointer("/resources/limits").and_then(|l| l.get(resource));
            quantity(r.or(l))
        })
        .sum()
}

/// The workload a pod belongs to: `(name, kind, ours)`.
fn workload_of(pod: &Value) -> (String, String, bool) {
    let labels = pod.pointer("/metadata/labels");
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if label(crate::provider::LABEL_MANAGED_BY) == Some(crate::provider::MANAGED_BY)
        && let Some(instance) = label(LABEL_INSTANCE)
    {
        return (instance.to_string(), label(LABEL_COMPONENT).unwrap_or("workload").to_string(), true);
    }
    let owner = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array).and_then(|o| o.first());
    match owner {
        Some(o) => {
            (str_at(o, "/name").unwrap_or_default().to_string(), str_at(o, "/kind").unwrap_or("Pod").to_string(), false)
        }
        None => (str_at(pod, "/metadata/name").unwrap_or_default().to_string(), "Pod".to_string(), false),
    }
}

/// Builds the capacity view from the cluster's Nodes, Pods and HyperPod instances; the
/// workloads of pods in namespaces `visible` refuses are counted, not named.
pub fn build(
    cluster: &str,
    nodes: &[KubeObject],
    pods: &[KubeObject],
    hyperpod: &[ClusterNode],
    visible: impl Fn(&str) -> bool,
) -> ClusterCapacity {
    // Requests of placed, unfinished pods, per node name.
    #[derive(Default)]
    struct Use {
        gpus: u32,
        neuron_devices: u32,
        neuron_cores: u32,
        workloads: BTreeMap<(String, String), WorkloadOnNode>,
        other_pods: u32,
    }
    let mut used: BTreeMap<String, Use> = BTreeMap::new();
    let (mut pending_gpus, mut pending_pods) = (0, 0);
    for p in pods.iter().map(|p| &p.0) {
        let phase = str_at(p, "/status/phase").unwrap_or("Pending");
        if matches!(phase, "Succeeded" | "Failed") {
            continue;
        }
        let (gpus, devices, cores) = (
            pod_request(p, RESOURCE_GPU),
            pod_request(p, RESOURCE_NEURON_DEVICE),
            pod_request(p, RESOURCE_NEURON_CORE),
        );
        let Some(node) = str_at(p, "/spec/nodeName") else {
            pending_pods += 1;
            pending_gpus += gpus;
            continue;
        };
        let u = used.entry(node.to_string()).or_default();
        u.gpus += gpus;
        u.neuron_devices += devices;
        u.neuron_cores += cores;
        let namespace = str_at(p, "/metadata/namespace").unwrap_or("default");
        if !visible(namespace) {
            u.other_pods += 1;
            continue;
        }
        let (name, kind, ours) = workload_of(p);
        let w = u.workloads.entry((namespace.to_string(), name.clone())).or_insert_with(|| WorkloadOnNode {
            namespace: namespace.to_string(),
            name,
            kind,
            ours,
            pods: 0,
            gpus: 0,
            neuron_devices: 0,
            neuron_cores: 0,
        });
        w.pods += 1;
        w.gpus += gpus;
        w.neuron_devices += devices;
        w.neuron_cores += cores;
    }

    let by_instance: BTreeMap<&str, &ClusterNode> = hyperpod.iter().map(|n| (n.instance_id.as_str(), n)).collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut list = Vec::new();
    for n in nodes.iter().map(|n| &n.0) {
        let name = str_at(n, "/metadata/name").unwrap_or_default().to_string();
        let instance_id = instance_id_of(n);
        let hp = instance_id.as_deref().and_then(|id| by_instance.get(id).copied());
        if let Some(h) = hp {
            seen.insert(h.instance_id.clone());
        }
        let label = |k: &str| n.pointer("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str);
        let ready = n
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| str_at(c, "/type") == Some("Ready")))
            .map(|c| str_at(c, "/status") == Some("True"))
            .unwrap_or(false);
        let cordoned = n.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false);
        let taints = n
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|t| Taint {
                key: str_at(t, "/key").unwrap_or_default().to_string(),
                value: str_at(t, "/value").map(str::to_string),
                effect: str_at(t, "/effect").unwrap_or_default().to_string(),
            })
            .collect();
        let health = node_health(
            hp.map(|h| h.status.as_str()),
            label(LABEL_NODE_HEALTH),
            label(LABEL_DEEP_HEALTH_CHECK),
            Some(ready),
            cordoned,
        );
        let takes_work = health == NodeHealth::Healthy;
        let allocatable = |res: &str| quantity(n.pointer("/status/allocatable").and_then(|a| a.get(res)));
        let u = used.remove(&name).unwrap_or_default();
        list.push(NodeCapacity {
            instance_group: label(LABEL_INSTANCE_GROUP).map(str::to_string).or(hp.map(|h| h.instance_group.clone())),
            instance_type: label(LABEL_INSTANCE_TYPE).map(str::to_string).or(hp.map(|h| h.instance_type.clone())),
            name: Some(name),
            instance_id,
            health,
            hyperpod_status: hp.map(|h| h.status.clone()),
            health_label: label(LABEL_NODE_HEALTH).map(str::to_string),
            deep_health_check: label(LABEL_DEEP_HEALTH_CHECK).map(str::to_string),
            fault_type: label(LABEL_FAULT_TYPE).map(str::to_string),
            fault_reason: label(LABEL_FAULT_REASON).map(str::to_string),
            ready: Some(ready),
            cordoned,
            taints,
            accelerators: Accelerators {
                gpus: AcceleratorCount::of_node(allocatable(RESOURCE_GPU), u.gpus, takes_work),
                neuron_devices: AcceleratorCount::of_node(
                    allocatable(RESOURCE_NEURON_DEVICE),
                    u.neuron_devices,
                    takes_work,
                ),
                neuron_cores: AcceleratorCount::of_node(allocatable(RESOURCE_NEURON_CORE), u.neuron_cores, takes_work),
            },
            workloads: u.workloads.into_values().collect(),
            other_pods: u.other_pods,
        });
    }
    // HyperPod instances without a Node.
    for h in hyperpod.iter().filter(|h| !seen.contains(&h.instance_id)) {
        list.push(NodeCapacity {
            name: None,
            instance_id: Some(h.instance_id.clone()),
            instance_group: Some(h.instance_group.clone()),
            instance_type: Some(h.instance_type.clone()),
            health: node_health(Some(&h.status), None, None, None, false),
            hyperpod_status: Some(h.status.clone()),
            health_label: None,
            deep_health_check: None,
            fault_type: None,
            fault_reason: None,
            ready: None,
            cordoned: false,
            taints: vec![],
            accelerators: Accelerators::default(),
            workloads: vec![],
            other_pods: 0,
        });
    }
    list.sort_by(|a, b| {
        (&a.instance_group, &a.name, &a.instance_id).cmp(&(&b.instance_group, &b.name, &b.instance_id))
    });

    let mut out = ClusterCapacity {
        cluster: cluster.to_string(),
        nodes: 0,
        health: BTreeMap::new(),
        accelerators: Accelerators::default(),
        pending_gpus,
        pending_pods,
        instance_groups: vec![],
        node_list: vec![],
        hyperpod_error: None,
    };
    let mut groups: BTreeMap<String, GroupCapacity> = BTreeMap::new();
    for n in &list {
        out.nodes += 1;
        *out.health.entry(n.health).or_default() += 1;
        out.accelerators.add(&n.accelerators);
        let Some(g) = &n.instance_group else { continue };
        let group = groups.entry(g.clone()).or_insert_with(|| GroupCapacity {
            name: g.clone(),
            instance_type: n.instance_type.clone(),
            nodes: 0,
            health: BTreeMap::new(),
            accelerators: Accelerators::default(),
        });
        group.nodes += 1;
        *group.health.entry(n.health).or_default() += 1;
        group.accelerators.add(&n.accelerators);
        if group.instance_type != n.instance_type {
            group.instance_type = None;
        }
    }
    out.instance_groups = groups.into_values().collect();
    out.node_list = list;
    out
}

/// The capacity of cluster `name` as `access` may see it: Nodes and Pods are read as the
/// control plane (allocation counts every pod), workload names only in the access's
/// namespaces. A cluster without HyperPod shows its Kubernetes nodes; a HyperPod read that
/// fails is reported in `hyperpod_error`, not as a failure. Unknown cluster → 404.
pub async fn get(
    store: &dyn Store,
    aws: &dyn AwsCloud,
    kube: &dyn KubeApi,
    name: &str,
    access: &KubeAccess,
) -> Result<ClusterCapacity, EngineError> {
    let super::clusters::Cluster { record: rec, kube: target } = super::clusters::resolve(store, name)?;
    let list = |kind: &str| ListParams { api_version: "v1".into(), kind: kind.into(), namespace: None, labels: vec![] };
    let (nodes, pods) = futures::future::try_join(kube.list(&target, &list("Node")), kube.list(&target, &list("Pod")))
        .await
        .map_err(EngineError::Provider)?;
    let (hyperpod, hyperpod_error) = match &rec.hyperpod_cluster {
        None => (vec![], None),
        Some(hp) => match aws.list_cluster_nodes(&rec.region, hp).await {
            Ok(n) => (n, None),
            Err(e) if e.kind == crate::provider::ProviderErrorKind::NotFound => (vec![], None),
            Err(e) => (vec![], Some(ProviderError::to_string(&e))),
        },
    };
    let mut view = build(name, &nodes, &pods, &hyperpod, |ns| access.check_namespace(ns).is_ok());
    view.hyperpod_error = hyperpod_error;
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, group: &str, gpus: u32, labels: Value, ready: bool, extra: Value) -> KubeObject {
        let mut l = json!({ LABEL_INSTANCE_GROUP: group, LABEL_INSTANCE_TYPE: "ml.g5.12xlarge" });
        for (k, v) in labels.as_object().cloned().unwrap_or_default() {
            l[k] = v;
        }
        let mut n = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": name, "labels": l },
            "spec": { "providerID": format!("aws:///us-west-2a/{}", name.trim_start_matches("hyperpod-")) },
            "status": {
                "allocatable": { RESOURCE_GPU: gpus.to_string(), "cpu": "48" },
                "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }],
            },
        });
        for (k, v) in extra.as_object().cloned().unwrap_or_default() {
            n["spec"][k] = v;
        }
        KubeObject(n)
    }

    fn pod(ns: &str, name: &str, node: Option<&str>, gpus: u32, phase: &str, labels: Value) -> KubeObject {
        let mut p = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": name, "namespace": ns, "labels": labels },
            "spec": { "containers": [{ "name": "main", "resources": { "limits": { RESOURCE_GPU: gpus.to_string() } } }] },
            "status": { "phase": phase },
        });
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        KubeObject(p)
    }

    fn hp(id: &str, group: &str, status: &str) -> ClusterNode {
        ClusterNode {
            instance_id: id.into(),
            instance_group: group.into(),
            instance_type: "ml.g5.12xlarge".into(),
            status: status.into(),
            availability_zone: "us-west-2a".into(),
        }
    }

    #[test]
    fn health_follows_its_precedence() {
        use NodeHealth::*;
        // (hyperpod status, health label, deep health check, ready, cordoned) → health
        type Row<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>, Option<bool>, bool, NodeHealth);
        let table: &[Row] = &[
            (Some("Running"), Some("Schedulable"), None, Some(true), false, Healthy),
            (None, None, None, Some(true), false, Healthy),
            (Some("Running"), Some("Schedulable"), None, Some(true), true, Cordoned),
            (Some("Failure"), Some("Schedulable"), None, Some(true), false, Failed),
            (
                Some("Running"),
                Some("UnschedulablePendingReplacement"),
                Some("Failed"),
                Some(true),
                false,
                PendingReplacement,
            ),
            (Some("Running"), Some("UnschedulablePendingReboot"), None, Some(false), false, PendingReboot),
            (Some("Running"), Some("Schedulable"), None, Some(false), false, NotReady),
            (Some("DeepHealthCheckInProgress"), None, None, Some(true), false, Checking),
            (Some("Running"), Some("Unschedulable"), Some("InProgress"), Some(true), true, Checking),
            (None, None, Some("InProgress"), Some(true), false, Checking),
            (Some("Pending"), None, None, None, false, Provisioning),
            (Some("SystemUpdating"), None, None, Some(true), false, Provisioning),
            (Some("Running"), None, None, None, false, Provisioning),
        ];
        for (i, (st, label, dhc, ready, cordoned, want)) in table.iter().enumerate() {
            assert_eq!(node_health(*st, *label, *dhc, *ready, *cordoned), *want, "row {i}");
        }
    }

    #[test]
    fn instance_ids_come_from_the_provider_id_or_the_name() {
        let table = [
            (json!({ "metadata": { "name": "hyperpod-i-0abc123" } }), Some("i-0abc123")),
            (
                json!({ "metadata": { "name": "x" }, "spec": { "providerID": "aws:///usw2-az2/sagemaker/cluster/hyperpod-k9-i-0def" } }),
                Some("i-0def"),
            ),
            (
                json!({ "metadata": { "name": "ip-10-0-0-1.ec2.internal" }, "spec": { "providerID": "aws:///us-west-2a/i-0123" } }),
                Some("i-0123"),
            ),
            (json!({ "metadata": { "name": "minikube" } }), None),
            (json!({ "metadata": { "name": "node-i-xyz" } }), None),
        ];
        for (n, want) in table {
            assert_eq!(instance_id_of(&n).as_deref(), want, "{n}");
        }
    }

    #[test]
    fn counts_add_up_per_node_group_and_cluster_and_name_the_workloads() {
        let ours = |instance: &str, component: &str| json!({ "app.kubernetes.io/managed-by": "instantstart", LABEL_INSTANCE: instance, LABEL_COMPONENT: component });
        let nodes = vec![
            node("hyperpod-i-01", "gpu", 4, json!({ LABEL_NODE_HEALTH: "Schedulable" }), true, json!({})),
            node(
                "hyperpod-i-02",
                "gpu",
                4,
                json!({ LABEL_NODE_HEALTH: "UnschedulablePendingReplacement", LABEL_DEEP_HEALTH_CHECK: "Failed", LABEL_FAULT_TYPE: "GpuHealth" }),
                true,
                json!({ "taints": [{ "key": LABEL_NODE_HEALTH, "value": "UnschedulablePendingReplacement", "effect": "NoSchedule" }] }),
            ),
            node("hyperpod-i-03", "infer", 4, json!({ LABEL_NODE_HEALTH: "Schedulable" }), true, json!({})),
        ];
        let pods = vec![
            pod("team-a", "llama-0", Some("hyperpod-i-01"), 2, "Running", ours("llama", "training")),
            pod("team-a", "llama-1", Some("hyperpod-i-02"), 2, "Running", ours("llama", "training")),
            pod("team-b", "qwen-abc", Some("hyperpod-i-03"), 1, "Running", ours("qwen", "inference")),
            pod("team-b", "done", Some("hyperpod-i-03"), 3, "Succeeded", json!({})),
            pod("team-a", "waiting", None, 8, "Pending", ours("big", "training")),
            pod("kube-system", "dcgm", Some("hyperpod-i-01"), 0, "Running", json!({})),
        ];
        let hyperpod = vec![hp("i-01", "gpu", "Running"), hp("i-02", "gpu", "Running"), hp("i-04", "infer", "Pending")];
        let all = build("demo", &nodes, &pods, &hyperpod, |_| true);
        assert_eq!(all.nodes, 4);
        assert_eq!(
            all.health,
            BTreeMap::from([
                (NodeHealth::Healthy, 2),
                (NodeHealth::PendingReplacement, 1),
                (NodeHealth::Provisioning, 1)
            ])
        );
        assert_eq!(all.accelerators.gpus, AcceleratorCount { total: 12, allocated: 5, free: 5, unavailable: 2 });
        assert_eq!((all.pending_gpus, all.pending_pods), (8, 1));
        let gpu = &all.instance_groups[0];
        assert_eq!((gpu.name.as_str(), gpu.nodes), ("gpu", 2));
        assert_eq!(gpu.accelerators.gpus, AcceleratorCount { total: 8, allocated: 4, free: 2, unavailable: 2 });
        let infer = &all.instance_groups[1];
        assert_eq!(infer.accelerators.gpus, AcceleratorCount { total: 4, allocated: 1, free: 3, unavailable: 0 });
        assert_eq!(infer.health.get(&NodeHealth::Provisioning), Some(&1));
        // The sick node carries its labels and taint; the workloads are named.
        let sick = all.node_list.iter().find(|n| n.instance_id.as_deref() == Some("i-02")).unwrap();
        assert_eq!(sick.fault_type.as_deref(), Some("GpuHealth"));
        assert_eq!(sick.taints[0].effect, "NoSchedule");
        assert_eq!(sick.workloads[0].name, "llama");
        assert_eq!(sick.workloads[0].kind, "training");
        let first = all.node_list.iter().find(|n| n.instance_id.as_deref() == Some("i-01")).unwrap();
        assert_eq!(first.workloads.len(), 2, "{:?}", first.workloads);
        assert_eq!(first.workloads[0].kind, "Pod", "a foreign pod without owner is itself");
        // The provisioning instance has no Node.
        let pending = all.node_list.iter().find(|n| n.instance_id.as_deref() == Some("i-04")).unwrap();
        assert_eq!((pending.name.as_deref(), pending.hyperpod_status.as_deref()), (None, Some("Pending")));
        // A caller bound to team-b sees the same numbers and only team-b's workloads by name.
        let b = build("demo", &nodes, &pods, &hyperpod, |ns| ns == "team-b");
        assert_eq!(b.accelerators, all.accelerators);
        let n1 = b.node_list.iter().find(|n| n.instance_id.as_deref() == Some("i-01")).unwrap();
        assert!(n1.workloads.is_empty());
        assert_eq!(n1.other_pods, 2);
    }

    #[test]
    fn overcommitted_nodes_report_what_pods_ask_and_nothing_free() {
        let nodes = vec![node("hyperpod-i-01", "gpu", 2, json!({}), true, json!({}))];
        let pods = vec![pod("a", "p", Some("hyperpod-i-01"), 3, "Running", json!({}))];
        let v = build("demo", &nodes, &pods, &[], |_| true);
        assert_eq!(v.accelerators.gpus, AcceleratorCount { total: 2, allocated: 3, free: 0, unavailable: 0 });
    }
}

//! The Kubernetes API of the simulated EKS clusters (`KubeApi`).
//!
//! Each EKS cluster has its own object store, created with the cluster (namespaces `default`,
//! `kube-system`, `kube-public`, `kube-node-lease`) and dropped when the cluster is gone. Calls
//! need the cluster to be Active: while it is creating they fail `Transient` (the endpoint is
//! not reachable yet); when it is absent, failed or being deleted they fail `NotFound`. What the
//! simulation does with objects:
//!
//! - `apply` is server-side-apply-like: it creates the object or replaces its spec, labels and
//!   annotations, keeping server-set metadata (uid, creationTimestamp) and status; the
//!   namespace of a namespaced object must exist.
//! - PersistentVolumeClaims are `Bound` when a PersistentVolume is pre-bound to them
//!   (`spec.claimRef`) or named by their `spec.volumeName`; PersistentVolumes report
//!   `Bound`/`Available` accordingly.
//! - Deployments (apps/v1), Jobs (batch/v1) and PyTorchJobs (kubeflow.org/v1) run pods. Pods
//!   are scheduled onto the Nodes of the cluster — the Running instances of its HyperPod
//!   clusters — honouring `nodeSelector` and accelerator requests (`nvidia.com/gpu`,
//!   `aws.amazon.com/neuron`); without a fitting node they stay Pending with the scheduler's
//!   message. A scheduled pod runs after [`timings::POD_START`](crate::timings::POD_START) and is
//!   ready [`timings::POD_READY`](crate::timings::POD_READY) later; batch pods succeed after their
//!   run time ([`DURATION_ANNOTATION`]). Workload statuses (readyReplicas, Job conditions, …)
//!   follow. Deleting a workload's pod starts a replacement.
//! - HyperPodPyTorchJobs (sagemaker.amazonaws.com/v1) and RayJobs (ray.io/v1) run their
//!   training pods with the operators' statuses; process faults restart a HyperPod job in place
//!   within its restart budget, log-monitoring rules detect hangs, and model download Jobs and
//!   completed training jobs write their files into the bucket behind the shared claim
//!   ([`training`]). Training logs print [`training_curve`].
//! - Services get a cluster IP; `LoadBalancer` Services get
//!   `status.loadBalancer.ingress[0].hostname` after [`timings::LOAD_BALANCER`](crate::timings::LOAD_BALANCER).
//!   A Service that has its load balancer when the AWS Load Balancer Controller is uninstalled
//!   (or the EKS cluster is deleted) leaves that load balancer in the VPC, where it blocks
//!   deleting the subnets and the VPC ([`orphan_load_balancers`]).
//! - Nodes (`v1/Node`) are read-only views of HyperPod instances.
//! - `HyperpodNodeClass` (`karpenter.sagemaker.amazonaws.com/v1`) and `NodePool`
//!   (`karpenter.sh/v1`) are served only while managed autoscaling is InService on one of the
//!   cluster's HyperPod clusters ([`kinds::kind_served`]); with them HyperPod's Karpenter scales the
//!   groups the NodeClass lists from zero for pending pods and back when idle ([`karpenter`]).
//! - While the task governance add-on is installed, Kueue admits the training jobs that name a
//!   team's queue by the teams' quotas, borrowing, priorities and fair share, and serves their
//!   `Workload`s, the teams' `ClusterQueue`s and `LocalQueue`s, the `WorkloadPriorityClass`es
//!   and `ResourceFlavor`s as Kueue v0.19.2's CRDs have them ([`kueue`]).
//! - Other kinds (ConfigMaps, Secrets, ServiceAccounts, RBAC, CRDs, custom resources) are
//!   stored as applied.
//! - The custom resources of the pinned Helm charts ([`kinds::CHART_RESOURCES`]: RayJob,
//!   RayCluster, RayService from `kuberay-operator`, ScaledObject from `keda`) exist only while
//!   the chart's release is deployed in the cluster ([`kinds::chart_kind_served`]; or a CRD for them was
//!   applied): before, `apply` and `list` fail `NotFound` like a real API server without the CRD
//!   (`get` answers `None`, `delete` succeeds, as kube-rs reports that `404`), and uninstalling
//!   the release deletes its CRDs and with them every object of those kinds.
//! - `logs` serves simulated container logs ([`logs`]); `follow` streams new lines as simulated
//!   time passes, until the container ends or the pod disappears.
//!
//! The `ResourceFails` fault on `k8s:Apply` makes the applied workload fail: server pods
//! crash-loop, batch pods fail, LoadBalancers never get an address. Process faults
//! ([`SimFaults::process_faults`](crate::SimFaults::process_faults), or a fault on
//! [`PROCESS_FAULT_API`]) hit running HyperPodPyTorchJobs.
//!
//! [`apiserver`] serves these worlds over the Kubernetes REST conventions (for kube-rs and
//! kubectl).

mod api;
pub mod apiserver;
pub(crate) mod helm;
pub(crate) mod karpenter;
pub(crate) mod kinds;
pub(crate) mod kueue;
mod logs;
pub(crate) mod nodes;
pub(crate) mod objects;
pub(crate) mod pod;
pub(crate) mod rbac;
pub(crate) mod scheduler;
mod serving;
pub(crate) mod status;
pub(crate) mod training;
pub(crate) mod workload;

pub use crate::world::KubeAuditEvent;
pub use logs::{LOG_RATE_ANNOTATION, LOG_RATE_ENV, MAX_LOG_RATE, parse_rate_line, rate_line};
pub use pod::{DURATION_ANNOTATION, DURATION_ENV};
pub use training::{
    PROCESS_FAULT_API, TRAINING_STEP_SECONDS, parse_training_log_line, training_curve, training_log_line,
};
pub(crate) use training::{inject as inject_process_faults, write_outputs};

use crate::base::Cx;
use crate::base::{rkey, stable_hash};
use crate::world::{KubeRec, KubeWorld, SYSTEM_NAMESPACES, World, obj_key};
use instantstart_core::provider::{
    KubeApi, KubeObject, KubeTarget, ListParams, ObjectRef, POD_PROXY_API, PROXY_API, ProviderError, ProviderErrorKind,
    ProxyResponse,
};
use kinds::{is_cluster_scoped, kind_served};
use objects::{bound_volume, check_target, str_at};
use pod::{NodeInfo, PodView};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

type Result<T> = std::result::Result<T, ProviderError>;

/// What a real API server answers for a kind it does not serve (no CRD): `404 NotFound`.
fn not_served(api: &str, api_version: &str, kind: &str) -> ProviderError {
    ProviderError::not_found(api, format!("the server could not find the requested resource ({kind} {api_version})"))
}

/// An object reference with the namespace made explicit (namespaced kinds default to
/// `default`, cluster-scoped kinds have none).
struct Ref {
    api_version: String,
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl Ref {
    fn new(r: &ObjectRef) -> Self {
        let namespace = if is_cluster_scoped(&r.kind) {
            None
        } else {
            Some(r.namespace.clone().unwrap_or_else(|| "default".into()))
        };
        Ref { api_version: r.api_version.clone(), kind: r.kind.clone(), namespace, name: r.name.clone() }
    }

    fn key(&self) -> String {
        obj_key(&self.api_version, &self.kind, self.namespace.as_deref(), &self.name)
    }

    fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

fn is_pod(api_version: &str, kind: &str) -> bool {
    api_version == "v1" && kind == "Pod"
}

fn is_node(api_version: &str, kind: &str) -> bool {
    api_version == "v1" && kind == "Node"
}

/// A stored object with the status the simulated controllers would give it now.
fn materialize(w: &World, kw: &KubeWorld, key: &str, rec: &KubeRec, nodes: &[NodeInfo], now: f64) -> Value {
    let mut obj = rec.object.clone();
    let api = str_at(&obj, "/apiVersion").unwrap_or_default().to_string();
    let kind = str_at(&obj, "/kind").unwrap_or_default().to_string();
    let status: Option<Value> = match (api.as_str(), kind.as_str()) {
        ("v1", "Pod") => {
            return workload::pods_of(key, rec, now)
                .first()
                .map(|p| {
                    let mut rendered = workload::pod_object(w, p, &pod::pod_state(p, nodes, now));
                    // Keep the stored metadata (resourceVersion, generation, annotations).
                    if let Some(m) = obj.get("metadata") {
                        rendered["metadata"] = m.clone();
                    }
                    rendered
                })
                .unwrap_or(obj);
        }
        ("v1", "Namespace") => Some(json!({ "phase": "Active" })),
        ("v1", "PersistentVolumeClaim") => Some(pvc_status(kw, &obj)),
        ("v1", "PersistentVolume") => Some(pv_status(kw, &obj)),
        ("v1", "Service") => Some(service_status(kw, rec, now)),
        ("keda.sh/v1alpha1", "ScaledObject") => Some(serving::scaled_object_status(kw, &obj, now)),
        ("apps/v1", "Deployment") => {
            // spec.replicas as the scale subresource has it: what KEDA's HPA set while a
            // ScaledObject scales the Deployment, and where it left them after one is deleted.
            let stored = obj.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as u32;
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("replicas".into(), json!(serving::replicas_at(rec, stored, now)));
            }
            status::workload_status(w, key, rec, nodes, now)
        }
        _ => status::workload_status(w, key, rec, nodes, now),
    };
    if let (Some(status), Some(o)) = (status, obj.as_object_mut()) {
        o.insert("status".into(), status);
    }
    obj
}

fn pvc_status(kw: &KubeWorld, pvc: &Value) -> Value {
    let ns = str_at(pvc, "/metadata/namespace").unwrap_or("default");
    let name = str_at(pvc, "/metadata/name").unwrap_or_default();
    match bound_volume(kw, ns, name, str_at(pvc, "/spec/volumeName")) {
        Some(pv) => json!({
            "phase": "Bound",
            "accessModes": pv.pointer("/spec/accessModes").cloned().unwrap_or(json!([])),
            "capacity": pv.pointer("/spec/capacity").cloned().unwrap_or(json!({})),
        }),
        None => json!({ "phase": "Pending" }),
    }
}

fn pv_status(kw: &KubeWorld, pv: &Value) -> Value {
    let pv_name = str_at(pv, "/metadata/name").unwrap_or_default();
    let bound = kw.objects.values().map(|r| &r.object).any(|o| {
        if str_at(o, "/kind") != Some("PersistentVolumeClaim") {
            return false;
        }
        let ns = str_at(o, "/metadata/namespace").unwrap_or("default");
        let name = str_at(o, "/metadata/name").unwrap_or_default();
        bound_volume(kw, ns, name, str_at(o, "/spec/volumeName"))
            .is_some_and(|v| str_at(v, "/metadata/name") == Some(pv_name))
    });
    json!({ "phase": if bound { "Bound" } else { "Available" } })
}

fn service_status(kw: &KubeWorld, rec: &KubeRec, now: f64) -> Value {
    let o = &rec.object;
    if str_at(o, "/spec/type") != Some("LoadBalancer") {
        return json!({ "loadBalancer": {} });
    }
    if rec.fails.is_some() || now < rec.created_at + crate::timings::LOAD_BALANCER {
        return json!({ "loadBalancer": {} });
    }
    // `aws-load-balancer-type: external` (or `nlb-ip`) hands the Service to the AWS Load
    // Balancer Controller; EKS's built-in cloud provider ignores it, so without the controller it
    // never gets an address (https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html).
    if controller_service(o) && !helm::lb_controller_running(kw, now) {
        return json!({ "loadBalancer": {} });
    }
    let ns = str_at(o, "/metadata/namespace").unwrap_or("default");
    let name = str_at(o, "/metadata/name").unwrap_or_default();
    let short = |s: &str| s.chars().take(8).collect::<String>();
    let h = stable_hash(&[&kw.uid, ns, name]);
    let hostname = format!(
        "k8s-{}-{}-{:010x}-{:016x}.elb.{}.amazonaws.com",
        short(ns),
        short(name),
        h & 0xff_ffff_ffff,
        stable_hash(&[name, ns, &kw.uid]),
        kw.region
    );
    json!({ "loadBalancer": { "ingress": [{ "hostname": hostname }] } })
}

/// Whether a Service is handed to the AWS Load Balancer Controller
/// (`aws-load-balancer-type: external` or `nlb-ip`) rather than to EKS's built-in cloud provider.
fn controller_service(o: &Value) -> bool {
    matches!(
        str_at(o, "/metadata/annotations/service.beta.kubernetes.io~1aws-load-balancer-type"),
        Some("external" | "nlb-ip")
    )
}

/// Records, in the VPC of EKS cluster `wkey`, the load balancer of every `LoadBalancer` Service
/// of the cluster that has one now (only the controller's when `controller_only`): called when
/// what provisioned them goes while the Services stay — the AWS Load Balancer Controller's
/// release is uninstalled, or the cluster itself is deleted. Nothing deletes such a load balancer
/// any more, and its network interfaces keep its subnets and the VPC from being deleted: "If you
/// have active services in your cluster that are associated with a load balancer, you must
/// delete those services before deleting the cluster so that the load balancers are deleted
/// properly. Otherwise, you can have orphaned resources in your VPC that prevent you from being
/// able to delete the VPC" (https://docs.aws.amazon.com/eks/latest/userguide/delete-cluster.html).
/// Its subnets are those the controller discovers for its scheme (tag `kubernetes.io/role/elb`
/// for internet-facing, `kubernetes.io/role/internal-elb` for internal).
pub(crate) fn orphan_load_balancers(w: &mut World, wkey: &str, now: f64, controller_only: bool) {
    let (Some(kw), Some(eks)) = (w.kube.get(wkey), w.eks.get(wkey)) else { return };
    let mut found = Vec::new();
    for rec in kw.objects.values() {
        let o = &rec.object;
        if str_at(o, "/kind") != Some("Service") || str_at(o, "/spec/type") != Some("LoadBalancer") {
            continue;
        }
        if controller_only && !controller_service(o) {
            continue;
        }
        let status = service_status(kw, rec, now);
        let Some(dns) = str_at(&status, "/loadBalancer/ingress/0/hostname") else { continue };
        let scheme = str_at(o, "/metadata/annotations/service.beta.kubernetes.io~1aws-load-balancer-scheme");
        let internet_facing = scheme == Some("internet-facing") || (scheme.is_none() && !controller_service(o));
        let service = format!(
            "{}/{}",
            str_at(o, "/metadata/namespace").unwrap_or("default"),
            str_at(o, "/metadata/name").unwrap_or_default()
        );
        found.push((dns.to_string(), internet_facing, service));
    }
    let (vpc_id, eks_cluster) = (eks.vpc_id.clone(), eks.name.clone());
    let role_tag = |public: bool| if public { "kubernetes.io/role/elb" } else { "kubernetes.io/role/internal-elb" };
    let subnets = |public: bool| -> Vec<String> {
        w.subnets
            .values()
            .filter(|s| s.vpc_id == vpc_id && s.tags.contains_key(role_tag(public)))
            .map(|s| s.id.clone())
            .collect()
    };
    let found: Vec<crate::world::OrphanLoadBalancerRec> = found
        .into_iter()
        .map(|(dns_name, public, service)| crate::world::OrphanLoadBalancerRec {
            dns_name,
            subnet_ids: subnets(public),
            eks_cluster: eks_cluster.clone(),
            service,
        })
        .collect();
    let Some(v) = w.vpcs.get_mut(&vpc_id) else { return };
    for lb in found {
        if !v.load_balancers.iter().any(|x| x.dns_name == lb.dns_name) {
            tracing::debug!(dns = %lb.dns_name, service = %lb.service, "simulator: load balancer orphaned in the VPC");
            v.load_balancers.push(lb);
        }
    }
}

fn labels_match(obj: &Value, wanted: &[(String, String)]) -> bool {
    wanted
        .iter()
        .all(|(k, v)| obj.pointer("/metadata/labels").and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v))
}

fn find_pod(kw: &KubeWorld, namespace: &str, name: &str, now: f64) -> Option<PodView> {
    workload::all_pods(kw, Some(namespace), now).into_iter().find(|p| p.name == name)
}

/// [`find_pod`], DaemonSets' pods on `nodes` included.
fn find_any_pod(kw: &KubeWorld, nodes: &[pod::NodeInfo], namespace: &str, name: &str, now: f64) -> Option<PodView> {
    find_pod(kw, namespace, name, now)
        .or_else(|| workload::daemon_pods(kw, nodes, Some(namespace)).into_iter().find(|p| p.name == name))
}

fn invalid(api: &str, message: impl Into<String>) -> ProviderError {
    ProviderError::new(api, ProviderErrorKind::InvalidRequest, message)
}

fn apply(w: &mut World, cx: &Cx, target: &KubeTarget, object: &KubeObject) -> Result<KubeObject> {
    const API: &str = "k8s:Apply";
    let wkey = check_target(w, API, target, cx.now)?;
    let Some(r) = object.object_ref() else {
        return Err(invalid(API, "the object needs apiVersion, kind and metadata.name"));
    };
    if !object.0.is_object() || !object.0.get("metadata").is_some_and(Value::is_object) {
        return Err(invalid(API, "the object must be a JSON object with metadata"));
    }
    if is_node(&r.api_version, &r.kind) {
        return Err(invalid(API, "Nodes are registered by HyperPod instances; they cannot be applied"));
    }
    let r = Ref::new(&r);
    let key = r.key();
    let uid_seed = (w.next_u64(), w.next_u64());
    let created = w.k8s_time(cx.now);
    if !kind_served(w, &wkey, &r.api_version, &r.kind, cx.now) {
        return Err(not_served(API, &r.api_version, &r.kind));
    }
    if r.kind == "HyperpodNodeClass" {
        // The NodeClass names 1-10 pre-created instance groups ("MaxItems: 10", AWS
        // `sagemaker-hyperpod-eks-autoscaling-nodeclass`); the CRD's validation refuses others.
        let groups = object.0.pointer("/spec/instanceGroups").and_then(Value::as_array);
        let ok = groups.is_some_and(|g| (1..=10).contains(&g.len()) && g.iter().all(Value::is_string));
        if !ok {
            return Err(invalid(
                API,
                format!(
                    "HyperpodNodeClass.karpenter.sagemaker.amazonaws.com \"{}\" is invalid: spec.instanceGroups: must list 1 to 10 instance group names",
                    r.name
                ),
            ));
        }
    }
    // The task governance add-on creates a namespace per team (`hyperpod-ns-<team>`).
    let team_namespace = match (&r.namespace, w.kube.get(&wkey)) {
        (Some(ns), Some(kw)) => kueue::team_namespace_exists(w, kw, ns, cx.now),
        _ => false,
    };
    let Some(kw) = w.kube.get_mut(&wkey) else {
        return Err(ProviderError::not_found(API, "no Kubernetes API for this cluster"));
    };
    if let Some(ns) = &r.namespace
        && !kw.has_namespace(ns)
        && !team_namespace
    {
        return Err(ProviderError::not_found(API, format!("namespaces \"{ns}\" not found")));
    }
    if is_pod(&r.api_version, &r.kind)
        && !kw.objects.contains_key(&key)
        && let Some(ns) = &r.namespace
        && let Some(p) = find_pod(kw, ns, &r.name, cx.now).filter(|p| p.slot.is_some())
    {
        // Applying labels to a controller's pod: the pod keeps running, only its labels change.
        serving::relabel_pod(kw, &p, object.0.pointer("/metadata/labels"));
        kw.resource_version += 1;
        let pod_ref =
            ObjectRef { namespace: Some(ns.clone()), ..object.object_ref().unwrap_or_else(|| unreachable!()) };
        return get(w, cx, target, &pod_ref)?.ok_or_else(|| ProviderError::not_found(API, "pod vanished"));
    }
    let existing: Option<Value> = kw.objects.get(&key).map(|e| e.object.clone());
    let existing = existing.as_ref();
    let mut new = object.0.clone();
    let Some(o) = new.as_object_mut() else {
        return Err(invalid(API, "the object must be a JSON object"));
    };
    o.remove("status");
    let mut meta: Map<String, Value> = o.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    for server_set in ["uid", "creationTimestamp", "resourceVersion", "generation", "managedFields"] {
        meta.remove(server_set);
    }
    match &r.namespace {
        Some(ns) => meta.insert("namespace".into(), json!(ns)),
        None => meta.remove("namespace"),
    };
    kw.resource_version += 1;
    meta.insert("resourceVersion".into(), json!(kw.resource_version.to_string()));
    let old_meta = existing.and_then(|e| e.get("metadata"));
    let keep = |field: &str| old_meta.and_then(|m| m.get(field)).cloned();
    meta.insert("uid".into(), keep("uid").unwrap_or_else(|| json!(crate::base::uuid_from(uid_seed.0, uid_seed.1))));
    meta.insert("creationTimestamp".into(), keep("creationTimestamp").unwrap_or_else(|| json!(created)));
    meta.insert("managedFields".into(), json!([{ "manager": "instantstart", "operation": "Apply" }]));
    if r.kind == "Service" && r.api_version == "v1" {
        let spec = o.entry("spec").or_insert_with(|| json!({}));
        if let Some(spec) = spec.as_object_mut()
            && !spec.contains_key("clusterIP")
            && spec.get("type").and_then(Value::as_str) != Some("ExternalName")
        {
            let previous = existing.and_then(|e| e.pointer("/spec/clusterIP")).cloned();
            let h = stable_hash(&[&key, &kw.uid]);
            let ip = format!("10.100.{}.{}", (h >> 8) % 256, 1 + h % 254);
            spec.insert("clusterIP".into(), previous.unwrap_or_else(|| json!(ip)));
        }
    }
    // Scaling a Deployment changes its generation but not its pod template: pods keep running.
    let generation_changed = existing.is_none_or(|e| e.get("spec") != o.get("spec"));
    let spec_changed = existing.is_none_or(|e| serving::template_changed(&r.kind, e.get("spec"), o.get("spec")));
    let old_generation = keep("generation").and_then(|g| g.as_u64()).unwrap_or(0);
    let generation = if generation_changed { old_generation + 1 } else { old_generation.max(1) };
    meta.insert("generation".into(), json!(generation));
    if let Some(status) = existing.and_then(|e| e.get("status")) {
        o.insert("status".into(), status.clone());
    }
    o.insert("metadata".into(), Value::Object(meta));
    match kw.objects.get_mut(&key) {
        Some(rec) => {
            rec.object = new;
            if spec_changed {
                rec.spec_changed_at = cx.now;
                rec.restarts.clear();
            }
            rec.fails = cx.resource_fails.clone();
        }
        None => {
            kw.objects.insert(
                key.clone(),
                KubeRec {
                    object: new,
                    created_at: cx.now,
                    spec_changed_at: cx.now,
                    fails: cx.resource_fails.clone(),
                    restarts: BTreeMap::new(),
                    serving: Default::default(),
                    training: Default::default(),
                },
            );
        }
    }
    serving::after_apply(kw, &key, spec_changed, cx.now);
    let w: &World = w;
    let kw = w.kube.get(&wkey).ok_or_else(|| ProviderError::not_found(API, "no Kubernetes API for this cluster"))?;
    let nodes = nodes::nodes(w, kw, cx.now);
    let rec = kw.objects.get(&key).ok_or_else(|| ProviderError::not_found(API, "object vanished"))?;
    Ok(KubeObject(materialize(w, kw, &key, rec, &nodes, cx.now)))
}

fn get(w: &World, cx: &Cx, target: &KubeTarget, r: &ObjectRef) -> Result<Option<KubeObject>> {
    const API: &str = "k8s:Get";
    let wkey = check_target(w, API, target, cx.now)?;
    let Some(kw) = w.kube.get(&wkey) else { return Ok(None) };
    if !kind_served(w, &wkey, &r.api_version, &r.kind, cx.now) {
        // kube-rs answers the API server's `404 NotFound` of an unserved kind like an absent object.
        return Ok(None);
    }
    let r = Ref::new(r);
    let nodes = nodes::nodes(w, kw, cx.now);
    if is_node(&r.api_version, &r.kind) {
        return Ok(nodes
            .iter()
            .find(|n| n.name == r.name && n.gone_at.is_none())
            .map(|n| KubeObject(nodes::node_object(w, n))));
    }
    if r.api_version == kueue::KUEUE_API && kueue::KUEUE_KINDS.contains(&r.kind.as_str()) {
        let ns = if is_cluster_scoped(&r.kind) { None } else { Some(r.namespace.as_deref().unwrap_or("default")) };
        return Ok(kueue::objects(w, kw, &r.kind, ns, cx.now)
            .into_iter()
            .find(|o| str_at(o, "/metadata/name") == Some(r.name.as_str()))
            .map(KubeObject));
    }
    let key = r.key();
    if let Some(rec) = kw.objects.get(&key) {
        return Ok(Some(KubeObject(materialize(w, kw, &key, rec, &nodes, cx.now))));
    }
    if r.api_version == "apps/v1" && r.kind == "Deployment" {
        let ns = r.namespace.as_deref().unwrap_or("default");
        if let Some(d) = helm::chart_deployment(kw, ns, &r.name, cx.now) {
            return Ok(Some(KubeObject(d)));
        }
    }
    if is_pod(&r.api_version, &r.kind) {
        let ns = r.namespace.as_deref().unwrap_or("default");
        return Ok(find_any_pod(kw, &nodes, ns, &r.name, cx.now)
            .map(|p| KubeObject(workload::pod_object(w, &p, &pod::pod_state(&p, &nodes, cx.now)))));
    }
    Ok(None)
}

fn list(w: &World, cx: &Cx, target: &KubeTarget, p: &ListParams) -> Result<Vec<KubeObject>> {
    const API: &str = "k8s:List";
    let wkey = check_target(w, API, target, cx.now)?;
    let Some(kw) = w.kube.get(&wkey) else { return Ok(Vec::new()) };
    if !kind_served(w, &wkey, &p.api_version, &p.kind, cx.now) {
        return Err(not_served(API, &p.api_version, &p.kind));
    }
    let nodes = nodes::nodes(w, kw, cx.now);
    let namespace = if is_cluster_scoped(&p.kind) { None } else { p.namespace.as_deref() };
    let mut out: Vec<Value> = if is_node(&p.api_version, &p.kind) {
        nodes.iter().filter(|n| n.gone_at.is_none()).map(|n| nodes::node_object(w, n)).collect()
    } else if is_pod(&p.api_version, &p.kind) {
        workload::all_pods(kw, namespace, cx.now)
            .iter()
            .chain(&workload::daemon_pods(kw, &nodes, namespace))
            .map(|pod| match kw.objects.get(&pod.source).filter(|r| str_at(&r.object, "/kind") == Some("Pod")) {
                Some(rec) => materialize(w, kw, &pod.source, rec, &nodes, cx.now),
                None => workload::pod_object(w, pod, &pod::pod_state(pod, &nodes, cx.now)),
            })
            .collect()
    } else if p.api_version == kueue::KUEUE_API && kueue::KUEUE_KINDS.contains(&p.kind.as_str()) {
        kueue::objects(w, kw, &p.kind, namespace, cx.now)
    } else {
        kw.objects
            .iter()
            .filter(|(_, rec)| {
                str_at(&rec.object, "/apiVersion") == Some(p.api_version.as_str())
                    && str_at(&rec.object, "/kind") == Some(p.kind.as_str())
                    && namespace.is_none_or(|ns| str_at(&rec.object, "/metadata/namespace") == Some(ns))
            })
            .map(|(k, rec)| materialize(w, kw, k, rec, &nodes, cx.now))
            .collect()
    };
    out.retain(|o| labels_match(o, &p.labels));
    out.sort_by(|a, b| {
        let k = |o: &Value| {
            (str_at(o, "/metadata/namespace").map(str::to_string), str_at(o, "/metadata/name").map(str::to_string))
        };
        k(a).cmp(&k(b))
    });
    Ok(out.into_iter().map(KubeObject).collect())
}

fn delete(w: &mut World, cx: &Cx, target: &KubeTarget, r: &ObjectRef) -> Result<()> {
    const API: &str = "k8s:Delete";
    let wkey = check_target(w, API, target, cx.now)?;
    if !kind_served(w, &wkey, &r.api_version, &r.kind, cx.now) {
        // Nothing of an unserved kind exists; kube-rs answers the `404` like an absent object.
        return Ok(());
    }
    let Some(kw) = w.kube.get_mut(&wkey) else { return Ok(()) };
    let r = Ref::new(r);
    if is_node(&r.api_version, &r.kind) {
        // The kubelet of a running instance registers its Node again at once.
        return Ok(());
    }
    if r.kind == "Namespace" && r.api_version == "v1" {
        if SYSTEM_NAMESPACES.contains(&r.name.as_str()) {
            return Err(invalid(
                API,
                format!("namespaces \"{}\" is forbidden: this namespace may not be deleted", r.name),
            ));
        }
        kw.objects.retain(|_, rec| str_at(&rec.object, "/metadata/namespace") != Some(r.name.as_str()));
        kw.objects.remove(&r.key());
        return Ok(());
    }
    if let Some(removed) = kw.objects.remove(&r.key()) {
        serving::after_delete(kw, &removed, cx.now);
        if str_at(&removed.object, "/kind") == Some("Service") && helm::lb_controller_running(kw, cx.now) {
            // A running controller deletes the Service's load balancer (one it adopted again
            // after being reinstalled included: it finds it by its tags).
            let service = format!("{}/{}", r.namespace.as_deref().unwrap_or("default"), r.name);
            let eks_cluster = kw.eks_cluster.clone();
            if let Some(vpc) = w.eks.get(&wkey).map(|c| c.vpc_id.clone())
                && let Some(v) = w.vpcs.get_mut(&vpc)
            {
                v.load_balancers.retain(|lb| !(lb.eks_cluster == eks_cluster && lb.service == service));
            }
        }
        return Ok(());
    }
    if is_pod(&r.api_version, &r.kind) {
        let ns = r.namespace.as_deref().unwrap_or("default");
        if let Some(p) = find_pod(kw, ns, &r.name, cx.now)
            && let Some(slot) = &p.slot
        {
            workload::restart_slot(kw, &p.source, slot, cx.now);
        }
    }
    tracing::trace!(object = %r.describe(), "simulator: delete of an absent object");
    Ok(())
}

/// Authorizes an impersonated call with the cluster's RBAC ([`rbac`]); calls without an
/// identity (the control plane's own) pass.
#[allow(clippy::too_many_arguments)]
fn authorize(
    w: &mut World,
    cx: &Cx,
    api: &str,
    target: &KubeTarget,
    verb: &str,
    (api_version, kind, sub): (&str, &str, Option<&str>),
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<()> {
    if target.identity.is_none() {
        return Ok(());
    }
    let wkey = check_target(w, api, target, cx.now)?;
    let Some(kw) = w.kube.get_mut(&wkey) else { return Ok(()) };
    let (group, plural) = rbac::resource_of(api_version, kind);
    let resource = match sub {
        Some(s) => format!("{plural}/{s}"),
        None => plural,
    };
    let namespace = if is_cluster_scoped(kind) { None } else { Some(namespace.unwrap_or("default")) };
    rbac::authorize(kw, api, target, &rbac::Access { verb, group: &group, resource: &resource, namespace, name })
}

/// [`authorize`] for `apply`: `create` when the object does not exist yet, else `patch`.
fn authorize_apply(w: &mut World, cx: &Cx, target: &KubeTarget, object: &KubeObject) -> Result<()> {
    const API: &str = "k8s:Apply";
    if target.identity.is_none() {
        return Ok(());
    }
    let Some(r) = object.object_ref() else { return Ok(()) };
    let exists = get(w, cx, &KubeTarget { identity: None, ..target.clone() }, &r)?.is_some();
    let verb = if exists { "patch" } else { "create" };
    authorize(w, cx, API, target, verb, (&r.api_version, &r.kind, None), r.namespace.as_deref(), Some(&r.name))
}

/// What the API server's pod proxy answers for `GET {path}` on `pod`'s `port`: the pod must be
/// running (else `503`, as a real API server that cannot dial the pod); a DCGM exporter pod
/// ([`DCGM_EXPORTER_SELECTORS`](instantstart_core::provider::DCGM_EXPORTER_SELECTORS)) serves
/// `/metrics` on its port ([`crate::metrics::exporter_text`]); any other listener is refused.
fn pod_proxy_answer(w: &World, kw: &KubeWorld, ns: &str, pod: &str, port: u16, path: &str, now: f64) -> ProxyResponse {
    use instantstart_core::provider::{DCGM_EXPORTER_PORT, DCGM_EXPORTER_SELECTORS};
    let status = |code: u16, reason: &str, message: String| ProxyResponse {
        status: code,
        body: serde_json::to_vec(&json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code }))
        .unwrap_or_default(),
    };
    let nodes = nodes::nodes(w, kw, now);
    let Some(p) = find_any_pod(kw, &nodes, ns, pod, now) else {
        return status(404, "NotFound", format!("pods \"{pod}\" not found"));
    };
    let st = pod::pod_state(&p, &nodes, now);
    let (Some(node), Some(ip), true) = (&st.node, &st.pod_ip, st.started_at.is_some() && st.finished_at.is_none())
    else {
        return status(503, "ServiceUnavailable", format!("pod \"{pod}\" is not running"));
    };
    let exporter = DCGM_EXPORTER_SELECTORS.iter().any(|(k, v)| p.labels.get(*k).and_then(Value::as_str) == Some(*v));
    if !exporter || port != DCGM_EXPORTER_PORT {
        return status(
            503,
            "ServiceUnavailable",
            format!("error trying to reach service: dial tcp {ip}:{port}: connect: connection refused"),
        );
    }
    if path.trim_start_matches('/') != "metrics" {
        return ProxyResponse { status: 404, body: b"404 page not found\n".to_vec() };
    }
    match crate::metrics::exporter_text(w, kw, node, now) {
        Some(text) => ProxyResponse { status: 200, body: text.into_bytes() },
        None => status(503, "ServiceUnavailable", format!("node {node} is gone")),
    }
}

/// The pod and its state, without going through the API pipeline (for log streaming).
fn pod_now(w: &World, target: &KubeTarget, namespace: &str, pod: &str, now: f64) -> Option<(PodView, pod::PodState)> {
    let kw = w.kube.get(&rkey(&target.region, &target.eks_cluster))?;
    if !w.eks.get(&rkey(&target.region, &target.eks_cluster)).is_some_and(|c| c.life.exists(now)) {
        return None;
    }
    let nodes = nodes::nodes(w, kw, now);
    let p = find_any_pod(kw, &nodes, namespace, pod, now)?;
    let st = pod::pod_state(&p, &nodes, now);
    Some((p, st))
}

//! The pod model of the simulated Kubernetes clusters, below every controller: a pod
//! ([`PodView`], what it runs: [`PodRun`]), the Nodes pods run on ([`NodeInfo`]), what missing
//! identities block ([`Blockers`]: computed by `super::nodes`), and the scheduler that says
//! where and when a pod runs ([`pod_state`]: node selector, taints, accelerator requests).
//!
//! Controllers (`super::training`, `super::serving`, `super::kueue`) and the pod derivation
//! (`super::workload`) build on this module; it imports none of them.

use crate::base::stable_hash;
use crate::timings;
use ipnet::Ipv4Net;
use serde_json::{Map, Value};
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
    /// Where the kube-scheduler placed each pod that asks for accelerators, by pod uid: (index
    /// of the node in the cluster's list, when), or why it is not placed yet — counting what the
    /// pods placed before it hold ([`super::scheduler`]). A pod not listed is placed by its own
    /// request alone.
    pub placements: BTreeMap<String, Result<(usize, f64), String>>,
}

impl Blockers {
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
    pub(crate) fn mount_failure(&self, pod: &PodView) -> Option<&String> {
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
    pub run: Option<PodRun>,
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

/// Kubernetes' random-suffix alphabet (no vowels, no confusable digits).
pub(crate) fn suffix(seed: u64, len: usize) -> String {
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

/// The Nodes ready by `now` that `pod` may run on (node selector, taints, a consolidated
/// node, the accelerators it asks for: the node's whole count, not what is free), and the
/// earliest moment it can be placed on one of them; or why there is none (the scheduler's
/// `FailedScheduling` message).
pub(crate) fn eligible(pod: &PodView, nodes: &[NodeInfo], now: f64) -> Result<(Vec<usize>, f64), String> {
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
    let eligible: Vec<usize> = ready.iter().filter(|(_, n)| fits(n)).map(|(i, _)| *i).collect();
    let Some(earliest) = eligible.iter().map(|i| nodes[*i].ready_at).reduce(f64::min) else {
        let total = ready.len();
        let why = match &need {
            Some((res, _)) => format!("{total} Insufficient {res}"),
            None => format!("{total} node(s) didn't match Pod's node affinity/selector"),
        };
        return Err(unschedulable(total, &why));
    };
    Ok((eligible, pod.start.max(earliest)))
}

/// The kube-scheduler's `FailedScheduling` message for `total` ready nodes, none of which fits
/// for the reasons `why` counts.
pub(crate) fn unschedulable(total: usize, why: &str) -> String {
    format!(
        "0/{total} nodes are available: {why}. preemption: 0/{total} nodes are available: {total} No preemption victims found for incoming pod."
    )
}

/// The node the scheduler picks for `pod` among `candidates` (stable for the pod).
pub(crate) fn pick(pod: &PodView, candidates: &[usize]) -> usize {
    candidates[(stable_hash(&[&pod.namespace, &pod.name]) % candidates.len() as u64) as usize]
}

/// Places the pod: on a Node ready by now that matches its node selector and has the
/// accelerators it requests (free of what the pods placed before it hold:
/// [`Blockers::placements`]), at the time both the pod and such a node existed.
fn schedule(pod: &PodView, nodes: &[NodeInfo], now: f64) -> Result<(usize, f64), String> {
    if let Some(placed) = nodes.first().and_then(|n| n.blockers.placements.get(&pod.uid)) {
        return placed.clone();
    }
    let (eligible, at) = eligible(pod, nodes, now)?;
    let candidates: Vec<usize> = eligible.into_iter().filter(|i| nodes[*i].ready_at <= at).collect();
    Ok((pick(pod, &candidates), at))
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
            let (end, failed) = batch_end(pod, started + run);
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
/// What a pod of a simulated training or download runs (drives its log and its end).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PodRun {
    Training {
        /// The job (the curve's name).
        job: String,
        role: Role,
        /// Steps done before this pod started (after a full job restart).
        resumed_step: u64,
        /// Steps of the whole job.
        total_steps: u64,
        /// Seconds after the container start at which training begins.
        offset: f64,
        /// In-place process restarts during this pod's life: (time, reason).
        restarts: Vec<(f64, String)>,
        /// The processes were stopped for good (restart budget exhausted).
        killed: Option<(f64, String)>,
    },
    Download {
        repo: String,
        /// Where the files land as the container sees it.
        container_path: String,
        files: Vec<(String, u64)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A HyperPod training pod (all ranks log the steps).
    Rank,
    RayHead,
    RayWorker,
}

/// The end of a batch pod's run and whether it fails: a stopped job ends when it was stopped.
pub(crate) fn batch_end(pod: &PodView, natural_end: f64) -> (f64, bool) {
    if let Some(PodRun::Training { killed: Some((at, _)), .. }) = &pod.run
        && *at < natural_end
    {
        return (*at, true);
    }
    (natural_end, pod.fails.is_some())
}

/// An address in `subnet` chosen by `seed` (skipping the 4 addresses AWS reserves at the start).
pub(crate) fn address_in(subnet: Option<Ipv4Net>, seed: u64) -> Option<String> {
    let net = subnet?;
    let hosts = 1u64 << (32 - u32::from(net.prefix_len()));
    if hosts <= 8 {
        return None;
    }
    let offset = 4 + seed % (hosts - 5);
    Some(std::net::Ipv4Addr::from(u32::from(net.network()).wrapping_add(offset as u32)).to_string())
}

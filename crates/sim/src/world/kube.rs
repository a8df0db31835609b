//! The Kubernetes world of each simulated EKS cluster as the world persists it: its objects
//! ([`KubeRec`], keyed by [`obj_key`]) with what the controllers remember of them (restarts,
//! serving and training state), its Helm releases and its audit log. Only data; the controllers
//! and the `KubeApi` implementation are in `crate::kube`.

use crate::base::{stable_hash, uuid_from};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, VecDeque};

/// Namespaces every cluster starts with; they cannot be deleted.
pub(crate) const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Storage key of an object.
pub(crate) fn obj_key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{kind}|{api_version}|{}|{name}", namespace.unwrap_or(""))
}

/// The objects of one EKS cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KubeWorld {
    pub region: String,
    pub eks_cluster: String,
    pub eks_arn: String,
    pub uid: String,
    pub resource_version: u64,
    pub objects: BTreeMap<String, KubeRec>,
    /// Helm releases by `namespace/release` (`crate::kube::helm`).
    #[serde(default)]
    pub helm_releases: BTreeMap<String, HelmReleaseRec>,
    /// Impersonated calls, oldest first (`crate::kube::rbac`).
    #[serde(default)]
    pub audit: VecDeque<KubeAuditEvent>,
}

/// A stored object and the simulated times the controllers care about.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct KubeRec {
    /// As applied, plus server-set metadata; `status` only for kinds the simulation does not
    /// compute.
    pub object: Value,
    pub created_at: f64,
    /// Last time the spec changed (a rollout restarts the pods).
    pub spec_changed_at: f64,
    /// Set by the `ResourceFails` fault.
    #[serde(default)]
    pub fails: Option<String>,
    /// Replaced pods, by slot.
    #[serde(default)]
    pub restarts: BTreeMap<String, Restart>,
    /// Scaling history, KEDA state and relabelled pods (`crate::kube::serving`).
    #[serde(default)]
    pub serving: ServingState,
    /// Faults of training jobs and written outputs (`crate::kube::training`).
    #[serde(default)]
    pub training: TrainingRec,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Restart {
    pub epoch: u32,
    pub since: f64,
}

impl KubeWorld {
    pub fn new(region: &str, eks_cluster: &str, eks_arn: &str, uid: &str, now: f64) -> Self {
        let mut kw = KubeWorld {
            region: region.into(),
            eks_cluster: eks_cluster.into(),
            eks_arn: eks_arn.into(),
            uid: uid.into(),
            resource_version: 0,
            objects: BTreeMap::new(),
            helm_releases: BTreeMap::new(),
            audit: VecDeque::new(),
        };
        for ns in SYSTEM_NAMESPACES {
            kw.resource_version += 1;
            let uid = uuid_from(stable_hash(&[uid, ns]), stable_hash(&[ns, uid]));
            let object = json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": { "name": ns, "uid": uid, "resourceVersion": kw.resource_version.to_string(), "labels": { "kubernetes.io/metadata.name": ns } },
                "spec": { "finalizers": ["kubernetes"] },
            });
            kw.objects.insert(
                obj_key("v1", "Namespace", None, ns),
                KubeRec {
                    object,
                    created_at: now,
                    spec_changed_at: now,
                    fails: None,
                    restarts: BTreeMap::new(),
                    serving: Default::default(),
                    training: Default::default(),
                },
            );
        }
        kw
    }

    pub(crate) fn has_namespace(&self, ns: &str) -> bool {
        self.objects.contains_key(&obj_key("v1", "Namespace", None, ns))
    }
}

/// A release as the simulated Helm stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HelmReleaseRec {
    pub name: String,
    pub namespace: String,
    /// Where the chart comes from ([`ChartSource::describe`](instantstart_core::provider::ChartSource::describe)):
    /// a repository URL, or `git@commit:subdir` of a vendored chart.
    pub repository: String,
    pub chart: String,
    pub version: String,
    pub values: Value,
    pub revision: u32,
    /// Simulated time the current revision was started.
    pub started_at: f64,
    /// Whether the previous revision was deployed (the new one is an upgrade).
    pub upgrade: bool,
    /// Set by the `ResourceFails` fault: the revision fails with this reason.
    pub fails: Option<String>,
}

/// One impersonated call as the simulated API server's audit log records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeAuditEvent {
    /// The impersonated user (`user.username` of a real audit event).
    pub user: String,
    pub groups: Vec<String>,
    pub verb: String,
    /// API group (`""` for the core group).
    pub group: String,
    /// Plural resource, with its subresource (`pods/log`).
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub allowed: bool,
}

/// Serving state of a stored object.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ServingState {
    /// `(since, replicas)`: the replicas the spec asked for from `since` on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scale: Vec<(f64, u32)>,
    /// The ScaledObject scaling this Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keda: Option<Keda>,
    /// Labels applied to pods by name (relabelled without a restart).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, Map<String, Value>>,
}

/// What KEDA knows about a Deployment it scales.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Keda {
    pub scaled_object: String,
    pub since: f64,
    pub min: u32,
    pub max: u32,
    pub threshold: f64,
    pub activation: f64,
    /// Scale-down window, seconds.
    pub window: f64,
    /// `(time, value)` of the metric.
    #[serde(default)]
    pub samples: Vec<(f64, f64)>,
}

/// What the operator did about one fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Recovery {
    /// The training processes restarted in place; the pods stayed.
    InPlace,
    /// The whole job restarted: pods recreated, training resumed from the step it reached.
    FullRestart,
    /// The restart budget was exhausted: the job failed.
    Fail,
}

/// A fault that hit a training job, and the operator's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FaultEvent {
    /// When the fault hit (simulated time).
    pub at: f64,
    /// The spec version (`KubeRec::spec_changed_at`) it hit; a new spec starts afresh.
    pub spec_at: f64,
    pub reason: String,
    /// Training steps done when it hit.
    pub step: u64,
    pub recovery: Recovery,
}

/// What the simulated training and download controllers remember of an object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TrainingRec {
    #[serde(default)]
    pub faults: Vec<FaultEvent>,
    /// The outputs (bucket objects) of the spec version of this time were written.
    #[serde(default)]
    pub outputs_written_for: Option<f64>,
}

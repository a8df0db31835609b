//! Which kinds the simulated clusters serve: the built-in and operator kinds every cluster has
//! ([`RESOURCES`]) and the custom resources of the pinned Helm charts ([`CHART_RESOURCES`]),
//! served only while their release is deployed. The HTTP API server ([`super::apiserver`]) lists
//! them in discovery; Helm ([`super::helm`]) and RBAC ([`super::rbac`]) look kinds up here.

use super::objects::str_at;
use super::{helm, kueue};
use crate::hyperpod::nodes::autoscaling_in_service;
use crate::world::{KubeWorld, World};
use instantstart_core::provider::{KEDA, KUBERAY_OPERATOR, PinnedChart};
use serde_json::Value;

/// `(apiVersion, kind, plural, short names)` of the kinds every simulated cluster serves.
/// Scope comes from the simulator's own list of cluster-scoped kinds.
pub const RESOURCES: &[(&str, &str, &str, &[&str])] = &[
    ("v1", "Namespace", "namespaces", &["ns"]),
    ("v1", "Node", "nodes", &["no"]),
    ("v1", "PersistentVolume", "persistentvolumes", &["pv"]),
    ("v1", "ConfigMap", "configmaps", &["cm"]),
    ("v1", "Secret", "secrets", &[]),
    ("v1", "ServiceAccount", "serviceaccounts", &["sa"]),
    ("v1", "Pod", "pods", &["po"]),
    ("v1", "Service", "services", &["svc"]),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", &["pvc"]),
    ("v1", "Event", "events", &["ev"]),
    ("apps/v1", "Deployment", "deployments", &["deploy"]),
    ("apps/v1", "StatefulSet", "statefulsets", &["sts"]),
    ("apps/v1", "DaemonSet", "daemonsets", &["ds"]),
    ("batch/v1", "Job", "jobs", &[]),
    ("batch/v1", "CronJob", "cronjobs", &["cj"]),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", &["hpa"]),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", &["pdb"]),
    ("networking.k8s.io/v1", "Ingress", "ingresses", &["ing"]),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", &[]),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", &[]),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", &[]),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", &[]),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", &["sc"]),
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers", &[]),
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", &["pc"]),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", &["crd", "crds"]),
    ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", "hyperpodpytorchjobs", &["hpj"]),
    ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig", "inferenceendpointconfigs", &[]),
    ("inference.sagemaker.aws.amazon.com/v1", "JumpStartModel", "jumpstartmodels", &[]),
    ("kubeflow.org/v1", "PyTorchJob", "pytorchjobs", &[]),
    ("kueue.x-k8s.io/v1beta1", "Workload", "workloads", &["wl"]),
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue", "clusterqueues", &["cq"]),
    ("kueue.x-k8s.io/v1beta1", "LocalQueue", "localqueues", &["lq"]),
    ("kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass", "workloadpriorityclasses", &[]),
    ("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "resourceflavors", &["rf"]),
];

/// `(chart, apiVersion, kind, plural, short names)` of the custom resources a pinned Helm chart
/// installs the CRDs of: a cluster serves them only while that chart's release is deployed in it
/// ([`super::chart_kind_served`]), like a real API server before and after `helm install`.
pub const CHART_RESOURCES: &[(PinnedChart, &str, &str, &str, &[&str])] = &[
    (KUBERAY_OPERATOR, "ray.io/v1", "RayJob", "rayjobs", &[]),
    (KUBERAY_OPERATOR, "ray.io/v1", "RayCluster", "rayclusters", &[]),
    (KUBERAY_OPERATOR, "ray.io/v1", "RayService", "rayservices", &[]),
    (KEDA, "keda.sh/v1alpha1", "ScaledObject", "scaledobjects", &["so"]),
];

/// Kinds that are not namespaced.
pub(crate) const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "StorageClass",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
    "CSIDriver",
    "IngressClass",
    "RuntimeClass",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "APIService",
    "VolumeAttachment",
    "HyperpodNodeClass",
    "NodePool",
    "NodeClaim",
    "ClusterQueue",
    "WorkloadPriorityClass",
    "ResourceFlavor",
];

pub(crate) fn is_cluster_scoped(kind: &str) -> bool {
    CLUSTER_SCOPED.contains(&kind)
}

/// The pinned chart whose CRDs define `api_version`/`kind` ([`CHART_RESOURCES`]).
pub(crate) fn chart_of(api_version: &str, kind: &str) -> Option<&'static instantstart_core::provider::PinnedChart> {
    CHART_RESOURCES.iter().find(|(_, a, k, _, _)| *a == api_version && *k == kind).map(|(c, ..)| c)
}

/// Whether `kw` serves `api_version`/`kind`: always, unless a pinned Helm chart provides the kind
/// ([`CHART_RESOURCES`]); then only while that chart's release is deployed in the
/// cluster ([`helm::crds_installed`]) or a CustomResourceDefinition for it was applied.
pub(crate) fn chart_kind_served(kw: &KubeWorld, api_version: &str, kind: &str, now: f64) -> bool {
    let Some(chart) = chart_of(api_version, kind) else { return true };
    if helm::crds_installed(kw, chart, now) {
        return true;
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    kw.objects.values().map(|r| &r.object).any(|crd| {
        str_at(crd, "/kind") == Some("CustomResourceDefinition")
            && str_at(crd, "/spec/group") == Some(group)
            && str_at(crd, "/spec/names/kind") == Some(kind)
            && crd.pointer("/spec/versions").and_then(Value::as_array).is_some_and(|vs| {
                vs.iter().any(|v| {
                    str_at(v, "/name") == Some(version) && v.get("served").and_then(Value::as_bool).unwrap_or(true)
                })
            })
    })
}

/// `(apiVersion, kind, plural)` of the kinds HyperPod's managed Karpenter brings.
pub(crate) const KARPENTER_RESOURCES: &[(&str, &str, &str)] = &[
    ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass", "hyperpodnodeclasses"),
    ("karpenter.sh/v1", "NodePool", "nodepools"),
    ("karpenter.sh/v1", "NodeClaim", "nodeclaims"),
];

/// Whether the cluster behind `wkey` serves `api_version`/`kind`. Karpenter's kinds exist only
/// while managed autoscaling is `InService` on one of its HyperPod clusters: HyperPod installs
/// Karpenter and its CRDs then ("The NodeClass will not reach Ready until AutoScaling.Status is
/// InService", AWS `sagemaker-hyperpod-eks-autoscaling-nodeclass`). Other kinds:
/// [`chart_kind_served`].
pub(crate) fn kind_served(w: &World, wkey: &str, api_version: &str, kind: &str, now: f64) -> bool {
    let Some(kw) = w.kube.get(wkey) else { return false };
    if api_version == kueue::KUEUE_API && kueue::KUEUE_KINDS.contains(&kind) {
        return kueue::running(w, kw, now);
    }
    if KARPENTER_RESOURCES.iter().any(|(a, k, _)| *a == api_version && *k == kind) {
        return w.hyperpod.values().any(|h| h.eks_arn == kw.eks_arn && autoscaling_in_service(h, now));
    }
    chart_kind_served(kw, api_version, kind, now)
}

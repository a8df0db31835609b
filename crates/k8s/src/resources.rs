//! From `apiVersion`/`kind` to the REST resource kube-rs needs (plural name and scope).
//!
//! [`known`] answers from a fixed table for the built-in kinds InstantStart applies and the
//! custom resources it uses (HyperPod training jobs, KubeRay, the HyperPod inference operator,
//! KEDA, Kubeflow, HyperPod's managed Karpenter, Kueue's Workloads, queues, priority classes and flavors). The table saves a discovery round trip per kind, and it makes those CRDs
//! usable against servers whose discovery does not list them (the simulator, a cluster whose
//! operator is still installing). Any other kind is resolved by discovery
//! ([`kube::discovery::pinned_kind`]) and cached per target by the adapter.

use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};

/// A resolved REST resource: what kube-rs needs to address it, and whether it is namespaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
}

impl Resolved {
    pub fn scope(&self) -> Scope {
        if self.namespaced { Scope::Namespaced } else { Scope::Cluster }
    }
}

/// `(apiVersion, kind, plural, namespaced)` of the kinds InstantStart uses.
pub const KNOWN_KINDS: &[(&str, &str, &str, bool)] = &[
    // core/v1
    ("v1", "Namespace", "namespaces", false),
    ("v1", "Node", "nodes", false),
    ("v1", "PersistentVolume", "persistentvolumes", false),
    ("v1", "ConfigMap", "configmaps", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "Pod", "pods", true),
    ("v1", "Service", "services", true),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", true),
    ("v1", "Event", "events", true),
    ("v1", "Endpoints", "endpoints", true),
    ("v1", "LimitRange", "limitranges", true),
    ("v1", "ResourceQuota", "resourcequotas", true),
    // workloads
    ("apps/v1", "Deployment", "deployments", true),
    ("apps/v1", "StatefulSet", "statefulsets", true),
    ("apps/v1", "DaemonSet", "daemonsets", true),
    ("apps/v1", "ReplicaSet", "replicasets", true),
    ("batch/v1", "Job", "jobs", true),
    ("batch/v1", "CronJob", "cronjobs", true),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", true),
    ("networking.k8s.io/v1", "Ingress", "ingresses", true),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", true),
    ("networking.k8s.io/v1", "IngressClass", "ingressclasses", false),
    // RBAC, storage, cluster configuration
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", true),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", false),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", false),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", false),
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers", false),
    ("scheduling.k8s.io/v1", "PriorityClass", "priorityclasses", false),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", false),
    // custom resources of the operators InstantStart drives
    ("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", "hyperpodpytorchjobs", true),
    ("ray.io/v1", "RayJob", "rayjobs", true),
    ("ray.io/v1", "RayCluster", "rayclusters", true),
    ("ray.io/v1", "RayService", "rayservices", true),
    ("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig", "inferenceendpointconfigs", true),
    ("inference.sagemaker.aws.amazon.com/v1", "JumpStartModel", "jumpstartmodels", true),
    ("kubeflow.org/v1", "PyTorchJob", "pytorchjobs", true),
    ("keda.sh/v1alpha1", "ScaledObject", "scaledobjects", true),
    // Kueue (the HyperPod task governance add-on): read for job admission
    ("kueue.x-k8s.io/v1beta1", "Workload", "workloads", true),
    ("kueue.x-k8s.io/v1beta1", "ClusterQueue", "clusterqueues", false),
    ("kueue.x-k8s.io/v1beta1", "LocalQueue", "localqueues", true),
    ("kueue.x-k8s.io/v1beta1", "WorkloadPriorityClass", "workloadpriorityclasses", false),
    ("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "resourceflavors", false),
    // HyperPod's managed Karpenter (cluster-scoped; served once AutoScaling is InService)
    ("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass", "hyperpodnodeclasses", false),
    ("karpenter.sh/v1", "NodePool", "nodepools", false),
];

/// Splits an `apiVersion` into group and version (`v1` → `("", "v1")`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", api_version),
    }
}

/// The group/version/kind of `apiVersion` + `kind`.
pub fn gvk(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = split_api_version(api_version);
    GroupVersionKind::gvk(group, version, kind)
}

/// The resource of a kind in [`KNOWN_KINDS`], without asking the server.
pub fn known(api_version: &str, kind: &str) -> Option<Resolved> {
    KNOWN_KINDS.iter().find(|(a, k, _, _)| *a == api_version && *k == kind).map(|(_, _, plural, namespaced)| Resolved {
        resource: ApiResource::from_gvk_with_plural(&gvk(api_version, kind), plural),
        namespaced: *namespaced,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_custom_kinds_resolve() {
        let pod = known("v1", "Pod").unwrap();
        assert_eq!((pod.resource.group.as_str(), pod.resource.plural.as_str(), pod.namespaced), ("", "pods", true));
        let job = known("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob").unwrap();
        assert_eq!(job.resource.group, "sagemaker.amazonaws.com");
        assert_eq!(job.resource.version, "v1");
        assert_eq!(job.resource.plural, "hyperpodpytorchjobs");
        assert!(!known("v1", "Node").unwrap().namespaced);
        assert!(known("example.com/v1", "Widget").is_none());
        assert_eq!(split_api_version("ray.io/v1"), ("ray.io", "v1"));
    }
}

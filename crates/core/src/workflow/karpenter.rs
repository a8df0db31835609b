//! The Kubernetes side of HyperPod's managed (Karpenter) autoscaling: one
//! `karpenter.sagemaker.amazonaws.com/v1` `HyperpodNodeClass` naming the instance groups
//! Karpenter may scale, and one `karpenter.sh/v1` `NodePool` referencing it.
//!
//! AWS (`sagemaker-hyperpod-eks-autoscaling-nodeclass`, `…-nodepool`): HyperPod installs and
//! runs Karpenter once `AutoScaling` is `InService`, but ships no NodeClass or NodePool — without
//! them nothing scales. The NodeClass lists at most 10 pre-created instance groups
//! (`spec.instanceGroups`), groups "must start with 0 nodes", and only on-demand (or Spot)
//! groups without deep health checks qualify (training-plan capacity is not supported). The
//! NodePool's `template.spec.nodeClassRef` is `{group, kind: HyperpodNodeClass, name}`.
//!
//! # Guarantees
//!
//! * The objects are built here from a typed [`KarpenterSpec`] (never from text), and carry
//!   `app.kubernetes.io/managed-by=instantstart`, the cluster label and the
//!   [`ANNOTATION_GROUPS`] mode (`all` — every group of the cluster, new ones included — or
//!   `named`). `instantstart-recipes` re-exports the builders and checks the NodePool against
//!   the vendored upstream CRD.
//! * [`ApplyKarpenter`] observes before it applies: objects already equal to the wanted ones
//!   are adopted, objects not managed by InstantStart are refused (`Foreign`), so a restarted
//!   step never applies twice what is already there. [`RemoveKarpenter`] deletes only objects
//!   labelled as ours, NodePool first.
//! * [`sync_group`] keeps the NodeClass's list in step with instance-group changes: a group
//!   is added (mode `all`) or removed (either mode); nothing happens when autoscaling is off
//!   or the NodeClass is absent.

use crate::engine::{Observation, Progress, StepContext, StepError, StepExecutor};
use crate::operation::ResourceRef;
use crate::provider::*;
use crate::spec::CapacitySpec;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// API version and kind of HyperPod's Karpenter node class.
pub const NODE_CLASS_API: &str = "karpenter.sagemaker.amazonaws.com/v1";
pub const NODE_CLASS_GROUP: &str = "karpenter.sagemaker.amazonaws.com";
pub const NODE_CLASS_KIND: &str = "HyperpodNodeClass";
/// API version and kind of Karpenter's node pool.
pub const NODE_POOL_API: &str = "karpenter.sh/v1";
pub const NODE_POOL_KIND: &str = "NodePool";
/// Name of both objects (cluster-scoped; one HyperPod cluster per EKS cluster).
pub const KARPENTER_NAME: &str = "instantstart";
pub use crate::labels::{ANNOTATION_GROUPS, LABEL_CLUSTER};
/// At most this many instance groups in one `HyperpodNodeClass` (AWS: "MaxItems: 10").
pub const MAX_NODE_CLASS_GROUPS: usize = 10;
/// How long an empty Karpenter node stays before it is consolidated away.
pub const CONSOLIDATE_AFTER: &str = "5m";

/// What the Karpenter objects say: the managed groups and how they were chosen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KarpenterSpec {
    pub cluster: String,
    /// Instance groups Karpenter may scale (1–10).
    pub instance_groups: Vec<String>,
    /// Chosen as "every group": groups added later join the NodeClass.
    pub all_groups: bool,
}

fn labels(cluster: &str) -> Value {
    json!({ LABEL_MANAGED_BY: MANAGED_BY, LABEL_CLUSTER: cluster })
}

fn mode(all: bool) -> &'static str {
    if all { "all" } else { "named" }
}

/// The `HyperpodNodeClass` of `spec`.
pub fn node_class(spec: &KarpenterSpec) -> Value {
    json!({
        "apiVersion": NODE_CLASS_API,
        "kind": NODE_CLASS_KIND,
        "metadata": {
            "name": KARPENTER_NAME,
            "labels": labels(&spec.cluster),
            "annotations": { ANNOTATION_GROUPS: mode(spec.all_groups) },
        },
        "spec": { "instanceGroups": spec.instance_groups },
    })
}

/// The `NodePool` drawing on [`node_class`]: any instance type of its groups, nodes never
/// expire, empty nodes consolidated after [`CONSOLIDATE_AFTER`].
pub fn node_pool(spec: &KarpenterSpec) -> Value {
    json!({
        "apiVersion": NODE_POOL_API,
        "kind": NODE_POOL_KIND,
        "metadata": { "name": KARPENTER_NAME, "labels": labels(&spec.cluster) },
        "spec": {
            "template": {
                "metadata": { "labels": { LABEL_MANAGED_BY: MANAGED_BY } },
                "spec": {
                    "nodeClassRef": { "group": NODE_CLASS_GROUP, "kind": NODE_CLASS_KIND, "name": KARPENTER_NAME },
                    "expireAfter": "Never",
                    "requirements": [{ "key": "node.kubernetes.io/instance-type", "operator": "Exists" }],
                },
            },
            "disruption": { "consolidationPolicy": "WhenEmpty", "consolidateAfter": CONSOLIDATE_AFTER },
        },
    })
}

pub fn node_class_ref() -> ObjectRef {
    ObjectRef {
        api_version: NODE_CLASS_API.into(),
        kind: NODE_CLASS_KIND.into(),
        namespace: None,
        name: KARPENTER_NAME.into(),
    }
}

pub fn node_pool_ref() -> ObjectRef {
    ObjectRef {
        api_version: NODE_POOL_API.into(),
        kind: NODE_POOL_KIND.into(),
        namespace: None,
        name: KARPENTER_NAME.into(),
    }
}

/// Why a group cannot be managed by Karpenter, if it cannot (AWS NodeClass considerations).
pub fn ineligible(g: &HyperPodInstanceGroupStatus) -> Option<&'static str> {
    match g.capacity {
        CapacitySpec::TrainingPlan { .. } => {
            Some("uses a training plan; HyperPod autoscaling supports on-demand and Spot groups only")
        }
        CapacitySpec::OnDemand | CapacitySpec::Spot => None,
    }
}

/// The groups a NodeClass lists now (`None`: no NodeClass). A missing kind (autoscaling off,
/// CRD not served) reads as absent.
pub async fn current_groups(
    kube: &dyn KubeApi,
    target: &KubeTarget,
) -> Result<Option<(Vec<String>, bool, bool)>, ProviderError> {
    let obj = match kube.get(target, &node_class_ref()).await {
        Ok(o) => o,
        Err(e) if e.kind == ProviderErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    Ok(obj.map(|o| {
        let groups =
            o.0.pointer("/spec/instanceGroups")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(String::from).collect())
                .unwrap_or_default();
        let all = o.0.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_GROUPS)).and_then(Value::as_str)
            == Some("all");
        let ours = o.label(LABEL_MANAGED_BY) == Some(MANAGED_BY);
        (groups, all, ours)
    }))
}

/// Where the objects live and whose they are.
pub struct KarpenterTarget {
    pub kube: Arc<dyn KubeApi>,
    pub target: KubeTarget,
    pub cluster: String,
}

impl KarpenterTarget {
    async fn get(&self, r: &ObjectRef) -> Result<Option<KubeObject>, StepError> {
        match self.kube.get(&self.target, r).await {
            Ok(o) => Ok(o),
            Err(e) if e.kind == ProviderErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

fn resource() -> ResourceRef {
    ResourceRef { kind: "karpenter".into(), id: format!("{NODE_CLASS_KIND}/{KARPENTER_NAME}"), arn: None }
}

fn spec_matches(have: &KubeObject, want: &Value) -> bool {
    have.0.get("spec") == want.get("spec")
        && have.0.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_GROUPS))
            == want.pointer("/metadata/annotations").and_then(|a| a.get(ANNOTATION_GROUPS))
}

/// Applies the NodeClass and the NodePool of `spec` (feature step `karpenter`).
pub struct ApplyKarpenter {
    pub at: KarpenterTarget,
    pub spec: KarpenterSpec,
}

#[async_trait]
impl StepExecutor for ApplyKarpenter {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        let class = self.at.get(&node_class_ref()).await?;
        let pool = self.at.get(&node_pool_ref()).await?;
        for o in [&class, &pool].into_iter().flatten() {
            if o.label(LABEL_MANAGED_BY) != Some(MANAGED_BY) {
                return Ok(Observation::Foreign {
                    reason: format!("{} {KARPENTER_NAME} exists and is not managed by InstantStart", o.0["kind"]),
                });
            }
        }
        let done = class.is_some_and(|c| spec_matches(&c, &node_class(&self.spec)))
            && pool.is_some_and(|p| spec_matches(&p, &node_pool(&self.spec)));
        Ok(if done { Observation::Exists(resource()) } else { Observation::Absent })
    }

    /// Applies only the objects that differ from the wanted ones (a retry after a lost
    /// response re-applies nothing that already landed).
    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        for (r, want) in [(node_class_ref(), node_class(&self.spec)), (node_pool_ref(), node_pool(&self.spec))] {
            if !self.at.get(&r).await?.is_some_and(|have| spec_matches(&have, &want)) {
                self.at.kube.apply(&self.at.target, &KubeObject(want)).await?;
            }
        }
        Ok(resource())
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        let class = self.at.get(&node_class_ref()).await?;
        let pool = self.at.get(&node_pool_ref()).await?;
        Ok(match (class, pool) {
            (Some(_), Some(_)) => Progress::Done(json!({
                "node_class": KARPENTER_NAME,
                "node_pool": KARPENTER_NAME,
                "instance_groups": self.spec.instance_groups,
                "all_groups": self.spec.all_groups,
            })),
            _ => Progress::Waiting { detail: "waiting for the HyperpodNodeClass and NodePool to be stored".into() },
        })
    }
}

/// Deletes the NodePool, then the NodeClass (feature step `remove_karpenter`, before
/// `autoscaling_off`). Objects not labelled as ours are left alone.
pub struct RemoveKarpenter {
    pub at: KarpenterTarget,
}

impl RemoveKarpenter {
    async fn ours(&self) -> Result<Vec<ObjectRef>, StepError> {
        let mut out = Vec::new();
        for r in [node_pool_ref(), node_class_ref()] {
            if let Some(o) = self.at.get(&r).await?
                && o.label(LABEL_MANAGED_BY) == Some(MANAGED_BY)
            {
                out.push(r);
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl StepExecutor for RemoveKarpenter {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(if self.ours().await?.is_empty() { Observation::Exists(resource()) } else { Observation::Absent })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        for r in self.ours().await? {
            self.at.kube.delete(&self.at.target, &r).await?;
        }
        Ok(resource())
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(if self.ours().await?.is_empty() {
            Progress::Done(
                json!({ "removed": [format!("{NODE_POOL_KIND}/{KARPENTER_NAME}"), format!("{NODE_CLASS_KIND}/{KARPENTER_NAME}")] }),
            )
        } else {
            Progress::Waiting { detail: "waiting for the Karpenter objects to be deleted".into() }
        })
    }
}

/// Whether the NodeClass needs `group` added (`present`) or removed, and the new list.
/// `None`: nothing to do (no NodeClass of ours, autoscaling off, mode `named` for an add, or
/// already in step).
pub fn synced(current: Option<(Vec<String>, bool, bool)>, group: &str, present: bool) -> Option<Vec<String>> {
    let (mut groups, all, ours) = current?;
    if !ours {
        return None;
    }
    let has = groups.iter().any(|g| g == group);
    match (present, has) {
        (true, false) if all && groups.len() < MAX_NODE_CLASS_GROUPS => {
            groups.push(group.to_string());
            Some(groups)
        }
        (false, true) if groups.len() > 1 => {
            groups.retain(|g| g != group);
            Some(groups)
        }
        _ => None,
    }
}

/// Keeps the NodeClass in step with one instance group (instance-group add: `present`, before
/// the UpdateCluster that deletes a group: not `present`). Idempotent: re-running after a
/// crash finds the list already in step.
pub struct SyncGroup {
    pub at: KarpenterTarget,
    pub group: String,
    pub present: bool,
}

impl SyncGroup {
    async fn wanted(&self) -> Result<Option<(Vec<String>, bool)>, StepError> {
        let cur = current_groups(self.at.kube.as_ref(), &self.at.target).await?;
        let all = cur.as_ref().is_some_and(|c| c.1);
        Ok(synced(cur, &self.group, self.present).map(|g| (g, all)))
    }

    fn r(&self) -> ResourceRef {
        ResourceRef {
            kind: "karpenter".into(),
            id: format!("{NODE_CLASS_KIND}/{KARPENTER_NAME}#{}", self.group),
            arn: None,
        }
    }
}

#[async_trait]
impl StepExecutor for SyncGroup {
    async fn observe(&self, _cx: &StepContext<'_>) -> Result<Observation, StepError> {
        Ok(match self.wanted().await? {
            None => Observation::Exists(self.r()),
            Some(_) => Observation::Absent,
        })
    }

    async fn submit(&self, _cx: &StepContext<'_>) -> Result<ResourceRef, StepError> {
        if let Some((groups, all)) = self.wanted().await? {
            let spec = KarpenterSpec { cluster: self.at.cluster.clone(), instance_groups: groups, all_groups: all };
            self.at.kube.apply(&self.at.target, &KubeObject(node_class(&spec))).await?;
        }
        Ok(self.r())
    }

    async fn poll(&self, _cx: &StepContext<'_>, _r: &ResourceRef) -> Result<Progress, StepError> {
        Ok(match self.wanted().await? {
            None => Progress::Done(json!({ "instance_group": self.group, "in_node_class": self.present })),
            Some(_) => Progress::Waiting { detail: "waiting for the HyperpodNodeClass update".into() },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_class_lists_the_groups_and_the_pool_references_it() {
        let spec =
            KarpenterSpec { cluster: "demo".into(), instance_groups: vec!["a".into(), "b".into()], all_groups: true };
        let c = node_class(&spec);
        assert_eq!(c["spec"], json!({ "instanceGroups": ["a", "b"] }));
        assert_eq!(c["metadata"]["annotations"][ANNOTATION_GROUPS], "all");
        let p = node_pool(&spec);
        assert_eq!(
            p["spec"]["template"]["spec"]["nodeClassRef"],
            json!({ "group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass", "name": KARPENTER_NAME })
        );
    }

    #[test]
    fn sync_adds_only_in_all_mode_and_removes_in_both() {
        let g = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        #[allow(clippy::type_complexity)] // a table test: one tuple per row
        let cases: Vec<(Option<(Vec<String>, bool, bool)>, &str, bool, Option<Vec<String>>)> = vec![
            (None, "x", true, None),
            (Some((g(&["a"]), true, true)), "x", true, Some(g(&["a", "x"]))),
            (Some((g(&["a"]), false, true)), "x", true, None),
            (Some((g(&["a", "x"]), false, true)), "x", false, Some(g(&["a"]))),
            (Some((g(&["a", "x"]), true, true)), "x", true, None),
            (Some((g(&["a"]), true, false)), "x", true, None),
            (Some((g(&["a"]), true, true)), "z", false, None),
        ];
        for (i, (cur, group, present, want)) in cases.into_iter().enumerate() {
            assert_eq!(synced(cur, group, present), want, "case {i}");
        }
    }
}

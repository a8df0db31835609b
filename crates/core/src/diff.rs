//! Explicit diffs: the client sends only the fields the user changed, the backend compares them
//! with the real state and produces a [`Plan`]. An empty plan means "already in this state":
//! no operation is created and no provider is called.

use crate::spec::{InstanceGroupSpec, ManagedFeatures, NodeRecovery, TieredCheckpointing, check_instance_group_update};
use crate::validate::{Findings, Validate, ValidationError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One field that would change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Change {
    pub field: String,
    pub from: Value,
    pub to: Value,
}

/// The changes a request would make to a target. Empty = no-op.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct Plan {
    pub target: String,
    pub changes: Vec<Change>,
}

impl Plan {
    pub fn new(target: impl Into<String>) -> Self {
        Plan { target: target.into(), changes: Vec::new() }
    }

    pub fn is_noop(&self) -> bool {
        self.changes.is_empty()
    }

    /// Records `field: from -> to` when the two differ.
    pub fn compare<T: Serialize + PartialEq>(&mut self, field: &str, from: &T, to: &T) {
        if from != to {
            self.changes.push(Change {
                field: field.to_string(),
                from: serde_json::to_value(from).unwrap_or(Value::Null),
                to: serde_json::to_value(to).unwrap_or(Value::Null),
            });
        }
    }

    /// Human-readable diff, one `field: from -> to` line per change.
    pub fn render(&self) -> String {
        if self.is_noop() {
            return format!("{}: already in this state", self.target);
        }
        self.changes.iter().map(|c| format!("{}: {} -> {}", c.field, c.from, c.to)).collect::<Vec<_>>().join("\n")
    }
}

/// Tiered checkpointing as a patch: turn it on or off, optionally with a new memory share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TieredCheckpointingPatch {
    pub enabled: bool,
    #[serde(default)]
    pub memory_percent: Option<u8>,
}

/// Only the managed-feature fields the user changed; absent fields stay as they are.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FeaturesPatch {
    #[serde(default)]
    pub training_operator: Option<bool>,
    #[serde(default)]
    pub inference_operator: Option<bool>,
    #[serde(default)]
    pub tiered_checkpointing: Option<TieredCheckpointingPatch>,
    #[serde(default)]
    pub managed_autoscaling: Option<bool>,
    /// With `managed_autoscaling: true`: the instance groups Karpenter may scale (1–10 names
    /// of the cluster's groups). Absent: every eligible group, and groups added later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_instance_groups: Option<Vec<String>>,
    /// HyperPod node recovery: `Automatic` or `None` (sent to UpdateCluster as `NodeRecovery`).
    /// Managed autoscaling needs `Automatic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_recovery: Option<NodeRecovery>,
    /// HyperPod's observability add-on with its Amazon Managed Service for Prometheus workspace,
    /// IAM role and Pod Identity association. Off removes the add-on, the association and the
    /// role and keeps the workspace (its metric history); deleting the cluster deletes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observability: Option<bool>,
}

/// Default memory share for tiered checkpointing when enabling without one.
pub const DEFAULT_TIERED_MEMORY_PERCENT: u8 = 20;

impl FeaturesPatch {
    /// The desired state: `actual` with this patch applied.
    pub fn apply_to(&self, actual: &ManagedFeatures) -> ManagedFeatures {
        let mut d = actual.clone();
        if let Some(v) = self.training_operator {
            d.training_operator = v;
        }
        if let Some(v) = self.inference_operator {
            d.inference_operator = v;
        }
        if let Some(v) = self.managed_autoscaling {
            d.managed_autoscaling = v;
        }
        if let Some(v) = self.node_recovery {
            d.node_recovery = v;
        }
        if let Some(v) = self.observability {
            d.observability = v;
        }
        if let Some(tc) = self.tiered_checkpointing {
            d.tiered_checkpointing = tc.enabled.then(|| TieredCheckpointing {
                memory_percent: tc
                    .memory_percent
                    .or(actual.tiered_checkpointing.map(|t| t.memory_percent))
                    .unwrap_or(DEFAULT_TIERED_MEMORY_PERCENT),
            });
        }
        d
    }
}

impl Validate for FeaturesPatch {
    fn validate(&self, f: &mut Findings) {
        if let Some(groups) = &self.autoscaling_instance_groups {
            let field = "autoscaling_instance_groups";
            if self.managed_autoscaling != Some(true) {
                f.push(field, "only meaningful with managed_autoscaling: true");
            }
            if groups.is_empty() {
                f.push(field, "must name at least one instance group (omit it for every group)");
            }
            if groups.len() > crate::workflow::karpenter::MAX_NODE_CLASS_GROUPS {
                f.push(
                    field,
                    format!(
                        "must name at most {} instance groups (a HyperpodNodeClass lists at most {})",
                        crate::workflow::karpenter::MAX_NODE_CLASS_GROUPS,
                        crate::workflow::karpenter::MAX_NODE_CLASS_GROUPS
                    ),
                );
            }
            for (i, g) in groups.iter().enumerate() {
                if let Err(rule) = crate::names::hyperpod_name(g) {
                    f.push(&format!("{field}[{i}]"), rule);
                } else if groups[..i].contains(g) {
                    f.push(&format!("{field}[{i}]"), format!("instance group {g} is named twice"));
                }
            }
        }
        if let Some(tc) = &self.tiered_checkpointing
            && let Some(p) = tc.memory_percent
        {
            if !(1..=100).contains(&p) {
                f.push("tiered_checkpointing.memory_percent", "must be between 1 and 100");
            }
            if !tc.enabled {
                f.push("tiered_checkpointing.memory_percent", "only meaningful when enabling");
            }
        }
    }
}

/// Plans a managed-features change against the cluster's real state.
pub fn plan_features(target: &str, patch: &FeaturesPatch, actual: &ManagedFeatures) -> Result<Plan, ValidationError> {
    patch.check()?;
    let desired = patch.apply_to(actual);
    let mut plan = Plan::new(target);
    plan.compare("training_operator", &actual.training_operator, &desired.training_operator);
    plan.compare("inference_operator", &actual.inference_operator, &desired.inference_operator);
    plan.compare("tiered_checkpointing", &actual.tiered_checkpointing, &desired.tiered_checkpointing);
    plan.compare("managed_autoscaling", &actual.managed_autoscaling, &desired.managed_autoscaling);
    plan.compare("node_recovery", &actual.node_recovery, &desired.node_recovery);
    plan.compare("observability", &actual.observability, &desired.observability);
    // HyperPod autoscaling needs NodeRecovery Automatic (sagemaker-hyperpod-eks-autoscaling,
    // Prerequisites): the end state must keep that true, whichever of the two changes.
    if desired.managed_autoscaling
        && desired.node_recovery != NodeRecovery::Automatic
        && (plan.changes.iter().any(|c| c.field == "node_recovery" || c.field == "managed_autoscaling"))
    {
        return Err(ValidationError::unprocessable(
            "node_recovery",
            "managed autoscaling needs node recovery Automatic; turn managed_autoscaling off first (or in the same request)",
        ));
    }
    Ok(plan)
}

/// Plans an instance group change: only changed fields are compared, immutable fields are
/// rejected with 422-kind findings before anything is called.
pub fn plan_instance_group(
    target: &str,
    actual: &InstanceGroupSpec,
    desired: &InstanceGroupSpec,
) -> Result<Plan, ValidationError> {
    // Immutable fields first: changing one is the decisive error (422), whatever else is wrong.
    check_instance_group_update(actual, desired)?;
    desired.check()?;
    let mut plan = Plan::new(target);
    plan.compare("count", &actual.count, &desired.count);
    plan.compare("ebs_volume_gb", &actual.ebs_volume_gb, &desired.ebs_volume_gb);
    plan.compare("deep_health_checks", &actual.deep_health_checks, &desired.deep_health_checks);
    plan.compare("lifecycle_script", &actual.lifecycle_script, &desired.lifecycle_script);
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_state_is_a_noop() {
        let actual = ManagedFeatures { training_operator: true, ..Default::default() };
        let patch = FeaturesPatch { training_operator: Some(true), ..Default::default() };
        let plan = plan_features("demo", &patch, &actual).unwrap();
        assert!(plan.is_noop());
        assert_eq!(plan.render(), "demo: already in this state");
    }

    #[test]
    fn absent_fields_are_untouched() {
        let actual = ManagedFeatures {
            training_operator: true,
            inference_operator: true,
            tiered_checkpointing: Some(TieredCheckpointing { memory_percent: 30 }),
            managed_autoscaling: false,
            node_recovery: NodeRecovery::Automatic,
            observability: true,
        };
        let patch = FeaturesPatch { managed_autoscaling: Some(true), ..Default::default() };
        let plan = plan_features("demo", &patch, &actual).unwrap();
        assert_eq!(plan.render(), "managed_autoscaling: false -> true");
    }

    #[test]
    fn observability_is_an_explicit_diff() {
        let off = ManagedFeatures::default();
        let on = FeaturesPatch { observability: Some(true), ..Default::default() };
        assert_eq!(plan_features("c", &on, &off).unwrap().render(), "observability: false -> true");
        let already = ManagedFeatures { observability: true, ..Default::default() };
        assert!(plan_features("c", &on, &already).unwrap().is_noop());
        let not_sent = serde_json::to_value(FeaturesPatch::default()).unwrap();
        assert!(not_sent.get("observability").is_none(), "an absent toggle is not serialized: {not_sent}");
    }

    #[test]
    fn tiered_checkpointing_keeps_or_defaults_memory() {
        let off = ManagedFeatures::default();
        let on = FeaturesPatch {
            tiered_checkpointing: Some(TieredCheckpointingPatch { enabled: true, memory_percent: None }),
            ..Default::default()
        };
        assert_eq!(
            plan_features("c", &on, &off).unwrap().render(),
            "tiered_checkpointing: null -> {\"memory_percent\":20}"
        );
        let bad = FeaturesPatch {
            tiered_checkpointing: Some(TieredCheckpointingPatch { enabled: false, memory_percent: Some(0) }),
            ..Default::default()
        };
        let err = plan_features("c", &bad, &off).unwrap_err();
        assert_eq!(err.findings.len(), 2);
    }

    #[test]
    fn autoscaling_instance_groups_rules() {
        let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let eleven: Vec<String> = (0..11).map(|i| format!("g{i}")).collect();
        #[allow(clippy::type_complexity)] // a table test: one tuple per row
        let cases: Vec<(Option<bool>, Option<Vec<String>>, &[&str])> = vec![
            (Some(true), names(&["burst", "spot"]), &[]),
            (Some(true), None, &[]),
            (None, names(&["burst"]), &["autoscaling_instance_groups"]),
            (Some(false), names(&["burst"]), &["autoscaling_instance_groups"]),
            (Some(true), names(&[]), &["autoscaling_instance_groups"]),
            (Some(true), Some(eleven), &["autoscaling_instance_groups"]),
            (
                Some(true),
                names(&["burst", "Bad_Name", "burst"]),
                &["autoscaling_instance_groups[1]", "autoscaling_instance_groups[2]"],
            ),
        ];
        for (i, (on, groups, want)) in cases.into_iter().enumerate() {
            let p =
                FeaturesPatch { managed_autoscaling: on, autoscaling_instance_groups: groups, ..Default::default() };
            let got: Vec<String> =
                p.check().err().map(|e| e.findings.into_iter().map(|f| f.field).collect()).unwrap_or_default();
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn node_recovery_is_an_explicit_diff_and_autoscaling_keeps_it_automatic() {
        let on = ManagedFeatures::default();
        let none = FeaturesPatch { node_recovery: Some(NodeRecovery::None), ..Default::default() };
        assert_eq!(plan_features("c", &none, &on).unwrap().render(), "node_recovery: \"Automatic\" -> \"None\"");
        let already = ManagedFeatures { node_recovery: NodeRecovery::None, ..Default::default() };
        assert!(plan_features("c", &none, &already).unwrap().is_noop());
        // (actual autoscaling, patch autoscaling, patch recovery, refused)
        let cases = [
            (true, None, Some(NodeRecovery::None), true),
            (true, Some(false), Some(NodeRecovery::None), false),
            (false, Some(true), Some(NodeRecovery::None), true),
            (false, Some(true), Some(NodeRecovery::Automatic), false),
            (true, Some(true), Some(NodeRecovery::Automatic), false),
        ];
        for (i, (auto, patch_auto, recovery, refused)) in cases.into_iter().enumerate() {
            let actual = ManagedFeatures { managed_autoscaling: auto, ..Default::default() };
            let p = FeaturesPatch { managed_autoscaling: patch_auto, node_recovery: recovery, ..Default::default() };
            match plan_features("c", &p, &actual) {
                Err(e) => {
                    assert!(refused, "case {i}: {e:?}");
                    assert_eq!(e.findings[0].field, "node_recovery", "case {i}");
                    assert_eq!(e.kind, crate::validate::ValidationKind::Unprocessable, "case {i}");
                }
                Ok(_) => assert!(!refused, "case {i}"),
            }
        }
        let p: FeaturesPatch = serde_json::from_str(r#"{"node_recovery":"None"}"#).unwrap();
        assert_eq!(p.node_recovery, Some(NodeRecovery::None));
    }

    #[test]
    fn wire_shape_rejects_unknown_fields() {
        assert!(serde_json::from_str::<FeaturesPatch>(r#"{"training_operator":true,"gpu":1}"#).is_err());
        let p: FeaturesPatch = serde_json::from_str(r#"{"inference_operator":false}"#).unwrap();
        assert_eq!(p.training_operator, None);
    }
}

// Managed features (Advanced features panel): the explicit-diff contract. The client sends only
// the fields the user changed (a FeaturesPatch); the backend compares with the real state.

export const FEATURES = [
  {
    key: 'training_operator',
    label: 'HyperPod training operator',
    help: 'EKS add-on that runs HyperPodPyTorchJob resources with process-level recovery and hung-job detection.',
  },
  {
    key: 'inference_operator',
    label: 'HyperPod inference operator',
    help: 'Hands the lifecycle of managed inference endpoints to HyperPod (tiered KV cache, intelligent routing).',
  },
  {
    key: 'tiered_checkpointing',
    label: 'Managed tiered checkpointing',
    help: 'Checkpoints to instance memory first, then S3. Provisions service account → IAM role → OIDC trust → binding.',
  },
  {
    key: 'managed_autoscaling',
    label: 'Managed autoscaling',
    help: 'Karpenter-based autoscaling operated by AWS; launches nodes from HyperPod instance groups, from zero (a HyperpodNodeClass + NodePool name the groups).',
  },
  {
    key: 'observability',
    label: 'HyperPod observability',
    help: 'EKS add-on collecting GPU, node, training and inference metrics into an Amazon Managed Service for Prometheus workspace of the cluster (with its IAM role and Pod Identity). Off keeps the workspace and its metric history; deleting the cluster deletes it. Grafana is not created.',
  },
];

export const DEFAULT_MEMORY_PERCENT = 20;

/** HyperPod node recovery (UpdateCluster NodeRecovery): a choice, not a switch. */
export const NODE_RECOVERY = {
  key: 'node_recovery',
  label: 'Node recovery',
  help: 'Automatic: HyperPod reboots or replaces nodes that fail health checks. None: faulty nodes are only labelled; you reboot or replace them. Managed autoscaling needs Automatic.',
  values: ['Automatic', 'None'],
};

/** The actual state from GET …/features, whatever envelope it comes in. */
export function normalizeFeatures(raw) {
  const src = raw && typeof raw === 'object' ? (raw.actual || raw.features || raw.state || raw) : {};
  const tc = src.tiered_checkpointing;
  let tiered = null;
  if (tc && typeof tc === 'object' && tc.enabled !== false) {
    tiered = { memory_percent: Number(tc.memory_percent ?? DEFAULT_MEMORY_PERCENT) };
  } else if (tc === true) {
    tiered = { memory_percent: DEFAULT_MEMORY_PERCENT };
  }
  return {
    training_operator: !!src.training_operator,
    inference_operator: !!src.inference_operator,
    tiered_checkpointing: tiered,
    managed_autoscaling: !!src.managed_autoscaling,
    // The HyperpodNodeClass's instance groups, when autoscaling is on (null: unknown / every group).
    autoscaling_instance_groups: Array.isArray(src.autoscaling_instance_groups) ? src.autoscaling_instance_groups.map(String) : null,
    node_recovery: src.node_recovery === 'None' ? 'None' : 'Automatic',
    observability: !!src.observability,
  };
}

/** "a, b ,c" → ['a', 'b', 'c'] (empty → null: every instance group). */
export function parseGroups(text) {
  const list = String(text || '').split(',').map((s) => s.trim()).filter(Boolean);
  return list.length ? list : null;
}

const sameList = (a, b) => Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => x === b[i]);

/** Only what changed between `actual` and `desired` (both normalized), as a FeaturesPatch. */
export function featuresPatch(actual, desired) {
  const patch = {};
  for (const key of ['training_operator', 'inference_operator', 'managed_autoscaling', 'observability']) {
    if (!!desired[key] !== !!actual[key]) patch[key] = !!desired[key];
  }
  // Named instance groups for Karpenter: sent with managed_autoscaling: true when turning it on,
  // or when autoscaling stays on and the list changes (the NodeClass is re-applied).
  const groups = desired.autoscaling_instance_groups;
  if (desired.managed_autoscaling && Array.isArray(groups) && groups.length
      && (!actual.managed_autoscaling || !sameList(groups, actual.autoscaling_instance_groups))) {
    patch.managed_autoscaling = true;
    patch.autoscaling_instance_groups = groups;
  }
  if (desired.node_recovery && desired.node_recovery !== actual.node_recovery) {
    patch.node_recovery = desired.node_recovery;
  }
  const a = actual.tiered_checkpointing;
  const d = desired.tiered_checkpointing;
  if (!a && d) {
    patch.tiered_checkpointing = { enabled: true, memory_percent: d.memory_percent };
  } else if (a && !d) {
    patch.tiered_checkpointing = { enabled: false };
  } else if (a && d && a.memory_percent !== d.memory_percent) {
    patch.tiered_checkpointing = { enabled: true, memory_percent: d.memory_percent };
  }
  return patch;
}

const show = (key, v) => {
  if (key === 'tiered_checkpointing') return v ? `on, ${v.memory_percent}% of memory` : 'off';
  if (key === 'autoscaling_instance_groups') return Array.isArray(v) ? v.join(', ') : 'none';
  if (key === NODE_RECOVERY.key) return String(v);
  return v ? 'on' : 'off';
};

/** Human lines of a patch against `actual`: [{field, label, from, to}]. */
export function describePatch(actual, patch) {
  const lines = [];
  for (const f of FEATURES) {
    if (!(f.key in patch)) continue;
    let to = patch[f.key];
    if (f.key === 'tiered_checkpointing') {
      to = to.enabled
        ? { memory_percent: to.memory_percent ?? actual.tiered_checkpointing?.memory_percent ?? DEFAULT_MEMORY_PERCENT }
        : null;
    }
    lines.push({ field: f.key, label: f.label, from: show(f.key, actual[f.key]), to: show(f.key, to) });
  }
  if (patch.node_recovery) {
    lines.push({ field: NODE_RECOVERY.key, label: NODE_RECOVERY.label, from: actual.node_recovery, to: patch.node_recovery });
  }
  if (patch.autoscaling_instance_groups) {
    lines.push({
      field: 'autoscaling_instance_groups',
      label: 'Instance groups Karpenter may scale',
      from: (actual.autoscaling_instance_groups || []).join(', ') || (actual.managed_autoscaling ? 'every group' : '—'),
      to: patch.autoscaling_instance_groups.join(', '),
    });
  }
  return lines;
}

/** Server plan ({changes:[{field, from, to}]}) as human lines, when the backend returns one. */
export function describeServerChanges(plan) {
  const changes = plan && Array.isArray(plan.changes) ? plan.changes : null;
  if (!changes) return null;
  return changes.map((c) => {
    const f = FEATURES.find((x) => x.key === c.field);
    const label = f ? f.label
      : c.field === 'autoscaling_instance_groups' ? 'Instance groups Karpenter may scale'
        : c.field === NODE_RECOVERY.key ? NODE_RECOVERY.label : c.field;
    return { field: c.field, label, from: show(c.field, c.from), to: show(c.field, c.to) };
  });
}

// A grid of nodes coloured by health with their accelerator use: the picture of
// GET /api/clusters/{cluster}/capacity read at a glance. Each node is a tile whose colour (and
// glyph and word: never colour alone) is its health, with one cell per GPU (or Neuron core)
// filled for each allocated one and a "used/total" caption; the workloads on it are listed in
// the tile, and a "GPU metrics" button when the caller passes `onMetrics`. Pure rendering: the
// caller reads the capacity and passes it in.

import { h } from '../lib/dom.js';

/** Health word → [tone, glyph, what it means]. The tones are the badge tones of styles.css. */
export const HEALTH = {
  healthy: ['ok', '✓', 'Ready and Schedulable: takes new work.'],
  checking: ['busy', '◔', 'Deep health checks running: takes no new work until they pass.'],
  cordoned: ['warn', '!', 'Cordoned (spec.unschedulable): takes no new work.'],
  provisioning: ['muted', '○', 'No Kubernetes node (yet): launching, updating or shutting down.'],
  not_ready: ['bad', '✕', 'The kubelet does not post Ready.'],
  pending_reboot: ['bad', '↻', 'Failed a health check: waits for a reboot (automatic with node recovery).'],
  pending_replacement: ['bad', '⇄', 'Failed a health check: waits for a replacement (automatic with node recovery).'],
  failed: ['bad', '✕', 'HyperPod reports the instance Failure.'],
};

/** The accelerator a tile shows: GPUs, else Neuron cores, else Neuron devices. */
export function accelerator(a) {
  const has = (c) => c && (c.total > 0 || c.allocated > 0);
  if (has(a.gpus)) return ['GPU', a.gpus];
  if (has(a.neuron_cores)) return ['Neuron core', a.neuron_cores];
  if (has(a.neuron_devices)) return ['Neuron device', a.neuron_devices];
  return [null, null];
}

/** One cell per accelerator, the allocated ones filled (capped at 64 cells: a bar beyond). */
function cells(count) {
  const total = Math.max(count.total, count.allocated);
  if (total > 64) {
    const pct = Math.round((100 * Math.min(count.allocated, count.total)) / Math.max(count.total, 1));
    return h('div', { class: 'accel-bar', role: 'presentation' }, h('span', { style: `width:${pct}%` }));
  }
  return h('div', { class: 'accel-cells', role: 'presentation' },
    Array.from({ length: total }, (_, i) => h('span', { class: i < count.allocated ? 'used' : 'idle' })));
}

/** A tile for one node; `onMetrics(name)` opens its GPU metrics (nodes with a Kubernetes Node and GPUs). */
function tile(n, onMetrics) {
  const [tone, glyph, meaning] = HEALTH[n.health] || ['muted', '?', n.health];
  const [kind, count] = accelerator(n.accelerators);
  const label = n.instance_id || n.name;
  const reasons = [n.hyperpod_status && `HyperPod: ${n.hyperpod_status}`, n.health_label && `label: ${n.health_label}`,
    n.deep_health_check && `deep health check: ${n.deep_health_check}`, n.fault_type && `fault: ${n.fault_type}`,
    n.fault_reason && `reason: ${n.fault_reason}`, ...n.taints.map((t) => `taint ${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`)]
    .filter(Boolean);
  return h('li', {
    class: `node-tile tone-${tone}`,
    dataset: {
      node: label, health: n.health, group: n.instance_group || '',
      allocated: count ? String(count.allocated) : '0', total: count ? String(count.total) : '0',
    },
    title: `${meaning}${reasons.length ? `\n${reasons.join('\n')}` : ''}`,
  },
  h('div', { class: 'tile-head' },
    h('span', { class: 'tile-glyph', 'aria-hidden': 'true' }, glyph),
    h('span', { class: 'tile-health' }, n.health.replace(/_/g, ' ')),
    h('span', { class: 'tile-type muted' }, n.instance_type || '')),
  h('div', { class: 'tile-id mono' }, label),
  count
    ? [cells(count), h('div', { class: 'tile-use' }, `${count.allocated}/${count.total} ${kind}${count.total === 1 ? '' : 's'} in use`)]
    : h('div', { class: 'tile-use muted' }, 'no accelerators'),
  reasons.length > 0 && h('div', { class: 'tile-why muted' }, reasons.join(' · ')),
  onMetrics && n.name && n.accelerators.gpus.total > 0 && h('button', {
    type: 'button', class: 'btn small tile-metrics', dataset: { node: n.name },
    'aria-label': `GPU metrics of node ${n.name}`, onclick: () => onMetrics(n.name),
  }, 'GPU metrics'),
  (n.workloads.length > 0 || n.other_pods > 0) && h('ul', { class: 'tile-workloads' },
    n.workloads.map((w) => h('li', { dataset: { workload: `${w.namespace}/${w.name}`, kind: w.kind } },
      `${w.name} `, h('span', { class: 'muted' }, `${w.kind}${w.gpus ? ` · ${w.gpus} GPU` : ''}`))),
    n.other_pods > 0 && h('li', { class: 'muted' }, `+${n.other_pods} other pods`)));
}

/** The legend: every health word that occurs, with its count, glyph and colour. */
export function legend(health) {
  return h('ul', { class: 'node-legend', 'aria-label': 'Nodes by health' },
    Object.entries(health).map(([word, n]) => {
      const [tone, glyph, meaning] = HEALTH[word] || ['muted', '?', word];
      return h('li', { class: `tone-${tone}`, dataset: { health: word }, title: meaning },
        h('span', { 'aria-hidden': 'true' }, `${glyph} `), `${n} ${word.replace(/_/g, ' ')}`);
    }));
}

/** The grid: one group of tiles per instance group (nodes without one last). */
export function nodeGrid(capacity, { onMetrics } = {}) {
  const byGroup = new Map();
  for (const n of capacity.node_list) {
    const g = n.instance_group || '';
    if (!byGroup.has(g)) byGroup.set(g, []);
    byGroup.get(g).push(n);
  }
  const groups = new Map(capacity.instance_groups.map((g) => [g.name, g]));
  return h('div', { class: 'node-grid', id: 'node-grid' },
    [...byGroup.entries()].map(([name, nodes]) => {
      const g = groups.get(name);
      const [kind, count] = g ? accelerator(g.accelerators) : [null, null];
      return h('section', { class: 'node-grid-group', dataset: { group: name } },
        h('h3', {}, name || 'Other nodes',
          g && h('span', { class: 'muted' }, ` · ${g.instance_type || 'mixed types'} · ${g.nodes} node${g.nodes === 1 ? '' : 's'}`),
          count && h('span', { class: 'group-use', dataset: { free: String(count.free), unavailable: String(count.unavailable) } },
            ` · ${count.allocated}/${count.total} ${kind}s in use, ${count.free} free${count.unavailable ? `, ${count.unavailable} unavailable` : ''}`)),
        h('ul', { class: 'node-tiles' }, nodes.map((n) => tile(n, onMetrics))));
    }));
}

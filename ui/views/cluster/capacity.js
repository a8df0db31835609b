// GPU capacity and node health on the cluster page: the totals (GPUs, or Neuron cores,
// allocated, free, unavailable; pods waiting for a node), a legend of nodes by health and the
// node grid (components/node-grid.js). Reads GET /api/clusters/{cluster}/capacity whenever the
// page refreshes; a read that fails says why in place and keeps the last picture. A node's
// "GPU metrics" button opens the plots of its GPUs under the grid (components/metric-plot.js),
// refreshed until closed or another node is chosen.

import { h, replace } from '../../lib/dom.js';
import * as api from '../../lib/api.js';
import { nodeGrid, legend, accelerator } from '../../components/node-grid.js';
import { metricsPanel } from '../../components/metric-plot.js';

export function capacitySection({ name }) {
  const summary = h('p', { class: 'capacity-summary', id: 'capacity-summary', role: 'status' }, 'Reading the capacity…');
  const legendSlot = h('div', {});
  const gridSlot = h('div', {});
  const errorSlot = h('div', {});
  const metricsSlot = h('div', { id: 'node-metrics-slot' });
  let open = null;

  function closeMetrics() {
    if (open) open.stop();
    open = null;
    replace(metricsSlot);
  }

  function showMetrics(node) {
    closeMetrics();
    open = metricsPanel(name, { node });
    replace(metricsSlot, h('section', { class: 'node-metrics', id: 'node-metrics', 'aria-labelledby': 'node-metrics-title', dataset: { node } },
      h('div', { class: 'section-head' }, h('h3', { id: 'node-metrics-title' }, `GPU metrics of node ${node}`),
        h('button', { type: 'button', class: 'btn small', id: 'close-node-metrics', onclick: closeMetrics }, 'Close')),
      open.el));
    open.start();
    metricsSlot.querySelector('h3').scrollIntoView?.({ block: 'nearest' });
  }
  const el = h('section', { class: 'card', 'aria-labelledby': 'capacity-title', id: 'capacity-card' },
    h('div', { class: 'section-head' }, h('h2', { id: 'capacity-title' }, 'GPU capacity and node health')),
    h('p', { class: 'help' }, 'Each tile is a node, coloured by its health (HyperPod’s status, the health agent’s labels and taints); ',
      'its cells are its GPUs, filled when a pod holds one.'),
    summary, legendSlot, gridSlot, metricsSlot, errorSlot);
  let reading = false;

  async function update() {
    if (reading) return;
    reading = true;
    try {
      const c = await api.get(`/api/clusters/${api.seg(name)}/capacity`);
      replace(errorSlot);
      const [kind, count] = accelerator(c.accelerators);
      replace(summary,
        h('strong', {}, `${c.nodes} node${c.nodes === 1 ? '' : 's'}`),
        count
          ? [' · ', h('span', { id: 'capacity-allocated' }, `${count.allocated}`), `/${count.total} ${kind}s allocated · `,
            h('span', { id: 'capacity-free' }, `${count.free}`), ' free · ',
            h('span', { id: 'capacity-unavailable' }, `${count.unavailable}`), ' unavailable']
          : ' · no accelerators',
        c.pending_pods > 0 && ` · ${c.pending_pods} pod${c.pending_pods === 1 ? '' : 's'} waiting for a node (${c.pending_gpus} GPUs)`);
      replace(legendSlot, legend(c.health));
      replace(gridSlot, c.node_list.length ? nodeGrid(c, { onMetrics: showMetrics }) : h('p', { class: 'muted' }, 'No nodes yet.'));
      if (c.hyperpod_error) replace(errorSlot, h('p', { class: 'notice warn' }, `HyperPod’s node list could not be read: ${c.hyperpod_error}`));
    } catch (err) {
      if (err.status === 401) return;
      replace(errorSlot, h('p', { class: 'notice warn', role: 'status' }, h('strong', {}, 'Capacity unavailable. '), err.message));
    } finally {
      reading = false;
    }
  }

  return { el, update, dispose: closeMetrics };
}

// One cluster: live EKS and HyperPod state, GPU capacity and node health (a grid of nodes
// coloured by health with their GPU use), task governance (teams, their quotas and usage,
// priority classes; edited with the server's diff first), instance groups (live counts; add, scale, delete),
// nodes (health; investigate with the node's detail and events, reboot, replace, delete), the
// HyperPod events, the Advanced features panel and the operations on it. Refreshes when an operation on the cluster changes (WebSocket), on request,
// and every second or so while groups or nodes are in flux. The sections keep their own DOM
// (editors, selections, progress panels) across refreshes.

import { h, replace, routeHref, timeEl, words, debounce, announce } from '../lib/dom.js';
import * as api from '../lib/api.js';
import { badge } from '../components/status-badge.js';
import { KIND_TITLES } from '../components/operation-progress.js';
import { deleteDialog } from '../components/cluster-delete.js';
import { groupsSection } from './cluster/groups.js';
import { nodesSection } from './cluster/nodes.js';
import { eventsSection } from './cluster/events.js';
import { capacitySection } from './cluster/capacity.js';
import { governanceSection } from './cluster/governance.js';
import { clusterTabs } from '../components/workload-page.js';
import { openDialog } from '../components/dialog.js';

/** How often the page re-reads the live state while something is changing. */
const FLUX_REFRESH_MS = 1200;

function state(s) {
  if (!s) return h('span', { class: 'muted' }, '—');
  return h('span', {}, badge(s.state), s.reason && h('span', { class: 'inline-error' }, ` ${s.reason}`));
}

function dl(pairs) {
  return h('dl', { class: 'props' }, pairs.filter(Boolean).map(([k, v]) => [
    h('dt', {}, k),
    h('dd', {}, v === null || v === undefined || v === '' ? h('span', { class: 'muted' }, '—') : v),
  ]));
}

/** Something is changing: a group off its target or not in service, a node not Running. */
function inFlux(c) {
  const groups = c.hyperpod ? c.hyperpod.instance_groups : [];
  return groups.some((g) => g.current_count !== g.target_count || !/inservice/i.test(g.status))
    || (c.nodes || []).some((n) => n.status !== 'Running');
}

export function clusterView({ app, params }) {
  const [name] = params;
  const speed = app.simSpeed();
  const badges = h('span', { class: 'title-badges' });
  const actions = h('div', { class: 'view-actions' });
  const head = h('div', { class: 'view-head' }, h('div', { class: 'title-line' }, h('h1', {}, name), badges), actions);
  const errorBox = h('div', { class: 'notice bad', role: 'alert', hidden: true });
  const body = h('div', { class: 'cluster-body', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Reading the cluster’s live state…'));
  const features = h('is-features-panel', { cluster: name, class: 'card', ...(speed ? { 'sim-speed': speed } : {}) });
  const opsSlot = h('div', {});
  const groups = groupsSection({ name, speed, reload: () => reload() });
  const nodes = nodesSection({ name, speed, reload: () => reload() });
  const events = eventsSection({ name });
  const capacity = capacitySection({ name });
  const governance = governanceSection({ name, speed, reload: () => reload() });
  const day2 = h('div', { class: 'day2', hidden: true }, capacity.el, governance.el, groups.el, nodes.el, events.el);
  let cluster = null;
  let ops = [];
  let fluxTimer = null;
  let disposed = false;

  async function load() {
    clearTimeout(fluxTimer);
    try {
      const [c] = await Promise.all([api.get(`/api/clusters/${api.seg(name)}`), loadOps()]);
      if (disposed) return;
      cluster = c;
      errorBox.hidden = true;
      render(cluster);
      groups.update(cluster, ops);
      nodes.update(cluster, ops);
      events.update(cluster);
      capacity.update();
      governance.update(cluster);
      day2.hidden = false;
      if (inFlux(cluster) && !document.hidden) fluxTimer = setTimeout(load, FLUX_REFRESH_MS);
    } catch (err) {
      if (err.status === 401) return;
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, err.status === 404 ? 'No such cluster. ' : `${err.title}. `), err.message,
        err.status === 404 ? [' ', h('a', { href: '#/clusters' }, 'Back to clusters')] : []);
      if (err.status === 404) {
        body.hidden = true;
        day2.hidden = true;
        features.hidden = true;
      }
    } finally {
      body.removeAttribute('aria-busy');
    }
  }

  async function loadOps() {
    try {
      ops = await api.get('/api/operations', { query: { target: `cluster/${name}`, limit: 50 } });
      replace(opsSlot, ops.length
        ? h('ul', { class: 'op-list', id: 'cluster-ops' }, ops.slice(0, 10).map((op) => h('li', { dataset: { operation: op.id, kind: op.kind, status: op.status } },
          h('a', { href: routeHref('operations', op.id) }, KIND_TITLES[op.kind] || words(op.kind)), ' ',
          badge(op.status), ' ', h('span', { class: 'muted' }, `${op.actor.face}/${op.actor.principal} · `), timeEl(op.created_at))))
        : h('p', { class: 'muted' }, 'No operations.'));
    } catch { /* shown elsewhere */ }
  }

  function render(c) {
    replace(badges, badge(c.status),
      c.active && h('span', { class: 'active-marker' }, h('span', { 'aria-hidden': 'true' }, '★ '), 'Active'));
    const hadFocus = actions.contains(document.activeElement) ? document.activeElement.textContent : null;
    replace(actions,
      h('button', { type: 'button', class: 'btn', onclick: refresh, id: 'refresh-cluster' }, 'Refresh'),
      !c.active && h('button', { type: 'button', class: 'btn', onclick: makeActive }, 'Make active'),
      h('button', { type: 'button', class: 'btn danger-outline', onclick: () => deleteDialog(app, c) }, 'Delete…'));
    if (hadFocus) ([...actions.querySelectorAll('button')].find((b) => b.textContent === hadFocus) || actions.querySelector('button')).focus();
    const eks = c.eks;
    const hp = c.hyperpod;
    const groups = hp ? hp.instance_groups : [];
    const nodes = c.nodes || [];
    replace(body,
      c.live_error && h('div', { class: 'notice warn', role: 'status' }, h('strong', {}, 'Live state unavailable. '), c.live_error),
      h('div', { class: 'grid-2 cards' },
        h('section', { class: 'card', 'aria-labelledby': 'eks-title' },
          h('h2', { id: 'eks-title' }, 'EKS control plane'),
          dl([
            ['Region', c.region],
            ['EKS cluster', h('span', { class: 'mono' }, c.eks_cluster)],
            ['State', eks ? state(eks.state) : h('span', { class: 'muted' }, 'not found')],
            ['Kubernetes', eks?.version || c.kubernetes_version],
            ['Endpoint', eks?.endpoint && h('span', { class: 'mono break' }, eks.endpoint)],
            ['VPC', (eks?.vpc_id || c.vpc_id) && h('span', { class: 'mono' }, eks?.vpc_id || c.vpc_id)],
            ['Subnets', eks ? String(eks.subnet_ids.length) : null],
            ['Source', words(c.source)],
            ['Shared bucket', c.bucket && h('span', { class: 'mono' }, c.bucket)],
            ['Created', timeEl(c.created_at)],
          ])),
        h('section', { class: 'card', 'aria-labelledby': 'hp-title' },
          h('h2', { id: 'hp-title' }, 'HyperPod'),
          c.hyperpod_cluster
            ? dl([
              ['HyperPod cluster', h('span', { class: 'mono' }, c.hyperpod_cluster)],
              ['State', hp ? state(hp.state) : h('span', { class: 'muted' }, 'not created yet')],
              ['Node recovery', hp ? words(hp.node_recovery) : null],
              ['Instance groups', hp ? String(groups.length) : null],
              ['Nodes', hp ? String(nodes.length) : null],
            ])
            : [h('p', { class: 'muted' }, 'No HyperPod cluster on this EKS cluster (EKS-only).'),
              h('a', { class: 'btn', id: 'add-hyperpod', href: `#/clusters/${encodeURIComponent(name)}/hyperpod` }, 'Add HyperPod…')],
          c.hyperpod_cluster && h('div', { class: 'actions' },
            h('button', { type: 'button', class: 'btn danger-outline', id: 'remove-hyperpod', onclick: () => removeHyperPodDialog(app, c) }, 'Remove HyperPod…')))));
  }

  async function makeActive() {
    try {
      await api.put('/api/active-cluster', { name });
      announce(`${name} is now the active cluster`);
      await app.refreshContext();
      await load();
    } catch (err) {
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, `${err.title}. `), err.message);
    }
  }

  async function refresh() {
    await load();
    announce('Cluster state refreshed');
  }

  const reload = debounce(load, 200);
  const stream = new api.OperationStream({
    target: `cluster/${name}`,
    onOperation: (op) => {
      reload();
      // A feature change made elsewhere (CLI, agent): show the new state unless the user is editing.
      if (op.kind === 'set_features' && op.status === 'succeeded' && features.refreshIfIdle) features.refreshIfIdle(op);
    },
  }).start();
  load();

  const el = h('section', { class: 'view' },
    head, clusterTabs(name, 'overview'), errorBox, body, day2, features,
    h('section', { class: 'card', 'aria-labelledby': 'cl-ops-title' },
      h('h2', { id: 'cl-ops-title' }, 'Operations on this cluster'), opsSlot));
  return {
    el,
    title: name,
    dispose() {
      disposed = true;
      stream.stop();
      reload.cancel();
      clearTimeout(fluxTimer);
      capacity.dispose();
      governance.dispose();
    },
  };
}

/** Remove the cluster's HyperPod cluster (typed confirmation, the plan first); EKS stays. */
async function removeHyperPodDialog(app, cluster) {
  const key = api.newIdempotencyKey();
  const planSlot = h('div', { class: 'plan-mini', 'aria-live': 'polite' }, h('p', { class: 'muted' }, 'Reading the plan…'));
  api.del(`/api/clusters/${api.seg(cluster.name)}/hyperpod`, { query: { dry_run: true } })
    .then(({ data }) => replace(planSlot, h('p', {}, 'These steps will run:'),
      h('ol', { class: 'plan-steps compact' }, data.steps.map((s) => h('li', {}, s.title)))))
    .catch((err) => replace(planSlot, h('p', { class: 'inline-error' }, err.message)));
  const op = await openDialog({
    title: `Remove HyperPod from ${cluster.name}?`,
    body: [
      h('p', {}, 'This deletes HyperPod cluster ', h('strong', { class: 'mono' }, cluster.hyperpod_cluster),
        ' (its nodes and their local data) and what InstantStart made for it. The EKS cluster, its add-ons and the bucket stay; the cluster is EKS-only again.'),
      planSlot,
    ],
    confirmLabel: 'Remove HyperPod',
    danger: true,
    typeToConfirm: cluster.name,
    onConfirm: async () => {
      const { data } = await api.del(`/api/clusters/${api.seg(cluster.name)}/hyperpod`, { idempotencyKey: key });
      return data.operation;
    },
  });
  if (op) app.navigate(`#/operations/${encodeURIComponent(op.id)}`);
}

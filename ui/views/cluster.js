// One cluster: live EKS and HyperPod state, instance groups (current/target counts), nodes, the
// Advanced features panel and the operations on it. Refreshes when an operation on the
// cluster changes (WebSocket) or on request.

import { h, replace, routeHref, timeEl, words, debounce, announce } from '../dom.js';
import * as api from '../api.js';
import { badge } from '../components/status-badge.js';
import { KIND_TITLES } from '../components/operation-progress.js';
import { deleteDialog } from './clusters.js';

const NODE_LIMIT = 200;

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

function table(id, caption, head, rows) {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'table', id },
    h('caption', { class: 'visually-hidden' }, caption),
    h('thead', {}, h('tr', {}, head.map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, rows)));
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
  let cluster = null;

  async function load() {
    try {
      cluster = await api.get(`/api/clusters/${api.seg(name)}`);
      errorBox.hidden = true;
      render(cluster);
    } catch (err) {
      if (err.status === 401) return;
      errorBox.hidden = false;
      replace(errorBox, h('strong', {}, err.status === 404 ? 'No such cluster. ' : `${err.title}. `), err.message,
        err.status === 404 ? [' ', h('a', { href: '#/clusters' }, 'Back to clusters')] : []);
      if (err.status === 404) {
        body.hidden = true;
        features.hidden = true;
      }
    } finally {
      body.removeAttribute('aria-busy');
    }
    loadOps();
  }

  async function loadOps() {
    try {
      const ops = await api.get('/api/operations', { query: { target: `cluster/${name}`, limit: 10 } });
      replace(opsSlot, ops.length
        ? h('ul', { class: 'op-list' }, ops.map((op) => h('li', {},
          h('a', { href: routeHref('operations', op.id) }, KIND_TITLES[op.kind] || words(op.kind)), ' ',
          badge(op.status), ' ', h('span', { class: 'muted' }, `${op.actor.face}/${op.actor.principal} · `), timeEl(op.created_at))))
        : h('p', { class: 'muted' }, 'No operations.'));
    } catch { /* shown elsewhere */ }
  }

  function render(c) {
    const requested = new Map((c.request?.hyperpod?.instance_groups || []).map((g) => [g.name, g]));
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
            : h('p', { class: 'muted' }, 'No HyperPod cluster on this EKS cluster.'))),
      h('section', { class: 'card', 'aria-labelledby': 'groups-title' },
        h('h2', { id: 'groups-title' }, 'Instance groups'),
        groups.length
          ? table('groups-table', 'Instance groups', ['Group', 'Instance type', 'Nodes (current / target)', 'Status', 'Capacity', 'Interfaces', 'Availability Zone'],
            groups.map((g) => {
              const r = requested.get(g.name);
              return h('tr', { dataset: { group: g.name } },
                h('th', { scope: 'row' }, g.name),
                h('td', { class: 'mono' }, g.instance_type),
                h('td', { class: 'nowrap' },
                  h('meter', { min: 0, max: Math.max(1, g.target_count), value: g.current_count, 'aria-hidden': 'true' }), ' ',
                  h('span', { class: 'counts' }, `${g.current_count} / ${g.target_count}`)),
                h('td', {}, badge(g.status)),
                h('td', {}, r ? words(r.capacity.type) : h('span', { class: 'muted' }, '—')),
                h('td', {}, r ? words(r.interface_mode) : h('span', { class: 'muted' }, '—')),
                h('td', {}, r ? r.availability_zone : h('span', { class: 'muted' }, '—')));
            }))
          : h('p', { class: 'muted' }, hp ? 'No instance groups.' : 'Instance groups appear when the HyperPod cluster exists.')),
      h('section', { class: 'card', 'aria-labelledby': 'nodes-title' },
        h('h2', { id: 'nodes-title' }, 'Nodes'),
        nodes.length
          ? [table('nodes-table', 'Nodes', ['Instance', 'Group', 'Instance type', 'Availability Zone', 'Status'],
            nodes.slice(0, NODE_LIMIT).map((n) => h('tr', { dataset: { node: n.instance_id } },
              h('th', { scope: 'row', class: 'mono' }, n.instance_id),
              h('td', {}, n.instance_group),
              h('td', { class: 'mono' }, n.instance_type),
              h('td', {}, n.availability_zone),
              h('td', {}, badge(n.status, n.status === 'Running' ? 'ok' : undefined))))),
          nodes.length > NODE_LIMIT && h('p', { class: 'muted' }, `Showing ${NODE_LIMIT} of ${nodes.length} nodes.`)]
          : h('p', { class: 'muted' }, 'No nodes.')));
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
  const stream = new api.OperationStream({ target: `cluster/${name}`, onOperation: reload }).start();
  load();

  const el = h('section', { class: 'view' },
    head, errorBox, body, features,
    h('section', { class: 'card', 'aria-labelledby': 'cl-ops-title' },
      h('h2', { id: 'cl-ops-title' }, 'Operations on this cluster'), opsSlot));
  return { el, title: name, dispose() { stream.stop(); reload.cancel(); } };
}
